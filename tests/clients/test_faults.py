"""Disk faults injected into the real broker, through `serve --fault-injection`: the
metrics endpoint then takes rules at /faults that fail DMA operations on matching paths (EIO,
ENOSPC, short writes, slow I/O; src/io/faults.rs).

What every test checks: the partition whose disk fails answers KAFKA_STORAGE_ERROR (56) and
acknowledges nothing it has not made durable; what it had made durable stays readable; other
partitions keep serving, also to a real client; once the fault is gone, writes resume on their
own and every acknowledged record is there once, at its offset.
"""
import os
import select
import signal
import time

import pytest

from conftest import Broker
from test_bad_input import (NONE, PRODUCE, Conn, R, assert_healthy, fetch, parse_produce, produce, produce_body,
                            v2_batch, v2_values)
from test_clients import create

KAFKA_STORAGE_ERROR = 56
REQUEST_TIMED_OUT = 7
RESUME_WITHIN = 20  # seconds: the retry backoff tops out at 2 s


@pytest.fixture
def faulty(start_broker):
    return start_broker(faults=True)


def produce_one(conn, topic, value):
    """(error code, base offset) of a Produce v8 (acks=all) of one record to partition 0."""
    return produce(conn, [(topic, [(0, v2_batch([value]))])])[topic, 0][:2]


def log_lines(broker, text):
    with open(os.path.join(broker.data_dir, "broker.log"), "rb") as f:
        return [line for line in f.read().decode(errors="replace").splitlines() if text in line]


@pytest.mark.parametrize("op,fault", [
    ("write", "enospc"), ("write", "eio"), ("write", "short"),
    ("sync", "eio"), ("sync", "enospc"), ("allocate", "enospc"),
])
def test_failing_disk_refuses_writes_keeps_reads_then_resumes(faulty, op, fault):
    """A fault on every `op` of partition fa-0 (count 0: until healed). Produce to fa answers
    KAFKA_STORAGE_ERROR, now and while the fault lasts (writes are suspended, no record is
    acknowledged); fa's three acknowledged records stay readable, with the high watermark at
    3; fb on the same broker takes records and a real client produces and consumes. The
    partitions_writes_suspended gauge shows fa. After DELETE /faults, produce to fa succeeds
    within 20 s without a restart; fa then holds its acknowledged records at their offsets,
    each once, contiguous offsets, and the refused records at most once each (a refused record
    was never acknowledged: it may have become durable later, as in Kafka). One error line in
    the log for the failure, however many retries, and one for the recovery."""
    # fa allocates in 4 KiB steps, so every flush that grows the file calls fallocate.
    create(faulty.bootstrap, "fa", config={"tidemark.preallocate.bytes": "4096"})
    create(faulty.bootstrap, "fb")
    acked = {}
    with Conn(faulty) as c:
        for i in range(3):
            assert produce_one(c, "fa", b"a%d" % i) == (NONE, i)
            assert produce_one(c, "fb", b"b%d" % i) == (NONE, i)
            acked[i] = b"a%d" % i
        faulty.inject(op=op, fault=fault, path="/fa-0/")
        refused = []
        for i in range(3):
            # 5000 bytes: each one crosses a 4 KiB page, so its flush allocates.
            value = (b"refused-%d-" % i).ljust(5000, b"x")
            refused.append(value)
            assert produce_one(c, "fa", value)[0] == KAFKA_STORAGE_ERROR, "produce %d while %s fails with %s" % (i, op, fault)
        assert faulty.metric("partitions_writes_suspended") == 1
        error, hw, records = fetch(c, "fa", 0, 0)
        assert (error, hw, v2_values(records)) == (NONE, 3, sorted(acked.items())), "fa's durable records"
        assert produce_one(c, "fb", b"b3") == (NONE, 3), "another partition while fa's disk fails"
        assert_healthy(faulty)

        faulty.heal()
        deadline = time.time() + RESUME_WITHIN
        while True:
            error, base = produce_one(c, "fa", b"after")
            if error == NONE:
                acked[base] = b"after"
                break
            assert error == KAFKA_STORAGE_ERROR, error
            assert time.time() < deadline, "writes to fa did not resume within %d s of the heal" % RESUME_WITHIN
            time.sleep(0.2)
        assert faulty.metric("partitions_writes_suspended") == 0
        error, hw, records = fetch(c, "fa", 0, 0)
        assert error == NONE
        got = v2_values(records)
        assert [o for o, _ in got] == list(range(hw)), "offsets are contiguous from 0"
        for offset, value in acked.items():
            assert got[offset] == (offset, value), "acknowledged %r at %d" % (value, offset)
        values = [v for _, v in got]
        assert set(values) <= set(acked.values()) | set(refused), values
        assert len(values) == len(set(values)), "a record twice: %s" % values
    assert len(log_lines(faulty, "flush failed; appends refused")) == 1, log_lines(faulty, "flush failed")
    assert len(log_lines(faulty, "flush succeeded again")) == 1
    assert_healthy(faulty)


def test_slow_fsync_delays_only_its_partition(faulty):
    """fdatasync of fa-0 takes 3 s (once). A Produce to fa (acks=all) sent first on one
    connection is answered after a Produce to fb sent next on another connection: a slow disk
    operation holds up only the partition that waits on it. Both succeed."""
    create(faulty.bootstrap, "fa")
    create(faulty.bootstrap, "fb")
    with Conn(faulty, timeout=15) as ca, Conn(faulty, timeout=15) as cb:
        assert produce_one(ca, "fa", b"warm") == (NONE, 0)
        faulty.inject(op="sync", fault="slow", ms=3000, path="/fa-0/", count=1)
        ca.sock.sendall(ca.request(PRODUCE, 8, produce_body([("fa", [(0, v2_batch([b"slow"]))])])))
        cb.sock.sendall(cb.request(PRODUCE, 8, produce_body([("fb", [(0, v2_batch([b"quick"]))])])))
        order = []
        deadline = time.time() + 15
        while len(order) < 2 and time.time() < deadline:
            ready, _, _ = select.select([s for s in (ca.sock, cb.sock) if s not in order], [], [], 1)
            order.extend(ready)
        assert order == [cb.sock, ca.sock], "fb must be answered before fa's slow fsync ends"
        for c, topic, value in ((ca, "fa", b"slow"), (cb, "fb", b"quick")):
            corr, rest = c.recv_frame()
            assert parse_produce(R(rest), 8)[topic, 0][:2] == (NONE, 1 if topic == "fa" else 0)
    assert_healthy(faulty)


def test_read_errors_fail_only_that_partition(faulty):
    """After a clean restart fa's records are read from disk. With reads of fa-0 failing (EIO),
    Fetch of fa answers KAFKA_STORAGE_ERROR while fb is read as before and a real client
    works; once healed, fa reads back whole. Nothing is lost; the broker never serves bytes it
    could not read."""
    create(faulty.bootstrap, "fa")
    create(faulty.bootstrap, "fb")
    with Conn(faulty) as c:
        for i in range(5):
            assert produce_one(c, "fa", b"a%d" % i) == (NONE, i)
            assert produce_one(c, "fb", b"b%d" % i) == (NONE, i)
    faulty.stop()
    faulty.start()
    faulty.inject(op="read", fault="eio", path="/fa-0/")
    with Conn(faulty) as c:
        error, hw, records = fetch(c, "fa", 0, 0)
        assert (error, records) == (KAFKA_STORAGE_ERROR, b""), "fetch of fa while its reads fail"
        error, hw, records = fetch(c, "fb", 0, 0)
        assert (error, v2_values(records)) == (NONE, [(i, b"b%d" % i) for i in range(5)])
        assert_healthy(faulty)
        faulty.heal()
        error, hw, records = fetch(c, "fa", 0, 0)
        assert (error, hw, v2_values(records)) == (NONE, 5, [(i, b"a%d" % i) for i in range(5)])
    assert log_lines(faulty, "read failed: KAFKA_STORAGE_ERROR"), "the failed read is logged"
    assert_healthy(faulty)


def test_fault_endpoint_needs_the_flag_and_checks_rules(faulty):
    """/faults refuses a bad rule with 400 and the reason; GET lists the rules in force. Without
    --fault-injection the endpoint does not exist (404), so a production broker cannot be made
    to fail by anyone reaching its metrics port."""
    status, body = faulty.http("POST", "/faults?op=fsync&fault=eio")
    assert status == 400 and "op=fsync" in body, body
    faulty.inject(op="read", fault="eio", path="/nothing-matches/", count=2)
    status, body = faulty.http("GET", "/faults")
    assert status == 200 and "nothing-matches" in body, body
    faulty.heal()
    assert faulty.http("GET", "/faults") == (200, "")
    faulty.stop()
    Broker.start(faulty, "--metrics-listen", "127.0.0.1:%d" % faulty.metrics_port)
    assert faulty.http("POST", "/faults?op=read&fault=eio")[0] == 404
    assert faulty.http("GET", "/metrics")[0] == 200


def wait_exit(broker, seconds=30):
    deadline = time.time() + seconds
    while broker.proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    return broker.proc.poll()


@pytest.mark.parametrize("victim", [0, 1])
def test_a_shard_that_dies_stops_the_broker_cleanly(faulty, victim):
    """A shard that panics after startup (here on purpose, through the fault endpoint) stops
    the whole broker with a clear message and a failing exit status, instead of leaving a
    half-alive process that hangs on calls to the dead shard; the other shards close their
    partitions cleanly; after a restart every acknowledged record is there once, at its
    offset."""
    create(faulty.bootstrap, "die", partitions=4)
    with Conn(faulty) as c:
        for p in range(4):
            for i in range(3):
                r = produce(c, [("die", [(p, v2_batch([b"%d-%d" % (p, i)]))])])
                assert r["die", p][:2] == (NONE, i)
    try:
        status, body = faulty.http("POST", "/faults/panic?shard=%d" % victim)
        assert status == 200, body
    except ConnectionError:
        assert victim == 0, "only shard 0, which serves the endpoint, may die before answering"
    code = wait_exit(faulty)
    assert code not in (None, 0), "the broker must stop, with an error status"
    log = faulty.log()
    assert "a shard stopped on its own; stopping the broker cleanly" in log, log
    assert "shard %d panicked after startup" % victim in log, log
    faulty.stop(signal.SIGKILL)  # already gone: only waits for the port
    # The intended panic stays in its own file; the restarted broker's log must have none.
    os.rename(os.path.join(faulty.data_dir, "broker.log"), os.path.join(faulty.data_dir, "broker-died.log"))
    faulty.start()
    with Conn(faulty) as c:
        for p in range(4):
            got = fetch(c, "die", p, 0)
            assert got[0] == NONE and v2_values(got[2]) == [(i, b"%d-%d" % (p, i)) for i in range(3)], (p, got)
    assert_healthy(faulty)


def test_a_call_past_its_deadline_is_request_timed_out(start_broker):
    """With tidemark.shard.call.timeout.ms=500, a produce whose fsync takes 3 s is answered
    REQUEST_TIMED_OUT (7) at the deadline with a log line, while the append itself is not
    cancelled: once the disk answers, the record is there, and the partition serves on."""
    b = start_broker("--set", "tidemark.shard.call.timeout.ms=500", faults=True)
    create(b.bootstrap, "slowp")
    with Conn(b, timeout=15) as c:
        assert produce_one(c, "slowp", b"warm") == (NONE, 0)
        b.inject(op="sync", fault="slow", ms=3000, path="/slowp-0/", count=1)
        started = time.time()
        assert produce_one(c, "slowp", b"late")[0] == REQUEST_TIMED_OUT
        assert time.time() - started < 2.5, "answered at the deadline, not after the disk"
        time.sleep(3)
        assert produce_one(c, "slowp", b"after") == (NONE, 2)
        got = fetch(c, "slowp", 0, 0)
        assert v2_values(got[2]) == [(0, b"warm"), (1, b"late"), (2, b"after")], got
    assert log_lines(b, "shard call timed out"), b.log()
    assert_healthy(b)
