//! A partition log: an ordered set of segments in one directory.
//!
//! Appends are synchronous and in memory ([`Log::append`]): validate every batch first, then
//! assign offsets and copy each batch once into the active segment's tail. Rolling only
//! switches the active segment in memory. All write I/O goes through flush jobs
//! ([`Log::prepare_flush`] → [`FlushWork::run`] → [`Log::complete_flush`]), run one at a time
//! by the partition's flusher, segment by segment in offset order: create the file, write the
//! sealed chunks (several in flight), fdatasync, and for a rolled segment trim it and write
//! its index files. So the log's state is never borrowed across an await.
//!
//! Crash safety rests on one invariant: **every segment but the last is sealed** (trimmed,
//! index synced) before the next segment's file is created. Recovery after an unclean
//! shutdown therefore scans only the last segment (SPEC T8.2); a clean-shutdown marker lets
//! it skip even that. Closed segments are opened lazily, on first read.

use crate::config::LogConfig;
use crate::io::{align_down, align_up, Disk, DiskFile, IoError, PAGE};
use crate::metrics::{self, Stage};
use crate::storage::error::{StorageError, StorageResult};
use crate::storage::format::batch::{
    check_produced, patched_header, timestamps_outside, with_timestamp_type, BatchHeader, RecordStats, TimestampType,
    HEADER_LEN, MAGIC_V2,
};
use crate::storage::format::index::decode_time_index;
use crate::storage::format::index::{decode_clean_marker, decode_log_start, decode_offset_index, encode_clean_marker};
use crate::storage::format::legacy;
use crate::storage::format::stored::{check_stored, frame_len, BatchInfo, BatchWalk, MAX_HEADER_LEN};
use crate::storage::format::FormatError;
use crate::storage::producers::{self, BatchSeq, ProducerState, SequenceError, Verdict};
use crate::storage::segment::{
    index_path, log_path, timeindex_path, ChunkWrite, IndexBuilder, OffsetIndex, Segment, SegmentState, Tail,
    TimeBuilder,
};
use bytes::Bytes;
use futures_util::stream::{FuturesUnordered, StreamExt};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

/// File name of the clean-shutdown marker in a partition directory.
pub const CLEAN_MARKER: &str = "clean-shutdown";

/// File name of the log start offset that DeleteRecords set (docs/format.md, section 8a).
pub const LOG_START_FILE: &str = "log-start-offset";
/// Window of sequential reads during recovery scans.
const SCAN_WINDOW: usize = 1 << 20;
/// Bound on a legacy wrapper's inner messages when a scan decompresses it (the largest
/// decompression limit any topic setting gives).
const SCAN_DECOMPRESS_LIMIT: usize = 256 << 20;
/// Largest batch a stored log may hold (positions are u32; Kafka caps sizes at i32::MAX).
const MAX_STORED_BATCH: usize = i32::MAX as usize;

/// A produced batch, checked, with what it is stored as, waiting to be appended.
enum Checked<'a> {
    /// A v2 batch and the attributes and maxTimestamp it is stored with; `seq` for a batch of an
    /// idempotent producer.
    V2 { h: BatchHeader, bytes: &'a [u8], attributes: i16, max_ts: i64, seq: Option<BatchSeq> },
    /// A legacy message (plain or wrapper), its record count and its stored form.
    Legacy { bytes: &'a [u8], count: i32, wrapper: bool, stored: legacy::Stored, max_ts: i64 },
}

impl Checked<'_> {
    fn count(&self) -> i64 {
        match self {
            Checked::V2 { h, .. } => h.last_offset_delta as i64 + 1,
            Checked::Legacy { count, .. } => *count as i64,
        }
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
    /// Only durable records (the high watermark): what a consumer should see.
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
    flush_in_flight: bool,
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
    /// The log start offset DeleteRecords set (KIP-107), persisted in [`LOG_START_FILE`]; the
    /// log start is the larger of it and the first segment's base offset.
    start_offset: i64,
}

/// Result of scanning a segment's batches.
struct Scan {
    valid_size: u64,
    next_offset: i64,
    index: IndexBuilder,
    time: Option<TimeBuilder>,
    producers: Option<ProducerState>,
    stop: Option<(u64, FormatError)>,
    scanned: u64,
}

/// Where a scan starts: a batch boundary, the offset expected there, and the index built
/// for the batches before it.
struct ScanFrom {
    pos: u64,
    expected: i64,
    index: IndexBuilder,
    /// Time index to continue (None: not needed).
    time: Option<TimeBuilder>,
    /// Producer state to continue (None: not needed), and the broker time its replayed
    /// batches count as appended at (the segment file's mtime).
    producers: Option<ProducerState>,
    replay_ms: i64,
}

impl ScanFrom {
    /// From position 0, continuing the time index after `last_ts` (the log's last time-index
    /// timestamp before this segment).
    fn start(base: i64, config: &LogConfig, last_ts: Option<i64>) -> ScanFrom {
        ScanFrom {
            pos: 0,
            expected: base,
            index: IndexBuilder::new(offset_entries(config), config.index_interval_bytes),
            time: Some(TimeBuilder::new(time_entries(config), last_ts, config.time_index_interval_ms)),
            producers: None,
            replay_ms: 0,
        }
    }
}

fn offset_entries(config: &LogConfig) -> usize {
    (config.segment_index_bytes / 8) as usize
}

fn time_entries(config: &LogConfig) -> usize {
    (config.segment_index_bytes / 12) as usize
}

/// Scan the batches of a segment file from `from`, checking length, magic, CRC and offset
/// continuity, and continuing its offset index with the append rule. Stops at the first bad
/// or incomplete batch. Used by recovery (from position 0), by the clean-restart resume (from
/// the last index entry) and by index rebuilds: one walk for all three.
async fn scan_segment<F: DiskFile>(file: &F, base: i64, file_size: u64, from: ScanFrom) -> Result<Scan, IoError> {
    let ScanFrom { mut pos, mut expected, mut index, mut time, mut producers, replay_ms } = from;
    let mut want = SCAN_WINDOW;
    let mut scanned = 0u64;
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
        for item in walk.by_ref() {
            let (at, h, bytes) = match item {
                Ok(x) => x,
                Err(e) => {
                    failed = Some((None, e));
                    break;
                }
            };
            // Offsets are contiguous: a batch starts where the one before ended. A legacy
            // wrapper's header names only its last offset, outside its CRC: its inner messages
            // (decompressed) must run from `expected` to it.
            let first = match h.first_offset {
                Some(f) => Ok(f),
                None => legacy::wrapper_span(bytes, SCAN_DECOMPRESS_LIMIT).map(|(f, _)| f),
            };
            let in_order = first.and_then(|f| {
                if f == expected && h.last_offset >= expected {
                    Ok(())
                } else {
                    Err(FormatError::OffsetGap { expected, found: f })
                }
            });
            let checked = check_stored(bytes).and(in_order);
            if let Err(e) = checked {
                failed = Some((Some(at), e));
                break;
            }
            index.on_batch((h.index_offset() - base) as u32, pos + at as u64, h.total_len as u64);
            if let Some(t) = time.as_mut() {
                t.on_batch(base, expected, h.max_timestamp);
            }
            if let Some(ps) = producers.as_mut().filter(|_| h.magic == MAGIC_V2) {
                ps.replay(&BatchHeader::parse(bytes).expect("checked above"), expected, replay_ms);
            }
            expected = h.next_offset();
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
    Ok(Scan { valid_size: pos_of(&stop, pos), next_offset: expected, index, time, producers, stop, scanned })
}

fn pos_of(stop: &Option<(u64, FormatError)>, pos: u64) -> u64 {
    stop.as_ref().map_or(pos, |(p, _)| *p)
}

fn parse_segment_name(name: &str) -> Option<(i64, &str)> {
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
        tracing::warn!(path = %path.display(), kept = entries.len(), "time index is torn or invalid; rebuilding it");
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
                let file = disk.open_rw(&log_path(dir, base)).await?;
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
async fn time_index_of<D: Disk>(
    disk: &D,
    dir: &Path,
    spans: &[SegmentSpan],
    i: usize,
    config: &LogConfig,
) -> StorageResult<(TimeBuilder, bool)> {
    let (base, _, size) = spans[i];
    if let Some(entries) = read_time_index(disk, dir, spans[i]).await? {
        let t = TimeBuilder::loaded(entries, time_entries(config), None, base, config.time_index_interval_ms);
        return Ok((t, false));
    }
    let context = context_before(disk, dir, &spans[..i], config).await?;
    Ok((rebuild_time_index(disk, dir, base, size, config, context).await?, true))
}

/// SPEC T8.1: the log's last time-index timestamp among the sealed segments, scanning back
/// from the newest until an index holds an entry (rebuilding missing or damaged ones met on
/// the way, T8.3, T5.6); the indexes read stay loaded.
async fn backward_scan<D: Disk>(
    disk: &D,
    dir: &Path,
    spans: &[SegmentSpan],
    segments: &mut BTreeMap<i64, Segment<D>>,
    config: &LogConfig,
    report: &mut OpenReport,
) -> StorageResult<Option<i64>> {
    for i in (0..spans.len()).rev() {
        let (time, rebuilt) = time_index_of(disk, dir, spans, i, config).await?;
        report.rebuilt_time_indexes += rebuilt as usize;
        let last = time.entries.last().map(|e| e.0);
        segments.get_mut(&spans[i].0).expect("sealed segment").time = Some(time);
        if last.is_some() {
            return Ok(last);
        }
    }
    Ok(None)
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
    let file = disk.open_rw(&path).await?;
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

fn snapshot_path(dir: &Path, offset: i64) -> PathBuf {
    dir.join(format!("{offset:020}.snapshot"))
}

/// The producer state at offset `at` (the active segment's base, or the log end after a clean
/// shutdown), where `spans` are the sealed segments below `at`: the snapshot named `at`
/// (written when the segment ending there was sealed); if that one is missing or damaged, the
/// newest valid one below it with the sealed segments after it replayed (from the log start
/// when none is valid). Without any snapshot file the data predates them (or no idempotent
/// producer ever wrote here): no producer is known.
async fn producers_at<D: Disk>(
    disk: &D,
    dir: &Path,
    snapshots: &[i64],
    spans: &[SegmentSpan],
    config: &LogConfig,
    at: i64,
) -> StorageResult<ProducerState> {
    if snapshots.is_empty() {
        return Ok(ProducerState::default());
    }
    let mut candidates: Vec<i64> = snapshots.iter().copied().filter(|&o| o <= at).collect();
    candidates.sort_unstable();
    let mut found = None;
    for &offset in candidates.iter().rev() {
        let path = snapshot_path(dir, offset);
        if let Some(bytes) = disk.read_file(&path).await? {
            match ProducerState::decode(&bytes) {
                Ok(state) => {
                    found = Some((state, offset));
                    break;
                }
                Err(e) => tracing::warn!(path = %path.display(), error = %e, "damaged producer snapshot; skipped"),
            }
        }
    }
    let (mut state, from) = found.unwrap_or_else(|| (ProducerState::default(), i64::MIN));
    if from == at {
        return Ok(state);
    }
    tracing::warn!(dir = %dir.display(), from, at, "rebuilding producer state from the segments after the newest valid snapshot");
    for &(base, _, size) in spans.iter().filter(|&&(base, next, _)| base >= from && next <= at) {
        let path = log_path(dir, base);
        let file = disk.open_rw(&path).await?;
        let mut scan_from = ScanFrom::start(base, config, None);
        scan_from.time = None;
        scan_from.producers = Some(state);
        scan_from.replay_ms = disk.mtime_ms(&path).await?;
        let scan = scan_segment(&file, base, size, scan_from).await?;
        file.close().await?;
        state = scan.producers.expect("asked for");
    }
    Ok(state)
}

impl<D: Disk> Log<D> {
    /// Open (or create) the log in `dir`, recovering from an unclean shutdown (SPEC T8).
    /// The cost is one stat per segment, the time index of the newest segments that have
    /// one (the backwards scan of T8.1), and a scan of the last segment when the shutdown was
    /// unclean. `now` stamps nothing; it starts the rolling clock.
    pub async fn open(disk: D, dir: &Path, config: LogConfig) -> StorageResult<(Log<D>, OpenReport)> {
        disk.create_dir_all(dir).await?;
        if let Some(parent) = dir.parent() {
            disk.sync_dir(parent).await?;
        }
        let mut report = OpenReport::default();
        let mut bases = Vec::new();
        let mut others = Vec::new();
        let mut snapshots = Vec::new();
        for name in disk.list_dir(dir).await? {
            match parse_segment_name(&name) {
                Some((base, "log")) => bases.push(base),
                Some((offset, "snapshot")) => snapshots.push(offset),
                Some((base, ext)) if ext == "index" || ext == "timeindex" => others.push((base, name)),
                _ if name.ends_with(".tmp") => disk.remove_file(&dir.join(&name)).await?,
                _ => {}
            }
        }
        bases.sort_unstable();
        // Index files without their log: left by an interrupted deletion.
        for (base, name) in others {
            if bases.binary_search(&base).is_err() {
                disk.remove_file(&dir.join(name)).await?;
            }
        }
        let marker_path = dir.join(CLEAN_MARKER);
        // (log end offset, last time-index timestamp) of a clean shutdown.
        let marker = disk.read_file(&marker_path).await?.and_then(|b| decode_clean_marker(&b));
        let mut segments = BTreeMap::new();
        for (i, &base) in bases.iter().enumerate() {
            let Some(&next) = bases.get(i + 1) else { break };
            let size = disk.file_size(&log_path(dir, base)).await?;
            segments.insert(
                base,
                Segment {
                    base_offset: base,
                    next_offset: next,
                    size,
                    durable_size: size,
                    state: SegmentState::Sealed,
                    file: None,
                    allocated: size,
                    index: None,
                    time: None,
                    tail: None,
                    producer_snapshot: None,
                },
            );
        }
        // SPEC T8.1: the log's last time-index timestamp. A clean shutdown recorded it in the
        // marker; otherwise scan back from the newest sealed segment until an index holds an
        // entry (rebuilding a missing or damaged one on the way, T8.3, T5.6).
        let spans: Vec<SegmentSpan> = segments.values().map(|s| (s.base_offset, s.next_offset, s.size)).collect();
        let mut context_ts = match marker {
            Some((_, last_ts)) => last_ts,
            None => backward_scan(&disk, dir, &spans, &mut segments, &config, &mut report).await?,
        };
        // The last segment becomes the active one.
        let base = bases.last().copied().unwrap_or(0);
        let path = log_path(dir, base);
        let file = disk.open_rw(&path).await?;
        if bases.is_empty() {
            // A new log: its first segment's directory entry must be durable.
            disk.sync_dir(dir).await?;
        }
        let file_size = file.size().await?;
        let mut active = None;
        if let Some((marker_end, _)) = marker {
            // Clean: the log was trimmed and its indexes written. Resume the offset index from
            // its last entry, hopping batch headers to the end; load the time index.
            if let Some((next, size, index)) = Self::resume_clean(&disk, &file, dir, base, file_size, &config).await? {
                if next == marker_end {
                    let mut all = spans.clone();
                    all.push((base, next, size));
                    let (mut time, rebuilt) = time_index_of(&disk, dir, &all, all.len() - 1, &config).await?;
                    report.rebuilt_time_indexes += rebuilt as usize;
                    time.last_ts = time.entries.last().map(|e| e.0).or(context_ts);
                    // An empty segment (resumed as the active one) has no batch left unread.
                    time.complete |= size == 0;
                    active = Some((next, size, index, time));
                    report.clean = true;
                }
            }
        }
        let mut producers = None;
        let (next_offset, size, index, time) = match active {
            Some(a) => a,
            None => {
                if marker.is_some() {
                    // The marker's timestamp includes this segment's own entries, which the
                    // rescan rebuilds: continue from the entries before it instead.
                    context_ts = backward_scan(&disk, dir, &spans, &mut segments, &config, &mut report).await?;
                }
                let mut from = ScanFrom::start(base, &config, context_ts);
                from.producers = Some(producers_at(&disk, dir, &snapshots, &spans, &config, base).await?);
                from.replay_ms = disk.mtime_ms(&path).await?;
                let scan = scan_segment(&file, base, file_size, from).await?;
                report.scanned_bytes = scan.scanned;
                if scan.valid_size < file_size {
                    // Preallocated zeros past the end are expected; anything else is reported.
                    let len = (file_size - scan.valid_size).min(1 << 20) as usize;
                    let tail = file.read_at(scan.valid_size, len).await?;
                    if tail.iter().any(|&b| b != 0) {
                        report.truncated_bytes = file_size - scan.valid_size;
                        report.truncate_reason = scan.stop.as_ref().map(|(p, e)| format!("at position {p}: {e}"));
                        tracing::warn!(dir = %dir.display(), base, position = scan.valid_size, reason = ?report.truncate_reason, "truncating torn or corrupt segment tail");
                    }
                    file.truncate(scan.valid_size).await?;
                    file.sync().await?;
                }
                producers = scan.producers.clone();
                (scan.next_offset, scan.valid_size, scan.index, scan.time.expect("scan built a time index"))
            }
        };
        // The clean path read no batch: its producer state is the snapshot at the log end.
        let producers = match producers {
            Some(p) => p,
            None => {
                let mut all = spans.clone();
                all.push((base, next_offset, size));
                producers_at(&disk, dir, &snapshots, &all, &config, next_offset).await?
            }
        };
        // From here on the directory is not clean any more.
        if disk.exists(&marker_path).await? {
            disk.remove_file(&marker_path).await?;
            disk.sync_dir(dir).await?;
        }
        let roll_reference_ms = disk.mtime_ms(&path).await?;
        if report.clean && size > 0 {
            // A segment is active once in its life (as Redpanda does): the cleanly closed last
            // segment stays sealed, with its close entry, and a new active segment begins at
            // the log end; its file appears with its first flush. A rescan after a later crash
            // then rebuilds exactly what this segment's single active life built.
            let last_ts = time.last_ts;
            segments.insert(
                base,
                Segment {
                    base_offset: base,
                    next_offset,
                    size,
                    durable_size: size,
                    state: SegmentState::Sealed,
                    file: Some(Rc::new(file)),
                    allocated: size,
                    index: Some(index),
                    time: Some(time),
                    tail: None,
                    producer_snapshot: None,
                },
            );
            segments.insert(next_offset, new_active_segment(&disk, &config, next_offset, last_ts));
        } else {
            // Unclean (the segment continues its active life) or empty: resume it.
            let partial = file.read_at(align_down(size), (size - align_down(size)) as usize).await?;
            let tail = Tail::new(&disk, size, &partial, config.write_chunk_bytes as usize);
            let allocated = file.size().await?;
            segments.insert(
                base,
                Segment {
                    base_offset: base,
                    next_offset,
                    size,
                    durable_size: size,
                    state: SegmentState::Active,
                    file: Some(Rc::new(file)),
                    allocated,
                    index: Some(index),
                    time: Some(time),
                    tail: Some(tail),
                    producer_snapshot: None,
                },
            );
        }
        report.segments = segments.len();
        // KIP-107: a log start moved by DeleteRecords, never past the log end.
        let start_offset = match disk.read_file(&dir.join(LOG_START_FILE)).await? {
            Some(bytes) => match decode_log_start(&bytes) {
                Some(o) => o.min(next_offset),
                None => {
                    tracing::warn!(dir = %dir.display(), "unreadable {LOG_START_FILE}: the log starts at its first segment");
                    i64::MIN
                }
            },
            None => i64::MIN,
        };
        let log = Log {
            disk,
            dir: dir.to_path_buf(),
            config,
            segments,
            durable_next_offset: next_offset,
            unflushed_records: 0,
            flush_in_flight: false,
            flush_failure: None,
            closing: false,
            last_time_roll_ms: i64::MIN,
            roll_reference_ms,
            deleted_last_ts: None,
            last_append_ms: roll_reference_ms,
            producers,
            start_offset,
        };
        Ok((log, report))
    }

    /// For a cleanly closed last segment: (next offset, size, index) from its index file and
    /// the batches after its last entry; `None` when anything does not check out.
    async fn resume_clean(
        disk: &D,
        file: &D::File,
        dir: &Path,
        base: i64,
        size: u64,
        config: &LogConfig,
    ) -> StorageResult<Option<(i64, u64, IndexBuilder)>> {
        let Some(bytes) = disk.read_file(&index_path(dir, base)).await? else {
            return Ok(None);
        };
        let Ok(entries) = decode_offset_index(&bytes, size.max(1)) else {
            return Ok(None);
        };
        // Continue from just past the last entry's batch, as if appends had built it.
        let mut from = ScanFrom::start(base, config, None);
        from.time = None;
        if let Some(&(rel, p)) = entries.last() {
            let head = file.read_at(p as u64, MAX_HEADER_LEN).await?;
            let Ok(h) = BatchInfo::parse(&head) else {
                return Ok(None);
            };
            if h.index_offset() != base + rel as i64 {
                return Ok(None);
            }
            let index = OffsetIndex::from_entries(entries, offset_entries(config));
            let len = h.total_len as u64;
            from.index = IndexBuilder::resume(index, len, config.index_interval_bytes);
            from.pos = p as u64 + len;
            from.expected = h.next_offset();
        }
        let scan = scan_segment(file, base, size, from).await?;
        if scan.stop.is_some() {
            return Ok(None);
        }
        Ok(Some((scan.next_offset, size, scan.index)))
    }

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

    /// DeleteRecords (KIP-107): the log start that deleting the records below `offset` gives
    /// (`-1`: below the high watermark); the current one when `offset` is not past it. An
    /// offset below zero or past the high watermark is refused (OFFSET_OUT_OF_RANGE).
    pub fn start_after_delete(&self, offset: i64) -> StorageResult<i64> {
        let (start, hw) = (self.log_start_offset(), self.durable_next_offset);
        let target = if offset == -1 { hw } else { offset };
        if !(0..=hw).contains(&target) {
            return Err(StorageError::OffsetOutOfRange { offset, start, end: hw });
        }
        Ok(target.max(start))
    }

    /// Move the log start to `offset` (persisted by the caller in [`LOG_START_FILE`] first,
    /// never past the high watermark) and remove from the log the sealed segments that now
    /// lie wholly below it; the caller deletes their files. A non-empty active segment wholly
    /// below it is rolled, to go at a later upkeep pass.
    pub fn set_log_start(&mut self, offset: i64, now: i64) -> Vec<i64> {
        assert!(offset <= self.durable_next_offset, "log start {offset} past the high watermark");
        self.start_offset = self.start_offset.max(offset);
        let active = self.active();
        if active.state == SegmentState::Active && active.size > 0 && active.next_offset <= self.start_offset {
            self.roll(now);
        }
        self.take_segments_before(self.log_start_offset())
    }

    pub fn log_end_offset(&self) -> i64 {
        self.active().next_offset
    }

    /// Every offset below this one is durable (the high watermark).
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

    /// Append the batches in `records` (v2 batches or legacy messages of magic 0 and 1, as a
    /// producer sent them, SPEC T1.1) at broker time `now` (ms). Every batch is checked before
    /// any is appended (format, size, and for CreateTime topics every record's timestamp
    /// against the allowed window, SPEC T3.1, inner messages of legacy wrappers included): on
    /// error nothing is appended. LogAppendTime topics get `now` stamped (T3.2); CreateTime
    /// wrappers their largest inner timestamp (T3.3).
    pub fn append(&mut self, records: &[u8], now: i64) -> StorageResult<(AppendInfo, FlushDemand)> {
        if self.closing {
            return Err(StorageError::Closed);
        }
        // A failure that left nothing to retry (say, creating an empty segment's file: the
        // file exists, only its sync failed) does not hold appends back: the next flush tries
        // the disk again.
        if self.flush_failure.is_some() {
            self.clear_flush_failure_if_idle();
        }
        if let Some((e, _)) = &self.flush_failure {
            return Err(StorageError::WritesSuspended(e.clone()));
        }
        let max = self.config.max_message_bytes;
        let limit = self.config.decompress_limit();
        let ts_type = self.config.message_timestamp_type;
        let (lo, hi) = self.config.timestamp_window(now);
        let check_window = |stats: RecordStats| {
            let has_ts = stats.max_ts >= 0 || stats.min_ts != i64::MAX;
            if ts_type == TimestampType::CreateTime
                && has_ts
                && (stats.min_ts < 0 || stats.min_ts < lo || stats.max_ts > hi)
            {
                let ts = if stats.min_ts < lo || stats.min_ts < 0 { stats.min_ts } else { stats.max_ts };
                return Err(StorageError::InvalidTimestamp { ts, lo, hi, records: Vec::new() });
            }
            Ok(())
        };
        let checking = std::time::Instant::now();
        // Every batch is checked, and its stored form fixed, before any is appended. `next` is
        // the offset each batch will get.
        let mut next = self.log_end_offset();
        let mut batches: Vec<Checked> = Vec::new();
        let mut walk = BatchWalk::new(records, MAX_STORED_BATCH);
        for item in walk.by_ref() {
            let (_, info, bytes) = item?;
            if bytes.len() as u64 > max {
                return Err(StorageError::BatchTooLarge { size: bytes.len(), max });
            }
            let checked = if info.magic == MAGIC_V2 {
                let (h, stats) = check_produced(bytes, limit)?;
                check_window(stats).map_err(|e| match e {
                    // Refused: name every record out of the window (KIP-467; only on this
                    // path, so accepted batches are not walked twice).
                    StorageError::InvalidTimestamp { ts, lo, hi, .. } => {
                        let records = timestamps_outside(&h, bytes, limit, lo, hi).unwrap_or_default();
                        StorageError::InvalidTimestamp { ts, lo, hi, records }
                    }
                    e => e,
                })?;
                // What to store: CreateTime: the type bit cleared and the records' true largest
                // timestamp; LogAppendTime: the bit set and `now`.
                let max_ts = if ts_type == TimestampType::LogAppendTime { now } else { stats.max_ts };
                let attributes = with_timestamp_type(h.attributes, ts_type);
                let seq = if h.producer_id >= 0 {
                    // Kafka's rule for idempotent batches: alone in the request, with a sequence.
                    if records.len() != bytes.len() || h.base_sequence < 0 {
                        return Err(SequenceError::NotAlone { pid: h.producer_id }.into());
                    }
                    let seq = BatchSeq {
                        first_seq: h.base_sequence,
                        last_seq: producers::last_seq(h.base_sequence, h.last_offset_delta + 1),
                        first_offset: next,
                        last_offset: next + h.last_offset_delta as i64,
                    };
                    match self.producers.check(h.producer_id, h.producer_epoch, seq.first_seq, seq.last_seq)? {
                        Verdict::Append => Some(seq),
                        Verdict::Duplicate { first_offset, last_offset } => {
                            // A retry of a batch already appended: its offsets, once durable.
                            let info = AppendInfo {
                                base_offset: first_offset,
                                last_offset,
                                records: 0,
                                bytes: 0,
                                log_append_time: if ts_type == TimestampType::LogAppendTime { now } else { -1 },
                            };
                            return Ok((info, FlushDemand::Wait));
                        }
                    }
                } else {
                    None
                };
                Checked::V2 { h, bytes, attributes, max_ts, seq }
            } else {
                let p = legacy::check_produced(bytes, limit)?;
                check_window(p.stats)?;
                let (stored, max_ts) = legacy::stored_form(bytes, &p, next, ts_type, now, limit)?;
                if let legacy::Stored::Rebuilt(v) = &stored {
                    // Recompressed: its size may differ from the one checked above.
                    if v.len() as u64 > max {
                        return Err(StorageError::BatchTooLarge { size: v.len(), max });
                    }
                }
                Checked::Legacy { bytes, count: p.count, wrapper: p.header.is_wrapper(), stored, max_ts }
            };
            next += checked.count();
            batches.push(checked);
        }
        if walk.pos() != records.len() {
            let have = records.len() - walk.pos();
            let need = frame_len(&records[walk.pos()..], MAX_STORED_BATCH)?.unwrap_or(12);
            return Err(FormatError::Truncated { need, have }.into());
        }
        if batches.is_empty() {
            return Err(StorageError::EmptyAppend);
        }
        let copying = std::time::Instant::now();
        metrics::record(Stage::Validate, (copying - checking).as_micros() as u64);
        let log_append_time = if ts_type == TimestampType::LogAppendTime { now } else { -1 };
        let mut info =
            AppendInfo { base_offset: self.log_end_offset(), last_offset: 0, records: 0, bytes: 0, log_append_time };
        let mut demand = FlushDemand::None;
        let mut patched = [0u8; HEADER_LEN];
        for batch in &batches {
            let base = self.log_end_offset();
            let count = batch.count();
            // The stored bytes, `head` then `rest`, their largest timestamp and indexed offset.
            let (head, rest, stored_max, index_offset): (&[u8], &[u8], i64, i64) = match batch {
                Checked::V2 { h, bytes, attributes, max_ts, .. } => {
                    if *attributes != h.attributes || *max_ts != h.max_timestamp {
                        patched = patched_header(bytes, base, *attributes, *max_ts);
                        (&patched[..], &bytes[HEADER_LEN..], *max_ts, base)
                    } else {
                        patched[..8].copy_from_slice(&base.to_be_bytes());
                        (&patched[..8], &bytes[8..], h.max_timestamp, base)
                    }
                }
                Checked::Legacy { bytes, wrapper, stored, max_ts, .. } => {
                    let indexed = if *wrapper { base + count - 1 } else { base };
                    match stored {
                        legacy::Stored::Prefix { prefix, len } => (&prefix[..*len], &bytes[*len..], *max_ts, indexed),
                        legacy::Stored::Rebuilt(v) => (&v[..], &[][..], *max_ts, indexed),
                    }
                }
            };
            let len = (head.len() + rest.len()) as u64;
            let last = base + count - 1;
            if self.maybe_roll_for_time(now) || self.active().needs_roll(len, last, self.config.segment_bytes) {
                self.roll(now);
                demand = FlushDemand::Kick;
            }
            let disk = self.disk.clone();
            let seg = self.active_mut();
            seg.append_batch(&disk, head, rest, base, index_offset, last + 1);
            let seg_base = seg.base_offset;
            seg.time.as_mut().expect("active segment has its time index").on_batch(seg_base, base, stored_max);
            if seg.tail.as_ref().is_some_and(|t| t.has_unsubmitted()) {
                demand = FlushDemand::Kick;
            }
            // Before the next batch's roll can close this segment (its T5.5 entry).
            self.last_append_ms = now;
            if let Checked::V2 { h, seq: Some(seq), .. } = batch {
                self.producers.record(h.producer_id, h.producer_epoch, *seq, now);
            }
            info.last_offset = last;
            info.records += count as u64;
            info.bytes += len;
        }
        metrics::since(Stage::Copy, copying);
        self.unflushed_records += info.records;
        if self.unflushed_records >= self.config.flush_messages
            || self.unflushed_bytes() > self.config.max_unflushed_bytes
        {
            demand = FlushDemand::Wait;
        }
        Ok((info, demand))
    }

    /// The largest timestamp ever appended (-1 if none). After every close the log's last
    /// time-index entry is its largest timestamp (SPEC T5.3), so only the active segment's
    /// batches can hold a larger one.
    pub fn largest_timestamp(&self) -> i64 {
        let t = self.active().time.as_ref().expect("active segment has its time index");
        t.last_ts.unwrap_or(-1).max(t.max_ts)
    }

    /// SPEC T7.1, time part: roll a non-empty active segment once `segment.ms` has passed
    /// since the largest timestamp (or, if no record has one, since the segment began), at
    /// most once per `segment.ms`. Returns whether a roll is due (the caller rolls).
    pub fn maybe_roll_for_time(&mut self, now: i64) -> bool {
        if self.closing || self.active().size == 0 {
            return false;
        }
        let largest = self.largest_timestamp();
        let reference = if largest >= 0 { largest } else { self.roll_reference_ms };
        let period = self.config.segment_ms.min(i64::MAX as u64) as i64;
        let due = now.saturating_sub(reference) >= period && now.saturating_sub(self.last_time_roll_ms) >= period;
        if due {
            self.last_time_roll_ms = now;
        }
        due
    }

    /// Start a new active segment at the log end. The old one gets its closing time-index
    /// entry now (SPEC T5.3, T5.5) and is sealed by the flusher.
    pub fn roll(&mut self, now: i64) {
        let base = self.log_end_offset();
        if self.closing || self.active().state != SegmentState::Active || self.active().size == 0 {
            return;
        }
        let last_ts = self.close_active();
        let seg = new_active_segment(&self.disk, &self.config, base, last_ts);
        self.segments.insert(base, seg);
        self.roll_reference_ms = now;
    }

    /// Mark the active segment Closing with its close entry; returns the log's last
    /// time-index timestamp after it.
    fn close_active(&mut self) -> Option<i64> {
        let last_append_ms = self.last_append_ms;
        // The producer state at this segment's end, written with its seal.
        let snapshot = self.producers.encode();
        let seg = self.active_mut();
        seg.producer_snapshot = Some(snapshot);
        seg.state = SegmentState::Closing;
        let (base, last) = (seg.base_offset, seg.next_offset - 1);
        let time = seg.time.as_mut().expect("active segment has its time index");
        time.on_close(base, last, Some(last_append_ms));
        time.last_ts
    }

    /// Appended bytes not yet durable (only the newest segments can hold any).
    pub fn unflushed_bytes(&self) -> u64 {
        self.segments
            .values()
            .rev()
            .take_while(|s| s.state != SegmentState::Sealed)
            .map(|s| s.size - s.durable_size)
            .sum()
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
        let tail = seg.tail.as_mut().expect("an unsealed segment has a tail");
        tail.seal_open(&disk, seg.durable_size);
        let writes = tail.take_writes();
        let max_end = writes.iter().map(|w| w.pos + w.buf.as_ref().as_ref().len() as u64).max().unwrap_or(0);
        let allocate_to = if max_end > seg.allocated {
            let step = preallocate_bytes.max(PAGE);
            let want = align_up(max_end).div_ceil(step) * step;
            want.min(align_up(segment_bytes).max(align_up(max_end)))
        } else {
            0
        };
        let seal = (seg.state == SegmentState::Closing).then(|| SealWork {
            size: seg.size,
            index: seg.index.as_ref().expect("unsealed segment has its index").index.encode(),
            time_index: seg.time.as_ref().expect("unsealed segment has its time index").encode(),
            snapshot: (seg.next_offset, seg.producer_snapshot.clone().expect("a closing segment has its snapshot")),
        });
        self.flush_in_flight = true;
        self.unflushed_records = 0;
        Some(FlushWork {
            disk,
            dir: dir.clone(),
            base_offset: seg.base_offset,
            file: seg.file.clone(),
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
        if let Some(f) = done.file {
            seg.file.get_or_insert(f);
        }
        let tail = seg.tail.as_mut().expect("flushed segment has a tail");
        match done.result {
            Ok(()) => {
                tail.complete(done.chunks);
                seg.durable_size = done.target_size;
                seg.allocated = seg.allocated.max(done.allocated);
                if done.sealed {
                    seg.state = SegmentState::Sealed;
                    seg.tail = None;
                    seg.allocated = seg.size;
                }
                self.durable_next_offset = self.durable_next_offset.max(done.target_next_offset);
                if let Some((e, failures)) = self.flush_failure.take() {
                    tracing::warn!(dir = %self.dir.display(), failures, last_error = %e, "flush succeeded again; appends accepted");
                }
                Ok(self.durable_next_offset)
            }
            Err(e) => {
                tail.unsubmit();
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

    /// Plan a read of whole batches starting with the one that holds `offset`, up to about
    /// `max_bytes` (the first batch is returned whole even when larger, as KIP-74 asks).
    pub fn plan_read(&self, offset: i64, max_bytes: usize, upto: ReadUpTo) -> StorageResult<ReadPlan<D>> {
        let (start, end) = (self.log_start_offset(), self.log_end_offset());
        if offset < start || offset > end {
            return Err(StorageError::OffsetOutOfRange { offset, start, end });
        }
        let limit = match upto {
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
        let Some(builder) = seg.index.as_ref() else {
            return Ok(ReadPlan::NeedIndex(base));
        };
        let mut start_pos = builder.index.lookup((offset - base) as u32) as u64;
        if seg.tail.is_some() && offset >= self.durable_next_offset {
            // Not durable yet, so in memory. Flushes complete in segment order, so this
            // segment's durable_size is the batch boundary where durable_next_offset starts
            // (or 0 for a segment never flushed): start there, in the tail.
            start_pos = start_pos.max(seg.durable_size);
        }
        let end_pos = match upto {
            ReadUpTo::Durable => seg.durable_size,
            ReadUpTo::LogEnd => seg.size,
        };
        if let Some(tail) = seg.tail.as_ref().filter(|t| start_pos >= t.mem_start()) {
            // All in memory: copy what the read can use and walk it now.
            let budget = (self.config.index_interval_bytes + 2 * self.config.max_message_bytes) as usize + max_bytes;
            let to = end_pos.min(start_pos + budget as u64);
            let bytes = Bytes::from(tail.copy_out(start_pos, to));
            let (kept, _, _) = pick_batches(&bytes, offset, max_bytes, 0, |_| Ok(())).map_err(|(at, error)| {
                StorageError::Corrupt { path: log_path(&self.dir, base), position: start_pos + at as u64, error }
            })?;
            return Ok(ReadPlan::Done(bytes.slice(kept)));
        }
        let file = seg.file.clone();
        Ok(ReadPlan::Disk(DiskRead {
            file,
            path: log_path(&self.dir, base),
            // Bytes below durable_size are on disk; a read stops there and the consumer
            // fetches the rest (from memory) next time.
            start_pos,
            end_pos: end_pos.min(seg.durable_size),
            offset,
            max_bytes,
        }))
    }

    /// I/O to load a sealed segment's file handle and offset index for reads.
    pub fn index_load(&self, base: i64) -> IndexLoad<D> {
        let seg = &self.segments[&base];
        let spans = self.segments.range(..=base).map(|(_, s)| (s.base_offset, s.next_offset, s.size)).collect();
        IndexLoad {
            disk: self.disk.clone(),
            dir: self.dir.clone(),
            base,
            spans,
            size: seg.size,
            file: seg.file.clone(),
            config: self.config.clone(),
        }
    }

    /// Install what an [`IndexLoad`] produced (what is already loaded, or a segment that is
    /// gone, is left alone).
    pub fn install_index(&mut self, base: i64, loaded: SegmentIndexes<D>) {
        if let Some(seg) = self.segments.get_mut(&base) {
            seg.file.get_or_insert(loaded.file);
            seg.index.get_or_insert(loaded.index);
            seg.time.get_or_insert(loaded.time);
        }
    }

    /// Plan a lookup by time (SPEC T6) among records below the read limit. `-1`: the end,
    /// `-2`: the log start, `-3`: the record with the largest timestamp, otherwise the first
    /// record with a timestamp `>= t`. Binary search over segments and their time indexes
    /// for the last entry below `t` (sound by the T5.1 invariant), then a forward scan.
    pub fn plan_time_lookup(&self, t: i64, upto: ReadUpTo) -> TimePlan {
        let limit = match upto {
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
                let Some(time) = self.segments[&bases[m]].time.as_ref() else {
                    return TimePlan::NeedIndex(bases[m]);
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
    /// `Err(base)`: load that segment's indexes first. Returns (offset, timestamp, base offset
    /// of the entry's segment).
    pub fn max_scan_start(&self, before: i64) -> Result<Option<(i64, i64, i64)>, i64> {
        let start = self.log_start_offset();
        for (&b, seg) in self.segments.range(..before).rev() {
            let Some(time) = seg.time.as_ref() else { return Err(b) };
            if let Some(&(t, rel)) = time.entries.iter().rev().find(|&&(_, r)| b + (r as i64) < before) {
                return Ok(Some(((b + rel as i64).max(start), t, b)));
            }
        }
        Ok(None)
    }

    /// SPEC T7.2: the largest timestamp of segment `base`: its last time-index entry, or an
    /// earlier segment's when its own index is empty. `Err(base)` when an index must be loaded.
    fn largest_timestamp_of(&self, base: i64) -> Result<Option<i64>, i64> {
        for (&b, seg) in self.segments.range(..=base).rev() {
            let Some(time) = seg.time.as_ref() else { return Err(b) };
            if let Some(&(t, _)) = time.entries.last() {
                return Ok(Some(t));
            }
        }
        Ok(self.deleted_last_ts)
    }

    /// SPEC T7.2, T7.3: remove from the log the oldest segments whose largest timestamp is
    /// more than `retention.ms` before `now` (a prefix only; an expired active segment is
    /// rolled first and goes at a later check, once sealed). A segment whose largest
    /// timestamp is in the future is kept and logged. `Err(base)`: load that segment's
    /// indexes and call again. The caller deletes the returned segments' files.
    pub fn take_expired_by_time(&mut self, now: i64) -> Result<Vec<i64>, i64> {
        let Some(retention) = self.config.retention_ms.filter(|_| !self.closing) else { return Ok(Vec::new()) };
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
            if seg.state == SegmentState::Active {
                if seg.size > 0 {
                    self.roll(now);
                }
                break;
            }
            if !self.removable_first() {
                break;
            }
            self.deleted_last_ts =
                seg.time.as_ref().and_then(|t| t.entries.last().map(|e| e.0)).or(self.deleted_last_ts);
            self.segments.remove(&base);
            removed.push(base);
        }
        Ok(removed)
    }

    /// The first segment may be deleted: it is sealed and the next one exists on disk (the log
    /// start is the first file's base offset, and a new active segment's file appears only
    /// with its first flush).
    fn removable_first(&self) -> bool {
        let mut it = self.segments.values();
        match (it.next(), it.next()) {
            (Some(first), Some(next)) => {
                first.state == SegmentState::Sealed && (next.state == SegmentState::Sealed || next.file.is_some())
            }
            _ => false,
        }
    }

    /// Remove the oldest sealed segments beyond `retention.bytes` from the log; the caller
    /// deletes their files with [`delete_segment_files`]. The active segment is never removed.
    pub fn take_expired_by_size(&mut self) -> Vec<i64> {
        let Some(limit) = self.config.retention_bytes.filter(|_| !self.closing) else {
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
            if let Some(&(t, _)) = seg.time.as_ref().and_then(|t| t.entries.last()) {
                self.deleted_last_ts = Some(t);
            }
            self.segments.remove(&base);
            removed.push(base);
        }
        removed
    }

    /// Forget idempotent producers idle for `producer.id.expiration.ms` (upkeep). Returns how
    /// many.
    pub fn expire_producers(&mut self, now: i64) -> usize {
        let ttl = self.config.producer_id_expiration_ms.min(i64::MAX as u64) as i64;
        self.producers.expire(now.saturating_sub(ttl))
    }

    /// The idempotent producers this partition knows.
    pub fn producers(&self) -> &ProducerState {
        &self.producers
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
            if let Some(&(t, _)) = seg.time.as_ref().and_then(|t| t.entries.last()) {
                self.deleted_last_ts = Some(t);
            }
            self.segments.remove(&base);
            removed.push(base);
        }
        removed
    }

    /// Begin a clean shutdown: no more appends; the active segment gets its close
    /// entry and is sealed by the flusher.
    pub fn begin_close(&mut self) {
        if self.closing {
            return;
        }
        self.closing = true;
        let active = self.active();
        if active.size == 0 && active.file.is_none() && self.segments.len() > 1 {
            // Never written: it exists only in memory. The next open starts a new one.
            let base = active.base_offset;
            self.segments.remove(&base);
        } else if active.state == SegmentState::Active {
            self.close_active();
        }
    }

    /// After [`Log::begin_close`] and the last flush: write the clean-shutdown marker.
    pub async fn write_clean_marker(&self) -> StorageResult<()> {
        assert!(self.closing && !self.has_unflushed(), "clean marker before every segment is sealed");
        let marker = encode_clean_marker(self.log_end_offset(), self.last_time_entry());
        self.disk.write_file_atomic(&self.dir.join(CLEAN_MARKER), &marker).await?;
        Ok(())
    }

    /// Timestamp of the log's last time-index entry (what the next bucket entry must exceed).
    pub fn last_time_entry(&self) -> Option<i64> {
        self.segments.values().rev().find_map(|s| s.time.as_ref().map(|t| t.last_ts)).flatten()
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

    /// The offset index of a segment, if loaded.
    pub fn index_entries(&self, base: i64) -> Option<Vec<(u32, u32)>> {
        self.segments.get(&base)?.index.as_ref().map(|b| b.index.entries().to_vec())
    }

    /// Read, for an exclusive owner (tests and offline tools); see [`crate::storage::access`].
    pub async fn read(&mut self, offset: i64, max_bytes: usize, upto: ReadUpTo) -> StorageResult<Bytes> {
        crate::storage::access::read(&RefCell::new(self), offset, max_bytes, upto).await
    }

    /// Lookup by time (SPEC T6), for an exclusive owner.
    pub async fn offset_for_time(&mut self, t: i64, upto: ReadUpTo) -> StorageResult<Option<(i64, i64)>> {
        crate::storage::access::offset_for_time(&RefCell::new(self), t, upto).await
    }

    /// DeleteRecords (KIP-107), for an exclusive owner: see [`crate::storage::access::delete_records`].
    pub async fn delete_records(&mut self, offset: i64, now: i64) -> StorageResult<i64> {
        crate::storage::access::delete_records(&RefCell::new(self), offset, now).await
    }

    /// Time-based roll and retention (SPEC T7), for an exclusive owner.
    pub async fn maintain(&mut self, now: i64) -> StorageResult<Vec<i64>> {
        crate::storage::access::maintain(&RefCell::new(self), now).await
    }

    /// The time index entries of a segment, if loaded.
    pub fn time_entries(&self, base: i64) -> Option<Vec<(i64, u32)>> {
        self.segments.get(&base)?.time.as_ref().map(|t| t.entries.clone())
    }

    /// Run flush jobs until nothing waits, for an exclusive owner.
    pub async fn flush_all(&mut self) -> StorageResult<()> {
        while let Some(work) = self.prepare_flush() {
            let done = work.run().await;
            self.complete_flush(done)?;
        }
        Ok(())
    }

    /// Clean shutdown for an exclusive owner: seal everything, write the marker.
    pub async fn close(mut self) -> StorageResult<()> {
        self.begin_close();
        self.flush_all().await?;
        self.write_clean_marker().await
    }
}

/// A new, empty active segment at `base` whose time index continues after `last_ts`. Its
/// file is created by the flusher.
fn new_active_segment<D: Disk>(disk: &D, config: &LogConfig, base: i64, last_ts: Option<i64>) -> Segment<D> {
    Segment {
        base_offset: base,
        next_offset: base,
        size: 0,
        durable_size: 0,
        state: SegmentState::Active,
        file: None,
        allocated: 0,
        index: Some(IndexBuilder::new(offset_entries(config), config.index_interval_bytes)),
        time: Some(TimeBuilder::new(time_entries(config), last_ts, config.time_index_interval_ms)),
        tail: Some(Tail::new(disk, 0, &[], config.write_chunk_bytes as usize)),
        producer_snapshot: None,
    }
}

/// A segment the flusher must visit: data to write, a seal to do, or (an active segment
/// after a roll) a file to create, so that the segment before it can be deleted by retention
/// even if no record ever arrives.
fn needs_flush<D: Disk>(s: &Segment<D>) -> bool {
    s.state == SegmentState::Closing || s.size > s.durable_size || (s.state == SegmentState::Active && s.file.is_none())
}

/// Delete a removed segment's files (log first: an index left alone is cleaned at open).
pub async fn delete_segment_files<D: Disk>(disk: &D, dir: &Path, base: i64) -> StorageResult<()> {
    disk.remove_file(&log_path(dir, base)).await?;
    disk.remove_file(&index_path(dir, base)).await?;
    disk.remove_file(&timeindex_path(dir, base)).await?;
    disk.sync_dir(dir).await?;
    Ok(())
}

/// The rolled segment's seal: trim to `size`, write `index`, `time_index` and the producer
/// snapshot at the segment's end.
pub struct SealWork {
    size: u64,
    index: Vec<u8>,
    time_index: Vec<u8>,
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
    result: Result<(), IoError>,
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

    async fn run_inner(&self, slot: &mut Option<Rc<D::File>>) -> Result<(), IoError> {
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
        Ok(())
    }
}

/// Opening a sealed segment and loading (or rebuilding, SPEC T8.4) its offset index.
pub struct IndexLoad<D: Disk> {
    disk: D,
    dir: PathBuf,
    base: i64,
    /// This segment and the ones before it, for a time-index rebuild's context.
    spans: Vec<SegmentSpan>,
    size: u64,
    file: Option<Rc<D::File>>,
    config: LogConfig,
}

impl<D: Disk> IndexLoad<D> {
    pub async fn run(self) -> StorageResult<SegmentIndexes<D>> {
        let file = match self.file {
            Some(f) => f,
            None => Rc::new(self.disk.open_rw(&log_path(&self.dir, self.base)).await?),
        };
        let max_entries = (self.config.segment_index_bytes / 8) as usize;
        let ipath = index_path(&self.dir, self.base);
        let loaded = self.disk.read_file(&ipath).await?.map(|b| decode_offset_index(&b, self.size.max(1)));
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
        let builder = match loaded {
            Some(Ok(entries)) => {
                let after = entries.last().map_or(self.size, |&(_, p)| self.size - p as u64);
                IndexBuilder::resume(
                    OffsetIndex::from_entries(entries, max_entries),
                    after,
                    self.config.index_interval_bytes,
                )
            }
            other => {
                let why = match other {
                    Some(Err(e)) => e.to_string(),
                    _ => "missing".to_string(),
                };
                tracing::warn!(path = %ipath.display(), reason = %why, "rebuilding offset index");
                let scan =
                    scan_segment(&*file, self.base, self.size, ScanFrom::start(self.base, &self.config, None)).await?;
                if let Some((pos, e)) = scan.stop {
                    return Err(StorageError::Corrupt {
                        path: log_path(&self.dir, self.base),
                        position: pos,
                        error: e,
                    });
                }
                self.disk.write_file_atomic(&ipath, &scan.index.index.encode()).await?;
                scan.index
            }
        };
        let (time, _) = time_index_of(&self.disk, &self.dir, &self.spans, self.spans.len() - 1, &self.config).await?;
        Ok(SegmentIndexes { file, index: builder, time })
    }
}

/// What [`IndexLoad`] brings: a sealed segment's open file and both its indexes.
pub struct SegmentIndexes<D: Disk> {
    pub file: Rc<D::File>,
    pub index: IndexBuilder,
    pub time: TimeBuilder,
}

/// A planned lookup by time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TimePlan {
    /// The answer: (offset, timestamp), or `None` (Kafka's -1, -1).
    Found(Option<(i64, i64)>),
    /// Load this sealed segment's indexes first.
    NeedIndex(i64),
    /// Scan batches from offset `from` (a batch's first offset) for the first record with a
    /// timestamp `>= t` below offset `limit`.
    Scan { from: i64, t: i64, limit: i64 },
    /// Find the largest timestamp below offset `limit` and its first record, scanning back
    /// from the limit ([`Log::max_scan_start`]).
    ScanMax { limit: i64 },
}

/// A planned read.
pub enum ReadPlan<D: Disk> {
    /// Answered from memory (or empty).
    Done(Bytes),
    /// Needs disk reads, without borrowing the log.
    Disk(DiskRead<D>),
    /// The segment's index must be loaded first ([`Log::index_load`]).
    NeedIndex(i64),
}

pub struct DiskRead<D: Disk> {
    file: Option<Rc<D::File>>,
    path: PathBuf,
    start_pos: u64,
    end_pos: u64,
    offset: i64,
    max_bytes: usize,
}

/// From the batches in `bytes` (starting at a batch boundary), keep the first one that holds
/// records at or after `offset` and those after it while the total (with `already` bytes
/// collected before) fits in `max_bytes`; the very first batch is kept whole even when it is
/// larger (KIP-74). The batches kept are contiguous: returns their byte range (empty when
/// none), the bytes walked and whether the read is complete. `check` vets each kept batch.
/// No bytes are copied: callers slice.
fn pick_batches(
    bytes: &[u8],
    offset: i64,
    max_bytes: usize,
    already: usize,
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
        if let Some(first) = h.first_offset.filter(|&f| have == 0 && f > offset) {
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

impl<D: Disk> DiskRead<D> {
    /// Read from disk, checking each returned batch's CRC (bytes are vetted before they are
    /// written and after they are read).
    pub async fn run(self, disk: &D) -> StorageResult<Bytes> {
        let file = match self.file {
            Some(f) => f,
            None => Rc::new(disk.open_rw(&self.path).await?),
        };
        let corrupt =
            |position: u64, error: FormatError| StorageError::Corrupt { path: self.path.clone(), position, error };
        // The kept batches of each window, as slices of the window (no copy).
        let mut parts: Vec<Bytes> = Vec::new();
        let mut collected = 0usize;
        let mut pos = self.start_pos;
        let mut want = 0usize;
        while pos < self.end_pos {
            // A default window bounded at 16 MiB, or exactly one batch when it is larger.
            let window = want.max((self.max_bytes.saturating_sub(collected) + 64 * 1024).min(16 << 20));
            let len = (self.end_pos - pos).min(window as u64) as usize;
            let buf = Bytes::from(file.read_at(pos, len).await?);
            let (kept, walked, done) =
                pick_batches(&buf, self.offset, self.max_bytes, collected, |b| check_stored(b).map(|_| ()))
                    .map_err(|(at, e)| corrupt(pos + at as u64, e))?;
            if !kept.is_empty() {
                collected += kept.len();
                parts.push(buf.slice(kept));
            }
            if done {
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
        // One window (the usual case) is returned as it is; several are joined.
        Ok(match parts.len() {
            0 => Bytes::new(),
            1 => parts.pop().expect("one part"),
            _ => Bytes::from(parts.concat()),
        })
    }
}
