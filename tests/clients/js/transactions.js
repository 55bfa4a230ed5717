// kafkajs transactions (its own protocol choices: InitProducerId, AddPartitionsToTxn,
// AddOffsetsToTxn, TxnOffsetCommit, EndTxn): one committed transaction with records on two
// partitions and the group's offsets (sendOffsets), one aborted; then a read_committed and a
// read_uncommitted consumer read the topic from the start, and the group's committed offsets are
// fetched. Prints the values each read and the offsets.
'use strict'
const { kafka, until, main } = require('./common')

async function readAll (k, topic, groupId, readUncommitted, expected) {
  const consumer = k.consumer({ groupId, readUncommitted, maxWaitTimeInMs: 200 })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  const values = []
  await consumer.run({ autoCommit: false, eachMessage: async ({ message }) => { values.push(message.value.toString()) } })
  await until(() => values.length >= expected, `${expected} records (${groupId})`)
  // Anything more that was coming has had its chance.
  await new Promise(resolve => setTimeout(resolve, 1000))
  await consumer.disconnect()
  return values
}

main(async ({ bootstrap, topic }) => {
  const k = kafka(bootstrap)
  const admin = k.admin()
  await admin.connect()
  await admin.createTopics({ topics: [{ topic, numPartitions: 2 }] })
  const producer = k.producer({ transactionalId: 'js-txn', maxInFlightRequests: 1, idempotent: true })
  await producer.connect()
  const committed = await producer.transaction()
  await committed.send({ topic, messages: [0, 1, 2, 3].map(i => ({ partition: i % 2, value: `c${i}` })) })
  await committed.sendOffsets({ consumerGroupId: 'js-txn-group', topics: [{ topic, partitions: [{ partition: 0, offset: '2' }] }] })
  await committed.commit()
  const aborted = await producer.transaction()
  await aborted.send({ topic, messages: [0, 1].map(i => ({ partition: i % 2, value: `a${i}` })) })
  await aborted.abort()
  await producer.disconnect()
  const readCommitted = await readAll(k, topic, 'js-rc', false, 4)
  const readUncommitted = await readAll(k, topic, 'js-ru', true, 6)
  const offsets = await admin.fetchOffsets({ groupId: 'js-txn-group', topics: [topic] })
  await admin.disconnect()
  return { readCommitted, readUncommitted, offsets: offsets[0].partitions.map(p => [p.partition, Number(p.offset)]) }
})
