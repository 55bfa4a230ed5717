"""Limits on what clients can make the broker hold (docs/operations.md): connections per
broker and per client address, requests in flight per connection, memory for requests read
and not yet answered (`queued.max.request.bytes`) and for fetched records (`fetch.max.bytes`,
`tidemark.fetch.max.memory.bytes`), idle connections (`connections.max.idle.ms`). Past a
limit: a closed connection with one log line, or waiting (TCP backpressure); never a crash,
never unbounded memory; everyone else keeps being served.
"""
import os
import socket
import struct
import threading
import time

from test_bad_input import (API_VERSIONS, NONE, PRODUCE, Conn, R, assert_closed, assert_healthy, fetch,
                            parse_produce, produce, produce_body, v2_batch, v2_values)
from test_clients import create

WAIT = 5.0


def connect(broker, source="127.0.0.1"):
    """A raw connection from the loopback address `source` (all of 127/8 is local)."""
    c = Conn.__new__(Conn)
    c.sock = socket.create_connection(("127.0.0.1", broker.port), timeout=WAIT, source_address=(source, 0))
    c.corr = 1000
    return c


def answers(c):
    """True when the connection answers an ApiVersions v2 request."""
    try:
        r = c.call(API_VERSIONS, 2, b"")
        return r.i16() == NONE
    except (ConnectionError, OSError, AssertionError, struct.error):
        return False


def open_answering(broker, sources):
    """A connection from each of `sources`, each answering. Retried for a few seconds: the
    broker frees the place of a closed connection (such as the startup probe's) only once it
    has seen the close."""
    deadline = time.time() + WAIT
    while True:
        conns = [connect(broker, s) for s in sources]
        if all(answers(c) for c in conns):
            return conns
        for c in conns:
            c.close()
        assert time.time() < deadline, "connections from %s were not all served" % sources
        time.sleep(0.1)


def log_text(broker):
    with open(os.path.join(broker.data_dir, "broker.log"), "rb") as f:
        return f.read().decode(errors="replace")


def test_connections_per_ip(start_broker):
    """max.connections.per.ip=4: four connections from 127.0.0.1 are served, a fifth is closed
    without an answer, while 127.0.0.2 is still served (the limit is per address); once one of
    the four closes, 127.0.0.1 connects again. The refusal is logged with its reason."""
    b = start_broker("--set", "max.connections.per.ip=4")
    held = open_answering(b, ["127.0.0.1"] * 4)
    try:
        with connect(b) as extra:
            extra.send(extra.request(API_VERSIONS, 2, b""))
            assert_closed(extra, "a fifth connection from 127.0.0.1")
        with connect(b, "127.0.0.2") as other:
            assert answers(other), "127.0.0.2 is under its own limit"
        held.pop().close()
        deadline = time.time() + WAIT
        while True:
            with connect(b) as again:
                if answers(again):
                    break
            assert time.time() < deadline, "no connection from 127.0.0.1 after one of the four closed"
            time.sleep(0.1)
    finally:
        for c in held:
            c.close()
    assert "max.connections.per.ip=4 reached" in log_text(b)
    assert_healthy(b)


def test_connections_per_broker(start_broker):
    """max.connections=3: two connections from 127.0.0.1 and one from 127.0.0.2 fill the broker;
    a fourth, from 127.0.0.3, is closed without an answer; after the others close, clients
    are served again."""
    b = start_broker("--set", "max.connections=3")
    held = open_answering(b, ["127.0.0.1", "127.0.0.1", "127.0.0.2"])
    try:
        with connect(b, "127.0.0.3") as extra:
            extra.send(extra.request(API_VERSIONS, 2, b""))
            assert_closed(extra, "a fourth connection to a broker with max.connections=3")
    finally:
        for c in held:
            c.close()
    assert "max.connections=3 reached" in log_text(b)
    deadline = time.time() + WAIT
    while time.time() < deadline:
        with connect(b, "127.0.0.3") as c:
            if answers(c):
                break
        time.sleep(0.1)
    assert_healthy(b)


def test_pipelined_requests_beyond_the_in_flight_limit(start_broker):
    """tidemark.max.inflight.requests.per.connection=2: 200 ApiVersions requests and then 100
    one-record Produce requests (acks=all), all sent at once on one connection, are all
    answered, in request order, and the records land at offsets 0-99 in the order sent."""
    b = start_broker("--set", "tidemark.max.inflight.requests.per.connection=2")
    create(b.bootstrap, "pipe")
    with Conn(b, timeout=30) as c:
        data = b"".join(c.request(API_VERSIONS, 2, b"", corr=i) for i in range(200))
        data += b"".join(c.request(PRODUCE, 8, produce_body([("pipe", [(0, v2_batch([b"p%d" % i]))])]), corr=200 + i)
                         for i in range(100))
        sender = threading.Thread(target=c.sock.sendall, args=(data,))
        sender.start()
        for i in range(300):
            corr, rest = c.recv_frame()
            assert corr == i, "answer %d has correlation id %d" % (i, corr)
            if i >= 200:
                assert parse_produce(R(rest), 8)["pipe", 0][:2] == (NONE, i - 200)
        sender.join(10)
        error, hw, records = fetch(c, "pipe", 0, 0)
        assert (error, v2_values(records)) == (NONE, [(i, b"p%d" % i) for i in range(100)])
    assert_healthy(b)


def test_request_memory_is_bounded_while_requests_wait(start_broker):
    """queued.max.request.bytes=1 MiB (half per shard on two shards) while fsyncs of partition
    mem-0 take 2 s each: 12 connections each send 5 Produce requests of 200 KiB (acks=all, 12
    MiB in all). While the first flush waits, the broker has read no more than its budget of
    request bytes (tidemark_bytes_in_total, summed over shards, stays under 1 MiB plus one
    frame): the rest wait in the clients' sockets. Meanwhile another connection is answered
    (ApiVersions) and fetching from another topic works. Once the disk is fast again, every
    request is answered without error and the 60 records are all in the log."""
    b = start_broker("--set", "queued.max.request.bytes=1048576", faults=True)
    create(b.bootstrap, "mem")
    create(b.bootstrap, "other")
    with Conn(b) as c:
        assert produce(c, [("other", [(0, v2_batch([b"o"]))])])["other", 0][:2] == (NONE, 0)
    b.inject(op="sync", fault="slow", ms=2000, path="/mem-0/")
    frame = 200 * 1024
    conns = [Conn(b, timeout=60) for _ in range(12)]
    senders = []
    try:
        for k, c in enumerate(conns):
            data = b"".join(c.request(PRODUCE, 8, produce_body([("mem", [(0, v2_batch([(b"%d-%d-" % (k, i)).ljust(frame, b"m")]))])]))
                            for i in range(5))
            t = threading.Thread(target=c.sock.sendall, args=(data,), daemon=True)
            t.start()
            senders.append(t)
        time.sleep(1.0)
        bytes_in = b.metric("bytes_in_total")
        assert bytes_in <= (1 << 20) + frame + 64 * 1024, "read %d request bytes with a 1 MiB budget" % bytes_in
        assert b.metric("request_memory_peak_bytes") <= 1 << 20
        with Conn(b) as other:
            assert answers(other), "another connection while request memory is full"
        # Fetch shares no budget with produce requests; the small fetch frame is read.
        with Conn(b) as other:
            assert fetch(other, "other", 0, 0)[0] == NONE
        b.heal()
        for k, c in enumerate(conns):
            for i in range(5):
                corr, rest = c.recv_frame()
                assert parse_produce(R(rest), 8)["mem", 0][0] == NONE, "connection %d request %d" % (k, i)
        for t in senders:
            t.join(10)
    finally:
        for c in conns:
            c.close()
    with Conn(b) as c:
        error, hw, _ = fetch(c, "mem", 0, 0, max_bytes=1024)
        assert (error, hw) == (NONE, 60)
    assert_healthy(b)


def test_fetch_memory_budget_serves_every_consumer(start_broker):
    """tidemark.fetch.max.memory.bytes=1 MiB (half per shard) and 3 partitions of 2 MiB each:
    8 connections each pipeline 6 long-poll Fetch requests (min_bytes 1, max_wait 10 s) for all
    three partitions (1 MiB per partition, 3 MiB per request), read back concurrently. Every
    request is answered without error and parses; every connection gets records (none
    starves: the budget is served in order and never deadlocks). Afterwards the budget is all
    given back and never held more than its capacity."""
    b = start_broker("--set", "tidemark.fetch.max.memory.bytes=1048576", faults=True)
    create(b.bootstrap, "big", partitions=3)
    value = b"v" * (100 * 1024)
    with Conn(b, timeout=30) as c:
        for p in range(3):
            for i in range(20):
                assert produce(c, [("big", [(p, v2_batch([value]))])])["big", p][0] == NONE
    topic = b"big"
    body = struct.pack(">iiiib", -1, 10_000, 1, 3 << 20, 0) + struct.pack(">i", 1) + struct.pack(">h", 3) + topic
    body += struct.pack(">i", 3) + b"".join(struct.pack(">iqi", p, 0, 1 << 20) for p in range(3))
    conns = [Conn(b, timeout=60) for _ in range(8)]
    received = [0] * len(conns)
    failures = []

    def read_all(k, c):
        try:
            for _ in range(6):
                corr, rest = c.recv_frame()
                r = R(rest)
                r.i32()
                assert r.i32() == 1 and r.string() == "big" and r.i32() == 3
                for _ in range(3):
                    r.i32()
                    assert r.i16() == NONE
                    r.i64(), r.i64()
                    for _ in range(max(r.i32(), 0)):
                        r.i64(), r.i64()
                    received[k] += len(v2_values(r.bytes() or b""))
                assert r.done()
        except Exception as e:  # reported below
            failures.append((k, e))

    try:
        readers = [threading.Thread(target=read_all, args=(k, c)) for k, c in enumerate(conns)]
        for c in conns:
            c.sock.sendall(b"".join(c.request(1, 4, body) for _ in range(6)))
        for t in readers:
            t.start()
        for t in readers:
            t.join(90)
    finally:
        for c in conns:
            c.close()
    assert not failures, failures
    assert all(n > 0 for n in received), "connections without records: %s" % received
    assert b.metric("fetch_memory_peak_bytes") <= 1 << 20
    deadline = time.time() + 5
    while b.metric("fetch_memory_bytes") != 0 and time.time() < deadline:
        time.sleep(0.1)
    assert b.metric("fetch_memory_bytes") == 0, "fetch memory given back once answers are written"
    assert_healthy(b)


def test_idle_connections_are_closed(start_broker):
    """connections.max.idle.ms=500: a connection that sends nothing, and one that sends half a
    request and stops, are both closed by the broker within a few seconds; a connection that
    keeps talking (one request every 200 ms for 2 s) stays open."""
    b = start_broker("--set", "connections.max.idle.ms=500")
    with Conn(b) as silent, Conn(b) as half, Conn(b) as chatty:
        half.send(half.request(API_VERSIONS, 2, b"")[:10])
        deadline = time.time() + 2
        while time.time() < deadline:
            assert answers(chatty)
            time.sleep(0.2)
        assert_closed(silent, "an idle connection", timeout=WAIT)
        assert_closed(half, "a connection stalled inside a request", timeout=WAIT)
        assert answers(chatty)
    assert_healthy(b)


def test_long_poll_never_waits_for_memory_held_behind_it(start_broker):
    """tidemark.fetch.max.memory.bytes=1 MiB (half per shard): on one connection, a long-poll
    Fetch (max_wait 1.5 s, min_bytes 100 MB: never satisfied) is followed by a plain Fetch of the
    same data. The second one's records hold the shard's fetch memory while its answer waits,
    in order, behind the first; the first, wanting memory again on its next pass, must give up
    at its own deadline (answering offsets only) instead of waiting for memory only the second
    can free. Both answers arrive, in order; a third connection is then served."""
    b = start_broker("--set", "tidemark.fetch.max.memory.bytes=1048576")
    create(b.bootstrap, "lp")
    with Conn(b, timeout=30) as c:
        for i in range(8):
            assert produce(c, [("lp", [(0, v2_batch([b"v" * (100 * 1024)]))])])["lp", 0][0] == NONE

        def fetch_body(max_wait, min_bytes):
            body = struct.pack(">iiiib", -1, max_wait, min_bytes, 4 << 20, 0) + struct.pack(">i", 1)
            body += struct.pack(">h", 2) + b"lp" + struct.pack(">i", 1) + struct.pack(">iqi", 0, 0, 1 << 20)
            return body

        c.sock.sendall(c.request(1, 4, fetch_body(1500, 100_000_000), corr=1) + c.request(1, 4, fetch_body(0, 0), corr=2))
        started = time.time()
        got = [c.recv_frame()[0], c.recv_frame()[0]]
        assert got == [1, 2], got
        assert time.time() - started < 20, "the answers took %.1f s" % (time.time() - started)
    with Conn(b) as other:
        assert answers(other)
    assert_healthy(b)
