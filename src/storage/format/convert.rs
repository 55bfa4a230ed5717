//! Down-conversion for readers of older formats (SPEC T1.1): a Fetch of version 0 or 1 reads
//! magic 0, of version 2 or 3 magic 1. Stored batches of a newer magic are rewritten as
//! legacy messages of the reader's magic; the rest pass as they are. This is the only
//! re-encoding on the read path, and only for such readers.
//!
//! - v2 batch to magic 1: each record becomes a message with the record's timestamp (under
//!   LogAppendTime, the batch's, with the type bit); to magic 0, without timestamps. A
//!   compressed batch becomes one wrapper of its codec holding them (inner offsets relative
//!   for magic 1, absolute for magic 0; the wrapper's offset its last; a magic-1 wrapper's
//!   timestamp the largest, inner ones -1 under LogAppendTime, SPEC T3.2, T3.3), an
//!   uncompressed one a run of plain messages. Headers have no legacy form and are dropped;
//!   control batches (transaction markers) are left out.
//! - magic 1 to magic 0: the same messages without timestamps (a wrapper decompressed and
//!   rebuilt).
//! - zstd came with v2 batches and no client of these versions decodes it: zstd batches and
//!   wrappers reach such readers recompressed with gzip.
//!
//! Work is bounded: batches are converted in order until the output reaches `max_bytes` (the
//! first is converted whole), each decompressed within `limit` bytes.

use super::batch::{BatchHeader, Compression, FormatError, Records, TimestampType, MAGIC_V2};
use super::legacy::{self, SetRecord, MAGIC_V0, MAGIC_V1};
use super::stored::{BatchInfo, BatchWalk};
use bytes::Bytes;

/// The codec a reader of magic 0 or 1 gets for `codec`: zstd came with v2 batches, and no
/// client of these versions decodes it, so such batches are recompressed with gzip.
fn legacy_codec(codec: Compression) -> Compression {
    match codec {
        Compression::Zstd => Compression::Gzip,
        other => other,
    }
}

/// `bytes` (whole stored batches) as a reader of magic `to` (0 or 1) can read them, at most
/// about `max_bytes` of them.
pub fn down_convert(bytes: Bytes, to: i8, max_bytes: usize, limit: usize) -> Result<Bytes, FormatError> {
    assert!(to == MAGIC_V0 || to == MAGIC_V1, "down-conversion is to a legacy magic");
    let convert = |info: &BatchInfo| info.magic > to || legacy_codec(info.compression) != info.compression;
    if !BatchWalk::new(&bytes, usize::MAX >> 1).any(|b| b.is_ok_and(|(_, info, _)| convert(&info))) {
        return Ok(bytes);
    }
    let mut out = Vec::with_capacity(bytes.len().min(max_bytes.saturating_add(1 << 16)));
    for item in BatchWalk::new(&bytes, usize::MAX >> 1) {
        let (_, info, batch) = item?;
        if !out.is_empty() && out.len() >= max_bytes {
            break;
        }
        if !convert(&info) {
            out.extend_from_slice(batch);
        } else if info.magic == MAGIC_V2 {
            v2_to_legacy(batch, to, limit, &mut out)?;
        } else {
            legacy_to(batch, to, limit, &mut out)?;
        }
    }
    Ok(Bytes::from(out))
}

fn v2_to_legacy(batch: &[u8], to: i8, limit: usize, out: &mut Vec<u8>) -> Result<(), FormatError> {
    let h = BatchHeader::parse(batch)?;
    if h.is_control() {
        return Ok(());
    }
    let section = super::batch::records_section(&h, batch, limit)?;
    let t = h.timestamp_type();
    // A record takes at least 7 bytes of the section: the count never sizes more than that.
    let mut recs = Vec::with_capacity((h.record_count.max(0) as usize).min(section.len() / 7));
    for r in Records::new(&section, h.record_count) {
        let r = r?;
        let timestamp = match (to, t) {
            (MAGIC_V0, _) => -1,
            (_, TimestampType::LogAppendTime) => h.max_timestamp,
            _ => h.first_timestamp.saturating_add(r.timestamp_delta),
        };
        recs.push(SetRecord {
            offset: h.base_offset.saturating_add(r.offset_delta as i64),
            timestamp,
            key: r.key,
            value: r.value,
        });
    }
    let max_ts = recs.iter().map(|r| r.timestamp).max().unwrap_or(-1);
    legacy::write_set(out, to, legacy_codec(h.compression()?), t, max_ts, None, &recs);
    Ok(())
}

/// A legacy message rewritten as magic `to` (a magic-1 message as magic 0, or a zstd wrapper
/// as gzip), with the offsets and timestamps its reader saw.
fn legacy_to(entry: &[u8], to: i8, limit: usize, out: &mut Vec<u8>) -> Result<(), FormatError> {
    let m = legacy::check(entry)?;
    let h = m.header;
    let mut scratch = Vec::new();
    let recs: Vec<SetRecord<'_>> = legacy::records(entry, &mut scratch, limit)?
        .into_iter()
        .map(|r| SetRecord {
            offset: r.offset,
            timestamp: if to == MAGIC_V0 { -1 } else { r.timestamp },
            key: r.key,
            value: r.value,
        })
        .collect();
    let ts = if to == MAGIC_V0 { -1 } else { h.timestamp };
    let wrapper_key = if h.is_wrapper() { m.key } else { None };
    legacy::write_set(out, to, legacy_codec(h.compression()?), h.timestamp_type(), ts, wrapper_key, &recs);
    Ok(())
}

fn is_empty_v2(info: &BatchInfo, batch: &[u8]) -> bool {
    info.magic == MAGIC_V2 && BatchHeader::parse(batch).is_ok_and(|h| h.record_count == 0)
}

/// Where a legacy reader's read from offset `from` goes on when `bytes` (whole stored batches)
/// give it no message at or past `from`: every batch is a v2 batch it never sees (a transaction
/// marker, a compacted log's empty placeholder, or one whose records left after compaction are
/// all below `from`, its header still spanning past it), so the offset after the last; `None`
/// when some batch holds a message for it (or there are none, or a batch cannot be read: the
/// conversion reports that). A reader of these versions only moves on past a message it got:
/// an answer of nothing would have it ask for the same offset again for ever. `limit` bounds a
/// decompression, as in [`down_convert`].
pub fn nothing_for_legacy_reader(bytes: &[u8], from: i64, limit: usize) -> Option<i64> {
    let mut next = None;
    for item in BatchWalk::new(bytes, usize::MAX >> 1) {
        let (_, info, batch) = item.ok()?;
        if info.magic != MAGIC_V2 {
            return None; // a legacy entry's offset is its last kept message's
        }
        let h = BatchHeader::parse(batch).ok()?;
        let unseen = h.is_control()
            || h.record_count == 0
            || (h.base_offset < from && !has_record_from(&h, batch, from, limit)?);
        if !unseen {
            return None;
        }
        next = Some(info.next_offset());
    }
    next
}

/// Whether the v2 batch holds a record at or past offset `from` (`None`: it cannot be read).
fn has_record_from(h: &BatchHeader, batch: &[u8], from: i64, limit: usize) -> Option<bool> {
    let section = super::batch::records_section(h, batch, limit).ok()?;
    let mut last = None;
    for r in Records::new(&section, h.record_count) {
        last = Some(r.ok()?.offset_delta);
    }
    Some(last.is_some_and(|d| h.base_offset.saturating_add(d as i64) >= from))
}

/// Why stored records cannot reach a reader of an older format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ForReader {
    /// They hold batches newer than the reader reads and the topic forbids down-conversion
    /// (`message.downconversion.enable=false`; Kafka answers UNSUPPORTED_VERSION).
    Refused,
    /// A stored batch could not be converted.
    Failed(FormatError),
}

/// The records as a reader of magic `reader_magic` can read them (SPEC T1.1): as stored when
/// nothing in them is newer, down-converted when the topic `allows` it, refused otherwise.
/// Bounded as [`down_convert`] is.
pub fn for_reader(
    records: Bytes,
    reader_magic: i8,
    allowed: bool,
    max_bytes: usize,
    limit: usize,
) -> Result<Bytes, ForReader> {
    if reader_magic >= MAGIC_V2 || records.is_empty() {
        return Ok(records);
    }
    // An empty v2 batch (a compacted log's placeholder, no record) is no newer data: it is
    // left out of the conversion, as Kafka's readers never see one in a legacy-only log.
    let newer = BatchWalk::new(&records, i32::MAX as usize)
        .any(|b| b.is_ok_and(|(_, info, batch)| info.magic > reader_magic && !is_empty_v2(&info, batch)));
    if !allowed && newer {
        return Err(ForReader::Refused);
    }
    down_convert(records, reader_magic, max_bytes, limit).map_err(ForReader::Failed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::format::batch::BatchBuilder;
    use crate::storage::format::legacy::{LegacyBuilder, LegacyHeader};
    use crate::storage::format::stored::check_stored;
    use proptest::prelude::*;

    const CODECS: [Compression; 5] =
        [Compression::None, Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd];

    /// Every record of converted bytes: (offset, timestamp, type, key, value).
    type Rec = (i64, i64, TimestampType, Option<Vec<u8>>, Option<Vec<u8>>);
    /// A record to build: (timestamp, key, value).
    type Spec = (i64, Option<Vec<u8>>, Option<Vec<u8>>);

    fn legacy_records(bytes: &[u8], magic: i8) -> Vec<Rec> {
        let mut out = Vec::new();
        for item in BatchWalk::new(bytes, usize::MAX >> 1) {
            let (_, info, entry) = item.unwrap();
            assert_eq!(info.magic, magic);
            check_stored(entry).unwrap();
            let mut scratch = Vec::new();
            for r in legacy::records(entry, &mut scratch, 1 << 24).unwrap() {
                out.push((
                    r.offset,
                    r.timestamp,
                    r.timestamp_type,
                    r.key.map(<[u8]>::to_vec),
                    r.value.map(<[u8]>::to_vec),
                ));
            }
        }
        out
    }

    fn stored_v2(records: &[Spec], codec: Compression, base: i64, lat: Option<i64>) -> Vec<u8> {
        let mut b = BatchBuilder::new();
        for (ts, k, v) in records {
            b.push(*ts, k.as_deref(), v.as_deref(), &[(b"h", Some(b"dropped"))]);
        }
        let mut bytes = b.finish_compressed(codec);
        if let Some(now) = lat {
            let h = BatchHeader::parse(&bytes).unwrap();
            let attrs = crate::storage::format::batch::with_timestamp_type(h.attributes, TimestampType::LogAppendTime);
            let head = crate::storage::format::batch::patched_header(&bytes, base, attrs, now);
            bytes[..head.len()].copy_from_slice(&head);
        } else {
            crate::storage::format::batch::set_base_offset(&mut bytes, base);
        }
        bytes
    }

    proptest! {
        /// spec: T1.1 — down-converted v2 batches hold the same records at the same offsets;
        /// spec: T4.1, T4.2 — magic 1 keeps each record's timestamp (the batch's under
        /// LogAppendTime, with its type), magic 0 none; every codec (T1.3).
        #[test]
        fn v2_converts_with_offsets_and_timestamps(
            recs in proptest::collection::vec((0i64..1 << 40, proptest::option::of(proptest::collection::vec(any::<u8>(), 0..8)),
                proptest::option::of(proptest::collection::vec(any::<u8>(), 0..30))), 1..12),
            codec in 0usize..5, to in 0i8..2, base in 0i64..1_000_000, lat in proptest::option::of(0i64..1 << 40)) {
            let codec = CODECS[codec];
            let stored = stored_v2(&recs, codec, base, lat);
            let out = down_convert(Bytes::from(stored), to, 1 << 20, 1 << 24).unwrap();
            let got = legacy_records(&out, to);
            for (_, info, _) in BatchWalk::new(&out, usize::MAX >> 1).map(Result::unwrap) {
                prop_assert_ne!(info.compression, Compression::Zstd, "no zstd for legacy readers");
            }
            prop_assert_eq!(got.len(), recs.len());
            for (i, (g, (ts, k, v))) in got.iter().zip(&recs).enumerate() {
                prop_assert_eq!(g.0, base + i as i64);
                let want_ts = match (to, lat) { (0, _) => -1, (_, Some(now)) => now, _ => *ts };
                prop_assert_eq!(g.1, want_ts);
                let want_type = if to == 1 && lat.is_some() { TimestampType::LogAppendTime } else { TimestampType::CreateTime };
                prop_assert_eq!(g.2, want_type);
                prop_assert_eq!(&g.3, k);
                prop_assert_eq!(&g.4, v);
            }
        }
    }

    /// A compacted legacy log's empty v2 batch (no record: a placeholder that keeps a
    /// timestamp) is no newer data: an old reader gets the legacy messages around it even where
    /// the topic forbids down-conversion, and nothing for the placeholder itself.
    /// spec: T1.1 — a reader of an older format gets what it can read.
    #[test]
    fn an_empty_v2_batch_is_not_newer_data() {
        let mut m = LegacyBuilder::new(MAGIC_V1, Compression::None);
        m.push(5, Some(b"k"), Some(b"a"));
        let v2 = stored_v2(&[(1, Some(b"k".to_vec()), Some(b"b".to_vec()))], Compression::None, 1, None);
        let h = BatchHeader::parse(&v2).unwrap();
        let empty =
            crate::storage::compaction::rebuild(&h, &v2, &[], None, crate::storage::compaction::MaxTimestamp::Keep);
        let legacy = m.finish();
        let out = for_reader(Bytes::from([legacy.clone(), empty.clone()].concat()), MAGIC_V1, false, 1 << 20, 1 << 20);
        assert_eq!(out.unwrap().as_ref(), &legacy[..]);
        let refused = for_reader(Bytes::from([legacy, v2].concat()), MAGIC_V1, false, 1 << 20, 1 << 20);
        assert_eq!(refused, Err(ForReader::Refused), "a v2 batch with records is newer data");
    }

    /// magic 1 to magic 0 keeps offsets and payloads (plain and wrapped); bytes already of the
    /// reader's magic pass untouched (the same buffer); the output stops near `max_bytes`.
    #[test]
    fn v1_converts_to_v0_and_older_bytes_pass() {
        let mut plain = LegacyBuilder::new(MAGIC_V1, Compression::None);
        plain.push(5, Some(b"k"), Some(b"a"));
        let mut wrapped = LegacyBuilder::new(MAGIC_V1, Compression::Lz4);
        wrapped.push(6, None, Some(b"b"));
        wrapped.push(7, None, Some(b"c"));
        let mut w = wrapped.finish();
        w[..8].copy_from_slice(&2i64.to_be_bytes()); // stored at offsets 1..=2
        let v1 = [plain.finish(), w].concat();
        let out = down_convert(Bytes::from(v1.clone()), MAGIC_V0, 1 << 20, 1 << 20).unwrap();
        let got = legacy_records(&out, MAGIC_V0);
        assert_eq!(
            got.iter().map(|r| (r.0, r.1, r.4.clone().unwrap())).collect::<Vec<_>>(),
            vec![(0, -1, b"a".to_vec()), (1, -1, b"b".to_vec()), (2, -1, b"c".to_vec())]
        );
        // A zstd v1 wrapper reaches a magic-1 reader as gzip, records unchanged.
        let mut z = LegacyBuilder::new(MAGIC_V1, Compression::Zstd);
        z.push(8, None, Some(b"z1"));
        z.push(9, None, Some(b"z2"));
        let out = down_convert(Bytes::from(z.finish()), MAGIC_V1, 1 << 20, 1 << 20).unwrap();
        assert_eq!(LegacyHeader::parse(&out).unwrap().compression().unwrap(), Compression::Gzip);
        assert_eq!(legacy_records(&out, MAGIC_V1).iter().map(|r| (r.0, r.1)).collect::<Vec<_>>(), vec![(0, 8), (1, 9)]);
        let same = Bytes::from(v1);
        let passed = down_convert(same.clone(), MAGIC_V1, 1 << 20, 1 << 20).unwrap();
        assert_eq!(passed.as_ptr(), same.as_ptr(), "no copy when nothing is newer");
        // Bounded: a second batch is not converted once the first reached max_bytes.
        let two = [
            stored_v2(&[(1, None, Some(vec![1; 100]))], Compression::None, 0, None),
            stored_v2(&[(2, None, Some(vec![2; 100]))], Compression::None, 1, None),
        ]
        .concat();
        let out = down_convert(Bytes::from(two), MAGIC_V1, 10, 1 << 20).unwrap();
        assert_eq!(legacy_records(&out, MAGIC_V1).len(), 1);
    }

    /// A legacy reader's read goes on past v2 batches without messages for it at or past the
    /// read's offset (a transaction marker, a compacted log's empty placeholder, a compacted
    /// batch whose kept records are all below it): the offset after the last of them; a batch
    /// with a message for it (a v2 record, a legacy message) anywhere stops that.
    #[test]
    fn a_legacy_reader_reads_on_past_batches_without_messages_for_it() {
        let at = |mut b: Vec<u8>, base: i64| {
            crate::storage::format::batch::set_base_offset(&mut b, base);
            b
        };
        let mut marker = BatchBuilder::new().control().producer(7, 0, -1);
        marker.push(1, Some(&[0, 0, 0, 1]), Some(&[0, 0, 0, 0, 0, 0]), &[]);
        let marker = at(marker.finish(), 5);
        // An empty placeholder over offsets 6..=9: a 4-record batch's header, its records gone.
        let mut empty = at(stored_v2(&vec![(1, None, Some(b"x".to_vec())); 4], Compression::None, 0, None), 6);
        empty.truncate(crate::storage::format::batch::HEADER_LEN);
        let len = (empty.len() - crate::storage::format::batch::LOG_OVERHEAD) as i32;
        empty[8..12].copy_from_slice(&len.to_be_bytes());
        let n = empty.len();
        empty[n - 4..].copy_from_slice(&0i32.to_be_bytes());
        crate::storage::format::batch::rewrite_crc(&mut empty);
        check_stored(&empty).unwrap();
        let data = stored_v2(&[(1, None, Some(b"v".to_vec()))], Compression::None, 10, None);
        let mut legacy = LegacyBuilder::new(MAGIC_V1, Compression::None);
        legacy.push(1, Some(b"k"), Some(b"v"));
        let legacy = legacy.finish();
        let none = |bytes: &[u8], from| nothing_for_legacy_reader(bytes, from, 1 << 20);
        assert_eq!(none(&marker, 5), Some(6));
        assert_eq!(none(&[marker.clone(), empty.clone()].concat(), 5), Some(10));
        assert_eq!(none(&[marker.clone(), empty, data.clone()].concat(), 5), None);
        assert_eq!(none(&[marker, legacy].concat(), 5), None);
        assert_eq!(none(&data, 10), None);
        assert_eq!(none(&[], 0), None);
        // A compacted batch over offsets 10..=14 that kept records 10 and 11 only (its header
        // still spans to 14): nothing for a read from 12 on, its records for one from 11.
        let mut kept = stored_v2(&vec![(1, None, Some(b"x".to_vec())); 2], Compression::Gzip, 10, None);
        kept[crate::storage::format::batch::OFF_LAST_OFFSET_DELTA..][..4].copy_from_slice(&4i32.to_be_bytes());
        crate::storage::format::batch::rewrite_crc(&mut kept);
        check_stored(&kept).unwrap();
        assert_eq!(none(&kept, 12), Some(15));
        assert_eq!(none(&kept, 11), None);
        let after = stored_v2(&[(1, None, Some(b"v".to_vec()))], Compression::None, 15, None);
        assert_eq!(none(&[kept, after].concat(), 12), None, "what follows it is seen");
    }
}
