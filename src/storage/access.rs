//! Operations that alternate between the log's state and I/O: reads, lookups by time,
//! retention. Each plans with a short borrow of the log, does its I/O with no borrow held,
//! and comes back. Written once over [`LogCell`], so a partition (a `RefCell<Log>` shared by
//! tasks) and an exclusive owner (tests, tools) run the same code.
//!
//! The dependency goes one way: this module uses the log's public API (plans, [`NeedIndex`],
//! retention decisions) and the log never calls back into it. The exclusive owner's entry
//! points (`Log::read`, `Log::offset_for_time`, `Log::delete_records`, `Log::maintain`) are
//! defined here, as an `impl Log` block, because they are these loops run over `&mut Log`.

use crate::io::Disk;
use crate::metrics::{self, Counter};
use crate::storage::error::{StorageError, StorageResult};
use crate::storage::format::index::encode_log_start;
use crate::storage::format::stored::{first_record_at_or_after, max_record_from, BatchInfo, BatchWalk};
use crate::storage::format::FormatError;
use crate::storage::log::{delete_segment_files, Log, NeedIndex, ReadPlan, ReadUpTo, TimePlan, LOG_START_FILE};
use bytes::Bytes;
use std::cell::{RefCell, RefMut};

/// Bytes read per step of a time lookup's forward scan: the scan usually ends within one
/// time-index bucket of data, so small steps beat one large read.
const TIME_SCAN_READ_BYTES: usize = 64 << 10;

/// Something that lends the log for a moment.
pub trait LogCell<D: Disk> {
    fn log(&self) -> RefMut<'_, Log<D>>;
}

impl<D: Disk> LogCell<D> for RefCell<Log<D>> {
    fn log(&self) -> RefMut<'_, Log<D>> {
        self.borrow_mut()
    }
}

impl<D: Disk> LogCell<D> for RefCell<&mut Log<D>> {
    fn log(&self) -> RefMut<'_, Log<D>> {
        RefMut::map(self.borrow_mut(), |l| &mut **l)
    }
}

/// Open a sealed segment and load its indexes (or load its time index alone).
pub async fn load_indexes<D: Disk, C: LogCell<D>>(cell: &C, need: NeedIndex) -> StorageResult<()> {
    if need.time_only {
        let load = cell.log().time_load(need.base);
        let loaded = load.run().await?;
        cell.log().install_time(need.base, loaded);
    } else {
        let load = cell.log().index_load(need.base);
        let loaded = load.run().await?;
        cell.log().install_index(need.base, loaded);
    }
    Ok(())
}

/// Load the time indexes of `bases` together (one round of small reads): the first is needed
/// (rebuilt if missing or damaged), and its failure is the caller's; the others are loaded
/// ahead, only as stored, and one that is missing, damaged or fails to load (a segment
/// retention removed meanwhile) is left to be loaded, or to fail, when it is needed.
async fn load_times<D: Disk, C: LogCell<D>>(cell: &C, bases: &[i64]) -> StorageResult<()> {
    let Some((&first, ahead)) = bases.split_first() else { return Ok(()) };
    let needed = cell.log().time_load(first).run();
    let loads: Vec<_> = ahead.iter().map(|&b| cell.log().time_load(b).run_stored()).collect();
    let (needed, ahead_loaded) = futures_util::future::join(needed, futures_util::future::join_all(loads)).await;
    cell.log().install_time(first, needed?);
    for (&base, result) in ahead.iter().zip(ahead_loaded) {
        match result {
            Ok(Some(time)) => cell.log().install_time(base, time),
            Ok(None) => {}
            Err(e) => tracing::debug!(base, error = %e, "time index loaded ahead failed; left for when it is needed"),
        }
    }
    Ok(())
}

/// Whole batches from the one holding `offset`, up to about `max_bytes`.
pub async fn read<D: Disk, C: LogCell<D>>(
    cell: &C,
    offset: i64,
    max_bytes: usize,
    upto: ReadUpTo,
) -> StorageResult<Bytes> {
    Ok(read_traced(cell, offset, max_bytes, upto).await?.0)
}

/// [`read`], and whether the answer came from disk (not from memory: the write tail or the
/// batch cache).
pub async fn read_traced<D: Disk, C: LogCell<D>>(
    cell: &C,
    offset: i64,
    max_bytes: usize,
    upto: ReadUpTo,
) -> StorageResult<(Bytes, bool)> {
    read_sized(cell, offset, max_bytes, false, upto).await
}

/// [`read_traced`]; `exact`: a disk read takes `max_bytes` from the offset index's position
/// for `offset` and no more (`DiskRead::exact`).
async fn read_sized<D: Disk, C: LogCell<D>>(
    cell: &C,
    offset: i64,
    max_bytes: usize,
    exact: bool,
    upto: ReadUpTo,
) -> StorageResult<(Bytes, bool)> {
    let mut offset = offset;
    let mut from_disk = false;
    loop {
        let plan = cell.log().plan_read(offset, max_bytes, upto)?;
        // A replicated log's reader gets what lies below its high watermark now (the plan read
        // durable bytes, which may reach past it).
        let visible = |bytes: Bytes| match upto {
            ReadUpTo::HighWatermark if cell.log().replicated_to().is_some() => {
                below(bytes, cell.log().high_watermark())
            }
            _ => bytes,
        };
        match plan {
            ReadPlan::Done(bytes) => return Ok((visible(bytes), from_disk)),
            ReadPlan::Disk(read) => {
                let read = if exact { read.exact() } else { read };
                let disk = cell.log().disk().clone();
                let (skip, (base, generation)) = (read.skip_to(), read.segment());
                let (pos, bytes) = read.run(&disk).await?;
                metrics::count(Counter::LogDiskReads, 1);
                metrics::count(Counter::LogDiskReadBytes, bytes.len() as u64);
                cell.log().cache_read(generation, base, pos, &bytes);
                from_disk = true;
                match skip {
                    // A compacted segment holds nothing at or past `offset`: the next one.
                    Some(next) if bytes.is_empty() && next > offset => offset = next,
                    _ => return Ok((visible(bytes), true)),
                }
            }
            ReadPlan::NeedIndex(need) => load_indexes(cell, need).await?,
        }
    }
}

/// The whole batches of `bytes` that end below `limit`.
fn below(bytes: Bytes, limit: i64) -> Bytes {
    let mut keep = 0;
    for (at, info, batch) in crate::storage::format::BatchWalk::new(&bytes, usize::MAX >> 1).map_while(Result::ok) {
        if info.last_offset >= limit {
            break;
        }
        keep = at + batch.len();
    }
    if keep == bytes.len() {
        bytes
    } else {
        bytes.slice(..keep)
    }
}

/// SPEC T6: ListOffsets by time. `Ok(None)` is Kafka's (-1, -1).
pub async fn offset_for_time<D: Disk, C: LogCell<D>>(
    cell: &C,
    t: i64,
    upto: ReadUpTo,
) -> StorageResult<Option<(i64, i64)>> {
    loop {
        let plan = cell.log().plan_time_lookup(t, upto);
        return match plan {
            TimePlan::Found(answer) => Ok(answer),
            TimePlan::NeedTimes(bases) => {
                load_times(cell, &bases).await?;
                continue;
            }
            // Skip batches whose max timestamp is below t; in the first that reaches t, the
            // first record that does.
            TimePlan::Scan { from, t, limit } => {
                scan_batches(cell, from, limit, upto, Some(t), |h, batch, dlimit| {
                    first_record_at_or_after(h, batch, t, from, dlimit)
                })
                .await
            }
            // The largest timestamp below the limit, scanning back from it region by region
            // (an entry's offset to the start of the region after it) until the best found
            // is at least the entry's timestamp: nothing before the entry can beat it (T5.1).
            // Stepping back past a T5.5 entry skips the rest of its (untimed) segment.
            // In a region, each batch whose max beats the region's best gives its first record
            // with that timestamp; an earlier region's answer wins ties (it comes first).
            TimePlan::ScanMax { limit } => {
                let mut best: Option<(i64, i64)> = None;
                let mut end = limit;
                loop {
                    let step = cell.log().max_scan_start(end);
                    let start = match step {
                        Ok(start) => start,
                        Err(need) => {
                            load_indexes(cell, need).await?;
                            continue;
                        }
                    };
                    let from = start.map_or_else(|| cell.log().log_start_offset(), |(o, _, _)| o);
                    let mut region: Option<(i64, i64)> = None;
                    scan_batches(cell, from, end, upto, None, |h, batch, dlimit| {
                        if h.max_timestamp >= 0 && region.is_none_or(|(_, ts)| h.max_timestamp > ts) {
                            // An answer at or past the region's end is not one (a damaged
                            // wrapper's offsets can claim anything), as in `scan_batches`; the
                            // records of a batch straddling the log start may all fall short.
                            let beats = |&(offset, ts): &(i64, i64)| offset < end && region.is_none_or(|(_, r)| ts > r);
                            if let Some(found) = max_record_from(h, batch, from, dlimit)?.filter(beats) {
                                region = Some(found);
                            }
                        }
                        Ok(None)
                    })
                    .await?;
                    if let Some(r) = region.filter(|r| best.is_none_or(|b| r.1 >= b.1)) {
                        best = Some(r);
                    }
                    // An entry no record reaches leaves the best below it: a T5.5 entry (a
                    // segment without timestamps) or a compacted segment's last entry, whose
                    // batch keeps the maxTimestamp of a record cleaned away. The next region
                    // ends at the entry: the records before it may still hold the answer.
                    match start {
                        Some((o, t, _)) if best.is_none_or(|(_, b)| b < t) && o > cell.log().log_start_offset() => {
                            end = o
                        }
                        _ => return Ok(best),
                    }
                }
            }
        };
    }
}

/// Walk the batches from offset `from` up to `limit` (reading in small steps through the
/// ordinary read path) until `visit` returns an answer. A batch whose records lie at or past
/// `limit` ends the walk; a legacy wrapper's first offset, which its header does not say, is
/// where the batch before it ended (contiguous offsets), or at most `from` for the first one.
/// With `below = Some(t)` (a search for the first timestamp `>= t`), each read first skips
/// what the offset index's max-before timestamps show to be below `t`, and reads only the
/// stretch that holds the answer when they name it ([`Log::time_scan_skip`]).
async fn scan_batches<D: Disk, C: LogCell<D>>(
    cell: &C,
    from: i64,
    limit: i64,
    upto: ReadUpTo,
    below: Option<i64>,
    mut visit: impl FnMut(&BatchInfo, &[u8], usize) -> Result<Option<(i64, i64)>, FormatError>,
) -> StorageResult<Option<(i64, i64)>> {
    let (dlimit, dir) = {
        let log = cell.log();
        (log.config().decompress_limit(), log.dir().to_path_buf())
    };
    let corrupt =
        |position: i64, error| StorageError::Corrupt { path: dir.clone(), position: position.max(0) as u64, error };
    let mut at = from;
    while at < limit {
        let (mut size, mut exact) = (TIME_SCAN_READ_BYTES, false);
        if let Some(t) = below {
            let skip = cell.log().time_scan_skip(at, t, limit);
            match skip {
                // A stretch between two index entries holds whole batches: read just it.
                // (A skip is never backwards; were it, the span would not be from `at`.)
                Ok((to, span)) if to >= at => {
                    at = to;
                    if let Some(s) = span.filter(|&s| s > 0 && s <= TIME_SCAN_READ_BYTES) {
                        (size, exact) = (s, true);
                    }
                }
                Ok(_) => {}
                Err(need) => {
                    load_indexes(cell, need).await?;
                    continue;
                }
            }
        }
        let bytes = read_sized(cell, at, size, exact, upto).await?.0;
        if bytes.is_empty() {
            break;
        }
        let mut first_of_read = true;
        for item in BatchWalk::new(&bytes, usize::MAX >> 1) {
            // Stored batches were checked (CRC) by the read; a bad frame here is corruption.
            let (_, h, batch) = item.map_err(|e| corrupt(at, e))?;
            let first = h.first_offset.unwrap_or(if first_of_read { at.min(h.last_offset) } else { at });
            first_of_read = false;
            if first >= limit {
                return Ok(None);
            }
            at = h.next_offset();
            if let Some((offset, ts)) = visit(&h, batch, dlimit).map_err(|e| corrupt(first, e))? {
                return Ok((offset < limit).then_some((offset, ts)));
            }
        }
    }
    Ok(None)
}

/// Periodic upkeep at `now`: the time-based roll (SPEC T7.1) and retention by time and by
/// size (T7.2, T7.3), deleting the expired segments' files. Returns their base offsets.
pub async fn maintain<D: Disk, C: LogCell<D>>(cell: &C, now: i64) -> StorageResult<Vec<i64>> {
    {
        let mut log = cell.log();
        if log.is_closing() {
            return Ok(Vec::new());
        }
        if log.maybe_roll_for_time(now, None) {
            log.roll(now);
        }
        log.expire_producers(now);
    }
    let mut removed = Vec::new();
    loop {
        let step = cell.log().take_expired_by_time(now);
        match step {
            Ok(v) if v.is_empty() => break,
            Ok(v) => removed.extend(v),
            Err(need) => load_indexes(cell, need).await?,
        }
    }
    removed.extend(cell.log().take_expired_by_size());
    // Segments left wholly below a log start that DeleteRecords moved (rolled then).
    let start = cell.log().log_start_offset();
    removed.extend(cell.log().take_segments_before(start));
    let (disk, dir) = {
        let log = cell.log();
        (log.disk().clone(), log.dir().to_path_buf())
    };
    for &base in &removed {
        tracing::info!(dir = %dir.display(), base, "deleting segment (retention)");
        delete_segment_files(&disk, &dir, base).await?;
    }
    Ok(removed)
}

/// DeleteRecords (KIP-107): move the log start to `offset` (`-1`: the high watermark; never
/// back), durably first ([`LOG_START_FILE`]), then delete the segments wholly below it.
/// Returns the new log start. The caller runs one at a time per log (the file is replaced
/// whole).
pub async fn delete_records<D: Disk, C: LogCell<D>>(cell: &C, offset: i64, now: i64) -> StorageResult<i64> {
    let (target, current, disk, dir) = {
        let log = cell.log();
        (log.start_after_delete(offset)?, log.log_start_offset(), log.disk().clone(), log.dir().to_path_buf())
    };
    if target > current {
        disk.write_file_atomic(&dir.join(LOG_START_FILE), &encode_log_start(target)).await?;
        let removed = cell.log().set_log_start(target, now);
        for &base in &removed {
            tracing::info!(dir = %dir.display(), base, start = target, "deleting segment (below the log start)");
            delete_segment_files(&disk, &dir, base).await?;
        }
    }
    Ok(cell.log().log_start_offset())
}

/// Delete the sealed segments wholly below `offset` ([`Log::take_segments_before`]) and their
/// files. Returns their base offsets.
pub async fn remove_before<D: Disk, C: LogCell<D>>(cell: &C, offset: i64) -> StorageResult<Vec<i64>> {
    let (removed, disk, dir) = {
        let mut log = cell.log();
        (log.take_segments_before(offset), log.disk().clone(), log.dir().to_path_buf())
    };
    for &base in &removed {
        delete_segment_files(&disk, &dir, base).await?;
    }
    Ok(removed)
}

/// The operations above for an exclusive owner of the log (tests and offline tools), which
/// lends it through a `RefCell<&mut Log>`.
impl<D: Disk> Log<D> {
    /// Read, for an exclusive owner; see [`read`].
    pub async fn read(&mut self, offset: i64, max_bytes: usize, upto: ReadUpTo) -> StorageResult<Bytes> {
        read(&RefCell::new(self), offset, max_bytes, upto).await
    }

    /// Lookup by time (SPEC T6), for an exclusive owner; see [`offset_for_time`].
    pub async fn offset_for_time(&mut self, t: i64, upto: ReadUpTo) -> StorageResult<Option<(i64, i64)>> {
        offset_for_time(&RefCell::new(self), t, upto).await
    }

    /// DeleteRecords (KIP-107), for an exclusive owner; see [`delete_records`].
    pub async fn delete_records(&mut self, offset: i64, now: i64) -> StorageResult<i64> {
        delete_records(&RefCell::new(self), offset, now).await
    }

    /// Time-based roll and retention (SPEC T7), for an exclusive owner; see [`maintain`].
    pub async fn maintain(&mut self, now: i64) -> StorageResult<Vec<i64>> {
        maintain(&RefCell::new(self), now).await
    }
}
