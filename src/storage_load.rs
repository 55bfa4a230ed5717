//! `tidemark storage-load`: durable appends straight into the storage engine on every core,
//! then a read-back that checks every batch, with HdrHistogram latency percentiles. It
//! measures the engine without the network, for side-by-side comparison with fio.
//!
//! One pinned glommio executor per shard; each owns its partitions (`load-<shard>-<n>`) and
//! runs `inflight` appenders per partition. Progress goes to stderr every second.

use crate::config::LogConfig;
use crate::io::DmaDisk;
use crate::storage::format::batch::BatchBuilder;
use crate::storage::{Partition, ReadUpTo};
use glommio::{LocalExecutorBuilder, Placement};
use hdrhistogram::Histogram;
use std::cell::{Cell, RefCell};
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct LoadOptions {
    pub data_dir: PathBuf,
    pub shards: usize,
    pub partitions_per_shard: usize,
    pub record_size: usize,
    pub batch_records: usize,
    pub inflight: usize,
    pub duration: Duration,
    pub config: LogConfig,
    /// Each shard's registered DMA buffer pool (the broker's `tidemark.shard.io.memory.bytes`).
    pub io_memory: usize,
}

#[derive(Debug)]
pub struct Summary {
    pub records: u64,
    pub bytes: u64,
    pub seconds: f64,
    /// Append latency (until durable), microseconds.
    pub latency_us: Histogram<u64>,
    pub read_bytes: u64,
    pub read_seconds: f64,
    pub verified_batches: u64,
    /// The engine's own stages during the appends (`crate::metrics`: the DMA writes, the
    /// fdatasyncs, the synced writes, the wait for a commit), every shard's merged: where an
    /// append's time goes.
    pub stages: crate::metrics::ShardMetrics,
}

impl Summary {
    pub fn records_per_sec(&self) -> f64 {
        self.records as f64 / self.seconds
    }
    pub fn mb_per_sec(&self) -> f64 {
        self.bytes as f64 / 1e6 / self.seconds
    }
    fn ms(&self, q: f64) -> f64 {
        self.latency_us.value_at_quantile(q) as f64 / 1000.0
    }

    /// Latency in ms at p50, p90, p99, p99.9, p99.99 and the maximum.
    pub fn latency_ms(&self) -> [f64; 6] {
        let max = self.latency_us.max() as f64 / 1000.0;
        [self.ms(0.5), self.ms(0.9), self.ms(0.99), self.ms(0.999), self.ms(0.9999), max]
    }

    pub fn read_mb_per_sec(&self) -> f64 {
        self.read_bytes as f64 / 1e6 / self.read_seconds.max(1e-9)
    }

    pub fn to_text(&self) -> String {
        let [p50, p90, p99, p999, p9999, max] = self.latency_ms();
        format!(
            "appended {} records, {:.0} records/s, {:.1} MB/s (batches on disk, 10^6 B)\n\
             append latency ms (durable): p50 {p50:.3} p90 {p90:.3} p99 {p99:.3} p99.9 {p999:.3} p99.99 {p9999:.3} max {max:.3}\n\
             read back {} batches ({:.1} MB) in {:.2} s: {:.1} MB/s, every batch checked\n\
             stages while appending: {}",
            self.records,
            self.records_per_sec(),
            self.mb_per_sec(),
            self.verified_batches,
            self.read_bytes as f64 / 1e6,
            self.read_seconds,
            self.read_mb_per_sec(),
            crate::metrics::summary(&self.stages),
        )
    }

    pub fn to_json(&self) -> String {
        let [p50, p90, p99, p999, p9999, max] = self.latency_ms();
        format!(
            "{{\"records\":{},\"records_per_sec\":{:.1},\"mb_per_sec\":{:.2},\"latency_ms\":{{\"p50\":{p50:.3},\"p90\":{p90:.3},\"p99\":{p99:.3},\"p999\":{p999:.3},\"p9999\":{p9999:.3},\"max\":{max:.3}}},\"read_mb_per_sec\":{:.2},\"stages_us\":{{{}}}}}",
            self.records,
            self.records_per_sec(),
            self.mb_per_sec(),
            self.read_mb_per_sec(),
            crate::metrics::measured(&self.stages)
                .map(|(name, p50, p99, n)| format!("\"{name}\":{{\"p50\":{p50},\"p99\":{p99},\"n\":{n}}}"))
                .collect::<Vec<_>>()
                .join(","),
        )
    }
}

struct ShardResult {
    records: u64,
    bytes: u64,
    hist: Histogram<u64>,
    read_bytes: u64,
    read_time: Duration,
    verified: u64,
    stages: crate::metrics::ShardMetrics,
}

/// Run the load and return its summary.
pub fn run(opts: &LoadOptions) -> anyhow::Result<Summary> {
    std::fs::create_dir_all(&opts.data_dir)?;
    let progress = Arc::new((AtomicU64::new(0), AtomicU64::new(0)));
    let start = Instant::now();
    let mut handles = Vec::new();
    for shard in 0..opts.shards {
        let opts = opts.clone();
        let progress = progress.clone();
        let h = LocalExecutorBuilder::new(Placement::Fixed(shard))
            .name(&format!("shard-{shard}"))
            .io_memory(opts.io_memory)
            .spawn(move || async move { run_shard(shard, opts, progress).await })
            .map_err(|e| anyhow::anyhow!("starting shard {shard}: {e}"))?;
        handles.push(h);
    }
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reporter = {
        let progress = progress.clone();
        let done = done.clone();
        std::thread::spawn(move || {
            let mut last = (0u64, 0u64);
            let mut tick = Instant::now();
            while !done.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
                if tick.elapsed() >= Duration::from_secs(1) {
                    let now = (progress.0.load(Ordering::Relaxed), progress.1.load(Ordering::Relaxed));
                    let dt = tick.elapsed().as_secs_f64();
                    eprintln!(
                        "[{:>4.0}s] {:>10.0} records/s {:>8.1} MB/s",
                        start.elapsed().as_secs_f64(),
                        (now.0 - last.0) as f64 / dt,
                        (now.1 - last.1) as f64 / 1e6 / dt
                    );
                    last = now;
                    tick = Instant::now();
                }
            }
        })
    };
    let mut results = Vec::new();
    for h in handles {
        results.push(h.join().map_err(|e| anyhow::anyhow!("shard failed: {e:?}"))??);
    }
    done.store(true, Ordering::Relaxed);
    let _ = reporter.join();
    let mut hist = Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3)?;
    let mut s = Summary {
        records: 0,
        bytes: 0,
        seconds: opts.duration.as_secs_f64(),
        latency_us: Histogram::new_with_bounds(1, 3_600_000_000, 3)?,
        read_bytes: 0,
        read_seconds: 0.0,
        verified_batches: 0,
        stages: crate::metrics::ShardMetrics::default(),
    };
    for r in results {
        for (all, h) in s.stages.stages.iter_mut().zip(&r.stages.stages) {
            all.add(h)?;
        }
        s.records += r.records;
        s.bytes += r.bytes;
        hist.add(&r.hist)?;
        s.read_bytes += r.read_bytes;
        s.read_seconds = s.read_seconds.max(r.read_time.as_secs_f64());
        s.verified_batches += r.verified;
    }
    s.latency_us = hist;
    Ok(s)
}

async fn run_shard(
    shard: usize,
    opts: LoadOptions,
    progress: Arc<(AtomicU64, AtomicU64)>,
) -> anyhow::Result<ShardResult> {
    let disk = DmaDisk::open(&opts.data_dir).await?;
    let mut parts = Vec::new();
    for n in 0..opts.partitions_per_shard {
        let dir = opts.data_dir.join(format!("load-{shard}-{n}"));
        let (p, _) = Partition::open(disk.clone(), &dir, opts.config.clone(), crate::storage::system_clock()).await?;
        let from = p.log().log_end_offset();
        parts.push((from, p));
    }
    let mut builder = BatchBuilder::new();
    let value = vec![b'v'; opts.record_size];
    // Realistic CreateTime stamps: now (ms), so time-based rolling sees a live partition.
    let now = (crate::storage::system_clock())();
    for _ in 0..opts.batch_records {
        builder.push(now, None, Some(&value), &[]);
    }
    let batch = Rc::new(builder.finish());
    // 1 us .. 1 hour, 3 significant digits.
    let hist = Rc::new(RefCell::new(Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3)?));
    let totals = Rc::new((Cell::new(0u64), Cell::new(0u64)));
    let deadline = Instant::now() + opts.duration;
    let mut tasks = Vec::new();
    for (_, p) in &parts {
        for _ in 0..opts.inflight {
            let (p, batch, hist, totals, progress) =
                (p.clone(), batch.clone(), hist.clone(), totals.clone(), progress.clone());
            tasks.push(glommio::spawn_local(async move {
                while Instant::now() < deadline {
                    let t = Instant::now();
                    let info = p.append(&batch).await?;
                    hist.borrow_mut().saturating_record(t.elapsed().as_micros() as u64);
                    totals.0.set(totals.0.get() + info.records);
                    totals.1.set(totals.1.get() + info.bytes);
                    progress.0.fetch_add(info.records, Ordering::Relaxed);
                    progress.1.fetch_add(info.bytes, Ordering::Relaxed);
                    // Appends that need not wait return at once: let the flusher run.
                    glommio::yield_if_needed().await;
                }
                anyhow::Ok(())
            }));
        }
    }
    for t in tasks {
        t.await?;
    }
    // This shard's stages while appending (its executor thread's; the read-back adds none).
    let stages = crate::metrics::snapshot();
    let read_start = Instant::now();
    let (read_bytes, verified) = read_back(&disk, parts, &opts, &batch).await?;
    let hist = Rc::try_unwrap(hist).map_err(|_| anyhow::anyhow!("appenders still running"))?.into_inner();
    Ok(ShardResult {
        records: totals.0.get(),
        bytes: totals.1.get(),
        hist,
        read_bytes,
        read_time: read_start.elapsed(),
        verified,
        stages,
    })
}

/// Read back what this run appended to each of `parts` (from the offset it started at), from
/// disk after a close and reopen, checking every batch against `batch`: the bytes read and the
/// batches checked.
async fn read_back(
    disk: &DmaDisk,
    parts: Vec<(i64, Rc<Partition<DmaDisk>>)>,
    opts: &LoadOptions,
    batch: &[u8],
) -> anyhow::Result<(u64, u64)> {
    let mut read_bytes = 0u64;
    let mut verified = 0u64;
    for (from, p) in parts {
        p.close().await?;
        let dir = p.log().dir().to_path_buf();
        drop(p);
        let (p, _) = Partition::open(disk.clone(), &dir, opts.config.clone(), crate::storage::system_clock()).await?;
        let end = p.log().log_end_offset();
        let mut at = from;
        while at < end {
            let bytes = p.read(crate::types::Offset(at), 1 << 20, ReadUpTo::Durable).await?;
            let mut pos = 0;
            while pos < bytes.len() {
                let h = crate::storage::format::BatchHeader::parse(&bytes[pos..])?;
                let b = &bytes[pos..pos + h.total_len()];
                anyhow::ensure!(
                    b[8..] == batch[8..],
                    "batch at offset {} differs from what was appended",
                    h.base_offset
                );
                at = h.next_offset();
                pos += h.total_len();
                verified += 1;
            }
            read_bytes += bytes.len() as u64;
        }
        p.close().await?;
    }
    Ok((read_bytes, verified))
}
