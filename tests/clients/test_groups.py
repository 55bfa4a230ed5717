"""Consumer groups against the real tidemark binary: confluent-kafka (librdkafka), kafka-python
and Debian's kcat subscribe with a group id; members split a topic and rebalance as they come
and go; committed offsets survive clean and kill -9 restarts; static members (group.instance.id)
restart without a rebalance; the admin group APIs (list, describe, offsets, delete) answer.
The broker runs with group.initial.rebalance.delay.ms=200 (conftest) to keep rebalances quick."""
import os
import shutil
import signal
import subprocess
import time

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from test_clients import TIMEOUT, create, produce

GROUP_CONF = {"auto.offset.reset": "earliest", "session.timeout.ms": 6000, "heartbeat.interval.ms": 500}


def member(bootstrap, group, **conf):
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, **GROUP_CONF, **conf})


def poll_until(consumers, done, timeout=TIMEOUT, sink=None):
    """Poll every consumer until done() holds (or fail after timeout); messages go to sink."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        for c in consumers:
            m = c.poll(0.1)
            if m is not None and m.error() is None and sink is not None:
                sink.append((c, m))
        if done():
            return
    raise AssertionError("timed out waiting for the group")


def parts(c):
    return sorted(tp.partition for tp in c.assignment())


def fill(bootstrap, topic, partitions, per_partition, tag=b"m"):
    for p in range(partitions):
        items = [(None, b"%s-%d-%d" % (tag, p, i), None) for i in range(per_partition)]
        assert all(err is None for err, _ in produce(bootstrap, topic, items, partition=p))


def test_members_split_a_topic_and_rebalance(broker):
    """Two confluent-kafka members of one group: the first gets all 4 partitions; when the
    second joins they split them (disjoint, covering all); when it leaves (LeaveGroup on
    close) the first gets them all back. Every record is consumed, none twice within a
    generation's assignment."""
    b = broker.bootstrap
    create(b, "split", partitions=4)
    fill(b, "split", 4, 25)
    c1 = member(b, "g-split")
    c1.subscribe(["split"])
    got = []
    poll_until([c1], lambda: len(got) >= 100, sink=got)
    assert parts(c1) == [0, 1, 2, 3]
    assert sorted(m.value() for _, m in got) == sorted(b"m-%d-%d" % (p, i) for p in range(4) for i in range(25))
    c1.commit(asynchronous=False)
    c2 = member(b, "g-split")
    c2.subscribe(["split"])
    poll_until([c1, c2], lambda: c1.assignment() and c2.assignment() and len(parts(c1)) + len(parts(c2)) == 4)
    assert not set(parts(c1)) & set(parts(c2)), "disjoint assignments"
    assert sorted(parts(c1) + parts(c2)) == [0, 1, 2, 3]
    # New records reach whichever member owns their partition, each once.
    fill(b, "split", 4, 5, tag=b"late")
    late = []
    poll_until([c1, c2], lambda: len(late) >= 20, sink=late)
    for c, m in late:
        assert m.partition() in parts(c)
    assert len({m.value() for _, m in late}) == 20
    c2.close()
    poll_until([c1], lambda: parts(c1) == [0, 1, 2, 3])
    c1.close()


def test_committed_offsets_survive_restarts(broker):
    """spec: T3.5 for commits — an acknowledged OffsetCommit is durable: after a clean restart
    and after kill -9, the group resumes exactly after its committed offsets (read back with
    committed() too)."""
    b = broker.bootstrap
    create(b, "resume", partitions=2)
    fill(b, "resume", 2, 10)
    c = member(b, "g-resume", **{"enable.auto.commit": False})
    c.subscribe(["resume"])
    got = []
    poll_until([c], lambda: len(got) >= 20, sink=got)
    # Commit 6 of partition 0 and 3 of partition 1 explicitly.
    c.commit(offsets=[TopicPartition("resume", 0, 6), TopicPartition("resume", 1, 3)], asynchronous=False)
    c.close()
    for sig in (signal.SIGTERM, signal.SIGKILL):
        broker.stop(sig)
        broker.start()
        c = member(b, "g-resume", **{"enable.auto.commit": False})
        committed = c.committed([TopicPartition("resume", 0), TopicPartition("resume", 1)], timeout=TIMEOUT)
        assert [(tp.partition, tp.offset) for tp in committed] == [(0, 6), (1, 3)], sig
        c.subscribe(["resume"])
        again = []
        poll_until([c], lambda: len(again) >= 11, sink=again)
        time.sleep(0.5)
        again += [(c, m) for m in [c.poll(0.2) for _ in range(3)] if m is not None and m.error() is None]
        assert sorted((m.partition(), m.offset()) for _, m in again) == \
            [(0, o) for o in range(6, 10)] + [(1, o) for o in range(3, 10)], sig
        c.close()


def test_static_member_restarts_without_rebalance(broker):
    """KIP-345: two members with group.instance.id; one closes (a static member sends no
    LeaveGroup) and comes back with the same instance id within the session timeout: it gets
    its partitions back and the other member is never revoked."""
    b = broker.bootstrap
    create(b, "static", partitions=2)
    revoked = []
    c1 = member(b, "g-static", **{"group.instance.id": "i1"})
    c2 = member(b, "g-static", **{"group.instance.id": "i2"})
    c1.subscribe(["static"])
    c2.subscribe(["static"], on_revoke=lambda c, ps: revoked.extend(ps))
    poll_until([c1, c2], lambda: len(parts(c1)) == 1 and len(parts(c2)) == 1)
    before = parts(c1)
    revoked.clear()
    c1.close()
    c1 = member(b, "g-static", **{"group.instance.id": "i1"})
    c1.subscribe(["static"])
    start = time.time()
    poll_until([c1, c2], lambda: parts(c1) == before, timeout=5)
    assert time.time() - start < 5, "back before the session timeout (6 s)"
    for _ in range(20):
        c2.poll(0.1)
    assert revoked == [], "the other member kept its partition"
    c1.close()
    c2.close()


def test_admin_group_apis(broker):
    """ListGroups, DescribeGroups (state, members, assignments), committed offsets through the
    AdminClient, DeleteGroups: refused (NON_EMPTY_GROUP) while a member is in, then done; a
    deleted group has no offsets left."""
    b = broker.bootstrap
    create(b, "adm", partitions=3)
    fill(b, "adm", 3, 2)
    c = member(b, "g-adm", **{"client.id": "adm-client"})
    c.subscribe(["adm"])
    got = []
    poll_until([c], lambda: len(got) >= 6, sink=got)
    c.commit(asynchronous=False)
    a = AdminClient({"bootstrap.servers": b})
    listed = a.list_consumer_groups(request_timeout=TIMEOUT).result()
    assert "g-adm" in [g.group_id for g in listed.valid]
    d = a.describe_consumer_groups(["g-adm"], request_timeout=TIMEOUT)["g-adm"].result()
    assert d.state.name == "STABLE" and len(d.members) == 1
    m = d.members[0]
    assert m.client_id == "adm-client" and m.host.startswith("/127.0.0.1")
    assert sorted(tp.partition for tp in m.assignment.topic_partitions) == [0, 1, 2]
    from confluent_kafka import ConsumerGroupTopicPartitions
    offs = a.list_consumer_group_offsets([ConsumerGroupTopicPartitions("g-adm")])["g-adm"].result()
    assert sorted((tp.partition, tp.offset) for tp in offs.topic_partitions) == [(0, 2), (1, 2), (2, 2)]
    with pytest.raises(KafkaException) as e:
        a.delete_consumer_groups(["g-adm"], request_timeout=TIMEOUT)["g-adm"].result()
    assert "NON_EMPTY_GROUP" in str(e.value)
    c.close()
    a.delete_consumer_groups(["g-adm"], request_timeout=TIMEOUT)["g-adm"].result()
    offs = a.list_consumer_group_offsets([ConsumerGroupTopicPartitions("g-adm")])["g-adm"].result()
    assert all(tp.offset < 0 for tp in offs.topic_partitions), "no offsets after DeleteGroups"
    with pytest.raises(KafkaException) as e:
        a.delete_consumer_groups(["g-never"], request_timeout=TIMEOUT)["g-never"].result()
    assert "GROUP_ID_NOT_FOUND" in str(e.value)


def test_kafka_python_group_and_kcat_group(broker):
    """kafka-python's own group coordinator client (JoinGroup, SyncGroup, Heartbeat,
    OffsetCommit from Python) and Debian's kcat in balanced-consumer mode (-G, librdkafka 2.0)
    consume a topic with a group id and commit; confluent-kafka sees their commits."""
    from kafka import KafkaConsumer
    b = broker.bootstrap
    create(b, "kp-group", partitions=2)
    fill(b, "kp-group", 2, 5)
    kc = KafkaConsumer("kp-group", bootstrap_servers=b, group_id="g-kp", auto_offset_reset="earliest",
                       enable_auto_commit=False, consumer_timeout_ms=10_000)
    got = []
    for m in kc:
        got.append(m)
        if len(got) == 10:
            break
    assert sorted((m.partition, m.offset) for m in got) == [(p, o) for p in range(2) for o in range(5)]
    kc.commit()
    kc.close()
    probe = member(b, "g-kp")
    committed = probe.committed([TopicPartition("kp-group", 0), TopicPartition("kp-group", 1)], timeout=TIMEOUT)
    assert [tp.offset for tp in committed] == [5, 5]
    probe.close()
    kcat = shutil.which("kcat")
    if kcat is None:
        if os.environ.get("TIDEMARK_REQUIRE_KCAT"):
            raise AssertionError("kcat is required here (scripts/test installs it)")
        pytest.skip("kcat not installed")
    out = subprocess.run([kcat, "-b", b, "-G", "g-kcat", "-X", "auto.offset.reset=earliest", "-c", "10",
                          "-f", "%p %o %s\\n", "kp-group"], capture_output=True, check=True, timeout=60).stdout.decode()
    seen = sorted(tuple(int(x) for x in line.split()[:2]) for line in out.splitlines() if line.strip())
    assert seen == [(p, o) for p in range(2) for o in range(5)], out
    probe = member(b, "g-kcat")
    committed = probe.committed([TopicPartition("kp-group", 0), TopicPartition("kp-group", 1)], timeout=TIMEOUT)
    assert all(tp.offset > 0 for tp in committed), "kcat committed its offsets: %s" % committed
    probe.close()


def test_offsets_topic_is_compacted(broker):
    """__consumer_offsets stays small: with compaction forced (threshold 0, checked every
    300 ms), hundreds of commits leave a partition whose log start has moved past the old
    records, and after a restart (the replay of what is left) the group's offsets are its last
    commits. Producing to the internal topic is refused."""
    b = broker.bootstrap
    broker.stop()
    broker.start("--set", "tidemark.offsets.compaction.bytes=0", "--set", "tidemark.offsets.compaction.check.ms=300")
    create(b, "cmp", partitions=3)
    c = member(b, "g-cmp", **{"enable.auto.commit": False})
    for i in range(1, 201):
        c.commit(offsets=[TopicPartition("cmp", p, i * 10 + p) for p in range(3)], asynchronous=False)
    # Find the group's offsets partition: the one whose records moved (low watermark > 0).
    deadline = time.time() + TIMEOUT
    moved = []
    while not moved and time.time() < deadline:
        time.sleep(0.3)
        moved = [p for p in range(8) if c.get_watermark_offsets(TopicPartition("__consumer_offsets", p), timeout=5)[0] > 0]
    assert moved, "no offsets partition was compacted"
    c.close()
    broker.stop()
    broker.start()
    c = member(b, "g-cmp")
    got = c.committed([TopicPartition("cmp", p) for p in range(3)], timeout=TIMEOUT)
    assert [tp.offset for tp in got] == [2000, 2001, 2002]
    c.close()
    from confluent_kafka import Producer
    errors = []
    p = Producer({"bootstrap.servers": b, "retries": 0})
    p.produce("__consumer_offsets", value=b"x", partition=0, on_delivery=lambda e, m: errors.append(e))
    p.flush(TIMEOUT)
    assert errors and errors[0] is not None and errors[0].code() == 17, errors  # INVALID_TOPIC_EXCEPTION


def test_cooperative_rebalance_keeps_partitions(broker):
    """Cooperative (incremental) rebalancing, as librdkafka's cooperative-sticky assignor drives
    it over the classic protocol: when a second member joins, the first gives up only the
    partitions that move (2 of 4), never all of them, and keeps consuming the rest."""
    b = broker.bootstrap
    create(b, "coop", partitions=4)
    revoked, conf = [], {"partition.assignment.strategy": "cooperative-sticky"}
    c1 = member(b, "g-coop", **conf)
    c1.subscribe(["coop"], on_revoke=lambda c, ps: revoked.extend(p.partition for p in ps))
    poll_until([c1], lambda: parts(c1) == [0, 1, 2, 3])
    c2 = member(b, "g-coop", **conf)
    c2.subscribe(["coop"])
    poll_until([c1, c2], lambda: len(parts(c1)) == 2 and len(parts(c2)) == 2)
    assert sorted(parts(c1) + parts(c2)) == [0, 1, 2, 3]
    assert len(revoked) == 2 and not set(revoked) & set(parts(c1)), "only the moved partitions were revoked"
    c2.close()
    c1.close()


def test_offset_delete(broker):
    """OffsetDelete (KIP-496, `kafka-consumer-groups --delete-offsets`) with kafka-python's
    admin, as Kafka 4.1's broker answers it: while a classic consumer subscribed to topic A is
    in the group, A's offsets stay (GROUP_SUBSCRIBED_TO_TOPIC) and B's go (no error); an unknown
    topic is UNKNOWN_TOPIC_OR_PARTITION; once the group is empty A's go too; an unknown group is
    GROUP_ID_NOT_FOUND for the whole request. Deletions are tombstones in __consumer_offsets:
    they hold across a restart."""
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KTP
    from kafka.errors import GroupIdNotFoundError
    b = broker.bootstrap
    create(b, "od-a", partitions=2)
    create(b, "od-b")
    produce(b, "od-a", [(None, b"x", None)] * 4)
    c = Consumer({"bootstrap.servers": b, "group.id": "od", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "group.protocol": "classic"})
    c.subscribe(["od-a"])
    deadline = time.time() + TIMEOUT
    while not c.assignment() and time.time() < deadline:
        c.poll(0.2)
    assert len(c.assignment()) == 2
    c.commit(offsets=[TopicPartition("od-a", 0, 3), TopicPartition("od-a", 1, 1), TopicPartition("od-b", 0, 5)],
             asynchronous=False)

    def committed():
        probe = Consumer({"bootstrap.servers": b, "group.id": "od"})
        try:
            tps = probe.committed([TopicPartition("od-a", 0), TopicPartition("od-a", 1), TopicPartition("od-b", 0)],
                                  timeout=TIMEOUT)
            return {(tp.topic, tp.partition): tp.offset for tp in tps}
        finally:
            probe.close()

    NONE_SET = -1001  # librdkafka's OFFSET_INVALID: no committed offset
    admin = KafkaAdminClient(bootstrap_servers=b, request_timeout_ms=TIMEOUT * 1000)
    try:
        r = admin.delete_group_offsets("od", [KTP("od-a", 0), KTP("od-b", 0), KTP("od-none", 0)])
        assert {(tp.topic, tp.partition): e.__name__ for tp, e in r.items()} == {
            ("od-a", 0): "GroupSubscribedToTopicError", ("od-b", 0): "NoError",
            ("od-none", 0): "UnknownTopicOrPartitionError"}, r
        assert committed() == {("od-a", 0): 3, ("od-a", 1): 1, ("od-b", 0): NONE_SET}
        c.close()
        r = admin.delete_group_offsets("od", [KTP("od-a", 0)])
        assert {(tp.topic, tp.partition): e.__name__ for tp, e in r.items()} == {("od-a", 0): "NoError"}, r
        with pytest.raises(GroupIdNotFoundError):
            admin.delete_group_offsets("no-such-group", [KTP("od-a", 0)])
    finally:
        admin.close()
    assert committed() == {("od-a", 0): NONE_SET, ("od-a", 1): 1, ("od-b", 0): NONE_SET}
    broker.stop()
    broker.start()
    assert committed() == {("od-a", 0): NONE_SET, ("od-a", 1): 1, ("od-b", 0): NONE_SET}
