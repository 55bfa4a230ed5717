#!/usr/bin/env python3
"""How closely a producer_byte_rate quota holds a producer: a fresh broker (target/release
binary, a temporary data directory), a quota on client id `slow`, then librdkafka's producer
(1,000-byte records, linger 5 ms, the given batch size) trying as fast as it can. Prints the
acknowledged bytes per second of each second and the steady rate after the first burst.

    target/venv/bin/python scripts/quota-rate.py [--quota 200000] [--seconds 30] [--skip 12] [--batch-size 16384]
"""
import argparse
import collections
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "clients"))
from confluent_kafka import Producer  # noqa: E402

from conftest import Broker, free_port  # noqa: E402
from test_clients import create  # noqa: E402
from test_quotas import alter  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quota", type=int, default=200_000)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--skip", type=float, default=12)
    ap.add_argument("--batch-size", type=int, default=16384)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as d:
        b = Broker(os.path.join(d, "data"), free_port())
        os.makedirs(b.data_dir)
        b.start()
        try:
            create(b.bootstrap, "q", partitions=1)
            assert alter(b, [("client-id", "slow")], [("producer_byte_rate", a.quota)]) == [(0, None)]
            p = Producer({"bootstrap.servers": b.bootstrap, "client.id": "slow", "linger.ms": 5,
                          "batch.size": a.batch_size, "queue.buffering.max.kbytes": 256})
            value, acked, start = b"x" * 1000, collections.Counter(), time.time()
            while time.time() - start < a.seconds:
                try:
                    p.produce("q", value=value,
                              on_delivery=lambda e, m: e is None and acked.update([int(time.time() - start)]))
                except BufferError:
                    p.poll(0.01)
            p.flush(30)
            for s in sorted(acked):
                print("second %3d: %9d B" % (s, acked[s] * len(value)))
            steady = sum(v for k, v in acked.items() if a.skip <= k < a.seconds) * len(value) / (a.seconds - a.skip)
            print("quota %d B/s, steady rate over [%g s, %g s): %.0f B/s (%.3f x the quota)"
                  % (a.quota, a.skip, a.seconds, steady, steady / a.quota))
        finally:
            b.stop()


if __name__ == "__main__":
    main()
