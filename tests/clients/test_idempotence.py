"""Idempotent producers against the real binary: confluent-kafka (librdkafka) and kafka-python
with idempotence on (InitProducerId, then producer id, epoch and sequence in every batch).
Killing the broker (kill -9) while they produce makes them retry batches whose first attempt
may or may not have been written: afterwards every record is in the log exactly once, in order,
with no gap."""
import signal
import threading
import time

from confluent_kafka import Producer

from test_clients import TIMEOUT, consume, create


def test_idempotent_producer_across_kill9_restarts(broker):
    """confluent-kafka with enable.idempotence=true, acks=all, several requests in flight,
    keeps producing while the broker is killed twice and restarted: all 3000 values arrive
    exactly once per partition, in order, no gap, no duplicate."""
    b = broker.bootstrap
    create(b, "idem", partitions=2)
    p = Producer({"bootstrap.servers": b, "enable.idempotence": True, "acks": "all", "linger.ms": 2,
                  "batch.num.messages": 50, "max.in.flight.requests.per.connection": 5,
                  "message.timeout.ms": 60000, "retry.backoff.ms": 50, "reconnect.backoff.ms": 50})
    errors, n = [], 3000

    def run():
        for i in range(n):
            while True:
                try:
                    p.produce("idem", value=b"%d" % i, partition=i % 2,
                              on_delivery=lambda e, m: e is not None and errors.append(e))
                    break
                except BufferError:
                    p.poll(0.05)
            if i % 100 == 0:
                p.poll(0)
            time.sleep(0.0005)
        p.flush(90)

    t = threading.Thread(target=run)
    t.start()
    for _ in range(2):
        time.sleep(0.6)
        broker.stop(signal.SIGKILL)
        broker.start()
    t.join(120)
    assert not t.is_alive() and errors == [], errors[:3]
    for part in (0, 1):
        got = [int(m.value()) for m in consume(b, "idem", n // 2, partition=part)]
        assert got == list(range(part, n, 2)), "partition %d: %d records, first wrong at %s" % (
            part, len(got), next((i for i, (x, y) in enumerate(zip(got, range(part, n, 2))) if x != y), None))


def test_kafka_python_idempotent_producer(broker):
    """kafka-python's idempotent producer (its default) gets a producer id and writes batches
    with sequences the broker accepts; a second producer gets another id."""
    from kafka import KafkaProducer
    b = broker.bootstrap
    create(b, "kp-idem")
    offsets = []
    for _ in range(2):
        kp = KafkaProducer(bootstrap_servers=b, acks="all", enable_idempotence=True)
        futures = [kp.send("kp-idem", value=b"x%d" % i, partition=0) for i in range(20)]
        offsets += [f.get(timeout=TIMEOUT).offset for f in futures]
        kp.close()
    assert offsets == list(range(40))
    assert len(consume(b, "kp-idem", 40)) == 40
