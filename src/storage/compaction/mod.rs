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
//!      scan records, so they answer from what remains.
//!
//! Legacy message sets (magic 0 and 1) are kept whole and take no part in the map: only v2
//! batches are cleaned (documented gap; clients since Kafka 0.11 write v2). So that a kept
//! legacy record never outlives its key's tombstone, a tombstone whose key a kept legacy
//! record holds is never dropped ([`TxnTracker::legacy_keys`]).
//!
//! Callers: `storage::cleaner` (the pass's I/O) and tests.

use crate::storage::format::batch::{
    encode_record, records_section, BatchHeader, Record, Records, TimestampType, ATTR_COMPRESSION_MASK,
    ATTR_DELETE_HORIZON, HEADER_LEN, LOG_OVERHEAD, MAGIC_V2, OFF_ATTRIBUTES, OFF_FIRST_TIMESTAMP, OFF_LENGTH,
    OFF_MAX_TIMESTAMP, OFF_RECORD_COUNT,
};
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

/// The keys of one stored batch with their offsets, for the offset map: a v2 data batch that
/// no aborted transaction holds (control batches and legacy entries give none).
pub fn map_batch(
    batch: &[u8],
    txns: &mut TxnTracker,
    decompress_limit: usize,
) -> Result<Vec<(Vec<u8>, i64)>, FormatError> {
    let mut out = Vec::new();
    if batch.get(crate::storage::format::batch::OFF_MAGIC).map(|&m| m as i8) != Some(MAGIC_V2) {
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
    /// Keys of the legacy (magic 0 and 1) records this pass kept: their tombstones stay.
    pub legacy_keys: HashSet<Vec<u8>>,
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
/// starting at `batch_base`, named by the group's last time-index entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Protect {
    pub batch_base: i64,
}

/// The settings and the moment of one pass.
#[derive(Debug, Clone, Copy)]
pub struct CleanRules {
    pub now: i64,
    /// `delete.retention.ms`.
    pub delete_retention_ms: i64,
    pub decompress_limit: usize,
}

impl CleanRules {
    fn new_horizon(&self) -> i64 {
        self.now.saturating_add(self.delete_retention_ms)
    }
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
    if batch.get(crate::storage::format::batch::OFF_MAGIC).map(|&m| m as i8) != Some(MAGIC_V2) {
        let mut scratch = Vec::new();
        for r in crate::storage::format::legacy::records(batch, &mut scratch, rules.decompress_limit)? {
            if let Some(k) = r.key {
                txns.legacy_keys.insert(k.to_vec());
            }
        }
        stats.bytes_written += batch.len() as u64;
        return Ok(Outcome::Keep);
    }
    let h = BatchHeader::parse(batch)?;
    let protect = protect.is_some_and(|p| p.batch_base == h.base_offset);
    let outcome = if h.is_control() {
        let outcome = clean_control(&h, batch, txns, rules, stats)?;
        if protect && outcome == Outcome::Drop {
            Outcome::Keep
        } else {
            outcome
        }
    } else {
        let aborted = txns.on_data(&h);
        let keep_empty = h.producer_id >= 0 && last_of_producer(h.producer_id, h.last_offset());
        let kept = Kept { aborted, keep_empty, protect, legacy_keys: &txns.legacy_keys };
        clean_data(&h, batch, map, kept, rules, stats)?
    };
    stats.bytes_written += match &outcome {
        Outcome::Keep => batch.len() as u64,
        Outcome::Drop => 0,
        Outcome::Rewrite(b) => b.len() as u64,
    };
    Ok(outcome)
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
struct Kept<'a> {
    /// An aborted transaction holds it.
    aborted: bool,
    /// Its producer's last batch: kept, empty if need be.
    keep_empty: bool,
    /// It keeps its maxTimestamp and stays, empty if need be ([`Protect`]).
    protect: bool,
    /// Keys kept in legacy records: their tombstones stay.
    legacy_keys: &'a HashSet<Vec<u8>>,
}

fn clean_data(
    h: &BatchHeader,
    batch: &[u8],
    map: &OffsetMap,
    Kept { aborted, keep_empty, protect, legacy_keys }: Kept<'_>,
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
        let latest = r.key.is_some_and(|k| map.get(k).is_none_or(|last| offset >= last));
        if !latest {
            continue;
        }
        if r.value.is_none() {
            let held = r.key.is_some_and(|k| legacy_keys.contains(k));
            if horizon.is_some_and(|t| t <= rules.now) && !held {
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
