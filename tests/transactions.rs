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
