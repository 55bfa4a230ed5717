//! Stored batches of any magic: v2 record batches and legacy messages (magic 0 and 1) may
//! follow one another in one segment (SPEC T1.1). Both start with an 8-byte offset and a
//! 4-byte length and keep their magic at byte 16, so one walk frames them all; this module
//! is what the log, recovery, reads and lookups see of a batch without caring for its magic.
//!
//! A "batch" here is a v2 record batch, a plain legacy message (one record) or a legacy
//! wrapper (a compressed message holding several). A wrapper's header names only its last
//! offset: its first is known from the batch before it (offsets are contiguous in a log) or
//! by decompressing it.

use super::batch::{self, BatchHeader, Compression, FormatError, TimestampType, MAGIC_V2};
use super::legacy::{self, LegacyHeader};

/// baseOffset and length: the bytes before what the length counts, in every format.
pub const LOG_OVERHEAD: usize = 12;
/// Where every format keeps its magic byte.
pub const OFF_MAGIC: usize = 16;
/// The smallest stored batch of any format (a magic-0 message with a null key and value).
pub const MIN_BATCH_LEN: usize = 26;
/// Bytes that hold every format's header (a v2 batch's is the longest).
pub const MAX_HEADER_LEN: usize = batch::HEADER_LEN;

/// What a walk knows of a stored batch of any magic from its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchInfo {
    pub magic: i8,
    /// The first offset, when the header says it (v2 batches and plain legacy messages; a
    /// legacy wrapper's header holds only its last).
    pub first_offset: Option<i64>,
    pub last_offset: i64,
    pub total_len: usize,
    /// The largest timestamp: v2 maxTimestamp, a magic-1 message's timestamp (a wrapper's is
    /// the largest inner one, SPEC T3.3, or the append time), -1 for magic 0.
    pub max_timestamp: i64,
    pub timestamp_type: TimestampType,
    pub compression: Compression,
}

impl BatchInfo {
    /// Parse the header of the batch at `buf[0]` (only the header's bytes are needed).
    pub fn parse(buf: &[u8]) -> Result<BatchInfo, FormatError> {
        let magic = *buf.get(OFF_MAGIC).ok_or(FormatError::Truncated { need: OFF_MAGIC + 1, have: buf.len() })? as i8;
        if magic == MAGIC_V2 {
            return Ok(BatchInfo::from_v2(&BatchHeader::parse(buf)?));
        }
        let h = LegacyHeader::parse(buf)?;
        Ok(BatchInfo::from_legacy(&h))
    }

    pub fn from_v2(h: &BatchHeader) -> BatchInfo {
        BatchInfo {
            magic: h.magic,
            first_offset: Some(h.base_offset),
            last_offset: h.last_offset(),
            total_len: h.total_len(),
            max_timestamp: h.max_timestamp,
            timestamp_type: h.timestamp_type(),
            compression: h.compression().unwrap_or(Compression::None),
        }
    }

    pub fn from_legacy(h: &LegacyHeader) -> BatchInfo {
        BatchInfo {
            magic: h.magic,
            first_offset: (!h.is_wrapper()).then_some(h.offset),
            last_offset: h.offset,
            total_len: h.total_len(),
            max_timestamp: h.timestamp,
            timestamp_type: h.timestamp_type(),
            compression: h.compression().unwrap_or(Compression::None),
        }
    }

    /// The offset the offset index records for this batch: its first where the header
    /// says it, a wrapper's last otherwise (both are sound: an index entry only has to name
    /// a batch at or before the one holding the offset looked up).
    pub fn index_offset(&self) -> i64 {
        self.first_offset.unwrap_or(self.last_offset)
    }

    pub fn next_offset(&self) -> i64 {
        self.last_offset.saturating_add(1)
    }
}

/// The total size of the batch starting at `buf[0]`, from its first 12 bytes, after checking
/// that its length is plausible (at least the smallest batch, at most `max_total`). `Ok(None)`
/// when fewer than 12 bytes are available.
pub fn frame_len(buf: &[u8], max_total: usize) -> Result<Option<usize>, FormatError> {
    if buf.len() < LOG_OVERHEAD {
        return Ok(None);
    }
    let len = i32::from_be_bytes(buf[8..12].try_into().expect("4 bytes")) as i64;
    let total = len + LOG_OVERHEAD as i64;
    if total < MIN_BATCH_LEN as i64 || total > max_total as i64 {
        return Err(FormatError::BadLength(len));
    }
    Ok(Some(total as usize))
}

/// The checks on a batch of any magic read back from the log: exact length, magic, CRC
/// (CRC-32C for v2, CRC-32 for legacy messages). Cheap: no decompression.
pub fn check_stored(bytes: &[u8]) -> Result<BatchInfo, FormatError> {
    match bytes.get(OFF_MAGIC).map(|&m| m as i8) {
        Some(MAGIC_V2) => Ok(BatchInfo::from_v2(&batch::check_stored(bytes)?)),
        Some(legacy::MAGIC_V0 | legacy::MAGIC_V1) => {
            let m = legacy::check(bytes)?;
            Ok(BatchInfo::from_legacy(&m.header))
        }
        Some(other) => Err(FormatError::BadMagic(other)),
        None => Err(FormatError::Truncated { need: OFF_MAGIC + 1, have: bytes.len() }),
    }
}

/// The first record of a stored batch at or after offset `from` whose timestamp is `>= t`, as
/// (offset, timestamp), decompressing within `limit` bytes where needed. Records without a
/// timestamp never match.
pub fn first_record_at_or_after(
    info: &BatchInfo,
    bytes: &[u8],
    t: i64,
    from: i64,
    limit: usize,
) -> Result<Option<(i64, i64)>, FormatError> {
    if info.max_timestamp < t || info.max_timestamp < 0 || info.last_offset < from {
        return Ok(None);
    }
    let mut found = None;
    record_times(info, bytes, from, limit, |offset, ts| {
        let hit = ts != -1 && ts >= t;
        if hit {
            found = Some((offset, ts));
        }
        hit
    })?;
    Ok(found)
}

/// The first record with the largest timestamp among the records of a stored batch at or
/// after offset `from`, as (offset, timestamp); `None` when none has a timestamp.
pub fn max_record_from(
    info: &BatchInfo,
    bytes: &[u8],
    from: i64,
    limit: usize,
) -> Result<Option<(i64, i64)>, FormatError> {
    if info.max_timestamp < 0 || info.last_offset < from {
        return Ok(None);
    }
    let mut best: Option<(i64, i64)> = None;
    record_times(info, bytes, from, limit, |offset, ts| {
        if ts != -1 && best.is_none_or(|(_, b)| ts > b) {
            best = Some((offset, ts));
        }
        // Nothing beats the batch's own largest timestamp.
        best.is_some_and(|(_, b)| b >= info.max_timestamp)
    })?;
    Ok(best)
}

/// Visit the records of a stored batch at or after offset `from`, in order, with the timestamp
/// a reader sees (a LogAppendTime v2 batch's records all carry its maxTimestamp), until `visit`
/// returns true.
fn record_times(
    info: &BatchInfo,
    bytes: &[u8],
    from: i64,
    limit: usize,
    mut visit: impl FnMut(i64, i64) -> bool,
) -> Result<(), FormatError> {
    if info.magic == MAGIC_V2 {
        let h = BatchHeader::parse(bytes)?;
        let lat = h.timestamp_type() == TimestampType::LogAppendTime;
        if lat && h.record_count.checked_sub(1) == Some(h.last_offset_delta) {
            // Every offset of the batch holds a record (not compacted): no need to read them.
            let first = h.base_offset.max(from);
            if first <= h.last_offset() {
                visit(first, h.max_timestamp);
            }
            return Ok(());
        }
        let records = batch::records_section(&h, bytes, limit)?;
        for r in batch::Records::new(&records, h.record_count) {
            let r = r?;
            let offset = h.base_offset.saturating_add(r.offset_delta as i64);
            let ts = if lat { h.max_timestamp } else { h.first_timestamp.saturating_add(r.timestamp_delta) };
            if offset >= from && visit(offset, ts) {
                break;
            }
        }
        return Ok(());
    }
    let mut scratch = Vec::new();
    for r in legacy::records(bytes, &mut scratch, limit)? {
        if r.offset >= from && visit(r.offset, r.timestamp) {
            break;
        }
    }
    Ok(())
}

/// Recompute the CRC of one whole stored entry of any magic (v2: CRC-32C over attributes to
/// the end; legacy: CRC-32 over magic to the end), after a change to its bytes; an entry too
/// short to hold one is left alone. For tools, tests and fuzzing.
pub fn rewrite_crc(entry: &mut [u8]) {
    match entry.get(OFF_MAGIC).map(|&m| m as i8) {
        Some(MAGIC_V2) if entry.len() >= batch::HEADER_LEN => batch::rewrite_crc(entry),
        Some(legacy::MAGIC_V0 | legacy::MAGIC_V1) if entry.len() >= legacy::OFF_MAGIC => {
            let crc = legacy::compute_crc(entry);
            entry[legacy::OFF_CRC..legacy::OFF_CRC + 4].copy_from_slice(&crc.to_be_bytes());
        }
        _ => {}
    }
}

/// Walks concatenated batches of any magic in a buffer, header by header, without checking
/// CRCs. Stops at the first incomplete batch; `pos()` tells where.
/// After an error it yields nothing more.
pub struct BatchWalk<'a> {
    buf: &'a [u8],
    pos: usize,
    max_total: usize,
    failed: bool,
}

impl<'a> BatchWalk<'a> {
    pub fn new(buf: &'a [u8], max_total: usize) -> Self {
        BatchWalk { buf, pos: 0, max_total, failed: false }
    }

    /// Bytes consumed by the complete batches returned so far.
    pub fn pos(&self) -> usize {
        self.pos
    }
}

impl<'a> Iterator for BatchWalk<'a> {
    /// (position in the buffer, header, whole batch bytes)
    type Item = Result<(usize, BatchInfo, &'a [u8]), FormatError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let rest = &self.buf[self.pos..];
        let total = match frame_len(rest, self.max_total) {
            Ok(Some(t)) => t,
            Ok(None) => return None,
            Err(e) => {
                self.failed = true;
                return Some(Err(e));
            }
        };
        if rest.len() < total {
            return None;
        }
        let bytes = &rest[..total];
        let info = match BatchInfo::parse(bytes) {
            Ok(info) => info,
            Err(e) => {
                self.failed = true;
                return Some(Err(e));
            }
        };
        let at = self.pos;
        self.pos += total;
        Some(Ok((at, info, bytes)))
    }
}

/// The magic of every batch framed in `records` (for request-version rules), or the frame
/// error that stops the walk.
pub fn magics(records: &[u8]) -> impl Iterator<Item = Result<i8, FormatError>> + '_ {
    BatchWalk::new(records, i32::MAX as usize).map(|item| item.map(|(_, info, _)| info.magic))
}

/// What Kafka's `ProduceRequest.validateRecords` finds wrong with one partition's records
/// (Produce v3+): they must be exactly one complete batch, of magic 2, and not zstd where the
/// request version predates it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProduceShape {
    /// A length below the smallest message of any magic (Kafka: CORRUPT_MESSAGE).
    TooShort,
    /// No complete batch, another magic, or a second batch (Kafka: INVALID_RECORD).
    NotOneV2Batch,
    /// zstd in a request version before zstd existed (Kafka: UNSUPPORTED_COMPRESSION_TYPE).
    Zstd,
}

/// Check `records` as Kafka checks a Produce v3+ request's records for one partition, before
/// any append: `Ok` also for trailing bytes that are no complete batch (the append refuses
/// them, CORRUPT_MESSAGE).
pub fn check_produce_shape(records: &[u8], zstd_allowed: bool) -> Result<(), ProduceShape> {
    // A frame's length field, and whether the whole frame is there.
    let frame = |at: usize| -> Result<Option<usize>, ProduceShape> {
        let rest = &records[at.min(records.len())..];
        if rest.len() < LOG_OVERHEAD {
            return Ok(None);
        }
        let len = i32::from_be_bytes([rest[8], rest[9], rest[10], rest[11]]);
        // LegacyRecord.RECORD_OVERHEAD_V0: no message of any magic is shorter.
        if len < 14 {
            return Err(ProduceShape::TooShort);
        }
        let total = LOG_OVERHEAD + len as usize;
        Ok((rest.len() >= total && rest.len() > OFF_MAGIC).then_some(total))
    };
    let first = frame(0)?.ok_or(ProduceShape::NotOneV2Batch)?;
    if records[OFF_MAGIC] != MAGIC_V2 as u8 {
        return Err(ProduceShape::NotOneV2Batch);
    }
    if !zstd_allowed && first > batch::OFF_ATTRIBUTES + 1 {
        let attributes = i16::from_be_bytes([records[batch::OFF_ATTRIBUTES], records[batch::OFF_ATTRIBUTES + 1]]);
        if attributes & batch::ATTR_COMPRESSION_MASK == 4 {
            return Err(ProduceShape::Zstd);
        }
    }
    match frame(first) {
        Ok(Some(_)) => Err(ProduceShape::NotOneV2Batch),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::format::batch::simple_batch;
    use crate::storage::format::legacy::LegacyBuilder;

    /// Kafka's validateRecords for Produce v3+: one complete v2 batch; a second batch, another
    /// magic or a torn frame is NotOneV2Batch; a length below any message is TooShort; zstd
    /// only where allowed; trailing bytes short of a frame are left to the append.
    #[test]
    fn produce_shape_as_kafka_checks_it() {
        let one = simple_batch(2, 10, 1_000);
        assert_eq!(check_produce_shape(&one, false), Ok(()));
        let two = [one.clone(), one.clone()].concat();
        assert_eq!(check_produce_shape(&two, true), Err(ProduceShape::NotOneV2Batch));
        assert_eq!(check_produce_shape(&one[..one.len() - 1], true), Err(ProduceShape::NotOneV2Batch));
        assert_eq!(check_produce_shape(&[one.clone(), vec![0; 5]].concat(), true), Ok(()));
        let mut short = one.clone();
        short[8..12].copy_from_slice(&13i32.to_be_bytes());
        assert_eq!(check_produce_shape(&short, true), Err(ProduceShape::TooShort));
        let mut v1 = LegacyBuilder::new(1, Compression::None);
        v1.push(10, None, Some(b"a"));
        assert_eq!(check_produce_shape(&v1.finish(), true), Err(ProduceShape::NotOneV2Batch));
        let mut zstd = one.clone();
        zstd[batch::OFF_ATTRIBUTES + 1] |= 4;
        assert_eq!(check_produce_shape(&zstd, false), Err(ProduceShape::Zstd));
        assert_eq!(check_produce_shape(&zstd, true), Ok(()));
        assert_eq!(check_produce_shape(&[], true), Err(ProduceShape::NotOneV2Batch));
    }

    /// spec: T1.1 — one walk frames v2 batches and legacy messages of both magics, in any
    /// order, and checks each with its own CRC.
    #[test]
    fn one_walk_frames_every_magic() {
        let mut v0 = LegacyBuilder::new(0, Compression::None);
        v0.push(-1, Some(b"k"), None);
        let mut v1 = LegacyBuilder::new(1, Compression::Gzip);
        v1.push(10, None, Some(b"a"));
        v1.push(12, None, Some(b"b"));
        let v2 = simple_batch(3, 5, 100);
        let all = [v0.finish(), v1.finish(), v2.clone()].concat();
        let got: Vec<BatchInfo> = BatchWalk::new(&all, 1 << 20).map(|i| i.unwrap().1).collect();
        assert_eq!(got.iter().map(|i| i.magic).collect::<Vec<_>>(), vec![0, 1, 2]);
        assert_eq!(got[0].first_offset, Some(0));
        assert_eq!((got[1].first_offset, got[1].last_offset, got[1].max_timestamp), (None, 1, 12));
        assert_eq!((got[2].first_offset, got[2].last_offset, got[2].max_timestamp), (Some(0), 2, 102));
        for (_, _, bytes) in BatchWalk::new(&all, 1 << 20).map(Result::unwrap) {
            check_stored(bytes).unwrap();
        }
        assert_eq!(magics(&all).collect::<Result<Vec<_>, _>>().unwrap(), vec![0, 1, 2]);
        assert!(frame_len(&[0u8; 12], 1 << 20).is_err(), "a zero length is not a batch");
    }

    /// A walk stops after its first error; a legacy header with a negative size is an error,
    /// never an overflow.
    #[test]
    fn bad_frames_end_the_walk() {
        let mut bytes = vec![0u8; 40];
        bytes[8..12].copy_from_slice(&28i32.to_be_bytes());
        bytes[OFF_MAGIC] = 7;
        let mut walk = BatchWalk::new(&bytes, 1 << 20);
        assert!(matches!(walk.next(), Some(Err(FormatError::BadMagic(7)))));
        assert!(walk.next().is_none());
        let mut legacy = vec![0u8; 40];
        legacy[8..12].copy_from_slice(&(-5i32).to_be_bytes());
        legacy[OFF_MAGIC] = 1;
        assert!(BatchInfo::parse(&legacy).is_err());
    }

    proptest::proptest! {
        /// Headers of arbitrary bytes parse or fail, never panic, whatever their magic.
        #[test]
        fn arbitrary_headers_never_panic(mut bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..80), magic in 0u8..3) {
            if bytes.len() > OFF_MAGIC { bytes[OFF_MAGIC] = magic; }
            if let Ok(info) = BatchInfo::parse(&bytes) {
                let _ = info.index_offset();
                proptest::prop_assert!(info.total_len >= MIN_BATCH_LEN);
            }
            let _ = check_stored(&bytes);
            for item in BatchWalk::new(&bytes, 1 << 20) { let _ = item; }
        }
    }
}
