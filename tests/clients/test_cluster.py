"""Three tidemark processes as a cluster (the metadata quorum), configured with KRaft's
combined-mode settings, on loopback; a real client (confluent-kafka's AdminClient) asks each for
DescribeCluster. Three nodes share the machine's two cores: the waits are generous.

What is checked: the nodes form the quorum on first start with no format step, agree on one
active controller and one cluster id, and register all three brokers (with their client
listeners), as confluent-kafka, kafka-python and kcat see them; two nodes hand out producer
ids from the quorum's blocks, never the same one; SIGKILL of the active controller's process makes the other two elect another within
the wait, the killed broker is fenced (left out of Metadata) once its session passes, and the
killed node, restarted, rejoins (unfenced by its heartbeat) and sees the same controller;
settings that cannot form a cluster stop the start with an error naming them.
"""
import os
import shutil
import signal
import struct
import subprocess
import tempfile
import time

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import BIN, Broker, free_port
from test_bad_input import Conn

WAIT = 60


def cluster_settings(node, ports, controller_ports):
    voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in controller_ports.items())
    return [
        "--set", "process.roles=broker,controller",
        "--set", f"node.id={node}",
        "--set", f"listeners=PLAINTEXT://127.0.0.1:{ports[node]},CONTROLLER://127.0.0.1:{controller_ports[node]}",
        "--set", "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "--set", "controller.listener.names=CONTROLLER",
        "--set", f"controller.quorum.voters={voters}",
        # Heartbeats and sessions shorter than Kafka's (2 s, 9 s), so fencing shows quickly.
        "--set", "broker.heartbeat.interval.ms=500",
        "--set", "broker.session.timeout.ms=3000",
    ]


class Cluster:
    def __init__(self, root):
        ids = [1, 2, 3]
        self.ports = {i: free_port() for i in ids}
        self.controller_ports = {i: free_port() for i in ids}
        self.brokers = {}
        for i in ids:
            d = os.path.join(root, f"node{i}")
            os.makedirs(d)
            self.brokers[i] = Broker(d, self.ports[i])

    def start(self, node, *extra):
        self.metrics_ports = getattr(self, "metrics_ports", {})
        self.metrics_ports.setdefault(node, free_port())
        self.brokers[node].start(*cluster_settings(node, self.ports, self.controller_ports),
                                 "--metrics-listen", f"127.0.0.1:{self.metrics_ports[node]}", *extra)

    def init_producer_id(self, node):
        """An idempotent producer's id from node (raw InitProducerId v0)."""
        with Conn(self.brokers[node], timeout=20) as c:
            r = c.call(22, 0, struct.pack(">hi", -1, 60000))
            _throttle, error, pid = r.i32(), r.i16(), r.i64()
            assert error == 0, (node, error)
            return pid

    def gauges(self, node):
        """The quorum's gauges from node's /metrics."""
        import urllib.request
        text = urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_ports[node]}/metrics", timeout=10).read().decode()
        return {line.split()[0]: int(line.split()[1]) for line in text.splitlines()
                if line.startswith("tidemark_controller_")}

    def describe(self, node):
        """(controller id, sorted broker ids with their ports, cluster id) as node answers
        Metadata v2, asked directly (a client would route the question to any broker)."""
        with Conn(self.brokers[node], timeout=5) as c:
            r = c.call(3, 2, struct.pack(">i", 0))
            brokers = []
            for _ in range(r.i32()):
                node_id, _host, port, _rack = r.i32(), r.string(), r.i32(), r.nstring()
                brokers.append((node_id, port))
            cluster_id = r.nstring()
            return r.i32(), sorted(brokers), cluster_id

    def topics(self, node):
        """{topic: [(partition, error, leader, replicas, isr)]} as node answers Metadata v1."""
        with Conn(self.brokers[node], timeout=10) as c:
            r = c.call(3, 1, struct.pack(">i", -1))
            for _ in range(r.i32()):
                r.i32(), r.string(), r.i32(), r.nstring()
            r.i32()  # controller
            topics = {}
            for _ in range(r.i32()):
                _error, name, _internal = r.i16(), r.string(), r.i8()
                parts = []
                for _ in range(r.i32()):
                    error, index, leader = r.i16(), r.i32(), r.i32()
                    replicas = [r.i32() for _ in range(r.i32())]
                    isr = [r.i32() for _ in range(r.i32())]
                    parts.append((index, error, leader, replicas, isr))
                topics[name] = sorted(parts)
            return topics

    def internal_topics_created(self, nodes):
        """Wait until every node lists the internal topics (created through the quorum once
        enough brokers are registered for their replication factor)."""
        deadline = time.time() + WAIT
        while time.time() < deadline:
            if all({"__consumer_offsets", "__transaction_state"} <= set(self.topics(n)) for n in nodes):
                return
            time.sleep(0.2)
        raise AssertionError("internal topics not created: " + " ".join(self.brokers[n].log()[-3000:] for n in nodes))

    def describe_with_client(self, node):
        """The same through confluent-kafka's AdminClient.describe_cluster."""
        a = AdminClient({"bootstrap.servers": self.brokers[node].bootstrap})
        d = a.describe_cluster(request_timeout=10).result(15)
        return (d.controller.id if d.controller else -1), sorted((n.id, n.port) for n in d.nodes), d.cluster_id

    def agreed(self, nodes, want_brokers=None, not_controller=None):
        """Wait until every node in `nodes` names the same controller (a live one, not
        `not_controller`) and, if given, lists `want_brokers`; returns it."""
        deadline = time.time() + WAIT
        seen = None
        while time.time() < deadline:
            try:
                seen = {n: self.describe(n) for n in nodes}
            except Exception as e:  # a node still starting or electing
                seen = repr(e)
                time.sleep(0.2)
                continue
            controllers = {c for c, _, _ in seen.values()}
            cluster_ids = {i for _, _, i in seen.values()}
            if len(controllers) == 1 and len(cluster_ids) == 1:
                c = controllers.pop()
                ok = c in nodes and c != not_controller
                if ok and (want_brokers is None or all(b == want_brokers for _, b, _ in seen.values())):
                    return c
            time.sleep(0.2)
        raise AssertionError(f"no agreement within {WAIT}s: {seen}; logs: " +
                             " ".join(self.brokers[n].log()[-3000:] for n in nodes))

    def stop_all(self):
        for b in self.brokers.values():
            if b.proc and b.proc.poll() is None:
                b.stop()


@pytest.fixture
def cluster():
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as d:
        c = Cluster(d)
        try:
            yield c
        finally:
            c.stop_all()


def test_three_nodes_form_a_quorum_and_fail_over(cluster):
    for n in (1, 2, 3):
        cluster.start(n)
    everyone = sorted((n, cluster.ports[n]) for n in (1, 2, 3))
    leader = cluster.agreed([1, 2, 3], want_brokers=everyone)
    controller, nodes, cluster_id = cluster.describe_with_client(1)
    assert (controller, nodes) == (leader, everyone), (controller, nodes)
    assert cluster_id == cluster.describe(2)[2], "one cluster id for every node"
    see_three_brokers_with_other_clients(cluster, leader)
    # DescribeQuorum through a node that does not lead: the leader's view, every voter caught up.
    follower = next(n for n in (1, 2, 3) if n != leader)
    q = quorum_caught_up(cluster.brokers[follower], leader, cluster.gauges(leader)["tidemark_controller_term"])
    assert q["nodes"] == {n: [("CONTROLLER", "127.0.0.1", cluster.controller_ports[n])] for n in (1, 2, 3)}, q
    # Producer ids come in blocks from the quorum (KRaft's ProducerIdsRecord): each node's first
    # id is a block committed to the metadata log (one entry each), the second node's after
    # the first's block, so never the same id.
    cluster.internal_topics_created([1, 2, 3])
    before = cluster.gauges(leader)["tidemark_controller_last_log_index"]
    pids = {n: cluster.init_producer_id(n) for n in (1, 2)}
    assert pids[2] >= pids[1] + 1000, pids
    assert cluster.gauges(leader)["tidemark_controller_last_log_index"] == before + 2, "two blocks committed"
    # /metrics: exactly one active controller, all on one term, three unfenced brokers.
    gauges = {n: cluster.gauges(n) for n in (1, 2, 3)}
    assert [n for n, g in gauges.items() if g["tidemark_controller_active"] == 1] == [leader], gauges
    assert len({g["tidemark_controller_term"] for g in gauges.values()}) == 1, gauges
    assert gauges[leader]["tidemark_controller_unfenced_brokers"] == 3, gauges
    assert gauges[leader]["tidemark_controller_applied_index"] >= 4, gauges

    # Kill the active controller, wait for the others to agree on a new one, restart the killed
    # node and wait for all three to agree: TIDEMARK_FAILOVER_ROUNDS times (1 in CI;
    # scripts/bench-failover.sh runs more and reports the distribution).
    times = []
    for _ in range(int(os.environ.get("TIDEMARK_FAILOVER_ROUNDS", "1"))):
        killed_at = time.time()
        cluster.brokers[leader].stop(signal.SIGKILL)
        survivors = [n for n in (1, 2, 3) if n != leader]
        new_leader = cluster.agreed(survivors, not_controller=leader)
        times.append(time.time() - killed_at)
        print(f"controller failover: {times[-1]:.2f}s from SIGKILL of node {leader} to node {new_leader}")
        # The new active controller serves metadata writes: a topic created through a survivor
        # is listed by both.
        name = f"after-failover-{len(times)}"
        a = AdminClient({"bootstrap.servers": cluster.brokers[survivors[0]].bootstrap})
        a.create_topics([NewTopic(name, 1, 1)], request_timeout=30)[name].result(30)
        deadline = time.time() + WAIT
        while not all(name in cluster.topics(n) for n in survivors):
            assert time.time() < deadline, "the topic created after the failover is not listed by both survivors"
            time.sleep(0.1)
        # The killed broker is fenced after its session (3 s here): left out of Metadata.
        alive = sorted((n, cluster.ports[n]) for n in survivors)
        cluster.agreed(survivors, want_brokers=alive, not_controller=leader)
        print(f"killed broker fenced: {time.time() - killed_at:.2f}s after its SIGKILL")
        # The new leader describes the quorum: the killed voter, never heard from in this term,
        # is behind the high watermark (the new term's first entry) and not caught up.
        q = describe_quorum(cluster.brokers[survivors[0]])
        assert q["leader"] == new_leader and q["epoch"] > 0, q
        dead = q["voters"][leader]
        assert dead["log_end"] < q["high_watermark"] and dead["caught_up"] == -1, q
        # UnregisterBroker (kafka-cluster unregister) of the killed broker through a survivor:
        # done once; then it is not registered; started again, it registers again.
        assert unregister_broker(cluster.brokers[survivors[1]], leader) == (0, None)
        code, message = unregister_broker(cluster.brokers[survivors[0]], leader)
        assert code == 102 and "not registered" in message, (code, message)
        cluster.start(leader)
        leader = cluster.agreed([1, 2, 3], want_brokers=everyone)
    times.sort()
    print(f"failover over {len(times)} kills: p50 {times[len(times) // 2]:.2f}s, "
          f"p99 {times[min(len(times) - 1, int(len(times) * 0.99))]:.2f}s, max {times[-1]:.2f}s")
    # A clean stop of every node, then a start: the quorum comes back from its logs.
    cluster.stop_all()
    for n in (1, 2, 3):
        cluster.start(n)
    cluster.agreed([1, 2, 3], want_brokers=everyone)


def describe_quorum(broker, partition=0, version=2):
    """DescribeQuorum (55) v2 of __cluster_metadata, raw: the top error, the partition's error,
    leader, epoch, high watermark, voters and observers by id ({log_end, fetch, caught_up}) and
    the nodes' listeners."""
    from test_admin import CR
    name = b"__cluster_metadata"
    body = b"\x02" + bytes([len(name) + 1]) + name + b"\x02" + struct.pack(">i", partition) + b"\x00\x00\x00"
    with Conn(broker, timeout=30) as c:
        r = CR(c.call(55, version, body, flexible=True).buf)
    r.tags()
    out = {"error": r.i16(), "message": r.nstring_c()}
    assert r.count() == 1 and r.cstring() == "__cluster_metadata" and r.count() == 1
    assert r.i32() == partition
    out.update(partition_error=r.i16(), partition_message=r.nstring_c(), leader=r.i32(), epoch=r.i32(),
               high_watermark=r.i64())

    def replicas():
        got = {}
        for _ in range(r.count()):
            rid = r.i32()
            directory = r.buf[r.pos:r.pos + 16]
            r.pos += 16
            got[rid] = {"log_end": r.i64(), "fetch": r.i64(), "caught_up": r.i64(), "directory": directory}
            r.tags()
        return got
    out["voters"], out["observers"] = replicas(), replicas()
    r.tags()
    r.tags()
    out["nodes"] = {}
    for _ in range(r.count()):
        nid = r.i32()
        listeners = []
        for _ in range(r.count()):
            listeners.append((r.cstring(), r.cstring(), r.i16() & 0xFFFF))
            r.tags()
        out["nodes"][nid] = listeners
        r.tags()
    r.tags()
    assert r.pos == len(r.buf)
    return out


def quorum_caught_up(broker, leader, term):
    """DescribeQuorum until every voter's log end reaches the high watermark: the answer."""
    deadline = time.time() + WAIT
    while True:
        q = describe_quorum(broker)
        ok = (q["error"], q["partition_error"], q["leader"], q["epoch"]) == (0, 0, leader, term)
        if ok and sorted(q["voters"]) == [1, 2, 3] and not q["observers"] and all(
                v["log_end"] >= q["high_watermark"] > 0 and v["caught_up"] > 0 for v in q["voters"].values()):
            return q
        assert time.time() < deadline, q
        time.sleep(0.2)


def unregister_broker(broker, broker_id):
    """UnregisterBroker (64) v0, raw: (error code, error message)."""
    from test_admin import CR
    with Conn(broker, timeout=30) as c:
        r = CR(c.call(64, 0, struct.pack(">i", broker_id) + b"\x00", flexible=True).buf)
    r.tags()
    r.i32()
    out = (r.i16(), r.nstring_c())
    r.tags()
    assert r.pos == len(r.buf)
    return out


def test_quorum_apis_outside_a_cluster_and_other_partitions(start_broker):
    """A standalone node has no quorum: DescribeQuorum's __cluster_metadata-0 is
    UNKNOWN_TOPIC_OR_PARTITION with why, another partition asked UNKNOWN_TOPIC_OR_PARTITION
    (Kafka's Raft client answers so); UnregisterBroker is INVALID_REQUEST, with why."""
    b = start_broker()
    q = describe_quorum(b)
    assert (q["error"], q["partition_error"], q["leader"]) == (0, 3, -1), q
    assert "standalone" in q["partition_message"], q
    assert describe_quorum(b, partition=1)["partition_error"] == 3
    code, message = unregister_broker(b, 0)
    assert code == 42 and "standalone" in message, (code, message)


def see_three_brokers_with_other_clients(cluster, leader):
    """kafka-python's describe_cluster and kcat -L through node 2 list the three brokers and
    the active controller too."""
    from kafka import KafkaAdminClient
    k = KafkaAdminClient(bootstrap_servers=cluster.brokers[2].bootstrap, request_timeout_ms=10000)
    try:
        info = k.describe_cluster()
    finally:
        k.close()
    assert info["controller_id"] == leader, info
    assert sorted((b["broker_id"], b["port"]) for b in info["brokers"]) == sorted(cluster.ports.items()), info
    kcat = shutil.which("kcat")
    if kcat is None:
        if os.environ.get("TIDEMARK_REQUIRE_KCAT") == "1":
            raise AssertionError("kcat is required here (scripts/test installs it)")
        return
    meta = subprocess.run([kcat, "-L", "-b", cluster.brokers[2].bootstrap], capture_output=True, check=True,
                          timeout=30).stdout.decode()
    assert "3 brokers:" in meta, meta
    for n, port in cluster.ports.items():
        assert f"broker {n} at 127.0.0.1:{port}" in meta, meta
    assert "(controller)" in meta.split(f"broker {leader} at")[1].splitlines()[0], meta


def test_settings_that_cannot_form_a_cluster_stop_the_start(tmp_path):
    """A node id missing from the voters, a controller listener that is not a listener, and a
    broker-only role each stop the start, with an error naming the setting."""
    port, cport = free_port(), free_port()
    base = ["--set", "process.roles=broker,controller", "--set", "node.id=1",
            "--set", f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{cport}",
            "--set", "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "--set", "controller.listener.names=CONTROLLER"]
    cases = [
        (["--set", f"controller.quorum.voters=2@127.0.0.1:{cport}"], "not among controller.quorum.voters"),
        (["--set", f"controller.quorum.voters=1@127.0.0.1:{cport}", "--set", "controller.listener.names=CTL"],
         "controller.listener.names"),
        (["--set", "process.roles=broker"], "process.roles"),
    ]
    for i, (extra, want) in enumerate(cases):
        d = tmp_path / f"d{i}"
        d.mkdir()
        r = subprocess.run([BIN, "serve", "--data-dir", str(d), *base, *extra],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode != 0 and want in r.stderr, (extra, r.returncode, r.stderr[-2000:])


KAFKA_KRAFT_PROPERTIES = """# Kafka 3.x's config/kraft/server.properties (combined mode), as shipped but for the ports
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@localhost:{cport}
listeners=PLAINTEXT://:{port},CONTROLLER://:{cport}
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://localhost:{port}
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs={logs}
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
"""


def test_kafkas_own_kraft_server_properties_runs_a_node(tmp_path):
    """Kafka's shipped combined-mode server.properties, only the ports changed, starts a
    one-voter cluster: its data goes to log.dirs, it is its own controller, and a client
    produces and reads back through it."""
    port, cport = free_port(), free_port()
    logs = tmp_path / "kraft-combined-logs"
    props = tmp_path / "server.properties"
    props.write_text(KAFKA_KRAFT_PROPERTIES.format(port=port, cport=cport, logs=logs))
    # Started without --data-dir (which would win over log.dirs), as kafka-server-start.sh.
    from test_config_files import Node
    node = Node(str(tmp_path), port, "--config", str(props))
    node.wait_listening()
    b = Broker(str(tmp_path), port)
    b.log = node.log
    try:
        deadline = time.time() + WAIT
        while True:
            with Conn(b, timeout=5) as c:
                r = c.call(3, 2, struct.pack(">i", 0))
                brokers = [(r.i32(), r.string(), r.i32(), r.nstring())[0] for _ in range(r.i32())]
                r.nstring()
                controller = r.i32()
            if (controller, brokers) == (1, [1]):
                break
            assert time.time() < deadline, (controller, brokers, b.log()[-3000:])
            time.sleep(0.2)
        assert (logs / "__cluster_metadata-0").is_dir(), "the metadata log is not in log.dirs"
        from test_clients import consume, create, produce
        create(b.bootstrap, "kraft", partitions=1)
        produce(b.bootstrap, "kraft", [(None, b"v%d" % i, None) for i in range(3)])
        assert [m.value() for m in consume(b.bootstrap, "kraft", 3)] == [b"v0", b"v1", b"v2"]
    finally:
        assert node.stop() == 0, node.log()
