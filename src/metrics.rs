//! Per-shard latency profiling: an HdrHistogram per stage of a record's path through the broker
//! and a few counters, kept in a thread-local (each shard is one thread; nothing is shared, no
//! atomics on the data path). `server` renders every shard's snapshot as Prometheus text at
//! `--metrics-listen` and logs a summary at shutdown.
//!
//! Stages, in µs:
//! - `network_read`: reading a request frame once its size is known;
//! - `hop`: a call to another shard, from sending to the reply (the channel mesh);
//! - `validate`: checking a produced request's batches (CRC, records, timestamps, sequences);
//! - `copy`: copying the checked batches into the active segment's write buffer;
//! - `dma_write`: a flush job's writes, from the first issued to the last completed;
//! - `fdatasync`: a flush job's fdatasync;
//! - `write_synced`: a commit's one synced (O_DSYNC) write, its write and sync together;
//! - `response_write`: writing a response to the socket;
//! - `request_produce`, `request_fetch`, `request_other`: a request from decoded to answered.

use hdrhistogram::Histogram;
use std::cell::RefCell;
use std::time::Instant;

/// A measured stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    NetworkRead,
    Hop,
    HopSend,
    HopReply,
    Validate,
    Copy,
    DmaWrite,
    Fdatasync,
    WriteSynced,
    CommitWait,
    ResponseQueue,
    ResponseWrite,
    RequestProduce,
    RequestFetch,
    RequestOther,
}

pub const STAGES: [Stage; 15] = [
    Stage::NetworkRead,
    Stage::Hop,
    Stage::HopSend,
    Stage::HopReply,
    Stage::Validate,
    Stage::Copy,
    Stage::DmaWrite,
    Stage::Fdatasync,
    Stage::WriteSynced,
    Stage::CommitWait,
    Stage::ResponseQueue,
    Stage::ResponseWrite,
    Stage::RequestProduce,
    Stage::RequestFetch,
    Stage::RequestOther,
];

impl Stage {
    pub fn name(self) -> &'static str {
        match self {
            Stage::NetworkRead => "network_read",
            Stage::Hop => "hop",
            Stage::HopSend => "hop_send",
            Stage::HopReply => "hop_reply",
            Stage::Validate => "validate",
            Stage::Copy => "copy",
            Stage::DmaWrite => "dma_write",
            Stage::Fdatasync => "fdatasync",
            Stage::WriteSynced => "write_synced",
            Stage::CommitWait => "commit_wait",
            Stage::ResponseQueue => "response_queue",
            Stage::ResponseWrite => "response_write",
            Stage::RequestProduce => "request_produce",
            Stage::RequestFetch => "request_fetch",
            Stage::RequestOther => "request_other",
        }
    }
}

/// Counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counter {
    Requests,
    BytesIn,
    BytesOut,
    RecordsProduced,
    ProduceErrors,
    Connections,
    ConnectionsRefused,
    ShardCallTimeouts,
    TlsHandshakeFailures,
    AuthenticationFailures,
    Reauthentications,
    ExpiredSessionsClosed,
    LogDiskReads,
    LogDiskReadBytes,
    LogZeroBytes,
}

pub const COUNTERS: [Counter; 15] = [
    Counter::Requests,
    Counter::BytesIn,
    Counter::BytesOut,
    Counter::RecordsProduced,
    Counter::ProduceErrors,
    Counter::Connections,
    Counter::ConnectionsRefused,
    Counter::ShardCallTimeouts,
    Counter::TlsHandshakeFailures,
    Counter::AuthenticationFailures,
    Counter::Reauthentications,
    Counter::ExpiredSessionsClosed,
    Counter::LogDiskReads,
    Counter::LogDiskReadBytes,
    Counter::LogZeroBytes,
];

impl Counter {
    pub fn name(self) -> &'static str {
        match self {
            Counter::Requests => "requests_total",
            Counter::BytesIn => "bytes_in_total",
            Counter::BytesOut => "bytes_out_total",
            Counter::RecordsProduced => "records_produced_total",
            Counter::ProduceErrors => "produce_errors_total",
            Counter::Connections => "connections_total",
            Counter::ConnectionsRefused => "connections_refused_total",
            Counter::ShardCallTimeouts => "shard_call_timeouts_total",
            Counter::TlsHandshakeFailures => "tls_handshake_failures_total",
            Counter::AuthenticationFailures => "authentication_failures_total",
            Counter::Reauthentications => "reauthentications_total",
            Counter::ExpiredSessionsClosed => "expired_sessions_closed_total",
            Counter::LogDiskReads => "log_disk_reads_total",
            Counter::LogDiskReadBytes => "log_disk_read_bytes_total",
            Counter::LogZeroBytes => "log_zero_ahead_bytes_total",
        }
    }
}

/// One shard's measurements (`Send`: a snapshot travels to the shard that serves /metrics).
#[derive(Debug, Clone)]
pub struct ShardMetrics {
    pub stages: Vec<Histogram<u64>>,
    pub counters: [u64; COUNTERS.len()],
    /// Values read at snapshot time from the shard's state (memory budgets, partitions with
    /// suspended writes): (name, help, value).
    pub gauges: Vec<(&'static str, &'static str, u64)>,
    /// Per-partition values read at snapshot time: (name, topic, partition, value).
    pub partition_gauges: Vec<(&'static str, String, i32, f64)>,
}

impl Default for ShardMetrics {
    fn default() -> Self {
        ShardMetrics {
            // 1 µs to 1 hour, 2 significant digits (about 1% error): small and fast to record.
            stages: STAGES
                .iter()
                .map(|_| Histogram::new_with_bounds(1, 3_600_000_000, 2).expect("valid bounds"))
                .collect(),
            counters: [0; COUNTERS.len()],
            gauges: Vec::new(),
            partition_gauges: Vec::new(),
        }
    }
}

thread_local! {
    static METRICS: RefCell<ShardMetrics> = RefCell::new(ShardMetrics::default());
}

fn index(stage: Stage) -> usize {
    STAGES.iter().position(|&s| s == stage).expect("every stage is listed")
}

fn counter_index(counter: Counter) -> usize {
    COUNTERS.iter().position(|&c| c == counter).expect("every counter is listed")
}

/// Record that `stage` took `micros`.
pub fn record(stage: Stage, micros: u64) {
    METRICS.with(|m| {
        let _ = m.borrow_mut().stages[index(stage)].record(micros.max(1));
    });
}

/// Record the time since `start` for `stage`.
pub fn since(stage: Stage, start: Instant) {
    record(stage, start.elapsed().as_micros() as u64);
}

/// Add `n` to a counter.
pub fn count(counter: Counter, n: u64) {
    METRICS.with(|m| {
        m.borrow_mut().counters[counter_index(counter)] += n;
    });
}

impl ShardMetrics {
    /// A counter's value.
    pub fn counter(&self, counter: Counter) -> u64 {
        self.counters[counter_index(counter)]
    }

    /// How many times `stage` was recorded.
    pub fn stage_count(&self, stage: Stage) -> u64 {
        self.stages[index(stage)].len()
    }
}

/// This thread's measurements so far.
pub fn snapshot() -> ShardMetrics {
    METRICS.with(|m| m.borrow().clone())
}

/// Prometheus text for the shards' snapshots (summaries with quantiles, per shard).
pub fn prometheus(shards: &[(usize, ShardMetrics)]) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(out, "# HELP tidemark_stage_seconds Time a stage of a request's path took, per shard.");
    let _ = writeln!(out, "# TYPE tidemark_stage_seconds summary");
    for (shard, m) in shards {
        for (stage, h) in STAGES.iter().zip(&m.stages) {
            for q in [0.5, 0.9, 0.99, 0.999] {
                let _ = writeln!(
                    out,
                    "tidemark_stage_seconds{{shard=\"{shard}\",stage=\"{}\",quantile=\"{q}\"}} {:.6}",
                    stage.name(),
                    h.value_at_quantile(q) as f64 / 1e6
                );
            }
            let sum = h.mean() * h.len() as f64 / 1e6;
            let _ =
                writeln!(out, "tidemark_stage_seconds_sum{{shard=\"{shard}\",stage=\"{}\"}} {sum:.6}", stage.name());
            let _ = writeln!(
                out,
                "tidemark_stage_seconds_count{{shard=\"{shard}\",stage=\"{}\"}} {}",
                stage.name(),
                h.len()
            );
        }
    }
    for (i, c) in COUNTERS.iter().enumerate() {
        let _ = writeln!(out, "# TYPE tidemark_{} counter", c.name());
        for (shard, m) in shards {
            let _ = writeln!(out, "tidemark_{}{{shard=\"{shard}\"}} {}", c.name(), m.counters[i]);
        }
    }
    // Every shard reports the same gauges, in the same order.
    if let Some((_, first)) = shards.first() {
        for (i, (name, help, _)) in first.gauges.iter().enumerate() {
            let _ = writeln!(out, "# HELP tidemark_{name} {help}");
            let _ = writeln!(out, "# TYPE tidemark_{name} gauge");
            for (shard, m) in shards {
                if let Some((_, _, v)) = m.gauges.get(i) {
                    let _ = writeln!(out, "tidemark_{name}{{shard=\"{shard}\"}} {v}");
                }
            }
        }
    }
    let mut named: Vec<&str> = shards.iter().flat_map(|(_, m)| m.partition_gauges.iter().map(|g| g.0)).collect();
    named.sort_unstable();
    named.dedup();
    for name in named {
        let help = match name {
            "log_dirty_ratio" => {
                "A compacted partition's dirty share of its cleanable log at the cleaner's last check."
            }
            _ => "A per-partition value.",
        };
        let _ = writeln!(out, "# HELP tidemark_{name} {help}");
        let _ = writeln!(out, "# TYPE tidemark_{name} gauge");
        for (shard, m) in shards {
            for (_, topic, partition, v) in m.partition_gauges.iter().filter(|g| g.0 == name) {
                let topic = topic.replace('\\', "\\\\").replace('"', "\\\"");
                let _ = writeln!(
                    out,
                    "tidemark_{name}{{shard=\"{shard}\",topic=\"{topic}\",partition=\"{partition}\"}} {v}"
                );
            }
        }
    }
    out
}

/// Every stage that was measured: (name, p50 µs, p99 µs, count).
pub fn measured(m: &ShardMetrics) -> impl Iterator<Item = (&'static str, u64, u64, u64)> + '_ {
    STAGES
        .iter()
        .zip(&m.stages)
        .filter(|(_, h)| !h.is_empty())
        .map(|(stage, h)| (stage.name(), h.value_at_quantile(0.5), h.value_at_quantile(0.99), h.len()))
}

/// One log line's worth: p50/p99 of every stage that was measured.
pub fn summary(m: &ShardMetrics) -> String {
    measured(m)
        .map(|(name, p50, p99, n)| format!("{name} p50 {p50}us p99 {p99}us n {n}"))
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Recorded stages and counters appear in the Prometheus text with their quantiles.
    #[test]
    fn records_and_renders() {
        record(Stage::Validate, 10);
        record(Stage::Validate, 1000);
        count(Counter::Requests, 3);
        let text = prometheus(&[(0, snapshot())]);
        assert!(
            text.contains("tidemark_stage_seconds{shard=\"0\",stage=\"validate\",quantile=\"0.99\"} 0.001"),
            "{text}"
        );
        assert!(text.contains("tidemark_stage_seconds_count{shard=\"0\",stage=\"validate\"} 2"));
        assert!(text.contains("tidemark_requests_total{shard=\"0\"} 3"));
        assert!(summary(&snapshot()).contains("validate p50"));
    }
}
