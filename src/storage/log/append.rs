//! Appends: checking a produced request, copying its batches into the active segment, rolling,
//! and closing the active segment (roll or clean shutdown).
//!
//! [`Log::append`] checks every batch before any is appended (format, size, timestamps against
//! the CreateTime window, idempotent sequences), so a refused request leaves the log as it was;
//! then it assigns offsets and copies each batch once into the active segment's tail, stamping
//! or fixing timestamps where SPEC T3.2 and T3.3 say so. Nothing here does I/O: data reaches
//! the disk through flush jobs (`flush`).
//!
//! Invariants: offsets are contiguous across batches and segments; only the last segment is
//! active; a closing segment gets its close time-index entry (T5.3, T5.5) and its producer
//! snapshot when it stops being active, before the next segment takes a batch.
//!
//! Callers: the partition (append, roll, begin_close), upkeep (`maybe_roll_for_time`), and
//! exclusive owners (tests, tools).

use super::{offset_entries, time_entries, AppendInfo, FlushDemand, Log, CLEAN_MARKER, MAX_STORED_BATCH};
use crate::config::LogConfig;
use crate::io::Disk;
use crate::metrics::{self, Stage};
use crate::storage::error::{StorageError, StorageResult};
use crate::storage::format::batch::{
    check_produced, check_stored, patched_header, records_section, timestamps_outside, with_timestamp_type,
    BatchHeader, RecordStats, Records, TimestampType, HEADER_LEN, MAGIC_V2, OFF_LEADER_EPOCH,
};
use crate::storage::format::index::encode_clean_marker;
use crate::storage::format::legacy;
use crate::storage::format::marker::Marker;
use crate::storage::format::stored::{frame_len, BatchInfo, BatchWalk};
use crate::storage::format::txn_index::AbortedTxn;
use crate::storage::format::FormatError;
use crate::storage::producers::{self, BatchSeq, CompletedTxn, SequenceError, Verdict};
use crate::storage::segment::{IndexBuilder, Segment, SegmentState, Tail, TimeBuilder, Unsealed};

/// A produced batch, checked, with what it is stored as, waiting to be appended.
enum Checked<'a> {
    /// A v2 batch and the attributes and maxTimestamp it is stored with; `seq` for a batch of an
    /// idempotent producer.
    V2 { h: BatchHeader, bytes: &'a [u8], attributes: i16, max_ts: i64, seq: Option<BatchSeq> },
    /// A legacy message (plain or wrapper), its record count and its stored form.
    Legacy { bytes: &'a [u8], count: i32, wrapper: bool, stored: legacy::Stored, max_ts: i64 },
    /// A batch as a leader stored it (a follower's append): kept byte for byte. `h`: its v2
    /// header (none for legacy messages).
    Replica { bytes: &'a [u8], h: Option<BatchHeader>, first: i64, info: BatchInfo },
}

impl Checked<'_> {
    fn count(&self) -> i64 {
        match self {
            Checked::V2 { h, .. } => h.last_offset_delta as i64 + 1,
            Checked::Legacy { count, .. } => *count as i64,
            Checked::Replica { first, info, .. } => info.last_offset - first + 1,
        }
    }

    /// The stored bytes of the batch at offset `base`, `head` then `rest` (`head` in
    /// `patched` when the prefix is rewritten), their largest timestamp and indexed offset.
    /// A leader's v2 batches get its leader `epoch` (outside the CRC).
    fn stored<'s>(
        &'s self,
        base: i64,
        epoch: Option<i32>,
        patched: &'s mut [u8; HEADER_LEN],
    ) -> (&'s [u8], &'s [u8], i64, i64) {
        match self {
            Checked::V2 { h, bytes, attributes, max_ts, .. } => {
                let (len, max_ts) = if *attributes != h.attributes || *max_ts != h.max_timestamp {
                    *patched = patched_header(bytes, base, *attributes, *max_ts);
                    (HEADER_LEN, *max_ts)
                } else {
                    let len = if epoch.is_some() { OFF_LEADER_EPOCH + 4 } else { 8 };
                    patched[..len].copy_from_slice(&bytes[..len]);
                    patched[..8].copy_from_slice(&base.to_be_bytes());
                    (len, h.max_timestamp)
                };
                if let Some(e) = epoch {
                    patched[OFF_LEADER_EPOCH..OFF_LEADER_EPOCH + 4].copy_from_slice(&e.to_be_bytes());
                }
                (&patched[..len], &bytes[len..], max_ts, base)
            }
            Checked::Replica { bytes, info, .. } => (&[][..], bytes, info.max_timestamp, info.index_offset()),
            Checked::Legacy { bytes, wrapper, stored, max_ts, count } => {
                let indexed = if *wrapper { base + *count as i64 - 1 } else { base };
                match stored {
                    legacy::Stored::Prefix { prefix, len } => (&prefix[..*len], &bytes[*len..], *max_ts, indexed),
                    legacy::Stored::Rebuilt(v) => (&v[..], &[][..], *max_ts, indexed),
                }
            }
        }
    }
}

/// What checking produced bytes found: something to append, or a retry of an idempotent
/// batch already appended, answered with its offsets (once durable) and not appended again.
enum Produced<T> {
    Append(T),
    Duplicate(AppendInfo),
}

/// What one request's batches are checked against: the topic's settings at broker time `now`.
struct Rules {
    max_bytes: u64,
    decompress_limit: usize,
    ts_type: TimestampType,
    /// The CreateTime window (SPEC T3.1).
    lo: i64,
    hi: i64,
    now: i64,
    /// `cleanup.policy` holds `compact`: every record needs a key (KIP-467).
    compact: bool,
}

impl Rules {
    fn new(config: &LogConfig, now: i64) -> Self {
        let (lo, hi) = config.timestamp_window(now);
        Rules {
            max_bytes: config.max_message_bytes,
            decompress_limit: config.decompress_limit(),
            ts_type: config.message_timestamp_type,
            lo,
            hi,
            now,
            compact: config.cleanup_compact,
        }
    }

    /// SPEC T3.1: on a CreateTime topic every record's timestamp lies in the window.
    fn check_window(&self, stats: RecordStats) -> StorageResult<()> {
        let (lo, hi) = (self.lo, self.hi);
        let has_ts = stats.max_ts >= 0 || stats.min_ts != i64::MAX;
        if self.ts_type == TimestampType::CreateTime
            && has_ts
            && (stats.min_ts < 0 || stats.min_ts < lo || stats.max_ts > hi)
        {
            let ts = if stats.min_ts < lo || stats.min_ts < 0 { stats.min_ts } else { stats.max_ts };
            return Err(StorageError::InvalidTimestamp { ts, lo, hi, records: Vec::new() });
        }
        Ok(())
    }

    /// The broker's timestamp an append reports (SPEC T3.4).
    fn log_append_time(&self) -> i64 {
        if self.ts_type == TimestampType::LogAppendTime {
            self.now
        } else {
            -1
        }
    }
}

/// A request's batches were walked to `pos`: every byte must belong to a whole batch (else
/// the partial one's error), and there must be one at least.
fn walked_whole(records: &[u8], pos: usize, batches: usize) -> StorageResult<()> {
    if pos != records.len() {
        let have = records.len() - pos;
        let need = frame_len(&records[pos..], MAX_STORED_BATCH)?.unwrap_or(12);
        return Err(FormatError::Truncated { need, have }.into());
    }
    if batches == 0 {
        return Err(StorageError::EmptyAppend);
    }
    Ok(())
}

/// Check a legacy message (magic 0 or 1) that will get offset `next` and fix its stored form.
fn check_legacy<'a>(bytes: &'a [u8], next: i64, rules: &Rules) -> StorageResult<Checked<'a>> {
    let p = legacy::check_produced(bytes, rules.decompress_limit)?;
    rules.check_window(p.stats)?;
    if rules.compact && p.stats.keyless > 0 {
        let mut scratch = Vec::new();
        let records = legacy::records(bytes, &mut scratch, rules.decompress_limit)?;
        let keyless: Vec<i32> = (0..).zip(&records).filter(|(_, r)| r.key.is_none()).map(|(i, _)| i).collect();
        if !keyless.is_empty() {
            return Err(StorageError::KeylessRecords { records: keyless });
        }
    }
    let (stored, max_ts) = legacy::stored_form(bytes, &p, next, rules.ts_type, rules.now, rules.decompress_limit)?;
    if let legacy::Stored::Rebuilt(v) = &stored {
        // Recompressed: its size may differ from the one checked above.
        if v.len() as u64 > rules.max_bytes {
            return Err(StorageError::BatchTooLarge { size: v.len(), max: rules.max_bytes });
        }
    }
    Ok(Checked::Legacy { bytes, count: p.count, wrapper: p.header.is_wrapper(), stored, max_ts })
}

impl<D: Disk> Log<D> {
    /// Append the batches in `records` (v2 batches or legacy messages of magic 0 and 1, as a
    /// producer sent them, SPEC T1.1) at broker time `now` (ms). Every batch is checked before
    /// any is appended (format, size, and for CreateTime topics every record's timestamp
    /// against the allowed window, SPEC T3.1, inner messages of legacy wrappers included): on
    /// error nothing is appended. LogAppendTime topics get `now` stamped (T3.2); CreateTime
    /// wrappers their largest inner timestamp (T3.3).
    pub fn append(&mut self, records: &[u8], now: i64) -> StorageResult<(AppendInfo, FlushDemand)> {
        self.writable()?;
        let rules = Rules::new(&self.config, now);
        let checking = std::time::Instant::now();
        let batches = match self.check_request(records, &rules)? {
            Produced::Append(batches) => batches,
            Produced::Duplicate(info) => return Ok((info, FlushDemand::Wait)),
        };
        let copying = std::time::Instant::now();
        metrics::record(Stage::Validate, (copying - checking).as_micros() as u64);
        let (info, demand) = self.copy_batches(&batches, &rules);
        metrics::since(Stage::Copy, copying);
        Ok((info, self.counted(&info, demand)))
    }

    /// Append batches as a leader stored them (a follower's fetch, Kafka's
    /// `appendAsFollower`): offsets, timestamps, epochs and CRCs stay as they are. Each batch
    /// is checked (framing, CRC) and must start where the log ends; on any error nothing is
    /// appended. The producer state and the leader-epoch cache follow the batches as recovery
    /// replays a log (sequences, transactions, markers). At broker time `now` (rolling).
    pub fn append_replica(&mut self, records: &[u8], now: i64) -> StorageResult<(AppendInfo, FlushDemand)> {
        self.writable()?;
        let rules = Rules::new(&self.config, now);
        let mut expected = self.log_end_offset();
        let mut batches = Vec::new();
        let mut walk = BatchWalk::new(records, MAX_STORED_BATCH);
        for item in walk.by_ref() {
            let (_, info, bytes) = item?;
            let (first, h) = if info.magic == MAGIC_V2 {
                let h = check_stored(bytes)?;
                (h.base_offset, Some(h))
            } else {
                legacy::check(bytes)?;
                let first = match info.first_offset {
                    Some(f) => f,
                    None => legacy::wrapper_span(bytes, rules.decompress_limit, false)?.0,
                };
                (first, None)
            };
            // Offsets only grow; a compacted leader's log has gaps, which the copy keeps (the
            // partition records that it may have them first: `Log::replica_gaps`).
            if first < expected || info.last_offset < first || (first > expected && !self.may_have_gaps) {
                return Err(FormatError::OffsetGap { expected, found: first }.into());
            }
            expected = info.last_offset + 1;
            batches.push(Checked::Replica { bytes, h, first, info });
        }
        walked_whole(records, walk.pos(), batches.len())?;
        // A follower stamps nothing: the leader's epochs stay.
        let stamp = self.leader_epoch.take();
        let (info, demand) = self.copy_batches(&batches, &rules);
        self.leader_epoch = stamp;
        Ok((info, self.counted(&info, demand)))
    }

    /// The leader-epoch cache as it will be once `records` (a leader's stored batches) are
    /// appended, if they begin an epoch the cache does not have (`None`: unchanged). The
    /// partition saves it before the batches can become durable, so that no durable batch
    /// carries an epoch its cache file lacks (Kafka assigns the epoch before the append).
    pub fn epochs_after(&self, records: &[u8]) -> Option<super::Epochs> {
        let mut epochs = self.epochs.clone();
        let mut changed = false;
        for (_, info, bytes) in BatchWalk::new(records, MAX_STORED_BATCH).map_while(Result::ok) {
            if info.magic != MAGIC_V2 {
                continue;
            }
            if let (Ok(h), Some(first)) = (BatchHeader::parse(bytes), info.first_offset) {
                changed |= epochs.on_batch(h.partition_leader_epoch, first);
            }
        }
        changed.then_some(epochs)
    }

    /// Whether appending `records` (a leader's stored batches) leaves a gap in this log's
    /// offsets (the leader's log was compacted): the partition then records that the log may
    /// have gaps before appending ([`Log::set_may_have_gaps`]), so recovery keeps them.
    pub fn replica_gaps(&self, records: &[u8]) -> bool {
        let mut expected = self.log_end_offset();
        for (_, info, _) in BatchWalk::new(records, MAX_STORED_BATCH).map_while(Result::ok) {
            if info.first_offset.is_some_and(|f| f > expected) {
                return true;
            }
            expected = info.last_offset + 1;
        }
        false
    }

    /// The log's offsets may have gaps from now on (its cleaner checkpoint file is written
    /// first by the caller).
    pub fn set_may_have_gaps(&mut self) {
        self.may_have_gaps = true;
    }

    /// A replicated v2 batch at `first` updates the producer state as a recovery replay
    /// would, and an aborted transaction it ends joins the aborted-transaction list.
    fn replay(&mut self, h: &BatchHeader, bytes: &[u8], first: i64, now: i64) {
        if h.is_control() {
            self.markers_appended += 1;
        }
        let done = self.producers.replay(h, bytes, first, now);
        self.note_aborted(done.as_ref());
    }

    /// A marker ended transaction `done`: an abort joins the aborted-transaction list (with the
    /// last stable offset Kafka's index keeps).
    fn note_aborted(&mut self, done: Option<&CompletedTxn>) {
        if let Some(t) = done.filter(|t| t.aborted) {
            let last_stable_offset = self.producers.last_stable_offset_after(t);
            self.aborted.push(AbortedTxn {
                producer_id: t.producer_id,
                first_offset: t.first_offset,
                last_offset: t.last_offset,
                last_stable_offset,
            });
        }
    }

    /// Whether appends are taken: not while closing, nor while a flush failure suspends
    /// writes. A failure that left nothing to retry (say, creating an empty segment's file:
    /// the file exists, only its sync failed) does not hold appends back: the next flush tries
    /// the disk again.
    fn writable(&mut self) -> StorageResult<()> {
        if self.closing {
            return Err(StorageError::Closed);
        }
        if self.flush_failure.is_some() {
            self.clear_flush_failure_if_idle();
        }
        if let Some((e, _)) = &self.flush_failure {
            return Err(StorageError::WritesSuspended(e.clone()));
        }
        Ok(())
    }

    /// Count appended records towards `flush.messages` and the unflushed-bytes bound: the
    /// demand on the flusher once they are in.
    fn counted(&mut self, info: &AppendInfo, demand: FlushDemand) -> FlushDemand {
        self.unflushed_records += info.records;
        if self.unflushed_records >= self.config.flush_messages
            || self.unflushed_bytes() > self.config.max_unflushed_bytes
        {
            return FlushDemand::Wait;
        }
        demand
    }

    /// Append a transaction marker (KIP-98) for producer `pid` at `epoch`, at broker time
    /// `now`: the coordinator's write, never a client's. Refused, nothing appended, for an
    /// epoch older than the producer's (INVALID_PRODUCER_EPOCH) or a coordinator epoch older
    /// than its last marker's (TRANSACTION_COORDINATOR_FENCED). Returns the transaction it
    /// ended here, if one was open (a marker with nothing open is appended all the same).
    pub fn append_marker(
        &mut self,
        pid: i64,
        epoch: i16,
        marker: Marker,
        now: i64,
    ) -> StorageResult<(AppendInfo, Option<CompletedTxn>, FlushDemand)> {
        self.writable()?;
        self.producers.check_marker(pid, epoch, &marker)?;
        let rules = Rules::new(&self.config, now);
        let bytes = marker.batch(pid, epoch, now);
        let h = check_stored(&bytes)?;
        let attributes = with_timestamp_type(h.attributes, rules.ts_type);
        let batch = Checked::V2 { h, bytes: &bytes, attributes, max_ts: now, seq: None };
        let (info, demand) = self.copy_batches(&[batch], &rules);
        let demand = self.counted(&info, demand);
        let done = self.producers.record_marker(pid, epoch, &marker, info.base_offset, now);
        self.markers_appended += 1;
        self.note_aborted(done.as_ref());
        Ok((info, done, demand))
    }

    /// The last stable offset: READ_COMMITTED readers read below it (the first offset of the
    /// earliest transaction not yet ended and durable, else the durable end; at least the log
    /// start).
    pub fn last_stable_offset(&self) -> i64 {
        let durable = self.high_watermark();
        // Never below the log start: DeleteRecords or retention may pass an open
        // transaction's first offset (Kafka clamps it likewise).
        self.producers.first_unstable_offset().map_or(durable, |f| f.min(durable).max(self.log_start_offset()))
    }

    /// Check every batch of a request, and fix its stored form, before any is appended.
    fn check_request<'a>(&self, records: &'a [u8], rules: &Rules) -> StorageResult<Produced<Vec<Checked<'a>>>> {
        // `next` is the offset each batch will get.
        let mut next = self.log_end_offset();
        let mut batches: Vec<Checked> = Vec::new();
        let mut walk = BatchWalk::new(records, MAX_STORED_BATCH);
        for item in walk.by_ref() {
            let (_, info, bytes) = item?;
            if bytes.len() as u64 > rules.max_bytes {
                return Err(StorageError::BatchTooLarge { size: bytes.len(), max: rules.max_bytes });
            }
            let checked = if info.magic == MAGIC_V2 {
                match self.check_v2(bytes, records.len() == bytes.len(), next, rules)? {
                    Produced::Append(checked) => checked,
                    Produced::Duplicate(info) => return Ok(Produced::Duplicate(info)),
                }
            } else {
                check_legacy(bytes, next, rules)?
            };
            next += checked.count();
            batches.push(checked);
        }
        walked_whole(records, walk.pos(), batches.len())?;
        Ok(Produced::Append(batches))
    }

    /// Check a v2 batch that will get offset `next` (`alone`: the only batch of its request),
    /// its timestamps and, for an idempotent producer, its sequence.
    fn check_v2<'a>(
        &self,
        bytes: &'a [u8],
        alone: bool,
        next: i64,
        rules: &Rules,
    ) -> StorageResult<Produced<Checked<'a>>> {
        let (h, stats) = check_produced(bytes, rules.decompress_limit)?;
        rules.check_window(stats).map_err(|e| match e {
            // Refused: name every record out of the window (KIP-467; only on this path, so
            // accepted batches are not walked twice).
            StorageError::InvalidTimestamp { ts, lo, hi, .. } => {
                let records = timestamps_outside(&h, bytes, rules.decompress_limit, lo, hi).unwrap_or_default();
                StorageError::InvalidTimestamp { ts, lo, hi, records }
            }
            e => e,
        })?;
        if rules.compact && stats.keyless > 0 {
            // Refused: name every keyless record (KIP-467; the records are walked again only
            // on this path, as for timestamps).
            let records = records_section(&h, bytes, rules.decompress_limit)?;
            let mut keyless = Vec::new();
            for (i, r) in (0..).zip(Records::new(&records, h.record_count)) {
                if r?.key.is_none() {
                    keyless.push(i);
                }
            }
            return Err(StorageError::KeylessRecords { records: keyless });
        }
        // What to store: CreateTime: the type bit cleared and the records' true largest
        // timestamp; LogAppendTime: the bit set and `now`.
        let max_ts = if rules.ts_type == TimestampType::LogAppendTime { rules.now } else { stats.max_ts };
        let attributes = with_timestamp_type(h.attributes, rules.ts_type);
        let seq = if h.producer_id >= 0 {
            // Kafka's rule for idempotent batches: alone in the request, with a sequence.
            if !alone || h.base_sequence < 0 {
                return Err(SequenceError::NotAlone { pid: h.producer_id }.into());
            }
            let seq = BatchSeq {
                first_seq: h.base_sequence,
                last_seq: producers::last_seq(h.base_sequence, h.last_offset_delta as i64 + 1),
                first_offset: next,
                last_offset: next + h.last_offset_delta as i64,
            };
            let txn = h.is_transactional();
            match self.producers.check(h.producer_id, h.producer_epoch, seq.first_seq, seq.last_seq, txn)? {
                Verdict::Append => Some(seq),
                Verdict::Duplicate { first_offset, last_offset } => {
                    // A retry of a batch already appended: its offsets, once durable.
                    let info = AppendInfo {
                        base_offset: first_offset,
                        last_offset,
                        records: 0,
                        bytes: 0,
                        log_append_time: rules.log_append_time(),
                    };
                    return Ok(Produced::Duplicate(info));
                }
            }
        } else {
            None
        };
        Ok(Produced::Append(Checked::V2 { h, bytes, attributes, max_ts, seq }))
    }

    /// Assign offsets and copy checked batches into the active segment, rolling where a
    /// batch does not fit (or `segment.ms` passed). Cannot fail: everything was checked.
    fn copy_batches(&mut self, batches: &[Checked], rules: &Rules) -> (AppendInfo, FlushDemand) {
        let now = rules.now;
        let epoch = self.leader_epoch;
        let log_append_time = rules.log_append_time();
        let mut info =
            AppendInfo { base_offset: self.log_end_offset(), last_offset: 0, records: 0, bytes: 0, log_append_time };
        let mut demand = FlushDemand::None;
        let mut patched = [0u8; HEADER_LEN];
        for batch in batches {
            if let Checked::Replica { first, .. } = batch {
                if *first > self.log_end_offset() {
                    // A gap the leader's cleaner left: the copy's offsets skip it too.
                    self.active_mut().skip_to(*first);
                }
            }
            let base = self.log_end_offset();
            let count = batch.count();
            let (head, rest, stored_max, index_offset) = batch.stored(base, epoch, &mut patched);
            let len = (head.len() + rest.len()) as u64;
            let last = base + count - 1;
            if self.maybe_roll_for_time(now, Some(stored_max))
                || self.active().needs_roll(len, last, self.config.segment_bytes)
            {
                self.roll(now);
                demand = FlushDemand::Kick;
            }
            let disk = self.disk.clone();
            let seg = self.active_mut();
            if seg.append_batch(&disk, head, rest, base, index_offset, last + 1, stored_max) {
                demand = FlushDemand::Kick;
            }
            // Before the next batch's roll can close this segment (its T5.5 entry).
            self.last_append_ms = now;
            match batch {
                Checked::V2 { h, seq, .. } => {
                    if let Some(seq) = seq {
                        self.producers.record(h.producer_id, h.producer_epoch, *seq, now, h.is_transactional());
                    }
                    if let Some(e) = epoch {
                        self.epochs_changed |= self.epochs.on_batch(e, base);
                    }
                }
                Checked::Replica { bytes, h: Some(h), .. } => {
                    self.epochs_changed |= self.epochs.on_batch(h.partition_leader_epoch, base);
                    self.replay(h, bytes, base, now);
                }
                _ => {}
            }
            info.last_offset = last;
            info.records += count as u64;
            info.bytes += len;
        }
        (info, demand)
    }

    /// The largest timestamp ever appended (-1 if none). After every close the log's last
    /// time-index entry is its largest timestamp (SPEC T5.3), so only the active segment's
    /// batches can hold a larger one.
    pub fn largest_timestamp(&self) -> i64 {
        let t = self.last_time_index();
        t.last_ts.unwrap_or(-1).max(t.max_ts)
    }

    /// SPEC T7.1, time part: whether a roll by time is due (the caller rolls), in three ways,
    /// at most one of them per `segment.ms` of wall-clock time (no roll storms from old or
    /// backfilled timestamps):
    /// - *idle*: a non-empty active segment, `segment.ms` after the log's largest timestamp (or,
    ///   if no record has one, after the segment began);
    /// - *busy*: before appending a batch whose largest timestamp `next_max_ts` is `segment.ms`
    ///   or more past the active segment's first batch's (its beginning where that batch has
    ///   none, or a resumed segment's file time), as Kafka's `LogSegment.shouldRoll` does;
    /// - on a compacted topic with `max.compaction.lag.ms`, once the active segment began that
    ///   long ago (its records must become cleanable within the lag; the active segment never
    ///   is), at most once per lag (KIP-354).
    pub fn maybe_roll_for_time(&mut self, now: i64, next_max_ts: Option<i64>) -> bool {
        if self.closing || self.active().size == 0 {
            return false;
        }
        let largest = self.largest_timestamp();
        let reference = if largest >= 0 { largest } else { self.roll_reference_ms };
        let period = self.config.segment_ms.min(i64::MAX as u64) as i64;
        let since_roll = now.saturating_sub(self.last_time_roll_ms);
        let lag_due = self.config.cleanup_compact
            && self.config.max_compaction_lag_ms.is_some_and(|lag| {
                let lag = lag.min(i64::MAX as u64) as i64;
                now.saturating_sub(self.roll_reference_ms) >= lag && since_roll >= lag
            });
        let first = self.active().first_batch_ts.filter(|t| *t >= 0).unwrap_or(self.roll_reference_ms);
        let busy = next_max_ts.is_some_and(|ts| ts.saturating_sub(first) >= period);
        let idle = now.saturating_sub(reference) >= period;
        let due = ((idle || busy) && since_roll >= period) || lag_due;
        if due {
            self.last_time_roll_ms = now;
        }
        due
    }

    /// Start a new active segment at the log end. The old one gets its closing time-index
    /// entry now (SPEC T5.3, T5.5) and is sealed by the flusher.
    pub fn roll(&mut self, now: i64) {
        let base = self.log_end_offset();
        if self.closing || !self.active().is_active() || self.active().size == 0 {
            return;
        }
        let last_ts = self.close_active();
        let seg = new_active_segment(&self.disk, &self.config, base, last_ts);
        self.segments.insert(base, seg);
        self.roll_reference_ms = now;
    }

    /// Close the active segment ([`Segment::close`]: its close entry, and the producer state
    /// at its end for its seal); returns the log's last time-index timestamp after it.
    fn close_active(&mut self) -> Option<i64> {
        let last_append_ms = self.last_append_ms;
        let snapshot = self.producers.encode();
        self.active_mut().close(snapshot, last_append_ms)
    }

    /// Begin a clean shutdown: no more appends; the active segment gets its close
    /// entry and is sealed by the flusher.
    pub fn begin_close(&mut self) {
        if self.closing {
            return;
        }
        self.closing = true;
        let active = self.active();
        if active.size == 0 && active.file().is_none() && self.segments.len() > 1 {
            // Never written: it exists only in memory. The next open starts a new one.
            let base = active.base_offset;
            self.segments.remove(&base);
        } else if active.is_active() {
            self.close_active();
        }
    }

    /// After [`Log::begin_close`] and the last flush: write the clean-shutdown marker.
    pub async fn write_clean_marker(&self) -> StorageResult<()> {
        assert!(self.closing && !self.has_unflushed(), "clean marker before every segment is sealed");
        let marker = encode_clean_marker(self.log_end_offset(), self.last_time_entry());
        self.disk.write_file_atomic(&self.dir.join(CLEAN_MARKER), &marker).await?;
        Ok(())
    }
}

/// A new, empty active segment at `base` whose time index continues after `last_ts`. Its
/// file is created by the flusher.
pub(super) fn new_active_segment<D: Disk>(disk: &D, config: &LogConfig, base: i64, last_ts: Option<i64>) -> Segment<D> {
    Segment {
        base_offset: base,
        next_offset: base,
        size: 0,
        durable_size: 0,
        first_batch_ts: None,
        state: SegmentState::Active(Unsealed {
            file: None,
            allocated: 0,
            zeroed: 0,
            index: IndexBuilder::new(offset_entries(config), config.index_interval_bytes),
            time: TimeBuilder::new(time_entries(config), last_ts, config.time_index_interval_ms),
            tail: Tail::new(disk, 0, &[], config.write_chunk_bytes as usize),
        }),
    }
}
