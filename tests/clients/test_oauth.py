"""SASL/OAUTHBEARER with OIDC tokens (KIP-768), as Kafka's OAuthBearerValidatorCallbackHandler
checks them. The test is the identity provider: it makes an EC P-256 and an RSA key, serves
their JWKS over HTTP (sasl.oauthbearer.jwks.endpoint.url) and signs tokens itself.

What is checked: librdkafka (confluent-kafka's oauth_cb) produces and kafka-python
(sasl_oauth_token_provider) consumes with signed tokens (ES256 and RS256); the token's `sub`
is the principal the ACLs see (a user without ACLs is refused a topic, the super user is not);
tokens that are expired, for another audience or issuer, signed by a key the JWKS does not
hold, unsigned (`alg: none`, librdkafka's unsecured default), or without a subject, are
refused with SASL_AUTHENTICATION_FAILED and the reason, and the connection closes; a broker
offering OAUTHBEARER without a JWKS URL, or whose JWKS URL does not answer, does not start.
"""
import base64
import http.server
import json
import socket
import struct
import subprocess
import threading
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
from kafka import KafkaConsumer
from kafka.net.sasl.oauth import AbstractTokenProvider

from conftest import BIN, free_port

AUDIENCE, ISSUER = "kafka", "https://idp.test"
SASL_AUTHENTICATION_FAILED = 58


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def uint(n):
    return n.to_bytes((n.bit_length() + 7) // 8, "big")


class IdentityProvider:
    """Two signing keys, their JWKS served over HTTP, and tokens signed with either."""

    def __init__(self):
        self.ec = ec.generate_private_key(ec.SECP256R1())
        self.rsa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pub = self.ec.public_key().public_numbers()
        rpub = self.rsa.public_key().public_numbers()
        self.jwks = json.dumps({"keys": [
            {"kty": "EC", "crv": "P-256", "kid": "ec1", "use": "sig", "x": b64url(pub.x.to_bytes(32, "big")),
             "y": b64url(pub.y.to_bytes(32, "big"))},
            {"kty": "RSA", "kid": "rsa1", "n": b64url(uint(rpub.n)), "e": b64url(uint(rpub.e))},
        ]}).encode()
        jwks = self.jwks

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(jwks)))
                self.end_headers()
                self.wfile.write(jwks)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/jwks.json"

    def token(self, sub="alice", alg="ES256", kid=None, lifetime=300, key=None, **claims):
        now = int(time.time())
        body = {"sub": sub, "aud": AUDIENCE, "iss": ISSUER, "iat": now, "exp": now + lifetime, **claims}
        if sub is None:
            del body["sub"]
        header = {"alg": alg, "typ": "JWT", "kid": kid or ("ec1" if alg == "ES256" else "rsa1")}
        signed = (b64url(json.dumps(header).encode()) + "." + b64url(json.dumps(body).encode())).encode()
        if alg == "none":
            return signed.decode() + "."
        if alg == "ES256":
            r, s = decode_dss_signature((key or self.ec).sign(signed, ec.ECDSA(hashes.SHA256())))
            sig = r.to_bytes(32, "big") + s.to_bytes(32, "big")
        else:
            sig = (key or self.rsa).sign(signed, padding.PKCS1v15(), hashes.SHA256())
        return signed.decode() + "." + b64url(sig)

    def close(self):
        self.server.shutdown()


@pytest.fixture
def idp():
    p = IdentityProvider()
    yield p
    p.close()


def oauth_broker(start_broker, idp, *extra):
    """A broker whose one listener is SASL_PLAINTEXT offering OAUTHBEARER, as Kafka's docs
    configure it."""
    b = start_broker()
    b.stop()
    b.start("--set", f"listeners=SASL_PLAINTEXT://{b.bootstrap}",
            "--set", "sasl.enabled.mechanisms=OAUTHBEARER",
            "--set", f"sasl.oauthbearer.jwks.endpoint.url={idp.url}",
            "--set", f"sasl.oauthbearer.expected.audience={AUDIENCE}",
            "--set", f"sasl.oauthbearer.expected.issuer={ISSUER}",
            "--set", "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class="
                     "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
            "--set", "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config="
                     "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;",
            "--set", "connection.failed.authentication.delay.ms=10",
            *extra)
    return b


def client_conf(b, token_fn):
    return {"bootstrap.servers": b.bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
            "oauth_cb": lambda _config: (token_fn(), time.time() + 300)}


class Tokens(AbstractTokenProvider):
    def __init__(self, make):
        self.make = make

    def token(self):
        return self.make()


def test_signed_tokens_log_in_and_name_the_principal(start_broker, idp):
    b = oauth_broker(start_broker, idp,
                     "--set", "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                     "--set", "super.users=User:admin")
    admin = AdminClient(client_conf(b, lambda: idp.token("admin")))
    admin.create_topics([NewTopic("oauth", 1, 1)])["oauth"].result(30)

    p = Producer(client_conf(b, lambda: idp.token("admin", alg="RS256")))
    for i in range(10):
        p.produce("oauth", value=b"%d" % i)
    assert p.flush(30) == 0

    consumer = KafkaConsumer("oauth", bootstrap_servers=b.bootstrap, security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism="OAUTHBEARER",
                             sasl_oauth_token_provider=Tokens(lambda: idp.token("admin")),
                             auto_offset_reset="earliest", consumer_timeout_ms=15000)
    values = set()
    for m in consumer:
        values.add(int(m.value))
        if len(values) == 10:
            break
    consumer.close()
    assert values == set(range(10))

    # alice (no ACL) is authenticated as User:alice and refused the topic.
    errors = []
    alice = Producer(dict(client_conf(b, lambda: idp.token("alice")), **{"message.timeout.ms": 5000}))
    alice.produce("oauth", value=b"x", on_delivery=lambda err, _m: errors.append(err))
    alice.flush(15)
    assert errors and errors[0] is not None and "AUTHORIZATION" in errors[0].name(), errors

    # Refused tokens, each with its reason (a raw SaslHandshake v1 / SaslAuthenticate v1).
    other = ec.generate_private_key(ec.SECP256R1())
    cases = {
        "expired": idp.token("bob", lifetime=-120),
        "audience": idp.token("bob", aud="billing"),
        "issuer": idp.token("bob", iss="https://evil.test"),
        "signature": idp.token("bob", key=other),
        "no key with kid": idp.token("bob", kid="nope"),
        "no sub claim": idp.token(None),
    }
    cases["signature (none)"] = idp.token("bob", alg="none")
    for why, token in cases.items():
        code, message = raw_login(b, token)
        assert code == SASL_AUTHENTICATION_FAILED, (why, code, message)
        assert why.split(" (")[0] in message, (why, message)


def raw_login(b, token):
    """(error code, message) of an OAUTHBEARER login with `token` over a raw connection."""
    with socket.create_connection(("127.0.0.1", b.port), timeout=10) as s:
        corr = [0]

        def call(api, version, body):
            corr[0] += 1
            frame = struct.pack(">hhih", api, version, corr[0], 1) + b"t" + body
            s.sendall(struct.pack(">i", len(frame)) + frame)
            got = b""
            while len(got) < 4 or len(got) < 4 + struct.unpack(">i", got[:4])[0]:
                more = s.recv(65536)
                if not more:
                    return None
                got += more
            return got[8:]

        mech = b"OAUTHBEARER"
        assert struct.unpack(">h", call(17, 1, struct.pack(">h", len(mech)) + mech)[:2])[0] == 0
        message = b"n,,\x01auth=Bearer " + token.encode() + b"\x01\x01"
        body = call(36, 1, struct.pack(">i", len(message)) + message)
        code, n = struct.unpack(">hh", body[:4])
        return code, body[4:4 + max(n, 0)].decode()


def test_oauthbearer_needs_its_keys_to_start(tmp_path):
    """OAUTHBEARER offered without sasl.oauthbearer.jwks.endpoint.url, or with a URL that does
    not answer: the broker does not start, and says which setting."""
    port = free_port()
    base = [BIN, "serve", "--data-dir", str(tmp_path / "d"), "--listen", f"127.0.0.1:{port}",
            "--set", f"listeners=SASL_PLAINTEXT://127.0.0.1:{port}", "--set", "sasl.enabled.mechanisms=OAUTHBEARER"]
    out = subprocess.run(base, capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "sasl.oauthbearer.jwks.endpoint.url" in out.stderr, out.stderr[-2000:]
    dead = f"http://127.0.0.1:{free_port()}/jwks.json"
    out = subprocess.run(base + ["--set", f"sasl.oauthbearer.jwks.endpoint.url={dead}"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode != 0 and dead in out.stderr, out.stderr[-2000:]
