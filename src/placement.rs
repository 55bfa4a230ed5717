//! Where a partition lives: the shard that owns it, by a stable hash (the same on every
//! restart and on every shard). Every routing decision goes through [`owner`].

/// The shard that owns a partition.
pub fn owner(topic: &str, partition: i32, shards: usize) -> usize {
    ((crc32c::crc32c(topic.as_bytes()) as u64).wrapping_add(partition as u32 as u64) % shards as u64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Placement is stable (a restart must find each partition on the same shard) and spreads
    /// a topic's partitions over every shard.
    #[test]
    fn owner_is_stable_and_spreads() {
        assert_eq!(owner("orders", 0, 2), owner("orders", 0, 2));
        let on: std::collections::BTreeSet<usize> = (0..8).map(|p| owner("orders", p, 4)).collect();
        assert_eq!(on.len(), 4);
        assert!((0..100).all(|p| owner("t", p, 3) < 3));
    }
}
