// kafkajs consumer group members. Mode "members": two members of one group split a
// 4-partition topic; once the assignment has settled, 30 records per partition are produced and
// read, each member committing what it read; then the second member leaves and, once the first
// owns every partition, 10 more per partition are read and committed. Mode "resume" (a new
// process: the consumer restarted): 5 more per partition are produced while the group is empty,
// then a new member reads from the group's committed offsets and commits.
// Prints the assignments seen, what each member read per phase, and the committed offsets.
'use strict'
const { kafka, until, encodeMessage, main } = require('./common')

const PARTITIONS = 4

function member (k, groupId, index, reads) {
  const consumer = k.consumer({
    groupId,
    sessionTimeout: 10000,
    rebalanceTimeout: 20000,
    heartbeatInterval: 500,
    maxWaitTimeInMs: 200
  })
  const m = { consumer, index, assignment: null, joins: 0 }
  consumer.on(consumer.events.GROUP_JOIN, e => {
    const partitions = Object.values(e.payload.memberAssignment)[0] || []
    m.assignment = partitions.slice().sort((a, b) => a - b)
    m.joins++
  })
  m.start = async topic => {
    await consumer.connect()
    await consumer.subscribe({ topics: [topic], fromBeginning: true })
    await consumer.run({
      autoCommit: false,
      eachMessage: async ({ topic, partition, message }) => {
        reads.push({ member: index, ...encodeMessage(topic, partition, message) })
      }
    })
  }
  // Commits, per partition, the offset after the last record this member read.
  m.commit = async (topic, records) => {
    const last = {}
    for (const r of records) if (r.member === index) last[r.partition] = r.offset + 1
    const offsets = Object.entries(last)
      .map(([partition, offset]) => ({ topic, partition: Number(partition), offset: String(offset) }))
    if (offsets.length) await consumer.commitOffsets(offsets)
  }
  return m
}

async function produce (k, topic, tag, perPartition) {
  const producer = k.producer({ allowAutoTopicCreation: false })
  await producer.connect()
  const messages = []
  for (let partition = 0; partition < PARTITIONS; partition++) {
    for (let i = 0; i < perPartition; i++) {
      messages.push({ partition, key: `k${i}`, value: `${tag}-${partition}-${i}`, headers: { tag } })
    }
  }
  await producer.send({ topic, acks: -1, messages })
  await producer.disconnect()
}

async function committed (admin, groupId, topic) {
  const [t] = await admin.fetchOffsets({ groupId, topics: [topic] })
  return Object.fromEntries(t.partitions.map(p => [p.partition, Number(p.offset)]))
}

const covers = ms => {
  const all = ms.flatMap(m => m.assignment || []).sort((a, b) => a - b)
  return all.length === PARTITIONS && all.every((p, i) => p === i) && ms.every(m => (m.assignment || []).length > 0)
}

main(async ({ bootstrap, topic, groupId, mode }) => {
  const k = kafka(bootstrap)
  const admin = k.admin()
  await admin.connect()
  const out = { mode }
  if (mode === 'members') {
    await admin.createTopics({ topics: [{ topic, numPartitions: PARTITIONS }] })
    const reads = []
    const m1 = member(k, groupId, 1, reads)
    const m2 = member(k, groupId, 2, reads)
    await m1.start(topic)
    await until(() => covers([m1]), 'the first member to own every partition')
    await m2.start(topic)
    await until(() => covers([m1, m2]), 'the two members to split the partitions')
    out.split = [m1.assignment, m2.assignment]
    const joins = m1.joins + m2.joins
    await produce(k, topic, 'one', 30)
    await until(() => reads.length >= 30 * PARTITIONS, 'phase one records')
    out.one = reads.splice(0)
    out.splitAfter = [m1.assignment, m2.assignment]
    out.rejoinsDuringOne = m1.joins + m2.joins - joins
    await m1.commit(topic, out.one)
    await m2.commit(topic, out.one)
    out.committedOne = await committed(admin, groupId, topic)
    // The second member leaves (LeaveGroup); the first takes every partition.
    await m2.consumer.disconnect()
    await until(() => covers([m1]), 'the remaining member to own every partition')
    await produce(k, topic, 'two', 10)
    await until(() => reads.length >= 10 * PARTITIONS, 'phase two records')
    out.two = reads.splice(0)
    await m1.commit(topic, out.two)
    await m1.consumer.disconnect()
    out.committedTwo = await committed(admin, groupId, topic)
  } else {
    out.committedBefore = await committed(admin, groupId, topic)
    await produce(k, topic, 'three', 5)
    const reads = []
    const m3 = member(k, groupId, 3, reads)
    await m3.start(topic)
    await until(() => reads.length >= 5 * PARTITIONS, 'records after the restart')
    out.three = reads.splice(0)
    out.assignment = m3.assignment
    await m3.commit(topic, out.three)
    await m3.consumer.disconnect()
    out.committedAfter = await committed(admin, groupId, topic)
  }
  await admin.disconnect()
  return out
})
