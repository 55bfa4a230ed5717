// kafkajs producing with acks=all: an uncompressed and a gzip batch to each of three
// partitions (keys, headers including binary and repeated ones, a null value); then, from an
// idempotent producer, keyed records left to its partitioner, records with explicit timestamps
// and one sendBatch across two topics; then one consumer group member reads every partition from
// the beginning.
// Prints what was sent (in send order), the send results and what was read.
'use strict'
const { CompressionTypes } = require('kafkajs')
const { kafka, until, b64, encodeMessage, main } = require('./common')

main(async ({ bootstrap, topic, other }) => {
  const k = kafka(bootstrap)
  const admin = k.admin()
  await admin.connect()
  await admin.createTopics({ topics: [{ topic, numPartitions: 3 }, { topic: other, numPartitions: 1 }] })
  await admin.disconnect()

  const producer = k.producer({ allowAutoTopicCreation: false })
  await producer.connect()
  const sent = [] // {topic, partition (null: the partitioner's), key, value, headers, timestamp}
  const results = [] // {codec, topicName, partition, errorCode, baseOffset}
  const before = Date.now()
  for (const [codec, compression] of [['none', CompressionTypes.None], ['gzip', CompressionTypes.GZIP]]) {
    const messages = []
    for (let partition = 0; partition < 3; partition++) {
      for (let i = 0; i < 20; i++) {
        const m = {
          partition,
          key: `${codec}-k${i % 4}`,
          value: i === 5 ? null : `${codec}-${partition}-${i} ` + 'x'.repeat(i * 7),
          headers: { codec, i: String(i), empty: '', bin: Buffer.from([0, 255, i]), twice: ['a', 'b'] }
        }
        messages.push(m)
        const value = m.value === null ? null : b64(Buffer.from(m.value))
        sent.push({ topic, partition, key: b64(Buffer.from(m.key)), value, timestamp: null, codec })
      }
    }
    for (const r of await producer.send({ topic, acks: -1, compression, messages })) results.push({ codec, ...r })
  }
  await producer.disconnect()
  // The rest from an idempotent producer (one request in flight, as kafkajs requires).
  const idempotent = k.producer({ allowAutoTopicCreation: false, idempotent: true, maxInFlightRequests: 1 })
  await idempotent.connect()
  // Keyed records, no partition: the partitioner (murmur2, as Java's) picks it.
  const keyed = []
  for (let i = 0; i < 60; i++) keyed.push({ key: `user-${i % 6}`, value: `keyed-${i}` })
  const keyedResults = await idempotent.send({ topic, acks: -1, messages: keyed })
  // Explicit CreateTime timestamps, one at a time.
  const stamps = [before - 60000, before - 1, before + 5]
  for (let i = 0; i < stamps.length; i++) {
    const messages = [{ partition: 0, value: `ts-${i}`, timestamp: String(stamps[i]) }]
    const [r] = await idempotent.send({ topic, acks: -1, messages })
    results.push({ codec: 'ts', ...r })
    sent.push({ topic, partition: 0, key: null, value: b64(Buffer.from(`ts-${i}`)), timestamp: stamps[i], codec: 'ts' })
  }
  // One request, two topics, gzip.
  const batchResults = await idempotent.sendBatch({
    acks: -1,
    compression: CompressionTypes.GZIP,
    topicMessages: [
      { topic, messages: [{ partition: 1, key: 'batch', value: 'batch-a' }] },
      { topic: other, messages: [{ partition: 0, key: 'batch', value: 'batch-b' }, { partition: 0, value: 'batch-c' }] }
    ]
  })
  await idempotent.disconnect()
  const after = Date.now()

  const expected = sent.length + keyed.length + 1 + 2
  const read = []
  const consumer = k.consumer({
    groupId: 'kafkajs-reader', maxWaitTimeInMs: 200, heartbeatInterval: 500, sessionTimeout: 10000
  })
  await consumer.connect()
  await consumer.subscribe({ topics: [topic, other], fromBeginning: true })
  await consumer.run({
    eachMessage: async ({ topic, partition, message }) => { read.push(encodeMessage(topic, partition, message)) }
  })
  await until(() => read.length >= expected, `${expected} records`)
  await consumer.disconnect()
  return { before, after, sent, results, keyed, keyedResults, batchResults, read }
})
