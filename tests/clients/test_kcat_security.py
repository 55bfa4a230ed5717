"""Debian's kcat (librdkafka 2.0.2) on the real binary over the secured listeners: SSL with the
test's CA, SASL_PLAINTEXT with SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN, SASL_SSL with
SCRAM-SHA-512, and SSL with client certificates required. Each test produces keyed records
with `kcat -P`, reads them back with `kcat -C -e` and compares them exactly; refused
clients (wrong password, no client certificate) fail with the error kcat really prints, and
the broker keeps serving the right ones. Every librdkafka property is given with -X.

librdkafka before 2.6.1 (librdkafka#4895) puts its client nonce twice in the SCRAM
client-final message (`r=<client nonce><client nonce><server nonce>`); the broker accepts a
nonce that ends with the server's, as Kafka 3.8.1-3.9 do, so kcat authenticates with SCRAM."""
import os
import shutil
import subprocess

import pytest

from test_clients import TIMEOUT
from test_sasl import sasl_broker
from test_tls import ca, tls_broker  # noqa: F401 (ca is a fixture)

@pytest.fixture
def kcat():
    """Runs kcat with librdkafka properties (each as -X key=value) and arguments, bounded by
    TIMEOUT: the CompletedProcess, output captured."""
    path = shutil.which("kcat")
    if path is None:
        if os.environ.get("TIDEMARK_REQUIRE_KCAT") == "1":
            raise AssertionError("kcat is required here (scripts/test installs it)")
        pytest.skip("kcat not installed")

    def run(props, *args, input=None):
        xs = [x for k, v in props.items() for x in ("-X", "%s=%s" % (k, v))]
        return subprocess.run([path, *args, *xs], input=input, capture_output=True, timeout=TIMEOUT)
    return run


def records(n, tag=""):
    return [("k%d%s" % (i, tag), "v%d%s" % (i, tag)) for i in range(n)]


def produce(kcat, b, props, topic, items):
    """`kcat -P` of key:value lines to partition 0; asserts kcat succeeded."""
    data = "".join("%s:%s\n" % kv for kv in items).encode()
    p = kcat(props, "-P", "-b", b.bootstrap, "-t", topic, "-p", "0", "-K:", input=data)
    assert p.returncode == 0, p.stderr.decode()
    return p


def consume(kcat, b, props, topic):
    """`kcat -C -e` of partition 0 from the beginning: [(offset, key, value)]."""
    c = kcat(props, "-C", "-b", b.bootstrap, "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q",
             "-f", "%o %k %s\n")
    assert c.returncode == 0, c.stderr.decode()
    return [tuple(int(x) if i == 0 else x for i, x in enumerate(line.split(" "))) for line in c.stdout.decode().splitlines()]


def round_trip(kcat, b, props, topic, n=20):
    """N keyed records produced with kcat come back from kcat in order, offsets 0..N-1, and
    `kcat -L` names the topic and the broker's address."""
    items = records(n)
    produce(kcat, b, props, topic, items)
    assert consume(kcat, b, props, topic) == [(i, k, v) for i, (k, v) in enumerate(items)]
    meta = kcat(props, "-L", "-b", b.bootstrap)
    assert meta.returncode == 0, meta.stderr.decode()
    out = meta.stdout.decode()
    assert 'topic "%s" with 1 partitions' % topic in out, out
    assert "broker 0 at 127.0.0.1:%d" % b.port in out, out


def sasl_props(mechanism, user, password, protocol="SASL_PLAINTEXT", **extra):
    props = {"security.protocol": protocol, "sasl.mechanisms": mechanism, "sasl.username": user,
             "sasl.password": password}
    props.update(extra)
    return props


def stored(mechanism):
    """The SCRAM credential a user needs for this mechanism (PLAIN checks a SCRAM one)."""
    return "SCRAM-SHA-512" if mechanism == "SCRAM-SHA-512" else "SCRAM-SHA-256"


def test_kcat_over_ssl(start_broker, ca, kcat):
    """kcat over an SSL listener, verifying the broker's certificate (and 127.0.0.1 in it)
    against the test CA: 20 keyed records produced and consumed back exactly, in order; the
    metadata lists the topic and the TLS listener's address."""
    b = tls_broker(start_broker, ca)
    round_trip(kcat, b, {"security.protocol": "SSL", "ssl.ca.location": ca.ca_file}, "kcat-ssl")


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"])
def test_kcat_sasl_plaintext(start_broker, kcat, mechanism):
    """kcat over SASL_PLAINTEXT with the mechanism: a round trip as alice; then alice with a
    wrong password is refused (kcat exits non-zero, printing the broker's authentication
    failure) and writes nothing; alice with her password is still served and reads exactly
    the first records and the later ones."""
    b = sasl_broker(start_broker, users=(("alice", "alice-pw", stored(mechanism)),))
    good = sasl_props(mechanism, "alice", "alice-pw")
    topic = "kcat-" + mechanism.lower()
    round_trip(kcat, b, good, topic)
    data = b"intruder:x\n"
    bad = kcat(sasl_props(mechanism, "alice", "wrong"), "-P", "-b", b.bootstrap, "-t", topic, "-p", "0", "-K:",
               input=data)
    err = bad.stderr.decode()
    assert bad.returncode != 0, err
    reason = ("Authentication failed: Invalid username or password" if mechanism == "PLAIN" else
              "Authentication failed during authentication due to invalid credentials with SASL mechanism " + mechanism)
    assert "SASL authentication error: " + reason in err, err
    assert "Local: Authentication failure" in err, err
    later = records(5, "-later")
    produce(kcat, b, good, topic, later)
    want = records(20) + later
    assert consume(kcat, b, good, topic) == [(i, k, v) for i, (k, v) in enumerate(want)]
    assert b.proc.poll() is None


def test_kcat_sasl_ssl_scram_sha_512(start_broker, ca, kcat):
    """kcat over SASL_SSL: TLS verified against the test CA, then SCRAM-SHA-512 as a user made
    for it; a round trip of 20 keyed records and the metadata."""
    b = sasl_broker(start_broker, "--set", "ssl.keystore.location=%s" % ca.broker(), protocol="SASL_SSL",
                    users=(("alice", "alice-pw", "SCRAM-SHA-512"),))
    props = sasl_props("SCRAM-SHA-512", "alice", "alice-pw", protocol="SASL_SSL", **{"ssl.ca.location": ca.ca_file})
    round_trip(kcat, b, props, "kcat-sasl-ssl")


def test_kcat_client_certificate_required(start_broker, ca, kcat):
    """With ssl.client.auth=required and the test CA as truststore, kcat presenting a client
    certificate from that CA does a round trip; kcat without one is refused by the broker's
    TLS 1.3 certificate_required alert (kcat exits non-zero and prints it) and writes nothing."""
    b = tls_broker(start_broker, ca, "--set", "ssl.client.auth=required",
                   "--set", "ssl.truststore.location=%s" % ca.ca_file)
    cert, key = ca.client(CN="kcat")
    server_only = {"security.protocol": "SSL", "ssl.ca.location": ca.ca_file}
    mutual = dict(server_only, **{"ssl.certificate.location": cert, "ssl.key.location": key})
    round_trip(kcat, b, mutual, "kcat-mtls")
    bad = kcat(server_only, "-P", "-b", b.bootstrap, "-t", "kcat-mtls", "-p", "0", "-K:", input=b"intruder:x\n")
    err = bad.stderr.decode()
    assert bad.returncode != 0, err
    assert "SSL routines::tlsv13 alert certificate required" in err, err
    assert consume(kcat, b, mutual, "kcat-mtls") == [(i, k, v) for i, (k, v) in enumerate(records(20))]
    assert b.proc.poll() is None
