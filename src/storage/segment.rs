//! One segment: a `.log` data file with its sparse offset index and, for the active segment,
//! the in-memory write tail.
//!
//! A segment's life is [`SegmentState`], whose variants carry what each phase has: `Active`
//! (takes appends: open file once created, offset and time index builders, the tail), `Closing`
//! (rolled: the same, plus the producer snapshot its seal writes), `Sealed` (immutable; its file
//! and indexes load lazily, [`SealedIndexes`]). [`Segment::close`] and [`Segment::seal`] are
//! the only transitions, called by the log's append and flush code.
//!
//! The tail is a queue of aligned buffers ("chunks") covering file positions
//! `[mem_start, size)`. Appends copy batch bytes into the open chunk; a full chunk is sealed.
//! A flush seals the open chunk too: its bytes past the end are zeroed to the next page
//! boundary, the buffer becomes `Rc` (immutable while a DMA write may read it) and the
//! partly filled last page is copied (at most 4 KiB) into a new open chunk, which the next
//! flush rewrites whole. Sealed chunks are dropped only once written *and* synced.
//!
//! Invariants:
//! - bytes `[0, durable_size)` are on disk and synced; `mem_start <= durable_size`, so every
//!   byte of `[0, size)` is either readable from disk or held in the tail;
//! - chunks are in file order and only the last page of a chunk may overlap the next chunk;
//!   overlapping writes are never in flight at the same time (see `log::FlushWork::write`:
//!   within a job, and across pipelined jobs);
//! - offset-index entries strictly increase in relative offset and position.

use crate::io::{align_down, align_up, Disk, IoBuf, PAGE};
use crate::storage::format::index::{encode_max_index, encode_offset_entry};
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::rc::Rc;

pub fn log_path(dir: &Path, base: i64) -> PathBuf {
    dir.join(format!("{base:020}.log"))
}
pub fn index_path(dir: &Path, base: i64) -> PathBuf {
    dir.join(format!("{base:020}.index"))
}
pub fn timeindex_path(dir: &Path, base: i64) -> PathBuf {
    dir.join(format!("{base:020}.timeindex"))
}
/// The max-timestamp index beside `.index` (`format::index::encode_max_index`), written at seal.
pub fn maxindex_path(dir: &Path, base: i64) -> PathBuf {
    dir.join(format!("{base:020}.maxtimeindex"))
}
/// The aborted-transaction index (Kafka's `.txnindex`), written at seal when the segment
/// holds an ABORT marker.
pub fn txnindex_path(dir: &Path, base: i64) -> PathBuf {
    dir.join(format!("{base:020}.txnindex"))
}

/// The in-memory sparse offset index of one segment, with (when known) the largest timestamp
/// before each entry's batch: `max_before[i]` is the largest stored max timestamp of the
/// segment's batches at positions below entry i's (-1: none). It is non-decreasing, so a lookup
/// by time finds the one stretch between two entries that can hold its answer
/// ([`OffsetIndex::time_skip`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetIndex {
    entries: Vec<(u32, u32)>,
    max_before: Option<Vec<i64>>,
    max_entries: usize,
}

impl OffsetIndex {
    pub fn new(max_entries: usize) -> Self {
        OffsetIndex { entries: Vec::new(), max_before: Some(Vec::new()), max_entries: max_entries.max(1) }
    }

    /// Entries loaded from disk, without their timestamps ([`OffsetIndex::with_max_before`]).
    pub fn from_entries(entries: Vec<(u32, u32)>, max_entries: usize) -> Self {
        OffsetIndex { entries, max_before: None, max_entries: max_entries.max(1) }
    }

    /// The entries' max-before timestamps (from a `.maxtimeindex`), when they fit: one per
    /// entry, non-decreasing.
    pub fn with_max_before(mut self, max_before: Option<Vec<i64>>) -> Self {
        self.max_before = max_before.filter(|m| m.len() == self.entries.len() && m.windows(2).all(|w| w[0] <= w[1]));
        self
    }

    pub fn max_before(&self) -> Option<&[i64]> {
        self.max_before.as_deref()
    }

    /// SPEC T6.3, narrowed: a forward scan for the first record with a timestamp `>= t`, at
    /// relative offset `from` and stopping before relative offset `limit`, can start at the
    /// returned relative offset (`>= from`), and the batches starting in the returned number of
    /// bytes from that offset's indexed position hold its answer if this segment does (`None`:
    /// the answer, if here, is past the last entry). `None` without max-before timestamps.
    /// Sound because every batch before entry i holds timestamps up to `max_before[i]` only.
    pub fn time_skip(&self, from: u32, limit: u32, t: i64) -> Option<(u32, Option<u64>)> {
        let max = self.max_before.as_deref()?;
        // Entries [0, k) have nothing at or above t before them; entries [0, j) lie below limit.
        let k = max.partition_point(|&m| m < t);
        let j = self.entries.partition_point(|&(r, _)| r < limit);
        let start = match k.min(j).checked_sub(1) {
            Some(i) if self.entries[i].0 > from => self.entries[i].0,
            _ => from,
        };
        // The answer's batch starts before entry k's (a record before log start may be what
        // reached t, so entry k can lie before `from`: then no span).
        let span =
            self.entries.get(k).filter(|&&(r, _)| k <= j && r > start).map(|&(_, p)| (p - self.lookup(start)) as u64);
        Some((start, span))
    }

    /// Position of the last indexed batch whose relative indexed offset is `<= rel`, or 0:
    /// that batch is at or before the one holding `rel`.
    pub fn lookup(&self, rel: u32) -> u32 {
        let i = self.entries.partition_point(|&(r, _)| r <= rel);
        if i == 0 {
            0
        } else {
            self.entries[i - 1].1
        }
    }

    /// Whether an entry (rel, pos) may follow the last one (both larger).
    pub fn follows(&self, rel: u32, pos: u32) -> bool {
        self.entries.last().is_none_or(|&(r, p)| rel > r && pos > p)
    }

    /// Add an entry; `max_before` is the largest timestamp before its batch (`None`: not
    /// known, and the index keeps no max-before timestamps from then on).
    pub fn push(&mut self, rel: u32, pos: u32, max_before: Option<i64>) {
        if let Some(&(r, p)) = self.entries.last() {
            assert!(rel > r && pos > p, "offset index must increase: ({r},{p}) then ({rel},{pos})");
        }
        self.entries.push((rel, pos));
        match (&mut self.max_before, max_before) {
            (Some(m), Some(t)) => m.push(t.max(m.last().copied().unwrap_or(-1))),
            (slot, _) => *slot = None,
        }
    }

    pub fn is_full(&self) -> bool {
        self.entries.len() >= self.max_entries
    }

    pub fn entries(&self) -> &[(u32, u32)] {
        &self.entries
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(self.entries.len() * 8);
        for &(r, p) in &self.entries {
            encode_offset_entry(&mut b, r, p);
        }
        b
    }

    /// The `.maxtimeindex` for `index_file` (this index's [`OffsetIndex::encode`]), when the
    /// max-before timestamps are known.
    pub fn encode_max(&self, index_file: &[u8]) -> Option<Vec<u8>> {
        self.max_before.as_deref().map(|m| encode_max_index(index_file, m))
    }

    /// Memory the entries take.
    pub fn mem_bytes(&self) -> usize {
        self.entries.len() * 8 + self.max_before.as_ref().map_or(0, |m| m.len() * 8)
    }
}

/// Builds an offset index batch by batch with the `index.interval.bytes` rule; appends and
/// recovery use the same builder, so a rebuilt index equals the one appends made.
#[derive(Debug, Clone)]
pub struct IndexBuilder {
    pub index: OffsetIndex,
    bytes_since_entry: u64,
    interval: u64,
    /// The largest stored max timestamp of the batches so far (-1: none), for the entries'
    /// max-before timestamps; `None` when not known (an index resumed without them).
    max_ts: Option<i64>,
}

impl IndexBuilder {
    pub fn new(max_entries: usize, interval: u64) -> Self {
        IndexBuilder { index: OffsetIndex::new(max_entries), bytes_since_entry: 0, interval, max_ts: Some(-1) }
    }

    /// Continue an index loaded from disk; the next entry comes after `interval` more bytes
    /// past the last entry's batch (`bytes_after_last`: bytes from that entry to the end, and
    /// `last_max_ts` that batch's max timestamp).
    pub fn resume(index: OffsetIndex, bytes_after_last: u64, interval: u64, last_max_ts: i64) -> Self {
        let max_ts = index.max_before().map(|m| m.last().copied().unwrap_or(-1).max(last_max_ts));
        IndexBuilder { index, bytes_since_entry: bytes_after_last, interval, max_ts }
    }

    /// Record a batch of `len` bytes at `pos` whose indexed offset (`BatchInfo::index_offset`)
    /// is `rel` past the segment's base and whose stored max timestamp is `max_ts` (-1: none).
    pub fn on_batch(&mut self, rel: u32, pos: u64, len: u64, max_ts: i64) {
        // An entry that would not increase (a damaged segment a scan walks past, found by the
        // recovery fuzz target) is left out: entries only speed lookups up, and the index keeps
        // its order.
        if self.bytes_since_entry >= self.interval && self.index.follows(rel, pos as u32) {
            self.index.push(rel, pos as u32, self.max_ts);
            self.bytes_since_entry = 0;
        }
        self.bytes_since_entry += len;
        self.max_ts = self.max_ts.map(|m| m.max(max_ts));
    }
}

pub struct Sealed<B> {
    pub buf: Rc<B>,
    /// File position of `buf[0]` (page aligned).
    pub pos: u64,
    /// Data bytes in `buf`; the rest up to its (page-aligned) length is zero padding.
    pub len: usize,
    /// Bytes allocated for `buf` (before it was trimmed to a page past `len`).
    pub alloc: usize,
    /// Handed to a flush that has not completed yet.
    submitted: bool,
}

/// A write of `buf` at file position `pos` that a flush must make.
pub struct ChunkWrite<B> {
    pub buf: Rc<B>,
    pub pos: u64,
}

/// `floor(ts / interval)`: the time-index bucket of a timestamp (SPEC terms).
pub fn bucket(ts: i64, interval_ms: u64) -> i64 {
    ts.div_euclid(interval_ms.max(1) as i64)
}

/// One segment's time index and the timestamps the rules need, built batch by batch.
/// Appends, recovery scans and rebuilds all go through it, so a rebuilt index equals the one
/// appends built (SPEC T5.2, T5.3, T5.5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimeBuilder {
    /// This segment's entries: (timestamp, relative offset).
    pub entries: Vec<(i64, u32)>,
    max_entries: usize,
    /// Timestamp of the last entry in the whole log (this segment's or an earlier one's).
    pub last_ts: Option<i64>,
    /// Largest batch max timestamp in this segment, -1 if none, and the first offset of the
    /// batch that holds it (the first such batch).
    pub max_ts: i64,
    pub max_ts_offset: i64,
    /// `max_ts` covers every batch (false for a segment reopened after a clean shutdown, whose
    /// batches were not read).
    pub complete: bool,
    /// `time.index.interval.ms` when the segment began: fixed for its life. (Changing it
    /// mid-segment would break T5.1: a new, narrower bucket could start below a timestamp
    /// already appended. At a segment boundary the close entry (T5.3) makes the log's last
    /// entry its largest timestamp, so any interval is safe from there.)
    pub interval_ms: u64,
}

impl TimeBuilder {
    pub fn new(max_entries: usize, last_ts: Option<i64>, interval_ms: u64) -> Self {
        TimeBuilder {
            entries: Vec::new(),
            max_entries: max_entries.max(1),
            last_ts,
            max_ts: -1,
            max_ts_offset: -1,
            complete: true,
            interval_ms: interval_ms.max(1),
        }
    }

    /// A sealed segment's loaded entries, after earlier entries ending at `prev_last_ts`.
    pub fn loaded(
        entries: Vec<(i64, u32)>,
        max_entries: usize,
        prev_last_ts: Option<i64>,
        seg_base: i64,
        interval_ms: u64,
    ) -> Self {
        let last = entries.last().copied();
        TimeBuilder {
            last_ts: last.map(|(t, _)| t).or(prev_last_ts),
            // After a close, a segment with entries ends with its exact maximum (T5.3).
            max_ts: last.map_or(-1, |(t, _)| t),
            max_ts_offset: last.map_or(-1, |(_, r)| seg_base + r as i64),
            complete: false,
            entries,
            max_entries: max_entries.max(1),
            interval_ms: interval_ms.max(1),
        }
    }

    pub fn is_full(&self) -> bool {
        self.entries.len() >= self.max_entries
    }

    fn push(&mut self, ts: i64, rel: u32) {
        if let Some(&(t, r)) = self.entries.last() {
            assert!(ts > t && rel >= r, "time index must increase: ({t},{r}) then ({ts},{rel})");
        }
        assert!(self.last_ts.is_none_or(|t| ts > t), "time index must increase across the log");
        self.entries.push((ts, rel));
        self.last_ts = Some(ts);
    }

    /// SPEC T5.2: a batch whose first offset is `base` and whose largest timestamp is
    /// `batch_max_ts` (-1: none) was appended.
    pub fn on_batch(&mut self, seg_base: i64, base: i64, batch_max_ts: i64) {
        let interval_ms = self.interval_ms;
        if batch_max_ts < 0 {
            return; // no timestamp: takes no part in the bucket rule
        }
        if batch_max_ts > self.max_ts {
            self.max_ts = batch_max_ts;
            self.max_ts_offset = base;
        }
        let b = bucket(batch_max_ts, interval_ms);
        if self.last_ts.is_none_or(|t| b > bucket(t, interval_ms)) {
            self.push(b * interval_ms.max(1) as i64, (base - seg_base) as u32);
        }
    }

    /// SPEC T5.3: the segment (holding offsets up to `last_offset`) is closed; its largest
    /// timestamp becomes an exact entry if it is the log's largest. SPEC T5.5: a segment none of
    /// whose records has a timestamp (magic 0, or v2 records with -1) gets one entry instead,
    /// (`mtime_ms`, its last offset), if that is above the log's last entry: when it is closed
    /// live, the time of its last append (what its file's mtime is, within `flush.ms`); when
    /// its index is rebuilt (T8.3), its file's mtime. So retention by time (T7.2) reaches
    /// segments without timestamps too. Such an entry names no record: `-3` steps back past
    /// it (see `Log::max_scan_start`).
    pub fn on_close(&mut self, seg_base: i64, last_offset: i64, mtime_ms: Option<i64>) {
        if last_offset < seg_base {
            return; // empty segment
        }
        if self.max_ts >= 0 {
            if self.last_ts.is_none_or(|t| self.max_ts > t) {
                self.push(self.max_ts, (self.max_ts_offset - seg_base) as u32);
            }
        } else if let Some(mtime) = mtime_ms.filter(|&m| self.complete && self.last_ts.is_none_or(|t| m > t)) {
            self.push(mtime, (last_offset - seg_base) as u32);
        }
    }

    /// The last entry whose timestamp is below `t`.
    pub fn last_below(&self, t: i64) -> Option<(i64, u32)> {
        let i = self.entries.partition_point(|&(ts, _)| ts < t);
        i.checked_sub(1).map(|i| self.entries[i])
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(self.entries.len() * 12);
        for &(t, r) in &self.entries {
            crate::storage::format::index::encode_time_entry(&mut b, t, r);
        }
        b
    }
}

/// The write buffer of the active segment.
pub struct Tail<B: IoBuf> {
    sealed: VecDeque<Sealed<B>>,
    open: B,
    open_pos: u64,
    open_len: usize,
    min_chunk: usize,
    max_chunk: usize,
}

impl<B: IoBuf> Tail<B> {
    /// A tail whose first page starts at `align_down(end)` and holds `partial`, the bytes of
    /// `[align_down(end), end)` (read back from disk when a segment is reopened).
    pub fn new<D: Disk<Buf = B>>(disk: &D, end: u64, partial: &[u8], max_chunk: usize) -> Self {
        let pos = align_down(end);
        assert_eq!(pos + partial.len() as u64, end, "tail must start with the partial page");
        let max_chunk = max_chunk.max(PAGE as usize);
        let min_chunk = (64 * 1024).min(max_chunk);
        let mut open = disk.alloc(min_chunk);
        open.as_mut()[..partial.len()].copy_from_slice(partial);
        Tail { sealed: VecDeque::new(), open, open_pos: pos, open_len: partial.len(), min_chunk, max_chunk }
    }

    /// First file position held in memory.
    pub fn mem_start(&self) -> u64 {
        self.sealed.front().map_or(self.open_pos, |c| c.pos)
    }

    /// One past the last byte appended.
    pub fn end(&self) -> u64 {
        self.open_pos + self.open_len as u64
    }

    /// Bytes of memory the tail holds.
    pub fn mem_bytes(&self) -> usize {
        self.sealed.iter().map(|c| c.buf.as_ref().as_ref().len()).sum::<usize>() + self.open.as_ref().len()
    }

    /// True when sealed chunks wait for a flush (a full chunk: time for a large write).
    pub fn has_unsubmitted(&self) -> bool {
        self.sealed.iter().any(|c| !c.submitted)
    }

    /// Copy `data` to the end of the tail.
    pub fn push<D: Disk<Buf = B>>(&mut self, disk: &D, mut data: &[u8]) {
        while !data.is_empty() {
            let cap = self.open.as_ref().len();
            let n = (cap - self.open_len).min(data.len());
            self.open.as_mut()[self.open_len..self.open_len + n].copy_from_slice(&data[..n]);
            self.open_len += n;
            data = &data[n..];
            if self.open_len == cap {
                // Full: seal it whole (already page aligned) and grow the next chunk.
                let next_cap = (cap * 2).min(self.max_chunk).max(self.min_chunk);
                let full = std::mem::replace(&mut self.open, disk.alloc(next_cap));
                let full = Sealed { buf: Rc::new(full), pos: self.open_pos, len: cap, alloc: cap, submitted: false };
                self.sealed.push_back(full);
                self.open_pos += cap as u64;
                self.open_len = 0;
            }
        }
    }

    /// Seal the open chunk if it holds bytes past `durable_end`, so a flush can write them.
    pub fn seal_open<D: Disk<Buf = B>>(&mut self, disk: &D, durable_end: u64) {
        if self.end() <= durable_end || self.open_len == 0 {
            return;
        }
        if self.sealed.back().is_some_and(|c| !c.submitted && c.pos + c.len as u64 == self.end()) {
            // Already cut here and waiting (a failed flush's retry): cutting again would add a
            // chunk, and a buffer, per retry.
            return;
        }
        let len = self.open_len;
        let aligned = align_up(len as u64) as usize;
        let keep_from = align_down(len as u64) as usize;
        let cap = self.open.as_ref().len();
        let mut next = disk.alloc(cap);
        next.as_mut()[..len - keep_from].copy_from_slice(&self.open.as_ref()[keep_from..len]);
        let mut old = std::mem::replace(&mut self.open, next);
        old.as_mut()[len..aligned].fill(0);
        old.trim(aligned);
        self.sealed.push_back(Sealed { buf: Rc::new(old), pos: self.open_pos, len, alloc: cap, submitted: false });
        self.open_pos += keep_from as u64;
        self.open_len = len - keep_from;
    }

    /// The writes of every sealed chunk not yet handed to a flush, now marked as handed.
    pub fn take_writes(&mut self) -> Vec<ChunkWrite<B>> {
        let mut out = Vec::new();
        for c in self.sealed.iter_mut().filter(|c| !c.submitted) {
            c.submitted = true;
            out.push(ChunkWrite { buf: c.buf.clone(), pos: c.pos });
        }
        out
    }

    /// The flush that took the first `n` sealed chunks is durable: they leave the tail (to
    /// the batch cache, or dropped).
    pub fn complete(&mut self, n: usize) -> impl Iterator<Item = Sealed<B>> + '_ {
        self.sealed.drain(..n).inspect(|c| assert!(c.submitted, "completed a chunk no flush took"))
    }

    /// The flush failed: its chunks go back to waiting for the next one.
    pub fn unsubmit(&mut self) {
        for c in self.sealed.iter_mut() {
            c.submitted = false;
        }
    }

    /// Copy file bytes `[from, to)` out of the tail (`mem_start <= from <= to <= end`).
    pub fn copy_out(&self, from: u64, to: u64) -> Vec<u8> {
        assert!(self.mem_start() <= from && from <= to && to <= self.end(), "range outside the tail");
        let mut out = vec![0u8; (to - from) as usize];
        let open = (self.open_pos, self.open_len, self.open.as_ref());
        let chunks = self.sealed.iter().map(|c| (c.pos, c.len, c.buf.as_ref().as_ref())).chain(std::iter::once(open));
        // Later chunks overwrite the page they share with earlier ones: same bytes or newer.
        for (pos, len, bytes) in chunks {
            let a = from.max(pos);
            let b = to.min(pos + len as u64);
            if a < b {
                out[(a - from) as usize..(b - from) as usize]
                    .copy_from_slice(&bytes[(a - pos) as usize..(b - pos) as usize]);
            }
        }
        out
    }
}

/// The write side of a segment that is not sealed yet (active or closing): what appends and
/// flushes need, held for as long as the segment can still change.
pub struct Unsealed<D: Disk> {
    /// Open file handle; `None` until the flusher creates the file (a new segment's first
    /// flush).
    pub file: Option<Rc<D::File>>,
    /// Bytes reserved with fallocate.
    pub allocated: u64,
    /// Zeros are written up to here (0: none yet; `tidemark.zero.ahead.bytes`). With the data,
    /// the file's blocks are written (not merely reserved) up to the larger of this and the
    /// data's end.
    pub zeroed: u64,
    pub index: IndexBuilder,
    pub time: TimeBuilder,
    pub tail: Tail<D::Buf>,
}

/// What of a sealed segment is in memory. Sealed segments are opened lazily: their file and
/// indexes load on the first read or lookup that needs them (`log::IndexLoad`).
pub enum SealedIndexes<D: Disk> {
    /// Nothing yet.
    NotLoaded,
    /// Only the time index, read at open by the backward scan (SPEC T8.1).
    TimeOnly(TimeBuilder),
    /// The open file and both indexes.
    Loaded { file: Rc<D::File>, index: OffsetIndex, time: TimeBuilder },
}

/// Where a segment is in its life, with the data that phase has. The transitions are
/// [`Segment::close`] (active to closing) and [`Segment::seal`] (closing to sealed); a segment
/// found at open is sealed, or active when it is the last one and was not cleanly closed.
pub enum SegmentState<D: Disk> {
    /// Receives appends.
    Active(Unsealed<D>),
    /// Rolled (or shutting down): its remaining data and its seal wait for the flusher.
    /// `producer_snapshot` is the producer state at its end, written with its seal.
    Closing { unsealed: Unsealed<D>, producer_snapshot: Vec<u8> },
    /// Trimmed to its logical size with its index files written and synced: immutable.
    Sealed(SealedIndexes<D>),
}

/// One segment of a partition log.
pub struct Segment<D: Disk> {
    pub base_offset: i64,
    /// One past the last offset stored.
    pub next_offset: i64,
    /// Bytes of whole batches.
    pub size: u64,
    /// Bytes on disk and synced.
    pub durable_size: u64,
    /// Its first batch's largest timestamp (-1: none), when known: from its first append, or
    /// read once by the cleaner (`max.compaction.lag.ms`, Kafka's first batch timestamp).
    pub first_batch_ts: Option<i64>,
    pub state: SegmentState<D>,
}

impl<D: Disk> Segment<D> {
    /// A sealed segment found at open, nothing loaded.
    pub fn sealed(base_offset: i64, next_offset: i64, size: u64) -> Self {
        Segment {
            base_offset,
            next_offset,
            size,
            durable_size: size,
            first_batch_ts: None,
            state: SegmentState::Sealed(SealedIndexes::NotLoaded),
        }
    }

    pub fn is_active(&self) -> bool {
        matches!(self.state, SegmentState::Active(_))
    }

    pub fn is_sealed(&self) -> bool {
        matches!(self.state, SegmentState::Sealed(_))
    }

    /// The write side, while the segment is active or closing.
    pub fn unsealed(&self) -> Option<&Unsealed<D>> {
        match &self.state {
            SegmentState::Active(u) | SegmentState::Closing { unsealed: u, .. } => Some(u),
            SegmentState::Sealed(_) => None,
        }
    }

    /// The open file handle, if there is one yet.
    pub fn file(&self) -> Option<&Rc<D::File>> {
        match &self.state {
            SegmentState::Active(u) | SegmentState::Closing { unsealed: u, .. } => u.file.as_ref(),
            SegmentState::Sealed(SealedIndexes::Loaded { file, .. }) => Some(file),
            SegmentState::Sealed(_) => None,
        }
    }

    /// The offset index, `None` for a sealed segment that has not loaded it.
    pub fn offset_index(&self) -> Option<&OffsetIndex> {
        match &self.state {
            SegmentState::Active(u) | SegmentState::Closing { unsealed: u, .. } => Some(&u.index.index),
            SegmentState::Sealed(SealedIndexes::Loaded { index, .. }) => Some(index),
            SegmentState::Sealed(_) => None,
        }
    }

    /// The time index, `None` for a sealed segment that has not loaded it.
    pub fn time(&self) -> Option<&TimeBuilder> {
        match &self.state {
            SegmentState::Active(u) | SegmentState::Closing { unsealed: u, .. } => Some(&u.time),
            SegmentState::Sealed(SealedIndexes::Loaded { time, .. } | SealedIndexes::TimeOnly(time)) => Some(time),
            SegmentState::Sealed(SealedIndexes::NotLoaded) => None,
        }
    }

    /// The write tail, while the segment is active or closing.
    pub fn tail(&self) -> Option<&Tail<D::Buf>> {
        self.unsealed().map(|u| &u.tail)
    }

    /// Would appending a batch of `len` bytes whose last offset is `last_offset` need a roll?
    pub fn needs_roll(&self, len: u64, last_offset: i64, segment_bytes: u64) -> bool {
        if self.size == 0 {
            return false;
        }
        let index_full = self.offset_index().is_some_and(|i| i.is_full()) || self.time().is_some_and(|t| t.is_full());
        self.size + len > segment_bytes
            || self.size + len > u32::MAX as u64
            || index_full
            || last_offset - self.base_offset > u32::MAX as i64
    }

    /// Append a validated batch of any magic holding offsets `base..next_offset`. Its stored
    /// bytes are `head` then `rest`: the wire bytes with the prefix the broker rewrote (the
    /// offset, and where SPEC T3.2 and T3.3 say so a timestamp, attributes and the CRC) as
    /// `head`, or a whole rebuilt batch as `head` and nothing as `rest`. Copies them once,
    /// into the tail. `index_offset` is what the offset index records for the batch
    /// (`BatchInfo::index_offset`); `max_ts` is its stored largest timestamp (-1: none), for
    /// the time index (SPEC T5.2). Returns whether the tail holds a full chunk waiting for a
    /// flush (time for a large write).
    #[allow(clippy::too_many_arguments)]
    pub fn append_batch(
        &mut self,
        disk: &D,
        head: &[u8],
        rest: &[u8],
        base: i64,
        index_offset: i64,
        next_offset: i64,
        max_ts: i64,
    ) -> bool {
        let SegmentState::Active(u) = &mut self.state else { panic!("append to a segment that is not active") };
        assert_eq!(base, self.next_offset, "offsets must be contiguous");
        assert!(base <= index_offset && index_offset < next_offset, "the indexed offset lies in the batch");
        let pos = self.size;
        let len = (head.len() + rest.len()) as u64;
        let rel = (index_offset - self.base_offset) as u32;
        u.index.on_batch(rel, pos, len, max_ts);
        u.tail.push(disk, head);
        u.tail.push(disk, rest);
        u.time.on_batch(self.base_offset, base, max_ts);
        if pos == 0 {
            self.first_batch_ts = Some(max_ts);
        }
        self.size += len;
        self.next_offset = next_offset;
        crate::invariant!(u.tail.end() == self.size);
        u.tail.has_unsubmitted()
    }

    /// A follower's copy of a compacted log: the leader's next batch starts past this
    /// segment's end (the cleaner removed the offsets between); the segment continues there.
    pub fn skip_to(&mut self, offset: i64) {
        assert!(self.is_active() && offset >= self.next_offset, "a skip moves an active segment's end forward");
        self.next_offset = offset;
    }

    /// Active to closing: the segment takes no more appends. Its time index gets its close
    /// entry (SPEC T5.3, T5.5; `last_append_ms` is the time of its last append) and it keeps
    /// `producer_snapshot`, the producer state at its end, for its seal. Returns the log's last
    /// time-index timestamp after the close.
    pub fn close(&mut self, producer_snapshot: Vec<u8>, last_append_ms: i64) -> Option<i64> {
        let state = std::mem::replace(&mut self.state, SegmentState::Sealed(SealedIndexes::NotLoaded));
        let SegmentState::Active(mut unsealed) = state else { panic!("close of a segment that is not active") };
        unsealed.time.on_close(self.base_offset, self.next_offset - 1, Some(last_append_ms));
        let last_ts = unsealed.time.last_ts;
        self.state = SegmentState::Closing { unsealed, producer_snapshot };
        last_ts
    }

    /// Closing to sealed: its last flush trimmed it and wrote its index files through `file`.
    /// The tail is dropped; the file and indexes stay loaded.
    pub fn seal(&mut self, file: Rc<D::File>) {
        assert_eq!(self.durable_size, self.size, "a segment is sealed once all of it is durable");
        let state = std::mem::replace(&mut self.state, SegmentState::Sealed(SealedIndexes::NotLoaded));
        let SegmentState::Closing { unsealed, .. } = state else { panic!("seal of a segment that is not closing") };
        self.state =
            SegmentState::Sealed(SealedIndexes::Loaded { file, index: unsealed.index.index, time: unsealed.time });
    }

    /// A sealed segment's time index, read at open before anything else of it (SPEC T8.1).
    pub fn set_time_index(&mut self, time: TimeBuilder) {
        match &mut self.state {
            SegmentState::Sealed(indexes @ (SealedIndexes::NotLoaded | SealedIndexes::TimeOnly(_))) => {
                *indexes = SealedIndexes::TimeOnly(time)
            }
            _ => panic!("only a sealed segment not loaded yet takes its time index alone"),
        }
    }

    /// A sealed segment's file and indexes, loaded; what is already loaded is kept. An unsealed
    /// segment holds its own and is left alone.
    pub fn install_indexes(&mut self, file: Rc<D::File>, index: OffsetIndex, time: Option<TimeBuilder>) {
        let SegmentState::Sealed(indexes) = &mut self.state else { return };
        *indexes = match std::mem::replace(indexes, SealedIndexes::NotLoaded) {
            // Loaded without its time index (it was loaded when the load was planned): left as
            // it is, and a later read loads again (nothing unloads a time index, so this is
            // not expected).
            SealedIndexes::NotLoaded => match time {
                Some(time) => SealedIndexes::Loaded { file, index, time },
                None => SealedIndexes::NotLoaded,
            },
            SealedIndexes::TimeOnly(time) => SealedIndexes::Loaded { file, index, time },
            loaded @ SealedIndexes::Loaded { .. } => loaded,
        };
    }

    /// Rough memory held by this segment (tail and index).
    pub fn mem_bytes(&self) -> usize {
        self.tail().map_or(0, |t| t.mem_bytes()) + self.offset_index().map_or(0, |i| i.mem_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::MemDisk;

    #[test]
    fn offset_index_lookup_finds_last_entry_at_or_below() {
        let mut i = OffsetIndex::new(10);
        assert_eq!(i.lookup(5), 0);
        i.push(3, 100, Some(-1));
        i.push(9, 300, Some(5));
        assert_eq!(i.lookup(2), 0);
        assert_eq!(i.lookup(3), 100);
        assert_eq!(i.lookup(8), 100);
        assert_eq!(i.lookup(100), 300);
    }

    #[test]
    fn time_skip_narrows_a_scan_to_one_stretch_between_entries() {
        // spec: T6.3 — entries at offsets 10, 20, 30 (positions 1000, 2000, 3000); the batches
        // before each reach timestamps 50, 70 and 90 at most.
        let mut i = OffsetIndex::new(10);
        for (rel, pos, max) in [(10, 1000, 50), (20, 2000, 70), (30, 3000, 90)] {
            i.push(rel, pos, Some(max));
        }
        // t = 60: nothing before entry 10 reaches it, something before entry 20 does.
        assert_eq!(i.time_skip(0, 100, 60), Some((10, Some(1000))));
        // t = 80: start at entry 20, the answer's batch starts before entry 30.
        assert_eq!(i.time_skip(0, 100, 80), Some((20, Some(1000))));
        assert_eq!(i.time_skip(25, 100, 80), Some((25, Some(1000))), "never backwards");
        // t = 95: past the last entry; a limit at 25 stops at entry 20, with no span.
        assert_eq!(i.time_skip(0, 100, 95), Some((30, None)));
        assert_eq!(i.time_skip(0, 25, 95), Some((20, None)));
        // t = 40: the answer may be in the first stretch; from past entry 10 (records before
        // log start reached t): no span.
        assert_eq!(i.time_skip(0, 100, 40), Some((0, Some(1000))));
        assert_eq!(i.time_skip(15, 100, 40), Some((15, None)));
        // Without max-before timestamps (an entry pushed without one), no skip.
        i.push(40, 4000, None);
        assert_eq!(i.time_skip(0, 100, 60), None);
    }

    /// The tail returns exactly the bytes pushed, across full chunks and flush seals, and
    /// every write it hands out is page aligned with zero padding past the data.
    #[test]
    fn tail_keeps_bytes_across_seals() {
        let disk = MemDisk::new();
        let mut t = Tail::new(&disk, 0, &[], 8192);
        let mut model = Vec::new();
        let mut durable = 0u64;
        for i in 0..200u32 {
            let data: Vec<u8> = (0..(i * 37 % 3000 + 1)).map(|x| (x + i) as u8).collect();
            t.push(&disk, &data);
            model.extend_from_slice(&data);
            if i % 7 == 0 {
                t.seal_open(&disk, durable);
                let writes = t.take_writes();
                let n = writes.len();
                for w in &writes {
                    let b: &[u8] = w.buf.as_ref().as_ref();
                    assert_eq!(w.pos % PAGE, 0);
                    assert_eq!(b.len() as u64 % PAGE, 0);
                    let end = (w.pos as usize + b.len()).min(model.len());
                    assert_eq!(&b[..end - w.pos as usize], &model[w.pos as usize..end]);
                    assert!(b[end - w.pos as usize..].iter().all(|&x| x == 0), "padding must be zero");
                }
                assert_eq!(t.complete(n).count(), n);
                durable = model.len() as u64;
            }
            assert!(t.mem_start() <= durable);
            let from = t.mem_start();
            assert_eq!(t.copy_out(from, t.end()), model[from as usize..]);
        }
    }
}
