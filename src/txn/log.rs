//! `__transaction_state` records, in Kafka's format so that the topic reads as Kafka's does
//! (`kafka-dump-log` decodes it): the key is `version i16 = 0, transactional id (i16 length,
//! UTF-8)`; the value (null: a tombstone) is version 0 while the cluster's
//! `transaction.version` is 0, else version 1, as Kafka writes them ([`version_for`]):
//!
//! ```text
//! version i16 = 0, producer id i64, producer epoch i16, timeout ms i32, state i8,
//! partitions: i32 count (-1 when Empty), per topic: name (i16 length, UTF-8), i32 n, n × i32,
//! last update ms i64, start ms i64
//! ```
//!
//! Version 1 is the same fields, flexible (compact arrays and strings, a tag section after
//! each topic and at the end) with tagged fields 0 previous producer id, 1 next producer id,
//! 2 client transaction version (each written when not its default: -1, -1, 0).

use super::{TopicPartition, TxnData, TxnMetadata, TxnState};
use std::collections::BTreeSet;

/// A record's key: the transactional id.
pub fn key(transactional_id: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(4 + transactional_id.len());
    k.extend_from_slice(&0i16.to_be_bytes());
    k.extend_from_slice(&(transactional_id.len() as i16).to_be_bytes());
    k.extend_from_slice(transactional_id.as_bytes());
    k
}

/// The transactional id of a key (`None`: another key version, skipped as Kafka skips it).
pub fn read_key(k: &[u8]) -> Result<Option<String>, String> {
    let mut r = Reader(k);
    if r.i16()? != 0 {
        return Ok(None);
    }
    let id = r.string()?;
    Ok(Some(id))
}

/// The value version of `m`'s record with the cluster's `transaction.version` at `level`:
/// Kafka's (1 from level 1 on), and 1 also below that when `m` has what only version 1 holds (a
/// previous or next producer id, a version 2 client), which version 0 would lose: a coordinator
/// taking over after a rotation would not know the producer's new id. Every reader of Kafka 3
/// and later reads both.
pub fn version_for(m: &TxnMetadata, level: i16) -> i16 {
    let tagged = m.data.previous_producer_id != -1 || m.data.next_producer_id != -1 || m.data.client_version != 0;
    (level >= 1 || tagged) as i16
}

/// A record's value: the metadata as it is, at value version `version` (0 or 1).
pub fn value(m: &TxnMetadata, version: i16) -> Vec<u8> {
    let flexible = version >= 1;
    let mut v = Vec::with_capacity(48);
    v.extend_from_slice(&(flexible as i16).to_be_bytes());
    v.extend_from_slice(&m.data.producer_id.to_be_bytes());
    v.extend_from_slice(&m.data.producer_epoch.to_be_bytes());
    v.extend_from_slice(&m.data.timeout_ms.to_be_bytes());
    v.push(m.data.state as i8 as u8);
    let topics = if m.data.state == TxnState::Empty { None } else { Some(by_topic(&m.data.partitions)) };
    match (&topics, flexible) {
        (None, false) => v.extend_from_slice(&(-1i32).to_be_bytes()),
        (None, true) => v.push(0),
        (Some(ts), false) => v.extend_from_slice(&(ts.len() as i32).to_be_bytes()),
        (Some(ts), true) => uvarint(&mut v, ts.len() as u64 + 1),
    }
    for (topic, parts) in topics.unwrap_or_default() {
        if flexible {
            uvarint(&mut v, topic.len() as u64 + 1);
        } else {
            v.extend_from_slice(&(topic.len() as i16).to_be_bytes());
        }
        v.extend_from_slice(topic.as_bytes());
        if flexible {
            uvarint(&mut v, parts.len() as u64 + 1);
        } else {
            v.extend_from_slice(&(parts.len() as i32).to_be_bytes());
        }
        for p in parts {
            v.extend_from_slice(&p.to_be_bytes());
        }
        if flexible {
            v.push(0); // no tagged fields
        }
    }
    v.extend_from_slice(&m.data.last_update_ms.to_be_bytes());
    v.extend_from_slice(&m.data.start_ms.to_be_bytes());
    if flexible {
        let mut tags: Vec<(u64, Vec<u8>)> = Vec::new();
        if m.data.previous_producer_id != -1 {
            tags.push((0, m.data.previous_producer_id.to_be_bytes().to_vec()));
        }
        if m.data.next_producer_id != -1 {
            tags.push((1, m.data.next_producer_id.to_be_bytes().to_vec()));
        }
        if m.data.client_version != 0 {
            tags.push((2, m.data.client_version.to_be_bytes().to_vec()));
        }
        uvarint(&mut v, tags.len() as u64);
        for (tag, bytes) in tags {
            uvarint(&mut v, tag);
            uvarint(&mut v, bytes.len() as u64);
            v.extend_from_slice(&bytes);
        }
    }
    v
}

fn by_topic(partitions: &BTreeSet<TopicPartition>) -> Vec<(&str, Vec<i32>)> {
    let mut out: Vec<(&str, Vec<i32>)> = Vec::new();
    for (t, p) in partitions {
        match out.last_mut() {
            Some((last, ps)) if *last == t.as_str() => ps.push(*p),
            _ => out.push((t.as_str(), vec![*p])),
        }
    }
    out
}

/// The metadata a value holds (as loaded: no pending state, the last epoch unknown).
pub fn read_value(transactional_id: &str, v: &[u8]) -> Result<TxnMetadata, String> {
    let mut r = Reader(v);
    let version = r.i16()?;
    if !(0..=1).contains(&version) {
        return Err(format!("unknown transaction log value version {version}"));
    }
    let flexible = version >= 1;
    let producer_id = r.i64()?;
    let producer_epoch = r.i16()?;
    let timeout_ms = r.i32()?;
    let state_id = r.i8()?;
    let state = TxnState::from_id(state_id).ok_or_else(|| format!("unknown transaction state {state_id}"))?;
    let mut partitions = BTreeSet::new();
    let topics = if flexible { r.uvarint()? as i64 - 1 } else { r.i32()? as i64 };
    for _ in 0..topics.max(0) {
        let topic = if flexible { r.compact_string()? } else { r.string()? };
        let n = if flexible { r.uvarint()? as i64 - 1 } else { r.i32()? as i64 };
        for _ in 0..n.max(0) {
            partitions.insert((topic.clone(), r.i32()?));
        }
        if flexible {
            r.skip_tags()?;
        }
    }
    let last_update_ms = r.i64()?;
    let start_ms = r.i64()?;
    let (mut previous_producer_id, mut next_producer_id, mut client_version) = (-1, -1, 0);
    if flexible {
        for (tag, bytes) in r.tags()? {
            match (tag, bytes.len()) {
                (0, 8) => previous_producer_id = i64::from_be_bytes(bytes.try_into().expect("8 bytes")),
                (1, 8) => next_producer_id = i64::from_be_bytes(bytes.try_into().expect("8 bytes")),
                (2, 2) => client_version = i16::from_be_bytes(bytes.try_into().expect("2 bytes")),
                _ => {}
            }
        }
    }
    if state == TxnState::Empty {
        partitions.clear();
    }
    let data = TxnData {
        producer_id,
        previous_producer_id,
        producer_epoch,
        last_producer_epoch: -1,
        timeout_ms,
        state,
        partitions,
        start_ms,
        last_update_ms,
        next_producer_id,
        client_version,
    };
    Ok(TxnMetadata { transactional_id: transactional_id.to_string(), data, pending: None })
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.0.len() < n {
            return Err("a transaction log record ends early".into());
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn i8(&mut self) -> Result<i8, String> {
        Ok(self.take(1)?[0] as i8)
    }
    fn i16(&mut self) -> Result<i16, String> {
        Ok(i16::from_be_bytes(self.take(2)?.try_into().expect("2 bytes")))
    }
    fn i32(&mut self) -> Result<i32, String> {
        Ok(i32::from_be_bytes(self.take(4)?.try_into().expect("4 bytes")))
    }
    fn i64(&mut self) -> Result<i64, String> {
        Ok(i64::from_be_bytes(self.take(8)?.try_into().expect("8 bytes")))
    }
    fn uvarint(&mut self) -> Result<u64, String> {
        let mut v = 0u64;
        for shift in (0..35).step_by(7) {
            let b = self.take(1)?[0];
            v |= ((b & 0x7f) as u64) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("an unsigned varint longer than 5 bytes".into())
    }
    fn utf8(&mut self, n: usize) -> Result<String, String> {
        String::from_utf8(self.take(n)?.to_vec()).map_err(|_| "a name that is not UTF-8".to_string())
    }
    fn string(&mut self) -> Result<String, String> {
        let n = self.i16()?;
        self.utf8(n.max(0) as usize)
    }
    fn compact_string(&mut self) -> Result<String, String> {
        let n = self.uvarint()?;
        self.utf8(n.saturating_sub(1) as usize)
    }
    fn tags(&mut self) -> Result<Vec<(u64, &'a [u8])>, String> {
        let count = self.uvarint()?;
        let mut out = Vec::new();
        for _ in 0..count {
            let tag = self.uvarint()?;
            let size = self.uvarint()? as usize;
            out.push((tag, self.take(size)?));
        }
        Ok(out)
    }
    fn skip_tags(&mut self) -> Result<(), String> {
        self.tags().map(|_| ())
    }
}

/// Write an unsigned varint.
pub(crate) fn uvarint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}
