//! The aborted-transaction index of a segment (Kafka's `.txnindex`): one 34-byte entry per
//! transaction an ABORT marker in the segment ended, in marker order, big-endian:
//!
//! ```text
//! version i16 = 0, producer id i64, first offset i64 (the transaction's first data offset),
//! last offset i64 (the marker's), last stable offset i64 (when the marker was written)
//! ```
//!
//! A READ_COMMITTED fetch lists the aborted transactions that overlap what it returns, so the
//! client can drop their batches ([`collect`]).

use super::FormatError;

pub const ENTRY_LEN: usize = 34;

/// One aborted transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    pub last_offset: i64,
    pub last_stable_offset: i64,
}

impl AbortedTxn {
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&0i16.to_be_bytes());
        for v in [self.producer_id, self.first_offset, self.last_offset, self.last_stable_offset] {
            out.extend_from_slice(&v.to_be_bytes());
        }
    }
}

/// Every entry of an index file's bytes; a length that is not a whole number of entries, a
/// version other than 0, or offsets out of order (Kafka appends markers in order) are errors.
pub fn decode(bytes: &[u8]) -> Result<Vec<AbortedTxn>, FormatError> {
    if !bytes.len().is_multiple_of(ENTRY_LEN) {
        return Err(FormatError::BadRecords("an aborted-transaction index cut mid-entry"));
    }
    let mut out: Vec<AbortedTxn> = Vec::with_capacity(bytes.len() / ENTRY_LEN);
    for e in bytes.chunks_exact(ENTRY_LEN) {
        if i16::from_be_bytes([e[0], e[1]]) != 0 {
            return Err(FormatError::BadRecords("an aborted-transaction index entry of an unknown version"));
        }
        let at = |i: usize| i64::from_be_bytes(e[2 + i * 8..10 + i * 8].try_into().expect("8 bytes"));
        let t = AbortedTxn { producer_id: at(0), first_offset: at(1), last_offset: at(2), last_stable_offset: at(3) };
        if t.first_offset > t.last_offset || out.last().is_some_and(|p| p.last_offset >= t.last_offset) {
            return Err(FormatError::BadRecords("aborted-transaction index entries out of order"));
        }
        out.push(t);
    }
    Ok(out)
}

/// Kafka's collection for a fetch of `[fetch_offset, upper_bound)`, one segment's entries at
/// a time from the segment holding `fetch_offset` on: the aborted transactions that end at or
/// after `fetch_offset` and begin before `upper_bound`, added to `out`; `true` when no later
/// segment can hold more (an entry whose last stable offset reaches `upper_bound`: every
/// transaction aborted after it began at or after that offset).
pub fn collect(entries: &[AbortedTxn], fetch_offset: i64, upper_bound: i64, out: &mut Vec<(i64, i64)>) -> bool {
    for t in entries {
        if t.last_offset >= fetch_offset && t.first_offset < upper_bound {
            out.push((t.producer_id, t.first_offset));
        }
        if t.last_stable_offset >= upper_bound {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(pid: i64, first: i64, last: i64, lso: i64) -> AbortedTxn {
        AbortedTxn { producer_id: pid, first_offset: first, last_offset: last, last_stable_offset: lso }
    }

    /// Entries round-trip in 34 bytes each; damage is an error.
    #[test]
    fn entries_round_trip() {
        let entries = vec![t(1, 0, 10, 11), t(2, 5, 20, 12), t(1, 30, 31, 32)];
        let mut bytes = Vec::new();
        entries.iter().for_each(|e| e.encode(&mut bytes));
        assert_eq!(bytes.len(), 3 * ENTRY_LEN);
        assert_eq!(decode(&bytes).unwrap(), entries);
        assert!(decode(&bytes[..ENTRY_LEN + 1]).is_err());
        let mut bad = bytes.clone();
        bad[1] = 1;
        assert!(decode(&bad).is_err(), "a version other than 0");
        let mut swapped = Vec::new();
        [entries[1], entries[0]].iter().for_each(|e| e.encode(&mut swapped));
        assert!(decode(&swapped).is_err(), "out of order");
        assert_eq!(decode(&[]).unwrap(), vec![]);
    }

    /// A fetch of [15, 25) lists the transactions overlapping it (not one that ended before
    /// it, not one that began after it) and stops at the first entry whose last stable offset
    /// reaches 25; one whose entries never reach it goes on to the next segment.
    #[test]
    fn collection_is_kafkas() {
        let seg = [t(1, 0, 10, 11), t(2, 5, 20, 12), t(3, 14, 22, 23), t(4, 26, 27, 28), t(5, 24, 29, 30)];
        let mut out = Vec::new();
        assert!(collect(&seg, 15, 25, &mut out));
        assert_eq!(out, vec![(2, 5), (3, 14)], "stops at producer 4's entry (LSO 28 >= 25)");
        let mut out = Vec::new();
        assert!(!collect(&seg[..3], 15, 25, &mut out), "the next segment may hold more");
        let mut out = Vec::new();
        collect(&seg, 0, 100, &mut out);
        assert_eq!(out.len(), 5);
    }
}
