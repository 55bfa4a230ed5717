//! Legacy message sets: parsing, checking, stored forms and conversion (SPEC T1, T3).
use super::*;
use proptest::prelude::*;

/// An inner message as a test sees it: magic, offset, timestamp, key, value.
type InnerSeen = (i8, i64, i64, Option<Vec<u8>>, Option<Vec<u8>>);

const CODECS: [Compression; 5] =
    [Compression::None, Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd];

fn entries(set: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < set.len() {
        let total = be_i32(set, pos + OFF_SIZE) as usize + 12;
        out.push(&set[pos..pos + total]);
        pos += total;
    }
    out
}

#[test]
fn a_message_is_checked_byte_by_byte() {
    let mut b = LegacyBuilder::new(MAGIC_V1, Compression::None);
    b.push(1234, Some(b"k"), Some(b"value"));
    let set = b.finish();
    let m = check(&set).unwrap();
    assert_eq!((m.header.offset, m.header.timestamp, m.key, m.value), (0, 1234, Some(&b"k"[..]), Some(&b"value"[..])));
    for i in OFF_MAGIC..set.len() {
        let mut bad = set.clone();
        bad[i] ^= 0x10;
        assert!(check(&bad).is_err(), "flip at {i} undetected");
    }
    let mut short = set.clone();
    short.pop();
    assert!(check(&short).is_err());
    let mut bad_magic = set.clone();
    bad_magic[OFF_MAGIC] = 3;
    assert_eq!(LegacyHeader::parse(&bad_magic), Err(FormatError::BadMagic(3)));
}

/// spec: T1.3 — every codec in wrappers of both magics; T4.2 — records carry absolute
/// offsets and timestamps as a reader sees them.
#[test]
fn wrappers_of_every_codec_give_back_their_records() {
    for magic in [MAGIC_V0, MAGIC_V1] {
        for codec in CODECS.into_iter().skip(1) {
            let mut b = LegacyBuilder::new(magic, codec);
            for i in 0..5 {
                b.push(100 + i, Some(format!("k{i}").as_bytes()), Some(b"v"));
            }
            let set = b.finish();
            let p = check_produced(&set, 1 << 20).unwrap();
            assert_eq!(p.count, 5);
            let (stored, max_ts) = stored_form(&set, &p, 40, TimestampType::CreateTime, 9999, 1 << 20).unwrap();
            let bytes = match stored {
                Stored::Rebuilt(v) => v,
                Stored::Prefix { prefix, len } => [&prefix[..len], &set[len..]].concat(),
            };
            let mut scratch = Vec::new();
            let recs = records(&bytes, &mut scratch, 1 << 20).unwrap();
            assert_eq!(recs.iter().map(|r| r.offset).collect::<Vec<_>>(), (40..45).collect::<Vec<_>>());
            let want_ts: Vec<i64> = if magic == MAGIC_V0 { vec![-1; 5] } else { (100..105).collect() };
            assert_eq!(recs.iter().map(|r| r.timestamp).collect::<Vec<_>>(), want_ts, "{codec:?} {magic}");
            assert_eq!(max_ts, if magic == MAGIC_V0 { -1 } else { 104 }, "T3.3");
            assert_eq!(LegacyHeader::parse(&bytes).unwrap().offset, 44, "a wrapper's offset is its last");
        }
    }
}

/// spec: T3.2 — LogAppendTime: a plain v1 message gets `now` and the type bit (CRC
/// recomputed, nothing else changed); a wrapper gets them too and its inner timestamps
/// become -1, rebuilt because they were not.
#[test]
fn log_append_time_stamps_messages_and_clears_inner_timestamps() {
    let mut b = LegacyBuilder::new(MAGIC_V1, Compression::None);
    b.push(5, None, Some(b"x"));
    let set = b.finish();
    let p = check_produced(&set, 1 << 20).unwrap();
    let (stored, ts) = stored_form(&set, &p, 7, TimestampType::LogAppendTime, 777, 1 << 20).unwrap();
    let Stored::Prefix { prefix, len } = stored else { panic!("a plain message keeps its bytes") };
    assert_eq!(len, MAX_PREFIX_LEN);
    let bytes = [&prefix[..len], &set[len..]].concat();
    let m = check(&bytes).unwrap();
    assert_eq!(
        (m.header.offset, m.header.timestamp, m.header.timestamp_type(), ts),
        (7, 777, TimestampType::LogAppendTime, 777)
    );
    assert_eq!(&bytes[MAX_PREFIX_LEN..], &set[MAX_PREFIX_LEN..], "key and value untouched");

    let mut b = LegacyBuilder::new(MAGIC_V1, Compression::Gzip);
    b.push(5, None, Some(b"x"));
    b.push(6, None, Some(b"y"));
    let set = b.finish();
    let p = check_produced(&set, 1 << 20).unwrap();
    let (stored, _) = stored_form(&set, &p, 0, TimestampType::LogAppendTime, 777, 1 << 20).unwrap();
    let Stored::Rebuilt(bytes) = stored else { panic!("inner timestamps must become -1") };
    let m = check(&bytes).unwrap();
    assert_eq!((m.header.timestamp, m.header.timestamp_type()), (777, TimestampType::LogAppendTime));
    let inner = inner_bytes(&m, 1 << 20).unwrap();
    let ts: Vec<i64> = Inner::new(&inner, MAGIC_V1).map(|i| i.unwrap().header.timestamp).collect();
    assert_eq!(ts, vec![-1, -1]);
    // Already -1 inside: stamped in place, the compressed bytes kept.
    let p2 = check_produced(&bytes, 1 << 20).unwrap();
    let (again, _) = stored_form(&bytes, &p2, 10, TimestampType::LogAppendTime, 888, 1 << 20).unwrap();
    assert!(matches!(again, Stored::Prefix { .. }));
}

/// Magic-0 wrappers store absolute inner offsets: rebuilt unless they already are.
#[test]
fn magic0_wrappers_get_absolute_inner_offsets() {
    let mut b = LegacyBuilder::new(MAGIC_V0, Compression::Snappy);
    b.push(-1, None, Some(b"a"));
    b.push(-1, None, Some(b"b"));
    let set = b.finish();
    let p = check_produced(&set, 1 << 20).unwrap();
    assert!(matches!(
        stored_form(&set, &p, 0, TimestampType::CreateTime, 1, 1 << 20).unwrap().0,
        Stored::Prefix { .. }
    ));
    let (stored, ts) = stored_form(&set, &p, 100, TimestampType::CreateTime, 1, 1 << 20).unwrap();
    assert_eq!(ts, -1, "magic 0 has no timestamp");
    let Stored::Rebuilt(bytes) = stored else { panic!("offsets must become absolute") };
    let m = check(&bytes).unwrap();
    let inner = inner_bytes(&m, 1 << 20).unwrap();
    let offs: Vec<i64> = Inner::new(&inner, MAGIC_V0).map(|i| i.unwrap().header.offset).collect();
    assert_eq!((offs, m.header.offset), (vec![100, 101], 101));
}

// spec: T3.2 — magic 0 on a LogAppendTime topic becomes magic 1 stamped with the append
// time: a plain message with the time and the type bit, a wrapper (same codec, its key
// kept) with them around magic-1 inner messages at relative offsets with timestamp -1;
// keys and values unchanged.
#[test]
fn magic0_on_log_append_time_becomes_stamped_magic1() {
    let mut plain = LegacyBuilder::new(MAGIC_V0, Compression::None);
    plain.push(-1, Some(b"k"), Some(b"v"));
    let set = plain.finish();
    let p = check_produced(&set, 1 << 20).unwrap();
    let (stored, ts) = stored_form(&set, &p, 5, TimestampType::LogAppendTime, 777, 1 << 20).unwrap();
    assert_eq!(ts, 777);
    let Stored::Rebuilt(bytes) = stored else { panic!("converted") };
    let m = check(&bytes).unwrap();
    assert_eq!((m.header.magic, m.header.offset, m.header.timestamp), (MAGIC_V1, 5, 777));
    assert_eq!(m.header.timestamp_type(), TimestampType::LogAppendTime);
    assert_eq!((m.key, m.value), (Some(&b"k"[..]), Some(&b"v"[..])));
    for codec in [Compression::Gzip, Compression::Snappy, Compression::Lz4] {
        let mut w = LegacyBuilder::new(MAGIC_V0, codec);
        w.push(-1, None, Some(b"a"));
        w.push(-1, Some(b"kb"), Some(b"b"));
        let set = w.finish();
        let p = check_produced(&set, 1 << 20).unwrap();
        let (stored, ts) = stored_form(&set, &p, 100, TimestampType::LogAppendTime, 888, 1 << 20).unwrap();
        assert_eq!(ts, 888);
        let Stored::Rebuilt(bytes) = stored else { panic!("converted") };
        let m = check(&bytes).unwrap();
        assert_eq!((m.header.magic, m.header.offset, m.header.timestamp), (MAGIC_V1, 101, 888), "{codec:?}");
        assert_eq!((m.header.timestamp_type(), m.header.compression().unwrap()), (TimestampType::LogAppendTime, codec));
        let inner = inner_bytes(&m, 1 << 20).unwrap();
        let got: Vec<InnerSeen> = Inner::new(&inner, MAGIC_V1)
            .map(|i| {
                let i = i.unwrap();
                (
                    i.header.magic,
                    i.header.offset,
                    i.header.timestamp,
                    i.key.map(<[u8]>::to_vec),
                    i.value.map(<[u8]>::to_vec),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (MAGIC_V1, 0, -1, None, Some(b"a".to_vec())),
                (MAGIC_V1, 1, -1, Some(b"kb".to_vec()), Some(b"b".to_vec()))
            ],
            "{codec:?}"
        );
    }
}

#[test]
fn bad_wrappers_are_refused() {
    // Nested compression, magic mismatch, empty wrapper, bad inner CRC.
    let mut inner_wrapper = LegacyBuilder::new(MAGIC_V1, Compression::Gzip);
    inner_wrapper.push(1, None, Some(b"x"));
    let mut nested = Vec::new();
    write_wrapper(
        &mut nested,
        MAGIC_V1,
        Compression::Gzip,
        0,
        1,
        TimestampType::CreateTime,
        None,
        &inner_wrapper.finish(),
    );
    assert_eq!(check_produced(&nested, 1 << 20).unwrap_err(), FormatError::BadRecords("nested compression"));
    let mut v0 = LegacyBuilder::new(MAGIC_V0, Compression::None);
    v0.push(-1, None, Some(b"x"));
    let mut mixed = Vec::new();
    write_wrapper(&mut mixed, MAGIC_V1, Compression::Gzip, 0, 1, TimestampType::CreateTime, None, &v0.finish());
    assert!(check_produced(&mixed, 1 << 20).is_err());
    let mut empty = Vec::new();
    write_wrapper(&mut empty, MAGIC_V1, Compression::Gzip, 0, 1, TimestampType::CreateTime, None, &[]);
    assert_eq!(check_produced(&empty, 1 << 20).unwrap_err(), FormatError::BadRecords("empty wrapper"));
    let mut corrupt = v0.finish();
    let n = corrupt.len();
    corrupt[n - 1] ^= 1;
    let mut w = Vec::new();
    write_wrapper(&mut w, MAGIC_V0, Compression::Gzip, 0, -1, TimestampType::CreateTime, None, &corrupt);
    assert!(matches!(check_produced(&w, 1 << 20), Err(FormatError::BadCrc { .. })));
    // A decompression bomb stops at the limit.
    let mut big = LegacyBuilder::new(MAGIC_V1, Compression::Zstd);
    big.push(1, None, Some(&vec![0u8; 1 << 20]));
    assert!(check_produced(&big.finish(), 1 << 16).is_err());
}

proptest! {
    /// Any bytes give an error or a message, never a panic.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200), magic in 0u8..2) {
        let mut b = bytes.clone();
        if b.len() > OFF_MAGIC { b[OFF_MAGIC] = magic; }
        let _ = check_produced(&b, 1 << 16);
        let mut scratch = Vec::new();
        let _ = records(&b, &mut scratch, 1 << 16);
        for i in Inner::new(&b, magic as i8) { if i.is_err() { break; } }
    }

    /// Plain messages round-trip through the builder and the parser at both magics.
    #[test]
    fn plain_messages_round_trip(msgs in proptest::collection::vec(
        (0i64..1 << 40, proptest::option::of(proptest::collection::vec(any::<u8>(), 0..20)),
         proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40))), 1..10), magic in 0i8..2) {
        let mut b = LegacyBuilder::new(magic, Compression::None);
        for (ts, k, v) in &msgs {
            b.push(*ts, k.as_deref(), v.as_deref());
        }
        let set = b.finish();
        let es = entries(&set);
        prop_assert_eq!(es.len(), msgs.len());
        for (e, (ts, k, v)) in es.iter().zip(&msgs) {
            let m = check(e).unwrap();
            prop_assert_eq!(m.header.timestamp, if magic == 0 { -1 } else { *ts });
            prop_assert_eq!(m.key, k.as_deref());
            prop_assert_eq!(m.value, v.as_deref());
        }
    }
}
