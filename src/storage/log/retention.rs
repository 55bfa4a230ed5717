//! Retention decisions: which segments leave the log, and the log start.
//!
//! Expiry by time (SPEC T7.2: a segment's largest timestamp, from its time index) and by size
//! (T7.3), a log start moved by DeleteRecords (KIP-107), segments wholly below an offset
//! (compaction by rewrite), and the upkeep of idempotent producers. Each decision removes
//! segments from the log in memory and returns their base offsets; the caller deletes their
//! files ([`delete_segment_files`]) afterwards, without a borrow held.
//!
//! Invariants: only a prefix of the log is removed, only sealed segments, and only while the
//! next segment's file exists (the log start is the first file's base offset); the active
//! segment is rolled first and goes at a later pass; nothing is removed once closing began.
//!
//! Callers: `storage::access` (upkeep, DeleteRecords, remove_before) and exclusive owners.

use super::{Log, NeedIndex};
use crate::io::Disk;
use crate::storage::error::{StorageError, StorageResult};
use crate::storage::segment::{index_path, log_path, maxindex_path, timeindex_path, txnindex_path};
use std::path::Path;

impl<D: Disk> Log<D> {
    /// DeleteRecords (KIP-107): the log start that deleting the records below `offset` gives
    /// (`-1`: below the high watermark); the current one when `offset` is not past it. An
    /// offset below zero or past the high watermark is refused (OFFSET_OUT_OF_RANGE).
    pub fn start_after_delete(&self, offset: i64) -> StorageResult<i64> {
        let (start, hw) = (self.log_start_offset(), self.high_watermark());
        let target = if offset == -1 { hw } else { offset };
        if !(0..=hw).contains(&target) {
            return Err(StorageError::OffsetOutOfRange { offset, start, end: hw });
        }
        Ok(target.max(start))
    }

    /// Move the log start to `offset` (persisted by the caller in
    /// [`LOG_START_FILE`](super::LOG_START_FILE) first, never past the high watermark) and
    /// remove from the log the sealed segments that now lie wholly below it; the caller deletes
    /// their files. A non-empty active segment wholly below it is rolled, to go at a later
    /// upkeep pass.
    pub fn set_log_start(&mut self, offset: i64, now: i64) -> Vec<i64> {
        assert!(offset <= self.durable_next_offset, "log start {offset} past the durable end");
        self.start_offset = self.start_offset.max(offset);
        let active = self.active();
        if active.is_active() && active.size > 0 && active.next_offset <= self.start_offset {
            self.roll(now);
        }
        self.take_segments_before(self.log_start_offset())
    }

    /// SPEC T7.2: the largest timestamp of segment `base`: its last time-index entry, or an
    /// earlier segment's when its own index is empty. `Err(NeedIndex)` when an index must be loaded.
    pub(super) fn largest_timestamp_of(&self, base: i64) -> Result<Option<i64>, NeedIndex> {
        for (&b, seg) in self.segments.range(..=base).rev() {
            let Some(time) = seg.time() else { return Err(NeedIndex::time(b)) };
            if let Some(&(t, _)) = time.entries.last() {
                return Ok(Some(t));
            }
        }
        Ok(self.deleted_last_ts)
    }

    /// SPEC T7.2, T7.3 (with `delete` in `cleanup.policy`): remove from the log the oldest segments whose largest timestamp is
    /// more than `retention.ms` before `now` (a prefix only; an expired active segment is
    /// rolled first and goes at a later check, once sealed). A segment whose largest
    /// timestamp is in the future is kept and logged. `Err(NeedIndex)`: load that segment's
    /// indexes and call again. The caller deletes the returned segments' files.
    pub fn take_expired_by_time(&mut self, now: i64) -> Result<Vec<i64>, NeedIndex> {
        let Some(retention) = self.config.retention_ms.filter(|_| !self.closing && self.config.cleanup_delete) else {
            return Ok(Vec::new());
        };
        let retention = retention.min(i64::MAX as u64) as i64;
        let mut removed = Vec::new();
        loop {
            let base = self.first_base();
            let seg = &self.segments[&base];
            let largest = match self.largest_timestamp_of(base) {
                Ok(Some(t)) => t,
                Ok(None) => break,
                Err(need) if removed.is_empty() => return Err(need),
                Err(_) => break, // report what was removed; the next call loads the rest
            };
            if largest > now {
                tracing::warn!(dir = %self.dir.display(), base, largest, now, "segment's largest timestamp is in the future; kept");
                break;
            }
            if now.saturating_sub(largest) <= retention {
                break;
            }
            if seg.is_active() {
                if seg.size > 0 {
                    self.roll(now);
                }
                break;
            }
            if !self.removable_first() {
                break;
            }
            self.deleted_last_ts = seg.time().and_then(|t| t.entries.last().map(|e| e.0)).or(self.deleted_last_ts);
            self.remove_segment(base);
            removed.push(base);
        }
        self.trim_aborted();
        Ok(removed)
    }

    /// The first segment may be deleted: it is sealed, the next one exists on disk (the log
    /// start is the first file's base offset, and a new active segment's file appears only
    /// with its first flush), and it lies wholly below the high watermark (Kafka's bound: the
    /// log start never passes the high watermark, so retention never takes what an in-sync
    /// follower has not copied yet).
    fn removable_first(&self) -> bool {
        let mut it = self.segments.values();
        match (it.next(), it.next()) {
            (Some(first), Some(next)) => {
                !self.swapping
                    && first.is_sealed()
                    && (next.is_sealed() || next.file().is_some())
                    && first.next_offset <= self.high_watermark()
            }
            _ => false,
        }
    }

    /// Remove the oldest sealed segments beyond `retention.bytes` from the log; the caller
    /// deletes their files with [`delete_segment_files`]. The active segment is never removed.
    pub fn take_expired_by_size(&mut self) -> Vec<i64> {
        let Some(limit) = self.config.retention_bytes.filter(|_| !self.closing && self.config.cleanup_delete) else {
            return Vec::new();
        };
        let mut total = self.size_bytes();
        let mut removed = Vec::new();
        while self.removable_first() {
            let (&base, seg) = self.segments.iter().next().expect("non-empty");
            if total.saturating_sub(limit) < seg.size {
                break;
            }
            total -= seg.size;
            if let Some(&(t, _)) = seg.time().and_then(|t| t.entries.last()) {
                self.deleted_last_ts = Some(t);
            }
            self.remove_segment(base);
            removed.push(base);
        }
        self.trim_aborted();
        removed
    }

    /// Remove from the log the oldest sealed segments that lie wholly below `offset` (never the
    /// active one); the caller deletes their files. What `__consumer_offsets` compaction uses
    /// once the live records are written again past `offset`.
    pub fn take_segments_before(&mut self, offset: i64) -> Vec<i64> {
        let mut removed = Vec::new();
        while !self.closing && self.removable_first() {
            let (&base, seg) = self.segments.iter().next().expect("non-empty");
            if seg.next_offset > offset {
                break;
            }
            if let Some(&(t, _)) = seg.time().and_then(|t| t.entries.last()) {
                self.deleted_last_ts = Some(t);
            }
            self.remove_segment(base);
            removed.push(base);
        }
        self.trim_aborted();
        removed
    }

    /// Forget idempotent producers idle for `producer.id.expiration.ms` (upkeep). Returns how
    /// many.
    pub fn expire_producers(&mut self, now: i64) -> usize {
        let ttl = self.config.producer_id_expiration_ms.min(i64::MAX as u64) as i64;
        self.producers.expire(now.saturating_sub(ttl))
    }
}

/// Delete a removed segment's files (log first: an index left alone is cleaned at open).
pub async fn delete_segment_files<D: Disk>(disk: &D, dir: &Path, base: i64) -> StorageResult<()> {
    disk.remove_file(&log_path(dir, base)).await?;
    disk.remove_file(&index_path(dir, base)).await?;
    disk.remove_file(&maxindex_path(dir, base)).await?;
    disk.remove_file(&timeindex_path(dir, base)).await?;
    disk.remove_file(&txnindex_path(dir, base)).await?;
    disk.sync_dir(dir).await?;
    Ok(())
}
