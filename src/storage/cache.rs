//! The batch cache: a shard's recently written and recently read log bytes, so consumers at
//! the tail (and, later, followers) read from memory what was written a moment ago instead of
//! reading it back from disk.
//!
//! What goes in:
//! - a write tail's chunks once durable (a commit job completed): the chunk itself moves here,
//!   no copy; a mostly empty chunk (a small commit in a large buffer) is copied out instead, so
//!   the cache never holds far more memory than bytes;
//! - the batches a disk read returned (the same bytes the reader gets, no copy).
//!
//! Entries are keyed by (log, segment base offset, file position) and hold file bytes from
//! there: within a segment a position's bytes never change while the segment exists, so any
//! entry covering a position serves it, and a read may run across contiguous entries. A
//! compaction swap (new bytes under the same base), a deleted segment and a closed log forget
//! their entries; a disk read planned before a swap is not inserted after it (the log checks
//! its generation). The cache holds durable bytes only, so a read from it never passes the
//! high watermark the read asked for (the log bounds every lookup).
//!
//! Memory: every entry holds its bytes from the shard's fetch budget
//! (`tidemark.fetch.max.memory.bytes`), taken only when free and no fetch waits for memory,
//! and the oldest entries go first (FIFO) when an insert needs room or a fetch that does not
//! fit arrives ([`BatchCache::release`]). Chunks held here are DMA buffers from the shard's
//! registered pool, which the write path needs: at most a quarter of the pool stays here.
//!
//! Shard-local: one per shard, shared by its logs through [`CacheHandle`]s.

use crate::budget::{Budget, Held};
use crate::io::IoBuf;
use bytes::Bytes;
use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;

/// (log id, segment base offset, file position).
type Key = (u64, i64, u64);

/// An entry larger than this share of the budget is not cached (it would empty the cache for
/// one read).
pub const MAX_ENTRY_SHARE: u64 = 8;

enum Data<B> {
    /// A write tail's chunk, moved here once durable; its first `len` bytes are the data.
    Chunk(Rc<B>),
    /// Bytes read from disk, or copied out of a mostly empty chunk.
    Bytes(Bytes),
}

struct Entry<B> {
    data: Data<B>,
    /// File bytes from the key's position.
    len: usize,
    /// Insert order, to tell this entry from a later one at the same key in the FIFO.
    seq: u64,
    /// Bytes of the shard's registered DMA pool this entry keeps (a chunk's allocation).
    dma: usize,
    /// Its memory, counted in the fetch budget.
    held: Held,
}

impl<B: IoBuf> Entry<B> {
    fn bytes(&self) -> &[u8] {
        match &self.data {
            Data::Chunk(c) => &(**c).as_ref()[..self.len],
            Data::Bytes(b) => &b[..self.len],
        }
    }
}

/// What the cache holds and did, for `/metrics`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CacheStats {
    /// Memory held (counted in the fetch budget).
    pub bytes: u64,
    /// Entries held (counted when asked, not kept).
    pub entries: u64,
    /// Of `bytes`, DMA buffers of the registered pool.
    pub dma_bytes: u64,
    /// Reads served from the cache, and their bytes.
    pub hits: u64,
    pub hit_bytes: u64,
    /// Reads that went to disk.
    pub misses: u64,
    pub miss_bytes: u64,
    /// Entries dropped to make room or give memory to fetches.
    pub evictions: u64,
}

pub struct BatchCache<B> {
    budget: Budget,
    /// The most DMA pool memory the cache keeps.
    dma_cap: usize,
    inner: RefCell<Inner<B>>,
}

struct Inner<B> {
    entries: BTreeMap<Key, Entry<B>>,
    /// Keys in insert order, with their entries' `seq` (stale pairs are skipped).
    fifo: VecDeque<(Key, u64)>,
    next_seq: u64,
    next_log: u64,
    stats: CacheStats,
}

impl<B: IoBuf> BatchCache<B> {
    /// A cache holding its memory from `budget` (the shard's fetch budget) and at most
    /// `dma_cap` bytes of DMA buffers.
    pub fn new(budget: Budget, dma_cap: usize) -> Rc<Self> {
        Rc::new(BatchCache {
            budget,
            dma_cap,
            inner: RefCell::new(Inner {
                entries: BTreeMap::new(),
                fifo: VecDeque::new(),
                next_seq: 0,
                next_log: 0,
                stats: CacheStats::default(),
            }),
        })
    }

    /// A handle for one log (its entries are forgotten when the handle drops).
    pub fn register(self: &Rc<Self>) -> CacheHandle<B> {
        let mut inner = self.inner.borrow_mut();
        inner.next_log += 1;
        CacheHandle { cache: self.clone(), log: inner.next_log }
    }

    pub fn stats(&self) -> CacheStats {
        let inner = self.inner.borrow();
        CacheStats { entries: inner.entries.len() as u64, ..inner.stats }
    }

    /// Give at least `bytes` back to the budget (or everything held), oldest entries first:
    /// a fetch needs the memory.
    pub fn release(&self, bytes: u64) {
        let mut freed = 0u64;
        let mut inner = self.inner.borrow_mut();
        while freed < bytes {
            // Dropping an entry gives its memory back (and wakes waiting fetches; they run
            // later, never inside this borrow).
            let Some(e) = inner.evict_oldest() else { break };
            freed += e.held.units();
        }
    }

    fn insert(&self, key: Key, data: Data<B>, len: usize, mem: usize, dma: usize) {
        // A fetch waiting for memory comes first: nothing goes in (not even what the budget
        // lets small reservations take past waiting ones).
        if len == 0 || mem as u64 > self.budget.capacity() / MAX_ENTRY_SHARE || self.budget.has_waiters() {
            return;
        }
        let mut inner = self.inner.borrow_mut();
        let held = loop {
            if inner.stats.dma_bytes as usize + dma <= self.dma_cap {
                if let Some(h) = self.budget.try_reserve(mem as u64) {
                    break Some(h);
                }
            }
            // The oldest entry goes (dropped here: its memory is free for the next try).
            if inner.evict_oldest().is_none() {
                break None;
            }
        };
        if let Some(held) = held {
            let seq = inner.next_seq;
            inner.next_seq += 1;
            let entry = Entry { data, len, seq, dma, held };
            inner.stats.bytes += mem as u64;
            inner.stats.dma_bytes += dma as u64;
            if let Some(old) = inner.entries.insert(key, entry) {
                inner.stats.bytes -= old.held.units();
                inner.stats.dma_bytes -= old.dma as u64;
            }
            inner.fifo.push_back((key, seq));
            // A replaced entry (a small commit's chunk after the last one, at the same page)
            // leaves a stale pair behind.
            inner.prune_fifo();
        }
    }

    fn forget(&self, from: Key, to: Key) {
        let mut inner = self.inner.borrow_mut();
        let keys: Vec<Key> = inner.entries.range(from..=to).map(|(k, _)| *k).collect();
        for k in keys {
            let e = inner.entries.remove(&k).expect("listed");
            inner.stats.bytes -= e.held.units();
            inner.stats.dma_bytes -= e.dma as u64;
        }
        inner.prune_fifo();
    }
}

impl<B: IoBuf> Inner<B> {
    /// Forgotten and replaced entries leave stale FIFO pairs: drop them once they outnumber
    /// live ones (amortized: at most one pass per as many inserts as there are entries).
    fn prune_fifo(&mut self) {
        if self.fifo.len() > 2 * self.entries.len() + 64 {
            let Inner { fifo, entries, .. } = self;
            fifo.retain(|(k, seq)| entries.get(k).is_some_and(|e| e.seq == *seq));
        }
    }

    /// Remove the oldest live entry (its memory is given back when the caller drops it).
    fn evict_oldest(&mut self) -> Option<Entry<B>> {
        while let Some((key, seq)) = self.fifo.pop_front() {
            if self.entries.get(&key).is_some_and(|e| e.seq == seq) {
                let e = self.entries.remove(&key).expect("checked");
                self.stats.bytes -= e.held.units();
                self.stats.dma_bytes -= e.dma as u64;
                self.stats.evictions += 1;
                return Some(e);
            }
        }
        None
    }
}

/// One log's view of its shard's cache.
pub struct CacheHandle<B: IoBuf> {
    cache: Rc<BatchCache<B>>,
    log: u64,
}

impl<B: IoBuf> CacheHandle<B> {
    /// A write tail's chunk of segment `base` is durable: its first `len` bytes are the file's
    /// bytes at `pos`; `alloc` is the buffer's allocated size. Moved in when mostly full (and
    /// within the DMA cap), copied out otherwise.
    pub fn insert_chunk(&self, base: i64, pos: u64, len: usize, chunk: Rc<B>, alloc: usize) {
        let key = (self.log, base, pos);
        if len * 2 >= alloc && alloc <= self.cache.dma_cap {
            self.cache.insert(key, Data::Chunk(chunk), len, alloc, alloc);
        } else {
            let bytes = Bytes::copy_from_slice(&(*chunk).as_ref()[..len]);
            self.cache.insert(key, Data::Bytes(bytes), len, len, 0);
        }
    }

    /// Bytes read from disk at `pos` of segment `base` (right-sized: a slice of a much larger
    /// buffer would keep it all alive while counting only its own length).
    pub fn insert_read(&self, base: i64, pos: u64, bytes: Bytes) {
        let len = bytes.len();
        self.cache.insert((self.log, base, pos), Data::Bytes(bytes), len, len, 0);
    }

    /// File bytes `[from, to)` of segment `base`, or as many of them as contiguous entries hold
    /// from `from` on; `None` when no entry holds `from`.
    pub fn read(&self, base: i64, from: u64, to: u64) -> Option<Bytes> {
        if from >= to {
            return None;
        }
        let inner = self.cache.inner.borrow();
        let lo = (self.log, base, 0);
        let (&(_, _, pos), first) = inner.entries.range(lo..=(self.log, base, from)).next_back()?;
        let first_end = pos + first.len as u64;
        if first_end <= from {
            return None;
        }
        if first_end >= to {
            if let Data::Bytes(b) = &first.data {
                // Within one read entry: the reader shares its bytes.
                return Some(b.slice((from - pos) as usize..(to - pos) as usize));
            }
        }
        let mut out = Vec::with_capacity((to.min(first_end) - from) as usize);
        let mut at = from;
        for (&(_, _, p), e) in inner.entries.range((self.log, base, pos)..=(self.log, base, to)) {
            if p > at {
                break; // a gap: what is contiguous so far is the answer
            }
            let end = (p + e.len as u64).min(to);
            if end > at {
                out.extend_from_slice(&e.bytes()[(at - p) as usize..(end - p) as usize]);
                at = end;
            }
            if at >= to {
                break;
            }
        }
        Some(Bytes::from(out))
    }

    /// The most one entry may take now: 0 while a fetch waits for memory.
    pub fn room(&self) -> usize {
        if self.cache.budget.has_waiters() {
            0
        } else {
            (self.cache.budget.capacity() / MAX_ENTRY_SHARE) as usize
        }
    }

    /// Count a read served from the cache (`hit`) or from disk, of `bytes`.
    pub fn count(&self, hit: bool, bytes: usize) {
        let stats = &mut self.cache.inner.borrow_mut().stats;
        if hit {
            stats.hits += 1;
            stats.hit_bytes += bytes as u64;
        } else {
            stats.misses += 1;
            stats.miss_bytes += bytes as u64;
        }
    }

    /// Segment `base` is gone or its bytes changed (a compaction swap): forget its entries.
    pub fn forget_segment(&self, base: i64) {
        self.cache.forget((self.log, base, 0), (self.log, base, u64::MAX));
    }
}

impl<B: IoBuf> Drop for CacheHandle<B> {
    fn drop(&mut self) {
        self.cache.forget((self.log, i64::MIN, 0), (self.log, i64::MAX, u64::MAX));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{Disk, MemBuf, MemDisk};

    fn chunk(bytes: &[u8], alloc: usize) -> Rc<MemBuf> {
        let mut buf = MemDisk::new().alloc(alloc);
        buf.as_mut()[..bytes.len()].copy_from_slice(bytes);
        Rc::new(buf)
    }

    // Reads run across contiguous entries (chunks overlap by a partial page), stop at a gap,
    // and never see another log's or another segment's bytes.
    #[test]
    fn reads_join_contiguous_entries_and_stop_at_gaps() {
        let cache = BatchCache::<MemBuf>::new(Budget::new(1 << 30), 1 << 30);
        let (a, b) = (cache.register(), cache.register());
        let data: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
        a.insert_chunk(0, 0, 9_000, chunk(&data[..9_000], 12_288), 12_288);
        // The next chunk starts at the partial page's start and holds it again.
        a.insert_chunk(0, 8_192, 4_000, chunk(&data[8_192..12_192], 8_192), 8_192);
        a.insert_read(0, 14_000, Bytes::copy_from_slice(&data[14_000..20_000]));
        b.insert_read(0, 0, Bytes::from(vec![7u8; 20_000]));
        assert_eq!(a.read(0, 100, 12_192).unwrap(), data[100..12_192]);
        assert_eq!(a.read(0, 100, 19_000).unwrap(), data[100..12_192], "stops at the gap");
        assert_eq!(a.read(0, 15_000, 16_000).unwrap(), data[15_000..16_000]);
        assert!(a.read(0, 12_192, 13_000).is_none(), "in the gap");
        assert!(a.read(5, 0, 100).is_none(), "another segment");
        a.forget_segment(0);
        assert!(a.read(0, 0, 100).is_none());
        assert_eq!(b.read(0, 0, 3).unwrap(), vec![7u8; 3]);
        drop(b);
        assert_eq!(cache.stats().entries, 0);
        assert_eq!(cache.stats().bytes, 0);
    }

    // The cache holds its memory from the budget: it evicts its oldest entries to make room,
    // never takes what a waiting fetch needs, and gives memory back when asked.
    #[test]
    fn memory_comes_from_the_budget_oldest_out_first() {
        glommio::LocalExecutor::default().run(async {
            let budget = Budget::new(1 << 20);
            let cache = BatchCache::<MemBuf>::new(budget.clone(), 1 << 20);
            let log = cache.register();
            for i in 0..10u64 {
                log.insert_read(0, i * 100_000, Bytes::from(vec![i as u8; 100_000]));
            }
            // 10 x 100 kB fit in 1 MiB; the 11th evicts the first.
            log.insert_read(0, 1_000_000, Bytes::from(vec![10u8; 100_000]));
            assert!(log.read(0, 0, 10).is_none());
            assert_eq!(log.read(0, 100_000, 100_010).unwrap(), vec![1u8; 10]);
            assert_eq!(cache.stats().evictions, 1);
            assert_eq!(budget.in_use(), cache.stats().bytes);
            // A fetch needing memory gets it.
            cache.release(300_000);
            assert!(budget.try_reserve(300_000).is_some());
            assert!(log.read(0, 100_000, 100_010).is_none());
            // Chunks: at most the DMA cap; a mostly empty chunk is copied out.
            let dma = BatchCache::<MemBuf>::new(Budget::new(1 << 30), 64 << 10);
            let h = dma.register();
            h.insert_chunk(0, 0, 40_000, chunk(&[1; 40_000], 40_960), 40_960);
            h.insert_chunk(0, 40_960, 40_000, chunk(&[2; 40_000], 40_960), 40_960);
            assert_eq!(dma.stats().dma_bytes, 40_960, "the first chunk made room");
            h.insert_chunk(0, 90_000, 100, chunk(&[3; 100], 40_960), 40_960);
            assert_eq!((dma.stats().dma_bytes, dma.stats().bytes), (40_960, 41_060));
            // A chunk larger than the DMA cap is copied out, and empties nothing to get in.
            h.insert_chunk(0, 200_000, 70_000, chunk(&[4; 70_000], 73_728), 73_728);
            assert_eq!(dma.stats().entries, 3);
            assert_eq!((dma.stats().dma_bytes, dma.stats().bytes), (40_960, 111_060));
        });
    }

    // While a fetch waits for memory the cache takes none, not even a small entry the budget
    // would let pass waiting reservations.
    #[test]
    fn nothing_goes_in_while_a_fetch_waits() {
        glommio::LocalExecutor::default().run(async {
            let budget = Budget::new(1 << 20);
            let cache = BatchCache::<MemBuf>::new(budget.clone(), 1 << 20);
            let log = cache.register();
            let held = budget.try_reserve(1 << 20).expect("all of it");
            let waiting = glommio::spawn_local({
                let budget = budget.clone();
                async move { budget.reserve(4096).await.units() }
            });
            glommio::executor().yield_task_queue_now().await;
            assert!(budget.has_waiters());
            drop(held);
            // Given back: the waiter got its share at once; then the cache may take the rest.
            assert!(!budget.has_waiters());
            assert_eq!(waiting.await, 4096);
            log.insert_read(0, 0, Bytes::from(vec![1u8; 1000]));
            assert_eq!(cache.stats().entries, 1);
            let held = budget.try_reserve((1 << 20) - 1000).expect("what is free");
            let waiting = glommio::spawn_local({
                let budget = budget.clone();
                async move { budget.reserve(8192).await.units() }
            });
            glommio::executor().yield_task_queue_now().await;
            assert!(budget.has_waiters());
            log.insert_read(0, 1000, Bytes::from(vec![1u8; 1000]));
            assert_eq!(cache.stats().entries, 1, "a small entry passed a waiting fetch");
            drop(held);
            assert_eq!(waiting.await, 8192);
        });
    }
}
