//! Opening a log (SPEC T8).
//!
//! [`Log::open`] stats every segment, loads the newest time indexes back to one with an entry
//! (T8.1, rebuilding missing or damaged ones on the way, T8.3, T5.6), then either resumes the
//! cleanly closed last segment from its index files (a clean-shutdown marker that matches) or
//! rescans it, truncating a torn or corrupt tail. Producer state comes from the snapshot at the
//! active segment's base (or the log end), replaying sealed segments when it is missing.
//!
//! Invariants: only the last segment is ever scanned at open (every other one was sealed
//! before its successor's file existed); a rebuilt index equals the one appends built,
//! because `scan_segment` feeds the same `IndexBuilder` and `TimeBuilder` rules.
//!
//! Callers: `Log::open` (partition open, tools, tests). The walk itself and the index
//! readers are [`super::scan`]'s.

use super::append::new_active_segment;
use super::clean::CLEANER_CHECKPOINT;
use super::scan::{parse_segment_name, scan_segment, snapshot_path, time_index_of, ScanFrom, SegmentSpan};
use super::truncate::Cut;
use super::{offset_entries, Epochs, Log, OpenReport, CLEAN_MARKER, LOG_START_FILE};

mod epoch_cache;
use crate::config::LogConfig;
use crate::io::{align_down, Disk, DiskFile};
use crate::storage::error::StorageResult;
use crate::storage::format::index::{
    decode_clean_marker, decode_cleaner_checkpoint, decode_log_start, decode_max_index, decode_offset_index,
};
use crate::storage::format::stored::{BatchInfo, MAX_HEADER_LEN};
use crate::storage::format::txn_index::{self, AbortedTxn};
use crate::storage::producers::ProducerState;
use crate::storage::segment::{
    index_path, log_path, maxindex_path, txnindex_path, IndexBuilder, OffsetIndex, SealedIndexes, Segment,
    SegmentState, Tail, TimeBuilder, Unsealed,
};
use std::collections::BTreeMap;
use std::path::Path;
use std::rc::Rc;

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
        segments.get_mut(&spans[i].0).expect("sealed segment").set_time_index(time);
        if last.is_some() {
            return Ok(last);
        }
    }
    Ok(None)
}

/// The producer state at offset `at` (the active segment's base, or the log end after a clean
/// shutdown), where `spans` are the sealed segments below `at`: the snapshot named `at`
/// (written when the segment ending there was sealed); if that one is missing or damaged, the
/// newest valid one below it with the sealed segments after it replayed (from the log start
/// when none is valid or none exists: a first seal cut before its snapshot, or data from
/// before snapshots). A log with no sealed segment below `at` has no producer to know.
/// Returns the state and the aborted transactions the replay found.
async fn producers_at<D: Disk>(
    disk: &D,
    dir: &Path,
    snapshots: &[i64],
    spans: &[SegmentSpan],
    config: &LogConfig,
    at: i64,
) -> StorageResult<(ProducerState, Vec<AbortedTxn>)> {
    if !spans.iter().any(|&(_, next, _)| next <= at) {
        return Ok((ProducerState::default(), Vec::new()));
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
        return Ok((state, Vec::new()));
    }
    let mut aborted = Vec::new();
    tracing::warn!(dir = %dir.display(), from, at, "rebuilding producer state from the segments after the newest valid snapshot");
    for &(base, _, size) in spans.iter().filter(|&&(base, next, _)| base >= from && next <= at) {
        let path = log_path(dir, base);
        let file = disk.open_existing(&path).await?;
        let mut scan_from = ScanFrom::start(base, config, None);
        scan_from.time = None;
        scan_from.producers = Some(state);
        scan_from.replay_ms = disk.mtime_ms(&path).await?;
        let scan = scan_segment(&file, base, size, scan_from).await?;
        file.close().await?;
        state = scan.producers.expect("asked for");
        aborted.extend(scan.aborted);
    }
    Ok((state, aborted))
}

impl<D: Disk> Log<D> {
    /// Open (or create) the log in `dir`, recovering from an unclean shutdown (SPEC T8).
    /// The cost is one stat per segment, the time index of the newest segments that have
    /// one (the backwards scan of T8.1), and a scan of the last segment when the shutdown was
    /// unclean. `now` stamps nothing; it starts the rolling clock.
    pub async fn open(disk: D, dir: &Path, config: LogConfig) -> StorageResult<(Log<D>, OpenReport)> {
        let mut report = OpenReport::default();
        let Found { bases, snapshots, cut, marker } = Found::read(&disk, dir).await?;
        let (until, restart) = match cut {
            Some(Cut::Suffix(offset)) => (Some(offset), None),
            Some(Cut::Restart(offset)) => (None, Some(offset)),
            None => (None, None),
        };
        // Every segment but the last is sealed.
        let mut segments = BTreeMap::new();
        for pair in bases.windows(2) {
            let size = disk.file_size(&log_path(dir, pair[0])).await?;
            segments.insert(pair[0], Segment::sealed(pair[0], pair[1], size));
        }
        let spans: Vec<SegmentSpan> = segments.values().map(|s| (s.base_offset, s.next_offset, s.size)).collect();
        let gaps = disk.exists(&dir.join(CLEANER_CHECKPOINT)).await?;
        let at = Opening { disk: &disk, dir, config: &config, spans, snapshots, until, gaps };
        // SPEC T8.1: the log's last time-index timestamp. A clean shutdown recorded it in the
        // marker; otherwise scan back from the newest sealed segment until an index holds an
        // entry (rebuilding a missing or damaged one on the way, T8.3, T5.6).
        let mut context_ts = match marker {
            Some((_, last_ts)) => last_ts,
            None => backward_scan(&disk, dir, &at.spans, &mut segments, &config, &mut report).await?,
        };
        // The last segment becomes the active one.
        let base = bases.last().copied().unwrap_or(restart.unwrap_or(0));
        let path = log_path(dir, base);
        let file = disk.open_rw(&path).await?;
        if bases.is_empty() {
            // A new log: its first segment's directory entry must be durable.
            disk.sync_dir(dir).await?;
        }
        let file_size = file.size().await?;
        let resumed = match marker {
            Some((marker_end, _)) => at.resume(&file, base, file_size, marker_end, context_ts, &mut report).await?,
            None => None,
        };
        let mut last = match resumed {
            Some(last) => last,
            None => {
                if marker.is_some() {
                    // The marker's timestamp includes this segment's own entries, which the
                    // rescan rebuilds: continue from the entries before it instead.
                    context_ts = backward_scan(&disk, dir, &at.spans, &mut segments, &config, &mut report).await?;
                }
                at.rescan(&file, base, file_size, context_ts, &mut report).await?
            }
        };
        let (producers, aborted) = at.producers(base, &mut last, report.clean).await?;
        // From here on the directory is not clean any more.
        if disk.exists(&dir.join(CLEAN_MARKER)).await? {
            disk.remove_file(&dir.join(CLEAN_MARKER)).await?;
            disk.sync_dir(dir).await?;
        }
        let roll_reference_ms = disk.mtime_ms(&path).await?;
        let next_offset = last.next_offset;
        let last_span = (base, next_offset, last.size);
        let scanned_epochs = last.epochs.take();
        at.install_last(&mut segments, base, file, last, report.clean).await?;
        report.segments = segments.len();
        // (Before a truncation's intent goes: a crash in between carries it out again.)
        let epochs = at.epochs(last_span, scanned_epochs, matches!(cut, Some(Cut::Restart(_)))).await?;
        if cut.is_some() {
            super::truncate::finish(&disk, dir, next_offset).await?;
            report.suffix_truncated_to = Some(next_offset);
        }
        let start_offset = read_log_start(&disk, dir, next_offset).await?;
        let (may_have_gaps, cleaned_to) = read_cleaned_to(&disk, dir).await?;
        let log = Log {
            disk,
            dir: dir.to_path_buf(),
            config,
            segments,
            durable_next_offset: next_offset,
            unflushed_records: 0,
            pipeline: Default::default(),
            flush_failure: None,
            closing: false,
            last_time_roll_ms: i64::MIN,
            roll_reference_ms,
            deleted_last_ts: None,
            last_append_ms: roll_reference_ms,
            producers,
            aborted,
            start_offset,
            markers_appended: 0,
            swapping: false,
            may_have_gaps,
            cleaned_to,
            generation: 0,
            loads: Rc::new(()),
            cache: None,
            epochs,
            epochs_changed: false,
            leader_epoch: None,
            replicated_to: None,
        };
        Ok((log, report))
    }
}

/// Whether the log has a cleaner checkpoint (then it may have gaps: compaction ran), and the
/// offset it names (`i64::MIN` when there is none or it does not read).
async fn read_cleaned_to<D: Disk>(disk: &D, dir: &Path) -> StorageResult<(bool, i64)> {
    let checkpoint = disk.read_file(&dir.join(CLEANER_CHECKPOINT)).await?;
    Ok((checkpoint.is_some(), checkpoint.as_deref().and_then(decode_cleaner_checkpoint).unwrap_or(i64::MIN)))
}

/// What a log's directory holds before its segments are read: the segment bases and producer
/// snapshots (what a begun suffix truncation drops already gone), the truncation itself, and
/// the clean-shutdown marker (log end offset, last time-index timestamp), which a truncation
/// voids.
struct Found {
    bases: Vec<i64>,
    snapshots: Vec<i64>,
    cut: Option<Cut>,
    marker: Option<(i64, Option<i64>)>,
}

impl Found {
    async fn read<D: Disk>(disk: &D, dir: &Path) -> StorageResult<Found> {
        disk.create_dir_all(dir).await?;
        if let Some(parent) = dir.parent() {
            disk.sync_dir(parent).await?;
        }
        super::clean::recover_swaps(disk, dir).await?;
        let (mut bases, mut snapshots) = list_segment_files(disk, dir).await?;
        // A suffix truncation begun (`log::truncate`): its files go first, and the last segment
        // left is cut at the offset by the rescan (a clean marker cannot describe it).
        let cut = super::truncate::read_intent(disk, dir).await?;
        if let Some(cut) = cut {
            super::truncate::drop_files(disk, dir, &mut bases, &mut snapshots, cut).await?;
        }
        let marker = match cut {
            Some(_) => None,
            None => disk.read_file(&dir.join(CLEAN_MARKER)).await?.and_then(|b| decode_clean_marker(&b)),
        };
        Ok(Found { bases, snapshots, cut, marker })
    }
}

/// The segment files in `dir`: the base offsets of the `.log` files (sorted) and the offsets
/// of the producer snapshots. Removes what an interrupted write or deletion left: `.tmp`
/// files, and index files without their log.
async fn list_segment_files<D: Disk>(disk: &D, dir: &Path) -> StorageResult<(Vec<i64>, Vec<i64>)> {
    let mut bases = Vec::new();
    let mut others = Vec::new();
    let mut snapshots = Vec::new();
    for name in disk.list_dir(dir).await? {
        match parse_segment_name(&name) {
            Some((base, "log")) => bases.push(base),
            Some((offset, "snapshot")) => snapshots.push(offset),
            Some((base, "index" | "maxtimeindex" | "timeindex" | "txnindex")) => others.push((base, name)),
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
    Ok((bases, snapshots))
}

/// KIP-107: the log start DeleteRecords moved (never past the log end `next_offset`), or
/// `i64::MIN` when there is none (the log starts at its first segment).
async fn read_log_start<D: Disk>(disk: &D, dir: &Path, next_offset: i64) -> StorageResult<i64> {
    Ok(match disk.read_file(&dir.join(LOG_START_FILE)).await? {
        Some(bytes) => match decode_log_start(&bytes) {
            Some(o) => o.min(next_offset),
            None => {
                tracing::warn!(dir = %dir.display(), "unreadable {LOG_START_FILE}: the log starts at its first segment");
                i64::MIN
            }
        },
        None => i64::MIN,
    })
}

/// The aborted transactions of a log: the `.txnindex` of each segment in `bases` (a damaged
/// one is logged and skipped), merged with `replayed` (entries rebuilt by replaying
/// segments), in marker order, one entry per marker.
async fn load_aborted<D: Disk>(
    disk: &D,
    dir: &Path,
    bases: &[i64],
    replayed: Vec<AbortedTxn>,
) -> StorageResult<Vec<AbortedTxn>> {
    let mut by_marker: BTreeMap<i64, AbortedTxn> = BTreeMap::new();
    for &base in bases {
        let path = txnindex_path(dir, base);
        if let Some(bytes) = disk.read_file(&path).await? {
            match txn_index::decode(&bytes) {
                Ok(entries) => by_marker.extend(entries.into_iter().map(|t| (t.last_offset, t))),
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "damaged aborted-transaction index; skipped")
                }
            }
        }
    }
    by_marker.extend(replayed.into_iter().map(|t| (t.last_offset, t)));
    Ok(by_marker.into_values().collect())
}

/// The last segment as recovery found it.
struct Last {
    next_offset: i64,
    size: u64,
    index: IndexBuilder,
    time: TimeBuilder,
    /// The producer state a rescan replayed; `None` after a clean resume, which read no batch.
    producers: Option<ProducerState>,
    /// The aborted transactions replays found (the rescanned segment's, and those of any
    /// sealed segment replayed for lack of a snapshot).
    aborted: Vec<AbortedTxn>,
    /// The epochs a rescan found beginning in the segment (`None` after a clean resume).
    epochs: Option<Epochs>,
}

/// What the steps of [`Log::open`] share: the directory, its sealed segments (every segment
/// but the last) and its producer snapshots.
struct Opening<'a, D: Disk> {
    disk: &'a D,
    dir: &'a Path,
    config: &'a LogConfig,
    spans: Vec<SegmentSpan>,
    snapshots: Vec<i64>,
    /// A suffix truncation's offset: the last segment ends before the batch holding it.
    until: Option<i64>,
    /// The log may have gaps (its cleaner checkpoint exists): a follower's copy of a
    /// compacted leader has them in its last segment too.
    gaps: bool,
}

impl<D: Disk> Opening<'_, D> {
    /// The producer state at the log end and the aborted transactions, once the last segment
    /// (at `base`) is read: the clean path read no batch, so its producer state is the snapshot
    /// at the log end; the aborted transactions are each segment's `.txnindex` and what replays
    /// found (for segments whose seal did not finish, and the rescanned active one).
    async fn producers(
        &self,
        base: i64,
        last: &mut Last,
        clean: bool,
    ) -> StorageResult<(ProducerState, Vec<AbortedTxn>)> {
        let mut replayed = std::mem::take(&mut last.aborted);
        let mut producers = match last.producers.take() {
            Some(p) => p,
            None => {
                let mut all = self.spans.clone();
                all.push((base, last.next_offset, last.size));
                let at = last.next_offset;
                let (p, aborted) = producers_at(self.disk, self.dir, &self.snapshots, &all, self.config, at).await?;
                replayed.extend(aborted);
                p
            }
        };
        let mut bases_to_read: Vec<i64> = self.spans.iter().map(|s| s.0).collect();
        if clean {
            bases_to_read.push(base);
        }
        let aborted = load_aborted(self.disk, self.dir, &bases_to_read, replayed).await?;
        // Everything recovered is durable: replayed markers hold no transaction back.
        producers.on_high_watermark(last.next_offset);
        Ok((producers, aborted))
    }

    /// After a clean shutdown whose marker says the log ends at `marker_end`: the last segment
    /// from its index files, without reading its batches (but those after the offset index's
    /// last entry). `None` when anything does not check out: the caller rescans.
    async fn resume(
        &self,
        file: &D::File,
        base: i64,
        file_size: u64,
        marker_end: i64,
        context_ts: Option<i64>,
        report: &mut OpenReport,
    ) -> StorageResult<Option<Last>> {
        // Clean: the log was trimmed and its indexes written. Resume the offset index from
        // its last entry, hopping batch headers to the end; load the time index.
        let Some((next, size, index)) = self.resume_offset_index(file, base, file_size).await? else {
            return Ok(None);
        };
        if next != marker_end {
            return Ok(None);
        }
        let mut all = self.spans.clone();
        all.push((base, next, size));
        let (mut time, rebuilt) = time_index_of(self.disk, self.dir, &all, all.len() - 1, self.config).await?;
        report.rebuilt_time_indexes += rebuilt as usize;
        time.last_ts = time.entries.last().map(|e| e.0).or(context_ts);
        // An empty segment (resumed as the active one) has no batch left unread.
        time.complete |= size == 0;
        report.clean = true;
        Ok(Some(Last { next_offset: next, size, index, time, producers: None, aborted: Vec::new(), epochs: None }))
    }

    /// For a cleanly closed last segment: (next offset, size, index) from its index file and
    /// the batches after its last entry; `None` when anything does not check out.
    async fn resume_offset_index(
        &self,
        file: &D::File,
        base: i64,
        size: u64,
    ) -> StorageResult<Option<(i64, u64, IndexBuilder)>> {
        let (disk, dir, config) = (self.disk, self.dir, self.config);
        let (bytes, max) = futures_util::future::join(
            disk.read_file(&index_path(dir, base)),
            disk.read_file(&maxindex_path(dir, base)),
        )
        .await;
        let max = super::scan::optional(max, &maxindex_path(dir, base));
        let Some(bytes) = bytes? else {
            return Ok(None);
        };
        let Ok(entries) = decode_offset_index(&bytes, size.max(1)) else {
            return Ok(None);
        };
        let max_before = max.and_then(|m| decode_max_index(&m, &bytes, entries.len()));
        // Continue from just past the last entry's batch, as if appends had built it.
        let mut from = ScanFrom::start(base, config, None);
        from.time = None;
        from.gaps = self.gaps;
        if let Some(&(rel, p)) = entries.last() {
            let head = file.read_at(p as u64, MAX_HEADER_LEN).await?;
            let Ok(h) = BatchInfo::parse(&head) else {
                return Ok(None);
            };
            if h.index_offset() != base + rel as i64 {
                return Ok(None);
            }
            let index = OffsetIndex::from_entries(entries, offset_entries(config)).with_max_before(max_before);
            let len = h.total_len as u64;
            from.index = IndexBuilder::resume(index, len, config.index_interval_bytes, h.max_timestamp);
            from.pos = p as u64 + len;
            from.expected = h.next_offset();
        }
        let scan = scan_segment(file, base, size, from).await?;
        if scan.stop.is_some() {
            return Ok(None);
        }
        Ok(Some((scan.next_offset, size, scan.index)))
    }

    /// SPEC T8.2: scan the last segment from its start, rebuilding its indexes (continuing the
    /// time index after `context_ts`) and replaying its producers' batches over the snapshot
    /// at its base, and cut a torn or corrupt tail at the first bad batch.
    async fn rescan(
        &self,
        file: &D::File,
        base: i64,
        file_size: u64,
        context_ts: Option<i64>,
        report: &mut OpenReport,
    ) -> StorageResult<Last> {
        let (disk, dir, config) = (self.disk, self.dir, self.config);
        let mut from = ScanFrom::start(base, config, context_ts);
        from.gaps = self.gaps;
        from.until = self.until;
        let (producers, mut aborted) = producers_at(disk, dir, &self.snapshots, &self.spans, config, base).await?;
        from.producers = Some(producers);
        from.replay_ms = disk.mtime_ms(&log_path(dir, base)).await?;
        from.epochs = Some(Epochs::default());
        let scan = scan_segment(file, base, file_size, from).await?;
        report.scanned_bytes = scan.scanned;
        if scan.valid_size < file_size {
            // Preallocated zeros past the end are expected, and so is a suffix truncation's cut;
            // anything else is reported.
            let len = (file_size - scan.valid_size).min(1 << 20) as usize;
            let tail = file.read_at(scan.valid_size, len).await?;
            if self.until.is_some() && scan.stop.is_none() {
                tracing::info!(dir = %dir.display(), base, position = scan.valid_size, next_offset = scan.next_offset, "suffix truncation: segment cut");
            } else if tail.iter().any(|&b| b != 0) {
                report.truncated_bytes = file_size - scan.valid_size;
                report.truncate_reason = scan.stop.as_ref().map(|(p, e)| format!("at position {p}: {e}"));
                tracing::warn!(dir = %dir.display(), base, position = scan.valid_size, reason = ?report.truncate_reason, "truncating torn or corrupt segment tail");
            }
            file.truncate(scan.valid_size).await?;
            file.sync().await?;
        }
        Ok(Last {
            next_offset: scan.next_offset,
            size: scan.valid_size,
            index: scan.index,
            time: scan.time.expect("scan built a time index"),
            producers: scan.producers,
            aborted: {
                aborted.extend(scan.aborted);
                aborted
            },
            epochs: scan.epochs,
        })
    }

    /// Put the last segment into `segments`: sealed, followed by a new empty active segment,
    /// when it was cleanly closed with data; otherwise active again, its tail starting with
    /// the partial last page read back from its file.
    async fn install_last(
        &self,
        segments: &mut BTreeMap<i64, Segment<D>>,
        base: i64,
        file: D::File,
        last: Last,
        clean: bool,
    ) -> StorageResult<()> {
        let Last { next_offset, size, index, time, .. } = last;
        if clean && size > 0 {
            // A segment is active once in its life (as Redpanda does): the cleanly closed last
            // segment stays sealed, with its close entry, and a new active segment begins at
            // the log end; its file appears with its first flush. A rescan after a later crash
            // then rebuilds exactly what this segment's single active life built.
            let last_ts = time.last_ts;
            let indexes = SealedIndexes::Loaded { file: Rc::new(file), index: index.index, time };
            let sealed = Segment {
                base_offset: base,
                next_offset,
                size,
                durable_size: size,
                first_batch_ts: None,
                state: SegmentState::Sealed(indexes),
            };
            segments.insert(base, sealed);
            segments.insert(next_offset, new_active_segment(self.disk, self.config, next_offset, last_ts));
        } else {
            // Unclean (the segment continues its active life) or empty: resume it.
            let partial = file.read_at(align_down(size), (size - align_down(size)) as usize).await?;
            let tail = Tail::new(self.disk, size, &partial, self.config.write_chunk_bytes as usize);
            let allocated = file.size().await?;
            let unsealed = Unsealed { file: Some(Rc::new(file)), allocated, zeroed: 0, index, time, tail };
            let active = Segment {
                base_offset: base,
                next_offset,
                size,
                durable_size: size,
                first_batch_ts: None,
                state: SegmentState::Active(unsealed),
            };
            segments.insert(base, active);
        }
        Ok(())
    }
}
