"""Bad input on raw sockets against the real tidemark binary.

Every test sends one kind of bad input on its own raw connection and checks how the broker
answers it: the Kafka error code where one can be encoded, otherwise a closed connection; never a
crash. Afterwards, in every test, `assert_healthy` checks that the broker process is alive, that
its log shows no panic, and that a real client (confluent-kafka) still produces and consumes on
other connections.

The expected codes are Kafka's (its broker's behaviour, not only the protocol's error list),
except where docs/protocol.md documents a deliberate choice. Record batches are built
by hand here (CRC-32C in pure Python, table-driven), so that each can be broken in one place.
"""
import os
import random
import socket
import struct
import threading
import time
import zlib
from concurrent.futures import ThreadPoolExecutor

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from test_clients import TIMEOUT, create
from test_legacy import Reader

# Kafka error codes.
NONE = 0
OFFSET_OUT_OF_RANGE = 1
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
MESSAGE_TOO_LARGE = 10
INVALID_TOPIC_EXCEPTION = 17
INVALID_REQUIRED_ACKS = 21
UNSUPPORTED_VERSION = 35
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_CONFIG = 40
INVALID_REQUEST = 42
INVALID_RECORD = 87

# API keys.
PRODUCE, FETCH, METADATA, API_VERSIONS, CREATE_TOPICS = 0, 1, 3, 18, 19

DEFAULT_MAX_REQUEST = 100 * 1024 * 1024  # socket.request.max.bytes
WAIT = 5.0  # how long a check waits for the broker to close a connection or answer


# ---------------------------------------------------------------------------------------------
# CRC-32C (Castagnoli), table-driven, and v2 record batches built by hand
# ---------------------------------------------------------------------------------------------

def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


CRC32C_TABLE = _crc32c_table()


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc = CRC32C_TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283, "CRC-32C check value"


def uvarint(u):
    out = bytearray()
    while True:
        b = u & 0x7F
        u >>= 7
        if u:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def varint(n):
    return uvarint(((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF)


def read_varint(buf, pos):
    shift = result = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos


def v2_record(offset_delta, value, key=None, ts_delta=0):
    body = b"\x00" + varint(ts_delta) + varint(offset_delta)
    body += varint(-1) if key is None else varint(len(key)) + key
    body += varint(-1) if value is None else varint(len(value)) + value
    body += varint(0)  # no headers
    return varint(len(body)) + body


HEADER_LEN = 61  # a v2 batch header, baseOffset to recordCount


def v2_batch(values, base_ts=None, count=None, last_offset_delta=None, crc=None, length=None, records=None,
             attributes=0):
    """A v2 record batch (uncompressed, CreateTime, no producer id) holding `values`. Any of
    count, lastOffsetDelta, CRC, batchLength or the records' bytes can be given wrong."""
    base_ts = int(time.time() * 1000) if base_ts is None else base_ts
    recs = b"".join(v2_record(i, v) for i, v in enumerate(values)) if records is None else records
    n = len(values)
    after_crc = struct.pack(">hiqqqhii", attributes, n - 1 if last_offset_delta is None else last_offset_delta,
                            base_ts, base_ts, -1, -1, -1, n if count is None else count) + recs
    body = struct.pack(">ibI", 0, 2, crc32c(after_crc) if crc is None else crc) + after_crc
    return struct.pack(">qi", 0, len(body) if length is None else length) + body


def v2_values(buf):
    """(offset, value) of every record of the uncompressed v2 batches in `buf` (a fetch answer);
    a trailing partial batch is ignored."""
    out, pos = [], 0
    while pos + HEADER_LEN <= len(buf):
        base, length = struct.unpack_from(">qi", buf, pos)
        end = pos + 12 + length
        if end > len(buf):
            break
        assert buf[pos + 16] == 2, "magic %d" % buf[pos + 16]
        count, = struct.unpack_from(">i", buf, pos + 57)
        p = pos + HEADER_LEN
        for _ in range(count):
            _, p = read_varint(buf, p)  # record length
            p += 1  # attributes
            _, p = read_varint(buf, p)  # timestamp delta
            delta, p = read_varint(buf, p)
            klen, p = read_varint(buf, p)
            p += max(klen, 0)
            vlen, p = read_varint(buf, p)
            value = None if vlen < 0 else bytes(buf[p:p + vlen])
            p += max(vlen, 0)
            nh, p = read_varint(buf, p)
            assert nh == 0
            out.append((base + delta, value))
        pos = end
    return out


def magic1_message(value, key=None, ts=None):
    """A legacy magic-1 message (offset 0), CRC-32 right."""
    ts = int(time.time() * 1000) if ts is None else ts
    body = struct.pack(">bbq", 1, 0, ts)
    body += struct.pack(">i", -1) if key is None else struct.pack(">i", len(key)) + key
    body += struct.pack(">i", len(value)) + value
    msg = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", 0, len(msg)) + msg


# ---------------------------------------------------------------------------------------------
# A raw connection
# ---------------------------------------------------------------------------------------------

def s16(b):
    """An int16-length string (bytes or str; None is null)."""
    if b is None:
        return struct.pack(">h", -1)
    if isinstance(b, str):
        b = b.encode()
    return struct.pack(">h", len(b)) + b


class R(Reader):
    """test_legacy's Reader, with the few more field types these answers have."""

    def i8(self):
        return self._take(">b")

    def nstring(self):
        n = self.i16()
        if n < 0:
            return None
        s = self.buf[self.pos:self.pos + n].decode()
        self.pos += n
        return s

    def done(self):
        return self.pos == len(self.buf)


class Conn:
    """One raw socket to the broker."""

    def __init__(self, broker, timeout=WAIT):
        self.sock = socket.create_connection(("127.0.0.1", broker.port), timeout=timeout)
        self.corr = 1000

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send(self, data):
        """Sends raw bytes; False when the broker has already closed the connection."""
        try:
            self.sock.sendall(data)
            return True
        except (BrokenPipeError, ConnectionResetError):
            return False

    def request(self, api, version, body, corr=None, client_id=b"bad-input", flexible=False):
        """A whole frame: size, header v1 (v2 when flexible), body."""
        if corr is None:
            self.corr += 1
            corr = self.corr
        header = struct.pack(">hhi", api, version, corr) + s16(client_id) + (b"\x00" if flexible else b"")
        payload = header + body
        return struct.pack(">i", len(payload)) + payload

    def _recv_exact(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed by the broker after %d of %d bytes" % (len(buf), n))
            buf += chunk
        return buf

    def recv_frame(self):
        """(correlation id, the rest of the response frame)."""
        size, = struct.unpack(">i", self._recv_exact(4))
        frame = self._recv_exact(size)
        return struct.unpack_from(">i", frame)[0], frame[4:]

    def call(self, api, version, body, flexible=False):
        """Sends one request and returns a reader over the response body (header v0)."""
        frame = self.request(api, version, body, flexible=flexible)
        assert self.send(frame), "broker closed the connection before the request was sent"
        corr, rest = self.recv_frame()
        assert corr == self.corr, "correlation id %d, sent %d" % (corr, self.corr)
        return R(rest)

    def outcome(self, timeout=WAIT):
        """Reads until the broker closes the connection or `timeout` passes:
        ("closed" or "open", the bytes received meanwhile)."""
        deadline, data = time.time() + timeout, b""
        while True:
            left = deadline - time.time()
            if left <= 0:
                return "open", data
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                return "open", data
            except (ConnectionResetError, BrokenPipeError):
                return "closed", data
            if not chunk:
                return "closed", data
            data += chunk


def assert_closed(conn, what, timeout=WAIT):
    """The broker closes the connection, answering nothing."""
    state, data = conn.outcome(timeout)
    assert (state, data) == ("closed", b""), "%s: expected the broker to close the connection without an answer, " \
        "got %s with %d bytes %s" % (what, state, len(data), data[:64].hex())


def frames(data):
    """Splits received bytes into whole response frames [(corr, rest)]; asserts nothing is left."""
    out, pos = [], 0
    while pos < len(data):
        assert pos + 4 <= len(data), "a partial size prefix: %s" % data[pos:].hex()
        size, = struct.unpack_from(">i", data, pos)
        assert 4 <= size <= len(data) - pos - 4, "a partial or bogus response frame of size %d" % size
        out.append((struct.unpack_from(">i", data, pos + 4)[0], data[pos + 8:pos + 4 + size]))
        pos += 4 + size
    return out


# ---------------------------------------------------------------------------------------------
# Requests and answers
# ---------------------------------------------------------------------------------------------

def api_versions_v0(r):
    """(error code, {api key: (min, max)}) of an ApiVersions v0 body; the whole body is read."""
    error = r.i16()
    keys = {}
    for _ in range(r.i32()):
        k, lo, hi = r.i16(), r.i16(), r.i16()
        keys[k] = (lo, hi)
    assert r.done(), "trailing bytes after an ApiVersions v0 body"
    return error, keys


def api_versions_v2(conn):
    """A valid ApiVersions v2 request: (error code, {api key: (min, max)})."""
    r = conn.call(API_VERSIONS, 2, b"")
    error = r.i16()
    keys = {}
    for _ in range(r.i32()):
        k, lo, hi = r.i16(), r.i16(), r.i16()
        keys[k] = (lo, hi)
    r.i32()  # throttle time
    assert r.done()
    return error, keys


def produce_body(topics, acks=-1, timeout_ms=10_000):
    """Produce v3-v8 body. topics: [(name, [(partition, records bytes or None)])]."""
    body = s16(None) + struct.pack(">hii", acks, timeout_ms, len(topics))
    for name, parts in topics:
        body += s16(name) + struct.pack(">i", len(parts))
        for index, records in parts:
            body += struct.pack(">i", index)
            body += struct.pack(">i", -1) if records is None else struct.pack(">i", len(records)) + records
    return body


def parse_produce(r, version):
    """{(topic, partition): (error code, base offset, error message or None)} of a Produce v3-v8
    answer; the whole body is read."""
    out = {}
    for _ in range(r.i32()):
        name = r.string()
        for _ in range(r.i32()):
            index, error, base = r.i32(), r.i16(), r.i64()
            r.i64()  # log append time
            if version >= 5:
                r.i64()  # log start offset
            message = None
            if version >= 8:
                for _ in range(r.i32()):
                    r.i32(), r.nstring()
                message = r.nstring()
            out[name, index] = (error, base, message)
    r.i32()  # throttle time
    assert r.done(), "trailing bytes after a Produce v%d body" % version
    return out


def produce(conn, topics, acks=-1, version=8):
    return parse_produce(conn.call(PRODUCE, version, produce_body(topics, acks)), version)


def fetch(conn, topic, partition, offset, max_bytes=1 << 20, partition_max_bytes=None):
    """Fetch v4 of one partition, no wait: (error code, high watermark, record bytes)."""
    pmax = max_bytes if partition_max_bytes is None else partition_max_bytes
    body = struct.pack(">iiiib", -1, 0, 0, max_bytes, 0) + struct.pack(">i", 1) + s16(topic)
    body += struct.pack(">i", 1) + struct.pack(">iqi", partition, offset, pmax)
    r = conn.call(FETCH, 4, body)
    r.i32()  # throttle time
    assert r.i32() == 1 and r.string() == topic and r.i32() == 1 and r.i32() == partition
    error, hw = r.i16(), r.i64()
    r.i64()  # last stable offset
    for _ in range(max(r.i32(), 0)):
        r.i64(), r.i64()
    records = r.bytes() or b""
    assert r.done()
    return error, hw, records


def readable(broker, topic, partition):
    """(high watermark, [(offset, value)]) of a partition, read raw from offset 0."""
    with Conn(broker) as c:
        error, hw, records = fetch(c, topic, partition, 0)
        assert error == NONE, "Fetch %s-%d: error %d" % (topic, partition, error)
        return hw, v2_values(records)


def create_topics_v4(conn, name, partitions, replication, configs=()):
    """CreateTopics v4 of one topic: (error code, error message)."""
    body = struct.pack(">i", 1) + s16(name) + struct.pack(">ihi", partitions, replication, 0)
    body += struct.pack(">i", len(configs)) + b"".join(s16(k) + s16(v) for k, v in configs)
    body += struct.pack(">ib", 10_000, 0)
    r = conn.call(CREATE_TOPICS, 4, body)
    r.i32()  # throttle time
    assert r.i32() == 1 and r.string() == name
    error, message = r.i16(), r.nstring()
    assert r.done()
    return error, message


def topic_names(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    return set(admin.list_topics(timeout=TIMEOUT).topics)


# ---------------------------------------------------------------------------------------------
# Health: the broker is alive and a real client produces and consumes on other connections
# ---------------------------------------------------------------------------------------------

_health_round = [0]


def assert_healthy(broker):
    """The broker process is alive, its log has no panic, and confluent-kafka produces one
    record (acks=all) and reads it back at its offset, each on a new connection."""
    assert broker.proc.poll() is None, "broker exited with %s: %s" % (broker.proc.returncode, broker.log())
    _health_round[0] += 1
    value = b"health-%d-%d" % (os.getpid(), _health_round[0])
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 0,
                  "enable.idempotence": False, "message.timeout.ms": 10_000})
    reports = []
    p.produce("health", value=value, partition=0, on_delivery=lambda err, msg: reports.append((err, msg)))
    assert p.flush(12) == 0, "health: the record was not delivered"
    (err, msg), = reports
    assert err is None, "health: produce failed: %s" % err
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "health", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition("health", 0, msg.offset())])
        deadline, got = time.time() + 10, None
        while got is None and time.time() < deadline:
            m = c.poll(0.2)
            if m is not None:
                assert m.error() is None, "health: consume failed: %s" % m.error()
                got = m
    finally:
        c.close()
    assert got is not None, "health: the record was not consumed within 10 s"
    assert (got.offset(), got.value()) == (msg.offset(), value)
    assert broker.proc.poll() is None, "broker exited with %s: %s" % (broker.proc.returncode, broker.log())
    with open(os.path.join(broker.data_dir, "broker.log"), "rb") as f:
        log = f.read().decode(errors="replace")
    assert "panicked" not in log, "a panic in the broker log: " + log[log.index("panicked") - 2000:][:4000]


# ---------------------------------------------------------------------------------------------
# Framing
# ---------------------------------------------------------------------------------------------

def test_frame_sizes_out_of_bounds_close_the_connection(broker):
    """A frame size of 0, negative (-1, -2^31), or from 1 to 7 (below the 8 bytes of the fixed
    header fields), sent with that many bytes of body, closes the connection without an answer;
    so does a size just over socket.request.max.bytes (100 MiB, only the 4-byte size sent:
    the broker must not wait for the body)."""
    cases = [(0, b""), (-1, b""), (-(1 << 31), b"")] + [(n, bytes(range(1, n + 1))) for n in range(1, 8)]
    cases.append((DEFAULT_MAX_REQUEST + 1, b""))
    for size, body in cases:
        with Conn(broker) as c:
            c.send(struct.pack(">i", size) + body)
            assert_closed(c, "frame size %d" % size)
    assert_healthy(broker)


def test_frame_size_at_the_limit_is_accepted_then_abandoned(broker):
    """A frame size of exactly socket.request.max.bytes (100 MiB) is within the limit: the broker
    waits for the body (the connection stays open), and a client that sends only part of it and
    goes away leaves the broker serving everyone else."""
    with Conn(broker) as c:
        c.send(struct.pack(">i", DEFAULT_MAX_REQUEST) + struct.pack(">hhi", API_VERSIONS, 0, 1) + b"x" * 1000)
        state, data = c.outcome(0.5)
        assert (state, data) == ("open", b""), "a frame of exactly the limit: %s %s" % (state, data[:32].hex())
    assert_healthy(broker)


def test_smaller_request_limit_with_real_bodies(broker):
    """With socket.request.max.bytes=4096: a real Produce request whose frame is exactly 4096
    bytes is answered and appended; one of 4097 bytes closes the connection without an answer
    and appends nothing; the broker keeps serving."""
    broker.stop()
    broker.start("--set", "socket.request.max.bytes=4096")
    create(broker.bootstrap, "limit")

    def frame_of(size, tag):
        for n in range(size - 200, size):
            c = Conn.__new__(Conn)
            c.corr = 1
            f = c.request(PRODUCE, 8, produce_body([("limit", [(0, v2_batch([tag * n]))])]), corr=1)
            if len(f) - 4 == size:
                return f
        raise AssertionError("no value length gives a %d-byte frame" % size)

    with Conn(broker) as c:
        ok = frame_of(4096, b"a")
        assert c.send(ok)
        corr, rest = c.recv_frame()
        assert corr == 1 and parse_produce(R(rest), 8)["limit", 0][:2] == (NONE, 0), "a frame of exactly the limit"
    with Conn(broker) as c:
        c.send(frame_of(4097, b"b"))
        assert_closed(c, "a 4097-byte Produce frame over socket.request.max.bytes=4096")
    hw, values = readable(broker, "limit", 0)
    assert hw == 1 and [v[:1] for _, v in values] == [b"a"], "nothing of the refused request appended"
    assert_healthy(broker)


def test_truncated_frames(broker):
    """Half a request, then the client goes away (close, or a half-close: the broker must then
    close its side too); a truncated header (size 8: no client id); the broker keeps serving.
    A whole request sent after another connection's half request is answered at once."""
    body = produce_body([("trunc", [(0, v2_batch([b"never"]))])])
    with Conn(broker) as c:
        full = c.request(PRODUCE, 8, body)
    # Closed mid-frame.
    for cut in (4, 5, 12, len(full) // 2, len(full) - 1):
        with Conn(broker) as c:
            c.send(full[:cut])
    # Half-closed mid-frame: the broker sees end of stream and closes.
    with Conn(broker) as c:
        c.send(full[:len(full) // 2])
        c.sock.shutdown(socket.SHUT_WR)
        assert_closed(c, "half a request, then a half-close")
    # An open connection holding half a request does not hold up another connection.
    with Conn(broker) as stuck, Conn(broker) as other:
        stuck.send(full[:len(full) // 2])
        assert api_versions_v2(other)[0] == NONE
    # A header without its client id (frame of 8 bytes: key, version, correlation id only).
    with Conn(broker) as c:
        c.send(struct.pack(">ihhi", 8, METADATA, 1, 7))
        assert_closed(c, "a Metadata header cut before the client id")
    assert "trunc" not in topic_names(broker), "a topic from a request that never arrived whole"
    assert_healthy(broker)


def client_id_overrun(api, version, length):
    """A frame whose header claims a client id of `length` bytes followed by only 6."""
    payload = struct.pack(">hhih", api, version, 9, length) + b"client"
    return struct.pack(">i", len(payload)) + payload


def test_huge_client_id_length(broker):
    """A Metadata header whose client-id length (32767, 1000, or a negative other than -1) runs
    past the end of the frame cannot be parsed: the connection is closed without an answer, as
    Kafka does. A client id of 32767 bytes that is all there, and a null one, are fine."""
    for length in (32767, 1000, -2, -32768):
        with Conn(broker) as c:
            c.send(client_id_overrun(METADATA, 1, length))
            assert_closed(c, "Metadata v1 with client-id length %d in a 16-byte frame" % length)
    with Conn(broker) as c:
        for cid in (b"x" * 32767, None):
            assert c.send(c.request(API_VERSIONS, 2, b"", client_id=cid))
            corr, rest = c.recv_frame()
            assert corr == c.corr and R(rest).i16() == NONE
    assert_healthy(broker)


def test_huge_client_id_length_in_api_versions(broker):
    """The same unparseable header (client-id length 32767 or -2 in a 16-byte frame) on an
    ApiVersions request: Kafka closes the connection (SocketServer: "Error parsing request
    header", before any KIP-511 handling, which covers a bad ApiVersions *body* only), so no
    answer is expected. docs/protocol.md documents no exception for ApiVersions headers."""
    for version in (0, 2, 3):
        for length in (32767, -2):
            with Conn(broker) as c:
                c.send(client_id_overrun(API_VERSIONS, version, length))
                state, data = c.outcome(2.0)
                answer = ""
                if data:
                    (corr, rest), = frames(data)
                    answer = " (an ApiVersions v0 body, error %d, correlation id %d)" % (R(rest).i16(), corr)
                assert (state, data) == ("closed", b""), \
                    "ApiVersions v%d with client-id length %d in a 16-byte frame: %s, %d bytes back%s" % (
                        version, length, state, len(data), answer)
    assert_healthy(broker)


def test_random_garbage(broker):
    """Random bytes (seeded): 60 connections each sending 1 to 3000 random bytes and then
    half-closing are all closed by the broker (a random size is out of bounds, or the body
    never completes); 200 well-framed random bodies (size prefix right, the rest random) are
    either answered under their correlation id or closed, nothing else."""
    rng = random.Random(8)
    for i in range(60):
        with Conn(broker) as c:
            c.send(rng.randbytes(rng.randint(1, 3000)))
            try:
                c.sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass
            state, data = c.outcome()
            assert state == "closed", "random bytes #%d: connection still open after %.0f s" % (i, WAIT)
            for corr, _ in frames(data):
                pass  # an answer to a random-but-valid-looking frame is allowed
    for i in range(200):
        body = rng.randbytes(rng.randint(8, 400))
        with Conn(broker) as c:
            c.send(struct.pack(">i", len(body)) + body)
            c.sock.shutdown(socket.SHUT_WR)
            state, data = c.outcome()
            corr, = struct.unpack_from(">i", body, 4)
            api, version = struct.unpack_from(">hh", body)
            assert state == "closed", "framed random body #%d (api %d v%d): still open" % (i, api, version)
            for got, _ in frames(data):
                assert got == corr, "framed random body #%d: answer under correlation id %d, sent %d" % (i, got, corr)
    assert_healthy(broker)


FLEXIBLE_FROM = {0: 9, 1: 12, 2: 6, 3: 9, 8: 8, 9: 6, 10: 3, 11: 6, 12: 4, 13: 4, 14: 4, 15: 5, 16: 3, 18: 3,
                 19: 5, 20: 4, 21: 2, 22: 2, 32: 4, 33: 2, 35: 2, 37: 2, 42: 2, 44: 1, 60: 0, 61: 0}
# APIs whose valid requests may wait (long poll, a rebalance): an open connection after the
# wait is not a fault there.
MAY_WAIT = {1, 11, 14}


def random_fields(rng):
    """Bytes that look like the start of a request body: small counts, short valid strings,
    booleans, varints, with random bytes mixed in."""
    out = b""
    for _ in range(rng.randint(1, 14)):
        kind = rng.randrange(7)
        if kind == 0:
            out += struct.pack(">i", rng.choice([0, 1, 2, -1, 3, 1 << 30]))
        elif kind == 1:
            out += struct.pack(">h", rng.choice([0, 1, -1, 5, 0x7FFF]))
        elif kind == 2:
            out += s16("fz-" + "".join(rng.choice("abc.-_") for _ in range(rng.randint(0, 6))))
        elif kind == 3:
            out += uvarint(rng.choice([0, 1, 2, 3, 200, 1 << 31]))
        elif kind == 4:
            out += struct.pack(">q", rng.choice([0, -1, -2, 1 << 62]))
        elif kind == 5:
            out += bytes([rng.choice([0, 1, 255])])
        else:
            out += rng.randbytes(rng.randint(1, 16))
    return out


def test_random_bodies_of_every_supported_request(broker):
    """For every supported (API, version), valid headers (v2 for flexible versions) followed by
    seeded random bodies (random bytes, or field-like bytes reaching deeper into the decoder),
    and truncations of them: each is answered under its correlation id or closed; the broker
    never crashes."""
    with Conn(broker) as c:
        error, keys = api_versions_v0(c.call(API_VERSIONS, 0, b""))
    assert error == NONE
    rng = random.Random(88)
    cases = []
    for api, (lo, hi) in sorted(keys.items()):
        for version in range(lo, hi + 1):
            flexible = version >= FLEXIBLE_FROM.get(api, 99)
            for k in range(3):
                body = rng.randbytes(rng.randint(0, 48)) if k == 0 else random_fields(rng)
                if k == 2:
                    body = body[:rng.randint(0, len(body))]
                cases.append((api, version, flexible, body, 50_000 + len(cases)))

    def run(case):
        api, version, flexible, body, corr = case
        with Conn(broker) as c:
            c.send(c.request(api, version, body, corr=corr, flexible=flexible))
            try:
                c.sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass
            state, data = c.outcome(3.0)
        try:
            got = [k for k, _ in frames(data)]
        except AssertionError as e:
            return "api %d v%d body %s: %s" % (api, version, body.hex(), e)
        if any(k != corr for k in got):
            return "api %d v%d body %s: answered under correlation ids %s, sent %d" % (api, version, body.hex(), got, corr)
        if state == "open" and not got and api not in MAY_WAIT:
            return "api %d v%d body %s: neither answered nor closed within 3 s of a half-close" % (api, version, body.hex())
        return None

    with ThreadPoolExecutor(16) as pool:
        problems = [p for p in pool.map(run, cases) if p]
    assert broker.proc.poll() is None, "broker died during the random bodies: " + broker.log()
    assert not problems, "%d of %d random requests mishandled:\n%s" % (len(problems), len(cases), "\n".join(problems[:10]))
    assert_healthy(broker)


# ---------------------------------------------------------------------------------------------
# Unknown APIs and versions
# ---------------------------------------------------------------------------------------------

def test_unknown_api_keys_and_versions(broker):
    """As Kafka answers them (SocketServer.parseRequestHeader, ApiVersionsRequest.getErrorResponse):
    an unknown API key (999, 32767, -1) or an unsupported version of any API but ApiVersions
    (max + 1, 32767, -1) closes the connection without an answer, since no body of that API can
    be written, and the broker keeps serving other connections; an ApiVersions request at a
    version it lacks gets a v0 body with UNSUPPORTED_VERSION (35) listing ApiVersions' own
    versions only (KIP-511: the client asks again at one of them), and the same connection then
    answers a valid ApiVersions request with the whole table. A v3 ApiVersions request naming its
    software with characters Kafka refuses gets INVALID_REQUEST (42) and no table."""
    with Conn(broker) as c:
        error, supported = api_versions_v2(c)
        assert error == NONE and supported[API_VERSIONS] == (0, 4)
    requests = [(key, 0) for key in (999, 32767, -1)]
    for key, (lo, hi) in sorted(supported.items()):
        if key != API_VERSIONS:
            requests += [(key, hi + 1), (key, 32767), (key, -1)]
    for key, version in requests:
        with Conn(broker) as c:
            assert c.send(c.request(key, version, b"\x00" * 16))
            assert_closed(c, "api %d v%d" % (key, version))
    with Conn(broker) as c:
        for version in (5, 32767):
            r = c.call(API_VERSIONS, version, b"\x00" * 16)
            assert api_versions_v0(r) == (UNSUPPORTED_VERSION, {API_VERSIONS: (0, 4)}), "ApiVersions v%d" % version
        assert api_versions_v2(c) == (NONE, supported), "the same connection after the unsupported requests"
        assert api_versions_v0(c.call(API_VERSIONS, 0, b"")) == (NONE, supported)
        compact = lambda b: uvarint(len(b) + 1) + b  # noqa: E731
        body = compact(b"bad name!") + compact(b"1.0") + b"\x00"
        r = c.call(API_VERSIONS, 3, body, flexible=True)
        assert (r.i16(), r.i8()) == (INVALID_REQUEST, 1), "a software name Kafka refuses: error, empty table"
    assert_healthy(broker)


# ---------------------------------------------------------------------------------------------
# Produce
# ---------------------------------------------------------------------------------------------

def bad_batches():
    """(id, the bad records, the error Kafka answers)."""
    good = v2_batch([b"x1", b"x2", b"x3"])
    crc, = struct.unpack_from(">I", good, 17)
    recs3 = b"".join(v2_record(i, v) for i, v in enumerate([b"x1", b"x2", b"x3"]))
    return [
        # LogValidator / DefaultRecordBatch.isValid: CorruptRecordException.
        ("wrong-crc", v2_batch([b"x1", b"x2", b"x3"], crc=crc ^ 1), CORRUPT_MESSAGE),
        ("flipped-record-byte", good[:-3] + bytes([good[-3] ^ 0x40]) + good[-2:], CORRUPT_MESSAGE),
        # batchLength larger than the bytes: no complete batch in the partition's records;
        # ProduceRequest.validateRecords: "must have at least one record batch" (InvalidRecordException).
        ("batch-length-past-end", v2_batch([b"x1", b"x2", b"x3"], length=len(good) - 12 + 10), INVALID_RECORD),
        # batchLength shorter than the batch: the CRC no longer covers what it claims.
        ("batch-length-short", v2_batch([b"x1", b"x2", b"x3"], length=len(good) - 12 - 5), CORRUPT_MESSAGE),
        # batchLength below the smallest record (14): ByteBufferLogInputStream: CorruptRecordException.
        ("batch-length-tiny", struct.pack(">qi", 0, 10) + good[12:], CORRUPT_MESSAGE),
        # Record count off, CRC right: DefaultRecordBatch's iterator, "Incorrect declared batch size"
        # (premature EOF / records still remaining): InvalidRecordException.
        ("count-too-many", v2_batch([b"x1", b"x2", b"x3"], count=4, last_offset_delta=3, records=recs3), INVALID_RECORD),
        ("count-too-few", v2_batch([b"x1", b"x2", b"x3"], count=2, last_offset_delta=1, records=recs3), INVALID_RECORD),
        # count and lastOffsetDelta disagree: LogValidator "Inconsistent batch offset range".
        ("count-vs-last-offset-delta", v2_batch([b"x1", b"x2", b"x3"], last_offset_delta=5), INVALID_RECORD),
        # Produce v3+ carries v2 batches only: ProduceRequest.validateRecords.
        ("magic-1-message-set", magic1_message(b"old"), INVALID_RECORD),
        ("two-magic-1-messages", magic1_message(b"a") + magic1_message(b"b"), INVALID_RECORD),
        # No batch at all (empty records): "must have at least one record batch".
        ("empty-records", b"", INVALID_RECORD),
        # Two batches for one partition in Produce v3+: "only allowed to contain exactly one record batch".
        ("two-batches", v2_batch([b"x1"]) + v2_batch([b"x2"]), INVALID_RECORD),
    ]


@pytest.mark.parametrize("kind,records,expected", bad_batches(), ids=[b[0] for b in bad_batches()])
def test_produce_bad_batch_refused_other_partition_appended(broker, kind, records, expected):
    """One Produce v8 request (acks=all): partition 0 gets a bad batch, partition 1 a good one.
    Partition 0 answers Kafka's error for that kind of bad batch (with base offset -1) and
    nothing of it is readable (its high watermark stays 0); partition 1 is appended at offset 0
    and readable. (The magic-1 case is also sent as Produce v3.)"""
    create(broker.bootstrap, "pb", partitions=2)
    good = v2_batch([b"good-1", b"good-2"])
    versions = (3, 8) if kind.startswith("magic-1") else (8,)
    problems = []
    for n, version in enumerate(versions):
        with Conn(broker) as c:
            got = produce(c, [("pb", [(0, records), (1, good)])], version=version)
        if got["pb", 0][:2] != (expected, -1):
            problems.append("Produce v%d: partition 0 answered %s (code, base offset, message); Kafka answers %d" % (
                version, got["pb", 0], expected))
        if got["pb", 1][:2] != (NONE, 2 * n):
            problems.append("Produce v%d: the good batch in the same request answered %s" % (version, got["pb", 1]))
        p0 = readable(broker, "pb", 0)
        if p0 != (0, []):
            problems.append("Produce v%d: partition 0 readable after the refusal: hw %d, %s" % (version, p0[0], p0[1]))
        want = (2 * (n + 1), [(i, b"good-%d" % (i % 2 + 1)) for i in range(2 * (n + 1))])
        if readable(broker, "pb", 1) != want:
            problems.append("Produce v%d: partition 1 holds %s" % (version, readable(broker, "pb", 1)))
    assert not problems, "%s:\n%s" % (kind, "\n".join(problems))
    assert_healthy(broker)


def test_produce_batch_size_against_max_message_bytes(broker):
    """A topic with max.message.bytes=10000: a batch of exactly 10000 bytes (Kafka compares the
    whole batch, offset and length fields included) is appended; one of 10001 bytes gets
    MESSAGE_TOO_LARGE (10) and nothing of it is readable, while a small batch to the other
    partition in the same request is appended."""
    create(broker.bootstrap, "mmb", partitions=2, config={"max.message.bytes": "10000"})

    def batch_of(size, tag):
        for n in range(size - 120, size):
            b = v2_batch([tag * n])
            if len(b) == size:
                return b
        raise AssertionError("no value length gives a %d-byte batch" % size)

    with Conn(broker) as c:
        got = produce(c, [("mmb", [(0, batch_of(10001, b"L")), (1, v2_batch([b"small"]))])])
        assert got["mmb", 0][:2] == (MESSAGE_TOO_LARGE, -1), "10001-byte batch: %s" % (got["mmb", 0],)
        assert got["mmb", 1][:2] == (NONE, 0)
        assert readable(broker, "mmb", 0) == (0, [])
        got = produce(c, [("mmb", [(0, batch_of(10000, b"E"))])])
        assert got["mmb", 0][:2] == (NONE, 0), "a batch of exactly max.message.bytes: %s" % (got["mmb", 0],)
    hw, values = readable(broker, "mmb", 0)
    assert hw == 1 and len(values) == 1 and set(values[0][1]) == {ord("E")}
    assert readable(broker, "mmb", 1) == (1, [(0, b"small")])
    assert_healthy(broker)


INVALID_NAMES = ["bad/name", "", "x" * 300, "x" * 250, ".", "..", "../escape", "a b", "t\u00e9st", "semi;colon"]
LONGEST_NAME = 249  # Kafka's limit (Topic.MAX_NAME_LENGTH)


def test_produce_to_invalid_topic_names(broker):
    """Produce v8 to topic names Kafka does not allow (a slash, empty, 300 and 250 characters,
    '.', '..', '../escape', a space, non-ASCII, ';'): Kafka's Produce answers
    UNKNOWN_TOPIC_OR_PARTITION (3) for a topic it does not have (it checks the metadata cache
    before anything else), and so must tidemark, which auto-creates valid names only. No such
    topic appears and nothing is created outside the data directory; a good topic in the same
    request is appended."""
    longest = "good.name_1-x"
    topics = [(name, [(0, v2_batch([b"bad-" + name.encode()[:20]]))]) for name in INVALID_NAMES]
    topics.append((longest, [(0, v2_batch([b"ok"]))]))
    parent = os.path.dirname(broker.data_dir)
    before = sorted(os.listdir(parent))
    with Conn(broker) as c:
        got = produce(c, topics)
    wrong = {name: got[name, 0] for name in INVALID_NAMES if got[name, 0][:2] != (UNKNOWN_TOPIC_OR_PARTITION, -1)}
    assert not wrong, "invalid names not answered UNKNOWN_TOPIC_OR_PARTITION: %s" % wrong
    assert got[longest, 0][:2] == (NONE, 0), got[longest, 0]
    assert readable(broker, longest, 0) == (1, [(0, b"ok")])
    names = topic_names(broker)
    assert not names & set(INVALID_NAMES), names & set(INVALID_NAMES)
    assert sorted(os.listdir(parent)) == before, "files created beside the data directory"
    assert not any(n.startswith(("bad", "x" * 250, "a b", "semi")) for n in os.listdir(broker.data_dir))
    assert_healthy(broker)


def test_longest_valid_topic_name(broker):
    """Kafka allows topic names of up to 249 characters: CreateTopics v4 of 249 characters
    succeeds, and Produce to another one of 249 (auto-created) is appended and readable. Every
    length from 240 to 249 is checked, so a failure names the real limit."""
    with Conn(broker) as c:
        refused = {}
        for n in range(240, LONGEST_NAME + 1):
            error, message = create_topics_v4(c, "c" * n, 1, 1)
            if error != NONE:
                refused[n] = (error, (message or "")[-120:])
        assert not refused, "CreateTopics refused valid names by length: %s" % refused
        got = produce(c, [("p" * LONGEST_NAME, [(0, v2_batch([b"long"]))])])
        assert got["p" * LONGEST_NAME, 0][:2] == (NONE, 0), "Produce to a %d-character topic: %s" % (
            LONGEST_NAME, got["p" * LONGEST_NAME, 0])
    assert readable(broker, "p" * LONGEST_NAME, 0) == (1, [(0, b"long")])
    assert_healthy(broker)


def test_produce_to_bad_partitions(broker):
    """Produce v8 to a negative partition (-1, -2^31) and to one past the topic's count (2 of a
    2-partition topic, 2^31-1): UNKNOWN_TOPIC_OR_PARTITION (3) for each, nothing appended; the
    good partition in the same request is appended."""
    create(broker.bootstrap, "parts", partitions=2)
    bad = [-1, -(1 << 31), 2, (1 << 31) - 1]
    with Conn(broker) as c:
        got = produce(c, [("parts", [(p, v2_batch([b"bad%d" % p])) for p in bad] + [(1, v2_batch([b"good"]))])])
    for p in bad:
        assert got["parts", p][:2] == (UNKNOWN_TOPIC_OR_PARTITION, -1), "partition %d: %s" % (p, got["parts", p])
    assert got["parts", 1][:2] == (NONE, 0)
    assert readable(broker, "parts", 0) == (0, [])
    assert readable(broker, "parts", 1) == (1, [(0, b"good")])
    assert_healthy(broker)


def test_produce_invalid_acks(broker):
    """Produce v8 with acks=5 (and -2, 2, 32767): every partition answers INVALID_REQUIRED_ACKS
    (21) and nothing is appended anywhere; the connection then takes a valid request (acks=all)."""
    create(broker.bootstrap, "acks", partitions=2)
    with Conn(broker) as c:
        for acks in (5, -2, 2, 32767):
            got = produce(c, [("acks", [(0, v2_batch([b"a"])), (1, v2_batch([b"b"]))])], acks=acks)
            assert {k: v[:2] for k, v in got.items()} == {("acks", 0): (INVALID_REQUIRED_ACKS, -1),
                                                          ("acks", 1): (INVALID_REQUIRED_ACKS, -1)}, (acks, got)
        assert readable(broker, "acks", 0) == (0, []) and readable(broker, "acks", 1) == (0, [])
        # acks=5 must not auto-create a topic either.
        got = produce(c, [("acks-new", [(0, v2_batch([b"a"]))])], acks=5)
        assert got["acks-new", 0][:2] == (INVALID_REQUIRED_ACKS, -1)
        assert "acks-new" not in topic_names(broker)
        got = produce(c, [("acks", [(0, v2_batch([b"fine"]))])], acks=-1)
        assert got["acks", 0][:2] == (NONE, 0)
    assert readable(broker, "acks", 0) == (1, [(0, b"fine")])
    assert_healthy(broker)


# ---------------------------------------------------------------------------------------------
# CreateTopics
# ---------------------------------------------------------------------------------------------

def test_create_topics_bad_configs(broker):
    """CreateTopics (confluent-kafka's admin client) with bad configs: an unknown key, values
    that do not parse or are out of range, an unknown cleanup policy, an unknown timestamp type:
    INVALID_CONFIG (40) each, and the topic is not created."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    bad = [{"no.such.setting": "1"}, {"retention.ms": "abc"}, {"segment.bytes": "0"}, {"segment.bytes": "-1"},
           {"max.message.bytes": "-5"}, {"cleanup.policy": "bogus"}, {"message.timestamp.type": "Sometimes"},
           {"retention.ms": "99999999999999999999999"}]
    wrong = {}
    for i, config in enumerate(bad):
        name = "badcfg-%d" % i
        fut = admin.create_topics([NewTopic(name, 1, 1, config=config)], request_timeout=TIMEOUT)[name]
        try:
            fut.result(TIMEOUT)
            wrong[str(config)] = "accepted"
        except KafkaException as e:
            if e.args[0].code() != KafkaError.INVALID_CONFIG:
                wrong[str(config)] = e.args[0]
    assert not wrong, "bad configs not refused with INVALID_CONFIG: %s" % wrong
    assert not {n for n in topic_names(broker) if n.startswith("badcfg")}
    assert_healthy(broker)


def test_create_topics_bad_partitions_and_replication(broker):
    """CreateTopics v4 (raw) with 0 or negative partitions other than -1 (the default):
    INVALID_PARTITIONS (37); with replication factor 0, -2 or 3 on this one broker:
    INVALID_REPLICATION_FACTOR (38), also through confluent-kafka's admin client (3). None of
    those topics is created; -1 partitions and replication -1 use the defaults."""
    with Conn(broker) as c:
        for partitions in (0, -2, -100, -(1 << 31)):
            error, message = create_topics_v4(c, "bp%d" % (partitions & 0xFF), partitions, 1)
            assert error == INVALID_PARTITIONS, "%d partitions: %d %s" % (partitions, error, message)
        for rf in (0, -2, 3, 32767):
            error, message = create_topics_v4(c, "brf%d" % (rf & 0xFF), 1, rf)
            assert error == INVALID_REPLICATION_FACTOR, "replication factor %d: %d %s" % (rf, error, message)
        assert create_topics_v4(c, "defaults", -1, -1)[0] == NONE
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    fut = admin.create_topics([NewTopic("rf3", 1, 3)], request_timeout=TIMEOUT)["rf3"]
    with pytest.raises(KafkaException) as e:
        fut.result(TIMEOUT)
    assert e.value.args[0].code() == KafkaError.INVALID_REPLICATION_FACTOR, e.value
    names = topic_names(broker)
    assert "defaults" in names and not {n for n in names if n.startswith(("bp", "brf", "rf3"))}, names
    assert_healthy(broker)


# ---------------------------------------------------------------------------------------------
# Fetch
# ---------------------------------------------------------------------------------------------

def test_fetch_bad_requests(broker):
    """Fetch v4 for an unknown topic (also an invalid name) or partition: UNKNOWN_TOPIC_OR_PARTITION
    (3), and the topic is not auto-created; a negative offset or one past the end:
    OFFSET_OUT_OF_RANGE (1); the end offset itself: no error, no records; max_bytes of 2^31-1
    returns everything; max_bytes 0 returns the first batch whole (KIP-74); negative max_bytes
    are answered on a connection that stays usable."""
    create(broker.bootstrap, "fe")
    with Conn(broker) as c:
        for i in range(3):
            assert produce(c, [("fe", [(0, v2_batch([b"f%d" % i]))])])["fe", 0][:2] == (NONE, i)
        assert fetch(c, "no-such-topic", 0, 0)[0] == UNKNOWN_TOPIC_OR_PARTITION
        assert fetch(c, "bad/name", 0, 0)[0] == UNKNOWN_TOPIC_OR_PARTITION
        for p in (1, -1, (1 << 31) - 1):
            assert fetch(c, "fe", p, 0)[0] == UNKNOWN_TOPIC_OR_PARTITION, "partition %d" % p
        for offset in (-1, -2, -(1 << 63), 4, 1000, (1 << 63) - 1):
            error, hw, records = fetch(c, "fe", 0, offset)
            assert (error, records) == (OFFSET_OUT_OF_RANGE, b""), "offset %d: error %d" % (offset, error)
        assert fetch(c, "fe", 0, 3) == (NONE, 3, b""), "the end offset"
        error, hw, records = fetch(c, "fe", 0, 0, max_bytes=(1 << 31) - 1)
        assert (error, hw, v2_values(records)) == (NONE, 3, [(0, b"f0"), (1, b"f1"), (2, b"f2")])
        error, hw, records = fetch(c, "fe", 0, 0, max_bytes=0)
        assert (error, v2_values(records)) == (NONE, [(0, b"f0")]), "max_bytes 0: the first batch whole"
        for mb, pmb in ((-1, -1), (-(1 << 31), 1 << 20), (1 << 20, -(1 << 31))):
            fetch(c, "fe", 0, 0, max_bytes=mb, partition_max_bytes=pmb)  # answered, parses
        assert api_versions_v2(c)[0] == NONE, "the connection after the bad fetches"
    assert "no-such-topic" not in topic_names(broker), "Fetch auto-created a topic"
    assert_healthy(broker)


# ---------------------------------------------------------------------------------------------
# Connection storms and slow clients
# ---------------------------------------------------------------------------------------------

def open_fds(broker):
    return len(os.listdir("/proc/%d/fd" % broker.proc.pid))


def test_many_connections_opened_and_dropped(broker):
    """500 connections, 50 at a time, opened and dropped at once: some closed silently, some
    after a partial header, some reset (SO_LINGER 0), some right after a whole request. Other
    clients are unaffected and the broker's open file descriptors return to where they were."""
    assert_healthy(broker)
    time.sleep(0.3)
    baseline = open_fds(broker)
    full = Conn.request(Conn.__new__(Conn), API_VERSIONS, 2, b"", corr=1)
    for wave in range(10):
        socks = [socket.create_connection(("127.0.0.1", broker.port), timeout=WAIT) for _ in range(50)]
        for i, s in enumerate(socks):
            try:
                if i % 4 == 1:
                    s.sendall(full[:7])
                elif i % 4 == 2:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                elif i % 4 == 3:
                    s.sendall(full)
            except OSError:
                pass
            s.close()
        assert broker.proc.poll() is None, "broker died in wave %d: %s" % (wave, broker.log())
    with Conn(broker) as c:
        assert api_versions_v2(c)[0] == NONE
    deadline = time.time() + 5
    while open_fds(broker) > baseline + 3 and time.time() < deadline:
        time.sleep(0.1)
    assert open_fds(broker) <= baseline + 3, "open fds %d, %d before the 500 connections" % (open_fds(broker), baseline)
    assert_healthy(broker)


def test_slow_loris(broker):
    """Five connections send a valid ApiVersions request one byte per 100 ms (about 2.5 s) and a
    sixth trickles the body of a 1 MiB frame; meanwhile a real client produces and consumes
    and a raw ApiVersions request on another connection is answered promptly. Each slow request
    is answered once its last byte arrives."""
    slow = []
    stop = threading.Event()
    errors = []

    def trickle(conn, data):
        try:
            for b in data:
                if stop.is_set():
                    return
                conn.sock.sendall(bytes([b]))
                time.sleep(0.1)
        except OSError as e:
            errors.append(e)

    threads = []
    for i in range(5):
        c = Conn(broker, timeout=10)
        req = c.request(API_VERSIONS, 2, b"", corr=700 + i)
        slow.append(c)
        threads.append(threading.Thread(target=trickle, args=(c, req)))
    junk = Conn(broker, timeout=10)
    threads.append(threading.Thread(target=trickle, args=(junk, struct.pack(">i", 1 << 20) + b"z" * 22)))
    try:
        for t in threads:
            t.start()
        time.sleep(0.3)
        started = time.time()
        assert_healthy(broker)
        with Conn(broker) as c:
            t0 = time.time()
            assert api_versions_v2(c)[0] == NONE
            assert time.time() - t0 < 1.0, "ApiVersions took %.2f s beside the slow connections" % (time.time() - t0)
        assert time.time() - started < 8, "health check took %.1f s beside slow connections" % (time.time() - started)
        for t in threads:
            t.join(10)
        assert not errors, errors
        for i, c in enumerate(slow):
            corr, rest = c.recv_frame()
            assert corr == 700 + i and R(rest).i16() == NONE
        state, data = junk.outcome(0.2)
        assert (state, data) == ("open", b""), "the half-sent 1 MiB frame is still awaited"
    finally:
        stop.set()
        for c in slow + [junk]:
            c.close()
    assert_healthy(broker)
