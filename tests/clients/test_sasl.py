"""SASL on the real binary (SASL_PLAINTEXT and SASL_SSL listeners) with real clients:
SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN with confluent-kafka (librdkafka) and kafka-python;
the first user made offline (`tidemark user add`), more online (KIP-554
AlterUserScramCredentials), kept across a restart; wrong passwords and unknown users refused
alike; a mechanism the listener does not offer refused with the ones it does; nothing but
ApiVersions and the SASL exchange served before authentication."""
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
    """SASL_SSL: TLS with the test CA, then SCRAM-SHA-256; records go through."""
    ca = Authority(str(tmp_path))
    b = sasl_broker(start_broker, "--set", "ssl.keystore.location=%s" % ca.broker(), protocol="SASL_SSL")
    c = conf(b, "admin", "admin-secret", protocol="SASL_SSL", **{"ssl.ca.location": ca.ca_file})
    create(None, "sasl-ssl", admin=AdminClient(c))
    p = Producer(c)
    for i in range(10):
        p.produce("sasl-ssl", value=b"%d" % i)
    assert p.flush(TIMEOUT) == 0
