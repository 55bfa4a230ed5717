//! The log's side of compaction: which part of the log may be cleaned, the swap of cleaned
//! segments for the originals, and the files that make the swap atomic.
//!
//! **Cleanable range**: sealed segments from the log's first, up to (not including) the
//! first that is not sealed, reaches past the last stable offset (so nothing above the high
//! watermark or in an open transaction is cleaned), or holds a record younger than
//! `min.compaction.lag.ms` (by its largest timestamp). Its dirty part starts at the cleaner
//! checkpoint ([`CLEANER_CHECKPOINT`], the end of the last pass).
//!
//! **Swap** (docs/format.md, "Compaction files"): a group of consecutive segments
//! `[b, n)` is cleaned into `<b>.<n>.cleaned` (and `<b>.<n>.txncleaned`, its aborted
//! transactions), synced; the rename to `<b>.<n>.swap` is the commit point; then every
//! segment file of `[b, n)` is removed, the `.txncleaned` becomes `<b>.txnindex` and the
//! `.swap` becomes `<b>.log`, and the directory is synced. [`finish_swap_files`] does the
//! last step for the cleaner and, after a crash, for [`Log::open`], which also deletes
//! `.cleaned` and `.txncleaned` files left without a `.swap`. So a crash at any step leaves
//! the old segments or the new one, never a mix. The new segment's offset and time indexes
//! are rebuilt by the recovery scan on first use (SPEC T5: what recovery would build).
//!
//! While a swap runs ([`Log::begin_swap`] .. [`Log::complete_swap`]) retention removes
//! nothing (the group's files are changing) and every segment of the group has its file
//! open and indexes loaded, so reads go on from the old files until the new one is in.
//!
//! Callers: `storage::cleaner` and `Log::open`.

use super::scan::{parse_segment_name, SegmentSpan};
use super::{Log, NeedIndex};
use crate::io::{Disk, IoResult};
use crate::storage::format::txn_index::AbortedTxn;
use crate::storage::segment::{log_path, txnindex_path, Segment};
use std::path::{Path, PathBuf};

/// File name of a partition's cleaner checkpoint: the first dirty offset (the end of the
/// last cleaning pass). Its presence also says the log may have offset gaps.
pub const CLEANER_CHECKPOINT: &str = "cleaner-offset-checkpoint";

pub fn cleaned_path(dir: &Path, base: i64, next: i64) -> PathBuf {
    dir.join(format!("{base:020}.{next:020}.cleaned"))
}
pub fn txn_cleaned_path(dir: &Path, base: i64, next: i64) -> PathBuf {
    dir.join(format!("{base:020}.{next:020}.txncleaned"))
}
pub fn swap_path(dir: &Path, base: i64, next: i64) -> PathBuf {
    dir.join(format!("{base:020}.{next:020}.swap"))
}

/// A compaction file's name: (base, next, kind) for `<base>.<next>.<kind>`.
pub(super) fn parse_swap_name(name: &str) -> Option<(i64, i64, &str)> {
    let (base, rest) = parse_segment_name(name)?;
    let (next, kind) = parse_segment_name(rest)?;
    matches!(kind, "cleaned" | "txncleaned" | "swap").then_some((base, next, kind))
}

/// Complete a committed swap of `[base, next)`: remove every segment file of the range (the
/// old `.log` files but `base`'s, which the rename replaces, and every index but `base`'s
/// `.txnindex`, which the next rename replaces), move the cleaned aborted-transaction index in
/// over `<base>.txnindex`, rename the `.swap` over `<base>.log`, sync the directory.
/// Idempotent: a crash inside it is finished by running it again. Every swap has a
/// `.txncleaned` (empty when no entry stays) until this moves it: when there is none,
/// `<base>.txnindex` is already the cleaned one.
pub async fn finish_swap_files<D: Disk>(disk: &D, dir: &Path, base: i64, next: i64) -> IoResult<()> {
    for name in disk.list_dir(dir).await? {
        let Some((b, ext)) = parse_segment_name(&name) else { continue };
        let index = matches!(ext, "index" | "maxtimeindex" | "timeindex") || (ext == "txnindex" && b != base);
        if (base..next).contains(&b) && (index || (ext == "log" && b != base)) {
            disk.remove_file(&dir.join(&name)).await?;
        }
    }
    let txn = txn_cleaned_path(dir, base, next);
    if disk.exists(&txn).await? {
        disk.rename(&txn, &txnindex_path(dir, base)).await?;
    }
    disk.rename(&swap_path(dir, base, next), &log_path(dir, base)).await?;
    disk.sync_dir(dir).await
}

/// At open, before the segments are listed: finish every committed swap, delete what an
/// uncommitted one left. Returns how many swaps were finished.
pub(super) async fn recover_swaps<D: Disk>(disk: &D, dir: &Path) -> IoResult<usize> {
    let mut swaps = Vec::new();
    let mut leftovers = Vec::new();
    for name in disk.list_dir(dir).await? {
        match parse_swap_name(&name) {
            Some((b, n, "swap")) => swaps.push((b, n)),
            Some((b, n, _)) => leftovers.push((b, n, name)),
            None => {}
        }
    }
    for &(b, n) in &swaps {
        tracing::warn!(dir = %dir.display(), base = b, next = n, "finishing an interrupted compaction swap");
        finish_swap_files(disk, dir, b, n).await?;
    }
    for (b, n, name) in leftovers {
        if !swaps.contains(&(b, n)) {
            disk.remove_file(&dir.join(name)).await?;
        }
    }
    if !swaps.is_empty() {
        disk.sync_dir(dir).await?;
    }
    Ok(swaps.len())
}

/// What [`Log::begin_swap`] says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SwapStart {
    Go,
    Changed,
    Wait,
}

/// What a cleaning pass may do now ([`Log::clean_target`]).
#[derive(Debug, Clone)]
pub struct CleanTarget {
    /// The sealed segments of the cleanable range, oldest first: `[first base, end)`.
    pub segments: Vec<SegmentSpan>,
    /// Each segment's last time-index entry: (timestamp, offset), if it has one.
    pub last_entries: Vec<Option<(i64, i64)>>,
    /// Where the dirty part begins (a segment's base, or the range's start).
    pub first_dirty: i64,
    pub end: i64,
    pub dirty_bytes: u64,
    pub clean_bytes: u64,
    /// The earliest first-batch timestamp of the dirty segments (Kafka's, for
    /// `max.compaction.lag.ms` and the compaction delay metric): filled in by
    /// `cleaner::clean_target`, which reads what the segments do not know.
    pub oldest_dirty_ts: Option<i64>,
    /// Aborted transactions that may hold data in the range.
    pub aborted: Vec<AbortedTxn>,
}

impl CleanTarget {
    /// The dirty share of the cleanable range (0 when it is empty).
    pub fn dirty_ratio(&self) -> f64 {
        let total = self.dirty_bytes + self.clean_bytes;
        if total == 0 {
            0.0
        } else {
            self.dirty_bytes as f64 / total as f64
        }
    }
}

impl<D: Disk> Log<D> {
    /// The cleanable range now, if it has a dirty part. `Err(NeedIndex)`: a segment's
    /// largest timestamp is needed (`min.compaction.lag.ms`, the oldest dirty segment's age).
    pub fn clean_target(&self, now: i64) -> Result<Option<CleanTarget>, NeedIndex> {
        if self.closing || self.swapping {
            return Ok(None);
        }
        let stable = self.last_stable_offset();
        let lag = self.config.min_compaction_lag_ms.min(i64::MAX as u64) as i64;
        let mut segments = Vec::new();
        let mut last_entries = Vec::new();
        let mut it = self.segments.iter().peekable();
        while let Some((&base, seg)) = it.next() {
            // The next segment's file must exist: the last file of the directory is the one
            // recovery rescans strictly (and whose end gives the log end), never a cleaned one.
            let next_on_disk = it.peek().is_some_and(|(_, n)| n.is_sealed() || n.file().is_some());
            if !seg.is_sealed() || !next_on_disk || seg.next_offset > stable {
                break;
            }
            if lag > 0 {
                let largest = self.largest_timestamp_of(base)?;
                if largest.is_some_and(|t| t > now.saturating_sub(lag)) {
                    break;
                }
            }
            segments.push((base, seg.next_offset, seg.size));
            let Some(time) = seg.time() else { return Err(NeedIndex::time(base)) };
            last_entries.push(time.entries.last().map(|&(t, rel)| (t, base + rel as i64)));
        }
        let Some(&(_, end, _)) = segments.last() else { return Ok(None) };
        let first_dirty = self.cleaned_to.max(segments[0].0);
        if first_dirty >= end {
            return Ok(None);
        }
        let (mut dirty_bytes, mut clean_bytes) = (0, 0);
        for &(_, next, size) in &segments {
            if next > first_dirty {
                dirty_bytes += size;
            } else {
                clean_bytes += size;
            }
        }
        let start = segments[0].0;
        let aborted = self.aborted.iter().filter(|t| t.last_offset >= start && t.first_offset < end).copied().collect();
        Ok(Some(CleanTarget {
            segments,
            last_entries,
            first_dirty,
            end,
            dirty_bytes,
            clean_bytes,
            oldest_dirty_ts: None,
            aborted,
        }))
    }

    /// What segment `base` knows of its first batch's largest timestamp (see
    /// `Segment::first_batch_ts`); `None` when it does not (or is gone).
    pub fn first_batch_ts(&self, base: i64) -> Option<i64> {
        self.segments.get(&base).and_then(|s| s.first_batch_ts)
    }

    /// Note segment `base`'s first batch's largest timestamp, read by the cleaner.
    pub fn set_first_batch_ts(&mut self, base: i64, ts: i64) {
        if let Some(s) = self.segments.get_mut(&base) {
            s.first_batch_ts = Some(ts);
        }
    }

    /// Whether the log may have offset gaps (it was compacted): reads and scans then accept a
    /// batch that starts past the offset expected.
    pub fn may_have_gaps(&self) -> bool {
        self.may_have_gaps
    }

    /// The first dirty offset (the end of the last cleaning pass), `i64::MIN` when none.
    pub fn cleaned_to(&self) -> i64 {
        self.cleaned_to
    }

    /// A cleaning pass is about to write: from now on the log may have gaps (the caller wrote
    /// the checkpoint file first).
    pub fn set_cleaned_to(&mut self, offset: i64) {
        self.may_have_gaps = true;
        self.cleaned_to = self.cleaned_to.max(offset);
    }

    /// Before committing the swap of `group` (consecutive sealed segments): check they are
    /// all still there, unchanged, with their files open and indexes loaded, and no index
    /// load is in flight (one could write a group segment's index files after the swap
    /// removed them), and hold off retention until [`Log::complete_swap`] or
    /// [`Log::abandon_swap`]. `Ok(Go)`: commit; `Ok(Changed)`: the log changed (or is
    /// closing), give the pass up; `Ok(Wait)`: ask again shortly. `Err(NeedIndex)`: load it
    /// and ask again.
    pub fn begin_swap(&mut self, group: &[SegmentSpan]) -> Result<SwapStart, NeedIndex> {
        if self.closing || self.swapping {
            return Ok(SwapStart::Changed);
        }
        for &(base, next, size) in group {
            match self.segments.get(&base) {
                Some(s) if s.is_sealed() && s.next_offset == next && s.size == size => {
                    if s.offset_index().is_none() {
                        return Err(NeedIndex::all(base));
                    }
                }
                _ => return Ok(SwapStart::Changed),
            }
        }
        if self.loads_in_flight() {
            return Ok(SwapStart::Wait);
        }
        self.swapping = true;
        Ok(SwapStart::Go)
    }

    /// The swap of `group` is on disk: one sealed segment of `size` bytes replaces it, its
    /// indexes to load on first use; `kept` are the aborted transactions whose markers it
    /// still holds (the others in its range are gone with their markers).
    pub fn complete_swap(&mut self, group: &[SegmentSpan], size: u64, kept: Vec<AbortedTxn>) {
        assert!(self.swapping, "complete_swap without begin_swap");
        let (base, next) = (group[0].0, group.last().expect("a group").1);
        for &(b, _, _) in group {
            self.remove_segment(b);
        }
        self.segments.insert(base, Segment::sealed(base, next, size));
        self.aborted.retain(|t| !(base..next).contains(&t.last_offset));
        self.aborted.extend(kept);
        self.aborted.sort_by_key(|t| t.last_offset);
        self.generation += 1;
        self.swapping = false;
    }

    /// The swap begun was not committed: retention may go on.
    pub fn abandon_swap(&mut self) {
        self.swapping = false;
    }
}
