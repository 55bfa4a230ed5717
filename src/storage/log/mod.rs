//! A partition log: an ordered set of segments in one directory.
//!
//! Appends are synchronous and in memory ([`Log::append`]): validate every batch first, then
//! assign offsets and copy each batch once into the active segment's tail. Rolling only
//! switches the active segment in memory. All write I/O goes through flush jobs
//! ([`Log::prepare_flush`] → [`FlushWork::write`] → [`Written::finish`] →
//! [`Log::complete_flush`]), pipelined by the partition's flusher (full chunks are written
//! while the previous commit syncs), segment by segment in offset order: create the file, write the
//! sealed chunks (several in flight), fdatasync, and for a rolled segment trim it and write
//! its index files. So the log's state is never borrowed across an await.
//!
//! Crash safety rests on one invariant: **every segment but the last is sealed** (trimmed,
//! index synced) before the next segment's file is created. Recovery after an unclean
//! shutdown therefore scans only the last segment (SPEC T8.2); a clean-shutdown marker lets
//! it skip even that. Closed segments are opened lazily, on first read.
//!
//! The log's jobs, one file each, all on the one [`Log`] struct defined here:
//! - `recovery`: [`Log::open`]: listing the directory, the backward time-index scan (T8.1),
//!   resuming after a clean shutdown or rescanning the last segment, producer state at open;
//!   the one segment scan and the index loads and rebuilds that lazy loading reuses.
//! - `append`: [`Log::append`] (checks, then copies), rolls, the close of the active segment.
//! - `flush`: flush jobs ([`FlushWork`], [`Written`], [`FlushDone`]), their pipeline, and the
//!   failure that suspends appends.
//! - `read`: read plans and [`DiskRead`], index loading ([`IndexLoad`], [`TimeLoad`]), time-lookup plans.
//! - `retention`: expiry by time and size, the log start (DeleteRecords), segments before an
//!   offset, and deleting a removed segment's files.
//!
//! This file holds the state, the types the jobs share and the small accessors. The log's
//! methods are synchronous, except `open` and the few that run a whole operation for an
//! exclusive owner (tests, tools); a partition shares the log between its tasks and never holds
//! a borrow of it across an await.

use crate::config::LogConfig;
use crate::io::{Disk, IoError};
use crate::storage::cache::CacheHandle;
use crate::storage::error::StorageResult;
use crate::storage::format::txn_index::{self, AbortedTxn};
use crate::storage::producers::ProducerState;
use crate::storage::segment::{Segment, TimeBuilder};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

mod append;
mod clean;
mod epochs;
mod flush;
mod read;
mod recovery;
mod retention;
mod scan;
mod truncate;

pub use clean::{
    cleaned_path, finish_swap_files, swap_path, txn_cleaned_path, CleanTarget, SwapStart, CLEANER_CHECKPOINT,
};
pub use epochs::{Epochs, EPOCH_FILE};
pub use flush::{FlushDone, FlushWork, SealWork, Written};
pub use read::{DiskRead, IndexLoad, LoadedTime, ReadPlan, SegmentIndexes, TimeLoad, TimePlan};
pub use retention::delete_segment_files;
pub use scan::SegmentSpan;
pub use truncate::{write_intent as write_truncate_intent, Cut};

/// File name of the clean-shutdown marker in a partition directory.
pub const CLEAN_MARKER: &str = "clean-shutdown";

/// File name of the log start offset that DeleteRecords set (docs/format.md, section 8a).
pub const LOG_START_FILE: &str = "log-start-offset";

/// File name of a suffix truncation's intent (docs/format.md, section 8c): present from the
/// moment the truncation is decided until the log has been cut.
pub const TRUNCATE_FILE: &str = "truncate-to";

/// Largest batch a stored log may hold (positions are u32; Kafka caps sizes at i32::MAX).
const MAX_STORED_BATCH: usize = i32::MAX as usize;

/// A sealed segment's indexes are not loaded yet: load them and ask again. What a plan or a
/// retention decision returns when it cannot answer from memory; `storage::access` does the
/// load, with no borrow of the log held across it. Reads need the open file and the offset
/// index too ([`Log::index_load`], [`Log::install_index`]); decisions by time (a lookup's
/// search over segments, retention, the cleaner's lag) only the time index, one small file
/// ([`Log::time_load`], [`Log::install_time`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NeedIndex {
    /// The segment's base offset.
    pub base: i64,
    /// Only the time index is needed.
    pub time_only: bool,
}

impl NeedIndex {
    /// The file, the offset index and the time index (a read).
    pub fn all(base: i64) -> Self {
        NeedIndex { base, time_only: false }
    }

    /// The time index alone.
    pub fn time(base: i64) -> Self {
        NeedIndex { base, time_only: true }
    }
}

/// What an append did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendInfo {
    pub base_offset: i64,
    pub last_offset: i64,
    pub records: u64,
    pub bytes: u64,
    /// The broker's timestamp for LogAppendTime topics, -1 otherwise (SPEC T3.4).
    pub log_append_time: i64,
}

/// What the caller should do about durability after an append (flush policy).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushDemand {
    /// `flush.messages` reached: wait until the append is durable.
    Wait,
    /// Start a flush but do not wait (a chunk is full, or a segment rolled).
    Kick,
    /// Nothing now; `flush.ms` will cover it.
    None,
}

/// Which records a read may return.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadUpTo {
    /// Only records below the high watermark ([`Log::high_watermark`]): what a consumer sees.
    HighWatermark,
    /// Only durable records (what a follower copies: on a leader not yet replicated, they
    /// may be past the high watermark).
    Durable,
    /// Everything appended, durable or not.
    LogEnd,
}

/// How the log was opened.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OpenReport {
    pub clean: bool,
    pub segments: usize,
    /// Bytes cut from the end of the last segment (torn or corrupt tail).
    pub truncated_bytes: u64,
    pub truncate_reason: Option<String>,
    /// Bytes the recovery scan read.
    pub scanned_bytes: u64,
    /// Sealed segments whose missing time index was rebuilt (SPEC T8.3).
    pub rebuilt_time_indexes: usize,
    /// A truncation was completed: the log end it left ([`Log::truncate_to`],
    /// [`Log::restart_at`]).
    pub suffix_truncated_to: Option<i64>,
}

pub struct Log<D: Disk> {
    disk: D,
    dir: PathBuf,
    config: LogConfig,
    segments: BTreeMap<i64, Segment<D>>,
    /// Every offset below is durable: the high watermark.
    durable_next_offset: i64,
    /// Records appended since the last flush started.
    unflushed_records: u64,
    /// The flush jobs in flight ([`flush::Pipeline`]).
    pipeline: flush::Pipeline,
    /// The last flush failed (and how many in a row): appends are refused until one succeeds,
    /// so a full or failing disk holds at most what was appended before it failed.
    flush_failure: Option<(Arc<IoError>, u64)>,
    closing: bool,
    /// When the last time-based roll happened (SPEC T7.1: at most one per `segment.ms`).
    last_time_roll_ms: i64,
    /// The largest timestamp to roll by when no record has one: the active segment's creation
    /// time, or its file's mtime after a restart (SPEC T8.3).
    roll_reference_ms: i64,
    /// Last time-index timestamp of segments already deleted (SPEC T7.2 for a first segment
    /// whose own index is empty).
    deleted_last_ts: Option<i64>,
    /// When the active segment last took an append (its file's mtime after a restart): the
    /// T5.5 entry of a segment without timestamps when it closes.
    last_append_ms: i64,
    /// Idempotent producers' sequences ([`ProducerState`]).
    producers: ProducerState,
    /// The transactions ABORT markers ended, in marker order, of every segment (each sealed
    /// segment's also in its `.txnindex`): what READ_COMMITTED fetches list.
    aborted: Vec<AbortedTxn>,
    /// The log start offset DeleteRecords set (KIP-107), persisted in [`LOG_START_FILE`]; the
    /// log start is the larger of it and the first segment's base offset.
    start_offset: i64,
    /// Transaction markers appended since the log opened (a write verified with the
    /// coordinator checks no marker came in meanwhile: [`Log::markers_appended`]).
    markers_appended: u64,
    /// A compaction swap is between [`Log::begin_swap`] and its end: retention waits.
    swapping: bool,
    /// The log was compacted (its [`CLEANER_CHECKPOINT`] exists): offsets may have gaps.
    may_have_gaps: bool,
    /// The first dirty offset ([`CLEANER_CHECKPOINT`]), `i64::MIN` before any pass.
    cleaned_to: i64,
    /// Bumped by every compaction swap: an index load planned before one is not installed.
    generation: u64,
    /// One clone per index load in flight ([`IndexLoad`], [`TimeLoad`]): a swap begins only when none is.
    loads: Rc<()>,
    /// The shard's batch cache, where durable chunks and disk reads go and reads look first.
    cache: Option<CacheHandle<D::Buf>>,
    /// The leader-epoch cache ([`epochs`]), saved in [`EPOCH_FILE`].
    epochs: Epochs,
    /// It changed since the partition last saved it.
    epochs_changed: bool,
    /// On a leader of a replicated partition, its leader epoch: stamped in every batch it
    /// appends. `None`: standalone, or a follower (batches keep the epoch they came with).
    leader_epoch: Option<i32>,
    /// On a replicated partition, the high watermark the replicas agree on (every in-sync
    /// replica has the records below it durable); readers see below the smaller of it and
    /// the durable end. `None`: not replicated, the durable end alone.
    replicated_to: Option<i64>,
}

fn offset_entries(config: &LogConfig) -> usize {
    (config.segment_index_bytes / 8) as usize
}

fn time_entries(config: &LogConfig) -> usize {
    (config.segment_index_bytes / 12) as usize
}

impl<D: Disk> Log<D> {
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn config(&self) -> &LogConfig {
        &self.config
    }

    /// The first offset a reader may ask for: the first segment's base offset, or past it
    /// where DeleteRecords moved the start.
    pub fn log_start_offset(&self) -> i64 {
        self.first_base().max(self.start_offset)
    }

    /// The base offset of the oldest segment.
    fn first_base(&self) -> i64 {
        *self.segments.keys().next().expect("a log has a segment")
    }

    pub fn log_end_offset(&self) -> i64 {
        self.active().next_offset
    }

    /// Every offset below this one is durable (the high watermark).
    /// What readers may see: below the durable end and, when replicated, the offset every
    /// in-sync replica has durable.
    pub fn high_watermark(&self) -> i64 {
        self.replicated_to.map_or(self.durable_next_offset, |r| r.min(self.durable_next_offset))
    }

    /// The replicas' high watermark (`None`: not replicated, [`Log::high_watermark`] is the
    /// durable end). Transactions whose markers it passes become stable.
    pub fn set_replicated_to(&mut self, to: Option<i64>) {
        self.replicated_to = to;
        let hw = self.high_watermark();
        self.producers.on_high_watermark(hw);
    }

    pub fn replicated_to(&self) -> Option<i64> {
        self.replicated_to
    }

    /// The epoch this node stamps on its appends as leader (`None`: none, see the field). A
    /// new leadership starts its epoch in the cache at the log end at once (Kafka's
    /// `maybeAssignEpochStartOffset`), so a follower asking where its own last epoch ends gets
    /// an answer even before this leader appends anything.
    pub fn set_leader_epoch(&mut self, epoch: Option<i32>) {
        self.leader_epoch = epoch;
        if let Some(e) = epoch {
            let end = self.log_end_offset();
            self.epochs_changed |= self.epochs.on_batch(e, end);
        }
    }

    pub fn leader_epoch(&self) -> Option<i32> {
        self.leader_epoch
    }

    /// Drop the epoch-cache entries that begin at or past `offset` (a truncation there).
    pub fn truncate_epochs(&mut self, offset: i64) {
        self.epochs_changed |= self.epochs.truncate_from_end(offset);
    }

    pub fn epochs(&self) -> &Epochs {
        &self.epochs
    }

    pub fn epochs_dirty(&self) -> bool {
        self.epochs_changed
    }

    /// The epoch cache's bytes if it changed since the last call (the partition saves them).
    pub fn take_epochs_changed(&mut self) -> Option<Vec<u8>> {
        std::mem::take(&mut self.epochs_changed).then(|| self.epochs.encode())
    }

    pub fn durable_offset(&self) -> i64 {
        self.durable_next_offset
    }

    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    /// Base offsets of the segments, oldest first.
    pub fn segment_bases(&self) -> Vec<i64> {
        self.segments.keys().copied().collect()
    }

    /// Total bytes of whole batches in the log.
    pub fn size_bytes(&self) -> u64 {
        self.segments.values().map(|s| s.size).sum()
    }

    /// Memory held by write tails and loaded indexes.
    pub fn mem_bytes(&self) -> usize {
        self.segments.values().map(|s| s.mem_bytes()).sum()
    }

    fn active(&self) -> &Segment<D> {
        self.segments.values().next_back().expect("a log has a segment")
    }

    fn active_mut(&mut self) -> &mut Segment<D> {
        self.segments.values_mut().next_back().expect("a log has a segment")
    }

    /// The last segment's time index, always in memory: an active or closing segment holds
    /// its own, and a sealed last segment (after a clean shutdown began) was closed here or
    /// resumed at open with its indexes loaded.
    fn last_time_index(&self) -> &TimeBuilder {
        self.active().time().expect("the last segment's time index is in memory")
    }

    /// The idempotent producers this partition knows.
    pub fn producers(&self) -> &ProducerState {
        &self.producers
    }

    /// Timestamp of the log's last time-index entry (what the next bucket entry must exceed).
    pub fn last_time_entry(&self) -> Option<i64> {
        self.segments.values().rev().find_map(|s| s.time().map(|t| t.last_ts)).flatten()
    }

    /// True once [`Log::begin_close`] ran.
    pub fn is_closing(&self) -> bool {
        self.closing
    }

    /// True once [`Log::begin_close`] ran and every segment is sealed.
    pub fn is_closed_clean(&self) -> bool {
        self.closing && !self.has_unflushed()
    }

    pub fn disk(&self) -> &D {
        &self.disk
    }

    /// Change settings at runtime (they apply to the next append, roll and retention check).
    pub fn set_config(&mut self, config: LogConfig) {
        self.config = config;
    }

    /// The aborted transactions a READ_COMMITTED fetch of `[fetch_offset, upper_bound)`
    /// lists (Kafka's collection): (producer id, first offset).
    pub fn aborted_between(&self, fetch_offset: i64, upper_bound: i64) -> Vec<(i64, i64)> {
        let mut out = Vec::new();
        let from = self.aborted.partition_point(|t| t.last_offset < fetch_offset);
        txn_index::collect(&self.aborted[from..], fetch_offset, upper_bound, &mut out);
        out
    }

    /// How many transaction markers were appended since the log opened.
    pub fn markers_appended(&self) -> u64 {
        self.markers_appended
    }

    /// Forget the aborted transactions that ended below the log start (their segments are
    /// gone).
    fn trim_aborted(&mut self) {
        let start = self.log_start_offset();
        self.aborted.retain(|t| t.last_offset >= start);
    }

    /// The most one batch cache entry may take now: 0 without a cache or while a fetch waits
    /// for memory (the cache takes nothing then).
    pub fn cache_room(&self) -> usize {
        self.cache.as_ref().map_or(0, |c| c.room())
    }

    /// Use the shard's batch cache from now on.
    pub fn attach_cache(&mut self, cache: CacheHandle<D::Buf>) {
        self.cache = Some(cache);
    }

    /// Remove a segment from the log (retention, a compaction swap), and its cached bytes.
    fn remove_segment(&mut self, base: i64) -> Option<Segment<D>> {
        if let Some(cache) = &self.cache {
            cache.forget_segment(base);
        }
        self.segments.remove(&base)
    }

    /// Bytes a disk read planned at `generation` brought from segment `base` at `pos`: into
    /// the batch cache, unless a compaction swap or retention changed the segment since.
    /// Counted as a cache miss.
    pub fn cache_read(&self, generation: u64, base: i64, pos: u64, bytes: &bytes::Bytes) {
        let Some(cache) = &self.cache else { return };
        cache.count(false, bytes.len());
        if generation == self.generation && self.segments.contains_key(&base) {
            cache.insert_read(base, pos, bytes.clone());
        }
    }

    /// The offset index of a segment, if loaded.
    pub fn index_entries(&self, base: i64) -> Option<Vec<(u32, u32)>> {
        self.segments.get(&base)?.offset_index().map(|i| i.entries().to_vec())
    }

    /// The max-before timestamps beside a segment's offset index, if loaded and known.
    pub fn index_max_before(&self, base: i64) -> Option<Vec<i64>> {
        self.segments.get(&base)?.offset_index()?.max_before().map(<[i64]>::to_vec)
    }

    /// The time index entries of a segment, if loaded.
    pub fn time_entries(&self, base: i64) -> Option<Vec<(i64, u32)>> {
        self.segments.get(&base)?.time().map(|t| t.entries.clone())
    }

    /// Clean shutdown for an exclusive owner: seal everything, write the marker.
    pub async fn close(mut self) -> StorageResult<()> {
        self.begin_close();
        self.flush_all().await?;
        self.write_clean_marker().await
    }
}
