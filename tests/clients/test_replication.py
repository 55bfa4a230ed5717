"""Partition replication in a cluster of three tidemark processes: followers fetch from
leaders, acks=all answers once every in-sync replica has the records durable, and a leader's
SIGKILL loses nothing acknowledged. Three nodes share the machine's two cores: the waits are
generous.

Clients are confluent-kafka's (librdkafka): idempotent acks=all producers that follow the
leaders, and consumers reading from the beginning. Each node is also asked directly (raw
Metadata v1) for the ISR it publishes.
"""
import os
import signal
import tempfile
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from test_cluster import Cluster
from test_cluster_topics import logs, wait_for


@pytest.fixture
def cluster():
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as d:
        c = Cluster(d)
        try:
            for n in (1, 2, 3):
                # A follower not caught up for 3 s leaves the ISR (Kafka's default is 30 s).
                c.start(n, "--set", "replica.lag.time.max.ms=3000", "--set", "log.cleaner.backoff.ms=100")
            everyone = sorted((n, c.ports[n]) for n in (1, 2, 3))
            c.agreed([1, 2, 3], want_brokers=everyone)
            yield c
        finally:
            c.stop_all()


def bootstrap(cluster, nodes):
    return ",".join(cluster.brokers[n].bootstrap for n in nodes)


def create(cluster, topic, partitions, rf=3):
    a = AdminClient({"bootstrap.servers": cluster.brokers[1].bootstrap})
    a.create_topics([NewTopic(topic, partitions, rf)], request_timeout=30)[topic].result(60)


def isr_of(cluster, node, topic):
    """{partition: (leader, sorted isr)} as node publishes them."""
    return {p: (leader, sorted(isr)) for p, _e, leader, _r, isr in cluster.topics(node).get(topic, [])}


def produce(cluster, nodes, topic, n, tag):
    """n idempotent acks=all records (key = tag:i); the acknowledged (partition, offset, key)."""
    acked, failed = [], []

    def done(err, msg):
        if err is None:
            acked.append((msg.partition(), msg.offset(), msg.key().decode()))
        else:
            failed.append(str(err))

    p = Producer({"bootstrap.servers": bootstrap(cluster, nodes), "acks": "all", "enable.idempotence": True,
                  "linger.ms": 5, "message.timeout.ms": 120000, "request.timeout.ms": 30000})
    for i in range(n):
        p.produce(topic, key=f"{tag}:{i}".encode(), value=(f"{tag}:{i}:" + "v" * 100).encode(), on_delivery=done)
        if i % 200 == 0:
            p.poll(0)
    left = p.flush(150)
    assert left == 0 and not failed, (left, failed[:5])
    return acked


def consume_all(cluster, nodes, topic, partitions, expect):
    """Every record of the topic from the start, as (partition, offset, key), once `expect`
    records are there (within the wait)."""
    c = Consumer({"bootstrap.servers": bootstrap(cluster, nodes), "group.id": f"check-{time.time()}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = []
    deadline = time.time() + 90
    while len(got) < expect and time.time() < deadline:
        for m in c.consume(500, 1.0):
            if m.error() is None:
                got.append((m.partition(), m.offset(), m.key().decode()))
    c.close()
    return got


def committed_reader(cluster, topic, group, partitions):
    """A read_committed consumer assigned every partition of `topic` from its start."""
    reader = Consumer({"bootstrap.servers": bootstrap(cluster, (1, 2, 3)), "group.id": group,
                       "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                       "enable.auto.commit": False})
    reader.assign([TopicPartition(topic, i, 0) for i in range(partitions)])
    return reader


def read_values(reader, n, seconds=60):
    """The values `reader` reads until it has `n` of them or `seconds` pass."""
    got = []
    deadline = time.time() + seconds
    while len(got) < n and time.time() < deadline:
        got += [m.value().decode() for m in reader.consume(100, 1.0) if m.error() is None]
    return got


def check_log(acked, got):
    """Every acknowledged record is there once at its acknowledged offset; offsets never go
    back within a partition."""
    seen = {}
    for part, off, key in got:
        assert (part, off) not in seen, f"offset {part}/{off} read twice"
        seen[(part, off)] = key
    for part, off, key in acked:
        assert seen.get((part, off)) == key, f"acknowledged {key} at {part}/{off}, found {seen.get((part, off))}"
    keys = [k for _, _, k in got]
    assert len(keys) == len(set(keys)), "a record is in the log twice"
    by_part = {}
    for part, off, _ in got:
        assert off > by_part.get(part, -1), "offsets went back"
        by_part[part] = off


def test_acks_all_survives_leader_kills(cluster):
    """A topic of replication factor 3: every replica is in the ISR; 3,000 idempotent acks=all
    records are acknowledged; SIGKILL of partition 0's leader moves its leadership to a
    follower (within the wait) that has every acknowledged record; more records go to the two
    left; the killed node, restarted, catches up and rejoins every ISR; then the new leader is
    killed too and every acknowledged record (of both rounds) is read back once, at its offset,
    from the nodes left."""
    topic = "replicated"
    create(cluster, topic, 2)
    wait_for("every replica in sync", lambda: all(
        isr_of(cluster, n, topic) and all(isr == [1, 2, 3] for _l, isr in isr_of(cluster, n, topic).values())
        for n in (1, 2, 3)), logs(cluster))
    acked = produce(cluster, [1, 2, 3], topic, 3000, "a")
    assert len(acked) == 3000

    leader = isr_of(cluster, 1, topic)[0][0]
    cluster.brokers[leader].proc.send_signal(signal.SIGKILL)
    cluster.brokers[leader].proc.wait()
    left = [n for n in (1, 2, 3) if n != leader]
    killed_at = time.time()
    new = wait_for("a new leader for partition 0", lambda: (lambda l: l if l not in (-1, leader) else None)(
        isr_of(cluster, left[0], topic)[0][0]), logs(cluster))
    print(f"leader {leader} killed; {new} leads after {time.time() - killed_at:.2f} s")
    acked += produce(cluster, left, topic, 1000, "b")
    check_log(acked, consume_all(cluster, left, topic, 2, len(acked)))

    cluster.start(leader)
    wait_for("the restarted node back in every ISR", lambda: all(
        isr == [1, 2, 3] for _l, isr in isr_of(cluster, new, topic).values()), logs(cluster))
    cluster.brokers[new].proc.send_signal(signal.SIGKILL)
    cluster.brokers[new].proc.wait()
    left = [n for n in (1, 2, 3) if n != new]
    wait_for("a leader for every partition", lambda: all(
        l not in (-1, new) for l, _isr in isr_of(cluster, left[0], topic).values()), logs(cluster))
    check_log(acked, consume_all(cluster, left, topic, 2, len(acked)))


def load(cluster, node, topic, seconds, rate="max"):
    """tidemark's load generator against node (acks=all, 1 KiB records, at most `rate` records
    a second): its JSON summary."""
    import json
    import subprocess
    from conftest import BIN
    out = subprocess.run([BIN, "load", "produce", "--bootstrap", cluster.brokers[node].bootstrap, "--topic", topic,
                          "--acks", "all", "--record-size", "1024", "--duration", str(seconds), "--rate", str(rate),
                          "--json"], check=True, capture_output=True, text=True, timeout=seconds + 120).stdout
    return json.loads(out.strip().splitlines()[-1])


def pct(values, q):
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def test_replication_figures(cluster):
    """Replication's figures, small in CI (scripts/bench-replication.sh runs them
    longer): produce throughput and p99 at replication factor 1 and 3 (acks=all, one partition
    led by node 1, the load generator against node 1, RF 1 and RF 3 alternated in one run, three
    nodes sharing two cores); failover time from the leader's SIGKILL to an idempotent producer's
    first acknowledged record after it (p50/p99 over the rounds); and the catch-up rate of a
    follower that was down while records kept coming. Each figure is checked only to exist and
    be sane (every record acknowledged, nothing lost), never against a time."""
    rounds = int(os.environ.get("TIDEMARK_REPL_ROUNDS", "1"))
    load_s = int(os.environ.get("TIDEMARK_REPL_LOAD_S", "2"))
    down_s = int(os.environ.get("TIDEMARK_REPL_DOWN_S", "3"))
    a = AdminClient({"bootstrap.servers": cluster.brokers[1].bootstrap})
    figures = {"rf1": [], "rf3": []}
    for k in range(max(1, rounds // 5)):
        for kind, replicas in (("rf1", [1]), ("rf3", [1, 2, 3])):
            # A topic per run, deleted after it (the disk holds a few runs at full speed only).
            topic = f"{kind}-{k}"
            a.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[replicas])],
                            request_timeout=30)[topic].result(60)
            wait_for(f"{topic} led by node 1 everywhere", lambda: all(
                isr_of(cluster, n, topic).get(0, (0,))[0] == 1 for n in (1, 2, 3)), logs(cluster))
            r = load(cluster, 1, topic, load_s)
            assert r["errors"] == 0 and r["records"] > 0, r
            figures[kind].append((r["mb_per_sec"], r["latency_ms"]["p99"]))
            a.delete_topics([topic], request_timeout=30)[topic].result(60)
    a.create_topics([NewTopic("rf3", num_partitions=1, replica_assignment=[[1, 2, 3]])],
                    request_timeout=30)["rf3"].result(60)
    for topic, runs in figures.items():
        print(f"produce {topic} acks=all: " + ", ".join(f"{mb:.1f} MB/s p99 {p99:.1f} ms" for mb, p99 in runs))

    # Failover: a producer sends one record every 10 ms; the leader of partition 0 is killed;
    # the time to the first acknowledgement of a record sent after the kill.
    create(cluster, "failover", 1)
    times = []
    for _ in range(rounds):
        live = [n for n in (1, 2, 3) if cluster.brokers[n].proc.poll() is None]

        def agreed():
            # Every node's view alike (a node just restarted may still report its old one),
            # every replica in sync.
            views = [isr_of(cluster, n, "failover") for n in live]
            same = views[0] and all(v == views[0] for v in views)
            return views[0] if same and all(isr == [1, 2, 3] for _l, isr in views[0].values()) else None
        leader = wait_for("every replica in sync, as every node says", agreed, logs(cluster))[0][0]
        acked = []
        p = Producer({"bootstrap.servers": bootstrap(cluster, (1, 2, 3)), "acks": "all", "enable.idempotence": True,
                      "linger.ms": 0, "message.timeout.ms": 120000, "metadata.max.age.ms": 1000,
                      "topic.metadata.refresh.interval.ms": 250})
        for i in range(20):
            p.produce("failover", value=b"warm", on_delivery=lambda e, m: None)
        p.flush(30)
        killed_at = time.time()
        cluster.brokers[leader].proc.send_signal(signal.SIGKILL)
        cluster.brokers[leader].proc.wait()
        deadline = time.time() + 120
        while not acked and time.time() < deadline:
            p.produce("failover", value=b"after", on_delivery=lambda e, m: e is None and acked.append(time.time()))
            p.poll(0.01)
        assert p.flush(120) == 0
        del p
        assert acked, "no record acknowledged after the kill"
        times.append(acked[0] - killed_at)
        print(f"  round {len(times)}: leader {leader} killed, first acks=all success after {times[-1]:.2f} s")
        cluster.start(leader)
    print(f"failover (leader SIGKILL to first acks=all success), {len(times)} rounds: "
          f"p50 {pct(times, 0.5):.2f} s, p99 {pct(times, 0.99):.2f} s, max {max(times):.2f} s")

    # Catch-up: node 3 is down for down_s while the load generator writes to rf3 (led by 1, ISR
    # {1, 2} meanwhile); restarted, how fast it copies what it missed.
    from confluent_kafka import ElectionType
    from confluent_kafka import TopicPartition as CTp
    wait_for("rf3 fully in sync", lambda: isr_of(cluster, 2, "rf3")[0][1] == [1, 2, 3], logs(cluster))
    if isr_of(cluster, 2, "rf3")[0][0] != 1:
        a.elect_leaders(ElectionType.PREFERRED, [CTp("rf3", 0)]).result(30)
    wait_for("node 1 leads rf3", lambda: isr_of(cluster, 1, "rf3")[0][0] == 1, logs(cluster))
    cluster.brokers[3].stop(signal.SIGKILL)
    wait_for("node 3 out of the ISR", lambda: 3 not in isr_of(cluster, 1, "rf3")[0][1], logs(cluster))
    r = load(cluster, 1, "rf3", down_s, rate=50000)
    missed = r["records"] * 1024
    started = time.time()
    cluster.start(3)
    wait_for("node 3 back in the ISR", lambda: 3 in isr_of(cluster, 1, "rf3")[0][1], logs(cluster))
    took = time.time() - started
    print(f"catch-up: {missed / 1e6:.0f} MB missed in {down_s} s down (50 MB/s of acks=all load), back in the ISR {took:.1f} s after "
          f"its restart: {missed / 1e6 / took:.1f} MB/s (start included)")


def test_committed_offsets_survive_the_coordinators_kill(cluster):
    """A group commits offsets through its coordinator (the leader of its __consumer_offsets
    partition, replicated to the two others); SIGKILL of that node makes another replica the
    partition's leader, which loads the group from its copy: the committed offsets read back
    the same through the new coordinator, and a new commit there works."""
    from confluent_kafka import TopicPartition as CTp
    create(cluster, "offsets-kept", 3)
    cluster.internal_topics_created([1, 2, 3])
    c = Consumer({"bootstrap.servers": bootstrap(cluster, (1, 2, 3)), "group.id": "kept",
                  "enable.auto.commit": False})
    wanted = [CTp("offsets-kept", p, 100 + p) for p in range(3)]
    c.commit(offsets=wanted, asynchronous=False)
    coordinator = None
    a = AdminClient({"bootstrap.servers": bootstrap(cluster, (1, 2, 3))})
    desc = a.describe_consumer_groups(["kept"])["kept"].result(30)
    coordinator = desc.coordinator.id
    c.close()
    cluster.brokers[coordinator].proc.send_signal(signal.SIGKILL)
    cluster.brokers[coordinator].proc.wait()
    left = [n for n in (1, 2, 3) if n != coordinator]

    def committed():
        c2 = Consumer({"bootstrap.servers": bootstrap(cluster, left), "group.id": "kept", "enable.auto.commit": False})
        try:
            got = c2.committed([CTp("offsets-kept", p) for p in range(3)], timeout=10)
            return [(t.partition, t.offset) for t in got]
        finally:
            c2.close()
    got = wait_for("the committed offsets from the new coordinator",
                   lambda: (lambda g: g if g == [(0, 100), (1, 101), (2, 102)] else None)(committed()), logs(cluster))
    assert got == [(0, 100), (1, 101), (2, 102)]
    c3 = Consumer({"bootstrap.servers": bootstrap(cluster, left), "group.id": "kept", "enable.auto.commit": False})
    c3.commit(offsets=[CTp("offsets-kept", 0, 500)], asynchronous=False)
    assert c3.committed([CTp("offsets-kept", 0)], timeout=10)[0].offset == 500
    c3.close()


def test_transactions_across_nodes(cluster):
    """A transactional producer (confluent-kafka) writes to a topic whose three partitions are led
    by the three nodes, with its group's offsets in the transaction: its coordinator (the
    leader of its __transaction_state partition) has the other leaders write the markers
    (WriteTxnMarkers between brokers) and the leaders verify its writes with it (KIP-890,
    AddPartitionsToTxn v4 between brokers). A read_committed consumer sees the committed
    transactions' records and none of the aborted one's; the offsets sent in the last
    committed transaction are the group's; nothing is left hanging (every partition's last
    stable offset reaches its end)."""
    from confluent_kafka import TopicPartition as CTp
    create(cluster, "txn-spread", 3)
    cluster.internal_topics_created([1, 2, 3])
    leaders = wait_for("leaders on three nodes", lambda: (lambda l: l if sorted(l) == [1, 2, 3] else None)(
        [l for l, _isr in isr_of(cluster, 1, "txn-spread").values()]), logs(cluster))
    assert sorted(leaders) == [1, 2, 3]
    p = Producer({"bootstrap.servers": bootstrap(cluster, (1, 2, 3)), "transactional.id": "spread-1",
                  "transaction.timeout.ms": 60000})
    p.init_transactions(60)
    consumer = Consumer({"bootstrap.servers": bootstrap(cluster, (1, 2, 3)), "group.id": "spread-group",
                         "enable.auto.commit": False})
    for round_, commit in enumerate([True, False, True]):
        p.begin_transaction()
        for i in range(30):
            p.produce("txn-spread", value=f"{round_}:{i}".encode(), partition=i % 3)
        p.send_offsets_to_transaction([CTp("txn-spread", 0, 10 * (round_ + 1))],
                                      consumer.consumer_group_metadata(), 30)
        if commit:
            p.commit_transaction(60)
        else:
            p.abort_transaction(60)
    consumer.close()
    reader = committed_reader(cluster, "txn-spread", "spread-reader", 3)
    got = read_values(reader, 60)
    for i in range(3):
        low, high = reader.get_watermark_offsets(CTp("txn-spread", i), timeout=10)
        pos = reader.position([CTp("txn-spread", i)])[0].offset
        assert pos == high, f"partition {i}: read to {pos}, its end is {high} (a transaction left open?)"
    reader.close()
    assert sorted(got) == sorted([f"0:{i}" for i in range(30)] + [f"2:{i}" for i in range(30)]), got
    check = Consumer({"bootstrap.servers": bootstrap(cluster, (1, 2, 3)), "group.id": "spread-group"})
    assert check.committed([CTp("txn-spread", 0)], timeout=10)[0].offset == 30
    check.close()


def test_offset_for_leader_epoch_after_failover(cluster):
    """After its leader's SIGKILL, the new leader of a partition answers OffsetForLeaderEpoch
    (KIP-101, the consumers' check after a leader change) from its epoch cache: the old leader's
    epoch ends where the new one began (the records acknowledged before the kill), the new
    epoch at the log end; a reader at an older current epoch is FENCED_LEADER_EPOCH."""
    from test_admin import offset_for_leader_epoch
    from test_bad_input import Conn
    create(cluster, "epochs", 1)
    wait_for("in sync", lambda: isr_of(cluster, 1, "epochs").get(0, (0, []))[1] == [1, 2, 3], logs(cluster))
    before = produce(cluster, [1, 2, 3], "epochs", 100, "e")
    old = isr_of(cluster, 1, "epochs")[0][0]
    cluster.brokers[old].proc.send_signal(signal.SIGKILL)
    cluster.brokers[old].proc.wait()
    left = [n for n in (1, 2, 3) if n != old]
    new = wait_for("a new leader", lambda: (lambda l: l if l not in (-1, old) else None)(
        isr_of(cluster, left[0], "epochs")[0][0]), logs(cluster))
    produce(cluster, left, "epochs", 50, "f")
    with Conn(cluster.brokers[new]) as c:
        epochs = {e for e in range(0, 4)}
        answers = {e: offset_for_leader_epoch(c, "epochs", [(0, -1, e)])[0] for e in epochs}
        fenced = offset_for_leader_epoch(c, "epochs", [(0, 0, 0)])[0]
    ends = sorted({(a[2], a[3]) for a in answers.values() if a[0] == 0 and a[2] >= 0})
    assert ends[0] == (0, len(before)), answers
    assert ends[-1][1] == len(before) + 50 and ends[-1][0] >= 1, answers
    assert fenced[0] == 74, fenced  # FENCED_LEADER_EPOCH


def test_a_follower_catches_up_with_a_compacted_leader(cluster):
    """A compacted topic of factor 3 (small segments, cleaned at once): while node 3 is down, 3,000
    records are written (overwrites of 20 keys, and every 50th a key of its own) and node 1's
    cleaner removes the overwritten ones, leaving gaps between the records it keeps; node 3, restarted, copies the leader's log with its gaps (its copy records
    that it may have them) and rejoins the ISR; every key's last value is read back."""
    from confluent_kafka import TopicPartition as CTp
    a = AdminClient({"bootstrap.servers": cluster.brokers[1].bootstrap})
    config = {"cleanup.policy": "compact", "segment.bytes": "4096", "segment.ms": "100",
              "min.cleanable.dirty.ratio": "0.01"}
    a.create_topics([NewTopic("compacted", num_partitions=1, replica_assignment=[[1, 2, 3]], config=config)],
                    request_timeout=30)["compacted"].result(60)
    wait_for("in sync", lambda: isr_of(cluster, 1, "compacted").get(0, (0, []))[1] == [1, 2, 3], logs(cluster))
    cluster.brokers[3].proc.send_signal(signal.SIGKILL)
    cluster.brokers[3].proc.wait()
    wait_for("node 3 out of the ISR", lambda: 3 not in isr_of(cluster, 1, "compacted")[0][1], logs(cluster))
    # Batches of 10: whole batches go when cleaned (gaps between batches, not only inside).
    p = Producer({"bootstrap.servers": bootstrap(cluster, (1, 2)), "acks": "all", "linger.ms": 2,
                  "batch.num.messages": 10})
    for i in range(3000):
        # Every 50th record has a key of its own: it survives cleaning, so the cleaned log
        # keeps records spread over its offsets, with gaps between them.
        key = f"u{i}" if i % 50 == 0 else f"k{i % 20}"
        p.produce("compacted", key=key.encode(), value=f"{i}".encode(), partition=0)
        if i % 300 == 0:
            p.poll(0)
    assert p.flush(60) == 0

    def read(nodes):
        c = Consumer({"bootstrap.servers": bootstrap(cluster, nodes), "group.id": f"r-{time.time()}",
                      "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        c.assign([CTp("compacted", 0, 0)])
        high = c.get_watermark_offsets(CTp("compacted", 0), timeout=10)[1]
        got = []
        deadline = time.time() + 30
        while (not got or got[-1][0] < high - 1) and time.time() < deadline:
            for m in c.consume(500, 0.5):
                if m.error() is None:
                    got.append((m.offset(), m.key().decode(), m.value().decode()))
        c.close()
        return got

    def cleaned():
        # Keep the segments rolling (segment.ms) so the cleaner has sealed ones to clean.
        p.produce("compacted", key=b"k0", value=b"tick", partition=0)
        p.flush(10)
        got = read((1, 2))
        return got if len(got) < 500 else None
    got = wait_for("the leader's log cleaned (gaps in its offsets)", cleaned, logs(cluster))
    offsets = [0] + [o for o, _, _ in got]
    assert sum(b - a > 1 for a, b in zip(offsets, offsets[1:])) > 10, "no gaps in the cleaned log"
    cluster.start(3, "--set", "replica.lag.time.max.ms=3000", "--set", "log.cleaner.backoff.ms=100")
    wait_for("node 3 back in the ISR", lambda: 3 in isr_of(cluster, 1, "compacted")[0][1], logs(cluster))
    last = {}
    for _, k, v in read((1, 2, 3)):
        last[k] = v
    assert len(last) == 20 + 60 and last["k19"] == "2999" and last["u2950"] == "2950", last


def txn_coordinator(cluster, nodes, transactional_id):
    """The node a raw FindCoordinator v1 (transaction key) names, asked of the first of `nodes`
    that answers."""
    import struct
    from test_bad_input import Conn
    key = transactional_id.encode()
    for n in nodes:
        try:
            with Conn(cluster.brokers[n], timeout=10) as c:
                r = c.call(10, 1, struct.pack(">h", len(key)) + key + struct.pack(">b", 1))
                r.i32()
                error = r.i16()
                r.nstring()
                node = r.i32()
                if error == 0:
                    return node
        except OSError:
            continue
    raise AssertionError("no node named the transaction coordinator")


def test_transactions_survive_leader_and_coordinator_kills(cluster):
    """Transactions through failovers: (1) a partition leader of an open transaction is killed
    before the commit: the producer's records go to the new leader, the commit completes, and a
    read_committed consumer sees all of the transaction once; (2) the transaction coordinator's
    node is killed between the writes and the commit: the new leader of the id's
    __transaction_state partition loads the transaction from its replicated copy and commits
    it; (3) an aborted transaction stays invisible. Nothing partial is ever read."""
    from confluent_kafka import TopicPartition as CTp
    create(cluster, "txn-fail", 3)
    cluster.internal_topics_created([1, 2, 3])
    wait_for("in sync", lambda: (lambda d: len(d) == 3 and all(isr == [1, 2, 3] for _l, isr in d.values()))(
        isr_of(cluster, 1, "txn-fail")), logs(cluster))
    p = Producer({"bootstrap.servers": bootstrap(cluster, (1, 2, 3)), "transactional.id": "fail-1",
                  "transaction.timeout.ms": 120000, "message.timeout.ms": 110000})
    p.init_transactions(60)

    def write(tag, start=0, end=30):
        for i in range(start, end):
            p.produce("txn-fail", value=f"{tag}:{i}".encode(), partition=i % 3)
        p.flush(110)

    def restart(node):
        cluster.start(node, "--set", "replica.lag.time.max.ms=3000", "--set", "log.cleaner.backoff.ms=100")
        wait_for("back in every ISR", lambda: all(
            isr == [1, 2, 3] for _l, isr in isr_of(cluster, node % 3 + 1, "txn-fail").values()), logs(cluster))

    # (1) A partition leader killed inside the transaction.
    p.begin_transaction()
    write("a")
    victim = isr_of(cluster, 1, "txn-fail")[0][0]
    cluster.brokers[victim].proc.send_signal(signal.SIGKILL)
    cluster.brokers[victim].proc.wait()
    write("a", 30, 60)
    p.commit_transaction(120)
    restart(victim)
    # (2) The coordinator's node killed between the writes and the commit.
    p.begin_transaction()
    write("b")
    coordinator = txn_coordinator(cluster, (1, 2, 3), "fail-1")
    cluster.brokers[coordinator].proc.send_signal(signal.SIGKILL)
    cluster.brokers[coordinator].proc.wait()
    p.commit_transaction(120)
    restart(coordinator)
    # (3) An aborted transaction.
    p.begin_transaction()
    write("c")
    p.abort_transaction(60)

    reader = committed_reader(cluster, "txn-fail", "fail-reader", 3)
    got = read_values(reader, 90)
    got += [m.value().decode() for m in reader.consume(100, 2.0) if m.error() is None]
    reader.close()
    want = sorted([f"a:{i}" for i in range(60)] + [f"b:{i}" for i in range(30)])
    assert sorted(got) == want, (len(got), sorted(set(want) - set(got))[:5], [g for g in got if g.startswith("c")][:5])
