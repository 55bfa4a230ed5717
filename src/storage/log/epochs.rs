//! The leader-epoch cache (Kafka's `leader-epoch-checkpoint`, KIP-101): for each leader epoch
//! that wrote to the log, the offset of its first batch. A replica that follows a new leader
//! asks where its last epoch ends in the leader's log and truncates exactly the suffix that
//! diverges (KIP-279), never more, never less.
//!
//! Entries grow in both epoch and start offset. A leader adds one when it appends its first
//! batch at a new epoch (the epoch is stamped in each batch's partitionLeaderEpoch, outside
//! the CRC); a follower adds one when a replicated batch carries an epoch newer than the last.
//! A truncation drops the entries at or past the cut. The file is Kafka's text format:
//! `0` (version), the entry count, then `<epoch> <start offset>` per line.

/// The cache's file in a partition directory.
pub const EPOCH_FILE: &str = "leader-epoch-checkpoint";

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Epochs {
    /// (epoch, start offset), both increasing.
    entries: Vec<(i32, i64)>,
}

impl Epochs {
    /// The newest epoch that wrote to the log.
    pub fn latest(&self) -> Option<i32> {
        self.entries.last().map(|e| e.0)
    }

    pub fn entries(&self) -> &[(i32, i64)] {
        &self.entries
    }

    /// A batch of `epoch` was appended at `base`: whether that began a new epoch (the cache
    /// changed and should be saved). Batches without an epoch (-1, legacy) and older epochs
    /// (never written by a leader that follows the rules) change nothing.
    pub fn on_batch(&mut self, epoch: i32, base: i64) -> bool {
        if epoch < 0 || self.latest().is_some_and(|l| l >= epoch) {
            return false;
        }
        self.entries.push((epoch, base));
        true
    }

    /// Kafka's `endOffsetFor`: the largest epoch at or below `epoch` this log has, and the
    /// offset where `epoch` ends here (the start of the first newer epoch, or `log_end` for the
    /// latest). `(-1, -1)` when the log knows no such epoch (empty, or `epoch` newer than any).
    pub fn end_offset_for(&self, epoch: i32, log_end: i64) -> (i32, i64) {
        match self.latest() {
            None => (-1, -1),
            Some(_) if epoch < 0 => (-1, -1),
            Some(latest) if latest == epoch => (epoch, log_end),
            Some(_) => {
                let Some(&(_, higher_start)) = self.entries.iter().find(|e| e.0 > epoch) else {
                    return (-1, -1);
                };
                match self.entries.iter().rev().find(|e| e.0 <= epoch) {
                    Some(&(floor, _)) => (floor, higher_start),
                    None => (epoch, higher_start),
                }
            }
        }
    }

    /// The log now ends at `end`: entries starting at or past it go. Whether any did.
    pub fn truncate_from_end(&mut self, end: i64) -> bool {
        let n = self.entries.len();
        self.entries.retain(|e| e.1 < end);
        n != self.entries.len()
    }

    /// The log starts again, empty (a replica restarted at the leader's log start).
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut s = format!("0\n{}\n", self.entries.len());
        for (epoch, start) in &self.entries {
            s.push_str(&format!("{epoch} {start}\n"));
        }
        s.into_bytes()
    }

    /// The cache from its file; `None` for a file that is not one (the log then starts
    /// without, and learns epochs from new batches).
    pub fn decode(bytes: &[u8]) -> Option<Epochs> {
        let text = std::str::from_utf8(bytes).ok()?;
        let mut lines = text.lines();
        if lines.next()?.trim() != "0" {
            return None;
        }
        let count: usize = lines.next()?.trim().parse().ok()?;
        let mut entries = Vec::with_capacity(count.min(1024));
        for line in lines.by_ref().take(count) {
            let mut parts = line.split_whitespace();
            let epoch: i32 = parts.next()?.parse().ok()?;
            let start: i64 = parts.next()?.parse().ok()?;
            if entries.last().is_some_and(|&(e, s)| e >= epoch || s > start) {
                return None;
            }
            entries.push((epoch, start));
        }
        (entries.len() == count).then_some(Epochs { entries })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(entries: &[(i32, i64)]) -> Epochs {
        let mut c = Epochs::default();
        for &(e, s) in entries {
            assert!(c.on_batch(e, s));
        }
        c
    }

    /// Only a newer epoch adds an entry; -1 (no epoch) and older ones change nothing.
    #[test]
    fn entries_grow_only_with_newer_epochs() {
        let mut c = cache(&[(0, 0), (2, 10)]);
        assert!(!c.on_batch(2, 15));
        assert!(!c.on_batch(1, 20));
        assert!(!c.on_batch(-1, 20));
        assert!(c.on_batch(5, 30));
        assert_eq!(c.entries(), &[(0, 0), (2, 10), (5, 30)]);
    }

    /// Kafka's endOffsetFor: the latest epoch ends at the log end; an older one where the
    /// next begins, named by the largest epoch at or below it; unknown epochs give (-1, -1).
    #[test]
    fn end_offsets_follow_kafka() {
        let c = cache(&[(1, 0), (3, 10), (6, 25)]);
        assert_eq!(c.end_offset_for(6, 40), (6, 40));
        assert_eq!(c.end_offset_for(3, 40), (3, 25));
        assert_eq!(c.end_offset_for(4, 40), (3, 25), "an epoch that never wrote: the floor's");
        assert_eq!(c.end_offset_for(0, 40), (0, 0), "older than any: ends where the first begins");
        assert_eq!(c.end_offset_for(7, 40), (-1, -1));
        assert_eq!(c.end_offset_for(-1, 40), (-1, -1));
        assert_eq!(Epochs::default().end_offset_for(0, 0), (-1, -1));
    }

    /// A truncation drops the entries at or past the new end, and only those.
    #[test]
    fn truncation_drops_the_suffix() {
        let mut c = cache(&[(1, 0), (3, 10), (6, 25)]);
        assert!(!c.truncate_from_end(26));
        assert!(c.truncate_from_end(25));
        assert_eq!(c.entries(), &[(1, 0), (3, 10)]);
        assert!(c.truncate_from_end(3));
        assert_eq!(c.entries(), &[(1, 0)]);
    }

    /// The file round-trips; a damaged or disordered one is refused.
    #[test]
    fn file_round_trips_and_refuses_damage() {
        let c = cache(&[(1, 0), (3, 10)]);
        assert_eq!(std::str::from_utf8(&c.encode()).unwrap(), "0\n2\n1 0\n3 10\n");
        assert_eq!(Epochs::decode(&c.encode()), Some(c));
        assert_eq!(Epochs::decode(b"0\n0\n"), Some(Epochs::default()));
        assert_eq!(Epochs::decode(b"1\n0\n"), None);
        assert_eq!(Epochs::decode(b"0\n2\n1 0\n"), None, "fewer entries than counted");
        assert_eq!(Epochs::decode(b"0\n2\n3 0\n1 10\n"), None, "epochs out of order");
        assert_eq!(Epochs::decode(b"0\n1\nx 0\n"), None);
    }
}
