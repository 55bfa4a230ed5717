//! The produce-side and read-side checks of record batches on arbitrary bytes: never a panic,
//! and every bounded decompression stays within LIMIT (so the fuzzer cannot run out of
//! memory through a compression bomb).
//!
//! Input: a mode byte, then the bytes. Random bytes rarely carry a valid CRC, so the mode
//! can repair what stands in the way of the deeper checks:
//! - `mode % 4 == 0`: the bytes as they are;
//! - `1`: each framed batch's length and CRC fixed up (CRC-32C for v2, CRC-32 for legacy);
//! - `2`: a v2 batch synthesized: a 61-byte header from the bytes, a records section that is
//!   the rest compressed with the codec the header's attributes name, length and CRC fixed;
//! - `3`: a legacy wrapper synthesized: the rest as its inner messages (their CRCs fixed),
//!   compressed with a codec and magic from the mode byte.
//!
//! Checked: v2 `check_produced`, legacy `check_produced` and `stored_form`, `check_stored`,
//! `BatchInfo::parse`, `BatchWalk` (with `check_stored`, `first_record_at_or_after`,
//! `legacy::records` and `wrapper_span` per batch) and `down_convert` to magic 0 and 1.
//! Properties beyond "no panic": a legacy stored form is itself a valid entry, and a
//! down-conversion of valid batches yields valid batches of the reader's magic. Log
//! compaction (`map_batch`, then `clean_batch` on every stored-valid batch, with and without
//! the batch protected): what it rewrites is a valid batch with the same base and last offset,
//! producer id, epoch and base sequence.

use bytes::Bytes;
use tidemark::storage::compaction::{self, CleanRules, CleanStats, OffsetMap, Outcome, Protect, TxnTracker};
use tidemark::storage::format::batch::{self, Compression, TimestampType, HEADER_LEN, MAGIC_V2};
use tidemark::storage::format::compression::{compress, compress_legacy};
use tidemark::storage::format::convert::down_convert;
use tidemark::storage::format::legacy::{self, Stored, MAGIC_V0, MAGIC_V1};
use tidemark::storage::format::stored::{self, check_stored, BatchInfo, BatchWalk};

/// Decompression bound for every check (the broker's is larger; the code is the same).
const LIMIT: usize = 1 << 20;

fn codec(n: u8) -> Compression {
    match n % 5 {
        0 => Compression::None,
        1 => Compression::Gzip,
        2 => Compression::Snappy,
        3 => Compression::Lz4,
        _ => Compression::Zstd,
    }
}

/// Walk the frames of `buf`, fixing each one's CRC; a frame whose length does not fit
/// (implausible or past the end) gets the rest of the buffer as its length.
fn fix_frames(buf: &mut [u8]) {
    let mut pos = 0usize;
    while buf.len() - pos >= stored::MIN_BATCH_LEN {
        let rest = &mut buf[pos..];
        let len = i32::from_be_bytes(rest[8..12].try_into().unwrap()) as i64;
        let total = match len.checked_add(12) {
            Some(t) if t >= stored::MIN_BATCH_LEN as i64 && t <= rest.len() as i64 => t as usize,
            _ => {
                let n = rest.len();
                rest[8..12].copy_from_slice(&((n - 12) as i32).to_be_bytes());
                n
            }
        };
        stored::rewrite_crc(&mut rest[..total]);
        pos += total;
    }
}

/// A v2 batch: header from `head` (zero-padded), records = `body` compressed.
fn synth_v2(head: &[u8], body: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; HEADER_LEN];
    let n = head.len().min(HEADER_LEN);
    out[..n].copy_from_slice(&head[..n]);
    out[batch::OFF_MAGIC] = MAGIC_V2 as u8;
    let attrs = i16::from_be_bytes([out[batch::OFF_ATTRIBUTES], out[batch::OFF_ATTRIBUTES + 1]]);
    let c = codec((attrs & 7) as u8);
    let attrs = (attrs & !7) | c as i16;
    out[batch::OFF_ATTRIBUTES..batch::OFF_ATTRIBUTES + 2].copy_from_slice(&attrs.to_be_bytes());
    out.extend_from_slice(&compress(c, body));
    let len = (out.len() - 12) as i32;
    out[batch::OFF_LENGTH..batch::OFF_LENGTH + 4].copy_from_slice(&len.to_be_bytes());
    batch::rewrite_crc(&mut out);
    out
}

/// A legacy wrapper of `magic` and codec `c` around `inner` (its frames' CRCs fixed).
fn synth_wrapper(mode: u8, inner: &[u8]) -> Vec<u8> {
    let magic = if mode & 0x04 != 0 { MAGIC_V1 } else { MAGIC_V0 };
    let c = match codec(mode >> 3) {
        Compression::None => Compression::Gzip,
        c => c,
    };
    let t = if mode & 0x80 != 0 { TimestampType::LogAppendTime } else { TimestampType::CreateTime };
    let mut inner = inner.to_vec();
    fix_frames(&mut inner);
    let mut out = Vec::new();
    let offset = i64::from(mode & 0x03);
    legacy::write(
        &mut out,
        offset,
        magic,
        legacy::attributes(magic, c, t),
        1000,
        None,
        Some(&compress_legacy(c, magic, &inner)),
    );
    out
}

fn check_entry(entry: &[u8], base: i64, now: i64) {
    let _ = batch::check_produced(entry, LIMIT);
    let _ = check_stored(entry);
    let _ = BatchInfo::parse(entry);
    let mut scratch = Vec::new();
    let _ = legacy::records(entry, &mut scratch, LIMIT);
    let _ = legacy::wrapper_span(entry, LIMIT, false);
    let _ = legacy::wrapper_span(entry, LIMIT, true);
    if let Ok(p) = legacy::check_produced(entry, LIMIT) {
        for t in [TimestampType::CreateTime, TimestampType::LogAppendTime] {
            let Ok((form, _)) = legacy::stored_form(entry, &p, base, t, now, LIMIT) else { continue };
            match form {
                Stored::Prefix { prefix, len } => {
                    let mut e = entry.to_vec();
                    e[..len].copy_from_slice(&prefix[..len]);
                    if let Err(err) = legacy::check(&e) {
                        panic!("a legacy entry's stored form (prefix {len}) fails its check: {err}");
                    }
                }
                Stored::Rebuilt(set) => {
                    let mut walk = BatchWalk::new(&set, usize::MAX >> 1);
                    for item in walk.by_ref() {
                        let (_, _, e) = item.expect("a rebuilt legacy entry frames");
                        if let Err(err) = legacy::check_produced(e, LIMIT) {
                            panic!("a rebuilt legacy entry fails the produce checks: {err}");
                        }
                    }
                    assert_eq!(walk.pos(), set.len(), "a rebuilt legacy entry is whole");
                }
            }
        }
    }
}

/// One input: what the fuzz target and the seed-replay test both run.
pub fn run(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else { return };
    let buf = match mode % 4 {
        0 => rest.to_vec(),
        1 => {
            let mut b = rest.to_vec();
            fix_frames(&mut b);
            b
        }
        2 => {
            let n = rest.len().min(HEADER_LEN);
            synth_v2(&rest[..n], &rest[n..])
        }
        _ => synth_wrapper(mode, rest),
    };
    // Offsets and times the broker would supply, from the bytes (bounded as the broker's are).
    let base = i64::from(*rest.first().unwrap_or(&0)) * 1000;
    let now = 1_000_000;

    check_entry(&buf, base, now);

    let mut all_valid = true;
    let mut walk = BatchWalk::new(&buf, usize::MAX >> 1);
    for item in walk.by_ref() {
        let Ok((_, info, entry)) = item else {
            all_valid = false;
            break;
        };
        if check_stored(entry).is_err() {
            all_valid = false;
        }
        let t = info.max_timestamp.saturating_sub(i64::from(mode >> 4));
        let _ = stored::first_record_at_or_after(&info, entry, t, i64::MIN, LIMIT);
        let _ = stored::max_record_from(&info, entry, i64::MIN, LIMIT);
        check_entry(entry, base, now);
    }
    all_valid &= walk.pos() == buf.len();

    // Compaction over the stored-valid batches: map, then clean each.
    let valid: Vec<&[u8]> = BatchWalk::new(&buf, usize::MAX >> 1)
        .map_while(Result::ok)
        .map(|(_, _, e)| e)
        .filter(|e| check_stored(e).is_ok())
        .collect();
    let mut map_txns = TxnTracker::default();
    let mut map = OffsetMap::new(1 << 20);
    for e in &valid {
        if let Ok(keys) = compaction::map_batch(e, &mut map_txns, LIMIT) {
            map.add(keys);
        }
    }
    let rules = CleanRules {
        now: i64::from(mode) * 1000,
        delete_retention_ms: i64::from(mode >> 2),
        decompress_limit: LIMIT,
        legacy_tombstones_expired: mode & 0x10 != 0,
    };
    let mut txns = TxnTracker::default();
    let mut stats = CleanStats::default();
    for e in &valid {
        let Ok(info) = BatchInfo::parse(e) else { continue };
        let first = match info.first_offset {
            Some(f) => f,
            None => match legacy::wrapper_span(e, LIMIT, true) {
                Ok((f, _)) => f,
                Err(_) => continue,
            },
        };
        let protect = (mode & 0x40 != 0).then_some(Protect { offset: first });
        let last = |_: i64, o: i64| mode & 0x20 != 0 && o == info.last_offset;
        let Ok(Outcome::Rewrite(out)) = compaction::clean_batch(e, &map, &mut txns, last, protect, &rules, &mut stats)
        else {
            continue;
        };
        let (_, n, _) = BatchWalk::new(&out, usize::MAX >> 1).next().expect("one entry").expect("a whole entry");
        check_stored(&out).unwrap_or_else(|err| panic!("a cleaned batch fails check_stored: {err}"));
        assert_eq!(n.total_len, out.len(), "one entry");
        if info.magic == MAGIC_V2 {
            let (h, n) = (batch::BatchHeader::parse(e).expect("v2"), batch::BatchHeader::parse(&out).expect("v2"));
            assert_eq!((n.base_offset, n.last_offset()), (h.base_offset, h.last_offset()), "offsets kept");
            assert_eq!(
                (n.producer_id, n.producer_epoch, n.base_sequence),
                (h.producer_id, h.producer_epoch, h.base_sequence)
            );
        } else {
            // A legacy entry: rebuilt within its offsets (an empty v2 batch over them, or a
            // wrapper of the same magic around the inner messages kept).
            let (f, l) = match n.first_offset {
                Some(f) if n.magic == MAGIC_V2 => (f, n.last_offset),
                _ => legacy::wrapper_span(&out, LIMIT, true).expect("a rebuilt wrapper's offsets go up"),
            };
            assert!(f >= first && l <= info.last_offset && f <= l, "offsets within the original's");
            assert!(n.magic == MAGIC_V2 || n.magic == info.magic, "same magic");
        }
    }

    for to in [MAGIC_V0, MAGIC_V1] {
        let max_bytes = 1 + usize::from(mode) * 64;
        let Ok(out) = down_convert(Bytes::from(buf.clone()), to, max_bytes, LIMIT) else { continue };
        if !all_valid {
            continue;
        }
        let mut walk = BatchWalk::new(&out, usize::MAX >> 1);
        for item in walk.by_ref() {
            let (_, info, entry) = item.unwrap_or_else(|e| panic!("down-converted to magic {to}: a bad frame: {e}"));
            assert!(info.magic <= to, "down-converted to magic {to}: a batch of magic {}", info.magic);
            if let Err(e) = check_stored(entry) {
                panic!("down-converted to magic {to}: a batch fails check_stored: {e}");
            }
        }
        assert_eq!(walk.pos(), out.len(), "down-converted to magic {to}: a partial batch");
    }
}
