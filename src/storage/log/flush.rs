//! Flush jobs: the only way appended data reaches the disk.
//!
//! [`Log::prepare_flush`] picks the oldest segment with work (data past what earlier jobs
//! cover, a seal, or an active segment's file to create), seals the tail's open chunk and
//! hands out its writes as a [`FlushWork`]. The job runs in two halves without borrowing the
//! log: [`FlushWork::write`] (create the file, preallocate, write the chunks with several in
//! flight), then [`Written::finish`] (fdatasync, and for a closing segment trim it and write
//! its index files and producer snapshot). [`Log::complete_flush`] records the outcome.
//!
//! Two kinds of job, so the disk is not idle during an fdatasync and syncs are not multiplied:
//! - a **commit** job cuts the open chunk, writes what no job wrote yet, then syncs; at most
//!   one is in flight, and only its successful sync moves the durable point. A commit of one
//!   write with nothing written ahead before it makes it durable by itself
//!   ([`DiskFile::write_synced_at`]: on the DMA disk one O_DSYNC write, the write and the sync
//!   in one io_uring operation);
//! - while a commit job syncs, **write-ahead** jobs write the tail's full chunks (no cut, no
//!   sync), one at a time; the next commit job's sync covers them.
//!
//! Beside them, while commits are small, a **zero** job ([`Log::prepare_zeros`]) writes zeros
//! past the active segment's data (`tidemark.zero.ahead.bytes`), so that later appends
//! overwrite written blocks: their writes then convert no reserved (unwritten) extent, so
//! io_uring issues them inline rather than from a worker thread, and an fdatasync after them
//! has no file-system metadata to write, only the device's cache to flush. The zeros go far
//! ahead in a few large jobs rather than a little per commit, so that few syncs carry the
//! extent conversions; a zero job does not hold the other jobs back unless their data reaches
//! where its zeros start.
//!
//! A failed job fails every job in flight with it; the chunks then wait in memory for the
//! retry, and appends are suspended until one succeeds.
//!
//! Invariants:
//! - a sync covers the writes that completed before it was issued: a commit job syncs only
//!   after its own writes and every earlier job's completed, and durability moves only to
//!   what it covers; a synced write covers only itself (on a device with FUA), so a commit
//!   job makes one only when no chunk written ahead waits for its sync;
//! - a job's writes start only after every earlier job's writes completed, so two writes of
//!   one page are never in flight together (a write-ahead job's first chunk may rewrite the
//!   last page of the commit job's cut chunk, with the same bytes first: it does so once that
//!   write completed, while its sync may run, as the next commit's cut would); a zero job's
//!   writes start at or past the page after the data's end, and no job whose data reaches its
//!   start, and no job that creates or seals a segment, starts while it runs;
//! - a job that creates a segment's file or seals it runs alone, in segment order, so a
//!   segment is sealed before the next one's file is created (the crash-safety invariant of
//!   the log) and the high watermark only moves forward;
//! - chunks are dropped only once written and synced.
//!
//! Callers: the partition's flusher task and its close; `flush_all` for exclusive owners.

use super::scan::{parse_segment_name, snapshot_path};
use super::Log;
use crate::io::{align_up, Disk, DiskFile, IoError, PAGE, ZEROS_BYTES};
use crate::metrics::{self, Counter, Stage};
use crate::storage::error::{StorageError, StorageResult};
use crate::storage::format::txn_index::AbortedTxn;
use crate::storage::segment::{
    index_path, log_path, maxindex_path, timeindex_path, txnindex_path, ChunkWrite, Segment, SegmentState, Unsealed,
};
use futures_util::stream::{FuturesUnordered, StreamExt};
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;

/// The flush jobs in flight, all on one segment (the oldest unsealed one): at most one commit
/// job and one write-ahead job.
#[derive(Debug, Default)]
pub(super) struct Pipeline {
    /// A commit job is prepared and not completed.
    commit: bool,
    /// A write-ahead job is prepared and not completed.
    ahead_job: bool,
    /// A job's writes are under way: no other job may start.
    writing: bool,
    /// The segment the jobs are on.
    base: i64,
    /// The size the commit job in flight makes durable.
    target_size: u64,
    /// The commit job creates the segment's file or seals it: nothing may start until it
    /// completes (a file is created only after the previous segment is sealed).
    alone: bool,
    /// The allocation the jobs in flight reach.
    allocated: u64,
    /// Chunks written by completed write-ahead jobs and not yet synced; the next commit job
    /// drops them with its own.
    ahead: usize,
    /// The zero job in flight: its segment and where its zeros start.
    zeroing: Option<(i64, u64)>,
    /// The bytes the last commit job made (or makes) durable: zeros are written ahead only
    /// while commits are small.
    last_commit_bytes: u64,
    /// A job failed: the others complete as failures too, and the chunks go back to waiting
    /// once none is left (after a failed write or fdatasync nothing unsynced is trusted).
    failed: Option<Arc<IoError>>,
}

impl Pipeline {
    pub(super) fn is_idle(&self) -> bool {
        !self.commit && !self.ahead_job && self.zeroing.is_none()
    }
}

impl<D: Disk> Log<D> {
    /// Appended bytes not yet durable (only the newest segments can hold any).
    pub fn unflushed_bytes(&self) -> u64 {
        self.segments.values().rev().take_while(|s| !s.is_sealed()).map(|s| s.size - s.durable_size).sum()
    }

    /// True when data or a seal waits for a flush job (one not yet prepared).
    pub fn has_unflushed(&self) -> bool {
        // Sealed segments never need it, and only the newest can be unsealed.
        self.segments.values().rev().take_while(|s| !s.is_sealed()).any(|s| self.needs_flush(s))
    }

    /// Consecutive failed flushes (0 when the last one succeeded or none ran).
    pub fn flush_failures(&self) -> u64 {
        self.flush_failure.as_ref().map_or(0, |f| f.1)
    }

    /// Forget a flush failure when nothing is left to flush (appends resume).
    pub fn clear_flush_failure_if_idle(&mut self) {
        if self.pipeline.is_idle() && !self.has_unflushed() {
            self.flush_failure = None;
        }
    }

    /// A segment the flusher must visit: data no job covers yet, a seal to do, or (an active
    /// segment after a roll) a file to create, so that the segment before it can be deleted
    /// by retention even if no record ever arrives.
    fn needs_flush(&self, s: &Segment<D>) -> bool {
        let piped = self.pipeline.commit && self.pipeline.base == s.base_offset;
        let covered = if piped { self.pipeline.target_size } else { s.durable_size };
        match &s.state {
            SegmentState::Active(u) => s.size > covered || (u.file.is_none() && !piped),
            SegmentState::Closing { .. } => !(piped && self.pipeline.alone),
            // Sealed once durable whole (`Segment::seal`), and immutable since.
            SegmentState::Sealed(_) => false,
        }
    }

    /// The next flush job, or `None` when nothing waits or the pipeline cannot take one now:
    /// a job is writing, creates or seals its segment, or failed; or a zero job runs where the
    /// data would reach, or beside a job that would create or seal a segment. While a commit
    /// job syncs, the next job is a write-ahead job of the tail's full chunks.
    pub fn prepare_flush(&mut self) -> Option<FlushWork<D>> {
        let pipe = &self.pipeline;
        if pipe.writing || pipe.alone || pipe.failed.is_some() {
            return None;
        }
        let ahead = pipe.commit;
        let base = if ahead { pipe.base } else { self.segments.values().find(|s| self.needs_flush(s))?.base_offset };
        let disk = self.disk.clone();
        let dir = self.dir.clone();
        // The settings a job needs (not a clone of the whole config on every flush).
        let (preallocate_bytes, segment_bytes, max_inflight_writes) =
            (self.config.preallocate_bytes, self.config.segment_bytes, self.config.max_inflight_writes);
        let pipe = &mut self.pipeline;
        let seg = self.segments.get_mut(&base).expect("the pipeline's segment is not deleted");
        let (unsealed, producer_snapshot) = match &mut seg.state {
            SegmentState::Active(u) => (u, None),
            SegmentState::Closing { unsealed, producer_snapshot } => (unsealed, Some(&*producer_snapshot)),
            SegmentState::Sealed(_) => unreachable!("a sealed segment needs no flush"),
        };
        if let Some((zero_base, zero_from)) = pipe.zeroing {
            // Not beside a zero job: a job that would create or seal a segment (a seal trims the
            // file the zeros are written to), or whose data reaches where the zeros start.
            let creates_or_seals = unsealed.file.is_none() || producer_snapshot.is_some();
            if creates_or_seals || zero_base != base || align_up(seg.size) > zero_from {
                return None;
            }
        }
        if ahead && !unsealed.tail.has_unsubmitted() {
            return None; // no full chunk to write while the commit syncs
        }
        if !ahead {
            unsealed.tail.seal_open(&disk, seg.durable_size);
        }
        let writes = unsealed.tail.take_writes();
        let max_end = writes.iter().map(|w| w.pos + w.buf.as_ref().as_ref().len() as u64).max().unwrap_or(0);
        let allocated = unsealed.allocated.max(if pipe.base == base { pipe.allocated } else { 0 });
        let allocate_to = allocation_target(max_end, allocated, preallocate_bytes, segment_bytes);
        pipe.base = base;
        pipe.writing = true;
        pipe.allocated = allocated.max(allocate_to);
        let file = unsealed.file.clone();
        if ahead {
            pipe.ahead_job = true;
            return Some(FlushWork {
                disk,
                dir,
                base_offset: base,
                file,
                chunks: writes.len(),
                writes,
                allocate_to,
                target_size: seg.durable_size,
                target_next_offset: self.durable_next_offset,
                seal: None,
                commit: false,
                max_inflight: max_inflight_writes as usize,
                zero_to: 0,
            });
        }
        let span = (base, seg.next_offset, seg.size);
        let seal = producer_snapshot.map(|snapshot| seal_work(span, unsealed, snapshot, &self.aborted));
        pipe.commit = true;
        pipe.last_commit_bytes = seg.size - seg.durable_size;
        pipe.target_size = seg.size;
        pipe.alone = file.is_none() || seal.is_some();
        let chunks = std::mem::take(&mut pipe.ahead) + writes.len();
        self.unflushed_records = 0;
        Some(FlushWork {
            disk,
            dir,
            base_offset: base,
            file,
            writes,
            chunks,
            allocate_to,
            target_size: seg.size,
            target_next_offset: seg.next_offset,
            seal,
            commit: true,
            max_inflight: max_inflight_writes as usize,
            zero_to: 0,
        })
    }

    /// A job could start now (what makes it worth waking a running flusher): nothing is being
    /// written, nothing creates or seals a segment, nothing failed, and data waits: while a
    /// commit job syncs, full chunks of the tail; otherwise any (the flusher may be running
    /// only a zero job).
    pub fn can_start_job(&self) -> bool {
        let pipe = &self.pipeline;
        if pipe.writing || pipe.alone || pipe.failed.is_some() {
            return false;
        }
        if pipe.commit {
            self.segments.get(&pipe.base).and_then(|s| s.tail()).is_some_and(|t| t.has_unsubmitted())
        } else {
            self.has_unflushed()
        }
    }

    /// A zero job, or `None`. While the last commit was small (at most [`ZERO_COMMIT_MAX`]:
    /// a large one's metadata is a small share of its cost, and writing every byte twice then
    /// costs more than it saves) and the zeros past the active segment's data reach less than
    /// half of `tidemark.zero.ahead.bytes` beyond it, zeros up to that distance (in whole
    /// 128 KiB writes, at most `tidemark.max.inflight.writes` of them), from where earlier
    /// zeros end or [`ZERO_GAP`] past the data's end rounded up to a page (a quarter of the
    /// distance when that is less, one page at least), whichever is further, within the space
    /// already reserved. The flusher runs it beside its other jobs ([`Log::prepare_flush`] keeps
    /// theirs clear of it).
    pub fn prepare_zeros(&mut self) -> Option<FlushWork<D>> {
        let (zero_ahead, max_inflight_writes) = (self.config.zero_ahead_bytes, self.config.max_inflight_writes);
        let pipe = &mut self.pipeline;
        if zero_ahead == 0
            || pipe.zeroing.is_some()
            || pipe.alone
            || pipe.failed.is_some()
            || pipe.last_commit_bytes > ZERO_COMMIT_MAX
        {
            return None;
        }
        let (&base, seg) = self.segments.iter_mut().next_back()?;
        // A rolled segment is trimmed at its seal: zeros past its data would be wasted.
        let SegmentState::Active(unsealed) = &mut seg.state else { return None };
        let file = unsealed.file.clone()?;
        let data_end = align_up(seg.size);
        // A little past the data at least (64 KiB, or a quarter of the distance when that is
        // less), so that the data, which must not reach the zeros while they are written, is
        // not held back when they start late (a new segment, data that outran them); `zeroed`
        // is u64::MAX once a zero write failed: no more for this segment.
        let gap = ((zero_ahead / 4).min(ZERO_GAP) / PAGE * PAGE).max(PAGE);
        let from = unsealed.zeroed.max(data_end + gap);
        if from >= data_end.saturating_add(zero_ahead / 2) {
            return None;
        }
        let zb = ZEROS_BYTES as u64;
        // Only space whose fallocate completed (a commit in flight may be reserving more), and
        // one round of writes at most: a commit whose data reaches the zeros waits for them.
        let n = (data_end + zero_ahead)
            .saturating_sub(from)
            .div_ceil(zb)
            .min(unsealed.allocated.saturating_sub(from) / zb)
            .min(max_inflight_writes as u64);
        if n == 0 {
            return None;
        }
        pipe.zeroing = Some((base, from));
        let disk = self.disk.clone();
        Some(FlushWork {
            writes: (0..n).map(|i| ChunkWrite { buf: disk.zeros(), pos: from + i * zb }).collect(),
            disk,
            dir: self.dir.clone(),
            base_offset: base,
            file: Some(file),
            chunks: 0,
            allocate_to: 0,
            target_size: seg.durable_size,
            target_next_offset: self.durable_next_offset,
            seal: None,
            commit: false,
            max_inflight: max_inflight_writes as usize,
            zero_to: from + n * zb,
        })
    }

    /// The commit job's writes completed ([`FlushWork::write`]): a write-ahead job may be
    /// prepared while it syncs.
    pub fn flush_written(&mut self) {
        self.pipeline.writing = false;
    }

    /// Record the outcome of a flush job. Returns the durable offset, or the error of the
    /// first job that failed since the pipeline was last idle.
    pub fn complete_flush(&mut self, done: FlushDone<D>) -> StorageResult<i64> {
        if done.zeroed > 0 {
            self.complete_zeros(done);
            return Ok(self.durable_next_offset);
        }
        let pipe = &mut self.pipeline;
        assert!(pipe.base == done.base_offset, "complete_flush without a job");
        if done.commit {
            assert!(pipe.commit, "complete_flush without a commit job");
            pipe.commit = false;
            pipe.alone = false;
            if !pipe.ahead_job {
                pipe.writing = false;
            }
        } else {
            assert!(pipe.ahead_job, "complete_flush without a write-ahead job");
            pipe.ahead_job = false;
            pipe.writing = false;
        }
        let seg = self.segments.get_mut(&done.base_offset).expect("a segment being flushed is never deleted");
        let unsealed = match &mut seg.state {
            SegmentState::Active(u) | SegmentState::Closing { unsealed: u, .. } => u,
            SegmentState::Sealed(_) => panic!("segment {} sealed while its flush ran", done.base_offset),
        };
        if let Some(f) = done.file {
            unsealed.file.get_or_insert(f);
        }
        let result = match (done.result, &pipe.failed) {
            (Ok(_), None) if !done.commit => {
                // Written, not yet synced: the next commit job covers these chunks.
                pipe.ahead += done.chunks;
                unsealed.allocated = unsealed.allocated.max(done.allocated);
                Ok(self.durable_next_offset)
            }
            (Ok(file), None) => {
                // Durable: the chunks leave the tail for the batch cache (tailing readers).
                for c in unsealed.tail.complete(done.chunks) {
                    if let Some(cache) = &self.cache {
                        cache.insert_chunk(done.base_offset, c.pos, c.len, c.buf, c.alloc);
                    }
                }
                unsealed.allocated = unsealed.allocated.max(done.allocated);
                assert!(done.target_size >= seg.durable_size, "the durable size only grows");
                seg.durable_size = done.target_size;
                if done.sealed {
                    file.writes_done();
                    seg.seal(file);
                }
                self.durable_next_offset = self.durable_next_offset.max(done.target_next_offset);
                // Transactions whose marker is now durable no longer hold the LSO back.
                let hw = self.replicated_to.map_or(self.durable_next_offset, |r| r.min(self.durable_next_offset));
                self.producers.on_high_watermark(hw);
                if let Some((e, failures)) = self.flush_failure.take() {
                    tracing::warn!(dir = %self.dir.display(), failures, last_error = %e, "flush succeeded again; appends accepted");
                }
                Ok(self.durable_next_offset)
            }
            // A job in flight with this one failed: nothing this one wrote is trusted.
            (_, Some(first)) => Err(StorageError::Io(first.clone())),
            (Err(e), None) => {
                let e = Arc::new(e);
                let failures = self.flush_failure.as_ref().map_or(0, |f| f.1) + 1;
                if failures == 1 {
                    tracing::error!(dir = %self.dir.display(), error = %e, "flush failed; appends refused (KAFKA_STORAGE_ERROR) until a retry succeeds; unflushed data stays in memory");
                } else {
                    tracing::debug!(dir = %self.dir.display(), error = %e, failures, "flush retry failed");
                }
                self.flush_failure = Some((e.clone(), failures));
                pipe.failed = Some(e.clone());
                Err(StorageError::Io(e))
            }
        };
        self.reset_if_drained();
        result
    }

    /// A zero job completed. Zeros carry nothing: their failure fails no commit, and zeroing
    /// stops for the segment (a data write to the same place reports its own error).
    fn complete_zeros(&mut self, done: FlushDone<D>) {
        assert!(self.pipeline.zeroing.is_some_and(|(base, _)| base == done.base_offset), "a zero job not in flight");
        self.pipeline.zeroing = None;
        let seg = self.segments.get_mut(&done.base_offset).expect("a segment being zeroed is never deleted");
        if let SegmentState::Active(u) | SegmentState::Closing { unsealed: u, .. } = &mut seg.state {
            match done.result {
                Ok(_) => u.zeroed = u.zeroed.max(done.zeroed),
                Err(e) => {
                    tracing::warn!(dir = %self.dir.display(), base = done.base_offset, error = %e, "writing zeros ahead of the data failed; no more for this segment");
                    u.zeroed = u64::MAX;
                }
            }
        }
        self.reset_if_drained();
    }

    /// After a failure, once every job has drained: what is not durable is written again by
    /// the retry.
    fn reset_if_drained(&mut self) {
        let pipe = &mut self.pipeline;
        if pipe.is_idle() && pipe.failed.take().is_some() {
            pipe.allocated = 0;
            pipe.ahead = 0;
            if let Some(SegmentState::Active(u) | SegmentState::Closing { unsealed: u, .. }) =
                self.segments.get_mut(&pipe.base).map(|s| &mut s.state)
            {
                u.tail.unsubmit();
            }
        }
    }

    /// Run flush jobs one after another until nothing waits, for an exclusive owner.
    pub async fn flush_all(&mut self) -> StorageResult<()> {
        // A zero job prepared and not completed would hold a job back, and this would stop early.
        assert!(self.pipeline.zeroing.is_none(), "flush_all beside a zero job");
        while let Some(work) = self.prepare_flush() {
            let done = work.run().await;
            self.complete_flush(done)?;
        }
        Ok(())
    }
}

/// The rolled segment's seal: trim to `size`, write `index`, `time_index` and the producer
/// snapshot at the segment's end.
pub struct SealWork {
    size: u64,
    index: Vec<u8>,
    /// The `.maxtimeindex` (`None`: no file; one left by an earlier life of this segment is
    /// removed).
    max_index: Option<Vec<u8>>,
    time_index: Vec<u8>,
    /// The `.txnindex` (empty: no file).
    txn_index: Vec<u8>,
    snapshot: (i64, Vec<u8>),
}

/// The largest commit (bytes made durable by one fdatasync) after which zeros are written
/// ahead. Measured (docs/benchmarks.md): 16 KiB commits ran 1.18 times faster with them, and
/// the open loop's ~76 KB commits had a third less round trip at the median; with 256 KiB
/// commits (a producer's full batches) the broker's p99 rose (zeros double what the disk
/// writes, and large commits have little conversion to save).
const ZERO_COMMIT_MAX: u64 = 128 << 10;

/// How far past the data's end a zero job starts at least (when earlier zeros end before).
const ZERO_GAP: u64 = 64 << 10;

/// Producer snapshots kept per partition (the newest; older ones are deleted at each seal).
const SNAPSHOTS_KEPT: usize = 2;

/// One flush job's I/O, run without borrowing the log.
pub struct FlushWork<D: Disk> {
    disk: D,
    dir: PathBuf,
    base_offset: i64,
    file: Option<Rc<D::File>>,
    writes: Vec<ChunkWrite<D::Buf>>,
    /// The chunks its completion drops (a commit job's include earlier write-ahead ones).
    chunks: usize,
    allocate_to: u64,
    target_size: u64,
    target_next_offset: i64,
    seal: Option<SealWork>,
    /// A commit job (writes, then fdatasync; or one synced write), or a write-ahead job
    /// (writes only).
    commit: bool,
    max_inflight: usize,
    /// A write-ahead job of zeros past the data: where they end (0: a job of data).
    zero_to: u64,
}

/// What a flush job did, for [`Log::complete_flush`].
pub struct FlushDone<D: Disk> {
    base_offset: i64,
    file: Option<Rc<D::File>>,
    chunks: usize,
    commit: bool,
    allocated: u64,
    /// Where a zero job's zeros end (0: none).
    zeroed: u64,
    target_size: u64,
    target_next_offset: i64,
    sealed: bool,
    /// The file written, or what failed. `file` is the handle after the job either way (a job
    /// that created the file and failed later keeps it).
    result: Result<Rc<D::File>, IoError>,
}

impl<D: Disk> FlushWork<D> {
    /// The whole job: [`FlushWork::write`], then [`Written::finish`].
    pub async fn run(self) -> FlushDone<D> {
        match self.write().await {
            Ok(written) => written.finish().await,
            Err(done) => done,
        }
    }

    /// The job's first half: create the file if needed, reserve space, and write every chunk
    /// (at most `max_inflight` at once; a chunk that shares a page with the one before waits
    /// for all earlier writes). Once a commit job's writes return, a write-ahead job may
    /// write while it syncs ([`Log::flush_written`]).
    pub async fn write(self) -> Result<Written<D>, FlushDone<D>> {
        let mut file = self.file.clone();
        match self.write_inner(&mut file).await {
            Ok(f) => Ok(Written { work: self, file: f }),
            Err(e) => Err(self.done(file, Err(e))),
        }
    }

    /// A commit job of one write with nothing unsynced before it (no write-ahead job's chunks,
    /// no seal): the write and its sync go out as one ([`DiskFile::write_synced_at`]).
    fn write_synced(&self) -> bool {
        self.commit && self.seal.is_none() && self.writes.len() == 1 && self.chunks == 1
    }

    fn done(&self, file: Option<Rc<D::File>>, result: Result<Rc<D::File>, IoError>) -> FlushDone<D> {
        FlushDone {
            base_offset: self.base_offset,
            file,
            chunks: self.chunks,
            commit: self.commit,
            allocated: self.allocate_to,
            zeroed: self.zero_to,
            target_size: self.target_size,
            target_next_offset: self.target_next_offset,
            sealed: self.seal.is_some(),
            result,
        }
    }

    async fn write_inner(&self, slot: &mut Option<Rc<D::File>>) -> Result<Rc<D::File>, IoError> {
        let file = match slot {
            Some(f) => f.clone(),
            None => {
                let f = Rc::new(self.disk.open_rw(&log_path(&self.dir, self.base_offset)).await?);
                // The new file's directory entry must be durable before data in it is acked.
                self.disk.sync_dir(&self.dir).await?;
                *slot = Some(f.clone());
                f
            }
        };
        if self.allocate_to > 0 {
            file.allocate(self.allocate_to).await?;
        }
        let writing = std::time::Instant::now();
        if self.write_synced() {
            let w = &self.writes[0];
            file.write_synced_at(w.buf.clone(), w.pos).await?;
            metrics::since(Stage::WriteSynced, writing);
            return Ok(file);
        }
        let mut inflight = FuturesUnordered::new();
        let mut first_err = None;
        let mut prev_end = 0u64;
        for w in &self.writes {
            let overlaps = w.pos < prev_end;
            while !inflight.is_empty() && (overlaps || inflight.len() >= self.max_inflight) {
                if let Some(Err(e)) = inflight.next().await {
                    first_err.get_or_insert(e);
                }
            }
            prev_end = w.pos + w.buf.as_ref().as_ref().len() as u64;
            inflight.push(file.write_at(w.buf.clone(), w.pos));
        }
        while let Some(r) = inflight.next().await {
            if let Err(e) = r {
                first_err.get_or_insert(e);
            }
        }
        drop(inflight);
        if let Some(e) = first_err {
            return Err(e);
        }
        if self.zero_to > 0 {
            metrics::count(Counter::LogZeroBytes, (self.writes.len() * ZEROS_BYTES) as u64);
        } else if !self.writes.is_empty() {
            metrics::since(Stage::DmaWrite, writing);
        }
        Ok(file)
    }
}

/// A flush job whose writes have completed: its fdatasync (unless it made a synced write) and
/// seal remain.
pub struct Written<D: Disk> {
    work: FlushWork<D>,
    file: Rc<D::File>,
}

impl<D: Disk> Written<D> {
    /// A commit job, which syncs; a write-ahead job is done once written.
    pub fn is_commit(&self) -> bool {
        self.work.commit
    }

    /// A commit job: fdatasync (none after a synced write, durable already), then seal a
    /// rolled segment. The sync covers every write completed before it was issued: this job's
    /// and every earlier job's. A write-ahead job is done.
    pub async fn finish(self) -> FlushDone<D> {
        if !self.work.commit {
            return self.work.done(Some(self.file.clone()), Ok(self.file.clone()));
        }
        let result = self.sync_and_seal().await.map(|()| self.file.clone());
        self.work.done(Some(self.file.clone()), result)
    }

    async fn sync_and_seal(&self) -> Result<(), IoError> {
        let syncing = std::time::Instant::now();
        let file = &self.file;
        // A synced write is durable already (a seal's job never makes one).
        if !self.work.write_synced() {
            file.sync().await?;
            metrics::since(Stage::Fdatasync, syncing);
        }
        let work = &self.work;
        if let Some(seal) = &work.seal {
            file.truncate(seal.size).await?;
            file.sync().await?;
            // Written whole or not at all (tmp file, rename): a crash never leaves a torn index.
            // The aborted transactions first: a segment with its `.index` has its `.txnindex`.
            if !seal.txn_index.is_empty() {
                work.disk.write_file_atomic(&txnindex_path(&work.dir, work.base_offset), &seal.txn_index).await?;
            }
            // The `.maxtimeindex` names its `.index` by CRC, but the same `.index` bytes can
            // describe other data (a segment active again after a crash, cut and refilled at
            // the same offsets and positions): an old one goes before the `.index` is written
            // (the `.index` write's directory sync makes that durable), the new one after it.
            let max_path = maxindex_path(&work.dir, work.base_offset);
            work.disk.remove_file(&max_path).await?;
            work.disk.write_file_atomic(&index_path(&work.dir, work.base_offset), &seal.index).await?;
            if let Some(bytes) = &seal.max_index {
                work.disk.write_file_atomic(&max_path, bytes).await?;
            }
            work.disk.write_file_atomic(&timeindex_path(&work.dir, work.base_offset), &seal.time_index).await?;
            let (at, snapshot) = &seal.snapshot;
            work.disk.write_file_atomic(&snapshot_path(&work.dir, *at), snapshot).await?;
            let mut older: Vec<i64> = work
                .disk
                .list_dir(&work.dir)
                .await?
                .iter()
                .filter_map(|n| parse_segment_name(n).filter(|(o, ext)| *ext == "snapshot" && o < at).map(|(o, _)| o))
                .collect();
            older.sort_unstable();
            for o in older.iter().rev().skip(SNAPSHOTS_KEPT - 1) {
                work.disk.remove_file(&snapshot_path(&work.dir, *o)).await?;
            }
            work.disk.sync_dir(&work.dir).await?;
        }
        Ok(())
    }
}

/// How far a flush job extends its segment's file before writing up to `max_end`: nothing
/// while the file is allocated that far; else the next multiple of `tidemark.preallocate.bytes`
/// (a page at least), capped at `segment.bytes` (but never short of the writes).
fn allocation_target(max_end: u64, allocated: u64, preallocate_bytes: u64, segment_bytes: u64) -> u64 {
    if max_end <= allocated {
        return 0;
    }
    let step = preallocate_bytes.max(PAGE);
    let want = align_up(max_end).div_ceil(step) * step;
    want.min(align_up(segment_bytes).max(align_up(max_end)))
}

/// What sealing a closing segment (`[base, next)`, `size` bytes) writes: its indexes, its transaction index (the aborted
/// transactions whose markers it holds) and the producer snapshot at its end.
fn seal_work<D: Disk>(
    (base, next, size): (i64, i64, u64),
    unsealed: &Unsealed<D>,
    snapshot: &[u8],
    aborted: &[AbortedTxn],
) -> SealWork {
    let index = &unsealed.index.index;
    let index_file = index.encode();
    let mut txn_index = Vec::new();
    aborted.iter().filter(|t| t.last_offset >= base && t.last_offset < next).for_each(|t| t.encode(&mut txn_index));
    SealWork {
        size,
        txn_index,
        max_index: index.encode_max(&index_file),
        index: index_file,
        time_index: unsealed.time.encode(),
        snapshot: (next, snapshot.to_vec()),
    }
}
