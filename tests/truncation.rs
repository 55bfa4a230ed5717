//! Suffix truncation of a partition (`Partition::truncate_to`, `storage::log::truncate`), on the
//! real DMA disk: what a Raft log does with entries that conflict with the leader's and a
//! follower replica with its divergent suffix (KIP-101). The model tests (`log_model`,
//! `time_index`) check truncation against brute force on the memory disk, a kill at every
//! step included; these check the partition around it: appends refused while it runs, waiters,
//! readers, rolled segments on a real file system, and a restart after it.
//!
//! spec: T5.1, T8.2 — after a truncation, lookups by time answer from the records left only.

mod common;

use common::{batches, run_glommio, tagged_batch, with_base};
use std::rc::Rc;
use tidemark::config::LogConfig;
use tidemark::io::DmaDisk;
use tidemark::storage::{Partition, ReadUpTo, StorageError};
use tidemark::types::{Offset, TimestampMs};

/// Segments of about four batches, so a truncation deletes whole segments and cuts one.
fn config() -> LogConfig {
    LogConfig { segment_bytes: 4 * 1300, index_interval_bytes: 0, ..LogConfig::default() }
}

/// Batch `b` (tag b + 1): 10 records at offsets 10b..10b+9, timestamps 1000 * (b + 1) + r.
fn batch(b: i64) -> Vec<u8> {
    tagged_batch(b as u64 + 1, 10, 100, 1000 * (b + 1))
}

/// The batches readable from offset 0, checked to be `batch(b)` at offset 10b for the b in
/// `want`.
async fn check_batches(p: &Rc<Partition<DmaDisk>>, want: &[i64]) {
    let mut got = Vec::new();
    let mut at = 0;
    loop {
        let bytes = p.read(Offset(at), 1 << 20, ReadUpTo::Durable).await.expect("read");
        if bytes.is_empty() {
            break;
        }
        for (h, b) in batches(&bytes) {
            at = h.base_offset + h.last_offset_delta as i64 + 1;
            got.push(b);
        }
    }
    let expected: Vec<Vec<u8>> = want.iter().enumerate().map(|(i, &b)| with_base(&batch(b), 10 * i as i64)).collect();
    assert_eq!(got.len(), expected.len(), "batch count");
    assert!(got == expected, "the log's batches differ from {want:?}");
}

/// A truncation inside batch 6 of 12 (offset 63): appends made while it runs are refused with
/// NOT_LEADER_OR_FOLLOWER's error and a waiter for an offset past the cut is failed; after it
/// the log ends at 60 (the whole batch holding 63 goes), later segments' files are gone, reads
/// and lookups by time see batches 0-5 only, and an append continues at 60. A restart (clean)
/// gives the same log. Truncating at or past the end changes nothing; below the start is refused.
/// A restart empties the log and starts it again at an offset.
#[test]
fn partition_truncation_cuts_the_suffix_on_a_real_disk() {
    let tmp = tempfile::tempdir_in("target/tmp").or_else(|_| tempfile::tempdir()).unwrap();
    let root = tmp.path().to_path_buf();
    run_glommio(move || {
        Box::pin(async move {
            let dir = root.join("t-0");
            let disk = DmaDisk::open(&root).await.expect("disk");
            let (p, _) = Partition::open(disk, &dir, config(), common::test_clock()).await.unwrap();
            for b in 0..12 {
                p.append(&batch(b)).await.expect("append");
            }
            let segments_before = p.log().segment_count();
            assert!(segments_before >= 3, "the test wants several segments, has {segments_before}");
            // At or past the end: nothing to cut.
            assert_eq!(p.truncate_to(Offset(120)).await.unwrap(), Offset(120));
            assert_eq!(p.truncate_to(Offset(500)).await.unwrap(), Offset(120));

            // Unflushed data, then the truncation, with an append and a waiter while it runs.
            p.append_nowait(&batch(12)).expect("append");
            let truncation = {
                let p = p.clone();
                glommio::spawn_local(async move { p.truncate_to(Offset(63)).await })
            };
            futures_lite::future::yield_now().await;
            let refused = p.append_nowait(&batch(99));
            assert!(matches!(refused, Err(StorageError::Truncating)), "append during truncation: {refused:?}");
            let waiter = {
                let p = p.clone();
                glommio::spawn_local(async move { p.wait_durable(Offset(200)).await })
            };
            assert_eq!(truncation.await.expect("truncate"), Offset(60));
            assert!(matches!(waiter.await, Err(StorageError::Truncating)), "a waiter past the cut");

            assert_eq!((p.log_end(), p.high_watermark()), (Offset(60), Offset(60)));
            check_batches(&p, &[0, 1, 2, 3, 4, 5]).await;
            assert!(p.log().segment_count() < segments_before, "later segments deleted");
            let logs = std::fs::read_dir(&dir)
                .unwrap()
                .filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "log"))
                .count();
            assert_eq!(logs, p.log().segment_count(), "a deleted segment's file is left");
            assert!(!dir.join("truncate-to").exists(), "intent removed");
            // spec: T6.2 — 6005 was batch 5's; 7000 (batch 6) is gone: no answer.
            let at = |t| p.offset_for_time(TimestampMs(t), ReadUpTo::Durable);
            assert_eq!(at(6005).await.unwrap(), Some((Offset(55), TimestampMs(6005))));
            assert_eq!(at(6010).await.unwrap(), None);
            assert_eq!(at(-3).await.unwrap(), Some((Offset(59), TimestampMs(6009))));

            // Appends continue at the new end, with timestamps the lookups then find.
            let info = p.append(&batch(20)).await.expect("append after");
            assert_eq!(info.base_offset, 60);
            assert_eq!(at(21_000).await.unwrap(), Some((Offset(60), TimestampMs(21_000))));
            check_batches(&p, &[0, 1, 2, 3, 4, 5, 20]).await;
            // Below the log start: refused (DeleteRecords moved it to 15).
            p.delete_records(Offset(15)).await.unwrap();
            assert!(matches!(p.truncate_to(Offset(14)).await, Err(StorageError::OffsetOutOfRange { .. })));
            p.close().await.unwrap();
            drop(p);

            let disk = DmaDisk::open(&root).await.unwrap();
            let (p, report) = Partition::open(disk, &dir, config(), common::test_clock()).await.unwrap();
            assert!(report.clean);
            assert_eq!(p.log_end(), Offset(70));
            assert_eq!(at_after(&p, 21_000).await, Some(60));
            // A cut inside the batch that holds the log start (15): the batch goes, and the
            // start comes down to the new end, where appends continue.
            assert_eq!(p.truncate_to(Offset(15)).await.unwrap(), Offset(10));
            assert_eq!(p.log_start(), Offset(10), "the start came down to the end");
            assert_eq!(p.append(&batch(30)).await.unwrap().base_offset, 10);
            // A restart (Kafka's truncateFullyAndStartAt) past the end: empty, starting there,
            // files of the old segments gone; appends continue there, and a reopen keeps it.
            assert_eq!(p.restart_at(Offset(500)).await.unwrap(), Offset(500));
            assert_eq!((p.log_start(), p.log_end(), p.high_watermark()), (Offset(500), Offset(500), Offset(500)));
            assert!(matches!(
                p.read(Offset(10), 1 << 20, ReadUpTo::Durable).await,
                Err(StorageError::OffsetOutOfRange { .. })
            ));
            assert_eq!(p.append(&batch(40)).await.unwrap().base_offset, 500);
            let logs: Vec<_> = std::fs::read_dir(&dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .filter(|n| n.ends_with(".log"))
                .collect();
            assert_eq!(logs, ["00000000000000000500.log"]);
            drop(p);
            let disk = DmaDisk::open(&root).await.unwrap();
            let (p, _) = Partition::open(disk, &dir, config(), common::test_clock()).await.unwrap();
            assert_eq!((p.log_start(), p.log_end()), (Offset(500), Offset(510)));
        })
    });
}

async fn at_after(p: &Rc<Partition<DmaDisk>>, t: i64) -> Option<i64> {
    p.offset_for_time(TimestampMs(t), ReadUpTo::Durable).await.unwrap().map(|(o, _)| o.get())
}

/// A truncation that cuts an ABORT marker takes its aborted transaction with it, for good:
/// the segment left last loses its `.txnindex` (sealed again later with no abort, it writes
/// none), so neither a clean nor an unclean reopen lists the transaction for READ_COMMITTED.
#[test]
fn a_cut_abort_marker_leaves_no_aborted_transaction_behind() {
    use futures_lite::future::block_on;
    use tidemark::io::{CrashMode, MemDisk};
    use tidemark::storage::format::batch::BatchBuilder;
    use tidemark::storage::format::marker::Marker;
    use tidemark::storage::Log;
    const NOW: i64 = 1_700_000_000_000;
    let dir = std::path::PathBuf::from("/d/cut-txn-0");
    let txn = |seq: i32| {
        let mut b = BatchBuilder::new().producer(7, 0, seq).transactional();
        b.push(NOW, None, Some(b"v"), &[]);
        b.finish()
    };
    for clean in [true, false] {
        let disk = MemDisk::new();
        disk.set_now_ms(NOW);
        let open = || block_on(Log::open(disk.clone(), &dir, LogConfig::default())).expect("open").0;
        let mut log = open();
        log.append(&txn(0), NOW).unwrap();
        log.append(&txn(1), NOW).unwrap();
        log.append_marker(7, 0, Marker { commit: false, coordinator_epoch: 1 }, NOW).unwrap(); // offset 2
        log.roll(NOW);
        log.append(&tagged_batch(9, 2, 10, NOW), NOW).unwrap(); // offsets 3-4, the next segment
        block_on(log.flush_all()).unwrap();
        assert_eq!(log.aborted_between(0, 10), vec![(7, 0)], "the abort before the cut");
        // Cut the marker (offset 2) away: segment 0 is last and active again.
        block_on(log.truncate_to(2)).unwrap();
        assert_eq!(log.log_end_offset(), 2);
        assert!(log.aborted_between(0, 10).is_empty(), "the cut marker's transaction is still listed");
        if clean {
            block_on(log.close()).unwrap();
        } else {
            drop(log);
            disk.crash(CrashMode::DropUnsynced);
        }
        let log = open();
        assert!(
            log.aborted_between(0, 10).is_empty(),
            "after a {} reopen: a phantom aborted transaction",
            if clean { "clean" } else { "crash and" }
        );
    }
}

/// A log the cleaner compacted cannot be cut so that a compacted segment is left last (recovery
/// rescans the last segment as never compacted, and would take its gaps for a torn tail): the
/// truncation is refused and changes nothing.
#[test]
fn a_cut_into_the_compacted_part_is_refused() {
    use futures_lite::future::block_on;
    use tidemark::io::{Disk, MemDisk};
    use tidemark::storage::Log;
    let dir = std::path::PathBuf::from("/d/cut-compacted-0");
    let disk = MemDisk::new();
    // What a cleaning pass leaves: a checkpoint (the first dirty offset, 20).
    block_on(disk.create_dir_all(&dir)).unwrap();
    disk.set_file_bytes(
        &dir.join(tidemark::storage::log::CLEANER_CHECKPOINT),
        tidemark::storage::format::index::encode_cleaner_checkpoint(20),
    );
    let mut log = block_on(Log::open(disk.clone(), &dir, config())).expect("open").0;
    for b in 0..4 {
        log.append(&batch(b), 1000).unwrap();
    }
    block_on(log.flush_all()).unwrap();
    let refused = block_on(log.truncate_to(15));
    assert!(
        matches!(refused, Err(StorageError::TruncationIntoCompacted { offset: 15, cleaned_to: 20 })),
        "{refused:?}"
    );
    assert!(matches!(block_on(log.truncate_to(20)), Err(StorageError::TruncationIntoCompacted { .. })));
    assert_eq!(log.log_end_offset(), 40);
    assert_eq!(block_on(log.truncate_to(30)).unwrap().suffix_truncated_to, Some(30), "past the cleaned part");
}
