"""Disk faults injected into the real broker (issue 8), through `serve --fault-injection`: the
metrics endpoint then takes rules at /faults that fail DMA operations on matching paths (EIO,
ENOSPC, short writes, slow I/O; src/io/faults.rs).

What every test checks: the partition whose disk fails answers KAFKA_STORAGE_ERROR (56) and
acknowledges nothing it has not made durable; what it had made durable stays readable; other
partitions keep serving, also to a real client; once the fault is gone, writes resume on their
own and every acknowledged record is there once, at its offset.
"""
import os
import select
import time

import pytest

from conftest import Broker
from test_bad_input import (NONE, PRODUCE, Conn, R, assert_healthy, fetch, parse_produce, produce, produce_body,
                            v2_batch, v2_values)
from test_clients import create

KAFKA_STORAGE_ERROR = 56
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
