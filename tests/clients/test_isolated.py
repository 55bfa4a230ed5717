"""Kafka's production layout on loopback: three controller-only nodes (process.roles=controller,
the metadata quorum) and two broker-only nodes (process.roles=broker, which find the quorum by
controller.quorum.bootstrap.servers, follow it as observers and host every partition). Five
processes share the machine's two cores: the waits are generous.

What is checked: the brokers register through the controllers and the controllers hold no
partition; an idempotent acks=all producer writes while the active controller is SIGKILLed:
another controller takes over, nothing acknowledged is lost, and metadata changes (a topic
created, partitions added) keep working; the killed controller restarts and catches up as a
voter; the brokers are listed as the quorum's observers.
"""
import os
import signal
import tempfile
import threading
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from conftest import Broker, free_port
from test_cluster import describe_quorum
from test_replication import check_log

WAIT = 60
CONTROLLERS = (1, 2, 3)
BROKERS = (4, 5)


class Isolated:
    def __init__(self, root):
        self.ports = {n: free_port() for n in CONTROLLERS + BROKERS}
        self.nodes = {}
        for n in CONTROLLERS + BROKERS:
            d = os.path.join(root, f"node{n}")
            os.makedirs(d)
            self.nodes[n] = Broker(d, self.ports[n])
        self.voters = ",".join(f"{n}@127.0.0.1:{self.ports[n]}" for n in CONTROLLERS)
        self.bootstrap_controllers = ",".join(f"127.0.0.1:{self.ports[n]}" for n in CONTROLLERS)

    def start(self, n):
        common = [
            "--set", f"node.id={n}",
            "--set", "controller.listener.names=CONTROLLER",
            "--set", "broker.heartbeat.interval.ms=500",
            "--set", "broker.session.timeout.ms=3000",
        ]
        if n in CONTROLLERS:
            role = [
                "--set", "process.roles=controller",
                "--set", f"listeners=CONTROLLER://127.0.0.1:{self.ports[n]}",
                "--set", "listener.security.protocol.map=CONTROLLER:PLAINTEXT",
                "--set", f"controller.quorum.voters={self.voters}",
            ]
        else:
            role = [
                "--set", "process.roles=broker",
                "--set", f"controller.quorum.bootstrap.servers={self.bootstrap_controllers}",
                "--set", "offsets.topic.replication.factor=2",
                "--set", "transaction.state.log.replication.factor=2",
                "--set", "replica.lag.time.max.ms=3000",
            ]
        self.nodes[n].start(*common, *role)

    def bootstrap(self):
        return ",".join(self.nodes[n].bootstrap for n in BROKERS)

    def quorum(self, among=CONTROLLERS):
        """DescribeQuorum from the first controller of `among` that answers with a leader."""
        last = None
        for n in among:
            try:
                q = describe_quorum(self.nodes[n])
                if q["error"] == 0 and q["leader"] in among:
                    return q
                last = q
            except Exception as e:  # a controller starting, or the one just killed
                last = repr(e)
        raise AssertionError(f"no controller of {among} described the quorum: {last}")

    def wait_quorum(self, what, ok, among=CONTROLLERS):
        deadline, last = time.time() + WAIT, None
        while time.time() < deadline:
            try:
                q = self.quorum(among)
                if ok(q):
                    return q
                last = q
            except AssertionError as e:
                last = str(e)
            time.sleep(0.3)
        raise AssertionError(f"{what}: not within {WAIT}s: {last}; " + self.logs())

    def logs(self):
        return " ".join(f"--- node {n}: {b.log()[-2500:]}" for n, b in self.nodes.items() if b.proc)

    def stop_all(self):
        for b in self.nodes.values():
            if b.proc and b.proc.poll() is None:
                b.stop()


@pytest.fixture
def isolated():
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as d:
        c = Isolated(d)
        try:
            for n in CONTROLLERS + BROKERS:
                c.start(n)
            yield c
        finally:
            c.stop_all()


def brokers_seen(admin):
    d = admin.describe_cluster(request_timeout=10).result(15)
    return sorted(n.id for n in d.nodes)


def test_isolated_controllers_survive_the_active_controllers_kill(isolated):
    """Three controllers, two brokers: load through the active controller's SIGKILL loses
    nothing acknowledged and metadata keeps changing; the killed controller catches up."""
    admin = AdminClient({"bootstrap.servers": isolated.bootstrap()})
    deadline = time.time() + WAIT
    while True:
        try:
            if brokers_seen(admin) == list(BROKERS):
                break
        except Exception:
            pass
        assert time.time() < deadline, "brokers not registered: " + isolated.logs()
        time.sleep(0.3)
    admin.create_topics([NewTopic("iso", 2, 2)], request_timeout=30)["iso"].result(60)
    q = isolated.wait_quorum("both brokers listed as observers", lambda q: set(BROKERS) <= set(q["observers"]))
    assert set(q["voters"]) == set(CONTROLLERS), q

    acked, failed, stop = [], [], threading.Event()

    def load():
        p = Producer({"bootstrap.servers": isolated.bootstrap(), "enable.idempotence": True, "acks": "all",
                      "linger.ms": 5, "message.timeout.ms": 120000})

        def done(err, msg):
            if err is None:
                acked.append((msg.partition(), msg.offset(), msg.key().decode()))
            else:
                failed.append(str(err))
        i = 0
        while not stop.is_set():
            p.produce("iso", key=f"k{i}", value=b"x" * 100, on_delivery=done)
            p.poll(0)
            i += 1
            if i % 200 == 0:
                time.sleep(0.05)
        left = p.flush(120)
        if left:
            failed.append(f"{left} records not delivered at the end")
    writer = threading.Thread(target=load)
    writer.start()
    try:
        time.sleep(2)
        old = isolated.quorum()["leader"]
        isolated.nodes[old].proc.send_signal(signal.SIGKILL)
        isolated.nodes[old].proc.wait()
        killed_at = time.time()
        left = tuple(n for n in CONTROLLERS if n != old)
        q = isolated.wait_quorum("a new active controller", lambda q: q["leader"] in left, among=left)
        print(f"controller {old} killed; {q['leader']} active after {time.time() - killed_at:.2f} s")
        # Metadata changes through the new active controller.
        admin.create_topics([NewTopic("after-kill", 1, 2)], request_timeout=30)["after-kill"].result(60)
        admin.create_partitions([NewPartitions("iso", 3)], request_timeout=30)["iso"].result(60)
        time.sleep(2)
    finally:
        stop.set()
        writer.join(180)
    assert not failed, failed[:5]
    assert len(acked) > 1000, len(acked)

    isolated.start(old)
    isolated.wait_quorum("the restarted controller caught up", lambda q: q["voters"].get(old, {}).get(
        "log_end", -1) >= q["high_watermark"] > 0)

    from test_replication import consume_all
    got = consume_all(Shim(isolated), BROKERS, "iso", 3, len(acked))
    check_log(acked, got)
    for n in CONTROLLERS:
        held = [e for e in os.listdir(isolated.nodes[n].data_dir) if e.startswith(("iso-", "after-kill-"))]
        assert not held, f"controller {n} holds partitions {held}"


class Shim:
    """What test_replication.consume_all reads of a cluster: its brokers by node id."""

    def __init__(self, isolated):
        self.brokers = isolated.nodes
