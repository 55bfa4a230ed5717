"""SASL on the real binary (SASL_PLAINTEXT and SASL_SSL listeners) with real clients:
SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN with confluent-kafka (librdkafka) and kafka-python;
the first user made offline (`tidemark user add`), more online (KIP-554
AlterUserScramCredentials), kept across a restart; wrong passwords and unknown users refused
alike; a mechanism the listener does not offer refused with the ones it does; nothing but
ApiVersions and the SASL exchange served before authentication."""
import base64
import hashlib
import hmac
import os
import socket
import struct
import subprocess
import time

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialDeletion,
                                   UserScramCredentialUpsertion)
from kafka import KafkaConsumer

from certs import Authority
from conftest import BIN
from test_clients import TIMEOUT, create

MECHS = "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN"


def sasl_broker(start_broker, *extra, protocol="SASL_PLAINTEXT", users=(("admin", "admin-secret", "SCRAM-SHA-256"),)):
    b = start_broker()
    b.stop()
    for name, password, mechanism in users:
        subprocess.run([BIN, "user", "add", name, "--data-dir", b.data_dir, "--mechanism", mechanism,
                        "--password", password], check=True, capture_output=True)
    b.start("--set", "listeners=%s://%s" % (protocol, b.bootstrap), "--set", "sasl.enabled.mechanisms=" + MECHS,
            "--set", "connection.failed.authentication.delay.ms=10", *extra)
    return b


def conf(b, user, password, mechanism="SCRAM-SHA-256", protocol="SASL_PLAINTEXT", **extra):
    c = {"bootstrap.servers": b.bootstrap, "security.protocol": protocol, "sasl.mechanism": mechanism,
         "sasl.username": user, "sasl.password": password}
    c.update(extra)
    return c


def auth_errors(c):
    """The errors librdkafka reports for a configuration that should not authenticate."""
    errors = []
    admin = AdminClient(dict(c, error_cb=errors.append))
    with pytest.raises(Exception):
        admin.list_topics(timeout=3)
    admin.poll(1)
    return errors


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"])
def test_each_mechanism_produces_and_consumes(start_broker, mechanism):
    """A user made offline for the mechanism (PLAIN checks the SCRAM credential) creates a
    topic, produces with librdkafka and consumes with kafka-python over SASL_PLAINTEXT."""
    stored = "SCRAM-SHA-512" if mechanism == "SCRAM-SHA-512" else "SCRAM-SHA-256"
    b = sasl_broker(start_broker, users=(("alice", "alice-pw", stored),))
    c = conf(b, "alice", "alice-pw", mechanism)
    topic = "sasl-" + mechanism.lower()
    create(None, topic, partitions=2, admin=AdminClient(c))
    p = Producer(c)
    for i in range(20):
        p.produce(topic, value=b"%d" % i, partition=i % 2)
    assert p.flush(TIMEOUT) == 0
    kc = KafkaConsumer(topic, bootstrap_servers=b.bootstrap, security_protocol="SASL_PLAINTEXT",
                       sasl_mechanism=mechanism, sasl_plain_username="alice", sasl_plain_password="alice-pw",
                       auto_offset_reset="earliest", consumer_timeout_ms=10000)
    values = set()
    for m in kc:
        values.add(int(m.value))
        if len(values) == 20:
            break
    kc.close()
    assert values == set(range(20))


def test_wrong_password_and_unknown_user_look_alike(start_broker):
    """A wrong password and an unknown user both get SASL_AUTHENTICATION_FAILED with the same
    message (nothing says whether the user exists, librdkafka shows it); the broker keeps
    serving the right user."""
    b = sasl_broker(start_broker)
    wrong = auth_errors(conf(b, "admin", "nope"))
    unknown = auth_errors(conf(b, "nobody", "x"))
    text = "invalid credentials with SASL mechanism SCRAM-SHA-256"
    for errors in (wrong, unknown):
        assert any(e.code() == KafkaError._AUTHENTICATION and text in e.str() for e in errors), errors
    assert AdminClient(conf(b, "admin", "admin-secret")).list_topics(timeout=TIMEOUT).brokers


def test_unoffered_mechanism_and_requests_before_authentication(start_broker):
    """A listener offering only SCRAM-SHA-512 refuses PLAIN, naming what it offers; on a raw
    socket ApiVersions is answered before the handshake, a Metadata request is not (the
    connection closes), and a frame over sasl.server.max.receive.size closes it too."""
    b = sasl_broker(start_broker, "--set", "listener.name.sasl_plaintext.sasl.enabled.mechanisms=SCRAM-SHA-512")
    errors = auth_errors(conf(b, "admin", "admin-secret", "PLAIN"))
    assert any("Unsupported SASL mechanism" in e.str() and "SCRAM-SHA-512" in e.str() for e in errors), errors

    def raw(frame):
        s = socket.create_connection(("127.0.0.1", b.port), timeout=10)
        s.sendall(struct.pack(">i", len(frame)) + frame)
        try:
            got = s.recv(65536)
        except (ConnectionResetError, socket.timeout):
            got = b""
        s.close()
        return got

    api_versions = struct.pack(">hhih", 18, 0, 7, 1) + b"t"
    got = raw(api_versions)
    assert len(got) > 8 and struct.unpack(">i", got[4:8])[0] == 7, got
    metadata = struct.pack(">hhih", 3, 1, 9, 1) + b"t" + struct.pack(">i", -1)
    assert raw(metadata) == b""
    s = socket.create_connection(("127.0.0.1", b.port), timeout=10)
    s.sendall(struct.pack(">i", 10 << 20))
    assert s.recv(1) == b""
    s.close()
    assert b.proc.poll() is None


def test_users_online_and_across_a_restart(start_broker):
    """KIP-554 with librdkafka's admin client: the admin adds bob (SCRAM-SHA-512) online, bob
    authenticates; DescribeUserScramCredentials lists his mechanism and iterations and says an
    unknown user is not found; too few iterations are refused; bob survives a restart; once
    deleted he is refused."""
    b = sasl_broker(start_broker)
    admin = AdminClient(conf(b, "admin", "admin-secret"))
    up = UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), b"bob-pw")
    admin.alter_user_scram_credentials([up])["bob"].result(TIMEOUT)
    bob = conf(b, "bob", "bob-pw", "SCRAM-SHA-512")
    assert AdminClient(bob).list_topics(timeout=TIMEOUT).brokers
    described = admin.describe_user_scram_credentials(["bob"])["bob"].result(TIMEOUT)
    assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == [(ScramMechanism.SCRAM_SHA_512, 8192)]
    with pytest.raises(Exception) as missing:
        admin.describe_user_scram_credentials(["carol"])["carol"].result(TIMEOUT)
    assert "does not exist" in str(missing.value), missing.value
    weak = UserScramCredentialUpsertion("carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 100), b"pw")
    with pytest.raises(Exception) as refused:
        admin.alter_user_scram_credentials([weak])["carol"].result(TIMEOUT)
    assert "Too few iterations" in str(refused.value), refused.value
    b.stop()
    b.start("--set", "listeners=SASL_PLAINTEXT://%s" % b.bootstrap, "--set", "sasl.enabled.mechanisms=" + MECHS,
            "--set", "connection.failed.authentication.delay.ms=10")
    assert AdminClient(bob).list_topics(timeout=TIMEOUT).brokers, "bob's credential is durable"
    admin = AdminClient(conf(b, "admin", "admin-secret"))
    admin.alter_user_scram_credentials([UserScramCredentialDeletion("bob", ScramMechanism.SCRAM_SHA_512)])["bob"].result(TIMEOUT)
    assert any(e.code() == KafkaError._AUTHENTICATION for e in auth_errors(bob))


def test_sasl_over_tls(start_broker, tmp_path):
    """SASL_SSL: TLS with the test CA, then SCRAM-SHA-256 (librdkafka) and SCRAM-SHA-512
    (kafka-python, Python's ssl); records produced by one are consumed by the other."""
    ca = Authority(str(tmp_path))
    b = sasl_broker(start_broker, "--set", "ssl.keystore.location=%s" % ca.broker(), protocol="SASL_SSL",
                    users=(("admin", "admin-secret", "SCRAM-SHA-256"), ("bob", "bob-pw", "SCRAM-SHA-512")))
    c = conf(b, "admin", "admin-secret", protocol="SASL_SSL", **{"ssl.ca.location": ca.ca_file})
    create(None, "sasl-ssl", admin=AdminClient(c))
    p = Producer(c)
    for i in range(10):
        p.produce("sasl-ssl", value=b"%d" % i)
    assert p.flush(TIMEOUT) == 0
    kc = KafkaConsumer("sasl-ssl", bootstrap_servers=b.bootstrap, security_protocol="SASL_SSL", ssl_cafile=ca.ca_file,
                       sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="bob", sasl_plain_password="bob-pw",
                       auto_offset_reset="earliest", consumer_timeout_ms=10000)
    values = set()
    for m in kc:
        values.add(int(m.value))
        if len(values) == 10:
            break
    kc.close()
    assert values == set(range(10))


class RawSasl:
    """A raw connection speaking SaslHandshake v1 and SaslAuthenticate v1 with PLAIN (and
    Metadata v1), to check KIP-368's rules exactly."""

    def __init__(self, b, trickle=False):
        self.s = socket.create_connection(("127.0.0.1", b.port), timeout=10)
        self.corr = 0
        self.trickle = trickle

    def send(self, data):
        if not self.trickle:
            return self.s.sendall(data)
        for i in range(len(data)):  # one byte per write
            self.s.sendall(data[i:i + 1])
            time.sleep(0.002)

    def call(self, api, version, body):
        self.corr += 1
        frame = struct.pack(">hhih", api, version, self.corr, 1) + b"t" + body
        self.send(struct.pack(">i", len(frame)) + frame)
        got = b""
        while len(got) < 4 or len(got) < 4 + struct.unpack(">i", got[:4])[0]:
            more = self.s.recv(65536)
            if not more:
                return None  # closed
            got += more
        assert struct.unpack(">i", got[4:8])[0] == self.corr
        return got[8:]

    def handshake(self, mechanism):
        body = self.call(17, 1, struct.pack(">h", len(mechanism)) + mechanism.encode())
        return struct.unpack(">h", body[:2])[0]

    def authenticate(self, token):
        """(error code, message, session lifetime ms), or None if the connection closed."""
        body = self.call(36, 1, struct.pack(">i", len(token)) + token)
        if body is None:
            return None
        code, n = struct.unpack(">hh", body[:4])
        message = body[4:4 + n].decode() if n >= 0 else None
        rest = body[4 + max(n, 0):]
        (size,) = struct.unpack(">i", rest[:4])
        self.auth_bytes = rest[4:4 + max(size, 0)]
        (lifetime,) = struct.unpack(">q", rest[4 + max(size, 0):12 + max(size, 0)])
        return code, message, lifetime

    def plain(self, user, password, mechanism="PLAIN"):
        assert self.handshake(mechanism) == 0
        return self.authenticate(b"\0" + user.encode() + b"\0" + password.encode())

    def metadata(self):
        return self.call(3, 1, struct.pack(">i", -1))

    def closed(self):
        try:
            return self.s.recv(1) == b""
        except ConnectionResetError:
            return True


def test_reauthentication(start_broker):
    """KIP-368 with connections.max.reauth.ms=2000: SaslAuthenticate v1 tells the session
    lifetime; the client re-authenticates on the same connection (same user, same mechanism)
    and is served on; a request after the session ended closes the connection, also when a
    re-authentication was started and never finished; re-authenticating
    as another user, or with another mechanism, is SASL_AUTHENTICATION_FAILED with Kafka's
    message and the connection closes. librdkafka's producer, re-authenticating with
    SCRAM-SHA-256 by itself, delivers every record over three lifetimes without a disconnect."""
    b = sasl_broker(start_broker, "--set", "connections.max.reauth.ms=2000",
                    users=(("alice", "alice-pw", "SCRAM-SHA-256"), ("bob", "bob-pw", "SCRAM-SHA-256")))
    c = RawSasl(b)
    assert c.plain("alice", "alice-pw") == (0, None, 2000)
    assert c.metadata() is not None
    time.sleep(1.2)
    assert c.plain("alice", "alice-pw") == (0, None, 2000), "re-authenticated on the same connection"
    time.sleep(1.2)
    assert c.metadata() is not None, "served past the first lifetime"
    time.sleep(2.2)
    assert c.metadata() is None, "a request after the session ended closes the connection"

    stalled = RawSasl(b)
    assert stalled.plain("alice", "alice-pw")[0] == 0
    assert stalled.handshake("PLAIN") == 0
    time.sleep(2.2)
    assert stalled.metadata() is None, "a re-authentication started and never finished does not extend the session"

    other = RawSasl(b)
    assert other.plain("alice", "alice-pw")[0] == 0
    code, message, _ = other.plain("bob", "bob-pw")
    assert code == 58 and "Cannot change principals during re-authentication" in message, message
    assert other.closed()

    mech = RawSasl(b)
    assert mech.plain("alice", "alice-pw")[0] == 0
    assert mech.handshake("SCRAM-SHA-256") == 0
    code, message, _ = mech.authenticate(b"n,,n=alice,r=abc")
    assert code == 58 and "not supported for re-authentication" in message, message
    assert mech.closed()

    create(None, "reauth", partitions=1, admin=AdminClient(conf(b, "alice", "alice-pw")))
    errors, delivered = [], []
    p = Producer(conf(b, "alice", "alice-pw", error_cb=errors.append))
    deadline = time.time() + 6.5
    n = 0
    while time.time() < deadline:
        p.produce("reauth", value=b"%d" % n, on_delivery=lambda e, m: delivered.append(e))
        n += 1
        p.poll(0.05)
    assert p.flush(TIMEOUT) == 0
    assert len(delivered) == n and all(e is None for e in delivered), delivered[:5]
    assert errors == [], errors
    with open(os.path.join(b.data_dir, "broker.log"), encoding="utf-8", errors="replace") as f:
        expired = f.read().count("SASL session expired")
    assert expired == 2, "only the raw connections outlived their sessions, not librdkafka's"
    assert b.proc.poll() is None


def test_exchange_split_reordered_and_tampered(start_broker):
    """Bad input in the exchange, on raw sockets: a PLAIN exchange sent one byte per write is
    read whole and authenticates; SaslAuthenticate before SaslHandshake closes the connection
    unanswered; a SCRAM client-final whose nonce is not the server's, with a proof valid for
    that message, is SASL_AUTHENTICATION_FAILED, then the close (the same exchange with the
    server's nonce authenticates); the broker serves a good client throughout."""
    b = sasl_broker(start_broker, users=(("alice", "alice-pw", "SCRAM-SHA-256"),))

    split = RawSasl(b, trickle=True)
    assert split.plain("alice", "alice-pw")[0] == 0
    assert split.metadata() is not None, "served after an exchange split over many reads"

    early = RawSasl(b)
    assert early.authenticate(b"\0alice\0alice-pw") is None, "SaslAuthenticate before the handshake"

    def scram(nonce_of=lambda server_nonce: server_nonce):
        """A SCRAM-SHA-256 exchange as alice whose client-final carries `nonce_of(the server's
        nonce)` with a proof that is valid for that message: the final answer's code."""
        c = RawSasl(b)
        assert c.handshake("SCRAM-SHA-256") == 0
        bare = "n=alice,r=clientnonce"
        assert c.authenticate(b"n,," + bare.encode())[0] == 0
        server_first = c.auth_bytes.decode()
        fields = dict(f.split("=", 1) for f in server_first.split(","))
        salted = hashlib.pbkdf2_hmac("sha256", b"alice-pw", base64.b64decode(fields["s"]), int(fields["i"]))
        client_key = hmac.new(salted, b"Client Key", "sha256").digest()
        without_proof = "c=biws,r=" + nonce_of(fields["r"])
        auth = ",".join([bare, server_first, without_proof]).encode()
        signature = hmac.new(hashlib.sha256(client_key).digest(), auth, "sha256").digest()
        proof = base64.b64encode(bytes(x ^ y for x, y in zip(client_key, signature))).decode()
        code, message, _ = c.authenticate((without_proof + ",p=" + proof).encode())
        return c, code, message
    _, code, _ = scram()
    assert code == 0, "the right nonce with its proof authenticates"
    tampered, code, message = scram(lambda _: "someone-elses-nonce")
    assert code == 58 and "invalid credentials" in message, (code, message)
    assert tampered.closed()
    assert RawSasl(b).plain("alice", "alice-pw")[0] == 0
    assert b.proc.poll() is None
