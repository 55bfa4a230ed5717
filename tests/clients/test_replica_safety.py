"""Replication safety in a cluster of three tidemark processes on loopback: the faults that could
lose acknowledged records or let replicas diverge, each set up on purpose.

- A fast restart: the leader of a partition is SIGKILLed just after an fsync its followers have
  not fetched (they are paused) and started again at once. It must not lead from the metadata
  it saved (its old epoch) before its new registration is committed: Kafka's broker takes no
  leadership until then. Before, it led at once with a high watermark covering the tail its
  followers never had, which the cluster then lost: a reader had been shown records that went.
- A follower behind its leader's log start (DeleteRecords while it was down) starts again at
  the leader's start and rejoins the ISR. Before, it asked for the same offset forever.

Three nodes share the machine's two cores: the waits are generous.
"""
import os
import signal
import struct
import tempfile
import threading
import time

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from test_bad_input import Conn
from test_cluster import Cluster
from test_cluster_topics import logs, wait_for
from test_replication import bootstrap, check_log, consume_all, isr_of, produce


@pytest.fixture
def cluster():
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as d:
        c = Cluster(d)
        try:
            for n in (1, 2, 3):
                c.start(n, "--set", "replica.lag.time.max.ms=3000")
            c.agreed([1, 2, 3], want_brokers=sorted((n, c.ports[n]) for n in (1, 2, 3)))
            yield c
        finally:
            for b in c.brokers.values():
                if b.proc and b.proc.poll() is None:
                    b.proc.send_signal(signal.SIGCONT)
            c.stop_all()


def s16(text):
    b = text.encode()
    return struct.pack(">h", len(b)) + b


def latest(cluster, node, topic, partition=0):
    """(error, offset) of ListOffsets v1 latest (-1) as node answers it (its high watermark
    when it leads the partition)."""
    body = struct.pack(">ii", -1, 1) + s16(topic) + struct.pack(">iiq", 1, partition, -1)
    with Conn(cluster.brokers[node], timeout=3) as c:
        r = c.call(2, 1, body)
        assert r.i32() == 1
        r.string()
        assert r.i32() == 1
        _p, error, _ts, offset = r.i32(), r.i16(), r.i64(), r.i64()
        return error, offset


class Watermarks:
    """Every node's latest offset for a partition, polled in a thread: what readers were
    told, node by node. A high watermark a client saw must never exceed what the log keeps."""

    def __init__(self, cluster, topic):
        self.cluster, self.topic = cluster, topic
        self.seen, self.stop = [], threading.Event()
        self.thread = threading.Thread(target=self.run)
        self.thread.start()

    def run(self):
        while not self.stop.is_set():
            for n in (1, 2, 3):
                try:
                    error, offset = latest(self.cluster, n, self.topic)
                    if error == 0:
                        self.seen.append((time.time(), n, offset))
                except Exception:  # paused, killed or starting
                    pass
            time.sleep(0.05)

    def finish(self):
        self.stop.set()
        self.thread.join(30)
        return self.seen


def test_a_fast_restart_does_not_lead_from_stale_metadata(cluster):
    """RF 3, one partition. 200 acks=all records; both followers paused (SIGSTOP); 50 acks=1
    records the leader alone fsyncs; the leader SIGKILLed and started again at once, followers
    still paused. Then the followers go on. Checked: every acks=all record is in the final log
    at its offset; no node ever told a reader a latest offset (its high watermark) past the
    final log's end: the restarted node never served the unreplicated tail as committed (it
    did, before: it led at its old epoch from its saved metadata, high watermark at its
    durable end, and the leader elected after it lacked those 50 records). Kafka: a broker
    takes no leadership before its registration commits, and a high watermark moves only with
    followers' fetches."""
    topic = "fast-restart"
    a = AdminClient({"bootstrap.servers": cluster.brokers[1].bootstrap})
    a.create_topics([NewTopic(topic, 1, 3)], request_timeout=30)[topic].result(60)
    wait_for("every replica in sync", lambda: all(
        isr_of(cluster, n, topic).get(0, (0, []))[1] == [1, 2, 3] for n in (1, 2, 3)), logs(cluster))
    watermarks = Watermarks(cluster, topic)
    try:
        acked = produce(cluster, [1, 2, 3], topic, 200, "a")
        leader = isr_of(cluster, 1, topic)[0][0]
        followers = [n for n in (1, 2, 3) if n != leader]
        for f in followers:
            cluster.brokers[f].proc.send_signal(signal.SIGSTOP)
        p = Producer({"bootstrap.servers": cluster.brokers[leader].bootstrap, "acks": 1, "linger.ms": 5,
                      "message.timeout.ms": 20000})
        one = []
        for i in range(50):
            p.produce(topic, key=f"b:{i}".encode(), value=b"x" * 100,
                      on_delivery=lambda err, msg: one.append(err is None))
        assert p.flush(30) == 0 and all(one) and len(one) == 50, "acks=1 records acknowledged by the leader alone"
        b = cluster.brokers[leader]
        b.proc.send_signal(signal.SIGKILL)
        b.proc.wait()
        cluster.start(leader)
        # The followers stay paused a while: the restarted node has no quorum to register with.
        time.sleep(4)
        stale = [(n, o) for _t, n, o in watermarks.seen if n == leader and o > 200]
        for f in followers:
            cluster.brokers[f].proc.send_signal(signal.SIGCONT)
        wait_for("a leader and every replica in sync again", lambda: all(
            isr_of(cluster, n, topic).get(0, (-1, []))[0] > 0
            and isr_of(cluster, n, topic)[0][1] == [1, 2, 3] for n in (1, 2, 3)), logs(cluster))
        acked += produce(cluster, [1, 2, 3], topic, 100, "c")
    finally:
        seen = watermarks.finish()
    got = consume_all(cluster, [1, 2, 3], topic, 1, len(acked))
    check_log(acked, [g for g in got if not g[2].startswith("b:")])
    end = max(o for _p, o, _k in got) + 1
    lost = [k for _p, _o, k in got if k.startswith("b:")]
    assert not stale, f"the restarted node led from stale metadata, telling readers {stale[:3]}"
    assert_never_back(seen)
    print(f"fast restart: {len(acked)} acks=all records kept; {len(lost)} of 50 acks=1 records kept; "
          f"{len(seen)} latest-offset answers in order, final end {end}")


def assert_never_back(seen):
    """The latest offsets readers were told, in the order they were told, never went back
    (KIP-207: a new leader answers OFFSET_NOT_AVAILABLE until its high watermark reaches its
    epoch's start)."""
    top = (0, None, -1)
    for t, n, o in sorted(seen):
        assert o >= top[2], f"node {n} told {o} after node {top[1]} told {top[2]}"
        top = (t, n, o)


def test_a_follower_behind_the_leaders_start_rejoins(cluster):
    """RF 3: a follower is stopped; 300 more records are acknowledged by the two others and
    DeleteRecords moves the log start past everything the stopped follower has; restarted, the
    follower starts again at the leader's log start (Kafka's truncateFullyAndStartAt) and is
    back in the ISR within the wait, and every record from the new start is still read once.
    (Before, its fetch below the leader's start was answered out of range, its "truncation" to
    a start past its end did nothing, and it asked again at once, forever, out of the ISR.)"""
    topic = "behind"
    a = AdminClient({"bootstrap.servers": cluster.brokers[1].bootstrap})
    a.create_topics([NewTopic(topic, 1, 3)], request_timeout=30)[topic].result(60)
    wait_for("every replica in sync", lambda: all(
        isr_of(cluster, n, topic).get(0, (0, []))[1] == [1, 2, 3] for n in (1, 2, 3)), logs(cluster))
    produce(cluster, [1, 2, 3], topic, 200, "a")
    leader = isr_of(cluster, 1, topic)[0][0]
    follower = [n for n in (1, 2, 3) if n != leader][0]
    others = [n for n in (1, 2, 3) if n != follower]
    cluster.brokers[follower].stop()
    acked = produce(cluster, others, topic, 300, "b")
    end = max(o for _p, o, _k in acked) + 1
    a = AdminClient({"bootstrap.servers": bootstrap(cluster, others)})
    done = a.delete_records([TopicPartition(topic, 0, end - 50)])
    assert list(done.values())[0].result(30).low_watermark == end - 50
    cluster.start(follower, "--set", "replica.lag.time.max.ms=3000")
    wait_for("the follower back in the ISR", lambda: all(
        isr_of(cluster, n, topic).get(0, (0, []))[1] == [1, 2, 3] for n in others), logs(cluster))
    tail = [x for x in acked if x[1] >= end - 50]
    got = consume_all(cluster, others, topic, 1, len(tail))
    check_log(tail, got)
    with open(os.path.join(cluster.brokers[follower].data_dir, "broker.log"), errors="replace") as f:
        restarts = f.read().count("replica restarts at the leader's log start")
    assert restarts == 1, f"the follower restarted its log {restarts} times"
