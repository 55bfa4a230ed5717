"""`tidemark load` against the real broker: each mode produces or consumes exactly what it
reports (checked with confluent-kafka), its JSON summary has the documented keys as its last
line, open-loop runs hold their rate, and the HdrHistogram log and the HTML report are written."""
import json
import os
import subprocess

from test_clients import consume
from confluent_kafka import Consumer, TopicPartition

BIN = os.environ.get("TIDEMARK_BIN", os.path.join(os.path.dirname(__file__), "..", "..", "target", "release", "tidemark"))


def load(broker, *args, timeout=60):
    out = subprocess.run([BIN, "load", *args, "--bootstrap", broker.bootstrap, "--json"],
                         capture_output=True, timeout=timeout)
    assert out.returncode == 0, out.stderr.decode()[-2000:]
    lines = out.stdout.decode().strip().splitlines()
    summary = json.loads(lines[-1])
    assert set(summary) >= {"records", "records_per_sec", "mb_per_sec", "latency_ms"}, summary
    assert set(summary["latency_ms"]) == {"p50", "p90", "p99", "p999", "p9999", "max"}
    return summary, out.stderr.decode()


def end_offsets(bootstrap, topic, partitions):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe"})
    ends = [c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)]
    c.close()
    return ends


def test_produce_consume_and_e2e(broker, tmp_path):
    """produce --records N writes exactly N acknowledged records (the log ends say so) and
    reports N; consume --records N reads them back; e2e measures send-to-arrival latency; the
    progress lines go to stderr; --hdr-out and --report write their files."""
    hdr, report = tmp_path / "run.hlog", tmp_path / "run.html"
    s, err = load(broker, "produce", "--topic", "lt", "--partitions", "3", "--records", "6000",
                  "--record-size", "200", "--connections", "3", "--hdr-out", str(hdr), "--report", str(report))
    assert s["records"] == 6000 and s["errors"] == 0, s
    assert sum(end_offsets(broker.bootstrap, "lt", 3)) == 6000
    assert 0 < s["latency_ms"]["p50"] <= s["latency_ms"]["p99"] <= s["latency_ms"]["max"]
    # Each request's round trip is part of its records' latency (which also counts the wait to
    # be sent): never longer than the longest of theirs (1% is the histograms' precision).
    r = s["request_ms"]
    assert set(r) == {"p50", "p99", "p999", "max"} and 0 < r["p50"] <= r["max"] <= s["latency_ms"]["max"] * 1.01 + 0.002, s
    assert "records/s" in err, "progress on stderr"
    text = hdr.read_text()
    assert "#[StartTime:" in text and "#[BaseTime:" in text and "Tag=load," in text, text[:300]
    page = report.read_text()
    assert page.startswith("<!doctype html>") and page.count("<svg") == 3 and "<polyline" in page
    c, _ = load(broker, "consume", "--topic", "lt", "--records", "6000", "--connections", "2")
    assert c["records"] == 6000 and c["errors"] == 0, c
    assert c["mb_per_sec"] > 0
    # e2e: records travel through the broker to a consumer started at the end.
    e, _ = load(broker, "e2e", "--topic", "lt-e2e", "--partitions", "2", "--rate", "2000", "--duration", "2")
    assert e["records"] > 1000 and e["errors"] == 0, e
    assert e["latency_ms"]["p50"] < 1000
    # The producer's own latency is reported beside the end-to-end one.
    assert set(e["produce_ms"]) == {"p50", "p99", "p999", "max"} and 0 < e["produce_ms"]["p99"] < 1000, e
    assert sum(end_offsets(broker.bootstrap, "lt-e2e", 2)) >= e["records"]


def test_open_loop_holds_its_rate_and_compression(broker):
    """--rate R is an offered load: about R records/s over the run, whatever the broker's pace;
    every codec produces records a consumer reads."""
    s, _ = load(broker, "produce", "--topic", "lt-rate", "--rate", "5000", "--duration", "2", "--record-size", "100")
    assert 8000 <= s["records"] <= 11000, s
    for codec in ("gzip", "snappy", "lz4", "zstd"):
        topic = "lt-" + codec
        s, _ = load(broker, "produce", "--topic", topic, "--records", "500", "--compression", codec)
        assert s["records"] == 500, (codec, s)
        got = consume(broker.bootstrap, topic, 500)
        assert len(got) == 500 and all(len(m.value()) == 1024 for m in got), codec


def test_bad_arguments_are_refused(broker):
    """Clear errors for bad flags, before anything is sent."""
    for args in (["produce", "--acks", "2"], ["produce", "--record-size", "4"], ["produce", "--rate", "-3"],
                 ["e2e", "--acks", "0"], ["produce", "--compression", "brotli"]):
        out = subprocess.run([BIN, "load", *args, "--bootstrap", broker.bootstrap], capture_output=True, timeout=30)
        assert out.returncode != 0, args
        assert out.stderr.strip(), args


def metric_total(port, name):
    """The sum over shards of a /metrics counter or gauge."""
    import urllib.request
    text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10).read().decode()
    return sum(float(l.rsplit(" ", 1)[1]) for l in text.splitlines() if l.startswith("tidemark_%s{" % name))


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_tailing_consumers_read_from_the_batch_cache(broker):
    """Consumers at the tail (load e2e) get what was just produced from memory: the batch cache
    serves every read and the disk serves none; with tidemark.batch.cache.enable=false the same
    reads go to disk (the counter counts them), and the records arrive either way."""
    for cache, from_disk in (("true", False), ("false", True)):
        port = free_port()
        broker.stop()
        broker.start("--metrics-listen", "127.0.0.1:%d" % port, "--set", "tidemark.batch.cache.enable=" + cache)
        topic = "lt-cache-" + cache
        e, _ = load(broker, "e2e", "--topic", topic, "--partitions", "2", "--rate", "5000", "--duration", "3")
        assert e["records"] > 5000 and e["errors"] == 0, e
        hits, disk = metric_total(port, "batch_cache_hit_bytes_total"), metric_total(port, "log_disk_read_bytes_total")
        if from_disk:
            assert hits == 0 and disk > 1_000_000, (hits, disk)
        else:
            assert disk == 0 and hits > 1_000_000, (hits, disk)
            assert metric_total(port, "batch_cache_bytes") > 0


def test_a_consumer_catching_up_reads_ahead(broker):
    """A consumer reading from the start after a restart (nothing in memory) is served by
    read-ahead: most of what it fetches comes from the batch cache, filled by reads ahead of it,
    and the disk is read about once (a read-ahead and the consumer's own read never both read
    the same bytes), with every record arriving."""
    port = free_port()
    load(broker, "produce", "--topic", "lt-ahead", "--partitions", "1", "--records", "30000")
    broker.stop()
    broker.start("--metrics-listen", "127.0.0.1:%d" % port)
    c, _ = load(broker, "consume", "--topic", "lt-ahead", "--records", "30000")
    assert c["records"] == 30000 and c["errors"] == 0, c
    hits, disk = metric_total(port, "batch_cache_hit_bytes_total"), metric_total(port, "log_disk_read_bytes_total")
    size = 30000 * 1024
    assert hits > size / 2, (hits, disk, size)
    assert size * 0.9 < disk < size * 1.3, (hits, disk, size)


def test_metrics_endpoint(broker):
    """--metrics-listen serves every shard's per-stage latency summaries and counters as
    Prometheus text at /metrics after a load run (other paths: 404); the stages of the produce
    path were measured."""
    import socket
    import urllib.error
    import urllib.request
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    broker.stop()
    broker.start("--metrics-listen", "127.0.0.1:%d" % port)
    load(broker, "produce", "--topic", "lt-m", "--records", "2000")
    text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10).read().decode()
    counts = {}
    for line in text.splitlines():
        if line.startswith("tidemark_stage_seconds_count"):
            stage = line.split('stage="')[1].split('"')[0]
            counts[stage] = counts.get(stage, 0) + int(line.rsplit(" ", 1)[1])
    for stage in ("network_read", "validate", "copy", "commit_wait", "response_queue", "response_write",
                  "request_produce"):
        assert counts.get(stage, 0) > 0, (stage, counts)
    # A commit of one write is one synced write (O_DSYNC); others are writes, then an fdatasync.
    assert counts.get("write_synced", 0) > 0 or counts.get("dma_write", 0) * counts.get("fdatasync", 0) > 0, counts
    assert 'quantile="0.99"' in text and "tidemark_records_produced_total" in text
    produced = sum(int(l.rsplit(" ", 1)[1]) for l in text.splitlines() if l.startswith("tidemark_records_produced_total{"))
    assert produced == 2000
    try:
        urllib.request.urlopen("http://127.0.0.1:%d/other" % port, timeout=10)
        raise AssertionError("expected a 404")
    except urllib.error.HTTPError as e:
        assert e.code == 404


def committed_count(bootstrap, topic, partitions):
    """Records a read_committed consumer sees in `topic` (the markers are not records)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "committed-probe", "isolation.level": "read_committed",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen, idle = 0, 0
    while idle < 6:
        msgs = c.consume(1000, timeout=0.5)
        seen += sum(1 for m in msgs if not m.error())
        idle = 0 if msgs else idle + 1
    c.close()
    return seen


def test_transactional_produce_at_both_transaction_versions(broker):
    """produce --transactional at transaction version 0 (AddPartitionsToTxn, EndTxn v4) and 2
    (Produce v12 enrols each partition, EndTxn v5 bumps the epoch every commit): no errors,
    transactions committed, and a read_committed consumer sees exactly the records reported
    (every transaction committed, none left open: the run ends with a commit)."""
    for version in ("0", "2"):
        topic = "lt-txn-v" + version
        s, _ = load(broker, "produce", "--topic", topic, "--partitions", "2", "--records", "4000",
                    "--record-size", "100", "--batch-bytes", "4096", "--connections", "2", "--acks", "all", "--transactional",
                    "--txn-records", "300", "--transaction-version", version)
        assert s["records"] == 4000 and s["errors"] == 0, s
        assert s["transactions"] >= 10, s
        assert committed_count(broker.bootstrap, topic, 2) == 4000, version
