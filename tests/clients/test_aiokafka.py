"""aiokafka (asyncio, its own protocol implementation in Python) against the real tidemark binary
on loopback: acks=all producing with keys, headers and every codec it has; a consumer group of
two members sharing a topic, committed offsets and resuming from them after a member leaves and
after a restart; its admin client (topics, configs, partitions, groups, offsets, DeleteRecords).
The broker runs with group.initial.rebalance.delay.ms=200 (conftest) to keep rebalances quick."""
import asyncio
import struct
import time

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic, RecordsToDelete
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from test_bad_input import HEADER_LEN, NONE, Conn, fetch

TIMEOUT = 60  # generous: two shared cores
GROUP_CONF = dict(auto_offset_reset="earliest", enable_auto_commit=False, session_timeout_ms=10_000,
                  heartbeat_interval_ms=500, fetch_max_wait_ms=200)
CODECS = {0: None, 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_CONFIG = 40
TOPIC_CONFIG = 1  # DescribeConfigs v1+ config source: the topic's own setting (DYNAMIC_TOPIC_CONFIG)
DEFAULT_CONFIG = 5


def run(coro):
    """Runs one test's coroutine with an overall bound."""
    return asyncio.run(asyncio.wait_for(coro, TIMEOUT * 3))


def stored_batches(broker, topic, partition):
    """(base offset, record count, codec name, producer id) of every batch stored in a partition,
    from a raw Fetch v4 at offset 0: what the broker holds, not what a client decoded."""
    with Conn(broker) as c:
        error, _, buf = fetch(c, topic, partition, 0, max_bytes=16 << 20)
    assert error == NONE, error
    out, pos = [], 0
    while pos + HEADER_LEN <= len(buf):
        base, length = struct.unpack_from(">qi", buf, pos)
        if pos + 12 + length > len(buf):
            break
        attributes, = struct.unpack_from(">h", buf, pos + 21)
        producer_id, = struct.unpack_from(">q", buf, pos + 43)
        count, = struct.unpack_from(">i", buf, pos + 57)
        out.append((base, count, CODECS[attributes & 7], producer_id))
        pos += 12 + length
    return out


async def admin_client(broker):
    a = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=TIMEOUT * 1000)
    await a.start()
    return a


async def create_topic(broker, name, partitions, configs=None):
    a = await admin_client(broker)
    try:
        r = await a.create_topics([NewTopic(name, partitions, 1, topic_configs=configs or {})])
        assert [(t[0], t[1]) for t in r.topic_errors] == [(name, NONE)], r
    finally:
        await a.close()


async def get_until(consumers, done, sink, timeout=TIMEOUT):
    """getmany() from every consumer until done() holds (or fail after timeout); each record
    goes to sink as (consumer index, record)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        for i, c in enumerate(consumers):
            for records in (await c.getmany(timeout_ms=100)).values():
                sink.extend((i, r) for r in records)
        if done():
            return
    raise AssertionError("timed out: %d records" % len(sink))


def parts(c):
    return sorted(tp.partition for tp in c.assignment())


def by_partition(records):
    out = {}
    for r in records:
        out.setdefault(r.partition, []).append(r)
    return out


def test_produce_keys_headers_codecs(broker):
    """An acks=all aiokafka producer writes to 3 partitions: records with keys and headers
    (including a null value and an empty header), batched with each codec in turn (none, gzip,
    snappy, lz4, zstd) to explicit partitions; then an idempotent one (InitProducerId) writes
    keyed records left to its partitioner and records with explicit timestamps. Every send's
    metadata (offset, CreateTime) is right; the broker stores each batch with the codec it was
    sent with (and the producer id); a consumer from the beginning reads every record exactly
    once, in offset order per partition matching the send order, keys, values, headers and
    timestamps intact."""
    async def main():
        await create_topic(broker, "aio-p", 3)
        before = int(time.time() * 1000)
        sent = []  # (partition, key, value, headers, explicit timestamp or None), in send order
        for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
            p = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", linger_ms=50,
                                 compression_type=None if codec == "none" else codec)
            await p.start()
            try:
                # Batches of several records: send without awaiting, then flush.
                futures = []
                for part in range(3):
                    for i in range(20):
                        key = b"%s-k%d" % (codec.encode(), i % 4)
                        value = b"%s-%d-%d " % (codec.encode(), part, i) + b"x" * (i * 7)
                        headers = [("codec", codec.encode()), ("i", b"%d" % i), ("empty", b"")]
                        if i == 5:
                            value = None
                        futures.append(await p.send("aio-p", value=value, key=key, partition=part, headers=headers))
                        sent.append((part, key, value, headers, None))
                await p.flush()
                metas = [await f for f in futures]
            finally:
                await p.stop()
            for part in range(3):
                offs = [m.offset for m in metas if m.partition == part]
                assert offs == list(range(offs[0], offs[0] + 20)), (codec, part, offs)
            assert all(m.timestamp_type == 0 for m in metas)
        # Keyed records without a partition, from an idempotent producer: the partitioner keeps
        # a key on one partition.
        p = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", enable_idempotence=True)
        await p.start()
        keyed = {}
        try:
            for i in range(60):
                key = b"user-%d" % (i % 6)
                m = await p.send_and_wait("aio-p", value=b"keyed-%d" % i, key=key)
                keyed.setdefault(key, set()).add(m.partition)
                sent.append((m.partition, key, b"keyed-%d" % i, [], None))
            # Explicit CreateTime timestamps are kept.
            for i, ts in enumerate((before - 60_000, before - 1, before + 5)):
                m = await p.send_and_wait("aio-p", value=b"ts-%d" % i, partition=0, timestamp_ms=ts)
                assert m.timestamp == ts and m.timestamp_type == 0
                sent.append((0, None, b"ts-%d" % i, [], ts))
        finally:
            await p.stop()
        after = int(time.time() * 1000)
        assert all(len(ps) == 1 for ps in keyed.values()), keyed
        assert len(set().union(*keyed.values())) > 1, "6 keys over 3 partitions all in one"
        # What the broker stored: per partition, offsets 0-19 in uncompressed batches, 20-39 gzip,
        # 40-59 snappy, 60-79 lz4, 80-99 zstd (no producer id), then the idempotent producer's.
        order = [None, "gzip", "snappy", "lz4", "zstd"]
        for part in range(3):
            batches = stored_batches(broker, "aio-p", part)
            for base, count, codec, pid in batches:
                if base < 100:
                    assert (codec, pid) == (order[base // 20], -1) and base // 20 == (base + count - 1) // 20, \
                        (part, batches)
                else:
                    assert pid >= 0, (part, batches)
            assert {c for _, _, c, _ in batches} >= set(order), (part, batches)
        # Read back.
        c = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False, group_id=None,
                             auto_offset_reset="earliest", fetch_max_wait_ms=200)
        await c.start()
        try:
            c.assign([TopicPartition("aio-p", p) for p in range(3)])
            got = []
            await get_until([c], lambda: len(got) >= len(sent), got)
            await get_until([c], lambda: True, got)  # one more round: nothing extra arrives
        finally:
            await c.stop()
        got = by_partition(r for _, r in got)
        assert sum(map(len, got.values())) == len(sent)
        for part in range(3):
            records = got[part]
            assert [r.offset for r in records] == list(range(len(records))), "each offset once, in order"
            want = [s for s in sent if s[0] == part]
            assert [(r.key, r.value, list(r.headers)) for r in records] == [(k, v, h) for _, k, v, h, _ in want]
            for r, (_, _, _, _, ts) in zip(records, want):
                assert r.timestamp_type == 0
                if ts is None:
                    assert before - 1000 <= r.timestamp <= after + 1000, (r.timestamp, before, after)
                else:
                    assert r.timestamp == ts
    run(main())


def test_group_members_share_commit_and_resume(broker):
    """Two aiokafka members of one group split a 4-partition topic (disjoint, covering it);
    records produced after the assignment settled are consumed exactly once, each by the member
    owning its partition, in order, and committed. When one member leaves, the other takes over
    its partitions from the committed offsets (reads only later records); after both stop, a
    new consumer in the group (a restart) resumes from the committed offsets: it reads only the
    records produced while the group had no member. The committed offsets read back through
    committed() and the admin client are the ends of the partitions."""
    topic, group = "aio-g", "aio-group"

    async def produce(tag, per_partition):
        p = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", linger_ms=5)
        await p.start()
        try:
            futures = [await p.send(topic, value=b"%s-%d-%d" % (tag, part, i), key=b"k%d" % i, partition=part,
                                    headers=[("tag", tag)])
                       for part in range(4) for i in range(per_partition)]
            await p.flush()
            for f in futures:
                await f
        finally:
            await p.stop()

    def check(records, tag, per_partition):
        got = by_partition(records)
        assert sorted(got) == [0, 1, 2, 3], sorted(got)
        for part, rs in got.items():
            assert [r.value for r in rs] == [b"%s-%d-%d" % (tag, part, i) for i in range(per_partition)], part
            assert [r.key for r in rs] == [b"k%d" % i for i in range(per_partition)]
            assert all(list(r.headers) == [("tag", tag)] for r in rs)

    async def commit(c, records):
        """Commits, per partition, the offset after the last record this member read."""
        last = {}
        for r in records:
            last[r.partition] = r.offset + 1
        if last:
            await c.commit({TopicPartition(topic, p): o for p, o in last.items()})

    async def main():
        await create_topic(broker, topic, 4)
        c1 = AIOKafkaConsumer(topic, bootstrap_servers=broker.bootstrap, group_id=group, **GROUP_CONF)
        await c1.start()
        c2 = AIOKafkaConsumer(topic, bootstrap_servers=broker.bootstrap, group_id=group, **GROUP_CONF)
        try:
            await get_until([c1], lambda: parts(c1) == [0, 1, 2, 3], [])
            await c2.start()
            await get_until([c1, c2], lambda: len(parts(c1)) == 2 and len(parts(c2)) == 2, [])
            assert sorted(parts(c1) + parts(c2)) == [0, 1, 2, 3]
            await produce(b"one", 30)
            got = []
            await get_until([c1, c2], lambda: len(got) >= 120, got)
            for i, c in enumerate((c1, c2)):
                mine = [r for j, r in got if j == i]
                assert {r.partition for r in mine} <= set(parts(c)), "each record read by its partition's owner"
                await commit(c, mine)
            check([r for _, r in got], b"one", 30)
            assert await c1.committed(TopicPartition(topic, parts(c2)[0])) == 30
            # c2 leaves: once c1 has all partitions (a rebalance resets positions to the committed
            # offsets, so records read but not committed before it would be read again), more
            # records; c1 reads c2's partitions from c2's commits.
            await c2.stop()
            await get_until([c1], lambda: parts(c1) == [0, 1, 2, 3], [])
            await produce(b"two", 10)
            got = []
            await get_until([c1], lambda: len(got) >= 40, got)
            await get_until([c1], lambda: True, got)
            check([r for _, r in got], b"two", 10)
            assert [r.offset for r in by_partition(r for _, r in got)[0]] == list(range(30, 40))
            await commit(c1, [r for _, r in got])
        finally:
            await c1.stop()
            await c2.stop()
        # While the group is empty, more records; a new consumer resumes after the commits.
        await produce(b"three", 5)
        c3 = AIOKafkaConsumer(topic, bootstrap_servers=broker.bootstrap, group_id=group, **GROUP_CONF)
        await c3.start()
        try:
            for p in range(4):
                assert await c3.committed(TopicPartition(topic, p)) == 40
            got = []
            await get_until([c3], lambda: len(got) >= 20, got)
            await get_until([c3], lambda: True, got)
            check([r for _, r in got], b"three", 5)
            assert sorted({r.offset for _, r in got}) == list(range(40, 45))
            await commit(c3, [r for _, r in got])
        finally:
            await c3.stop()
        a = await admin_client(broker)
        try:
            offsets = await a.list_consumer_group_offsets(group)
        finally:
            await a.close()
        assert {tp.partition: om.offset for tp, om in offsets.items() if tp.topic == topic} == {p: 45 for p in range(4)}
    run(main())


def test_admin_client(broker):
    """aiokafka's admin client: CreateTopics with configs (again: TOPIC_ALREADY_EXISTS; a bad
    value: INVALID_CONFIG; validate_only creates nothing), list_topics, describe_topics and
    describe_cluster (Metadata), DescribeConfigs (values and sources), AlterConfigs read back,
    CreatePartitions (a decrease: INVALID_PARTITIONS), ListGroups, DescribeGroups (a stable
    group with its member and assignment, then Empty), OffsetFetch, DeleteRecords (the low
    watermark moves: a consumer from the earliest offset starts there) and DeleteTopics."""
    async def main():
        a = await admin_client(broker)
        try:
            r = await a.create_topics([NewTopic("aio-adm", 2, 1, topic_configs={"retention.ms": "3600000",
                                                                                 "max.message.bytes": "200000"})])
            assert [(t[0], t[1]) for t in r.topic_errors] == [("aio-adm", NONE)], r
            r = await a.create_topics([NewTopic("aio-adm", 2, 1)])
            assert r.topic_errors[0][1] == TOPIC_ALREADY_EXISTS, r
            r = await a.create_topics([NewTopic("aio-bad", 1, 1, topic_configs={"retention.ms": "soon"})])
            assert r.topic_errors[0][1] == INVALID_CONFIG, r
            r = await a.create_topics([NewTopic("aio-validate", 1, 1)], validate_only=True)
            assert r.topic_errors[0][1] == NONE, r
            topics = await a.list_topics()
            assert "aio-adm" in topics and "aio-bad" not in topics and "aio-validate" not in topics, topics
            (t,) = await a.describe_topics(["aio-adm"])
            assert t["error_code"] == NONE and not t["is_internal"]
            assert sorted((p["partition"], p["leader"], p["replicas"], p["error_code"]) for p in t["partitions"]) == \
                [(0, 0, [0], NONE), (1, 0, [0], NONE)]
            cluster = await a.describe_cluster()
            assert cluster["controller_id"] == 0
            assert [(b["node_id"], b["host"], b["port"]) for b in cluster["brokers"]] == [(0, "127.0.0.1", broker.port)]

            async def configs(*names):
                (resp,) = await a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "aio-adm",
                                                                   {n: None for n in names})])
                (res,) = resp.to_object()["resources"]
                assert res["error_code"] == NONE, res
                return {e["config_names"]: (e["config_value"], e["config_source"]) for e in res["config_entries"]}
            got = await configs("retention.ms", "max.message.bytes", "cleanup.policy")
            assert got == {"retention.ms": ("3600000", TOPIC_CONFIG), "max.message.bytes": ("200000", TOPIC_CONFIG),
                           "cleanup.policy": ("delete", DEFAULT_CONFIG)}, got
            # AlterConfigs replaces the topic's overrides with the given set.
            (resp,) = await a.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "aio-adm",
                                                            {"retention.ms": "7200000"})])
            assert [r[0] for r in resp.resources] == [NONE], resp
            got = await configs("retention.ms", "max.message.bytes")
            assert got == {"retention.ms": ("7200000", TOPIC_CONFIG),
                           "max.message.bytes": ("1048588", DEFAULT_CONFIG)}, got
            # CreatePartitions: 2 -> 4; 3 is not an increase.
            await a.create_partitions({"aio-adm": NewPartitions(4)})
            (t,) = await a.describe_topics(["aio-adm"])
            assert sorted(p["partition"] for p in t["partitions"]) == [0, 1, 2, 3]
            try:
                await a.create_partitions({"aio-adm": NewPartitions(3)})
                raise AssertionError("a decrease was accepted")
            except Exception as e:
                assert getattr(e, "errno", None) == INVALID_PARTITIONS, repr(e)

            # Ten records in each partition, then a group reads and commits them.
            p = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
            await p.start()
            try:
                for part in range(4):
                    for i in range(10):
                        await p.send("aio-adm", value=b"%d-%d" % (part, i), partition=part)
                await p.flush()
            finally:
                await p.stop()
            c = AIOKafkaConsumer("aio-adm", bootstrap_servers=broker.bootstrap, group_id="aio-adm-g",
                                 client_id="aio-adm-client", **GROUP_CONF)
            await c.start()
            try:
                got = []
                await get_until([c], lambda: len(got) >= 40, got)
                await c.commit()
                assert ("aio-adm-g", "consumer") in await a.list_consumer_groups()
                (resp,) = await a.describe_consumer_groups(["aio-adm-g"])
                (g,) = resp.to_object()["groups"]
                assert (g["error_code"], g["state"], g["protocol_type"]) == (NONE, "Stable", "consumer"), g
                (m,) = g["members"]
                assert m["client_id"] == "aio-adm-client" and m["client_host"].startswith("/127.0.0.1"), m
                # ConsumerProtocol assignment v0: version, [topic, [partition]], user data.
                asg = m["member_assignment"]
                assert asg[2:6] == b"\x00\x00\x00\x01" and asg[6:8] == struct.pack(">h", 7) and asg[8:15] == b"aio-adm"
                assert struct.unpack_from(">5i", asg, 15) == (4, 0, 1, 2, 3), asg
            finally:
                await c.stop()
            (resp,) = await a.describe_consumer_groups(["aio-adm-g"])
            (g,) = resp.to_object()["groups"]
            assert (g["state"], g["members"]) == ("Empty", []), g
            offsets = await a.list_consumer_group_offsets("aio-adm-g")
            assert {(tp.topic, tp.partition): om.offset for tp, om in offsets.items()} == \
                {("aio-adm", p): 10 for p in range(4)}
            offsets = await a.list_consumer_group_offsets("aio-adm-g", partitions=[TopicPartition("aio-adm", 1)])
            assert {tp.partition: om.offset for tp, om in offsets.items()} == {1: 10}

            # DeleteRecords: partition 1 below offset 6, partition 2 up to the high watermark (-1).
            low = await a.delete_records({TopicPartition("aio-adm", 1): RecordsToDelete(6),
                                          TopicPartition("aio-adm", 2): RecordsToDelete(-1)})
            assert low == {TopicPartition("aio-adm", 1): 6, TopicPartition("aio-adm", 2): 10}, low
            c = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False,
                                 auto_offset_reset="earliest", fetch_max_wait_ms=200)
            await c.start()
            try:
                tps = [TopicPartition("aio-adm", p) for p in range(4)]
                assert await c.beginning_offsets(tps) == dict(zip(tps, [0, 6, 10, 0]))
                assert await c.end_offsets(tps) == dict(zip(tps, [10] * 4))
                c.assign([tps[1]])
                got = []
                await get_until([c], lambda: len(got) >= 4, got)
                assert [(r.offset, r.value) for _, r in got] == [(o, b"1-%d" % o) for o in range(6, 10)]
            finally:
                await c.stop()

            # DeleteTopics.
            r = await a.delete_topics(["aio-adm"])
            assert [tuple(t)[:2] for t in r.topic_error_codes] == [("aio-adm", NONE)], r
            assert "aio-adm" not in await a.list_topics()
        finally:
            await a.close()
    run(main())


def test_transactions_commit_abort_and_offsets(broker):
    """aiokafka's transactional producer (its own protocol choices: InitProducerId,
    AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn): a committed transaction's
    records and its consumer offsets become visible together, an aborted one's never reach a
    read_committed consumer (a read_uncommitted one sees them), and a second producer with the
    same transactional id fences the first (its next transaction fails)."""
    async def main():
        await create_topic(broker, "aio-txn", 2)
        p = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="aio-1",
                             request_timeout_ms=TIMEOUT * 1000)
        await p.start()
        try:
            async with p.transaction():
                for i in range(6):
                    await p.send_and_wait("aio-txn", b"c%d" % i, partition=i % 2)
                await p.send_offsets_to_transaction({TopicPartition("aio-txn", 0): 3}, "aio-group")
            await p.begin_transaction()
            for i in range(4):
                await p.send_and_wait("aio-txn", b"a%d" % i, partition=i % 2)
            await p.abort_transaction()
            async with p.transaction():
                await p.send_and_wait("aio-txn", b"last", partition=0)
        finally:
            await p.stop()
        committed = await read_all(broker, "read_committed", 7)
        assert sorted(committed) == sorted([b"c%d" % i for i in range(6)] + [b"last"]), committed
        uncommitted = await read_all(broker, "read_uncommitted", 11)
        assert {b"a0", b"a1", b"a2", b"a3"} <= set(uncommitted), uncommitted
        c = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="aio-group", **GROUP_CONF)
        await c.start()
        try:
            assert await c.committed(TopicPartition("aio-txn", 0)) == 3
        finally:
            await c.stop()
        # A new instance with the same id fences the old one.
        old = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="aio-2")
        await old.start()
        new = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="aio-2")
        try:
            await new.start()
            fenced = False
            try:
                async with old.transaction():
                    await old.send_and_wait("aio-txn", b"zombie", partition=1)
            except Exception as e:  # aiokafka raises ProducerFenced
                fenced = "Fenced" in type(e).__name__ or "fenced" in str(e).lower()
            assert fenced, "the old instance was not fenced"
        finally:
            await new.stop()
            try:
                await old.stop()
            except Exception:
                pass
    run(main())


async def read_all(broker, isolation, expected):
    """Every record value of `aio-txn` from the start at `isolation`, once `expected` arrived
    (and nothing more for a moment)."""
    c = AIOKafkaConsumer("aio-txn", bootstrap_servers=broker.bootstrap, isolation_level=isolation,
                         auto_offset_reset="earliest", enable_auto_commit=False, fetch_max_wait_ms=200)
    await c.start()
    try:
        values, deadline = [], time.time() + TIMEOUT
        while time.time() < deadline:
            for records in (await c.getmany(timeout_ms=300)).values():
                values.extend(r.value for r in records)
            if len(values) >= expected:
                for records in (await c.getmany(timeout_ms=500)).values():
                    values.extend(r.value for r in records)
                return values
        raise AssertionError("%s: %d of %d records" % (isolation, len(values), expected))
    finally:
        await c.stop()
