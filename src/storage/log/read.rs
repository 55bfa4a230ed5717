//! Reads and lookups by time, as plans: what the log's state answers at once, and the I/O
//! (a [`DiskRead`], an [`IndexLoad`]) the caller runs without a borrow, before it asks again.
//!
//! [`Log::plan_read`] finds the segment and position of an offset (the offset index), serves
//! bytes still in the write tail from memory, and otherwise plans a disk read that stops at
//! the durable size. [`Log::plan_time_lookup`] binary-searches the segments' time indexes
//! (sound by T5.1) and plans a forward scan; `-3` scans back from the read limit
//! ([`Log::max_scan_start`]). A sealed segment's indexes load on first use ([`IndexLoad`]:
//! opened, checked, rebuilt when missing or damaged, SPEC T8.4).
//!
//! Invariants: a read never returns a partial batch, a batch past the read limit, or a batch
//! that skips the requested offset; every batch read from disk is checked (CRC) before it is
//! returned ([`pick_batches`]).
//!
//! Callers: `storage::access`, which runs the plans' loops for partitions and exclusive owners.

use super::scan::{optional, scan_segment, stored_time_index, time_index_of, ScanFrom, SegmentSpan};
use super::{Log, NeedIndex, ReadUpTo, MAX_STORED_BATCH};
use crate::config::LogConfig;
use crate::io::{Disk, DiskFile};
use crate::storage::error::{StorageError, StorageResult};
use crate::storage::format::index::{decode_max_index, decode_offset_index};
use crate::storage::format::stored::{check_stored, frame_len, BatchInfo, BatchWalk, MAX_HEADER_LEN};
use crate::storage::format::FormatError;
use crate::storage::segment::{index_path, log_path, maxindex_path, OffsetIndex, TimeBuilder};
use bytes::Bytes;
use std::path::PathBuf;
use std::rc::Rc;

impl<D: Disk> Log<D> {
    /// Plan a read of whole batches starting with the one that holds `offset`, up to about
    /// `max_bytes` (the first batch is returned whole even when larger, as KIP-74 asks).
    pub fn plan_read(&self, offset: i64, max_bytes: usize, upto: ReadUpTo) -> StorageResult<ReadPlan<D>> {
        let (start, end) = (self.log_start_offset(), self.log_end_offset());
        if offset < start || offset > end {
            return Err(StorageError::OffsetOutOfRange { offset, start, end });
        }
        let limit = match upto {
            ReadUpTo::HighWatermark => self.high_watermark(),
            ReadUpTo::Durable => self.durable_next_offset,
            ReadUpTo::LogEnd => end,
        };
        let empty = ReadPlan::Done(Bytes::new());
        if offset >= limit {
            return Ok(empty);
        }
        let (&base, seg) = self.segments.range(..=offset).next_back().expect("offset >= log start");
        if offset >= seg.next_offset {
            return Ok(empty);
        }
        let Some(index) = seg.offset_index() else {
            return Ok(ReadPlan::NeedIndex(NeedIndex::all(base)));
        };
        let mut start_pos = index.lookup((offset - base) as u32) as u64;
        if seg.tail().is_some() && offset >= self.durable_next_offset {
            // Not durable yet, so in memory. Flushes complete in segment order, so this
            // segment's durable_size is the batch boundary where durable_next_offset starts
            // (or 0 for a segment never flushed): start there, in the tail.
            start_pos = start_pos.max(seg.durable_size);
        }
        // (Below the high watermark: the durable bytes, cut to it once read.)
        let end_pos = match upto {
            ReadUpTo::HighWatermark | ReadUpTo::Durable => seg.durable_size,
            ReadUpTo::LogEnd => seg.size,
        };
        // What a read from memory copies: enough for the index's step to the offset, the batch
        // holding it and `max_bytes` more.
        let budget = (self.config.index_interval_bytes + 2 * self.config.max_message_bytes) as usize + max_bytes;
        let to = end_pos.min(start_pos + budget as u64);
        let pick = |bytes: Bytes, gaps: bool| -> StorageResult<Bytes> {
            let (kept, _, _) =
                pick_batches(&bytes, offset, max_bytes, 0, gaps, |_| Ok(())).map_err(|(at, error)| {
                    StorageError::Corrupt { path: log_path(&self.dir, base), position: start_pos + at as u64, error }
                })?;
            Ok(right_size(&bytes, kept))
        };
        if let Some(tail) = seg.tail().filter(|t| start_pos >= t.mem_start()) {
            // All in memory: copy what the read can use and walk it now.
            return Ok(ReadPlan::Done(pick(Bytes::from(tail.copy_out(start_pos, to)), self.may_have_gaps)?));
        }
        // Durable bytes the batch cache holds (chunks written a moment ago, recent reads). The
        // copy is first what a read usually needs (the index's step, `max_bytes` and a little);
        // only a first batch larger than that takes the whole budget. A batch the cached range
        // ends inside, and a compacted segment with nothing left at or past the offset, go to
        // disk.
        if let Some(cache) = &self.cache {
            let limit = to.min(seg.durable_size);
            let usual = limit.min(start_pos + self.config.index_interval_bytes + max_bytes as u64 + SLACK);
            for upto in [usual, limit] {
                let Some(bytes) = cache.read(base, start_pos, upto) else { break };
                let whole = start_pos + bytes.len() as u64 == upto;
                let bytes = pick(bytes, self.may_have_gaps)?;
                if !bytes.is_empty() {
                    cache.count(true, bytes.len());
                    return Ok(ReadPlan::Done(bytes));
                }
                if !whole || upto == limit {
                    break; // the cache holds no more of this segment from here
                }
            }
        }
        let file = seg.file().cloned();
        Ok(ReadPlan::Disk(DiskRead {
            file,
            base,
            generation: self.generation,
            path: log_path(&self.dir, base),
            // Bytes below durable_size are on disk; a read stops there and the consumer
            // fetches the rest (from memory) next time.
            start_pos,
            end_pos: end_pos.min(seg.durable_size),
            offset,
            max_bytes,
            slack: SLACK,
            gaps: self.may_have_gaps.then_some(seg.next_offset),
        }))
    }

    /// I/O to load a sealed segment's file handle and offset index for reads (and its time
    /// index, unless that is loaded already).
    pub fn index_load(&self, base: i64) -> IndexLoad<D> {
        let seg = &self.segments[&base];
        IndexLoad {
            time: (seg.time().is_none()).then(|| self.time_load(base)),
            disk: self.disk.clone(),
            dir: self.dir.clone(),
            base,
            size: seg.size,
            file: seg.file().cloned(),
            config: self.config.clone(),
            generation: self.generation,
            _in_flight: self.loads.clone(),
        }
    }

    /// Install what an [`IndexLoad`] produced (what is already loaded, or a segment that is
    /// gone, is left alone).
    pub fn install_index(&mut self, base: i64, loaded: SegmentIndexes<D>) {
        if loaded.generation != self.generation {
            return; // a compaction swap replaced segments since the load was planned
        }
        if let Some(seg) = self.segments.get_mut(&base) {
            seg.install_indexes(loaded.file, loaded.index, loaded.time);
        }
    }

    /// I/O to load a sealed segment's time index alone (one small file; rebuilt when missing
    /// or damaged, SPEC T8.3): what a decision by time needs of a segment it does not read.
    pub fn time_load(&self, base: i64) -> TimeLoad<D> {
        let spans = self.segments.range(..=base).map(|(_, s)| (s.base_offset, s.next_offset, s.size)).collect();
        TimeLoad {
            disk: self.disk.clone(),
            dir: self.dir.clone(),
            spans,
            config: self.config.clone(),
            generation: self.generation,
            _in_flight: self.loads.clone(),
        }
    }

    /// Install what a [`TimeLoad`] produced (a segment whose time index is loaded already, or
    /// that is gone, is left alone).
    pub fn install_time(&mut self, base: i64, loaded: LoadedTime) {
        if loaded.generation != self.generation {
            return;
        }
        if let Some(seg) = self.segments.get_mut(&base).filter(|s| s.is_sealed() && s.time().is_none()) {
            seg.set_time_index(loaded.time);
        }
    }

    /// Plan a lookup by time (SPEC T6) among records below the read limit. `-1`: the end,
    /// `-2`: the log start, `-3`: the record with the largest timestamp, otherwise the first
    /// record with a timestamp `>= t`. Binary search over segments and their time indexes
    /// for the last entry below `t` (sound by the T5.1 invariant), then a forward scan.
    pub fn plan_time_lookup(&self, t: i64, upto: ReadUpTo) -> TimePlan {
        let limit = match upto {
            ReadUpTo::HighWatermark => self.high_watermark(),
            ReadUpTo::Durable => self.durable_next_offset,
            ReadUpTo::LogEnd => self.log_end_offset(),
        };
        let t = match t {
            -1 => return TimePlan::Found(Some((limit, -1))),
            -2 => return TimePlan::Found(Some((self.log_start_offset(), -1))),
            // The largest timestamp among the records a reader can see (not the log-wide
            // maximum, which may be beyond the limit or already deleted): scanned back from
            // the limit, entry by entry ([`Log::max_scan_start`]).
            -3 => return TimePlan::ScanMax { limit },
            t if t < 0 => return TimePlan::Found(None),
            t => t,
        };
        let bases: Vec<i64> = self.segments.keys().copied().collect();
        // Binary search for the last segment holding an entry below t. Segments with an empty
        // time index (SPEC T5.4) are skipped towards the left.
        let (mut lo, mut hi) = (0usize, bases.len());
        let mut best: Option<i64> = None;
        while lo < hi {
            let mid = (lo + hi) / 2;
            let mut m = mid;
            let found = loop {
                let Some(time) = self.segments[&bases[m]].time() else {
                    // With the probes the search may make next whichever way it goes (two
                    // more levels), loaded together: one round of small reads for three levels.
                    let mut need = vec![bases[m]];
                    if m == mid {
                        let unloaded = |i: usize| self.segments[&bases[i]].time().is_none();
                        next_probes(lo, mid, SPECULATIVE_LEVELS, &mut need, &bases, &unloaded);
                        next_probes(mid + 1, hi, SPECULATIVE_LEVELS, &mut need, &bases, &unloaded);
                    }
                    return TimePlan::NeedTimes(need);
                };
                if let Some(&(first, _)) = time.entries.first() {
                    break Some((m, first, time));
                }
                if m == lo {
                    break None;
                }
                m -= 1;
            };
            match found {
                None => lo = mid + 1,
                Some((m, first, time)) if first < t => {
                    let (_, rel) = time.last_below(t).expect("first entry is below t");
                    best = Some(bases[m] + rel as i64);
                    lo = mid + 1;
                }
                Some((m, _, _)) => hi = m,
            }
        }
        TimePlan::Scan { from: best.unwrap_or(self.log_start_offset()).max(self.log_start_offset()), t, limit }
    }

    /// Where a `-3` scan ending before offset `before` starts: the last time-index entry at an
    /// offset below `before`, as (offset, timestamp), or `None` for the log start. Every record
    /// before an entry's offset has a smaller timestamp than the entry (T5.1), and the batch at
    /// the offset of a bucket or close entry holds a timestamp at least the entry's. So once a
    /// scan from an entry to the limit has found a timestamp at least the entry's, nothing
    /// earlier can beat it; if it has not, the entry was a T5.5 entry (a segment without
    /// timestamps; it names no record) and the scan steps back to the entry before.
    /// `Err(NeedIndex)`: load that segment's indexes first. Returns (offset, timestamp, base offset
    /// of the entry's segment).
    pub fn max_scan_start(&self, before: i64) -> Result<Option<(i64, i64, i64)>, NeedIndex> {
        let start = self.log_start_offset();
        for (&b, seg) in self.segments.range(..before).rev() {
            let Some(time) = seg.time() else { return Err(NeedIndex::time(b)) };
            if let Some(&(t, rel)) = time.entries.iter().rev().find(|&&(_, r)| b + (r as i64) < before) {
                return Ok(Some(((b + rel as i64).max(start), t, b)));
            }
        }
        Ok(None)
    }
}

impl<D: Disk> Log<D> {
    /// Where a lookup's forward scan (SPEC T6.3) for the first record with a timestamp `>= t`,
    /// at offset `at` and stopping before `limit`, goes on: an offset `>= at` in the segment
    /// holding `at`, past the batches its offset index's max-before timestamps show to be below
    /// `t`, and how many bytes from there hold the answer if that segment does (`None`: read as
    /// usual). `Err(NeedIndex)`: load that sealed segment's indexes first (its read needs them
    /// anyway).
    pub fn time_scan_skip(&self, at: i64, t: i64, limit: i64) -> Result<(i64, Option<usize>), NeedIndex> {
        let Some((&base, seg)) = self.segments.range(..=at).next_back() else { return Ok((at, None)) };
        if at >= seg.next_offset {
            return Ok((at, None));
        }
        if at - base > u32::MAX as i64 {
            // A follower's copy of a compacted log can span more offsets than an index
            // entry names (a gap at its end): nothing to skip there.
            return Ok((at, None));
        }
        let Some(index) = seg.offset_index() else { return Err(NeedIndex::all(base)) };
        let rel = |o: i64| (o - base).clamp(0, u32::MAX as i64) as u32;
        Ok(match index.time_skip(rel(at), rel(limit), t) {
            Some((start, span)) => (base + start as i64, span.map(|s| s as usize)),
            None => (at, None),
        })
    }
}

/// A planned read.
pub enum ReadPlan<D: Disk> {
    /// Answered from memory (or empty).
    Done(Bytes),
    /// Needs disk reads, without borrowing the log.
    Disk(DiskRead<D>),
    /// The segment's index must be loaded first ([`Log::index_load`]).
    NeedIndex(NeedIndex),
}

pub struct DiskRead<D: Disk> {
    file: Option<Rc<D::File>>,
    /// The segment's base offset, and the log's [`Log::generation`] when planned (for the
    /// batch cache: [`Log::cache_read`]).
    base: i64,
    generation: u64,
    path: PathBuf,
    start_pos: u64,
    end_pos: u64,
    offset: i64,
    max_bytes: usize,
    /// What a window takes past what is still wanted of `max_bytes`.
    slack: u64,
    /// The log may have gaps (it was compacted): a batch past `offset` is the answer, and
    /// when the segment holds nothing at or past it the read goes on at this offset (the
    /// next segment's base).
    gaps: Option<i64>,
}

impl<D: Disk> DiskRead<D> {
    /// Where a read that found nothing in this segment goes on (a compacted log's gap at
    /// the segment's end).
    pub fn skip_to(&self) -> Option<i64> {
        self.gaps
    }

    /// (segment base offset, log generation) when planned.
    pub fn segment(&self) -> (i64, u64) {
        (self.base, self.generation)
    }

    /// Read one window of `max_bytes` (at least [`MIN_WINDOW`]) from the planned position, the
    /// offset index's entry at or before the offset, and return the whole batches at or past the
    /// offset in it: the caller knows whole batches end there (a lookup's stretch between two
    /// offset-index entries). Only a window holding none of them is followed by more.
    pub fn exact(mut self) -> Self {
        self.slack = 0;
        self
    }

    /// Read from disk, checking each returned batch's CRC (bytes are vetted before they are
    /// written and after they are read). Returns the file position of the first byte, and the
    /// bytes (whole batches, contiguous).
    pub async fn run(self, disk: &D) -> StorageResult<(u64, Bytes)> {
        let file = match self.file {
            Some(f) => f,
            None => Rc::new(disk.open_existing(&self.path).await?),
        };
        let corrupt =
            |position: u64, error: FormatError| StorageError::Corrupt { path: self.path.clone(), position, error };
        // The kept batches of each window, as slices of the window (no copy).
        let mut parts: Vec<Bytes> = Vec::new();
        let mut first_pos = None;
        let mut collected = 0usize;
        let mut pos = self.start_pos;
        let mut want = 0usize;
        while pos < self.end_pos {
            // A default window bounded at 16 MiB (and at least a page, so it holds a frame's
            // length), or exactly one batch when it is larger.
            let rest = self.max_bytes.saturating_sub(collected) + self.slack as usize;
            let window = want.max(rest.clamp(MIN_WINDOW, 16 << 20));
            let len = (self.end_pos - pos).min(window as u64) as usize;
            let buf = Bytes::from(file.read_at(pos, len).await?);
            let (kept, walked, done) =
                pick_batches(&buf, self.offset, self.max_bytes, collected, self.gaps.is_some(), |b| {
                    check_stored(b).map(|_| ())
                })
                .map_err(|(at, e)| corrupt(pos + at as u64, e))?;
            let any = !kept.is_empty();
            if any {
                first_pos.get_or_insert(pos + kept.start as u64);
                collected += kept.len();
                parts.push(right_size(&buf, kept));
            }
            // An exact read is one window (its caller knows what it holds), unless that held
            // no whole batch at or past the offset.
            if done || (self.slack == 0 && any) {
                break;
            }
            if walked == 0 {
                // The next batch is longer than the window: read it whole.
                match frame_len(&buf, MAX_STORED_BATCH) {
                    Ok(Some(total)) if pos + total as u64 <= self.end_pos && total > buf.len() => want = total,
                    Ok(_) => return Err(corrupt(pos, FormatError::Truncated { need: 12, have: buf.len() })),
                    Err(error) => return Err(corrupt(pos, error)),
                }
                continue;
            }
            pos += walked as u64;
            want = 0;
        }
        // One window (the usual case) is returned as it is; several are joined (each window
        // after the first keeps from its start, where the one before stopped).
        let bytes = match parts.len() {
            0 => Bytes::new(),
            1 => parts.pop().expect("one part"),
            _ => Bytes::from(parts.concat()),
        };
        Ok((first_pos.unwrap_or(self.start_pos), bytes))
    }
}

/// What a read takes past `max_bytes` (a disk read's window, a cache copy's first try), so the
/// next batch usually comes whole.
const SLACK: u64 = 64 << 10;

/// The smallest window a disk read takes.
const MIN_WINDOW: usize = 4096;

/// The `kept` part of `bytes`: a slice, or a copy when it is less than half of them, so a small
/// answer does not keep a large buffer alive (in a response, or in the batch cache, where only
/// its own length is counted).
fn right_size(bytes: &Bytes, kept: std::ops::Range<usize>) -> Bytes {
    if kept.len() * 2 < bytes.len() {
        Bytes::copy_from_slice(&bytes[kept])
    } else {
        bytes.slice(kept)
    }
}

/// From the batches in `bytes` (starting at a batch boundary), keep the first one that holds
/// records at or after `offset` and those after it while the total (with `already` bytes
/// collected before) fits in `max_bytes`; the very first batch is kept whole even when it is
/// larger (KIP-74). The batches kept are contiguous: returns their byte range (empty when
/// none), the bytes walked and whether the read is complete. `check` vets each kept batch.
/// No bytes are copied: callers slice. With `gaps` (a compacted log) the first batch may
/// start past `offset`.
fn pick_batches(
    bytes: &[u8],
    offset: i64,
    max_bytes: usize,
    already: usize,
    gaps: bool,
    mut check: impl FnMut(&[u8]) -> Result<(), FormatError>,
) -> Result<(std::ops::Range<usize>, usize, bool), (usize, FormatError)> {
    let mut kept: Option<std::ops::Range<usize>> = None;
    let mut walk = BatchWalk::new(bytes, MAX_STORED_BATCH);
    while let Some(item) = walk.next() {
        let (at, h, batch) = item.map_err(|e| (walk.pos(), e))?;
        if h.last_offset < offset {
            if kept.is_some() {
                // Inside what the read returns, offsets never go back: a batch that does is
                // corrupt (found by fuzzing: one with a negative lastOffsetDelta was skipped
                // unchecked but served inside the returned range).
                check(batch).map_err(|e| (at, e))?;
                return Err((at, FormatError::OffsetGap { expected: offset, found: h.last_offset }));
            }
            continue;
        }
        let have = already + kept.as_ref().map_or(0, |r| r.len());
        if let Some(first) = h.first_offset.filter(|&f| have == 0 && f > offset && !gaps) {
            // The index (or the data) skipped the batch holding `offset`: never serve a read
            // that silently misses records.
            return Err((at, FormatError::OffsetGap { expected: offset, found: first }));
        }
        if have > 0 && have + batch.len() > max_bytes {
            return Ok((kept.unwrap_or(at..at), at, true));
        }
        check(batch).map_err(|e| (at, e))?;
        let end = at + batch.len();
        kept = Some(kept.map_or(at..end, |r| r.start..end));
    }
    let kept = kept.unwrap_or(0..0);
    let total = already + kept.len();
    Ok((kept, walk.pos(), total > 0 && total >= max_bytes))
}

/// A planned lookup by time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TimePlan {
    /// The answer: (offset, timestamp), or `None` (Kafka's -1, -1).
    Found(Option<(i64, i64)>),
    /// Load the time index of the first of these sealed segments, then plan again; the
    /// others are the search's possible next probes, worth loading in the same round (a
    /// failure to load one of them is no failure of the lookup).
    NeedTimes(Vec<i64>),
    /// Scan batches from offset `from` (a batch's first offset) for the first record with a
    /// timestamp `>= t` below offset `limit`.
    Scan { from: i64, t: i64, limit: i64 },
    /// Find the largest timestamp below offset `limit` and its first record, scanning back
    /// from the limit ([`Log::max_scan_start`]).
    ScanMax { limit: i64 },
}

/// Levels of a lookup's binary search over segments whose time indexes are loaded ahead,
/// together with the one it needs now: 2 makes a round of at most 7 small reads.
const SPECULATIVE_LEVELS: u32 = 2;

/// The segments (as bases) the binary search over `[lo, hi)` probes in its next `levels`
/// levels, whichever way each goes, that `unloaded` says have no time index in memory.
fn next_probes(lo: usize, hi: usize, levels: u32, out: &mut Vec<i64>, bases: &[i64], unloaded: &dyn Fn(usize) -> bool) {
    if levels == 0 || lo >= hi {
        return;
    }
    let mid = (lo + hi) / 2;
    if unloaded(mid) {
        out.push(bases[mid]);
    }
    next_probes(lo, mid, levels - 1, out, bases, unloaded);
    next_probes(mid + 1, hi, levels - 1, out, bases, unloaded);
}

/// Opening a sealed segment and loading (or rebuilding, SPEC T8.4) its offset index, and its
/// time index when that is not loaded yet.
pub struct IndexLoad<D: Disk> {
    time: Option<TimeLoad<D>>,
    disk: D,
    dir: PathBuf,
    base: i64,
    size: u64,
    file: Option<Rc<D::File>>,
    config: LogConfig,
    /// The log's [`Log::generation`] when planned.
    generation: u64,
    /// Held while the load exists: a compaction swap waits until no load is in flight (a
    /// load may write index files of the segments it swaps).
    _in_flight: Rc<()>,
}

impl<D: Disk> IndexLoad<D> {
    pub async fn run(self) -> StorageResult<SegmentIndexes<D>> {
        // Opening the data file, reading the offset index and loading the time index do not
        // depend on each other: one round of I/O, not three in a row (a cold lookup or read
        // waits for all of it).
        let ipath = index_path(&self.dir, self.base);
        let open = async {
            match self.file {
                Some(f) => Ok(f),
                None => Ok::<_, StorageError>(Rc::new(self.disk.open_existing(&log_path(&self.dir, self.base)).await?)),
            }
        };
        let time = async {
            match self.time {
                Some(load) => load.run().await.map(|t| Some(t.time)),
                None => Ok(None),
            }
        };
        let mpath = maxindex_path(&self.dir, self.base);
        let (file, (index_file, max_file), time) = futures_util::future::join3(
            open,
            futures_util::future::join(self.disk.read_file(&ipath), self.disk.read_file(&mpath)),
            time,
        )
        .await;
        let (file, index_file) = (file?, index_file?);
        let max_file = optional(max_file, &mpath);
        let max_entries = (self.config.segment_index_bytes / 8) as usize;
        let loaded = index_file.as_ref().map(|b| decode_offset_index(b, self.size.max(1)));
        // A well-formed index whose last entry does not point at the batch it names is as
        // corrupt as a torn one (SPEC T8.4): check it against the data.
        let loaded = match loaded {
            Some(Ok(entries)) => match entries.last() {
                Some(&(rel, pos)) => {
                    let head = file.read_at(pos as u64, MAX_HEADER_LEN).await?;
                    match BatchInfo::parse(&head) {
                        Ok(h) if h.index_offset() == self.base + rel as i64 => Some(Ok(entries)),
                        _ => Some(Err(crate::storage::format::index::IndexError::NotIncreasing(entries.len() - 1))),
                    }
                }
                None => Some(Ok(entries)),
            },
            other => other,
        };
        // A sealed segment takes no more batches: the index alone, not a builder to continue.
        let index = match loaded {
            Some(Ok(entries)) => {
                // Its max-before timestamps, when the file beside it was written for it.
                let n = entries.len();
                let max = max_file.zip(index_file).and_then(|(m, i)| decode_max_index(&m, &i, n));
                OffsetIndex::from_entries(entries, max_entries).with_max_before(max)
            }
            other => {
                match other {
                    // A compacted segment's indexes are rebuilt on first use: expected.
                    None => tracing::info!(path = %ipath.display(), "building a missing offset index"),
                    Some(Err(e)) => tracing::warn!(path = %ipath.display(), reason = %e, "rebuilding offset index"),
                    Some(Ok(_)) => unreachable!("handled above"),
                }
                let scan =
                    scan_segment(&*file, self.base, self.size, ScanFrom::start(self.base, &self.config, None)).await?;
                if let Some((pos, e)) = scan.stop {
                    return Err(StorageError::Corrupt {
                        path: log_path(&self.dir, self.base),
                        position: pos,
                        error: e,
                    });
                }
                let index = scan.index.index;
                let bytes = index.encode();
                // The old `.maxtimeindex` goes first: it could name a `.index` of the same
                // bytes over other data.
                self.disk.remove_file(&mpath).await?;
                self.disk.write_file_atomic(&ipath, &bytes).await?;
                if let Some(max) = index.encode_max(&bytes) {
                    self.disk.write_file_atomic(&mpath, &max).await?;
                }
                index
            }
        };
        Ok(SegmentIndexes { file, index, time: time?, generation: self.generation })
    }
}

/// What [`IndexLoad`] brings: a sealed segment's open file, its offset index and (unless it
/// was loaded already) its time index.
pub struct SegmentIndexes<D: Disk> {
    pub file: Rc<D::File>,
    pub index: OffsetIndex,
    pub time: Option<TimeBuilder>,
    generation: u64,
}

/// Loading (or rebuilding, SPEC T8.3) a sealed segment's time index.
pub struct TimeLoad<D: Disk> {
    disk: D,
    dir: PathBuf,
    /// This segment and the ones before it, for a rebuild's context.
    spans: Vec<SegmentSpan>,
    config: LogConfig,
    /// The log's [`Log::generation`] when planned.
    generation: u64,
    /// Held while the load exists, as [`IndexLoad`]'s (a rebuild writes the index file).
    _in_flight: Rc<()>,
}

impl<D: Disk> TimeLoad<D> {
    pub async fn run(self) -> StorageResult<LoadedTime> {
        let (time, _) = time_index_of(&self.disk, &self.dir, &self.spans, self.spans.len() - 1, &self.config).await?;
        Ok(LoadedTime { time, generation: self.generation })
    }

    /// The time index as stored, or `None` when it is missing or damaged: a load ahead of need
    /// (a lookup's next probes) never turns into a rebuild, which scans the segment and writes
    /// the file (two rebuilds of one segment at once would share its temporary file).
    pub async fn run_stored(self) -> StorageResult<Option<LoadedTime>> {
        let span = *self.spans.last().expect("the segment's own span");
        let time = stored_time_index(&self.disk, &self.dir, span, &self.config).await?;
        Ok(time.map(|time| LoadedTime { time, generation: self.generation }))
    }
}

/// What [`TimeLoad`] brings.
pub struct LoadedTime {
    time: TimeBuilder,
    generation: u64,
}
