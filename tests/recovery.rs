//! Crash and torn-write recovery on the in-memory disk: cut a segment at every byte, zero or
//! garble its tail, flip bits in every batch, drop unsynced writes, damage index files.
//! Recovery must keep every synced batch, expose no partial batch, and rebuild indexes
//! identical to freshly built ones.

mod common;

/// Broker time for appends in tests that do not exercise time.
const NOW: i64 = 10_000;

use common::{batches, tagged_batch, with_base};
use futures_lite::future::block_on;
use std::path::{Path, PathBuf};
use tidemark::config::LogConfig;
use tidemark::io::{CrashMode, Fault, FaultOp, MemDisk};
use tidemark::storage::format::BatchHeader;
use tidemark::storage::{Log, ReadUpTo, StorageError};

fn config() -> LogConfig {
    LogConfig {
        index_interval_bytes: 150,
        write_chunk_bytes: 8192,
        preallocate_bytes: 8192,
        flush_messages: u64::MAX,
        ..LogConfig::default()
    }
}

fn dir() -> PathBuf {
    PathBuf::from("/data/topic-0")
}

fn open(disk: &MemDisk, config: &LogConfig) -> Log<MemDisk> {
    block_on(Log::open(disk.clone(), &dir(), config.clone())).expect("open").0
}

/// The batches as stored, with their offsets: `n` batches of varying sizes.
fn stored(n: u64) -> Vec<(i64, Vec<u8>)> {
    let mut out = Vec::new();
    let mut next = 0i64;
    for tag in 0..n {
        let recs = 1 + (tag % 4) as usize;
        let b = tagged_batch(tag, recs, (tag as usize * 53) % 300, 1000 + tag as i64);
        out.push((next, with_base(&b, next)));
        next += recs as i64;
    }
    out
}

/// Append every batch to a fresh log on `disk`, flush, and return the log.
fn write_log(disk: &MemDisk, config: &LogConfig, data: &[(i64, Vec<u8>)]) -> Log<MemDisk> {
    let mut log = open(disk, config);
    for (_, b) in data {
        log.append(b, NOW).expect("append");
    }
    block_on(log.flush_all()).expect("flush");
    log
}

fn read_all(log: &mut Log<MemDisk>) -> Vec<(i64, Vec<u8>)> {
    let mut at = log.log_start_offset();
    let mut out = Vec::new();
    while at < log.log_end_offset() {
        let bytes = block_on(log.read(at, 1 << 16, ReadUpTo::LogEnd)).expect("read");
        let bs = batches(&bytes);
        assert!(!bs.is_empty());
        at = bs.last().unwrap().0.next_offset();
        out.extend(bs.into_iter().map(|(h, b)| (h.base_offset, b)));
    }
    out
}

fn seg_path(ext: &str) -> PathBuf {
    dir().join(format!("{:020}.{ext}", 0))
}

/// The index appends build for `data` (a fresh log, never recovered).
fn fresh_index(config: &LogConfig, data: &[(i64, Vec<u8>)]) -> Vec<(u32, u32)> {
    let disk = MemDisk::new();
    let log = write_log(&disk, config, data);
    log.index_entries(0).expect("active index")
}

/// spec: T8.2 — a segment cut at any byte recovers to the whole batches before the cut; with
/// a zero tail or garbage after the cut too. The rebuilt index equals a fresh one.
#[test]
fn cut_at_every_byte_keeps_whole_batches_and_rebuilds_the_same_index() {
    let config = config();
    let data = stored(24);
    let disk = MemDisk::new();
    let log = write_log(&disk, &config, &data);
    let full = disk.file_bytes(&seg_path("log")).unwrap();
    let size: usize = data.iter().map(|(_, b)| b.len()).sum();
    assert!(full.len() >= size, "preallocated file holds the data");
    assert!(full[size..].iter().all(|&b| b == 0), "preallocated space is zero");
    drop(log);
    for cut in 0..=size {
        for tail in 0..3 {
            let disk = MemDisk::new();
            block_on(tidemark::io::Disk::create_dir_all(&disk, &dir())).unwrap();
            let mut bytes = full[..cut].to_vec();
            match tail {
                0 => {}
                1 => bytes.resize(cut + 8192, 0),
                _ => bytes.extend((0..300u32).map(|i| (i * 7 + 1) as u8)),
            }
            // Whole batches present in the file (a zero fill can complete a batch whose last
            // bytes were zero: that batch is then whole and valid).
            let mut at = 0usize;
            let whole = data
                .iter()
                .take_while(|(_, b)| {
                    let ok = bytes.get(at..at + b.len()) == Some(&b[..]);
                    at += b.len();
                    ok
                })
                .count();
            assert!(
                whole
                    >= data
                        .iter()
                        .scan(0, |e, (_, b)| {
                            *e += b.len();
                            Some(*e)
                        })
                        .take_while(|e| *e <= cut)
                        .count()
            );
            disk.set_file_bytes(&seg_path("log"), bytes);
            let (mut log, report) = block_on(Log::open(disk.clone(), &dir(), config.clone())).unwrap();
            assert!(!report.clean);
            let expect = &data[..whole];
            let end = expect.last().map_or(0, |(o, b)| o + BatchHeader::parse(b).unwrap().last_offset_delta as i64 + 1);
            assert_eq!(log.log_end_offset(), end, "cut at {cut}, tail {tail}");
            assert_eq!(read_all(&mut log), expect, "cut at {cut}, tail {tail}");
            assert_eq!(log.index_entries(0).unwrap(), fresh_index(&config, expect), "index after cut at {cut}");
            // The recovered log takes appends at the right offset and survives a clean reopen.
            let (info, _) = log.append(&tagged_batch(999, 2, 10, 5), NOW).unwrap();
            assert_eq!(info.base_offset, end);
            block_on(log.close()).unwrap();
            let mut log = open(&disk, &config);
            assert_eq!(log.log_end_offset(), end + 2);
            assert_eq!(read_all(&mut log).len(), whole + 1);
        }
    }
}

/// spec: T8.2 — a bit flipped anywhere in batch k (inside or outside the CRC's range) cuts
/// the log at batch k: nothing corrupt is ever served.
#[test]
fn bit_flips_truncate_at_the_corrupt_batch() {
    let config = config();
    let data = stored(10);
    let disk = MemDisk::new();
    drop(write_log(&disk, &config, &data));
    let full = disk.file_bytes(&seg_path("log")).unwrap();
    let mut start = 0usize;
    for (k, (_, b)) in data.iter().enumerate() {
        // Every byte of the header and a sample of record bytes.
        let positions: Vec<usize> = (0..61).chain((61..b.len()).step_by(17)).collect();
        for p in positions {
            if (12..16).contains(&p) {
                continue; // partitionLeaderEpoch: outside the CRC and unused by recovery
            }
            let disk = MemDisk::new();
            block_on(tidemark::io::Disk::create_dir_all(&disk, &dir())).unwrap();
            let mut bytes = full.clone();
            bytes[start + p] ^= 0x10;
            disk.set_file_bytes(&seg_path("log"), bytes);
            let mut log = open(&disk, &config);
            assert_eq!(log.log_end_offset(), data[k].0, "flip in batch {k} at byte {p}");
            assert_eq!(read_all(&mut log), &data[..k]);
        }
        start += b.len();
    }
}

/// spec: T8.2 — a power cut keeps every synced batch; unsynced ones may go, whole.
#[test]
fn power_cut_keeps_synced_batches() {
    let config = config();
    let data = stored(30);
    for mode in
        [CrashMode::DropUnsynced, CrashMode::KeepUnsynced, CrashMode::Torn { seed: 7 }, CrashMode::Torn { seed: 99 }]
    {
        let disk = MemDisk::new();
        let mut log = open(&disk, &config);
        for (_, b) in &data[..12] {
            log.append(b, NOW).unwrap();
        }
        block_on(log.flush_all()).unwrap();
        let durable = log.durable_offset();
        for (_, b) in &data[12..] {
            log.append(b, NOW).unwrap();
        }
        // Writes issued and completed but never synced: a flush whose fdatasync failed, then
        // the power cut. What survives of those writes is up to the crash mode.
        disk.inject(FaultOp::Sync, Fault::Eio, 1);
        assert!(block_on(log.flush_all()).is_err());
        assert_eq!(log.durable_offset(), durable, "a failed sync acknowledges nothing");
        drop(log);
        disk.crash(mode);
        let mut log = open(&disk, &config);
        assert!(log.log_end_offset() >= durable, "{mode:?}");
        let got = read_all(&mut log);
        assert_eq!(got, data[..got.len()], "{mode:?}");
        if matches!(mode, CrashMode::DropUnsynced) {
            assert_eq!(log.log_end_offset(), durable);
        }
    }
}

/// A disk that keeps failing: each retry writes the data held in memory again, and the memory it
/// holds does not grow with the number of retries (a retry reuses the cut of the partly filled
/// last page that the failed flush made, instead of cutting it again into a new buffer). Once the
/// disk heals, the next flush makes everything durable.
#[test]
fn failed_flush_retries_hold_constant_memory() {
    let config = config();
    let disk = MemDisk::new();
    let mut log = open(&disk, &config);
    for (_, b) in &stored(5) {
        log.append(b, NOW).unwrap();
    }
    disk.inject(FaultOp::Sync, Fault::Eio, 0); // until healed
    assert!(block_on(log.flush_all()).is_err());
    let held = log.mem_bytes();
    for retry in 0..20 {
        log.clear_flush_failure_if_idle();
        assert!(block_on(log.flush_all()).is_err());
        assert_eq!(log.mem_bytes(), held, "retry {retry} grew the memory held");
    }
    disk.heal();
    block_on(log.flush_all()).unwrap();
    assert_eq!(log.durable_offset(), log.log_end_offset());
}

/// spec: T8.4 — a sealed segment's missing, torn or corrupt offset index is rebuilt,
/// identical to the one written at its seal.
#[test]
fn damaged_index_of_a_sealed_segment_is_rebuilt_identical() {
    let config = LogConfig { segment_bytes: 2048, ..config() };
    let data = stored(40);
    let disk = MemDisk::new();
    let log = write_log(&disk, &config, &data);
    assert!(log.segment_count() >= 3);
    let bases = log.segment_bases();
    block_on(log.close()).unwrap();
    let victim = bases[1];
    let ipath = dir().join(format!("{victim:020}.index"));
    let original = disk.file_bytes(&ipath).unwrap();
    assert!(!original.is_empty(), "test needs a non-empty index");
    for damage in 0..4 {
        let mut bytes = original.clone();
        match damage {
            0 => {
                block_on(tidemark::io::Disk::remove_file(&disk, &ipath)).unwrap();
            }
            1 => bytes.truncate(bytes.len() - 3),
            2 => bytes.extend_from_slice(&[0u8; 8]),
            _ => bytes[5] ^= 0xff,
        }
        if damage != 0 {
            disk.set_file_bytes(&ipath, bytes);
        }
        let mut log = open(&disk, &config);
        assert_eq!(read_all(&mut log), data, "damage {damage}");
        let entries = log.index_entries(victim).unwrap();
        let mut encoded = Vec::new();
        for (r, p) in entries {
            tidemark::storage::format::index::encode_offset_entry(&mut encoded, r, p);
        }
        assert_eq!(encoded, original, "damage {damage}");
        assert_eq!(disk.file_bytes(&ipath).unwrap(), original, "rebuilt index written back (damage {damage})");
        block_on(log.close()).unwrap();
    }
}

/// Clean shutdown trims the active segment to its logical size (no preallocated zeros
/// remain), writes its index and the marker; reopening trusts them without a scan.
#[test]
fn clean_shutdown_trims_and_reopens_without_a_scan() {
    let config = config();
    let data = stored(20);
    let disk = MemDisk::new();
    let log = write_log(&disk, &config, &data);
    let size: usize = data.iter().map(|(_, b)| b.len()).sum();
    assert!(disk.file_bytes(&seg_path("log")).unwrap().len() > size, "preallocated while active");
    block_on(log.close()).unwrap();
    assert_eq!(disk.file_bytes(&seg_path("log")).unwrap().len(), size, "trimmed at close");
    assert!(disk.file_bytes(&dir().join("clean-shutdown")).is_some());
    let (mut log, report) = block_on(Log::open(disk.clone(), &dir(), config.clone())).unwrap();
    assert!(report.clean);
    assert_eq!(report.scanned_bytes, 0);
    assert!(disk.file_bytes(&dir().join("clean-shutdown")).is_none(), "marker removed once reopened");
    assert_eq!(read_all(&mut log), data);
    assert_eq!(log.index_entries(0).unwrap(), fresh_index(&config, &data));
}

/// A marker that does not match the log (or is corrupt) is ignored: the tail is scanned.
#[test]
fn stale_or_corrupt_marker_falls_back_to_a_scan() {
    let config = config();
    let data = stored(5);
    let disk = MemDisk::new();
    block_on(write_log(&disk, &config, &data).close()).unwrap();
    let mpath = dir().join("clean-shutdown");
    let mut m = disk.file_bytes(&mpath).unwrap();
    m[9] ^= 1;
    disk.set_file_bytes(&mpath, m);
    let (mut log, report) = block_on(Log::open(disk.clone(), &dir(), config.clone())).unwrap();
    assert!(!report.clean);
    assert_eq!(read_all(&mut log), data);
}

/// Startup cost does not grow with the number of segments: an unclean open scans only the
/// last segment, whatever the count.
#[test]
fn unclean_open_scans_only_the_last_segment() {
    let config = LogConfig { segment_bytes: 1024, ..config() };
    let data = stored(200);
    let disk = MemDisk::new();
    let log = write_log(&disk, &config, &data);
    assert!(log.segment_count() > 20);
    drop(log);
    disk.crash(CrashMode::DropUnsynced);
    let (mut log, report) = block_on(Log::open(disk.clone(), Path::new("/data/topic-0"), config.clone())).unwrap();
    assert!(!report.clean);
    assert!(report.scanned_bytes <= 8192 + 1024, "scanned {} bytes", report.scanned_bytes);
    assert_eq!(read_all(&mut log), data);
}

/// Batches larger than the read window (16 MiB) and than the 1 MiB scan window are read back
/// whole, after a clean restart (resume path) and after an unclean one (scan path).
#[test]
fn batches_larger_than_every_window() {
    let config = LogConfig { max_message_bytes: 40 << 20, ..config() };
    let big = tagged_batch(1, 2, 17 << 20, 5);
    let small = tagged_batch(2, 1, 10, 6);
    for clean in [true, false] {
        let disk = MemDisk::new();
        let mut log = open(&disk, &config);
        log.append(&small, NOW).unwrap();
        log.append(&big, NOW).unwrap();
        log.append(&small, NOW).unwrap();
        block_on(log.flush_all()).unwrap();
        if clean {
            block_on(log.close()).unwrap();
        } else {
            drop(log);
        }
        let (mut log, report) = block_on(Log::open(disk.clone(), &dir(), config.clone())).unwrap();
        assert_eq!(report.clean, clean);
        assert_eq!(log.log_end_offset(), 4);
        let got = block_on(log.read(1, 1024, ReadUpTo::Durable)).unwrap();
        assert_eq!(batches(&got).len(), 1, "the first batch comes whole even past max_bytes");
        assert_eq!(&got[8..], &big[8..]);
        assert_eq!(read_all(&mut log).len(), 3);
    }
}

/// spec: T8.4 — an index that is well formed but points at the wrong batch is not trusted:
/// a wrong last entry is caught at load and the index rebuilt; a wrong middle entry makes the
/// read fail loudly (never a read that silently skips records).
#[test]
fn well_formed_but_wrong_index_is_never_trusted_silently() {
    let config = LogConfig { segment_bytes: 4096, index_interval_bytes: 0, ..config() };
    let data = stored(60);
    let disk = MemDisk::new();
    let log = write_log(&disk, &config, &data);
    let bases = log.segment_bases();
    block_on(log.close()).unwrap();
    let ipath = dir().join(format!("{:020}.index", bases[0]));
    let original = disk.file_bytes(&ipath).unwrap();
    let n = original.len() / 8;
    assert!(n >= 4);
    // Last entry: keep its relative offset, point it at the previous entry's position + 1.
    let mut bytes = original.clone();
    let prev_pos = u32::from_be_bytes(bytes[(n - 2) * 8 + 4..(n - 2) * 8 + 8].try_into().unwrap());
    bytes[(n - 1) * 8 + 4..].copy_from_slice(&(prev_pos + 1).to_be_bytes());
    disk.set_file_bytes(&ipath, bytes);
    let mut log = open(&disk, &config);
    assert_eq!(read_all(&mut log), data, "rebuilt from the data");
    block_on(log.close()).unwrap();
    assert_eq!(disk.file_bytes(&ipath).unwrap(), original);
    // A middle entry naming the offset of a later batch: a read through it fails.
    let mut bytes = original.clone();
    let rel2 = u32::from_be_bytes(bytes[2 * 8..2 * 8 + 4].try_into().unwrap());
    let rel1 = u32::from_be_bytes(bytes[8..12].try_into().unwrap());
    let pos2 = u32::from_be_bytes(bytes[2 * 8 + 4..2 * 8 + 8].try_into().unwrap());
    bytes[8 + 4..8 + 8].copy_from_slice(&pos2.to_be_bytes()); // entry 1 now points at batch 2
    bytes[2 * 8 + 4..2 * 8 + 8].copy_from_slice(&(pos2 + 1).to_be_bytes());
    disk.set_file_bytes(&ipath, bytes);
    let mut log = open(&disk, &config);
    let r = block_on(log.read(bases[0] + rel1 as i64, 1 << 20, ReadUpTo::Durable));
    assert!(rel2 > rel1);
    assert!(r.is_err(), "a read through a wrong entry must fail, got {:?}", r.map(|b| b.len()));
}

/// A sealed segment is trusted at a clean open and checked on every read: a batch in the middle
/// whose offsets go back (a negative lastOffsetDelta under a valid CRC, as bit rot plus a lucky
/// CRC or a buggy writer could leave) makes reads that reach it fail as corrupt; it is never
/// served, skipped or not (found by fuzzing the recovery: it used to be skipped unchecked yet
/// returned inside the read's range).
#[test]
fn a_batch_going_back_inside_a_read_is_corruption() {
    use tidemark::storage::format::batch::{rewrite_crc, OFF_LAST_OFFSET_DELTA};
    let config = config();
    let data = stored(6);
    let disk = MemDisk::new();
    let log = write_log(&disk, &config, &data);
    block_on(log.close()).unwrap();
    let mut bytes = disk.file_bytes(&seg_path("log")).unwrap();
    let third: usize = data[..2].iter().map(|(_, b)| b.len()).sum();
    let len = data[2].1.len();
    bytes[third + OFF_LAST_OFFSET_DELTA..third + OFF_LAST_OFFSET_DELTA + 4]
        .copy_from_slice(&(-1_000_000i32).to_be_bytes());
    rewrite_crc(&mut bytes[third..third + len]);
    disk.set_file_bytes(&seg_path("log"), bytes);
    let (mut log, report) = block_on(Log::open(disk.clone(), &dir(), config.clone())).unwrap();
    assert!(report.clean, "a clean open reads no sealed batch");
    let r = block_on(log.read(0, 1 << 20, ReadUpTo::LogEnd));
    assert!(matches!(r, Err(StorageError::Corrupt { .. })), "read over the bad batch: {:?}", r.map(|b| b.len()));
    // The batches before it are still served on their own.
    let first = block_on(log.read(0, 1, ReadUpTo::LogEnd)).unwrap();
    assert_eq!(batches(&first).len(), 1);
}
