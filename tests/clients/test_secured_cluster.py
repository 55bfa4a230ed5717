"""A three-node cluster secured end to end, as a security review wants it: clients and brokers
on a SASL_SSL listener (SCRAM-SHA-512; the brokers' own traffic, followers' fetches and
transaction markers, logs in as User:broker), the metadata quorum on an SSL listener that
requires a client certificate from the cluster's CA, and ACLs on (StandardAuthorizer; the
super users are the admin, the broker login and the nodes' certificate subject). Every node is
formatted with its SCRAM users (`storage format --add-scram`, as Kafka's format takes them), so
the cluster's own logins work before the metadata quorum runs. Three nodes share the machine's
two cores: the waits are generous.

What is checked:
- the quorum forms and the brokers register over TLS; a topic with three replicas keeps three in
  sync (the followers fetch over SASL_SSL); an idempotent acks=all producer loses nothing
  acknowledged through a partition leader's SIGKILL and then the active controller's; the killed
  nodes restart and catch up (in sync again);
- strangers get nothing: plaintext bytes on every port (a Kafka request, the quorum's preface)
  get no Kafka answer; an authenticated user who is not a broker (User:mallory) is refused a
  follower's fetch and transaction markers with CLUSTER_AUTHORIZATION_FAILED, as Kafka refuses
  them; on the controller port, a TLS client without a certificate, or with one from another CA,
  fails its handshake, and one with the right CA but a principal that may not act for the cluster
  is closed without an answer (logged), while the nodes' own certificate is answered.
"""
import os
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
from conftest import BIN, Broker, free_port

WAIT = 90
NODES = (1, 2, 3)
USERS = {"admin": "admin-secret", "broker": "broker-secret", "mallory": "mallory-secret"}
SCRAM_JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="{}" password="{}";'


class Secured:
    def __init__(self, root, controller="SSL"):
        self.root, self.controller = root, controller
        self.ca = Authority(root)
        self.ports = {n: free_port() for n in NODES}
        self.controller_ports = {n: free_port() for n in NODES}
        self.keystores = {n: self.ca.broker() for n in NODES}
        self.cluster_id = subprocess.run([BIN, "storage", "random-uuid"], check=True, capture_output=True,
                                         text=True).stdout.strip()
        self.nodes = {}
        for n in NODES:
            d = os.path.join(root, f"node{n}")
            os.makedirs(d)
            self.nodes[n] = Broker(d, self.ports[n])
            users = [f"--add-scram=SCRAM-SHA-512=[name={u},password={p}]" for u, p in USERS.items()]
            subprocess.run([BIN, "storage", "format", "--data-dir", d, "-t", self.cluster_id, *self.settings(n), *users],
                           check=True, capture_output=True)

    def settings(self, n):
        voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in self.controller_ports.items())
        pairs = {
            "process.roles": "broker,controller",
            "node.id": n,
            "listeners": f"BROKER://127.0.0.1:{self.ports[n]},CONTROLLER://127.0.0.1:{self.controller_ports[n]}",
            "listener.security.protocol.map": f"BROKER:SASL_SSL,CONTROLLER:{self.controller}",
            "inter.broker.listener.name": "BROKER",
            "controller.listener.names": "CONTROLLER",
            "controller.quorum.voters": voters,
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            "listener.name.broker.sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN",
            "listener.name.broker.scram-sha-512.sasl.jaas.config": SCRAM_JAAS.format("broker", USERS["broker"]),
            "ssl.keystore.location": self.keystores[n],
            "ssl.truststore.location": self.ca.ca_file,
            "listener.name.controller.ssl.client.auth": "required" if self.controller == "SSL" else "none",
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:admin;User:broker;User:CN=localhost",
            "broker.heartbeat.interval.ms": 500,
            "broker.session.timeout.ms": 3000,
        }
        if self.controller == "SASL_SSL":
            pairs["sasl.mechanism.controller.protocol"] = "SCRAM-SHA-512"
            pairs["listener.name.controller.sasl.enabled.mechanisms"] = "SCRAM-SHA-512"
            pairs["listener.name.controller.scram-sha-512.sasl.jaas.config"] = SCRAM_JAAS.format("broker",
                                                                                              USERS["broker"])
        out = []
        for k, v in pairs.items():
            out += ["--set", f"{k}={v}"]
        return out

    def start(self, n):
        self.nodes[n].start(*self.settings(n))

    def conf(self, user="admin", node=1, **more):
        servers = ",".join([self.nodes[node].bootstrap] + [b.bootstrap for n, b in self.nodes.items() if n != node])
        c = {"bootstrap.servers": servers, "security.protocol": "SASL_SSL",
             "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user, "sasl.password": USERS[user],
             "ssl.ca.location": self.ca.ca_file}
        c.update(more)
        return c

    def admin(self, node=1):
        return AdminClient(self.conf(node=node))

    def logs(self):
        return "\n".join(f"--- node {n} ---\n" + b.log()[-4000:] for n, b in self.nodes.items())

    def wait(self, what, check, bound=WAIT):
        deadline, last = time.time() + bound, None
        while time.time() < deadline:
            try:
                got = check()
                if got:
                    return got
            except Exception as e:  # a node starting, electing or failing over
                last = e
            time.sleep(0.3)
        raise AssertionError(f"{what} not within {bound}s (last: {last!r}):\n{self.logs()}")

    def live(self):
        return [n for n, b in self.nodes.items() if b.proc and b.proc.poll() is None]

    def cluster_view(self, node):
        admin = self.admin(node)  # kept until the answer: a client destroyed first fails it
        d = admin.describe_cluster(request_timeout=10).result(15)
        return (d.controller.id if d.controller else -1), sorted(x.id for x in d.nodes)

    def partition(self, topic, node):
        admin = self.admin(node)
        md = admin.list_topics(topic, timeout=10)
        p = md.topics[topic].partitions[0]
        return p.leader, sorted(p.isrs)


@pytest.fixture(scope="module", params=["SSL", "SASL_SSL"])
def secured(request):
    """The cluster, its quorum on an SSL listener requiring client certificates, or on a
    SASL_SSL one (SCRAM-SHA-512, User:broker)."""
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as d:
        s = Secured(d, controller=request.param)
        try:
            for n in NODES:
                s.start(n)
            s.wait("three brokers registered over the secured quorum",
                   lambda: all(s.cluster_view(n)[1] == list(NODES) for n in NODES))
            yield s
        finally:
            for b in s.nodes.values():
                if b.proc and b.proc.poll() is None:
                    b.proc.kill()
                    b.proc.wait()


def test_secured_cluster_loses_nothing_through_leader_and_controller_kills(secured):
    s = secured
    topic = "secured"
    admin = s.admin()
    admin.create_topics([NewTopic(topic, 1, 3, config={"min.insync.replicas": "2"})])[topic].result(30)
    s.wait("three replicas in sync (followers fetch over SASL_SSL)", lambda: s.partition(topic, 1)[1] == list(NODES))
    # Kafka creates the transaction log with min.insync.replicas = transaction.state.log.min.isr.
    from confluent_kafka.admin import ConfigResource
    described = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "__transaction_state")])
    configs = list(described.values())[0].result(30)
    assert configs["min.insync.replicas"].value == "2"

    acked, errors, stop = [], [], threading.Event()

    def produce():
        p = Producer(s.conf(**{"enable.idempotence": True, "acks": "all", "linger.ms": 5,
                              "message.timeout.ms": 120000}))

        def done(err, msg):
            if err is None:
                acked.append(int(msg.value()))
            else:
                errors.append(err)

        i = 0
        while not stop.is_set():
            try:
                p.produce(topic, value=b"%d" % i, on_delivery=done)
                i += 1
            except BufferError:
                pass
            p.poll(0.005)
        p.flush(120)

    t = threading.Thread(target=produce)
    t.start()
    try:
        s.wait("records acknowledged", lambda: len(acked) > 200)
        leader, _ = s.partition(topic, 1)
        s.nodes[leader].stop(signal.SIGKILL)
        others = [n for n in NODES if n != leader]
        before = len(acked)
        s.wait("a new leader, and records acknowledged through it",
               lambda: s.partition(topic, others[0])[0] in others and len(acked) > before + 200)
        s.start(leader)
        s.wait("the killed leader back in sync", lambda: s.partition(topic, others[0])[1] == list(NODES))

        controller = s.wait("an active controller", lambda: s.cluster_view(1)[0] if s.cluster_view(1)[0] > 0 else None)
        s.nodes[controller].stop(signal.SIGKILL)
        rest = [n for n in NODES if n != controller]
        before = len(acked)
        s.wait("another active controller, and records acknowledged",
               lambda: s.cluster_view(rest[0])[0] in rest and len(acked) > before + 200)
        s.start(controller)
        s.wait("the killed controller's broker back in sync", lambda: s.partition(topic, rest[0])[1] == list(NODES))
    finally:
        stop.set()
        t.join(180)
    assert not errors, errors[:5]

    c = Consumer(s.conf(**{"group.id": "check", "auto.offset.reset": "earliest", "enable.auto.commit": False}))
    c.assign([TopicPartition(topic, 0, 0)])
    seen, deadline = set(), time.time() + WAIT
    want = set(acked)
    while not want <= seen and time.time() < deadline:
        for m in c.consume(1000, 1.0):
            if m.error() is None:
                seen.add(int(m.value()))
    c.close()
    lost = want - seen
    assert not lost, f"{len(lost)} acknowledged records lost, e.g. {sorted(lost)[:10]}"
    print(f"secured cluster: {len(acked)} records acknowledged through a leader and a controller SIGKILL, none lost")


def kafka_frame(api, version, correlation, body):
    header = struct.pack(">hhih", api, version, correlation, 1) + b"t"
    return struct.pack(">i", len(header) + len(body)) + header + body


def kafka_answer(sock, correlation):
    """The body of a Kafka answer to `correlation`, or None when the connection closes (or
    answers anything else, such as a TLS alert)."""
    got = b""
    try:
        while len(got) < 8 or len(got) < 4 + struct.unpack(">i", got[:4])[0]:
            more = sock.recv(65536)
            if not more:
                return None
            got += more
    except (ConnectionResetError, ssl.SSLError, socket.timeout, OSError):
        return None
    if struct.unpack(">i", got[4:8])[0] != correlation:
        return None
    return got[8:]


def string(s):
    return struct.pack(">h", len(s)) + s.encode()


class Mallory:
    """An authenticated user who is not a broker: a raw SASL_SSL connection (PLAIN)."""

    def __init__(self, s, node):
        raw = socket.create_connection(("127.0.0.1", s.ports[node]), timeout=20)
        self.sock = ssl.create_default_context(cafile=s.ca.ca_file).wrap_socket(raw, server_hostname="127.0.0.1")
        self.corr = 0
        assert struct.unpack(">h", self.call(17, 1, string("PLAIN"))[:2])[0] == 0
        token = b"\0mallory\0" + USERS["mallory"].encode()
        assert struct.unpack(">h", self.call(36, 1, struct.pack(">i", len(token)) + token)[:2])[0] == 0

    def call(self, api, version, body):
        self.corr += 1
        self.sock.sendall(kafka_frame(api, version, self.corr, body))
        return kafka_answer(self.sock, self.corr)


CLUSTER_AUTHORIZATION_FAILED = 31


def test_strangers_cannot_act_as_the_cluster(secured):
    s = secured
    admin = s.admin()
    admin.create_topics([NewTopic("guarded", 1, 3)])["guarded"].result(30)
    s.wait("guarded's leader", lambda: s.partition("guarded", 1)[0] > 0)

    # Plaintext bytes on every port: no Kafka answer.
    for port in list(s.ports.values()) + list(s.controller_ports.values()):
        for first in (kafka_frame(18, 0, 7, b""), b"\xffTMQ" + bytes(8) + struct.pack(">i", 2) + b"{}"):
            with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
                raw.sendall(first)
                assert kafka_answer(raw, 7) is None, f"port {port} answered plaintext"

    # A follower's fetch (Fetch v7 with a replica id) and transaction markers from mallory.
    m = Mallory(s, 1)
    partition = struct.pack(">iqqi", 0, 0, 0, 1 << 20)
    topics = struct.pack(">i", 1) + string("guarded") + struct.pack(">i", 1) + partition
    fetch = struct.pack(">iiiibii", 2, 100, 1, 1 << 20, 0, 0, -1) + topics + struct.pack(">i", 0)
    answer = m.call(1, 7, fetch)
    assert answer is not None
    assert struct.unpack(">h", answer[4:6])[0] == CLUSTER_AUTHORIZATION_FAILED
    marker = (struct.pack(">qhb", 4242, 0, 1) + struct.pack(">i", 1) + string("guarded") +
              struct.pack(">ii", 1, 0) + struct.pack(">i", 0))
    answer = m.call(27, 0, struct.pack(">i", 1) + marker)
    assert answer is not None
    # markers[1]: producer id, topics[1]: name, partitions[1]: index, error
    (error,) = struct.unpack(">h", answer[4 + 8 + 4 + 2 + len("guarded") + 4 + 4:][:2])
    assert error == CLUSTER_AUTHORIZATION_FAILED

    if s.controller == "SSL":
        controller_port_needs_a_certificate(s)
    else:
        controller_port_needs_a_broker_login(s)


def controller_port_needs_a_certificate(s):
    """The SSL controller port: TLS with a client certificate from the cluster's CA only, and a
    principal that may act for the cluster."""
    port = s.controller_ports[1]
    describe = b'{"cluster":0,"from":99,"rpc":"DescribeQuorum"}'
    request = b"\xffTMQ" + struct.pack(">Q", 0) + struct.pack(">I", len(describe)) + describe

    def quorum_call(cert):
        ctx = ssl.create_default_context(cafile=s.ca.ca_file)
        if cert:
            ctx.load_cert_chain(*cert)
        raw = socket.create_connection(("127.0.0.1", port), timeout=20)
        try:
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                tls.sendall(request)
                got = b""
                while len(got) < 4 or len(got) < 4 + struct.unpack(">I", got[:4])[0]:
                    more = tls.recv(65536)
                    if not more:
                        return None
                    got += more
                return got[4:]
        except (ssl.SSLError, ConnectionResetError, OSError):
            return None

    assert quorum_call(None) is None, "no client certificate"
    other = Authority(s.root, name="another CA")
    assert quorum_call(other.client(CN="localhost")) is None, "a certificate from another CA"
    assert quorum_call(s.ca.client(CN="mallory")) is None, "a principal that may not act for the cluster"
    assert b"quorum connection refused" in open(os.path.join(s.nodes[1].data_dir, "broker.log"), "rb").read()
    answer = quorum_call(s.ca.client(CN="localhost"))
    assert answer is not None and (b"Quorum" in answer or b"NotLeader" in answer), answer


def controller_port_needs_a_broker_login(s):
    """The SASL_SSL controller port: a user who may not act for the cluster (mallory) is closed
    at the quorum's preface, with a log line; a broker-only node whose controller login is
    wrong says why in its log, keeps retrying, and never registers."""
    port = s.controller_ports[1]
    raw = socket.create_connection(("127.0.0.1", port), timeout=20)
    tls = ssl.create_default_context(cafile=s.ca.ca_file).wrap_socket(raw, server_hostname="127.0.0.1")
    m = Mallory.__new__(Mallory)
    m.sock, m.corr = tls, 0
    assert struct.unpack(">h", m.call(17, 1, string("SCRAM-SHA-512"))[:2])[0] == 0
    scram_login(m, "mallory", USERS["mallory"])
    describe = b'{"cluster":0,"from":99,"rpc":"DescribeQuorum"}'
    tls.sendall(b"\xffTMQ" + struct.pack(">Q", 0) + struct.pack(">I", len(describe)) + describe)
    assert kafka_answer(tls, 0) is None
    assert b"quorum connection refused" in open(os.path.join(s.nodes[1].data_dir, "broker.log"), "rb").read()

    d = os.path.join(s.root, "impostor")
    os.makedirs(d)
    impostor = Broker(d, free_port())
    settings = s.settings(1)
    voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in s.controller_ports.items())
    override = {
        "process.roles": "broker", "node.id": "9", "listeners": f"BROKER://127.0.0.1:{impostor.port}",
        "controller.quorum.voters": voters,
        "listener.name.controller.scram-sha-512.sasl.jaas.config": SCRAM_JAAS.format("broker", "wrong"),
    }
    for i in range(1, len(settings), 2):
        k = settings[i].split("=", 1)[0]
        if k in override:
            settings[i] = f"{k}={override[k]}"
    impostor.start(*settings)
    try:
        s.wait("the impostor's log saying why it cannot join",
               lambda: impostor.log().count("cannot authenticate to the controller") >= 2)
        assert 9 not in s.cluster_view(1)[1]
    finally:
        impostor.stop(signal.SIGKILL)


def scram_login(conn, user, password):
    """SCRAM-SHA-512 over SaslAuthenticate v1 on a raw connection (RFC 5802)."""
    import base64
    import hashlib
    import hmac
    nonce = base64.b64encode(os.urandom(18)).decode()
    first_bare = f"n={user},r={nonce}"

    def authenticate(token):
        body = conn.call(36, 1, struct.pack(">i", len(token)) + token)
        code, n = struct.unpack(">hh", body[:4])
        assert code == 0, body
        rest = body[4 + max(n, 0):]
        (size,) = struct.unpack(">i", rest[:4])
        return rest[4:4 + size].decode()

    server_first = authenticate(("n,," + first_bare).encode())
    fields = dict(f.split("=", 1) for f in server_first.split(","))
    salted = hashlib.pbkdf2_hmac("sha512", password.encode(), base64.b64decode(fields["s"]), int(fields["i"]))
    client_key = hmac.new(salted, b"Client Key", hashlib.sha512).digest()
    without_proof = f"c=biws,r={fields['r']}"
    auth = f"{first_bare},{server_first},{without_proof}".encode()
    signature = hmac.new(hashlib.sha512(client_key).digest(), auth, hashlib.sha512).digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature))).decode()
    authenticate(f"{without_proof},p={proof}".encode())


def test_rotating_the_brokers_login_without_a_restart(secured):
    """KIP-226 for the cluster's own links: a new broker user (with CLUSTER_ACTION by ACL, not
    a super user) is created online, every node's own login is switched to it by a per-broker
    dynamic setting (a login that does not parse or lacks its password is INVALID_CONFIG and
    changes nothing), the old user is deleted; then the partition leader is SIGKILLed, so the
    followers connect anew to the next leader with the new login: acks=all writes go on, and
    the killed node restarts (its dynamic login kept) and is in sync again."""
    from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, ConfigEntry, ConfigResource,
                                       ResourcePatternType, ResourceType, ScramCredentialInfo, ScramMechanism,
                                       UserScramCredentialDeletion, UserScramCredentialUpsertion)
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AlterConfigOpType
    s = secured
    admin = s.admin()
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
    for f in admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion("broker2", info, b"rotated-secret")]).values():
        f.result(30)
    acl = AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:broker2", "*",
                     AclOperation.CLUSTER_ACTION, AclPermissionType.ALLOW)
    for f in admin.create_acls([acl]).values():
        f.result(30)

    keys = ["listener.name.broker.scram-sha-512.sasl.jaas.config"]
    if s.controller == "SASL_SSL":
        keys.append("listener.name.controller.scram-sha-512.sasl.jaas.config")

    def alter(node, value):
        entries = [ConfigEntry(k, value, incremental_operation=AlterConfigOpType.SET) for k in keys]
        resource = ConfigResource(ConfigResource.Type.BROKER, str(node), incremental_configs=entries)
        for f in admin.incremental_alter_configs([resource]).values():
            f.result(30)

    with pytest.raises(KafkaException) as bad:
        alter(1, 'org.apache.kafka.common.security.scram.ScramLoginModule required username="broker2";')
    assert "password" in str(bad.value), bad.value
    for n in NODES:
        alter(n, SCRAM_JAAS.format("broker2", "rotated-secret"))
    for f in admin.alter_user_scram_credentials(
            [UserScramCredentialDeletion("broker", ScramMechanism.SCRAM_SHA_512)]).values():
        f.result(30)
    for n in NODES:
        assert "the cluster's link changed" in s.nodes[n].log()

    topic = "rotated"
    admin.create_topics([NewTopic(topic, 1, 3, config={"min.insync.replicas": "2"})])[topic].result(30)
    s.wait("three replicas in sync", lambda: s.partition(topic, 1)[1] == list(NODES))
    p = Producer(s.conf(**{"enable.idempotence": True, "acks": "all", "message.timeout.ms": 120000}))
    leader, _ = s.partition(topic, 1)
    s.nodes[leader].stop(signal.SIGKILL)
    others = [n for n in NODES if n != leader]
    s.wait("a new leader", lambda: s.partition(topic, others[0])[0] in others)
    acked, errors = [], []
    for i in range(100):
        p.produce(topic, value=b"%d" % i, on_delivery=lambda err, m: acked.append(m) if err is None else errors.append(err))
    assert p.flush(120) == 0 and len(acked) == 100, errors[:3]
    s.start(leader)
    s.wait("the restarted node in sync, fetching with the rotated login",
           lambda: s.partition(topic, others[0])[1] == list(NODES))
