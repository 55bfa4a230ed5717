"""Certificates made at test time (the `cryptography` package): a CA, a broker certificate for
localhost/127.0.0.1 signed by it, and client certificates, written as PEM files."""
import datetime
import ipaddress
import os

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def _name(**attrs):
    oids = {"CN": NameOID.COMMON_NAME, "OU": NameOID.ORGANIZATIONAL_UNIT_NAME, "O": NameOID.ORGANIZATION_NAME,
            "C": NameOID.COUNTRY_NAME}
    return x509.Name([x509.NameAttribute(oids[k], v) for k, v in attrs.items()])


def _key_pem(key):
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _cert(subject, key, issuer, issuer_key, ca=False, sans=None):
    now = datetime.datetime.now(datetime.timezone.utc)
    b = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(key.public_key())
         .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
         .not_valid_after(now + datetime.timedelta(days=2))
         .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if sans:
        b = b.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return b.sign(issuer_key, hashes.SHA256())


class Authority:
    """A CA that signs broker and client certificates into `directory`."""

    def __init__(self, directory, name="tidemark test CA"):
        self.dir = directory
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.name = _name(CN=name)
        self.cert = _cert(self.name, self.key, self.name, self.key, ca=True)
        self.ca_file = self._write("ca-%s.pem" % abs(hash(name)), self.cert.public_bytes(serialization.Encoding.PEM))

    def _write(self, name, data):
        path = os.path.join(self.dir, name)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def broker(self, ips=("127.0.0.1",)):
        """A keystore PEM (key and chain) for localhost and `ips`: its path."""
        key = ec.generate_private_key(ec.SECP256R1())
        sans = [x509.DNSName("localhost")] + [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
        cert = _cert(_name(CN="localhost"), key, self.name, self.key, sans=sans)
        pem = _key_pem(key) + cert.public_bytes(serialization.Encoding.PEM) + self.cert.public_bytes(serialization.Encoding.PEM)
        return self._write("broker-%d.pem" % id(cert), pem)

    def client(self, **subject):
        """A client certificate with this subject: (certificate path, key path)."""
        key = ec.generate_private_key(ec.SECP256R1())
        cert = _cert(_name(**subject), key, self.name, self.key)
        tag = "%d" % id(cert)
        return (self._write("client-%s.pem" % tag, cert.public_bytes(serialization.Encoding.PEM)),
                self._write("client-%s.key" % tag, _key_pem(key)))
