//! Legacy message sets: magic 0 (no timestamp) and magic 1 (with a timestamp, KIP-32), byte
//! for byte as old clients send them (SPEC T1.1).
//!
//! A message set is a sequence of log entries:
//!
//! ```text
//! off len field
//!   0   8 offset       (a wrapper's: the offset of its last inner message)
//!   8   4 size         (bytes after this field)
//!  12   4 crc          (CRC-32, IEEE, of bytes 16..end)
//!  16   1 magic        (0 or 1)
//!  17   1 attributes   (bits 0-2 codec, bit 3 timestamp type: 1 = LogAppendTime, magic 1)
//!  18   8 timestamp    (magic 1 only)
//!   .   4 key length   (-1 = null), key
//!   .   4 value length (-1 = null), value
//! ```
//!
//! Integers are big-endian; the first 12 bytes and the magic sit where a v2 batch has its
//! baseOffset, batchLength and magic, so one walk frames both. A compressed message (a
//! *wrapper*) holds a compressed message set of *inner* messages of the same magic, never
//! compressed again. Inner offsets: magic 0 absolute, magic 1 relative (0, 1, ... n-1; the
//! wrapper's offset is the absolute offset of the last). The broker keeps the wire bytes and
//! rewrites only what it must: the offset field (outside the CRC), a timestamp or the
//! timestamp-type bit (CRC recomputed), and rebuilds a wrapper only when its inner messages
//! must change (SPEC T3.2; magic-0 inner offsets made absolute).

use super::batch::{Compression, FormatError, RecordStats, TimestampType};
use super::compression::{compress_legacy, decompress_legacy};

pub const MAGIC_V0: i8 = 0;
pub const MAGIC_V1: i8 = 1;
pub const OFF_OFFSET: usize = 0;
pub const OFF_SIZE: usize = 8;
pub const OFF_CRC: usize = 12;
pub const OFF_MAGIC: usize = 16;
pub const OFF_ATTRIBUTES: usize = 17;
pub const OFF_TIMESTAMP: usize = 18;
/// The longest fixed prefix (magic 1, through the timestamp): what the broker may rewrite.
pub const MAX_PREFIX_LEN: usize = 26;

const ATTR_COMPRESSION_MASK: i8 = 0x07;
const ATTR_LOG_APPEND_TIME: i8 = 0x08;

/// Bytes before the key: offset, size, crc, magic, attributes and (magic 1) the timestamp.
pub fn prefix_len(magic: i8) -> usize {
    if magic == MAGIC_V0 {
        18
    } else {
        MAX_PREFIX_LEN
    }
}

/// The smallest entry of `magic`: a prefix, a null key and a null value.
pub fn min_len(magic: i8) -> usize {
    prefix_len(magic) + 8
}

fn be_i64(b: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}
fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

/// CRC-32 of a legacy entry as its header stores it (bytes 16..end).
pub fn compute_crc(entry: &[u8]) -> u32 {
    crc32fast::hash(&entry[OFF_MAGIC..])
}

/// The fixed part of a legacy entry, from its first [`prefix_len`] bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LegacyHeader {
    pub offset: i64,
    pub size: i32,
    pub crc: u32,
    pub magic: i8,
    pub attributes: i8,
    /// -1 for magic 0.
    pub timestamp: i64,
}

impl LegacyHeader {
    pub fn parse(buf: &[u8]) -> Result<LegacyHeader, FormatError> {
        let magic = *buf.get(OFF_MAGIC).ok_or(FormatError::Truncated { need: OFF_MAGIC + 1, have: buf.len() })? as i8;
        if magic != MAGIC_V0 && magic != MAGIC_V1 {
            return Err(FormatError::BadMagic(magic));
        }
        let need = prefix_len(magic);
        if buf.len() < need {
            return Err(FormatError::Truncated { need, have: buf.len() });
        }
        let size = be_i32(buf, OFF_SIZE);
        if (size as i64) < (min_len(magic) - 12) as i64 {
            return Err(FormatError::BadLength(size as i64));
        }
        Ok(LegacyHeader {
            offset: be_i64(buf, OFF_OFFSET),
            size,
            crc: u32::from_be_bytes(buf[OFF_CRC..OFF_CRC + 4].try_into().expect("4 bytes")),
            magic,
            attributes: buf[OFF_ATTRIBUTES] as i8,
            timestamp: if magic == MAGIC_V1 { be_i64(buf, OFF_TIMESTAMP) } else { -1 },
        })
    }

    pub fn total_len(&self) -> usize {
        self.size as usize + 12
    }

    pub fn compression(&self) -> Result<Compression, FormatError> {
        Compression::from_attributes((self.attributes & ATTR_COMPRESSION_MASK) as i16)
    }

    pub fn is_wrapper(&self) -> bool {
        self.attributes & ATTR_COMPRESSION_MASK != 0
    }

    pub fn timestamp_type(&self) -> TimestampType {
        if self.magic == MAGIC_V1 && self.attributes & ATTR_LOG_APPEND_TIME != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }
}

/// One legacy entry, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message<'a> {
    pub header: LegacyHeader,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
}

fn bytes_field<'a>(buf: &'a [u8], pos: &mut usize) -> Result<Option<&'a [u8]>, FormatError> {
    let len = buf.get(*pos..*pos + 4).ok_or(FormatError::BadRecords("legacy message truncated"))?;
    let len = i32::from_be_bytes(len.try_into().expect("4 bytes"));
    *pos += 4;
    if len == -1 {
        return Ok(None);
    }
    if len < 0 {
        return Err(FormatError::BadRecords("negative length in a legacy message"));
    }
    let end = pos.checked_add(len as usize).filter(|&e| e <= buf.len());
    let end = end.ok_or(FormatError::BadRecords("legacy message field past its end"))?;
    let s = &buf[*pos..end];
    *pos = end;
    Ok(Some(s))
}

/// Parse the legacy entry that occupies exactly `entry`: its size matches, its key and value
/// fill it exactly, its codec is known. The CRC is not checked (see [`check`]).
pub fn parse(entry: &[u8]) -> Result<Message<'_>, FormatError> {
    let header = LegacyHeader::parse(entry)?;
    if header.total_len() != entry.len() {
        return Err(FormatError::BadLength(header.size as i64));
    }
    header.compression()?;
    let mut pos = prefix_len(header.magic);
    let key = bytes_field(entry, &mut pos)?;
    let value = bytes_field(entry, &mut pos)?;
    if pos != entry.len() {
        return Err(FormatError::BadRecords("legacy message size does not match its fields"));
    }
    Ok(Message { header, key, value })
}

/// Parse and check the CRC of the legacy entry that occupies exactly `entry`.
pub fn check(entry: &[u8]) -> Result<Message<'_>, FormatError> {
    let m = parse(entry)?;
    let computed = compute_crc(entry);
    if computed != m.header.crc {
        return Err(FormatError::BadCrc { stored: m.header.crc, computed });
    }
    Ok(m)
}

/// Append a legacy entry to `out`, with its size and CRC computed.
pub fn write(
    out: &mut Vec<u8>,
    offset: i64,
    magic: i8,
    attributes: i8,
    timestamp: i64,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
) {
    let start = out.len();
    out.extend_from_slice(&offset.to_be_bytes());
    out.extend_from_slice(&0i32.to_be_bytes());
    out.extend_from_slice(&0u32.to_be_bytes());
    out.push(magic as u8);
    out.push(attributes as u8);
    if magic == MAGIC_V1 {
        out.extend_from_slice(&timestamp.to_be_bytes());
    }
    for field in [key, value] {
        match field {
            Some(b) => {
                out.extend_from_slice(&(b.len() as i32).to_be_bytes());
                out.extend_from_slice(b);
            }
            None => out.extend_from_slice(&(-1i32).to_be_bytes()),
        }
    }
    let entry = &mut out[start..];
    let size = (entry.len() - 12) as i32;
    entry[OFF_SIZE..OFF_SIZE + 4].copy_from_slice(&size.to_be_bytes());
    let crc = compute_crc(entry);
    entry[OFF_CRC..OFF_CRC + 4].copy_from_slice(&crc.to_be_bytes());
}

/// Attributes of `magic` with codec `codec` and timestamp type `t` (magic 1 only).
pub fn attributes(magic: i8, codec: Compression, t: TimestampType) -> i8 {
    let lat = magic == MAGIC_V1 && t == TimestampType::LogAppendTime;
    codec as i8 | if lat { ATTR_LOG_APPEND_TIME } else { 0 }
}

/// One record of a legacy message set to write: its absolute offset, the timestamp its
/// reader must see, its key and value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SetRecord<'a> {
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
}

/// Append `records` to `out` as a message set of `magic` with timestamp type `t`: plain
/// messages for `Compression::None` (each with its timestamp and the type bit), otherwise one
/// wrapper of `codec` holding them (SPEC T3.2, T3.3): inner offsets absolute for magic 0,
/// relative (0..n-1) for magic 1; inner timestamps -1 under LogAppendTime; the wrapper at the
/// last offset with `wrapper_ts` and `wrapper_key`. The one writer of message sets: stored
/// wrappers the broker rebuilds, down-conversion, tests.
pub fn write_set(
    out: &mut Vec<u8>,
    magic: i8,
    codec: Compression,
    t: TimestampType,
    wrapper_ts: i64,
    wrapper_key: Option<&[u8]>,
    records: &[SetRecord<'_>],
) {
    let lat = t == TimestampType::LogAppendTime;
    if codec == Compression::None {
        for r in records {
            write(out, r.offset, magic, attributes(magic, Compression::None, t), r.timestamp, r.key, r.value);
        }
        return;
    }
    let Some(last) = records.last() else { return };
    let first = records[0].offset;
    let mut inner = Vec::with_capacity(
        records.iter().map(|r| 34 + r.key.map_or(0, <[u8]>::len) + r.value.map_or(0, <[u8]>::len)).sum(),
    );
    for r in records {
        let offset = if magic == MAGIC_V0 { r.offset } else { r.offset.saturating_sub(first) };
        write(&mut inner, offset, magic, 0, if lat { -1 } else { r.timestamp }, r.key, r.value);
    }
    write_wrapper(out, magic, codec, last.offset, wrapper_ts, t, wrapper_key, &inner);
}

/// Append a wrapper of `codec` around `inner` (encoded messages, taken as they are) to `out`.
#[allow(clippy::too_many_arguments)]
pub fn write_wrapper(
    out: &mut Vec<u8>,
    magic: i8,
    codec: Compression,
    offset: i64,
    timestamp: i64,
    t: TimestampType,
    key: Option<&[u8]>,
    inner: &[u8],
) {
    assert_ne!(codec, Compression::None, "a wrapper is compressed");
    let value = compress_legacy(codec, magic, inner);
    write(out, offset, magic, attributes(magic, codec, t), timestamp, key, Some(&value));
}

/// The inner messages of a decompressed wrapper value: each parsed and CRC-checked, of the
/// wrapper's magic and not compressed again. Stops after the first error.
pub struct Inner<'a> {
    buf: &'a [u8],
    pos: usize,
    magic: i8,
    failed: bool,
}

impl<'a> Inner<'a> {
    pub fn new(buf: &'a [u8], magic: i8) -> Self {
        Inner { buf, pos: 0, magic, failed: false }
    }

    fn next_inner(&mut self) -> Result<Message<'a>, FormatError> {
        let rest = &self.buf[self.pos..];
        if rest.len() < 12 {
            return Err(FormatError::BadRecords("truncated inner message"));
        }
        let size = be_i32(rest, OFF_SIZE);
        let total = (size as i64 + 12).clamp(0, i64::MAX) as usize;
        if size < 0 || total > rest.len() {
            return Err(FormatError::BadRecords("inner message past the wrapper's end"));
        }
        let m = check(&rest[..total])?;
        if m.header.magic != self.magic {
            return Err(FormatError::BadRecords("inner message magic differs from its wrapper's"));
        }
        if m.header.is_wrapper() {
            return Err(FormatError::BadRecords("nested compression"));
        }
        self.pos += total;
        Ok(m)
    }
}

impl<'a> Iterator for Inner<'a> {
    type Item = Result<Message<'a>, FormatError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.pos >= self.buf.len() {
            return None;
        }
        let r = self.next_inner();
        self.failed = r.is_err();
        Some(r)
    }
}

/// Decompress a wrapper's value (at most `limit` bytes).
pub fn inner_bytes(m: &Message<'_>, limit: usize) -> Result<Vec<u8>, FormatError> {
    let value = m.value.ok_or(FormatError::BadRecords("wrapper without a value"))?;
    decompress_legacy(m.header.compression()?, m.header.magic, value, limit)
}

/// A legacy message as the broker will see a record: its absolute offset and timestamp.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LegacyRecord<'a> {
    pub offset: i64,
    /// -1: none (magic 0).
    pub timestamp: i64,
    pub timestamp_type: TimestampType,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
}

/// The records of a stored legacy entry (a plain message: itself; a wrapper: its inner
/// messages, decompressed into `scratch`), with absolute offsets and the timestamps a reader
/// sees (SPEC T4.2: in a wrapper, an inner -1, or any inner timestamp under LogAppendTime,
/// means the wrapper's timestamp).
pub fn records<'a>(
    entry: &'a [u8],
    scratch: &'a mut Vec<u8>,
    limit: usize,
) -> Result<Vec<LegacyRecord<'a>>, FormatError> {
    let m = check(entry)?;
    let h = m.header;
    if !h.is_wrapper() {
        return Ok(vec![LegacyRecord {
            offset: h.offset,
            timestamp: h.timestamp,
            timestamp_type: h.timestamp_type(),
            key: m.key,
            value: m.value,
        }]);
    }
    *scratch = inner_bytes(&m, limit)?;
    let inner: Vec<Message<'a>> = Inner::new(scratch, h.magic).collect::<Result<_, _>>()?;
    let last_rel = inner.last().ok_or(FormatError::BadRecords("empty wrapper"))?.header.offset;
    let lat = h.timestamp_type() == TimestampType::LogAppendTime;
    inner
        .into_iter()
        .map(|i| {
            let offset = if h.magic == MAGIC_V0 {
                i.header.offset
            } else {
                last_rel
                    .checked_sub(i.header.offset)
                    .filter(|&d| d >= 0)
                    .and_then(|d| h.offset.checked_sub(d))
                    .ok_or(FormatError::BadRecords("inner offsets out of order"))?
            };
            let timestamp = if h.magic == MAGIC_V0 {
                -1
            } else if lat || i.header.timestamp == -1 {
                h.timestamp
            } else {
                i.header.timestamp
            };
            Ok(LegacyRecord { offset, timestamp, timestamp_type: h.timestamp_type(), key: i.key, value: i.value })
        })
        .collect()
}

/// The first and last offset a stored legacy wrapper holds, from its inner messages
/// (decompressed within `limit`), which must go up by one (or, where the log may have gaps
/// (`gaps`: a compacted segment), go up) and end at the wrapper's: its header names only
/// the last, outside the CRC, so recovery pins the first this way.
pub fn wrapper_span(entry: &[u8], limit: usize, gaps: bool) -> Result<(i64, i64), FormatError> {
    let mut scratch = Vec::new();
    let recs = records(entry, &mut scratch, limit)?;
    let (first, last) = (recs[0].offset, recs[recs.len() - 1].offset);
    let in_order = recs.windows(2).all(|w| match w[0].offset.checked_add(1) {
        Some(next) if gaps => w[1].offset >= next,
        next => next == Some(w[1].offset),
    });
    if !in_order || last != LegacyHeader::parse(entry)?.offset {
        return Err(FormatError::BadRecords("wrapper offsets are out of order"));
    }
    Ok((first, last))
}

/// What the checks found in a legacy entry a producer sent (see [`check_produced`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Produced {
    pub header: LegacyHeader,
    /// Messages it holds: 1 for a plain message, the inner count for a wrapper.
    pub count: i32,
    /// The timestamps of its messages (inner ones for a wrapper), -1s left out.
    pub stats: RecordStats,
    /// Inner offsets: the first, and whether they go up by one.
    inner_first: i64,
    inner_sequential: bool,
    /// Every inner timestamp is -1.
    inner_untimed: bool,
}

/// The checks on a legacy entry a producer sent: structure, CRC, magic 0 or 1, and for a
/// wrapper its inner messages (decompressed within `limit` bytes), each with a valid CRC,
/// the wrapper's magic and no compression of its own, at least one of them.
pub fn check_produced(entry: &[u8], limit: usize) -> Result<Produced, FormatError> {
    let m = check(entry)?;
    let h = m.header;
    let mut stats = RecordStats { min_ts: i64::MAX, max_ts: -1, keyless: 0 };
    let mut note = |ts: i64| {
        if ts != -1 {
            stats.min_ts = stats.min_ts.min(ts);
            stats.max_ts = stats.max_ts.max(ts);
        }
    };
    if !h.is_wrapper() {
        note(h.timestamp);
        stats.keyless = m.key.is_none() as u32;
        return Ok(Produced {
            header: h,
            count: 1,
            stats,
            inner_first: h.offset,
            inner_sequential: true,
            inner_untimed: h.timestamp == -1,
        });
    }
    let inner = inner_bytes(&m, limit)?;
    let (mut count, mut first, mut prev, mut sequential, mut untimed) = (0i32, 0i64, 0i64, true, true);
    for i in Inner::new(&inner, h.magic) {
        let i = i?;
        if count == 0 {
            first = i.header.offset;
        } else if i.header.offset != prev.wrapping_add(1) {
            sequential = false;
        }
        prev = i.header.offset;
        note(i.header.timestamp);
        stats.keyless += i.key.is_none() as u32;
        untimed &= i.header.timestamp == -1;
        count = count.checked_add(1).ok_or(FormatError::BadRecords("too many inner messages"))?;
    }
    if count == 0 {
        return Err(FormatError::BadRecords("empty wrapper"));
    }
    Ok(Produced { header: h, count, stats, inner_first: first, inner_sequential: sequential, inner_untimed: untimed })
}

/// How a produced legacy entry is stored: a rewritten prefix followed by the rest of the wire
/// bytes, or (a wrapper whose inner messages had to change) a rebuilt entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stored {
    /// The first `len` bytes of `prefix` replace the entry's first `len` bytes.
    Prefix {
        prefix: [u8; MAX_PREFIX_LEN],
        len: usize,
    },
    Rebuilt(Vec<u8>),
}

/// The stored form of a produced legacy entry given offsets `base..base + count` on a topic
/// of timestamp type `t` at broker time `now`, and the largest timestamp it then carries
/// (-1 for magic 0). SPEC T3.2: LogAppendTime stamps a plain magic-1 message or a wrapper
/// with `now` and the type bit, and a wrapper's inner timestamps become -1 (rebuilt if any
/// was not). SPEC T3.3: a CreateTime wrapper carries its largest inner timestamp. Inner
/// offsets become 0..n-1 (magic 1) or absolute (magic 0); a wrapper is rebuilt, decompressed
/// again within `limit`, only if they were not already.
pub fn stored_form(
    entry: &[u8],
    p: &Produced,
    base: i64,
    t: TimestampType,
    now: i64,
    limit: usize,
) -> Result<(Stored, i64), FormatError> {
    let h = p.header;
    let last = base + p.count as i64 - 1;
    let lat = t == TimestampType::LogAppendTime;
    if lat && h.magic == MAGIC_V0 {
        return Ok((Stored::Rebuilt(stamped_magic1(entry, base, now, limit)?), now));
    }
    let (timestamp, attrs) = match (h.magic, lat, h.is_wrapper()) {
        (MAGIC_V0, _, _) => (-1, h.attributes),
        (_, true, _) => (now, h.attributes | ATTR_LOG_APPEND_TIME),
        (_, false, true) => (p.stats.max_ts, h.attributes & !ATTR_LOG_APPEND_TIME),
        (_, false, false) => (h.timestamp, h.attributes & !ATTR_LOG_APPEND_TIME),
    };
    let offsets_ok = match h.magic {
        MAGIC_V0 => p.inner_first == base,
        _ => p.inner_first == 0,
    } && p.inner_sequential;
    if h.is_wrapper() && (!offsets_ok || (lat && h.magic == MAGIC_V1 && !p.inner_untimed)) {
        let m = check(entry)?;
        let inner = inner_bytes(&m, limit)?;
        let recs: Vec<SetRecord<'_>> = Inner::new(&inner, h.magic)
            .enumerate()
            .map(|(n, i)| {
                i.map(|i| SetRecord {
                    offset: base + n as i64,
                    timestamp: i.header.timestamp,
                    key: i.key,
                    value: i.value,
                })
            })
            .collect::<Result<_, _>>()?;
        let mut out = Vec::with_capacity(entry.len() + 64);
        write_set(&mut out, h.magic, h.compression()?, t, timestamp, m.key, &recs);
        return Ok((Stored::Rebuilt(out), timestamp));
    }
    let mut prefix = [0u8; MAX_PREFIX_LEN];
    let changed = attrs != h.attributes || timestamp != h.timestamp;
    crate::invariant!(!changed || h.magic == MAGIC_V1, "magic 0 has no timestamp to change");
    let len = if changed { prefix_len(h.magic) } else { 8 };
    prefix[..len].copy_from_slice(&entry[..len]);
    prefix[OFF_OFFSET..OFF_OFFSET + 8].copy_from_slice(&last.to_be_bytes());
    if changed {
        prefix[OFF_ATTRIBUTES] = attrs as u8;
        prefix[OFF_TIMESTAMP..OFF_TIMESTAMP + 8].copy_from_slice(&timestamp.to_be_bytes());
        // The CRC of the rewritten prefix's covered bytes continued over the unchanged rest.
        let mut crc = crc32fast::Hasher::new();
        crc.update(&prefix[OFF_MAGIC..len]);
        crc.update(&entry[len..]);
        prefix[OFF_CRC..OFF_CRC + 4].copy_from_slice(&crc.finalize().to_be_bytes());
    }
    Ok((Stored::Prefix { prefix, len }, timestamp))
}

/// SPEC T3.2, magic 0 on a LogAppendTime topic: the entry (a plain message, or a wrapper of
/// plain messages) as magic 1 stamped with `now`, at offsets from `base`: a plain message
/// with `now` and the type bit; a wrapper of the same codec with `now` and the type bit around
/// inner magic-1 messages at relative offsets with timestamp -1 (decompressed within `limit`).
fn stamped_magic1(entry: &[u8], base: i64, now: i64, limit: usize) -> Result<Vec<u8>, FormatError> {
    let m = check(entry)?;
    let codec = m.header.compression()?;
    let mut out = Vec::with_capacity(entry.len() + 64);
    let lat = TimestampType::LogAppendTime;
    if codec == Compression::None {
        let one = SetRecord { offset: base, timestamp: now, key: m.key, value: m.value };
        write_set(&mut out, MAGIC_V1, codec, lat, now, None, &[one]);
        return Ok(out);
    }
    let inner = inner_bytes(&m, limit)?;
    let recs: Vec<SetRecord<'_>> = Inner::new(&inner, MAGIC_V0)
        .enumerate()
        .map(|(n, i)| i.map(|i| SetRecord { offset: base + n as i64, timestamp: -1, key: i.key, value: i.value }))
        .collect::<Result<_, _>>()?;
    write_set(&mut out, MAGIC_V1, codec, lat, now, m.key, &recs);
    Ok(out)
}

/// Builds legacy message sets, as old producers do: for tests, fixtures and down-conversion.
#[derive(Debug, Clone)]
pub struct LegacyBuilder {
    magic: i8,
    codec: Compression,
    messages: Vec<u8>,
    count: i64,
    max_ts: i64,
}

impl LegacyBuilder {
    pub fn new(magic: i8, codec: Compression) -> Self {
        assert!(magic == MAGIC_V0 || magic == MAGIC_V1, "legacy magic is 0 or 1");
        LegacyBuilder { magic, codec, messages: Vec::new(), count: 0, max_ts: -1 }
    }

    pub fn len(&self) -> i64 {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Add a message (offsets 0, 1, ... as producers number them; `ts` ignored for magic 0).
    pub fn push(&mut self, ts: i64, key: Option<&[u8]>, value: Option<&[u8]>) {
        let ts = if self.magic == MAGIC_V0 { -1 } else { ts };
        self.max_ts = self.max_ts.max(ts);
        write(&mut self.messages, self.count, self.magic, 0, ts, key, value);
        self.count += 1;
    }

    /// The message set: the messages themselves, or one wrapper holding them (its offset the
    /// last inner one, its timestamp the largest inner one, as a producer writes it).
    pub fn finish(&self) -> Vec<u8> {
        assert!(self.count > 0, "a message set holds at least one message");
        if self.codec == Compression::None {
            return self.messages.clone();
        }
        let recs: Vec<SetRecord<'_>> = Inner::new(&self.messages, self.magic)
            .map(|m| {
                let m = m.expect("built here");
                SetRecord { offset: m.header.offset, timestamp: m.header.timestamp, key: m.key, value: m.value }
            })
            .collect();
        let mut out = Vec::new();
        write_set(&mut out, self.magic, self.codec, TimestampType::CreateTime, self.max_ts, None, &recs);
        out
    }
}

#[cfg(test)]
mod tests;
