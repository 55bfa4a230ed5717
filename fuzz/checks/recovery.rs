//! Opening a partition log whose files hold arbitrary bytes (SPEC T8): never a panic, and
//! what it opens is consistent.
//!
//! Input: a flags byte, then file records until the data ends: kind u8, base offset u32 BE,
//! length u16 BE, bytes (cut at the end of the data). Kind % 5: `.log`, `.index`,
//! `.timeindex`, `.snapshot` (the base is its offset) or the `clean-shutdown` marker (base
//! ignored). A later record for the same file replaces it. Flags: bit 0 fixes the CRC of every
//! framed batch in each `.log`; bit 1 gives the marker its magic and CRC; bit 2 gives each
//! snapshot its magic and CRC (random bytes rarely get past a CRC); bits 3-4 pick a config.
//! `seedgen` (next to this crate) writes real logs in this form as seeds.
//!
//! After `Log::open` on a `MemDisk` holding those files:
//! - log start <= log end, durable offset = log end (nothing is unflushed after an open);
//! - every read that succeeds returns whole batches that pass `check_stored`, starting with
//!   the one holding the offset asked for;
//! - after an unclean open the last segment was scanned: it reads back from its base to the
//!   log end without an error, batch after contiguous batch;
//! - time lookups (`-1`, `-2`, `-3`, t >= 0) answer offsets below the log end, or an error;
//! - an append lands at the log end, and a clean close and reopen restores the same end.

use futures_lite::future::block_on;
use std::path::PathBuf;
use tidemark::config::LogConfig;
use tidemark::io::{Disk, MemDisk};
use tidemark::storage::format::batch::BatchBuilder;
use tidemark::storage::format::stored::{self, check_stored, BatchWalk};
use tidemark::storage::{Log, ReadUpTo};

const NOW: i64 = 10_000;
/// Bytes per read: small, so reads cross batch and segment boundaries.
const READ_BYTES: usize = 1500;
/// Reads per check, so a pathological log cannot make one input run for long.
const MAX_READS: usize = 2000;

fn dir() -> PathBuf {
    PathBuf::from("/data/topic-0")
}

fn config(pick: u8) -> LogConfig {
    let base = LogConfig {
        write_chunk_bytes: 8192,
        preallocate_bytes: 8192,
        flush_messages: u64::MAX,
        ..LogConfig::default()
    };
    match pick % 4 {
        0 => LogConfig { index_interval_bytes: 150, ..base },
        1 => LogConfig { index_interval_bytes: 0, time_index_interval_ms: 1, ..base },
        2 => LogConfig { index_interval_bytes: 4096, segment_index_bytes: 16, ..base },
        _ => LogConfig { index_interval_bytes: 300, max_message_bytes: 2048, retention_ms: None, ..base },
    }
}

/// Fix the CRC of each batch framed in `log` (stopping at the first implausible frame).
fn fix_frames(log: &mut [u8]) {
    let mut pos = 0usize;
    while log.len() - pos >= stored::MIN_BATCH_LEN {
        let len = i32::from_be_bytes(log[pos + 8..pos + 12].try_into().unwrap()) as i64 + 12;
        if len < stored::MIN_BATCH_LEN as i64 || len > (log.len() - pos) as i64 {
            break;
        }
        stored::rewrite_crc(&mut log[pos..pos + len as usize]);
        pos += len as usize;
    }
}

/// `magic`, the bytes, CRC-32C of everything before it (the marker's and snapshot's trailer).
fn seal(magic: &[u8; 8], bytes: &[u8], body_len: Option<usize>) -> Vec<u8> {
    let mut b = magic.to_vec();
    let rest = bytes.get(8..).unwrap_or(&[]);
    let n = body_len.unwrap_or(rest.len().saturating_sub(4)).min(rest.len());
    b.extend_from_slice(&rest[..n]);
    b.resize(body_len.map_or(b.len(), |l| 8 + l), 0);
    let crc = crc32c::crc32c(&b);
    b.extend_from_slice(&crc.to_be_bytes());
    b
}

struct Files {
    flags: u8,
    files: Vec<(PathBuf, Vec<u8>)>,
}

fn parse(data: &[u8]) -> Option<Files> {
    let (&flags, mut rest) = data.split_first()?;
    let mut files: Vec<(PathBuf, Vec<u8>)> = Vec::new();
    while rest.len() >= 7 {
        let kind = rest[0] % 5;
        let base = u32::from_be_bytes(rest[1..5].try_into().unwrap()) as i64;
        let len = (u16::from_be_bytes([rest[5], rest[6]]) as usize).min(rest.len() - 7);
        let mut bytes = rest[7..7 + len].to_vec();
        rest = &rest[7 + len..];
        let name = match kind {
            0 => {
                if flags & 1 != 0 {
                    fix_frames(&mut bytes);
                }
                format!("{base:020}.log")
            }
            1 => format!("{base:020}.index"),
            2 => format!("{base:020}.timeindex"),
            3 => {
                if flags & 4 != 0 {
                    bytes = seal(b"TMPSNAP1", &bytes, None);
                }
                format!("{base:020}.snapshot")
            }
            _ => {
                if flags & 2 != 0 {
                    bytes = seal(b"TMCLEAN2", &bytes, Some(16));
                }
                tidemark::storage::log::CLEAN_MARKER.to_string()
            }
        };
        let path = dir().join(name);
        files.retain(|(p, _)| *p != path);
        files.push((path, bytes));
    }
    Some(Files { flags, files })
}

/// Read from `at` while the log has records, checking every successful read. A failed or
/// empty read (possible in a sealed segment, which recovery does not scan) skips to the next
/// segment. Reads from `strict_from` on (the scanned last segment) must succeed, contiguously.
fn read_all(log: &mut Log<MemDisk>, strict_from: Option<i64>) {
    let (start, end) = (log.log_start_offset(), log.log_end_offset());
    let bases = log.segment_bases();
    let mut at = start;
    let mut reads = 0;
    while at < end && reads < MAX_READS {
        reads += 1;
        let strict = strict_from.is_some_and(|s| at >= s);
        let bytes = match block_on(log.read(at, READ_BYTES, ReadUpTo::LogEnd)) {
            Ok(b) => b,
            Err(e) => {
                assert!(!strict, "a read at {at} in the scanned last segment failed: {e}");
                match bases.iter().find(|&&b| b > at) {
                    Some(&next) => {
                        at = next;
                        continue;
                    }
                    None => break,
                }
            }
        };
        let mut walk = BatchWalk::new(&bytes, usize::MAX >> 1);
        let mut next = at;
        let mut first = true;
        for item in walk.by_ref() {
            let (_, info, entry) = item.unwrap_or_else(|e| panic!("a read at {at} returned a bad frame: {e}"));
            if let Err(e) = check_stored(entry) {
                panic!("a read at {at} returned a batch failing check_stored: {e}");
            }
            if first {
                assert!(info.last_offset >= at, "a read at {at} began with a batch ending at {}", info.last_offset);
                if let Some(f) = info.first_offset {
                    assert!(f <= at, "a read at {at} skipped to a batch at {f}");
                    assert!(!strict || f == at, "a read at {at} of the scanned segment began at {f}");
                }
            } else if strict {
                if let Some(f) = info.first_offset {
                    assert_eq!(f, next, "reads of the scanned segment are not contiguous");
                }
            }
            if strict {
                assert!(info.last_offset < end, "a batch ending at {} past the log end {end}", info.last_offset);
            }
            first = false;
            next = next.max(info.next_offset());
        }
        assert_eq!(walk.pos(), bytes.len(), "a read at {at} returned a partial batch");
        if bytes.is_empty() || next <= at {
            assert!(!strict, "a read at {at} in the scanned last segment made no progress");
            match bases.iter().find(|&&b| b > at) {
                Some(&n) => at = n,
                None => break,
            }
            continue;
        }
        at = next;
    }
}

fn time_lookups(log: &mut Log<MemDisk>, ts: &[i64]) {
    let end = log.log_end_offset();
    for &t in ts {
        if let Ok(Some((offset, _))) = block_on(log.offset_for_time(t, ReadUpTo::LogEnd)) {
            if t >= -1 || t == -3 {
                assert!(offset <= end, "lookup of {t} answered {offset} past the log end {end}");
            }
            if t >= 0 || t == -3 {
                assert!(offset < end, "lookup of {t} answered {offset}, not below the log end {end}");
            }
        }
    }
}

/// One input: what the fuzz target and the seed-replay test both run.
pub fn run(data: &[u8]) {
    let Some(Files { flags, files }) = parse(data) else { return };
    let disk = MemDisk::new();
    block_on(disk.create_dir_all(&dir())).expect("mkdir on a MemDisk");
    for (path, bytes) in &files {
        disk.set_file_bytes(path, bytes.clone());
    }
    let config = config(flags >> 3);
    let Ok((mut log, report)) = block_on(Log::open(disk.clone(), &dir(), config.clone())) else { return };
    let (start, end) = (log.log_start_offset(), log.log_end_offset());
    assert!(start <= end, "log start {start} past log end {end}");
    assert_eq!(log.durable_offset(), end, "an open log is durable to its end");

    let last_base = *log.segment_bases().last().expect("a log has a segment");
    read_all(&mut log, (!report.clean).then_some(last_base));

    // Timestamps to look up: the special ones and a few from the data.
    let mut ts = vec![-1, -2, -3, 0, NOW];
    ts.extend(data.chunks_exact(8).take(3).map(|c| i64::from_be_bytes(c.try_into().unwrap()) & i64::MAX));
    time_lookups(&mut log, &ts);

    // The log takes an append at its end, and a clean close and reopen keep it.
    let mut b = BatchBuilder::new();
    b.push(NOW, Some(b"k"), Some(b"v"), &[]);
    b.push(NOW + 1, None, Some(b"w"), &[]);
    let Ok((info, _)) = log.append(&b.finish(), NOW) else { return };
    assert_eq!(info.base_offset, end, "an append after recovery did not land at the log end");
    if block_on(log.close()).is_err() {
        return;
    }
    let (mut log, report) = block_on(Log::open(disk.clone(), &dir(), config)).expect("reopen after a clean close");
    assert!(report.clean, "a clean close reopened unclean: {report:?}");
    assert_eq!(log.log_end_offset(), end + 2, "log end after a clean close and reopen");
    read_all(&mut log, None);
    time_lookups(&mut log, &ts);
}
