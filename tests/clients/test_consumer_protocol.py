"""The KIP-848 consumer group protocol with librdkafka (confluent-kafka, `group.protocol=consumer`)
against the real broker: server-side assignment through ConsumerGroupHeartbeat, members joining
and leaving, commits with member epochs (OffsetCommit/OffsetFetch v9), the admin view
(ConsumerGroupDescribe, ListGroups), and classic groups beside consumer groups.

The broker runs with a short consumer heartbeat interval (500 ms) so that rebalances finish
quickly on the shared 2-core machines; every wait is a bounded loop."""
import time

import pytest
from confluent_kafka import Consumer, ConsumerGroupType, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from test_clients import TIMEOUT, create

FAST = ("--set", "group.consumer.heartbeat.interval.ms=500", "--set", "group.consumer.session.timeout.ms=3000")


@pytest.fixture
def broker(start_broker):
    return start_broker(*FAST)


def consumer(broker, group, **extra):
    conf = {"bootstrap.servers": broker.bootstrap, "group.id": group, "group.protocol": "consumer",
            "auto.offset.reset": "earliest", "enable.auto.commit": False}
    conf.update(extra)
    return Consumer(conf)


def produce_n(broker, topic, partitions, n, start=0):
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    for i in range(start, start + n):
        p.produce(topic, value=b"%d" % i, partition=i % partitions)
    assert p.flush(TIMEOUT) == 0


def assigned(c):
    return sorted(tp.partition for tp in c.assignment())


def poll_until(consumers, done, seen, timeout=TIMEOUT):
    """Poll every consumer in turn until `done()`; records go to seen[i] as (partition,
    offset, value)."""
    deadline = time.time() + timeout
    while time.time() < deadline and not done():
        for i, c in enumerate(consumers):
            m = c.poll(0.1)
            if m is None:
                continue
            assert m.error() is None, m.error()
            seen[i].append((m.partition(), m.offset(), m.value()))
    assert done(), "timed out: %s" % [len(s) for s in seen]


def test_members_share_partitions_and_rebalance(broker):
    """KIP-848: two consumer-protocol members split a 6-partition topic by server-side
    assignment (3 each, every record read once); a third joins and gets two partitions taken
    from the others (revoked first, then assigned); one leaves (close: epoch -1) and the
    remaining two cover all six again; records produced across the changes are each read by
    exactly one member once committed offsets are honoured."""
    create(broker.bootstrap, "cp", partitions=6)
    cs = [consumer(broker, "g-cp") for _ in range(2)]
    for c in cs:
        c.subscribe(["cp"])
    # Records are produced once the group has settled, so that no partition moves between a
    # read and its commit (which would rightly make it read twice: at least once).
    deadline = time.time() + TIMEOUT
    while time.time() < deadline and sorted(len(assigned(c)) for c in cs) != [3, 3]:
        for c in cs:
            c.poll(0.1)
    produce_n(broker, "cp", 6, 60)
    seen = [[], [], []]
    poll_until(cs, lambda: sum(map(len, seen)) == 60, seen)
    assert sorted(assigned(cs[0]) + assigned(cs[1])) == list(range(6)) and len(assigned(cs[0])) == 3
    for c in cs:
        c.commit(asynchronous=False)
    third = consumer(broker, "g-cp")
    third.subscribe(["cp"])
    cs.append(third)
    deadline = time.time() + TIMEOUT
    while time.time() < deadline and not all(len(assigned(c)) == 2 for c in cs):
        for c in cs:
            c.poll(0.1)
    assert sorted(p for c in cs for p in assigned(c)) == list(range(6)), [assigned(c) for c in cs]
    assert all(len(assigned(c)) == 2 for c in cs), [assigned(c) for c in cs]
    produce_n(broker, "cp", 6, 60, start=60)
    poll_until(cs, lambda: sum(map(len, seen)) == 120, seen)
    for c in cs:
        c.commit(asynchronous=False)
    cs[0].close()
    rest = cs[1:]
    deadline = time.time() + TIMEOUT
    while time.time() < deadline and sorted(p for c in rest for p in assigned(c)) != list(range(6)):
        for c in rest:
            c.poll(0.1)
    assert sorted(p for c in rest for p in assigned(c)) == list(range(6))
    produce_n(broker, "cp", 6, 60, start=120)
    poll_until(rest, lambda: sum(map(len, seen)) == 180, [seen[1], seen[2]])
    values = sorted(int(v) for s in seen for _, _, v in s)
    assert values == list(range(180)), "every record once"
    for c in rest:
        c.close()


def test_commits_resume_and_admin_view(broker):
    """Offsets committed by a consumer-protocol member (OffsetCommit v9 at its member epoch)
    are where the next member of the group resumes; the admin client describes the group
    (ConsumerGroupDescribe: type CONSUMER, state Stable, the member with its assignment) and
    lists it among the groups; a classic group on the same topic works beside it."""
    create(broker.bootstrap, "cr", partitions=3)
    produce_n(broker, "cr", 3, 30)
    c = consumer(broker, "g-cr")
    c.subscribe(["cr"])
    seen = [[]]
    poll_until([c], lambda: len(seen[0]) == 30, seen)
    c.commit(asynchronous=False)
    committed = c.committed([TopicPartition("cr", p) for p in range(3)], timeout=TIMEOUT)
    assert sorted(tp.offset for tp in committed) == [10, 10, 10]
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    d = a.describe_consumer_groups(["g-cr"])["g-cr"].result(TIMEOUT)
    assert d.type == ConsumerGroupType.CONSUMER and str(d.state).endswith("STABLE"), (d.type, d.state)
    assert len(d.members) == 1 and sorted(tp.partition for tp in d.members[0].assignment.topic_partitions) == [0, 1, 2]
    listed = a.list_consumer_groups().result(TIMEOUT)
    assert "g-cr" in [g.group_id for g in listed.valid]
    c.close()
    # The next member of the group starts at the committed offsets.
    produce_n(broker, "cr", 3, 6, start=30)
    c2 = consumer(broker, "g-cr")
    c2.subscribe(["cr"])
    seen = [[]]
    poll_until([c2], lambda: len(seen[0]) == 6, seen)
    assert sorted(int(v) for _, _, v in seen[0]) == list(range(30, 36))
    c2.close()
    # A classic group on the same topic, beside it.
    classic = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g-classic", "auto.offset.reset": "earliest",
                        "group.protocol": "classic"})
    classic.subscribe(["cr"])
    seen = [[]]
    poll_until([classic], lambda: len(seen[0]) == 36, seen)
    classic.close()
    kinds = {g.group_id: g.type for g in a.list_consumer_groups().result(TIMEOUT).valid}
    assert kinds.get("g-cr") == ConsumerGroupType.CONSUMER and kinds.get("g-classic") == ConsumerGroupType.CLASSIC, kinds


def test_a_silent_member_is_fenced_and_its_partitions_move(broker):
    """A member that goes away without leaving (its consumer dropped without close(), so no
    leave heartbeat) is removed after group.consumer.session.timeout.ms (3 s here), and the
    survivor is given every partition."""
    create(broker.bootstrap, "cs", partitions=4)
    a, b = consumer(broker, "g-cs"), consumer(broker, "g-cs")
    a.subscribe(["cs"])
    b.subscribe(["cs"])
    deadline = time.time() + TIMEOUT
    while time.time() < deadline and not (assigned(a) and assigned(b)):
        a.poll(0.1)
        b.poll(0.1)
    assert assigned(a) and assigned(b)
    # Leave without telling the coordinator: no close(), the handle is dropped.
    del b
    deadline = time.time() + TIMEOUT
    while time.time() < deadline and assigned(a) != [0, 1, 2, 3]:
        a.poll(0.2)
    assert assigned(a) == [0, 1, 2, 3]
    a.close()


def test_server_assignor_and_bad_requests(broker):
    """group.remote.assignor=range gives contiguous ranges; an unknown assignor is refused
    (UNSUPPORTED_ASSIGNOR, fatal for the consumer), as Kafka answers."""
    create(broker.bootstrap, "ca", partitions=4)
    cs = [consumer(broker, "g-ca", **{"group.remote.assignor": "range"}) for _ in range(2)]
    for c in cs:
        c.subscribe(["ca"])
    deadline = time.time() + TIMEOUT
    while time.time() < deadline and sorted(assigned(c) for c in cs) != [[0, 1], [2, 3]]:
        for c in cs:
            c.poll(0.1)
    got = sorted(assigned(c) for c in cs)
    assert got == [[0, 1], [2, 3]], got
    for c in cs:
        c.close()
    bad = consumer(broker, "g-bad", **{"group.remote.assignor": "nonesuch"})
    bad.subscribe(["ca"])
    error = None
    deadline = time.time() + TIMEOUT
    while time.time() < deadline and error is None:
        try:
            m = bad.poll(0.2)
            if m is not None and m.error() is not None:
                error = m.error()
        except KafkaException as e:
            error = e.args[0]
    # librdkafka's text for UNSUPPORTED_ASSIGNOR (112), reported as a fatal error.
    assert error is not None and error.code() == KafkaError._FATAL, error
    assert "assignor or its version range is not supported" in error.str(), error
    bad.close()


def test_group_state_survives_a_broker_restart(start_broker):
    """KIP-848 group state is written to __consumer_offsets in Kafka's record layout and
    replayed at startup: after a clean restart of the broker, two consumer-protocol members
    that kept running keep their member epochs and their partitions (no reassignment: the
    admin view shows the same group epoch and assignments) and go on consuming new records,
    each read once."""
    broker = start_broker(*FAST)
    create(broker.bootstrap, "cz", partitions=4)
    cs = [consumer(broker, "g-cz") for _ in range(2)]
    for c in cs:
        c.subscribe(["cz"])
    deadline = time.time() + TIMEOUT
    while time.time() < deadline and sorted(len(assigned(c)) for c in cs) != [2, 2]:
        for c in cs:
            c.poll(0.1)
    before = [assigned(c) for c in cs]
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    d = a.describe_consumer_groups(["g-cz"])["g-cz"].result(TIMEOUT)
    epochs_before = sorted((m.member_id, sorted(tp.partition for tp in m.assignment.topic_partitions)) for m in d.members)
    broker.stop()
    broker.start(*FAST)
    produce_n(broker, "cz", 4, 40)
    seen = [[], []]
    poll_until(cs, lambda: sum(map(len, seen)) == 40, seen)
    assert [assigned(c) for c in cs] == before, "no reassignment after the restart"
    assert sorted(int(v) for s in seen for _, _, v in s) == list(range(40))
    a2 = AdminClient({"bootstrap.servers": broker.bootstrap})
    d = a2.describe_consumer_groups(["g-cz"])["g-cz"].result(TIMEOUT)
    after = sorted((m.member_id, sorted(tp.partition for tp in m.assignment.topic_partitions)) for m in d.members)
    assert after == epochs_before, (after, epochs_before)
    for c in cs:
        c.close()


def test_regex_subscription_takes_new_topics(broker):
    """KIP-848 regular-expression subscriptions, resolved by the broker: a consumer subscribed
    to `^rx-.*` (librdkafka sends it as SubscribedTopicRegex) is assigned every partition of
    the matching topics and none of others, and a matching topic created afterwards is
    assigned to it too (the group epoch moves on its next heartbeat); its records are read."""
    create(broker.bootstrap, "rx-one", partitions=2)
    create(broker.bootstrap, "other", partitions=2)
    c = consumer(broker, "g-rx", **{"topic.metadata.refresh.interval.ms": 1000})
    c.subscribe(["^rx-.*"])
    def topics_held():
        return sorted({(tp.topic, tp.partition) for tp in c.assignment()})
    deadline = time.time() + TIMEOUT
    while time.time() < deadline and topics_held() != [("rx-one", 0), ("rx-one", 1)]:
        c.poll(0.1)
    assert topics_held() == [("rx-one", 0), ("rx-one", 1)]
    create(broker.bootstrap, "rx-two", partitions=1)
    deadline = time.time() + TIMEOUT
    while time.time() < deadline and ("rx-two", 0) not in topics_held():
        c.poll(0.1)
    assert topics_held() == [("rx-one", 0), ("rx-one", 1), ("rx-two", 0)]
    produce_n(broker, "rx-two", 1, 5)
    seen = [[]]
    poll_until([c], lambda: len(seen[0]) == 5, seen)
    c.close()


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_online_upgrade_and_downgrade(broker, strategy):
    """KIP-848 online migration with live consumers, both ways. Two classic consumers
    (librdkafka, `strategy`: eager or cooperative) split a topic; a consumer-protocol member
    joins the same group, which becomes a consumer group (ConsumerGroupDescribe: type CONSUMER,
    three members) with the classic members still in it, and the partitions are split three
    ways; when the consumer-protocol member leaves, the group becomes classic again (ListGroups:
    CLASSIC) and the two classic members cover every partition. Every record produced along
    the way is read (at least once)."""
    topic, group = "mig-" + strategy, "g-mig-" + strategy
    create(broker.bootstrap, topic, partitions=6)
    classic = [Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "group.protocol": "classic",
                         "partition.assignment.strategy": strategy, "session.timeout.ms": 6000,
                         "heartbeat.interval.ms": 300, "auto.offset.reset": "earliest",
                         "auto.commit.interval.ms": 200}) for _ in range(2)]
    for c in classic:
        c.subscribe([topic])
    values = set()

    def run(consumers, done, what):
        deadline = time.time() + TIMEOUT
        while time.time() < deadline and not done():
            for c in consumers:
                m = c.poll(0.05)
                if m is not None and m.error() is None:
                    values.add(int(m.value()))
        assert done(), "%s: %s" % (what, [assigned(c) for c in consumers])

    def split(consumers, sizes):
        return lambda: (sorted(p for c in consumers for p in assigned(c)) == list(range(6))
                        and sorted(len(assigned(c)) for c in consumers) == sizes)

    run(classic, split(classic, [3, 3]), "classic group")
    produce_n(broker, topic, 6, 60)
    run(classic, lambda: values >= set(range(60)), "read by the classic group")
    modern = consumer(broker, group)
    modern.subscribe([topic])
    everyone = classic + [modern]
    run(everyone, split(everyone, [2, 2, 2]), "upgraded group")
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    d = a.describe_consumer_groups([group])[group].result(TIMEOUT)
    assert d.type == ConsumerGroupType.CONSUMER and len(d.members) == 3, (d.type, d.members)
    produce_n(broker, topic, 6, 60, start=60)
    run(everyone, lambda: values >= set(range(120)), "read by the upgraded group")
    modern.close()
    run(classic, split(classic, [3, 3]), "downgraded group")
    kinds = {g.group_id: g.type for g in a.list_consumer_groups().result(TIMEOUT).valid}
    assert kinds.get(group) == ConsumerGroupType.CLASSIC, kinds
    produce_n(broker, topic, 6, 60, start=120)
    run(classic, lambda: values >= set(range(180)), "read by the downgraded group")
    for c in classic:
        c.close()
