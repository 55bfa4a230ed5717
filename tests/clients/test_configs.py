"""Settings through Kafka's admin APIs: DescribeConfigs lists every standard topic and
broker setting with its value, source, type, synonyms and documentation; dynamic broker settings
(num.partitions, auto.create.topics.enable, the log.* topic defaults, connection limits) change
at runtime through IncrementalAlterConfigs and AlterConfigs and survive restarts; Kafka settings
tidemark cannot honour are refused, those it applies (min.insync.replicas,
message.downconversion.enable) behave as in Kafka. Driven by confluent-kafka's and
kafka-python's admin clients and raw requests against the real binary.
"""
import socket
import struct
import time

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType

from kafka import KafkaAdminClient
from kafka.admin import ConfigResource as KConfigResource, ConfigResourceType

from test_admin import CR, partition_count
from test_bad_input import NONE, Conn, s16, v2_batch
from test_clients import TIMEOUT, create, produce

INVALID_CONFIG = 40
INVALID_REQUEST = 42
UNSUPPORTED_VERSION = 35

# Kafka 3.9's topic settings (LogConfig): DescribeConfigs of a topic lists each of them.
KAFKA_TOPIC_KEYS = {
    "cleanup.policy": "LIST", "compression.type": "STRING", "compression.gzip.level": "INT",
    "compression.lz4.level": "INT", "compression.zstd.level": "INT", "delete.retention.ms": "LONG",
    "file.delete.delay.ms": "LONG", "flush.messages": "LONG", "flush.ms": "LONG",
    "follower.replication.throttled.replicas": "LIST", "index.interval.bytes": "INT",
    "leader.replication.throttled.replicas": "LIST", "local.retention.bytes": "LONG",
    "local.retention.ms": "LONG", "max.compaction.lag.ms": "LONG", "max.message.bytes": "INT",
    "message.downconversion.enable": "BOOLEAN", "message.format.version": "STRING",
    "message.timestamp.after.max.ms": "LONG", "message.timestamp.before.max.ms": "LONG",
    "message.timestamp.difference.max.ms": "LONG", "message.timestamp.type": "STRING",
    "min.cleanable.dirty.ratio": "DOUBLE", "min.compaction.lag.ms": "LONG", "min.insync.replicas": "INT",
    "preallocate": "BOOLEAN", "remote.log.copy.disable": "BOOLEAN", "remote.log.delete.on.disable": "BOOLEAN",
    "remote.storage.enable": "BOOLEAN", "retention.bytes": "LONG", "retention.ms": "LONG",
    "segment.bytes": "INT", "segment.index.bytes": "INT", "segment.jitter.ms": "LONG", "segment.ms": "LONG",
    "unclean.leader.election.enable": "BOOLEAN",
}

# Common broker settings a broker's DescribeConfigs lists, and whether they are read-only.
KAFKA_BROKER_KEYS = {
    "node.id": True, "broker.id": True, "log.dirs": True, "listeners": True, "advertised.listeners": True,
    "num.partitions": False, "auto.create.topics.enable": False, "default.replication.factor": True,
    "delete.topic.enable": True, "socket.request.max.bytes": True, "queued.max.request.bytes": True,
    "fetch.max.bytes": True, "connections.max.idle.ms": True, "max.connections": False,
    "max.connections.per.ip": False, "message.max.bytes": False, "log.retention.ms": False,
    "log.retention.minutes": True, "log.retention.hours": True, "log.retention.bytes": False,
    "log.segment.bytes": False, "log.roll.ms": False, "log.roll.hours": True, "log.cleanup.policy": False,
    "log.flush.interval.messages": False, "log.flush.interval.ms": False, "log.index.interval.bytes": False,
    "log.index.size.max.bytes": False, "log.message.timestamp.type": False, "min.insync.replicas": False,
    "unclean.leader.election.enable": False, "compression.type": False, "log.retention.check.interval.ms": True,
    "group.initial.rebalance.delay.ms": True, "offsets.topic.num.partitions": True,
}


def kadmin(broker):
    return KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=TIMEOUT * 1000)


def describe(broker, rtype, name):
    """kafka-python's view of one resource: {key: entry dict} (every key, with synonyms)."""
    k = kadmin(broker)
    try:
        out = k.describe_configs([KConfigResource(rtype, name)], include_synonyms=True, config_filter="all")
    finally:
        k.close()
    kind = "topic" if rtype == ConfigResourceType.TOPIC else "broker"
    return out[kind][name]


def describe_raw(broker, rtype, name):
    """DescribeConfigs v1 of one resource (for the cluster-default broker resource "", which the
    admin clients cannot name): {key: (value, source)}, or raises on an error code."""
    body = struct.pack(">i", 1) + struct.pack(">b", rtype) + s16(name) + struct.pack(">i", -1) + b"\x00"
    with Conn(broker) as c:
        r = c.call(32, 1, body)
    r.i32()  # throttle time
    assert r.i32() == 1
    error, message, _, _ = r.i16(), r.nstring(), r.i8(), r.string()
    if error != NONE:
        raise AssertionError("DescribeConfigs error %d: %s" % (error, message))
    out = {}
    for _ in range(r.i32()):
        key, value, _, source, _ = r.string(), r.nstring(), r.i8(), r.i8(), r.i8()
        for _ in range(r.i32()):
            r.string(), r.nstring(), r.i8()
        out[key] = (value, source)
    return out


def incremental_raw(broker, rtype, name, *entries):
    """IncrementalAlterConfigs v0 of (key, op, value) on one resource: (error code, message)."""
    body = struct.pack(">i", 1) + struct.pack(">b", rtype) + s16(name) + struct.pack(">i", len(entries))
    for k, op, v in entries:
        body += s16(k) + struct.pack(">b", op) + s16(v)
    body += b"\x00"
    with Conn(broker) as c:
        r = c.call(44, 0, body)
    r.i32()
    assert r.i32() == 1
    return r.i16(), r.nstring()


def incremental(broker, rtype, name, *entries):
    """confluent-kafka IncrementalAlterConfigs of (key, op, value) on one resource; the error
    (KafkaError) or None."""
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    res = ConfigResource(rtype, name, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=op) for k, op, v in entries])
    try:
        a.incremental_alter_configs([res])[res].result(TIMEOUT)
        return None
    except KafkaException as e:
        return e.args[0]


def test_describe_topic_configs(start_broker):
    """A broker started with log.retention.hours=48: a topic with retention.ms=5000 of its own
    lists every one of Kafka's 36 topic settings (and tidemark's), each with Kafka's type.
    retention.ms is 5000 from the topic (TOPIC_CONFIG), its synonyms the topic's value, the
    broker's log.retention.hours=48 (STATIC_BROKER_CONFIG) and log.retention.ms's default; on a
    topic without it, retention.ms is 172800000 from the static broker setting. A setting never
    set (segment.bytes) is DEFAULT_CONFIG with its default. With include_documentation (raw
    DescribeConfigs v4), every entry carries documentation."""
    b = start_broker("--set", "log.retention.hours=48")
    create(b.bootstrap, "own", config={"retention.ms": "5000"})
    create(b.bootstrap, "plain")
    own = describe(b, ConfigResourceType.TOPIC, "own")
    missing = set(KAFKA_TOPIC_KEYS) - set(own)
    assert not missing, "missing topic settings: %s" % sorted(missing)
    for key, kind in KAFKA_TOPIC_KEYS.items():
        assert own[key]["config_type"] == kind, (key, own[key])
    r = own["retention.ms"]
    assert (r["value"], r["config_source"]) == ("5000", "DYNAMIC_TOPIC_CONFIG"), r
    assert [(s["name"], s["value"], s["source"]) for s in r["synonyms"]] == [
        ("retention.ms", "5000", "DYNAMIC_TOPIC_CONFIG"), ("log.retention.hours", "48", "STATIC_BROKER_CONFIG"),
        ("log.retention.ms", "604800000", "DEFAULT_CONFIG")], r["synonyms"]
    plain = describe(b, ConfigResourceType.TOPIC, "plain")
    assert (plain["retention.ms"]["value"], plain["retention.ms"]["config_source"]) == ("172800000", "STATIC_BROKER_CONFIG")
    assert (plain["segment.bytes"]["value"], plain["segment.bytes"]["config_source"]) == ("1073741824", "DEFAULT_CONFIG")
    assert plain["cleanup.policy"]["value"] == "delete" and plain["preallocate"]["value"] == "true"
    # Raw DescribeConfigs v4: resources [(TOPIC, plain, null keys)], include_synonyms false,
    # include_documentation true.
    body = b"\x02" + struct.pack(">b", 2) + b"\x06plain" + b"\x00" + b"\x00" + b"\x00" + b"\x01" + b"\x00"
    with Conn(b) as c:
        r = CR(c.call(32, 4, body, flexible=True).buf)
        r.tags()
        r.i32()
        assert r.count() == 1
        assert (r.i16(), r.nstring_c(), r.i8(), r.cstring()) == (NONE, None, 2, "plain")
        docs = {}
        for _ in range(r.count()):
            name, value, read_only, source, sensitive = r.cstring(), r.nstring_c(), r.i8(), r.i8(), r.i8()
            assert r.count() == 0, "no synonyms asked"
            ctype, doc = r.i8(), r.nstring_c()
            r.tags()
            docs[name] = doc
        assert all(docs[k] for k in KAFKA_TOPIC_KEYS), [k for k in KAFKA_TOPIC_KEYS if not docs.get(k)]


def test_describe_broker_configs(broker):
    """DescribeConfigs of broker "0" lists the common broker settings with Kafka's read-only
    flags (the first broker name of a topic setting can change at runtime, log.retention.hours
    cannot); resource "" (cluster defaults) lists only what is set there (nothing yet);
    another broker id is INVALID_REQUEST."""
    cfg = describe(broker, ConfigResourceType.BROKER, "0")
    missing = set(KAFKA_BROKER_KEYS) - set(cfg)
    assert not missing, "missing broker settings: %s" % sorted(missing)
    for key, ro in KAFKA_BROKER_KEYS.items():
        assert cfg[key]["read_only"] == ro, (key, cfg[key])
    assert cfg["num.partitions"]["value"] == "1" and cfg["log.dirs"]["value"].endswith("data")
    assert describe_raw(broker, 4, "") == {}
    with pytest.raises(AssertionError) as e:
        describe_raw(broker, 4, "7")
    assert "error %d: Unexpected broker id" % INVALID_REQUEST in str(e.value), e.value


def test_dynamic_broker_configs(broker):
    """IncrementalAlterConfigs on broker "0": num.partitions=3 makes the next auto-created topic
    3 partitions wide; auto.create.topics.enable=false stops auto-creation. On the cluster
    default resource "" (kafka-python), log.retention.ms=3600000 reaches every topic without its
    own value (source DYNAMIC_DEFAULT_BROKER_CONFIG) but not one with its own (raw
    IncrementalAlterConfigs: the admin clients cannot name resource ""); a read-only
    setting is INVALID_REQUEST ("Cannot update these configs dynamically"), an unknown one
    INVALID_CONFIG, a bad value INVALID_REQUEST, and none of them changes anything. After a
    restart the dynamic settings are still in force; DELETE returns num.partitions to its
    default."""
    assert incremental(broker, ResourceType.BROKER, "0", ("num.partitions", AlterConfigOpType.SET, "3")) is None
    produce(broker.bootstrap, "auto-three", [(None, b"x", None)])
    assert partition_count(broker, "auto-three") == 3
    assert incremental(broker, ResourceType.BROKER, "0", ("auto.create.topics.enable", AlterConfigOpType.SET, "false")) is None
    p = Producer({"bootstrap.servers": broker.bootstrap, "message.timeout.ms": 3000})
    reports = []
    p.produce("never-created", value=b"x", on_delivery=lambda e, m: reports.append(e))
    p.flush(10)
    assert reports and reports[0] is not None, "a topic was auto-created with auto.create.topics.enable=false"
    assert "never-created" not in AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=TIMEOUT).topics
    create(broker.bootstrap, "follows")
    create(broker.bootstrap, "keeps", config={"retention.ms": "5000"})
    assert incremental_raw(broker, 4, "", ("log.retention.ms", 0, "3600000")) == (NONE, None)
    follows = describe(broker, ConfigResourceType.TOPIC, "follows")["retention.ms"]
    assert (follows["value"], follows["config_source"]) == ("3600000", "DYNAMIC_DEFAULT_BROKER_CONFIG"), follows
    assert describe(broker, ConfigResourceType.TOPIC, "keeps")["retention.ms"]["value"] == "5000"
    assert describe_raw(broker, 4, "") == {"log.retention.ms": ("3600000", 3)}
    for entries, code, text in (
        ([("socket.request.max.bytes", AlterConfigOpType.SET, "5000")], "INVALID_REQUEST", "Cannot update these configs dynamically"),
        ([("log.retention.hours", AlterConfigOpType.SET, "5")], "INVALID_REQUEST", "Cannot update these configs dynamically"),
        ([("no.such.setting", AlterConfigOpType.SET, "5")], "INVALID_CONFIG", "no.such.setting"),
        ([("num.partitions", AlterConfigOpType.SET, "0")], "INVALID_REQUEST", "num.partitions"),
        ([("log.cleanup.policy", AlterConfigOpType.APPEND, "compacted")], "INVALID_REQUEST", "cleanup.policy"),
    ):
        e = incremental(broker, ResourceType.BROKER, "0", *entries)
        assert e is not None and e.name() == code and text in e.str(), (entries, e)
    broker.stop()
    broker.start()
    cfg = describe(broker, ConfigResourceType.BROKER, "0")
    assert (cfg["num.partitions"]["value"], cfg["num.partitions"]["config_source"]) == ("3", "DYNAMIC_BROKER_CONFIG")
    assert cfg["auto.create.topics.enable"]["value"] == "false"
    assert describe(broker, ConfigResourceType.TOPIC, "follows")["retention.ms"]["value"] == "3600000"
    assert incremental(broker, ResourceType.BROKER, "0", ("num.partitions", AlterConfigOpType.DELETE, None)) is None
    assert describe(broker, ConfigResourceType.BROKER, "0")["num.partitions"]["value"] == "1"


def test_dynamic_connection_limits(broker):
    """max.connections.per.ip=2 set at runtime on broker "0": a third connection from 127.0.0.1
    is closed at once; deleting the setting lets it in again."""
    assert incremental(broker, ResourceType.BROKER, "0", ("max.connections.per.ip", AlterConfigOpType.SET, "2")) is None
    time.sleep(0.3)  # the admin client's own connection closes
    held = []
    try:
        deadline = time.time() + 5
        while len(held) < 2:
            c = Conn(broker)
            if _answers(c):
                held.append(c)
            else:
                c.close()
                assert time.time() < deadline, "two connections were not served"
                time.sleep(0.1)
        extra = Conn(broker)
        assert not _answers(extra), "a third connection with max.connections.per.ip=2"
        extra.close()
    finally:
        for c in held:
            c.close()
    time.sleep(0.3)
    assert incremental(broker, ResourceType.BROKER, "0", ("max.connections.per.ip", AlterConfigOpType.DELETE, None)) is None
    conns = [Conn(broker) for _ in range(4)]
    try:
        assert all(_answers(c) for c in conns)
    finally:
        for c in conns:
            c.close()


def _answers(c):
    from test_bad_input import api_versions_v2
    try:
        return api_versions_v2(c)[0] == NONE
    except (OSError, ConnectionError, AssertionError, struct.error):
        return False


def test_settings_kafka_has_and_tidemark_applies(broker):
    """min.insync.replicas=2 on a one-replica topic: acks=all produce fails with
    NOT_ENOUGH_REPLICAS and acks=1 succeeds, as in Kafka. message.downconversion.enable=false:
    a Fetch v2 (magic 1 reader) of v2 batches gets UNSUPPORTED_VERSION, while v4 reads them.
    compression.type=gzip and remote.storage.enable=true are refused (INVALID_CONFIG, naming
    what tidemark supports), as is cleanup.policy=compacted (not a policy); cleanup.policy=compact
    is taken (compaction: test_compaction.py); settings that change nothing on one node
    (unclean.leader.election.enable) are taken and shown."""
    create(broker.bootstrap, "isr", config={"min.insync.replicas": "2"})
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "message.timeout.ms": 5000, "retries": 0})
    reports = []
    p.produce("isr", value=b"x", on_delivery=lambda e, m: reports.append(e))
    p.flush(10)
    assert reports and reports[0] is not None and reports[0].name() == "NOT_ENOUGH_REPLICAS", reports
    assert produce(broker.bootstrap, "isr", [(None, b"y", None)], acks="1")[0][0] is None
    create(broker.bootstrap, "noconv", config={"message.downconversion.enable": "false"})
    produce(broker.bootstrap, "noconv", [(None, b"v2", None)])
    # Fetch v2: replica, max wait, min bytes, [topic, [partition, offset, max bytes]].
    body = struct.pack(">iii", -1, 0, 0) + struct.pack(">i", 1) + s16("noconv") + struct.pack(">i", 1)
    body += struct.pack(">iqi", 0, 0, 1 << 20)
    with Conn(broker) as c:
        r = c.call(1, 2, body)
        r.i32()  # throttle time
        assert r.i32() == 1 and r.string() == "noconv" and r.i32() == 1
        assert (r.i32(), r.i16()) == (0, UNSUPPORTED_VERSION)
        from test_bad_input import fetch, v2_values
        error, hw, records = fetch(c, "noconv", 0, 0)  # Fetch v4: magic 2, no conversion
        assert (error, v2_values(records)) == (NONE, [(0, b"v2")])
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    for key, value, why in (
        ("cleanup.policy", "compacted", "must be a list of compact, delete"),
        ("compression.type", "gzip", "tidemark supports only"),
        ("remote.storage.enable", "true", "tidemark supports only"),
    ):
        fs = a.create_topics([NewTopic("refused", 1, 1, config={key: value})], request_timeout=TIMEOUT)
        with pytest.raises(KafkaException) as e:
            fs["refused"].result(TIMEOUT)
        assert e.value.args[0].name() == "INVALID_CONFIG" and why in e.value.args[0].str(), e.value
    create(broker.bootstrap, "inert", config={"unclean.leader.election.enable": "true"})
    u = describe(broker, ConfigResourceType.TOPIC, "inert")["unclean.leader.election.enable"]
    assert (u["value"], u["config_source"]) == ("true", "DYNAMIC_TOPIC_CONFIG")


def test_version_valued_settings_take_kafkas_forms(start_broker):
    """message.format.version (a topic's, and log.message.format.version as the broker's
    default) and inter.broker.protocol.version take every form Kafka 3.x's
    MetadataVersion.fromVersionString takes (0.10.0, 0.10.0.0, 0.10.0-IV1, 2.8, 2.8.1, 3.0-IV1),
    are shown as given by DescribeConfigs, and change nothing stored: records produced to such a
    topic come back as produced. Unknown versions get INVALID_CONFIG naming the value."""
    broker = start_broker("--set", "log.message.format.version=2.8.1", "--set", "inter.broker.protocol.version=3.7")
    b = describe(broker, ConfigResourceType.BROKER, "0")
    assert b["inter.broker.protocol.version"]["value"] == "3.7"
    for i, form in enumerate(["0.10.0", "0.10.0.0", "0.10.0-IV1", "2.8", "2.8.1", "3.0-IV1"]):
        name = "mfv%d" % i
        create(broker.bootstrap, name, config={"message.format.version": form})
        entry = describe(broker, ConfigResourceType.TOPIC, name)["message.format.version"]
        assert (entry["value"], entry["config_source"]) == (form, "DYNAMIC_TOPIC_CONFIG"), entry
        produce(broker.bootstrap, name, [(b"k", b"v%d" % i, None)])
        from test_clients import consume
        got = consume(broker.bootstrap, name, 1)
        assert [(m.key(), m.value()) for m in got] == [(b"k", b"v%d" % i)]
    create(broker.bootstrap, "plain")
    inherited = describe(broker, ConfigResourceType.TOPIC, "plain")["message.format.version"]
    assert inherited["value"] == "2.8.1", inherited
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    for bad in ("0.10", "3.0-IV9", "9.9", "three"):
        fs = a.create_topics([NewTopic("badmfv", 1, 1, config={"message.format.version": bad})], request_timeout=TIMEOUT)
        with pytest.raises(KafkaException) as e:
            fs["badmfv"].result(TIMEOUT)
        assert e.value.args[0].name() == "INVALID_CONFIG" and bad in e.value.args[0].str(), e.value
