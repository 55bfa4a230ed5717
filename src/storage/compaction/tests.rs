//! Unit tests of compaction's decisions, one rule each (docs/architecture.md, "Log compaction").

use super::*;
use crate::storage::format::batch::{check_stored, set_base_offset, BatchBuilder, Compression};

const LIMIT: usize = 1 << 20;

fn batch(base: i64, recs: &[(Option<&str>, Option<&str>, i64)], codec: Compression) -> Vec<u8> {
    let mut b = BatchBuilder::new();
    for &(k, v, ts) in recs {
        b.push(ts, k.map(str::as_bytes), v.map(str::as_bytes), &[]);
    }
    let mut out = b.finish_compressed(codec);
    set_base_offset(&mut out, base);
    out
}

/// (offset, key, value, timestamp) of each record of a stored batch.
fn records(b: &[u8]) -> Vec<(i64, Option<String>, Option<String>, i64)> {
    let h = check_stored(b).expect("valid batch");
    let recs = records_section(&h, b, LIMIT).unwrap();
    Records::new(&recs, h.record_count)
        .map(|r| {
            let r = r.unwrap();
            let s = |x: Option<&[u8]>| x.map(|x| String::from_utf8(x.to_vec()).unwrap());
            (h.base_offset + r.offset_delta as i64, s(r.key), s(r.value), h.record_timestamp(r.timestamp_delta))
        })
        .collect()
}

fn map_of(batches: &[&[u8]]) -> OffsetMap {
    let mut txns = TxnTracker::new(Vec::new());
    let mut map = OffsetMap::new(1 << 20);
    for b in batches {
        assert!(map.add(map_batch(b, &mut txns, LIMIT).unwrap()));
    }
    map
}

fn rules(now: i64) -> CleanRules {
    CleanRules { now, delete_retention_ms: 1000, decompress_limit: LIMIT, legacy_tombstones_expired: false }
}

fn clean(b: &[u8], map: &OffsetMap, now: i64) -> Outcome {
    let mut stats = CleanStats::default();
    clean_batch(b, map, &mut TxnTracker::new(Vec::new()), |_, _| false, None, &rules(now), &mut stats).unwrap()
}

/// The last record of each key stays at its offset; the rewritten batch keeps its base
/// offset, last offset delta and codec, and its CRC checks.
#[test]
fn keeps_the_last_record_of_each_key_at_its_offset() {
    for codec in [Compression::None, Compression::Gzip, Compression::Lz4, Compression::Zstd, Compression::Snappy] {
        let b1 =
            batch(10, &[(Some("a"), Some("1"), 100), (Some("b"), Some("1"), 101), (Some("a"), Some("2"), 102)], codec);
        let b2 = batch(13, &[(Some("b"), Some("2"), 103)], codec);
        let map = map_of(&[&b1, &b2]);
        let Outcome::Rewrite(out) = clean(&b1, &map, 0) else { panic!("b1 loses records") };
        let h = check_stored(&out).unwrap();
        assert_eq!((h.base_offset, h.last_offset(), h.compression().unwrap()), (10, 12, codec));
        assert_eq!(records(&out), vec![(12, Some("a".into()), Some("2".into()), 102)]);
        assert_eq!(h.max_timestamp, 102, "maxTimestamp of what remains");
        assert_eq!(clean(&b2, &map, 0), Outcome::Keep);
    }
}

/// KIP-534: the first pass keeps a tombstone and stamps the horizon (now +
/// delete.retention.ms) with the records' timestamps unchanged; a later pass drops it once
/// the horizon passed, not before.
#[test]
fn tombstones_stay_until_their_horizon() {
    let b = batch(0, &[(Some("a"), None, 500), (Some("b"), Some("x"), 600)], Compression::None);
    let map = map_of(&[&b]);
    let Outcome::Rewrite(stamped) = clean(&b, &map, 2000) else { panic!("stamped") };
    let h = check_stored(&stamped).unwrap();
    assert_eq!(h.delete_horizon(), Some(3000));
    assert_eq!(records(&stamped), records(&b), "same records, same timestamps");
    assert_eq!(clean(&stamped, &map, 2999), Outcome::Keep);
    let Outcome::Rewrite(after) = clean(&stamped, &map, 3000) else { panic!("tombstone goes") };
    assert_eq!(records(&after), vec![(1, Some("b".into()), Some("x".into()), 600)]);
    assert_eq!(check_stored(&after).unwrap().delete_horizon(), Some(3000), "the horizon stays");
}

/// Records without a key go; a batch left empty goes, unless it is its producer's last.
#[test]
fn keyless_records_go_and_a_producers_last_batch_stays_empty() {
    let mut b = BatchBuilder::new().producer(7, 3, 40);
    b.push(5, None, Some(b"v"), &[]);
    b.push(6, Some(b"k"), Some(b"old"), &[]);
    let mut b = b.finish();
    set_base_offset(&mut b, 100);
    let newer = batch(102, &[(Some("k"), Some("new"), 7)], Compression::None);
    let map = map_of(&[&b, &newer]);
    assert_eq!(clean(&b, &map, 0), Outcome::Drop);
    let mut stats = CleanStats::default();
    let out =
        clean_batch(&b, &map, &mut TxnTracker::new(Vec::new()), |p, o| p == 7 && o == 101, None, &rules(0), &mut stats)
            .unwrap();
    let Outcome::Rewrite(empty) = out else { panic!("kept empty") };
    let h = check_stored(&empty).unwrap();
    assert_eq!((h.record_count, h.base_offset, h.last_offset()), (0, 100, 101));
    assert_eq!((h.producer_id, h.producer_epoch, h.base_sequence), (7, 3, 40));
    assert_eq!(h.max_timestamp, -1, "no record, no timestamp for the time index");
    assert_eq!(stats.records_kept, 0);
}

/// Aborted data goes; its ABORT marker stays while the pass saw its data (and is listed for
/// the cleaned `.txnindex`), then is stamped, then goes after the horizon. A COMMIT marker
/// whose data remains stays.
#[test]
fn aborted_data_goes_and_markers_follow_their_data() {
    let mut d = BatchBuilder::new().transactional().producer(9, 0, 0);
    d.push(1, Some(b"k"), Some(b"v"), &[]);
    let mut data = d.finish();
    set_base_offset(&mut data, 0);
    let mut abort = Marker { commit: false, coordinator_epoch: 1 }.batch(9, 0, 2);
    set_base_offset(&mut abort, 1);
    let txn = AbortedTxn { producer_id: 9, first_offset: 0, last_offset: 1, last_stable_offset: 0 };
    let map = OffsetMap::new(1024);
    let mut stats = CleanStats::default();
    let mut t = TxnTracker::new(vec![txn]);
    assert_eq!(clean_batch(&data, &map, &mut t, |_, _| false, None, &rules(10), &mut stats).unwrap(), Outcome::Drop);
    assert_eq!(clean_batch(&abort, &map, &mut t, |_, _| false, None, &rules(10), &mut stats).unwrap(), Outcome::Keep);
    assert_eq!(t.kept, vec![txn]);
    assert_eq!(stats.aborted_records_removed, 1);
    // The next pass sees no data: the marker is stamped, then dropped.
    let mut t = TxnTracker::new(vec![txn]);
    let Outcome::Rewrite(stamped) =
        clean_batch(&abort, &map, &mut t, |_, _| false, None, &rules(10), &mut stats).unwrap()
    else {
        panic!("stamped")
    };
    assert!(t.kept.is_empty());
    let h = check_stored(&stamped).unwrap();
    assert_eq!(h.delete_horizon(), Some(1010));
    assert_eq!(Marker::read(&h, &stamped).unwrap(), Some(Marker { commit: false, coordinator_epoch: 1 }));
    let mut t = TxnTracker::new(vec![txn]);
    assert_eq!(
        clean_batch(&stamped, &map, &mut t, |_, _| false, None, &rules(1010), &mut stats).unwrap(),
        Outcome::Drop
    );
    // A commit whose data stays keeps its marker.
    let mut commit = Marker { commit: true, coordinator_epoch: 1 }.batch(9, 0, 2);
    set_base_offset(&mut commit, 1);
    let map = map_of(&[&data]);
    let mut t = TxnTracker::new(Vec::new());
    assert_eq!(clean_batch(&data, &map, &mut t, |_, _| false, None, &rules(10), &mut stats).unwrap(), Outcome::Keep);
    assert_eq!(clean_batch(&commit, &map, &mut t, |_, _| false, None, &rules(10), &mut stats).unwrap(), Outcome::Keep);
}

/// The map skips aborted data (an aborted overwrite must not remove the committed value).
#[test]
fn the_map_ignores_aborted_records() {
    let committed = batch(0, &[(Some("k"), Some("good"), 1)], Compression::None);
    let mut d = BatchBuilder::new().transactional().producer(4, 0, 0);
    d.push(2, Some(b"k"), Some(b"bad"), &[]);
    let mut aborted = d.finish();
    set_base_offset(&mut aborted, 1);
    let mut txns =
        TxnTracker::new(vec![AbortedTxn { producer_id: 4, first_offset: 1, last_offset: 2, last_stable_offset: 1 }]);
    let mut map = OffsetMap::new(1024);
    map.add(map_batch(&committed, &mut txns, LIMIT).unwrap());
    map.add(map_batch(&aborted, &mut txns, LIMIT).unwrap());
    assert_eq!(map.get(b"k"), Some(0));
}

/// The map's budget: a batch whose new keys would pass it is refused (all or none), except
/// while the map is empty; keys it already holds cost nothing.
#[test]
fn offset_map_budget_counts_whole_batches() {
    let mut map = OffsetMap::new(2 * (MAP_ENTRY_OVERHEAD + 1));
    let keys = |keys: &[&str]| {
        let b = batch(0, &keys.iter().map(|k| (Some(*k), Some("v"), 0)).collect::<Vec<_>>(), Compression::None);
        map_batch(&b, &mut TxnTracker::default(), LIMIT).unwrap()
    };
    assert!(map.add(keys(&["a", "b", "c"])), "the first batch always fits");
    assert!(map.add(keys(&["a"])), "known keys cost nothing");
    assert!(!map.add(keys(&["d", "a"])));
    assert_eq!((map.len(), map.get(b"d")), (3, None), "nothing of a refused batch is taken");
}

/// A map walk ends an aborted transaction at its marker: the producer's next, committed
/// transaction is mapped (found by a real-client test: a deleted key came back).
#[test]
fn the_map_ends_an_aborted_transaction_at_its_marker() {
    let txn = |base: i64, value: &[u8]| {
        let mut d = BatchBuilder::new().transactional().producer(4, 0, base as i32);
        d.push(1, Some(b"k"), Some(value), &[]);
        let mut b = d.finish();
        set_base_offset(&mut b, base);
        b
    };
    let mut abort = Marker { commit: false, coordinator_epoch: 0 }.batch(4, 0, 2);
    set_base_offset(&mut abort, 1);
    let mut txns =
        TxnTracker::new(vec![AbortedTxn { producer_id: 4, first_offset: 0, last_offset: 1, last_stable_offset: 0 }]);
    let mut map = OffsetMap::new(1024);
    for b in [txn(0, b"aborted"), abort, txn(2, b"committed")] {
        map.add(map_batch(&b, &mut txns, LIMIT).unwrap());
    }
    assert_eq!(map.get(b"k"), Some(2));
}

/// The batch a group's last time-index entry names keeps its maxTimestamp (later segments'
/// time indexes rest on it) and stays, empty if all its records go; no record is kept for it.
#[test]
fn the_protected_batch_keeps_its_max_timestamp() {
    let b = batch(
        0,
        &[(Some("a"), Some("1"), 900), (Some("a"), Some("2"), 500), (Some("b"), Some("1"), 400)],
        Compression::None,
    );
    let newer = batch(3, &[(Some("a"), Some("3"), 100), (Some("b"), Some("2"), 100)], Compression::None);
    let map = map_of(&[&b, &newer]);
    let mut stats = CleanStats::default();
    let protect = Some(Protect { offset: 0 });
    let out = clean_batch(&b, &map, &mut TxnTracker::default(), |_, _| false, protect, &rules(0), &mut stats).unwrap();
    let Outcome::Rewrite(out) = out else { panic!("rewritten") };
    let h = check_stored(&out).unwrap();
    assert_eq!((h.record_count, h.base_offset, h.last_offset(), h.max_timestamp), (0, 0, 2, 900));
    // An entry naming the batch's last offset (a segment's mtime entry, SPEC T5.5) protects it too.
    let inside = Some(Protect { offset: 2 });
    let again = clean_batch(&b, &map, &mut TxnTracker::default(), |_, _| false, inside, &rules(0), &mut stats).unwrap();
    assert_eq!(again, Outcome::Rewrite(out.clone()));
    let other = Some(Protect { offset: 3 });
    assert_eq!(
        clean_batch(&b, &map, &mut TxnTracker::default(), |_, _| false, other, &rules(0), &mut stats).unwrap(),
        Outcome::Drop
    );
    // Records left: the header's maximum stays although the record that held it went.
    let c = batch(0, &[(Some("a"), Some("1"), 900), (Some("c"), Some("1"), 400)], Compression::None);
    let Outcome::Rewrite(out) =
        clean_batch(&c, &map, &mut TxnTracker::default(), |_, _| false, protect, &rules(0), &mut stats).unwrap()
    else {
        panic!("rewritten")
    };
    assert_eq!(records(&out), vec![(1, Some("c".into()), Some("1".into()), 400)]);
    assert_eq!(check_stored(&out).unwrap().max_timestamp, 900);
}

/// A stored legacy message set of `magic` and `codec`: the records at offsets from `base`
/// (plain messages, or one wrapper holding them, its timestamp the largest).
fn legacy_set(magic: i8, codec: Compression, base: i64, recs: &[(Option<&str>, Option<&str>, i64)]) -> Vec<u8> {
    let set: Vec<SetRecord<'_>> = recs
        .iter()
        .enumerate()
        .map(|(i, &(k, v, ts))| SetRecord {
            offset: base + i as i64,
            timestamp: if magic == MAGIC_V0 { -1 } else { ts },
            key: k.map(str::as_bytes),
            value: v.map(str::as_bytes),
        })
        .collect();
    let max = set.iter().map(|r| r.timestamp).max().unwrap_or(-1);
    let mut out = Vec::new();
    legacy::write_set(&mut out, magic, codec, TimestampType::CreateTime, max, None, &set);
    out
}

/// (offset, key, value, timestamp) of each record of a stored legacy entry.
fn legacy_records(b: &[u8]) -> Vec<(i64, Option<String>, Option<String>, i64)> {
    let mut scratch = Vec::new();
    let s = |x: Option<&[u8]>| x.map(|x| String::from_utf8(x.to_vec()).unwrap());
    legacy::records(b, &mut scratch, LIMIT)
        .unwrap()
        .into_iter()
        .map(|r| (r.offset, s(r.key), s(r.value), r.timestamp))
        .collect()
}

/// Legacy message sets are cleaned as Kafka cleans them: their keys join the map (a later
/// legacy record supersedes a v2 one and the other way round); a plain message stays or goes
/// whole; a wrapper losing messages is rebuilt around those kept, at their offsets (gaps
/// allowed: the scan of a compacted segment takes them, the one of a log without gaps does
/// not), same magic and codec, its timestamp the largest kept; keyless messages go.
#[test]
fn legacy_message_sets_are_cleaned() {
    for magic in [MAGIC_V0, legacy::MAGIC_V1] {
        for codec in [Compression::None, Compression::Gzip, Compression::Snappy, Compression::Lz4] {
            let set = legacy_set(
                magic,
                codec,
                10,
                &[
                    (Some("a"), Some("1"), 100),
                    (Some("b"), Some("1"), 105),
                    (Some("c"), Some("1"), 102),
                    (None, Some("x"), 103),
                ],
            );
            let later = batch(14, &[(Some("b"), Some("2"), 104)], Compression::None);
            let entries: Vec<&[u8]> =
                crate::storage::format::BatchWalk::new(&set, usize::MAX >> 1).map(|e| e.unwrap().2).collect();
            let mut all = entries.clone();
            all.push(&later);
            let map = map_of(&all);
            assert_eq!(map.get(b"a"), Some(10), "legacy keys are mapped");
            assert_eq!(map.get(b"b"), Some(14));
            let ts = |t: i64| if magic == MAGIC_V0 { -1 } else { t };
            let kept = vec![
                (10, Some("a".into()), Some("1".into()), ts(100)),
                (12, Some("c".into()), Some("1".into()), ts(102)),
            ];
            if codec == Compression::None {
                let outcomes: Vec<Outcome> = entries.iter().map(|e| clean(e, &map, 0)).collect();
                assert_eq!(outcomes, [Outcome::Keep, Outcome::Drop, Outcome::Keep, Outcome::Drop], "magic {magic}");
                continue;
            }
            let Outcome::Rewrite(out) = clean(&set, &map, 0) else { panic!("the wrapper loses messages") };
            assert_eq!(legacy_records(&out), kept, "magic {magic} {codec:?}");
            let h = legacy::check(&out).unwrap().header;
            assert_eq!((h.magic, h.compression().unwrap(), h.offset, h.timestamp), (magic, codec, 12, ts(102)));
            assert_eq!(legacy::wrapper_span(&out, LIMIT, true).unwrap(), (10, 12));
            assert!(legacy::wrapper_span(&out, LIMIT, false).is_err(), "a gap is not taken where none may be");
            // The v2 record a later legacy one supersedes goes.
            let early = batch(5, &[(Some("a"), Some("0"), 90)], Compression::None);
            assert_eq!(clean(&early, &map, 0), Outcome::Drop);
        }
    }
}

/// A legacy tombstone (no horizon field) goes by Kafka's rule: when its segment was last
/// written at or before the last clean segment's mtime minus `delete.retention.ms` (never
/// while nothing is clean: a pass keeps the tombstones it cleans first); a superseded one goes
/// at once.
#[test]
fn legacy_tombstones_go_by_kafkas_horizon() {
    assert!(!legacy_tombstones_expired(0, None, 1000), "no clean part yet");
    assert!(!legacy_tombstones_expired(4_001, Some(5_000), 1000), "written 999 ms before the clean part's end");
    assert!(legacy_tombstones_expired(4_000, Some(5_000), 1000));
    assert!(!legacy_tombstones_expired(i64::MAX, Some(i64::MIN), i64::MAX), "no overflow");
    let t = legacy_set(legacy::MAGIC_V1, Compression::None, 3, &[(Some("k"), None, 50)]);
    let map = map_of(&[&t]);
    let mut stats = CleanStats::default();
    let mut at = |expired: bool| {
        let rules = CleanRules { legacy_tombstones_expired: expired, ..rules(1 << 40) };
        clean_batch(&t, &map, &mut TxnTracker::default(), |_, _| false, None, &rules, &mut stats).unwrap()
    };
    assert_eq!(at(false), Outcome::Keep, "the clock alone never expires one");
    assert_eq!(at(true), Outcome::Drop);
    assert_eq!(stats.tombstones_removed, 1);
    let later = legacy_set(legacy::MAGIC_V1, Compression::None, 4, &[(Some("k"), Some("v"), 51)]);
    assert_eq!(clean(&t, &map_of(&[&t, &later]), 0), Outcome::Drop, "superseded");
}

/// Under LogAppendTime a rebuilt legacy wrapper keeps its append time and type bit, and its
/// inner messages stay without timestamps of their own (-1): every record still reads the
/// append time.
#[test]
fn a_log_append_time_wrapper_keeps_its_append_time() {
    let set: Vec<SetRecord<'_>> = ["a", "b", "c"]
        .iter()
        .enumerate()
        .map(|(i, k)| SetRecord { offset: 30 + i as i64, timestamp: -1, key: Some(k.as_bytes()), value: Some(b"1") })
        .collect();
    let mut w = Vec::new();
    legacy::write_set(&mut w, legacy::MAGIC_V1, Compression::Gzip, TimestampType::LogAppendTime, 777, None, &set);
    let later = batch(33, &[(Some("b"), Some("2"), 100)], Compression::None);
    let Outcome::Rewrite(out) = clean(&w, &map_of(&[&w, &later]), 0) else { panic!("rebuilt") };
    let m = legacy::check(&out).unwrap();
    assert_eq!((m.header.timestamp, m.header.timestamp_type()), (777, TimestampType::LogAppendTime));
    assert_eq!(
        legacy_records(&out),
        [(30, Some("a".into()), Some("1".into()), 777), (32, Some("c".into()), Some("1".into()), 777)]
    );
    let mut scratch = Vec::new();
    let inner = legacy::inner_bytes(&m, LIMIT).unwrap();
    scratch.extend(legacy::Inner::new(&inner, legacy::MAGIC_V1).map(|i| i.unwrap().header.timestamp));
    assert_eq!(scratch, [-1, -1]);
}

/// A damaged legacy wrapper whose inner offsets span more than a batch can hold is an error,
/// not a panic, when protected and emptied (its offsets are outside its CRC).
#[test]
fn a_damaged_wrapper_span_is_an_error() {
    let set = [
        SetRecord { offset: -(1 << 40), timestamp: -1, key: Some(b"x"), value: Some(b"1") },
        SetRecord { offset: 3, timestamp: -1, key: Some(b"x"), value: Some(b"2") },
    ];
    let mut w = Vec::new();
    legacy::write_set(&mut w, MAGIC_V0, Compression::Gzip, TimestampType::CreateTime, -1, None, &set);
    let later = batch(4, &[(Some("x"), Some("3"), 100)], Compression::None);
    let mut stats = CleanStats::default();
    let protect = Some(Protect { offset: 3 });
    let r =
        clean_batch(&w, &map_of(&[&later]), &mut TxnTracker::default(), |_, _| false, protect, &rules(0), &mut stats);
    assert!(r.is_err(), "{r:?}");
}

/// A protected legacy entry (the one a group's last time-index entry names) that loses every
/// message becomes an empty v2 batch over its offsets with its timestamp; one that keeps some
/// keeps its own timestamp.
#[test]
fn a_protected_legacy_entry_keeps_its_timestamp() {
    let set = legacy_set(
        legacy::MAGIC_V1,
        Compression::Gzip,
        20,
        &[(Some("a"), Some("1"), 300), (Some("b"), Some("1"), 200)],
    );
    let later = batch(22, &[(Some("a"), Some("2"), 100)], Compression::None);
    let map = map_of(&[&set, &later]);
    let mut stats = CleanStats::default();
    let protect = Some(Protect { offset: 20 });
    let out =
        clean_batch(&set, &map, &mut TxnTracker::default(), |_, _| false, protect, &rules(0), &mut stats).unwrap();
    let Outcome::Rewrite(out) = out else { panic!("rebuilt") };
    assert_eq!(legacy::check(&out).unwrap().header.timestamp, 300, "its own timestamp");
    assert_eq!(legacy_records(&out), [(21, Some("b".into()), Some("1".into()), 200)]);
    let all_gone = map_of(&[&set, &later, &batch(23, &[(Some("b"), Some("2"), 100)], Compression::None)]);
    let out = clean_batch(&set, &all_gone, &mut TxnTracker::default(), |_, _| false, protect, &rules(0), &mut stats);
    let Outcome::Rewrite(out) = out.unwrap() else { panic!("an empty batch") };
    let h = check_stored(&out).unwrap();
    assert_eq!((h.base_offset, h.last_offset(), h.max_timestamp, h.record_count), (20, 21, 300, 0));
    assert_eq!(clean(&set, &all_gone, 0), Outcome::Drop, "unprotected, it goes");
}
