//! The one walk over a segment's batches that recovery, the clean-restart resume and index
//! rebuilds share ([`scan_segment`]), and the readers of a segment's files they and lazy index
//! loading use: its name, its time index (stored, or rebuilt by a scan), its producer
//! snapshot's path.
//!
//! Invariant: a rebuilt index equals the one appends built, because [`scan_segment`] feeds the
//! same `IndexBuilder` and `TimeBuilder` rules.

use super::{offset_entries, time_entries, Epochs, MAX_STORED_BATCH};
use crate::config::LogConfig;
use crate::io::{Disk, DiskFile, IoError};
use crate::storage::error::StorageResult;
use crate::storage::format::batch::{BatchHeader, MAGIC_V2};
use crate::storage::format::index::decode_time_index;
use crate::storage::format::legacy;
use crate::storage::format::stored::{check_stored, frame_len, BatchInfo, BatchWalk};
use crate::storage::format::txn_index::AbortedTxn;
use crate::storage::format::FormatError;
use crate::storage::producers::ProducerState;
use crate::storage::segment::{log_path, timeindex_path, IndexBuilder, TimeBuilder};
use std::path::{Path, PathBuf};

/// Window of sequential reads during recovery scans.
const SCAN_WINDOW: usize = 1 << 20;

/// Bound on a legacy wrapper's inner messages when a scan decompresses it (the largest
/// decompression limit any topic setting gives).
const SCAN_DECOMPRESS_LIMIT: usize = 256 << 20;

/// Result of scanning a segment's batches.
pub(super) struct Scan {
    pub(super) valid_size: u64,
    pub(super) next_offset: i64,
    pub(super) index: IndexBuilder,
    pub(super) time: Option<TimeBuilder>,
    pub(super) producers: Option<ProducerState>,
    /// The transactions replayed ABORT markers ended (with producer state only).
    pub(super) aborted: Vec<AbortedTxn>,
    /// The leader-epoch cache continued with the scanned batches' epochs (when asked).
    pub(super) epochs: Option<Epochs>,
    pub(super) stop: Option<(u64, FormatError)>,
    pub(super) scanned: u64,
}

/// Where a scan starts: a batch boundary, the offset expected there, and the index built
/// for the batches before it.
pub(super) struct ScanFrom {
    pub(super) pos: u64,
    pub(super) expected: i64,
    pub(super) index: IndexBuilder,
    /// Time index to continue (None: not needed).
    pub(super) time: Option<TimeBuilder>,
    /// Producer state to continue (None: not needed), and the broker time its replayed
    /// batches count as appended at (the segment file's mtime).
    pub(super) producers: Option<ProducerState>,
    pub(super) replay_ms: i64,
    /// A batch may start past the offset expected (a compacted segment's gaps). Sealed
    /// segments' scans allow them; the last segment's rescan only in a log that may have gaps
    /// (a follower's copy of a compacted leader); elsewhere an offset out of order there still
    /// marks a torn or corrupt tail.
    pub(super) gaps: bool,
    /// Stop before the first batch that holds this offset or a later one (a suffix
    /// truncation's cut, `log::truncate`): the segment ends there.
    pub(super) until: Option<i64>,
    /// Leader-epoch cache to continue (None: not needed).
    pub(super) epochs: Option<Epochs>,
}

impl ScanFrom {
    /// From position 0, continuing the time index after `last_ts` (the log's last time-index
    /// timestamp before this segment).
    pub(super) fn start(base: i64, config: &LogConfig, last_ts: Option<i64>) -> ScanFrom {
        ScanFrom {
            pos: 0,
            expected: base,
            index: IndexBuilder::new(offset_entries(config), config.index_interval_bytes),
            time: Some(TimeBuilder::new(time_entries(config), last_ts, config.time_index_interval_ms)),
            producers: None,
            replay_ms: 0,
            gaps: true,
            until: None,
            epochs: None,
        }
    }
}

/// Scan the batches of a segment file from `from`, checking length, magic, CRC and offset
/// continuity, and continuing its offset index with the append rule. Stops at the first bad
/// or incomplete batch. Used by recovery (from position 0), by the clean-restart resume (from
/// the last index entry) and by index rebuilds: one walk for all three.
pub(super) async fn scan_segment<F: DiskFile>(
    file: &F,
    base: i64,
    file_size: u64,
    from: ScanFrom,
) -> Result<Scan, IoError> {
    let ScanFrom { mut pos, mut expected, mut index, mut time, mut producers, replay_ms, gaps, until, mut epochs } =
        from;
    let mut want = SCAN_WINDOW;
    let mut scanned = 0u64;
    let mut aborted = Vec::new();
    let stop = loop {
        if pos + 12 > file_size {
            break (pos < file_size)
                .then(|| (pos, FormatError::Truncated { need: 12, have: (file_size - pos) as usize }));
        }
        let len = (want as u64).min(file_size - pos) as usize;
        let buf = file.read_at(pos, len).await?;
        scanned += buf.len() as u64;
        let mut walk = BatchWalk::new(&buf, MAX_STORED_BATCH);
        // (position in `buf` of the first bad batch, why)
        let mut failed = None;
        // Position in `buf` of the first batch at or past `until`.
        let mut cut = None;
        for item in walk.by_ref() {
            let (at, h, bytes) = match item {
                Ok(x) => x,
                Err(e) => {
                    failed = Some((None, e));
                    break;
                }
            };
            if until.is_some_and(|u| h.last_offset >= u) {
                cut = Some(at);
                break;
            }
            let first = match checked_first(&h, bytes, expected, gaps) {
                Ok(f) => f,
                Err(e) => {
                    failed = Some((Some(at), e));
                    break;
                }
            };
            index.on_batch((h.index_offset() - base) as u32, pos + at as u64, h.total_len as u64, h.max_timestamp);
            if let Some(t) = time.as_mut() {
                t.on_batch(base, first, h.max_timestamp);
            }
            if let Some(e) = epochs.as_mut().filter(|_| h.magic == MAGIC_V2) {
                e.on_batch(i32::from_be_bytes(bytes[12..16].try_into().expect("a v2 header")), first);
            }
            if let Some(ps) = producers.as_mut().filter(|_| h.magic == MAGIC_V2) {
                aborted.extend(replay(ps, bytes, first, replay_ms));
            }
            expected = h.next_offset();
        }
        if let Some(at) = cut {
            pos += at as u64;
            break None;
        }
        let consumed = walk.pos();
        if let Some((at, e)) = failed {
            // A bad frame stops the walk before it; a bad batch was already walked past.
            break Some((pos + at.unwrap_or(consumed) as u64, e));
        }
        if consumed == 0 {
            // The first batch does not fit in the window: read exactly it, if the file has it.
            match frame_len(&buf, MAX_STORED_BATCH) {
                Ok(Some(total)) if pos + total as u64 <= file_size && total > buf.len() => {
                    want = total;
                    continue;
                }
                Ok(Some(total)) => {
                    break Some((pos, FormatError::Truncated { need: total, have: (file_size - pos) as usize }))
                }
                Ok(None) => break Some((pos, FormatError::Truncated { need: 12, have: buf.len() })),
                Err(e) => break Some((pos, e)),
            }
        }
        pos += consumed as u64;
        want = SCAN_WINDOW;
    };
    Ok(Scan {
        valid_size: pos_of(&stop, pos),
        next_offset: expected,
        index,
        time,
        producers,
        aborted,
        epochs,
        stop,
        scanned,
    })
}

/// A scanned batch's first offset, once its CRC and its place are checked. Offsets are
/// contiguous: a batch starts where the one before ended (`expected`; past it too in a log
/// that may have gaps). A legacy wrapper's header names only its last offset, outside its CRC:
/// its inner messages (decompressed) must run from `expected` to it.
fn checked_first(h: &BatchInfo, bytes: &[u8], expected: i64, gaps: bool) -> Result<i64, FormatError> {
    check_stored(bytes)?;
    let first = match h.first_offset {
        Some(f) => f,
        None => legacy::wrapper_span(bytes, SCAN_DECOMPRESS_LIMIT, gaps)?.0,
    };
    if (first == expected || (gaps && first > expected)) && h.last_offset >= first {
        Ok(first)
    } else {
        Err(FormatError::OffsetGap { expected, found: first })
    }
}

/// Replay one v2 batch into the producer state; the transaction it aborted, if it is an ABORT
/// marker.
fn replay(ps: &mut ProducerState, bytes: &[u8], first: i64, replay_ms: i64) -> Option<AbortedTxn> {
    let h = BatchHeader::parse(bytes).expect("checked by the walk");
    let t = ps.replay(&h, bytes, first, replay_ms).filter(|t| t.aborted)?;
    let last_stable_offset = ps.last_stable_offset_after(&t);
    Some(AbortedTxn {
        producer_id: t.producer_id,
        first_offset: t.first_offset,
        last_offset: t.last_offset,
        last_stable_offset,
    })
}

fn pos_of(stop: &Option<(u64, FormatError)>, pos: u64) -> u64 {
    stop.as_ref().map_or(pos, |(p, _)| *p)
}

pub(super) fn parse_segment_name(name: &str) -> Option<(i64, &str)> {
    let (stem, ext) = name.split_once('.')?;
    if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((stem.parse().ok()?, ext))
}

/// A sealed segment as the time-index loaders see it: (base offset, next offset, size).
pub type SegmentSpan = (i64, i64, u64);

/// Read a sealed segment's `.timeindex`: its valid entries, or `None` when the file is
/// missing, torn, zeroed or otherwise invalid (SPEC T5.6), which calls for a rebuild.
async fn read_time_index<D: Disk>(
    disk: &D,
    dir: &Path,
    (base, next, _): SegmentSpan,
) -> StorageResult<Option<Vec<(i64, u32)>>> {
    let path = timeindex_path(dir, base);
    let Some(bytes) = disk.read_file(&path).await? else { return Ok(None) };
    let (entries, damaged) = decode_time_index(&bytes, (next - base).max(0) as u64);
    if damaged {
        tracing::warn!(path = %path.display(), kept = entries.len(), "time index is torn or invalid; rebuilt when needed");
        return Ok(None);
    }
    Ok(Some(entries))
}

/// The log's last time-index timestamp before segment `spans[i]`: walking back, the last entry
/// of the nearest earlier segment whose index holds one (exact: a closed segment ends with
/// the log's largest timestamp, T5.3), raised by the largest timestamp of any damaged or
/// missing index met on the way (read from its batches).
async fn context_before<D: Disk>(
    disk: &D,
    dir: &Path,
    spans: &[SegmentSpan],
    config: &LogConfig,
) -> StorageResult<Option<i64>> {
    let mut best: Option<i64> = None;
    for &span in spans.iter().rev() {
        match read_time_index(disk, dir, span).await? {
            Some(entries) => {
                if let Some(&(t, _)) = entries.last() {
                    return Ok(best.max(Some(t)));
                }
            }
            None => {
                let (base, _, size) = span;
                let file = disk.open_existing(&log_path(dir, base)).await?;
                let scan = scan_segment(&file, base, size, ScanFrom::start(base, config, None)).await?;
                file.close().await?;
                let max = scan.time.map_or(-1, |t| t.max_ts);
                if max >= 0 {
                    best = best.max(Some(max));
                }
            }
        }
    }
    Ok(best)
}

/// A sealed segment's time index: loaded, or rebuilt from its batches when missing (older
/// data, SPEC T8.3) or damaged (T5.6), continuing from the entries before it so the rebuilt
/// index equals the one written at its close. Returns it and whether it was rebuilt.
pub(super) async fn time_index_of<D: Disk>(
    disk: &D,
    dir: &Path,
    spans: &[SegmentSpan],
    i: usize,
    config: &LogConfig,
) -> StorageResult<(TimeBuilder, bool)> {
    let (base, _, size) = spans[i];
    if let Some(t) = stored_time_index(disk, dir, spans[i], config).await? {
        return Ok((t, false));
    }
    let context = context_before(disk, dir, &spans[..i], config).await?;
    Ok((rebuild_time_index(disk, dir, base, size, config, context).await?, true))
}

/// A sealed segment's time index as stored, or `None` when it is missing or damaged (nothing
/// rebuilt).
pub(super) async fn stored_time_index<D: Disk>(
    disk: &D,
    dir: &Path,
    span: SegmentSpan,
    config: &LogConfig,
) -> StorageResult<Option<TimeBuilder>> {
    let base = span.0;
    Ok(read_time_index(disk, dir, span)
        .await?
        .map(|entries| TimeBuilder::loaded(entries, time_entries(config), None, base, config.time_index_interval_ms)))
}

/// Rebuild a sealed segment's time index from its batches (SPEC T8.3): the bucket rule from
/// `prev_last_ts` on, then the close rules (the exact maximum, or the file's mtime when no
/// record has a timestamp). A corrupt stretch ends the rebuild there (logged; reads of it
/// fail on their own). Writes the file atomically.
async fn rebuild_time_index<D: Disk>(
    disk: &D,
    dir: &Path,
    base: i64,
    size: u64,
    config: &LogConfig,
    prev_last_ts: Option<i64>,
) -> StorageResult<TimeBuilder> {
    let path = log_path(dir, base);
    let file = disk.open_existing(&path).await?;
    let scan = scan_segment(&file, base, size, ScanFrom::start(base, config, prev_last_ts)).await?;
    file.close().await?;
    if let Some((position, error)) = &scan.stop {
        tracing::error!(path = %path.display(), position, %error, "corrupt data in a sealed segment; its time index covers the valid part");
    }
    let mut time = scan.time.expect("scan built a time index");
    time.on_close(base, scan.next_offset - 1, Some(disk.mtime_ms(&path).await?));
    let tpath = timeindex_path(dir, base);
    disk.write_file_atomic(&tpath, &time.encode()).await?;
    tracing::info!(path = %tpath.display(), entries = time.entries.len(), "rebuilt time index");
    Ok(time)
}

pub(super) fn snapshot_path(dir: &Path, offset: i64) -> PathBuf {
    dir.join(format!("{offset:020}.snapshot"))
}

/// A `.maxtimeindex` as read: one that cannot be read is as good as missing (lookups scan
/// without it), never a failure of what loads it.
pub(super) fn optional(read: Result<Option<Vec<u8>>, crate::io::IoError>, path: &std::path::Path) -> Option<Vec<u8>> {
    read.unwrap_or_else(|e| {
        tracing::warn!(path = %path.display(), error = %e, "unreadable max-timestamp index: lookups scan without it");
        None
    })
}
