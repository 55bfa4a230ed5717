"""Log compaction (cleanup.policy=compact) against the real binary with real clients:
confluent-kafka (librdkafka) and kafka-python producers and consumers on compacted topics,
the cleaner's results (the last record of every key at the offset it was written at, gaps
between, tombstones kept until delete.retention.ms after the pass that first kept them,
aborted transactions' records removed, keyless records dropped), the produce refusals
(INVALID_RECORD for keyless records, with record errors per index), runtime policy changes
(IncrementalAlterConfigs APPEND/SUBTRACT), DeleteRecords' POLICY_VIOLATION, restarts
(kill -9) of a cleaned log, the cleaner's /metrics and idempotent producers whose batches were
cleaned away.

The cleaner only cleans sealed segments, never the active one nor the last segment file: the
topics here have small segments (segment.bytes=4096, segment.ms=100) and
min.cleanable.dirty.ratio=0.01, the brokers check every 100 ms (log.cleaner.backoff.ms), and
the waits keep writing a "tick" record (its own key) every 200 ms so that segments roll, until
the expected state is reached or a deadline passes."""
import signal
import time
import urllib.request

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
from kafka import KafkaAdminClient
from kafka import TopicPartition as KTopicPartition

from conftest import free_port
from test_clients import TIMEOUT, create
from test_transactions import end_offsets, read_to_end, txn_producer

# How long a wait for the cleaner may take (it usually takes 1-3 s).
CLEAN_WAIT = 30
TICK = b"tick"
# A compacted topic whose segments roll at once, cleaned as soon as anything is dirty.
COMPACT = {"cleanup.policy": "compact", "segment.bytes": "4096", "segment.ms": "100",
           "min.cleanable.dirty.ratio": "0.01"}


def cleaning_broker(start_broker, *extra):
    """A broker whose cleaner checks every 100 ms, with /metrics on its own port; `b.args` are
    its serve arguments (for restarts), `b.metrics_port` the metrics port."""
    port = free_port()
    args = ("--metrics-listen", "127.0.0.1:%d" % port, "--set", "log.cleaner.backoff.ms=100", *extra)
    b = start_broker(*args)
    b.metrics_port, b.args = port, args
    return b


def metrics(b):
    """{series: value} of every tidemark_* line at /metrics."""
    text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % b.metrics_port, timeout=10).read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("tidemark_"):
            series, value = line.rsplit(" ", 1)
            out[series] = float(value)
    return out


def metric(b, name):
    """The sum over shards of one tidemark_<name> series."""
    values = [v for s, v in metrics(b).items() if s.startswith("tidemark_%s{" % name)]
    assert values, "no tidemark_%s at /metrics" % name
    return sum(values)


def read_log(bootstrap, topic, partition=0, isolation="read_uncommitted", timeout=TIMEOUT):
    """[(offset, key, value)] of every record a confluent-kafka consumer with this isolation level
    gets from the start of the partition until it reports the end at the high watermark taken
    now."""
    return read_to_end(bootstrap, topic, isolation, partitions=[partition], timeout=timeout, keys=True)[partition]


def data(records):
    """The records that are not ticks."""
    return [r for r in records if r[1] != TICK]


class Ticker:
    """A plain confluent-kafka producer that appends one b"tick" record per call (acks=all,
    flushed), so that the partition's segments keep rolling while a test waits for the cleaner."""

    def __init__(self, bootstrap, topic, partition=0):
        self.p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
        self.topic, self.partition = topic, partition

    def __call__(self):
        self.p.produce(self.topic, key=TICK, value=b"t", partition=self.partition)
        assert self.p.flush(TIMEOUT) == 0


def wait_for(what, check, tick, timeout=CLEAN_WAIT):
    """Calls check() (which returns (done, detail)) until it is done, ticking and sleeping
    200 ms between calls; fails after timeout with the last detail. Returns the last detail."""
    deadline = time.time() + timeout
    while True:
        done, detail = check()
        if done:
            return detail
        if time.time() > deadline:
            raise AssertionError("not within %d s: %s; last seen: %r" % (timeout, what, detail))
        tick()
        time.sleep(0.2)


def produce_keyed(bootstrap, topic, items, partition=0, **conf):
    """items: (key, value or None). Returns [(offset, key, value)] from the delivery reports
    (every record acknowledged)."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, **conf})
    reports = []
    for key, value in items:
        p.produce(topic, key=key, value=value, partition=partition, on_delivery=lambda e, m: reports.append((e, m)))
        p.poll(0)
    assert p.flush(TIMEOUT) == 0
    errors = [e for e, _ in reports if e is not None]
    assert errors == [], errors[:3]
    return sorted((m.offset(), m.key(), m.value()) for _, m in reports)


def send_one(bootstrap, topic, key, value, partition=0):
    """One record from a confluent-kafka producer (no retries): (error or None, offset)."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "retries": 0})
    out = []
    p.produce(topic, key=key, value=value, partition=partition, on_delivery=lambda e, m: out.append((e, m.offset())))
    assert p.flush(TIMEOUT) == 0
    return out[0]


def latest(written, drop_tombstones=False):
    """The last (offset, key, value) of every key of the written records, in offset order;
    without the keys whose last record is a tombstone if drop_tombstones."""
    last = {}
    for offset, key, value in written:
        last[key] = (offset, key, value)
    return sorted(r for r in last.values() if not (drop_tombstones and r[2] is None))


def compacted_to(bootstrap, topic, want, **kw):
    """A check for wait_for: the partition's non-tick records are exactly `want`."""
    def check():
        got = data(read_log(bootstrap, topic, **kw))
        return got == want, got if len(got) < 40 else "%d records, %r..." % (len(got), got[:5])
    return check


def describe_policy(bootstrap, topic):
    a = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(ResourceType.TOPIC, topic)
    return a.describe_configs([res])[res].result(TIMEOUT)["cleanup.policy"].value


def incremental(bootstrap, topic, key, op, value):
    a = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(ResourceType.TOPIC, topic,
                         incremental_configs=[ConfigEntry(key, value, incremental_operation=op)])
    a.incremental_alter_configs([res])[res].result(TIMEOUT)


def test_confluent_overwrites_and_tombstones_are_compacted(start_broker):
    """confluent-kafka writes 60 rounds of 20 keys (1200 records), then tombstones for k03 and
    k07 and a tombstone followed by a new value for k11, on a compacted topic with
    delete.retention.ms=500. Once cleaned (ticking until then), a consumer from the start gets
    every live key's last value exactly once, at the offset its delivery report gave, offsets
    strictly increasing; the tombstoned keys are gone (their tombstones past the horizon); the
    log holds a small fraction of what was written."""
    b = cleaning_broker(start_broker)
    create(b.bootstrap, "cc", config={**COMPACT, "delete.retention.ms": "500"})
    keys = [b"k%02d" % k for k in range(20)]
    items = [(k, b"round-%d-%s-" % (r, k) + b"x" * 80) for r in range(60) for k in keys]
    items += [(b"k03", None), (b"k07", None), (b"k11", None), (b"k11", b"back")]
    written = produce_keyed(b.bootstrap, "cc", items)
    assert [o for o, _, _ in written] == list(range(len(items)))
    want = latest(written, drop_tombstones=True)
    assert len(want) == 18 and (written[-1] in want)
    wait_for("only the last record of each key, tombstones gone", compacted_to(b.bootstrap, "cc", want),
             Ticker(b.bootstrap, "cc"))
    everything = read_log(b.bootstrap, "cc")
    offsets = [o for o, _, _ in everything]
    assert offsets == sorted(set(offsets)), "offsets not strictly increasing"
    assert len(everything) < len(items) / 10, len(everything)
    assert metric(b, "cleaner_passes_total") > 0


def kp_read(bootstrap, topic, partition=0, timeout=TIMEOUT, api_version=None):
    """kafka-python's consumer (pinned to api_version if given): [(offset, key, value)] from the
    start to the high watermark (taken with confluent-kafka: ListOffsets v0 has no end query)."""
    from kafka import KafkaConsumer
    end = end_offsets(bootstrap, topic, partitions=[partition])[partition]
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, api_version=api_version,
                      group_id=None, fetch_max_wait_ms=100)
    tp = KTopicPartition(topic, partition)
    try:
        c.assign([tp])
        c.seek(tp, 0)
        got, deadline = [], time.time() + timeout
        while c.position(tp) < end and time.time() < deadline:
            for recs in c.poll(timeout_ms=200).values():
                got += [(r.offset, r.key, r.value) for r in recs]
        assert c.position(tp) >= end, "end %d not reached: %d records" % (end, len(got))
        return got
    finally:
        c.close()


def test_kafka_python_compaction_keeps_tombstones_within_retention(start_broker):
    """kafka-python's producer writes 40 rounds of 10 keys and tombstones (value None) for k2
    and k5, on a compacted topic with delete.retention.ms of an hour, ticking with the same
    producer. kafka-python's consumer then reads every key's last record exactly once at its
    offset, the two tombstones as value None; and after at least 3 more cleaner passes the
    tombstones are still there."""
    from kafka import KafkaProducer
    b = cleaning_broker(start_broker)
    create(b.bootstrap, "kpc", config={**COMPACT, "delete.retention.ms": "3600000"})
    p = KafkaProducer(bootstrap_servers=b.bootstrap, acks="all", enable_idempotence=False, linger_ms=5)
    try:
        items = [(b"k%d" % k, b"v-%d-%d" % (r, k)) for r in range(40) for k in range(10)]
        items += [(b"k2", None), (b"k5", None)]
        futures = [p.send("kpc", key=k, value=v, partition=0) for k, v in items]
        written = [(f.get(timeout=TIMEOUT).offset, k, v) for f, (k, v) in zip(futures, items)]
        assert [o for o, _, _ in written] == list(range(len(items)))
        want = latest(written)
        assert [(k, v) for _, k, v in want if v is None] == [(b"k2", None), (b"k5", None)]

        def tick():
            p.send("kpc", key=TICK, value=b"t", partition=0).get(timeout=TIMEOUT)

        def check():
            got = data(kp_read(b.bootstrap, "kpc"))
            return got == want, got if len(got) < 40 else "%d records" % len(got)
        wait_for("the last record of each key, tombstones included", check, tick)
        passes = metric(b, "cleaner_passes_total")
        assert passes > 0
        wait_for("3 more passes", lambda: (metric(b, "cleaner_passes_total") >= passes + 3, None), tick)
        assert data(kp_read(b.bootstrap, "kpc")) == want
    finally:
        p.close()


def test_legacy_message_sets_are_compacted(start_broker):
    """Old clients' message sets are compacted as Kafka compacts them. kafka-python pinned to
    (0, 9) (magic 0) and to (0, 10, 1) (magic 1) writes 5 rounds of 8 keys, each round as one
    plain and one gzip-wrapped message set per magic, then one gzip magic-1 wrapper holding
    tombstones for k01 and k02 and a new value for k02, one gzip magic-0 wrapper holding a
    tombstone for k04 and two values for k05, and a plain magic-0 tombstone for k03, on a
    compacted topic with delete.retention.ms=500 (legacy messages have no horizon field: their
    tombstones go once data written that long after them is clean, Kafka's rule; as Kafka's,
    a cleaned segment takes its group's latest mtime, so the ticks here are 1 KB records of new
    keys that fill segments, else the tombstones' group would take in every new tick segment
    and stay young). Once cleaned (ticks from confluent-kafka in between): the
    wrappers were rebuilt around what they keep, and confluent-kafka, which gets the stored
    messages as they are, reads every live key's last value once at the offset its producer was
    given, the tombstoned keys gone; so does kafka-python at (0, 10, 1) (Fetch v3: magic 1 as
    stored, the rebuilt wrapper's inner offsets with gaps) and at (0, 9) (Fetch v1:
    down-converted to magic 0)."""
    from test_legacy import KP09, KP0101, kp_produce
    b = cleaning_broker(start_broker)
    create(b.bootstrap, "lc", config={**COMPACT, "delete.retention.ms": "500"})
    written = []

    def send(items, api, codec):
        md = kp_produce(b.bootstrap, "lc", [(k, v, None) for k, v in items], api, compression=codec)
        written.extend((m.offset, k, v) for m, (k, v) in zip(md, items))

    for r in range(5):
        for api, codec in ((KP09, None), (KP09, "gzip"), (KP0101, None), (KP0101, "gzip")):
            send([(b"k%02d" % k, b"v-%d-%s-%s-%d" % (r, str(api).encode(), str(codec).encode(), k) + b"x" * 40)
                  for k in range(8)], api, codec)
    send([(b"k01", None), (b"k02", None), (b"k02", b"back")], KP0101, "gzip")
    send([(b"k04", None), (b"k05", b"x"), (b"k05", b"y")], KP09, "gzip")
    send([(b"k03", None)], KP09, None)
    assert [o for o, _, _ in written] == list(range(len(written)))
    want = latest(written, drop_tombstones=True)
    assert len(want) == 5 and (written[-2] in want) and (written[-5] in want)
    pads = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "linger.ms": 0})
    count = [0]

    def tick():
        count[0] += 1
        pads.produce("lc", key=b"pad%d" % count[0], value=b"p" * 1000, partition=0)
        assert pads.flush(TIMEOUT) == 0

    def ours(records):
        return [r for r in records if not r[1].startswith(b"pad")]

    def check():
        got = ours(read_log(b.bootstrap, "lc"))
        return got == want, got
    wait_for("only the last record of each key, tombstones gone", check, tick)
    for api in (KP0101, KP09):
        assert ours(kp_read(b.bootstrap, "lc", api_version=api)) == want, api


def test_keyless_records_are_refused(broker):
    """A compacted topic refuses keyless records. A confluent-kafka batch of 10 (linger 100 ms)
    whose records 0 and 5 have no key: those two fail with INVALID_RECORD, the other 8 with
    _INVALID_DIFFERENT_RECORD (KIP-467 record errors) and nothing is appended; a lone keyless
    record fails with INVALID_RECORD; keyed records then go in at offset 0 on. kafka-python's
    keyless send fails with InvalidRecordError, its keyed send succeeds."""
    from kafka import KafkaProducer
    from kafka.errors import InvalidRecordError
    create(broker.bootstrap, "keyless", config={"cleanup.policy": "compact"})
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 100, "retries": 0})
    reports = []
    for i in range(10):
        p.produce("keyless", key=None if i in (0, 5) else b"k%d" % i, value=b"v%d" % i, partition=0,
                  on_delivery=lambda e, m: reports.append((e, m.value())))
    assert p.flush(TIMEOUT) == 0
    codes = {v: e.code() if e else None for e, v in reports}
    assert codes == {b"v%d" % i: KafkaError.INVALID_RECORD if i in (0, 5) else KafkaError._INVALID_DIFFERENT_RECORD
                     for i in range(10)}, codes
    assert end_offsets(broker.bootstrap, "keyless", partitions=[0]) == {0: 0}
    reports.clear()
    p.produce("keyless", value=b"lone", partition=0, on_delivery=lambda e, m: reports.append(e))
    assert p.flush(TIMEOUT) == 0
    assert [e.code() for e in reports] == [KafkaError.INVALID_RECORD], reports
    written = produce_keyed(broker.bootstrap, "keyless", [(b"a", b"1"), (b"b", b"2")])
    assert written == [(0, b"a", b"1"), (1, b"b", b"2")]
    kp = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", enable_idempotence=False, retries=0)
    try:
        with pytest.raises(InvalidRecordError):
            kp.send("keyless", value=b"no key", partition=0).get(timeout=TIMEOUT)
        assert kp.send("keyless", key=b"c", value=b"3", partition=0).get(timeout=TIMEOUT).offset == 2
    finally:
        kp.close()
    assert read_log(broker.bootstrap, "keyless") == [(0, b"a", b"1"), (1, b"b", b"2"), (2, b"c", b"3")]


def test_policy_change_at_runtime(start_broker):
    """A delete-policy topic with keyless and keyed records; IncrementalAlterConfigs APPEND
    compact makes its policy "compact,delete" (DescribeConfigs): a keyless produce is then
    INVALID_RECORD and, once cleaned, the old keyless records are gone and each key's last
    record stays. SUBTRACT compact makes it "delete" again and keyless records go in. At
    CreateTopics, "[compact, delete]" is taken (shown as "compact,delete"), AlterConfigs then
    sets "compact", and "compacted" is INVALID_CONFIG."""
    b = cleaning_broker(start_broker)
    create(b.bootstrap, "pol", config={**COMPACT, "cleanup.policy": "delete"})
    items = []
    for r in range(20):
        items += [(None, b"keyless-%d" % r)] + [(b"k%d" % k, b"v-%d-%d" % (r, k)) for k in range(5)]
    written = produce_keyed(b.bootstrap, "pol", items)
    assert describe_policy(b.bootstrap, "pol") == "delete"
    incremental(b.bootstrap, "pol", "cleanup.policy", AlterConfigOpType.APPEND, "compact")
    assert describe_policy(b.bootstrap, "pol") == "compact,delete"
    err, _ = send_one(b.bootstrap, "pol", None, b"refused")
    assert err is not None and err.code() == KafkaError.INVALID_RECORD, err
    want = latest([r for r in written if r[1] is not None])
    wait_for("keyless records dropped, each key once", compacted_to(b.bootstrap, "pol", want), Ticker(b.bootstrap, "pol"))
    incremental(b.bootstrap, "pol", "cleanup.policy", AlterConfigOpType.SUBTRACT, "compact")
    assert describe_policy(b.bootstrap, "pol") == "delete"
    err, offset = send_one(b.bootstrap, "pol", None, b"welcome back")
    assert err is None, err
    assert read_log(b.bootstrap, "pol")[-1] == (offset, None, b"welcome back")
    create(b.bootstrap, "pol-list", config={"cleanup.policy": "[compact, delete]"})
    assert describe_policy(b.bootstrap, "pol-list") == "compact,delete"
    # The legacy AlterConfigs (the topic's whole set of overrides) too.
    a, res = AdminClient({"bootstrap.servers": b.bootstrap}), ConfigResource(ResourceType.TOPIC, "pol-list",
                                                                              set_config={"cleanup.policy": "compact"})
    a.alter_configs([res])[res].result(TIMEOUT)
    assert describe_policy(b.bootstrap, "pol-list") == "compact"
    with pytest.raises(KafkaException) as e:
        create(b.bootstrap, "pol-bad", config={"cleanup.policy": "compacted"})
    assert e.value.args[0].code() == KafkaError.INVALID_CONFIG, e.value


def test_delete_records_needs_the_delete_policy(broker):
    """DeleteRecords on a compact-only topic is POLICY_VIOLATION (confluent-kafka's and
    kafka-python's admin clients) and its log start stays 0; on a compact,delete topic it
    deletes as usual."""
    from kafka.errors import PolicyViolationError
    create(broker.bootstrap, "dr-c", config={"cleanup.policy": "compact"})
    create(broker.bootstrap, "dr-cd", config={"cleanup.policy": "compact,delete"})
    for t in ("dr-c", "dr-cd"):
        produce_keyed(broker.bootstrap, t, [(b"k%d" % i, b"v") for i in range(5)])
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    with pytest.raises(KafkaException) as e:
        list(a.delete_records([TopicPartition("dr-c", 0, 3)]).values())[0].result(TIMEOUT)
    assert e.value.args[0].code() == KafkaError.POLICY_VIOLATION, e.value
    k = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=TIMEOUT * 1000)
    try:
        with pytest.raises(PolicyViolationError):
            k.delete_records({KTopicPartition("dr-c", 0): 3})
    finally:
        k.close()
    assert [o for o, _, _ in read_log(broker.bootstrap, "dr-c")] == list(range(5))
    assert list(a.delete_records([TopicPartition("dr-cd", 0, 3)]).values())[0].result(TIMEOUT).low_watermark == 3
    assert [o for o, _, _ in read_log(broker.bootstrap, "dr-cd")] == [3, 4]


def txn_write(p, topic, items, commit):
    """One transaction of (key, value) records on partition 0, flushed, then committed or
    aborted. Returns [(offset, key, value)]."""
    p.begin_transaction()
    reports = []
    for key, value in items:
        p.produce(topic, key=key, value=value, partition=0, on_delivery=lambda e, m: reports.append((e, m)))
    assert p.flush(TIMEOUT) == 0
    assert [e for e, _ in reports if e is not None] == []
    (p.commit_transaction if commit else p.abort_transaction)(TIMEOUT)
    return sorted((m.offset(), m.key(), m.value()) for _, m in reports)


def test_aborted_transactions_are_cleaned_away(start_broker):
    """On a compacted topic: producer A commits a transaction writing k0-k4 (c1) and aborts one
    writing k0-k4 (a2); producer B then commits one writing k0-k1 (c3); 3 records per key each.
    Once cleaned, a read_uncommitted consumer gets no aborted record any more, only k0-k1's c3
    and k2-k4's c1 last records, at their offsets; a read_committed consumer gets the same.
    (The same with one producer for all three: the two tests below.)"""
    b = cleaning_broker(start_broker)
    create(b.bootstrap, "txc", config=COMPACT)
    pa, pb = txn_producer(b.bootstrap, "txc-a"), txn_producer(b.bootstrap, "txc-b")
    c1 = txn_write(pa, "txc", [(b"k%d" % k, b"c1-%d-%d" % (k, r)) for r in range(3) for k in range(5)], True)
    a2 = txn_write(pa, "txc", [(b"k%d" % k, b"a2-%d-%d" % (k, r)) for r in range(3) for k in range(5)], False)
    c3 = txn_write(pb, "txc", [(b"k%d" % k, b"c3-%d-%d" % (k, r)) for r in range(3) for k in range(2)], True)
    assert len(read_log(b.bootstrap, "txc")) == 15 + 15 + 6
    want = latest(c1 + c3)
    assert {k: v[:2] for _, k, v in want} == {b"k0": b"c3", b"k1": b"c3", b"k2": b"c1", b"k3": b"c1", b"k4": b"c1"}
    wait_for("aborted records removed, last committed values kept", compacted_to(b.bootstrap, "txc", want),
             Ticker(b.bootstrap, "txc"))
    assert not any(v.startswith(b"a2") for _, _, v in read_log(b.bootstrap, "txc")), a2
    assert data(read_log(b.bootstrap, "txc", isolation="read_committed")) == want


# These two found a bug (fixed): the cleaner's offset map ignored abort markers, so a
# producer's transactions after its aborted one were left out of the map; its keys' older
# values stayed and, once its tombstone expired, a deleted key came back.


def three_transactions_in_one_segment(b, topic, c1, a2, c3, **config):
    """One producer commits c1, aborts a2 and commits c3 ((key, value) lists) while the topic
    cannot roll a segment (segment.ms a week, the records far below segment.bytes); then
    segment.ms=100, so that the first pass maps all three at once. Returns the three
    transactions' [(offset, key, value)]."""
    create(b.bootstrap, topic, config={**COMPACT, "segment.ms": "604800000", **config})
    p = txn_producer(b.bootstrap, topic + "-id")
    out = [txn_write(p, topic, items, commit) for items, commit in ((c1, True), (a2, False), (c3, True))]
    incremental(b.bootstrap, topic, "segment.ms", AlterConfigOpType.SET, "100")
    return out


def test_same_producer_commit_after_abort_is_compacted(start_broker):
    """One producer: a committed transaction writes k0-k4 (c1), an aborted one k0-k4 (a2), a
    committed one k0-k1 (c3), 3 records per key each. Once the aborted records are cleaned away
    (the same pass maps and cleans everything), only the last record of each key stays: k0-k1's
    c3 and k2-k4's c1, as Kafka leaves it."""
    b = cleaning_broker(start_broker)
    c1, a2, c3 = three_transactions_in_one_segment(
        b, "txs", [(b"k%d" % k, b"c1-%d-%d" % (k, r)) for r in range(3) for k in range(5)],
        [(b"k%d" % k, b"a2-%d-%d" % (k, r)) for r in range(3) for k in range(5)],
        [(b"k%d" % k, b"c3-%d-%d" % (k, r)) for r in range(3) for k in range(2)])
    wait_for("aborted records removed", lambda: (not any(v.startswith(b"a2") for _, _, v in data(
        read_log(b.bootstrap, "txs"))), None), Ticker(b.bootstrap, "txs"))
    # tidemark keeps all 6 c3 records and c1's last k0 and k1 records: 11 where Kafka keeps 5.
    assert data(read_log(b.bootstrap, "txs")) == latest(c1 + c3)


def test_tombstone_after_an_aborted_transaction_deletes_the_key(start_broker):
    """One producer: a committed transaction writes k0=c1 and k1=c1, an aborted one k0=a2, a
    committed one a tombstone for k0; delete.retention.ms=500. Once the tombstone is cleaned
    away, k0 is gone for every reader (Kafka removes the older value in the pass that keeps
    the tombstone); k1 stays."""
    b = cleaning_broker(start_broker)
    c1, _, c3 = three_transactions_in_one_segment(
        b, "txt", [(b"k0", b"c1"), (b"k1", b"c1")], [(b"k0", b"a2")], [(b"k0", None)],
        **{"delete.retention.ms": "500"})
    wait_for("the tombstone cleaned away", lambda: (c3[0] not in read_log(b.bootstrap, "txt"), None),
             Ticker(b.bootstrap, "txt"))
    # tidemark: [(0, b'k0', b'c1'), (1, b'k1', b'c1')], the deleted key is back.
    assert data(read_log(b.bootstrap, "txt", isolation="read_committed")) == [c1[1]]


def test_cleaned_log_survives_kill9(start_broker):
    """20 keys written 50 times each, cleaned (a pass counted at /metrics); the broker is killed
    (-9) and restarted on the same data: the same last records at the same offsets. Then 10
    more rounds: cleaned again, each key's newest record once."""
    b = cleaning_broker(start_broker)
    create(b.bootstrap, "k9c", config=COMPACT)
    written = produce_keyed(b.bootstrap, "k9c", [(b"k%d" % k, b"a-%d-%d" % (r, k)) for r in range(50) for k in range(20)])
    want = latest(written)
    tick = Ticker(b.bootstrap, "k9c")
    wait_for("compacted", compacted_to(b.bootstrap, "k9c", want), tick)
    assert metric(b, "cleaner_passes_total") > 0
    b.stop(signal.SIGKILL)
    b.start(*b.args)
    assert data(read_log(b.bootstrap, "k9c")) == want
    more = produce_keyed(b.bootstrap, "k9c", [(b"k%d" % k, b"b-%d-%d" % (r, k)) for r in range(10) for k in range(20)])
    assert more[0][0] > written[-1][0]
    want = latest(more)
    wait_for("compacted after the restart", compacted_to(b.bootstrap, "k9c", want), Ticker(b.bootstrap, "k9c"))


def test_cleaner_metrics(start_broker):
    """After a cleaning pass, /metrics shows tidemark_cleaner_passes_total > 0 on some shard,
    bytes read > bytes written > 0, no failed pass, the time and max compaction delay series, and a
    tidemark_log_dirty_ratio line for the topic's partition (a ratio in [0, 1]); DescribeConfigs
    of the broker shows log.cleaner.backoff.ms=100 and log.cleaner.enable=true. A broker with
    log.cleaner.enable=false makes no pass: after 2 s of ticks every record is still there."""
    b = cleaning_broker(start_broker)
    create(b.bootstrap, "mc", config=COMPACT)
    written = produce_keyed(b.bootstrap, "mc", [(b"k%d" % k, b"v" * 50) for _ in range(40) for k in range(10)])
    wait_for("compacted", compacted_to(b.bootstrap, "mc", latest(written)), Ticker(b.bootstrap, "mc"))
    m = metrics(b)

    def per_shard(name):
        return {s: v for s, v in m.items() if s.startswith("tidemark_%s{shard=" % name)}
    assert any(v > 0 for v in per_shard("cleaner_passes_total").values()), m
    read, wrote = sum(per_shard("cleaner_bytes_read_total").values()), sum(per_shard("cleaner_bytes_written_total").values())
    assert read > wrote > 0, (read, wrote)
    assert sum(per_shard("cleaner_failures_total").values()) == 0
    assert per_shard("cleaner_time_ms_total") and per_shard("cleaner_max_compaction_delay_ms")
    a, res = AdminClient({"bootstrap.servers": b.bootstrap}), ConfigResource(ResourceType.BROKER, "0")
    shown = a.describe_configs([res])[res].result(TIMEOUT)
    assert shown["log.cleaner.backoff.ms"].value == "100" and shown["log.cleaner.enable"].value == "true", shown
    ratio = [v for s, v in m.items() if s.startswith("tidemark_log_dirty_ratio{") and 'topic="mc",partition="0"' in s]
    assert len(ratio) == 1 and 0 <= ratio[0] <= 1, ratio

    off = cleaning_broker(start_broker, "--set", "log.cleaner.enable=false")
    create(off.bootstrap, "mc-off", config=COMPACT)
    written = produce_keyed(off.bootstrap, "mc-off", [(b"k%d" % k, b"v") for _ in range(40) for k in range(10)])
    tick, until = Ticker(off.bootstrap, "mc-off"), time.time() + 2
    while time.time() < until:
        tick()
        time.sleep(0.2)
    assert metric(off, "cleaner_passes_total") == 0
    assert data(read_log(off.bootstrap, "mc-off")) == written


def describe_producer(bootstrap, topic):
    k = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT * 1000)
    try:
        out = k.describe_producers([KTopicPartition(topic, 0)])
    finally:
        k.close()
    return {(ap.producer_id, ap.producer_epoch, ap.last_sequence) for s in out.values() for ap in s.active_producers}


def test_idempotent_producer_after_its_batches_were_cleaned(start_broker):
    """An idempotent confluent-kafka producer writes 5 rounds of 10 keys; a plain producer
    overwrites them all and the cleaner removes every record of the idempotent one (its last
    batch kept, empty). DescribeProducers still shows its last sequence (49), also after a
    kill -9 restart; it then goes on producing: every record acknowledged, no sequence error;
    once more after another overwrite and cleaning without a restart."""
    b = cleaning_broker(start_broker)
    create(b.bootstrap, "idc", config=COMPACT)
    errors, reports = [], []
    p = Producer({"bootstrap.servers": b.bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5,
                  "error_cb": errors.append})

    def idem_round(tag, rounds):
        reports.clear()
        for r in range(rounds):
            for k in range(10):
                p.produce("idc", key=b"k%d" % k, value=b"%s-%d-%d" % (tag, r, k), partition=0,
                          on_delivery=lambda e, m: reports.append((e, m.offset())))
        assert p.flush(TIMEOUT) == 0
        assert [e for e, _ in reports if e is not None] == [], reports[:3]
        return len(reports)

    def overwrite_and_clean(tag):
        want = latest(produce_keyed(b.bootstrap, "idc", [(b"k%d" % k, b"%s-%d" % (tag, k)) for k in range(10)]))
        wait_for("the idempotent producer's records cleaned away", compacted_to(b.bootstrap, "idc", want),
                 Ticker(b.bootstrap, "idc"))

    assert idem_round(b"i1", 5) == 50
    overwrite_and_clean(b"o1")
    (pid, epoch, seq), = [s for s in describe_producer(b.bootstrap, "idc") if s[2] == 49]
    b.stop(signal.SIGKILL)
    b.start(*b.args)
    assert (pid, epoch, 49) in describe_producer(b.bootstrap, "idc")
    assert idem_round(b"i2", 2) == 20
    assert (pid, epoch, 69) in describe_producer(b.bootstrap, "idc")
    overwrite_and_clean(b"o2")
    assert idem_round(b"i3", 2) == 20
    assert (pid, epoch, 89) in describe_producer(b.bootstrap, "idc")
    assert data(read_log(b.bootstrap, "idc"))[-10:] == [(o, b"k%d" % (i % 10), b"i3-1-%d" % (i % 10))
                                                        for i, o in enumerate(sorted(o for _, o in reports)[-10:])]
    # The restart's connection errors are expected; no fatal one, no sequence error.
    bad = [e for e in errors if e.fatal() or e.code() in (KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                                          KafkaError.UNKNOWN_PRODUCER_ID)]
    assert bad == [], bad
