"""Listeners configured with Kafka's names (`listeners`, `listener.security.protocol.map`,
`advertised.listeners`) on the real binary: each listener serves clients and advertises its
own address in Metadata and FindCoordinator; bad listener settings stop startup with a message
naming the setting."""
import subprocess
import tempfile
import time

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from conftest import BIN, free_port
from test_clients import TIMEOUT, create


def test_each_listener_advertises_its_own_address(start_broker):
    """Two listeners, PLAINTEXT and INTERNAL (mapped to PLAINTEXT), the second advertising
    `localhost`: Metadata through each names the broker at that listener's advertised address
    (and the first's at its own), and a producer and a consumer group work through the
    second."""
    internal = free_port()
    b = start_broker()
    b.stop()
    b.start("--set", "listeners=PLAINTEXT://%s,INTERNAL://127.0.0.1:%d" % (b.bootstrap, internal),
            "--set", "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
            "--set", "advertised.listeners=INTERNAL://localhost:%d" % internal)
    first = AdminClient({"bootstrap.servers": b.bootstrap}).list_topics(timeout=TIMEOUT)
    assert [(x.host, x.port) for x in first.brokers.values()] == [("127.0.0.1", b.port)]
    second_bootstrap = "localhost:%d" % internal
    second = AdminClient({"bootstrap.servers": second_bootstrap}).list_topics(timeout=TIMEOUT)
    assert [(x.host, x.port) for x in second.brokers.values()] == [("localhost", internal)]
    create(second_bootstrap, "via-internal", partitions=2)
    p = Producer({"bootstrap.servers": second_bootstrap})
    for i in range(10):
        p.produce("via-internal", value=b"%d" % i, partition=i % 2)
    assert p.flush(TIMEOUT) == 0
    c = Consumer({"bootstrap.servers": second_bootstrap, "group.id": "g-internal", "auto.offset.reset": "earliest"})
    c.subscribe(["via-internal"])
    seen = set()
    deadline = time.time() + TIMEOUT
    while time.time() < deadline and len(seen) < 10:
        m = c.poll(0.2)
        if m is not None and m.error() is None:
            seen.add(int(m.value()))
    c.close()
    assert seen == set(range(10))


def test_bad_listener_settings_stop_startup():
    """A listener name with no security protocol, two listeners on one port and an advertised
    listener that is not a listener each stop the broker before it serves, with the setting
    named and a non-zero exit."""
    port = free_port()
    cases = [
        (["listeners=CLIENT://127.0.0.1:%d" % port], "listener.security.protocol.map"),
        (["listeners=PLAINTEXT://127.0.0.1:%d,SSL://127.0.0.1:%d" % (port, port)], "share port"),
        (["listeners=PLAINTEXT://127.0.0.1:%d" % port, "advertised.listeners=OTHER://h:1"], "not one of the listeners"),
        (["listeners=PLAINTEXT//127.0.0.1:%d" % port], "NAME://host:port"),
    ]
    for settings, want in cases:
        with tempfile.TemporaryDirectory() as d:
            args = [BIN, "serve", "--data-dir", d]
            for s in settings:
                args += ["--set", s]
            r = subprocess.run(args, capture_output=True, text=True, timeout=60)
            assert r.returncode != 0 and want in r.stderr, (settings, r.returncode, r.stderr[-2000:])
