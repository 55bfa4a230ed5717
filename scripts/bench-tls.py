#!/usr/bin/env python3
"""Produce throughput over TLS against plaintext, side by side in one run, and the cost of a
TLS handshake.

One broker with a PLAINTEXT and an SSL listener (certificates made here, as the tests make
them); a librdkafka producer (acks=all, 1 KiB records, linger 5 ms) sends for SECONDS on each
listener in turn, ROUNDS times; the medians and their ratio are printed. Then HANDSHAKES TLS
connections are opened and closed one after another: the median and p99 of connect plus
handshake, against a plain TCP connect.

  target/venv/bin/python scripts/bench-tls.py [--rounds 3] [--seconds 5] [--handshakes 200]

Runs with TIDEMARK_BIN (default target/release/tidemark) on fresh ports and data."""
import argparse
import os
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "clients"))
from certs import Authority  # noqa: E402
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

BIN = os.environ.get("TIDEMARK_BIN", os.path.join(os.path.dirname(__file__), "..", "target", "release", "tidemark"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def produce(conf, seconds):
    p = Producer(dict(conf, **{"acks": "all", "linger.ms": 5, "queue.buffering.max.kbytes": 65536}))
    value = b"x" * 1024
    sent = 0
    start = time.time()
    while time.time() - start < seconds:
        try:
            p.produce("bench-tls", value=value)
            sent += 1
        except BufferError:
            p.poll(0.001)
    p.flush(60)
    return sent * len(value) / (time.time() - start) / 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--handshakes", type=int, default=200)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        ca = Authority(d)
        plain, tls = free_port(), free_port()
        broker = subprocess.Popen([BIN, "serve", "--data-dir", os.path.join(d, "data"), "--set",
                                   "listeners=PLAINTEXT://127.0.0.1:%d,SSL://127.0.0.1:%d" % (plain, tls),
                                   "--set", "ssl.keystore.location=" + ca.broker()],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(100):
                try:
                    socket.create_connection(("127.0.0.1", plain), timeout=0.2).close()
                    break
                except OSError:
                    time.sleep(0.1)
            plain_conf = {"bootstrap.servers": "127.0.0.1:%d" % plain}
            tls_conf = {"bootstrap.servers": "127.0.0.1:%d" % tls, "security.protocol": "SSL",
                        "ssl.ca.location": ca.ca_file}
            admin = AdminClient(plain_conf)
            admin.create_topics([NewTopic("bench-tls", 8, 1)])["bench-tls"].result(30)
            rates = {"plaintext": [], "tls": []}
            for _ in range(a.rounds):
                rates["plaintext"].append(produce(plain_conf, a.seconds))
                rates["tls"].append(produce(tls_conf, a.seconds))
            p, t = statistics.median(rates["plaintext"]), statistics.median(rates["tls"])
            print("produce, acks=all, 1 KiB, %d rounds x %.0f s: plaintext %.1f MB/s, TLS %.1f MB/s, TLS/plaintext %.3f"
                  % (a.rounds, a.seconds, p, t, t / p))
            print("  per round: plaintext %s; TLS %s" % (["%.1f" % x for x in rates["plaintext"]],
                                                       ["%.1f" % x for x in rates["tls"]]))
            ctx = ssl.create_default_context(cafile=ca.ca_file)
            tcp, hs = [], []
            for _ in range(a.handshakes):
                t0 = time.perf_counter()
                socket.create_connection(("127.0.0.1", plain)).close()
                tcp.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                with socket.create_connection(("127.0.0.1", tls)) as s:
                    with ctx.wrap_socket(s, server_hostname="localhost"):
                        pass
                hs.append(time.perf_counter() - t0)
            q = lambda xs, f: sorted(xs)[min(len(xs) - 1, int(len(xs) * f))] * 1e3
            print("connect: TCP median %.3f ms; TCP + TLS handshake median %.3f ms, p99 %.3f ms (%d each)"
                  % (q(tcp, 0.5), q(hs, 0.5), q(hs, 0.99), a.handshakes))
        finally:
            broker.terminate()
            broker.wait(30)


if __name__ == "__main__":
    main()
