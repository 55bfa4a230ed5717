"""Admin and client-compatibility breadth, driven by confluent-kafka's AdminClient
(librdkafka), kafka-python's KafkaAdminClient and raw requests against the real binary:
CreatePartitions, DeleteRecords, per-record produce errors (KIP-467), the first batch over the
fetch limits (KIP-74), DescribeCluster, DescribeLogDirs, DescribeProducers, commit metadata,
and ApiVersions advertising exactly what is implemented.
"""
import os
import struct
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from kafka import KafkaAdminClient, KafkaConsumer, OffsetAndMetadata
from kafka import TopicPartition as KTopicPartition

from test_bad_input import (API_VERSIONS, NONE, PRODUCE, Conn, R, api_versions_v2, assert_closed, fetch,
                            produce_body, v2_batch, v2_values, varint)
from test_clients import TIMEOUT, consume, create, produce

INVALID_TIMESTAMP = 32
INVALID_PARTITIONS = 37
INVALID_REPLICA_ASSIGNMENT = 39
OFFSET_OUT_OF_RANGE = 1
POLICY_VIOLATION = 44


def offsets(reports):
    """The offsets of confluent-kafka delivery reports, each checked to be without error."""
    assert all(e is None for e, _ in reports), reports
    return [m.offset() for _, m in reports]


def admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def kadmin(broker):
    return KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=TIMEOUT * 1000)


def partition_count(broker, topic):
    return len(admin(broker).list_topics(topic, timeout=TIMEOUT).topics[topic].partitions)


def watermarks(broker, topic, partition=0):
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "wm"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, partition), TIMEOUT)
    finally:
        c.close()


# ---------------------------------------------------------------------------------------------
# CreatePartitions
# ---------------------------------------------------------------------------------------------

def test_create_partitions(broker):
    """confluent-kafka grows a topic from 2 to 5 partitions: Metadata shows 5 at once, a record
    produced to the new partition 4 is consumed back, and the count survives a restart.
    validate_only changes nothing; a count that is not an increase is INVALID_PARTITIONS; an
    unknown topic UNKNOWN_TOPIC_OR_PARTITION; kafka-python then grows it to 7 with explicit
    assignments naming this node (a wrong node or count is INVALID_REPLICA_ASSIGNMENT)."""
    create(broker.bootstrap, "grow", partitions=2)
    a = admin(broker)
    a.create_partitions([NewPartitions("grow", 6)], validate_only=True)["grow"].result(TIMEOUT)
    assert partition_count(broker, "grow") == 2, "validate_only changed the topic"
    a.create_partitions([NewPartitions("grow", 5)])["grow"].result(TIMEOUT)
    assert partition_count(broker, "grow") == 5
    assert offsets(produce(broker.bootstrap, "grow", [(b"k", b"in-4", None)], partition=4)) == [0]
    assert [m.value() for m in consume(broker.bootstrap, "grow", 1, partition=4)] == [b"in-4"]
    for count, name in ((5, "grow"), (3, "grow"), (9, "no-such-topic")):
        with pytest.raises(KafkaException) as e:
            a.create_partitions([NewPartitions(name, count)])[name].result(TIMEOUT)
        expected = "INVALID_PARTITIONS" if name == "grow" else "UNKNOWN_TOPIC_OR_PART"
        assert expected in e.value.args[0].name(), (count, name, e.value)
    broker.stop()
    broker.start()
    assert partition_count(broker, "grow") == 5, "the partition count did not survive a restart"
    assert [m.value() for m in consume(broker.bootstrap, "grow", 1, partition=4)] == [b"in-4"]
    k = kadmin(broker)
    try:
        bad = k.create_partitions({"grow": {"count": 7, "assignments": [[0], [5]]}}, raise_errors=False)
        assert bad.results[0].error_code == INVALID_REPLICA_ASSIGNMENT, bad
        bad = k.create_partitions({"grow": {"count": 7, "assignments": [[0]]}}, raise_errors=False)
        assert bad.results[0].error_code == INVALID_REPLICA_ASSIGNMENT, bad
        ok = k.create_partitions({"grow": {"count": 7, "assignments": [[0], [0]]}})
        assert ok.results[0].error_code == NONE, ok
    finally:
        k.close()
    assert partition_count(broker, "grow") == 7
    assert offsets(produce(broker.bootstrap, "grow", [(b"k", b"in-6", None)], partition=6)) == [0]


# ---------------------------------------------------------------------------------------------
# DeleteRecords
# ---------------------------------------------------------------------------------------------

def test_delete_records(broker):
    """confluent-kafka deletes the records below offset 6 of 10: the answer's low watermark is
    6, ListOffsets -2 (the low watermark) answers 6, a fetch below 6 is OFFSET_OUT_OF_RANGE and a
    consumer starting at the earliest offset reads 6 to 9; a smaller offset changes nothing;
    offset 11 (past the high watermark) is OFFSET_OUT_OF_RANGE. The start survives a restart.
    kafka-python then deletes up to the high watermark (-1): the partition is empty but keeps its
    offsets, and new records continue at 10."""
    create(broker.bootstrap, "dr")
    produce(broker.bootstrap, "dr", [(None, b"r%d" % i, None) for i in range(10)])
    a = admin(broker)
    result = a.delete_records([TopicPartition("dr", 0, 6)])
    (tp, fut), = result.items()
    assert fut.result(TIMEOUT).low_watermark == 6
    assert watermarks(broker, "dr") == (6, 10)
    with Conn(broker) as c:
        assert fetch(c, "dr", 0, 5)[0] == OFFSET_OUT_OF_RANGE
        error, hw, records = fetch(c, "dr", 0, 6)
        assert (error, [o for o, _ in v2_values(records) if o >= 6][:1]) == (NONE, [6])
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "dr-reader", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    try:
        c.subscribe(["dr"])
        got, deadline = [], time.time() + TIMEOUT
        while len(got) < 4 and time.time() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append((m.offset(), m.value()))
    finally:
        c.close()
    assert got == [(i, b"r%d" % i) for i in range(6, 10)]
    assert list(a.delete_records([TopicPartition("dr", 0, 3)]).values())[0].result(TIMEOUT).low_watermark == 6
    with pytest.raises(KafkaException) as e:
        list(a.delete_records([TopicPartition("dr", 0, 11)]).values())[0].result(TIMEOUT)
    assert "OFFSET_OUT_OF_RANGE" in e.value.args[0].name()
    broker.stop()
    broker.start()
    assert watermarks(broker, "dr") == (6, 10), "the log start did not survive a restart"
    k = kadmin(broker)
    try:
        out = k.delete_records({KTopicPartition("dr", 0): -1})
        assert list(out.values())[0]["low_watermark"] == 10, out
    finally:
        k.close()
    assert watermarks(broker, "dr") == (10, 10)
    assert offsets(produce(broker.bootstrap, "dr", [(None, b"after", None)])) == [10]


def test_delete_records_refusals(broker):
    """Raw DeleteRecords v2: __consumer_offsets is POLICY_VIOLATION (a compacted topic), an
    unknown partition UNKNOWN_TOPIC_OR_PARTITION, each with low watermark -1; the others of the
    same request are applied."""
    create(broker.bootstrap, "drr")
    produce(broker.bootstrap, "drr", [(None, b"x", None)] * 3)
    consume(broker.bootstrap, "drr", 1)  # a consumer group: __consumer_offsets exists
    body = b"\x04"  # compact array of 3 topics
    for name, partition, offset in (("drr", 0, 2), ("__consumer_offsets", 0, 0), ("drr", 7, 0)):
        enc = name.encode()
        body += bytes([len(enc) + 1]) + enc + b"\x02" + struct.pack(">iq", partition, offset) + b"\x00" + b"\x00"
    body += struct.pack(">i", 1000) + b"\x00"
    with Conn(broker) as c:
        r = CR(c.call(21, 2, body, flexible=True).buf)
        r.tags()  # response header v1
        r.i32()  # throttle time
        answers = []
        for _ in range(r.count()):
            name = r.cstring()
            for _ in range(r.count()):
                answers.append((name, r.i32(), r.i64(), r.i16()))
                r.tags()
            r.tags()
        r.tags()
        assert r.pos == len(r.buf)
    assert answers == [("drr", 0, 2, NONE), ("__consumer_offsets", 0, -1, POLICY_VIOLATION), ("drr", 7, -1, 3)], answers


class CR(R):
    """A reader of flexible (compact) encodings, with no tagged fields expected."""

    def uvarint(self):
        shift = value = 0
        while True:
            b = self.buf[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return value

    def count(self):
        return self.uvarint() - 1

    def cstring(self):
        n = self.uvarint() - 1
        s = self.buf[self.pos:self.pos + n].decode()
        self.pos += n
        return s

    def nstring_c(self):
        """A compact nullable string."""
        n = self.uvarint() - 1
        if n < 0:
            return None
        s = self.buf[self.pos:self.pos + n].decode()
        self.pos += n
        return s

    def tags(self):
        assert self.uvarint() == 0, "unexpected tagged fields"


# ---------------------------------------------------------------------------------------------
# Per-record produce errors (KIP-467) and KIP-74
# ---------------------------------------------------------------------------------------------

def test_per_record_timestamp_errors(broker):
    """A topic that takes CreateTime timestamps up to an hour old: a Produce v8 batch of five
    records where records 1 and 3 are two hours old is refused whole with INVALID_TIMESTAMP,
    the partition's error message Kafka's ("One or more records have been rejected due to
    invalid timestamp") and RecordErrors naming indexes 1 and 3, each with its timestamp and the
    allowed window; nothing is appended. confluent-kafka sees the same error on delivery."""
    create(broker.bootstrap, "k467", config={"message.timestamp.before.max.ms": "3600000"})
    now = int(time.time() * 1000)
    old = now - 2 * 3600 * 1000
    stamps = [now, old, now, old, now]
    recs = b""
    for i, ts in enumerate(stamps):
        value = b"v%d" % i
        rec = b"\x00" + varint(ts - now) + varint(i) + varint(-1) + varint(len(value)) + value + varint(0)
        recs += varint(len(rec)) + rec
    batch = v2_batch([b"v%d" % i for i in range(5)], base_ts=now, records=recs)
    with Conn(broker) as c:
        r = c.call(PRODUCE, 8, produce_body([("k467", [(0, batch)])]))
        # Produce v8 answer with RecordErrors read field by field.
        assert r.i32() == 1 and r.string() == "k467" and r.i32() == 1
        index, error, base = r.i32(), r.i16(), r.i64()
        r.i64(), r.i64()
        record_errors = [(r.i32(), r.nstring()) for _ in range(r.i32())]
        message = r.nstring()
        assert (index, error, base) == (0, INVALID_TIMESTAMP, -1)
        assert message == "One or more records have been rejected due to invalid timestamp", message
        assert [i for i, _ in record_errors] == [1, 3], record_errors
        for i, why in record_errors:
            assert why.startswith("Timestamp %d of message with offset %d is out of range" % (old, i)), why
        assert fetch(c, "k467", 0, 0)[1] == 0, "something was appended"
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "message.timeout.ms": 10_000})
    reports = []
    p.produce("k467", value=b"old", timestamp=old, on_delivery=lambda e, m: reports.append(e))
    p.flush(TIMEOUT)
    assert reports and reports[0] is not None and reports[0].name() == "INVALID_TIMESTAMP", reports


def test_first_batch_larger_than_fetch_limits(broker):
    """KIP-74: a 2 MB record on a topic that allows it is delivered to consumers whose
    fetch.max.bytes and max.partition.fetch.bytes are 1 MB (confluent-kafka and kafka-python),
    and a raw Fetch with max_bytes 1 returns that batch whole."""
    create(broker.bootstrap, "big74", config={"max.message.bytes": str(3 << 20)})
    value = b"B" * (2 << 20)
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "message.max.bytes": 3 << 20,
                  "compression.type": "none"})
    p.produce("big74", value=value, partition=0)
    p.produce("big74", value=b"small", partition=0)
    assert p.flush(TIMEOUT) == 0
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "k74", "fetch.max.bytes": 1 << 20,
                  "max.partition.fetch.bytes": 1 << 20, "receive.message.max.bytes": 4 << 20})
    try:
        c.assign([TopicPartition("big74", 0, 0)])
        got, deadline = [], time.time() + TIMEOUT
        while len(got) < 2 and time.time() < deadline:
            m = c.poll(0.5)
            if m is not None:
                assert m.error() is None, m.error()
                got.append(len(m.value()))
    finally:
        c.close()
    assert got == [2 << 20, 5]
    kc = KafkaConsumer(bootstrap_servers=broker.bootstrap, fetch_max_bytes=1 << 20, max_partition_fetch_bytes=1 << 20,
                       consumer_timeout_ms=TIMEOUT * 1000, enable_auto_commit=False, auto_offset_reset="earliest")
    try:
        kc.assign([KTopicPartition("big74", 0)])
        sizes = [len(m.value) for _, m in zip(range(2), kc)]
    finally:
        kc.close()
    assert sizes == [2 << 20, 5]
    with Conn(broker, timeout=20) as c:
        error, hw, records = fetch(c, "big74", 0, 0, max_bytes=1)
        assert (error, [len(v) for _, v in v2_values(records)]) == (NONE, [2 << 20])


# ---------------------------------------------------------------------------------------------
# Describe*: cluster, log dirs, producers
# ---------------------------------------------------------------------------------------------

def test_describe_cluster(broker):
    """DescribeCluster through confluent-kafka and kafka-python: one node (this one, at the
    bootstrap address), which is also the controller, and the cluster id Metadata reports."""
    a = admin(broker)
    d = a.describe_cluster().result(TIMEOUT)
    assert [(n.id, n.host, n.port) for n in d.nodes] == [(0, "127.0.0.1", broker.port)]
    assert d.controller.id == 0
    assert d.cluster_id == a.list_topics(timeout=TIMEOUT).cluster_id
    k = kadmin(broker)
    try:
        info = k.describe_cluster()
    finally:
        k.close()
    assert info["controller_id"] == 0 and [b["broker_id"] for b in info["brokers"]] == [0], info


def test_describe_log_dirs(broker):
    """kafka-python's describe_log_dirs: one log directory, the broker's data directory (an
    absolute path), with every partition and its size in bytes, larger after more records; the
    volume's total and usable bytes (v4) are positive; asking for one topic lists only it."""
    create(broker.bootstrap, "ld", partitions=2)
    produce(broker.bootstrap, "ld", [(None, b"x" * 1000, None)] * 5)
    k = kadmin(broker)
    try:
        dirs = k.describe_log_dirs()
        one = k.describe_log_dirs(topic_partitions={"ld": [1]})
    finally:
        k.close()
    assert dirs[0]["log_dirs"][0]["log_dir"] == os.path.abspath(broker.data_dir)
    flat = _log_dir_partitions(dirs)
    assert flat[("ld", 0)] > 5000 and flat[("ld", 1)] == 0, flat
    assert set(_log_dir_partitions(one)) == {("ld", 1)}, one


def _log_dir_partitions(resp):
    """{(topic, partition): size} from kafka-python's describe_log_dirs answer."""
    (one_broker,) = resp
    (one_dir,) = one_broker["log_dirs"]
    assert one_dir["error_code"] == NONE and one_dir["total_bytes"] > 0 and one_dir["usable_bytes"] > 0, one_dir
    return {(t["name"], p["partition_index"]): p["partition_size"] for t in one_dir["topics"] for p in t["partitions"]}


def test_describe_producers(broker):
    """An idempotent confluent-kafka producer writes 3 records to partition 0: kafka-python's
    describe_producers lists its producer id with epoch 0 and last sequence 2; partition 1 has
    no producer (and no error); a raw request for an unknown topic gets
    UNKNOWN_TOPIC_OR_PARTITION."""
    create(broker.bootstrap, "dp", partitions=2)
    p = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 0})
    for i in range(3):
        p.produce("dp", value=b"i%d" % i, partition=0)
        p.flush(TIMEOUT)
    k = kadmin(broker)
    try:
        out = k.describe_producers([KTopicPartition("dp", 0), KTopicPartition("dp", 1)])
    finally:
        k.close()
    states = {tp.partition: s for tp, s in out.items()}
    text = repr(states)
    (ap,) = states[0].active_producers
    assert (ap.producer_epoch, ap.last_sequence) == (0, 2) and ap.producer_id >= 0, text
    assert list(states[1].active_producers) == [], text
    # Raw DescribeProducers v0 of an unknown topic: UNKNOWN_TOPIC_OR_PARTITION, no producers.
    body = b"\x02" + b"\x0cno-such-top" + b"\x02" + struct.pack(">i", 0) + b"\x00" + b"\x00"
    with Conn(broker) as c:
        r = CR(c.call(61, 0, body, flexible=True).buf)
        r.tags()
        r.i32()
        assert r.count() == 1 and r.cstring() == "no-such-top" and r.count() == 1
        assert (r.i32(), r.i16(), r.nstring_c(), r.count()) == (0, 3, None, 0)


# ---------------------------------------------------------------------------------------------
# Commit metadata and ApiVersions
# ---------------------------------------------------------------------------------------------

def test_commit_metadata_round_trips(broker):
    """OffsetCommit metadata strings come back from OffsetFetch: confluent-kafka commits offset
    5 with metadata "where-5" and reads it back with committed(); kafka-python commits 7 with
    "seven" and its admin client lists it; a restart keeps both."""
    create(broker.bootstrap, "cm")
    produce(broker.bootstrap, "cm", [(None, b"x", None)] * 10)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "cm-a", "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition("cm", 0, 5, metadata="where-5")], asynchronous=False)
        (tp,) = c.committed([TopicPartition("cm", 0)], timeout=TIMEOUT)
        assert (tp.offset, tp.metadata) == (5, "where-5")
    finally:
        c.close()
    kc = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="cm-b", enable_auto_commit=False)
    try:
        kc.commit({KTopicPartition("cm", 0): OffsetAndMetadata(7, "seven", -1)})
    finally:
        kc.close()
    broker.stop()
    broker.start()
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "cm-a", "enable.auto.commit": False})
    try:
        (tp,) = c.committed([TopicPartition("cm", 0)], timeout=TIMEOUT)
        assert (tp.offset, tp.metadata) == (5, "where-5")
    finally:
        c.close()
    k = kadmin(broker)
    try:
        offsets = k.list_group_offsets("cm-b")
    finally:
        k.close()
    om = offsets["cm-b"][KTopicPartition("cm", 0)]
    assert (om.offset, om.metadata) == (7, "seven"), offsets


def test_api_versions_advertise_what_is_implemented(broker):
    """ApiVersions v2, v3 and v4 (kafka-python asks v4 first) list the same APIs and versions
    (the broker's one table, which the protocol tests check the codec against), including the
    admin APIs, OffsetForLeaderEpoch (23) and the inter-broker WriteTxnMarkers (27); an API
    outside the list (UpdateRaftVoter, 82, which Kafka's brokers do not serve either) closes the connection, as Kafka does. The v3/v4
    answers carry the feature levels as tagged fields: FinalizedFeaturesEpoch (tag 1, 0 on a
    new broker) and FinalizedFeatures (tag 2); SupportedFeatures (tag 0) only at v4, since both
    features tidemark supports start at level 0, which Kafka leaves out of v3 answers.
    kafka-python's describe_features reads them. (kcat, librdkafka 2.0, reads these answers in
    test_clients.py.)"""
    with Conn(broker) as c:
        _, keys = api_versions_v2(c)
        for v in (3, 4):
            c.send(c.request(API_VERSIONS, v, b"\x05kcat\x042.0\x00", flexible=True))
            corr, rest = c.recv_frame()
            r = CR(rest)  # header v0: no tagged fields before the body
            assert r.i16() == NONE
            listed = {}
            for _ in range(r.count()):
                k, lo, hi = r.i16(), r.i16(), r.i16()
                r.tags()
                listed[k] = (lo, hi)
            r.i32()  # throttle time
            # Tagged fields: SupportedFeatures (v4), FinalizedFeaturesEpoch = 0, FinalizedFeatures.
            tags = {}
            for _ in range(r.uvarint()):
                tag, size = r.uvarint(), r.uvarint()
                tags[tag] = r.buf[r.pos:r.pos + size]
                r.pos += size
            assert sorted(tags) == ([0, 1, 2] if v == 4 else [1, 2]), (v, tags)
            assert tags[1] == bytes(8), "epoch 0"
            assert r.pos == len(r.buf)
            assert listed == keys, (v, listed, keys)
        assert 82 not in keys and keys[80] == (0, 1) and keys[55] == (0, 2) and keys[64] == (0, 0) and keys[24] == (0, 5) and keys[18] == (0, 4) and keys[21] == (0, 2) and keys[37] == (0, 3)
        assert keys[23] == (0, 4) and keys[27] == (0, 1)
    # An unadvertised API: the connection closes without an answer.
    with Conn(broker) as c:
        c.send(c.request(82, 0, b""))
        assert_closed(c, "UpdateRaftVoter v0")
    k = kadmin(broker)
    try:
        features = k.describe_features()
        assert features["transaction.version"]["finalized"] == (2, 2), features
        assert features["group.version"]["supported"] == (0, 1), features
    finally:
        k.close()


# ---------------------------------------------------------------------------------------------
# ElectLeaders, AlterPartitionReassignments, ListPartitionReassignments (standalone)
# ---------------------------------------------------------------------------------------------

def test_leader_election_and_reassignment_on_a_standalone_node(broker):
    """A standalone node is every partition's only replica: kafka-python's ElectLeaders gets
    ELECTION_NOT_NEEDED for an existing partition and UNKNOWN_TOPIC_OR_PARTITION for a missing
    one; a reassignment to this node alone is accepted (nothing moves), to another broker is
    INVALID_REPLICA_ASSIGNMENT, a cancellation NO_REASSIGNMENT_IN_PROGRESS; none is listed."""
    create(broker.bootstrap, "standalone-moves", 2)
    k = kadmin(broker)
    try:
        me = k.describe_cluster()["brokers"][0]["broker_id"]
        r = k.elect_leaders(0, {"standalone-moves": [0, 1], "no-such-topic": [0]}, raise_errors=False)
        codes = {(t[0], p[0]): p[1] for t in r.replica_election_results for p in t[1]}
        assert codes == {("standalone-moves", 0): 84, ("standalone-moves", 1): 84, ("no-such-topic", 0): 3}, codes
        r = k.alter_partition_reassignments({KTopicPartition("standalone-moves", 0): [me],
                                             KTopicPartition("standalone-moves", 1): [me + 1],
                                             KTopicPartition("no-such-topic", 0): None})
        assert r[KTopicPartition("standalone-moves", 0)] is None, r
        assert r[KTopicPartition("standalone-moves", 1)].errno == INVALID_REPLICA_ASSIGNMENT, r
        assert r[KTopicPartition("no-such-topic", 0)].errno == 3, r
        r = k.alter_partition_reassignments({KTopicPartition("standalone-moves", 0): None})
        assert r[KTopicPartition("standalone-moves", 0)].errno == 85, r
        assert k.list_partition_reassignments() == {}
    finally:
        k.close()


def offset_for_leader_epoch(conn, topic, asks, version=3):
    """OffsetForLeaderEpoch (23) v3, raw: asks = [(partition, current_leader_epoch,
    leader_epoch)]; the answer [(error, partition, leader_epoch, end_offset)]."""
    name = topic.encode()
    body = struct.pack(">i", -1) + struct.pack(">i", 1) + struct.pack(">h", len(name)) + name
    body += struct.pack(">i", len(asks)) + b"".join(struct.pack(">iii", *a) for a in asks)
    r = conn.call(23, version, body)
    r.i32()  # throttle time
    out = []
    for _ in range(r.i32()):
        r.string()
        for _ in range(r.i32()):
            out.append((r.i16(), r.i32(), r.i32(), r.i64()))
    return out


def test_offset_for_leader_epoch_standalone(broker):
    """OffsetForLeaderEpoch on a standalone node (one leadership, epoch 0): epoch 0 ends at the
    log end; an epoch the log never had is (-1, -1); a reader's newer current epoch is
    UNKNOWN_LEADER_EPOCH; an unknown partition UNKNOWN_TOPIC_OR_PARTITION."""
    create(broker.bootstrap, "epochs-standalone")
    produce(broker.bootstrap, "epochs-standalone", [(None, b"v%d" % i, None) for i in range(10)])
    with Conn(broker) as c:
        got = offset_for_leader_epoch(c, "epochs-standalone", [(0, -1, 0), (0, 0, 3), (0, 1, 0), (4, -1, 0)])
    assert got == [(0, 0, 0, 10), (0, 0, -1, -1), (75, 0, -1, -1), (3, 4, -1, -1)], got
