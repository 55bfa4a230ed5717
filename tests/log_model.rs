//! Model-based property test of the partition log: random appends (v2 batches and legacy
//! messages of magic 0 and 1, plain and compressed, mixed in one log), reads, flushes, rolls,
//! size retention, clean reopens and crashes (power cuts that drop or tear unsynced writes),
//! checked against a plain `Vec` of batches after every step, with and without a batch cache
//! (of sizes that evict all the time and that keep everything).
//!
//! spec: T1.1 — every magic is stored with its wire bytes (only the offset rewritten; a magic-0
//!   wrapper's inner offsets made absolute) and read back as stored, mixed in one log.
//! spec: T8.2 — every synced batch survives a crash; no partial batch is ever exposed.
//! spec: T8.4 — indexes rebuilt after a crash equal those appends built.

mod common;

/// Broker time for appends in tests that do not exercise time.
const NOW: i64 = 10_000;

use common::{stored_batches, tagged_batch, with_base};
use futures_lite::future::block_on;
use proptest::prelude::*;
use std::path::Path;
use tidemark::budget::Budget;
use tidemark::config::LogConfig;
use tidemark::io::{CrashMode, Fault, FaultOp, MemBuf, MemDisk};
use tidemark::storage::cache::BatchCache;
use tidemark::storage::format::batch::{Compression, TimestampType};
use tidemark::storage::format::legacy::{self, LegacyBuilder};
use tidemark::storage::format::BatchInfo;
use tidemark::storage::{Log, ReadUpTo, StorageError};

#[derive(Debug, Clone)]
enum Op {
    /// (kind, records, value bytes) per batch; kinds 0-3: v2, 4: magic-0 messages, 5: magic-1
    /// messages, 6: a magic-1 wrapper, 7: a magic-0 wrapper.
    Append(Vec<(u8, u8, u16)>),
    Flush,
    Read {
        pick: u16,
        max_bytes: u16,
        durable: bool,
    },
    Roll,
    Retain {
        bytes: u16,
    },
    CleanReopen,
    Crash {
        mode: u8,
        seed: u64,
        partial_flush: u8,
    },
    FailingFlush {
        op: u8,
        fault: u8,
    },
    /// DeleteRecords below an offset picked between the log start and the high watermark (or
    /// -1, the high watermark, or one past it, refused).
    DeleteRecords {
        pick: u16,
    },
    /// Cut the log's suffix at an offset picked between the log start and the log end (or
    /// below the start, refused).
    Truncate {
        pick: u16,
    },
    /// A truncation the machine dies in after `fuse` changes, then a power cut (`mode` as in
    /// `Crash`) and a reopen.
    KillInTruncate {
        pick: u16,
        fuse: u8,
        mode: u8,
        seed: u64,
        restart: bool,
    },
    /// Remove everything and start again at an offset below, at or past the log end.
    Restart {
        pick: u16,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => proptest::collection::vec((0u8..8, 1u8..6, 0u16..700), 1..3).prop_map(Op::Append),
        2 => Just(Op::Flush),
        4 => (any::<u16>(), 1u16..3000, any::<bool>()).prop_map(|(pick, max_bytes, durable)| Op::Read { pick, max_bytes, durable }),
        1 => Just(Op::Roll),
        1 => (0u16..6000).prop_map(|bytes| Op::Retain { bytes }),
        1 => Just(Op::CleanReopen),
        1 => (0u8..3, any::<u64>(), 0u8..4).prop_map(|(mode, seed, partial_flush)| Op::Crash { mode, seed, partial_flush }),
        1 => (0u8..3, 0u8..3).prop_map(|(op, fault)| Op::FailingFlush { op, fault }),
        1 => any::<u16>().prop_map(|pick| Op::DeleteRecords { pick }),
        1 => any::<u16>().prop_map(|pick| Op::Truncate { pick }),
        1 => (any::<u16>(), 0u8..16, 0u8..3, any::<u64>(), any::<bool>()).prop_map(|(pick, fuse, mode, seed, restart)| Op::KillInTruncate { pick, fuse, mode, seed, restart }),
        1 => any::<u16>().prop_map(|pick| Op::Restart { pick }),
    ]
}

fn config() -> impl Strategy<Value = LogConfig> {
    (1024u64..6000, 0u64..800, 1u64..3, 1u64..5, 8u64..200).prop_map(
        |(seg, interval, chunk_pages, prealloc_pages, index_bytes)| LogConfig {
            segment_bytes: seg,
            index_interval_bytes: interval,
            write_chunk_bytes: chunk_pages * 4096,
            preallocate_bytes: prealloc_pages * 4096,
            segment_index_bytes: index_bytes / 8 * 8,
            flush_messages: u64::MAX,
            ..LogConfig::default()
        },
    )
}

struct Model {
    /// (base offset, stored bytes) of every batch still in the log's segments (readable when
    /// it ends past the log start).
    batches: Vec<(i64, Vec<u8>)>,
    next_offset: i64,
    /// The log start DeleteRecords set (KIP-107).
    start: i64,
}

fn info(b: &[u8]) -> BatchInfo {
    BatchInfo::parse(b).unwrap()
}

/// A produced message set of a legacy kind (see `Op::Append`), and the batches the log must
/// store for it at `base`: (base offset, bytes) each.
fn legacy_set(kind: u8, tag: u64, n: usize, len: usize, base: i64) -> (Vec<u8>, Vec<(i64, Vec<u8>)>) {
    let (magic, codec) = match kind {
        4 => (0, Compression::None),
        5 => (1, Compression::None),
        6 => (1, [Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd][tag as usize % 4]),
        _ => (0, [Compression::Gzip, Compression::Snappy, Compression::Lz4][tag as usize % 3]),
    };
    let mut b = LegacyBuilder::new(magic, codec);
    for i in 0..n {
        let mut v = format!("{tag}:{i}:").into_bytes();
        v.resize(len.max(v.len()), b'a' + (tag % 26) as u8);
        b.push(tag as i64 * 10 + i as i64, Some(&tag.to_be_bytes()), Some(&v));
    }
    let set = b.finish();
    if codec == Compression::None {
        // Plain messages: one batch each, only the offset rewritten.
        let entries = common::legacy_entries(&set);
        let stored =
            entries.iter().enumerate().map(|(i, e)| (base + i as i64, with_base(e, base + i as i64))).collect();
        return (set, stored);
    }
    // A wrapper: its offset becomes its last; a magic-0 wrapper's inner offsets absolute
    // (rebuilt unless they already were).
    let p = legacy::check_produced(&set, 1 << 24).unwrap();
    let stored = match legacy::stored_form(&set, &p, base, TimestampType::CreateTime, NOW, 1 << 24).unwrap().0 {
        legacy::Stored::Prefix { prefix, len } => [&prefix[..len], &set[len..]].concat(),
        legacy::Stored::Rebuilt(v) => {
            assert_eq!(magic, 0, "only magic-0 wrappers are rebuilt on a CreateTime topic");
            v
        }
    };
    if magic == 1 {
        assert_eq!(stored[8..], set[8..], "a magic-1 wrapper keeps its bytes");
    }
    (set, vec![(base, stored)])
}

impl Model {
    /// The model after cutting the suffix at `offset`: the log ends where the batch holding
    /// it begins (batches are atomic), and a log start past that end comes down to it.
    fn truncated(&self, offset: i64) -> Model {
        if offset >= self.next_offset {
            return Model { batches: self.batches.clone(), next_offset: self.next_offset, start: self.start };
        }
        let i = self.index_of(offset);
        let end = self.batches[i].0;
        Model { batches: self.batches[..i].to_vec(), next_offset: end, start: self.start.min(end) }
    }

    /// The model after a restart at `offset`: empty, starting there.
    fn restarted(offset: i64) -> Model {
        Model { batches: Vec::new(), next_offset: offset, start: offset }
    }

    /// An offset to start again at: below, at or past the log end.
    fn restart_point(&self, pick: u16) -> i64 {
        (self.next_offset + pick as i64 % 40 - 20).max(0)
    }

    /// An offset to truncate at, picked between the log start and the log end.
    fn truncation_point(&self, log: &Log<MemDisk>, pick: u16) -> i64 {
        let start = log.log_start_offset();
        start + (pick as i64 % (self.next_offset - start + 1))
    }

    /// Index of the batch holding `offset`.
    fn index_of(&self, offset: i64) -> usize {
        self.batches.partition_point(|(_, b)| info(b).last_offset < offset)
    }

    /// The offset index a segment holding `batches` must have: an entry for a batch once
    /// `interval` bytes have passed since the last entry (computed here independently).
    fn expected_index(batches: &[&(i64, Vec<u8>)], seg_base: i64, interval: u64) -> Vec<(u32, u32)> {
        let mut out = Vec::new();
        let (mut pos, mut since) = (0u64, 0u64);
        for (_, b) in batches {
            if since >= interval {
                out.push(((info(b).index_offset() - seg_base) as u32, pos as u32));
                since = 0;
            }
            since += b.len() as u64;
            pos += b.len() as u64;
        }
        out
    }
}

/// The log start the model gives: the start DeleteRecords set, or the first batch's base.
fn check_start(m: &Model) -> i64 {
    m.start.max(m.batches.first().map_or(m.next_offset, |b| b.0))
}

async fn check_everything(log: &mut Log<MemDisk>, m: &Model) {
    assert_eq!(log.log_end_offset(), m.next_offset, "log end offset");
    assert!(log.durable_offset() <= log.log_end_offset());
    let start = log.log_start_offset();
    assert_eq!(start, check_start(m), "log start offset");
    // Read everything back, batch run by batch run, from the start (the first batch may begin
    // before it when DeleteRecords cut inside a batch).
    let mut at = start;
    let mut got = Vec::new();
    while at < m.next_offset {
        let bytes = log.read(at, 1 << 20, ReadUpTo::LogEnd).await.expect("read");
        let bs = stored_batches(&bytes);
        assert!(!bs.is_empty(), "no progress reading at {at}");
        for (h, b) in bs {
            got.push(b);
            at = h.next_offset();
        }
    }
    let want: Vec<&Vec<u8>> = m.batches.iter().filter(|(_, b)| info(b).next_offset() > start).map(|(_, b)| b).collect();
    assert!(got.iter().eq(want.iter().copied()), "log contents differ from the model");
    if m.start > 0 {
        assert!(
            matches!(log.read(start - 1, 1, ReadUpTo::LogEnd).await, Err(StorageError::OffsetOutOfRange { .. })),
            "a read below the log start {start}"
        );
    }
}

fn reopen(disk: &MemDisk, dir: &Path, config: &LogConfig, cache: &Cache) -> Log<MemDisk> {
    let mut log = block_on(Log::open(disk.clone(), dir, config.clone())).expect("reopen").0;
    if let Some(cache) = cache {
        log.attach_cache(cache.register());
    }
    log
}

type Cache = Option<std::rc::Rc<BatchCache<MemBuf>>>;

/// No batch cache, or one of `kib` KiB: small ones evict all the time (and take no entry over
/// an eighth of the budget), large ones keep everything.
fn cache(kib: u32) -> Cache {
    (kib > 0).then(|| BatchCache::new(Budget::new(kib as u64 * 1024), kib as usize * 1024))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 160, ..ProptestConfig::default() })]

    #[test]
    fn log_matches_model(
        config in config(),
        ops in proptest::collection::vec(op(), 1..60),
        cache_kib in prop_oneof![Just(0u32), Just(64), Just(1024), Just(65536)],
    ) {
        // Reads go through the batch cache when there is one: durable chunks and disk reads
        // go in, and every read below must still match the model.
        let cache = cache(cache_kib);
        let disk = MemDisk::new();
        let dir = Path::new("/data/t-0");
        let mut log = reopen(&disk, dir, &config, &cache);
        let mut m = Model { batches: Vec::new(), next_offset: 0, start: 0 };
        let mut tag = 0u64;
        for op in ops {
            match op {
                Op::Append(specs) => {
                    let mut req = Vec::new();
                    let mut next = m.next_offset;
                    let mut stored = Vec::new();
                    for (kind, n, len) in specs {
                        tag += 1;
                        if kind < 4 {
                            let b = tagged_batch(tag, n as usize, len as usize, tag as i64 * 10);
                            req.extend_from_slice(&b);
                            stored.push((next, with_base(&b, next)));
                        } else {
                            let (set, s) = legacy_set(kind, tag, n as usize, len as usize, next);
                            req.extend_from_slice(&set);
                            stored.extend(s);
                        }
                        next += n as i64;
                    }
                    let (info, _) = log.append(&req, NOW).expect("append");
                    prop_assert_eq!(info.base_offset, m.next_offset);
                    m.batches.extend(stored);
                    m.next_offset = next;
                    prop_assert_eq!(info.last_offset, m.next_offset - 1);
                }
                Op::Flush => {
                    block_on(log.flush_all()).expect("flush");
                    prop_assert_eq!(log.durable_offset(), m.next_offset);
                }
                Op::Read { pick, max_bytes, durable } => {
                    let start = log.log_start_offset();
                    let span = (m.next_offset - start + 1) as u64;
                    let offset = start + (pick as u64 % span) as i64;
                    let upto = if durable { ReadUpTo::Durable } else { ReadUpTo::LogEnd };
                    let limit = if durable { log.durable_offset() } else { m.next_offset };
                    let bytes = block_on(log.read(offset, max_bytes as usize, upto)).expect("read");
                    let got = stored_batches(&bytes);
                    if offset >= limit {
                        prop_assert!(got.is_empty());
                    } else {
                        prop_assert!(!got.is_empty(), "empty read at {} below {}", offset, limit);
                        // The first batch returned holds `offset`: the model's batch at it.
                        let i = m.index_of(offset);
                        prop_assert!(m.batches[i].0 <= offset && got[0].0.last_offset >= offset);
                        for (k, (h, b)) in got.iter().enumerate() {
                            prop_assert_eq!(b, &m.batches[i + k].1);
                            prop_assert!(h.last_offset < limit, "read past the limit");
                        }
                        if got.len() > 1 {
                            prop_assert!(bytes.len() <= max_bytes as usize, "read over max_bytes");
                        }
                    }
                }
                Op::Roll => log.roll(NOW),
                Op::Retain { bytes } => {
                    let mut c = log.config().clone();
                    c.retention_bytes = Some(bytes as u64);
                    log.set_config(c);
                    let before = log.size_bytes();
                    let removed = log.take_expired_by_size();
                    for base in &removed {
                        block_on(tidemark::storage::log::delete_segment_files(&disk, dir, *base)).unwrap();
                    }
                    let mut c = log.config().clone();
                    c.retention_bytes = None;
                    log.set_config(c);
                    let first = log.segment_bases()[0];
                    prop_assert!(removed.is_empty() || before - log.size_bytes() <= before.saturating_sub(bytes as u64), "deleted more than retention asks");
                    prop_assert!(m.batches.iter().all(|(b, bytes)| *b >= first || info(bytes).next_offset() <= first), "retention cut inside a batch");
                    let dropped = m.batches.iter().take_while(|(b, _)| *b < first).count();
                    m.batches.drain(..dropped);
                }
                Op::FailingFlush { op, fault } => {
                    // spec: T3.5 — a failed flush acknowledges nothing it did not make durable:
                    // what the log reports durable survives a power cut right after; and once
                    // the disk is healed (space back) the next flush succeeds.
                    let kind = [FaultOp::Write, FaultOp::Sync, FaultOp::Allocate][op as usize % 3];
                    let f = [Fault::Eio, Fault::NoSpace, Fault::ShortWrite][fault as usize % 3];
                    let before = log.durable_offset();
                    disk.inject(kind, f, 1);
                    let r = block_on(log.flush_all());
                    if r.is_err() && log.has_unflushed() {
                        // While a failed flush has data to retry, appends are refused and
                        // change nothing (KAFKA_STORAGE_ERROR on the wire).
                        let end = log.log_end_offset();
                        let refused = log.append(&tagged_batch(u64::MAX, 1, 0, 0), NOW);
                        prop_assert!(matches!(refused, Err(StorageError::WritesSuspended(_))), "append after a failed flush: {:?}", refused.map(|r| r.0.base_offset));
                        prop_assert_eq!(log.log_end_offset(), end);
                    }
                    disk.heal();
                    prop_assert!(log.durable_offset() >= before);
                    if r.is_err() && fault % 2 == 0 {
                        let durable = log.durable_offset();
                        drop(log);
                        disk.crash(CrashMode::DropUnsynced);
                        log = reopen(&disk, dir, &config, &cache);
                        prop_assert!(log.log_end_offset() >= durable, "durable data lost after a failed flush");
                        let keep = m.batches.iter().take_while(|(b, _)| *b < log.log_end_offset()).count();
                        m.batches.truncate(keep);
                        m.next_offset = log.log_end_offset();
                    }
                    block_on(log.flush_all()).expect("flush after heal");
                    prop_assert_eq!(log.durable_offset(), m.next_offset);
                }
                Op::DeleteRecords { pick } => {
                    // KIP-107: between the log start and the high watermark; -1 is the high
                    // watermark; past it is refused and changes nothing.
                    let (start, hw) = (log.log_start_offset(), log.durable_offset());
                    let offset = match pick % 8 {
                        0 => -1,
                        1 => hw + 1,
                        _ => start + (pick as i64 % (hw - start + 1)),
                    };
                    let r = block_on(log.delete_records(offset, NOW));
                    if offset > hw {
                        prop_assert!(matches!(r, Err(StorageError::OffsetOutOfRange { .. })), "delete past the high watermark");
                    } else {
                        let target = if offset == -1 { hw } else { offset };
                        prop_assert_eq!(r.expect("delete records"), target.max(start));
                        m.start = m.start.max(target);
                        // Whole segments below the start are gone; never part of a batch.
                        let first = log.segment_bases()[0];
                        prop_assert!(m.batches.iter().all(|(b, bytes)| *b >= first || info(bytes).next_offset() <= first), "a deletion cut inside a batch");
                        let dropped = m.batches.iter().take_while(|(b, _)| *b < first).count();
                        m.batches.drain(..dropped);
                    }
                }
                Op::Truncate { pick } => {
                    // Below the log start: refused, nothing changes.
                    let start = log.log_start_offset();
                    if pick % 8 == 0 && start > 0 {
                        let (end, durable) = (log.log_end_offset(), log.durable_offset());
                        let refused = block_on(log.truncate_to(start - 1));
                        prop_assert!(matches!(refused, Err(StorageError::OffsetOutOfRange { .. })), "truncation below the log start");
                        prop_assert_eq!((log.log_end_offset(), log.durable_offset()), (end, durable));
                    } else {
                        let offset = m.truncation_point(&log, pick);
                        let report = block_on(log.truncate_to(offset)).expect("truncate");
                        let cut = offset < m.next_offset;
                        m = m.truncated(offset);
                        prop_assert_eq!(report.suffix_truncated_to, cut.then_some(m.next_offset));
                        if cut {
                            prop_assert_eq!(log.durable_offset(), m.next_offset, "everything left is durable");
                        }
                        prop_assert_eq!(report.truncated_bytes, 0, "a cut reported as a torn tail");
                    }
                }
                Op::KillInTruncate { pick, fuse, mode, seed, restart } => {
                    // The machine dies at any step of a truncation (or a restart), then loses
                    // power: the log is then either untouched or cut exactly (the intent file
                    // decides), never anything between, and appends go on after it.
                    block_on(log.flush_all()).expect("flush");
                    let (offset, cut) = if restart {
                        let offset = m.restart_point(pick);
                        (offset, Model::restarted(offset))
                    } else {
                        let offset = m.truncation_point(&log, pick);
                        (offset, m.truncated(offset))
                    };
                    disk.fail_after(fuse as u64);
                    let _ = if restart { block_on(log.restart_at(offset)) } else { block_on(log.truncate_to(offset)) };
                    disk.heal();
                    drop(log);
                    let mode = match mode { 0 => CrashMode::DropUnsynced, 1 => CrashMode::KeepUnsynced, _ => CrashMode::Torn { seed } };
                    disk.crash(mode);
                    log = reopen(&disk, dir, &config, &cache);
                    let untouched = log.log_end_offset() == m.next_offset && log.log_start_offset() == check_start(&m);
                    let done = log.log_end_offset() == cut.next_offset && log.log_start_offset() == check_start(&cut);
                    prop_assert!(untouched || done, "a kill left neither the old log nor the cut one");
                    if !untouched {
                        m = cut;
                    }
                }
                Op::Restart { pick } => {
                    let offset = m.restart_point(pick);
                    let report = block_on(log.restart_at(offset)).expect("restart");
                    prop_assert_eq!(report.suffix_truncated_to, Some(offset));
                    m = Model::restarted(offset);
                }
                Op::CleanReopen => {
                    block_on(log.close()).expect("close");
                    log = reopen(&disk, dir, &config, &cache);
                }
                Op::Crash { mode, seed, partial_flush } => {
                    // 1: a flush prepared but whose writes were never issued;
                    // 2: a flush whose writes and sync ran but that never completed;
                    // 3: a flush whose writes landed but whose fdatasync failed (torn by the
                    //    crash mode).
                    if partial_flush > 0 {
                        if let Some(w) = log.prepare_flush() {
                            if partial_flush == 3 {
                                disk.inject(FaultOp::Sync, Fault::Eio, 1);
                            }
                            if partial_flush >= 2 {
                                let _ = block_on(w.run());
                            }
                            disk.heal();
                        }
                    }
                    let durable = log.durable_offset();
                    let end = m.next_offset;
                    let mode = match mode { 0 => CrashMode::DropUnsynced, 1 => CrashMode::KeepUnsynced, _ => CrashMode::Torn { seed } };
                    drop(log);
                    disk.crash(mode);
                    log = reopen(&disk, dir, &config, &cache);
                    let new_end = log.log_end_offset();
                    prop_assert!(new_end >= durable, "lost synced data: end {} < durable {}", new_end, durable);
                    prop_assert!(new_end <= end);
                    let keep = m.batches.iter().take_while(|(b, _)| *b < new_end).count();
                    m.batches.truncate(keep);
                    m.next_offset = new_end;
                    if let Some((_, bytes)) = m.batches.last() {
                        prop_assert_eq!(info(bytes).next_offset(), new_end, "recovery cut inside a batch");
                    }
                }
            }
            block_on(check_everything(&mut log, &m));
        }
        // spec: T8.4 — every segment's offset index (loaded, resumed or rebuilt) equals the
        // one the append rule gives for its batches.
        block_on(log.close()).expect("close");
        let mut log = reopen(&disk, dir, &config, &cache);
        let bases = log.segment_bases();
        let start = log.log_start_offset();
        for (i, &base) in bases.iter().enumerate() {
            let next = bases.get(i + 1).copied().unwrap_or(i64::MAX);
            if next <= start {
                continue; // wholly below the log start (DeleteRecords): not readable
            }
            let _ = block_on(log.read(base.max(start), 1, ReadUpTo::LogEnd));
            let in_seg: Vec<_> = m.batches.iter().filter(|(b, _)| *b >= base && *b < next).collect();
            let entries = log.index_entries(base).expect("index loaded by the read");
            prop_assert_eq!(entries, Model::expected_index(&in_seg, base, config.index_interval_bytes), "index of segment {}", base);
        }
    }
}

/// `tidemark.max.unflushed.bytes` bounds the memory a partition holds for appended data not yet
/// durable: with `flush.messages` unlimited, appends return without waiting until the unflushed
/// bytes pass the bound; the append that passes it must wait for its flush, and after the flush
/// the count starts again.
#[test]
fn unflushed_bytes_bound_makes_the_append_wait() {
    use tidemark::storage::log::FlushDemand;
    let config = LogConfig { flush_messages: u64::MAX, max_unflushed_bytes: 8192, ..LogConfig::default() };
    let disk = MemDisk::new();
    let mut log = reopen(&disk, Path::new("/data/u-0"), &config, &None);
    let batch = tagged_batch(1, 1, 1000, NOW);
    let mut waited_at = None;
    for i in 0..20 {
        let (_, demand) = log.append(&batch, NOW).expect("append");
        assert!(log.unflushed_bytes() <= 8192 + batch.len() as u64, "append {i} passed the bound by more than itself");
        if demand == FlushDemand::Wait {
            waited_at = Some(log.unflushed_bytes());
            break;
        }
    }
    let unflushed = waited_at.expect("no append waited with 20 KB unflushed and a bound of 8 KiB");
    assert!(unflushed > 8192, "waited at {unflushed} bytes, before the bound");
    block_on(log.flush_all()).expect("flush");
    assert_eq!(log.unflushed_bytes(), 0);
    assert_ne!(log.append(&batch, NOW).expect("append").1, FlushDemand::Wait);
}

/// The batch cache serves a reader at the tail: what a flush just made durable is read from the
/// cache (no disk read), data the cache never held is read from disk once and then from the
/// cache, retention forgets a deleted segment's bytes, and a dropped log forgets all of its own.
#[test]
fn tailing_reads_come_from_the_batch_cache() {
    let config = LogConfig { segment_bytes: 64 << 10, ..LogConfig::default() };
    let disk = MemDisk::new();
    let dir = Path::new("/data/bc-0");
    let cache = cache(64 << 10).expect("a cache");
    let cached = Some(cache.clone());
    let mut log = reopen(&disk, dir, &config, &cached);
    let mut batches = Vec::new();
    for tag in 0..40u64 {
        let b = tagged_batch(tag + 1, 2, 1000, NOW);
        log.append(&b, NOW).expect("append");
        block_on(log.flush_all()).expect("flush");
        batches.push(with_base(&b, tag as i64 * 2));
        // The tail dropped its chunks once durable (but for the partial last page, which it
        // keeps): a reader at the tail never reads the disk.
        let misses = cache.stats().misses;
        let got = block_on(log.read(tag as i64 * 2, 1 << 20, ReadUpTo::Durable)).expect("read");
        assert_eq!(stored_batches(&got)[0].1, *batches.last().unwrap(), "batch {tag}");
        assert_eq!(cache.stats().misses, misses, "batch {tag} read from disk");
    }
    assert!(cache.stats().hits >= 10, "few batches came from the cache: {:?}", cache.stats());
    assert!(log.segment_count() > 1, "the test wants rolled segments");
    // Reopened: a new log, whose first read of old data goes to disk and the next to the cache.
    block_on(log.close()).expect("close");
    assert_eq!(cache.stats().entries, 0, "a dropped log's entries are forgotten");
    let mut log = reopen(&disk, dir, &config, &cached);
    for expect_hit in [false, true] {
        let before = cache.stats();
        let got = block_on(log.read(0, 1 << 20, ReadUpTo::Durable)).expect("read");
        assert_eq!(stored_batches(&got)[0].1, batches[0]);
        assert_eq!(cache.stats().hits - before.hits, expect_hit as u64);
        assert_eq!(cache.stats().misses - before.misses, !expect_hit as u64);
    }
    // Retention deletes the sealed segments: their bytes leave the cache with them.
    assert!(cache.stats().entries > 0);
    let mut c = config.clone();
    c.retention_bytes = Some(1);
    log.set_config(c);
    assert_eq!(log.take_expired_by_size()[0], 0);
    assert_eq!(cache.stats().entries, 0, "the deleted segment's entries are still cached");
}
