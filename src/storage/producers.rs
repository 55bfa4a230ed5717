//! Idempotent producers: per partition, each producer id's epoch and the sequence numbers of
//! its last batches, so a retried batch is recognised and not written twice (Kafka's
//! ProducerStateManager, KIP-98).
//!
//! Rules for a v2 batch with a producer id (`producerId >= 0`), checked before it is appended:
//! - an epoch below the producer's current one: INVALID_PRODUCER_EPOCH (a fenced producer);
//! - a new (higher) epoch: its first sequence must be 0, and the producer's history restarts;
//! - the same epoch: a batch whose first and last sequence match one of the last
//!   [`MAX_CACHED`] batches is a duplicate (answered with that batch's offsets, not appended);
//!   otherwise its first sequence must follow the last one (wrapping after i32::MAX), else
//!   OUT_OF_ORDER_SEQUENCE_NUMBER;
//! - a producer id never seen here (or expired) starts its history with any sequence (Kafka
//!   2.5+); a batch with a producer id must be the only batch of its request, and carry a
//!   sequence (Kafka's v3+ rule; the log refuses it otherwise).
//!
//! Transactions (KIP-98): a transactional batch opens its producer's transaction on this
//! partition (its first offset kept, until a marker ends it); a non-transactional batch from
//! a producer with one open is INVALID_TXN_STATE. A marker (a control batch the coordinator
//! writes) is checked against the producer's epoch (older: INVALID_PRODUCER_EPOCH) and the
//! coordinator epoch of the last marker (older: TRANSACTION_COORDINATOR_FENCED); it ends the
//! open transaction, if any ([`CompletedTxn`]), and keeps the producer's sequences when its
//! epoch is the producer's (the next transaction continues them). The first unstable offset is
//! the first offset of the earliest transaction still open, or completed by a marker the high
//! watermark has not yet passed: reads at isolation READ_COMMITTED stop there (the last stable
//! offset). A producer with a transaction open is never expired nor evicted.
//!
//! The state is rebuilt, never trusted blindly: a snapshot written when a segment is sealed
//! holds the state at that segment's end (`<end offset>.snapshot`); at open the latest one at or
//! below the active segment's base is loaded and the active segment's batches replayed on top
//! (the recovery scan). Pure: no I/O here; byte layout in `docs/format.md`.

use crate::storage::format::batch::BatchHeader;
use crate::storage::format::marker::Marker;
use crate::storage::format::FormatError;
use std::collections::{BTreeMap, HashMap, VecDeque};

/// Batches remembered per producer (Kafka's in-flight limit for idempotence is 5).
pub const MAX_CACHED: usize = 5;
/// Producers remembered per partition (beyond, the longest idle is forgotten).
pub const MAX_PRODUCERS: usize = 100_000;

/// One appended batch of a producer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchSeq {
    pub first_seq: i32,
    pub last_seq: i32,
    pub first_offset: i64,
    pub last_offset: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Producer {
    epoch: i16,
    /// Oldest first, at most [`MAX_CACHED`].
    batches: VecDeque<BatchSeq>,
    /// Broker time of its last append (ms), for expiry.
    last_append_ms: i64,
    /// The coordinator epoch of the last marker it got (-1: none).
    coordinator_epoch: i32,
    /// The first offset of its transaction open on this partition.
    txn_first_offset: Option<i64>,
}

impl Producer {
    fn new(epoch: i16, now: i64) -> Producer {
        Producer { epoch, batches: VecDeque::new(), last_append_ms: now, coordinator_epoch: -1, txn_first_offset: None }
    }
}

/// A transaction a marker ended on this partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompletedTxn {
    pub producer_id: i64,
    /// Its first data offset here.
    pub first_offset: i64,
    /// The marker's offset.
    pub last_offset: i64,
    pub aborted: bool,
}

/// What the rules say about a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Append it (at the given offsets; the caller records it with [`ProducerState::record`]).
    Append,
    /// Already appended at these offsets.
    Duplicate { first_offset: i64, last_offset: i64 },
}

/// Why a batch is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SequenceError {
    #[error("producer {pid}: epoch {epoch} is older than the current epoch {current}")]
    InvalidEpoch { pid: i64, epoch: i16, current: i16 },
    #[error("producer {pid} epoch {epoch}: sequence {found}, expected {expected}")]
    OutOfOrder { pid: i64, epoch: i16, expected: i32, found: i32 },
    #[error("producer {pid}: a batch with a producer id must be alone in its request, with a sequence")]
    NotAlone { pid: i64 },
    #[error("producer {pid}: a non-transactional batch while its transaction is open")]
    InTransaction { pid: i64 },
    #[error("producer {pid}: marker epoch {epoch} is older than the current epoch {current}")]
    MarkerEpoch { pid: i64, epoch: i16, current: i16 },
    #[error("producer {pid}: coordinator epoch {found} is older than {current}")]
    CoordinatorFenced { pid: i64, found: i32, current: i32 },
}

fn next_seq(s: i32) -> i32 {
    if s == i32::MAX {
        0
    } else {
        s + 1
    }
}

/// The last sequence of a batch starting at `first` with `count` records (wrapping).
pub fn last_seq(first: i32, count: i64) -> i32 {
    ((first as i64 + count - 1) % (i32::MAX as i64 + 1)) as i32
}

/// The producers of one partition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProducerState {
    producers: HashMap<i64, Producer>,
    /// Open transactions: first offset, producer id.
    ongoing: BTreeMap<i64, i64>,
    /// Transactions a marker ended that the high watermark has not passed: first offset,
    /// marker offset.
    unreplicated: BTreeMap<i64, i64>,
}

/// What DescribeProducers shows of a producer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActiveProducer {
    pub producer_id: i64,
    pub epoch: i16,
    /// The last sequence of its last batch, -1 when none is kept.
    pub last_sequence: i32,
    /// The broker's time of its last append.
    pub last_append_ms: i64,
    /// The coordinator epoch of its last marker (-1: none).
    pub coordinator_epoch: i32,
    /// The first offset of its open transaction (-1: none).
    pub txn_start_offset: i64,
}

impl ProducerState {
    /// The sequence producer `pid`'s next batch at `epoch` must start with (a coordinator
    /// writing for the producer, as TxnOffsetCommit does, follows the rules a client does).
    pub fn next_sequence(&self, pid: i64, epoch: i16) -> i32 {
        match self.producers.get(&pid) {
            Some(p) if p.epoch == epoch => p.batches.back().map_or(0, |b| next_seq(b.last_seq)),
            _ => 0,
        }
    }

    /// Whether producer `pid` at `epoch` has a transaction open on this partition.
    pub fn in_transaction(&self, pid: i64, epoch: i16) -> bool {
        self.producers.get(&pid).is_some_and(|p| p.epoch == epoch && p.txn_first_offset.is_some())
    }

    pub fn len(&self) -> usize {
        self.producers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }

    /// Every known producer, by id (DescribeProducers).
    /// Each producer's last batch: its id and that batch's last offset (compaction keeps the
    /// batch, emptied if need be, so the producer's sequence stays known).
    pub fn last_batches(&self) -> std::collections::HashMap<i64, i64> {
        self.producers.iter().filter_map(|(&pid, p)| p.batches.back().map(|b| (pid, b.last_offset))).collect()
    }

    pub fn active(&self) -> Vec<ActiveProducer> {
        let mut out: Vec<_> = self
            .producers
            .iter()
            .map(|(&producer_id, p)| ActiveProducer {
                producer_id,
                epoch: p.epoch,
                last_sequence: p.batches.back().map_or(-1, |b| b.last_seq),
                last_append_ms: p.last_append_ms,
                coordinator_epoch: p.coordinator_epoch,
                txn_start_offset: p.txn_first_offset.unwrap_or(-1),
            })
            .collect();
        out.sort_unstable_by_key(|a| a.producer_id);
        out
    }

    /// Apply the rules to a batch of producer `pid`, `epoch`, sequences `first..=last`
    /// (`transactional`: the batch's transactional bit).
    pub fn check(
        &self,
        pid: i64,
        epoch: i16,
        first: i32,
        last: i32,
        transactional: bool,
    ) -> Result<Verdict, SequenceError> {
        let Some(p) = self.producers.get(&pid) else {
            // Unknown here (new to this partition, or expired): any sequence starts its history,
            // as Kafka (2.5+) accepts it.
            return Ok(Verdict::Append);
        };
        if epoch < p.epoch {
            return Err(SequenceError::InvalidEpoch { pid, epoch, current: p.epoch });
        }
        if !transactional && p.txn_first_offset.is_some() {
            return Err(SequenceError::InTransaction { pid });
        }
        if epoch > p.epoch {
            return if first == 0 {
                Ok(Verdict::Append)
            } else {
                Err(SequenceError::OutOfOrder { pid, epoch, expected: 0, found: first })
            };
        }
        if let Some(b) = p.batches.iter().find(|b| b.first_seq == first && b.last_seq == last) {
            return Ok(Verdict::Duplicate { first_offset: b.first_offset, last_offset: b.last_offset });
        }
        let expected = p.batches.back().map_or(0, |b| next_seq(b.last_seq));
        if first != expected {
            return Err(SequenceError::OutOfOrder { pid, epoch, expected, found: first });
        }
        Ok(Verdict::Append)
    }

    /// The producer's entry, made if new; at [`MAX_PRODUCERS`], a new producer first evicts
    /// the one idle the longest among those without an open transaction.
    fn entry(&mut self, pid: i64, epoch: i16, now: i64) -> &mut Producer {
        if self.producers.len() >= MAX_PRODUCERS && !self.producers.contains_key(&pid) {
            let idle = self.producers.iter().filter(|(_, p)| p.txn_first_offset.is_none());
            if let Some((&old, _)) = idle.min_by_key(|(_, p)| p.last_append_ms) {
                self.producers.remove(&old);
            }
        }
        self.producers.entry(pid).or_insert_with(|| Producer::new(epoch, now))
    }

    /// Record an appended batch (after [`ProducerState::check`] said to append it, or when
    /// replaying the log); a transactional one opens its producer's transaction if none is.
    pub fn record(&mut self, pid: i64, epoch: i16, seq: BatchSeq, now: i64, transactional: bool) {
        let p = self.entry(pid, epoch, now);
        if epoch != p.epoch {
            p.epoch = epoch;
            p.batches.clear();
        }
        if p.batches.len() == MAX_CACHED {
            p.batches.pop_front();
        }
        p.batches.push_back(seq);
        p.last_append_ms = p.last_append_ms.max(now);
        if transactional && p.txn_first_offset.is_none() {
            p.txn_first_offset = Some(seq.first_offset);
            self.ongoing.insert(seq.first_offset, pid);
        }
    }

    /// Check a marker for producer `pid` at `epoch` before it is appended.
    pub fn check_marker(&self, pid: i64, epoch: i16, marker: &Marker) -> Result<(), SequenceError> {
        let Some(p) = self.producers.get(&pid) else { return Ok(()) };
        if epoch < p.epoch {
            return Err(SequenceError::MarkerEpoch { pid, epoch, current: p.epoch });
        }
        if marker.coordinator_epoch < p.coordinator_epoch {
            return Err(SequenceError::CoordinatorFenced {
                pid,
                found: marker.coordinator_epoch,
                current: p.coordinator_epoch,
            });
        }
        Ok(())
    }

    /// Record a marker appended at `offset` (after [`ProducerState::check_marker`], or when
    /// replaying): the transaction it ends here, if one was open. A marker of a newer epoch
    /// (a fenced producer's abort) starts that epoch's history; one of the same epoch keeps
    /// the producer's sequences.
    pub fn record_marker(
        &mut self,
        pid: i64,
        epoch: i16,
        marker: &Marker,
        offset: i64,
        now: i64,
    ) -> Option<CompletedTxn> {
        let p = self.entry(pid, epoch, now);
        if epoch != p.epoch {
            p.epoch = epoch;
            p.batches.clear();
        }
        p.coordinator_epoch = p.coordinator_epoch.max(marker.coordinator_epoch);
        p.last_append_ms = p.last_append_ms.max(now);
        let first_offset = p.txn_first_offset.take()?;
        self.ongoing.remove(&first_offset);
        self.unreplicated.insert(first_offset, offset);
        Some(CompletedTxn { producer_id: pid, first_offset, last_offset: offset, aborted: !marker.commit })
    }

    /// The last stable offset an aborted transaction's index entry keeps (Kafka's): the first
    /// offset of the earliest transaction another producer has open, else the offset after
    /// the marker. A read of the aborted-transaction index can stop at the first entry whose
    /// value reaches past what it reads.
    pub fn last_stable_offset_after(&self, completed: &CompletedTxn) -> i64 {
        self.ongoing
            .iter()
            .find(|(_, pid)| **pid != completed.producer_id)
            .map_or(completed.last_offset + 1, |(first, _)| *first)
    }

    /// The high watermark reached `hw`: completed transactions whose marker is below it are
    /// stable.
    pub fn on_high_watermark(&mut self, hw: i64) {
        self.unreplicated.retain(|_, last| *last >= hw);
    }

    /// The first offset a READ_COMMITTED reader may not read past (`None`: no transaction
    /// holds it back; the high watermark does).
    pub fn first_unstable_offset(&self) -> Option<i64> {
        let ongoing = self.ongoing.keys().next();
        let unreplicated = self.unreplicated.keys().next();
        ongoing.into_iter().chain(unreplicated).min().copied()
    }

    /// Replay a stored v2 batch whose first offset is `first_offset` (recovery scans), as if
    /// appended at broker time `at_ms` (a batch's own timestamp is the producer's, which may be
    /// anything): a data batch records its sequences and opens its transaction, a marker ends
    /// it (the transaction it completes, for the aborted-transaction index).
    pub fn replay(&mut self, h: &BatchHeader, batch: &[u8], first_offset: i64, at_ms: i64) -> Option<CompletedTxn> {
        if h.producer_id < 0 {
            return None;
        }
        if h.is_control() {
            let marker = Marker::read(h, batch).ok()??;
            return self.record_marker(h.producer_id, h.producer_epoch, &marker, first_offset, at_ms);
        }
        // What the disk holds is not checked as an append is: a negative delta names no
        // records, and one of i32::MAX has a count past i32 (the fuzzer's recovery target).
        if h.base_sequence < 0 || h.last_offset_delta < 0 {
            return None;
        }
        let seq = BatchSeq {
            first_seq: h.base_sequence,
            last_seq: last_seq(h.base_sequence, h.last_offset_delta as i64 + 1),
            first_offset,
            last_offset: first_offset + h.last_offset_delta as i64,
        };
        self.record(h.producer_id, h.producer_epoch, seq, at_ms, h.is_transactional());
        None
    }

    /// Forget producers idle since before `before_ms` (Kafka's `producer.id.expiration.ms`),
    /// except those with a transaction open.
    pub fn expire(&mut self, before_ms: i64) -> usize {
        let n = self.producers.len();
        self.producers.retain(|_, p| p.last_append_ms >= before_ms || p.txn_first_offset.is_some());
        n - self.producers.len()
    }

    /// The snapshot file's bytes:
    /// `TMPSNAP2`, count u32, then per producer: id i64, epoch i16, last append ms i64,
    /// coordinator epoch i32, open transaction's first offset i64 (-1: none), batches u8, per
    /// batch: first seq i32, last seq i32, first offset i64, last offset i64; then CRC-32C u32
    /// of everything before it. Big-endian. Producers in id order. (`TMPSNAP1`, read too, has
    /// no coordinator epoch nor transaction.)
    pub fn encode(&self) -> Vec<u8> {
        let mut ids: Vec<&i64> = self.producers.keys().collect();
        ids.sort_unstable();
        let mut out = Vec::with_capacity(16 + self.producers.len() * (31 + MAX_CACHED * 24));
        out.extend_from_slice(SNAPSHOT_MAGIC);
        out.extend_from_slice(&(ids.len() as u32).to_be_bytes());
        for id in ids {
            let p = &self.producers[id];
            out.extend_from_slice(&id.to_be_bytes());
            out.extend_from_slice(&p.epoch.to_be_bytes());
            out.extend_from_slice(&p.last_append_ms.to_be_bytes());
            out.extend_from_slice(&p.coordinator_epoch.to_be_bytes());
            out.extend_from_slice(&p.txn_first_offset.unwrap_or(-1).to_be_bytes());
            out.push(p.batches.len() as u8);
            for b in &p.batches {
                out.extend_from_slice(&b.first_seq.to_be_bytes());
                out.extend_from_slice(&b.last_seq.to_be_bytes());
                out.extend_from_slice(&b.first_offset.to_be_bytes());
                out.extend_from_slice(&b.last_offset.to_be_bytes());
            }
        }
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_be_bytes());
        out
    }

    /// Decode a snapshot; any damage (length, magic, CRC, a count past the end) is an error.
    pub fn decode(bytes: &[u8]) -> Result<ProducerState, FormatError> {
        let bad = || FormatError::BadRecords("damaged producer snapshot");
        if bytes.len() < SNAPSHOT_MAGIC.len() + 8 || (&bytes[..8] != SNAPSHOT_MAGIC && &bytes[..8] != SNAPSHOT_V1) {
            return Err(bad());
        }
        let v2 = &bytes[..8] == SNAPSHOT_MAGIC;
        let (body, crc) = bytes.split_at(bytes.len() - 4);
        if crc32c::crc32c(body) != u32::from_be_bytes(crc.try_into().expect("4 bytes")) {
            return Err(bad());
        }
        let mut pos = 8;
        let mut take = |n: usize| -> Result<&[u8], FormatError> {
            let s = body.get(pos..pos + n).ok_or_else(bad)?;
            pos += n;
            Ok(s)
        };
        let be64 = |b: &[u8]| i64::from_be_bytes(b.try_into().expect("8 bytes"));
        let be32 = |b: &[u8]| i32::from_be_bytes(b.try_into().expect("4 bytes"));
        let count = u32::from_be_bytes(take(4)?.try_into().expect("4 bytes"));
        let mut state = ProducerState::default();
        for _ in 0..count {
            let id = be64(take(8)?);
            let epoch = i16::from_be_bytes(take(2)?.try_into().expect("2 bytes"));
            let last_append_ms = be64(take(8)?);
            let (coordinator_epoch, txn_first_offset) =
                if v2 { (be32(take(4)?), Some(be64(take(8)?)).filter(|o| *o >= 0)) } else { (-1, None) };
            let n = take(1)?[0] as usize;
            if n > MAX_CACHED {
                return Err(bad());
            }
            let mut batches = VecDeque::with_capacity(n);
            for _ in 0..n {
                let first_seq = be32(take(4)?);
                let last_seq = be32(take(4)?);
                let first_offset = be64(take(8)?);
                let last_offset = be64(take(8)?);
                batches.push_back(BatchSeq { first_seq, last_seq, first_offset, last_offset });
            }
            if let Some(first) = txn_first_offset {
                state.ongoing.insert(first, id);
            }
            let p = Producer { epoch, batches, last_append_ms, coordinator_epoch, txn_first_offset };
            state.producers.insert(id, p);
        }
        if pos != body.len() {
            return Err(bad());
        }
        Ok(state)
    }
}

const SNAPSHOT_MAGIC: &[u8; 8] = b"TMPSNAP2";
const SNAPSHOT_V1: &[u8; 8] = b"TMPSNAP1";

#[cfg(test)]
mod tests {
    use super::*;

    fn seq(first: i32, last: i32, off: i64) -> BatchSeq {
        BatchSeq { first_seq: first, last_seq: last, first_offset: off, last_offset: off + (last - first) as i64 }
    }

    /// The sequence rules, one by one.
    #[test]
    fn sequences_epochs_and_duplicates() {
        let mut s = ProducerState::default();
        assert_eq!(s.check(7, 0, 3, 4, false), Ok(Verdict::Append), "an unknown producer may start anywhere");
        assert_eq!(s.check(7, 0, 0, 4, false), Ok(Verdict::Append));
        s.record(7, 0, seq(0, 4, 100), 1, false);
        assert_eq!(s.check(7, 0, 0, 4, false), Ok(Verdict::Duplicate { first_offset: 100, last_offset: 104 }));
        assert_eq!(
            s.check(7, 0, 6, 7, false),
            Err(SequenceError::OutOfOrder { pid: 7, epoch: 0, expected: 5, found: 6 })
        );
        assert_eq!(s.check(7, 0, 5, 9, false), Ok(Verdict::Append));
        for i in 1..=6 {
            s.record(7, 0, seq(i * 5, i * 5 + 4, 100 + i as i64 * 5), 2, false);
        }
        assert!(matches!(s.check(7, 0, 30, 34, false), Ok(Verdict::Duplicate { .. })), "within the last five");
        assert!(s.check(7, 0, 5, 9, false).is_err(), "older than the last five: not a duplicate any more");
        // A new epoch restarts at 0; the old epoch is fenced.
        assert!(s.check(7, 1, 35, 36, false).is_err());
        assert_eq!(s.check(7, 1, 0, 0, false), Ok(Verdict::Append));
        s.record(7, 1, seq(0, 0, 200), 3, false);
        assert_eq!(s.check(7, 0, 35, 35, false), Err(SequenceError::InvalidEpoch { pid: 7, epoch: 0, current: 1 }));
        // Sequences wrap after i32::MAX.
        assert_eq!(last_seq(i32::MAX, 2), 0);
        // A stored batch's count may pass i32 (a delta of i32::MAX): no overflow; a full turn
        // of 2^31 sequences ends one before where it began.
        assert_eq!(last_seq(5, i32::MAX as i64 + 1), 4);
        s.record(9, 0, seq(0, 0, 300), 4, false);
        s.producers.get_mut(&9).unwrap().batches.back_mut().unwrap().last_seq = i32::MAX;
        assert_eq!(s.check(9, 0, 0, 3, false), Ok(Verdict::Append));
        // Expiry.
        assert_eq!(s.expire(4), 1);
        assert_eq!(s.len(), 1);
    }

    /// Transactions: a transactional batch opens its producer's transaction (the first
    /// unstable offset), a non-transactional one is refused while it is open, a marker ends it
    /// (commit or abort) and keeps the sequences of the same epoch; markers of an older epoch
    /// or coordinator epoch are refused; a fencing abort of a newer epoch restarts the
    /// sequences; the LSO an aborted entry keeps is another producer's open transaction;
    /// completed transactions hold the first unstable offset until the high watermark passes
    /// their marker; snapshots keep open transactions; open ones are never expired.
    #[test]
    fn transactions() {
        let commit = Marker { commit: true, coordinator_epoch: 1 };
        let abort = Marker { commit: false, coordinator_epoch: 1 };
        let mut s = ProducerState::default();
        s.record(7, 0, seq(0, 4, 10), 1, true);
        s.record(7, 0, seq(5, 9, 20), 1, true);
        s.record(8, 0, seq(0, 0, 15), 1, true);
        assert_eq!(s.first_unstable_offset(), Some(10));
        assert_eq!(s.check(7, 0, 10, 10, false), Err(SequenceError::InTransaction { pid: 7 }));
        assert_eq!(s.check(7, 0, 10, 10, true), Ok(Verdict::Append));
        let done = s.record_marker(7, 0, &commit, 30, 2).unwrap();
        assert_eq!(done, CompletedTxn { producer_id: 7, first_offset: 10, last_offset: 30, aborted: false });
        assert_eq!(s.last_stable_offset_after(&done), 15, "producer 8's open transaction");
        assert_eq!(s.first_unstable_offset(), Some(10), "until the high watermark passes the marker");
        s.on_high_watermark(31);
        assert_eq!(s.first_unstable_offset(), Some(15));
        assert_eq!(s.check(7, 0, 10, 10, false), Ok(Verdict::Append), "sequences go on after the marker");
        assert_eq!(s.record_marker(7, 0, &commit, 31, 2), None, "a marker with nothing open ends nothing");
        // A fencing abort (epoch 1) for producer 8, from an older coordinator first.
        let stale = Marker { commit: false, coordinator_epoch: 0 };
        s.record_marker(9, 0, &abort, 32, 2);
        assert!(s.check_marker(9, 0, &stale).is_err(), "an older coordinator epoch");
        assert!(s.check_marker(8, 1, &abort).is_ok());
        let done = s.record_marker(8, 1, &abort, 33, 3).unwrap();
        assert!(done.aborted);
        assert_eq!(s.last_stable_offset_after(&done), 34);
        assert_eq!(s.check_marker(8, 0, &abort), Err(SequenceError::MarkerEpoch { pid: 8, epoch: 0, current: 1 }));
        assert_eq!(
            s.check(8, 1, 5, 5, true),
            Err(SequenceError::OutOfOrder { pid: 8, epoch: 1, expected: 0, found: 5 })
        );
        s.on_high_watermark(34);
        assert_eq!(s.first_unstable_offset(), None);
        // Open transactions survive a snapshot and expiry.
        s.record(8, 1, seq(0, 0, 40), 4, true);
        let back = ProducerState::decode(&s.encode()).unwrap();
        assert_eq!(back.first_unstable_offset(), Some(40));
        assert_eq!(back.active().iter().find(|a| a.producer_id == 8).unwrap().txn_start_offset, 40);
        let mut back = back;
        back.expire(i64::MAX);
        assert_eq!(back.active().iter().map(|a| a.producer_id).collect::<Vec<_>>(), vec![8]);
    }

    /// Recovery (SPEC T8.2) replays what the disk holds, which no append checked: a stored batch
    /// whose delta is negative names no records and records nothing; one whose delta is
    /// i32::MAX (a count past i32) is recorded without overflow (the fuzzer's recovery target).
    #[test]
    fn replay_takes_any_stored_delta() {
        let header = |delta: i32| BatchHeader {
            base_offset: 0,
            batch_length: 61,
            partition_leader_epoch: 0,
            magic: 2,
            crc: 0,
            attributes: 0,
            last_offset_delta: delta,
            first_timestamp: 0,
            max_timestamp: 0,
            producer_id: 7,
            producer_epoch: 0,
            base_sequence: 0,
            record_count: 1,
        };
        let mut s = ProducerState::default();
        for delta in [-1, i32::MIN] {
            assert_eq!(s.replay(&header(delta), &[], 10, 0), None);
            assert_eq!(s, ProducerState::default(), "a negative delta ({delta}) recorded a batch");
        }
        assert_eq!(s.replay(&header(i32::MAX), &[], 10, 0), None);
        let b = s.producers[&7].batches.back().copied().expect("recorded");
        assert_eq!((b.first_seq, b.last_seq), (0, i32::MAX));
        assert_eq!((b.first_offset, b.last_offset), (10, 10 + i32::MAX as i64));
    }

    /// Snapshots round-trip; damage is detected.
    #[test]
    fn snapshots_round_trip_and_detect_damage() {
        let mut s = ProducerState::default();
        for pid in 0..20 {
            for i in 0..(pid as i32 % 7) {
                s.record(pid, (pid % 3) as i16, seq(i * 2, i * 2 + 1, pid * 100 + i as i64 * 2), pid, false);
            }
        }
        let bytes = s.encode();
        assert_eq!(ProducerState::decode(&bytes).unwrap(), s);
        assert_eq!(ProducerState::decode(&ProducerState::default().encode()).unwrap(), ProducerState::default());
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x40;
            assert!(ProducerState::decode(&b).is_err(), "flip at {i}");
        }
        assert!(ProducerState::decode(&bytes[..bytes.len() - 1]).is_err());
        // A version 1 snapshot (before transactions) is still read.
        let mut v1 = b"TMPSNAP1".to_vec();
        v1.extend_from_slice(&1u32.to_be_bytes());
        v1.extend_from_slice(&5i64.to_be_bytes());
        v1.extend_from_slice(&2i16.to_be_bytes());
        v1.extend_from_slice(&77i64.to_be_bytes());
        v1.push(1);
        for v in [0i32, 3] {
            v1.extend_from_slice(&v.to_be_bytes());
        }
        for v in [100i64, 103] {
            v1.extend_from_slice(&v.to_be_bytes());
        }
        let crc = crc32c::crc32c(&v1);
        v1.extend_from_slice(&crc.to_be_bytes());
        let old = ProducerState::decode(&v1).unwrap();
        assert_eq!(old.check(5, 2, 0, 3, false), Ok(Verdict::Duplicate { first_offset: 100, last_offset: 103 }));
        assert_eq!(old.first_unstable_offset(), None);
    }
}
