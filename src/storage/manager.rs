//! The partitions one shard owns, and their periodic upkeep.
//!
//! A shard opens its partitions here, applies topic config changes to them at runtime, and
//! runs one upkeep task that every `log.retention.check.interval.ms` rolls by time and
//! applies retention (SPEC T7) on each partition, and one cleaner task that compacts the
//! partitions of compacted topics that are due (the dirtiest first, `log.cleaner.threads` at
//! a time, sleeping `log.cleaner.backoff.ms` when none is), then closes them all cleanly at
//! shutdown. Shard-local: nothing here is shared across threads.

use crate::config::LogConfig;
use crate::io::Disk;
use crate::storage::cache::BatchCache;
use crate::storage::cleaner::{is_due, CleanerConfig, CleanerLimits, IoBudget};
use crate::storage::error::StorageResult;
use crate::storage::partition::{Clock, Partition};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

/// A topic name and a partition index.
pub type TopicPartition = (String, i32);

/// Kafka's default `log.retention.check.interval.ms` (5 minutes).
pub const DEFAULT_RETENTION_CHECK_INTERVAL: Duration = Duration::from_secs(300);

pub struct PartitionManager<D: Disk> {
    disk: D,
    data_dir: PathBuf,
    clock: Clock,
    partitions: RefCell<BTreeMap<TopicPartition, Rc<Partition<D>>>>,
    /// The shard's batch cache, which every partition opened here uses.
    cache: Option<Rc<BatchCache<D::Buf>>>,
    stopping: Cell<bool>,
    cleaner: RefCell<CleanerStats>,
    /// Partitions are copies of a replicated log (a clustered node): each opens with its high
    /// watermark at its log start ([`Partition::start_replicated`]).
    replicated: Cell<bool>,
}

/// What this shard's cleaner did and sees, for `/metrics`.
#[derive(Debug, Default, Clone)]
pub struct CleanerStats {
    pub passes: u64,
    pub failures: u64,
    /// Bytes of log the passes read (the cleanable range, dirty part included) and wrote.
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// Time spent in passes.
    pub time_ms: u64,
    /// At the last check: each compacted partition's dirty ratio, and the age of the oldest
    /// dirty data of any (ms; 0 when nothing is dirty).
    pub dirty_ratios: Vec<(TopicPartition, f64)>,
    pub max_delay_ms: u64,
}

/// The directory of a partition: `<data-dir>/<topic>-<partition>`.
pub fn partition_dir(data_dir: &Path, topic: &str, partition: i32) -> PathBuf {
    data_dir.join(format!("{topic}-{partition}"))
}

impl<D: Disk> PartitionManager<D> {
    pub fn new(disk: D, data_dir: &Path, clock: Clock, cache: Option<Rc<BatchCache<D::Buf>>>) -> Rc<Self> {
        Rc::new(PartitionManager {
            disk,
            data_dir: data_dir.to_path_buf(),
            clock,
            partitions: RefCell::new(BTreeMap::new()),
            cache,
            stopping: Cell::new(false),
            cleaner: RefCell::new(CleanerStats::default()),
            replicated: Cell::new(false),
        })
    }

    /// Partitions opened from now on are copies of a replicated log (a clustered node).
    pub fn set_replicated(&self) {
        self.replicated.set(true);
    }

    /// Open (recovering if needed) or return an already open partition.
    pub async fn open_partition(
        &self,
        topic: &str,
        partition: i32,
        config: LogConfig,
    ) -> StorageResult<Rc<Partition<D>>> {
        if let Some(p) = self.get(topic, partition) {
            return Ok(p);
        }
        let dir = partition_dir(&self.data_dir, topic, partition);
        let (p, report) = Partition::open(self.disk.clone(), &dir, config, self.clock.clone()).await?;
        if let Some(cache) = &self.cache {
            p.attach_cache(cache.register());
        }
        if self.replicated.get() {
            p.start_replicated();
        }
        tracing::info!(
            topic,
            partition,
            clean = report.clean,
            segments = report.segments,
            truncated_bytes = report.truncated_bytes,
            rebuilt_time_indexes = report.rebuilt_time_indexes,
            "partition open"
        );
        // Another task may have opened it while this one awaited: keep the first.
        let p = self.partitions.borrow_mut().entry((topic.to_string(), partition)).or_insert(p).clone();
        Ok(p)
    }

    /// The shard's batch cache, if it has one.
    pub fn batch_cache(&self) -> Option<&Rc<BatchCache<D::Buf>>> {
        self.cache.as_ref()
    }

    pub fn get(&self, topic: &str, partition: i32) -> Option<Rc<Partition<D>>> {
        self.partitions.borrow().get(&(topic.to_string(), partition)).cloned()
    }

    pub fn partitions(&self) -> Vec<(TopicPartition, Rc<Partition<D>>)> {
        self.partitions.borrow().iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    }

    /// Close a partition, keeping its directory (this node is no longer one of its replicas).
    pub async fn close_partition(&self, topic: &str, partition: i32) {
        let p = self.partitions.borrow_mut().remove(&(topic.to_string(), partition));
        if let Some(p) = p {
            if let Err(e) = p.close().await {
                tracing::warn!(topic, partition, error = %e, "closing a partition failed");
            }
        }
    }

    /// Close a partition and remove its directory (DeleteTopics).
    pub async fn delete_partition(&self, topic: &str, partition: i32) -> StorageResult<()> {
        let p = self.partitions.borrow_mut().remove(&(topic.to_string(), partition));
        if let Some(p) = p {
            let _ = p.close().await;
        }
        self.disk.remove_dir_all(&partition_dir(&self.data_dir, topic, partition)).await?;
        self.disk.sync_dir(&self.data_dir).await?;
        Ok(())
    }

    /// Apply a topic's new settings to its open partitions (AlterConfigs at runtime).
    pub fn set_topic_config(&self, topic: &str, config: &LogConfig) {
        for ((t, _), p) in self.partitions.borrow().iter() {
            if t == topic {
                p.set_config(config.clone());
            }
        }
    }

    /// One upkeep pass over every partition: time-based rolls and retention. A failing
    /// partition is logged and skipped; the others go on. Returns the segments deleted.
    pub async fn upkeep_once(&self) -> usize {
        let mut deleted = 0;
        for ((topic, partition), p) in self.partitions() {
            match p.maintain().await {
                Ok(removed) => deleted += removed.len(),
                Err(e) => tracing::error!(topic, partition, error = %e, "upkeep failed"),
            }
        }
        deleted
    }

    /// Run [`PartitionManager::upkeep_once`] every `interval` on this executor until
    /// [`PartitionManager::close_all`].
    pub fn spawn_upkeep(self: &Rc<Self>, interval: Duration) {
        let me = self.clone();
        glommio::spawn_local(async move {
            while !me.stopping.get() {
                glommio::timer::sleep(interval).await;
                if me.stopping.get() {
                    break;
                }
                me.upkeep_once().await;
            }
        })
        .detach();
    }

    /// The cleaner's figures so far.
    pub fn cleaner_stats(&self) -> CleanerStats {
        self.cleaner.borrow().clone()
    }

    /// One cleaner round: look at every compacted partition, then clean those due, the
    /// dirtiest first, `threads` at a time. `shards` divides the dedupe buffer. Returns how
    /// many passes succeeded and how many failed.
    pub async fn clean_once(&self, config: &CleanerConfig, shards: usize) -> (usize, usize) {
        let now = (self.clock)();
        let mut due = Vec::new();
        let (mut ratios, mut max_delay) = (Vec::new(), 0u64);
        for (tp, p) in self.partitions() {
            match p.clean_target().await {
                Ok(Some(target)) => {
                    ratios.push((tp.clone(), target.dirty_ratio()));
                    if let Some(ts) = target.oldest_dirty_ts {
                        max_delay = max_delay.max(now.saturating_sub(ts).max(0) as u64);
                    }
                    if is_due(&target, p.log().config(), now) {
                        due.push((target.dirty_ratio(), tp, p, target));
                    }
                }
                Ok(None) => {
                    if p.log().config().cleanup_compact {
                        ratios.push((tp, 0.0));
                    }
                }
                Err(e) => {
                    tracing::warn!(topic = tp.0, partition = tp.1, error = %e, "cleaner could not look at a partition")
                }
            }
        }
        {
            let mut st = self.cleaner.borrow_mut();
            st.dirty_ratios = ratios;
            st.max_delay_ms = max_delay;
        }
        due.sort_by(|a, b| b.0.total_cmp(&a.0));
        let threads = config.threads.max(1);
        let limits =
            CleanerLimits { map_budget_bytes: (config.dedupe_buffer_size / (shards.max(1) * threads) as u64) as usize };
        let rate = config.io_max_bytes_per_second.map(|r| (r / threads as u64).max(1));
        let (mut ok, mut failed) = (0, 0);
        let mut due = due.into_iter();
        loop {
            let batch: Vec<_> = due.by_ref().take(threads).collect();
            if batch.is_empty() || self.stopping.get() {
                break;
            }
            let passes = batch.into_iter().map(|(_, (topic, partition), p, target)| async move {
                let mut budget = IoBudget::new(rate);
                let result = p.clean(target, limits, &mut budget).await;
                match &result {
                    Ok(r) => tracing::info!(
                        topic,
                        partition,
                        start = r.start,
                        first_dirty = r.first_dirty,
                        end = r.end,
                        keys = r.map_keys,
                        read = r.stats.bytes_read,
                        written = r.stats.bytes_written,
                        swapped = r.groups_swapped,
                        ms = r.elapsed.as_millis() as u64,
                        "compacted"
                    ),
                    Err(e) => tracing::error!(topic, partition, error = %e, "compaction pass failed"),
                }
                result
            });
            for result in futures_util::future::join_all(passes).await {
                let mut st = self.cleaner.borrow_mut();
                match result {
                    Ok(r) => {
                        ok += 1;
                        st.passes += 1;
                        st.bytes_read += r.stats.bytes_read;
                        st.bytes_written += r.stats.bytes_written;
                        st.time_ms += r.elapsed.as_millis() as u64;
                    }
                    Err(_) => {
                        failed += 1;
                        st.failures += 1
                    }
                }
            }
        }
        (ok, failed)
    }

    /// Run [`PartitionManager::clean_once`] on this executor until
    /// [`PartitionManager::close_all`], sleeping `backoff` after a round with nothing done or
    /// a failure.
    pub fn spawn_cleaner(self: &Rc<Self>, config: CleanerConfig, shards: usize) {
        if !config.enable {
            return;
        }
        let me = self.clone();
        glommio::spawn_local(async move {
            while !me.stopping.get() {
                let (ok, failed) = me.clean_once(&config, shards).await;
                if ok == 0 || failed > 0 {
                    glommio::timer::sleep(config.backoff).await;
                } else {
                    glommio::yield_if_needed().await;
                }
            }
        })
        .detach();
    }

    /// True once [`PartitionManager::close_all`] began.
    pub fn is_stopping(&self) -> bool {
        self.stopping.get()
    }

    /// Close every partition cleanly (SPEC T5.3 close entries, clean-shutdown markers).
    pub async fn close_all(&self) -> StorageResult<()> {
        self.stopping.set(true);
        let all = std::mem::take(&mut *self.partitions.borrow_mut());
        let mut first_err = None;
        for ((topic, partition), p) in all {
            if let Err(e) = p.close().await {
                tracing::error!(topic, partition, error = %e, "close failed");
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }
}
