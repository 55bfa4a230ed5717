//! Time-index figures on a real disk (glommio DMA):
//! 1. lookup latency by time on a log of 1M records over many segments, warm (indexes
//!    loaded) and cold (after a restart: each lookup's binary search loads what it touches),
//!    and warm through a batch cache as the broker's (256 MiB: a shard's default share of
//!    `tidemark.fetch.max.memory.bytes` on two cores), where the scans' reads stay in memory;
//! 2. startup time after a clean shutdown with 100, 1,000 and 10,000 segments.
//!
//! `cargo bench --bench time_index` runs it in full (`-- --lookups-only`: part 1 alone); without
//! `--bench` (as `cargo test --all-targets` runs it) it does a small smoke run.
//! TIDEMARK_BENCH_DIR picks the disk.

use glommio::{LocalExecutorBuilder, Placement};
use hdrhistogram::Histogram;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Instant;
use tidemark::budget::Budget;
use tidemark::config::LogConfig;
use tidemark::io::DmaDisk;
use tidemark::storage::cache::BatchCache;
use tidemark::storage::format::batch::BatchBuilder;
use tidemark::storage::{Clock, Log, Partition, ReadUpTo};

const T0: i64 = 1_700_000_000_000;

fn clock() -> Clock {
    Rc::new(|| T0)
}

/// Fill a partition with `records` records (`per_batch` per batch, 1 ms apart, ~100 B each).
async fn fill(disk: &DmaDisk, dir: &Path, config: &LogConfig, records: i64, per_batch: i64) {
    let (p, _) = Partition::open(disk.clone(), dir, config.clone(), clock()).await.unwrap();
    let value = [b'x'; 80];
    let mut ts = T0 - records;
    let mut n = 0;
    while n < records {
        let mut b = BatchBuilder::new();
        for _ in 0..per_batch.min(records - n) {
            b.push(ts, None, Some(&value), &[]);
            ts += 1;
            n += 1;
        }
        p.append(&b.finish()).await.unwrap();
    }
    p.close().await.unwrap();
}

fn pct(h: &Histogram<u64>) -> String {
    format!(
        "p50 {:.1} us, p90 {:.1} us, p99 {:.1} us, max {:.1} us ({} lookups)",
        h.value_at_quantile(0.5) as f64 / 1000.0,
        h.value_at_quantile(0.9) as f64 / 1000.0,
        h.value_at_quantile(0.99) as f64 / 1000.0,
        h.max() as f64 / 1000.0,
        h.len()
    )
}

async fn lookups(root: &Path, records: i64, probes: usize) {
    let disk = DmaDisk::open(root).await.unwrap();
    let dir = root.join("lookup-0");
    let config = LogConfig { segment_bytes: 1 << 20, flush_messages: 1_000_000, ..LogConfig::default() };
    let t = Instant::now();
    fill(&disk, &dir, &config, records, 100).await;
    eprintln!("wrote {records} records in {:.1} s", t.elapsed().as_secs_f64());
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for pass in ["cold (after restart)", "warm", "warm, batch cache"] {
        let mut log = if pass.starts_with("cold") {
            Log::open(disk.clone(), &dir, config.clone()).await.unwrap().0
        } else {
            let (mut log, _) = Log::open(disk.clone(), &dir, config.clone()).await.unwrap();
            if pass.ends_with("cache") {
                log.attach_cache(BatchCache::new(Budget::new(256 << 20), 32 << 20).register());
            }
            for _ in 0..probes {
                let _ = log.offset_for_time(T0 - records + (next() % records as u64) as i64, ReadUpTo::LogEnd).await;
            }
            log
        };
        let segments = log.segment_count();
        let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).unwrap();
        for _ in 0..probes {
            let target = T0 - records + (next() % records as u64) as i64;
            let t = Instant::now();
            let got = log.offset_for_time(target, ReadUpTo::LogEnd).await.unwrap();
            h.saturating_record(t.elapsed().as_nanos() as u64);
            assert_eq!(got, Some((target - (T0 - records), target)), "lookup of {target}");
        }
        println!("lookup by time, {records} records in {segments} segments, {pass}: {}", pct(&h));
    }
}

async fn startup(root: &Path, segments: usize) {
    let disk = DmaDisk::open(root).await.unwrap();
    let dir = root.join(format!("startup-{segments}"));
    // One ~1 KiB batch per segment: segment.bytes just below two batches.
    let config = LogConfig { segment_bytes: 1500, flush_messages: 1_000_000, ..LogConfig::default() };
    let t = Instant::now();
    fill(&disk, &dir, &config, segments as i64 * 10, 10).await;
    let build = t.elapsed();
    let t = Instant::now();
    let (log, report) = Log::open(disk.clone(), &dir, config.clone()).await.unwrap();
    let open = t.elapsed();
    assert!(report.clean);
    println!(
        "startup after clean shutdown, {} segments: {:.1} ms (log built in {:.1} s)",
        log.segment_count() - 1,
        open.as_secs_f64() * 1000.0,
        build.as_secs_f64()
    );
    drop(log);
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let base = std::env::var_os("TIDEMARK_BENCH_DIR").map(PathBuf::from).unwrap_or_else(std::env::temp_dir);
    let tmp = tempfile::tempdir_in(base).unwrap();
    let root = tmp.path().to_path_buf();
    LocalExecutorBuilder::new(Placement::Unbound)
        .spawn(move || async move {
            if full {
                lookups(&root, 1_000_000, 2000).await;
                // `--lookups-only` for A/B runs of lookups: building 10,000 segments takes
                // minutes (a dozen fsyncs each).
                if !std::env::args().any(|a| a == "--lookups-only") {
                    for n in [100, 1000, 10_000] {
                        startup(&root, n).await;
                    }
                }
            } else {
                lookups(&root, 20_000, 50).await;
                startup(&root, 20).await;
            }
        })
        .unwrap()
        .join()
        .unwrap();
}
