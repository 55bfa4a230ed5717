"""Clients pinned to a version table against the real binary: each client told which Kafka it
talks to must find that Kafka here.

- kafka-python with `api_version=(3, 9)` and `(4, 1)` (a common setting: it skips choosing
  versions from the broker's table when the pin is lower than the version it infers, and then
  sends the pinned release's versions unchecked, FindCoordinator v6 among them), and without a
  pin: admin calls, an idempotent producer, a consumer group, and a transaction that commits
  offsets for a group, then one that aborts, read back under read_committed.
- librdkafka with `api.version.request=false`, which uses its built-in table for
  `broker.version.fallback` (0.9.0: Metadata v0, Produce v1, the v0 group protocol; 0.8.2: no
  group membership), as operators set it for old brokers; what the old release cannot do
  (idempotence) fails as it would against that release.

The expected behaviour is Kafka's: a Kafka 4.1 broker answers each of these versions."""
import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KTopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic
from kafka.structs import OffsetAndMetadata

from test_clients import TIMEOUT, create
from test_transactions import read_to_end

MS = TIMEOUT * 1000


@pytest.mark.parametrize("pin", [(3, 9), (4, 1), None], ids=["3.9", "4.1", "auto"])
def test_kafka_python_pinned(broker, pin):
    """kafka-python pinned to Kafka 3.9's or 4.1's table, or choosing from the broker's:
    CreateTopics, DescribeConfigs, DescribeGroups through FindCoordinator's batched keys; an
    idempotent producer; a consumer group that commits and resumes; a transaction that
    commits its records and the group's offsets (AddOffsetsToTxn, TxnOffsetCommit), then one
    that aborts; read_committed sees exactly the committed records."""
    conf = {"bootstrap_servers": broker.bootstrap, "request_timeout_ms": MS}
    if pin is not None:
        conf["api_version"] = pin
    admin = KafkaAdminClient(**conf)
    try:
        admin.create_topics([NewTopic("pinned", 2, 1), NewTopic("pinned-out", 2, 1)])
        admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "pinned")])
    finally:
        admin.close()

    producer = KafkaProducer(acks="all", enable_idempotence=True, **conf)
    for i in range(20):
        producer.send("pinned", key=b"k%d" % (i % 4), value=b"v%d" % i, partition=i % 2)
    producer.flush(TIMEOUT)
    producer.close()

    consumer = KafkaConsumer("pinned", group_id="pinned-group", auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=MS, **conf)
    got = []
    deadline = time.time() + TIMEOUT
    while len(got) < 20 and time.time() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            got += [r.value for r in records]
    assert sorted(got) == sorted(b"v%d" % i for i in range(20)), got
    admin = KafkaAdminClient(**conf)
    try:
        group = admin.describe_groups(["pinned-group"])["pinned-group"]
        assert group["group_state"] == "Stable" and len(group["members"]) == 1, group
    finally:
        admin.close()

    # A transaction reading "pinned" and writing "pinned-out", committing the group's offsets.
    txn = KafkaProducer(transactional_id="pinned-txn", **conf)
    txn.init_transactions()
    txn.begin_transaction()
    for i in range(6):
        txn.send("pinned-out", value=b"committed-%d" % i, partition=i % 2)
    # Offsets the consumer never reached by itself, so only the transaction can have set them.
    offsets = {KTopicPartition("pinned", 0): OffsetAndMetadata(7, "", -1),
               KTopicPartition("pinned", 1): OffsetAndMetadata(8, "", -1)}
    txn.send_offsets_to_transaction(offsets, consumer.group_metadata())
    txn.commit_transaction()
    txn.begin_transaction()
    for i in range(4):
        txn.send("pinned-out", value=b"aborted-%d" % i, partition=i % 2)
    txn.flush()
    txn.abort_transaction()
    txn.close()
    consumer.close()

    seen = read_to_end(broker.bootstrap, "pinned-out", "read_committed", partitions=(0, 1))
    values = sorted(v for part in seen.values() for _, v in part)
    assert values == sorted(b"committed-%d" % i for i in range(6)), values
    c = KafkaConsumer(group_id="pinned-group", enable_auto_commit=False, **conf)
    try:
        committed = {p: c.committed(KTopicPartition("pinned", p)) for p in (0, 1)}
    finally:
        c.close()
    assert committed == {0: 7, 1: 8}, committed


def test_librdkafka_fallback_0_9(broker):
    """librdkafka without ApiVersions, on its Kafka 0.9.0 table: Metadata v0, Produce v1
    (message sets, no headers), the v0 group protocol (FindCoordinator v0, JoinGroup v0,
    SyncGroup v0, Heartbeat v0, OffsetCommit v2, OffsetFetch v1) and Fetch v1. Records round
    trip, a group commits and a new member resumes from the commit; idempotence, which 0.9.0
    lacks, fails at once (_UNSUPPORTED_FEATURE), as against that release."""
    create(broker.bootstrap, "old-table", partitions=2)
    old = {"bootstrap.servers": broker.bootstrap, "api.version.request": False, "broker.version.fallback": "0.9.0"}
    p = Producer({**old, "linger.ms": 5})
    for i in range(10):
        p.produce("old-table", key=b"k", value=b"old-%d" % i, partition=i % 2)
    assert p.flush(TIMEOUT) == 0
    p.flush(TIMEOUT)

    def read(n):
        c = Consumer({**old, "group.id": "old-group", "auto.offset.reset": "earliest", "enable.auto.commit": False})
        c.subscribe(["old-table"])
        out, deadline = [], time.time() + TIMEOUT
        while len(out) < n and time.time() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                out.append(m.value())
        return c, out

    c, first = read(10)
    assert sorted(first) == sorted(b"old-%d" % i for i in range(10)), first
    c.commit(asynchronous=False)
    c.close()
    p = Producer({**old, "linger.ms": 5})
    for i in range(10, 14):
        p.produce("old-table", value=b"old-%d" % i, partition=i % 2)
    assert p.flush(TIMEOUT) == 0
    c, rest = read(4)
    c.close()
    assert sorted(rest) == sorted(b"old-%d" % i for i in range(10, 14)), rest

    errors = []
    idem = Producer({**old, "enable.idempotence": True, "error_cb": errors.append})
    try:
        idem.produce("old-table", value=b"never")
        idem.flush(5)
    except KafkaException as e:
        errors.append(e.args[0])
    assert any(e.code() == KafkaError._UNSUPPORTED_FEATURE and e.fatal() for e in errors), errors


def test_librdkafka_fallback_0_8_2_assign_and_commit(broker):
    """librdkafka on its Kafka 0.8.2 table (no JoinGroup: group membership is unavailable, as
    against that release): assign() reads the records, and commit() and committed() keep a
    group's offsets (OffsetCommit v1, OffsetFetch v1 through FindCoordinator v0)."""
    create(broker.bootstrap, "older-table")
    old = {"bootstrap.servers": broker.bootstrap, "api.version.request": False, "broker.version.fallback": "0.8.2"}
    p = Producer(old)
    for i in range(5):
        p.produce("older-table", value=b"v%d" % i, partition=0)
    assert p.flush(TIMEOUT) == 0
    c = Consumer({**old, "group.id": "older-group", "enable.auto.commit": False})
    c.assign([TopicPartition("older-table", 0, 0)])
    got, deadline = [], time.time() + TIMEOUT
    while len(got) < 5 and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
    assert got == [b"v%d" % i for i in range(5)], got
    c.commit(offsets=[TopicPartition("older-table", 0, 5)], asynchronous=False)
    [tp] = c.committed([TopicPartition("older-table", 0)], timeout=TIMEOUT)
    c.close()
    assert tp.offset == 5, tp
