"""Kafka's own configuration files, read as Kafka reads them.

- Kafka 4.1's shipped `config/server.properties` (tests/clients/data/kafka-4.1, with where it
  came from), only its ports and directory changed, started as kafka-server-start.sh takes it
  (`tidemark serve FILE`): a single-controller cluster from `controller.quorum.bootstrap.servers`
  naming the node itself, no format step; data in `log.dirs`; clients produce and read back.
  The settings Kafka knows and tidemark does not use are logged once each and ignored.
- `--strict-config` refuses the same file, naming such a setting.
- An operator's file with a misspelled name starts, warning with the closest known name; a
  name neither Kafka nor tidemark knows is reported as unknown.
- Kafka 4.1's shipped `controller.properties` and `broker.properties` (isolated roles): a
  controller-only node and a broker-only node that follows its quorum as an observer; the
  controller listener serves Kafka's controller APIs (as `--bootstrap-controller` tools use
  them) and closes a connection asking for a broker's.
- Combined and isolated nodes mix: Kafka's shipped `server.properties` (a combined node) and
  `broker.properties` (a broker-only node following it) form one cluster of two brokers.
- A combined-mode file naming a CONTROLLER listener without `listener.security.protocol.map`
  starts: Kafka maps controller listeners to PLAINTEXT when the map is not set and no listener
  is SSL or SASL (KafkaConfig's effective protocol map).
"""
import os
import re
import socket
import subprocess
import time

from conftest import BIN, free_port
from test_clients import consume, create, produce

DATA = os.path.join(os.path.dirname(__file__), "data", "kafka-4.1")
WAIT = 60


def shipped(name, **ports_and_dirs):
    """A file of Kafka 4.1 with only its ports and directories replaced."""
    with open(os.path.join(DATA, name)) as f:
        text = f.read()
    for old, new in ports_and_dirs.items():
        text = text.replace(old, new)
    return text


class Node:
    """`tidemark serve FILE [args]` in its own working directory (no --data-dir: the file says
    where the data goes)."""

    def __init__(self, cwd, port, *args):
        self.cwd, self.port = cwd, port
        self.log_path = os.path.join(cwd, "node.log")
        self.proc = subprocess.Popen([BIN, "serve", *args], cwd=cwd, stdout=subprocess.DEVNULL,
                                     stderr=open(self.log_path, "ab"))

    def wait_listening(self):
        deadline = time.time() + WAIT
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                assert self.proc.poll() is None, "node exited: " + self.log()
                time.sleep(0.05)
        raise AssertionError("node did not listen: " + self.log())

    def log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")[-20000:]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)
        return self.proc.returncode


def produce_and_read_back(bootstrap, topic):
    deadline = time.time() + WAIT
    while True:
        try:
            create(bootstrap, topic, partitions=1)
            break
        except Exception:
            # The quorum elects its one voter and the broker registers first.
            assert time.time() < deadline
            time.sleep(0.5)
    produce(bootstrap, topic, [(None, b"v%d" % i, None) for i in range(3)])
    assert [m.value() for m in consume(bootstrap, topic, 3)] == [b"v0", b"v1", b"v2"]


def test_kafka_4_1_shipped_server_properties(tmp_path):
    """Kafka 4.1's config/server.properties starts as it is: a one-voter quorum from its
    bootstrap servers, data in log.dirs, Kafka's settings tidemark has no use for logged once
    each; clients produce and read back."""
    port, cport = free_port(), free_port()
    logs = tmp_path / "kraft-combined-logs"
    props = tmp_path / "server.properties"
    props.write_text(shipped("server.properties", **{
        ":9092": ":%d" % port, ":9093": ":%d" % cport, "/tmp/kraft-combined-logs": str(logs)}))
    node = Node(str(tmp_path), port, str(props))
    try:
        node.wait_listening()
        produce_and_read_back("127.0.0.1:%d" % port, "shipped")
        assert (logs / "__cluster_metadata-0").is_dir(), "the metadata log is not in log.dirs"
        assert not (tmp_path / "data").exists(), "./data used despite log.dirs"
        log = node.log()
        unused = re.findall(r"(\S+): a Kafka setting tidemark does not use; ignored", log)
        assert "share.coordinator.state.topic.replication.factor" in unused, log[-3000:]
        assert len(unused) == len(set(unused)), "each unused setting is logged once: %s" % unused
    finally:
        assert node.stop() == 0, node.log()


def describe_cluster_controllers(port):
    """DescribeCluster v1 with endpoint type CONTROLLER (2), raw, on a controller listener:
    (error, controller id, {node: (host, port)}, cluster id)."""
    import struct
    from test_admin import CR
    from test_bad_input import Conn
    from types import SimpleNamespace
    with Conn(SimpleNamespace(port=port), timeout=30) as c:
        r = CR(c.call(60, 1, b"\x00\x02\x00", flexible=True).buf)
    r.tags()
    r.i32()  # throttle
    error, _message, endpoint_type = r.i16(), r.nstring_c(), r.buf[r.pos]
    r.pos += 1
    assert endpoint_type == 2
    cluster_id, controller = r.cstring(), r.i32()
    nodes = {}
    for _ in range(r.count()):
        node, host, p, _rack = r.i32(), r.cstring(), r.i32(), r.nstring_c()
        r.tags()
        nodes[node] = (host, p)
    return error, controller, nodes, cluster_id


def test_kafka_4_1_shipped_controller_and_broker_properties(tmp_path):
    """Kafka 4.1's config/controller.properties and config/broker.properties, only their ports
    and directories changed, each started as kafka-server-start.sh takes it: node 1 a
    controller-only node (alone in the quorum: its bootstrap servers name only itself), node 2
    a broker-only node that finds it by the bootstrap servers, follows the quorum as an
    observer and hosts the partitions; clients produce and read back through node 2.

    On the controller listener, as Kafka's controller serves it: ApiVersions lists the
    controller's APIs only; DescribeQuorum names voter 1 and observer 2; DescribeCluster with
    endpoint type CONTROLLER lists node 1 at its advertised controller address; a broker's API
    (Metadata) closes the connection. Node 1 holds no partition of any topic."""
    import struct
    from types import SimpleNamespace
    from test_bad_input import Conn, api_versions_v2
    from test_cluster import describe_quorum
    port, cport = free_port(), free_port()
    ports = {":9092": ":%d" % port, ":9093": ":%d" % cport}
    (tmp_path / "c").mkdir()
    (tmp_path / "b").mkdir()
    cprops, bprops = tmp_path / "controller.properties", tmp_path / "broker.properties"
    cprops.write_text(shipped("controller.properties", **ports, **{"/tmp/kraft-controller-logs": str(tmp_path / "cl")}))
    bprops.write_text(shipped("broker.properties", **ports, **{"/tmp/kraft-broker-logs": str(tmp_path / "bl")}))
    controller = Node(str(tmp_path / "c"), cport, str(cprops))
    broker = None
    try:
        controller.wait_listening()
        broker = Node(str(tmp_path / "b"), port, str(bprops))
        broker.wait_listening()
        produce_and_read_back("127.0.0.1:%d" % port, "isolated")

        ctl = SimpleNamespace(port=cport)
        with Conn(ctl, timeout=30) as c:
            error, keys = api_versions_v2(c)
        assert error == 0 and {18, 55, 60} <= set(keys) and 0 not in keys and 3 not in keys, keys
        q = describe_quorum(ctl)
        assert (q["error"], q["leader"], set(q["voters"])) == (0, 1, {1}), q
        deadline = time.time() + WAIT
        while 2 not in q["observers"]:
            assert time.time() < deadline, "broker 2 never listed as an observer: %s" % q
            time.sleep(0.2)
            q = describe_quorum(ctl)
        assert q["nodes"][1] == [("CONTROLLER", "localhost", cport)], q
        error, active, nodes, cluster_id = describe_cluster_controllers(cport)
        assert (error, active, nodes) == (0, 1, {1: ("localhost", cport)}) and cluster_id
        with Conn(ctl, timeout=30) as c:
            c.send(c.request(3, 1, struct.pack(">i", -1)))
            state, data = c.outcome(10)
        assert (state, data) == ("closed", b""), "Metadata on the controller listener was answered"
        assert not any(p.name.startswith("isolated") for p in (tmp_path / "cl").iterdir()), \
            "the controller-only node holds partitions"
        assert (tmp_path / "bl" / "isolated-0").is_dir()
    finally:
        if broker:
            assert broker.stop() == 0, broker.log()
        assert controller.stop() == 0, controller.log()


def test_kafka_4_1_combined_and_broker_only_nodes_mix(tmp_path):
    """Kafka 4.1's server.properties (node 1, broker and controller) and broker.properties
    (node 2, a broker-only node whose bootstrap servers name node 1's controller listener): both
    brokers register; a topic of replication factor 2 is written through one and read back
    through the other."""
    from confluent_kafka.admin import AdminClient, NewTopic
    p1, p2, cport = free_port(), free_port(), free_port()
    (tmp_path / "n1").mkdir()
    (tmp_path / "n2").mkdir()
    combined, broker_only = tmp_path / "server.properties", tmp_path / "broker.properties"
    combined.write_text(shipped("server.properties", **{
        ":9092": ":%d" % p1, ":9093": ":%d" % cport, "/tmp/kraft-combined-logs": str(tmp_path / "l1")}))
    broker_only.write_text(shipped("broker.properties", **{
        ":9092": ":%d" % p2, ":9093": ":%d" % cport, "/tmp/kraft-broker-logs": str(tmp_path / "l2")}))
    first = Node(str(tmp_path / "n1"), p1, str(combined))
    second = None
    try:
        first.wait_listening()
        second = Node(str(tmp_path / "n2"), p2, str(broker_only))
        second.wait_listening()
        admin = AdminClient({"bootstrap.servers": "127.0.0.1:%d" % p2})
        deadline = time.time() + WAIT
        while True:
            try:
                nodes = admin.describe_cluster(request_timeout=10).result(15).nodes
                if sorted(n.id for n in nodes) == [1, 2]:
                    break
            except Exception:  # still registering
                pass
            assert time.time() < deadline, "both brokers not registered: " + second.log()[-3000:]
            time.sleep(0.3)
        admin.create_topics([NewTopic("mixed", 1, 2)], request_timeout=30)["mixed"].result(60)
        produce("127.0.0.1:%d" % p1, "mixed", [(None, b"m%d" % i, None) for i in range(3)])
        assert [m.value() for m in consume("127.0.0.1:%d" % p2, "mixed", 3)] == [b"m0", b"m1", b"m2"]
    finally:
        if second:
            assert second.stop() == 0, second.log()
        assert first.stop() == 0, first.log()


def test_strict_config_refuses_what_tidemark_does_not_use(tmp_path):
    """--strict-config: the shipped file is refused at a setting tidemark does not use, named."""
    props = tmp_path / "server.properties"
    props.write_text(shipped("server.properties", **{
        ":9092": ":%d" % free_port(), ":9093": ":%d" % free_port(), "/tmp/kraft-combined-logs": str(tmp_path / "l")}))
    r = subprocess.run([BIN, "serve", "--strict-config", str(props)], cwd=tmp_path, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode != 0, r.stderr[-2000:]
    assert "a Kafka setting tidemark does not use (refused: --strict-config)" in r.stderr, r.stderr[-2000:]


def test_operators_file_misspelled_and_unknown_names(tmp_path):
    """A typical operator's standalone file with a misspelling and a retired ZooKeeper setting:
    the node starts and serves; the misspelling is reported with the closest known name, the
    retired name as unknown; with --strict-config the first of them is refused."""
    port = free_port()
    props = tmp_path / "server.properties"
    props.write_text("\n".join([
        "# an operator's file",
        "broker.id=0",
        "listeners=PLAINTEXT://127.0.0.1:%d" % port,
        "log.dirs=%s,%s" % (tmp_path / "disk1", tmp_path / "disk2"),
        "num.partitions=3",
        "default.replication.factor=1",
        "min.insync.replicas=1",
        "log.retention.hours=72",
        "log.retention.check.interval.ms=300000",
        "auto.create.topics.enable=false",
        "delete.topic.enable=true",
        "compression.type=producer",
        "message.max.bytes=1048588",
        "num.replica.fetchers=2",
        "log.cleaner.enable=true",
        "group.initial.rebalance.delay.ms=0",
        "zookeeper.connect=localhost:2181",
        "log.retention.hour=48",
        "",
    ]))
    node = Node(str(tmp_path), port, str(props))
    try:
        node.wait_listening()
        produce_and_read_back("127.0.0.1:%d" % port, "ops")
        log = node.log()
        assert "log.retention.hour: unknown setting (did you mean log.retention.hours?); ignored" in log, log[-3000:]
        assert "zookeeper.connect: unknown setting" in log, log[-3000:]
        assert "disk1 is used" in log and (tmp_path / "disk1").is_dir() and not (tmp_path / "disk2").exists()
    finally:
        assert node.stop() == 0, node.log()
    r = subprocess.run([BIN, "serve", "--strict-config", str(props)], cwd=tmp_path, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode != 0 and "zookeeper.connect: unknown setting" in r.stderr, r.stderr[-2000:]


def test_controller_listener_maps_to_plaintext_without_a_protocol_map(tmp_path):
    """Combined mode naming CONTROLLER with no listener.security.protocol.map starts (Kafka maps
    controller listeners to PLAINTEXT then); with an SSL listener among them it must be mapped,
    and the refusal names the map."""
    port, cport = free_port(), free_port()
    lines = [
        "process.roles=broker,controller",
        "node.id=1",
        "controller.quorum.voters=1@127.0.0.1:%d" % cport,
        "controller.listener.names=CONTROLLER",
        "log.dirs=%s" % (tmp_path / "logs"),
        "offsets.topic.replication.factor=1",
        "transaction.state.log.replication.factor=1",
    ]
    props = tmp_path / "server.properties"
    props.write_text("\n".join(lines + ["listeners=PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d" % (port, cport)]))
    node = Node(str(tmp_path), port, str(props))
    try:
        node.wait_listening()
        produce_and_read_back("127.0.0.1:%d" % port, "mapped")
    finally:
        assert node.stop() == 0, node.log()
    props.write_text("\n".join(lines + [
        "listeners=PLAINTEXT://127.0.0.1:%d,SSL://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d" % (port, free_port(), cport)]))
    r = subprocess.run([BIN, "serve", str(props)], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "CONTROLLER is not in listener.security.protocol.map" in r.stderr, r.stderr[-2000:]
