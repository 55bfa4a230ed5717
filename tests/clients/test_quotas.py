"""Client quotas (KIP-546, KIP-219) on the real binary: AlterClientQuotas and
DescribeClientQuotas with kafka-python's protocol classes (validation as Kafka's, kept across a
restart), and a producer_byte_rate quota that holds librdkafka's producer near its rate while an
unquoted client is not held back."""
import time

from confluent_kafka import Producer
from kafka.protocol.admin import AlterClientQuotasRequest, DescribeClientQuotasRequest

from test_clients import TIMEOUT, create
from test_conformance import call

A, D = AlterClientQuotasRequest, DescribeClientQuotasRequest


def alter(broker, entity, ops, validate_only=False):
    """One entity's change: [(error code, message)]."""
    e = A.EntryData(entity=[A.EntryData.EntityData(entity_type=t, entity_name=n) for t, n in entity],
                    ops=[A.EntryData.OpData(key=k, value=float(v or 0), remove=v is None) for k, v in ops])
    r = call(broker, A, 1, entries=[e], validate_only=validate_only)
    return [(x.error_code, x.error_message) for x in r.entries]


def describe(broker, components, strict=False):
    r = call(broker, D, 1, components=[D.ComponentData(entity_type=t, match_type=m, match=n) for t, m, n in components],
             strict=strict)
    assert r.error_code == 0, r
    return sorted((tuple((e.entity_type, e.entity_name) for e in x.entity), tuple((v.key, v.value) for v in x.values))
                  for x in r.entries)


def test_quotas_are_kept_and_described(start_broker):
    """Quotas set for a client id and for the default user are described back (exact,
    default and any-name matches, strict), survive a restart, and can be removed; bad changes
    (unknown key, negative or fractional byte rate, unknown entity type) are INVALID_REQUEST
    with Kafka's messages and change nothing."""
    b = start_broker()
    assert alter(b, [("client-id", "slow")], [("producer_byte_rate", 1024)]) == [(0, None)]
    assert alter(b, [("user", None)], [("consumer_byte_rate", 2048)]) == [(0, None)]
    for entity, ops, why in [([("client-id", "x")], [("bogus", 1)], "Invalid configuration key"),
                             ([("client-id", "x")], [("producer_byte_rate", -5)], "Illegal value"),
                             ([("client-id", "x")], [("producer_byte_rate", 1.5)], "whole number"),
                             ([("group", "x")], [("producer_byte_rate", 1)], "entity type")]:
        [(code, message)] = alter(b, entity, ops)
        assert code == 42 and why in message, (entity, ops, code, message)
    slow = ((("client-id", "slow"),), (("producer_byte_rate", 1024.0),))
    everyone = ((("user", None),), (("consumer_byte_rate", 2048.0),))
    assert describe(b, [("client-id", 0, "slow")]) == [slow]
    assert describe(b, [("user", 1, None)]) == [everyone]
    assert describe(b, []) == sorted([slow, everyone])
    b.stop()
    b.start()
    assert describe(b, []) == sorted([slow, everyone]), "kept across a restart"
    assert alter(b, [("client-id", "slow")], [("producer_byte_rate", None)]) == [(0, None)]
    assert describe(b, []) == [everyone]


def produced_rate(broker, topic, client_id, seconds, skip=0.0):
    """Bytes per second of librdkafka's producer, trying as fast as it can for `seconds`: the
    bytes acknowledged after `skip` seconds, over the time after it."""
    p = Producer({"bootstrap.servers": broker.bootstrap, "client.id": client_id, "linger.ms": 5,
                  "batch.size": 16384, "queue.buffering.max.kbytes": 256})
    value = b"x" * 1000
    start = time.time()
    acked = []
    while time.time() - start < seconds:
        try:
            p.produce(topic, value=value, on_delivery=lambda err, m: err is None and acked.append(time.time()))
        except BufferError:
            p.poll(0.01)
    end = time.time()
    p.flush(TIMEOUT)
    counted = [t for t in acked if start + skip <= t <= end]
    return len(counted) * len(value) / (end - start - skip)


def test_producer_byte_rate_holds_a_producer_to_its_rate(start_broker):
    """A 200 KB/s producer_byte_rate on client id `slow`: its producer (16 KB batches, the
    Java client's default), trying as fast as it can for 16 s, is held within 10% of 200 KB/s
    after its first burst (a quota lets an idle client spend 11 s of it at once, as Kafka's 11
    windows do; at over 1 MB/s that takes under 3 s); a producer with another client id is not
    held back (over 1 MB/s)."""
    b = start_broker()
    create(b.bootstrap, "q", partitions=1)
    assert alter(b, [("client-id", "slow")], [("producer_byte_rate", 200_000)]) == [(0, None)]
    fast = produced_rate(b, "q", "fast", 3)
    slow = produced_rate(b, "q", "slow", 16, skip=4)
    assert fast > 1_000_000, fast
    assert 180_000 < slow < 220_000, slow


def metadata_loop(broker, client_id, seconds):
    """Metadata requests one after another on one connection for `seconds`: (answered in the
    last half of the time, throttle_time_ms of every answer)."""
    from kafka.protocol.metadata import MetadataRequest
    import socket
    import struct
    s = socket.create_connection(("127.0.0.1", broker.port), timeout=TIMEOUT)
    start, late, throttles, corr = time.time(), 0, [], 0
    while time.time() - start < seconds:
        corr += 1
        req = MetadataRequest[4](topics=None, allow_auto_topic_creation=False)
        req.with_header(correlation_id=corr, client_id=client_id)
        s.sendall(req.encode(header=True, framed=True))
        got = b""
        while len(got) < 4 or len(got) < 4 + struct.unpack(">i", got[:4])[0]:
            got += s.recv(65536)
        r = req.header.get_response_class().decode(got[4:], version=4, header=True)
        throttles.append(r.throttle_time_ms)
        if time.time() - start > seconds / 2:
            late += 1
    s.close()
    return late, throttles


def test_request_percentage_throttles_a_busy_client(start_broker):
    """A request_percentage of 0.05 (0.5 ms of a thread's time per second) on client id
    `busy`: its back-to-back Metadata requests soon carry throttle_time_ms and are held back
    (the connection muted), so it gets far fewer answers than a client without a quota in the
    same time; the unquoted client is never throttled."""
    b = start_broker()
    create(b.bootstrap, "r", partitions=4)
    assert alter(b, [("client-id", "busy")], [("request_percentage", 0.05)]) == [(0, None)]
    free, free_throttles = metadata_loop(b, "free", 3)
    busy, busy_throttles = metadata_loop(b, "busy", 3)
    assert not any(free_throttles), free_throttles[:10]
    assert any(t > 0 for t in busy_throttles), busy_throttles[-10:]
    assert busy * 5 < free, (busy, free)
