#!/usr/bin/env python3
"""Durable produce throughput against any Kafka-compatible broker, with confluent-kafka.

Usage: py-produce.py BOOTSTRAP TOPIC COUNT RECORD_SIZE [--partitions N] [--acks all]
                     [--linger-ms 5] [--batch-size 262144]

Makes sure TOPIC exists with N partitions (default 4; CreateTopics if it is missing), then
produces COUNT records of RECORD_SIZE random bytes (null keys) and waits for every delivery
report. The clock runs from the first produce() to the end of flush(). Prints one JSON line:
{"records": n, "records_per_sec": x, "mb_per_sec": y} (MB = 2^20 bytes of record values,
as kafka-producer-perf-test counts them). Exits non-zero if any record failed.
"""
import argparse
import json
import os
import sys
import time

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic


def ensure_topic(bootstrap, topic, partitions):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    md = admin.list_topics(timeout=10)
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        fut = admin.create_topics([NewTopic(topic, num_partitions=partitions,
                                            replication_factor=1)])[topic]
        try:
            fut.result(timeout=30)
        except KafkaException as e:
            if e.args[0].code() != 36:  # TOPIC_ALREADY_EXISTS
                raise
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            t = admin.list_topics(topic, timeout=10).topics.get(topic)
            if t is not None and t.error is None and len(t.partitions) == partitions:
                break
            time.sleep(0.2)
    have = len(t.partitions) if t is not None and t.error is None else 0
    if have != partitions:
        sys.exit(f"topic {topic} has {have} partitions, wanted {partitions}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bootstrap")
    ap.add_argument("topic")
    ap.add_argument("count", type=int)
    ap.add_argument("size", type=int)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--acks", default="all")
    ap.add_argument("--linger-ms", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=262144)
    a = ap.parse_args()

    ensure_topic(a.bootstrap, a.topic, a.partitions)
    p = Producer({
        "bootstrap.servers": a.bootstrap,
        "acks": a.acks,
        "linger.ms": a.linger_ms,
        "batch.size": a.batch_size,
        "compression.type": "none",
        "queue.buffering.max.messages": max(100000, a.count),
        "queue.buffering.max.kbytes": 2 * 1024 * 1024,
        "message.timeout.ms": 120000,
    })
    payloads = [os.urandom(a.size) for _ in range(64)]  # random, so nothing compresses
    failed = []

    def on_delivery(err, _msg):
        if err is not None:
            failed.append(err)

    start = time.perf_counter()
    for i in range(a.count):
        while True:
            try:
                p.produce(a.topic, payloads[i & 63], on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.01)
        if i & 1023 == 0:
            p.poll(0)
    left = p.flush(120)
    elapsed = time.perf_counter() - start
    if left or failed:
        sys.exit(f"{left} undelivered, {len(failed)} failed (first: {failed[:1]})")
    print(json.dumps({
        "records": a.count,
        "records_per_sec": round(a.count / elapsed, 1),
        "mb_per_sec": round(a.count * a.size / elapsed / 2**20, 2),
    }))


if __name__ == "__main__":
    main()
