//! The storage engine on a real filesystem through glommio DMA files (O_DIRECT, io_uring).

mod common;

use common::{batches, run_glommio, tagged_batch};
use std::rc::Rc;
use tidemark::config::LogConfig;
use tidemark::io::{DmaDisk, MemDisk};
use tidemark::storage::{Partition, ReadUpTo};
use tidemark::types::Offset;

fn small_config() -> LogConfig {
    LogConfig { preallocate_bytes: 1 << 20, segment_bytes: 4 << 20, ..LogConfig::default() }
}

/// How many of this process's descriptors are open on one of `paths` (other tests run beside
/// the caller, so count by path, not in total).
fn descriptors_on(paths: &[std::path::PathBuf]) -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.unwrap().path()).ok())
        .filter(|l| paths.contains(l))
        .count()
}

/// PLATFORM.md's IOPOLL probe trap: on a fresh data directory the first write and the first
/// DMA read must both work (glommio would otherwise fail every read with EOPNOTSUPP).
#[test]
fn fresh_data_dir_first_write_then_read() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().to_path_buf();
    run_glommio(move || {
        Box::pin(async move {
            let disk = DmaDisk::open(&root).await.expect("probe");
            let (p, _) = Partition::open(disk, &root.join("t-0"), small_config(), common::test_clock()).await.unwrap();
            let b = tagged_batch(1, 3, 100, 1000);
            let info = p.append(&b).await.unwrap();
            assert_eq!((info.base_offset, info.last_offset), (0, 2));
            // Served from memory, then from disk after a reopen (a real DMA read).
            let got = p.read(Offset(0), 1 << 20, ReadUpTo::Durable).await.unwrap();
            assert_eq!(batches(&got).len(), 1);
            p.close().await.unwrap();
            drop(p);
            let disk = DmaDisk::open(&root).await.unwrap();
            let (p, report) =
                Partition::open(disk, &root.join("t-0"), small_config(), common::test_clock()).await.unwrap();
            assert!(report.clean);
            let got = p.read(Offset(0), 1 << 20, ReadUpTo::Durable).await.expect("DMA read after reopen");
            assert_eq!(&got[8..], &b[8..]);
        })
    });
}

/// Many concurrent appends share fdatasyncs (group commit), each acknowledged only once
/// durable: with 64 appends in flight at once, far fewer than 64 syncs.
#[test]
fn concurrent_appends_share_syncs() {
    run_glommio(|| {
        Box::pin(async {
            let disk = MemDisk::new();
            let (p, _) =
                Partition::open(disk.clone(), std::path::Path::new("/d/t-0"), small_config(), common::test_clock())
                    .await
                    .unwrap();
            let (syncs0, _) = disk.counters();
            let mut tasks = Vec::new();
            for i in 0..64u64 {
                let p = Rc::clone(&p);
                tasks.push(glommio::spawn_local(async move {
                    let info = p.append(&tagged_batch(i, 2, 50, 1)).await.unwrap();
                    assert!(p.log().durable_offset() > info.last_offset, "acknowledged before durable");
                    info
                }));
            }
            let mut offsets = Vec::new();
            for t in tasks {
                offsets.push(t.await.base_offset);
            }
            offsets.sort();
            assert_eq!(offsets, (0..64).map(|i| i * 2).collect::<Vec<_>>());
            let (syncs, _) = disk.counters();
            assert!(syncs - syncs0 <= 4, "64 concurrent appends took {} syncs", syncs - syncs0);
        })
    });
}

/// The active segment is preallocated with fallocate while written and trimmed to its
/// logical size when closed; rolled segments are trimmed at their seal.
#[test]
fn segments_are_preallocated_then_trimmed() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().to_path_buf();
    run_glommio(move || {
        Box::pin(async move {
            let disk = DmaDisk::open(&root).await.unwrap();
            let dir = root.join("t-0");
            let config = LogConfig { segment_bytes: 256 * 1024, preallocate_bytes: 128 * 1024, ..LogConfig::default() };
            let (p, _) = Partition::open(disk, &dir, config, common::test_clock()).await.unwrap();
            let mut total = 0u64;
            for i in 0..100u64 {
                total += p.append(&tagged_batch(i, 10, 500, 1)).await.unwrap().bytes;
            }
            let bases = p.log().segment_bases();
            assert!(bases.len() >= 2, "expected rolls");
            let active = dir.join(format!("{:020}.log", bases.last().unwrap()));
            assert_eq!(
                std::fs::metadata(&active).unwrap().len() % (128 * 1024),
                0,
                "active segment preallocated in steps"
            );
            for b in &bases[..bases.len() - 1] {
                let idx = std::fs::metadata(dir.join(format!("{b:020}.index"))).unwrap().len();
                assert_eq!(idx % 8, 0);
            }
            // Sealed segments keep one descriptor (for reads), not their O_DSYNC one too
            // (dropped at the seal, closed by glommio on a later turn of its reactor).
            let sealed: Vec<_> = bases[..bases.len() - 1].iter().map(|b| dir.join(format!("{b:020}.log"))).collect();
            let extra = || descriptors_on(&sealed) > sealed.len();
            for _ in 0..100 {
                if !extra() {
                    break;
                }
                glommio::timer::sleep(std::time::Duration::from_millis(1)).await;
            }
            assert!(!extra(), "a sealed segment kept its O_DSYNC descriptor");
            p.close().await.unwrap();
            let on_disk: u64 =
                bases.iter().map(|b| std::fs::metadata(dir.join(format!("{b:020}.log"))).unwrap().len()).sum();
            assert_eq!(on_disk, total, "files hold exactly the batches after close");
        })
    });
}

/// kill -9 (no close, nothing flushed beyond what appends waited for): every acknowledged
/// append is there after reopening, read back through DMA.
#[test]
fn acknowledged_appends_survive_an_unclean_stop() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().to_path_buf();
    let root2 = root.clone();
    let written = run_glommio(move || {
        Box::pin(async move {
            let disk = DmaDisk::open(&root).await.unwrap();
            let (p, _) = Partition::open(disk, &root.join("t-0"), small_config(), common::test_clock()).await.unwrap();
            let mut written = Vec::new();
            for i in 0..200u64 {
                let b = tagged_batch(i, 1 + (i % 3) as usize, (i as usize * 31) % 2000, i as i64);
                p.append(&b).await.unwrap();
                written.push(b);
            }
            // No close: the partition is simply dropped with the executor.
            written
        })
    });
    run_glommio(move || {
        Box::pin(async move {
            let disk = DmaDisk::open(&root2).await.unwrap();
            let (p, report) =
                Partition::open(disk, &root2.join("t-0"), small_config(), common::test_clock()).await.unwrap();
            assert!(!report.clean);
            let mut at = 0;
            let mut got = Vec::new();
            while at < p.log().log_end_offset() {
                let bytes = p.read(Offset(at), 64 * 1024, ReadUpTo::Durable).await.unwrap();
                let bs = batches(&bytes);
                at = bs.last().unwrap().0.next_offset();
                got.extend(bs.into_iter().map(|(_, b)| b));
            }
            assert_eq!(got.len(), written.len());
            for (g, w) in got.iter().zip(&written) {
                assert_eq!(&g[8..], &w[8..]);
            }
        })
    });
}

/// spec: T3.5 — with `flush.messages` above 1 an append returns before its fdatasync, and
/// `flush.ms` bounds how long the data stays unflushed.
#[test]
fn flush_ms_flushes_what_appends_did_not_wait_for() {
    run_glommio(|| {
        Box::pin(async {
            let disk = MemDisk::new();
            let config = LogConfig { flush_messages: 1000, flush_ms: 20, ..small_config() };
            let (p, _) = Partition::open(disk.clone(), std::path::Path::new("/d/t-0"), config, common::test_clock())
                .await
                .unwrap();
            let info = p.append(&tagged_batch(1, 3, 10, 1)).await.unwrap();
            assert_eq!(p.log().durable_offset(), 0, "flush.messages=1000: the append did not wait");
            glommio::timer::sleep(std::time::Duration::from_millis(60)).await;
            assert_eq!(p.log().durable_offset(), info.last_offset + 1, "flush.ms flushed it");
            // The counter restarts at each flush: 1000 more records make an append wait.
            let big = tagged_batch(2, 1000, 1, 1);
            let info = p.append(&big).await.unwrap();
            assert_eq!(p.log().durable_offset(), info.last_offset + 1);
        })
    });
}

/// A relative data directory works (glommio's directory calls need absolute paths).
#[test]
fn relative_data_dir_works() {
    std::fs::create_dir_all("target/tmp").unwrap();
    let tmp = tempfile::tempdir_in("target/tmp").unwrap();
    let rel = tmp.path().strip_prefix(std::env::current_dir().unwrap()).unwrap().to_path_buf();
    assert!(rel.is_relative());
    run_glommio(move || {
        Box::pin(async move {
            let disk = DmaDisk::open(&rel).await.unwrap();
            let (p, _) = Partition::open(disk, &rel.join("t-0"), small_config(), common::test_clock()).await.unwrap();
            p.append(&tagged_batch(1, 1, 1, 1)).await.unwrap();
            p.close().await.unwrap();
        })
    });
}

/// spec: T3.5, T8.2 — pipelined flushes (`log::flush`: full chunks are written while the
/// previous commit syncs) acknowledge only what a completed fdatasync covers. Eight appenders
/// write batches of mixed sizes into small chunks with several writes in flight, across
/// segment rolls; the machine
/// dies after a random number of disk changes and then loses power (unsynced writes dropped
/// or torn); in half the rounds one write or fdatasync fails first, on a disk that stays
/// alive, so later jobs drain as failures and the retry rewrites them. After reopening, every acknowledged batch is at its offset, whole. The memory
/// disk's sync covers only writes completed when it was issued, and it panics if two writes
/// of one page are ever in flight together; the test also checks that writes did run during
/// syncs, so the pipeline was exercised. Every other pair of rounds has segments large enough
/// for zeros to be written ahead of the data (`tidemark.zero.ahead.bytes`, during syncs, in
/// 128 KiB writes): they must never overwrite a batch, and the test checks some were written.
#[test]
fn pipelined_flushes_acknowledge_only_durable_data() {
    use std::cell::RefCell;
    use tidemark::io::{CrashMode, Fault, FaultOp};
    use tidemark::metrics::{self, Counter};
    use tidemark::storage::log::Log;
    let (overlapped, zeros) = run_glommio(|| {
        Box::pin(async {
            let mut overlapped = 0;
            let zeros_before = metrics::snapshot().counter(Counter::LogZeroBytes);
            for round in 0..60u64 {
                let disk = MemDisk::new();
                let zeroing = round % 4 >= 2;
                let config = LogConfig {
                    write_chunk_bytes: 8192,
                    max_inflight_writes: 4,
                    segment_bytes: if zeroing { 640 * 1024 } else { 96 * 1024 },
                    preallocate_bytes: if zeroing { 256 * 1024 } else { 32 * 1024 },
                    zero_ahead_bytes: if zeroing { 256 * 1024 } else { 0 },
                    ..LogConfig::default()
                };
                let dir = std::path::Path::new("/d/t-0");
                let (p, _) = Partition::open(disk.clone(), dir, config.clone(), common::test_clock()).await.unwrap();
                // Odd rounds: one write or sync fails on a disk that stays alive (the retry
                // path); every round: the machine dies after some changes.
                disk.fail_after(40 + round * 13 % 400 + if round % 2 == 1 { 400 } else { 0 });
                if round % 2 == 1 {
                    let disk = disk.clone();
                    glommio::spawn_local(async move {
                        for _ in 0..round * 7 % 60 {
                            futures_lite::future::yield_now().await;
                        }
                        let op = if round % 4 == 1 { FaultOp::Write } else { FaultOp::Sync };
                        disk.inject(op, Fault::Eio, 1);
                    })
                    .detach();
                }
                let acked = Rc::new(RefCell::new(Vec::new()));
                let mut tasks = Vec::new();
                for t in 0..8u64 {
                    let (p, acked) = (Rc::clone(&p), Rc::clone(&acked));
                    tasks.push(glommio::spawn_local(async move {
                        for i in 0..40u64 {
                            let tag = t * 1000 + i;
                            let b = tagged_batch(tag, 1 + (tag % 4) as usize, (tag * 7919 + round) as usize % 3000, 1);
                            let Ok(info) = p.append(&b).await else {
                                // Refused while a failed flush is retried: wait a little.
                                glommio::timer::sleep(std::time::Duration::from_millis(5)).await;
                                continue;
                            };
                            assert!(p.log().durable_offset() > info.last_offset, "acknowledged before durable");
                            acked.borrow_mut().push((info.base_offset, b));
                        }
                    }));
                }
                for t in tasks {
                    t.await;
                }
                overlapped += disk.overlapped_writes();
                // The power cut, then a fresh machine with what survived (the old partition's
                // retries cannot touch it).
                disk.crash(if round % 2 == 0 { CrashMode::DropUnsynced } else { CrashMode::Torn { seed: round } });
                let after = MemDisk::new();
                for path in disk.paths() {
                    after.set_file_bytes(&path, disk.file_bytes(&path).unwrap());
                }
                let (mut log, _) = Log::open(after, dir, config).await.unwrap();
                let mut acked = acked.take();
                acked.sort_by_key(|(base, _)| *base);
                let end = acked.last().map_or(0, |(base, b)| base + batches(b)[0].0.record_count as i64);
                assert!(log.log_end_offset() >= end, "round {round}: acknowledged records lost");
                let mut at = 0;
                let mut got = std::collections::BTreeMap::new();
                while at < end {
                    let bytes = log.read(at, 64 * 1024, ReadUpTo::LogEnd).await.unwrap();
                    for (h, b) in batches(&bytes) {
                        at = h.next_offset();
                        got.insert(h.base_offset, b);
                    }
                }
                for (base, b) in &acked {
                    let g = got.get(base).unwrap_or_else(|| panic!("round {round}: batch at {base} lost"));
                    assert_eq!(&g[8..], &b[8..], "round {round}: batch at {base} changed");
                }
            }
            (overlapped, metrics::snapshot().counter(Counter::LogZeroBytes) - zeros_before)
        })
    });
    assert!(overlapped > 0, "no write ran during a sync: the pipeline was not exercised");
    assert!(zeros > 0, "no zeros were written ahead: that path was not exercised");
}

/// The extents of `path` in `[from, to)` that the file system reports as unwritten (reserved
/// by fallocate, never written), via FIEMAP; `None` where the file system cannot say.
fn unwritten_extents(path: &std::path::Path, from: u64, to: u64) -> Option<Vec<(u64, u64)>> {
    use std::os::fd::AsRawFd;
    const FS_IOC_FIEMAP: libc::c_ulong = 0xC020_660B;
    const FIEMAP_FLAG_SYNC: u32 = 1;
    const FIEMAP_EXTENT_UNWRITTEN: u32 = 0x800;
    const EXTENTS: usize = 64;
    // struct fiemap (32 bytes) and its extents (56 bytes each), as u64 words.
    let mut buf = vec![0u64; 4 + EXTENTS * 7];
    buf[0] = from;
    buf[1] = to - from;
    // fm_flags and fm_mapped_extents (u32 each) share word 2; fm_extent_count is word 3's low
    // half (little-endian). In an extent, fe_flags is the low half of word 5.
    buf[2] = FIEMAP_FLAG_SYNC as u64;
    buf[3] = EXTENTS as u64;
    let f = std::fs::File::open(path).unwrap();
    // SAFETY: the buffer is a struct fiemap with room for EXTENTS extents, as the ioctl wants.
    if unsafe { libc::ioctl(f.as_raw_fd(), FS_IOC_FIEMAP, buf.as_mut_ptr()) } != 0 {
        return None;
    }
    let mapped = (buf[2] >> 32) as usize;
    let mut out = Vec::new();
    for e in 0..mapped.min(EXTENTS) {
        let w = &buf[4 + e * 7..4 + e * 7 + 7];
        let (logical, length, flags) = (w[0], w[2], w[5] as u32);
        if flags & FIEMAP_EXTENT_UNWRITTEN != 0 {
            out.push((logical, logical + length));
        }
    }
    Some(out)
}

/// `tidemark.zero.ahead.bytes`: small durable appends (once past the segment's first 64 KiB,
/// where the zeros start) leave zeros written past the active segment's data, so the next
/// appends overwrite written blocks (no reserved extent for the file system to convert and
/// journal at each fdatasync). Checked on the file system's own
/// extent map: written with the default, still reserved-but-unwritten with the setting at 0
/// (so the check itself can tell the two apart). Files go under target/tmp, on the disk the
/// build uses (a tmpfs has no such extents; there the test says so and checks nothing).
#[test]
fn zeros_are_written_ahead_of_small_durable_appends() {
    std::fs::create_dir_all("target/tmp").unwrap();
    let tmp = tempfile::tempdir_in("target/tmp").unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let unwritten_after = |zero_ahead: u64| {
        let root = root.clone();
        run_glommio(move || {
            Box::pin(async move {
                let disk = DmaDisk::open(&root).await.unwrap();
                let dir = root.join(format!("z{zero_ahead}-0"));
                let config = LogConfig { zero_ahead_bytes: zero_ahead, ..LogConfig::default() };
                let (p, _) = Partition::open(disk, &dir, config, common::test_clock()).await.unwrap();
                for i in 0..120u64 {
                    p.append(&tagged_batch(i, 2, 500, 1)).await.unwrap();
                }
                // The last zero write may still be in flight: let it land.
                glommio::timer::sleep(std::time::Duration::from_millis(100)).await;
                assert_eq!(p.log().segment_count(), 1);
                let end = tidemark::io::align_up(p.log().size_bytes());
                let got = unwritten_extents(&dir.join(format!("{:020}.log", 0)), end, end + 128 * 1024);
                p.close().await.unwrap();
                got
            })
        })
    };
    let Some(off) = unwritten_after(0) else {
        eprintln!("the file system under target/tmp has no extent map (FIEMAP): nothing checked");
        return;
    };
    if off.is_empty() {
        eprintln!("the file system under target/tmp does not report unwritten extents: nothing checked");
        return;
    }
    let on = unwritten_after(LogConfig::default().zero_ahead_bytes).unwrap();
    assert!(on.is_empty(), "unwritten extents past the data with zeros written ahead: {on:?}");
}

/// A clean close right after a roll, at every step of the flusher's work: the close waits for
/// the flusher before it drops a never-written active segment, which may be the one whose file
/// a flush job is creating (a close that dropped it made that job's completion panic).
#[test]
fn close_right_after_a_roll_at_every_flusher_step() {
    run_glommio(|| {
        Box::pin(async {
            for steps in 0..12 {
                let disk = MemDisk::new();
                let dir = std::path::Path::new("/d/t-0");
                let (p, _) = Partition::open(disk.clone(), dir, small_config(), common::test_clock()).await.unwrap();
                p.append(&tagged_batch(1, 2, 10, 1)).await.unwrap();
                p.roll();
                for _ in 0..steps {
                    futures_lite::future::yield_now().await;
                }
                p.close().await.unwrap_or_else(|e| panic!("close after {steps} steps: {e}"));
                drop(p);
                let (p, report) = Partition::open(disk, dir, small_config(), common::test_clock()).await.unwrap();
                assert!(report.clean, "after {steps} steps");
                assert_eq!(p.log_end(), Offset(2));
            }
        })
    });
}

/// Zero jobs (`tidemark.zero.ahead.bytes`), driven step by step on the memory disk: none before
/// the segment's file exists; then one job writes zeros from 64 KiB past the data's end to the
/// distance (in whole 128 KiB writes), and only one runs at a time; a commit of data below where
/// its zeros start runs at the same time as it, but a commit whose data would reach them, and
/// the seal of a segment rolled meanwhile, wait for it; none starts while the zeros still reach
/// half the distance ahead; a zero job that fails fails nothing and stops zeroing for the
/// segment; a commit that fails beside a zero job is written again once both are done; after a
/// commit of more than 128 KiB none starts. At the end, after a crash that drops what was not
/// synced, the log reopened from its files holds every batch appended and acknowledged (no zero
/// landed on data).
/// spec: T3.5, T8.2 — zeros never touch acknowledged data, and every acknowledged record
/// survives a crash.
#[test]
fn zero_jobs_run_beside_commits_clear_of_their_data() {
    use futures_util::future::join;
    use tidemark::io::{Fault, FaultOp, PAGE};
    use tidemark::storage::log::Log;
    const KIB: u64 = 1 << 10;
    run_glommio(|| {
        Box::pin(async {
            let page_end = |bytes: u64| bytes.div_ceil(PAGE) * PAGE;
            // One batch of about `kib` KiB.
            let batch = |tag: u64, kib: usize| tagged_batch(tag, kib, 1000, 1);
            let disk = MemDisk::new();
            let dir = std::path::Path::new("/d/z-0");
            let config = LogConfig { preallocate_bytes: 4 << 20, zero_ahead_bytes: 256 << 10, ..LogConfig::default() };
            let (mut log, _) = Log::open(disk.clone(), dir, config.clone()).await.unwrap();
            let mut appended = 0;
            let mut append = |log: &mut Log<MemDisk>, b: Vec<u8>| {
                log.append(&b, 10_000).unwrap();
                appended += 1;
            };
            append(&mut log, batch(0, 1));
            assert!(log.prepare_zeros().is_none(), "zeros before the segment's file exists");
            log.flush_all().await.unwrap();
            let data_end = page_end(log.size_bytes());
            let zeros = log.prepare_zeros().expect("a zero job once the file exists");
            assert!(log.prepare_zeros().is_none(), "two zero jobs at once");
            // Beside it, a commit of data below where the zeros start (64 KiB past the data),
            // both under way at once.
            append(&mut log, batch(1, 20));
            assert!(page_end(log.size_bytes()) <= data_end + 64 * KIB);
            let commit = log.prepare_flush().expect("a commit beside the zero job");
            let (_, writes) = disk.counters();
            let (zeroed, committed) = join(zeros.run(), commit.run()).await;
            assert_eq!(disk.counters().1, writes + 3, "two 128 KiB zero writes and the commit's one");
            log.complete_flush(zeroed).expect("zeros");
            log.complete_flush(committed).expect("the commit");
            let zeroed_to = data_end + 64 * KIB + 2 * 128 * KIB;
            assert!(log.prepare_zeros().is_none(), "zeros while they reach half the distance ahead");
            // The data moves on, in small commits: the zeros reach less than half the distance
            // past it.
            for _ in 0..3 {
                append(&mut log, batch(2, 70));
                log.flush_all().await.unwrap();
            }
            assert!(zeroed_to - page_end(log.size_bytes()) < 128 * KIB);
            // A commit that fails beside a zero job: once both are done, the retry writes it.
            let zeros = log.prepare_zeros().expect("a zero job once the zeros are short");
            append(&mut log, batch(3, 10));
            let commit = log.prepare_flush().expect("a commit beside the zero job");
            disk.inject(FaultOp::Sync, Fault::Eio, 1);
            let (zeroed, committed) = join(zeros.run(), commit.run()).await;
            disk.heal();
            assert!(log.complete_flush(committed).is_err(), "a failed sync reported as a success");
            log.complete_flush(zeroed).expect("zeros");
            log.flush_all().await.unwrap();
            assert_eq!(log.durable_offset(), log.log_end_offset(), "the retry made the commit durable");
            let zeroed_to = zeroed_to + 2 * 128 * KIB;
            // A commit whose data would reach where the next zeros start waits for them.
            for _ in 0..3 {
                append(&mut log, batch(4, 75));
                log.flush_all().await.unwrap();
            }
            let zeros = log.prepare_zeros().expect("a zero job once the zeros are short");
            append(&mut log, batch(5, 130));
            assert!(page_end(log.size_bytes()) > zeroed_to);
            assert!(log.prepare_flush().is_none(), "a commit over zeros being written");
            disk.inject(FaultOp::Write, Fault::Eio, 1);
            let done = zeros.run().await;
            disk.heal();
            log.complete_flush(done).expect("a failed zero job fails nothing");
            let durable = {
                let commit = log.prepare_flush().expect("the commit once the zeros are done");
                log.complete_flush(commit.run().await).expect("the commit")
            };
            assert_eq!(durable, log.log_end_offset(), "the commit's data is durable");
            append(&mut log, batch(6, 50));
            log.flush_all().await.unwrap();
            assert!(log.prepare_zeros().is_none(), "zeros after a zero write failed");
            let end = log.log_end_offset();
            assert_eq!(log.durable_offset(), end);
            drop(log);
            disk.crash(tidemark::io::CrashMode::DropUnsynced);
            let (mut log, _) = Log::open(disk.clone(), dir, config).await.unwrap();
            assert_eq!(log.log_end_offset(), end);
            let mut found = 0;
            let mut at = 0;
            while at < end {
                let bytes = log.read(at, 1 << 20, ReadUpTo::LogEnd).await.unwrap();
                let got = batches(&bytes);
                assert!(!got.is_empty(), "no batch at offset {at}");
                found += got.len();
                at = got.last().map(|(h, _)| h.last_offset() + 1).unwrap();
            }
            assert_eq!(found, appended, "batches read back after the zero jobs");

            // The seal of a segment rolled while a zero job runs waits for it.
            let disk = MemDisk::new();
            let config = LogConfig { preallocate_bytes: 4 << 20, ..LogConfig::default() };
            let (mut log, _) = Log::open(disk.clone(), std::path::Path::new("/d/z-1"), config).await.unwrap();
            log.append(&batch(0, 1), 10_000).unwrap();
            log.flush_all().await.unwrap();
            let zeros = log.prepare_zeros().expect("a zero job");
            log.roll(10_000);
            assert!(log.prepare_flush().is_none(), "a seal beside a zero job");
            let done = zeros.run().await;
            log.complete_flush(done).expect("zeros");
            log.flush_all().await.unwrap();
            assert_eq!(log.segment_count(), 2, "sealed, and the next segment started");
            // After a commit of more than 128 KiB no zeros, after a small one again.
            log.append(&batch(1, 150), 10_000).unwrap();
            log.flush_all().await.unwrap();
            assert!(log.prepare_zeros().is_none(), "zeros after a commit of more than 128 KiB");
            log.append(&batch(2, 1), 10_000).unwrap();
            log.flush_all().await.unwrap();
            assert!(log.prepare_zeros().is_some(), "no zeros after a small commit");
        })
    });
}

/// A commit job of one write with nothing written ahead of it goes out as one synced write
/// (`DiskFile::write_synced_at`: on the DMA disk, one write through an O_DSYNC descriptor), any
/// other commit as its writes, then an fdatasync. The memory disk gives a synced write the least
/// the contract allows (that write alone is made durable, as one FUA write would be): a commit
/// that covered chunks written ahead with a synced write would lose them at the crash right
/// after it. A seal is never a synced write either.
/// spec: T3.5 — every acknowledged record survives a crash.
#[test]
fn one_write_commits_are_synced_writes_and_only_those() {
    use tidemark::storage::log::Log;
    // Every batch from offset 0 to the log's end, read back: their count.
    async fn count_batches(log: &mut Log<MemDisk>) -> usize {
        let (end, mut found, mut at) = (log.log_end_offset(), 0, 0);
        while at < end {
            let bytes = log.read(at, 1 << 20, ReadUpTo::LogEnd).await.unwrap();
            let got = batches(&bytes);
            assert!(!got.is_empty(), "no batch at offset {at}");
            found += got.len();
            at = got.last().map(|(h, _)| h.last_offset() + 1).unwrap();
        }
        found
    }
    run_glommio(|| {
        Box::pin(async {
            let batch = |tag: u64, kib: usize| tagged_batch(tag, kib, 1000, 1);
            let disk = MemDisk::new();
            let dir = std::path::Path::new("/d/s-0");
            let config = LogConfig { write_chunk_bytes: 8192, zero_ahead_bytes: 0, ..LogConfig::default() };
            let (mut log, _) = Log::open(disk.clone(), dir, config.clone()).await.unwrap();
            let appended = std::cell::Cell::new(0);
            let append = |log: &mut Log<MemDisk>, b: Vec<u8>| {
                log.append(&b, 10_000).unwrap();
                appended.set(appended.get() + 1);
            };
            // One small batch: one write, made durable by itself.
            append(&mut log, batch(0, 1));
            log.flush_all().await.unwrap();
            assert_eq!(disk.synced_writes(), 1, "a one-write commit as a synced write");
            let (syncs, _) = disk.counters();
            // Chunks written ahead while a commit syncs: the next commit covers them with an
            // fdatasync, not with a synced write of its own chunk.
            append(&mut log, batch(1, 5));
            let commit = log.prepare_flush().expect("a commit");
            let Ok(written) = commit.write().await else { panic!("the commit's write failed") };
            log.flush_written();
            append(&mut log, batch(2, 20));
            let ahead = log.prepare_flush().expect("a write-ahead job of the full chunks");
            let done = ahead.run().await;
            log.complete_flush(written.finish().await).expect("the commit");
            log.complete_flush(done).expect("the write-ahead job");
            assert_eq!(disk.synced_writes(), 2, "the commit of one write beside them");
            let (syncs_before, writes_before) = disk.counters();
            append(&mut log, batch(3, 1));
            let commit = log.prepare_flush().expect("the commit covering the chunks written ahead");
            log.complete_flush(commit.run().await).expect("the commit");
            assert_eq!(disk.synced_writes(), 2, "a synced write would not cover the chunks written ahead");
            assert_eq!(disk.counters(), (syncs_before + 1, writes_before + 1), "one write, one fdatasync");
            assert!(syncs_before > syncs);
            // The power cut right after: everything acknowledged is there.
            let end = log.log_end_offset();
            assert_eq!(log.durable_offset(), end);
            drop(log);
            disk.crash(tidemark::io::CrashMode::DropUnsynced);
            let (mut log, _) = Log::open(disk.clone(), dir, config.clone()).await.unwrap();
            assert_eq!(log.log_end_offset(), end, "acknowledged records lost");
            assert_eq!(count_batches(&mut log).await, appended.get(), "batches read back after the crash");
            // A rolled segment's seal syncs apart.
            append(&mut log, batch(4, 1));
            log.flush_all().await.unwrap();
            let synced = disk.synced_writes();
            log.roll(10_000);
            log.flush_all().await.unwrap();
            assert_eq!(disk.synced_writes(), synced, "a seal as a synced write");
            assert_eq!(log.segment_count(), 2);
            append(&mut log, batch(5, 1));
            log.flush_all().await.unwrap();
            assert_eq!(disk.synced_writes(), synced + 1, "the new segment's one-write commit");
            let end = log.log_end_offset();
            drop(log);
            disk.crash(tidemark::io::CrashMode::DropUnsynced);
            let (mut log, _) = Log::open(disk.clone(), dir, config).await.unwrap();
            assert_eq!(log.log_end_offset(), end, "acknowledged records lost");
            assert_eq!(count_batches(&mut log).await, appended.get(), "batches read back after the second crash");
        })
    });
}

/// The DMA disk's synced write goes through a second descriptor, opened with O_DSYNC on first
/// use: its bytes read back through the file's own descriptor at once, beside plain writes and
/// over them, and after a reopen; `writes_done` (a sealed segment) drops that descriptor, a later
/// synced write opens it again, and closing the file closes both.
#[test]
fn dma_synced_writes_read_back_and_close_their_descriptor() {
    use tidemark::io::{Disk, DiskFile};
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().to_path_buf();
    run_glommio(move || {
        Box::pin(async move {
            let disk = DmaDisk::open(&root).await.expect("probe");
            let path = root.join("f");
            let open_on = |path: &std::path::Path| descriptors_on(&[path.to_path_buf()]);
            let filled = |len: usize, byte: u8| {
                let mut b = disk.alloc(len);
                b.as_mut().fill(byte);
                Rc::new(b)
            };
            let f = disk.open_rw(&path).await.unwrap();
            f.allocate(64 << 10).await.unwrap();
            f.write_at(filled(8192, 1), 0).await.unwrap();
            f.write_synced_at(filled(8192, 2), 8192).await.unwrap();
            f.write_synced_at(filled(4096, 3), 4096).await.unwrap();
            assert_eq!(open_on(&path), 2, "the file and its O_DSYNC descriptor");
            let want: Vec<u8> = [vec![1u8; 4096], vec![3; 4096], vec![2; 8192]].concat();
            assert_eq!(f.read_at(0, 16384).await.unwrap(), want);
            // A sealed segment's file stays open for reads, without the O_DSYNC descriptor
            // (glommio closes a dropped file on a later turn of its reactor).
            f.writes_done();
            for _ in 0..100 {
                if open_on(&path) == 1 {
                    break;
                }
                glommio::timer::sleep(std::time::Duration::from_millis(1)).await;
            }
            assert_eq!(open_on(&path), 1, "the O_DSYNC descriptor kept after writes_done");
            f.write_synced_at(filled(4096, 4), 12288).await.unwrap();
            f.close().await.unwrap();
            assert_eq!(open_on(&path), 0, "a descriptor left open");
            let want: Vec<u8> = [vec![1u8; 4096], vec![3; 4096], vec![2; 4096], vec![4; 4096]].concat();
            let f = disk.open_existing(&path).await.unwrap();
            assert_eq!(f.read_at(0, 16384).await.unwrap(), want);
            f.close().await.unwrap();
        })
    });
}
