//! Legacy message formats in the storage engine: magic 0 and magic 1 messages, plain and
//! compressed, on their own and mixed with v2 batches in one log. What appends store (SPEC
//! T3), what readers see (T4), the time index and lookups over them (T5, T6), recovery (T8)
//! and a Kafka-written magic-0 segment without a time index (T8.3).

mod common;

use common::stored_batches;
use futures_lite::future::block_on;
use std::path::{Path, PathBuf};
use tidemark::config::LogConfig;
use tidemark::io::{CrashMode, Disk, MemDisk};
use tidemark::storage::format::batch::{BatchBuilder, Compression, Records, TimestampType};
use tidemark::storage::format::legacy::{self, LegacyBuilder, LegacyHeader};
use tidemark::storage::format::stored::check_stored;
use tidemark::storage::{Log, ReadUpTo, StorageError};

const MIN: i64 = 60_000;
const HOUR: i64 = 60 * MIN;
const NOW: i64 = 1_700_000_000_000;

fn dir() -> PathBuf {
    PathBuf::from("/d/legacy-0")
}

fn open(disk: &MemDisk, config: &LogConfig) -> Log<MemDisk> {
    block_on(Log::open(disk.clone(), &dir(), config.clone())).expect("open").0
}

fn cfg(pairs: &[(&str, &str)]) -> LogConfig {
    LogConfig::default().with_overrides(pairs.iter().copied()).unwrap()
}

fn set(magic: i8, codec: Compression, ts: &[i64]) -> Vec<u8> {
    let mut b = LegacyBuilder::new(magic, codec);
    for (i, &t) in ts.iter().enumerate() {
        b.push(t, Some(format!("k{i}").as_bytes()), Some(format!("v{i}").as_bytes()));
    }
    b.finish()
}

/// A record as a reader sees it: (offset, timestamp, type, value).
type Seen = (i64, i64, TimestampType, Vec<u8>);

/// Every record of stored bytes of any magic, as a reader sees it (SPEC T4.1, T4.2).
fn seen(bytes: &[u8]) -> Vec<Seen> {
    let mut out = Vec::new();
    for (info, b) in stored_batches(bytes) {
        check_stored(&b).expect("stored batches pass their check");
        if info.magic == 2 {
            let h = tidemark::storage::format::BatchHeader::parse(&b).unwrap();
            let section = tidemark::storage::format::batch::records_section(&h, &b, 1 << 24).unwrap();
            for r in Records::new(&section, h.record_count) {
                let r = r.unwrap();
                let ts = match h.timestamp_type() {
                    TimestampType::LogAppendTime => h.max_timestamp,
                    TimestampType::CreateTime => h.first_timestamp + r.timestamp_delta,
                };
                out.push((h.base_offset + r.offset_delta as i64, ts, h.timestamp_type(), r.value.unwrap().to_vec()));
            }
        } else {
            let mut scratch = Vec::new();
            for r in legacy::records(&b, &mut scratch, 1 << 24).unwrap() {
                out.push((r.offset, r.timestamp, r.timestamp_type, r.value.unwrap().to_vec()));
            }
        }
    }
    out
}

/// Every record of the log, read in small steps (each read starts at a batch boundary).
fn read_all(log: &mut Log<MemDisk>) -> Vec<Seen> {
    let mut at = log.log_start_offset();
    let mut out = Vec::new();
    while at < log.log_end_offset() {
        let bytes = block_on(log.read(at, 1 << 12, ReadUpTo::LogEnd)).expect("read");
        let recs = seen(&bytes);
        assert_eq!(recs.first().map(|r| r.0), Some(at), "a read starts at the record asked for");
        at = recs.last().unwrap().0 + 1;
        out.extend(recs);
    }
    out
}

/// spec: T3.1 — the CreateTime bound applies to every inner message of a v1 wrapper and to
/// plain v1 messages: one bad timestamp rejects the whole request, nothing is appended; magic
/// 0 messages have no timestamp to check.
#[test]
fn create_time_bound_checks_every_inner_message() {
    let config = cfg(&[("message.timestamp.difference.max.ms", "3600000")]);
    let disk = MemDisk::new();
    let mut log = open(&disk, &config);
    for codec in [Compression::None, Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd] {
        let bad = set(1, codec, &[NOW, NOW - 2 * HOUR, NOW]);
        let e = log.append(&bad, NOW).unwrap_err();
        assert!(matches!(e, StorageError::InvalidTimestamp { ts, .. } if ts == NOW - 2 * HOUR), "{codec:?}: {e}");
        assert_eq!(log.log_end_offset(), 0, "nothing appended");
    }
    // A good v2 batch followed by a bad v1 message: neither is appended.
    let mut req = BatchBuilder::new();
    req.push(NOW, None, Some(b"ok"), &[]);
    let mut req = req.finish();
    req.extend(set(1, Compression::None, &[NOW + 2 * HOUR]));
    assert!(matches!(log.append(&req, NOW), Err(StorageError::InvalidTimestamp { .. })));
    assert_eq!(log.log_end_offset(), 0);
    // Within the bound, and magic 0 (no timestamps), are taken.
    log.append(&set(1, Compression::Gzip, &[NOW - HOUR, NOW + HOUR]), NOW).unwrap();
    log.append(&set(0, Compression::Lz4, &[0, 0]), NOW).unwrap();
    assert_eq!(log.log_end_offset(), 4);
}

/// spec: T3.2 — on a LogAppendTime topic a plain v1 message gets `now` and the type bit (CRC
/// recomputed, key and value untouched), a v1 wrapper gets them too with every inner timestamp
/// -1 (recompressed because the producer's were not); magic 0 (no timestamp field) is stored
/// as magic 1 stamped the same way, plain or wrapped. spec: T3.4 — the append reports the
/// log-append time. spec: T4.2 — readers see `now` for every record, magic 0's included.
#[test]
fn log_append_time_stamps_v1_messages_and_wrappers() {
    let config = cfg(&[("message.timestamp.type", "LogAppendTime")]);
    let disk = MemDisk::new();
    let mut log = open(&disk, &config);
    let plain = set(1, Compression::None, &[5]);
    let (info, _) = log.append(&plain, NOW).unwrap();
    assert_eq!(info.log_append_time, NOW);
    for codec in [Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd] {
        log.append(&set(1, codec, &[5, 6, 7]), NOW).unwrap();
    }
    log.append(&set(0, Compression::None, &[0]), NOW).unwrap();
    log.append(&set(0, Compression::Gzip, &[0, 0]), NOW).unwrap();
    let bytes = block_on(log.read(0, 1 << 20, ReadUpTo::LogEnd)).unwrap();
    let batches = stored_batches(&bytes);
    let first = legacy::check(&batches[0].1).unwrap();
    assert_eq!((first.header.timestamp, first.header.timestamp_type()), (NOW, TimestampType::LogAppendTime));
    assert_eq!(&batches[0].1[legacy::MAX_PREFIX_LEN..], &plain[legacy::MAX_PREFIX_LEN..]);
    for (_, w) in &batches[1..5] {
        let m = legacy::check(w).unwrap();
        assert_eq!((m.header.timestamp, m.header.timestamp_type()), (NOW, TimestampType::LogAppendTime));
        let inner = legacy::inner_bytes(&m, 1 << 20).unwrap();
        let ts: Vec<i64> = legacy::Inner::new(&inner, 1).map(|i| i.unwrap().header.timestamp).collect();
        assert_eq!(ts, vec![-1, -1, -1], "inner timestamps are -1 under LogAppendTime");
    }
    for (_, m0) in &batches[5..] {
        let m = legacy::check(m0).unwrap();
        assert_eq!((m.header.magic, m.header.timestamp), (1, NOW), "magic 0 stored as stamped magic 1");
    }
    let recs = seen(&bytes);
    assert_eq!(recs.len(), 1 + 4 * 3 + 1 + 2);
    assert_eq!(recs.iter().map(|r| r.0).collect::<Vec<_>>(), (0..recs.len() as i64).collect::<Vec<_>>());
    for r in &recs {
        assert_eq!((r.1, r.2), (NOW, TimestampType::LogAppendTime), "record {}", r.0);
    }
}

/// spec: T3.3 — a CreateTime v1 wrapper is stored with its largest inner timestamp and the
/// CreateTime type, whatever the producer put on it; the compressed inner bytes are kept.
#[test]
fn create_time_wrapper_carries_its_largest_inner_timestamp() {
    let disk = MemDisk::new();
    let mut log = open(&disk, &LogConfig::default());
    let mut inner = Vec::new();
    for (i, ts) in [300i64, 900, 100].into_iter().enumerate() {
        legacy::write(&mut inner, i as i64, 1, 0, ts, None, Some(b"x"));
    }
    let mut sent = Vec::new();
    // The producer wrote a wrong wrapper timestamp and the LogAppendTime bit.
    legacy::write_wrapper(&mut sent, 1, Compression::Snappy, 2, 5, TimestampType::LogAppendTime, None, &inner);
    log.append(&sent, NOW).unwrap();
    let bytes = block_on(log.read(0, 1 << 20, ReadUpTo::LogEnd)).unwrap();
    let h = LegacyHeader::parse(&bytes).unwrap();
    assert_eq!((h.timestamp, h.timestamp_type(), h.offset), (900, TimestampType::CreateTime, 2));
    assert_eq!(bytes[legacy::MAX_PREFIX_LEN..], sent[legacy::MAX_PREFIX_LEN..], "inner bytes kept");
    assert_eq!(seen(&bytes).iter().map(|r| r.1).collect::<Vec<_>>(), vec![300, 900, 100]);
    assert_eq!(block_on(log.offset_for_time(500, ReadUpTo::LogEnd)).unwrap(), Some((1, 900)));
    assert_eq!(block_on(log.offset_for_time(-3, ReadUpTo::LogEnd)).unwrap(), Some((1, 900)));
}

/// One append of the mixed workload: a v2 batch, a plain v1 set, a v1 wrapper or a magic-0
/// set, with these timestamps.
fn mixed(kind: usize, ts: &[i64], i: usize) -> Vec<u8> {
    let codecs = [Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd];
    match kind % 4 {
        0 => {
            let mut b = BatchBuilder::new();
            for &t in ts {
                b.push(t, None, Some(b"v2"), &[]);
            }
            b.finish_compressed(if i.is_multiple_of(2) { Compression::None } else { codecs[i % 4] })
        }
        1 => set(1, Compression::None, ts),
        2 => set(1, codecs[i % 4], ts),
        _ => set(0, if i.is_multiple_of(2) { Compression::None } else { codecs[i % 3] }, ts),
    }
}

/// The timestamps a reader sees for what `mixed` appended.
fn mixed_ts(kind: usize, ts: &[i64]) -> Vec<i64> {
    if kind % 4 == 3 {
        vec![-1; ts.len()]
    } else {
        ts.to_vec()
    }
}

/// Check every lookup against brute force over `records` (each record's timestamp, -1 for
/// none): T6.2 for many probes, -3, -1 and -2; and T5.1 over the time index.
fn check_lookups(log: &mut Log<MemDisk>, records: &[i64]) {
    // -3 first: after a restart it must load the indexes it needs itself.
    let max = records.iter().copied().max().filter(|&m| m >= 0);
    let want = max.map(|m| (records.iter().position(|&r| r == m).unwrap() as i64, m));
    assert_eq!(block_on(log.offset_for_time(-3, ReadUpTo::LogEnd)).unwrap(), want, "-3");
    for probe in records.iter().flat_map(|&t| [t - 1, t, t + 1]).chain([0, 1_000_000]).filter(|&t| t >= 0) {
        let want = records.iter().position(|&r| r >= probe).map(|o| (o as i64, records[o]));
        assert_eq!(block_on(log.offset_for_time(probe, ReadUpTo::LogEnd)).unwrap(), want, "lookup {probe}");
    }
    let max = records.iter().copied().max().filter(|&m| m >= 0);
    let want = max.map(|m| (records.iter().position(|&r| r == m).unwrap() as i64, m));
    assert_eq!(block_on(log.offset_for_time(-3, ReadUpTo::LogEnd)).unwrap(), want, "-3");
    assert_eq!(block_on(log.offset_for_time(-1, ReadUpTo::LogEnd)).unwrap(), Some((records.len() as i64, -1)));
    let mut prev = None;
    for base in log.segment_bases() {
        if base < log.log_end_offset() {
            block_on(log.read(base, 1, ReadUpTo::LogEnd)).unwrap();
        }
        for (t, rel) in log.time_entries(base).unwrap() {
            let o = (base + rel as i64) as usize;
            assert!(prev.is_none_or(|p| t > p), "entries increase");
            prev = Some(t);
            assert!(records[..o].iter().all(|&r| r <= t), "T5.1: a record before {o} is above {t}");
        }
    }
}

/// spec: T1.1 — v2 batches, plain v1 messages, v1 wrappers and magic-0 messages in one
/// partition, across rolls, read back record for record with contiguous offsets.
/// spec: T5.1, T5.2, T6.1, T6.2 — the time index and every lookup by time over them match
/// brute force; spec: T8.1, T8.2 — the same after a clean restart and after a power cut.
#[test]
fn mixed_magics_read_index_and_look_up_like_one_log() {
    let config = LogConfig { segment_bytes: 2048, time_index_interval_ms: 50, ..LogConfig::default() };
    let disk = MemDisk::new();
    disk.set_now_ms(NOW);
    let mut log = open(&disk, &config);
    let mut records: Vec<i64> = Vec::new();
    let mut x = 7u64;
    for i in 0..160 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let n = 1 + (x >> 60) as usize % 4;
        let ts: Vec<i64> = (0..n).map(|j| 1_000 + i as i64 * 7 + ((x >> (8 * j)) % 200) as i64).collect();
        let kind = (x >> 40) as usize;
        log.append(&mixed(kind, &ts, i), NOW).unwrap();
        records.extend(mixed_ts(kind, &ts));
        if i % 37 == 0 {
            log.roll(NOW);
        }
    }
    assert!(log.segment_count() > 3, "the workload spans segments");
    let got = read_all(&mut log);
    assert_eq!(got.iter().map(|r| r.0).collect::<Vec<_>>(), (0..records.len() as i64).collect::<Vec<_>>());
    assert_eq!(got.iter().map(|r| r.1).collect::<Vec<_>>(), records);
    check_lookups(&mut log, &records);
    block_on(log.close()).unwrap();
    let mut log = open(&disk, &config);
    check_lookups(&mut log, &records);
    assert_eq!(read_all(&mut log).iter().map(|r| r.1).collect::<Vec<_>>(), records);
    // More mixed data, durable, then a power cut: the recovered log is the same.
    for i in 0..20 {
        log.append(&mixed(i, &[5_000 + i as i64], i), NOW).unwrap();
        records.extend(mixed_ts(i, &[5_000 + i as i64]));
    }
    block_on(log.flush_all()).unwrap();
    drop(log);
    disk.crash(CrashMode::DropUnsynced);
    let mut log = open(&disk, &config);
    assert_eq!(read_all(&mut log).iter().map(|r| r.1).collect::<Vec<_>>(), records);
    check_lookups(&mut log, &records);
}

/// spec: T5.5 — a segment without timestamps gets one entry, (its last append time, its last
/// offset), when it closes. spec: T6.1 — `-3` is still the record with the largest timestamp:
/// that entry names no record, so the scan steps back past it; T6.2 lookups ignore it too.
/// spec: T7.2 — retention uses it for the segment without timestamps.
#[test]
fn minus3_steps_back_past_a_segment_without_timestamps() {
    let config = cfg(&[("retention.ms", "60000"), ("segment.ms", "604800000")]);
    let disk = MemDisk::new();
    let mut log = open(&disk, &config);
    log.append(&set(1, Compression::None, &[NOW - 10 * MIN, NOW - 20 * MIN]), NOW - 5 * MIN).unwrap(); // 0, 1
    log.roll(NOW - 5 * MIN);
    log.append(&set(0, Compression::Gzip, &[0, 0, 0]), NOW).unwrap(); // 2..=4
    log.append(&set(0, Compression::None, &[0]), NOW).unwrap(); // 5
    log.roll(NOW);
    log.append(&set(0, Compression::None, &[0]), NOW).unwrap(); // 6, in the active segment
    assert_eq!(log.time_entries(2).unwrap(), vec![(NOW, 3)], "(last append time, last offset)");
    for upto in [ReadUpTo::LogEnd, ReadUpTo::Durable] {
        block_on(log.flush_all()).unwrap();
        assert_eq!(block_on(log.offset_for_time(-3, upto)).unwrap(), Some((0, NOW - 10 * MIN)));
    }
    assert_eq!(block_on(log.offset_for_time(NOW - 15 * MIN, ReadUpTo::LogEnd)).unwrap(), Some((0, NOW - 10 * MIN)));
    assert_eq!(block_on(log.offset_for_time(NOW - 9 * MIN, ReadUpTo::LogEnd)).unwrap(), None);
    // After a clean restart the earlier segments' indexes are not loaded: stepping back
    // loads them.
    block_on(log.close()).unwrap();
    let mut log = open(&disk, &config);
    assert_eq!(block_on(log.offset_for_time(-3, ReadUpTo::LogEnd)).unwrap(), Some((0, NOW - 10 * MIN)));
    // Retention: segment 0 (largest NOW - 10 min) goes first, segment 2 once its entry expires.
    assert_eq!(block_on(log.maintain(NOW)).unwrap(), vec![0]);
    assert!(block_on(log.maintain(NOW + MIN)).unwrap().is_empty(), "not yet expired");
    assert_eq!(block_on(log.maintain(NOW + MIN + 1)).unwrap(), vec![2]);
    assert_eq!(block_on(log.offset_for_time(-3, ReadUpTo::LogEnd)).unwrap(), None, "no timestamp left");
}

/// spec: T8.2 — a segment of legacy messages cut at any byte recovers to exactly the whole
/// messages before the cut; none is ever partly exposed.
#[test]
fn legacy_segments_cut_at_every_byte_recover_whole_messages() {
    let config = LogConfig { flush_messages: u64::MAX, ..LogConfig::default() };
    let src = MemDisk::new();
    src.set_now_ms(NOW); // no time-based roll: the segment began now
    let mut log = open(&src, &config);
    let sets = [
        set(0, Compression::None, &[0, 0]),
        set(1, Compression::Gzip, &[NOW - 10, NOW - 11, NOW - 12]),
        set(1, Compression::None, &[NOW - 20]),
        set(0, Compression::Lz4, &[0, 0]),
        set(1, Compression::Zstd, &[NOW - 30, NOW - 31]),
    ];
    for s in &sets {
        log.append(s, NOW).unwrap();
    }
    block_on(log.flush_all()).unwrap();
    assert_eq!(log.segment_count(), 1);
    let path = dir().join(format!("{:020}.log", 0));
    let full = src.file_bytes(&path).unwrap();
    let size = log.size_bytes() as usize;
    let ends: Vec<(usize, i64)> = {
        let bytes = block_on(log.read(0, 1 << 20, ReadUpTo::LogEnd)).unwrap();
        let mut pos = 0;
        stored_batches(&bytes)
            .into_iter()
            .map(|(info, b)| {
                pos += b.len();
                (pos, info.next_offset())
            })
            .collect()
    };
    for cut in 0..=size {
        let disk = MemDisk::new();
        disk.set_now_ms(NOW);
        disk.set_file_bytes(&path, full[..cut].to_vec());
        let mut log = open(&disk, &config);
        let want = ends.iter().rev().find(|(end, _)| *end <= cut).map_or(0, |&(_, next)| next);
        assert_eq!(log.log_end_offset(), want, "cut at {cut}");
        assert_eq!(read_all(&mut log).len() as i64, want);
    }
}

/// spec: T8.3, T5.5 — older data: a segment of magic-0 messages as Kafka stores them (a
/// fixture written by kafka-python's own builder, tests/fixtures/magic0), with no time index
/// and no offset index. Opened as a sealed segment, it gets its time index rebuilt with one
/// entry, (the file's mtime, its last offset), and its offset index rebuilt; its records read
/// back with their offsets; no lookup by time finds a timestamp; retention by time uses the
/// mtime entry.
#[test]
fn kafka_magic0_segment_without_indexes_gets_its_mtime_entry() {
    let fixture =
        std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/magic0/00000000000000000000.log"))
            .expect("fixture");
    let disk = MemDisk::new();
    let mtime = NOW - 2 * HOUR;
    disk.set_now_ms(mtime);
    disk.set_file_bytes(&dir().join(format!("{:020}.log", 0)), fixture.clone());
    let recs = seen(&fixture);
    let next = recs.last().unwrap().0 + 1;
    // The broker appended nothing since: the next (active) segment is empty.
    disk.set_file_bytes(&dir().join(format!("{next:020}.log")), Vec::new());
    let config = cfg(&[("retention.ms", "3600000")]);
    let mut log = open(&disk, &config);
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (0, next));
    assert_eq!(read_all(&mut log), recs, "records read back as stored");
    assert_eq!(recs.iter().map(|r| r.0).collect::<Vec<_>>(), (0..next).collect::<Vec<_>>());
    assert!(recs.iter().all(|r| r.1 == -1), "magic 0: no timestamps");
    assert_eq!(log.time_entries(0).unwrap(), vec![(mtime, (next - 1) as u32)], "T5.5 entry");
    let tindex = block_on(disk.read_file(&dir().join(format!("{:020}.timeindex", 0)))).unwrap();
    assert_eq!(tindex.map(|b| b.len()), Some(12), "rebuilt time index written");
    assert!(log.index_entries(0).is_some(), "offset index rebuilt");
    assert_eq!(block_on(log.offset_for_time(0, ReadUpTo::LogEnd)).unwrap(), None);
    assert_eq!(block_on(log.offset_for_time(-3, ReadUpTo::LogEnd)).unwrap(), None);
    // T7.2 with the mtime entry: kept until retention.ms after the file's mtime.
    assert!(block_on(log.maintain(mtime + HOUR)).unwrap().is_empty());
    assert_eq!(block_on(log.maintain(mtime + HOUR + 1)).unwrap(), vec![0]);
}

/// spec: T8.2 — a legacy wrapper's offset field lies outside its CRC: recovery checks it
/// against the wrapper's inner messages, so a damaged one (too large, even past the u32 range of
/// the index) ends the valid log there: no gap is opened, nothing panics, every message before
/// it survives.
#[test]
fn recovery_pins_a_wrappers_offsets_by_its_inner_messages() {
    let config = LogConfig { flush_messages: u64::MAX, index_interval_bytes: 0, ..LogConfig::default() };
    let path = dir().join(format!("{:020}.log", 0));
    for bad_last in [7i64, 12, 1 << 33] {
        let disk = MemDisk::new();
        disk.set_now_ms(NOW);
        let mut log = open(&disk, &config);
        log.append(&set(1, Compression::None, &[NOW, NOW]), NOW).unwrap(); // 0, 1
        log.append(&set(1, Compression::Gzip, &[NOW, NOW, NOW]), NOW).unwrap(); // 2..=4
        log.append(&set(0, Compression::None, &[0]), NOW).unwrap(); // 5
        block_on(log.flush_all()).unwrap();
        drop(log);
        let mut bytes = disk.file_bytes(&path).unwrap();
        let at = stored_batches(&bytes[..log_size(&bytes)])[..2].iter().map(|(_, b)| b.len()).sum::<usize>();
        bytes[at..at + 8].copy_from_slice(&bad_last.to_be_bytes());
        disk.set_file_bytes(&path, bytes);
        let mut log = open(&disk, &config);
        assert_eq!(log.log_end_offset(), 2, "cut at the damaged wrapper (offset field {bad_last})");
        assert_eq!(read_all(&mut log).len(), 2);
        log.append(&set(1, Compression::None, &[NOW]), NOW).unwrap();
        assert_eq!(log.log_end_offset(), 3, "appends go on from there");
    }
}

/// The logical size of a segment file (its batches, without the preallocated zeros).
fn log_size(bytes: &[u8]) -> usize {
    let mut pos = 0;
    for item in tidemark::storage::format::BatchWalk::new(bytes, 1 << 30) {
        match item {
            Ok((_, info, _)) => pos += info.total_len,
            Err(_) => break,
        }
    }
    pos
}

/// spec: T5.5 — the entry of a segment without timestamps is the time of its last append, also
/// when a roll inside one request closes it: 500 magic-0 messages after a long idle time are
/// not dated back to the previous request (retention would delete them early).
#[test]
fn a_segment_closed_mid_request_is_dated_by_that_request() {
    let config = LogConfig { segment_bytes: 3_000, ..LogConfig::default() };
    let disk = MemDisk::new();
    disk.set_now_ms(NOW);
    let mut log = open(&disk, &config);
    log.append(&set(0, Compression::None, &[0]), NOW).unwrap();
    let later = NOW + 15 * MIN;
    let (info, _) = log.append(&set(0, Compression::None, &[0; 500]), later).unwrap();
    assert_eq!(info.records, 500);
    assert!(log.segment_count() > 2, "the request rolled segments");
    for base in log.segment_bases().into_iter().rev().skip(1) {
        let entries = log.time_entries(base).unwrap();
        assert!(entries.is_empty() || entries == [(later, entries[0].1)], "segment {base}: {entries:?}");
    }
    assert_eq!(log.time_entries(0).unwrap().first().map(|e| e.0), Some(later), "first segment closed by the request");
}

/// A producer may not send a control batch (transaction markers are the broker's): refused as
/// a corrupt message, nothing appended.
#[test]
fn control_batches_from_producers_are_refused() {
    let disk = MemDisk::new();
    let mut log = open(&disk, &LogConfig::default());
    let mut b = BatchBuilder::new();
    b.push(NOW, None, Some(b"marker"), &[]);
    let mut bytes = b.finish();
    bytes[22] |= 0x20; // attributes bit 5: control
    tidemark::storage::format::batch::rewrite_crc(&mut bytes);
    assert!(matches!(log.append(&bytes, NOW), Err(StorageError::InvalidBatch(_))));
    assert_eq!(log.log_end_offset(), 0);
}
