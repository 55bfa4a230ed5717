//! Storage benches on a real file (glommio DMA): append + durable flush, and reads by offset
//! from disk; plus the per-batch CPU costs (validation, CRC-32C).
//!
//! Run: `cargo bench --bench storage`. Set TIDEMARK_BENCH_DIR to bench on another disk.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use glommio::{LocalExecutor, LocalExecutorBuilder, Placement};
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};
use tidemark::config::LogConfig;
use tidemark::io::DmaDisk;
use tidemark::storage::format::batch::{check_produced, simple_batch};
use tidemark::storage::{Partition, ReadUpTo};

fn bench_dir(name: &str) -> (tempfile::TempDir, PathBuf) {
    let base = std::env::var_os("TIDEMARK_BENCH_DIR").map(PathBuf::from).unwrap_or_else(std::env::temp_dir);
    let t = tempfile::tempdir_in(base).expect("bench dir");
    let p = t.path().join(name);
    (t, p)
}

fn executor() -> LocalExecutor {
    LocalExecutorBuilder::new(Placement::Unbound).make().expect("executor")
}

/// One append of a batch of `records` x 1 KiB, then wait until durable (fdatasync), with
/// `concurrency` appenders sharing syncs (group commit).
fn append_durable(c: &mut Criterion) {
    let ex = executor();
    let mut g = c.benchmark_group("append_durable");
    g.sample_size(10).measurement_time(Duration::from_secs(4));
    for &(records, concurrency) in &[(16usize, 1usize), (16, 8), (64, 8)] {
        let batch = Rc::new(simple_batch(records, 1024, 0));
        g.throughput(Throughput::Bytes(batch.len() as u64));
        let (_t, dir) = bench_dir("append");
        let root = dir.parent().unwrap().to_path_buf();
        let part = ex.run(async {
            let disk = DmaDisk::open(&root).await.unwrap();
            Partition::open(disk, &dir, LogConfig::default(), tidemark::storage::system_clock()).await.unwrap().0
        });
        g.bench_function(BenchmarkId::from_parameter(format!("{records}x1KiB/c{concurrency}")), |b| {
            b.iter_custom(|iters| {
                ex.run(async {
                    let start = Instant::now();
                    let per = iters.div_ceil(concurrency as u64);
                    let mut tasks = Vec::new();
                    for _ in 0..concurrency {
                        let (p, batch) = (part.clone(), batch.clone());
                        tasks.push(glommio::spawn_local(async move {
                            for _ in 0..per {
                                p.append(&batch).await.unwrap();
                            }
                        }));
                    }
                    for t in tasks {
                        t.await;
                    }
                    start.elapsed()
                })
            })
        });
        ex.run(async { part.close().await.unwrap() });
    }
    g.finish();
}

/// Reads of up to 64 KiB by offset from a closed (on-disk) log: offset index lookup, aligned
/// DMA read, CRC check of every returned batch.
fn read_by_offset(c: &mut Criterion) {
    let ex = executor();
    let (_t, dir) = bench_dir("read");
    let root = dir.parent().unwrap().to_path_buf();
    let batch = simple_batch(16, 1024, 0);
    let config = LogConfig { flush_messages: 10_000, segment_bytes: 64 << 20, ..LogConfig::default() };
    let (part, end) = ex.run(async {
        let disk = DmaDisk::open(&root).await.unwrap();
        let (p, _) =
            Partition::open(disk.clone(), &dir, config.clone(), tidemark::storage::system_clock()).await.unwrap();
        for _ in 0..8192 {
            p.append(&batch).await.unwrap();
        }
        p.close().await.unwrap();
        drop(p);
        let (p, _) = Partition::open(disk, &dir, config.clone(), tidemark::storage::system_clock()).await.unwrap();
        let end = p.log().log_end_offset();
        (p, end)
    });
    let mut g = c.benchmark_group("read_by_offset");
    g.throughput(Throughput::Bytes(64 * 1024));
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    g.bench_function("64KiB_random_offset", |b| {
        b.iter(|| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let off = (x % end as u64) as i64;
            ex.run(async { part.read(tidemark::types::Offset(off), 64 * 1024, ReadUpTo::Durable).await.unwrap() })
        })
    });
    g.finish();
}

/// CPU cost of checking a produced batch (length, CRC-32C, record parse), of CRC-32C alone,
/// and of encoding a batch.
fn validate(c: &mut Criterion) {
    let batch = simple_batch(16, 1024, 0);
    let mut g = c.benchmark_group("validate");
    g.throughput(Throughput::Bytes(batch.len() as u64));
    g.bench_function("check_produced_16x1KiB", |b| {
        b.iter(|| check_produced(std::hint::black_box(&batch), 1 << 20).unwrap())
    });
    // The data path's CRC (crc-fast), and the crc32c crate it replaced, side by side.
    g.bench_function("crc32c_16KiB", |b| {
        b.iter(|| tidemark::storage::format::batch::crc32c_of(&[std::hint::black_box(&batch)]))
    });
    g.bench_function("crc32c_16KiB_crc32c_crate", |b| b.iter(|| crc32c::crc32c(std::hint::black_box(&batch))));
    // Encoding: what a producer (and tidemark load) does per batch.
    let value = vec![b'x'; 1024];
    g.bench_function("encode_16x1KiB", |b| {
        b.iter(|| {
            let mut builder = tidemark::storage::format::batch::BatchBuilder::new();
            for i in 0..16 {
                builder.push(i, None, Some(std::hint::black_box(&value)), &[]);
            }
            builder.finish()
        })
    });
    g.finish();
}

/// CPU cost of legacy message sets (magic 0 and 1, SPEC T1.1): checking 16 x 1 KiB sent as
/// plain magic-1 messages and as a gzip wrapper, and down-converting a 16 x 1 KiB v2 batch
/// for a Fetch v3 (magic 1) and a Fetch v1 (magic 0) reader.
fn legacy(c: &mut Criterion) {
    use tidemark::storage::format::batch::Compression;
    use tidemark::storage::format::convert::down_convert;
    use tidemark::storage::format::legacy::{check_produced as check_legacy, LegacyBuilder};
    let value = vec![b'x'; 1024];
    let mut g = c.benchmark_group("legacy");
    for codec in [Compression::None, Compression::Gzip] {
        let mut b = LegacyBuilder::new(1, codec);
        for i in 0..16 {
            b.push(i, None, Some(&value));
        }
        let set = b.finish();
        g.throughput(Throughput::Bytes(16 * 1024));
        g.bench_function(format!("check_16x1KiB_magic1_{}", codec.name()), |bench| {
            bench.iter(|| {
                let mut pos = 0;
                while pos < set.len() {
                    let total = i32::from_be_bytes(set[pos + 8..pos + 12].try_into().unwrap()) as usize + 12;
                    check_legacy(std::hint::black_box(&set[pos..pos + total]), 1 << 20).unwrap();
                    pos += total;
                }
            })
        });
    }
    let v2 = bytes::Bytes::from(simple_batch(16, 1024, 0));
    for (name, magic) in [("v1", 1i8), ("v0", 0)] {
        g.bench_function(format!("down_convert_16x1KiB_to_{name}"), |bench| {
            bench.iter(|| down_convert(std::hint::black_box(v2.clone()), magic, 1 << 20, 1 << 20).unwrap())
        });
    }
    g.finish();
}

criterion_group!(benches, append_durable, read_by_offset, validate, legacy);
criterion_main!(benches);
