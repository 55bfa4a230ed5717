"""TLS listeners (SSL) on the real binary with real clients: confluent-kafka (librdkafka, its
own OpenSSL) and kafka-python (Python's ssl) produce and consume over TLS with a CA made by the
test; `ssl.client.auth=required` admits a client certificate from the trusted CA and refuses
none or another CA's; plaintext or garbage on the TLS port is closed while other clients are
served; a broker with a PLAINTEXT and an SSL listener advertises each to its own clients."""
import socket
import ssl
import struct
import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer, KafkaProducer

from certs import Authority
from conftest import free_port
from test_clients import TIMEOUT, create


@pytest.fixture
def ca(tmp_path):
    return Authority(str(tmp_path))


def tls_broker(start_broker, ca, *extra):
    b = start_broker()
    b.stop()
    b.start("--set", "listeners=SSL://%s" % b.bootstrap, "--set", "ssl.keystore.type=PEM",
            "--set", "ssl.keystore.location=%s" % ca.broker(), *extra)
    return b


def ssl_conf(b, ca, **extra):
    conf = {"bootstrap.servers": b.bootstrap, "security.protocol": "SSL", "ssl.ca.location": ca.ca_file}
    conf.update(extra)
    return conf


def consume(conf, topic, n):
    c = Consumer(dict(conf, **{"group.id": "g-" + topic, "auto.offset.reset": "earliest"}))
    c.subscribe([topic])
    seen = set()
    deadline = time.time() + TIMEOUT
    while time.time() < deadline and len(seen) < n:
        m = c.poll(0.2)
        if m is not None and m.error() is None:
            seen.add(int(m.value()))
    c.close()
    return seen


def test_produce_and_consume_over_tls(start_broker, ca):
    """librdkafka and kafka-python, each verifying the broker's certificate against the test
    CA (and its host name), create a topic, produce and consume over TLS; Metadata over TLS
    names the TLS listener."""
    b = tls_broker(start_broker, ca)
    admin = AdminClient(ssl_conf(b, ca))
    md = admin.list_topics(timeout=TIMEOUT)
    assert [(x.host, x.port) for x in md.brokers.values()] == [("127.0.0.1", b.port)]
    create(None, "tls-t", partitions=2, admin=admin)
    p = Producer(ssl_conf(b, ca))
    for i in range(50):
        p.produce("tls-t", value=b"%d" % i, partition=i % 2)
    assert p.flush(TIMEOUT) == 0
    assert consume(ssl_conf(b, ca), "tls-t", 50) == set(range(50))
    kp = KafkaProducer(bootstrap_servers=b.bootstrap, security_protocol="SSL", ssl_cafile=ca.ca_file)
    for i in range(50, 60):
        kp.send("tls-t", value=b"%d" % i, partition=0)
    kp.flush(TIMEOUT)
    kp.close()
    kc = KafkaConsumer("tls-t", bootstrap_servers=b.bootstrap, security_protocol="SSL", ssl_cafile=ca.ca_file,
                       auto_offset_reset="earliest", consumer_timeout_ms=10000)
    values = set()
    for m in kc:
        values.add(int(m.value))
        if len(values) == 60:
            break
    kc.close()
    assert values == set(range(60))


def test_client_certificates_required(start_broker, ca, tmp_path):
    """With ssl.client.auth=required and the test CA as truststore, a client presenting a
    certificate from that CA is served; one without a certificate, or with one from another
    CA, fails its handshake (librdkafka reports an SSL error) and is never served."""
    b = tls_broker(start_broker, ca, "--set", "ssl.client.auth=required",
                   "--set", "ssl.truststore.location=%s" % ca.ca_file)
    cert, key = ca.client(CN="alice", OU="Eng", O="Acme, Inc", C="US")
    good = AdminClient(ssl_conf(b, ca, **{"ssl.certificate.location": cert, "ssl.key.location": key}))
    assert good.list_topics(timeout=TIMEOUT).brokers
    other = Authority(str(tmp_path), name="another CA")
    ocert, okey = other.client(CN="mallory")
    for conf in (ssl_conf(b, ca), ssl_conf(b, ca, **{"ssl.certificate.location": ocert, "ssl.key.location": okey})):
        errors = []
        bad = AdminClient(dict(conf, error_cb=errors.append))
        with pytest.raises(Exception):
            bad.list_topics(timeout=5)
        bad.poll(1)  # serves error_cb
        assert any(e.code() in (KafkaError._SSL, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN) for e in errors), errors


def test_plaintext_and_garbage_on_the_tls_port(start_broker, ca):
    """A client speaking plaintext Kafka to the TLS port, one sending garbage and one that
    connects and says nothing are closed (the first two at once) while a TLS client is
    served; the broker keeps running."""
    b = tls_broker(start_broker, ca, "--set", "connections.max.idle.ms=3000")
    silent = socket.create_connection(("127.0.0.1", b.port))
    for payload in (b"\x00\x00\x00\x0e\x00\x12\x00\x00\x00\x00\x00\x01\x00\x00" * 4, b"\x16\x03\x01\xff\xff" + b"x" * 200):
        s = socket.create_connection(("127.0.0.1", b.port), timeout=10)
        s.sendall(payload)
        try:
            got = s.recv(4096)
            while got and got[:1] == b"\x15":  # a TLS alert, then the close
                got = s.recv(4096)
        except (ConnectionResetError, socket.timeout):
            got = b""
        assert got == b"", got
        s.close()
    assert AdminClient(ssl_conf(b, ca)).list_topics(timeout=TIMEOUT).brokers
    silent.settimeout(10)
    assert silent.recv(1) == b"", "a silent connection is closed after connections.max.idle.ms"
    assert b.proc.poll() is None


def test_plaintext_and_ssl_listeners_side_by_side(start_broker, ca):
    """PLAINTEXT and SSL listeners on one broker: each client is told its own listener's
    address, and both read the same records."""
    b = start_broker()
    b.stop()
    ssl_port = free_port()
    b.start("--set", "listeners=PLAINTEXT://%s,SSL://127.0.0.1:%d" % (b.bootstrap, ssl_port),
            "--set", "ssl.keystore.location=%s" % ca.broker())
    conf = {"bootstrap.servers": "127.0.0.1:%d" % ssl_port, "security.protocol": "SSL", "ssl.ca.location": ca.ca_file}
    md = AdminClient(conf).list_topics(timeout=TIMEOUT)
    assert [(x.host, x.port) for x in md.brokers.values()] == [("127.0.0.1", ssl_port)]
    create(b.bootstrap, "both", partitions=1)
    p = Producer({"bootstrap.servers": b.bootstrap})
    for i in range(10):
        p.produce("both", value=b"%d" % i)
    assert p.flush(TIMEOUT) == 0
    assert consume(conf, "both", 10) == set(range(10))


def alter_broker(admin, resource, entries):
    """IncrementalAlterConfigs SET of `entries` on BROKER `resource`: None, or the error."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
    r = ConfigResource(ResourceType.BROKER, resource, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in entries.items()])
    try:
        admin.incremental_alter_configs([r])[r].result(TIMEOUT)
    except Exception as e:  # KafkaException carrying the broker's error
        return e.args[0]
    return None


def test_certificates_rotate_without_a_restart(start_broker, ca, tmp_path):
    """KIP-226: a TLS listener's key store changes at runtime with IncrementalAlterConfigs
    (`listener.name.ssl.ssl.keystore.location`, per broker): new connections get the new
    certificate (a client trusting only the new CA is served, one trusting only the old CA is
    refused), while a producer connected before keeps its connection and keeps producing. A
    key store that cannot be read is INVALID_CONFIG and changes nothing; the cluster-wide
    default level is refused; the change is described as a dynamic broker setting and kept
    across a restart."""
    b = tls_broker(start_broker, ca)
    admin = AdminClient(ssl_conf(b, ca))
    create(None, "rot", partitions=1, admin=admin)
    old = Producer(ssl_conf(b, ca))
    old.produce("rot", value=b"0")
    assert old.flush(TIMEOUT) == 0
    new_ca = Authority(str(tmp_path), name="next CA")
    key = "listener.name.ssl.ssl.keystore.location"
    assert alter_broker(admin, "0", {key: new_ca.broker()}) is None

    def served(authority):
        a = AdminClient(ssl_conf(b, authority))
        try:
            return bool(a.list_topics(timeout=5).brokers)
        except Exception:
            return False
    assert served(new_ca), "new connections use the new certificate"
    assert not served(ca), "a client trusting only the old CA no longer verifies the broker"
    old.produce("rot", value=b"1")
    assert old.flush(TIMEOUT) == 0, "an open connection keeps its certificate"
    new_admin = AdminClient(ssl_conf(b, new_ca))
    err = alter_broker(new_admin, "0", {key: str(tmp_path / "missing.pem")})
    assert err is not None and err.code() == KafkaError.INVALID_CONFIG and "missing.pem" in err.str(), err
    # The cluster-wide default level (resource ""), which librdkafka will not send: raw.
    from kafka.protocol.admin import IncrementalAlterConfigsRequest as I
    req = I[1](resources=[(4, "", [(key, 0, new_ca.broker())])], validate_only=False)
    req.with_header(correlation_id=7, client_id="t")
    with ssl.create_default_context(cafile=new_ca.ca_file).wrap_socket(
            socket.create_connection(("127.0.0.1", b.port), timeout=TIMEOUT), server_hostname="127.0.0.1") as s:
        s.sendall(req.encode(header=True, framed=True))
        got = b""
        while len(got) < 4 or len(got) < 4 + struct.unpack(">i", got[:4])[0]:
            got += s.recv(65536)
        body = got[4:]
    [r] = req.header.get_response_class().decode(body, version=1, header=True).responses
    code, message = r.error_code, r.error_message
    assert code == 42 and "broker id must be specified" in message, (code, message)
    assert served(new_ca), "the refused changes changed nothing"
    from confluent_kafka.admin import ConfigResource, ResourceType
    r = ConfigResource(ResourceType.BROKER, "0")
    entry = new_admin.describe_configs([r])[r].result(TIMEOUT)[key]
    assert entry.source == 2 and not entry.is_read_only, entry  # DYNAMIC_BROKER_CONFIG
    b.stop()
    b.start("--set", "listeners=SSL://%s" % b.bootstrap, "--set", "ssl.keystore.location=%s" % ca.broker())
    assert served(new_ca) and not served(ca), "kept across a restart, over the static key store"
    assert consume(ssl_conf(b, new_ca), "rot", 2) == {0, 1}


def test_principal_mapping_rules(start_broker, ca):
    """ssl.principal.mapping.rules (KIP-371) turn client certificate subjects into principals:
    with `RULE:^CN=(.*?),OU=.*$/$1/L` the certificate CN=Admin,OU=Ops is User:admin (a super
    user: it creates a topic and an ACL), CN=Alice,OU=Eng is User:alice (allowed to write by
    that ACL), CN=Bob,OU=Eng is User:bob (TOPIC_AUTHORIZATION_FAILED); a subject no rule
    applies to (no OU) is refused at the handshake's end and never served."""
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType
    b = tls_broker(start_broker, ca, "--set", "ssl.client.auth=required", "--set",
                   "ssl.truststore.location=%s" % ca.ca_file,
                   "--set", "ssl.principal.mapping.rules=RULE:^CN=(.*?),OU=.*$/$1/L",
                   "--set", "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                   "--set", "super.users=User:admin")

    def who(cn, ou=None):
        # The subject's most specific RDN last here, first in its RFC 2253 form: CN=..,OU=..
        cert, key = ca.client(**({"OU": ou} if ou else {}), CN=cn)
        return ssl_conf(b, ca, **{"ssl.certificate.location": cert, "ssl.key.location": key})
    admin = AdminClient(who("Admin", "Ops"))
    create(None, "mapped", partitions=1, admin=admin)
    acl = AclBinding(ResourceType.TOPIC, "mapped", ResourcePatternType.LITERAL, "User:alice", "*",
                     AclOperation.WRITE, AclPermissionType.ALLOW)
    admin.create_acls([acl])[acl].result(TIMEOUT)

    def produce(conf):
        errors = []
        p = Producer(dict(conf, **{"message.timeout.ms": 8000}))
        p.produce("mapped", value=b"x", on_delivery=lambda err, _m: errors.append(err))
        p.flush(TIMEOUT)
        return errors
    assert produce(who("Alice", "Eng")) == [None]
    [err] = produce(who("Bob", "Eng"))
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
    unmapped = AdminClient(who("carol"))
    with pytest.raises(Exception):
        unmapped.list_topics(timeout=5)
    assert b.proc.poll() is None
