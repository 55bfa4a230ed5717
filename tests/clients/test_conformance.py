"""Conformance of the newest protocol features against an independent implementation of the
protocol: kafka-python 3's JSON-schema-driven request and response classes (generated from
Kafka's own message definitions, not from tidemark's), sent on plain sockets to the real
binary, plus real clients (confluent-kafka, kafka-python) where they exercise the same path.

Covered: topic ids (KIP-516) in CreateTopics v7, Metadata v10-v12, DeleteTopics v6 and
Fetch v13-v17, their persistence (topic file v2, the upgrade from v1) and restarts; Produce
v10/v11; ListOffsets v8-v10 (KIP-405 -4, KIP-1005 -5); ApiVersions against
`protocol::SUPPORTED`; the cluster id in meta.properties and a node that is not the
directory's node.id. The expected answers are Kafka's (its broker's behaviour).
"""
import base64
import itertools
import os
import re
import signal
import socket
import struct
import subprocess
import time
import uuid

from kafka import KafkaAdminClient
from kafka.protocol.admin import (CreateTopicsRequest, DescribeTopicPartitionsRequest, DeleteRecordsRequest, DeleteTopicsRequest,
                                  DescribeClusterRequest)
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from confluent_kafka import Consumer
from kafka.protocol.admin import DescribeGroupsRequest
from kafka.protocol.metadata import ApiVersionsRequest, FindCoordinatorRequest, MetadataRequest
from kafka.protocol.admin.cluster import UpdateFeaturesRequest
from kafka.protocol.producer import ProduceRequest

from conftest import BIN
from test_bad_input import crc32c, v2_batch, v2_values
from test_clients import TIMEOUT, consume, create, produce

# Kafka error codes.
NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
COORDINATOR_NOT_AVAILABLE = 15
UNSUPPORTED_VERSION = 35
INVALID_UPDATE_VERSION = 95
INVALID_REQUEST = 42
UNKNOWN_TOPIC_ID = 100

ZERO = uuid.UUID(int=0)
SOURCE = os.path.join(os.path.dirname(__file__), "..", "..")

# ---------------------------------------------------------------------------------------------
# One request, encoded and decoded by kafka-python's protocol classes
# ---------------------------------------------------------------------------------------------

_correlation = itertools.count(1)


def _recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed by the broker after %d of %d bytes" % (len(buf), n))
        buf += chunk
    return buf


def call(broker, request_class, version, **fields):
    """Send one request of `version` (its body built from `fields`, kafka-python's snake_case
    of Kafka's field names) on a connection of its own; return the decoded response, whose
    correlation id is checked."""
    req = request_class[version](**fields)
    corr = next(_correlation)
    req.with_header(correlation_id=corr, client_id="conformance")
    frame = req.encode(header=True, framed=True)
    with socket.create_connection(("127.0.0.1", broker.port), timeout=TIMEOUT) as s:
        s.sendall(frame)
        size, = struct.unpack(">i", _recv_exact(s, 4))
        body = _recv_exact(s, size)
    resp = req.header.get_response_class().decode(body, version=version, header=True)
    assert resp.header.correlation_id == corr, "correlation id %d, sent %d" % (resp.header.correlation_id, corr)
    return resp


def uid(u):
    """A decoded UUID field (kafka-python decodes the zero UUID as None)."""
    return ZERO if u is None else u


def b64id(u):
    """Kafka's text form of a UUID: 22 characters of URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


def from_b64id(s):
    assert len(s) == 22, "not 22 characters: %r" % s
    return uuid.UUID(bytes=base64.urlsafe_b64decode(s + "=="))


# ---------------------------------------------------------------------------------------------
# Requests of each API
# ---------------------------------------------------------------------------------------------

def create_topic(broker, name, partitions=1, configs=None, version=7):
    """CreateTopics; returns the topic's result."""
    C = CreateTopicsRequest
    topic = C.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1, assignments=[],
                             configs=[C.CreatableTopic.CreatableTopicConfig(name=k, value=v)
                                      for k, v in (configs or {}).items()])
    r = call(broker, C, version, topics=[topic], timeout_ms=TIMEOUT * 1000, validate_only=False)
    assert len(r.topics) == 1 and r.topics[0].name == name, r
    return r.topics[0]


def metadata(broker, version, topics, auto_create=False):
    """Metadata for `topics` (None: all): each a name, a UUID (by id), or a (name, id) pair."""
    M = MetadataRequest
    if topics is not None:
        wanted = []
        for t in topics:
            name, tid = t if isinstance(t, tuple) else (None, t) if isinstance(t, uuid.UUID) else (t, ZERO)
            wanted.append(M.MetadataRequestTopic(name=name, topic_id=tid))
        topics = wanted
    return call(broker, M, version, topics=topics, allow_auto_topic_creation=auto_create,
                include_cluster_authorized_operations=False, include_topic_authorized_operations=False)


def topic_id(broker, name):
    """The topic's id in Metadata v12 (checked non-zero)."""
    r = metadata(broker, 12, [name])
    assert len(r.topics) == 1 and r.topics[0].error_code == NONE, r
    tid = uid(r.topics[0].topic_id)
    assert tid != ZERO, r
    return tid


def delete_topics(broker, version, *topics):
    """DeleteTopics v6: each topic a (name or None, id or ZERO) pair."""
    D = DeleteTopicsRequest
    return call(broker, D, version, topics=[D.DeleteTopicState(name=n, topic_id=i) for n, i in topics],
                timeout_ms=TIMEOUT * 1000)


def fetch(broker, version, partitions, name=None, tid=ZERO, max_bytes=1 << 20):
    """Fetch from one topic (by name before v13, by id from v13): partitions is
    [(partition, offset)]. Returns the response."""
    F = FetchRequest
    topic = F.FetchTopic(topic=name or "", topic_id=tid, partitions=[
        F.FetchTopic.FetchPartition(partition=p, fetch_offset=o, partition_max_bytes=max_bytes,
                                    current_leader_epoch=-1, log_start_offset=-1, last_fetched_epoch=-1)
        for p, o in partitions])
    return call(broker, F, version, replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=max_bytes,
                isolation_level=0, session_id=0, session_epoch=-1, topics=[topic], forgotten_topics_data=[],
                rack_id="")


def by_partition(topic_response):
    return {p.partition_index: p for p in topic_response.partitions}


def list_offsets(broker, version, topic, timestamp, partition=0):
    """ListOffsets of one partition; returns its answer."""
    L = ListOffsetsRequest
    r = call(broker, L, version, replica_id=-1, isolation_level=0, timeout_ms=TIMEOUT * 1000, topics=[
        L.ListOffsetsTopic(name=topic, partitions=[
            L.ListOffsetsTopic.ListOffsetsPartition(partition_index=partition, timestamp=timestamp,
                                                    current_leader_epoch=-1, max_num_offsets=1)])])
    assert len(r.topics) == 1 and r.topics[0].name == topic and len(r.topics[0].partitions) == 1, r
    p = r.topics[0].partitions[0]
    assert p.partition_index == partition, r
    return p


def produce_batch(broker, version, topic, values, partition=0):
    """Produce one v2 batch of `values` (acks -1); returns the partition's answer."""
    P = ProduceRequest
    r = call(broker, P, version, transactional_id=None, acks=-1, timeout_ms=TIMEOUT * 1000, topic_data=[
        P.TopicProduceData(name=topic, partition_data=[
            P.TopicProduceData.PartitionProduceData(index=partition, records=v2_batch(values))])])
    assert len(r.responses) == 1 and r.responses[0].name == topic, r
    parts = r.responses[0].partition_responses
    assert len(parts) == 1 and parts[0].index == partition, r
    return parts[0]


def topic_file(broker, name):
    with open(os.path.join(broker.data_dir, "topics", name + ".topic"), "rb") as f:
        return f.read().decode()


def parse_topic_file(text):
    """(version, {key: value} of the lines between the version and the checksum), the
    checksum checked: CRC-32C of every line above it, newlines included."""
    assert text.endswith("\n"), text
    body, crc_line = text[:text.rindex("crc32c=")], text[text.rindex("crc32c="):]
    assert re.fullmatch(r"crc32c=[0-9a-f]{8}\n", crc_line), text
    assert int(crc_line[7:15], 16) == crc32c(body.encode()), "checksum mismatch:\n" + text
    lines = body.splitlines()
    version = re.fullmatch(r"tidemark-topic (\d+)", lines[0])
    assert version, text
    return int(version.group(1)), dict(line.split("=", 1) for line in lines[1:])


def meta_properties(broker):
    with open(os.path.join(broker.data_dir, "meta.properties")) as f:
        return dict(line.strip().split("=", 1) for line in f if "=" in line and not line.startswith("#"))


def wait_until(check, what, timeout=TIMEOUT):
    deadline = time.time() + timeout
    while not check():
        assert time.time() < deadline, "timed out waiting for " + what
        time.sleep(0.1)


# ---------------------------------------------------------------------------------------------
# 1. Topic ids: CreateTopics v7, Metadata v10-v12
# ---------------------------------------------------------------------------------------------

def test_topic_ids_in_create_topics_and_metadata(broker):
    """KIP-516: CreateTopics v7 answers the new topic's id (non-zero); Metadata v10, v11 and
    v12 answer the same id, by name and in the all-topics list; Metadata v12 looks a topic up
    by id (name null) and answers its name, id and partitions, alongside a topic asked by
    name; an unknown id at v12 gets UNKNOWN_TOPIC_ID with the id echoed and no name."""
    created = create_topic(broker, "ids", partitions=2)
    assert created.error_code == NONE, created
    assert created.num_partitions == 2, created
    tid = uid(created.topic_id)
    assert tid != ZERO, "CreateTopics v7 answered the zero topic id: %r" % created

    for version in (10, 11, 12):
        r = metadata(broker, version, ["ids"])
        assert [(t.error_code, t.name, uid(t.topic_id)) for t in r.topics] == [(NONE, "ids", tid)], (version, r)
        assert sorted(p.partition_index for p in r.topics[0].partitions) == [0, 1], (version, r)
        every = {t.name: uid(t.topic_id) for t in metadata(broker, version, None).topics}
        assert every.get("ids") == tid, (version, every)
        assert all(i != ZERO for i in every.values()), "a topic without an id at v%d: %r" % (version, every)

    other = create_topic(broker, "ids-other")
    assert other.error_code == NONE and uid(other.topic_id) not in (ZERO, tid), other

    r = metadata(broker, 12, [tid])
    assert len(r.topics) == 1, r
    t = r.topics[0]
    assert (t.error_code, t.name, uid(t.topic_id)) == (NONE, "ids", tid), r
    assert sorted(p.partition_index for p in t.partitions) == [0, 1], r
    assert all(p.error_code == NONE and p.leader_id == r.controller_id for p in t.partitions), r

    # By id and by name in one request.
    r = metadata(broker, 12, [tid, "ids-other"])
    got = sorted((t.error_code, t.name, uid(t.topic_id)) for t in r.topics)
    assert got == sorted([(NONE, "ids", tid), (NONE, "ids-other", uid(other.topic_id))]), r

    unknown = uuid.uuid4()
    r = metadata(broker, 12, [unknown])
    assert len(r.topics) == 1, r
    t = r.topics[0]
    assert t.error_code == UNKNOWN_TOPIC_ID, r
    assert uid(t.topic_id) == unknown, "the unknown id is not echoed: %r" % r
    assert t.name is None and t.partitions == [], r


def test_metadata_v10_v11_refuse_topic_ids_and_null_names(broker):
    """KIP-516: topics by id exist only from Metadata v12. At v10 and v11 a topic named by id
    (null name with an id, or a name with an id) or with a null name gets INVALID_REQUEST
    (Kafka's KafkaApis refuses such a request), with the name given (Kafka: "" for a null
    name, the response's name being non-nullable before v12); nothing else is answered for
    it (no partitions)."""
    tid = uid(create_topic(broker, "v11").topic_id)
    for version in (10, 11):
        for name, asked_id in ((None, tid), ("v11", tid), (None, ZERO), (None, uuid.uuid4())):
            r = metadata(broker, version, [(name, asked_id)])
            what = "v%d name=%r id=%s: %r" % (version, name, asked_id, r)
            assert len(r.topics) == 1, what
            t = r.topics[0]
            assert t.error_code == INVALID_REQUEST, what
            assert t.name == (name or ""), what
            assert t.partitions == [], what
        # By name alone, still answered.
        r = metadata(broker, version, ["v11"])
        assert [(t.error_code, uid(t.topic_id)) for t in r.topics] == [(NONE, tid)], r


def test_metadata_v10_v11_invalid_request_answers_like_kafka(broker):
    """KIP-516, Kafka's exact answer: at v10/v11 a topic by id or with a null name makes
    Kafka throw InvalidRequestException for the whole request, answered by
    MetadataRequest.getErrorResponse: EVERY topic of the request gets INVALID_REQUEST (also
    one validly named beside it), each with its name ("" when null) and the topic id it was
    asked with, is_internal false and no partitions."""
    tid = uid(create_topic(broker, "whole").topic_id)
    create_topic(broker, "beside")
    wrong = []
    for version in (10, 11):
        r = metadata(broker, version, [(None, tid)])
        got = [(t.error_code, t.name, uid(t.topic_id), len(t.partitions)) for t in r.topics]
        if got != [(INVALID_REQUEST, "", tid, 0)]:
            wrong.append("v%d, one topic by id: answered %r, Kafka (42, '', %s, 0)" % (version, got, tid))
        r = metadata(broker, version, ["beside", (None, tid)])
        got = sorted((t.error_code, t.name, uid(t.topic_id), len(t.partitions)) for t in r.topics)
        kafka = sorted([(INVALID_REQUEST, "beside", ZERO, 0), (INVALID_REQUEST, "", tid, 0)])
        if got != kafka:
            wrong.append("v%d, a name and an id: answered %r, Kafka %r" % (version, got, kafka))
    assert not wrong, "\n".join(wrong)


def test_topic_id_survives_restart_and_recreate_gets_new_id(broker):
    """KIP-516: a topic's id is persisted (topic file version 2, `id=` line) and is the same
    after a clean restart on the same data directory, by name and by id; a topic deleted and
    created again under the same name gets a NEW id (the old id is then UNKNOWN_TOPIC_ID),
    and that new id is the one kept over the next restart."""
    first = uid(create_topic(broker, "stable", partitions=3).topic_id)
    assert first != ZERO
    version, fields = parse_topic_file(topic_file(broker, "stable"))
    assert version == 2 and from_b64id(fields["id"]) == first, fields

    broker.stop()
    broker.start()
    assert topic_id(broker, "stable") == first, "the topic id changed over a restart"
    r = metadata(broker, 12, [first])
    assert [(t.error_code, t.name) for t in r.topics] == [(NONE, "stable")], r
    assert len(r.topics[0].partitions) == 3, r

    r = delete_topics(broker, 6, ("stable", ZERO))
    assert [(t.error_code, t.name, uid(t.topic_id)) for t in r.responses] == [(NONE, "stable", first)], r
    second = create_topic(broker, "stable", partitions=3)
    assert second.error_code == NONE, second
    second = uid(second.topic_id)
    assert second not in (ZERO, first), "re-created topic kept the old id %s" % first
    assert topic_id(broker, "stable") == second
    r = metadata(broker, 12, [first])
    assert [(t.error_code, uid(t.topic_id)) for t in r.topics] == [(UNKNOWN_TOPIC_ID, first)], r

    broker.stop()
    broker.start()
    assert topic_id(broker, "stable") == second, "the re-created topic's id changed over a restart"
    r = metadata(broker, 12, [first])
    assert [t.error_code for t in r.topics] == [UNKNOWN_TOPIC_ID], r


# ---------------------------------------------------------------------------------------------
# 2. DeleteTopics v6 by id
# ---------------------------------------------------------------------------------------------

def test_delete_topics_v6_by_id(broker):
    """KIP-516: DeleteTopics v6 deletes a topic named by id alone (name null): the answer
    echoes its name and id, and the topic is gone (Metadata by name: UNKNOWN_TOPIC_OR_PARTITION,
    by id: UNKNOWN_TOPIC_ID; its topic file and partition directories removed) while another
    topic stays; an unknown id gets UNKNOWN_TOPIC_ID with the id echoed; a topic given both a
    name and an id gets INVALID_REQUEST and is not deleted."""
    doomed = uid(create_topic(broker, "doomed", partitions=2).topic_id)
    kept = uid(create_topic(broker, "kept").topic_id)
    produce(broker.bootstrap, "doomed", [(None, b"x", None)])

    r = delete_topics(broker, 6, (None, doomed))
    assert len(r.responses) == 1, r
    d = r.responses[0]
    assert (d.error_code, d.name, uid(d.topic_id)) == (NONE, "doomed", doomed), r

    r = metadata(broker, 12, ["doomed"])
    assert [t.error_code for t in r.topics] == [UNKNOWN_TOPIC_OR_PARTITION], r
    r = metadata(broker, 12, [doomed])
    assert [(t.error_code, uid(t.topic_id)) for t in r.topics] == [(UNKNOWN_TOPIC_ID, doomed)], r
    assert not os.path.exists(os.path.join(broker.data_dir, "topics", "doomed.topic"))
    wait_until(lambda: not any(os.path.exists(os.path.join(broker.data_dir, "doomed-%d" % p)) for p in (0, 1)),
               "the deleted topic's partition directories to go")
    assert topic_id(broker, "kept") == kept

    unknown = uuid.uuid4()
    r = delete_topics(broker, 6, (None, unknown))
    assert len(r.responses) == 1, r
    d = r.responses[0]
    assert d.error_code == UNKNOWN_TOPIC_ID, r
    assert uid(d.topic_id) == unknown, "the unknown id is not echoed: %r" % r

    r = delete_topics(broker, 6, ("kept", kept))
    assert [t.error_code for t in r.responses] == [INVALID_REQUEST], r
    assert topic_id(broker, "kept") == kept, "a refused delete deleted the topic"


# ---------------------------------------------------------------------------------------------
# 3. Fetch v13-v17 by topic id
# ---------------------------------------------------------------------------------------------

def test_fetch_v13_to_v17_by_topic_id(broker):
    """KIP-516: Fetch v13 to v17 name topics by id. Records produced by confluent-kafka to two
    partitions come back at every version by id (the response's topic id echoed, the v2
    batches holding every offset and value, high watermark, last stable offset and log start
    right); an unknown id gets UNKNOWN_TOPIC_ID on every partition asked (high watermark -1,
    no records), also beside a known id in the same request; Fetch v12 by name still serves
    the same records, and a real consumer (librdkafka) reads them all."""
    assert create_topic(broker, "byid", partitions=2).error_code == NONE
    data = {0: [b"p0-%d" % i for i in range(5)], 1: [b"p1-%d" % i for i in range(3)]}
    for p, values in data.items():
        produce(broker.bootstrap, "byid", [(None, v, None) for v in values], partition=p)
    tid = topic_id(broker, "byid")
    expected = {p: list(enumerate(values)) for p, values in data.items()}

    def check(r, version):
        assert r.error_code == NONE and len(r.responses) == 1, (version, r)
        t = r.responses[0]
        parts = by_partition(t)
        assert sorted(parts) == [0, 1], (version, r)
        for p, want in expected.items():
            part = parts[p]
            what = "v%d partition %d: %r" % (version, p, part)
            assert part.error_code == NONE, what
            assert part.high_watermark == len(want), what
            assert part.last_stable_offset == len(want), what
            assert part.log_start_offset == 0, what
            assert part.records, what
            assert v2_values(bytes(part.records)) == want, what
        return t

    for version in range(13, 18):
        t = check(fetch(broker, version, [(0, 0), (1, 0)], tid=tid), version)
        assert uid(t.topic_id) == tid, "v%d: topic id not echoed: %r" % (version, t)

    unknown = uuid.uuid4()
    for version in range(13, 18):
        r = fetch(broker, version, [(0, 0), (1, 0)], tid=unknown)
        assert len(r.responses) == 1 and uid(r.responses[0].topic_id) == unknown, (version, r)
        parts = by_partition(r.responses[0])
        assert sorted(parts) == [0, 1], (version, r)
        for p in parts.values():
            assert p.error_code == UNKNOWN_TOPIC_ID, (version, r)
            assert p.high_watermark == -1 and not p.records, (version, r)

    # A known and an unknown id in one request.
    F = FetchRequest
    part = lambda p: F.FetchTopic.FetchPartition(partition=p, fetch_offset=0, partition_max_bytes=1 << 20,
                                                 current_leader_epoch=-1, log_start_offset=-1, last_fetched_epoch=-1)
    r = call(broker, F, 17, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0, session_id=0,
             session_epoch=-1, forgotten_topics_data=[], rack_id="",
             topics=[F.FetchTopic(topic_id=unknown, partitions=[part(0)]),
                     F.FetchTopic(topic_id=tid, partitions=[part(0)])])
    got = {uid(t.topic_id): [(p.error_code, p.high_watermark) for p in t.partitions] for t in r.responses}
    assert got == {unknown: [(UNKNOWN_TOPIC_ID, -1)], tid: [(NONE, 5)]}, r

    t = check(fetch(broker, 12, [(0, 0), (1, 0)], name="byid"), 12)
    assert t.topic == "byid", t

    for p, values in data.items():
        assert [m.value() for m in consume(broker.bootstrap, "byid", len(values), partition=p)] == values


# ---------------------------------------------------------------------------------------------
# 4. Produce v10 and v11
# ---------------------------------------------------------------------------------------------

def test_produce_v10_v11_append_and_answer_base_offsets(broker):
    """KIP-951 versions of Produce (v10, v11: same body, new tagged fields in the answer):
    each batch is appended and answered with its base offset (0, 2, 5, 6 for batches of 2, 3,
    1 and 2 records), no error, log start 0 and LogAppendTime -1 (a CreateTime topic); a
    partition the topic does not have gets UNKNOWN_TOPIC_OR_PARTITION; the records read back
    in order."""
    assert create_topic(broker, "prod").error_code == NONE
    batches = [(10, [b"a", b"b"]), (11, [b"c", b"d", b"e"]), (10, [b"f"]), (11, [b"g", b"h"])]
    base = 0
    for version, values in batches:
        p = produce_batch(broker, version, "prod", values)
        what = "v%d: %r" % (version, p)
        assert p.error_code == NONE, what
        assert p.base_offset == base, what
        assert p.log_start_offset == 0 and p.log_append_time_ms == -1, what
        assert p.error_message is None and p.record_errors == [], what
        base += len(values)

    for version in (10, 11):
        p = produce_batch(broker, version, "prod", [b"nowhere"], partition=7)
        assert p.error_code == UNKNOWN_TOPIC_OR_PARTITION, (version, p)

    r = fetch(broker, 12, [(0, 0)], name="prod")
    part = r.responses[0].partitions[0]
    assert part.error_code == NONE and part.high_watermark == base, part
    assert v2_values(bytes(part.records)) == list(enumerate(v for _, vs in batches for v in vs)), part


def produce_by_id(broker, tid, values, partition=0):
    """Produce v13 (KIP-516): one v2 batch to the topic with id `tid`; the topic's answer."""
    P = ProduceRequest
    r = call(broker, P, 13, transactional_id=None, acks=-1, timeout_ms=TIMEOUT * 1000, topic_data=[
        P.TopicProduceData(topic_id=tid, partition_data=[
            P.TopicProduceData.PartitionProduceData(index=partition, records=v2_batch(values))])])
    assert len(r.responses) == 1, r
    return r.responses[0]


def test_produce_v13_by_topic_id(broker):
    """Produce v13 names topics by id (KIP-516), as Kafka 4.1's does: the batch lands in the
    topic with that id and the answer names the id; an id no topic has is UNKNOWN_TOPIC_ID and
    creates nothing (auto-creation needs a name); a partition the topic lacks is
    UNKNOWN_TOPIC_OR_PARTITION."""
    assert create_topic(broker, "byid").error_code == NONE
    tid = topic_id(broker, "byid")
    t = produce_by_id(broker, tid, [b"x", b"y"])
    assert uuid.UUID(str(t.topic_id)) == uuid.UUID(str(tid)), t
    p = t.partition_responses[0]
    assert (p.error_code, p.base_offset) == (NONE, 0), p
    assert produce_by_id(broker, tid, [b"z"], partition=3).partition_responses[0].error_code == \
        UNKNOWN_TOPIC_OR_PARTITION
    stranger = uuid.uuid4()
    p = produce_by_id(broker, stranger, [b"lost"]).partition_responses[0]
    assert p.error_code == UNKNOWN_TOPIC_ID, p
    r = fetch(broker, 12, [(0, 0)], name="byid")
    assert v2_values(bytes(r.responses[0].partitions[0].records)) == [(0, b"x"), (1, b"y")]


# ---------------------------------------------------------------------------------------------
# 5. ListOffsets v8-v10
# ---------------------------------------------------------------------------------------------

def test_list_offsets_v8_to_v10_special_targets(broker):
    """KIP-405 and KIP-1005 in ListOffsets, with no tiered storage (as Kafka without remote
    storage answers): -4 (earliest local, v8+) answers the log start offset, the same as -2
    (here 2, after DeleteRecords); -5 (latest tiered, v9+) answers offset -1 and timestamp -1
    with no error; a target newer than the request's version gets UNSUPPORTED_VERSION (-3 at
    v6, -4 at v7, -5 at v8), and so does -6 (not a target of any version served)."""
    assert create_topic(broker, "lo").error_code == NONE
    base_ts = int(time.time() * 1000) - 60_000
    produce(broker.bootstrap, "lo", [(None, b"r%d" % i, base_ts + i) for i in range(6)])
    D = DeleteRecordsRequest
    r = call(broker, D, 2, timeout_ms=TIMEOUT * 1000, topics=[
        D.DeleteRecordsTopic(name="lo", partitions=[D.DeleteRecordsTopic.DeleteRecordsPartition(partition_index=0,
                                                                                              offset=2)])])
    p = r.topics[0].partitions[0]
    assert (p.error_code, p.low_watermark) == (NONE, 2), r

    for version in (8, 9, 10):
        earliest = list_offsets(broker, version, "lo", -2)
        assert (earliest.error_code, earliest.offset) == (NONE, 2), (version, earliest)
        local = list_offsets(broker, version, "lo", -4)
        assert local.error_code == NONE, (version, local)
        assert (local.offset, local.timestamp, local.leader_epoch) == \
               (earliest.offset, earliest.timestamp, earliest.leader_epoch), (version, local, earliest)
        latest = list_offsets(broker, version, "lo", -1)
        assert (latest.error_code, latest.offset) == (NONE, 6), (version, latest)
        largest = list_offsets(broker, version, "lo", -3)
        assert (largest.error_code, largest.offset, largest.timestamp) == (NONE, 5, base_ts + 5), \
            (version, largest)
    for version in (9, 10):
        tiered = list_offsets(broker, version, "lo", -5)
        assert (tiered.error_code, tiered.offset, tiered.timestamp) == (NONE, -1, -1), (version, tiered)

    too_new = [(6, -3), (7, -4), (8, -5), (7, -5)] + [(v, -6) for v in (8, 9, 10)]
    for version, target in too_new:
        p = list_offsets(broker, version, "lo", target)
        assert p.error_code == UNSUPPORTED_VERSION, "v%d target %d: %r" % (version, target, p)
        assert (p.offset, p.timestamp) == (-1, -1), "v%d target %d: %r" % (version, target, p)


# ---------------------------------------------------------------------------------------------
# 6. ApiVersions v3
# ---------------------------------------------------------------------------------------------

def supported_table():
    """{api key: (min, max)} from `protocol::SUPPORTED` in src/protocol/mod.rs."""
    with open(os.path.join(SOURCE, "src", "protocol", "mod.rs")) as f:
        src = f.read()
    keys = {name: int(n) for name, n in re.findall(r"pub const ([A-Z_]+): i16 = (\d+);", src)}
    table = src[src.index("pub const SUPPORTED"):]
    table = table[:table.index("];")]
    rows = re.findall(r"\(([A-Z_]+), (\d+), (\d+), (\d+|i16::MAX)\)", table)
    assert len(rows) > 20, table
    return {keys[name]: (int(lo), int(hi)) for name, lo, hi, _ in rows}


def test_api_versions_v3_advertise_the_supported_table(broker):
    """KIP-511 (ApiVersions v3) and KIP-516: the broker advertises exactly the table of
    src/protocol/mod.rs (`SUPPORTED`), with the newest versions: Produce 13, Fetch 18,
    ListOffsets 10, Metadata 13, CreateTopics 7, DeleteTopics 6; kafka-python infers a broker
    version from them of at least (4, 1) (Produce v13)."""
    table = supported_table()
    newest = {0: 13, 1: 18, 2: 10, 3: 13, 19: 7, 20: 6}
    assert {k: table[k][1] for k in newest} == newest, "src/protocol/mod.rs: %r" % table

    r = call(broker, ApiVersionsRequest, 3, client_software_name="conformance", client_software_version="1")
    assert r.error_code == NONE, r
    advertised = {a.api_key: (a.min_version, a.max_version) for a in r.api_keys}
    assert len(r.api_keys) == len(advertised), "an API advertised twice: %r" % r
    assert advertised == table, "advertised %r, SUPPORTED %r" % (advertised, table)
    # A new cluster's feature levels (KIP-584); at v3 the supported features whose lowest level
    # is 0 are left out, as Kafka leaves them out for older clients (KAFKA-17492).
    assert r.finalized_features_epoch == 0 and r.supported_features == [], r
    assert {f.name: (f.min_version_level, f.max_version_level) for f in r.finalized_features} == \
        {"group.version": (1, 1), "transaction.version": (2, 2)}, r

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=TIMEOUT * 1000)
    try:
        inferred = admin._client.check_version()
    finally:
        admin.close()
    print("kafka-python infers broker version", inferred)
    assert inferred >= (4, 1), inferred


# ---------------------------------------------------------------------------------------------
# 7. Cluster id and node id
# ---------------------------------------------------------------------------------------------

def cluster_ids(broker):
    """The cluster id answered by Metadata v12 and DescribeCluster v0-v2 (checked equal)."""
    ids = {"Metadata v12": metadata(broker, 12, []).cluster_id}
    for version in (0, 1, 2):
        r = call(broker, DescribeClusterRequest, version, include_cluster_authorized_operations=False,
                 endpoint_type=1, include_fenced_brokers=False)
        assert r.error_code == NONE, r
        ids["DescribeCluster v%d" % version] = r.cluster_id
    assert len(set(ids.values())) == 1, ids
    return ids["Metadata v12"]


def test_cluster_id_persisted_and_node_id_checked(broker):
    """KIP-78 cluster id, kept as Kafka keeps it: Metadata v12 and DescribeCluster v0-v2 answer
    the same cluster id, 22 characters of URL-safe base64 (a non-zero 16-byte UUID), equal to
    `cluster.id` in <data-dir>/meta.properties (node.id 0), and unchanged after a clean
    restart. A broker started with --set node.id=5 on that directory refuses to start: it exits
    non-zero with an error naming node.id, without changing meta.properties; node 0 then starts
    on it again with the same cluster id."""
    cid = cluster_ids(broker)
    assert isinstance(cid, str) and re.fullmatch(r"[A-Za-z0-9_-]{22}", cid), cid
    assert from_b64id(cid) != ZERO, cid
    props = meta_properties(broker)
    assert props["cluster.id"] == cid and props["node.id"] == "0", props

    broker.stop()
    broker.start()
    assert cluster_ids(broker) == cid, "the cluster id changed over a restart"
    broker.stop()

    with open(os.path.join(broker.data_dir, "meta.properties"), "rb") as f:
        before = f.read()
    log = os.path.join(os.path.dirname(broker.data_dir), "node5.log")
    with open(log, "wb") as err:
        proc = subprocess.Popen([BIN, "serve", "--data-dir", broker.data_dir, "--listen", broker.bootstrap,
                                 "--set", "node.id=5"], stdout=err, stderr=subprocess.STDOUT)
        try:
            code = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
            raise AssertionError("a broker with node.id=5 served a directory of node.id 0 (still running after 30 s)")
    with open(log, errors="replace") as f:
        output = f.read()
    assert code != 0, "node.id=5 exited with 0: " + output
    print("node.id=5 on node 0's directory: exit code %d," % code,
          " / ".join(line for line in output.splitlines() if "node.id" in line))
    assert re.search(r"node\.id\D{0,3}5\b", output) and re.search(r"node\.id\D{0,3}0\b", output), \
        "no error naming node.id (5, and the directory's 0): " + output
    with open(os.path.join(broker.data_dir, "meta.properties"), "rb") as f:
        assert f.read() == before, "the refused start changed meta.properties"

    broker.start()
    assert cluster_ids(broker) == cid


# ---------------------------------------------------------------------------------------------
# 8. Topic file v1 to v2
# ---------------------------------------------------------------------------------------------

def test_topic_file_v1_upgraded_with_an_id(broker):
    """KIP-516 on an upgrade: a topic written before topic ids (topic file version 1:
    `tidemark-topic 1`, partitions, overrides, CRC-32C; no id) is served after a start with its
    partitions, overrides and records intact and a new non-zero id (Metadata v12, and Fetch v17
    by that id); the file is rewritten at once as version 2 with that id (checksum right,
    everything else kept), and the id and the file stay the same over another restart."""
    overrides = {"retention.ms": "86400000", "segment.bytes": "1048576"}
    created = create_topic(broker, "legacy", partitions=2, configs=overrides)
    assert created.error_code == NONE, created
    old = uid(created.topic_id)
    data = {0: [b"a%d" % i for i in range(4)], 1: [b"b%d" % i for i in range(3)]}
    for p, values in data.items():
        produce(broker.bootstrap, "legacy", [(None, v, None) for v in values], partition=p)
    broker.stop()

    version, fields = parse_topic_file(topic_file(broker, "legacy"))
    assert version == 2 and fields == {"id": b64id(old), "partitions": "2", **overrides}, fields
    v1 = "tidemark-topic 1\npartitions=2\n" + "".join("%s=%s\n" % kv for kv in sorted(overrides.items()))
    v1 += "crc32c=%08x\n" % crc32c(v1.encode())
    assert parse_topic_file(v1) == (1, {"partitions": "2", **overrides})
    with open(os.path.join(broker.data_dir, "topics", "legacy.topic"), "w") as f:
        f.write(v1)

    broker.start()
    new = topic_id(broker, "legacy")
    assert new not in (ZERO, old), "the v1 topic was not given a new id: %s" % new
    r = metadata(broker, 12, [new])
    assert [(t.error_code, t.name, len(t.partitions)) for t in r.topics] == [(NONE, "legacy", 2)], r
    upgraded = topic_file(broker, "legacy")
    version, fields = parse_topic_file(upgraded)
    assert version == 2 and fields == {"id": b64id(new), "partitions": "2", **overrides}, upgraded
    assert upgraded.startswith("tidemark-topic 2\nid=%s\npartitions=2\n" % b64id(new)), upgraded

    def check_data():
        r = fetch(broker, 17, [(0, 0), (1, 0)], tid=new)
        parts = by_partition(r.responses[0])
        for p, values in data.items():
            assert parts[p].error_code == NONE and parts[p].high_watermark == len(values), parts[p]
            assert v2_values(bytes(parts[p].records)) == list(enumerate(values)), parts[p]
        for p, values in data.items():
            assert [m.value() for m in consume(broker.bootstrap, "legacy", len(values), partition=p)] == values

    check_data()

    broker.stop()
    assert topic_file(broker, "legacy") == upgraded, "the topic file changed over a restart"
    broker.start()
    assert topic_id(broker, "legacy") == new, "the upgraded topic's id changed over a restart"
    check_data()


def describe_topic_partitions(broker, names, limit=2000, cursor=None):
    """DescribeTopicPartitions v0: (topics as (error, name, id, [partition indexes]), next cursor
    as (topic, partition) or None)."""
    D = DescribeTopicPartitionsRequest
    r = call(broker, D, 0, topics=[D.TopicRequest(name=n) for n in names], response_partition_limit=limit,
             cursor=None if cursor is None else D.Cursor(topic_name=cursor[0], partition_index=cursor[1]))
    topics = [(t.error_code, t.name, t.topic_id, [p.partition_index for p in t.partitions]) for t in r.topics]
    nxt = None if r.next_cursor is None else (r.next_cursor.topic_name, r.next_cursor.partition_index)
    return topics, nxt


def test_describe_topic_partitions_pages_through_topics(broker):
    """KIP-966 DescribeTopicPartitions v0, as Kafka's broker answers it: topics in name order
    with their ids (as Metadata's) and every partition led by this node; a partition limit
    splits the answer, the cursor names where the next one starts, and following cursors
    visits every partition of every topic once; no topics asked means every topic; an asked
    topic that does not exist gets UNKNOWN_TOPIC_OR_PARTITION; a cursor naming a topic not
    asked for, or a negative partition, gets INVALID_REQUEST on every topic asked."""
    for name, n in (("dtp-b", 3), ("dtp-a", 2), ("dtp-c", 1)):
        create_topic(broker, name, partitions=n)
    ids = {name: topic_id(broker, name) for name in ("dtp-a", "dtp-b", "dtp-c")}
    topics, nxt = describe_topic_partitions(broker, ["dtp-c", "dtp-a", "dtp-b", "dtp-none"])
    assert nxt is None
    assert [(e, n, [*ps]) for e, n, _, ps in topics] == [
        (0, "dtp-a", [0, 1]), (0, "dtp-b", [0, 1, 2]), (0, "dtp-c", [0]), (3, "dtp-none", [])]
    assert all(uid(t[2]) == ids[t[1]] for t in topics[:3])
    # Two partitions at a time: every (topic, partition) exactly once, in order.
    seen, cursor, pages = [], None, 0
    while pages < 10:
        topics, cursor = describe_topic_partitions(broker, ["dtp-a", "dtp-b", "dtp-c"], limit=2, cursor=cursor)
        seen += [(n, p) for _, n, _, ps in topics for p in ps]
        pages += 1
        if cursor is None:
            break
    assert seen == [("dtp-a", 0), ("dtp-a", 1), ("dtp-b", 0), ("dtp-b", 1), ("dtp-b", 2), ("dtp-c", 0)]
    assert pages == 3
    # All topics (none asked), from a cursor in the middle.
    topics, nxt = describe_topic_partitions(broker, [], cursor=("dtp-b", 1))
    names = [n for _, n, _, _ in topics]
    assert names[:2] == ["dtp-b", "dtp-c"] and topics[0][3] == [1, 2] and "dtp-a" not in names, topics
    for bad in (("dtp-x", 0), ("dtp-a", -1)):
        topics, nxt = describe_topic_partitions(broker, ["dtp-a", "dtp-b"], cursor=bad)
        assert [(e, n) for e, n, _, _ in topics] == [(42, "dtp-a"), (42, "dtp-b")], (bad, topics)


# ---------------------------------------------------------------------------------------------
# Kafka 4.x versions of the group APIs and Metadata
# ---------------------------------------------------------------------------------------------

def test_find_coordinator_v5_v6_key_types(broker):
    """FindCoordinator as Kafka 4.1's KafkaApis.getCoordinator answers it: v5 and v6 find a
    group's coordinator as v4 does; a share partition's key (type 2, KIP-932) is INVALID_REQUEST
    below v6 or when not `groupId:topicId:partition`, and, well formed at v6, waits on a share
    state coordinator (COORDINATOR_NOT_AVAILABLE: none exists on this broker, as Kafka answers
    until `__share_group_state` exists); an unknown key type is INVALID_REQUEST on every key."""
    for version in (5, 6):
        r = call(broker, FindCoordinatorRequest, version, key_type=0, coordinator_keys=["g1", "g2"])
        got = [(c.key, c.error_code, c.node_id, c.port) for c in r.coordinators]
        assert got == [("g1", NONE, 0, broker.port), ("g2", NONE, 0, broker.port)], r
    # Kafka's Uuid.toString: the 16 bytes in URL-safe base64 without padding.
    share = "g:%s:0" % base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    r = call(broker, FindCoordinatorRequest, 5, key_type=2, coordinator_keys=[share])
    assert [(c.key, c.error_code) for c in r.coordinators] == [(share, INVALID_REQUEST)], r
    r = call(broker, FindCoordinatorRequest, 6, key_type=2, coordinator_keys=[share, "g:nope:0", "only-a-group"])
    got = [(c.key, c.error_code, c.node_id) for c in r.coordinators]
    assert got == [(share, COORDINATOR_NOT_AVAILABLE, -1), ("g:nope:0", INVALID_REQUEST, -1),
                   ("only-a-group", INVALID_REQUEST, -1)], r
    r = call(broker, FindCoordinatorRequest, 6, key_type=3, coordinator_keys=["a", "b"])
    assert [(c.key, c.error_code) for c in r.coordinators] == [("a", INVALID_REQUEST), ("b", INVALID_REQUEST)], r


def test_describe_groups_v6_and_metadata_v13(broker):
    """DescribeGroups v6 (KIP-1043): a group the broker does not know is Dead with
    GROUP_ID_NOT_FOUND and Kafka's message "Group <id> not found."; v5 answers it Dead with no
    error, as before. A group in use is described alike at v5 and v6. Metadata v13 (KIP-1102)
    carries a top-level ErrorCode, 0 as Kafka's broker answers it."""
    # The first FindCoordinator creates __consumer_offsets; until it is there the group's
    # coordinator is not available (COORDINATOR_NOT_AVAILABLE, retriable), as in Kafka.
    deadline = time.time() + TIMEOUT
    while True:
        call(broker, FindCoordinatorRequest, 4, key_type=0, coordinator_keys=["nope"])
        r = call(broker, DescribeGroupsRequest, 6, groups=["nope"], include_authorized_operations=False)
        if r.groups[0].error_code != COORDINATOR_NOT_AVAILABLE or time.time() > deadline:
            break
        time.sleep(0.1)
    g = r.groups[0]
    assert (g.error_code, g.error_message, g.group_id, g.group_state) == (69, "Group nope not found.", "nope", "Dead"), r
    r = call(broker, DescribeGroupsRequest, 5, groups=["nope"], include_authorized_operations=False)
    assert (r.groups[0].error_code, r.groups[0].group_state) == (NONE, "Dead"), r
    produce(broker.bootstrap, "dg", [(b"k", b"v", None)])
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "dg-group", "group.protocol": "classic",
                  "auto.offset.reset": "earliest"})
    c.subscribe(["dg"])
    try:
        deadline = time.time() + TIMEOUT
        while c.poll(0.5) is None and time.time() < deadline:
            pass
        for version in (5, 6):
            r = call(broker, DescribeGroupsRequest, version, groups=["dg-group"], include_authorized_operations=False)
            g = r.groups[0]
            assert (g.error_code, g.group_state, g.protocol_type, len(g.members)) == (NONE, "Stable", "consumer", 1), r
    finally:
        c.close()
    r = call(broker, MetadataRequest, 13, topics=None, allow_auto_topic_creation=False,
             include_topic_authorized_operations=False)
    assert r.error_code == NONE and "dg" in [t.name for t in r.topics], r


def test_list_transactions_v2_pattern(broker):
    """ListTransactions v2 (KIP-1152): TransactionalIdPattern keeps the ids the regular
    expression matches whole, as Kafka's Pattern.matcher(id).matches() (a prefix alone matches
    nothing); null or empty lists all; one that does not compile is INVALID_REGULAR_EXPRESSION
    (128). v1 lists all, as before."""
    from kafka.protocol.admin import ListTransactionsRequest
    from test_transactions import txn_producer
    producers = [txn_producer(broker.bootstrap, tid) for tid in ("alpha-1", "alpha-2", "beta-1")]

    def listed(version, **fields):
        r = call(broker, ListTransactionsRequest, version, state_filters=[], producer_id_filters=[],
                 duration_filter=-1, **fields)
        return r.error_code, sorted(t.transactional_id for t in r.transaction_states)

    assert listed(2, transactional_id_pattern="alpha-.*") == (NONE, ["alpha-1", "alpha-2"])
    assert listed(2, transactional_id_pattern="alpha") == (NONE, [])
    assert listed(2, transactional_id_pattern=".*-1") == (NONE, ["alpha-1", "beta-1"])
    assert listed(2, transactional_id_pattern=None) == (NONE, ["alpha-1", "alpha-2", "beta-1"])
    assert listed(2, transactional_id_pattern="") == (NONE, ["alpha-1", "alpha-2", "beta-1"])
    assert listed(2, transactional_id_pattern="[") == (128, [])
    assert listed(1) == (NONE, ["alpha-1", "alpha-2", "beta-1"])
    for p in producers:
        p.flush(1)


def test_alter_partition_reassignments_v1_and_fetch_v18(broker):
    """AlterPartitionReassignments v1 (KIP-860): with AllowReplicationFactorChange false, a
    target of another size than the partition's replication factor is INVALID_REPLICATION_FACTOR
    (38) with Kafka's message; the flag is echoed. Fetch v18 (KIP-1166): a consumer's fetch reads
    as v17's does (the request's HighWatermark tag is a follower's)."""
    from kafka.protocol.admin import AlterPartitionReassignmentsRequest
    produce(broker.bootstrap, "apr", [(None, b"v%d" % i, None) for i in range(3)])
    r = call(broker, AlterPartitionReassignmentsRequest, 1, timeout_ms=10000, allow_replication_factor_change=False,
             topics=[("apr", [(0, [0, 1])])])
    p = r.responses[0].partitions[0]
    assert (r.allow_replication_factor_change, p.error_code, p.error_message) == (
        False, 38, "The replication factor is changed from 1 to 2"), r
    r = call(broker, AlterPartitionReassignmentsRequest, 1, timeout_ms=10000, allow_replication_factor_change=True,
             topics=[("apr", [(0, [0, 1])])])
    assert r.allow_replication_factor_change is True and r.responses[0].partitions[0].error_code != 38, r
    tid = metadata(broker, 12, ["apr"]).topics[0].topic_id
    r = call(broker, FetchRequest, 18, replica_id=-1, max_wait_ms=100, min_bytes=1, max_bytes=1 << 20,
             isolation_level=0, session_id=0, session_epoch=-1,
             topics=[(tid, [(0, -1, 0, -1, -1, 1 << 20)])], forgotten_topics_data=[], rack_id="")
    part = r.responses[0].partitions[0]
    assert part.error_code == NONE and part.high_watermark == 3 and part.records, r


# ---------------------------------------------------------------------------------------------
# The ApiVersions table against Kafka 4.1's
# ---------------------------------------------------------------------------------------------

# What a Kafka 4.1.0 broker advertises in ApiVersions with its defaults (no telemetry receiver,
# unstable versions off): (min, max) per API key. Read from Kafka's message definitions
# (clients/src/main/resources/common/message/*Request.json, the APIs whose "listeners" include
# "broker") and ApiVersionsResponse.filterApis at commit 13f70256db3c ("Bump version to
# 4.1.0"); Produce's min is advertised as 0 there (KAFKA-18659).
KAFKA_41 = {
    0: (0, 13), 1: (4, 18), 2: (1, 10), 3: (0, 13), 8: (2, 9), 9: (1, 9), 10: (0, 6), 11: (0, 9),
    12: (0, 4), 13: (0, 5), 14: (0, 5), 15: (0, 6), 16: (0, 5), 17: (0, 1), 18: (0, 4), 19: (2, 7),
    20: (1, 6), 21: (0, 2), 22: (0, 5), 23: (2, 4), 24: (0, 5), 25: (0, 4), 26: (0, 5), 27: (1, 1),
    28: (0, 5), 29: (1, 3), 30: (1, 3), 31: (1, 3), 32: (1, 4), 33: (0, 2), 34: (1, 2), 35: (1, 4),
    36: (0, 2), 37: (0, 3), 38: (1, 3), 39: (1, 2), 40: (1, 2), 41: (1, 3), 42: (0, 2), 43: (0, 2),
    44: (0, 1), 45: (0, 1), 46: (0, 0), 47: (0, 0), 48: (0, 1), 49: (0, 1), 50: (0, 0), 51: (0, 0),
    55: (0, 2), 57: (0, 2), 60: (0, 2), 61: (0, 0), 64: (0, 0), 65: (0, 0), 66: (0, 2), 68: (0, 1),
    69: (0, 1), 74: (0, 1), 75: (0, 0), 76: (1, 1), 77: (1, 1), 78: (1, 1), 79: (1, 1), 80: (0, 0),
    81: (0, 0), 83: (0, 0), 84: (0, 0), 85: (0, 0), 86: (0, 0), 87: (0, 0), 90: (0, 0), 91: (0, 0),
    92: (0, 0),
}

# APIs a Kafka 4.1 broker serves that tidemark does not, each with the reason.
LEFT_OUT = {
    34: "AlterReplicaLogDirs: moving replicas between log directories comes with several data directories",
    38: "CreateDelegationToken: delegation tokens come with the cluster's own security",
    39: "RenewDelegationToken: delegation tokens come with the cluster's own security",
    40: "ExpireDelegationToken: delegation tokens come with the cluster's own security",
    41: "DescribeDelegationToken: delegation tokens come with the cluster's own security",
    76: "ShareGroupHeartbeat: share groups (KIP-932)",
    77: "ShareGroupDescribe: share groups (KIP-932)",
    78: "ShareFetch: share groups (KIP-932)",
    79: "ShareAcknowledge: share groups (KIP-932)",
    83: "InitializeShareGroupState: share groups (KIP-932)",
    84: "ReadShareGroupState: share groups (KIP-932)",
    85: "WriteShareGroupState: share groups (KIP-932)",
    86: "DeleteShareGroupState: share groups (KIP-932)",
    87: "ReadShareGroupStateSummary: share groups (KIP-932)",
    90: "DescribeShareGroupOffsets: share groups (KIP-932)",
    91: "AlterShareGroupOffsets: share groups (KIP-932)",
    92: "DeleteShareGroupOffsets: share groups (KIP-932)",
}

# APIs tidemark serves below Kafka 4.1's newest version: (tidemark's newest, the reason).
BEHIND = {}


def test_api_versions_against_kafka_4_1(broker):
    """Every API a Kafka 4.1 broker advertises is advertised here at least at Kafka 4.1's newest
    version (and from no later a version than its oldest), except those in LEFT_OUT and BEHIND,
    each with its reason; nothing is advertised that Kafka 4.1 does not serve. The lists are
    exact: an API that catches up must leave them."""
    r = call(broker, ApiVersionsRequest, 3, client_software_name="conformance", client_software_version="1")
    ours = {a.api_key: (a.min_version, a.max_version) for a in r.api_keys}
    assert not set(ours) - set(KAFKA_41), "advertised, not served by Kafka 4.1: %r" % sorted(set(ours) - set(KAFKA_41))
    missing = sorted(set(KAFKA_41) - set(ours))
    assert missing == sorted(LEFT_OUT), "not served: %r; LEFT_OUT lists %r" % (missing, sorted(LEFT_OUT))
    behind = {k: ours[k][1] for k, (lo, hi) in KAFKA_41.items() if k in ours and ours[k][1] < hi}
    assert behind == {k: v for k, (v, _) in BEHIND.items()}, "behind Kafka 4.1: %r" % behind
    too_new_min = {k: ours[k][0] for k, (lo, hi) in KAFKA_41.items() if k in ours and ours[k][0] > lo}
    assert not too_new_min, "oldest version newer than Kafka 4.1's: %r" % too_new_min


def test_list_config_resources(broker):
    """ListConfigResources (KIP-1142) as Kafka 4.1 answers it: v1 lists, in Kafka's order, each
    broker's id as a broker logger (8) and as a broker (4), then every topic (2), internal ones
    included; the types asked filter it; a type it does not list is UNSUPPORTED_VERSION (35); v0
    lists client metrics resources only (tidemark has none)."""
    from kafka.protocol.admin import ListConfigResourcesRequest
    create(broker.bootstrap, "lcr")

    def listed(version, **fields):
        r = call(broker, ListConfigResourcesRequest, version, **fields)
        return r.error_code, [(c.resource_name, getattr(c, "resource_type", 16)) for c in r.config_resources]

    error, all_types = listed(1, resource_types=[])
    assert error == NONE and all_types[:2] == [("0", 8), ("0", 4)], all_types
    assert ("lcr", 2) in all_types[2:] and {t for _, t in all_types[2:]} == {2}, all_types
    assert listed(1, resource_types=[4]) == (NONE, [("0", 4)])
    assert listed(1, resource_types=[2, 16, 32])[1] == all_types[2:]
    assert listed(1, resource_types=[3]) == (UNSUPPORTED_VERSION, [])
    assert listed(0) == (NONE, [])


# ---------------------------------------------------------------------------------------------
# Feature levels (KIP-584): ApiVersions v4 and UpdateFeatures
# ---------------------------------------------------------------------------------------------

def features(broker):
    """ApiVersions v4: ({supported name: (min, max)}, {finalized name: level}, epoch)."""
    r = call(broker, ApiVersionsRequest, 4, client_software_name="conformance", client_software_version="1")
    assert r.error_code == NONE, r
    supported = {f.name: (f.min_version, f.max_version) for f in r.supported_features}
    finalized = {}
    for f in r.finalized_features:
        assert f.min_version_level == f.max_version_level, f
        finalized[f.name] = f.max_version_level
    return supported, finalized, r.finalized_features_epoch


def update_features(broker, version, updates, validate_only=False):
    """UpdateFeatures: updates as [(feature, level, upgrade type)] (v0: type 2 or 3 is
    AllowDowngrade); (error code, message, {feature: code})."""
    U = UpdateFeaturesRequest.FeatureUpdateKey
    keys = [U(feature=f, max_version_level=level, allow_downgrade=kind != 1, upgrade_type=kind)
            for f, level, kind in updates]
    fields = dict(timeout_ms=60000, feature_updates=keys)
    if version >= 1:
        fields["validate_only"] = validate_only
    r = call(broker, UpdateFeaturesRequest, version, **fields)
    results = {x.feature: x.error_code for x in (r.results or [])}
    return r.error_code, r.error_message, results


def test_update_features_as_kafka_does(start_broker):
    """The feature levels as Kafka 4.1 keeps them: a new cluster finalizes group.version 1 and
    transaction.version 2 at epoch 0 (ApiVersions v4 lists both supported ranges, 0-1 and 0-2);
    UpdateFeatures refuses a downgrade without a downgrade type, a level outside the range and
    an unknown feature (INVALID_UPDATE_VERSION, Kafka's message) and then changes nothing (all
    or none); ValidateOnly changes nothing; a safe downgrade to 0 takes a feature out of the
    finalized list and counts the epoch up; the levels survive a restart; at group.version 0
    the consumer group protocol answers UNSUPPORTED_VERSION, and an upgrade turns it on again.
    kafka-python's admin reads and sets the same."""
    b = start_broker()
    assert features(b) == ({"group.version": (0, 1), "transaction.version": (0, 2)},
                           {"group.version": 1, "transaction.version": 2}, 0)
    c, m, res = update_features(b, 1, [("transaction.version", 1, 1)])
    assert c == INVALID_UPDATE_VERSION and res == {}, (c, m, res)
    assert m.startswith("Invalid update version 1 for feature transaction.version. Can't downgrade"), m
    c, m, _ = update_features(b, 1, [("transaction.version", 3, 1)])
    assert c == INVALID_UPDATE_VERSION and "only supports versions [0-2]" in m, m
    c, m, _ = update_features(b, 2, [("group.version", 0, 2), ("metadata.version", 27, 1)])
    assert c == INVALID_UPDATE_VERSION and "does not support this feature" in m, m
    assert features(b)[1] == {"group.version": 1, "transaction.version": 2}, "all or none"
    assert update_features(b, 1, [("transaction.version", 0, 2)], validate_only=True)[0] == NONE
    assert features(b)[2] == 0, "validate only"
    assert update_features(b, 1, [("transaction.version", 1, 2)]) == (NONE, None, {"transaction.version": NONE})
    assert update_features(b, 0, [("group.version", 0, 2)])[0] == NONE, "v0: AllowDowngrade"
    assert features(b)[1:] == ({"transaction.version": 1}, 2)
    # The consumer group protocol is off at group.version 0.
    until_coordinator(b, "g848")
    assert consumer_heartbeat_error(b, "g848") == UNSUPPORTED_VERSION
    b.stop()
    b.start()
    assert features(b)[1:] == ({"transaction.version": 1}, 2), "kept across a restart"
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap, request_timeout_ms=TIMEOUT * 1000)
    try:
        assert admin.update_features({"group.version": 1, "transaction.version": 2}) == \
            {"group.version": "OK", "transaction.version": "OK"}
        described = admin.describe_features()
        assert described["transaction.version"]["finalized"] == (2, 2), described
        assert described["group.version"]["supported"] == (0, 1), described
    finally:
        admin.close()
    assert features(b)[1:] == ({"group.version": 1, "transaction.version": 2}, 3)
    assert consumer_heartbeat_error(b, "g848") == NONE


def until_coordinator(broker, group):
    """FindCoordinator for a group until `__consumer_offsets` exists."""
    wait_until(lambda: call(broker, FindCoordinatorRequest, 3, key=group, key_type=0).error_code == NONE,
               "the group coordinator")


def consumer_heartbeat_error(broker, group):
    """A first ConsumerGroupHeartbeat v0 (KIP-848; kafka-python has no class for it, so its
    frame is written here): the answer's error code."""
    def cstr(v):
        b = v.encode()
        return bytes([len(b) + 1]) + b
    corr = next(_correlation)
    header = struct.pack(">hhih", 68, 0, corr, len("conformance")) + b"conformance" + b"\x00"
    body = (cstr(group) + cstr("") + struct.pack(">i", 0) + b"\x00" + b"\x00" + struct.pack(">i", 30000)
            + bytes([2]) + cstr("t") + b"\x00" + bytes([1]) + b"\x00")
    frame = header + body
    with socket.create_connection(("127.0.0.1", broker.port), timeout=TIMEOUT) as s:
        s.sendall(struct.pack(">i", len(frame)) + frame)
        size, = struct.unpack(">i", _recv_exact(s, 4))
        answer = _recv_exact(s, size)
    got_corr, tags = struct.unpack(">ib", answer[:5])
    assert (got_corr, tags) == (corr, 0), answer
    _throttle, error_code = struct.unpack(">ih", answer[5:11])
    return error_code
