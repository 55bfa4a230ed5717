//! Index files: the sparse offset index (`.index`) and its max-timestamp companion
//! (`.maxtimeindex`), the time index (`.timeindex`) and the clean-shutdown marker. Layouts in `docs/format.md`.
//!
//! `.index`: 8-byte entries, big-endian: relative offset u32 (batch base offset minus the
//! segment's base offset), position u32 (byte position of that batch in the `.log`).
//! Relative offsets and positions strictly increase. The file holds exactly its entries: no
//! preallocated tail (SPEC T5.6 lesson), so its size is a multiple of 8.

pub const OFFSET_ENTRY_LEN: usize = 8;

/// Why an index file cannot be trusted (it is then rebuilt from the segment, SPEC T8.4).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IndexError {
    #[error("index size {0} is not a multiple of the entry size")]
    Torn(usize),
    #[error("entry {0} does not increase")]
    NotIncreasing(usize),
    #[error("entry {0} points past the end of the log ({1} bytes)")]
    PastEnd(usize, u64),
}

pub fn encode_offset_entry(out: &mut Vec<u8>, rel_offset: u32, position: u32) {
    out.extend_from_slice(&rel_offset.to_be_bytes());
    out.extend_from_slice(&position.to_be_bytes());
}

/// Decode and validate an offset index against the size of its log.
pub fn decode_offset_index(bytes: &[u8], log_size: u64) -> Result<Vec<(u32, u32)>, IndexError> {
    if !bytes.len().is_multiple_of(OFFSET_ENTRY_LEN) {
        return Err(IndexError::Torn(bytes.len()));
    }
    let mut out: Vec<(u32, u32)> = Vec::with_capacity(bytes.len() / OFFSET_ENTRY_LEN);
    for (i, e) in bytes.chunks_exact(OFFSET_ENTRY_LEN).enumerate() {
        let rel = u32::from_be_bytes(e[0..4].try_into().expect("4 bytes"));
        let pos = u32::from_be_bytes(e[4..8].try_into().expect("4 bytes"));
        if let Some(&(lr, lp)) = out.last() {
            if rel <= lr || pos <= lp {
                return Err(IndexError::NotIncreasing(i));
            }
        }
        if pos as u64 >= log_size {
            return Err(IndexError::PastEnd(i, log_size));
        }
        out.push((rel, pos));
    }
    Ok(out)
}

/// The clean-shutdown marker (version 2): `TMCLEAN2`, the log end offset (i64 BE), the log's
/// last time-index timestamp (i64 BE, `i64::MIN` for none), then a CRC-32C (u32 BE) of the
/// 24 bytes before it. Its presence means every segment's indexes were written and synced,
/// every `.log` was trimmed to its logical size, and startup needs no backwards scan (T8.1).
pub fn encode_clean_marker(log_end_offset: i64, last_time_entry: Option<i64>) -> Vec<u8> {
    let mut b = b"TMCLEAN2".to_vec();
    b.extend_from_slice(&log_end_offset.to_be_bytes());
    b.extend_from_slice(&last_time_entry.unwrap_or(i64::MIN).to_be_bytes());
    let crc = crc32c::crc32c(&b);
    b.extend_from_slice(&crc.to_be_bytes());
    b
}

/// (log end offset, last time-index timestamp) from a marker, or `None` if the bytes are not
/// a valid marker (then the shutdown counts as unclean).
pub fn decode_clean_marker(b: &[u8]) -> Option<(i64, Option<i64>)> {
    if b.len() != 28 || &b[0..8] != b"TMCLEAN2" {
        return None;
    }
    let crc = u32::from_be_bytes(b[24..28].try_into().ok()?);
    if crc32c::crc32c(&b[..24]) != crc {
        return None;
    }
    let end = i64::from_be_bytes(b[8..16].try_into().ok()?);
    let last = i64::from_be_bytes(b[16..24].try_into().ok()?);
    Some((end, (last != i64::MIN).then_some(last)))
}

/// The log start offset file (`log-start-offset`): ASCII `TMSTART1`, the log start offset
/// (i64 BE), CRC-32C of the 16 bytes before it. Written when DeleteRecords moves the log start
/// past the first segment's base offset (KIP-107).
pub fn encode_log_start(offset: i64) -> Vec<u8> {
    encode_tagged_offset(b"TMSTART1", offset)
}

/// The offset in a log start offset file, or `None` if the bytes are not a valid one.
pub fn decode_log_start(b: &[u8]) -> Option<i64> {
    decode_tagged_offset(b"TMSTART1", b)
}

/// A cleaner checkpoint file (the first dirty offset of a compacted log): as the log start
/// file, with its own tag.
pub fn encode_cleaner_checkpoint(offset: i64) -> Vec<u8> {
    encode_tagged_offset(b"TMCLEAN1", offset)
}

pub fn decode_cleaner_checkpoint(b: &[u8]) -> Option<i64> {
    decode_tagged_offset(b"TMCLEAN1", b)
}

/// A truncation's intent file: the offset, tagged with what is cut ([`encode_tagged_offset`]'s
/// layout): `TMTRUNC1` the suffix from the offset on, `TMRESET1` everything, the log starting
/// again empty at the offset. Returns (restart, offset).
pub fn encode_truncate_intent(restart: bool, offset: i64) -> Vec<u8> {
    encode_tagged_offset(if restart { b"TMRESET1" } else { b"TMTRUNC1" }, offset)
}

pub fn decode_truncate_intent(b: &[u8]) -> Option<(bool, i64)> {
    decode_tagged_offset(b"TMTRUNC1", b)
        .map(|o| (false, o))
        .or_else(|| decode_tagged_offset(b"TMRESET1", b).map(|o| (true, o)))
}

/// An 8-byte tag, the offset (i64) and the CRC-32C of both: 20 bytes.
fn encode_tagged_offset(tag: &[u8; 8], offset: i64) -> Vec<u8> {
    let mut b = tag.to_vec();
    b.extend_from_slice(&offset.to_be_bytes());
    let crc = crc32c::crc32c(&b);
    b.extend_from_slice(&crc.to_be_bytes());
    b
}

fn decode_tagged_offset(tag: &[u8; 8], b: &[u8]) -> Option<i64> {
    if b.len() != 20 || &b[0..8] != tag {
        return None;
    }
    let crc = u32::from_be_bytes(b[16..20].try_into().ok()?);
    (crc32c::crc32c(&b[..16]) == crc).then(|| i64::from_be_bytes(b[8..16].try_into().expect("8 bytes")))
}

/// The max-timestamp index (`.maxtimeindex`), beside a sealed segment's `.index`: for each
/// offset-index entry, the largest timestamp of the segment's batches before that entry's batch
/// (-1: none). It narrows a lookup by time's forward scan (SPEC T6.3) to the bytes between two
/// offset-index entries. Layout: `TMMAXTS1`, the CRC-32C of the `.index` file it belongs to
/// (u32 BE), the entry count (u32 BE), the timestamps (i64 BE each), then a CRC-32C (u32 BE) of
/// everything before it. A file that does not check out (or belongs to another `.index`) is
/// ignored: lookups then scan as without it.
pub fn encode_max_index(index_file: &[u8], max_before: &[i64]) -> Vec<u8> {
    let mut b = Vec::with_capacity(20 + max_before.len() * 8);
    b.extend_from_slice(b"TMMAXTS1");
    b.extend_from_slice(&crc32c::crc32c(index_file).to_be_bytes());
    b.extend_from_slice(&(max_before.len() as u32).to_be_bytes());
    for m in max_before {
        b.extend_from_slice(&m.to_be_bytes());
    }
    let crc = crc32c::crc32c(&b);
    b.extend_from_slice(&crc.to_be_bytes());
    b
}

/// The timestamps of a `.maxtimeindex` written for exactly `index_file` (its `.index` bytes)
/// holding `entries` entries, or `None` when it does not check out: wrong tag, size, count or
/// CRC, another index's, or timestamps below -1 or decreasing.
pub fn decode_max_index(b: &[u8], index_file: &[u8], entries: usize) -> Option<Vec<i64>> {
    if b.len() != 20 + entries * 8 || &b[0..8] != b"TMMAXTS1" {
        return None;
    }
    let (body, crc) = b.split_at(b.len() - 4);
    if crc32c::crc32c(body) != u32::from_be_bytes(crc.try_into().ok()?) {
        return None;
    }
    if u32::from_be_bytes(b[8..12].try_into().ok()?) != crc32c::crc32c(index_file)
        || u32::from_be_bytes(b[12..16].try_into().ok()?) as usize != entries
    {
        return None;
    }
    let out: Vec<i64> =
        body[16..].chunks_exact(8).map(|c| i64::from_be_bytes(c.try_into().expect("8 bytes"))).collect();
    (out.first().is_none_or(|&m| m >= -1) && out.windows(2).all(|w| w[0] <= w[1])).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_index_round_trip_and_validation() {
        let mut index = Vec::new();
        encode_offset_entry(&mut index, 3, 100);
        encode_offset_entry(&mut index, 9, 300);
        let m = encode_max_index(&index, &[-1, 42]);
        assert_eq!(decode_max_index(&m, &index, 2), Some(vec![-1, 42]));
        assert_eq!(decode_max_index(&m, &index, 1), None, "another entry count");
        let mut other = index.clone();
        other[7] ^= 1;
        assert_eq!(decode_max_index(&m, &other, 2), None, "written for another .index");
        for i in 0..m.len() {
            let mut bad = m.clone();
            bad[i] ^= 0x10;
            assert_eq!(decode_max_index(&bad, &index, 2), None, "byte {i} flipped");
        }
        assert_eq!(decode_max_index(&encode_max_index(&index, &[42, 41]), &index, 2), None, "decreasing");
        assert_eq!(decode_max_index(&encode_max_index(&index, &[-2, 41]), &index, 2), None, "below -1");
        assert_eq!(decode_max_index(&encode_max_index(&[], &[]), &[], 0), Some(vec![]));
    }

    #[test]
    fn log_start_round_trip_and_corruption() {
        for o in [0, 42, i64::MAX] {
            assert_eq!(decode_log_start(&encode_log_start(o)), Some(o));
        }
        let m = encode_log_start(42);
        for i in 0..m.len() {
            let mut bad = m.clone();
            bad[i] ^= 0x10;
            assert_eq!(decode_log_start(&bad), None, "byte {i} flipped");
        }
        assert_eq!(decode_log_start(&m[..19]), None);
        assert_eq!(decode_log_start(&[]), None);
    }

    #[test]
    fn offset_index_round_trip_and_validation() {
        let mut b = Vec::new();
        encode_offset_entry(&mut b, 0, 0);
        encode_offset_entry(&mut b, 10, 4096);
        assert_eq!(decode_offset_index(&b, 5000).unwrap(), vec![(0, 0), (10, 4096)]);
        assert_eq!(decode_offset_index(&b, 4096), Err(IndexError::PastEnd(1, 4096)));
        assert_eq!(decode_offset_index(&b[..12], 5000), Err(IndexError::Torn(12)));
        // spec: T5.6 — a zero tail (preallocated space) never reads as entries.
        let mut z = b.clone();
        z.extend_from_slice(&[0u8; 8]);
        assert_eq!(decode_offset_index(&z, 5000), Err(IndexError::NotIncreasing(2)));
    }

    #[test]
    fn clean_marker_round_trip_and_corruption() {
        let m = encode_clean_marker(42, Some(7));
        assert_eq!(decode_clean_marker(&m), Some((42, Some(7))));
        assert_eq!(decode_clean_marker(&encode_clean_marker(0, None)), Some((0, None)));
        let mut bad = m.clone();
        bad[10] ^= 1;
        assert_eq!(decode_clean_marker(&bad), None);
        assert_eq!(decode_clean_marker(&m[..27]), None);
    }
}

/// `.timeindex` entries: timestamp i64 then relative offset u32, big-endian (12 bytes).
pub const TIME_ENTRY_LEN: usize = 12;

pub fn encode_time_entry(out: &mut Vec<u8>, ts: i64, rel_offset: u32) {
    out.extend_from_slice(&ts.to_be_bytes());
    out.extend_from_slice(&rel_offset.to_be_bytes());
}

/// Decode a time index, keeping the longest valid prefix (SPEC T5.6): timestamps strictly
/// increase, relative offsets never decrease and stay below `rel_end` (the segment's offset
/// span). A torn entry, a zero tail or anything after a bad entry is dropped; the second value
/// tells whether anything was.
pub fn decode_time_index(bytes: &[u8], rel_end: u64) -> (Vec<(i64, u32)>, bool) {
    if !bytes.is_empty() && bytes.iter().all(|&b| b == 0) {
        return (Vec::new(), true); // zeroed space is never entries
    }
    let mut out: Vec<(i64, u32)> = Vec::with_capacity(bytes.len() / TIME_ENTRY_LEN);
    for e in bytes.chunks(TIME_ENTRY_LEN) {
        if e.len() < TIME_ENTRY_LEN {
            return (out, true);
        }
        let ts = i64::from_be_bytes(e[0..8].try_into().expect("8 bytes"));
        let rel = u32::from_be_bytes(e[8..12].try_into().expect("4 bytes"));
        let ok = ts >= 0
            && rel as u64 <= rel_end.saturating_sub(1)
            && out.last().is_none_or(|&(lt, lr)| ts > lt && rel >= lr);
        if !ok {
            return (out, true);
        }
        out.push((ts, rel));
    }
    (out, false)
}

#[cfg(test)]
mod time_tests {
    use super::*;

    // spec: T5.6 — torn entries, a zero tail and entries that break the order are truncated.
    #[test]
    fn time_index_keeps_the_valid_prefix() {
        let mut b = Vec::new();
        encode_time_entry(&mut b, 1000, 0);
        encode_time_entry(&mut b, 2000, 5);
        encode_time_entry(&mut b, 2500, 5);
        assert_eq!(decode_time_index(&b, 10), (vec![(1000, 0), (2000, 5), (2500, 5)], false));
        let mut z = b.clone();
        z.extend_from_slice(&[0u8; 24]);
        assert_eq!(decode_time_index(&z, 10).0.len(), 3);
        assert!(decode_time_index(&z, 10).1);
        assert_eq!(decode_time_index(&b[..30], 10), (vec![(1000, 0), (2000, 5)], true));
        assert_eq!(decode_time_index(&b, 5), (vec![(1000, 0)], true), "offset past the segment");
    }
}
