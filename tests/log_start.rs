//! DeleteRecords (KIP-107) in the storage engine: the log start offset moves past the first
//! segment's base, reads and lookups respect it, the segments wholly below it go, and it
//! survives clean and unclean restarts (`log-start-offset`, docs/format.md section 8a).

mod common;

use common::{batches, tagged_batch};
use futures_lite::future::block_on;
use std::path::PathBuf;
use tidemark::config::LogConfig;
use tidemark::io::{CrashMode, MemDisk};
use tidemark::storage::format::batch::BatchBuilder;
use tidemark::storage::log::LOG_START_FILE;
use tidemark::storage::{Log, ReadUpTo, StorageError};

const NOW: i64 = 1_000_000;

fn dir() -> PathBuf {
    PathBuf::from("/data/dr-0")
}

/// Small segments (about three batches each) so deletions cross segment boundaries.
fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 3 * 1200,
        index_interval_bytes: 0,
        write_chunk_bytes: 8192,
        preallocate_bytes: 8192,
        retention_ms: None,
        ..LogConfig::default()
    }
}

fn open(disk: &MemDisk) -> Log<MemDisk> {
    block_on(Log::open(disk.clone(), &dir(), config())).expect("open").0
}

/// 10 batches of 10 records: batch b holds offsets 10b..10b+9, record r of it the timestamp
/// 1000 * (b + 1) + r.
fn ten_batches(disk: &MemDisk) -> Log<MemDisk> {
    let mut log = open(disk);
    for b in 0..10u64 {
        log.append(&tagged_batch(b, 10, 80, 1000 * (b as i64 + 1)), NOW).expect("append");
    }
    block_on(log.flush_all()).expect("flush");
    log
}

fn first_offset_read(log: &mut Log<MemDisk>, offset: i64) -> Result<i64, StorageError> {
    let bytes = block_on(log.read(offset, 1 << 20, ReadUpTo::Durable))?;
    Ok(batches(&bytes).first().map_or(-1, |(h, _)| h.base_offset))
}

/// Moving the start to 35 (inside batch 3): reads below 35 are out of range, a read at 35
/// returns batch 3 whole (as Kafka's do; the consumer skips what it did not ask for), ListOffsets
/// -2 answers 35, a time lookup answers no offset below 35, and the segments wholly below
/// are deleted with their files. A smaller or equal offset changes nothing; -1 means the high
/// watermark; an offset past it or below -1 is refused.
// spec: T6.1 — `-2` answers the log start DeleteRecords set; T6.2 — a lookup by time answers
// the first offset at or after the start whose timestamp reaches T.
#[test]
fn delete_records_moves_the_start_and_deletes_segments_below() {
    let disk = MemDisk::new();
    let mut log = ten_batches(&disk);
    let segments_before = log.segment_count();
    assert!(segments_before >= 4, "the test needs several segments, has {segments_before}");
    assert_eq!(block_on(log.delete_records(35, NOW)).unwrap(), 35);
    assert_eq!(log.log_start_offset(), 35);
    assert!(matches!(first_offset_read(&mut log, 34), Err(StorageError::OffsetOutOfRange { .. })));
    assert_eq!(first_offset_read(&mut log, 35).unwrap(), 30);
    assert_eq!(block_on(log.offset_for_time(-2, ReadUpTo::Durable)).unwrap(), Some((35, -1)));
    // Record 31's timestamp is 4001: the first record at or after the start with ts >= 4001
    // is 35 (ts 4005).
    assert_eq!(block_on(log.offset_for_time(4001, ReadUpTo::Durable)).unwrap(), Some((35, 4005)));
    assert_eq!(block_on(log.offset_for_time(2000, ReadUpTo::Durable)).unwrap(), Some((35, 4005)));
    let bases = log.segment_bases();
    assert!(bases[0] <= 35 && bases.get(1).is_none_or(|&b| b > 35), "segments below the start remain: {bases:?}");
    let files = disk.paths();
    assert!(
        !files.iter().any(|f| f.to_str().unwrap().ends_with("00000000000000000000.log")),
        "the first segment's file is still there: {files:?}"
    );
    // Never back; -1 is the high watermark; out of range refused.
    assert_eq!(block_on(log.delete_records(20, NOW)).unwrap(), 35);
    assert_eq!(block_on(log.delete_records(35, NOW)).unwrap(), 35);
    for bad in [101, -2, i64::MIN, i64::MAX] {
        assert!(
            matches!(block_on(log.delete_records(bad, NOW)), Err(StorageError::OffsetOutOfRange { .. })),
            "offset {bad}"
        );
    }
    assert_eq!(log.log_start_offset(), 35);
    assert_eq!(block_on(log.delete_records(-1, NOW)).unwrap(), 100);
    assert_eq!(block_on(log.offset_for_time(-2, ReadUpTo::Durable)).unwrap(), Some((100, -1)));
    assert!(block_on(log.read(100, 1 << 20, ReadUpTo::Durable)).unwrap().is_empty());
}

/// The start survives a clean close and reopen and a power cut (the file is written and
/// synced before the start moves); a damaged file leaves the start at the first segment
/// (never past the log end, never a crash).
// spec: T8.2 — what was acknowledged (here: the log start) survives a power cut.
#[test]
fn the_log_start_survives_restarts() {
    let disk = MemDisk::new();
    let mut log = ten_batches(&disk);
    block_on(log.delete_records(47, NOW)).unwrap();
    block_on(log.close()).unwrap();
    let mut log = open(&disk);
    assert_eq!(log.log_start_offset(), 47);
    assert!(matches!(first_offset_read(&mut log, 46), Err(StorageError::OffsetOutOfRange { .. })));
    block_on(log.delete_records(52, NOW)).unwrap();
    drop(log);
    disk.crash(CrashMode::DropUnsynced);
    let log = open(&disk);
    assert_eq!(log.log_start_offset(), 52, "a power cut lost the log start");
    let first = log.segment_bases()[0];
    drop(log);
    let path = dir().join(LOG_START_FILE);
    let mut bytes = disk.file_bytes(&path).expect("the file exists");
    bytes[9] ^= 1;
    disk.set_file_bytes(&path, bytes);
    let log = open(&disk);
    assert_eq!(log.log_start_offset(), first, "a damaged file is not trusted");
    assert_eq!(log.log_end_offset(), 100);
}

/// Deleting everything rolls the active segment, and the next upkeep pass removes it once
/// sealed: nothing below the start stays on disk. Appends continue at the log end.
#[test]
fn deleting_up_to_the_end_rolls_and_upkeep_removes_the_rest() {
    let disk = MemDisk::new();
    let mut log = ten_batches(&disk);
    assert_eq!(block_on(log.delete_records(100, NOW)).unwrap(), 100);
    block_on(log.flush_all()).unwrap(); // seals the rolled segment
    block_on(log.maintain(NOW)).unwrap();
    assert_eq!(log.segment_bases(), vec![100], "only the new active segment remains");
    let (info, _) = log.append(&tagged_batch(99, 2, 10, NOW), NOW).unwrap();
    assert_eq!(info.base_offset, 100);
    block_on(log.flush_all()).unwrap();
    assert_eq!(log.log_start_offset(), 100);
    assert_eq!(first_offset_read(&mut log, 100).unwrap(), 100);
}

/// `-3` (largest timestamp) looks only at records at or after the log start: in a batch that
/// straddles the start, a larger timestamp below it does not count.
// spec: T6.1 — `-3` among the records a reader can see.
#[test]
fn max_timestamp_lookup_ignores_records_below_the_start() {
    let disk = MemDisk::new();
    let mut log = open(&disk);
    let mut b = BatchBuilder::new();
    for (i, ts) in [5000, 9000, 6000, 7000, 6500].into_iter().enumerate() {
        b.push(ts, None, Some(format!("r{i}").as_bytes()), &[]);
    }
    log.append(&b.finish(), NOW).unwrap();
    block_on(log.flush_all()).unwrap();
    assert_eq!(block_on(log.offset_for_time(-3, ReadUpTo::Durable)).unwrap(), Some((1, 9000)));
    block_on(log.delete_records(2, NOW)).unwrap();
    assert_eq!(block_on(log.offset_for_time(-3, ReadUpTo::Durable)).unwrap(), Some((3, 7000)));
    assert_eq!(block_on(log.offset_for_time(6000, ReadUpTo::Durable)).unwrap(), Some((2, 6000)));
    assert_eq!(block_on(log.offset_for_time(8000, ReadUpTo::Durable)).unwrap(), None);
}
