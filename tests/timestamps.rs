//! Timestamps on the append path (SPEC T3), what reads return (T4), rolling and retention by
//! time with a simulated clock (T7), and time-index recovery (T5.6, T8.1, T8.3).

mod common;

use common::batches;
use futures_lite::future::block_on;
use std::path::{Path, PathBuf};
use tidemark::config::LogConfig;
use tidemark::io::MemDisk;
use tidemark::storage::format::batch::{check_stored, BatchBuilder, Compression, Records, TimestampType, HEADER_LEN};
use tidemark::storage::{Log, ReadUpTo, StorageError};

const MIN: i64 = 60_000;
const HOUR: i64 = 60 * MIN;
const NOW: i64 = 1_700_000_000_000;

fn dir() -> PathBuf {
    PathBuf::from("/d/t-0")
}

fn open(disk: &MemDisk, config: &LogConfig) -> Log<MemDisk> {
    block_on(Log::open(disk.clone(), &dir(), config.clone())).expect("open").0
}

fn batch_at(ts: &[i64]) -> Vec<u8> {
    let mut b = BatchBuilder::new();
    for &t in ts {
        b.push(t, Some(b"k"), Some(b"value"), &[]);
    }
    b.finish()
}

fn cfg(pairs: &[(&str, &str)]) -> LogConfig {
    LogConfig::default().with_overrides(pairs.iter().copied()).unwrap()
}

/// spec: T3.1 — a CreateTime record outside the allowed difference rejects the whole batch
/// with INVALID_TIMESTAMP and nothing of it is appended; the bound applies to every record
/// (not just the first or the max), in compressed batches too, and -1 takes no part.
#[test]
fn create_time_bounds_reject_whole_batches() {
    let config = cfg(&[("message.timestamp.before.max.ms", "3600000"), ("message.timestamp.after.max.ms", "60000")]);
    let disk = MemDisk::new();
    let mut log = open(&disk, &config);
    log.append(&batch_at(&[NOW - HOUR, NOW, NOW + MIN]), NOW).expect("bounds are inclusive");
    let end = log.log_end_offset();
    for bad in [vec![NOW, NOW - HOUR - 1], vec![NOW + MIN + 1, NOW], vec![NOW, -5]] {
        for codec in [Compression::None, Compression::Zstd, Compression::Lz4] {
            let mut b = BatchBuilder::new();
            for &t in &bad {
                b.push(t, None, Some(b"v"), &[]);
            }
            let e = log.append(&b.finish_compressed(codec), NOW).unwrap_err();
            assert!(matches!(e, StorageError::InvalidTimestamp { .. }), "{bad:?} {codec:?}: {e}");
            assert_eq!(log.log_end_offset(), end, "nothing appended");
        }
    }
    // A request with a good batch then a bad one appends neither.
    let mut req = batch_at(&[NOW]);
    req.extend(batch_at(&[NOW - 2 * HOUR]));
    assert!(log.append(&req, NOW).is_err());
    assert_eq!(log.log_end_offset(), end);
    // Records without a timestamp take no part in the bound.
    let mut b = BatchBuilder::new();
    b.push(-1, None, Some(b"v"), &[]);
    log.append(&b.finish(), NOW).expect("-1 is not checked");
    // The symmetric bound (and its alias) with a one-sided one: the tighter wins.
    let mut log2 = open(
        &MemDisk::new(),
        &cfg(&[("message.timestamp.difference.max.ms", "1000"), ("message.timestamp.after.max.ms", "10")]),
    );
    assert!(log2.append(&batch_at(&[NOW - 1000]), NOW).is_ok());
    assert!(log2.append(&batch_at(&[NOW - 1001]), NOW).is_err());
    assert!(log2.append(&batch_at(&[NOW + 11]), NOW).is_err());
    assert!(log2.append(&batch_at(&[NOW + 10]), NOW).is_ok());
}

/// spec: T3.2, T3.4, T4.1 — LogAppendTime stamps the batch (attribute bit, maxTimestamp =
/// now, CRC-32C recomputed) without rewriting records, and the append reports the time; a
/// CreateTime topic reports -1 and stores the true maximum timestamp of the records.
#[test]
fn log_append_time_stamps_the_batch() {
    let disk = MemDisk::new();
    let mut log = open(&disk, &cfg(&[("message.timestamp.type", "LogAppendTime")]));
    let sent = batch_at(&[5, 7, 6]);
    let (info, _) = log.append(&sent, NOW).unwrap();
    assert_eq!(info.log_append_time, NOW);
    let got = block_on(log.read(0, 1 << 20, ReadUpTo::LogEnd)).unwrap();
    let (h, stored) = &batches(&got)[0];
    check_stored(stored).expect("CRC recomputed");
    assert_eq!(h.timestamp_type(), TimestampType::LogAppendTime);
    assert_eq!(h.max_timestamp, NOW);
    assert_eq!(&stored[HEADER_LEN..], &sent[HEADER_LEN..], "records are not rewritten");
    assert_eq!(block_on(log.offset_for_time(NOW, ReadUpTo::LogEnd)).unwrap(), Some((0, NOW)));
    assert_eq!(block_on(log.offset_for_time(NOW + 1, ReadUpTo::LogEnd)).unwrap(), None);

    let mut log = open(&MemDisk::new(), &LogConfig::default());
    // A producer's wrong maxTimestamp is corrected to the records' true maximum.
    let mut wrong = batch_at(&[NOW - 5, NOW - 1, NOW - 3]);
    wrong[35..43].copy_from_slice(&(NOW - 100).to_be_bytes());
    tidemark::storage::format::batch::rewrite_crc(&mut wrong);
    let (info, _) = log.append(&wrong, NOW).unwrap();
    assert_eq!(info.log_append_time, -1);
    let got = block_on(log.read(0, 1 << 20, ReadUpTo::LogEnd)).unwrap();
    let (h, stored) = &batches(&got)[0];
    check_stored(stored).unwrap();
    assert_eq!(h.timestamp_type(), TimestampType::CreateTime);
    assert_eq!(h.max_timestamp, NOW - 1);
    let ts: Vec<i64> =
        Records::new(&stored[HEADER_LEN..], 3).map(|r| h.first_timestamp + r.unwrap().timestamp_delta).collect();
    assert_eq!(ts, vec![NOW - 5, NOW - 1, NOW - 3], "T4.1: each record keeps its timestamp");
}

/// spec: T7.1 — a non-empty active segment rolls once `segment.ms` has passed since the
/// log's largest timestamp, not before; an idle partition rolls; old timestamps cause at most
/// one time roll per `segment.ms` (no roll storm).
#[test]
fn time_based_rolling_without_storms() {
    let config = cfg(&[("segment.ms", "3600000"), ("retention.ms", "-1")]);
    let mut log = open(&MemDisk::new(), &config);
    log.append(&batch_at(&[NOW]), NOW).unwrap();
    assert!(block_on(log.maintain(NOW + HOUR - 1)).unwrap().is_empty());
    assert_eq!(log.segment_count(), 1, "no roll before segment.ms");
    block_on(log.maintain(NOW + HOUR)).unwrap();
    assert_eq!(log.segment_count(), 2, "an idle partition rolls at segment.ms");
    block_on(log.maintain(NOW + 2 * HOUR)).unwrap();
    assert_eq!(log.segment_count(), 2, "an empty active segment does not roll");
    // Records an hour old arriving every minute: at most one time roll per hour.
    let mut t = NOW + 3 * HOUR;
    for _ in 0..120 {
        log.append(&batch_at(&[NOW - HOUR]), t).unwrap();
        block_on(log.maintain(t)).unwrap();
        t += MIN;
    }
    assert!(log.segment_count() <= 2 + 2, "roll storm: {} segments", log.segment_count());
    // The largest timestamp is what counts: old data rolls at the next append, and after a
    // fresh record nothing rolls until segment.ms after it.
    let mut log = open(&MemDisk::new(), &config);
    log.append(&batch_at(&[NOW - 10 * HOUR]), NOW).unwrap();
    log.append(&batch_at(&[NOW]), NOW).unwrap();
    assert_eq!(log.segment_count(), 2, "10 h old data rolled before the fresh batch");
    block_on(log.maintain(NOW + HOUR / 2)).unwrap();
    assert_eq!(log.segment_count(), 2);
    block_on(log.maintain(NOW + HOUR)).unwrap();
    assert_eq!(log.segment_count(), 3);
}

/// spec: T7.1 (busy) — a partition written steadily rolls every `segment.ms`: before a batch
/// whose timestamp is `segment.ms` past the active segment's first batch's, as Kafka's
/// `LogSegment.shouldRoll` does (the idle rule alone never fires: the largest timestamp is
/// always fresh). The roll closes the old segment, so retention by time can reach it.
#[test]
fn a_steadily_written_partition_rolls_every_segment_ms() {
    let config = cfg(&[("segment.ms", "3600000"), ("retention.ms", "-1")]);
    let mut log = open(&MemDisk::new(), &config);
    // A record every 10 minutes for 10 hours, the upkeep running between them.
    let mut t = NOW;
    while t < NOW + 10 * HOUR {
        log.append(&batch_at(&[t]), t).unwrap();
        block_on(log.maintain(t)).unwrap();
        t += 10 * MIN;
    }
    assert_eq!(log.segment_count(), 10, "one segment per hour of steady writes");
    // Each closed segment holds one hour: its first record is an hour after the previous one's.
    let bases = log.segment_bases();
    assert_eq!(bases, (0..10).map(|i| i * 6).collect::<Vec<i64>>());
    // Without the busy rule the same writes under a week's segment.ms stay in one segment.
    let mut log = open(&MemDisk::new(), &cfg(&[("segment.ms", "604800000")]));
    for i in 0..60 {
        log.append(&batch_at(&[NOW + i * 10 * MIN]), NOW + i * 10 * MIN).unwrap();
    }
    assert_eq!(log.segment_count(), 1);
}

/// spec: T7.1 (the storm guard) — backfilled data whose timestamps cover days, written in
/// minutes, rolls at most once per `segment.ms` of wall-clock time, and so do timestamps out of
/// order; a batch without timestamps never rolls by time; an idle partition still rolls.
#[test]
fn backfilled_timestamps_do_not_storm() {
    let config = cfg(&[("segment.ms", "3600000"), ("retention.ms", "-1")]);
    let mut log = open(&MemDisk::new(), &config);
    // 48 hours of data, a batch per data-hour, one a wall-clock second apart.
    let start = NOW - 30 * 24 * HOUR;
    for i in 0..48 {
        log.append(&batch_at(&[start + i * HOUR]), NOW + i * 1000).unwrap();
    }
    assert!(log.segment_count() <= 2, "backfill storm: {} segments", log.segment_count());
    // Timestamps jumping back and forth by days, a minute apart: one roll per wall-clock hour.
    let mut log = open(&MemDisk::new(), &config);
    for i in 0..120 {
        let ts = if i % 2 == 0 { NOW - 5 * 24 * HOUR } else { NOW + i * MIN };
        log.append(&batch_at(&[ts]), NOW + i * MIN).unwrap();
    }
    assert!(log.segment_count() <= 3, "out-of-order storm: {} segments", log.segment_count());
    // Batches without timestamps (-1) after a timed one do not roll by the busy rule.
    let mut log = open(&MemDisk::new(), &config);
    log.append(&batch_at(&[NOW]), NOW).unwrap();
    for i in 1..10 {
        log.append(&batch_at(&[-1]), NOW + i * 5 * MIN).unwrap();
    }
    assert_eq!(log.segment_count(), 1);
    // Idle: nothing timed written for segment.ms after the last timestamp rolls at the upkeep.
    block_on(log.maintain(NOW + HOUR)).unwrap();
    assert_eq!(log.segment_count(), 2);
}

/// spec: T7.2 — retention by time deletes a prefix of segments whose largest timestamp is
/// more than retention.ms old, never early; an expired active segment is rolled first.
/// spec: T7.3 — a segment whose largest timestamp is in the future is kept.
#[test]
fn retention_by_time_never_deletes_early() {
    let config = cfg(&[("retention.ms", "86400000"), ("segment.ms", "604800000")]);
    let disk = MemDisk::new();
    let mut log = open(&disk, &config);
    // Three segments with largest timestamps NOW-3d, NOW-2d (in the future later), NOW.
    let day = 24 * HOUR;
    for (i, t) in [NOW - 3 * day, NOW - 2 * day, NOW].iter().enumerate() {
        log.append(&batch_at(&[t - 10, *t]), NOW).unwrap();
        if i < 2 {
            log.roll(NOW);
        }
    }
    block_on(log.flush_all()).unwrap();
    let bases = log.segment_bases();
    assert_eq!(bases.len(), 3);
    // At NOW + 0: the first two are older than a day: deleted; the last is kept.
    let removed = block_on(log.maintain(NOW)).unwrap();
    assert_eq!(removed, bases[..2].to_vec());
    assert_eq!(log.log_start_offset(), bases[2]);
    // Exactly retention.ms after the largest timestamp: kept (strictly greater deletes).
    assert!(block_on(log.maintain(NOW + day)).unwrap().is_empty());
    // One ms later the active segment is expired: rolled first, deleted once sealed.
    block_on(log.maintain(NOW + day + 1)).unwrap();
    assert_eq!(log.segment_count(), 2, "expired active segment rolled");
    block_on(log.flush_all()).unwrap();
    // (The new active segment is empty and has no file yet, so the expired one stays until
    // the next one exists on disk: the log start must always be a file on disk.)
    log.append(&batch_at(&[NOW + day]), NOW + day).unwrap();
    block_on(log.flush_all()).unwrap();
    let removed = block_on(log.maintain(NOW + day + 2)).unwrap();
    assert_eq!(removed, vec![bases[2]]);

    // Future timestamps: kept however far the clock is.
    let disk = MemDisk::new();
    let mut log = open(&disk, &config);
    log.append(&batch_at(&[NOW + 10 * day]), NOW).unwrap();
    log.roll(NOW);
    log.append(&batch_at(&[NOW]), NOW).unwrap();
    block_on(log.flush_all()).unwrap();
    assert!(block_on(log.maintain(NOW + 2 * day)).unwrap().is_empty(), "future segment kept");
}

/// spec: T7.2 — a segment with an empty time index (T5.4) takes its largest timestamp from
/// the earlier segment's last entry; retention survives restarts (indexes loaded lazily).
#[test]
fn retention_uses_earlier_entries_for_empty_indexes() {
    let config = cfg(&[("retention.ms", "3600000"), ("segment.ms", "604800000")]);
    let disk = MemDisk::new();
    let mut log = open(&disk, &config);
    log.append(&batch_at(&[NOW]), NOW).unwrap();
    log.roll(NOW);
    // All below the previous segment's entries: this segment's time index stays empty.
    log.append(&batch_at(&[NOW - 10]), NOW).unwrap();
    log.roll(NOW);
    log.append(&batch_at(&[NOW + 5]), NOW).unwrap();
    block_on(log.flush_all()).unwrap();
    let bases = log.segment_bases();
    assert_eq!(log.time_entries(bases[1]).unwrap(), vec![], "T5.4: empty index");
    block_on(log.close()).unwrap();
    let mut log = open(&disk, &config);
    let removed = block_on(log.maintain(NOW + HOUR + 1)).unwrap();
    assert_eq!(removed, bases[..2].to_vec(), "both expire with the first segment's entry");
}

/// Decisions by time on a reopened log load only the time indexes of the sealed segments they
/// look at (one small file each), not their data files and offset indexes: with the data
/// files of all sealed segments but the last failing to open, a lookup whose answer is in
/// the active segment (its search probes the sealed ones; its scan starts in the last) and
/// retention by time both answer. spec: T6.3, T7.2
#[test]
fn decisions_by_time_load_only_time_indexes() {
    use tidemark::io::{Fault, FaultOp, FaultRule};
    let config = cfg(&[("retention.ms", "3600000"), ("segment.ms", "604800000")]);
    let disk = MemDisk::new();
    let mut log = open(&disk, &config);
    for i in 0..8 {
        log.append(&batch_at(&[NOW - (8 - i) * HOUR]), NOW).unwrap();
        log.roll(NOW);
    }
    block_on(log.flush_all()).unwrap();
    let bases = log.segment_bases();
    block_on(log.close()).unwrap();
    let mut log = open(&disk, &config);
    log.append(&batch_at(&[NOW + MIN]), NOW).unwrap();
    block_on(log.flush_all()).unwrap();
    for b in &bases[..7] {
        disk.inject_rule(FaultRule { op: FaultOp::Open, path: format!("{b:020}.log"), fault: Fault::Eio, count: 0 });
    }
    assert_eq!(block_on(log.offset_for_time(NOW + MIN, ReadUpTo::Durable)).unwrap(), Some((8, NOW + MIN)));
    // Largest timestamps NOW-8h .. NOW-1h: all but the last are more than an hour old.
    assert_eq!(block_on(log.maintain(NOW)).unwrap(), bases[..7].to_vec());
}

/// spec: T6.3 — after a restart, a lookup's binary search over sealed segments loads the
/// time indexes of the probes it may make next (two more levels, whichever way it goes)
/// together with the one it needs: over 100 sealed segments (7 levels) it asks for at most 3
/// rounds of loads, each of at most 7 small files, where one index per round would take up to
/// 7 rounds; and it answers as before, at each segment's record.
#[test]
fn lookup_after_restart_loads_next_probes_together() {
    use tidemark::storage::log::TimePlan;
    let config = cfg(&[("retention.ms", "-1"), ("segment.ms", "604800000")]);
    let disk = MemDisk::new();
    let mut log = open(&disk, &config);
    let ts = |i: i64| NOW - (100 - i) * MIN;
    for i in 0..100 {
        log.append(&batch_at(&[ts(i)]), NOW).unwrap();
        log.roll(NOW);
    }
    block_on(log.flush_all()).unwrap();
    block_on(log.close()).unwrap();
    let mut most_rounds = 0;
    for k in (0..100).step_by(3) {
        for t in [ts(k) - 1, ts(k)] {
            let mut log = open(&disk, &config);
            let mut rounds = 0;
            loop {
                match log.plan_time_lookup(t, ReadUpTo::Durable) {
                    TimePlan::NeedTimes(bases) => {
                        rounds += 1;
                        assert!(bases.len() <= 7, "a round of {} loads", bases.len());
                        for b in bases {
                            let loaded = block_on(log.time_load(b).run()).unwrap();
                            log.install_time(b, loaded);
                        }
                    }
                    TimePlan::Scan { .. } => break,
                    _ => panic!("a lookup of {t} planned neither loads nor a scan"),
                }
            }
            assert!(rounds <= 3, "lookup of record {k}: {rounds} rounds of loads");
            most_rounds = most_rounds.max(rounds);
            assert_eq!(block_on(log.offset_for_time(t, ReadUpTo::Durable)).unwrap(), Some((k, ts(k))));
        }
    }
    assert!(most_rounds >= 2, "the search never needed loads: nothing was checked");
}

/// spec: T8.3 — sealed segments without a time index (older data) get one rebuilt at open,
/// identical to the one written at their close. spec: T5.6 — a torn time index keeps its
/// valid prefix and lookups stay right.
#[test]
fn missing_or_torn_time_indexes() {
    let config = cfg(&[("segment.bytes", "1024"), ("time.index.interval.ms", "10"), ("retention.ms", "-1")]);
    let disk = MemDisk::new();
    let mut log = open(&disk, &config);
    let mut ts = Vec::new();
    for i in 0..60i64 {
        let t = NOW + (i * 7919) % 500;
        log.append(&batch_at(&[t, t + 3]), NOW).unwrap();
        ts.extend([t, t + 3]);
    }
    block_on(log.close()).unwrap();
    let tpaths: Vec<PathBuf> =
        disk.paths().into_iter().filter(|p| p.extension().is_some_and(|e| e == "timeindex")).collect();
    assert!(tpaths.len() > 3);
    let originals: Vec<Vec<u8>> = tpaths.iter().map(|p| disk.file_bytes(p).unwrap()).collect();
    for p in &tpaths {
        block_on(tidemark::io::Disk::remove_file(&disk, p)).unwrap();
    }
    let (mut log, report) = block_on(Log::open(disk.clone(), &dir(), config.clone())).unwrap();
    assert!(report.clean);
    // Rebuilt when first used (reads and lookups load a sealed segment's indexes).
    for b in log.segment_bases() {
        if b < log.log_end_offset() {
            block_on(log.read(b, 1, ReadUpTo::LogEnd)).unwrap();
        }
    }
    for (p, o) in tpaths.iter().zip(&originals) {
        assert_eq!(&disk.file_bytes(p).unwrap(), o, "rebuilt {}", p.display());
    }
    // Unclean (no marker) with every index missing: the backwards scan rebuilds the newest.
    block_on(log.close()).unwrap();
    for p in &tpaths {
        block_on(tidemark::io::Disk::remove_file(&disk, p)).unwrap();
    }
    block_on(tidemark::io::Disk::remove_file(&disk, &dir().join("clean-shutdown"))).unwrap();
    let (mut log, report) = block_on(Log::open(disk.clone(), &dir(), config.clone())).unwrap();
    assert!(!report.clean && report.rebuilt_time_indexes >= 1);
    for b in log.segment_bases() {
        if b < log.log_end_offset() {
            block_on(log.read(b, 1, ReadUpTo::LogEnd)).unwrap();
        }
    }
    for (p, o) in tpaths.iter().zip(&originals).take(tpaths.len() - 1) {
        assert_eq!(&disk.file_bytes(p).unwrap(), o, "rebuilt after an unclean stop: {}", p.display());
    }
    let probe = |log: &mut Log<MemDisk>, t: i64| block_on(log.offset_for_time(t, ReadUpTo::LogEnd)).unwrap();
    for t in [NOW, NOW + 100, NOW + 250, NOW + 499] {
        let want = ts.iter().position(|&x| x >= t).map(|o| (o as i64, ts[o]));
        assert_eq!(probe(&mut log, t), want);
    }
    block_on(log.close()).unwrap();
    // Torn: cut the middle segment's time index mid-entry.
    let victim = &tpaths[tpaths.len() / 2];
    let mut b = disk.file_bytes(victim).unwrap();
    b.truncate(b.len().saturating_sub(5));
    disk.set_file_bytes(victim, b);
    let mut log = open(&disk, &config);
    for t in [NOW, NOW + 100, NOW + 250, NOW + 499, NOW + 1000] {
        let want = ts.iter().position(|&x| x >= t).map(|o| (o as i64, ts[o]));
        assert_eq!(probe(&mut log, t), want);
    }
    let _ = Path::new("");
}

/// spec: T7.2 — the per-shard upkeep task applies retention on its own, every
/// `log.retention.check.interval.ms`, and config changes reach open partitions at runtime.
#[test]
fn upkeep_task_applies_retention_and_runtime_config() {
    common::run_glommio(|| {
        Box::pin(async {
            use std::cell::Cell;
            use std::rc::Rc;
            use tidemark::storage::manager::PartitionManager;
            let now = Rc::new(Cell::new(NOW));
            let clock_now = now.clone();
            let clock: tidemark::storage::Clock = Rc::new(move || clock_now.get());
            let disk = MemDisk::new();
            let m = PartitionManager::new(disk.clone(), Path::new("/data"), clock, None);
            let config = cfg(&[("segment.bytes", "1024"), ("retention.ms", "-1")]);
            let p = m.open_partition("events", 0, config.clone()).await.unwrap();
            for i in 0..40 {
                p.append(&batch_at(&[NOW + i])).await.unwrap();
            }
            let segments = p.log().segment_count();
            assert!(segments > 3);
            m.spawn_upkeep(std::time::Duration::from_millis(5));
            now.set(NOW + 10 * HOUR);
            glommio::timer::sleep(std::time::Duration::from_millis(30)).await;
            assert_eq!(p.log().segment_count(), segments, "retention.ms=-1 keeps everything");
            // Retention switched on at runtime: the next passes delete the expired prefix.
            m.set_topic_config("events", &cfg(&[("segment.bytes", "1024"), ("retention.ms", "3600000")]));
            glommio::timer::sleep(std::time::Duration::from_millis(60)).await;
            assert!(p.log().segment_count() <= 2, "{} segments left", p.log().segment_count());
            m.close_all().await.unwrap();
        })
    });
}

/// spec: T7.2 — an idle partition still loses its expired segments: after a time roll the new
/// (empty) active segment gets its file at once, so the expired one before it can go.
/// Upkeep racing a clean shutdown is a no-op, never a panic.
#[test]
fn idle_partition_expires_and_upkeep_after_close_is_harmless() {
    let config = cfg(&[("retention.ms", "3600000"), ("segment.ms", "600000")]);
    let mut log = open(&MemDisk::new(), &config);
    log.append(&batch_at(&[NOW]), NOW).unwrap();
    block_on(log.flush_all()).unwrap();
    // 10 minutes idle: time roll; the flusher seals it and creates the next file.
    block_on(log.maintain(NOW + 10 * MIN)).unwrap();
    assert_eq!(log.segment_count(), 2);
    block_on(log.flush_all()).unwrap();
    // An hour after the last record, nothing else having arrived: deleted.
    let removed = block_on(log.maintain(NOW + HOUR + 1)).unwrap();
    assert_eq!(removed, vec![0]);
    assert_eq!(log.log_start_offset(), 1);
    // A clean shutdown in progress: upkeep does nothing.
    log.append(&batch_at(&[NOW + 2 * HOUR]), NOW + 2 * HOUR).unwrap();
    log.begin_close();
    assert!(block_on(log.maintain(NOW + 100 * HOUR)).unwrap().is_empty());
    block_on(log.flush_all()).unwrap();
    assert!(log.is_closed_clean());
}

/// spec: T8.1 — when the clean path fails (here: the last segment's offset index is gone),
/// the rescan continues from the entries *before* that segment, not from the marker's
/// timestamp (which includes the segment's own): its bucket entries come back.
#[test]
fn marker_fallback_rebuilds_the_last_segments_entries() {
    let config = cfg(&[("time.index.interval.ms", "10"), ("retention.ms", "-1")]);
    let disk = MemDisk::new();
    let mut log = open(&disk, &config);
    for i in 0..20 {
        log.append(&batch_at(&[NOW + i * 25]), NOW).unwrap();
    }
    block_on(log.close()).unwrap();
    let original = {
        let log = open(&disk, &config);
        log.time_entries(0).unwrap()
    };
    assert!(original.len() > 2);
    // The clean reopen above started a new (empty, fileless) active segment; close again so
    // the marker is back, then remove the last segment's offset index.
    let log = open(&disk, &config);
    block_on(log.close()).unwrap();
    block_on(tidemark::io::Disk::remove_file(&disk, &dir().join(format!("{:020}.index", 0)))).unwrap();
    let (log, report) = block_on(Log::open(disk.clone(), &dir(), config.clone())).unwrap();
    assert!(!report.clean);
    let rebuilt = log.time_entries(0).unwrap();
    // Rescanned as the active segment: the same bucket entries, without the close entry.
    assert_eq!(rebuilt[..], original[..original.len() - 1]);
}

/// spec: T5.5 — a segment none of whose records has a timestamp gets one entry: when it is
/// closed live, (its last append time, the offset of its last record); when its time index is
/// rebuilt (older data, T8.3), (its file's mtime, the offset of its last record).
/// spec: T8.3 — retention then uses that mtime entry.
#[test]
fn segment_without_timestamps_gets_its_mtime_entry() {
    let config = cfg(&[("retention.ms", "1000"), ("segment.ms", "604800000")]);
    let disk = MemDisk::new();
    disk.set_now_ms(5_000); // the files' modification time
    let mut log = open(&disk, &config);
    let mut b = BatchBuilder::new();
    for _ in 0..3 {
        b.push(-1, None, Some(b"no timestamp"), &[]);
    }
    // `now` just after the files' mtime: with no timestamp in the log, rolling by time counts
    // from the segment's mtime (T7.1, T8.3), so nothing rolls on its own here.
    let now = 5_500;
    log.append(&b.finish(), now).unwrap();
    log.append(&b.finish(), now).unwrap(); // offsets 0..=5, all without a timestamp
    log.roll(now);
    log.append(&batch_at(&[10_000]), now).unwrap();
    block_on(log.close()).unwrap();
    let tpath = dir().join(format!("{:020}.timeindex", 0));
    // Closed live: (the time of its last append, the offset of its last record).
    let mut live = Vec::new();
    tidemark::storage::format::index::encode_time_entry(&mut live, now, 5);
    assert_eq!(disk.file_bytes(&tpath).unwrap(), live, "a live segment gets its entry at its last append");
    block_on(tidemark::io::Disk::remove_file(&disk, &tpath)).unwrap();
    let mut log = open(&disk, &config);
    block_on(log.read(0, 1, ReadUpTo::LogEnd)).unwrap(); // loads (rebuilds) segment 0's indexes
    assert_eq!(log.time_entries(0).unwrap(), vec![(5_000, 5)], "(mtime, offset of the last record)");
    // Retention by time: the mtime entry is segment 0's largest timestamp.
    assert!(block_on(log.maintain(5_000 + 1_000)).unwrap().is_empty(), "not yet expired");
    assert_eq!(block_on(log.maintain(5_000 + 1_001)).unwrap(), vec![0]);
}
