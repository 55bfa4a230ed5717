"""Transactions (KIP-98) against the real binary: confluent-kafka (librdkafka) and kafka-python
transactional producers (InitProducerId with a transactional.id, AddPartitionsToTxn,
AddOffsetsToTxn, TxnOffsetCommit, EndTxn), read_committed consumers (Fetch up to the last
stable offset, with the aborted transactions of the range to drop), zombie fencing, the
coordinator's timeout aborts, restarts (clean and kill -9) with open, committed and aborted
transactions in the log, and the admin views (ListTransactions, DescribeTransactions).

Topics have 4 partitions wherever markers matter: the broker runs one shard per core (2 in
these runs) and spreads a topic's partitions over them, so the markers of one EndTxn cross
shards. Every check compares exact record sets (partition, offset, value), not counts: a
partition's offsets show where each control record sits (one per partition per transaction),
though no client ever returns one."""
import signal
import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from test_clients import TIMEOUT, create, produce

PARTS = 4
# The coordinator's sweep for timed-out transactions (Kafka's default is 10 s).
QUICK_ABORTS = ("--set", "transaction.abort.timed.out.transaction.cleanup.interval.ms=500")


def txn_producer(bootstrap, tid, **conf):
    """A confluent-kafka transactional producer, its InitProducerId done."""
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 5, **conf})
    p.init_transactions(TIMEOUT)
    return p


def send(p, topic, values, partition):
    """Produce the values to one partition (delivery errors collected into the returned list,
    checked by the caller after a flush)."""
    errors = []
    for v in values:
        p.produce(topic, value=v, partition=partition, on_delivery=lambda e, m: e is not None and errors.append(e))
    return errors


def run_txn(p, topic, tag, per_partition, commit=True, partitions=range(PARTS)):
    """One transaction writing per_partition values b"<tag>-<partition>-<i>" to each partition,
    flushed (so that every record is in the log) and then committed or aborted. Returns
    {partition: [values]}."""
    p.begin_transaction()
    written, errors = {}, []
    for part in partitions:
        written[part] = [b"%s-%d-%d" % (tag.encode(), part, i) for i in range(per_partition)]
        errors += send(p, topic, written[part], part)
    assert p.flush(TIMEOUT) == 0
    assert errors == [], errors[:3]
    if commit:
        p.commit_transaction(TIMEOUT)
    else:
        p.abort_transaction(TIMEOUT)
    return written


def end_offsets(bootstrap, topic, isolation="read_uncommitted", partitions=range(PARTS)):
    """ListOffsets(latest) per partition: the high watermark, or under read_committed the last
    stable offset."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "isolation.level": isolation})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), TIMEOUT, cached=False)[1] for p in partitions}
    finally:
        c.close()


def read_to_end(bootstrap, topic, isolation, partitions=range(PARTS), timeout=TIMEOUT, keys=False):
    """Every record a consumer with this isolation level gets from the start of each partition
    until it reports the end of the partition at the high watermark taken now (for
    read_committed: the last stable offset has reached it, no transaction is open there any
    more), as {partition: [(offset, value)]} ((offset, key, value) with keys). Fails after
    timeout with what was read."""
    hw = end_offsets(bootstrap, topic, partitions=partitions)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "isolation.level": isolation,
                  "enable.partition.eof": True, "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, p, 0) for p in partitions])
    got = {p: [] for p in partitions}
    eof = {}
    deadline = time.time() + timeout
    try:
        while time.time() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error() is not None:
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                eof[m.partition()] = m.offset()
            else:
                got[m.partition()].append((m.offset(), m.key(), m.value()) if keys else (m.offset(), m.value()))
                eof.pop(m.partition(), None)
            if all(eof.get(p, -1) >= hw[p] for p in partitions):
                return got
    finally:
        c.close()
    raise AssertionError("%s: no end reached within %d s: high watermarks %s, ends seen %s, read %s" % (
        isolation, timeout, hw, eof, {p: len(v) for p, v in got.items()}))


def values(got):
    return {p: [v for _, v in recs] for p, recs in got.items()}


def offsets(got):
    return {p: [o for o, _ in recs] for p, recs in got.items()}


def concat(*written):
    """{partition: values} of several transactions, in order."""
    out = {}
    for w in written:
        for p, vs in w.items():
            out.setdefault(p, []).extend(vs)
    return out


def fenced(err):
    """A fatal error of a producer fenced by a newer epoch of its transactional id."""
    return err.fatal() or err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                         KafkaError.INVALID_PRODUCER_EPOCH)


def test_commit_abort_commit_read_committed_and_uncommitted(broker):
    """confluent-kafka: a committed, an aborted (its records flushed into the log first) and a
    committed transaction, each over 4 partitions on both shards. read_committed gets exactly
    the two committed transactions' records, in produce order per partition; read_uncommitted
    gets all three; and the offsets each skips are exactly one control record per partition
    per transaction (5 data records, then the marker: offsets 0-4, 6-10, 12-16, end 18),
    never returned as a record."""
    b = broker.bootstrap
    create(b, "txn-basic", partitions=PARTS)
    p = txn_producer(b, "txn-basic-id")
    c1 = run_txn(p, "txn-basic", "c1", 5)
    a2 = run_txn(p, "txn-basic", "a2", 5, commit=False)
    c3 = run_txn(p, "txn-basic", "c3", 5)
    committed = read_to_end(b, "txn-basic", "read_committed")
    assert values(committed) == concat(c1, c3)
    assert offsets(committed) == {q: list(range(0, 5)) + list(range(12, 17)) for q in range(PARTS)}
    everything = read_to_end(b, "txn-basic", "read_uncommitted")
    assert values(everything) == concat(c1, a2, c3)
    assert offsets(everything) == {q: list(range(0, 5)) + list(range(6, 11)) + list(range(12, 17)) for q in range(PARTS)}
    assert end_offsets(b, "txn-basic") == {q: 18 for q in range(PARTS)}
    assert end_offsets(b, "txn-basic", "read_committed") == {q: 18 for q in range(PARTS)}


def test_consume_transform_produce_with_offsets_in_the_transaction(broker):
    """The exactly-once loop: a read_committed group member (no auto commit) reads batches of
    a prefilled 4-partition input; each batch's transformed records go to the output and the
    member's positions to the group (send_offsets_to_transaction: AddOffsetsToTxn,
    TxnOffsetCommit) in one transaction. The third round is aborted after its records were
    flushed: the group's offsets are still those of the round before, and the member seeks
back to them. At the end the
    group's committed offsets are the input's end offsets, read_committed output holds every
    input record exactly once, in input order per partition, and read_uncommitted shows the
    aborted round's records on top (so the abort had something to drop)."""
    b = broker.bootstrap
    per_partition = 60
    create(b, "ctp-in", partitions=PARTS)
    create(b, "ctp-out", partitions=PARTS)
    for q in range(PARTS):
        reports = produce(b, "ctp-in", [(None, b"in-%d-%d" % (q, i), None) for i in range(per_partition)], partition=q)
        assert all(err is None for err, _ in reports)
    consumer = Consumer({"bootstrap.servers": b, "group.id": "g-ctp", "enable.auto.commit": False,
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                         "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    consumer.subscribe(["ctp-in"])
    producer = txn_producer(b, "ctp-txn")
    rounds, aborted, done = 0, [], {q: 0 for q in range(PARTS)}
    deadline = time.time() + 60
    while any(done[q] < per_partition for q in range(PARTS)):
        assert time.time() < deadline, "the loop did not finish: committed %s" % done
        batch = [m for m in consumer.consume(num_messages=25, timeout=0.5) if m.error() is None]
        if not batch:
            continue
        rounds += 1
        producer.begin_transaction()
        errors = []
        for m in batch:
            producer.produce("ctp-out", value=b"out:" + m.value(), partition=m.partition(),
                             on_delivery=lambda e, _m: e is not None and errors.append(e))
        positions = consumer.position(consumer.assignment())
        producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), TIMEOUT)
        assert producer.flush(TIMEOUT) == 0 and errors == [], errors[:3]
        if rounds == 3:
            producer.abort_transaction(TIMEOUT)
            aborted += [(m.partition(), b"out:" + m.value()) for m in batch]
            # Back to what the group committed: the aborted round's offsets must not count.
            committed = consumer.committed(consumer.assignment(), TIMEOUT)
            assert {tp.partition: tp.offset for tp in committed if tp.offset >= 0} == \
                {q: o for q, o in done.items() if o > 0}, "the group's offsets are those of the last commit"
            for tp in committed:
                consumer.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else 0))
        else:
            producer.commit_transaction(TIMEOUT)
            for tp in positions:
                if tp.offset >= 0:
                    done[tp.partition] = tp.offset
    assert rounds > 3 and aborted, "the aborted round happened and left records"
    committed = consumer.committed([TopicPartition("ctp-in", q) for q in range(PARTS)], TIMEOUT)
    consumer.close()
    assert {tp.partition: tp.offset for tp in committed} == {q: per_partition for q in range(PARTS)}
    # A fresh member of the group reads the same committed offsets.
    probe = Consumer({"bootstrap.servers": b, "group.id": "g-ctp", "isolation.level": "read_committed"})
    again = probe.committed([TopicPartition("ctp-in", q) for q in range(PARTS)], TIMEOUT)
    probe.close()
    assert {tp.partition: tp.offset for tp in again} == {q: per_partition for q in range(PARTS)}
    want = {q: [b"out:in-%d-%d" % (q, i) for i in range(per_partition)] for q in range(PARTS)}
    assert values(read_to_end(b, "ctp-out", "read_committed")) == want
    everything = read_to_end(b, "ctp-out", "read_uncommitted")
    extra = sorted((q, v) for q, vs in values(everything).items() for v in vs)
    for q, vs in want.items():
        for v in vs:
            extra.remove((q, v))
    assert extra == sorted(aborted)


def test_zombie_producer_is_fenced(broker):
    """Producer A (transactional.id X) begins a transaction and writes 5 records to each of 2
    partitions (flushed), and a plain producer appends 3 more to partition 0: while A's
    transaction is open the last stable offset stays at its first record (read_committed ends
    at 0, sees nothing). Producer B with the same id calls init_transactions: the broker aborts
    A's transaction (one marker per partition) and bumps the epoch; A's commit then fails
    fenced (fatal). B's own transaction commits. read_committed sees the plain records and
    B's, never A's."""
    b = broker.bootstrap
    create(b, "zombie", partitions=2)
    a = txn_producer(b, "zombie-id")
    a.begin_transaction()
    a_written = {q: [b"a-%d-%d" % (q, i) for i in range(5)] for q in range(2)}
    errors = sum((send(a, "zombie", a_written[q], q) for q in range(2)), [])
    assert a.flush(TIMEOUT) == 0 and errors == []
    plain = [b"plain-%d" % i for i in range(3)]
    assert all(err is None for err, _ in produce(b, "zombie", [(None, v, None) for v in plain], partition=0))
    assert end_offsets(b, "zombie", partitions=range(2)) == {0: 8, 1: 5}
    assert end_offsets(b, "zombie", "read_committed", partitions=range(2)) == {0: 0, 1: 0}
    c = Consumer({"bootstrap.servers": b, "group.id": "unused", "isolation.level": "read_committed",
                  "enable.partition.eof": True})
    c.assign([TopicPartition("zombie", q, 0) for q in range(2)])
    seen, eofs, deadline = [], set(), time.time() + TIMEOUT
    while len(eofs) < 2 and time.time() < deadline:
        m = c.poll(0.2)
        if m is not None:
            if m.error() is None:
                seen.append(m.value())
            elif m.error().code() == KafkaError._PARTITION_EOF:
                eofs.add(m.partition())
    c.close()
    assert eofs == {0, 1} and seen == [], "an open transaction's records (and what follows) stay invisible"

    bp = txn_producer(b, "zombie-id")  # fences A and aborts its transaction
    with pytest.raises(KafkaException) as e:
        a.commit_transaction(TIMEOUT)
    assert fenced(e.value.args[0]), e.value.args[0]
    b_written = run_txn(bp, "zombie", "b", 4, partitions=range(2))
    committed = read_to_end(b, "zombie", "read_committed", partitions=range(2))
    assert values(committed) == {0: plain + b_written[0], 1: b_written[1]}
    # Offsets: A's 5 records, (plain's 3 on partition 0), A's abort marker, B's 4, B's commit marker.
    assert offsets(committed) == {0: [5, 6, 7, 9, 10, 11, 12], 1: [6, 7, 8, 9]}
    everything = read_to_end(b, "zombie", "read_uncommitted", partitions=range(2))
    assert values(everything) == {0: a_written[0] + plain + b_written[0], 1: a_written[1] + b_written[1]}
    assert end_offsets(b, "zombie", partitions=range(2)) == {0: 14, 1: 11}


def test_timed_out_transaction_is_aborted(start_broker):
    """A producer with transaction.timeout.ms=2000 commits one transaction, then begins another,
    writes 5 records to each of 2 partitions (flushed) and goes quiet; a plain producer appends
    to partition 0 after them. With the coordinator's sweep every 500 ms the open transaction
    is aborted: within 20 s a read_committed consumer reaches the end of both partitions (the
    last stable offset went past the abandoned records) and has the committed transaction and
    the plain records, none of the abandoned ones. The producer's late commit fails."""
    broker = start_broker(*QUICK_ABORTS)
    b = broker.bootstrap
    create(b, "timeout", partitions=2)
    p = txn_producer(b, "timeout-id", **{"transaction.timeout.ms": 2000})
    first = run_txn(p, "timeout", "ok", 3, partitions=range(2))
    p.begin_transaction()
    lost = {q: [b"lost-%d-%d" % (q, i) for i in range(5)] for q in range(2)}
    errors = sum((send(p, "timeout", lost[q], q) for q in range(2)), [])
    assert p.flush(TIMEOUT) == 0 and errors == []
    plain = [b"after-%d" % i for i in range(4)]
    assert all(err is None for err, _ in produce(b, "timeout", [(None, v, None) for v in plain], partition=0))
    committed = read_to_end(b, "timeout", "read_committed", partitions=range(2), timeout=20)
    assert values(committed) == {0: first[0] + plain, 1: first[1]}
    # ok 0-2, commit marker 3, lost 4-8, (after 9-12 on partition 0), abort marker.
    assert end_offsets(b, "timeout", partitions=range(2)) == {0: 14, 1: 10}
    with pytest.raises(KafkaException):
        p.commit_transaction(TIMEOUT)
    assert values(read_to_end(b, "timeout", "read_committed", partitions=range(2))) == {0: first[0] + plain, 1: first[1]}
    assert values(read_to_end(b, "timeout", "read_uncommitted", partitions=range(2))) == \
        {0: first[0] + lost[0] + plain, 1: first[1] + lost[1]}


def test_kafka_python_transactional_producer(broker):
    """kafka-python's transactional producer (init_transactions, begin_transaction, send,
    commit_transaction, abort_transaction) over 4 partitions, and kafka-python consumers: with
    isolation_level='read_committed' the committed transactions' records only, in order; with
    read_uncommitted the aborted one's too."""
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTP
    b = broker.bootstrap
    create(b, "kp-txn", partitions=PARTS)
    kp = KafkaProducer(bootstrap_servers=b, transactional_id="kp-txn-id", enable_idempotence=True, acks="all")
    kp.init_transactions()
    written = []
    for tag, commit in (("k1", True), ("k2", False), ("k3", True)):
        kp.begin_transaction()
        w = {q: [b"%s-%d-%d" % (tag.encode(), q, i) for i in range(4)] for q in range(PARTS)}
        futures = [kp.send("kp-txn", value=v, partition=q) for q in range(PARTS) for v in w[q]]
        kp.flush(timeout=TIMEOUT)
        for f in futures:
            f.get(timeout=TIMEOUT)
        (kp.commit_transaction if commit else kp.abort_transaction)()
        written.append((w, commit))
    kp.close(timeout=TIMEOUT)

    def read(isolation):
        kc = KafkaConsumer(bootstrap_servers=b, isolation_level=isolation, enable_auto_commit=False,
                           auto_offset_reset="earliest")
        tps = [KTP("kp-txn", q) for q in range(PARTS)]
        kc.assign(tps)
        kc.seek_to_beginning()
        ends = kc.end_offsets(tps)
        got = {q: [] for q in range(PARTS)}
        deadline = time.time() + TIMEOUT
        while any(kc.position(tp) < ends[tp] for tp in tps) and time.time() < deadline:
            for tp, msgs in kc.poll(timeout_ms=200).items():
                got[tp.partition] += [(m.offset, m.value) for m in msgs]
        kc.close()
        return ends, got

    ends, got = read("read_committed")
    assert {tp.partition: o for tp, o in ends.items()} == {q: 15 for q in range(PARTS)}
    assert values(got) == concat(*[w for w, commit in written if commit])
    assert offsets(got) == {q: [0, 1, 2, 3, 10, 11, 12, 13] for q in range(PARTS)}
    _, got = read("read_uncommitted")
    assert values(got) == concat(*[w for w, _ in written])
    # The confluent-kafka reader agrees.
    assert values(read_to_end(b, "kp-txn", "read_committed")) == concat(*[w for w, commit in written if commit])


# A transactional producer left open: it writes to every partition, flushes, says "ready" and
# waits to be killed (argv: bootstrap, transactional id, topic, records per partition, timeout).
ABANDONED = r"""
import sys
from confluent_kafka import Producer
bootstrap, tid, topic, n, timeout = sys.argv[1:]
p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "transaction.timeout.ms": int(timeout),
              "linger.ms": 5})
p.init_transactions(20)
p.begin_transaction()
for part in range(%d):
    for i in range(int(n)):
        p.produce(topic, value=b"open-%%d-%%d" %% (part, i), partition=part)
assert p.flush(20) == 0
print("ready", flush=True)
sys.stdin.read()
""" % PARTS


def abandoned_transaction(bootstrap, tid, topic, n, timeout_ms):
    """Run ABANDONED in a child process until its records are written, then kill it (-9)."""
    child = subprocess.Popen([sys.executable, "-c", ABANDONED, bootstrap, tid, topic, str(n), str(timeout_ms)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        line = child.stdout.readline()
        assert line == b"ready\n", line
    finally:
        child.kill()
        child.wait(10)
    return {q: [b"open-%d-%d" % (q, i) for i in range(n)] for q in range(PARTS)}


def test_kill9_restart_with_committed_and_open_transactions(start_broker):
    """A committed transaction over 4 partitions, then a transaction (timeout 8 s) left open by
    a producer that is killed, then plain records after it on every partition; the broker is
    killed (-9) and restarted on the same data. The coordinator state and the open transaction
    come back: read_committed ends at the open transaction's first record while it is still
    within its timeout (checked only if the restart was quick enough to leave time), then,
    once the reloaded transaction times out and is aborted (sweep every 500 ms), reaches the
    end of every partition with exactly the committed and the plain records, none of the open
    ones."""
    broker = start_broker(*QUICK_ABORTS)
    b = broker.bootstrap
    create(b, "crash-txn", partitions=PARTS)
    p = txn_producer(b, "crash-committed")
    committed_txn = run_txn(p, "crash-txn", "c", 5)
    begun = time.time()
    open_txn = abandoned_transaction(b, "crash-open", "crash-txn", 4, 8000)
    plain = {q: [b"plain-%d-%d" % (q, i) for i in range(3)] for q in range(PARTS)}
    for q in range(PARTS):
        assert all(err is None for err, _ in produce(b, "crash-txn", [(None, v, None) for v in plain[q]], partition=q))
    broker.stop(signal.SIGKILL)
    broker.start(*QUICK_ABORTS)
    if time.time() - begun < 5:
        # c 0-4, commit marker 5, open 6-9: the stable end is held at 6.
        assert end_offsets(b, "crash-txn", "read_committed") == {q: 6 for q in range(PARTS)}
    got = read_to_end(b, "crash-txn", "read_committed", timeout=30)
    assert values(got) == concat(committed_txn, plain)
    assert offsets(got) == {q: [0, 1, 2, 3, 4, 10, 11, 12] for q in range(PARTS)}
    assert values(read_to_end(b, "crash-txn", "read_uncommitted")) == concat(committed_txn, open_txn, plain)
    assert end_offsets(b, "crash-txn") == {q: 14 for q in range(PARTS)}
    # The committed transaction's producer goes on after the restart.
    more = run_txn(p, "crash-txn", "m", 2)
    assert values(read_to_end(b, "crash-txn", "read_committed")) == concat(committed_txn, plain, more)


def test_aborted_transactions_survive_restarts(broker):
    """Committed and aborted transactions alternating over 4 partitions of a topic with 1 KiB
    segments: the first five (6 records of 150+ bytes each) fill a segment apiece, so their
    aborted transactions sit in sealed segments with .txnindex files; the last two (2 records,
    aborted, then committed) stay in the active segment. Then a clean restart (SIGTERM) and a
    kill -9 restart: after each, read_committed gets exactly the committed records at the same
    offsets (the aborted transactions come back from the persisted index and from replay),
    read_uncommitted all of them, and a read_committed fetch from the middle of the log
    filters the same way."""
    b = broker.bootstrap
    create(b, "persist-txn", partitions=PARTS, config={"segment.bytes": "1024"})
    p = txn_producer(b, "persist-id")
    pad = b"x" * 150
    plan = [(6, True), (6, False), (6, True), (6, False), (6, True), (2, False), (2, True)]
    txns, want_offsets, next_offset = [], [], 0
    for k, (n, commit) in enumerate(plan):
        p.begin_transaction()
        w = {q: [b"t%d-%d-%d-" % (k, q, i) + pad for i in range(n)] for q in range(PARTS)}
        errors = sum((send(p, "persist-txn", w[q], q) for q in range(PARTS)), [])
        assert p.flush(TIMEOUT) == 0 and errors == []
        (p.commit_transaction if commit else p.abort_transaction)(TIMEOUT)
        txns.append((w, commit))
        if commit:
            want_offsets += range(next_offset, next_offset + n)
        next_offset += n + 1  # the records, then the marker
    want_committed = concat(*[w for w, commit in txns if commit])
    want_all = concat(*[w for w, _ in txns])
    before_c = read_to_end(b, "persist-txn", "read_committed")
    before_u = read_to_end(b, "persist-txn", "read_uncommitted")
    assert values(before_c) == want_committed
    assert values(before_u) == want_all
    assert offsets(before_c) == {q: want_offsets for q in range(PARTS)}
    assert end_offsets(b, "persist-txn", "read_committed") == {q: next_offset for q in range(PARTS)}
    for sig in (signal.SIGTERM, signal.SIGKILL):
        broker.stop(sig)
        broker.start()
        assert read_to_end(b, "persist-txn", "read_committed") == before_c, sig
        assert read_to_end(b, "persist-txn", "read_uncommitted") == before_u, sig
        assert end_offsets(b, "persist-txn", "read_committed") == {q: next_offset for q in range(PARTS)}, sig
    # From offset 8 (inside the first aborted transaction, 7-12) on.
    c = Consumer({"bootstrap.servers": b, "group.id": "unused", "isolation.level": "read_committed",
                  "enable.partition.eof": True})
    c.assign([TopicPartition("persist-txn", 0, 8)])
    got, deadline = [], time.time() + TIMEOUT
    while time.time() < deadline:
        m = c.poll(0.2)
        if m is None:
            continue
        if m.error() is not None:
            assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
            break
        got.append(m.offset())
    c.close()
    assert got == [o for o in want_offsets if o >= 8]


def test_admin_list_and_describe_transactions(broker):
    """ListTransactions and DescribeTransactions through kafka-python's admin client
    (confluent-kafka 2.16's Python AdminClient has neither): an open transaction over 2
    partitions is listed as Ongoing with its producer id and described with its partitions and
    timeout; after its commit it is CompleteCommit with no partitions and no longer in an
    Ongoing listing; an unknown id is TRANSACTIONAL_ID_NOT_FOUND."""
    from kafka import TopicPartition as KTP
    from kafka.admin import KafkaAdminClient
    from kafka.errors import TransactionalIdNotFoundError
    b = broker.bootstrap
    create(b, "desc-txn", partitions=2)
    p = txn_producer(b, "desc-id", **{"transaction.timeout.ms": 45000})
    p.begin_transaction()
    errors = send(p, "desc-txn", [b"d0"], 0) + send(p, "desc-txn", [b"d1"], 1)
    assert p.flush(TIMEOUT) == 0 and errors == []
    admin = KafkaAdminClient(bootstrap_servers=b)
    try:
        listed = [t for ts in admin.list_transactions().values() for t in ts]
        mine = [t for t in listed if t.transactional_id == "desc-id"]
        assert len(mine) == 1 and mine[0].state.value == "Ongoing", listed
        d = admin.describe_transactions(["desc-id"])["desc-id"]
        assert d.state.value == "Ongoing"
        assert d.producer_id == mine[0].producer_id and d.producer_id >= 0
        assert d.transaction_timeout_ms == 45000
        assert d.topic_partitions == {KTP("desc-txn", 0), KTP("desc-txn", 1)}
        assert d.transaction_start_time_ms > 0
        p.commit_transaction(TIMEOUT)
        deadline = time.time() + TIMEOUT
        while True:
            d = admin.describe_transactions(["desc-id"])["desc-id"]
            if d.state.value == "CompleteCommit" or time.time() > deadline:
                break
            assert d.state.value == "PrepareCommit", d
            time.sleep(0.1)
        assert d.state.value == "CompleteCommit" and d.topic_partitions == set(), d
        ongoing = [t for ts in admin.list_transactions(state_filters=["Ongoing"]).values() for t in ts]
        assert "desc-id" not in [t.transactional_id for t in ongoing]
        listed = [t for ts in admin.list_transactions().values() for t in ts]
        assert [t.state.value for t in listed if t.transactional_id == "desc-id"] == ["CompleteCommit"]
        with pytest.raises(TransactionalIdNotFoundError):
            admin.describe_transactions(["no-such-id"])
    finally:
        admin.close()
