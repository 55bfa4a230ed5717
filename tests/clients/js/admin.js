// kafkajs's admin client, step by step: topics (create with configs, again, with a bad config,
// validate only; list; metadata; cluster), configs (describe, alter, describe again),
// partitions (grow, shrink refused), offsets by time, a group (list and describe while a member
// runs, then empty; committed offsets; set and reset by the admin; delete), DeleteRecords and
// DeleteTopics. Prints each step's answer (or error) for test_kafkajs.py to check.
'use strict'
const { ConfigResourceTypes, AssignerProtocol } = require('kafkajs')
const { kafka, until, encodeError, main } = require('./common')

main(async ({ bootstrap, topic }) => {
  const k = kafka(bootstrap, 'kafkajs-admin')
  const admin = k.admin()
  await admin.connect()
  const out = {}
  const attempt = async (name, fn) => {
    const t = Date.now()
    try {
      out[name] = { ok: await fn() }
    } catch (e) {
      out[name] = { error: encodeError(e) }
    }
    out[name].ms = Date.now() - t
  }
  const offsets = async () => (await admin.fetchTopicOffsets(topic))
    .map(p => ({ partition: p.partition, low: Number(p.low), high: Number(p.high) }))
    .sort((a, b) => a.partition - b.partition)
  const configs = async names => {
    const resources = [{ type: ConfigResourceTypes.TOPIC, name: topic, configNames: names }]
    const r = await admin.describeConfigs({ resources, includeSynonyms: false })
    return r.resources.map(res => ({
      errorCode: res.errorCode,
      entries: Object.fromEntries(res.configEntries.map(e =>
        [e.configName, [e.configValue, e.configSource, e.isDefault, e.readOnly]]))
    }))
  }

  // Topics.
  const configEntries = [{ name: 'retention.ms', value: '3600000' }, { name: 'max.message.bytes', value: '200000' }]
  await attempt('create', () => admin.createTopics({ topics: [{ topic, numPartitions: 2, configEntries }] }))
  await attempt('createAgain', () => admin.createTopics({ topics: [{ topic, numPartitions: 2 }] }))
  await attempt('createBadConfig', () => admin.createTopics({
    topics: [{ topic: `${topic}-bad`, configEntries: [{ name: 'retention.ms', value: 'soon' }] }]
  }))
  await attempt('createValidateOnly', () => admin.createTopics({
    topics: [{ topic: `${topic}-validate` }], validateOnly: true, waitForLeaders: false
  }))
  await attempt('listTopics', () => admin.listTopics())
  await attempt('metadata', () => admin.fetchTopicMetadata({ topics: [topic] }))
  await attempt('cluster', () => admin.describeCluster())

  // Configs.
  await attempt('configs', () => configs(['retention.ms', 'max.message.bytes', 'cleanup.policy']))
  const retention = [{ name: 'retention.ms', value: '7200000' }]
  await attempt('alter', () => admin.alterConfigs({
    resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configEntries: retention }]
  }))
  await attempt('configsAfter', () => configs(['retention.ms', 'max.message.bytes']))

  // Partitions: 2 -> 4, then 3 (not an increase).
  await attempt('grow', () => admin.createPartitions({ topicPartitions: [{ topic, count: 4 }] }))
  await attempt('shrink', () => admin.createPartitions({ topicPartitions: [{ topic, count: 3 }] }))
  await attempt('metadataAfter', () => admin.fetchTopicMetadata({ topics: [topic] }))

  // Ten records a partition, timestamps 1000 ms apart from a fixed start.
  const start = Date.now() - 600000
  const producer = k.producer({ allowAutoTopicCreation: false })
  await producer.connect()
  const messages = []
  for (let partition = 0; partition < 4; partition++) {
    for (let i = 0; i < 10; i++) {
      messages.push({ partition, value: `${partition}-${i}`, timestamp: String(start + i * 1000) })
    }
  }
  await producer.send({ topic, acks: -1, messages })
  await producer.disconnect()
  await attempt('offsets', offsets)
  await attempt('byTimestamp', async () => (await admin.fetchTopicOffsetsByTimestamp(topic, start + 3500))
    .map(p => ({ partition: p.partition, offset: Number(p.offset) })).sort((a, b) => a.partition - b.partition))

  // A group: one member reads everything and commits.
  const groupId = `${topic}-group`
  const consumer = k.consumer({ groupId, maxWaitTimeInMs: 200, heartbeatInterval: 500, sessionTimeout: 10000 })
  await consumer.connect()
  await consumer.subscribe({ topics: [topic], fromBeginning: true })
  let read = 0
  await consumer.run({ eachMessage: async () => { read++ } })
  await until(() => read >= 40, '40 records read by the group')
  await until(async () => {
    const [t] = await admin.fetchOffsets({ groupId, topics: [topic] })
    return t.partitions.every(p => Number(p.offset) === 10)
  }, 'the group to commit offset 10 everywhere')
  await attempt('listGroups', () => admin.listGroups())
  await attempt('describeGroup', async () => {
    const { groups } = await admin.describeGroups([groupId])
    return groups.map(g => ({
      ...g,
      members: g.members.map(m => ({
        memberId: m.memberId,
        clientId: m.clientId,
        clientHost: m.clientHost,
        assignment: AssignerProtocol.MemberAssignment.decode(m.memberAssignment).assignment
      }))
    }))
  })
  await attempt('deleteNonEmptyGroup', () => admin.deleteGroups([groupId]))
  await consumer.disconnect()
  await attempt('describeEmptyGroup', async () =>
    (await admin.describeGroups([groupId])).groups.map(g => ({ state: g.state, members: g.members.length })))
  await attempt('fetchOffsets', () => admin.fetchOffsets({ groupId, topics: [topic] }))
  await attempt('fetchOffsetsAllTopics', () => admin.fetchOffsets({ groupId }))
  // The admin moves the empty group's offsets (kafkajs joins the group with a paused member to
  // commit them; that takes its 5 s idle wait, so only once).
  await attempt('setOffsets', () => admin.setOffsets({
    groupId, topic, partitions: [{ partition: 0, offset: '3' }, { partition: 3, offset: '7' }]
  }))
  await attempt('offsetsAfterSet', () => admin.fetchOffsets({ groupId, topics: [topic] }))

  // DeleteRecords: partition 1 below offset 6, partition 2 up to the high watermark (-1).
  await attempt('deleteRecords', () => admin.deleteTopicRecords({
    topic, partitions: [{ partition: 1, offset: '6' }, { partition: 2, offset: '-1' }]
  }))
  await attempt('offsetsAfterDelete', offsets)
  await attempt('deleteRecordsPastEnd', () =>
    admin.deleteTopicRecords({ topic, partitions: [{ partition: 0, offset: '11' }] }))

  // Deleting: the group, then the topic.
  await attempt('deleteGroup', () => admin.deleteGroups([groupId]))
  await attempt('listGroupsAfter', () => admin.listGroups())
  await attempt('deleteTopic', () => admin.deleteTopics({ topics: [topic] }))
  await attempt('listTopicsAfter', () => admin.listTopics())
  await admin.disconnect()
  return out
})
