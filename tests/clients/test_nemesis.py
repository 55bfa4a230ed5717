"""A Jepsen-style fault test of replication: three tidemark nodes, each in a network
namespace the test makes (veth pairs on a bridge, 10.N.0.1-3), idempotent acks=all producers and a
consumer. Three layouts: three combined nodes (broker and controller in each); Kafka's
isolated one, three broker-only nodes (1-3) and three controller-only nodes (4-6, 10.N.0.4-6),
where the nemesis picks its victim among all six; and the isolated one secured end to end
("secured": every listener SASL_SSL with SCRAM-SHA-512, the brokers' and the quorum's own
traffic included, ACLs on). CI runs the combined and secured layouts
(TIDEMARK_NEMESIS_LAYOUTS); scripts/nemesis.sh runs all three. Faults: and a nemesis that kills nodes with SIGKILL and restarts them (later, or at once: a
fast restart, with or without its leader-epoch files, as a lost disk file would leave it), pauses
them (SIGSTOP/SIGCONT), and cuts one node off from the two others (blackhole routes inside the
namespaces: quorum and replication links both; clients in the root namespace still reach it).

The checker: every acknowledged record is in the final log once, at the offset it was
acknowledged with; no record is in the log twice (idempotence); the consumer's reads of each
partition are a prefix of the final log (it never saw a record the log later lost or reordered)
and its offsets never went back; the latest offset (the high watermark) each node tells readers
never goes back and never passes the final log's end; after each fault every partition has a
leader again within
LEADER_BOUND seconds. CI runs a few rounds (TIDEMARK_NEMESIS_ROUNDS, default 4); scripts/nemesis.sh
runs more and prints the figures. Three nodes share two cores: the bounds are generous.

Needs root and iproute2 (skipped without them).
"""
import os
import glob
import random
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import tempfile
import threading
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from certs import Authority
from conftest import BIN

LEADER_BOUND = 60
PARTITIONS = 3
CLIENT_PORT, CONTROLLER_PORT = 9092, 9093


def sh(*args, check=True):
    return subprocess.run(args, check=check, capture_output=True, text=True)


BROKERS = (1, 2, 3)


class NetCluster:
    """Three nodes (or, isolated, three brokers and three controllers), one per network
    namespace, on a bridge in the root namespace."""

    def __init__(self, root, layout="combined"):
        self.layout, self.secured = layout, layout == "secured"
        self.nodes = BROKERS if layout == "combined" else BROKERS + (4, 5, 6)
        self.controllers = BROKERS if layout == "combined" else (4, 5, 6)
        tag = os.getpid() % 200 + 20
        self.tag = f"tm{os.getpid() % 100000}"
        self.net = f"10.{tag}.0"
        self.bridge = f"{self.tag}br"
        self.root = root
        self.procs = {}
        self.cuts = set()
        sh("ip", "link", "add", self.bridge, "type", "bridge")
        sh("ip", "addr", "add", f"{self.net}.254/24", "dev", self.bridge)
        sh("ip", "link", "set", self.bridge, "up")
        for i in self.nodes:
            ns, host, peer = self.ns(i), f"{self.tag}h{i}", f"{self.tag}n{i}"
            sh("ip", "netns", "add", ns)
            sh("ip", "link", "add", host, "type", "veth", "peer", "name", peer)
            sh("ip", "link", "set", peer, "netns", ns)
            sh("ip", "link", "set", host, "master", self.bridge)
            sh("ip", "link", "set", host, "up")
            sh("ip", "-n", ns, "addr", "add", f"{self.addr(i)}/24", "dev", peer)
            sh("ip", "-n", ns, "link", "set", peer, "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            os.makedirs(os.path.join(root, f"node{i}"), exist_ok=True)
        if self.secured:
            self.ca = Authority(root)
            self.keystore = self.ca.broker(ips=[self.addr(i) for i in self.nodes])
            cluster_id = sh(BIN, "storage", "random-uuid").stdout.strip()
            users = [f"--add-scram=SCRAM-SHA-512=[name={u},password={p}]" for u, p in SECURED_USERS.items()]
            for i in self.nodes:
                sh(BIN, "storage", "format", "--data-dir", os.path.join(root, f"node{i}"), "-t", cluster_id,
                   *self.settings(i), *users)

    def conf(self, **c):
        """A client configuration: `c` with the cluster's client security (secured: SASL_SSL as
        the admin, a super user)."""
        if self.secured:
            c.update({"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "admin",
                      "sasl.password": SECURED_USERS["admin"], "ssl.ca.location": self.ca.ca_file})
        return c

    def ns(self, i):
        return f"{self.tag}ns{i}"

    def addr(self, i):
        return f"{self.net}.{i}"

    def bootstrap(self, nodes=BROKERS):
        return ",".join(f"{self.addr(i)}:{CLIENT_PORT}" for i in nodes)

    def settings(self, i):
        voters = ",".join(f"{n}@{self.addr(n)}:{CONTROLLER_PORT}" for n in self.controllers)
        client = "BROKER" if self.secured else "PLAINTEXT"
        if self.layout == "combined":
            role = ["--set", "process.roles=broker,controller", "--set",
                    f"listeners=PLAINTEXT://{self.addr(i)}:{CLIENT_PORT},CONTROLLER://{self.addr(i)}:{CONTROLLER_PORT}"]
        elif i in self.controllers:
            role = ["--set", "process.roles=controller",
                    "--set", f"listeners=CONTROLLER://{self.addr(i)}:{CONTROLLER_PORT}"]
        else:
            role = ["--set", "process.roles=broker", "--set", f"listeners={client}://{self.addr(i)}:{CLIENT_PORT}"]
        if self.secured:
            jaas = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" '
                    f'password="{SECURED_USERS["broker"]}";')
            security = ["listener.security.protocol.map=BROKER:SASL_SSL,CONTROLLER:SASL_SSL",
                        "inter.broker.listener.name=BROKER",
                        "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512",
                        "sasl.mechanism.controller.protocol=SCRAM-SHA-512",
                        "sasl.enabled.mechanisms=SCRAM-SHA-512,PLAIN",
                        f"sasl.jaas.config={jaas}",
                        f"ssl.keystore.location={self.keystore}",
                        f"ssl.truststore.location={self.ca.ca_file}",
                        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                        "super.users=User:admin;User:broker"]
        else:
            security = ["listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"]
        settings = [f"node.id={i}", *security, "controller.listener.names=CONTROLLER",
                    f"controller.quorum.voters={voters}", "broker.heartbeat.interval.ms=500",
                    "broker.session.timeout.ms=3000", "replica.lag.time.max.ms=3000",
                    "group.initial.rebalance.delay.ms=200"]
        return role + [x for s in settings for x in ("--set", s)]

    def start(self, i):
        d = os.path.join(self.root, f"node{i}")
        args = ["ip", "netns", "exec", self.ns(i), BIN, "serve", "--data-dir", d, *self.settings(i)]
        self.procs[i] = subprocess.Popen(args, stdout=subprocess.DEVNULL,
                                         stderr=open(os.path.join(d, "broker.log"), "ab"))

    def alive(self, i):
        return self.procs[i].poll() is None

    def kill(self, i):
        self.procs[i].send_signal(signal.SIGKILL)
        self.procs[i].wait()

    def signal(self, i, sig):
        self.procs[i].send_signal(sig)

    def cut(self, a, b):
        for x, y in ((a, b), (b, a)):
            sh("ip", "-n", self.ns(x), "route", "add", "blackhole", f"{self.addr(y)}/32")
        self.cuts.add((a, b))

    def heal(self):
        for a, b in list(self.cuts):
            for x, y in ((a, b), (b, a)):
                sh("ip", "-n", self.ns(x), "route", "del", "blackhole", f"{self.addr(y)}/32", check=False)
        self.cuts.clear()

    def log(self, i):
        with open(os.path.join(self.root, f"node{i}", "broker.log"), "rb") as f:
            return f.read().decode(errors="replace")[-3000:]

    def close(self):
        # The logs of the last run stay in $TMPDIR/nemesis-last for a look after a failure.
        keep = os.path.join(os.environ.get("TMPDIR", tempfile.gettempdir()), "nemesis-last")
        shutil.rmtree(keep, ignore_errors=True)
        os.makedirs(keep, exist_ok=True)
        for i in self.nodes:
            src = os.path.join(self.root, f"node{i}", "broker.log")
            if os.path.exists(src):
                shutil.copy(src, os.path.join(keep, f"node{i}.log"))
        for i, p in self.procs.items():
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.kill()
                p.wait()
        for i in self.nodes:
            sh("ip", "netns", "del", self.ns(i), check=False)
            sh("ip", "link", "del", f"{self.tag}h{i}", check=False)
        sh("ip", "link", "del", self.bridge, check=False)


def usable():
    if os.geteuid() != 0 or shutil.which("ip") is None:
        return False
    probe = f"tmprobe{os.getpid()}"
    ok = subprocess.run(["ip", "netns", "add", probe], capture_output=True).returncode == 0
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return ok


SECURED_USERS = {"admin": "admin-secret", "broker": "broker-secret"}
LAYOUTS = os.environ.get("TIDEMARK_NEMESIS_LAYOUTS", "combined,secured").split(",")


@pytest.fixture(params=["combined", "isolated", "secured"])
def net(request):
    if not usable():
        pytest.skip("needs root and network namespaces (iproute2)")
    if request.param not in LAYOUTS:
        pytest.skip(f"layout {request.param} not in TIDEMARK_NEMESIS_LAYOUTS (scripts/nemesis.sh runs it)")
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as d:
        c = NetCluster(d, request.param)
        try:
            yield c
        finally:
            c.close()


def leaders(net, via):
    """{partition: leader} of topic `jepsen` as node `via` answers (librdkafka's metadata)."""
    a = AdminClient(net.conf(**{"bootstrap.servers": net.bootstrap([via]), "socket.timeout.ms": 3000}))
    md = a.list_topics("jepsen", timeout=3)
    t = md.topics.get("jepsen")
    return {p.id: p.leader for p in t.partitions.values()} if t and t.error is None else {}


def wait(what, check, net, bound):
    deadline = time.time() + bound
    last = None
    while time.time() < deadline:
        try:
            last = check()
            if last:
                return last
        except Exception as e:  # a node starting, paused or cut off
            last = repr(e)
        time.sleep(0.2)
    raise AssertionError(f"{what}: not within {bound}s: {last}; logs: " +
                         " | ".join(f"node {i}: {net.log(i)}" for i in net.nodes))


def latest(net, node, topic, partitions):
    """{partition: latest offset} that `node` answers ListOffsets v1 with (partitions it leads,
    without an error), asked directly."""
    name = topic.encode()
    body = struct.pack(">ii", -1, 1) + struct.pack(">h", len(name)) + name + struct.pack(">i", len(partitions))
    for p in partitions:
        body += struct.pack(">iq", p, -1)
    header = struct.pack(">hhi", 2, 1, 7) + struct.pack(">h", 7) + b"nemesis"
    with socket.create_connection((net.addr(node), CLIENT_PORT), timeout=2) as sock:
        if net.secured:
            sock = ssl.create_default_context(cafile=net.ca.ca_file).wrap_socket(sock, server_hostname=net.addr(node))

        def call(frame):
            sock.sendall(struct.pack(">i", len(frame)) + frame)
            size, = struct.unpack(">i", exact(4))
            return exact(size)

        def exact(n):
            buf = b""
            while len(buf) < n:
                chunk = sock.recv(n - len(buf))
                if not chunk:
                    raise ConnectionError("closed")
                buf += chunk
            return buf
        if net.secured:  # SaslHandshake v1 PLAIN, SaslAuthenticate v0, as the admin
            sasl = struct.pack(">hhi", 17, 1, 5) + struct.pack(">h", 7) + b"nemesis"
            assert call(sasl + struct.pack(">h", 5) + b"PLAIN")[4:6] == b"\0\0"
            token = b"\0admin\0" + SECURED_USERS["admin"].encode()
            auth = struct.pack(">hhi", 36, 0, 6) + struct.pack(">h", 7) + b"nemesis"
            assert call(auth + struct.pack(">i", len(token)) + token)[4:6] == b"\0\0"
        frame = call(header + body)
    pos = 8  # correlation id, topic count
    n = struct.unpack_from(">h", frame, pos)[0]
    pos += 2 + n
    count, = struct.unpack_from(">i", frame, pos)
    pos += 4
    out = {}
    for _ in range(count):
        p, error, _ts, offset = struct.unpack_from(">ihqq", frame, pos)
        pos += 22
        if error == 0:
            out[p] = offset
    return out


class Workload:
    """Two idempotent acks=all producers writing numbered records, and one consumer reading
    every partition from the start, each in a thread until stopped."""

    def __init__(self, net):
        self.net, self.stop = net, threading.Event()
        self.acked, self.failed, self.seen = [], [], {p: [] for p in range(PARTITIONS)}
        self.went_back = []
        # (node, partition) -> the latest offsets that node told readers, in order.
        self.told = {}
        self.threads = [threading.Thread(target=self.produce, args=(w,)) for w in range(2)]
        self.threads.append(threading.Thread(target=self.consume))
        self.threads.append(threading.Thread(target=self.watch))

    def produce(self, w):
        p = Producer(self.net.conf(**{"bootstrap.servers": self.net.bootstrap(), "acks": "all",
                                      "enable.idempotence": True, "linger.ms": 2, "message.timeout.ms": 60000,
                                      "request.timeout.ms": 10000, "topic.metadata.refresh.interval.ms": 500}))

        def done(err, msg):
            if err is None:
                self.acked.append((msg.partition(), msg.offset(), msg.value().decode()))
            else:
                self.failed.append(str(err))
        n = 0
        while not self.stop.is_set():
            try:
                p.produce("jepsen", value=f"w{w}-{n}".encode(), on_delivery=done)
                n += 1
            except BufferError:
                pass
            p.poll(0.005)
        p.flush(90)

    def consume(self):
        c = Consumer(self.net.conf(**{"bootstrap.servers": self.net.bootstrap(), "group.id": "nemesis-reader",
                                      "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                      "topic.metadata.refresh.interval.ms": 500}))
        c.assign([TopicPartition("jepsen", p, 0) for p in range(PARTITIONS)])
        while not self.stop.is_set():
            for m in c.consume(200, 0.5):
                if m.error() is None:
                    s = self.seen[m.partition()]
                    if s and m.offset() <= s[-1][0]:
                        self.went_back.append((m.partition(), s[-1][0], m.offset()))
                    s.append((m.offset(), m.value().decode()))
        c.close()

    def watch(self):
        """Ask each node for the partitions' latest offsets, again and again."""
        while not self.stop.is_set():
            for n in (1, 2, 3):
                try:
                    for p, o in latest(self.net, n, "jepsen", range(PARTITIONS)).items():
                        self.told.setdefault((n, p), []).append(o)
                except Exception:  # killed, paused, cut off or starting
                    pass
            time.sleep(0.1)

    def start(self):
        for t in self.threads:
            t.start()

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join(180)


def final_log(net):
    """Every record of `jepsen` from the start, per partition: {partition: [(offset, value)]}."""
    c = Consumer(net.conf(**{"bootstrap.servers": net.bootstrap(), "group.id": f"final-{time.time()}",
                             "enable.auto.commit": False, "auto.offset.reset": "earliest"}))
    parts = [TopicPartition("jepsen", p, 0) for p in range(PARTITIONS)]
    c.assign(parts)
    ends = {}
    for p in range(PARTITIONS):
        ends[p] = c.get_watermark_offsets(TopicPartition("jepsen", p), timeout=30)[1]
    log = {p: [] for p in range(PARTITIONS)}
    deadline = time.time() + 120
    while any((log[p][-1][0] + 1 if log[p] else 0) < ends[p] for p in log) and time.time() < deadline:
        for m in c.consume(1000, 1.0):
            if m.error() is None:
                log[m.partition()].append((m.offset(), m.value().decode()))
    c.close()
    return log


def test_nemesis_loses_nothing_acknowledged(net):
    rounds = int(os.environ.get("TIDEMARK_NEMESIS_ROUNDS", "4"))
    rng = random.Random(int(os.environ.get("TIDEMARK_NEMESIS_SEED", str(int(time.time())))))
    for i in net.nodes:
        net.start(i)
    a = AdminClient(net.conf(**{"bootstrap.servers": net.bootstrap()}))
    wait("the cluster to form", lambda: len(a.list_topics(timeout=3).brokers) == 3, net, 60)
    topic = NewTopic("jepsen", PARTITIONS, 3, config={"min.insync.replicas": "2"})
    a.create_topics([topic], request_timeout=30)["jepsen"].result(60)
    wait("leaders", lambda: len([l for l in leaders(net, 1).values() if l > 0]) == PARTITIONS, net, 60)
    w = Workload(net)
    w.start()
    faults, recoveries = [], []
    try:
        for r in range(rounds):
            time.sleep(rng.uniform(1, 3))
            victim = rng.choice(net.nodes)
            # The brokers not hit: they lead every partition while it lasts.
            others = [i for i in BROKERS if i != victim]
            cut_from = [i for i in net.nodes if i != victim]
            kind = rng.choice(["kill", "pause", "cut", "restart", "lose-epochs"])
            faults.append(f"{kind} {victim}")
            began = time.time()
            if kind in ("kill", "restart", "lose-epochs"):
                net.kill(victim)
            elif kind == "pause":
                net.signal(victim, signal.SIGSTOP)
            else:
                for o in cut_from:
                    net.cut(victim, o)
            if kind == "lose-epochs":
                # Every leader-epoch cache file of the node gone (its log stays): the node must
                # rebuild them from its batches, or it cannot tell where its log parts from
                # its leader's.
                for f in glob.glob(os.path.join(net.root, f"node{victim}", "*", "leader-epoch-checkpoint")):
                    os.remove(f)
            if kind in ("restart", "lose-epochs"):
                # At once: before the controller fences the old incarnation.
                net.start(victim)
                wait(f"round {r} ({kind} {victim}): every partition led",
                     lambda: (lambda ls: len(ls) == PARTITIONS and all(l > 0 for l in ls.values()))(
                         leaders(net, others[0])), net, LEADER_BOUND)
            else:
                # Leadership settles on the two others within the bound.
                wait(f"round {r} ({kind} {victim}): every partition led by a reachable node",
                     lambda: (lambda ls: len(ls) == PARTITIONS and all(l in others for l in ls.values()))(
                         leaders(net, others[0])), net, LEADER_BOUND)
            recoveries.append(time.time() - began)
            time.sleep(rng.uniform(1, 3))
            if kind == "kill":
                net.start(victim)
            elif kind == "pause":
                net.signal(victim, signal.SIGCONT)
            else:
                net.heal()
            wait(f"round {r}: every replica back in sync", lambda: all(
                sorted(p.isrs) == [1, 2, 3] for p in AdminClient(net.conf(**{"bootstrap.servers": net.bootstrap(others)}))
                .list_topics("jepsen", timeout=3).topics["jepsen"].partitions.values()), net, 120)
    finally:
        net.heal()
        w.finish()
    log = final_log(net)
    # Every acknowledged record once, at its offset.
    at = {(p, o): v for p, recs in log.items() for o, v in recs}
    for p, o, v in w.acked:
        assert at.get((p, o)) == v, f"acknowledged {v} at {p}/{o}, the log has {at.get((p, o))}"
    values = [v for recs in log.values() for _, v in recs]
    assert len(values) == len(set(values)), "a record is in the log twice"
    # The consumer read a prefix of each partition's final log, offsets never going back.
    assert not w.went_back, w.went_back[:5]
    for p, recs in w.seen.items():
        final = dict(log[p])
        for o, v in recs:
            assert final.get(o) == v, f"the consumer read {v} at {p}/{o}; the log has {final.get(o)}"
    # Each node's high watermark, as readers were told it, never went back, and never passed
    # what the final log holds.
    for (n, p), told in w.told.items():
        back = [(a, b) for a, b in zip(told, told[1:]) if b < a]
        assert not back, f"node {n} told readers of partition {p} a latest offset going back: {back[:3]}"
        end = log[p][-1][0] + 1 if log[p] else 0
        assert max(told) <= end, f"node {n} told {max(told)} for partition {p}; the final log ends at {end}"
    print(f"nemesis ({net.layout}): {rounds} rounds ({', '.join(faults)}); {len(w.acked)} records acknowledged, "
          f"{len(w.failed)} not; {sum(len(r) for r in log.values())} in the log; consumer read "
          f"{sum(len(s) for s in w.seen.values())}; leaders back after p50 "
          f"{sorted(recoveries)[len(recoveries) // 2]:.1f} s, max {max(recoveries):.1f} s; "
          f"{sum(len(t) for t in w.told.values())} latest offsets told, none going back; nothing lost")
