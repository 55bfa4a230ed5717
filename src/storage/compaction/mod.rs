//! Log compaction's decisions, as pure code: no I/O, no clock of its own. Kafka's
//! `LogCleaner` semantics (docs/architecture.md, "Log compaction"), batch by batch.
//!
//! A cleaning pass over a partition has two steps, and this module decides both:
//! 1. **The offset map** ([`OffsetMap`], [`map_batch`]): over the dirty part of the cleanable
//!    range, each key's last offset. Keys are kept whole (no hash collisions to reason about);
//!    the map has a byte budget (`log.cleaner.dedupe.buffer.size`) and grows a batch at a
//!    time: a pass ends at the first batch that would not fit (inside a segment if need be, as
//!    Kafka's does), and the next pass's map starts there.
//! 2. **What stays** ([`clean_batch`]), over the whole cleanable range, oldest first:
//!    - a record stays when no later record of its key is in the map; a record without a key
//!      goes (a compacted topic refuses them at produce, KIP-467; older ones are dropped as
//!      Kafka's cleaner drops them);
//!    - a tombstone (null value) stays until its batch's delete horizon passes. The horizon is
//!      stamped (KIP-534: attribute bit 6, firstTimestamp) by the first pass that keeps the
//!      tombstone: `now + delete.retention.ms`, so it survives restarts;
//!    - records of aborted transactions go (the aborted list, [`TxnTracker`]);
//!    - a transaction marker stays while its transaction still has data in the log (seen in
//!      this pass); then it gets a horizon and goes once it passes;
//!    - a batch that loses records is rewritten: same base offset, last offset delta,
//!      producer id, epoch and base sequence, partition leader epoch and codec; the records
//!      kept re-encoded with their offset deltas (so offsets never change: gaps are allowed)
//!      and timestamps; maxTimestamp recomputed (CreateTime) from what remains; CRC new;
//!    - a batch that loses every record goes, except the last batch of a producer the
//!      partition still knows: it stays empty (header only) so the producer's next sequence
//!      still follows (Kafka's rule);
//!    - the batch a cleaned group's last time-index entry names ([`Protect`]: the one holding
//!      the group's largest timestamp) keeps its maxTimestamp, and stays (empty if it loses
//!      every record). Later segments' time indexes were built after that entry (T5.2
//!      compares with the log's last entry): were it lowered, a rebuild or recovery of the
//!      cleaned segment would give a smaller last entry, later entries would rest on a
//!      timestamp the log no longer shows (breaking T5.1) and retention by time would misjudge
//!      later segments (T7.2). Keeping a superseded *record* instead would be wrong: once its
//!      key's tombstone expired, the old value would come back. A batch's maxTimestamp at
//!      least its records' is what Kafka's own retained empty batches carry; lookups by time
//!      scan records, so they answer from what remains. A segment without timestamps whose
//!      entry is its mtime (SPEC T5.5, naming its last offset) is cleaned alone (`cleaner`),
//!      and its last batch is the protected one: it stays, so the rebuilt segment is still
//!      without timestamps and ends at the same offset, and gets the same entry back.
//!
//! Legacy message sets (magic 0 and 1, from clients before Kafka 0.11) are cleaned by the
//! same rules, as Kafka's cleaner cleans them ([`clean_legacy`]): their keys join the map; a
//! plain message stays or goes whole; a wrapper (compressed message set) that loses inner
//! messages is rebuilt around those kept (same magic, codec and wrapper key; offsets kept,
//! so its first and last offsets may move inward, gaps allowed). Legacy messages have no
//! field for a delete horizon: as Kafka's cleaner does, a pass takes the last clean segment's
//! mtime minus `delete.retention.ms` as their horizon, and a legacy tombstone goes when its
//! segment was last written at or before it (file mtimes, which a cleaned segment keeps from
//! its originals). So a tombstone survives the pass that first cleans it: one that was dirty
//! is newer than the clean part, and goes only once data written `delete.retention.ms`
//! after it has been cleaned. A legacy
//! entry under [`Protect`] that would lose every message becomes an empty v2 batch over its
//! offsets that keeps its timestamp (what an empty batch of Kafka's is; readers see no
//! record, old readers get nothing from its down-conversion).
//!
//! Callers: `storage::cleaner` (the pass's I/O) and tests.

use crate::storage::format::batch::{
    encode_record, records_section, BatchHeader, Record, Records, TimestampType, ATTR_COMPRESSION_MASK,
    ATTR_DELETE_HORIZON, HEADER_LEN, LOG_OVERHEAD, MAGIC_V2, OFF_ATTRIBUTES, OFF_FIRST_TIMESTAMP, OFF_LENGTH,
    OFF_MAX_TIMESTAMP, OFF_RECORD_COUNT,
};
use crate::storage::format::legacy::{self, LegacyRecord, SetRecord, MAGIC_V0};
use crate::storage::format::marker::Marker;
use crate::storage::format::txn_index::AbortedTxn;
use crate::storage::format::{compression, FormatError};
use std::collections::{HashMap, HashSet, VecDeque};

/// Memory a map entry costs besides its key bytes (the hash table's slot, the offset, the
/// key's allocation): what the dedupe budget counts.
pub const MAP_ENTRY_OVERHEAD: usize = 48;

/// Each key's last offset in the dirty part of the cleanable range.
#[derive(Debug, Default)]
pub struct OffsetMap {
    keys: HashMap<Vec<u8>, i64>,
    bytes: usize,
    budget: usize,
}

impl OffsetMap {
    pub fn new(budget: usize) -> OffsetMap {
        OffsetMap { keys: HashMap::new(), bytes: 0, budget }
    }

    /// The last offset of `key` the map saw.
    pub fn get(&self, key: &[u8]) -> Option<i64> {
        self.keys.get(key).copied()
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Memory the map holds, as the budget counts it.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Take the keys of one batch ([`map_batch`]), unless they would take the map past its
    /// budget while it holds others (a pass maps at least one batch). Returns whether they
    /// were taken (all or none).
    pub fn add(&mut self, keys: Vec<(Vec<u8>, i64)>) -> bool {
        let mut fresh: Vec<&[u8]> =
            keys.iter().map(|(k, _)| k.as_slice()).filter(|k| !self.keys.contains_key(*k)).collect();
        fresh.sort_unstable();
        fresh.dedup();
        let added: usize = fresh.iter().map(|k| k.len() + MAP_ENTRY_OVERHEAD).sum();
        if !self.keys.is_empty() && added > 0 && self.bytes + added > self.budget {
            return false;
        }
        self.bytes += added;
        for (k, o) in keys {
            let e = self.keys.entry(k).or_insert(o);
            *e = (*e).max(o);
        }
        true
    }
}

/// The keys of one stored batch with their offsets, for the offset map: a data batch (v2 or
/// legacy) that no aborted transaction holds (control batches give none).
pub fn map_batch(
    batch: &[u8],
    txns: &mut TxnTracker,
    decompress_limit: usize,
) -> Result<Vec<(Vec<u8>, i64)>, FormatError> {
    let mut out = Vec::new();
    if !is_v2(batch) {
        let mut scratch = Vec::new();
        for r in legacy::records(batch, &mut scratch, decompress_limit)? {
            if let Some(k) = r.key {
                out.push((k.to_vec(), r.offset));
            }
        }
        return Ok(out);
    }
    let h = BatchHeader::parse(batch)?;
    if h.is_control() {
        // A marker ends its transaction: the producer's later batches are not aborted ones.
        txns.on_control(&h, Marker::read(&h, batch)?);
        return Ok(out);
    }
    if txns.on_data(&h) {
        return Ok(out);
    }
    let records = records_section(&h, batch, decompress_limit)?;
    for r in Records::new(&records, h.record_count) {
        let r = r?;
        if let Some(k) = r.key {
            out.push((k.to_vec(), h.base_offset + r.offset_delta as i64));
        }
    }
    Ok(out)
}

/// Which batches belong to aborted transactions, and which markers' transactions still hold
/// data, as a pass walks batches in offset order (Kafka's `CleanedTransactionMetadata`).
#[derive(Debug, Default)]
pub struct TxnTracker {
    /// Aborted transactions not begun yet, by first offset.
    pending: VecDeque<AbortedTxn>,
    /// Begun aborted transactions by producer id, and whether this pass saw data of theirs.
    aborted: HashMap<i64, (AbortedTxn, bool)>,
    /// Producers whose (not aborted) transactional data this pass saw since their last marker.
    committed: HashSet<i64>,
    /// Aborted transactions whose marker stays with data seen: the cleaned segments' `.txnindex`.
    pub kept: Vec<AbortedTxn>,
}

impl TxnTracker {
    /// A tracker over the aborted transactions that may overlap the range walked.
    pub fn new(mut aborted: Vec<AbortedTxn>) -> TxnTracker {
        aborted.sort_by_key(|t| t.first_offset);
        TxnTracker { pending: aborted.into(), ..TxnTracker::default() }
    }

    fn begin_up_to(&mut self, last_offset: i64) {
        while self.pending.front().is_some_and(|t| t.first_offset <= last_offset) {
            let t = self.pending.pop_front().expect("checked");
            self.aborted.insert(t.producer_id, (t, false));
        }
    }

    /// A data batch: true when an aborted transaction holds it (its records go).
    pub fn on_data(&mut self, h: &BatchHeader) -> bool {
        self.begin_up_to(h.last_offset());
        if !h.is_transactional() {
            return false;
        }
        match self.aborted.get_mut(&h.producer_id) {
            Some(entry) => {
                entry.1 = true;
                true
            }
            None => {
                self.committed.insert(h.producer_id);
                false
            }
        }
    }

    /// A control batch (`marker`: what it holds, if a transaction marker): true when it may go
    /// once its delete horizon passes (its transaction has no data left in the log).
    pub fn on_control(&mut self, h: &BatchHeader, marker: Option<Marker>) -> bool {
        self.begin_up_to(h.last_offset());
        match marker {
            None => true,
            Some(m) if !m.commit => match self.aborted.remove(&h.producer_id) {
                Some((t, true)) => {
                    self.kept.push(t);
                    false
                }
                _ => true,
            },
            Some(_) => !self.committed.remove(&h.producer_id),
        }
    }
}

/// The batch of a group whose maxTimestamp stays, and which stays (empty if need be): the one
/// holding `offset`, named by the group's last time-index entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Protect {
    pub offset: i64,
}

impl Protect {
    fn names(protect: Option<Protect>, first: i64, last: i64) -> bool {
        protect.is_some_and(|p| (first..=last).contains(&p.offset))
    }
}

/// The settings and the moment of one pass, and the segment being cleaned.
#[derive(Debug, Clone, Copy)]
pub struct CleanRules {
    pub now: i64,
    /// `delete.retention.ms`.
    pub delete_retention_ms: i64,
    pub decompress_limit: usize,
    /// Legacy tombstones in the segment being cleaned may go: it was last written at or
    /// before the pass's legacy delete horizon (Kafka's: the last clean segment's mtime minus
    /// `delete.retention.ms`; see [`legacy_tombstones_expired`]).
    pub legacy_tombstones_expired: bool,
}

impl CleanRules {
    fn new_horizon(&self) -> i64 {
        self.now.saturating_add(self.delete_retention_ms)
    }
}

/// Kafka's rule for legacy tombstones (which have no horizon field): with `last_clean_mtime`
/// the mtime of the last segment below the pass's first dirty offset (`None`: no clean part
/// yet, nothing goes), those of a segment last written at `segment_mtime` may go when it is at
/// or before that mtime minus `delete.retention.ms`.
pub fn legacy_tombstones_expired(segment_mtime: i64, last_clean_mtime: Option<i64>, delete_retention_ms: i64) -> bool {
    last_clean_mtime.is_some_and(|m| segment_mtime <= m.saturating_sub(delete_retention_ms))
}

fn is_v2(batch: &[u8]) -> bool {
    batch.get(crate::storage::format::batch::OFF_MAGIC).map(|&m| m as i8) == Some(MAGIC_V2)
}

/// What happens to one batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Copied as it is.
    Keep,
    /// Gone.
    Drop,
    /// Replaced by these bytes (same offsets).
    Rewrite(Vec<u8>),
}

/// What a pass did, summed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CleanStats {
    pub batches_read: u64,
    pub records_read: u64,
    pub records_kept: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub tombstones_removed: u64,
    pub aborted_records_removed: u64,
    pub markers_removed: u64,
}

/// Decide one stored batch's fate. `map`: the pass's offset map; `last_of_producer`: this
/// batch is the last data batch of a producer the partition still knows.
/// `protect`: the group's batch that keeps its maxTimestamp ([`Protect`]).
pub fn clean_batch(
    batch: &[u8],
    map: &OffsetMap,
    txns: &mut TxnTracker,
    last_of_producer: impl Fn(i64, i64) -> bool,
    protect: Option<Protect>,
    rules: &CleanRules,
    stats: &mut CleanStats,
) -> Result<Outcome, FormatError> {
    stats.batches_read += 1;
    stats.bytes_read += batch.len() as u64;
    let outcome = if !is_v2(batch) {
        clean_legacy(batch, map, protect, rules, stats)?
    } else {
        clean_v2(batch, map, txns, last_of_producer, protect, rules, stats)?
    };
    stats.bytes_written += match &outcome {
        Outcome::Keep => batch.len() as u64,
        Outcome::Drop => 0,
        Outcome::Rewrite(b) => b.len() as u64,
    };
    Ok(outcome)
}

fn clean_v2(
    batch: &[u8],
    map: &OffsetMap,
    txns: &mut TxnTracker,
    last_of_producer: impl Fn(i64, i64) -> bool,
    protect: Option<Protect>,
    rules: &CleanRules,
    stats: &mut CleanStats,
) -> Result<Outcome, FormatError> {
    let h = BatchHeader::parse(batch)?;
    let protect = Protect::names(protect, h.base_offset, h.last_offset());
    if h.is_control() {
        let outcome = clean_control(&h, batch, txns, rules, stats)?;
        Ok(if protect && outcome == Outcome::Drop { Outcome::Keep } else { outcome })
    } else {
        let aborted = txns.on_data(&h);
        let keep_empty = h.producer_id >= 0 && last_of_producer(h.producer_id, h.last_offset());
        clean_data(&h, batch, map, Kept { aborted, keep_empty, protect }, rules, stats)
    }
}

/// Whether the record at `offset` with `key` is its key's latest: no later record of the key
/// is in the map (a record without a key never is: it goes).
fn latest(map: &OffsetMap, key: Option<&[u8]>, offset: i64) -> bool {
    key.is_some_and(|k| map.get(k).is_none_or(|last| offset >= last))
}

/// A legacy entry (a plain message or a wrapper): the records that stay, by the rules of v2
/// records, legacy tombstones judged by their segment's mtime ([`CleanRules`]).
fn clean_legacy(
    batch: &[u8],
    map: &OffsetMap,
    protect: Option<Protect>,
    rules: &CleanRules,
    stats: &mut CleanStats,
) -> Result<Outcome, FormatError> {
    let m = legacy::check(batch)?;
    let h = m.header;
    let mut scratch = Vec::new();
    let recs = legacy::records(batch, &mut scratch, rules.decompress_limit)?;
    let (first, last) = (recs[0].offset, recs[recs.len() - 1].offset);
    if last != h.offset || recs.windows(2).any(|w| w[0].offset >= w[1].offset) {
        return Err(FormatError::BadRecords("wrapper offsets are out of order"));
    }
    let expired = rules.legacy_tombstones_expired;
    let mut kept: Vec<&LegacyRecord<'_>> = Vec::with_capacity(recs.len());
    for r in &recs {
        if !latest(map, r.key, r.offset) {
            continue;
        }
        if r.value.is_none() && expired {
            stats.tombstones_removed += 1;
            continue;
        }
        kept.push(r);
    }
    stats.records_read += recs.len() as u64;
    stats.records_kept += kept.len() as u64;
    if kept.len() == recs.len() {
        return Ok(Outcome::Keep);
    }
    let protect = Protect::names(protect, first, last);
    if kept.is_empty() {
        if !protect {
            return Ok(Outcome::Drop);
        }
        return Ok(Outcome::Rewrite(empty_v2(first, last, h.timestamp, h.timestamp_type())?));
    }
    // A wrapper (a plain message holds one record: kept whole or not at all), rebuilt. Its
    // timestamp: the append time, or under CreateTime the largest kept (T3.3), or, protected,
    // its own. Inner messages carry the timestamps their readers saw.
    let t = h.timestamp_type();
    let wrapper_ts = match (h.magic, t) {
        (MAGIC_V0, _) => -1,
        (_, TimestampType::LogAppendTime) => h.timestamp,
        _ if protect => h.timestamp,
        _ => kept.iter().map(|r| r.timestamp).max().unwrap_or(-1),
    };
    let set: Vec<SetRecord<'_>> = kept
        .iter()
        .map(|r| SetRecord { offset: r.offset, timestamp: r.timestamp, key: r.key, value: r.value })
        .collect();
    let mut out = Vec::with_capacity(batch.len());
    legacy::write_set(&mut out, h.magic, h.compression()?, t, wrapper_ts, m.key, &set);
    Ok(Outcome::Rewrite(out))
}

/// An empty v2 batch over offsets `first..=last` with maxTimestamp `max_ts` (a protected
/// legacy entry that lost every message): no producer, no records.
fn empty_v2(first: i64, last: i64, max_ts: i64, t: TimestampType) -> Result<Vec<u8>, FormatError> {
    let attributes = crate::storage::format::batch::with_timestamp_type(0, t);
    // A stored entry spans what one produce assigned; a damaged one may not.
    let delta = last
        .checked_sub(first)
        .and_then(|d| i32::try_from(d).ok())
        .ok_or(FormatError::BadRecords("a legacy entry spans more offsets than a batch holds"))?;
    let mut b = Vec::with_capacity(HEADER_LEN);
    b.extend_from_slice(&first.to_be_bytes());
    b.extend_from_slice(&((HEADER_LEN - LOG_OVERHEAD) as i32).to_be_bytes());
    b.extend_from_slice(&(-1i32).to_be_bytes()); // partition leader epoch: none
    b.push(MAGIC_V2 as u8);
    b.extend_from_slice(&0u32.to_be_bytes()); // CRC, below
    b.extend_from_slice(&attributes.to_be_bytes());
    b.extend_from_slice(&delta.to_be_bytes());
    b.extend_from_slice(&(-1i64).to_be_bytes()); // firstTimestamp: no record, no horizon
    b.extend_from_slice(&max_ts.to_be_bytes());
    b.extend_from_slice(&(-1i64).to_be_bytes()); // producer id
    b.extend_from_slice(&(-1i16).to_be_bytes()); // producer epoch
    b.extend_from_slice(&(-1i32).to_be_bytes()); // base sequence
    b.extend_from_slice(&0i32.to_be_bytes()); // records
    crate::storage::format::batch::rewrite_crc(&mut b);
    Ok(b)
}

fn clean_control(
    h: &BatchHeader,
    batch: &[u8],
    txns: &mut TxnTracker,
    rules: &CleanRules,
    stats: &mut CleanStats,
) -> Result<Outcome, FormatError> {
    stats.records_read += h.record_count.max(0) as u64;
    let marker = Marker::read(h, batch)?;
    if !txns.on_control(h, marker) {
        stats.records_kept += h.record_count.max(0) as u64;
        return Ok(Outcome::Keep);
    }
    match h.delete_horizon() {
        Some(t) if t <= rules.now => {
            stats.markers_removed += 1;
            Ok(Outcome::Drop)
        }
        Some(_) => {
            stats.records_kept += h.record_count.max(0) as u64;
            Ok(Outcome::Keep)
        }
        None => {
            let records = records_section(h, batch, rules.decompress_limit)?;
            let kept = Records::new(&records, h.record_count).collect::<Result<Vec<_>, _>>()?;
            stats.records_kept += kept.len() as u64;
            Ok(Outcome::Rewrite(rebuild(h, batch, &kept, Some(rules.new_horizon()), MaxTimestamp::Keep)))
        }
    }
}

/// What decides a data batch's fate besides its records.
struct Kept {
    /// An aborted transaction holds it.
    aborted: bool,
    /// Its producer's last batch: kept, empty if need be.
    keep_empty: bool,
    /// It keeps its maxTimestamp and stays, empty if need be ([`Protect`]).
    protect: bool,
}

fn clean_data(
    h: &BatchHeader,
    batch: &[u8],
    map: &OffsetMap,
    Kept { aborted, keep_empty, protect }: Kept,
    rules: &CleanRules,
    stats: &mut CleanStats,
) -> Result<Outcome, FormatError> {
    let records = records_section(h, batch, rules.decompress_limit)?;
    let horizon = h.delete_horizon();
    let mut kept: Vec<Record<'_>> = Vec::new();
    let mut read = 0usize;
    let mut tombstone_kept = false;
    for r in Records::new(&records, h.record_count) {
        let r = r?;
        read += 1;
        if aborted {
            stats.aborted_records_removed += 1;
            continue;
        }
        let offset = h.base_offset + r.offset_delta as i64;
        if !latest(map, r.key, offset) {
            continue;
        }
        if r.value.is_none() {
            if horizon.is_some_and(|t| t <= rules.now) {
                stats.tombstones_removed += 1;
                continue;
            }
            tombstone_kept = true;
        }
        kept.push(r);
    }
    stats.records_read += read as u64;
    stats.records_kept += kept.len() as u64;
    let stamp = tombstone_kept && horizon.is_none();
    if kept.len() == read && !stamp {
        return Ok(Outcome::Keep);
    }
    if kept.is_empty() && !keep_empty && !protect {
        return Ok(Outcome::Drop);
    }
    let horizon = if stamp { Some(rules.new_horizon()) } else { horizon };
    let max_ts = if protect { MaxTimestamp::Keep } else { MaxTimestamp::OfRecords };
    Ok(Outcome::Rewrite(rebuild(h, batch, &kept, horizon, max_ts)))
}

/// What a rebuilt batch's maxTimestamp is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxTimestamp {
    /// The largest of the records kept (-1 when none): CreateTime batches.
    OfRecords,
    /// The original batch's ([`Protect`], and batches whose records all stay).
    Keep,
}

/// The batch `batch` (header `h`) holding only `kept` (its own records, in order), with
/// `horizon` as its delete horizon (KIP-534) when given. Offsets, producer fields, the
/// partition leader epoch and the codec stay; timestamps are re-based on the horizon (or
/// the original firstTimestamp) so every record keeps its own. An empty result is a bare
/// header (no codec): a producer's last batch, kept for its sequence, or a protected one.
pub fn rebuild(h: &BatchHeader, batch: &[u8], kept: &[Record<'_>], horizon: Option<i64>, max: MaxTimestamp) -> Vec<u8> {
    let base_ts = horizon.unwrap_or(h.first_timestamp);
    let mut raw = Vec::new();
    let mut max_ts = -1i64;
    for r in kept {
        let ts = h.record_timestamp(r.timestamp_delta);
        max_ts = max_ts.max(ts);
        let moved = Record { timestamp_delta: ts.wrapping_sub(base_ts), headers: r.headers.clone(), ..*r };
        encode_record(&mut raw, &moved);
    }
    let mut attributes = h.attributes & !ATTR_DELETE_HORIZON;
    if horizon.is_some() {
        attributes |= ATTR_DELETE_HORIZON;
    }
    let codec = h.compression().unwrap_or(compression::Compression::None);
    let body = if kept.is_empty() {
        attributes &= !ATTR_COMPRESSION_MASK;
        Vec::new()
    } else {
        compression::compress(codec, &raw)
    };
    if max == MaxTimestamp::Keep || (h.timestamp_type() == TimestampType::LogAppendTime && !kept.is_empty()) {
        max_ts = h.max_timestamp;
    }
    let first_ts = if kept.is_empty() && horizon.is_none() { -1 } else { base_ts };
    let mut b = Vec::with_capacity(HEADER_LEN + body.len());
    b.extend_from_slice(&batch[..HEADER_LEN]);
    b.extend_from_slice(&body);
    let len = (b.len() - LOG_OVERHEAD) as i32;
    b[OFF_LENGTH..OFF_LENGTH + 4].copy_from_slice(&len.to_be_bytes());
    b[OFF_ATTRIBUTES..OFF_ATTRIBUTES + 2].copy_from_slice(&attributes.to_be_bytes());
    b[OFF_FIRST_TIMESTAMP..OFF_FIRST_TIMESTAMP + 8].copy_from_slice(&first_ts.to_be_bytes());
    b[OFF_MAX_TIMESTAMP..OFF_MAX_TIMESTAMP + 8].copy_from_slice(&max_ts.to_be_bytes());
    b[OFF_RECORD_COUNT..OFF_RECORD_COUNT + 4].copy_from_slice(&(kept.len() as i32).to_be_bytes());
    crate::storage::format::batch::rewrite_crc(&mut b);
    b
}

#[cfg(test)]
mod tests;
