#!/usr/bin/env python3
"""Rebalance time, the classic group protocol against the KIP-848 consumer protocol, side by side
in one run against one broker (tidemark on Kafka's default group settings:
group.initial.rebalance.delay.ms=3000, group.consumer.heartbeat.interval.ms=5000), with
librdkafka (confluent-kafka) on its defaults for each protocol (classic: range,roundrobin eager,
heartbeat.interval.ms 3000).

Scenarios on a 12-partition topic, each timed from the action to the moment every consumer
holds its share and the shares cover the topic:
  first  one consumer subscribes (the group is empty)
  join   a 4th consumer joins 3 settled ones
  leave  one of 4 closes (it leaves the group)

  target/venv/bin/python scripts/bench-rebalance.py [--rounds N] [--bin target/release/tidemark]

Prints one line per (protocol, scenario, round) and the medians. Figures, not assertions."""
import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

PARTITIONS = 12


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def consumer(bootstrap, group, protocol):
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol,
            "auto.offset.reset": "earliest", "enable.auto.commit": False}
    c = Consumer(conf)
    c.subscribe(["rb"])
    return c


def settled(consumers):
    shares = [sorted(tp.partition for tp in c.assignment()) for c in consumers]
    total = sorted(p for s in shares for p in s)
    return total == list(range(PARTITIONS)) and all(shares) and max(map(len, shares)) - min(map(len, shares)) <= 1


def wait_settled(consumers, timeout=120):
    start = time.time()
    while time.time() - start < timeout:
        for c in consumers:
            c.poll(0.05)
        if settled(consumers):
            return time.time() - start
    raise RuntimeError("did not settle in %ds" % timeout)


def run_round(bootstrap, protocol, n):
    group = "rb-%s-%d" % (protocol, n)
    out = {}
    t = time.time()
    cs = [consumer(bootstrap, group, protocol)]
    wait_settled(cs)
    out["first"] = time.time() - t
    for _ in range(2):
        cs.append(consumer(bootstrap, group, protocol))
        wait_settled(cs)
    t = time.time()
    cs.append(consumer(bootstrap, group, protocol))
    wait_settled(cs)
    out["join"] = time.time() - t
    t = time.time()
    cs.pop().close()
    wait_settled(cs)
    out["leave"] = time.time() - t
    for c in cs:
        c.close()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bin", default=os.path.join(os.path.dirname(__file__), "..", "target", "release", "tidemark"))
    args = ap.parse_args()
    port = free_port()
    bootstrap = "127.0.0.1:%d" % port
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as d:
        log = open(os.path.join(d, "broker.log"), "wb")
        broker = subprocess.Popen([args.bin, "serve", "--data-dir", os.path.join(d, "data"), "--listen", bootstrap],
                                  stdout=subprocess.DEVNULL, stderr=log)
        try:
            for _ in range(100):
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                except OSError:
                    time.sleep(0.05)
            admin = AdminClient({"bootstrap.servers": bootstrap})
            admin.create_topics([NewTopic("rb", PARTITIONS, 1)])["rb"].result(30)
            results = {}
            for n in range(args.rounds):
                for protocol in ("classic", "consumer"):
                    r = run_round(bootstrap, protocol, n)
                    for scenario, secs in r.items():
                        results.setdefault((protocol, scenario), []).append(secs)
                        print("%-8s %-6s round %d: %.2f s" % (protocol, scenario, n, secs), flush=True)
            print("medians (s):")
            for scenario in ("first", "join", "leave"):
                c = statistics.median(results[("classic", scenario)])
                k = statistics.median(results[("consumer", scenario)])
                print("  %-6s classic %.2f  consumer %.2f  consumer/classic %.2f" % (scenario, c, k, k / c))
        finally:
            broker.terminate()
            broker.wait(30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
