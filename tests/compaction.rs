//! Model test of log compaction: random keyed appends (tombstones among them, every codec; v2
//! batches and legacy message sets of magic 0 and 1, plain and wrapped),
//! rolls, clock moves, cleaning passes (some with a small dedupe budget, so a pass ends early),
//! clean reopens, and kills at every step of a pass (the disk dies after N changes, then a
//! power cut that drops or tears what was not synced, then a reopen), checked against a model
//! that keeps every record with its batch and applies Kafka's rules itself.
//!
//! After each pass the log must hold exactly the model's batches (base and last offsets kept,
//! records in order with their offsets, keys, values and timestamps), and lookups by time must
//! agree with a brute-force scan of what remains. After a kill mid-pass the log must hold every
//! record a completed pass would keep and nothing that was not there before (the old segments
//! or the new ones, never a lost record); a pass after the reopen then gives the exact log.
//! Reads go through a batch cache that keeps everything: a swap leaves nothing stale in it.
//!
//! spec: T5.1, T5.3 — cleaned segments' time indexes are rebuilt by the recovery rules (a
//!   lookup agrees with a brute-force scan; `-3` finds the largest timestamp left).
//! spec: T6.2 — the first offset whose record has `ts >= T`, over a log with gaps.
//! spec: T8.2, T8.4 — a kill at any step of a swap recovers to the old or the new segments.

use futures_lite::future::block_on;
use proptest::prelude::*;
use std::cell::RefCell;
use std::path::Path;
use std::rc::Rc;
use tidemark::budget::Budget;
use tidemark::config::LogConfig;
use tidemark::io::{CrashMode, Disk, MemBuf, MemDisk};
use tidemark::storage::cache::BatchCache;
use tidemark::storage::cleaner::{self, CleanerLimits, IoBudget};
use tidemark::storage::format::batch::{records_section, BatchBuilder, BatchHeader, Compression, Records, MAGIC_V2};
use tidemark::storage::format::legacy::{self, LegacyBuilder};
use tidemark::storage::format::BatchWalk;
use tidemark::storage::{Log, ReadUpTo};

const CODECS: [Compression; 5] =
    [Compression::None, Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd];

#[derive(Debug, Clone)]
enum Op {
    /// Records (key, tombstone, timestamp offset from now) in one batch of a codec.
    Append(Vec<(u8, bool, i16)>, u8),
    /// The same as a legacy message set of magic 0 or 1 (`true`), plain or wrapped by a codec
    /// (gzip, snappy, lz4: zstd came with v2).
    AppendLegacy(Vec<(u8, bool, i16)>, bool, u8),
    Roll,
    Tick(u16),
    /// A pass with the dedupe budget small (a few keys) or large.
    Clean {
        small_map: bool,
    },
    /// A pass during which the disk dies after `fuse` changes; then a power cut and a reopen.
    KillInClean {
        fuse: u16,
        torn: Option<u64>,
    },
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (proptest::collection::vec((0u8..12, proptest::bool::weighted(0.15), -300i16..300), 1..8), 0u8..5)
            .prop_map(|(r, c)| Op::Append(r, c)),
        3 => (proptest::collection::vec((0u8..12, proptest::bool::weighted(0.15), -300i16..300), 1..6), any::<bool>(), 0u8..4)
            .prop_map(|(r, m, c)| Op::AppendLegacy(r, m, c)),
        2 => Just(Op::Roll),
        2 => (0u16..4000).prop_map(Op::Tick),
        3 => any::<bool>().prop_map(|small_map| Op::Clean { small_map }),
        2 => (0u16..40, proptest::option::of(any::<u64>())).prop_map(|(fuse, torn)| Op::KillInClean { fuse, torn }),
        1 => Just(Op::Reopen),
    ]
}

fn config() -> impl Strategy<Value = LogConfig> {
    (1024u64..4096, 0u64..600, 1u64..3000, 50u64..1000).prop_map(|(seg, interval, retention, time_interval)| {
        LogConfig {
            segment_bytes: seg,
            index_interval_bytes: interval,
            time_index_interval_ms: time_interval,
            cleanup_compact: true,
            cleanup_delete: false,
            // At least 1: a tombstone stamped by a pass is never dropped by a pass at the
            // same instant (the model's passes after a kill run at the same `now`).
            delete_retention_ms: retention,
            write_chunk_bytes: 4096,
            preallocate_bytes: 8192,
            ..LogConfig::default()
        }
    })
}

/// A record as a reader sees it: (offset, key, value, timestamp).
type Rec = (i64, Vec<u8>, Option<Vec<u8>>, i64);

#[derive(Debug, Clone)]
struct MBatch {
    base: i64,
    last: i64,
    recs: Vec<(Rec, bool)>,
    horizon: Option<i64>,
    /// A legacy entry: no horizon of its own; rebuilt, its offsets are those of what it keeps.
    legacy: bool,
}

#[derive(Debug, Clone, Default)]
struct Model {
    batches: Vec<MBatch>,
    next: i64,
}

/// Each segment's (base, file mtime) when a pass begins: a legacy tombstone goes once
/// `delete.retention.ms` has passed since its segment was last written. (The disk's clock
/// follows the test's, so mtimes are when files were last written, as on a real disk.)
type Mtimes = Vec<(i64, i64)>;

async fn mtimes(log: &Log<MemDisk>, disk: &MemDisk) -> Mtimes {
    let mut out = Vec::new();
    for base in log.segment_bases() {
        let path = Path::new("/data/c-0").join(format!("{base:020}.log"));
        // (The active segment's file may not exist yet: it is never cleaned.)
        out.push((base, disk.mtime_ms(&path).await.unwrap_or(i64::MAX / 2)));
    }
    out
}

impl Model {
    /// Kafka's rules over the batches below `end` at `now`, with the offset map over
    /// `[map_start, end)`: a record stays unless a later record of its key is in the map; a
    /// tombstone goes once its batch's horizon passed; a batch keeping a tombstone
    /// gets a horizon `now + retention` if it has none; a legacy tombstone goes by its
    /// segment's mtime. (Batches left empty may stay in the log, empty: readers see no
    /// record of them; `read_all` leaves them out.)
    fn clean(&mut self, map_start: i64, end: i64, now: i64, retention: i64, mtimes: &Mtimes, first_dirty: i64) {
        // Legacy tombstones' horizon (Kafka's): the last segment below the first dirty offset
        // was last written at `m`; a tombstone goes if its segment was written by `m - retention`.
        let last_clean = mtimes.iter().rfind(|(base, _)| *base < first_dirty).map(|&(_, m)| m);
        let mut latest = std::collections::HashMap::new();
        for b in self.batches.iter().filter(|b| b.last < end && b.last >= map_start) {
            for ((o, k, _, _), alive) in &b.recs {
                if *alive {
                    latest.insert(k.clone(), *o);
                }
            }
        }
        for b in self.batches.iter_mut().filter(|b| b.last < end) {
            let mut tombstone = false;
            let expired = if b.legacy {
                let mtime = mtimes.iter().rev().find(|(base, _)| *base <= b.base).expect("a segment holds it").1;
                last_clean.is_some_and(|m| mtime <= m - retention)
            } else {
                b.horizon.is_some_and(|h| h <= now)
            };
            for ((o, k, v, _), alive) in b.recs.iter_mut().filter(|(_, a)| *a) {
                if latest.get(k).is_some_and(|l| l > o) || (v.is_none() && expired) {
                    *alive = false;
                } else if v.is_none() {
                    tombstone = true;
                }
            }
            if tombstone && b.horizon.is_none() && !b.legacy {
                b.horizon = Some(now + retention);
            }
        }
    }

    /// The batches a reader must see: (base, last, records), those with a record left.
    fn expected(&self) -> Vec<(i64, i64, Vec<Rec>)> {
        self.batches
            .iter()
            .map(|b| {
                let recs = b.recs.iter().filter(|(_, a)| *a).map(|(r, _)| r.clone()).collect::<Vec<_>>();
                match (b.legacy, recs.first(), recs.last()) {
                    (true, Some(f), Some(l)) => (f.0, l.0, recs),
                    _ => (b.base, b.last, recs),
                }
            })
            .filter(|(_, _, r)| !r.is_empty())
            .collect()
    }

    fn alive(&self) -> Vec<Rec> {
        self.expected().into_iter().flat_map(|(_, _, r)| r).collect()
    }
}

/// Every batch of the log from its start that holds a record: (base, last, records). (An
/// empty batch, which a pass keeps where a later segment's time index rests on its
/// maxTimestamp, is left out; offsets never go back across it.)
async fn read_all(log: &mut Log<MemDisk>) -> Vec<(i64, i64, Vec<Rec>)> {
    let mut out = Vec::new();
    let mut at = log.log_start_offset();
    let end = log.log_end_offset();
    while at < end {
        let bytes = log.read(at, 1 << 20, ReadUpTo::LogEnd).await.expect("read");
        if bytes.is_empty() {
            // Nothing left below the end: a pass may remove a sealed segment's last batches
            // (superseded records, expired tombstones) when the active segment holds none yet;
            // a consumer there waits for the next append, as Kafka's does. What a read missed
            // the comparison with the model finds.
            break;
        }
        let mut walk = BatchWalk::new(&bytes, usize::MAX >> 1);
        for item in walk.by_ref() {
            let (_, info, b) = item.expect("whole batches");
            if info.magic != MAGIC_V2 {
                let mut scratch = Vec::new();
                let recs: Vec<Rec> = legacy::records(b, &mut scratch, 1 << 24)
                    .expect("legacy records")
                    .into_iter()
                    .map(|r| (r.offset, r.key.expect("keyed").to_vec(), r.value.map(<[u8]>::to_vec), r.timestamp))
                    .collect();
                assert!(recs[0].0 >= at, "a read went back: {recs:?} at {at}");
                out.push((recs[0].0, info.last_offset, recs));
                at = info.next_offset();
                continue;
            }
            let h = BatchHeader::parse(b).expect("v2");
            let section = records_section(&h, b, 1 << 24).expect("records");
            let recs = Records::new(&section, h.record_count)
                .map(|r| {
                    let r = r.expect("record");
                    let o = h.base_offset + r.offset_delta as i64;
                    (
                        o,
                        r.key.expect("keyed").to_vec(),
                        r.value.map(<[u8]>::to_vec),
                        h.record_timestamp(r.timestamp_delta),
                    )
                })
                .collect::<Vec<_>>();
            assert!(recs.iter().all(|r| r.0 >= at), "a read went back: {recs:?} at {at}");
            if !recs.is_empty() {
                out.push((h.base_offset, h.last_offset(), recs));
            }
            at = h.next_offset();
        }
    }
    out
}

/// SPEC T6.2 and T6.1 (-3) against a brute-force scan of the records left (magic-0
/// records, timestamp -1, never match).
async fn check_time_lookups(log: &mut Log<MemDisk>, alive: &[Rec], probes: &[i64]) {
    let alive: Vec<&Rec> = alive.iter().filter(|r| r.3 >= 0).collect();
    for &t in probes {
        let want = alive.iter().filter(|r| r.3 >= t).min_by_key(|r| r.0).map(|r| (r.0, r.3));
        let got = log.offset_for_time(t, ReadUpTo::LogEnd).await.expect("lookup");
        assert_eq!(got, want, "offset for time {t}");
    }
    let max = alive.iter().map(|r| r.3).max();
    let want = max.map(|m| alive.iter().filter(|r| r.3 == m).min_by_key(|r| r.0).map(|r| (r.0, r.3)).expect("found"));
    assert_eq!(log.offset_for_time(-3, ReadUpTo::LogEnd).await.expect("-3"), want, "max timestamp");
}

/// One pass: (where its offset map began, its end), or `None` when nothing was cleanable.
type Pass = (i64, i64);

async fn pass(
    log: &mut Log<MemDisk>,
    now: i64,
    small_map: bool,
) -> Result<Option<Pass>, tidemark::storage::StorageError> {
    let cell = RefCell::new(log);
    let Some(target) = cleaner::clean_target(&cell, now).await? else { return Ok(None) };
    let limits = CleanerLimits { map_budget_bytes: if small_map { 200 } else { 1 << 20 } };
    let report = cleaner::run_pass(&cell, now, target, limits, &mut IoBudget::new(None), &|| false).await?;
    Ok(Some((report.map_start, report.end)))
}

fn open(disk: &MemDisk, config: &LogConfig) -> Log<MemDisk> {
    block_on(Log::open(disk.clone(), Path::new("/data/c-0"), config.clone())).expect("open").0
}

/// [`open`] with a batch cache that keeps everything: a swap must not leave the bytes it
/// replaced readable.
fn open_cached(disk: &MemDisk, config: &LogConfig, cache: &Rc<BatchCache<MemBuf>>) -> Log<MemDisk> {
    let mut log = open(disk, config);
    log.attach_cache(cache.register());
    log
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn compaction_matches_model(
        config in config(),
        ops in proptest::collection::vec(op(), 1..90),
    ) {
        let disk = MemDisk::new();
        let cache = BatchCache::new(Budget::new(1 << 30), 1 << 30);
        let mut now = 1_000_000i64;
        disk.set_now_ms(now);
        let mut log = open_cached(&disk, &config, &cache);
        let mut m = Model::default();
        let mut tag = 0u64;
        let retention = config.delete_retention_ms as i64;
        block_on(async {
            for op in ops {
                match op {
                    Op::Append(recs, codec) => {
                        let mut b = BatchBuilder::new();
                        let mut mrecs = Vec::new();
                        for (i, &(key, tomb, dt)) in recs.iter().enumerate() {
                            tag += 1;
                            let k = vec![b'k', key];
                            let v = (!tomb).then(|| format!("v{tag}").into_bytes());
                            let ts = now + dt as i64;
                            b.push(ts, Some(&k), v.as_deref(), &[]);
                            mrecs.push(((m.next + i as i64, k, v, ts), true));
                        }
                        let (info, _) = log.append(&b.finish_compressed(CODECS[codec as usize]), now).expect("append");
                        assert_eq!(info.base_offset, m.next);
                        log.flush_all().await.expect("flush");
                        m.batches.push(MBatch { base: info.base_offset, last: info.last_offset, recs: mrecs, horizon: None, legacy: false });
                        m.next = info.last_offset + 1;
                    }
                    Op::AppendLegacy(recs, magic1, codec) => {
                        let codec = [Compression::None, Compression::Gzip, Compression::Snappy, Compression::Lz4][codec as usize];
                        let magic = if magic1 { legacy::MAGIC_V1 } else { legacy::MAGIC_V0 };
                        let mut b = LegacyBuilder::new(magic, codec);
                        let mut mrecs = Vec::new();
                        for (i, &(key, tomb, dt)) in recs.iter().enumerate() {
                            tag += 1;
                            let k = vec![b'k', key];
                            let v = (!tomb).then(|| format!("v{tag}").into_bytes());
                            let ts = if magic1 { now + dt as i64 } else { -1 };
                            b.push(ts, Some(&k), v.as_deref());
                            mrecs.push(((m.next + i as i64, k, v, ts), true));
                        }
                        let (info, _) = log.append(&b.finish(), now).expect("append legacy");
                        assert_eq!((info.base_offset, info.last_offset), (m.next, m.next + mrecs.len() as i64 - 1));
                        log.flush_all().await.expect("flush");
                        // Plain messages are entries of one record each; a wrapper is one.
                        let entries = if codec == Compression::None { mrecs.into_iter().map(|r| vec![r]).collect() } else { vec![mrecs] };
                        for recs in entries {
                            let (base, last) = (recs[0].0 .0, recs[recs.len() - 1].0 .0);
                            m.batches.push(MBatch { base, last, recs, horizon: None, legacy: true });
                        }
                        m.next = info.last_offset + 1;
                    }
                    Op::Roll => {
                        log.roll(now);
                        log.flush_all().await.expect("flush");
                    }
                    Op::Tick(ms) => {
                        now += ms as i64;
                        disk.set_now_ms(now);
                    }
                    Op::Clean { small_map } => {
                        let mt = mtimes(&log, &disk).await;
                        if let Some((map_start, end)) = pass(&mut log, now, small_map).await.expect("pass") {
                            m.clean(map_start, end, now, retention, &mt, map_start);
                        }
                        assert_eq!(read_all(&mut log).await, m.expected(), "after a pass at {now}");
                    }
                    Op::KillInClean { fuse, torn } => {
                        let before = m.alive();
                        let target = {
                            let cell = RefCell::new(&mut log);
                            cleaner::clean_target(&cell, now).await.expect("target")
                        };
                        let Some(target) = target else { continue };
                        let end = target.end;
                        // The killed pass's map if it finishes (a large map: the whole range).
                        let planned: Pass = (target.first_dirty, end);
                        // Legacy tombstones are judged by the mtimes before the killed pass (a
                        // group it swapped was judged so) or, where it did not swap, by those
                        // the pass after the kill sees (merged segments take their group's
                        // latest mtime): where the two disagree, either outcome is right.
                        let mt = mtimes(&log, &disk).await;
                        disk.fail_after(fuse as u64);
                        let first = pass(&mut log, now, false).await;
                        disk.heal();
                        disk.crash(torn.map_or(CrashMode::DropUnsynced, |seed| CrashMode::Torn { seed }));
                        drop(log);
                        log = open_cached(&disk, &config, &cache);
                        // Old or new segments: nothing the last record of a key is lost, nothing
                        // that was not there appears.
                        let got: Vec<Rec> = read_all(&mut log).await.into_iter().flat_map(|(_, _, r)| r).collect();
                        let mut must = m.clone();
                        must.clean(i64::MIN, end, now, retention, &mt, planned.0);
                        let must = must.alive();
                        assert!(must.iter().all(|r| got.contains(r)), "lost a record: kept {must:?}, read {got:?}");
                        assert!(got.iter().all(|r| before.contains(r)), "a record appeared: had {before:?}, read {got:?}");
                        // A pass now (same instant) gives exactly the model: with the map of the
                        // pass that completed (this one, or the killed one if it finished).
                        let mt_after = mtimes(&log, &disk).await;
                        let (map_start, e) = match pass(&mut log, now, false).await.expect("pass after the kill") {
                            Some(p) => p,
                            // The killed pass got as far as its checkpoint.
                            None => first.ok().flatten().unwrap_or(planned),
                        };
                        assert_eq!(e, end, "the pass after the kill covers the same range");
                        let mut after = m.clone();
                        after.clean(map_start, end, now, retention, &mt_after, map_start);
                        m.clean(map_start, end, now, retention, &mt, map_start);
                        let got = read_all(&mut log).await;
                        let read: Vec<&Rec> = got.iter().flat_map(|(_, _, r)| r).collect();
                        for (b, a) in m.batches.iter_mut().zip(&after.batches) {
                            for ((r, alive), (_, alive_after)) in b.recs.iter_mut().zip(&a.recs) {
                                if b.legacy && r.2.is_none() && alive != alive_after {
                                    *alive = read.contains(&&*r);
                                }
                            }
                        }
                        assert_eq!(got, m.expected(), "after a kill and a pass");
                    }
                    Op::Reopen => {
                        log.close().await.expect("close");
                        log = open_cached(&disk, &config, &cache);
                        assert_eq!(read_all(&mut log).await, m.expected(), "after a reopen");
                    }
                }
                assert_eq!(log.log_end_offset(), m.next);
            }
            let alive = m.alive();
            let mut probes: Vec<i64> = alive.iter().map(|r| r.3).filter(|&t| t >= 0).collect();
            probes.extend([0, now - 1000, now + 1000, i64::MAX]);
            probes.sort_unstable();
            probes.dedup();
            check_time_lookups(&mut log, &alive, &probes).await;
            assert_eq!(read_all(&mut log).await, m.expected(), "at the end");
        });
    }
}

/// A small-buffered compacted log's settings (`compact`: with or without the policy).
fn compacted(compact: bool) -> LogConfig {
    LogConfig { cleanup_compact: compact, write_chunk_bytes: 4096, preallocate_bytes: 8192, ..LogConfig::default() }
}

/// spec: T7.1 with KIP-354 — on a compacted topic with `max.compaction.lag.ms`, the active
/// segment is rolled once it began that long ago (so its records become cleanable within the
/// lag), whatever `segment.ms` says; without `compact` the lag changes nothing.
#[test]
fn max_compaction_lag_rolls_the_active_segment() {
    for compact in [true, false] {
        let config = LogConfig { max_compaction_lag_ms: Some(1000), ..compacted(compact) };
        let disk = MemDisk::new();
        let mut log = open(&disk, &config);
        block_on(async {
            let mut b = BatchBuilder::new();
            b.push(5_000, Some(b"k"), Some(b"v"), &[]);
            log.append(&b.finish(), 5_000).expect("append");
            log.flush_all().await.expect("flush");
            log.roll(5_000);
            log.append(&b.finish(), 5_100).expect("append");
            assert!(!log.maybe_roll_for_time(5_500, None), "within the lag");
            assert_eq!(log.maybe_roll_for_time(6_100, None), compact, "past the lag (compact: {compact})");
        });
    }
}

/// spec: T5.5, T8.3 — across a compaction: a cleaned group of segments whose records carry no timestamp
/// keeps its originals' latest modification time, so the rebuilt index's entry (mtime, last
/// offset) is the one the originals had (later entries and retention rest on it).
#[test]
fn untimed_segments_keep_their_mtime_entry() {
    let config = LogConfig { cleanup_delete: false, ..compacted(true) };
    let disk = MemDisk::new();
    let mut log = open(&disk, &config);
    block_on(async {
        for (i, t) in [1_000i64, 2_000, 3_000].into_iter().enumerate() {
            disk.set_now_ms(t);
            let mut b = BatchBuilder::new();
            b.push(-1, Some(b"k"), Some(format!("v{i}").as_bytes()), &[]);
            log.append(&b.finish(), t).expect("append");
            log.flush_all().await.expect("flush");
            log.roll(t);
            log.flush_all().await.expect("flush");
        }
        let mut b = BatchBuilder::new();
        b.push(-1, Some(b"tick"), Some(b"t"), &[]);
        log.append(&b.finish(), 3_500).expect("append");
        log.flush_all().await.expect("flush");
        let before: Vec<_> = log.segment_bases().into_iter().filter_map(|s| log.time_entries(s)).flatten().collect();
        disk.set_now_ms(9_000);
        let (_, end) = pass(&mut log, 9_000, false).await.expect("pass").expect("work");
        assert_eq!(end, 3);
        let after: Vec<_> = log.segment_bases().into_iter().filter_map(|s| log.time_entries(s)).flatten().collect();
        assert_eq!(
            after.last().map(|e| e.0),
            before.iter().map(|e| e.0).filter(|&t| t <= 3_000).max(),
            "{before:?} -> {after:?}"
        );
        assert!(after.windows(2).all(|w| w[0].0 < w[1].0), "entries increase: {after:?}");
    });
}

/// spec: T7.2, T7.3 — retention by time and size removes segments only with `delete` in
/// `cleanup.policy`: a compact-only log keeps its expired segments (the cleaner alone shrinks
/// it), a `compact,delete` one loses them.
#[test]
fn retention_runs_only_with_delete() {
    for delete in [false, true] {
        let config =
            LogConfig { cleanup_delete: delete, retention_ms: Some(1000), retention_bytes: Some(0), ..compacted(true) };
        let disk = MemDisk::new();
        let mut log = open(&disk, &config);
        block_on(async {
            let mut b = BatchBuilder::new();
            b.push(5_000, Some(b"k"), Some(b"v"), &[]);
            for t in [5_000, 5_100] {
                log.append(&b.finish(), t).expect("append");
                log.flush_all().await.expect("flush");
                log.roll(t);
                log.flush_all().await.expect("flush");
            }
            let removed = log.maintain(60_000).await.expect("upkeep");
            assert_eq!(!removed.is_empty(), delete, "delete in the policy: {delete}, removed {removed:?}");
        });
    }
}

/// spec: T5.5, T5.1, T6.2 — a segment without timestamps (magic-0 messages) whose time-index
/// entry is its mtime keeps that entry through cleaning: it is cleaned alone, never merged
/// with a segment with timestamps (whose rebuilt index would drop the entry that later
/// segments' entries rest on). Its files' mtime is far ahead (clock skew), the index rebuilt
/// after a power cut; a lookup by time must still find the v2 record of a later segment.
#[test]
fn an_untimed_segments_mtime_entry_survives_cleaning() {
    let config = LogConfig {
        segment_bytes: 1024,
        index_interval_bytes: 0,
        time_index_interval_ms: 188,
        delete_retention_ms: 1,
        ..compacted(true)
    };
    let disk = MemDisk::new();
    disk.set_now_ms(1 << 60);
    let mut log = open(&disk, &config);
    let now = 1_000_000i64;
    let v2 = |ts: i64, k: &[u8]| {
        let mut b = BatchBuilder::new();
        b.push(ts, Some(k), Some(b"v"), &[]);
        b.finish()
    };
    block_on(async {
        log.append(&v2(now - 29, b"k5"), now).expect("append");
        log.flush_all().await.expect("flush");
        log.roll(now);
        let mut m0 = LegacyBuilder::new(legacy::MAGIC_V0, Compression::None);
        m0.push(-1, Some(b"k0"), Some(b"old"));
        log.append(&m0.finish(), now).expect("append magic 0");
        log.flush_all().await.expect("flush");
        disk.crash(CrashMode::DropUnsynced);
        drop(log);
        log = open(&disk, &config);
        log.close().await.expect("close");
        log = open(&disk, &config);
        let untimed = log.time_entries(1).expect("loaded");
        assert_eq!(untimed, [(1 << 60, 0)], "the magic-0 segment's entry is its mtime");
        log.append(&v2(now, b"k0"), now).expect("append");
        log.flush_all().await.expect("flush");
        log.roll(now);
        log.flush_all().await.expect("flush");
        pass(&mut log, now, false).await.expect("pass");
        assert_eq!(log.time_entries(1), Some(untimed.clone()), "the untimed segment keeps its entry");
        disk.crash(CrashMode::DropUnsynced);
        drop(log);
        log = open(&disk, &config);
        pass(&mut log, now, false).await.expect("pass");
        let mut m1 = LegacyBuilder::new(legacy::MAGIC_V1, Compression::None);
        m1.push(now, Some(b"k0"), Some(b"new"));
        log.append(&m1.finish(), now).expect("append magic 1");
        log.flush_all().await.expect("flush");
        assert_eq!(log.offset_for_time(now, ReadUpTo::LogEnd).await.expect("lookup"), Some((2, now)));
    });
}

/// `max.compaction.lag.ms` counts from a dirty segment's first batch (Kafka's earliest dirty
/// segment timestamp), not its last: a segment whose first record is older than the lag is
/// due although its last is recent and its dirty share is below `min.cleanable.dirty.ratio`;
/// so is one sealed before a restart (its first batch is read then), and the segments'
/// timestamps alone (no lag set) never make it due.
#[test]
fn max_compaction_lag_counts_from_the_first_batch() {
    let config =
        LogConfig { min_cleanable_dirty_ratio_ppm: 900_000, max_compaction_lag_ms: Some(5_000), ..compacted(true) };
    let disk = MemDisk::new();
    let mut log = open(&disk, &config);
    // `n` records of distinct keys `<k>0`, `<k>1`, ...: none superseded.
    let batch = |ts: i64, k: &str, n: usize| {
        let mut b = BatchBuilder::new();
        for i in 0..n {
            b.push(ts, Some(format!("{k}{i}").as_bytes()), Some(&[b'v'; 100]), &[]);
        }
        b.finish()
    };
    block_on(async {
        // A large clean part: a pass over it first.
        log.append(&batch(1_000, "a", 40), 1_000).expect("append");
        log.flush_all().await.expect("flush");
        log.roll(1_000);
        log.flush_all().await.expect("flush");
        pass(&mut log, 1_000, false).await.expect("pass").expect("cleanable");
        // A small dirty segment: its first record at 2 000, its last at 9 000.
        log.append(&batch(2_000, "b", 1), 9_000).expect("append");
        log.append(&batch(9_000, "c", 1), 9_000).expect("append");
        log.flush_all().await.expect("flush");
        log.roll(9_000);
        log.flush_all().await.expect("flush");
        for reopen in [false, true] {
            if reopen {
                log.close().await.expect("close");
                log = open(&disk, &config);
            }
            let target = {
                let cell = RefCell::new(&mut log);
                cleaner::clean_target(&cell, 9_500).await.expect("target").expect("cleanable")
            };
            assert!(target.dirty_ratio() < 0.9, "{}", target.dirty_ratio());
            assert_eq!(target.oldest_dirty_ts, Some(2_000), "reopened: {reopen}");
            assert!(!cleaner::is_due(&target, &config, 7_000), "2 000 + lag not passed");
            assert!(cleaner::is_due(&target, &config, 7_001), "first batch older than the lag");
            let no_lag = LogConfig { max_compaction_lag_ms: None, ..config.clone() };
            assert!(!cleaner::is_due(&target, &no_lag, 1 << 40));
        }
    });
}

/// spec: T8.2 — finishing a committed swap is idempotent at every step: the disk fails after
/// each possible number of changes, then the finish runs again (as the next open does). The
/// range's old files are gone, `<base>.log` holds the cleaned segment and `<base>.txnindex` the
/// cleaned aborted-transaction index (never the old one, and not lost when the first finish
/// had already moved it in before failing), an empty one too (it replaces the old by a rename).
#[test]
fn finishing_a_swap_is_idempotent_at_every_step() {
    use tidemark::storage::log::{finish_swap_files, swap_path, txn_cleaned_path};
    let dir = Path::new("/data/c-0");
    let name = |base: i64, ext: &str| dir.join(format!("{base:020}.{ext}"));
    for cleaned_txn in [b"new-entries".to_vec(), Vec::new()] {
        for fuse in 0..12u64 {
            let disk = MemDisk::new();
            block_on(disk.create_dir_all(dir)).expect("dir");
            for (path, bytes) in [
                (name(0, "log"), b"old-0".to_vec()),
                (name(0, "index"), b"i".to_vec()),
                (name(0, "txnindex"), b"old-entries".to_vec()),
                (name(5, "log"), b"old-5".to_vec()),
                (name(5, "timeindex"), b"t".to_vec()),
                (name(9, "log"), b"next".to_vec()),
                (txn_cleaned_path(dir, 0, 9), cleaned_txn.clone()),
                (swap_path(dir, 0, 9), b"cleaned".to_vec()),
            ] {
                disk.set_file_bytes(&path, bytes);
            }
            disk.fail_after(fuse);
            let _ = block_on(finish_swap_files(&disk, dir, 0, 9));
            disk.heal();
            // As the next open does: finish again while the `.swap` is there.
            if disk.paths().contains(&swap_path(dir, 0, 9)) {
                block_on(finish_swap_files(&disk, dir, 0, 9)).expect("the second finish");
            }
            let mut paths = disk.paths();
            paths.sort();
            assert_eq!(paths, [name(0, "log"), name(0, "txnindex"), name(9, "log")], "fuse {fuse}");
            assert_eq!(disk.file_bytes(&name(0, "log")).as_deref(), Some(&b"cleaned"[..]));
            assert_eq!(disk.file_bytes(&name(0, "txnindex")), Some(cleaned_txn.clone()), "fuse {fuse}");
        }
    }
}
