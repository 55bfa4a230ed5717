//! Kafka v2 record batches (magic 2), byte for byte as clients send them. (Legacy messages
//! are in `legacy`; what every magic shares, framing and walking, in `stored`.)
//!
//! ```text
//! off len field                  off len field
//!   0   8 baseOffset              35   8 maxTimestamp
//!   8   4 batchLength (= total-12)43   8 producerId
//!  12   4 partitionLeaderEpoch    51   2 producerEpoch
//!  16   1 magic (2)               53   4 baseSequence
//!  17   4 crc (CRC-32C of 21..)   57   4 recordCount
//!  21   2 attributes              61   .. records
//!  23   4 lastOffsetDelta
//!  27   8 firstTimestamp (baseTimestamp)
//! ```
//! All integers are big-endian. baseOffset, batchLength and partitionLeaderEpoch lie outside
//! the CRC, so the broker assigns offsets by rewriting baseOffset without touching the CRC.
//! Attributes: bits 0-2 compression, bit 3 timestamp type (1 = LogAppendTime), bit 4
//! transactional, bit 5 control.
//!
//! A record: length varint, attributes i8, timestampDelta varlong, offsetDelta varint,
//! keyLength varint (-1 = null), key, valueLength varint, value, headerCount varint, headers
//! (keyLength varint, key, valueLength varint, value).

use super::varint::{read_varint, read_varlong, varint_len, varlong_len, write_varint, write_varlong};
use std::borrow::Cow;

pub const HEADER_LEN: usize = 61;
/// baseOffset and batchLength: the bytes before what batchLength counts.
pub const LOG_OVERHEAD: usize = 12;
pub const MAGIC_V2: i8 = 2;

pub const OFF_BASE_OFFSET: usize = 0;
pub const OFF_LENGTH: usize = 8;
/// partitionLeaderEpoch: outside the CRC (a leader stamps it as it appends).
pub const OFF_LEADER_EPOCH: usize = 12;
pub const OFF_MAGIC: usize = 16;
pub const OFF_CRC: usize = 17;
pub const OFF_ATTRIBUTES: usize = 21;
pub const OFF_LAST_OFFSET_DELTA: usize = 23;
pub const OFF_FIRST_TIMESTAMP: usize = 27;
pub const OFF_MAX_TIMESTAMP: usize = 35;
pub const OFF_RECORD_COUNT: usize = 57;

pub use super::compression::{Compression, ATTR_COMPRESSION_MASK};
pub use super::error::FormatError;
const ATTR_LOG_APPEND_TIME: i16 = 0x08;
const ATTR_TRANSACTIONAL: i16 = 0x10;
const ATTR_CONTROL: i16 = 0x20;
/// KIP-534: the batch's firstTimestamp holds its delete horizon (set by log compaction).
pub const ATTR_DELETE_HORIZON: i16 = 0x40;

pub use crate::types::TimestampType;

/// The fixed 61-byte header of a v2 batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    pub batch_length: i32,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub first_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub record_count: i32,
}

fn be_i64(b: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}
fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes(b[at..at + 2].try_into().expect("2 bytes"))
}

impl BatchHeader {
    /// Parse the header of the batch at `buf[0]`. Checks only that 61 bytes are present, the
    /// magic is 2 and the batch length covers the header (so [`Self::total_len`] is sane);
    /// see [`check_stored`] and [`check_produced`] for full validation.
    pub fn parse(buf: &[u8]) -> Result<BatchHeader, FormatError> {
        if buf.len() < HEADER_LEN {
            return Err(FormatError::Truncated { need: HEADER_LEN, have: buf.len() });
        }
        let magic = buf[OFF_MAGIC] as i8;
        if magic != MAGIC_V2 {
            return Err(FormatError::BadMagic(magic));
        }
        let batch_length = be_i32(buf, OFF_LENGTH);
        if batch_length < (HEADER_LEN - LOG_OVERHEAD) as i32 {
            return Err(FormatError::BadLength(batch_length as i64));
        }
        Ok(BatchHeader {
            base_offset: be_i64(buf, OFF_BASE_OFFSET),
            batch_length: be_i32(buf, OFF_LENGTH),
            partition_leader_epoch: be_i32(buf, 12),
            magic,
            crc: u32::from_be_bytes(buf[OFF_CRC..OFF_CRC + 4].try_into().expect("4 bytes")),
            attributes: be_i16(buf, OFF_ATTRIBUTES),
            last_offset_delta: be_i32(buf, OFF_LAST_OFFSET_DELTA),
            first_timestamp: be_i64(buf, OFF_FIRST_TIMESTAMP),
            max_timestamp: be_i64(buf, OFF_MAX_TIMESTAMP),
            producer_id: be_i64(buf, 43),
            producer_epoch: be_i16(buf, 51),
            base_sequence: be_i32(buf, 53),
            record_count: be_i32(buf, OFF_RECORD_COUNT),
        })
    }

    /// Total bytes of the batch, including baseOffset and batchLength.
    pub fn total_len(&self) -> usize {
        self.batch_length as usize + LOG_OVERHEAD
    }

    /// The last offset. Saturating: the header is not trusted here (a produced batch's base
    /// offset is the client's, a damaged one's anything), and an offset of `i64::MAX` never
    /// matches what a log expects, so it reads as a gap.
    pub fn last_offset(&self) -> i64 {
        self.base_offset.saturating_add(self.last_offset_delta as i64)
    }

    pub fn next_offset(&self) -> i64 {
        self.last_offset().saturating_add(1)
    }

    pub fn compression(&self) -> Result<Compression, FormatError> {
        Compression::from_attributes(self.attributes)
    }

    pub fn timestamp_type(&self) -> TimestampType {
        if self.attributes & ATTR_LOG_APPEND_TIME != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }

    pub fn is_transactional(&self) -> bool {
        self.attributes & ATTR_TRANSACTIONAL != 0
    }

    pub fn is_control(&self) -> bool {
        self.attributes & ATTR_CONTROL != 0
    }

    /// KIP-534: the delete horizon compaction stamped in firstTimestamp (tombstones and
    /// empty transactions' markers in the batch go once it passes), if set.
    pub fn delete_horizon(&self) -> Option<i64> {
        (self.attributes & ATTR_DELETE_HORIZON != 0).then_some(self.first_timestamp)
    }

    /// The timestamp of a record with `timestamp_delta`: firstTimestamp (or the delete
    /// horizon, KIP-534) plus the delta.
    pub fn record_timestamp(&self, timestamp_delta: i64) -> i64 {
        self.first_timestamp.saturating_add(timestamp_delta)
    }
}

/// CRC-32C of a batch as stored in its header (covers bytes 21..end).
pub fn compute_crc(batch: &[u8]) -> u32 {
    crc32c_of(&[&batch[OFF_ATTRIBUTES..]])
}

/// CRC-32C (Castagnoli) of `parts` one after the other: the data path's CRC (every produced
/// batch is checked, every batch read from disk too), with crc-fast's SIMD folding.
pub fn crc32c_of(parts: &[&[u8]]) -> u32 {
    match parts {
        [one] => crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, one) as u32,
        _ => {
            let mut d = crc_fast::Digest::new(crc_fast::CrcAlgorithm::Crc32Iscsi);
            parts.iter().for_each(|p| d.update(p));
            d.finalize() as u32
        }
    }
}

/// Recompute and store the CRC after a change inside the CRC-covered bytes.
pub fn rewrite_crc(batch: &mut [u8]) {
    let crc = compute_crc(batch);
    batch[OFF_CRC..OFF_CRC + 4].copy_from_slice(&crc.to_be_bytes());
}

/// Set baseOffset (outside the CRC: no recomputation needed).
pub fn set_base_offset(batch: &mut [u8], base_offset: i64) {
    batch[OFF_BASE_OFFSET..OFF_BASE_OFFSET + 8].copy_from_slice(&base_offset.to_be_bytes());
}

/// The checks on a batch read back from the log: exact length, magic, CRC. Cheap enough to
/// run on every batch recovery scans and every batch a read returns from disk.
pub fn check_stored(batch: &[u8]) -> Result<BatchHeader, FormatError> {
    let h = BatchHeader::parse(batch)?;
    if h.total_len() != batch.len() {
        return Err(FormatError::BadLength(h.batch_length as i64));
    }
    let computed = compute_crc(batch);
    if computed != h.crc {
        return Err(FormatError::BadCrc { stored: h.crc, computed });
    }
    if h.last_offset_delta < 0 {
        return Err(FormatError::BadRecordCount { count: h.record_count, last_offset_delta: h.last_offset_delta });
    }
    h.compression()?;
    Ok(h)
}

/// What the records of a produced batch say about time, and whether all have keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordStats {
    /// Smallest record timestamp other than -1, or `i64::MAX` if none.
    pub min_ts: i64,
    /// Largest record timestamp, or -1 if no record has one.
    pub max_ts: i64,
    /// Records without a key (a compacted topic refuses them, KIP-467).
    pub keyless: u32,
}

/// The records section of a batch, decompressed if needed (at most `limit` bytes).
pub fn records_section<'a>(h: &BatchHeader, batch: &'a [u8], limit: usize) -> Result<Cow<'a, [u8]>, FormatError> {
    let body = &batch[HEADER_LEN..];
    match h.compression()? {
        Compression::None => Ok(Cow::Borrowed(body)),
        codec => Ok(Cow::Owned(super::compression::decompress(codec, body, limit)?)),
    }
}

/// The checks on a batch a producer sent: everything [`check_stored`] checks, plus a record
/// count of at least one that matches lastOffsetDelta, and records (decompressed, at most
/// `decompress_limit` bytes) that parse exactly to their end with offset deltas 0, 1, 2, ...
/// Returns the header and the records' timestamp range.
pub fn check_produced(batch: &[u8], decompress_limit: usize) -> Result<(BatchHeader, RecordStats), FormatError> {
    let h = check_stored(batch)?;
    if h.is_control() {
        // Transaction markers are the broker's to write, never a producer's.
        return Err(FormatError::BadRecords("a control batch from a producer"));
    }
    if h.record_count < 1 || h.last_offset_delta != h.record_count - 1 {
        return Err(FormatError::BadRecordCount { count: h.record_count, last_offset_delta: h.last_offset_delta });
    }
    let records = records_section(&h, batch, decompress_limit)?;
    let mut stats = RecordStats { min_ts: i64::MAX, max_ts: -1, keyless: 0 };
    for (n, r) in Records::new(&records, h.record_count).enumerate() {
        let r = r?;
        stats.keyless += r.key.is_none() as u32;
        if r.offset_delta as i64 != n as i64 {
            return Err(FormatError::BadRecords("offset deltas are not sequential"));
        }
        let ts =
            h.first_timestamp.checked_add(r.timestamp_delta).ok_or(FormatError::BadRecords("timestamp overflow"))?;
        if ts != -1 {
            stats.min_ts = stats.min_ts.min(ts);
            stats.max_ts = stats.max_ts.max(ts);
        }
    }
    Ok((h, stats))
}

/// The records of a checked batch whose timestamp lies outside `[lo, hi]` (or is negative
/// other than -1, "none"), as (index in the batch, timestamp).
pub fn timestamps_outside(
    h: &BatchHeader,
    batch: &[u8],
    limit: usize,
    lo: i64,
    hi: i64,
) -> Result<Vec<(i32, i64)>, FormatError> {
    let records = records_section(h, batch, limit)?;
    let mut out = Vec::new();
    for (i, r) in Records::new(&records, h.record_count).enumerate() {
        let ts = h.first_timestamp.saturating_add(r?.timestamp_delta);
        if ts != -1 && (ts < 0 || ts < lo || ts > hi) {
            out.push((i as i32, ts));
        }
    }
    Ok(out)
}

/// The 61-byte header of `batch` with a new base offset and, if given, new attributes and
/// maxTimestamp, with the CRC recomputed over the changed header and the unchanged records.
pub fn patched_header(batch: &[u8], base_offset: i64, attributes: i16, max_timestamp: i64) -> [u8; HEADER_LEN] {
    let mut hdr = [0u8; HEADER_LEN];
    hdr.copy_from_slice(&batch[..HEADER_LEN]);
    hdr[OFF_BASE_OFFSET..OFF_BASE_OFFSET + 8].copy_from_slice(&base_offset.to_be_bytes());
    hdr[OFF_ATTRIBUTES..OFF_ATTRIBUTES + 2].copy_from_slice(&attributes.to_be_bytes());
    hdr[OFF_MAX_TIMESTAMP..OFF_MAX_TIMESTAMP + 8].copy_from_slice(&max_timestamp.to_be_bytes());
    let crc = crc32c_of(&[&hdr[OFF_ATTRIBUTES..], &batch[HEADER_LEN..]]);
    hdr[OFF_CRC..OFF_CRC + 4].copy_from_slice(&crc.to_be_bytes());
    hdr
}

/// Attributes with the timestamp-type bit set as `t` says.
pub fn with_timestamp_type(attributes: i16, t: TimestampType) -> i16 {
    match t {
        TimestampType::CreateTime => attributes & !ATTR_LOG_APPEND_TIME,
        TimestampType::LogAppendTime => attributes | ATTR_LOG_APPEND_TIME,
    }
}

/// One record inside an uncompressed batch (or a decompressed records section).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record<'a> {
    pub attributes: i8,
    pub timestamp_delta: i64,
    pub offset_delta: i32,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub headers: Vec<(&'a [u8], Option<&'a [u8]>)>,
}

/// Iterator over `count` records in `buf`; yields an error (and then stops) on corrupt bytes,
/// and an error if bytes remain after the last record.
pub struct Records<'a> {
    buf: &'a [u8],
    pos: usize,
    left: i32,
    failed: bool,
}

impl<'a> Records<'a> {
    pub fn new(buf: &'a [u8], count: i32) -> Self {
        Records { buf, pos: 0, left: count, failed: false }
    }

    fn bytes(body: &'a [u8], p: &mut usize, allow_null: bool) -> Result<Option<&'a [u8]>, FormatError> {
        let len = read_varint(body, p).ok_or(FormatError::BadRecords("bad length varint"))?;
        if len < 0 {
            if len == -1 && allow_null {
                return Ok(None);
            }
            return Err(FormatError::BadRecords("negative length"));
        }
        let end = p.checked_add(len as usize).filter(|e| *e <= body.len());
        let end = end.ok_or(FormatError::BadRecords("field past the record end"))?;
        let s = &body[*p..end];
        *p = end;
        Ok(Some(s))
    }

    fn parse_one(&mut self) -> Result<Record<'a>, FormatError> {
        let len = read_varint(self.buf, &mut self.pos).ok_or(FormatError::BadRecords("bad record length"))?;
        if len < 0 {
            return Err(FormatError::BadRecords("negative record length"));
        }
        let end = self.pos.checked_add(len as usize).filter(|e| *e <= self.buf.len());
        let end = end.ok_or(FormatError::BadRecords("record past the batch end"))?;
        let body = &self.buf[self.pos..end];
        self.pos = end;
        let mut p = 0usize;
        let attributes = *body.first().ok_or(FormatError::BadRecords("empty record"))? as i8;
        p += 1;
        let timestamp_delta = read_varlong(body, &mut p).ok_or(FormatError::BadRecords("bad timestamp delta"))?;
        let offset_delta = read_varint(body, &mut p).ok_or(FormatError::BadRecords("bad offset delta"))?;
        let key = Self::bytes(body, &mut p, true)?;
        let value = Self::bytes(body, &mut p, true)?;
        let n_headers = read_varint(body, &mut p).ok_or(FormatError::BadRecords("bad header count"))?;
        if n_headers < 0 || n_headers as usize > body.len() {
            return Err(FormatError::BadRecords("bad header count"));
        }
        // Each header takes at least two bytes: never reserve more than the record can hold
        // (a tiny compressed batch may claim millions).
        let mut headers = Vec::with_capacity((n_headers as usize).min((body.len() - p) / 2));
        for _ in 0..n_headers {
            let k = Self::bytes(body, &mut p, false)?.unwrap_or_default();
            let v = Self::bytes(body, &mut p, true)?;
            headers.push((k, v));
        }
        if p != body.len() {
            return Err(FormatError::BadRecords("record length does not match its fields"));
        }
        Ok(Record { attributes, timestamp_delta, offset_delta, key, value, headers })
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = Result<Record<'a>, FormatError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        if self.left <= 0 {
            if self.pos != self.buf.len() {
                self.failed = true;
                return Some(Err(FormatError::BadRecords("bytes after the last record")));
            }
            return None;
        }
        self.left -= 1;
        let r = self.parse_one();
        if r.is_err() {
            self.failed = true;
        }
        Some(r)
    }
}

/// Append one record's bytes (its length varint first) to `out`.
pub fn encode_record(out: &mut Vec<u8>, r: &Record<'_>) {
    // The length comes first: sized, then each field written once, straight into `out`.
    let field_len = |f: Option<&[u8]>| f.map_or(varint_len(-1), |b| varint_len(b.len() as i32) + b.len());
    let body = 1
        + varlong_len(r.timestamp_delta)
        + varint_len(r.offset_delta)
        + field_len(r.key)
        + field_len(r.value)
        + varint_len(r.headers.len() as i32)
        + r.headers.iter().map(|&(k, v)| field_len(Some(k)) + field_len(v)).sum::<usize>();
    out.reserve(varint_len(body as i32) + body);
    write_varint(out, body as i32);
    out.push(r.attributes as u8);
    write_varlong(out, r.timestamp_delta);
    write_varint(out, r.offset_delta);
    let field = |out: &mut Vec<u8>, f: Option<&[u8]>| match f {
        Some(b) => {
            write_varint(out, b.len() as i32);
            out.extend_from_slice(b);
        }
        None => write_varint(out, -1),
    };
    field(out, r.key);
    field(out, r.value);
    write_varint(out, r.headers.len() as i32);
    for &(k, v) in &r.headers {
        field(out, Some(k));
        field(out, v);
    }
}

/// Builds v2 batches: for tests, benches and the load generator.
#[derive(Debug, Clone)]
pub struct BatchBuilder {
    first_timestamp: Option<i64>,
    max_timestamp: i64,
    attributes: i16,
    count: i32,
    records: Vec<u8>,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
}

impl Default for BatchBuilder {
    fn default() -> Self {
        BatchBuilder {
            first_timestamp: None,
            max_timestamp: -1,
            attributes: 0,
            count: 0,
            records: Vec::new(),
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
        }
    }
}

impl BatchBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn log_append_time(mut self) -> Self {
        self.attributes |= ATTR_LOG_APPEND_TIME;
        self
    }

    /// A transactional batch (KIP-98): its records belong to its producer's open transaction.
    pub fn transactional(mut self) -> Self {
        self.attributes |= ATTR_TRANSACTIONAL;
        self
    }

    /// A control batch (a transaction marker): the broker's to write.
    pub fn control(mut self) -> Self {
        self.attributes |= ATTR_CONTROL | ATTR_TRANSACTIONAL;
        self
    }

    pub fn producer(mut self, id: i64, epoch: i16, base_sequence: i32) -> Self {
        self.producer_id = id;
        self.producer_epoch = epoch;
        self.base_sequence = base_sequence;
        self
    }

    pub fn len(&self) -> i32 {
        self.count
    }

    /// Room for `bytes` more of encoded records (a caller that knows a batch's size saves
    /// the copies of growing into it).
    pub fn reserve(mut self, bytes: usize) -> Self {
        self.records.reserve(bytes);
        self
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Bytes the batch would take if finished now.
    pub fn size(&self) -> usize {
        HEADER_LEN + self.records.len()
    }

    /// Add a record with timestamp `ts` (ms).
    pub fn push(&mut self, ts: i64, key: Option<&[u8]>, value: Option<&[u8]>, headers: &[(&[u8], Option<&[u8]>)]) {
        let first = *self.first_timestamp.get_or_insert(ts);
        self.max_timestamp = self.max_timestamp.max(ts);
        let record = Record {
            attributes: 0,
            timestamp_delta: ts - first,
            offset_delta: self.count,
            key,
            value,
            headers: headers.to_vec(),
        };
        encode_record(&mut self.records, &record);
        self.count += 1;
    }

    /// The finished batch with baseOffset 0 (the broker assigns offsets).
    pub fn finish(&self) -> Vec<u8> {
        self.finish_compressed(Compression::None)
    }

    /// The finished batch with its records compressed by `codec`.
    pub fn finish_compressed(&self, codec: Compression) -> Vec<u8> {
        assert!(self.count > 0, "a batch holds at least one record");
        // Uncompressed records are copied once, into the batch.
        let records = match codec {
            Compression::None => Cow::Borrowed(&self.records[..]),
            codec => Cow::Owned(super::compression::compress(codec, &self.records)),
        };
        let attributes = (self.attributes & !ATTR_COMPRESSION_MASK) | codec as i16;
        let size = HEADER_LEN + records.len();
        let mut b = Vec::with_capacity(size);
        b.extend_from_slice(&0i64.to_be_bytes());
        b.extend_from_slice(&((size - LOG_OVERHEAD) as i32).to_be_bytes());
        b.extend_from_slice(&(-1i32).to_be_bytes());
        b.push(MAGIC_V2 as u8);
        b.extend_from_slice(&0u32.to_be_bytes());
        b.extend_from_slice(&attributes.to_be_bytes());
        b.extend_from_slice(&(self.count - 1).to_be_bytes());
        b.extend_from_slice(&self.first_timestamp.unwrap_or(-1).to_be_bytes());
        b.extend_from_slice(&self.max_timestamp.to_be_bytes());
        b.extend_from_slice(&self.producer_id.to_be_bytes());
        b.extend_from_slice(&self.producer_epoch.to_be_bytes());
        b.extend_from_slice(&self.base_sequence.to_be_bytes());
        b.extend_from_slice(&self.count.to_be_bytes());
        b.extend_from_slice(&records);
        rewrite_crc(&mut b);
        b
    }
}

/// A batch of `n` records with values of `value_len` bytes and timestamps `ts, ts+1, ...`.
pub fn simple_batch(n: usize, value_len: usize, ts: i64) -> Vec<u8> {
    let mut b = BatchBuilder::new();
    let value = vec![b'x'; value_len];
    for i in 0..n {
        b.push(ts + i as i64, None, Some(&value), &[]);
    }
    b.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn crc32c_of_is_castagnoli_over_the_parts_joined() {
        assert_eq!(crc32c_of(&[b"123456789"]), 0xE306_9283, "the CRC-32C check value");
        assert_eq!(crc32c_of(&[b""]), 0);
        let data: Vec<u8> = (0..70_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        for len in [0, 1, 7, 15, 16, 63, 64, 255, 256, 1023, 4096, 16_385, 65_536, 70_000] {
            let want = crc32c::crc32c(&data[..len]);
            assert_eq!(crc32c_of(&[&data[..len]]), want, "length {len}");
            for cut in [0, 1.min(len), len / 3, len / 2, len.saturating_sub(1), len] {
                assert_eq!(crc32c_of(&[&data[..cut], &data[cut..len]]), want, "length {len} cut at {cut}");
            }
        }
    }

    // Found by fuzzing (fuzz/seeds/batch_parser/regress-offset-overflow): a header is parsed
    // before anything checks it, so its arithmetic must not overflow. A length below the
    // header's is refused at parse; offsets near i64::MAX saturate.
    #[test]
    fn untrusted_header_arithmetic_does_not_overflow() {
        let mut b = BatchBuilder::new();
        b.push(1000, None, Some(b"v"), &[]);
        let mut bytes = b.finish();
        set_base_offset(&mut bytes, i64::MAX - 1);
        bytes[OFF_LAST_OFFSET_DELTA..OFF_LAST_OFFSET_DELTA + 4].copy_from_slice(&7i32.to_be_bytes());
        let h = BatchHeader::parse(&bytes).unwrap();
        assert_eq!((h.last_offset(), h.next_offset()), (i64::MAX, i64::MAX));
        for len in [-1i32, i32::MIN, 0, (HEADER_LEN - LOG_OVERHEAD) as i32 - 1] {
            bytes[OFF_LENGTH..OFF_LENGTH + 4].copy_from_slice(&len.to_be_bytes());
            assert_eq!(BatchHeader::parse(&bytes).unwrap_err(), FormatError::BadLength(len as i64));
        }
    }

    #[test]
    fn built_batch_passes_every_check() {
        let mut b = BatchBuilder::new();
        b.push(1000, Some(b"k"), Some(b"v"), &[(b"h", Some(b"x"))]);
        b.push(990, None, None, &[]);
        let bytes = b.finish();
        let (h, _) = check_produced(&bytes, 1 << 20).unwrap();
        assert_eq!(h.record_count, 2);
        assert_eq!(h.first_timestamp, 1000);
        assert_eq!(h.max_timestamp, 1000);
        assert_eq!(h.total_len(), bytes.len());
        let recs: Vec<_> = Records::new(&bytes[HEADER_LEN..], 2).collect::<Result<_, _>>().unwrap();
        assert_eq!(recs[0].key, Some(&b"k"[..]));
        assert_eq!(recs[1].timestamp_delta, -10);
        assert_eq!(recs[1].value, None);
    }

    #[test]
    fn offset_rewrite_keeps_crc_valid() {
        let mut bytes = simple_batch(3, 10, 5);
        set_base_offset(&mut bytes, 12345);
        let (h, _) = check_produced(&bytes, 1 << 20).unwrap();
        assert_eq!(h.base_offset, 12345);
        assert_eq!(h.last_offset(), 12347);
    }

    #[test]
    fn every_single_bit_flip_in_crc_range_is_detected() {
        let bytes = simple_batch(2, 8, 5);
        for i in OFF_ATTRIBUTES..bytes.len() {
            for bit in 0..8 {
                let mut b = bytes.clone();
                b[i] ^= 1 << bit;
                assert!(check_stored(&b).is_err(), "flip at byte {i} bit {bit} undetected");
            }
        }
    }

    #[test]
    fn count_mismatch_and_trailing_bytes_are_refused() {
        let mut bytes = simple_batch(2, 8, 5);
        bytes[OFF_RECORD_COUNT + 3] = 3;
        rewrite_crc(&mut bytes);
        assert!(matches!(check_produced(&bytes, 1 << 20), Err(FormatError::BadRecordCount { .. })));

        let mut b = BatchBuilder::new();
        b.push(1, None, Some(b"a"), &[]);
        let mut bytes = b.finish();
        bytes.push(0);
        let len = (bytes.len() - LOG_OVERHEAD) as i32;
        bytes[OFF_LENGTH..OFF_LENGTH + 4].copy_from_slice(&len.to_be_bytes());
        rewrite_crc(&mut bytes);
        assert_eq!(check_produced(&bytes, 1 << 20), Err(FormatError::BadRecords("bytes after the last record")));
    }

    #[test]
    fn bad_length_and_magic_are_refused() {
        let mut bytes = simple_batch(1, 1, 1);
        bytes[OFF_MAGIC] = 1;
        assert_eq!(check_stored(&bytes), Err(FormatError::BadMagic(1)));
        use crate::storage::format::stored::frame_len;
        assert!(frame_len(&[0u8; 12], 1 << 20).is_err(), "a zero length is not a batch");
        assert_eq!(frame_len(&[0u8; 11], 1 << 20), Ok(None));
    }

    proptest! {
        /// The data path's CRC-32C equals the crc32c crate's over any bytes, whole or in two parts.
        #[test]
        fn crc32c_of_matches_the_reference_at_any_offset_length_and_split(
            data in proptest::collection::vec(any::<u8>(), 0..5000),
            start in 0usize..64,
            cut in any::<usize>(),
        ) {
            // Unaligned starts and every length class (short, 257, 384-1024 and longer), split
            // anywhere: the SIMD paths and their tails against the crc32c crate.
            let body = &data[start.min(data.len())..];
            let cut = cut % (body.len() + 1);
            let want = crc32c::crc32c(body);
            prop_assert_eq!(crc32c_of(&[body]), want);
            prop_assert_eq!(crc32c_of(&[&body[..cut], &body[cut..]]), want);
        }

        /// Any bytes fed to the checks give an error or a header, never a panic.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = check_produced(&bytes, 1 << 20);
            for item in crate::storage::format::stored::BatchWalk::new(&bytes, 1 << 20) {
                if item.is_err() { break; }
            }
        }

        /// Records round-trip through the builder and the parser (values past 63 and 8191
        /// bytes take 2- and 3-byte length varints, which `encode_record` sizes up front).
        #[test]
        fn records_round_trip(recs in proptest::collection::vec(
            (any::<i64>().prop_map(|t| t >> 2), proptest::option::of(proptest::collection::vec(any::<u8>(), 0..20)),
             proptest::option::of(proptest::collection::vec(any::<u8>(), 0..9000))), 1..20)) {
            let mut b = BatchBuilder::new();
            for (ts, k, v) in &recs {
                b.push(*ts, k.as_deref(), v.as_deref(), &[]);
            }
            let bytes = b.finish();
            let (h, _) = check_produced(&bytes, 1 << 20).unwrap();
            let first = recs[0].0;
            let parsed: Vec<_> = Records::new(&bytes[HEADER_LEN..], h.record_count).collect::<Result<_, _>>().unwrap();
            prop_assert_eq!(parsed.len(), recs.len());
            for (p, (ts, k, v)) in parsed.iter().zip(&recs) {
                prop_assert_eq!(first + p.timestamp_delta, *ts);
                prop_assert_eq!(p.key, k.as_deref());
                prop_assert_eq!(p.value, v.as_deref());
            }
        }
    }
}
