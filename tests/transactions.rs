//! Transactions in the storage engine: a transactional batch holds the last stable offset at
//! its first offset until its marker is appended and durable; a non-transactional batch of
//! the same producer meanwhile is refused; markers of an older producer or coordinator epoch
//! are refused and append nothing; open transactions survive a restart (the snapshot) and a
//! power cut (the recovery scan replays data and markers).

use futures_lite::future::block_on;
use std::path::PathBuf;
use tidemark::config::LogConfig;
use tidemark::io::{CrashMode, MemDisk};
use tidemark::storage::format::batch::BatchBuilder;
use tidemark::storage::format::marker::Marker;
use tidemark::storage::producers::SequenceError;
use tidemark::storage::{Log, StorageError};

const NOW: i64 = 1_700_000_000_000;

fn dir() -> PathBuf {
    PathBuf::from("/d/txn-0")
}

fn open(disk: &MemDisk) -> Log<MemDisk> {
    block_on(Log::open(disk.clone(), &dir(), LogConfig::default())).expect("open").0
}

fn batch(pid: i64, seq: i32, transactional: bool) -> Vec<u8> {
    let b = BatchBuilder::new().producer(pid, 0, seq);
    let mut b = if transactional { b.transactional() } else { b };
    b.push(NOW, None, Some(b"v"), &[]);
    b.finish()
}

fn flush(log: &mut Log<MemDisk>) {
    block_on(log.flush_all()).expect("flush");
}

/// The rules above, in one story over a MemDisk with a power cut and a clean restart.
#[test]
fn markers_move_the_last_stable_offset() {
    let disk = MemDisk::new();
    disk.set_now_ms(NOW);
    let mut log = open(&disk);
    log.append(&batch(1, 0, false), NOW).unwrap();
    log.append(&batch(2, 0, true), NOW).unwrap();
    log.append(&batch(3, 0, true), NOW).unwrap();
    flush(&mut log);
    assert_eq!((log.durable_offset(), log.last_stable_offset()), (3, 1), "producer 2's open transaction");
    let e = log.append(&batch(2, 1, false), NOW).unwrap_err();
    assert!(matches!(e, StorageError::Sequence(SequenceError::InTransaction { pid: 2 })), "{e}");
    let commit = Marker { commit: true, coordinator_epoch: 5 };
    let (info, done, _) = log.append_marker(2, 0, commit, NOW).unwrap();
    assert_eq!((info.base_offset, done.map(|d| d.first_offset)), (3, Some(1)));
    assert_eq!(log.last_stable_offset(), 1, "until the marker is durable");
    flush(&mut log);
    assert_eq!(log.last_stable_offset(), 2, "now producer 3's transaction holds it");
    let stale = Marker { commit: false, coordinator_epoch: 4 };
    let e = log.append_marker(2, 0, stale, NOW).unwrap_err(); // producer 2's last marker came from coordinator epoch 5
    assert!(matches!(e, StorageError::Sequence(SequenceError::CoordinatorFenced { .. })), "{e}");
    assert_eq!(log.log_end_offset(), 4, "a refused marker appends nothing");
    log.append(&batch(2, 1, true), NOW).expect("sequences go on after the marker");
    flush(&mut log);
    // A power cut: the recovery scan replays the open transactions.
    disk.crash(CrashMode::DropUnsynced);
    let mut log = open(&disk);
    assert_eq!(log.last_stable_offset(), 2, "producer 3's transaction is still open after the replay");
    let abort = Marker { commit: false, coordinator_epoch: 5 };
    let (_, done, _) = log.append_marker(3, 0, abort, NOW).unwrap();
    assert!(done.unwrap().aborted);
    flush(&mut log);
    assert_eq!(log.last_stable_offset(), 4, "producer 2's second transaction");
    block_on(log.close()).unwrap();
    let log = open(&disk);
    assert_eq!(log.last_stable_offset(), 4, "kept by the snapshot of a clean restart");
}

/// spec: T8.2, T8.4 — recovery rebuilds what the aborted-transaction index needs, as it does the
/// other indexes.
/// The aborted-transaction index: an ABORT marker's transaction (producer, first offset) is
/// listed for a READ_COMMITTED read overlapping it, not for one starting past its marker, and
/// never a committed one. The list survives a seal (the segment's `.txnindex`, 34 bytes an
/// entry), a power cut (the sealed segment's from its file, the active segment's rebuilt by
/// the recovery scan) and a clean restart (every segment's from its file); retention drops
/// the entries of deleted segments with their files.
#[test]
fn aborted_transactions_are_indexed_and_recovered() {
    use tidemark::io::Disk;
    let disk = MemDisk::new();
    disk.set_now_ms(NOW);
    let mut log = open(&disk);
    let abort = Marker { commit: false, coordinator_epoch: 0 };
    let commit = Marker { commit: true, coordinator_epoch: 0 };
    log.append(&batch(1, 0, true), NOW).unwrap(); // 0
    log.append(&batch(2, 0, true), NOW).unwrap(); // 1
    log.append_marker(1, 0, abort, NOW).unwrap(); // 2
    log.append_marker(2, 0, commit, NOW).unwrap(); // 3
    assert_eq!(log.aborted_between(0, 10), vec![(1, 0)]);
    assert_eq!(log.aborted_between(3, 10), vec![], "producer 1's transaction ended before offset 3");
    log.roll(NOW);
    flush(&mut log);
    let txnindex = dir().join(format!("{:020}.txnindex", 0));
    let bytes = block_on(disk.read_file(&txnindex)).unwrap().expect("written at seal");
    assert_eq!(bytes.len(), 34, "one entry");
    log.append(&batch(3, 0, true), NOW).unwrap(); // 4
    log.append(&batch(1, 1, true), NOW).unwrap(); // 5
    log.append_marker(3, 0, abort, NOW).unwrap(); // 6
    flush(&mut log);
    assert_eq!(log.aborted_between(0, 100), vec![(1, 0), (3, 4)]);
    assert_eq!(log.aborted_between(4, 5), vec![(3, 4)], "a read of [4, 5) overlaps producer 3's");
    disk.crash(CrashMode::DropUnsynced);
    let mut log = open(&disk);
    assert_eq!(log.aborted_between(0, 100), vec![(1, 0), (3, 4)], "after a power cut");
    assert_eq!(log.last_stable_offset(), 5, "producer 1's second transaction is open");
    log.append_marker(1, 0, abort, NOW).unwrap(); // 7
    flush(&mut log);
    assert_eq!(log.aborted_between(0, 100), vec![(1, 0), (3, 4), (1, 5)]);
    block_on(log.close()).unwrap();
    let mut log = open(&disk);
    assert_eq!(log.aborted_between(0, 100), vec![(1, 0), (3, 4), (1, 5)], "after a clean restart");
    let removed = log.take_segments_before(4);
    assert_eq!(removed, vec![0]);
    assert_eq!(log.aborted_between(0, 100), vec![(3, 4), (1, 5)], "the deleted segment's entry is gone");
}

/// spec: T5.2, T5.3 — a transaction marker carries the broker's time when the coordinator
/// writes it and takes part in the time index like any batch: a marker whose time crosses
/// into a new bucket gets the bucket's entry at its offset, the close entry can be a
/// marker's, and a power cut's rescan rebuilds the same entries from the stored markers.
#[test]
fn markers_take_part_in_the_time_index() {
    let config = LogConfig { time_index_interval_ms: 10, ..Default::default() };
    let disk = MemDisk::new();
    disk.set_now_ms(NOW);
    let mut log = block_on(Log::open(disk.clone(), &dir(), config.clone())).unwrap().0;
    log.append(&batch(1, 0, true), NOW).unwrap(); // offset 0 at NOW
    let commit = Marker { commit: true, coordinator_epoch: 0 };
    log.append_marker(1, 0, commit, NOW + 25).unwrap(); // offset 1, bucket NOW + 20
    log.append(&batch(2, 0, true), NOW + 31).unwrap(); // offset 2 (the batch's ts is NOW)
    log.append_marker(2, 0, commit, NOW + 57).unwrap(); // offset 3, bucket NOW + 50
    flush(&mut log);
    let entries = log.time_entries(0).unwrap();
    let bucket = |t: i64| t - t.rem_euclid(10);
    assert_eq!(entries, vec![(bucket(NOW), 0), (bucket(NOW + 25), 1), (bucket(NOW + 57), 3)]);
    disk.crash(CrashMode::DropUnsynced);
    let log = block_on(Log::open(disk.clone(), &dir(), config.clone())).unwrap().0;
    assert_eq!(log.time_entries(0).unwrap(), entries, "rebuilt from the stored markers");
    block_on(log.close()).unwrap();
    let log = block_on(Log::open(disk.clone(), &dir(), config)).unwrap().0;
    assert_eq!(
        log.time_entries(0).unwrap().last(),
        Some(&(NOW + 57, 3)),
        "T5.3: the close entry is the marker's exact time"
    );
}

/// spec: T8.2 — a crash at any point of a seal loses no acknowledged state.
/// A first seal cut before its producer snapshot (the snapshot is written last): the open
/// transaction of the sealed segment is found again by replaying from the log start, so the
/// LSO stays held and its ABORT marker is indexed (without the replay no producer would be
/// known and READ_COMMITTED would read the aborted records).
#[test]
fn open_transaction_survives_a_seal_cut_before_its_snapshot() {
    use tidemark::io::Disk;
    let disk = MemDisk::new();
    disk.set_now_ms(NOW);
    let mut log = open(&disk);
    log.append(&batch(1, 0, false), NOW).unwrap(); // 0
    log.append(&batch(2, 0, true), NOW).unwrap(); // 1: producer 2's transaction opens
    log.roll(NOW);
    flush(&mut log);
    let snapshot = dir().join(format!("{:020}.snapshot", 2));
    assert!(block_on(disk.read_file(&snapshot)).unwrap().is_some(), "the seal wrote it");
    block_on(disk.remove_file(&snapshot)).unwrap();
    disk.crash(CrashMode::DropUnsynced);
    let mut log = open(&disk);
    assert_eq!(log.last_stable_offset(), 1, "producer 2's transaction is still open");
    log.append_marker(2, 0, Marker { commit: false, coordinator_epoch: 0 }, NOW).unwrap();
    flush(&mut log);
    assert_eq!(log.aborted_between(0, 100), vec![(2, 1)]);
}
