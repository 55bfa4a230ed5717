"""Kafka's production layout on loopback: three controller-only nodes (process.roles=controller,
the metadata quorum) and two broker-only nodes (process.roles=broker, which find the quorum by
controller.quorum.bootstrap.servers, follow it as observers and host every partition). Five
processes share the machine's two cores: the waits are generous.

What is checked, with static voters (controller.quorum.voters): the brokers register through
the controllers and the controllers hold no partition; an idempotent acks=all producer writes
while the active controller is SIGKILLed: another controller takes over, nothing acknowledged
is lost, and metadata changes (a topic created, partitions added) keep working; the killed
controller restarts and catches up as a voter; the brokers are listed as the quorum's
observers.

With a dynamic quorum (KIP-853, controller.quorum.bootstrap.servers only): the first
controller starts the quorum alone, the other two are added with AddRaftVoter (sent to a
broker, which forwards it); under load, a controller's disk is wiped and it restarts with a new
directory id: it is refused as the voter it was (the quorum lists the old directory), is
removed (RemoveRaftVoter) and added again with its new directory, and catches up; then the
active controller is SIGKILLed. Nothing acknowledged is lost and metadata keeps changing.
"""
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from conftest import BIN, Broker, free_port
from test_cluster import describe_quorum
from test_replication import check_log

WAIT = 60
CONTROLLERS = (1, 2, 3)
BROKERS = (4, 5)


class Isolated:
    def __init__(self, root, dynamic=False, formatted=False):
        self.dynamic, self.formatted = dynamic or formatted, formatted
        self.ports = {n: free_port() for n in CONTROLLERS + BROKERS}
        self.nodes = {}
        for n in CONTROLLERS + BROKERS:
            d = os.path.join(root, f"node{n}")
            os.makedirs(d)
            self.nodes[n] = Broker(d, self.ports[n])
        self.voters = ",".join(f"{n}@127.0.0.1:{self.ports[n]}" for n in CONTROLLERS)
        self.bootstrap_controllers = ",".join(f"127.0.0.1:{self.ports[n]}" for n in CONTROLLERS)

    def start(self, n):
        self.nodes[n].start(*self.settings(n))

    def settings(self, n):
        common = [
            "--set", f"node.id={n}",
            "--set", "controller.listener.names=CONTROLLER",
            "--set", "broker.heartbeat.interval.ms=500",
            "--set", "broker.session.timeout.ms=3000",
        ]
        if n in CONTROLLERS:
            if not self.dynamic:
                quorum = f"controller.quorum.voters={self.voters}"
            elif n == CONTROLLERS[0] and not self.formatted:
                # The dynamic quorum's first controller: its bootstrap servers name it alone.
                quorum = f"controller.quorum.bootstrap.servers=127.0.0.1:{self.ports[n]}"
            else:
                quorum = f"controller.quorum.bootstrap.servers={self.bootstrap_controllers}"
            role = [
                "--set", "process.roles=controller",
                "--set", f"listeners=CONTROLLER://127.0.0.1:{self.ports[n]}",
                "--set", "listener.security.protocol.map=CONTROLLER:PLAINTEXT",
                "--set", quorum,
            ]
        else:
            role = [
                "--set", "process.roles=broker",
                "--set", f"controller.quorum.bootstrap.servers={self.bootstrap_controllers}",
                "--set", "offsets.topic.replication.factor=2",
                "--set", "transaction.state.log.replication.factor=2",
                "--set", "replica.lag.time.max.ms=3000",
            ]
        return common + role

    def format(self, n, *how):
        """`tidemark storage format` of node n's data directory with its settings."""
        r = subprocess.run([BIN, "storage", "format", "--data-dir", self.nodes[n].data_dir, *self.settings(n), *how],
                           capture_output=True, text=True, timeout=60)
        return r.returncode, r.stdout + r.stderr

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


def brokers_registered(layout, admin, brokers=BROKERS):
    """Wait until DescribeCluster through the brokers lists exactly `brokers`; its answer."""
    deadline = time.time() + WAIT
    while True:
        try:
            d = admin.describe_cluster(request_timeout=10).result(15)
            if sorted(n.id for n in d.nodes) == list(brokers):
                return d
        except Exception:  # brokers starting, registering
            pass
        assert time.time() < deadline, "brokers not registered: " + layout.logs()
        time.sleep(0.3)


class Load:
    """An idempotent acks=all producer writing keyed records to `topic` in a thread until
    stopped: what it had acknowledged as (partition, offset, key), and what failed."""

    def __init__(self, layout, topic):
        self.layout, self.topic = layout, topic
        self.acked, self.failed, self.stop = [], [], threading.Event()
        self.thread = threading.Thread(target=self.run)
        self.thread.start()

    def run(self):
        p = Producer({"bootstrap.servers": self.layout.bootstrap(), "enable.idempotence": True, "acks": "all",
                      "linger.ms": 5, "message.timeout.ms": 120000})

        def done(err, msg):
            if err is None:
                self.acked.append((msg.partition(), msg.offset(), msg.key().decode()))
            else:
                self.failed.append(str(err))
        i = 0
        while not self.stop.is_set():
            p.produce(self.topic, key=f"k{i}", value=b"x" * 100, on_delivery=done)
            p.poll(0)
            i += 1
            if i % 200 == 0:
                time.sleep(0.05)
        left = p.flush(120)
        if left:
            self.failed.append(f"{left} records not delivered at the end")

    def finish(self):
        """Stop, deliver what is pending; the acknowledged records."""
        self.stop.set()
        self.thread.join(180)
        assert not self.failed, self.failed[:5]
        return self.acked


def test_isolated_controllers_survive_the_active_controllers_kill(isolated):
    """Three controllers, two brokers: load through the active controller's SIGKILL loses
    nothing acknowledged and metadata keeps changing; the killed controller catches up."""
    admin = AdminClient({"bootstrap.servers": isolated.bootstrap()})
    brokers_registered(isolated, admin)
    admin.create_topics([NewTopic("iso", 2, 2)], request_timeout=30)["iso"].result(60)
    q = isolated.wait_quorum("both brokers listed as observers", lambda q: set(BROKERS) <= set(q["observers"]))
    assert set(q["voters"]) == set(CONTROLLERS), q

    load = Load(isolated, "iso")
    try:
        time.sleep(2)
        old = isolated.quorum()["leader"]
        isolated.nodes[old].stop(signal.SIGKILL)
        killed_at = time.time()
        left = tuple(n for n in CONTROLLERS if n != old)
        q = isolated.wait_quorum("a new active controller", lambda q: q["leader"] in left, among=left)
        print(f"controller {old} killed; {q['leader']} active after {time.time() - killed_at:.2f} s")
        # Metadata changes through the new active controller.
        admin.create_topics([NewTopic("after-kill", 1, 2)], request_timeout=30)["after-kill"].result(60)
        admin.create_partitions([NewPartitions("iso", 3)], request_timeout=30)["iso"].result(60)
        time.sleep(2)
    finally:
        acked = load.finish()
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


def directory_id(node):
    """A node's directory id from its meta.properties (as an operator reads it): (text, 16 bytes)."""
    import base64
    with open(os.path.join(node.data_dir, "meta.properties")) as f:
        text = dict(line.strip().split("=", 1) for line in f if "=" in line and not line.startswith("#"))["directory.id"]
    return text, base64.urlsafe_b64decode(text + "==")


def voter_call(via, api, body):
    """AddRaftVoter (80) v0 or RemoveRaftVoter (81) v0, raw, to node `via`: (error, message)."""
    from test_admin import CR
    from test_bad_input import Conn
    with Conn(via, timeout=90) as c:
        r = CR(c.call(api, 0, body, flexible=True).buf)
    r.tags()
    r.i32()  # throttle
    return r.i16(), r.nstring_c()


def add_voter(via, voter, directory, port):
    import struct
    name, host = b"CONTROLLER", b"127.0.0.1"
    body = (b"\x00" + struct.pack(">ii", 60000, voter) + directory + b"\x02" + bytes([len(name) + 1]) + name
            + bytes([len(host) + 1]) + host + struct.pack(">H", port) + b"\x00" + b"\x00")
    return voter_call(via, 80, body)


def remove_voter(via, voter, directory):
    import struct
    return voter_call(via, 81, b"\x00" + struct.pack(">i", voter) + directory + b"\x00")


@pytest.fixture
def dynamic():
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as d:
        c = Isolated(d, dynamic=True)
        try:
            for n in CONTROLLERS + BROKERS:
                c.start(n)
            yield c
        finally:
            c.stop_all()


def test_dynamic_quorum_replaces_a_wiped_controller(dynamic):
    """A dynamic quorum grown from one controller to three by AddRaftVoter; a wiped controller
    replaced (RemoveRaftVoter, AddRaftVoter with its new directory) under load, then the active
    controller killed: nothing acknowledged lost, metadata keeps changing."""
    first, second, third = CONTROLLERS
    broker = dynamic.nodes[BROKERS[0]]
    dynamic.wait_quorum("the first controller leads alone", lambda q: set(q["voters"]) == {first}, among=(first,))
    assert remove_voter(broker, first, directory_id(dynamic.nodes[first])[1])[0] != 0, "the last voter removed"
    for n in (second, third):
        error, message = add_voter(broker, n, directory_id(dynamic.nodes[n])[1], dynamic.ports[n])
        assert error == 0, (n, error, message, dynamic.logs())
    assert add_voter(broker, third, directory_id(dynamic.nodes[third])[1], dynamic.ports[third])[0] == 126
    q = dynamic.wait_quorum("three voters", lambda q: set(q["voters"]) == set(CONTROLLERS))
    admin = AdminClient({"bootstrap.servers": dynamic.bootstrap()})
    brokers_registered(dynamic, admin)
    admin.create_topics([NewTopic("dyn", 2, 2)], request_timeout=30)["dyn"].result(60)

    load = Load(dynamic, "dyn")
    try:
        time.sleep(1)
        # The wiped controller: not the active one, so the quorum keeps its majority.
        active = dynamic.quorum()["leader"]
        wiped = next(n for n in (third, second) if n != active)
        old_dir = directory_id(dynamic.nodes[wiped])[1]
        dynamic.nodes[wiped].stop(signal.SIGKILL)
        shutil.rmtree(dynamic.nodes[wiped].data_dir)
        os.makedirs(dynamic.nodes[wiped].data_dir)
        dynamic.start(wiped)
        new_dir = directory_id(dynamic.nodes[wiped])[1]
        assert new_dir != old_dir
        # The quorum still names the old directory; the new one refuses to stand in for it.
        deadline = time.time() + WAIT
        while "directory id mismatch" not in dynamic.nodes[wiped].log():
            assert time.time() < deadline, "the wiped controller took the old voter's place: " + dynamic.logs()
            time.sleep(0.2)
        assert set(dynamic.quorum()["voters"]) == set(CONTROLLERS)
        assert add_voter(broker, wiped, new_dir, dynamic.ports[wiped])[0] == 126, "a voter of that id is there"
        assert remove_voter(broker, wiped, new_dir)[0] == 127, "no voter has the new directory yet"
        error, message = remove_voter(broker, wiped, old_dir)
        assert error == 0, (error, message)
        error, message = add_voter(broker, wiped, new_dir, dynamic.ports[wiped])
        assert error == 0, (error, message, dynamic.logs())
        dynamic.wait_quorum("the replaced controller caught up", lambda q: q["voters"].get(wiped, {}).get(
            "log_end", -1) >= q["high_watermark"] > 0)

        old = dynamic.quorum()["leader"]
        dynamic.nodes[old].stop(signal.SIGKILL)
        left = tuple(n for n in CONTROLLERS if n != old)
        dynamic.wait_quorum("a new active controller", lambda q: q["leader"] in left, among=left)
        admin.create_topics([NewTopic("dyn-after", 1, 2)], request_timeout=30)["dyn-after"].result(60)
        time.sleep(1)
    finally:
        acked = load.finish()
    assert len(acked) > 500, len(acked)
    from test_replication import consume_all
    check_log(acked, consume_all(Shim(dynamic), BROKERS, "dyn", 2, len(acked)))


def test_storage_format_starts_a_dynamic_quorum_of_three(tmp_path):
    """`tidemark storage format` as kafka-storage format: each of three controllers formatted
    with --initial-controllers (ids, controller listeners and directory ids from `tidemark
    storage random-uuid`) and one cluster id forms a quorum of exactly those voters, with those
    directory ids, at first start; the cluster has that id; a broker joins and serves. A
    directory already formatted is refused (left as it is with --ignore-formatted); a list
    without this node, --standalone on a static quorum, or on a broker-only node: refused."""
    layout = Isolated(str(tmp_path), formatted=True)

    def uuid():
        return subprocess.run([BIN, "storage", "random-uuid"], capture_output=True, text=True, check=True).stdout.strip()
    cluster_id = uuid()
    dirs = {n: uuid() for n in CONTROLLERS}
    voters = ",".join(f"{n}@127.0.0.1:{layout.ports[n]}:{dirs[n]}" for n in CONTROLLERS)
    for n in CONTROLLERS:
        code, out = layout.format(n, "-t", cluster_id, "--initial-controllers", voters)
        assert code == 0, out
        assert f"directory.id={dirs[n]}" in out, out
    code, out = layout.format(1, "-t", cluster_id, "--initial-controllers", voters)
    assert code != 0 and "already formatted" in out, out
    assert layout.format(1, "--ignore-formatted", "--standalone")[0] == 0
    others = ",".join(f"{n}@127.0.0.1:{layout.ports[n]}:{dirs[n]}" for n in CONTROLLERS[1:])
    code, out = Isolated(str(tmp_path / "x"), formatted=True).format(1, "--initial-controllers", others)
    assert code != 0 and "does not name this node" in out, out
    static = Isolated(str(tmp_path / "y"))
    code, out = static.format(1, "--standalone")
    assert code != 0 and "static quorum" in out, out
    code, out = layout.format(BROKERS[0], "--standalone")
    assert code != 0 and "format a controller" in out, out
    code, out = layout.format(BROKERS[0], "-t", cluster_id, "--no-initial-controllers")
    assert code == 0, out
    try:
        for n in CONTROLLERS + BROKERS[:1]:
            layout.start(n)
        q = layout.wait_quorum("the three formatted voters", lambda q: set(q["voters"]) == set(CONTROLLERS))
        import base64
        for n in CONTROLLERS:
            assert q["voters"][n]["directory"] == base64.urlsafe_b64decode(dirs[n] + "=="), (n, q)
        admin = AdminClient({"bootstrap.servers": layout.nodes[BROKERS[0]].bootstrap})
        d = brokers_registered(layout, admin, BROKERS[:1])
        assert d.cluster_id == cluster_id, (d.cluster_id, cluster_id)
        admin.create_topics([NewTopic("formatted", 1, 1)], request_timeout=30)["formatted"].result(60)
        from test_clients import consume, produce
        produce(layout.nodes[BROKERS[0]].bootstrap, "formatted", [(None, b"f%d" % i, None) for i in range(3)])
        assert [m.value() for m in consume(layout.nodes[BROKERS[0]].bootstrap, "formatted", 3)] == [b"f0", b"f1", b"f2"]
    finally:
        layout.stop_all()
