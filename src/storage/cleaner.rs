//! One compaction pass over one partition: the I/O around `storage::compaction`'s decisions
//! and the log's swap ([`Log::begin_swap`], docs/architecture.md "Log compaction").
//!
//! A pass: take the cleanable range ([`Log::clean_target`]); build the offset map over its
//! dirty part, batch by batch within the dedupe budget (the pass ends where the map does,
//! inside a segment if need be); then clean the range from its first segment in groups of
//! consecutive segments
//! no larger than `segment.bytes`: each group is written aside (`.cleaned`), synced,
//! committed (`.swap`), swapped in ([`finish_swap_files`]), and the new segment's indexes
//! are rebuilt by the recovery scan; a group that would come out unchanged is left alone.
//! Last, the checkpoint (the first dirty offset) is written. Sealed segments are immutable,
//! so the pass reads and writes with no borrow of the log held, and appends and fetches go
//! on meanwhile; reads of a group being swapped use the old files until the swap is in.
//!
//! I/O is paced by an [`IoBudget`] (`log.cleaner.io.max.bytes.per.second`) and the pass
//! yields to the executor between batches, so it never holds the shard for long.
//!
//! Callers: the shard's cleaner task (`server`), tests and tools, through [`LogCell`].

use crate::io::{align_up, Disk, DiskFile};
use crate::storage::access::{load_indexes, LogCell};
use crate::storage::compaction::{
    clean_batch, legacy_tombstones_expired, map_batch, CleanRules, CleanStats, OffsetMap, Outcome, Protect, TxnTracker,
};
use crate::storage::error::{StorageError, StorageResult};
use crate::storage::format::index::encode_cleaner_checkpoint;
use crate::storage::format::stored::{check_stored, frame_len, BatchInfo, BatchWalk};
use crate::storage::format::txn_index::AbortedTxn;
use crate::storage::format::FormatError;
use crate::storage::log::{
    cleaned_path, finish_swap_files, swap_path, txn_cleaned_path, CleanTarget, SegmentSpan, SwapStart,
    CLEANER_CHECKPOINT,
};
use crate::storage::segment::log_path;
use std::path::Path;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// Bytes read from a segment at a time: the pass yields to the shard after each (a window is
/// well under a millisecond of work).
const READ_WINDOW: usize = 256 << 10;
/// Bytes of cleaned output written at a time (one DMA write).
const WRITE_CHUNK: usize = 1 << 20;

/// Paces a pass's I/O to a rate (bytes read plus written per second).
pub struct IoBudget {
    rate: Option<u64>,
    started: Instant,
    spent: u64,
}

impl IoBudget {
    /// `None`: unlimited.
    pub fn new(bytes_per_sec: Option<u64>) -> IoBudget {
        IoBudget { rate: bytes_per_sec.filter(|&r| r > 0), started: Instant::now(), spent: 0 }
    }

    /// Count `bytes` of I/O and wait until the rate allows more.
    pub async fn spend(&mut self, bytes: u64) {
        self.spent += bytes;
        if let Some(rate) = self.rate {
            let due = Duration::from_secs_f64(self.spent as f64 / rate as f64);
            let elapsed = self.started.elapsed();
            if due > elapsed {
                glommio::timer::sleep(due - elapsed).await;
            }
        }
    }
}

/// The broker's cleaner settings, Kafka's `log.cleaner.*` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CleanerConfig {
    /// `log.cleaner.enable`: compacted topics are cleaned.
    pub enable: bool,
    /// `log.cleaner.threads`: passes a shard runs at once.
    pub threads: usize,
    /// `log.cleaner.io.max.bytes.per.second`: each shard's cleaner I/O rate (read plus
    /// written); `None`: unlimited (Kafka's default).
    pub io_max_bytes_per_second: Option<u64>,
    /// `log.cleaner.dedupe.buffer.size`: the offset maps' memory, for the whole broker
    /// (each pass gets its share: divided by shards and threads).
    pub dedupe_buffer_size: u64,
    /// `log.cleaner.backoff.ms`: how long a shard's cleaner sleeps when nothing is due.
    pub backoff: Duration,
}

impl Default for CleanerConfig {
    fn default() -> Self {
        CleanerConfig {
            enable: true,
            threads: 1,
            io_max_bytes_per_second: None,
            dedupe_buffer_size: 128 << 20,
            backoff: Duration::from_secs(15),
        }
    }
}

/// Whether a cleanable range is due for a pass now: its dirty ratio reached
/// `min.cleanable.dirty.ratio`, or a dirty segment's first batch is older than
/// `max.compaction.lag.ms` (KIP-354).
pub fn is_due(target: &CleanTarget, config: &crate::config::LogConfig, now: i64) -> bool {
    let ratio_due = target.dirty_ratio() * 1e6 >= config.min_cleanable_dirty_ratio_ppm as f64 && target.dirty_bytes > 0;
    let lag_due = match (config.max_compaction_lag_ms, target.oldest_dirty_ts) {
        (Some(lag), Some(ts)) => now.saturating_sub(ts) > lag.min(i64::MAX as u64) as i64,
        _ => false,
    };
    ratio_due || lag_due
}

/// A pass's pacing: its I/O budget, and whether to stop (the partition is closing).
struct Pace<'a> {
    budget: &'a mut IoBudget,
    abort: &'a dyn Fn() -> bool,
}

/// What a pass may use.
#[derive(Debug, Clone, Copy)]
pub struct CleanerLimits {
    /// `log.cleaner.dedupe.buffer.size` share of this pass: the offset map's budget.
    pub map_budget_bytes: usize,
}

/// What a pass did.
#[derive(Debug, Default, Clone)]
pub struct PassReport {
    pub stats: CleanStats,
    /// The range cleaned: `[start, end)`, and where its dirty part began.
    pub start: i64,
    pub first_dirty: i64,
    pub end: i64,
    /// Where the offset map began: the base of the segment holding the first dirty offset.
    pub map_start: i64,
    /// The groups of the pass, `[base, next)` each, swapped or left alone.
    pub groups: Vec<(i64, i64)>,
    /// Groups swapped (segments rewritten).
    pub groups_swapped: usize,
    pub segments_before: usize,
    pub map_keys: usize,
    pub elapsed: Duration,
}

/// The cleanable range of the log now, loading indexes where a timestamp is needed, with
/// its dirty segments' earliest first-batch timestamp ([`CleanTarget::oldest_dirty_ts`]).
pub async fn clean_target<D: Disk, C: LogCell<D>>(cell: &C, now: i64) -> StorageResult<Option<CleanTarget>> {
    let target = loop {
        let step = cell.log().clean_target(now);
        match step {
            Ok(t) => break t,
            Err(need) => load_indexes(cell, need).await?,
        }
    };
    let Some(mut target) = target else { return Ok(None) };
    target.oldest_dirty_ts = oldest_dirty_ts(cell, &target).await?;
    Ok(Some(target))
}

/// Kafka's "earliest dirty segment timestamp": the smallest first-batch timestamp of the
/// segments holding the dirty part (those without one left out), what
/// `max.compaction.lag.ms` is measured from. A segment not knowing its own (sealed before
/// this start, or rewritten by a pass) has its first batch read once.
async fn oldest_dirty_ts<D: Disk, C: LogCell<D>>(cell: &C, target: &CleanTarget) -> StorageResult<Option<i64>> {
    let mut oldest: Option<i64> = None;
    for &(base, next, _) in target.segments.iter().filter(|s| s.1 > target.first_dirty) {
        let known = cell.log().first_batch_ts(base);
        let ts = match known {
            Some(ts) => ts,
            None => {
                let ts = match batch_at(cell, base).await? {
                    Some(info) if info.last_offset < next => info.max_timestamp,
                    _ => -1,
                };
                cell.log().set_first_batch_ts(base, ts);
                ts
            }
        };
        if ts >= 0 {
            oldest = Some(oldest.map_or(ts, |o| o.min(ts)));
        }
    }
    Ok(oldest)
}

/// Clean `target` (from [`clean_target`]) at `now`. `Ok(report)` also when the log changed
/// under the pass (retention, deletion): what was swapped stays, the rest waits for the next.
pub async fn run_pass<D: Disk, C: LogCell<D>>(
    cell: &C,
    now: i64,
    target: CleanTarget,
    limits: CleanerLimits,
    budget: &mut IoBudget,
    abort: &dyn Fn() -> bool,
) -> StorageResult<PassReport> {
    let began = Instant::now();
    let budget = &mut Pace { budget, abort };
    // Each known producer's last batch (kept, empty if need be): taken when a pass runs, not
    // at every look the cleaner takes.
    let (disk, dir, config, cleaned_to, last_batches) = {
        let log = cell.log();
        let last = log.producers().last_batches();
        (log.disk().clone(), log.dir().to_path_buf(), log.config().clone(), log.cleaned_to(), last)
    };
    let mut report = PassReport {
        start: target.segments[0].0,
        first_dirty: target.first_dirty,
        segments_before: target.segments.len(),
        ..PassReport::default()
    };
    // The checkpoint exists before anything is swapped: it marks the log as one with gaps.
    if !cell.log().may_have_gaps() {
        let at = cleaned_to.max(report.start);
        disk.write_file_atomic(&dir.join(CLEANER_CHECKPOINT), &encode_cleaner_checkpoint(at)).await?;
        cell.log().set_cleaned_to(at);
    }
    let dlimit = config.decompress_limit();
    let first_dirty = target.first_dirty;
    let (map, end) = map_dirty(&disk, &dir, &target, limits, dlimit, budget).await?;
    crate::invariant!(end >= first_dirty, "the map ends at or past the first dirty offset");
    report.map_start = first_dirty;
    report.end = end;
    report.map_keys = map.len();

    // 2. Clean `[start, end)` group by group.
    let rules = CleanRules {
        now,
        delete_retention_ms: config.delete_retention_ms.min(i64::MAX as u64) as i64,
        decompress_limit: dlimit,
        legacy_tombstones_expired: false,
    };
    // Legacy tombstones' horizon (Kafka's): the mtime of the last segment below the first
    // dirty offset.
    let last_clean_mtime = match target.segments.iter().rfind(|s| s.0 < first_dirty) {
        Some(&(b, _, _)) => Some(disk.mtime_ms(&log_path(&dir, b)).await?),
        None => None,
    };
    let pass = GroupPass {
        disk: &disk,
        dir: &dir,
        end,
        rules,
        last_clean_mtime,
        map: &map,
        last_batches: &last_batches,
        aborted: &target.aborted,
    };
    let mut txns = TxnTracker::new(target.aborted.clone());
    // Every segment holding records below `end`; in the last, the batches at or past `end`
    // (not mapped yet: dirty) are copied as they are.
    let spans: Vec<SegmentSpan> = target.segments.iter().copied().filter(|s| s.0 < end).collect();
    let alone = mtime_entries(cell, &target.last_entries[..spans.len()]).await?;
    let mut entries = target.last_entries.iter();
    for group in groups(&spans, &alone, config.segment_bytes) {
        let (base, next) = (group[0].0, group.last().expect("a group").1);
        report.groups.push((base, next));
        // The group's last time-index entry names the record that stays (see `Protect`).
        let protect = entries.by_ref().take(group.len()).flatten().last().map(|&(_, at)| Protect { offset: at });
        let (cleaned, txn_cleaned) = (cleaned_path(&dir, base, next), txn_cleaned_path(&dir, base, next));
        let written = pass.write_aside(cell, group, protect, &mut txns, &mut report.stats, budget).await;
        let (size, kept) = match written {
            Ok(Some(w)) => w,
            Ok(None) => continue,
            Err(e) => {
                // Until the commit, a failure leaves nothing behind (the next open would
                // delete it too, but a later pass may reuse the names).
                let _ = disk.remove_file(&cleaned).await;
                let _ = disk.remove_file(&txn_cleaned).await;
                if matches!(e, StorageError::Closed) {
                    tracing::info!(dir = %dir.display(), base, "the log changed or closed under the cleaner; the pass stops here");
                    report.elapsed = began.elapsed();
                    return Ok(report);
                }
                return Err(e);
            }
        };
        swap_in(cell, &disk, &dir, group, size, kept).await?;
        report.groups_swapped += 1;
    }
    disk.write_file_atomic(&dir.join(CLEANER_CHECKPOINT), &encode_cleaner_checkpoint(end)).await?;
    cell.log().set_cleaned_to(end);
    report.elapsed = began.elapsed();
    Ok(report)
}

/// A pass's step 1: the offset map over the dirty part, batch by batch within the budget; the
/// pass ends at the first batch that does not fit (the next pass's map starts there). The map
/// and where it ends.
async fn map_dirty<D: Disk>(
    disk: &D,
    dir: &Path,
    target: &CleanTarget,
    limits: CleanerLimits,
    dlimit: usize,
    budget: &mut Pace<'_>,
) -> StorageResult<(OffsetMap, i64)> {
    let first_dirty = target.first_dirty;
    let mut map = OffsetMap::new(limits.map_budget_bytes);
    let mut map_txns =
        TxnTracker::new(target.aborted.iter().filter(|t| t.last_offset >= first_dirty).copied().collect());
    let mut end = first_dirty;
    for &span in target.segments.iter().filter(|s| s.1 > first_dirty) {
        let mut full_at = None;
        let mut visit = |batch: &[u8], _: &mut Vec<u8>| -> Result<(), FormatError> {
            let info = BatchInfo::parse(batch)?;
            if full_at.is_some() || info.last_offset < first_dirty {
                return Ok(());
            }
            if !map.add(map_batch(batch, &mut map_txns, dlimit)?) {
                full_at = Some(info.index_offset());
            }
            Ok(())
        };
        walk_segment(disk, dir, span, budget, &mut visit, None).await?;
        match full_at {
            Some(at) => {
                end = at;
                break;
            }
            None => end = span.1,
        }
    }
    Ok((map, end))
}

/// What cleaning one group of segments needs of its pass.
struct GroupPass<'a, D: Disk> {
    disk: &'a D,
    dir: &'a Path,
    /// Where the map ends: batches at or past it are copied as they are (dirty, not mapped).
    end: i64,
    rules: CleanRules,
    /// The legacy tombstones' horizon: the last clean segment's mtime.
    last_clean_mtime: Option<i64>,
    map: &'a OffsetMap,
    /// Each producer's last batch (kept, emptied if need be).
    last_batches: &'a std::collections::HashMap<i64, i64>,
    /// The aborted transactions of the cleanable range.
    aborted: &'a [AbortedTxn],
}

impl<D: Disk> GroupPass<'_, D> {
    /// Write one group's cleaned segment and transaction index aside (`.cleaned`), then start
    /// its swap: the size and the transaction entries that stay, or `None` when the group
    /// comes out unchanged (nothing written). `StorageError::Closed`: the log changed or
    /// closed under the pass.
    async fn write_aside<C: LogCell<D>>(
        &self,
        cell: &C,
        group: &[SegmentSpan],
        protect: Option<Protect>,
        txns: &mut TxnTracker,
        stats: &mut CleanStats,
        budget: &mut Pace<'_>,
    ) -> StorageResult<Option<(u64, Vec<AbortedTxn>)>> {
        let (disk, dir, end) = (self.disk, self.dir, self.end);
        let (base, next) = (group[0].0, group.last().expect("a group").1);
        let cleaned = cleaned_path(dir, base, next);
        let mut out = Output::create(disk, &cleaned).await?;
        let mut changed = group.len() > 1;
        for &span in group {
            // Legacy tombstones: by this segment's mtime against the pass's horizon.
            let mtime = disk.mtime_ms(&log_path(dir, span.0)).await?;
            let expired = legacy_tombstones_expired(mtime, self.last_clean_mtime, self.rules.delete_retention_ms);
            let rules = CleanRules { legacy_tombstones_expired: expired, ..self.rules };
            let mut visit = |batch: &[u8], out: &mut Vec<u8>| -> Result<(), FormatError> {
                if BatchInfo::parse(batch)?.index_offset() >= end {
                    out.extend_from_slice(batch);
                    return Ok(());
                }
                let last = |pid: i64, last_offset: i64| self.last_batches.get(&pid) == Some(&last_offset);
                match clean_batch(batch, self.map, txns, last, protect, &rules, stats)? {
                    Outcome::Keep => out.extend_from_slice(batch),
                    Outcome::Drop => changed = true,
                    Outcome::Rewrite(b) => {
                        changed = true;
                        out.extend_from_slice(&b)
                    }
                }
                Ok(())
            };
            walk_segment(disk, dir, span, budget, &mut visit, Some(&mut out)).await?;
        }
        let mut kept = std::mem::take(&mut txns.kept);
        // Markers at or past `end` were copied as they are: their entries stay.
        kept.extend(self.aborted.iter().filter(|t| t.last_offset >= end && t.last_offset < next));
        if !changed {
            out.abandon(disk).await?;
            return Ok(None);
        }
        let size = out.finish(disk, budget.budget).await?;
        // The originals' latest modification time: what a T5.5 entry (a segment without
        // timestamps) and recovery read, so the rebuilt index keeps it.
        let mut mtime = i64::MIN;
        for &(b, _, _) in group {
            mtime = mtime.max(disk.mtime_ms(&log_path(dir, b)).await?);
        }
        disk.set_mtime_ms(&cleaned, mtime).await?;
        // Always written (empty when no entry stays): `finish_swap_files` tells by it whether
        // `<base>.txnindex` is the old one or the cleaned one moved in.
        let mut bytes = Vec::new();
        kept.iter().for_each(|t| t.encode(&mut bytes));
        disk.write_file_atomic(&txn_cleaned_path(dir, base, next), &bytes).await?;
        // Commit: every group segment still there, loaded, no index load in flight, and
        // retention held off.
        loop {
            if (budget.abort)() {
                return Err(StorageError::Closed);
            }
            let step = cell.log().begin_swap(group);
            match step {
                Ok(SwapStart::Go) => return Ok(Some((size, kept))),
                Ok(SwapStart::Changed) => return Err(StorageError::Closed),
                Ok(SwapStart::Wait) => futures_lite::future::yield_now().await,
                Err(need) => load_indexes(cell, need).await?,
            }
        }
    }
}

/// Commit a group's cleaned segment (`.swap`), swap it in, and rebuild its indexes: the
/// rename commits (a failure before it leaves the old segments); finishing is retried a few
/// times, and the next open finishes what a failing disk left.
async fn swap_in<D: Disk, C: LogCell<D>>(
    cell: &C,
    disk: &D,
    dir: &Path,
    group: &[SegmentSpan],
    size: u64,
    kept: Vec<AbortedTxn>,
) -> StorageResult<()> {
    let (base, next) = (group[0].0, group.last().expect("a group").1);
    let (cleaned, txn_cleaned) = (cleaned_path(dir, base, next), txn_cleaned_path(dir, base, next));
    if let Err(e) = disk.rename(&cleaned, &swap_path(dir, base, next)).await {
        // Not renamed: not committed.
        cell.log().abandon_swap();
        let _ = disk.remove_file(&cleaned).await;
        let _ = disk.remove_file(&txn_cleaned).await;
        return Err(e.into());
    }
    // Committed (the directory sync below, or the next open, makes it durable): finish it,
    // retrying a failing disk a few times.
    let mut finished = Ok(());
    for attempt in 0..3 {
        finished = async {
            disk.sync_dir(dir).await?;
            finish_swap_files(disk, dir, base, next).await
        }
        .await;
        if finished.is_ok() {
            break;
        }
        tracing::warn!(dir = %dir.display(), base, next, attempt, "finishing a compaction swap failed; retrying");
    }
    if let Err(e) = finished {
        // The next open finishes it. Until then retention stays held off for this partition
        // and reads use the old segments' open files.
        tracing::error!(dir = %dir.display(), base, next, error = %e, "a compaction swap could not finish; the next start finishes it");
        return Err(e.into());
    }
    cell.log().complete_swap(group, size, kept);
    // The new segment's indexes, by the recovery scan (SPEC T5), now rather than at the first
    // read.
    load_indexes(cell, crate::storage::NeedIndex::all(base)).await?;
    Ok(())
}

/// The header of the first stored batch the log holds at or after `offset` (one small read).
async fn batch_at<D: Disk, C: LogCell<D>>(cell: &C, offset: i64) -> StorageResult<Option<BatchInfo>> {
    let bytes = crate::storage::access::read(cell, offset, 1, crate::storage::ReadUpTo::LogEnd).await?;
    Ok(BatchWalk::new(&bytes, usize::MAX >> 1).next().and_then(Result::ok).map(|(_, info, _)| info))
}

/// Which segments' last time-index entry is a SPEC T5.5 entry (the segment has no timestamps:
/// the entry is its mtime at its last offset, and the batch there has none). Such a segment is
/// cleaned alone: merged with a segment that has timestamps, its rebuilt index would lose the
/// entry that later segments' indexes rest on.
async fn mtime_entries<D: Disk, C: LogCell<D>>(
    cell: &C,
    last_entries: &[Option<(i64, i64)>],
) -> StorageResult<Vec<bool>> {
    let mut out = Vec::with_capacity(last_entries.len());
    for entry in last_entries {
        let untimed = match *entry {
            None => false,
            Some((_, at)) => batch_at(cell, at).await?.is_some_and(|i| i.max_timestamp < 0 && i.last_offset >= at),
        };
        out.push(untimed);
    }
    Ok(out)
}

/// Consecutive segments in groups whose total size fits `segment.bytes` (at least one
/// segment each) and whose offsets fit a segment's relative offsets; a segment `alone` is a
/// group by itself.
fn groups<'a>(spans: &'a [SegmentSpan], alone: &[bool], segment_bytes: u64) -> Vec<&'a [SegmentSpan]> {
    let mut out = Vec::new();
    let mut from = 0;
    while from < spans.len() {
        let mut to = from + 1;
        let mut size = spans[from].2;
        while to < spans.len()
            && !alone[from]
            && !alone[to]
            && size + spans[to].2 <= segment_bytes
            && spans[to].1 - spans[from].0 <= i32::MAX as i64
        {
            size += spans[to].2;
            to += 1;
        }
        out.push(&spans[from..to]);
        from = to;
    }
    out
}

/// Walk the stored batches of a sealed segment, checking each (CRC), for `visit`, which may
/// add bytes to the cleaned output `out` (written out in whole chunks between windows).
/// What a walk does with each stored batch: it may add bytes to the cleaned output.
type BatchVisit<'a> = dyn FnMut(&[u8], &mut Vec<u8>) -> Result<(), FormatError> + 'a;

async fn walk_segment<D: Disk>(
    disk: &D,
    dir: &Path,
    (base, _, size): SegmentSpan,
    budget: &mut Pace<'_>,
    visit: &mut BatchVisit<'_>,
    mut out: Option<&mut Output<D>>,
) -> StorageResult<()> {
    let path = log_path(dir, base);
    let file = disk.open_existing(&path).await?;
    let corrupt = |position: u64, error| StorageError::Corrupt { path: path.clone(), position, error };
    let mut pos = 0u64;
    let mut want = READ_WINDOW;
    let mut scratch = Vec::new();
    while pos < size {
        if (budget.abort)() {
            return Err(StorageError::Closed);
        }
        let len = (want as u64).min(size - pos) as usize;
        let buf = file.read_at(pos, len).await?;
        if buf.len() < len {
            // The file is shorter than the log thinks: never loop on it.
            return Err(corrupt(pos + buf.len() as u64, FormatError::Truncated { need: len, have: buf.len() }));
        }
        budget.budget.spend(buf.len() as u64).await;
        let mut walk = BatchWalk::new(&buf, i32::MAX as usize);
        for item in walk.by_ref() {
            let (at, _, batch) = item.map_err(|e| corrupt(pos, e))?;
            check_stored(batch).map_err(|e| corrupt(pos + at as u64, e))?;
            let sink = match out.as_deref_mut() {
                Some(o) => &mut o.pending,
                None => &mut scratch,
            };
            visit(batch, sink).map_err(|e| corrupt(pos + at as u64, e))?;
        }
        let consumed = walk.pos();
        if consumed == 0 {
            match frame_len(&buf, i32::MAX as usize) {
                Ok(Some(total)) if total > buf.len() && pos + total as u64 <= size => {
                    want = total;
                    continue;
                }
                Ok(_) => return Err(corrupt(pos, FormatError::Truncated { need: 12, have: buf.len() })),
                Err(e) => return Err(corrupt(pos, e)),
            }
        }
        pos += consumed as u64;
        want = READ_WINDOW;
        if let Some(out) = out.as_deref_mut() {
            out.drain(disk, budget.budget).await?;
        }
        futures_lite::future::yield_now().await;
    }
    file.close().await?;
    Ok(())
}

/// The cleaned segment being written: bytes gathered in memory and written in aligned
/// chunks; the last partial page is padded, then the file is cut to its exact size.
struct Output<D: Disk> {
    file: D::File,
    pending: Vec<u8>,
    /// Bytes written to the file so far (a multiple of [`WRITE_CHUNK`]).
    written: u64,
}

impl<D: Disk> Output<D> {
    async fn create(disk: &D, path: &Path) -> StorageResult<Output<D>> {
        disk.remove_file(path).await?;
        let file = disk.open_rw(path).await?;
        Ok(Output { file, pending: Vec::new(), written: 0 })
    }

    /// Write out every whole chunk gathered.
    async fn drain(&mut self, disk: &D, budget: &mut IoBudget) -> StorageResult<()> {
        while self.pending.len() >= WRITE_CHUNK {
            self.write(disk, WRITE_CHUNK, budget).await?;
        }
        Ok(())
    }

    async fn write(&mut self, disk: &D, len: usize, budget: &mut IoBudget) -> StorageResult<()> {
        let padded = align_up(len as u64) as usize;
        let mut buf = disk.alloc(padded);
        let b = buf.as_mut();
        b[..len].copy_from_slice(&self.pending[..len]);
        b[len..].fill(0);
        self.file.write_at(Rc::new(buf), self.written).await?;
        budget.spend(padded as u64).await;
        self.pending.drain(..len);
        self.written += len as u64;
        Ok(())
    }

    /// Write the rest, cut the file to size, sync. Returns the size.
    async fn finish(mut self, disk: &D, budget: &mut IoBudget) -> StorageResult<u64> {
        self.drain(disk, budget).await?;
        let rest = self.pending.len();
        if rest > 0 {
            self.write(disk, rest, budget).await?;
        }
        self.file.truncate(self.written).await?;
        self.file.sync().await?;
        self.file.close().await?;
        Ok(self.written)
    }

    async fn abandon(self, disk: &D) -> StorageResult<()> {
        let path = self.file.path().to_path_buf();
        self.file.close().await?;
        disk.remove_file(&path).await?;
        Ok(())
    }
}
