//! Committed offsets: their records in `__consumer_offsets` and the in-memory table replayed
//! from them.
//!
//! Records use Kafka's own `__consumer_offsets` layout, so Kafka tooling reads them:
//!
//! ```text
//! key   (offset commit, version 1): version i16 = 1 | group string | topic string | partition i32
//! value (version 3):                version i16 = 3 | offset i64 | leader epoch i32 | metadata string
//!                                   | commit timestamp i64
//! ```
//!
//! Strings are an i16 length then UTF-8 bytes. A record with a null value is a tombstone: the
//! offset is gone (DeleteGroups). Keys of version 0 are read as version 1; value versions 0, 1
//! (with an expire timestamp) and 3 are read; group metadata records (key version 2) are skipped:
//! membership is not persisted, members rejoin after a restart. Later records win, so the
//! table is the replay of the log, and compaction rewrites the live records at its end.

use crate::storage::format::batch::{records_section, BatchBuilder, BatchHeader, Records};
use crate::storage::format::FormatError;
use std::collections::BTreeMap;

/// One committed offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp: i64,
}

/// A topic and partition.
pub type Tp = (String, i32);

fn put_string(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as i16).to_be_bytes());
    out.extend_from_slice(s.as_bytes());
}

struct Cursor<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], FormatError> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.b.len());
        let end = end.ok_or(FormatError::BadRecords("offset record truncated"))?;
        let s = &self.b[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn i16(&mut self) -> Result<i16, FormatError> {
        Ok(i16::from_be_bytes(self.take(2)?.try_into().expect("2 bytes")))
    }
    fn i32(&mut self) -> Result<i32, FormatError> {
        Ok(i32::from_be_bytes(self.take(4)?.try_into().expect("4 bytes")))
    }
    fn i64(&mut self) -> Result<i64, FormatError> {
        Ok(i64::from_be_bytes(self.take(8)?.try_into().expect("8 bytes")))
    }
    fn string(&mut self) -> Result<String, FormatError> {
        let n = self.i16()?;
        if n < 0 {
            return Ok(String::new());
        }
        let b = self.take(n as usize)?;
        String::from_utf8(b.to_vec()).map_err(|_| FormatError::BadRecords("offset record string not UTF-8"))
    }
}

/// The key of an offset commit record.
pub fn encode_key(group: &str, topic: &str, partition: i32) -> Vec<u8> {
    let mut k = Vec::with_capacity(10 + group.len() + topic.len());
    k.extend_from_slice(&1i16.to_be_bytes());
    put_string(&mut k, group);
    put_string(&mut k, topic);
    k.extend_from_slice(&partition.to_be_bytes());
    k
}

/// The value of an offset commit record (version 3).
pub fn encode_value(c: &Committed) -> Vec<u8> {
    let mut v = Vec::with_capacity(24 + c.metadata.len());
    v.extend_from_slice(&3i16.to_be_bytes());
    v.extend_from_slice(&c.offset.to_be_bytes());
    v.extend_from_slice(&c.leader_epoch.to_be_bytes());
    put_string(&mut v, &c.metadata);
    v.extend_from_slice(&c.commit_timestamp.to_be_bytes());
    v
}

/// What a `__consumer_offsets` record says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OffsetRecord {
    /// An offset committed (`Some`) or deleted (`None`, a tombstone).
    Commit { group: String, tp: Tp, value: Option<Committed> },
    /// A record tidemark does not interpret (group metadata).
    Other,
}

/// Decode one record's key and value.
pub fn decode(key: Option<&[u8]>, value: Option<&[u8]>) -> Result<OffsetRecord, FormatError> {
    let key = key.ok_or(FormatError::BadRecords("offset record without a key"))?;
    let mut k = Cursor { b: key, pos: 0 };
    match k.i16()? {
        0 | 1 => {}
        _ => return Ok(OffsetRecord::Other),
    }
    let group = k.string()?;
    let topic = k.string()?;
    let partition = k.i32()?;
    let value = match value {
        None => None,
        Some(v) => {
            let mut c = Cursor { b: v, pos: 0 };
            let version = c.i16()?;
            let offset = c.i64()?;
            let leader_epoch = if version >= 3 { c.i32()? } else { -1 };
            let metadata = c.string()?;
            let commit_timestamp = c.i64()?;
            Some(Committed { offset, leader_epoch, metadata, commit_timestamp })
        }
    };
    Ok(OffsetRecord::Commit { group, tp: (topic, partition), value })
}

/// One record of `__consumer_offsets`: its key and value (`None`: a tombstone).
pub type Record = (Vec<u8>, Option<Vec<u8>>);

/// The record of one commit (`None`: its tombstone).
pub fn record(group: &str, (topic, partition): &Tp, c: Option<&Committed>) -> Record {
    (encode_key(group, topic, *partition), c.map(encode_value))
}

/// `records` in v2 batches stamped `now`, each of about `max_bytes` at most (one record
/// larger than that makes a batch of its own), in order.
pub fn batches(records: &[Record], max_bytes: usize, now: i64) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut b = BatchBuilder::new();
    let (mut n, mut size) = (0, 0usize);
    for (k, v) in records {
        let one = 24 + k.len() + v.as_ref().map_or(0, Vec::len);
        if n > 0 && size + one > max_bytes {
            out.push(std::mem::replace(&mut b, BatchBuilder::new()).finish());
            (n, size) = (0, 0);
        }
        b.push(now, Some(k), v.as_deref(), &[]);
        n += 1;
        size += one;
    }
    if n > 0 {
        out.push(b.finish());
    }
    out
}

/// What an internal topic's reader meets in its stored batches ([`walk`]).
pub enum Stored<'a> {
    /// A record: its key, value and offset, and the producer whose transaction holds it
    /// (a transactional batch's), if any.
    Record { key: Option<&'a [u8]>, value: Option<&'a [u8]>, offset: i64, txn_producer: Option<i64> },
    /// A transaction marker of producer `pid`.
    Marker { pid: i64, commit: bool },
}

/// Call `f` with every record and transaction marker of the stored v2 batches (the broker
/// writes its internal topics in v2 batches only; others are skipped). A batch that does not
/// parse is an error.
pub fn walk(stored: &[u8], limit: usize, mut f: impl FnMut(Stored<'_>)) -> Result<(), FormatError> {
    for item in crate::storage::format::BatchWalk::new(stored, usize::MAX >> 1) {
        let (_, info, bytes) = item?;
        if info.magic != 2 {
            continue;
        }
        let h = BatchHeader::parse(bytes)?;
        if h.is_control() {
            if let Some(m) = crate::storage::format::marker::Marker::read(&h, bytes)? {
                f(Stored::Marker { pid: h.producer_id, commit: m.commit });
            }
            continue;
        }
        let txn_producer = h.is_transactional().then_some(h.producer_id);
        let section = records_section(&h, bytes, limit)?;
        for r in Records::new(&section, h.record_count) {
            let r = r?;
            let offset = h.base_offset + r.offset_delta as i64;
            f(Stored::Record { key: r.key, value: r.value, offset, txn_producer });
        }
    }
    Ok(())
}

/// Call `f` with the key, value and offset of every record of the stored v2 batches
/// (transaction markers skipped: [`walk`]).
pub fn for_each_record(
    stored: &[u8],
    limit: usize,
    mut f: impl FnMut(Option<&[u8]>, Option<&[u8]>, i64),
) -> Result<(), FormatError> {
    walk(stored, limit, |s| {
        if let Stored::Record { key, value, offset, .. } = s {
            f(key, value, offset)
        }
    })
}

/// The committed offsets of the groups one shard coordinates, replayed from their records.
/// An offset an open transaction committed.
#[derive(Debug)]
struct Staged {
    group: String,
    tp: Tp,
    committed: Committed,
    /// A plain commit (or deletion) of the same partition came after it in the log: Kafka
    /// keeps the later record, so the marker does not apply this one.
    superseded: bool,
}

#[derive(Debug, Default)]
pub struct OffsetTable {
    groups: BTreeMap<String, BTreeMap<Tp, Committed>>,
    /// Offsets committed inside open transactions (TxnOffsetCommit), by offsets partition and
    /// producer id, in commit order: applied when the transaction's marker commits it, dropped
    /// when it aborts.
    pending: BTreeMap<(i32, i64), Vec<Staged>>,
    /// What plain commits written as the leader replaced, kept until those writes are
    /// replicated: group → partition → [(the end offset of the replacing write, the value
    /// before it)], in log order. A read sees the value as of the high watermark
    /// ([`OffsetTable::visible`]), as Kafka's coordinator reads its state at its last
    /// committed offset: an offset a failover could still lose is never told.
    replaced: BTreeMap<String, BTreeMap<Tp, Vec<Replaced>>>,
}

/// The end offset of a write not yet replicated, and the value it replaced.
type Replaced = (i64, Option<Committed>);

impl OffsetTable {
    /// A plain commit (`None`: a deletion) of `group`'s offset for `tp`, in log order: it
    /// also wins over any offset of it an open transaction staged before (Kafka keeps the
    /// later record).
    pub fn apply(&mut self, group: &str, tp: Tp, value: Option<Committed>) {
        for s in self.pending.values_mut().flatten() {
            if s.group == group && s.tp == tp {
                s.superseded = true;
            }
        }
        self.set(group, tp, value);
    }

    /// A plain commit (or deletion) this node wrote as the leader, its write ending at `end`;
    /// `high_watermark` now: what was replaced stays readable until the write is replicated.
    pub fn apply_written(&mut self, group: &str, tp: Tp, value: Option<Committed>, end: i64, high_watermark: i64) {
        let before = self.get(group, &tp).cloned();
        let history = self.replaced.entry(group.to_string()).or_default().entry(tp.clone()).or_default();
        history.retain(|(e, _)| *e > high_watermark);
        history.push((end, before));
        self.apply(group, tp, value);
    }

    /// `group`'s offset for `tp` as of `high_watermark`: the value before the first write not
    /// yet replicated, else the latest.
    pub fn visible(&self, group: &str, tp: &Tp, high_watermark: i64) -> Option<Committed> {
        let pending = self.replaced.get(group).and_then(|g| g.get(tp));
        match pending.and_then(|h| h.iter().find(|(e, _)| *e > high_watermark)) {
            Some((_, before)) => before.clone(),
            None => self.get(group, tp).cloned(),
        }
    }

    /// Every offset of `group` as of `high_watermark` ([`OffsetTable::visible`]).
    pub fn visible_group(&self, group: &str, high_watermark: i64) -> BTreeMap<Tp, Committed> {
        let mut out = self.groups.get(group).cloned().unwrap_or_default();
        for (tp, history) in self.replaced.get(group).into_iter().flatten() {
            if let Some((_, before)) = history.iter().find(|(e, _)| *e > high_watermark) {
                match before {
                    Some(c) => out.insert(tp.clone(), c.clone()),
                    None => out.remove(tp),
                };
            }
        }
        out
    }

    fn set(&mut self, group: &str, tp: Tp, value: Option<Committed>) {
        match value {
            Some(c) => {
                self.groups.entry(group.to_string()).or_default().insert(tp, c);
            }
            None => {
                if let Some(g) = self.groups.get_mut(group) {
                    g.remove(&tp);
                    if g.is_empty() {
                        self.groups.remove(group);
                    }
                }
            }
        }
    }

    /// Forget the groups `pick` names and what transactions staged on partition `index` (the
    /// partition is loaded again).
    pub fn forget_groups(&mut self, mut pick: impl FnMut(&str) -> bool, index: i32) {
        self.groups.retain(|g, _| !pick(g));
        self.replaced.retain(|g, _| !pick(g));
        self.pending.retain(|(i, _), _| *i != index);
    }

    /// Replay the records of stored batches of offsets partition `index` (any order of
    /// commits and tombstones); returns how many records were applied. A transactional batch
    /// stages its commits until its producer's marker commits or drops them. An undecodable
    /// record is logged and skipped; a batch that does not parse is an error.
    pub fn replay(&mut self, stored: &[u8], limit: usize, index: i32) -> Result<usize, FormatError> {
        let mut applied = 0;
        walk(stored, limit, |s| match s {
            Stored::Marker { pid, commit } => {
                self.complete(index, pid, commit);
            }
            Stored::Record { key, value, offset, txn_producer } => match (decode(key, value), txn_producer) {
                (Ok(OffsetRecord::Commit { group, tp, value: Some(c) }), Some(pid)) => {
                    self.stage(index, pid, &group, tp, c);
                }
                (Ok(OffsetRecord::Commit { group, tp, value }), _) => {
                    self.apply(&group, tp, value);
                    applied += 1;
                }
                (Ok(OffsetRecord::Other), _) => {}
                // Not ours to fail startup on: skipped, the rest replayed.
                (Err(e), _) => tracing::warn!(offset, error = %e, "undecodable offset record skipped"),
            },
        })?;
        Ok(applied)
    }

    /// An offset committed in producer `pid`'s open transaction, on offsets partition `index`.
    pub fn stage(&mut self, index: i32, pid: i64, group: &str, tp: Tp, c: Committed) {
        let staged = Staged { group: group.to_string(), tp, committed: c, superseded: false };
        self.pending.entry((index, pid)).or_default().push(staged);
    }

    /// `pid`'s transaction ended on offsets partition `index`: its staged offsets applied
    /// (commit) or dropped (abort). Returns how many there were.
    pub fn complete(&mut self, index: i32, pid: i64, commit: bool) -> usize {
        let staged = self.pending.remove(&(index, pid)).unwrap_or_default();
        let n = staged.len();
        if commit {
            for s in staged.into_iter().filter(|s| !s.superseded) {
                self.set(&s.group, s.tp, Some(s.committed));
            }
        }
        n
    }

    /// Whether an open transaction holds an offset of `group` for `tp` (OffsetFetch's
    /// UNSTABLE_OFFSET_COMMIT).
    pub fn has_pending(&self, group: &str, tp: &Tp) -> bool {
        self.pending.values().flatten().any(|s| s.group == group && s.tp == *tp)
    }

    /// Whether any transaction holds offsets on partition `index` (compaction waits).
    pub fn has_pending_on(&self, index: i32) -> bool {
        self.pending.range((index, i64::MIN)..=(index, i64::MAX)).next().is_some()
    }

    pub fn group(&self, group: &str) -> Option<&BTreeMap<Tp, Committed>> {
        self.groups.get(group)
    }

    pub fn get(&self, group: &str, tp: &Tp) -> Option<&Committed> {
        self.groups.get(group)?.get(tp)
    }

    pub fn groups(&self) -> impl Iterator<Item = &String> {
        self.groups.keys()
    }

    /// Every live offset of the groups `pick` chooses: what compaction writes again.
    pub fn live(&self, mut pick: impl FnMut(&str) -> bool) -> Vec<(String, Tp, Committed)> {
        let mut out = Vec::new();
        for (g, offsets) in self.groups.iter().filter(|(g, _)| pick(g)) {
            out.extend(offsets.iter().map(|(tp, c)| (g.clone(), tp.clone(), c.clone())));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn committed(offset: i64) -> Committed {
        Committed { offset, leader_epoch: 7, metadata: "m".into(), commit_timestamp: 1234 }
    }

    /// Records are split into batches of about the size asked (a larger record alone), in
    /// order, none lost: what a group of thousands of members writes stays under the
    /// partition's max.message.bytes.
    #[test]
    fn batches_split_by_size_in_order() {
        let records: Vec<Record> = (0..1000u32)
            .map(|i| (i.to_be_bytes().to_vec(), Some(vec![0u8; if i == 500 { 5000 } else { 100 }])))
            .collect();
        let out = batches(&records, 4096, 1);
        assert!(out.len() > 25, "{} batches", out.len());
        let mut keys = Vec::new();
        for b in &out {
            let before = keys.len();
            for_each_record(b, 1 << 20, |k, v, _| keys.push((k.unwrap().to_vec(), v.map(<[u8]>::len)))).unwrap();
            let big = keys[before..].iter().any(|(_, v)| *v == Some(5000));
            assert!(b.len() <= 4096 + 200 || (big && keys.len() - before == 1), "batch of {} bytes", b.len());
        }
        let expected: Vec<_> = records.iter().map(|(k, v)| (k.clone(), v.as_ref().map(Vec::len))).collect();
        assert_eq!(keys, expected);
        assert!(batches(&[], 10, 1).is_empty());
    }

    /// A commit written as the leader is read only once replicated: until the high watermark
    /// passes its write, a read sees the value it replaced (or none); one group's listing
    /// too; writes stacked before replication show each in turn as the watermark moves.
    #[test]
    fn commits_are_visible_once_replicated() {
        let tp = ("orders".to_string(), 0);
        let mut t = OffsetTable::default();
        t.apply_written("g", tp.clone(), Some(committed(10)), 5, 0);
        assert_eq!(t.visible("g", &tp, 4), None, "not replicated: nothing told");
        assert!(t.visible_group("g", 4).is_empty());
        assert_eq!(t.visible("g", &tp, 5).map(|c| c.offset), Some(10));
        t.apply_written("g", tp.clone(), Some(committed(20)), 8, 5);
        t.apply_written("g", tp.clone(), Some(committed(30)), 9, 5);
        assert_eq!(t.visible("g", &tp, 5).map(|c| c.offset), Some(10));
        assert_eq!(t.visible("g", &tp, 8).map(|c| c.offset), Some(20));
        assert_eq!(t.visible_group("g", 9).get(&tp).map(|c| c.offset), Some(30));
        t.apply_written("g", tp.clone(), None, 12, 9);
        assert_eq!(t.visible("g", &tp, 11).map(|c| c.offset), Some(30), "a deletion not replicated yet");
        assert_eq!(t.visible("g", &tp, 12), None);
        assert_eq!(t.get("g", &tp), None, "the table itself follows the log");
        t.forget_groups(|g| g == "g", 0);
        assert!(t.replaced.is_empty());
    }

    /// Records round-trip; later records win; tombstones delete; Kafka's value v1 is read.
    #[test]
    fn records_replay_to_the_latest_commit() {
        let tp = ("orders".to_string(), 3);
        let batch = |group: &str, commits: &[(Tp, Option<Committed>)], now: i64| {
            let records: Vec<Record> = commits.iter().map(|(tp, c)| record(group, tp, c.as_ref())).collect();
            batches(&records, usize::MAX, now).concat()
        };
        let mut stored = batch("g", &[(tp.clone(), Some(committed(10)))], 1);
        stored.extend(batch("g", &[(tp.clone(), Some(committed(20))), (("x".into(), 0), Some(committed(5)))], 2));
        stored.extend(batch("h", &[(tp.clone(), Some(committed(1)))], 3));
        stored.extend(batch("g", &[(("x".into(), 0), None)], 4));
        let mut t = OffsetTable::default();
        assert_eq!(t.replay(&stored, 1 << 20, 0).unwrap(), 5);
        assert_eq!(t.get("g", &tp), Some(&committed(20)));
        assert_eq!(t.get("g", &("x".into(), 0)), None);
        assert_eq!(t.get("h", &tp).map(|c| c.offset), Some(1));
        assert_eq!(t.live(|g| g == "g").len(), 1);
        // Kafka's value version 1: offset, metadata, commit timestamp, expire timestamp.
        let mut v1 = 1i16.to_be_bytes().to_vec();
        v1.extend_from_slice(&42i64.to_be_bytes());
        put_string(&mut v1, "meta");
        v1.extend_from_slice(&99i64.to_be_bytes());
        v1.extend_from_slice(&100i64.to_be_bytes());
        let r = decode(Some(&encode_key("g", "t", 1)), Some(&v1)).unwrap();
        assert_eq!(
            r,
            OffsetRecord::Commit {
                group: "g".into(),
                tp: ("t".into(), 1),
                value: Some(Committed { offset: 42, leader_epoch: -1, metadata: "meta".into(), commit_timestamp: 99 })
            }
        );
        // Group metadata (key version 2) is not ours to read.
        let mut k2 = 2i16.to_be_bytes().to_vec();
        put_string(&mut k2, "g");
        assert_eq!(decode(Some(&k2), Some(b"whatever")).unwrap(), OffsetRecord::Other);
        assert!(decode(Some(&[0, 1, 0]), None).is_err(), "truncated key");
    }

    /// Offsets committed in a transaction (a transactional batch) stay staged, invisible,
    /// until their producer's marker: COMMIT applies them over the earlier plain commit,
    /// ABORT drops them; another producer's marker or another partition's leaves them; the
    /// replay of a log does the same as the live calls.
    #[test]
    fn transactional_offsets_wait_for_their_marker() {
        use crate::storage::format::batch::BatchBuilder;
        use crate::storage::format::marker::Marker;
        let tp = ("orders".to_string(), 0);
        let plain = batches(&[record("g", &tp, Some(&committed(5)))], usize::MAX, 1).concat();
        let txn = |pid: i64, offset: i64| {
            let (k, v) = record("g", &tp, Some(&committed(offset)));
            let mut b = BatchBuilder::new().transactional().producer(pid, 0, 0);
            b.push(2, Some(&k), v.as_deref(), &[]);
            b.finish()
        };
        let marker = |pid: i64, commit: bool| Marker { commit, coordinator_epoch: 0 }.batch(pid, 0, 3);
        // Live: staged, then completed.
        let mut t = OffsetTable::default();
        t.replay(&plain, 1 << 20, 0).unwrap();
        t.stage(0, 7, "g", tp.clone(), committed(10));
        assert!(t.has_pending("g", &tp) && t.has_pending_on(0) && !t.has_pending_on(1));
        assert_eq!(t.get("g", &tp).map(|c| c.offset), Some(5), "invisible while open");
        assert_eq!(t.complete(1, 7, true), 0, "another partition's marker");
        assert_eq!(t.complete(0, 8, true), 0, "another producer's marker");
        assert_eq!(t.complete(0, 7, true), 1);
        assert_eq!(t.get("g", &tp).map(|c| c.offset), Some(10));
        assert!(!t.has_pending("g", &tp));
        t.stage(0, 7, "g", tp.clone(), committed(20));
        assert_eq!(t.complete(0, 7, false), 1);
        assert_eq!(t.get("g", &tp).map(|c| c.offset), Some(10), "aborted: dropped");
        // Replayed: the same outcome from the stored batches.
        let mut log = plain.clone();
        log.extend(txn(7, 10));
        log.extend(txn(9, 99));
        log.extend(marker(7, true));
        log.extend(txn(7, 20));
        log.extend(marker(7, false));
        let mut r = OffsetTable::default();
        r.replay(&log, 1 << 20, 0).unwrap();
        assert_eq!(r.get("g", &tp).map(|c| c.offset), Some(10));
        assert!(r.has_pending("g", &tp), "producer 9's transaction is still open");
        assert_eq!(r.complete(0, 9, false), 1);
        // A plain commit after the staged one wins, as the later record does in Kafka.
        t.stage(0, 7, "g", tp.clone(), committed(30));
        t.apply("g", tp.clone(), Some(committed(12)));
        assert_eq!(t.complete(0, 7, true), 1);
        assert_eq!(t.get("g", &tp).map(|c| c.offset), Some(12), "the later plain commit stays");
    }
}
