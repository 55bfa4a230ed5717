//! Truncation: removing every record at or after an offset (Kafka's `truncateTo`), for a Raft
//! log whose uncommitted entries conflict with the leader's and for a follower replica cutting
//! its divergent suffix (KIP-101); or removing every record and starting again, empty, at an
//! offset (Kafka's `truncateFullyAndStartAt`), for a replica whose log ends below the leader's
//! start (a Raft follower that installed a snapshot past its log).
//!
//! One mechanism, recovery's: the truncation is decided durably by an intent file
//! ([`TRUNCATE_FILE`], the offset), then the log is opened again, and [`Log::open`] carries
//! it out the way it recovers from a crash:
//! 1. the producer snapshots past the offset and the segments that begin at or past it (but
//!    the first) are deleted, newest first, so what is left is always a prefix of the log;
//! 2. the last segment left is rescanned as after an unclean shutdown, the scan stopping at
//!    the first batch that holds the offset or a later one, and the file is cut there and
//!    synced: its offset index, time index (continuing the sealed segments' entries, SPEC T5,
//!    T8), producer state and aborted transactions are rebuilt as appends built them;
//! 3. a cleaner checkpoint past the new end is lowered to it, and the intent file is removed.
//!
//! A restart deletes every snapshot and segment (newest first), the log start file and the
//! cleaner checkpoint in step 1, and opens an empty segment at the offset.
//!
//! A crash at any step leaves the intent in place, and the next open carries it out from the
//! start: every step is idempotent. A cut inside a batch removes the whole batch (batches are
//! atomic), so the log may end before the offset asked for: the new log end is returned.
//!
//! The cost is a rescan of the last segment left, as after an unclean shutdown (bounded by
//! `segment.bytes`); truncations are rare (a leader change).

use super::retention::delete_segment_files;
use super::scan::snapshot_path;
use super::{Log, OpenReport, CLEANER_CHECKPOINT, LOG_START_FILE, TRUNCATE_FILE};
use crate::io::Disk;
use crate::storage::error::{StorageError, StorageResult};
use crate::storage::format::index::{
    decode_cleaner_checkpoint, decode_log_start, decode_truncate_intent, encode_cleaner_checkpoint, encode_log_start,
    encode_truncate_intent,
};
use crate::storage::segment::{index_path, maxindex_path, timeindex_path, txnindex_path};
use std::path::Path;

/// What a truncation removes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// Every record at or after the offset.
    Suffix(i64),
    /// Every record; the log starts again, empty, at the offset.
    Restart(i64),
}

/// The truncation begun and not finished in `dir`, if any. A damaged intent file is an error:
/// guessing could resurrect a suffix that was meant to go, or cut one that was not.
pub(super) async fn read_intent<D: Disk>(disk: &D, dir: &Path) -> StorageResult<Option<Cut>> {
    let path = dir.join(TRUNCATE_FILE);
    match disk.read_file(&path).await? {
        None => Ok(None),
        Some(bytes) => match decode_truncate_intent(&bytes) {
            Some((false, offset)) => Ok(Some(Cut::Suffix(offset))),
            Some((true, offset)) => Ok(Some(Cut::Restart(offset))),
            None => Err(StorageError::Corrupt {
                path,
                position: 0,
                error: crate::storage::format::FormatError::BadRecords("unreadable suffix truncation intent"),
            }),
        },
    }
}

/// Step 1: delete the producer snapshots past the offset and the segments that begin at or
/// past it, but the first (newest first), updating the listing `bases` and `snapshots`; for a
/// restart, every one of them, then the log start file and the cleaner checkpoint.
pub(super) async fn drop_files<D: Disk>(
    disk: &D,
    dir: &Path,
    bases: &mut Vec<i64>,
    snapshots: &mut Vec<i64>,
    cut: Cut,
) -> StorageResult<()> {
    let (offset, keep) = match cut {
        Cut::Suffix(offset) => (offset, 1),
        Cut::Restart(_) => (i64::MIN, 0),
    };
    // Snapshots first: one left past the end would describe producers whose batches are gone.
    let mut removed_any = false;
    for &s in snapshots.iter().filter(|&&s| s > offset) {
        disk.remove_file(&snapshot_path(dir, s)).await?;
        removed_any = true;
    }
    if removed_any {
        disk.sync_dir(dir).await?;
    }
    snapshots.retain(|&s| s <= offset);
    while bases.len() > keep && *bases.last().expect("non-empty") >= offset {
        let base = bases.pop().expect("non-empty");
        tracing::info!(dir = %dir.display(), base, ?cut, "truncation: deleting segment");
        delete_segment_files(disk, dir, base).await?;
    }
    // The segment left last is active again: its index files describe batches that may be
    // cut (an aborted transaction's entry in its `.txnindex` would outlive its marker, as
    // sealing writes no empty `.txnindex`). The rescan rebuilds them in memory; its seal
    // writes them again.
    if let (Cut::Suffix(_), Some(&last)) = (cut, bases.last()) {
        disk.remove_file(&index_path(dir, last)).await?;
        disk.remove_file(&maxindex_path(dir, last)).await?;
        disk.remove_file(&timeindex_path(dir, last)).await?;
        disk.remove_file(&txnindex_path(dir, last)).await?;
        disk.sync_dir(dir).await?;
    }
    if let Cut::Restart(_) = cut {
        disk.remove_file(&dir.join(LOG_START_FILE)).await?;
        disk.remove_file(&dir.join(CLEANER_CHECKPOINT)).await?;
        disk.sync_dir(dir).await?;
    }
    Ok(())
}

/// Step 3, once the last segment is cut and synced at `end`: lower the cleaner checkpoint and
/// the log start past the new end to it (the batch holding the offset may have begun below
/// them: new records at those offsets must not count as cleaned, or come back below the
/// start), and remove the intent.
pub(super) async fn finish<D: Disk>(disk: &D, dir: &Path, end: i64) -> StorageResult<()> {
    let checkpoint = dir.join(CLEANER_CHECKPOINT);
    let cleaned_to = disk.read_file(&checkpoint).await?.as_deref().and_then(decode_cleaner_checkpoint);
    if cleaned_to.is_some_and(|c| c > end) {
        disk.write_file_atomic(&checkpoint, &encode_cleaner_checkpoint(end)).await?;
    }
    let start_file = dir.join(LOG_START_FILE);
    let start = disk.read_file(&start_file).await?.as_deref().and_then(decode_log_start);
    if start.is_some_and(|s| s > end) {
        disk.write_file_atomic(&start_file, &encode_log_start(end)).await?;
    }
    disk.remove_file(&dir.join(TRUNCATE_FILE)).await?;
    disk.sync_dir(dir).await?;
    tracing::info!(dir = %dir.display(), end, "suffix truncation done");
    Ok(())
}

impl<D: Disk> Log<D> {
    /// Whether `cut` has anything to do: `Ok(None)` when it is a suffix at or past the log end;
    /// an error for a suffix below the log start (the log is never cut below it: DeleteRecords'
    /// promise would come undone) or a restart at a negative offset.
    pub fn truncation_target(&self, cut: Cut) -> StorageResult<Option<Cut>> {
        let (start, end) = (self.log_start_offset(), self.log_end_offset());
        match cut {
            Cut::Suffix(offset) if offset < start => Err(StorageError::OffsetOutOfRange { offset, start, end }),
            // The segment left last would be one the cleaner compacted, which recovery's
            // rescan (gaps are a torn tail in the last segment) cannot take back.
            Cut::Suffix(offset) if offset < end && self.may_have_gaps && offset <= self.cleaned_to => {
                Err(StorageError::TruncationIntoCompacted { offset, cleaned_to: self.cleaned_to })
            }
            Cut::Suffix(offset) => Ok((offset < end).then_some(cut)),
            Cut::Restart(offset) if offset < 0 => Err(StorageError::OffsetOutOfRange { offset, start, end }),
            Cut::Restart(_) => Ok(Some(cut)),
        }
    }

    /// Once a truncation is decided ([`write_intent`]; everything appended durable, no flush
    /// running): no append is taken and no reader sees past what is left from now on, and the
    /// batch cache forgets the segments it touches.
    pub fn begin_truncate(&mut self, cut: Cut) {
        let offset = match cut {
            Cut::Suffix(offset) => offset,
            Cut::Restart(_) => i64::MIN,
        };
        self.durable_next_offset = self.durable_next_offset.min(offset.max(self.log_start_offset()));
        self.closing = true;
        // A read planned before now puts nothing in the cache (its bytes may be cut).
        self.generation += 1;
        self.forget_touched(offset);
    }

    /// Forget the cached bytes of every segment holding offsets at or past `offset`, and of
    /// the active one.
    fn forget_touched(&self, offset: i64) {
        if let Some(cache) = &self.cache {
            for s in self.segments.values().filter(|s| s.next_offset > offset || !s.is_sealed()) {
                cache.forget_segment(s.base_offset);
            }
        }
    }

    /// After the reopen that carried the truncation out: take over what lives across it
    /// (the batch cache, and counters that must keep moving forward), from the log it replaced.
    pub fn take_over(&mut self, old: &mut Log<D>) {
        // Every segment the old log had, for a read that began before the truncation (the
        // generation bump already keeps its bytes out; this is the belt to those braces).
        old.forget_touched(i64::MIN);
        self.cache = old.cache.take();
        // An index load or read planned on the old log is not installed in this one.
        self.generation = old.generation + 1;
        // A coordinator's check that no marker came in meanwhile fails across a truncation.
        self.markers_appended = old.markers_appended + 1;
        // The roles this node had: its leader epoch, and the replicas' high watermark (never
        // past what is left).
        self.leader_epoch = old.leader_epoch;
        let (start, end) = (self.log_start_offset(), self.log_end_offset());
        self.set_replicated_to(old.replicated_to.map(|r| r.min(end).max(start)));
    }

    /// An index load is in flight (its rebuilt index file could land in a directory being
    /// changed).
    pub fn loads_in_flight(&self) -> bool {
        std::rc::Rc::strong_count(&self.loads) > 1
    }

    /// Remove every record at or after `offset` (see the module's description), for an
    /// exclusive owner: everything appended is made durable first, then the log is replaced by
    /// the one opened again, which carries the cut out. Returns the report of that open (its
    /// `suffix_truncated_to` is the new log end: `offset`, or the start of the batch holding
    /// it), or an empty one when nothing was at or past `offset`.
    pub async fn truncate_to(&mut self, offset: i64) -> StorageResult<OpenReport> {
        self.cut(Cut::Suffix(offset)).await
    }

    /// Remove every record and start again, empty, at `offset` (Kafka's
    /// `truncateFullyAndStartAt`), for an exclusive owner; as [`Log::truncate_to`].
    pub async fn restart_at(&mut self, offset: i64) -> StorageResult<OpenReport> {
        self.cut(Cut::Restart(offset)).await
    }

    async fn cut(&mut self, cut: Cut) -> StorageResult<OpenReport> {
        let Some(target) = self.truncation_target(cut)? else {
            return Ok(OpenReport::default());
        };
        self.flush_all().await?;
        write_intent(&self.disk, &self.dir, target).await?;
        self.begin_truncate(target);
        let (log, report) = Log::open(self.disk.clone(), &self.dir.clone(), self.config.clone()).await?;
        let mut old = std::mem::replace(self, log);
        self.take_over(&mut old);
        Ok(report)
    }
}

/// Decide a truncation durably: from here on the log will be cut, by this open or, after a
/// crash, the next.
pub async fn write_intent<D: Disk>(disk: &D, dir: &Path, cut: Cut) -> StorageResult<()> {
    let bytes = match cut {
        Cut::Suffix(offset) => encode_truncate_intent(false, offset),
        Cut::Restart(offset) => encode_truncate_intent(true, offset),
    };
    disk.write_file_atomic(&dir.join(TRUNCATE_FILE), &bytes).await?;
    Ok(())
}
