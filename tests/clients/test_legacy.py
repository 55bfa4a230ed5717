"""Legacy message formats against the real tidemark binary: kafka-python pinned to
api_version=(0, 9) (Metadata v0, Produce v1 with magic-0 message sets, Fetch v1, no ApiVersions) and
to (0, 10, 1) (Metadata v2, Produce v2 with magic-1 message sets, Fetch v3, ListOffsets v1), next to
confluent-kafka (librdkafka: v2 batches, Fetch v4+, which gets the stored bytes as they are).

Besides the clients, a small raw-protocol client (Fetch v0-v4, Produce v2) and an independent parser
of legacy message sets (CRC-32 checked with zlib) look at the bytes themselves: which magic a fetch
version gets (down-conversion), what the broker stored (T1.1, T3.2, T3.3), the offsets inside
wrappers (absolute for magic 0, relative for magic 1 with the wrapper at the last one).

kafka-python needs python-snappy, lz4, xxhash (its magic-0 LZ4 framing) and zstandard (the raw
parser's zstd) for these codecs; the `codec_libs` fixture fails with an install hint when they are
missing.
spec: T1.1, T1.3, T3.1, T3.2, T3.3, T3.4, T4.1, T4.2, T6.2, T8.2, T8.3"""
import gzip
import os
import shutil
import signal
import socket
import struct
import time
import zlib
from collections import namedtuple

import pytest
from confluent_kafka import (TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME, TIMESTAMP_NOT_AVAILABLE,
                             Consumer, Producer, TopicPartition)

from test_clients import TIMEOUT, consume, create, offsets_for_times

KP09, KP0101 = (0, 9), (0, 10, 1)
LEGACY_CODECS = [None, "gzip", "snappy", "lz4"]
V2_CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
CODEC_IDS = {None: 0, "none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
LAT_CONFIG = {"message.timestamp.type": "LogAppendTime"}
SLACK_MS = 5  # client and broker read the same clock; allow rounding

FIXTURE_SEGMENT = os.path.join(os.path.dirname(__file__), "..", "fixtures", "magic0", "00000000000000000000.log")


@pytest.fixture(autouse=True)
def codec_libs():
    import kafka.codec as codec
    missing = [name for name, ok in (("python-snappy", codec.has_snappy()), ("lz4", codec.has_lz4()),
                                     ("xxhash", codec.xxhash is not None), ("zstandard", codec.has_zstd()))
               if not ok]
    if missing:
        pytest.fail("kafka-python codec libraries missing from the venv: pip install " + " ".join(missing))


# ---------------------------------------------------------------------------------------------
# kafka-python clients pinned to old protocol versions
# ---------------------------------------------------------------------------------------------

def kp_produce(bootstrap, topic, items, api_version, compression=None, partition=0, expect_error=None):
    """Sends items ((key, value, timestamp_ms or None)) as ONE message set (one wrapper message
    when compressed): a long linger, then flush. Returns the RecordMetadata list, or, with
    expect_error (an exception class), asserts that every record failed with it."""
    from kafka import KafkaProducer
    p = KafkaProducer(bootstrap_servers=bootstrap, api_version=api_version, compression_type=compression,
                      acks="all", retries=0, enable_idempotence=False, linger_ms=60_000,
                      batch_size=1 << 20, max_request_size=1 << 21, request_timeout_ms=TIMEOUT * 1000,
                      max_block_ms=TIMEOUT * 1000)
    try:
        futures = [p.send(topic, key=k, value=v, partition=partition, timestamp_ms=ts) for k, v, ts in items]
        p.flush(timeout=TIMEOUT)
        out = []
        for f in futures:
            if expect_error is None:
                out.append(f.get(timeout=TIMEOUT))
            else:
                with pytest.raises(expect_error):
                    f.get(timeout=TIMEOUT)
        return out
    finally:
        p.close(timeout=5)


def kp_consumer(bootstrap, api_version):
    """A kafka-python consumer without a group (manual assign): no group-coordination API is used."""
    from kafka import KafkaConsumer
    return KafkaConsumer(bootstrap_servers=bootstrap, api_version=api_version, group_id=None,
                         enable_auto_commit=False, fetch_max_wait_ms=100, request_timeout_ms=TIMEOUT * 1000)


def kp_consume(bootstrap, topic, n, api_version, partition=0, offset=0):
    """Reads n records from offset with kafka-python pinned to api_version (Fetch v1 for (0, 9),
    v3 for (0, 10, 1)); a bounded number of polls."""
    from kafka.structs import TopicPartition as KTP
    c = kp_consumer(bootstrap, api_version)
    tp = KTP(topic, partition)
    c.assign([tp])
    c.seek(tp, offset)
    out, deadline = [], time.time() + TIMEOUT
    try:
        while len(out) < n and time.time() < deadline:
            for records in c.poll(timeout_ms=500).values():
                out.extend(records)
    finally:
        c.close()
    assert len(out) >= n, "kafka-python %s read %d of %d records" % (api_version, len(out), n)
    return out[:n]


def kp_offsets_for_times(bootstrap, topic, probes, partition=0):
    """kafka-python (0, 10, 1) offsets_for_times (ListOffsets v1): [(offset, timestamp) or None]."""
    from kafka.structs import TopicPartition as KTP
    c = kp_consumer(bootstrap, KP0101)
    tp = KTP(topic, partition)
    out = []
    try:
        for t in probes:
            r = c.offsets_for_times({tp: t}, timeout_ms=TIMEOUT * 1000)[tp]
            out.append(None if r is None else (r.offset, r.timestamp))
    finally:
        c.close()
    return out


def produce_v2(bootstrap, topic, items, compression="none", headers=None, partition=0):
    """confluent-kafka (v2 batches): items (key, value, timestamp_ms) with optional headers, all in
    one batch (long linger, then flush). Returns the delivered offsets."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 60_000,
                  "compression.type": compression, "batch.num.messages": 100_000})
    reports = []
    for key, value, ts in items:
        p.produce(topic, value=value, key=key, partition=partition, timestamp=ts, headers=headers,
                  on_delivery=lambda err, msg: reports.append((err, msg)))
    assert p.flush(TIMEOUT) == 0
    assert all(err is None for err, _ in reports), [err for err, _ in reports]
    return sorted(m.offset() for _, m in reports)


def end_offset(bootstrap, topic, partition=0):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, partition), TIMEOUT)[1]
    finally:
        c.close()


def now_ms():
    return int(time.time() * 1000)


# ---------------------------------------------------------------------------------------------
# Raw protocol: Fetch v0-v4 and Produce v2, and an independent legacy message-set parser
# ---------------------------------------------------------------------------------------------

class Raw:
    def __init__(self, bootstrap):
        host, port = bootstrap.split(":")
        self.sock = socket.create_connection((host, int(port)), timeout=TIMEOUT)
        self.corr = 0

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _recv(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            assert chunk, "broker closed the connection"
            buf += chunk
        return buf

    def call(self, api, version, body):
        self.corr += 1
        client = b"legacy-raw"
        msg = struct.pack(">hhih", api, version, self.corr, len(client)) + client + body
        self.sock.sendall(struct.pack(">i", len(msg)) + msg)
        frame = self._recv(struct.unpack(">i", self._recv(4))[0])
        assert struct.unpack_from(">i", frame)[0] == self.corr, "correlation id"
        return Reader(frame[4:])

    def fetch(self, version, topic, partition, offset, max_bytes=1 << 20):
        """One partition. Returns (error_code, high_watermark, record bytes)."""
        assert 0 <= version <= 4
        body = struct.pack(">iii", -1, 0, 0)  # replica id, max wait 0 ms, min bytes 0
        if version >= 3:
            body += struct.pack(">i", max_bytes)
        if version >= 4:
            body += struct.pack(">b", 0)  # read uncommitted
        body += struct.pack(">i", 1) + string(topic) + struct.pack(">i", 1) + struct.pack(">iqi", partition, offset, max_bytes)
        r = self.call(1, version, body)
        try:
            if version >= 1:
                r.i32()  # throttle time
            assert r.i32() == 1 and r.string() == topic and r.i32() == 1
            assert r.i32() == partition
            error, hw = r.i16(), r.i64()
            if version >= 4:
                r.i64()  # last stable offset
                n = r.i32()
                for _ in range(max(n, 0)):
                    r.i64(), r.i64()
            records = r.bytes() or b""
        except (AssertionError, struct.error, UnicodeDecodeError):
            raise AssertionError("Fetch v%d answer does not parse (does the broker serve this version?): %s"
                                 % (version, r.buf[:40].hex()))
        return error, hw, records

    def produce_v2(self, topic, partition, message_set, acks=-1):
        """Produce v2 with a raw message set. Returns (error_code, base_offset, log_append_time)."""
        body = struct.pack(">hi", acks, TIMEOUT * 1000) + struct.pack(">i", 1) + string(topic)
        body += struct.pack(">ii", 1, partition) + struct.pack(">i", len(message_set)) + message_set
        r = self.call(0, 2, body)
        try:
            assert r.i32() == 1 and r.string() == topic and r.i32() == 1 and r.i32() == partition
            return r.i16(), r.i64(), r.i64()
        except (AssertionError, struct.error, UnicodeDecodeError):
            raise AssertionError("Produce v2 answer does not parse (does the broker serve this version?): %s"
                                 % r.buf[:40].hex())


def string(s):
    b = s.encode()
    return struct.pack(">h", len(b)) + b


class Reader:
    def __init__(self, buf):
        self.buf, self.pos = buf, 0

    def _take(self, fmt):
        v = struct.unpack_from(fmt, self.buf, self.pos)[0]
        self.pos += struct.calcsize(fmt)
        return v

    def i16(self):
        return self._take(">h")

    def i32(self):
        return self._take(">i")

    def i64(self):
        return self._take(">q")

    def string(self):
        n = self.i16()
        s = self.buf[self.pos:self.pos + n].decode()
        self.pos += n
        return s

    def bytes(self):
        n = self.i32()
        if n < 0:
            return None
        b = self.buf[self.pos:self.pos + n]
        self.pos += n
        return b


# One log entry of a fetched record set: a legacy message (magic 0/1) or a v2 batch (magic 2).
# For legacy messages: ts is None for magic 0; inner is the list of inner Msgs of a wrapper.
Msg = namedtuple("Msg", "offset magic attrs ts key value crc_ok inner raw")


def split_entries(buf):
    """(offset, magic, bytes) of each complete entry; a partial trailing entry is dropped (a fetch
    may end mid-entry)."""
    out, pos = [], 0
    while pos + 17 <= len(buf):
        offset, size = struct.unpack_from(">qi", buf, pos)
        end = pos + 12 + size
        if end > len(buf):
            break
        out.append((offset, buf[pos + 16], bytes(buf[pos:end])))
        pos = end
    return out


def decompress(codec, magic, data):
    import kafka.codec as c
    if codec == 1:
        return gzip.decompress(data)
    if codec == 2:
        return c.snappy_decode(data)
    if codec == 3:
        return c.lz4_decode_old_kafka(data) if magic == 0 else c.lz4_decode(data)
    if codec == 4:
        return c.zstd_decode(data)
    raise AssertionError("codec %d is not valid in a magic-%d message" % (codec, magic))


def parse_msg(raw):
    offset, size, crc, magic, attrs = struct.unpack_from(">qiIbb", raw)
    assert magic in (0, 1), "not a legacy message: magic %d" % magic
    assert size == len(raw) - 12
    pos, ts = 18, None
    if magic == 1:
        ts = struct.unpack_from(">q", raw, pos)[0]
        pos += 8
    fields = []
    for _ in range(2):
        n = struct.unpack_from(">i", raw, pos)[0]
        pos += 4
        fields.append(None if n < 0 else bytes(raw[pos:pos + n]))
        pos += max(n, 0)
    assert pos == len(raw), "message has trailing bytes"
    inner = None
    if attrs & 7:
        data = decompress(attrs & 7, magic, fields[1])
        inner = [parse_msg(e) for _, _, e in split_entries(data)]
        assert sum(len(m.raw) for m in inner) == len(data), "wrapper holds a partial message"
        assert all(m.magic == magic and not m.attrs & 7 for m in inner), "inner magic/codec"
    return Msg(offset, magic, attrs, ts, fields[0], fields[1], zlib.crc32(raw[16:]) == crc, inner, raw)


def v2_last_offset(raw):
    base, = struct.unpack_from(">q", raw, 0)
    return base + struct.unpack_from(">i", raw, 23)[0]


def raw_entries(bootstrap, version, topic, partition=0):
    """Every entry of the partition as one fetch version returns it, fetching until the high
    watermark: [(magic, Msg or v2 batch bytes)]. A bounded number of fetches."""
    out, offset = [], 0
    with Raw(bootstrap) as raw:
        for _ in range(200):
            error, hw, records = raw.fetch(version, topic, partition, offset)
            assert error == 0, "Fetch v%d error %d" % (version, error)
            if offset >= hw:
                return out
            entries = split_entries(records)
            assert entries, "Fetch v%d at %d below hw %d returned no whole entry" % (version, offset, hw)
            for entry_offset, magic, b in entries:
                if magic == 2:
                    last = v2_last_offset(b)
                    if last >= offset:
                        out.append((2, b))
                else:
                    msg = parse_msg(b)
                    last = msg.offset
                    if last >= offset:
                        out.append((magic, msg))
                offset = max(offset, last + 1)
    raise AssertionError("fetch loop did not reach the high watermark")


def flatten(entries):
    """The records a correct legacy client sees in legacy entries: (offset, key, value, ts, lat)
    with absolute offsets (magic 1 inner offsets are relative to the wrapper's, which is the last)."""
    out = []
    for magic, m in entries:
        assert magic in (0, 1), "a v2 batch where a legacy message was expected"
        assert m.crc_ok, "CRC of the message at %d" % m.offset
        lat = bool(m.attrs & 0x08)
        if m.inner is None:
            out.append((m.offset, m.key, m.value, m.ts, lat))
            continue
        base = m.offset - m.inner[-1].offset if magic == 1 else 0
        for i in m.inner:
            assert i.crc_ok, "CRC of an inner message of the wrapper at %d" % m.offset
            out.append((base + i.offset, i.key, i.value, m.ts if lat else i.ts, lat))
    return out


def lz4_header_checksums(frame):
    """(stored HC byte, Kafka's pre-KAFKA-3160 HC computed over magic+descriptor, the correct HC)."""
    import xxhash
    flg = frame[4]
    end = 6 + (8 if flg & 0x08 else 0)
    return (frame[end], (xxhash.xxh32(frame[0:end]).intdigest() >> 8) & 0xFF,
            (xxhash.xxh32(frame[4:end]).intdigest() >> 8) & 0xFF)


# ---------------------------------------------------------------------------------------------
# Data sets
# ---------------------------------------------------------------------------------------------

# One expected record: where it came from (magic 0/1/2, codec), its producer timestamp (None for
# magic 0) and, for LogAppendTime topics, the wall-clock window around its produce.
Rec = namedtuple("Rec", "offset key value magic codec ts lo hi")


def write_legacy_matrix(bootstrap, topic, per_batch=4, versions=(KP09, KP0101), codecs=LEGACY_CODECS, tag="",
                        first=0):
    """One kafka-python message set per (api_version, codec), per_batch records each, appended in
    turn to partition 0 (whose end offset is `first`). Returns the expected records in offset
    order. Magic-1 timestamps are out of order within a set."""
    expected, base_ts = [], now_ms() - 10_000
    for av in versions:
        for codec in codecs:
            n0 = first + len(expected)
            magic = 0 if av == KP09 else 1
            items = [(b"%sm%d-%s-%d" % (tag.encode(), magic, (codec or "none").encode(), i),
                      b"%svalue-%d" % (tag.encode(), n0 + i),
                      base_ts + (n0 + i) * 7919 % 1000 if magic else None)
                     for i in range(per_batch)]
            lo = now_ms()
            metas = kp_produce(bootstrap, topic, items, av, compression=codec)
            hi = now_ms()
            assert [m.offset for m in metas] == list(range(n0, n0 + per_batch)), (av, codec)
            expected += [Rec(n0 + i, k, v, magic, codec, ts, lo, hi) for i, (k, v, ts) in enumerate(items)]
    return expected


def check_confluent_view(msgs, expected, lat):
    """T4.1 through Fetch v4+ (stored bytes): magic 0 has no timestamp on a CreateTime topic;
    magic 1/v2 CreateTime keeps the producer's; a LogAppendTime topic gives the broker's time of
    the append to every record, magic 0 included (T3.2: stored as magic 1)."""
    assert [m.offset() for m in msgs] == [e.offset for e in expected] == list(range(len(expected)))
    assert [m.key() for m in msgs] == [e.key for e in expected]
    assert [m.value() for m in msgs] == [e.value for e in expected]
    for m, e in zip(msgs, expected):
        kind, ts = m.timestamp()
        if e.magic == 0 and not lat:
            assert kind == TIMESTAMP_NOT_AVAILABLE, (e, kind, ts)
        elif lat:
            assert kind == TIMESTAMP_LOG_APPEND_TIME and e.lo - SLACK_MS <= ts <= e.hi + SLACK_MS, (e, kind, ts)
        else:
            assert (kind, ts) == (TIMESTAMP_CREATE_TIME, e.ts), e


def check_kp_view(recs, expected, lat, api_version, lat_times=None):
    """What kafka-python pinned to api_version sees (Fetch v1: magic 0, no timestamps; Fetch v3:
    magic 0 stays without timestamp on a CreateTime topic, magic 1 and v2 data carry CreateTime,
    everything on a LogAppendTime topic LogAppendTime).
    lat_times: offset -> the LogAppendTime confluent-kafka saw, which must be the same."""
    assert [r.offset for r in recs] == [e.offset for e in expected]
    assert [r.key for r in recs] == [e.key for e in expected]
    assert [r.value for r in recs] == [e.value for e in expected]
    for r, e in zip(recs, expected):
        assert r.headers == [], "no headers in legacy messages"
        if api_version == KP09 or (e.magic == 0 and not lat):
            assert (r.timestamp, r.timestamp_type) == (None, None), (e, r)
        elif lat:
            assert r.timestamp_type == 1 and e.lo - SLACK_MS <= r.timestamp <= e.hi + SLACK_MS, (e, r)
            if lat_times is not None:
                assert r.timestamp == lat_times[e.offset], (e, r)
        else:
            assert (r.timestamp, r.timestamp_type) == (e.ts, 0), (e, r)


def check_down_converted(bootstrap, topic, expected, lat):
    """Fetch v0/v1 return only magic-0 messages, v2/v3 only magic <= 1 (stored magic 0 stays 0),
    every CRC right, the same records at the same offsets (T1.1); timestamps as T4.1/T4.2 say
    (on a LogAppendTime topic magic 0 was stored as magic 1 with the broker's time, T3.2)."""
    for version in (0, 1, 2, 3):
        entries = raw_entries(bootstrap, version, topic)
        limit = 0 if version <= 1 else 1
        assert all(magic <= limit for magic, _ in entries), "Fetch v%d got magic %s" % (
            version, sorted({magic for magic, _ in entries}))
        got = flatten(entries)
        assert [(o, k, v) for o, k, v, _, _ in got] == [(e.offset, e.key, e.value) for e in expected], version
        for (o, k, v, ts, is_lat), e in zip(got, expected):
            if version <= 1 or (e.magic == 0 and not lat):
                assert ts is None, (version, e)
            elif lat:
                assert is_lat and e.lo - SLACK_MS <= ts <= e.hi + SLACK_MS, (version, e, ts)
            else:
                assert not is_lat and ts == e.ts, (version, e, ts)


# ---------------------------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------------------------

def test_legacy_produce_read_by_confluent(broker):
    """kafka-python (0, 9) (Produce v1, magic 0) and (0, 10, 1) (Produce v2, magic 1), each codec
    none/gzip/snappy/lz4 (magic-0 LZ4 with Kafka's old header checksum), into a CreateTime and a
    LogAppendTime topic; confluent-kafka (Fetch v4+, stored bytes) reads them back: keys, values,
    offsets 0..n-1 contiguous, timestamp and type: magic 0 -> not available (also in the
    LogAppendTime topic: a magic-0 message has no timestamp field), magic 1 CreateTime -> the
    producer's, LogAppendTime -> the broker's time of the append (uncompressed v1 message
    rewritten, v1 wrapper stamped; inner -1 then means the wrapper's). Produce v2 answers the
    log-append time for the LogAppendTime topic (T3.4).
    spec: T1.1, T1.3, T3.2, T3.4, T4.1, T4.2"""
    b = broker.bootstrap
    create(b, "lg-ct")
    create(b, "lg-lat", config=LAT_CONFIG)
    ct = write_legacy_matrix(b, "lg-ct")
    lat = write_legacy_matrix(b, "lg-lat")
    check_confluent_view(consume(b, "lg-ct", len(ct)), ct, lat=False)
    got = consume(b, "lg-lat", len(lat))
    check_confluent_view(got, lat, lat=True)
    # Records of one wrapper share its one timestamp.
    for codec in LEGACY_CODECS[1:]:
        stamps = {m.timestamp() for m, e in zip(got, lat) if e.magic == 1 and e.codec == codec}
        assert len(stamps) == 1, (codec, stamps)
    assert end_offset(b, "lg-ct") == len(ct) and end_offset(b, "lg-lat") == len(lat)
    # T3.4: Produce v2 answers the log-append time, which is what the record then carries.
    items = [(None, b"t%d" % i, 1000 + i) for i in range(3)]
    for codec in (None, "gzip"):
        metas = kp_produce(b, "lg-lat", items, KP0101, compression=codec)
        got = consume(b, "lg-lat", 3, offset=metas[0].offset)
        assert [m.timestamp() for m in got] == [(TIMESTAMP_LOG_APPEND_TIME, x.timestamp) for x in metas], codec
        assert all(x.timestamp > 1_000_000 for x in metas), "the broker's time, not the producer's"


def test_legacy_produce_stored_as_kafka_stores_it(broker):
    """The bytes the broker keeps for legacy message sets (read raw with Fetch v4, which must
    not convert anything), T1.1: magic 0 stays magic 0 (on a CreateTime topic; on a LogAppendTime
    topic it becomes magic 1 with the broker's time, T3.2) and magic 1 stays magic 1 with its codec;
    every CRC-32 right; a magic-0 wrapper's inner offsets are absolute and the wrapper carries the
    last one; a magic-1 wrapper's inner offsets are relative (0..n-1) and the wrapper carries the
    absolute last offset. CreateTime magic-1 wrapper: timestamp = largest inner timestamp (T3.3;
    kafka-python sends the wrapper with timestamp 0), timestamp-type bit clear. LogAppendTime:
    uncompressed v1 message: the broker's time and the type bit; v1 wrapper: the broker's time and
    the type bit, inner timestamps -1 (T3.2). Fetch v2/v3 serve stored magic 0/1 entries as stored,
    Fetch v0/v1 stored magic 0 entries as stored (no re-encoding, T1.1).
    spec: T1.1, T1.3, T3.2, T3.3"""
    b = broker.bootstrap
    create(b, "st-ct")
    create(b, "st-lat", config=LAT_CONFIG)
    for topic, is_lat in (("st-ct", False), ("st-lat", True)):
        expected = write_legacy_matrix(b, topic)
        stored = raw_entries(b, 4, topic)
        assert [o for o, *_ in flatten(stored)] == [e.offset for e in expected] == list(range(len(expected)))
        by_offset = {e.offset: e for e in expected}
        for magic, m in stored:
            assert magic in (0, 1) and m.crc_ok, (topic, m.offset)
            e = by_offset[m.offset]
            stored_magic = 1 if is_lat else e.magic
            assert magic == stored_magic and (m.attrs & 7) == CODEC_IDS[e.codec], (topic, e, m.attrs)
            if m.inner is not None:
                n = len(m.inner)
                first = m.offset - n + 1
                assert all(by_offset[first + i].codec == e.codec for i in range(n))
                if magic == 0:
                    assert [i.offset for i in m.inner] == list(range(first, m.offset + 1)), "absolute inner offsets"
                else:
                    assert [i.offset for i in m.inner] == list(range(n)), "relative inner offsets"
                assert [i.value for i in m.inner] == [by_offset[first + i].value for i in range(n)]
                assert all(i.crc_ok for i in m.inner)
            if magic == 0:
                assert m.attrs & 0x08 == 0
                continue
            if not is_lat:
                assert m.attrs & 0x08 == 0, "CreateTime"
                if m.inner is None:
                    assert m.ts == e.ts
                else:
                    assert [i.ts for i in m.inner] == [by_offset[m.offset - len(m.inner) + 1 + k].ts
                                                       for k in range(len(m.inner))]
                    assert m.ts == max(i.ts for i in m.inner), "T3.3: wrapper = largest inner timestamp"
            else:
                assert m.attrs & 0x08, "LogAppendTime bit"
                assert e.lo - SLACK_MS <= m.ts <= e.hi + SLACK_MS, (e, m.ts)
                if m.inner is not None:
                    assert all(i.ts == -1 for i in m.inner), "T3.2: inner timestamps -1 under a LogAppendTime wrapper"
        # Legacy entries are served as stored to every fetch version that can read their magic.
        for version in (2, 3):
            assert [x.raw for _, x in raw_entries(b, version, topic)] == [x.raw for _, x in stored], version
        if is_lat:
            continue  # nothing stored as magic 0 (T3.2)
        first_m1 = next(e.offset for e in expected if e.magic == 1)
        for version in (0, 1):
            got = [x.raw for _, x in raw_entries(b, version, topic) if x.offset < first_m1]
            assert got == [x.raw for mg, x in stored if mg == 0], version


def test_stored_v1_wrapper_keeps_compressed_bytes(broker):
    """A magic-1 gzip wrapper (built with kafka-python's builder, sent raw with Produce v2: inner
    offsets 0..n-1, out-of-order inner timestamps, wrapper timestamp 0) is stored with its
    compressed value byte for byte: only the wrapper's offset (the absolute last offset), its
    timestamp (the largest inner one, T3.3) and its CRC change. Uncompressed magic-0 and magic-1
    message sets keep their message bytes (only the offsets change). Fetch v3 gets the same bytes;
    Fetch v1 gets the wrapper down-converted to magic 0 with absolute inner offsets.
    spec: T1.1, T3.3"""
    from kafka.record.legacy_records import LegacyRecordBatchBuilder as Builder
    b = broker.bootstrap
    create(b, "keep")
    stamps = [now_ms() - 5000 + d for d in (300, 100, 900, 200, 500)]
    wb = Builder(magic=1, compression_type=Builder.CODEC_GZIP, batch_size=1 << 20)
    for i, ts in enumerate(stamps):
        wb.append(i, ts, b"k%d" % i, b"v%d" % i)
    wrapper = bytes(wb.build())
    sent = parse_msg(wrapper)
    assert sent.offset == 0 and sent.ts == 0
    pb = Builder(magic=1, compression_type=0, batch_size=1 << 20)
    for i in range(3):
        pb.append(i, stamps[i], b"p%d" % i, b"plain%d" % i)
    plain1 = bytes(pb.build())
    zb = Builder(magic=0, compression_type=0, batch_size=1 << 20)
    for i in range(3):
        zb.append(i, None, b"z%d" % i, b"zero%d" % i)
    plain0 = bytes(zb.build())
    with Raw(b) as raw:
        assert raw.produce_v2("keep", 0, wrapper) == (0, 0, -1)
        assert raw.produce_v2("keep", 0, plain1) == (0, 5, -1)
        assert raw.produce_v2("keep", 0, plain0) == (0, 8, -1)
        assert raw.produce_v2("keep", 0, wrapper) == (0, 11, -1)
    stored = raw_entries(b, 4, "keep")
    assert [mg for mg, _ in stored] == [1, 1, 1, 1, 0, 0, 0, 1]
    w = stored[0][1]
    assert (w.offset, w.ts, w.attrs, w.key) == (4, max(stamps), 1, None) and w.crc_ok
    assert w.value == sent.value, "compressed bytes kept"
    assert w.raw[8:12] == wrapper[8:12] and w.raw[16:18] == wrapper[16:18] and w.raw[26:] == wrapper[26:], \
        "only offset, timestamp and CRC change"
    again = stored[-1][1]
    assert (again.offset, again.ts, again.value) == (15, max(stamps), sent.value)
    for (mg, m), off, src in zip(stored[1:7], range(5, 11), split_entries(plain1) + split_entries(plain0)):
        assert m.offset == off and m.raw[8:] == src[2][8:], "message bytes kept, offset assigned"
    assert [x.raw for _, x in raw_entries(b, 3, "keep")] == [x.raw for _, x in stored]
    v1 = raw_entries(b, 1, "keep")
    assert all(mg == 0 for mg, _ in v1)
    got = flatten(v1)
    assert [o for o, *_ in got] == list(range(16))
    assert [v for _, _, v, _, _ in got] == ([b"v%d" % i for i in range(5)] + [b"plain%d" % i for i in range(3)]
                                           + [b"zero%d" % i for i in range(3)] + [b"v%d" % i for i in range(5)])
    for mg, m in v1:
        if m.inner is not None:
            assert [i.offset for i in m.inner] == list(range(m.offset - 4, m.offset + 1)), "absolute inner offsets"


def legacy_message(magic, attrs, ts, key, value, offset=0):
    """One legacy log entry, built by hand (kafka-python's builder has no zstd)."""
    body = struct.pack(">bb", magic, attrs) + (struct.pack(">q", ts) if magic == 1 else b"")
    for field in (key, value):
        body += struct.pack(">i", -1) if field is None else struct.pack(">i", len(field)) + field
    return struct.pack(">qiI", offset, len(body) + 4, zlib.crc32(body)) + body


def test_zstd_v1_wrapper_accepted(broker):
    """T1.3 lets a v1 wrapper carry zstd (codec 4), which kafka-python cannot build: a hand-made
    magic-1 zstd wrapper (inner offsets 0..3, wrapper timestamp 0) sent raw with Produce v2 is
    accepted and stored with its compressed bytes, the wrapper at the last offset with the largest
    inner timestamp (T3.3); confluent-kafka reads the records with their timestamps; Fetch v3
    serves it as a gzip wrapper, which kafka-python (0, 10, 1) reads.
    spec: T1.1, T1.3, T3.3"""
    import kafka.codec as codec
    from kafka.record.legacy_records import LegacyRecordBatchBuilder as Builder
    b = broker.bootstrap
    create(b, "zstd1")
    stamps = [now_ms() - 3000 + d for d in (30, 10, 40, 20)]
    inner = Builder(magic=1, compression_type=0, batch_size=1 << 20)
    for i, ts in enumerate(stamps):
        inner.append(i, ts, b"k%d" % i, b"zv%d" % i)
    compressed = codec.zstd_encode(bytes(inner.build()))
    with Raw(b) as raw:
        assert raw.produce_v2("zstd1", 0, legacy_message(1, 4, 0, None, compressed)) == (0, 0, -1)
    (mg, w), = raw_entries(b, 4, "zstd1")
    assert (mg, w.offset, w.attrs, w.ts, w.value) == (1, 3, 4, max(stamps), compressed) and w.crc_ok
    got = consume(b, "zstd1", 4)
    assert [(m.offset(), m.key(), m.value(), m.timestamp()) for m in got] == [
        (i, b"k%d" % i, b"zv%d" % i, (TIMESTAMP_CREATE_TIME, ts)) for i, ts in enumerate(stamps)]
    # Legacy readers get it recompressed with gzip (they cannot decode zstd): same records.
    (mg, w3), = raw_entries(b, 3, "zstd1")
    assert (mg, w3.offset, w3.attrs & 7, w3.ts) == (1, 3, CODEC_IDS["gzip"], max(stamps)) and w3.crc_ok
    assert [(r.offset, r.value) for r in kp_consume(b, "zstd1", 4, KP0101)] == [(i, b"zv%d" % i) for i in range(4)]


def test_legacy_produce_read_by_old_kafka_python(broker):
    """The same legacy data read back by kafka-python pinned to (0, 9) (Fetch v1: everything
    down-converted to magic 0, no timestamps) and to (0, 10, 1) (Fetch v3: magic 1 as stored,
    CreateTime with the producer's timestamps, LogAppendTime with the broker's, the same one
    confluent-kafka sees; magic 0 without timestamp); plus the raw bytes each fetch version gets.
    spec: T1.1, T1.3, T4.1, T4.2"""
    b = broker.bootstrap
    create(b, "old-ct")
    create(b, "old-lat", config=LAT_CONFIG)
    ct = write_legacy_matrix(b, "old-ct")
    lat = write_legacy_matrix(b, "old-lat")
    lat_times = {m.offset(): m.timestamp()[1] for m in consume(b, "old-lat", len(lat))}
    for av in (KP09, KP0101):
        check_kp_view(kp_consume(b, "old-ct", len(ct), av), ct, False, av)
        check_kp_view(kp_consume(b, "old-lat", len(lat), av), lat, True, av, lat_times)
    check_down_converted(b, "old-ct", ct, lat=False)
    check_down_converted(b, "old-lat", lat, lat=True)


def test_v2_batches_down_converted_for_old_fetch_versions(broker):
    """confluent-kafka writes v2 batches (compression none/gzip/snappy/lz4, records with headers);
    kafka-python (0, 9) (Fetch v1 -> magic 0) and (0, 10, 1) (Fetch v3 -> magic 1) read them:
    keys, values, offsets right, headers dropped; with (0, 10, 1) CreateTime timestamps survive
    and the LogAppendTime topic gives type LogAppendTime with the stored time. Raw: Fetch v0/v1
    get only magic 0, v2/v3 only magic 1, CRCs right; confluent-kafka still gets the v2 batches
    with their headers (stored bytes kept). zstd is in its own test.
    spec: T1.1, T1.3, T4.1, T4.2"""
    b = broker.bootstrap
    create(b, "dc-ct")
    create(b, "dc-lat", config=LAT_CONFIG)
    headers = [("h1", b"x"), ("h2", b"y")]
    for topic, lat in (("dc-ct", False), ("dc-lat", True)):
        expected, base_ts = [], now_ms() - 20_000
        for codec in V2_CODECS[:-1]:
            n0 = len(expected)
            items = [(b"%s-%d" % (codec.encode(), i), b"v2-%d" % (n0 + i), base_ts + (n0 + i) * 13 % 997)
                     for i in range(5)]
            lo = now_ms()
            assert produce_v2(b, topic, items, codec, headers) == list(range(n0, n0 + 5))
            hi = now_ms()
            expected += [Rec(n0 + i, k, v, 2, codec, ts, lo, hi) for i, (k, v, ts) in enumerate(items)]
        got = consume(b, topic, len(expected))
        check_confluent_view(got, expected, lat)
        assert all(m.headers() == headers for m in got)
        lat_times = {m.offset(): m.timestamp()[1] for m in got}
        assert all(mg == 2 for mg, _ in raw_entries(b, 4, topic))
        for av in (KP09, KP0101):
            check_kp_view(kp_consume(b, topic, len(expected), av), expected, lat, av, lat_times)
        check_down_converted(b, topic, expected, lat)
        if lat:  # the converted messages carry the stored log-append time, not a new one
            got = flatten(raw_entries(b, 3, topic))
            assert [ts for _, _, _, ts, _ in got] == [lat_times[e.offset] for e in expected]


def test_old_readers_move_past_batches_they_cannot_see(broker):
    """A reader of Fetch v0-3 gets nothing from a v2 batch without messages for it (a transaction
    marker, a compacted log's empty placeholder), and moves on only past a message it got. Here
    every segment (segment.bytes=1024) holds one transaction's record and its commit marker, so a
    read at a marker finds only the marker in its segment: Fetch v1 and v3 at each marker's offset
    answer the next transaction's message (the read goes on past what the reader cannot see), never
    nothing below the high watermark; Fetch v4 still gets the marker as stored; kafka-python at
    (0, 9) and (0, 10, 1) reads every record. (Before the fix it asked at the first marker for ever.)"""
    from test_transactions import txn_producer
    b = broker.bootstrap
    create(b, "old-past", config={"segment.bytes": "1024"})
    p = txn_producer(b, "old-past-t")
    values = [b"txn-%d-" % i + b"v" * 700 for i in range(4)]
    for v in values:
        p.begin_transaction()
        p.produce("old-past", value=v, partition=0)
        p.commit_transaction(TIMEOUT)
    # record, marker, record, marker, ...: EndTxn is answered before its markers are written
    deadline = time.time() + TIMEOUT
    while end_offset(b, "old-past") < 2 * len(values) and time.time() < deadline:
        time.sleep(0.05)
    assert end_offset(b, "old-past") == 2 * len(values)
    with Raw(b) as raw:
        for marker in range(1, 2 * len(values) - 1, 2):
            for version in (1, 3):
                error, hw, records = raw.fetch(version, "old-past", 0, marker)
                entries = split_entries(records)
                assert error == 0 and entries, "Fetch v%d at marker %d: nothing (hw %d)" % (version, marker, hw)
                assert entries[0][0] == marker + 1 and entries[0][1] == (0 if version == 1 else 1)
            error, _, records = raw.fetch(4, "old-past", 0, marker)
            assert error == 0 and split_entries(records)[0][:2] == (marker, 2), "v4 gets the marker as stored"
        # At the last marker nothing is left for an old reader: an empty answer, no error.
        assert raw.fetch(3, "old-past", 0, 2 * len(values) - 1)[::2] == (0, b"")
    for av in (KP09, KP0101):
        got = kp_consume(b, "old-past", len(values), av)
        assert [(r.offset, r.value) for r in got] == [(2 * i, v) for i, v in enumerate(values)], av


def test_zstd_v2_batch_fetched_by_old_versions(broker):
    """A zstd v2 batch fetched with Fetch v0-v3. No legacy reader decodes zstd (kafka-python's
    legacy reader raises UnsupportedCodecError for codec 4, Java clients before 2.1 likewise;
    Kafka answers such fetches with UNSUPPORTED_COMPRESSION_TYPE), so tidemark down-converts it to
    what the reader can read: the fetch version's magic (0 for v0/v1, 1 for v2/v3) in a gzip
    wrapper, with right CRCs, keys, values, offsets and (v2/v3) timestamps; kafka-python (0, 9)
    and (0, 10, 1) read the records. confluent-kafka (Fetch v4+) reads the zstd batch as stored.
    spec: T1.1, T1.3"""
    b = broker.bootstrap
    create(b, "dc-zstd")
    ts0 = now_ms() - 1000
    items = [(b"z%d" % i, b"zstd-%d" % i, ts0 + i) for i in range(6)]
    assert produce_v2(b, "dc-zstd", items, "zstd") == list(range(6))
    got = consume(b, "dc-zstd", 6)
    assert [(m.key(), m.value(), m.timestamp()) for m in got] == [(k, v, (TIMESTAMP_CREATE_TIME, t)) for k, v, t in items]
    with Raw(b) as raw:
        for version in (0, 1, 2, 3):
            error, hw, records = raw.fetch(version, "dc-zstd", 0, 0)
            assert error == 0, "Fetch v%d: error %d" % (version, error)
            entries = [(mg, parse_msg(e)) for _, mg, e in split_entries(records)]
            limit = 0 if version <= 1 else 1
            assert entries and all(mg <= limit for mg, _ in entries), version
            assert all((m.attrs & 7) == CODEC_IDS["gzip"] for _, m in entries), "zstd reaches legacy readers as gzip"
            got = flatten(entries)
            assert [(o, k, v) for o, k, v, _, _ in got] == [(i, k, v) for i, (k, v, _) in enumerate(items)]
            if version >= 2:
                assert [ts for *_, ts, _ in got] == [t for *_, t in items]
    for av in (KP09, KP0101):
        assert [r.value for r in kp_consume(b, "dc-zstd", 6, av)] == [v for _, v, _ in items]


def test_mixed_log_read_by_every_client(broker):
    """One partition holding magic 0 (kafka-python 0.9), magic 1 (kafka-python 0.10.1) and v2
    (confluent-kafka) records, interleaved over three rounds with varied codecs. confluent-kafka
    and both old kafka-python versions read everything back with contiguous offsets and the
    timestamps each format has; reads starting in the middle of compressed message sets start at
    the right record; each fetch version gets only the magics it understands.
    spec: T1.1, T1.3, T4.1, T4.2"""
    b = broker.bootstrap
    create(b, "mixed")
    rounds = [("gzip", None, "snappy"), (None, "lz4", "gzip"), ("lz4", "snappy", "lz4")]
    expected, base_ts = [], now_ms() - 30_000
    for r, (c0, c1, c2) in enumerate(rounds):
        for kind, codec in (("m0", c0), ("m1", c1), ("v2", c2)):
            n0 = len(expected)
            items = [(b"r%d-%s-%d" % (r, kind.encode(), i), b"mixed-%d" % (n0 + i),
                      None if kind == "m0" else base_ts + (n0 + i) * 31 % 1000) for i in range(4)]
            if kind == "v2":
                assert produce_v2(b, "mixed", items, codec or "none") == list(range(n0, n0 + 4))
                magic = 2
            else:
                av, magic = (KP09, 0) if kind == "m0" else (KP0101, 1)
                assert [m.offset for m in kp_produce(b, "mixed", items, av, codec)] == list(range(n0, n0 + 4))
            expected += [Rec(n0 + i, k, v, magic, codec, ts, 0, 0) for i, (k, v, ts) in enumerate(items)]
    n = len(expected)
    check_confluent_view(consume(b, "mixed", n), expected, lat=False)
    assert [mg for mg, _ in raw_entries(b, 4, "mixed")] == [
        mg for r in rounds for mg, codec in zip((0, 1, 2), r) for _ in range(1 if codec or mg == 2 else 4)]
    for av in (KP09, KP0101):
        check_kp_view(kp_consume(b, "mixed", n, av), expected, False, av)
    check_down_converted(b, "mixed", expected, lat=False)
    # Starting inside compressed sets: round 0 magic 0 gzip (0..3), round 1 magic 1 lz4 (16..19),
    # round 2 v2 lz4 (32..35).
    for start in (2, 17, 33):
        want = expected[start:]
        assert [m.value() for m in consume(b, "mixed", len(want), offset=start)] == [e.value for e in want]
        for av in (KP09, KP0101):
            assert [(r.offset, r.value) for r in kp_consume(b, "mixed", len(want), av, offset=start)] == [
                (e.offset, e.value) for e in want], (av, start)


def times_data(bootstrap, topic):
    """50 magic-1 records (kafka-python 0.10.1, explicit out-of-order timestamps) in five message
    sets alternating uncompressed and compressed, then 5 magic-0 records (no timestamps: they
    never match a lookup). Returns (stamps of the magic-1 records, probes)."""
    base = now_ms() - 100_000
    stamps = [base + (i * 37 % 50) * 100 for i in range(50)]
    for k, codec in enumerate((None, "gzip", None, "snappy", "lz4")):
        items = [(None, b"t%d" % i, stamps[i]) for i in range(k * 10, k * 10 + 10)]
        assert [m.offset for m in kp_produce(bootstrap, topic, items, KP0101, codec)] == list(range(k * 10, k * 10 + 10))
    kp_produce(bootstrap, topic, [(None, b"old%d" % i, None) for i in range(5)], KP09, "gzip")
    probes = [base - 1, base, base + 50, base + 1234, base + 2500, base + 2550, base + 3700,
              base + 4899, base + 4900, base + 4901, base + 60_000]
    return stamps, probes


def first_at_or_after(stamps, probe):
    return next((i for i, t in enumerate(stamps) if t >= probe), None)


def test_offsets_for_times_over_v1_messages(broker):
    """ListOffsets by time over magic-1 data written out of order across uncompressed message sets
    and gzip/snappy/lz4 wrappers (a lookup must look inside a wrapper for the first inner record):
    the answer is the first offset whose timestamp is >= T, with that timestamp; none when no
    record has one (magic-0 records after them never match). Asked by kafka-python (0, 10, 1)
    (ListOffsets v1) and by confluent-kafka.
    spec: T3.3, T6.2"""
    b = broker.bootstrap
    create(b, "times1")
    stamps, probes = times_data(b, "times1")
    want = [first_at_or_after(stamps, p) for p in probes]
    assert want[-1] is None and want[0] == 0
    assert kp_offsets_for_times(b, "times1", probes) == [None if o is None else (o, stamps[o]) for o in want]
    assert offsets_for_times(b, "times1", probes) == want


def test_create_time_bound_checks_inner_messages(broker):
    """CreateTime bound (message.timestamp.difference.max.ms=60000) checked on every inner message
    of a v1 wrapper and every message of an uncompressed v1 set: one message an hour old (or an
    hour ahead) fails the whole message set with INVALID_TIMESTAMP (32) and nothing of it is
    appended; the other partition in the same Produce request is appended. The wrapper's own
    timestamp as kafka-python sends it (0) is not what is checked. A good set afterwards succeeds.
    spec: T3.1, T3.3"""
    from kafka.errors import InvalidTimestampError
    from kafka import KafkaProducer
    b = broker.bootstrap
    create(b, "bounded1", partitions=2, config={"message.timestamp.difference.max.ms": "60000"})
    now = now_ms()
    for codec, off in (("gzip", -3_600_000), (None, +3_600_000), ("lz4", -3_600_000)):
        items = [(None, b"bad%d" % i, now - 1000 + i) for i in range(4)]
        items.insert(2, (None, b"out-of-bounds", now + off))
        kp_produce(b, "bounded1", items, KP0101, codec, expect_error=InvalidTimestampError)
    assert end_offset(b, "bounded1") == 0
    with Raw(b) as raw:
        assert split_entries(raw.fetch(4, "bounded1", 0, 0)[2]) == []
    # One request, two partitions: the bad set is refused, the good one appended.
    p = KafkaProducer(bootstrap_servers=b, api_version=KP0101, compression_type="gzip", acks="all", retries=0,
                      enable_idempotence=False, linger_ms=60_000, batch_size=1 << 20)
    try:
        bad = [p.send("bounded1", value=b"b%d" % i, partition=0, timestamp_ms=now - 3_600_000 * (i == 1)) for i in range(3)]
        good = [p.send("bounded1", value=b"g%d" % i, partition=1, timestamp_ms=now + i) for i in range(3)]
        p.flush(timeout=TIMEOUT)
        for f in bad:
            with pytest.raises(InvalidTimestampError):
                f.get(timeout=TIMEOUT)
        assert [f.get(timeout=TIMEOUT).offset for f in good] == [0, 1, 2]
    finally:
        p.close(timeout=5)
    assert [m.value() for m in consume(b, "bounded1", 3, partition=1)] == [b"g0", b"g1", b"g2"]
    # A good wrapper afterwards: appended at offset 0, timestamps kept, wrapper = largest inner.
    good = [(None, b"ok%d" % i, now - 500 + i * 10) for i in range(4)]
    assert [m.offset for m in kp_produce(b, "bounded1", good, KP0101, "gzip")] == [0, 1, 2, 3]
    got = consume(b, "bounded1", 4)
    assert [(m.value(), m.timestamp()) for m in got] == [(v, (TIMESTAMP_CREATE_TIME, t)) for _, v, t in good]
    (mg, w), = raw_entries(b, 4, "bounded1")
    assert mg == 1 and w.ts == max(t for *_, t in good)
    assert end_offset(b, "bounded1") == 4


def snapshot(bootstrap, topics, probes_topic, probes):
    """Everything a restart must keep: per topic the stored bytes (Fetch v4 raw), what
    confluent-kafka and both old kafka-python versions read; the by-time answers of both clients."""
    out = {}
    for topic, n in topics.items():
        stored = raw_entries(bootstrap, 4, topic)
        out[topic, "stored"] = [x if mg == 2 else x.raw for mg, x in stored]
        out[topic, "confluent"] = [(m.offset(), m.key(), m.value(), m.timestamp()) for m in consume(bootstrap, topic, n)]
        for av in (KP09, KP0101):
            out[topic, av] = [(r.offset, r.key, r.value, r.timestamp, r.timestamp_type)
                              for r in kp_consume(bootstrap, topic, n, av)]
        out[topic, "fetch-v1"] = flatten(raw_entries(bootstrap, 1, topic))
        out[topic, "fetch-v3"] = flatten(raw_entries(bootstrap, 3, topic))
        assert end_offset(bootstrap, topic) == n
    out["times", "kafka-python"] = kp_offsets_for_times(bootstrap, probes_topic, probes)
    out["times", "confluent"] = offsets_for_times(bootstrap, probes_topic, probes)
    return out


def test_legacy_data_survives_restarts(broker):
    """Legacy data (magic 0 and 1, compressed and not, CreateTime and LogAppendTime) is read back
    identically by both client families, byte for byte as stored, after a clean restart and after
    kill -9 following more acknowledged legacy writes; offsets_for_times gives the same answers.
    spec: T1.1, T6.2, T8.2, T8.3"""
    b = broker.bootstrap
    create(b, "rs-ct")
    create(b, "rs-lat", config=LAT_CONFIG)
    create(b, "rs-times")
    ct = write_legacy_matrix(b, "rs-ct", per_batch=3)
    lat = write_legacy_matrix(b, "rs-lat", per_batch=3, versions=(KP0101,))
    stamps, probes = times_data(b, "rs-times")
    counts = {"rs-ct": len(ct), "rs-lat": len(lat), "rs-times": 55}
    before = snapshot(b, counts, "rs-times", probes)
    assert before["times", "confluent"] == [first_at_or_after(stamps, p) for p in probes]
    broker.stop(signal.SIGTERM)
    broker.start()
    assert snapshot(b, counts, "rs-times", probes) == before
    # More acknowledged legacy writes, then kill -9: every acknowledged record is kept.
    more = write_legacy_matrix(b, "rs-ct", per_batch=2, codecs=("gzip", "lz4"), tag="late", first=len(ct))
    counts["rs-ct"] += len(more)
    later_ts = max(stamps) + 1000
    kp_produce(b, "rs-times", [(None, b"late%d" % i, later_ts + i) for i in range(5)], KP0101, "snappy")
    counts["rs-times"] += 5
    stamps2 = stamps + [-1] * 5 + [later_ts + i for i in range(5)]
    after_writes = snapshot(b, counts, "rs-times", probes)
    assert after_writes["rs-lat", "stored"] == before["rs-lat", "stored"]
    assert after_writes["rs-ct", "stored"][:len(before["rs-ct", "stored"])] == before["rs-ct", "stored"]
    assert after_writes["times", "confluent"] == [first_at_or_after(stamps2, p) for p in probes]
    broker.stop(signal.SIGKILL)
    broker.start()
    assert snapshot(b, counts, "rs-times", probes) == after_writes


def test_magic0_segment_without_time_index(broker):
    """Older data: a Kafka segment of magic-0 messages with no .index and no .timeindex
    (tests/fixtures/magic0: 20 uncompressed messages, then a gzip wrapper of 5 with absolute inner
    offsets 20..24), put in a partition directory while the broker is stopped, as a sealed segment
    followed by an empty one at offset 25. Every client reads the 25 records at offsets 0..24
    without timestamps, and the bytes as they are in the file; no lookup by time matches them; the
    missing indexes are rebuilt, the time index with its one mtime entry (file mtime, offset of the
    last record: 24); appends continue at offset 25.
    spec: T1.1, T1.2, T5.5, T6.2, T8.3"""
    b = broker.bootstrap
    create(b, "older")
    broker.stop(signal.SIGTERM)
    pdir = os.path.join(broker.data_dir, "older-0")
    assert os.path.isdir(pdir), os.listdir(broker.data_dir)
    for name in os.listdir(pdir):
        os.remove(os.path.join(pdir, name))
    seg = os.path.join(pdir, "00000000000000000000.log")
    shutil.copyfile(FIXTURE_SEGMENT, seg)
    mtime_ms = now_ms() - 3_600_000
    os.utime(seg, ns=(mtime_ms * 1_000_000, mtime_ms * 1_000_000))
    open(os.path.join(pdir, "00000000000000000025.log"), "wb").close()
    broker.start()
    keys = [b"k%d" % i for i in range(25)]
    values = [b"v%d" % i for i in range(25)]
    got = consume(b, "older", 25)
    assert [(m.offset(), m.key(), m.value()) for m in got] == list(zip(range(25), keys, values))
    assert all(m.timestamp()[0] == TIMESTAMP_NOT_AVAILABLE for m in got)
    for av in (KP09, KP0101):
        recs = kp_consume(b, "older", 25, av)
        assert [(r.offset, r.key, r.value, r.timestamp) for r in recs] == list(zip(range(25), keys, values, [None] * 25))
    with open(FIXTURE_SEGMENT, "rb") as f:
        fixture = f.read()
    assert b"".join(x.raw for _, x in raw_entries(b, 4, "older")) == fixture, "the segment's bytes served as they are"
    assert b"".join(x.raw for _, x in raw_entries(b, 1, "older")) == fixture
    assert kp_offsets_for_times(b, "older", [0, mtime_ms - 10_000, mtime_ms]) == [None, None, None]
    assert end_offset(b, "older") == 25
    # The rebuilt indexes of the sealed segment (written by the time of a clean shutdown).
    broker.stop(signal.SIGTERM)
    assert os.path.exists(os.path.join(pdir, "00000000000000000000.index"))
    with open(os.path.join(pdir, "00000000000000000000.timeindex"), "rb") as f:
        assert f.read() == struct.pack(">qI", mtime_ms, 24), "T5.5: one entry (mtime, last offset)"
    with open(seg, "rb") as f:
        assert f.read() == fixture, "a sealed segment is not rewritten"
    broker.start()
    assert [m.offset for m in kp_produce(b, "older", [(None, b"new", None)], KP0101)] == [25]
    assert [m.value() for m in consume(b, "older", 2, offset=24)] == [b"v24", b"new"]


def test_magic0_lz4_keeps_kafka_header_checksum(broker):
    """Magic-0 LZ4 uses Kafka's pre-KAFKA-3160 frame header checksum (xxh32 over the frame magic
    and descriptor, byte 1), which kafka-python sends and Kafka 0.8/0.9 clients check; magic 1 uses
    the correct one (descriptor only). The broker accepts both, keeps each as it is when storing
    (a magic-0 wrapper whose inner offsets the broker makes absolute is re-written with the old
    checksum), and down-conversion to magic 0 writes the old checksum too.
    spec: T1.1, T1.3"""
    b = broker.bootstrap
    create(b, "lz4hc")
    kp_produce(b, "lz4hc", [(b"a%d" % i, b"x" * 50, None) for i in range(4)], KP09, "lz4")
    kp_produce(b, "lz4hc", [(b"b%d" % i, b"y" * 50, now_ms()) for i in range(4)], KP0101, "lz4")
    produce_v2(b, "lz4hc", [(b"c%d" % i, b"z" * 50, now_ms()) for i in range(4)], "lz4")
    stored = raw_entries(b, 4, "lz4hc")
    assert [mg for mg, _ in stored] == [0, 1, 2]
    for mg, m in stored[:2]:
        hc, old, correct = lz4_header_checksums(m.value)
        assert hc == (old if mg == 0 else correct), (mg, hc, old, correct)
    for mg, m in raw_entries(b, 1, "lz4hc"):
        assert mg == 0
        if m.attrs & 7 == 3:
            hc, old, correct = lz4_header_checksums(m.value)
            assert hc == old, ("magic-0 LZ4 down-converted with the correct checksum", m.offset)
    for mg, m in raw_entries(b, 3, "lz4hc"):
        if mg == 1 and m.attrs & 7 == 3:
            hc, old, correct = lz4_header_checksums(m.value)
            assert hc == correct, m.offset
    assert [m.key() for m in consume(b, "lz4hc", 12)] == [b"%s%d" % (c, i) for c in (b"a", b"b", b"c") for i in range(4)]
