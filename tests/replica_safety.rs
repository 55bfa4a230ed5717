//! The storage half of replication's safety: what a replica's log must keep across crashes and
//! races so that acknowledged records are never lost and replicas never diverge unseen.
//!
//! - The leader-epoch cache names every epoch a durable batch carries: a follower saves it
//!   before a batch of a new epoch can become durable, and an open rebuilds it from the batches
//!   when its file is missing, damaged or behind the log (Kafka's segment recovery re-assigns
//!   epochs from batches too). A follower whose cache lacks an epoch sends the wrong
//!   last-fetched epoch, and its leader's KIP-320 check cannot see where the logs part.
//! - A follower's truncation is decided only while the copy still follows (a leadership taken
//!   meanwhile must not see its log cut under it).
//! - A follower behind its leader's log start starts again, empty, at that start (Kafka's
//!   truncateFullyAndStartAt); truncating "to" an offset past the end changes nothing.
//! - Retention never moves the log start past the high watermark (Kafka's bound), so an in-sync
//!   follower is never left without records it still has to copy.
//! - A replicated copy opens with its high watermark at its log start: a restarted leader shows
//!   readers nothing its followers may lack until they fetch.
//!
//! spec: T8.2 — recovery keeps every durable batch, and with it every epoch those batches carry.

mod common;

use common::{run_glommio, tagged_batch};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use tidemark::config::LogConfig;
use tidemark::io::faults::{Fault, FaultOp, FaultRule};
use tidemark::io::{CrashMode, Disk, MemDisk};
use tidemark::storage::log::{Epochs, EPOCH_FILE};
use tidemark::storage::{Partition, ReadUpTo, StorageError};
use tidemark::types::Offset;

const NOW: i64 = 10_000;

/// Segments of a few batches, so a log of a dozen batches has several.
fn config() -> LogConfig {
    LogConfig { segment_bytes: 3 * 700, index_interval_bytes: 0, ..LogConfig::default() }
}

async fn open(disk: &MemDisk, dir: &Path) -> Rc<Partition<MemDisk>> {
    Partition::open(disk.clone(), dir, config(), common::test_clock()).await.expect("open").0
}

/// A leader's log: epoch 1 for batches 0-3, epoch 3 for 4-7, epoch 6 for 8-11 (5 records
/// each), so its cache is [(1, 0), (3, 20), (6, 40)] over several segments. Returns every
/// batch as stored (the bytes a follower copies).
async fn leader_log(disk: &MemDisk, dir: &Path) -> (Rc<Partition<MemDisk>>, Vec<u8>) {
    let p = open(disk, dir).await;
    for (epoch, batches) in [(1, 0..4), (3, 4..8), (6, 8..12)] {
        p.set_leader_epoch(Some(epoch));
        for b in batches {
            p.append(&tagged_batch(b, 5, 60, NOW + b as i64)).await.expect("append");
        }
    }
    assert!(p.log().segment_count() >= 3, "several segments: {}", p.log().segment_count());
    assert_eq!(p.log().epochs().entries(), &[(1, 0), (3, 20), (6, 40)]);
    let stored = read_all(&p, ReadUpTo::Durable).await;
    assert_eq!(common::batches(&stored).len(), 12);
    (p, stored)
}

/// Every batch readable up to `upto`, from the log start.
async fn read_all(p: &Rc<Partition<MemDisk>>, upto: ReadUpTo) -> Vec<u8> {
    let mut out = Vec::new();
    let mut at = p.log_start();
    loop {
        let bytes = p.read(at, 1 << 20, upto).await.expect("read");
        let Some((h, _)) = common::batches(&bytes).pop() else { return out };
        at = Offset(h.base_offset + h.last_offset_delta as i64 + 1);
        out.extend_from_slice(&bytes);
    }
}

/// The stored batches of `stored` from index `from` to `to` (exclusive), concatenated.
fn slice(stored: &[u8], from: usize, to: usize) -> Vec<u8> {
    common::batches(stored)[from..to].iter().flat_map(|(_, b)| b.clone()).collect()
}

fn epoch_file(dir: &Path) -> PathBuf {
    dir.join(EPOCH_FILE)
}

/// A follower copies a batch of a new epoch while its epoch file cannot be written: the
/// append fails before the batch is appended, so a crash right after leaves no durable batch
/// of an epoch the cache lacks. (Before, the batch was flushed first and the file saved after:
/// a kill in between left epoch 6's batches durable with a cache ending at epoch 3.)
#[test]
fn a_follower_saves_a_new_epoch_before_its_batches() {
    run_glommio(|| {
        Box::pin(async {
            let disk = MemDisk::new();
            let (_, stored) = leader_log(&disk, Path::new("/l-0")).await;
            let dir = PathBuf::from("/f-0");
            let f = open(&disk, &dir).await;
            f.set_follower(true);
            let info = f.append_replica(&slice(&stored, 0, 8)).await.expect("copy epochs 1 and 3");
            f.wait_durable(Offset(info.last_offset + 1)).await.unwrap();
            disk.inject_rule(FaultRule { op: FaultOp::Write, path: EPOCH_FILE.into(), fault: Fault::Eio, count: 0 });
            let failed = f.append_replica(&slice(&stored, 8, 12)).await;
            assert!(failed.is_err(), "the epoch file cannot be written: {failed:?}");
            assert_eq!(f.log_end(), Offset(40), "nothing of epoch 6 appended");
            f.flush().await.unwrap();
            disk.crash(CrashMode::DropUnsynced);
            disk.heal();
            let f = open(&disk, &dir).await;
            assert_eq!(f.log_end(), Offset(40));
            assert_eq!(f.log().epochs().entries(), &[(1, 0), (3, 20)]);
            // With a working disk the copy goes on, and the cache follows it.
            f.set_follower(true);
            f.append_replica(&slice(&stored, 8, 12)).await.expect("copy epoch 6");
            assert_eq!(f.log().epochs().entries(), &[(1, 0), (3, 20), (6, 40)]);
            let saved = disk.read_file(&epoch_file(&dir)).await.unwrap().expect("saved");
            assert_eq!(Epochs::decode(&saved).unwrap().entries(), &[(1, 0), (3, 20), (6, 40)]);
        })
    });
}

/// A lost or damaged epoch file is rebuilt from the log's batches at open, after a clean
/// shutdown and after a crash alike: the cache equals the one the appends built. An empty log
/// without a file stays empty.
#[test]
fn a_lost_or_damaged_epoch_file_is_rebuilt_from_the_batches() {
    run_glommio(|| {
        Box::pin(async {
            let disk = MemDisk::new();
            let dir = PathBuf::from("/l-1");
            let (p, _) = leader_log(&disk, &dir).await;
            let want = p.log().epochs().clone();
            p.close().await.unwrap();
            drop(p);
            disk.remove_file(&epoch_file(&dir)).await.unwrap();
            let p = open(&disk, &dir).await;
            assert_eq!(p.log().epochs(), &want, "rebuilt after a clean shutdown");
            let saved = disk.read_file(&epoch_file(&dir)).await.unwrap().expect("written back");
            assert_eq!(Epochs::decode(&saved).as_ref(), Some(&want));
            // Damaged, then a crash (no clean marker).
            disk.set_file_bytes(&epoch_file(&dir), b"0\n3\n1 0\nx".to_vec());
            p.append(&tagged_batch(20, 5, 60, NOW)).await.unwrap();
            disk.crash(CrashMode::DropUnsynced);
            drop(p);
            let p = open(&disk, &dir).await;
            assert_eq!(p.log_end(), Offset(65));
            assert_eq!(p.log().epochs(), &want, "rebuilt after a crash");
            let empty = open(&disk, Path::new("/empty")).await;
            assert_eq!(empty.log().epochs().entries(), &[] as &[(i32, i64)]);
        })
    });
}

/// An epoch file behind the log (it was written before batches of newer epochs became
/// durable: a crash between the two) is completed at open: from the rescanned last segment
/// where the missing epochs begin there, from every batch where they begin earlier.
#[test]
fn an_epoch_file_behind_the_log_is_completed() {
    run_glommio(|| {
        Box::pin(async {
            let disk = MemDisk::new();
            let dir = PathBuf::from("/l-2");
            let (p, _) = leader_log(&disk, &dir).await;
            let want = p.log().epochs().clone();
            let behind = |entries: &[(i32, i64)]| {
                let mut e = Epochs::default();
                for &(epoch, start) in entries {
                    e.on_batch(epoch, start);
                }
                e.encode()
            };
            // Behind by one epoch that began in an earlier segment than the last.
            disk.set_file_bytes(&epoch_file(&dir), behind(&[(1, 0)]));
            disk.crash(CrashMode::DropUnsynced);
            drop(p);
            let p = open(&disk, &dir).await;
            assert_eq!(p.log().epochs(), &want, "rebuilt whole");
            // Behind by an epoch that begins in the last segment: epoch 7 from offset 60.
            p.set_leader_epoch(Some(7));
            p.append(&tagged_batch(30, 5, 60, NOW)).await.unwrap();
            let mut with7 = want.clone();
            with7.on_batch(7, 60);
            assert_eq!(p.log().epochs(), &with7);
            disk.set_file_bytes(&epoch_file(&dir), want.encode());
            disk.crash(CrashMode::DropUnsynced);
            drop(p);
            let p = open(&disk, &dir).await;
            assert_eq!(p.log().epochs(), &with7, "completed from the last segment");
        })
    });
}

/// A follower's truncation that began while it followed is refused once the copy leads (it
/// became the leader while the truncation flushed): the log is not cut under a leader. (Before,
/// the follower check ran once, before the flush, and the cut went ahead.)
#[test]
fn a_truncation_is_refused_once_the_copy_leads() {
    run_glommio(|| {
        Box::pin(async {
            let disk = MemDisk::new();
            let (_, stored) = leader_log(&disk, Path::new("/l-3")).await;
            let f = open(&disk, Path::new("/f-3")).await;
            f.set_follower(true);
            f.append_replica(&slice(&stored, 0, 12)).await.unwrap();
            // Unflushed: the truncation waits for the flush first.
            let truncation = {
                let f = f.clone();
                glommio::spawn_local(async move { f.truncate_as_follower(Offset(20)).await })
            };
            futures_lite::future::yield_now().await;
            assert!(f.is_truncating(), "under way");
            f.set_follower(false);
            f.set_leader_epoch(Some(9));
            let cut = truncation.await;
            assert!(matches!(cut, Err(StorageError::Follower)), "refused: {cut:?}");
            assert!(!f.is_truncating());
            assert_eq!(f.log_end(), Offset(60), "nothing cut");
            f.truncated().await;
            // As leader it appends again.
            f.append(&tagged_batch(40, 5, 60, NOW)).await.expect("the leader appends");
            assert_eq!(f.log_end(), Offset(65));
        })
    });
}

/// A follower whose log ends below its leader's log start restarts, empty, at that start and
/// copies on from there; a "truncation" to an offset past its end changes nothing (the old
/// answer to this case, which left the follower asking for the same offset forever).
#[test]
fn a_follower_behind_the_leaders_start_restarts_there() {
    run_glommio(|| {
        Box::pin(async {
            let disk = MemDisk::new();
            let (_, stored) = leader_log(&disk, Path::new("/l-4")).await;
            let dir = PathBuf::from("/f-4");
            let f = open(&disk, &dir).await;
            f.set_follower(true);
            f.append_replica(&slice(&stored, 0, 2)).await.unwrap();
            f.flush().await.unwrap();
            assert_eq!(f.truncate_as_follower(Offset(40)).await.unwrap(), Offset(10), "past the end: nothing");
            assert_eq!(f.restart_as_follower(Offset(40)).await.unwrap(), Offset(40));
            assert_eq!((f.log_start(), f.log_end()), (Offset(40), Offset(40)));
            assert_eq!(f.log().epochs().entries(), &[] as &[(i32, i64)]);
            f.append_replica(&slice(&stored, 8, 12)).await.expect("copies on from the leader's start");
            f.flush().await.unwrap();
            assert_eq!((f.log_start(), f.log_end()), (Offset(40), Offset(60)));
            assert_eq!(f.log().epochs().entries(), &[(6, 40)]);
            // A leader's copy is never restarted by its follower side.
            f.set_follower(false);
            let refused = f.restart_as_follower(Offset(100)).await;
            assert!(matches!(refused, Err(StorageError::Follower)), "{refused:?}");
            drop(f);
            let f = open(&disk, &dir).await;
            assert_eq!((f.log_start(), f.log_end()), (Offset(40), Offset(60)), "across a restart");
        })
    });
}

/// Retention by size never deletes a segment that is not wholly below the high watermark: on
/// a replicated copy whose followers have copied nothing past offset 0, nothing goes; once the
/// high watermark moves, the segments below it go. (Kafka's `deletableSegments` bound.)
#[test]
fn retention_stops_at_the_high_watermark() {
    run_glommio(|| {
        Box::pin(async {
            let disk = MemDisk::new();
            let (p, _) = leader_log(&disk, Path::new("/l-5")).await;
            let segments = p.log().segment_count();
            p.set_config(LogConfig { retention_bytes: Some(700), ..config() });
            p.set_replicated_to(Some(Offset(0)));
            assert_eq!(p.maintain().await.unwrap(), Vec::<i64>::new(), "nothing below the high watermark");
            assert_eq!(p.log_start(), Offset(0));
            p.set_replicated_to(Some(Offset(25)));
            let removed = p.maintain().await.unwrap();
            assert!(!removed.is_empty(), "segments below 25 go");
            assert!(p.log_start() <= Offset(25), "the start never passes the high watermark: {:?}", p.log_start());
            assert!(p.log().segment_count() < segments);
            p.set_replicated_to(None);
            p.maintain().await.unwrap();
            assert!(p.log_start() > Offset(25), "standalone: down to retention.bytes");
        })
    });
}

/// A copy of a replicated log opens with its high watermark at its log start, not its durable
/// end: a node restarted right after its last fsync (its followers had not fetched it) shows
/// readers nothing until its followers' fetches or its leader say so.
#[test]
fn a_replicated_copy_opens_with_its_high_watermark_at_its_start() {
    run_glommio(|| {
        Box::pin(async {
            let disk = MemDisk::new();
            let dir = PathBuf::from("/l-6");
            let (p, _) = leader_log(&disk, &dir).await;
            assert_eq!(p.high_watermark(), Offset(60), "unreplicated: the durable end");
            disk.crash(CrashMode::DropUnsynced);
            drop(p);
            let p = open(&disk, &dir).await;
            p.start_replicated();
            assert_eq!((p.durable_end(), p.high_watermark()), (Offset(60), Offset(0)));
            assert!(read_all(&p, ReadUpTo::HighWatermark).await.is_empty(), "readers see nothing yet");
            p.set_replicated_to(Some(Offset(20)));
            assert_eq!(p.high_watermark(), Offset(20));
            p.start_replicated();
            assert_eq!(p.high_watermark(), Offset(20), "once known, kept");
        })
    });
}
