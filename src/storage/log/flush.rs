//! Flush jobs: the only way appended data reaches the disk.
//!
//! [`Log::prepare_flush`] picks the oldest segment with work (data past its durable size, a
//! seal, or an active segment's file to create), seals the tail's open chunk and hands out its
//! writes as a [`FlushWork`]; [`FlushWork::run`] does the I/O without borrowing the log (create
//! the file, preallocate, write the chunks with several in flight, fdatasync, and for a closing
//! segment trim it and write its index files and producer snapshot); [`Log::complete_flush`]
//! records the outcome. A failed flush suspends appends until one succeeds; its chunks wait for
//! the retry in memory.
//!
//! Invariants: one job at a time per log, in segment order, so a segment is sealed before the
//! next one's file is created (the crash-safety invariant of the log) and the high
//! watermark only moves forward; chunks are dropped only once written and synced.
//!
//! Callers: the partition's flusher task and its close; `flush_all` for exclusive owners.

use super::recovery::{parse_segment_name, snapshot_path};
use super::Log;
use crate::io::{align_up, Disk, DiskFile, IoError, PAGE};
use crate::metrics::{self, Stage};
use crate::storage::error::{StorageError, StorageResult};
use crate::storage::segment::{index_path, log_path, timeindex_path, txnindex_path, ChunkWrite, Segment, SegmentState};
use futures_util::stream::{FuturesUnordered, StreamExt};
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;

impl<D: Disk> Log<D> {
    /// Appended bytes not yet durable (only the newest segments can hold any).
    pub fn unflushed_bytes(&self) -> u64 {
        self.segments.values().rev().take_while(|s| !s.is_sealed()).map(|s| s.size - s.durable_size).sum()
    }

    /// True when data or a seal waits for a flush.
    pub fn has_unflushed(&self) -> bool {
        self.segments.values().any(needs_flush)
    }

    /// Consecutive failed flushes (0 when the last one succeeded or none ran).
    pub fn flush_failures(&self) -> u64 {
        self.flush_failure.as_ref().map_or(0, |f| f.1)
    }

    /// Forget a flush failure when nothing is left to flush (appends resume).
    pub fn clear_flush_failure_if_idle(&mut self) {
        if !self.flush_in_flight && !self.has_unflushed() {
            self.flush_failure = None;
        }
    }

    /// The next flush job, or `None` when nothing waits or a job is already running.
    pub fn prepare_flush(&mut self) -> Option<FlushWork<D>> {
        if self.flush_in_flight {
            return None;
        }
        let disk = self.disk.clone();
        let dir = self.dir.clone();
        // The three settings a job needs (not a clone of the whole config on every flush).
        let (preallocate_bytes, segment_bytes, max_inflight_writes) =
            (self.config.preallocate_bytes, self.config.segment_bytes, self.config.max_inflight_writes);
        let seg = self.segments.values_mut().find(|s| needs_flush(s))?;
        let (unsealed, producer_snapshot) = match &mut seg.state {
            SegmentState::Active(u) => (u, None),
            SegmentState::Closing { unsealed, producer_snapshot } => (unsealed, Some(&*producer_snapshot)),
            SegmentState::Sealed(_) => unreachable!("a sealed segment needs no flush"),
        };
        unsealed.tail.seal_open(&disk, seg.durable_size);
        let writes = unsealed.tail.take_writes();
        let max_end = writes.iter().map(|w| w.pos + w.buf.as_ref().as_ref().len() as u64).max().unwrap_or(0);
        let allocate_to = if max_end > unsealed.allocated {
            let step = preallocate_bytes.max(PAGE);
            let want = align_up(max_end).div_ceil(step) * step;
            want.min(align_up(segment_bytes).max(align_up(max_end)))
        } else {
            0
        };
        let (base, next) = (seg.base_offset, seg.next_offset);
        let aborted = &self.aborted;
        let seal = producer_snapshot.map(|snapshot| SealWork {
            size: seg.size,
            txn_index: {
                let mut bytes = Vec::new();
                aborted
                    .iter()
                    .filter(|t| t.last_offset >= base && t.last_offset < next)
                    .for_each(|t| t.encode(&mut bytes));
                bytes
            },
            index: unsealed.index.index.encode(),
            time_index: unsealed.time.encode(),
            snapshot: (seg.next_offset, snapshot.to_vec()),
        });
        let file = unsealed.file.clone();
        self.flush_in_flight = true;
        self.unflushed_records = 0;
        Some(FlushWork {
            disk,
            dir: dir.clone(),
            base_offset: seg.base_offset,
            file,
            writes,
            allocate_to,
            target_size: seg.size,
            target_next_offset: seg.next_offset,
            seal,
            max_inflight: max_inflight_writes as usize,
        })
    }

    /// Record the outcome of a flush job. Returns the new durable offset.
    pub fn complete_flush(&mut self, done: FlushDone<D>) -> StorageResult<i64> {
        assert!(self.flush_in_flight, "complete_flush without a job");
        self.flush_in_flight = false;
        let seg = self.segments.get_mut(&done.base_offset).expect("a segment being flushed is never deleted");
        let unsealed = match &mut seg.state {
            SegmentState::Active(u) | SegmentState::Closing { unsealed: u, .. } => u,
            SegmentState::Sealed(_) => panic!("segment {} sealed while its flush ran", done.base_offset),
        };
        if let Some(f) = done.file {
            unsealed.file.get_or_insert(f);
        }
        match done.result {
            Ok(file) => {
                unsealed.tail.complete(done.chunks);
                unsealed.allocated = unsealed.allocated.max(done.allocated);
                seg.durable_size = done.target_size;
                if done.sealed {
                    seg.seal(file);
                }
                self.durable_next_offset = self.durable_next_offset.max(done.target_next_offset);
                // Transactions whose marker is now durable no longer hold the LSO back.
                self.producers.on_high_watermark(self.durable_next_offset);
                if let Some((e, failures)) = self.flush_failure.take() {
                    tracing::warn!(dir = %self.dir.display(), failures, last_error = %e, "flush succeeded again; appends accepted");
                }
                Ok(self.durable_next_offset)
            }
            Err(e) => {
                unsealed.tail.unsubmit();
                let e = Arc::new(e);
                let failures = self.flush_failure.as_ref().map_or(0, |f| f.1) + 1;
                if failures == 1 {
                    tracing::error!(dir = %self.dir.display(), error = %e, "flush failed; appends refused (KAFKA_STORAGE_ERROR) until a retry succeeds; unflushed data stays in memory");
                } else {
                    tracing::debug!(dir = %self.dir.display(), error = %e, failures, "flush retry failed");
                }
                self.flush_failure = Some((e.clone(), failures));
                Err(StorageError::Io(e))
            }
        }
    }

    /// Run flush jobs until nothing waits, for an exclusive owner.
    pub async fn flush_all(&mut self) -> StorageResult<()> {
        while let Some(work) = self.prepare_flush() {
            let done = work.run().await;
            self.complete_flush(done)?;
        }
        Ok(())
    }
}

/// A segment the flusher must visit: data to write, a seal to do, or (an active segment
/// after a roll) a file to create, so that the segment before it can be deleted by retention
/// even if no record ever arrives.
fn needs_flush<D: Disk>(s: &Segment<D>) -> bool {
    match &s.state {
        SegmentState::Active(u) => s.size > s.durable_size || u.file.is_none(),
        SegmentState::Closing { .. } => true,
        // Sealed once durable whole (`Segment::seal`), and immutable since.
        SegmentState::Sealed(_) => false,
    }
}

/// The rolled segment's seal: trim to `size`, write `index`, `time_index` and the producer
/// snapshot at the segment's end.
pub struct SealWork {
    size: u64,
    index: Vec<u8>,
    time_index: Vec<u8>,
    /// The `.txnindex` (empty: no file).
    txn_index: Vec<u8>,
    snapshot: (i64, Vec<u8>),
}

/// Producer snapshots kept per partition (the newest; older ones are deleted at each seal).
const SNAPSHOTS_KEPT: usize = 2;

/// One flush job's I/O, run without borrowing the log.
pub struct FlushWork<D: Disk> {
    disk: D,
    dir: PathBuf,
    base_offset: i64,
    file: Option<Rc<D::File>>,
    writes: Vec<ChunkWrite<D::Buf>>,
    allocate_to: u64,
    target_size: u64,
    target_next_offset: i64,
    seal: Option<SealWork>,
    max_inflight: usize,
}

/// What a flush job did, for [`Log::complete_flush`].
pub struct FlushDone<D: Disk> {
    base_offset: i64,
    file: Option<Rc<D::File>>,
    chunks: usize,
    allocated: u64,
    target_size: u64,
    target_next_offset: i64,
    sealed: bool,
    /// The file written, or what failed. `file` is the handle after the job either way (a job
    /// that created the file and failed later keeps it).
    result: Result<Rc<D::File>, IoError>,
}

impl<D: Disk> FlushWork<D> {
    /// Create the file if needed, reserve space, write every chunk (at most `max_inflight` at
    /// once; a chunk that shares a page with the one before waits for all earlier writes),
    /// fdatasync, then seal a rolled segment.
    pub async fn run(self) -> FlushDone<D> {
        let mut file = self.file.clone();
        let result = self.run_inner(&mut file).await;
        FlushDone {
            base_offset: self.base_offset,
            file,
            chunks: self.writes.len(),
            allocated: self.allocate_to,
            target_size: self.target_size,
            target_next_offset: self.target_next_offset,
            sealed: self.seal.is_some(),
            result,
        }
    }

    async fn run_inner(&self, slot: &mut Option<Rc<D::File>>) -> Result<Rc<D::File>, IoError> {
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
        if let Some(e) = first_err {
            return Err(e);
        }
        let syncing = std::time::Instant::now();
        if !self.writes.is_empty() {
            metrics::record(Stage::DmaWrite, (syncing - writing).as_micros() as u64);
        }
        file.sync().await?;
        metrics::since(Stage::Fdatasync, syncing);
        if let Some(seal) = &self.seal {
            file.truncate(seal.size).await?;
            file.sync().await?;
            // Written whole or not at all (tmp file, rename): a crash never leaves a torn index.
            // The aborted transactions first: a segment with its `.index` has its `.txnindex`.
            if !seal.txn_index.is_empty() {
                self.disk.write_file_atomic(&txnindex_path(&self.dir, self.base_offset), &seal.txn_index).await?;
            }
            self.disk.write_file_atomic(&index_path(&self.dir, self.base_offset), &seal.index).await?;
            self.disk.write_file_atomic(&timeindex_path(&self.dir, self.base_offset), &seal.time_index).await?;
            let (at, snapshot) = &seal.snapshot;
            self.disk.write_file_atomic(&snapshot_path(&self.dir, *at), snapshot).await?;
            let mut older: Vec<i64> = self
                .disk
                .list_dir(&self.dir)
                .await?
                .iter()
                .filter_map(|n| parse_segment_name(n).filter(|(o, ext)| *ext == "snapshot" && o < at).map(|(o, _)| o))
                .collect();
            older.sort_unstable();
            for o in older.iter().rev().skip(SNAPSHOTS_KEPT - 1) {
                self.disk.remove_file(&snapshot_path(&self.dir, *o)).await?;
            }
            self.disk.sync_dir(&self.dir).await?;
        }
        Ok(file.clone())
    }
}
