//! `tidemark load`: a load generator for Kafka-compatible brokers, with HdrHistogram latency
//! percentiles.
//!
//! - `produce`: records of `--record-size` bytes in v2 batches of up to `--batch-bytes`, one
//!   partition per request, up to `--in-flight` requests outstanding per connection. Open loop
//!   at `--rate R` records/s: each record has an intended send time (start + i / rate) and its
//!   latency counts from that time, not from when it was actually sent (coordinated-omission
//!   correction: a stalled broker shows up as latency, not as a slower offered load). Closed
//!   loop at `--rate max`: as fast as acknowledgements allow, latency from the send.
//! - `consume`: fetch the topic from its earliest offsets; throughput, and latency per fetch.
//! - `e2e`: produce as above and consume at the same time from the end; latency from the send
//!   time carried in each record to its arrival at the consumer.
//!
//! It runs on glommio executors (`--threads`), connections spread over them, partitions over
//! connections. Each executor reports an interval (records, bytes, a latency histogram) every
//! second; the main thread prints a progress line, then the summary (`--json`: one object as
//! the last line), and optionally writes an HdrHistogram interval log (`--hdr-out`) and an HTML
//! report with inline SVG charts (`--report`).

pub mod report;
mod workload;

use crate::storage::format::Compression;
use anyhow::{bail, Context};
use hdrhistogram::Histogram;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// What to drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Produce,
    Consume,
    E2e,
}

/// How the producer writes (Kafka's producer modes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Producing {
    /// No producer id (Kafka's `enable.idempotence=false`).
    Plain,
    /// An idempotent producer: a producer id, sequences per partition.
    Idempotent,
    /// A transactional producer: each connection its own transactional id, transactions of
    /// this many records (the batches of one transaction pipelined), committed one after the
    /// other; the commit latency is measured apart. `version`: Kafka's transaction version, 0
    /// (AddPartitionsToTxn before the writes, EndTxn v4, the epoch kept) or 2 (KIP-890 part 2:
    /// Produce v12 adds each partition at its first write, EndTxn v5 bumps the epoch).
    Transactional { records_per_txn: u64, version: i16 },
}

/// Everything `tidemark load` takes.
#[derive(Debug, Clone)]
pub struct LoadArgs {
    pub mode: Mode,
    pub bootstrap: SocketAddr,
    pub topic: String,
    /// Partitions to create the topic with if it does not exist (an existing topic keeps its own).
    pub partitions: i32,
    pub record_size: usize,
    /// Records carry keys cycling over this many distinct ones (8-byte big-endian numbers);
    /// `None`: no keys.
    pub keys: Option<u64>,
    pub batch_bytes: usize,
    pub linger: Duration,
    /// 0, 1 or -1 (all).
    pub acks: i16,
    pub compression: Compression,
    /// Records per second for all connections together; `None`: as fast as possible.
    pub rate: Option<f64>,
    pub duration: Option<Duration>,
    pub records: Option<u64>,
    pub connections: usize,
    pub threads: usize,
    /// Produce requests outstanding per connection.
    pub in_flight: usize,
    pub producing: Producing,
}

impl LoadArgs {
    /// Defaults for everything but the mode, the address and the topic.
    pub fn new(mode: Mode, bootstrap: &str, topic: &str) -> anyhow::Result<LoadArgs> {
        let addr = bootstrap
            .to_socket_addrs()
            .with_context(|| format!("--bootstrap {bootstrap}: not a host:port"))?
            .next()
            .with_context(|| format!("--bootstrap {bootstrap}: no address"))?;
        Ok(LoadArgs {
            mode,
            bootstrap: addr,
            topic: topic.to_string(),
            partitions: 1,
            record_size: 1024,
            keys: None,
            batch_bytes: 256 * 1024,
            linger: Duration::from_millis(5),
            acks: -1,
            compression: Compression::None,
            rate: None,
            duration: Some(Duration::from_secs(10)),
            records: None,
            connections: 1,
            threads: 1,
            in_flight: 5,
            producing: Producing::Plain,
        })
    }

    pub fn check(&self) -> anyhow::Result<()> {
        if self.record_size < 8 {
            bail!("--record-size must be at least 8 (each record carries its send time)");
        }
        if !matches!(self.acks, -1..=1) {
            bail!("--acks must be 0, 1 or all");
        }
        if self.mode == Mode::E2e && self.acks == 0 {
            bail!("e2e needs acknowledged produces (--acks 1 or all)");
        }
        if self.keys == Some(0) {
            bail!("--keys must be at least 1");
        }
        if self.connections == 0 || self.threads == 0 || self.in_flight == 0 || self.partitions < 1 {
            bail!("--connections, --threads, --in-flight and --partitions must be at least 1");
        }
        if self.rate.is_some_and(|r| !(r > 0.0 && r.is_finite())) {
            bail!("--rate must be a positive number or max");
        }
        if self.producing != Producing::Plain && (self.acks != -1 || self.in_flight > 5) {
            bail!("--idempotent and --transactional need --acks all and at most 5 requests in flight (Kafka's rule)");
        }
        if matches!(self.producing, Producing::Transactional { records_per_txn: 0, .. }) {
            bail!("--txn-records must be at least 1");
        }
        if matches!(self.producing, Producing::Transactional { version, .. } if version != 0 && version != 2) {
            bail!("--transaction-version is 0 (the original protocol) or 2 (KIP-890 part 2)");
        }
        if matches!(self.producing, Producing::Transactional { .. })
            && (self.rate.is_some() || self.mode != Mode::Produce)
        {
            bail!("--transactional runs closed loop (no --rate) in produce mode");
        }
        if self.duration.is_none() && self.records.is_none() {
            bail!("give --duration or --records");
        }
        Ok(())
    }
}

/// One second (or so) of one executor's work.
#[derive(Debug)]
pub struct Interval {
    /// Seconds since the start at the interval's end.
    pub at: f64,
    pub records: u64,
    pub bytes: u64,
    pub errors: u64,
    /// Latency in µs.
    pub latency: Histogram<u64>,
    /// Transactional runs: EndTxn (commit) latency in µs.
    pub commits: Histogram<u64>,
    /// End-to-end runs: the producer's latency (send to acknowledgement) in µs.
    pub produced: Histogram<u64>,
    /// Produce runs (acks 1 or all): each request's round trip (sent to answered) in µs.
    pub requests: Histogram<u64>,
}

/// The result of a run.
#[derive(Debug)]
pub struct Summary {
    pub mode: Mode,
    pub records: u64,
    pub bytes: u64,
    pub errors: u64,
    pub elapsed: Duration,
    /// Latency in µs.
    pub latency: Histogram<u64>,
    /// Transactional runs: EndTxn (commit) latency in µs (empty otherwise).
    pub commits: Histogram<u64>,
    /// End-to-end runs: the producer's latency (send to acknowledgement) in µs, beside the
    /// end-to-end latency (empty otherwise).
    pub produced: Histogram<u64>,
    /// Produce runs (acks 1 or all): each produce request's round trip (sent to answered) in µs. Beside the
    /// records' latency (from when each was due), it splits the wait to be sent (batching, a
    /// free in-flight slot) from the time in flight.
    pub requests: Histogram<u64>,
    /// (second, records/s, MB/s, p99 ms) per second of the run.
    pub timeline: Vec<(f64, f64, f64, f64)>,
    /// Every interval, for the HdrHistogram log.
    pub intervals: Vec<Interval>,
}

/// p50, p99, p99.9 and max of a histogram of µs, in ms.
fn quantiles_ms(h: &Histogram<u64>) -> [f64; 4] {
    let q = |p: f64| h.value_at_quantile(p) as f64 / 1000.0;
    [q(0.5), q(0.99), q(0.999), h.max() as f64 / 1000.0]
}

pub fn new_histogram() -> Histogram<u64> {
    // 1 µs to 1 hour, 3 significant digits.
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid bounds")
}

/// Run a load test; `progress` gets a line every second.
pub fn run(args: &LoadArgs, mut progress: impl FnMut(&str)) -> anyhow::Result<Summary> {
    args.check()?;
    let partitions = workload::prepare(args)?;
    let (tx, rx) = mpsc::channel::<Interval>();
    let start = Instant::now();
    let mut handles = Vec::new();
    for t in 0..args.threads {
        let (args, tx) = (args.clone(), tx.clone());
        let h = glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
            .name(&format!("load-{t}"))
            .spawn(move || async move { workload::run_thread(&args, t, partitions, start, tx).await })
            .map_err(|e| anyhow::anyhow!("starting load thread {t}: {e}"))?;
        handles.push(h);
    }
    drop(tx);
    let mut intervals = Vec::new();
    let mut timeline = Vec::new();
    let mut second: Vec<Interval> = Vec::new();
    let mut next_print = 1.0;
    let mut total = new_histogram();
    let mut commits = new_histogram();
    let mut produced = new_histogram();
    let mut requests = new_histogram();
    let (mut records, mut bytes) = (0u64, 0u64);
    let mut flush = |second: &mut Vec<Interval>,
                     upto: f64,
                     timeline: &mut Vec<(f64, f64, f64, f64)>,
                     progress: &mut dyn FnMut(&str)| {
        let n: u64 = second.iter().map(|i| i.records).sum();
        let b: u64 = second.iter().map(|i| i.bytes).sum();
        let mut h = new_histogram();
        for i in second.iter() {
            let _ = h.add(&i.latency);
        }
        let p99 = h.value_at_quantile(0.99) as f64 / 1000.0;
        records += n;
        bytes += b;
        timeline.push((upto, n as f64, b as f64 / 1e6, p99));
        progress(&format!(
            "[{upto:6.1}s] {:>10.0} records/s {:>9.1} MB/s  p99 {:>8.3} ms  total {} records",
            n as f64,
            b as f64 / 1e6,
            p99,
            records
        ));
        second.clear();
    };
    while let Ok(interval) = rx.recv() {
        let _ = total.add(&interval.latency);
        let _ = commits.add(&interval.commits);
        let _ = produced.add(&interval.produced);
        let _ = requests.add(&interval.requests);
        while interval.at >= next_print + 1.0 {
            flush(&mut second, next_print, &mut timeline, &mut progress);
            next_print += 1.0;
        }
        second.push(Interval {
            at: interval.at,
            records: interval.records,
            bytes: interval.bytes,
            errors: interval.errors,
            latency: interval.latency.clone(),
            commits: new_histogram(),
            produced: new_histogram(),
            requests: new_histogram(),
        });
        intervals.push(interval);
    }
    let elapsed = start.elapsed();
    if !second.is_empty() {
        let at = elapsed.as_secs_f64();
        flush(&mut second, at, &mut timeline, &mut progress);
    }
    let mut failures = Vec::new();
    for (t, h) in handles.into_iter().enumerate() {
        match h.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => failures.push(format!("load thread {t}: {e:#}")),
            Err(e) => failures.push(format!("load thread {t}: {e:?}")),
        }
    }
    if !failures.is_empty() {
        bail!("{}", failures.join("; "));
    }
    let errors = intervals.iter().map(|i| i.errors).sum();
    Ok(Summary {
        mode: args.mode,
        records,
        bytes,
        errors,
        elapsed,
        latency: total,
        commits,
        produced,
        requests,
        timeline,
        intervals,
    })
}

impl Summary {
    pub fn records_per_sec(&self) -> f64 {
        self.records as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    pub fn mb_per_sec(&self) -> f64 {
        self.bytes as f64 / 1e6 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// p50, p90, p99, p99.9, p99.99 and max, in ms.
    pub fn latency_ms(&self) -> [f64; 6] {
        let q = |p: f64| self.latency.value_at_quantile(p) as f64 / 1000.0;
        [q(0.5), q(0.9), q(0.99), q(0.999), q(0.9999), self.latency.max() as f64 / 1000.0]
    }

    pub fn to_text(&self) -> String {
        let [p50, p90, p99, p999, p9999, max] = self.latency_ms();
        let what = match self.mode {
            Mode::Produce => "produce (send to acknowledgement)",
            Mode::Consume => "fetch (request to answer)",
            Mode::E2e => "end to end (send to arrival at the consumer)",
        };
        let mut text = format!(
            "{} records in {:.2} s: {:.0} records/s, {:.1} MB/s, {} errors\nlatency, {what}: p50 {p50:.3} ms, p90 {p90:.3} ms, p99 {p99:.3} ms, p99.9 {p999:.3} ms, p99.99 {p9999:.3} ms, max {max:.3} ms",
            self.records,
            self.elapsed.as_secs_f64(),
            self.records_per_sec(),
            self.mb_per_sec(),
            self.errors
        );
        if !self.produced.is_empty() {
            let [p50, p99, p999, max] = self.produce_latency_ms();
            text += &format!(
                "\nlatency, produce (send to acknowledgement): p50 {p50:.3} ms, p99 {p99:.3} ms, p99.9 {p999:.3} ms, max {max:.3} ms"
            );
        }
        if self.mode == Mode::Produce && !self.requests.is_empty() {
            let [p50, p99, p999, max] = quantiles_ms(&self.requests);
            text += &format!(
                "\nproduce requests ({}, sent to answered): p50 {p50:.3} ms, p99 {p99:.3} ms, p99.9 {p999:.3} ms, max {max:.3} ms",
                self.requests.len()
            );
        }
        if !self.commits.is_empty() {
            let [p50, p99, max] = self.commit_latency_ms();
            text += &format!(
                "\ncommits (EndTxn, request to answer): {} transactions, p50 {p50:.3} ms, p99 {p99:.3} ms, max {max:.3} ms",
                self.commits.len()
            );
        }
        text
    }

    /// End-to-end runs: the producer's latency p50, p99, p99.9 and max, in ms.
    pub fn produce_latency_ms(&self) -> [f64; 4] {
        quantiles_ms(&self.produced)
    }

    /// Commit latency p50, p99 and max, in ms.
    pub fn commit_latency_ms(&self) -> [f64; 3] {
        let q = |p: f64| self.commits.value_at_quantile(p) as f64 / 1000.0;
        [q(0.5), q(0.99), self.commits.max() as f64 / 1000.0]
    }

    pub fn to_json(&self) -> String {
        let [p50, p90, p99, p999, p9999, max] = self.latency_ms();
        let four = |name: &str, h: &Histogram<u64>| {
            let [p50, p99, p999, max] = quantiles_ms(h);
            format!(", \"{name}\": {{\"p50\": {p50:.3}, \"p99\": {p99:.3}, \"p999\": {p999:.3}, \"max\": {max:.3}}}")
        };
        let mut produced = if self.produced.is_empty() { String::new() } else { four("produce_ms", &self.produced) };
        if self.mode == Mode::Produce && !self.requests.is_empty() {
            produced += &four("request_ms", &self.requests);
        }
        let commits = if self.commits.is_empty() {
            String::new()
        } else {
            let [c50, c99, cmax] = self.commit_latency_ms();
            format!(
                ", \"transactions\": {}, \"commit_ms\": {{\"p50\": {c50:.3}, \"p99\": {c99:.3}, \"max\": {cmax:.3}}}",
                self.commits.len()
            )
        };
        format!(
            "{{\"records\": {}, \"records_per_sec\": {:.1}, \"mb_per_sec\": {:.3}, \"errors\": {}, \"latency_ms\": {{\"p50\": {p50:.3}, \"p90\": {p90:.3}, \"p99\": {p99:.3}, \"p999\": {p999:.3}, \"p9999\": {p9999:.3}, \"max\": {max:.3}}}{produced}{commits}}}",
            self.records,
            self.records_per_sec(),
            self.mb_per_sec(),
            self.errors
        )
    }
}

/// Parse a codec name.
pub fn compression(name: &str) -> anyhow::Result<Compression> {
    Ok(match name {
        "none" => Compression::None,
        "gzip" => Compression::Gzip,
        "snappy" => Compression::Snappy,
        "lz4" => Compression::Lz4,
        "zstd" => Compression::Zstd,
        other => bail!("--compression {other}: expected none, gzip, snappy, lz4 or zstd"),
    })
}

/// Write the run as an HdrHistogram interval log (one histogram per interval, µs).
pub fn write_hdr_log(summary: &Summary, path: &std::path::Path) -> anyhow::Result<()> {
    use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
    use hdrhistogram::serialization::V2Serializer;
    let mut out = Vec::new();
    let mut ser = V2Serializer::new();
    {
        let began = std::time::SystemTime::now() - summary.elapsed;
        let mut w = IntervalLogWriterBuilder::new()
            .add_comment("tidemark load: latency in microseconds")
            .with_start_time(began)
            .with_base_time(began)
            .with_max_value_divisor(1000.0)
            .begin_log_with(&mut out, &mut ser)
            .map_err(|e| anyhow::anyhow!("{e:?}"))?;
        for i in &summary.intervals {
            // Intervals are about a second long and end at `at`.
            let start = Duration::from_secs_f64((i.at - 1.0).max(0.0));
            let length = Duration::from_secs_f64(i.at.clamp(0.001, 1.0));
            w.write_histogram(&i.latency, start, length, Tag::new("load")).map_err(|e| anyhow::anyhow!("{e:?}"))?;
        }
    }
    std::fs::write(path, out).with_context(|| format!("writing {}", path.display()))
}
