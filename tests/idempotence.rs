//! The idempotent producer in the storage engine: sequence and epoch rules on append, retried
//! batches answered with their first offsets and never written twice, and the producer state
//! rebuilt after clean restarts (snapshots) and power cuts (snapshot plus the recovery scan).

mod common;

use common::stored_batches;
use futures_lite::future::block_on;
use std::path::PathBuf;
use tidemark::config::LogConfig;
use tidemark::io::{CrashMode, Disk, MemDisk};
use tidemark::storage::format::batch::BatchBuilder;
use tidemark::storage::producers::SequenceError;
use tidemark::storage::{Log, ReadUpTo, StorageError};

const NOW: i64 = 1_700_000_000_000;

fn dir() -> PathBuf {
    PathBuf::from("/d/idem-0")
}

fn open(disk: &MemDisk, config: &LogConfig) -> Log<MemDisk> {
    block_on(Log::open(disk.clone(), &dir(), config.clone())).expect("open").0
}

/// A batch of `n` records of producer `pid`/`epoch` starting at sequence `seq`.
fn batch(pid: i64, epoch: i16, seq: i32, n: usize) -> Vec<u8> {
    let mut b = BatchBuilder::new().producer(pid, epoch, seq);
    for i in 0..n {
        b.push(NOW, None, Some(format!("{pid}:{epoch}:{}", seq as usize + i).as_bytes()), &[]);
    }
    b.finish()
}

fn records(log: &mut Log<MemDisk>) -> usize {
    let bytes = block_on(log.read(log.log_start_offset(), 1 << 20, ReadUpTo::LogEnd)).unwrap();
    stored_batches(&bytes).len()
}

/// The rules on append: in order accepted; a retry of one of the last five batches answered
/// with its offsets and not appended; a gap or an old epoch refused; a new epoch starts at 0;
/// a producer unknown here may start at any sequence (Kafka 2.5+); a batch with a producer id
/// must be alone in its request and carry a sequence.
#[test]
fn sequence_rules_on_append() {
    let disk = MemDisk::new();
    disk.set_now_ms(NOW);
    let mut log = open(&disk, &LogConfig::default());
    let (a, _) = log.append(&batch(1, 0, 0, 3), NOW).unwrap();
    let (b, _) = log.append(&batch(1, 0, 3, 2), NOW).unwrap();
    assert_eq!((a.base_offset, b.base_offset, b.last_offset), (0, 3, 4));
    let (dup, _) = log.append(&batch(1, 0, 0, 3), NOW).unwrap();
    assert_eq!((dup.base_offset, dup.last_offset, dup.records), (0, 2, 0), "the first append's offsets");
    assert_eq!(log.log_end_offset(), 5, "nothing appended for the retry");
    let e = log.append(&batch(1, 0, 7, 1), NOW).unwrap_err();
    assert!(matches!(e, StorageError::Sequence(SequenceError::OutOfOrder { expected: 5, found: 7, .. })), "{e}");
    log.append(&batch(2, 0, 4, 1), NOW).expect("an unknown producer may start anywhere");
    assert!(log.append(&batch(2, 0, 6, 1), NOW).is_err(), "and then continues in order");
    log.append(&batch(1, 1, 0, 1), NOW).unwrap();
    let e = log.append(&batch(1, 0, 5, 1), NOW).unwrap_err();
    assert!(matches!(e, StorageError::Sequence(SequenceError::InvalidEpoch { current: 1, .. })), "{e}");
    // Two batches in one request, one of them idempotent: refused, nothing appended.
    let end = log.log_end_offset();
    let mut req = batch(3, 0, 0, 2);
    req.extend(batch(3, 0, 2, 2));
    assert!(matches!(log.append(&req, NOW), Err(StorageError::Sequence(SequenceError::NotAlone { pid: 3 }))));
    let mut plain = BatchBuilder::new();
    plain.push(NOW, None, Some(b"plain"), &[]);
    let mut mixed = plain.finish();
    mixed.extend(batch(4, 0, 0, 1));
    assert!(log.append(&mixed, NOW).is_err());
    assert_eq!(log.log_end_offset(), end);
    // A producer id without a sequence.
    assert!(log.append(&batch(5, 0, -1, 1), NOW).is_err());
    // Batches without a producer id take no part.
    log.append(&plain.finish(), NOW).unwrap();
    log.append(&plain.finish(), NOW).unwrap();
}

/// spec: T8.1/T8.2 for producer state — after a clean restart (the snapshot written at the
/// seal) and after a power cut (the snapshot below the active segment plus the recovery scan of
/// it), a retry of the last batch is still a duplicate and the next sequence is still expected;
/// rolls in between write snapshots, of which two are kept.
#[test]
fn producer_state_survives_restarts_and_crashes() {
    let config = LogConfig { segment_bytes: 1024, flush_messages: 1, ..LogConfig::default() };
    let disk = MemDisk::new();
    disk.set_now_ms(NOW);
    let mut log = open(&disk, &config);
    let mut seq = 0;
    for _ in 0..40 {
        log.append(&batch(9, 0, seq, 2), NOW).unwrap();
        seq += 2;
    }
    block_on(log.flush_all()).unwrap();
    assert!(log.segment_count() > 3);
    let check = |log: &mut Log<MemDisk>, seq: i32, what: &str| {
        let end = log.log_end_offset();
        let (dup, _) = log.append(&batch(9, 0, seq - 2, 2), NOW).unwrap();
        assert_eq!(
            (dup.base_offset, dup.records, log.log_end_offset()),
            (end - 2, 0, end),
            "{what}: a retry is a duplicate"
        );
        assert!(log.append(&batch(9, 0, seq + 1, 1), NOW).is_err(), "{what}: a gap is refused");
    };
    check(&mut log, seq, "live");
    block_on(log.close()).unwrap();
    let mut log = open(&disk, &config);
    check(&mut log, seq, "after a clean restart");
    for _ in 0..10 {
        log.append(&batch(9, 0, seq, 2), NOW).unwrap();
        seq += 2;
    }
    block_on(log.flush_all()).unwrap();
    drop(log);
    disk.crash(CrashMode::DropUnsynced);
    let mut log = open(&disk, &config);
    check(&mut log, seq, "after a power cut");
    let snapshots = disk.paths().iter().filter(|p| p.extension().is_some_and(|e| e == "snapshot")).count();
    assert_eq!(snapshots, 2, "the newest two snapshots are kept");
}

/// A batch appended but not durable at a power cut is gone after it; its retry is then a new
/// append (not a duplicate), at the same offsets: no gap, no duplicate.
#[test]
fn a_retry_of_a_lost_batch_is_appended_again() {
    let config = LogConfig { flush_messages: u64::MAX, ..LogConfig::default() };
    let disk = MemDisk::new();
    disk.set_now_ms(NOW);
    let mut log = open(&disk, &config);
    log.append(&batch(5, 0, 0, 2), NOW).unwrap();
    block_on(log.flush_all()).unwrap();
    log.append(&batch(5, 0, 2, 2), NOW).unwrap(); // never flushed
    drop(log);
    disk.crash(CrashMode::DropUnsynced);
    let mut log = open(&disk, &config);
    assert_eq!(log.log_end_offset(), 2);
    let (again, _) = log.append(&batch(5, 0, 2, 2), NOW).unwrap();
    assert_eq!((again.base_offset, again.records), (2, 2), "appended, at the offsets it had");
    assert_eq!(records(&mut log), 2);
}

/// A damaged snapshot is not trusted: the state comes from the newest valid one before it and
/// the sealed segments after that one, replayed; so a retry is still a duplicate. Replayed
/// batches count as appended when their segment was written, not at their own (producer)
/// timestamps, so old CreateTimes do not expire a producer right after a crash. Idle producers
/// expire with `producer.id.expiration.ms`.
#[test]
fn damaged_snapshots_replays_and_expiry() {
    let config = LogConfig { segment_bytes: 1024, producer_id_expiration_ms: 60_000, ..LogConfig::default() };
    let disk = MemDisk::new();
    disk.set_now_ms(NOW);
    let mut log = open(&disk, &config);
    let mut seq = 0;
    for _ in 0..30 {
        log.append(&batch(7, 0, seq, 2), NOW).unwrap();
        seq += 2;
    }
    block_on(log.close()).unwrap();
    let mut snaps: Vec<PathBuf> =
        disk.paths().into_iter().filter(|p| p.extension().is_some_and(|e| e == "snapshot")).collect();
    snaps.sort();
    assert_eq!(snaps.len(), 2);
    let newest = snaps.last().unwrap();
    let mut bytes = block_on(disk.read_file(newest)).unwrap().unwrap();
    bytes[10] ^= 1;
    disk.set_file_bytes(newest, bytes);
    let mut log = open(&disk, &config);
    let end = log.log_end_offset();
    let (dup, _) = log.append(&batch(7, 0, seq - 2, 2), NOW).unwrap();
    assert_eq!(
        (dup.base_offset, dup.records),
        (end - 2, 0),
        "rebuilt from the older snapshot and the segments after it"
    );
    // Old producer timestamps, then a power cut: the replay dates the producer by the segment.
    let old = |pid: i64| {
        let mut b = BatchBuilder::new().producer(pid, 0, 0);
        b.push(NOW - 10 * 86_400_000, None, Some(b"backfill"), &[]);
        b.finish()
    };
    log.append(&old(8), NOW).unwrap();
    block_on(log.flush_all()).unwrap();
    drop(log);
    disk.crash(CrashMode::DropUnsynced);
    let mut log = open(&disk, &config);
    block_on(log.maintain(NOW + 1)).unwrap();
    assert!(log.append(&old(8), NOW + 1).unwrap().0.records == 0, "still known after the crash: a duplicate");
    assert_eq!(log.producers().len(), 2);
    block_on(log.maintain(NOW + 60_000)).unwrap();
    assert_eq!(log.producers().len(), 2, "not idle long enough");
    block_on(log.maintain(NOW + 60_002)).unwrap();
    assert_eq!(log.producers().len(), 0, "expired");
}
