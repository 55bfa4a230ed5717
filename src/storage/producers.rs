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
//! The state is rebuilt, never trusted blindly: a snapshot written when a segment is sealed
//! holds the state at that segment's end (`<end offset>.snapshot`); at open the latest one at or
//! below the active segment's base is loaded and the active segment's batches replayed on top
//! (the recovery scan). Pure: no I/O here; byte layout in `docs/format.md`.

use crate::storage::format::batch::BatchHeader;
use crate::storage::format::FormatError;
use std::collections::{HashMap, VecDeque};

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
}

fn next_seq(s: i32) -> i32 {
    if s == i32::MAX {
        0
    } else {
        s + 1
    }
}

/// The last sequence of a batch starting at `first` with `count` records (wrapping).
pub fn last_seq(first: i32, count: i32) -> i32 {
    ((first as i64 + count as i64 - 1) % (i32::MAX as i64 + 1)) as i32
}

/// The producers of one partition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProducerState {
    producers: HashMap<i64, Producer>,
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
}

impl ProducerState {
    pub fn len(&self) -> usize {
        self.producers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }

    /// Every known producer, by id (DescribeProducers).
    pub fn active(&self) -> Vec<ActiveProducer> {
        let mut out: Vec<_> = self
            .producers
            .iter()
            .map(|(&producer_id, p)| ActiveProducer {
                producer_id,
                epoch: p.epoch,
                last_sequence: p.batches.back().map_or(-1, |b| b.last_seq),
                last_append_ms: p.last_append_ms,
            })
            .collect();
        out.sort_unstable_by_key(|a| a.producer_id);
        out
    }

    /// Apply the rules to a batch of producer `pid`, `epoch`, sequences `first..=last`.
    pub fn check(&self, pid: i64, epoch: i16, first: i32, last: i32) -> Result<Verdict, SequenceError> {
        let Some(p) = self.producers.get(&pid) else {
            // Unknown here (new to this partition, or expired): any sequence starts its history,
            // as Kafka (2.5+) accepts it.
            return Ok(Verdict::Append);
        };
        if epoch < p.epoch {
            return Err(SequenceError::InvalidEpoch { pid, epoch, current: p.epoch });
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

    /// Record an appended batch (after [`ProducerState::check`] said to append it, or when
    /// replaying the log). At [`MAX_PRODUCERS`], a new producer first evicts the one idle the
    /// longest.
    pub fn record(&mut self, pid: i64, epoch: i16, seq: BatchSeq, now: i64) {
        if self.producers.len() >= MAX_PRODUCERS && !self.producers.contains_key(&pid) {
            if let Some((&old, _)) = self.producers.iter().min_by_key(|(_, p)| p.last_append_ms) {
                self.producers.remove(&old);
            }
        }
        let p = self.producers.entry(pid).or_insert(Producer { epoch, batches: VecDeque::new(), last_append_ms: now });
        if epoch != p.epoch {
            p.epoch = epoch;
            p.batches.clear();
        }
        if p.batches.len() == MAX_CACHED {
            p.batches.pop_front();
        }
        p.batches.push_back(seq);
        p.last_append_ms = p.last_append_ms.max(now);
    }

    /// Replay a stored v2 batch whose first offset is `first_offset` (recovery scans), as if
    /// appended at broker time `at_ms` (a batch's own timestamp is the producer's, which may be
    /// anything).
    pub fn replay(&mut self, h: &BatchHeader, first_offset: i64, at_ms: i64) {
        if h.producer_id < 0 || h.base_sequence < 0 {
            return;
        }
        let count = h.last_offset_delta + 1;
        let seq = BatchSeq {
            first_seq: h.base_sequence,
            last_seq: last_seq(h.base_sequence, count),
            first_offset,
            last_offset: first_offset + h.last_offset_delta as i64,
        };
        self.record(h.producer_id, h.producer_epoch, seq, at_ms);
    }

    /// Forget producers idle since before `before_ms` (Kafka's `producer.id.expiration.ms`).
    pub fn expire(&mut self, before_ms: i64) -> usize {
        let n = self.producers.len();
        self.producers.retain(|_, p| p.last_append_ms >= before_ms);
        n - self.producers.len()
    }

    /// The snapshot file's bytes:
    /// `TMPSNAP1`, count u32, then per producer: id i64, epoch i16, last append ms i64,
    /// batches u8, per batch: first seq i32, last seq i32, first offset i64, last offset i64;
    /// then CRC-32C u32 of everything before it. Big-endian. Producers in id order.
    pub fn encode(&self) -> Vec<u8> {
        let mut ids: Vec<&i64> = self.producers.keys().collect();
        ids.sort_unstable();
        let mut out = Vec::with_capacity(16 + self.producers.len() * (19 + MAX_CACHED * 24));
        out.extend_from_slice(SNAPSHOT_MAGIC);
        out.extend_from_slice(&(ids.len() as u32).to_be_bytes());
        for id in ids {
            let p = &self.producers[id];
            out.extend_from_slice(&id.to_be_bytes());
            out.extend_from_slice(&p.epoch.to_be_bytes());
            out.extend_from_slice(&p.last_append_ms.to_be_bytes());
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
        if bytes.len() < SNAPSHOT_MAGIC.len() + 8 || &bytes[..8] != SNAPSHOT_MAGIC {
            return Err(bad());
        }
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
            state.producers.insert(id, Producer { epoch, batches, last_append_ms });
        }
        if pos != body.len() {
            return Err(bad());
        }
        Ok(state)
    }
}

const SNAPSHOT_MAGIC: &[u8; 8] = b"TMPSNAP1";

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
        assert_eq!(s.check(7, 0, 3, 4), Ok(Verdict::Append), "an unknown producer may start anywhere");
        assert_eq!(s.check(7, 0, 0, 4), Ok(Verdict::Append));
        s.record(7, 0, seq(0, 4, 100), 1);
        assert_eq!(s.check(7, 0, 0, 4), Ok(Verdict::Duplicate { first_offset: 100, last_offset: 104 }));
        assert_eq!(s.check(7, 0, 6, 7), Err(SequenceError::OutOfOrder { pid: 7, epoch: 0, expected: 5, found: 6 }));
        assert_eq!(s.check(7, 0, 5, 9), Ok(Verdict::Append));
        for i in 1..=6 {
            s.record(7, 0, seq(i * 5, i * 5 + 4, 100 + i as i64 * 5), 2);
        }
        assert!(matches!(s.check(7, 0, 30, 34), Ok(Verdict::Duplicate { .. })), "within the last five");
        assert!(s.check(7, 0, 5, 9).is_err(), "older than the last five: not a duplicate any more");
        // A new epoch restarts at 0; the old epoch is fenced.
        assert!(s.check(7, 1, 35, 36).is_err());
        assert_eq!(s.check(7, 1, 0, 0), Ok(Verdict::Append));
        s.record(7, 1, seq(0, 0, 200), 3);
        assert_eq!(s.check(7, 0, 35, 35), Err(SequenceError::InvalidEpoch { pid: 7, epoch: 0, current: 1 }));
        // Sequences wrap after i32::MAX.
        assert_eq!(last_seq(i32::MAX, 2), 0);
        s.record(9, 0, seq(0, 0, 300), 4);
        s.producers.get_mut(&9).unwrap().batches.back_mut().unwrap().last_seq = i32::MAX;
        assert_eq!(s.check(9, 0, 0, 3), Ok(Verdict::Append));
        // Expiry.
        assert_eq!(s.expire(4), 1);
        assert_eq!(s.len(), 1);
    }

    /// Snapshots round-trip; damage is detected.
    #[test]
    fn snapshots_round_trip_and_detect_damage() {
        let mut s = ProducerState::default();
        for pid in 0..20 {
            for i in 0..(pid as i32 % 7) {
                s.record(pid, (pid % 3) as i16, seq(i * 2, i * 2 + 1, pid * 100 + i as i64 * 2), pid);
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
    }
}
