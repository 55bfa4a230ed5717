//! `tidemark dump`: print a segment (`.log`), offset index (`.index`, `.maxtimeindex`) or time index file, like
//! kafka-dump-log. Reads with std::fs: it is an offline tool.

use crate::storage::format::batch::{check_stored, BatchHeader, MAGIC_V2};
use crate::storage::format::index::{decode_max_index, decode_offset_index};
use crate::storage::format::legacy;
use crate::storage::format::stored::{frame_len, OFF_MAGIC};
use std::fmt::Write as _;
use std::path::Path;

/// Render the file at `path` as text, one line per batch or entry.
pub fn dump(path: &Path) -> std::io::Result<String> {
    let bytes = std::fs::read(path)?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let base: i64 = name.split('.').next().and_then(|s| s.parse().ok()).unwrap_or(0);
    let mut out = String::new();
    let _ = writeln!(out, "Dumping {}", path.display());
    if name.ends_with(".log") {
        dump_log(&bytes, &mut out);
    } else if name.ends_with(".index") {
        let log_size = std::fs::metadata(path.with_extension("log")).map(|m| m.len()).unwrap_or(u64::MAX);
        match decode_offset_index(&bytes, log_size) {
            Ok(entries) => {
                for (rel, pos) in entries {
                    let _ = writeln!(out, "offset: {} position: {}", base + rel as i64, pos);
                }
            }
            Err(e) => {
                let _ = writeln!(out, "INVALID INDEX: {e}");
            }
        }
    } else if name.ends_with(".maxtimeindex") {
        // Read beside its `.index`, which it names by CRC and entry count.
        let index_path = path.with_extension("index");
        let index = std::fs::read(&index_path).unwrap_or_else(|e| {
            let _ = writeln!(out, "cannot read {}: {e}", index_path.display());
            Vec::new()
        });
        let entries = decode_offset_index(&index, u64::MAX).unwrap_or_default();
        match decode_max_index(&bytes, &index, entries.len()) {
            Some(max) => {
                for ((rel, _), m) in entries.iter().zip(max) {
                    let _ = writeln!(out, "offset: {} max timestamp before: {m}", base + *rel as i64);
                }
            }
            None => {
                let _ = writeln!(out, "INVALID: damaged, or not written for the .index beside it (lookups ignore it)");
            }
        }
    } else if name.ends_with(".timeindex") {
        for e in bytes.chunks(12) {
            if e.len() < 12 {
                let _ = writeln!(out, "TORN ENTRY ({} bytes)", e.len());
                break;
            }
            let ts = i64::from_be_bytes(e[0..8].try_into().expect("8 bytes"));
            let rel = u32::from_be_bytes(e[8..12].try_into().expect("4 bytes"));
            let _ = writeln!(out, "timestamp: {ts} offset: {}", base + rel as i64);
        }
    } else {
        let _ = writeln!(out, "unknown file type (expected .log, .index, .maxtimeindex or .timeindex)");
    }
    Ok(out)
}

fn dump_log(bytes: &[u8], out: &mut String) {
    let mut pos = 0usize;
    let mut batches = 0u64;
    while pos < bytes.len() {
        let rest = &bytes[pos..];
        let total = match frame_len(rest, i32::MAX as usize) {
            Ok(Some(t)) if t <= rest.len() => t,
            Ok(Some(t)) => {
                let _ = writeln!(out, "position: {pos} TRUNCATED batch: needs {t} bytes, {} remain", rest.len());
                break;
            }
            Ok(None) => {
                let _ = writeln!(out, "position: {pos} TRUNCATED: {} trailing bytes", rest.len());
                break;
            }
            Err(e) if rest.iter().all(|&b| b == 0) => {
                let _ =
                    writeln!(out, "position: {pos} end of data ({} zero bytes follow: preallocated): {e}", rest.len());
                break;
            }
            Err(e) => {
                let _ = writeln!(out, "position: {pos} INVALID: {e}");
                break;
            }
        };
        let batch = &rest[..total];
        if batch[OFF_MAGIC] as i8 != MAGIC_V2 {
            if !dump_legacy(batch, pos, out) {
                break;
            }
            batches += 1;
            pos += total;
            continue;
        }
        match BatchHeader::parse(batch) {
            Ok(h) => {
                let crc = match check_stored(batch) {
                    Ok(_) => "valid".to_string(),
                    Err(e) => format!("INVALID ({e})"),
                };
                let codec = h.compression().map(|c| c.name()).unwrap_or("unknown");
                let _ = writeln!(
                    out,
                    "baseOffset: {} lastOffset: {} count: {} position: {} size: {} magic: {} compression: {} \
                     timestampType: {:?} firstTimestamp: {} maxTimestamp: {} producerId: {} crc: {:#010x} isValid: {}",
                    h.base_offset,
                    h.last_offset(),
                    h.record_count,
                    pos,
                    total,
                    h.magic,
                    codec,
                    h.timestamp_type(),
                    h.first_timestamp,
                    h.max_timestamp,
                    h.producer_id,
                    h.crc,
                    crc
                );
            }
            Err(e) => {
                let _ = writeln!(out, "position: {pos} INVALID header: {e}");
                break;
            }
        }
        batches += 1;
        pos += total;
    }
    let _ = writeln!(out, "{batches} batches, {pos} bytes");
}

/// One legacy message (magic 0 or 1), as kafka-dump-log prints it: a wrapper with its inner
/// messages' offset range when it can be decompressed. False when it cannot be parsed.
fn dump_legacy(entry: &[u8], pos: usize, out: &mut String) -> bool {
    let m = match legacy::parse(entry) {
        Ok(m) => m,
        Err(e) => {
            let _ = writeln!(out, "position: {pos} INVALID legacy message: {e}");
            return false;
        }
    };
    let h = m.header;
    let crc = match legacy::check(entry) {
        Ok(_) => "valid".to_string(),
        Err(e) => format!("INVALID ({e})"),
    };
    let codec = h.compression().map(|c| c.name()).unwrap_or("unknown");
    let mut scratch = Vec::new();
    let inner = match legacy::records(entry, &mut scratch, 256 << 20) {
        Ok(r) => format!("{} records, offsets {}..={}", r.len(), r[0].offset, r[r.len() - 1].offset),
        Err(e) => format!("records unreadable ({e})"),
    };
    let _ = writeln!(
        out,
        "offset: {} position: {} size: {} magic: {} compression: {} timestampType: {:?} timestamp: {} \
         keySize: {} valueSize: {} crc: {:#010x} isValid: {} ({})",
        h.offset,
        pos,
        entry.len(),
        h.magic,
        codec,
        h.timestamp_type(),
        h.timestamp,
        m.key.map_or(-1, |k| k.len() as i64),
        m.value.map_or(-1, |v| v.len() as i64),
        h.crc,
        crc,
        inner
    );
    true
}
