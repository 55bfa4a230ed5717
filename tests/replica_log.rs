//! A follower's log (`Log::append_replica`, Kafka's appendAsFollower), the leader epochs stamped
//! in batches and their cache (`leader-epoch-checkpoint`, KIP-101), and the replicated high
//! watermark readers stop at: the storage half of partition replication.
//!
//! spec: T5.1, T8.2 — a follower's time index is built from the batches it copies, and stays
//! right after it truncates a divergent suffix.

mod common;

use common::{batches, run_glommio, stored_batches, tagged_batch};
use futures_lite::future::block_on;
use std::path::PathBuf;
use std::rc::Rc;
use tidemark::config::LogConfig;
use tidemark::io::{DmaDisk, MemDisk};
use tidemark::storage::format::batch::BatchBuilder;
use tidemark::storage::{Log, Partition, ReadUpTo, StorageError};
use tidemark::types::{Offset, TimestampMs};

const NOW: i64 = 1_700_000_000_000;

fn open(disk: &MemDisk, name: &str) -> Log<MemDisk> {
    let config = LogConfig { segment_bytes: 1500, index_interval_bytes: 0, ..LogConfig::default() };
    block_on(Log::open(disk.clone(), &PathBuf::from(format!("/d/{name}")), config)).expect("open").0
}

fn read_all(log: &mut Log<MemDisk>, upto: ReadUpTo) -> Vec<u8> {
    let mut out = Vec::new();
    let mut at = log.log_start_offset();
    loop {
        let bytes = block_on(log.read(at, 1 << 20, upto)).expect("read");
        if bytes.is_empty() {
            return out;
        }
        for (h, b) in batches(&bytes) {
            at = h.base_offset + h.last_offset_delta as i64 + 1;
            out.extend_from_slice(&b);
        }
    }
}

/// A batch of idempotent producer 7, epoch 0, from `seq`, of `n` records.
fn idempotent(seq: i32, n: usize) -> Vec<u8> {
    let mut b = BatchBuilder::new().producer(7, 0, seq);
    for i in 0..n {
        b.push(NOW, None, Some(format!("p7:{}", seq as usize + i).as_bytes()), &[]);
    }
    b.finish()
}

/// A leader stamps its epoch in every batch it appends and records where each epoch began; a
/// follower that appends what the leader stored ends with the same bytes (offsets, epochs,
/// CRCs), segments and time index of its own (rolled by its own size), the same epoch cache,
/// and the same producer state: after a failover the follower answers a retried idempotent
/// batch as a duplicate with its first offset instead of appending it twice.
#[test]
fn a_follower_copies_the_leader_byte_for_byte() {
    let disk = MemDisk::new();
    let mut leader = open(&disk, "leader-0");
    let mut follower = open(&disk, "follower-0");
    leader.set_leader_epoch(Some(3));
    for b in 0..4 {
        leader.append(&tagged_batch(b, 5, 100, NOW + b as i64 * 10), NOW).unwrap();
    }
    leader.set_leader_epoch(Some(5));
    leader.append(&idempotent(0, 3), NOW).unwrap();
    leader.append(&tagged_batch(9, 2, 100, NOW + 100), NOW).unwrap();
    block_on(leader.flush_all()).unwrap();
    assert_eq!(leader.epochs().entries(), &[(3, 0), (5, 20)]);
    let stored = read_all(&mut leader, ReadUpTo::Durable);
    for (h, _) in batches(&stored) {
        assert_eq!(h.partition_leader_epoch, if h.base_offset < 20 { 3 } else { 5 }, "epoch of {}", h.base_offset);
    }

    // Copied in two fetches, as a follower would.
    let cut = batches(&stored)[..3].iter().map(|(_, b)| b.len()).sum::<usize>();
    follower.append_replica(&stored[..cut], NOW).unwrap();
    follower.append_replica(&stored[cut..], NOW).unwrap();
    block_on(follower.flush_all()).unwrap();
    assert_eq!(read_all(&mut follower, ReadUpTo::Durable), stored);
    assert_eq!(follower.log_end_offset(), 25);
    assert_eq!(follower.epochs().entries(), leader.epochs().entries());
    assert!(follower.segment_count() > 1, "rolled by its own segment size");
    // spec: T5.1 — the follower's time index answers as the leader's.
    for t in [NOW, NOW + 15, NOW + 30, NOW + 100] {
        let l = block_on(leader.offset_for_time(t, ReadUpTo::Durable)).unwrap();
        let f = block_on(follower.offset_for_time(t, ReadUpTo::Durable)).unwrap();
        assert_eq!(l, f, "lookup of {t}");
    }
    // The follower becomes leader: the producer's retry of its batch is a duplicate.
    follower.set_leader_epoch(Some(6));
    let (info, _) = follower.append(&idempotent(0, 3), NOW).unwrap();
    assert_eq!((info.base_offset, info.records), (20, 0), "a retry answered with its first offset");
    let (info, _) = follower.append(&idempotent(3, 1), NOW).unwrap();
    assert_eq!(info.base_offset, 25);
    assert_eq!(follower.epochs().entries(), &[(3, 0), (5, 20), (6, 25)]);
}

/// What a follower refuses, appending nothing: a batch that does not start at its log end
/// (a gap or an overlap), a damaged CRC, a partial batch.
#[test]
fn a_follower_refuses_what_does_not_continue_its_log() {
    let disk = MemDisk::new();
    let mut leader = open(&disk, "leader-1");
    let mut follower = open(&disk, "follower-1");
    leader.set_leader_epoch(Some(0));
    for b in 0..3 {
        leader.append(&tagged_batch(b, 5, 50, NOW), NOW).unwrap();
    }
    block_on(leader.flush_all()).unwrap();
    let stored = read_all(&mut leader, ReadUpTo::Durable);
    let parts: Vec<Vec<u8>> = batches(&stored).into_iter().map(|(_, b)| b).collect();
    let gap = follower.append_replica(&parts[1], NOW);
    assert!(matches!(gap, Err(StorageError::InvalidBatch(_))), "a gap: {gap:?}");
    follower.append_replica(&parts[0], NOW).unwrap();
    let overlap = follower.append_replica(&[parts[0].clone(), parts[1].clone()].concat(), NOW);
    assert!(overlap.is_err(), "an overlap");
    let mut damaged = parts[1].clone();
    let last = damaged.len() - 1;
    damaged[last] ^= 1;
    assert!(follower.append_replica(&damaged, NOW).is_err(), "a bad CRC");
    assert!(follower.append_replica(&parts[1][..20], NOW).is_err(), "a partial batch");
    assert_eq!(follower.log_end_offset(), 5, "nothing appended by a refused request");
    follower.append_replica(&[parts[1].clone(), parts[2].clone()].concat(), NOW).unwrap();
    assert_eq!(follower.log_end_offset(), 15);
}

/// On a replicated partition readers stop at the replicas' high watermark, not at the durable
/// end: reads, lookups by time (the latest offset included) and the last stable offset.
#[test]
fn readers_stop_at_the_replicated_high_watermark() {
    let disk = MemDisk::new();
    let mut log = open(&disk, "hw-0");
    log.set_leader_epoch(Some(1));
    for b in 0..4 {
        log.append(&tagged_batch(b, 5, 50, NOW + b as i64 * 100), NOW).unwrap();
    }
    block_on(log.flush_all()).unwrap();
    assert_eq!(log.high_watermark(), 20);
    log.set_replicated_to(Some(10));
    assert_eq!(log.high_watermark(), 10);
    assert_eq!(log.last_stable_offset(), 10);
    let seen = read_all(&mut log, ReadUpTo::HighWatermark);
    assert_eq!(stored_batches(&seen).len(), 2, "batches below 10 only");
    assert_eq!(stored_batches(&read_all(&mut log, ReadUpTo::Durable)).len(), 4, "a follower reads on");
    assert_eq!(block_on(log.offset_for_time(-1, ReadUpTo::HighWatermark)).unwrap(), Some((10, -1)));
    assert_eq!(block_on(log.offset_for_time(NOW + 200, ReadUpTo::HighWatermark)).unwrap(), None);
    log.set_replicated_to(Some(40));
    assert_eq!(log.high_watermark(), 20, "never past the durable end");
    log.set_replicated_to(None);
    assert_eq!(log.high_watermark(), 20);
}

/// On a real disk through the partition: the epoch cache is saved as epochs begin and read back
/// on open; a follower that truncates its divergent suffix (the end the new leader gives for
/// its last epoch) loses exactly the batches past it, its cache and time index follow, and a
/// restart keeps both.
#[test]
fn epoch_cache_survives_restarts_and_truncations() {
    let tmp = tempfile::tempdir_in("target/tmp").or_else(|_| tempfile::tempdir()).unwrap();
    let root = tmp.path().to_path_buf();
    run_glommio(move || {
        Box::pin(async move {
            let dir = root.join("e-0");
            let config = LogConfig { segment_bytes: 3000, index_interval_bytes: 0, ..LogConfig::default() };
            let disk = DmaDisk::open(&root).await.expect("disk");
            let (p, _) = Partition::open(disk, &dir, config.clone(), common::test_clock()).await.unwrap();
            p.set_leader_epoch(Some(2));
            for b in 0..3 {
                p.append(&tagged_batch(b, 5, 100, 1000 * (b as i64 + 1))).await.unwrap();
            }
            p.set_leader_epoch(Some(4));
            for b in 3..6 {
                p.append(&tagged_batch(b, 5, 100, 1000 * (b as i64 + 1))).await.unwrap();
            }
            let file = std::fs::read_to_string(dir.join("leader-epoch-checkpoint")).unwrap();
            assert_eq!(file, "0\n2\n2 0\n4 15\n");
            assert_eq!(p.end_offset_for_epoch(2), (2, Offset(15)));
            assert_eq!(p.end_offset_for_epoch(3), (2, Offset(15)));
            assert_eq!(p.end_offset_for_epoch(4), (4, Offset(30)));
            // A new leader ended epoch 2 at offset 12 (inside batch 2): the batch holding it
            // goes, and everything of epoch 4.
            assert_eq!(p.truncate_to(Offset(12)).await.unwrap(), Offset(10));
            assert_eq!(p.latest_epoch(), Some(2));
            let file = std::fs::read_to_string(dir.join("leader-epoch-checkpoint")).unwrap();
            assert_eq!(file, "0\n1\n2 0\n");
            assert_eq!(at(&p, 2000).await, Some(5));
            assert_eq!(at(&p, 2004).await, Some(9));
            assert_eq!(at(&p, 2005).await, None, "batch 2's records are gone");
            p.close().await.unwrap();
            drop(p);
            let disk = DmaDisk::open(&root).await.expect("disk");
            let (p, _) = Partition::open(disk, &dir, config, common::test_clock()).await.unwrap();
            assert_eq!((p.log_end(), p.latest_epoch()), (Offset(10), Some(2)));
            assert_eq!(p.end_offset_for_epoch(2), (2, Offset(10)));
        })
    });
}

async fn at(p: &Rc<Partition<DmaDisk>>, t: i64) -> Option<i64> {
    p.offset_for_time(TimestampMs(t), ReadUpTo::Durable).await.unwrap().map(|(o, _)| o.get())
}

/// A follower of a compacted leader copies its gaps: batches at 0-4 and 10-14 are appended as
/// they are (the offsets 5-9 the leader's cleaner removed stay missing), read back, and kept by
/// recovery after a crash (the log records that it may have gaps before the first one is
/// appended). A batch starting below the log end is still refused.
#[test]
fn a_follower_keeps_a_compacted_leaders_gaps() {
    let tmp = tempfile::tempdir_in("target/tmp").or_else(|_| tempfile::tempdir()).unwrap();
    let root = tmp.path().to_path_buf();
    run_glommio(move || {
        Box::pin(async move {
            let dir = root.join("g-0");
            let config = LogConfig { index_interval_bytes: 0, ..LogConfig::default() };
            let disk = DmaDisk::open(&root).await.expect("disk");
            let (p, _) = Partition::open(disk, &dir, config.clone(), common::test_clock()).await.unwrap();
            p.set_follower(true);
            let a = common::with_base(&tagged_batch(1, 5, 50, 1000), 0);
            let b = common::with_base(&tagged_batch(2, 5, 50, 2000), 10);
            let info = p.append_replica(&[a.clone(), b.clone()].concat()).await.unwrap();
            assert_eq!((info.base_offset, info.last_offset), (0, 14));
            p.flush().await.unwrap();
            assert_eq!(p.log_end(), Offset(15));
            let overlap = common::with_base(&tagged_batch(3, 5, 50, 3000), 12);
            assert!(p.append_replica(&overlap).await.is_err(), "a batch below the log end");
            assert!(dir.join("cleaner-offset-checkpoint").exists());
            let read = p.read(Offset(0), 1 << 20, ReadUpTo::Durable).await.unwrap();
            assert_eq!(&read[..], &[a.clone(), b.clone()].concat()[..]);
            let read = p.read(Offset(7), 1 << 20, ReadUpTo::Durable).await.unwrap();
            assert_eq!(&read[..], &b[..], "an offset in the gap reads the next batch");
            drop(p); // no clean shutdown: recovery rescans
            let disk = DmaDisk::open(&root).await.expect("disk");
            let (p, report) = Partition::open(disk, &dir, config, common::test_clock()).await.unwrap();
            assert!(!report.clean);
            assert_eq!(p.log_end(), Offset(15), "recovery kept the batch after the gap");
            let read = p.read(Offset(0), 1 << 20, ReadUpTo::Durable).await.unwrap();
            assert_eq!(&read[..], &[a, b].concat()[..]);
        })
    });
}
