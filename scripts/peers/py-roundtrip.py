#!/usr/bin/env python3
"""Correctness check of a peer broker: produce COUNT records of SIZE bytes with acks=all to
TOPIC, then read them all back from the beginning and check every value.

Usage: py-roundtrip.py BOOTSTRAP TOPIC [COUNT=10000] [SIZE=1024]
TOPIC is left to auto-creation (the partition count it got is printed). Exits non-zero on any
missing, duplicated or changed record.
"""
import json
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient


def value(i, size):
    head = b"%010d:" % i
    return head + bytes((i + j) & 0xFF for j in range(size - len(head)))


def main():
    bootstrap, topic = sys.argv[1], sys.argv[2]
    count = int(sys.argv[3]) if len(sys.argv) > 3 else 10000
    size = int(sys.argv[4]) if len(sys.argv) > 4 else 1024

    failed = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                  "message.timeout.ms": 60000})
    for i in range(count):
        p.produce(topic, value(i, size), key=b"%d" % i,
                  on_delivery=lambda err, m: err and failed.append(err))
        p.poll(0)
    left = p.flush(60)
    if left or failed:
        sys.exit(f"produce: {left} undelivered, {len(failed)} failed: {failed[:1]}")

    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    parts = sorted(md.topics[topic].partitions)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "peer-roundtrip",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, n, 0) for n in parts])
    seen = {}
    deadline = time.monotonic() + 60
    while len(seen) < count and time.monotonic() < deadline:
        for m in c.consume(1000, 1.0):
            if m.error():
                sys.exit(f"consume: {m.error()}")
            i = int(m.value()[:10])
            if m.value() != value(i, size) or m.key() != b"%d" % i:
                sys.exit(f"record {i} changed")
            if i in seen:
                sys.exit(f"record {i} read twice")
            seen[i] = (m.partition(), m.offset())
    c.close()
    if len(seen) != count:
        sys.exit(f"read back {len(seen)} of {count}")
    print(json.dumps({"produced": count, "read_back": len(seen), "partitions": len(parts)}))


if __name__ == "__main__":
    main()
