//! The partitions one shard owns, and their periodic upkeep.
//!
//! A shard opens its partitions here, applies topic config changes to them at runtime, and
//! runs one low-priority upkeep task that every `log.retention.check.interval.ms` rolls by
//! time and applies retention (SPEC T7) on each partition, then closes them all cleanly at
//! shutdown. Shard-local: nothing here is shared across threads.

use crate::config::LogConfig;
use crate::io::Disk;
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
    stopping: Cell<bool>,
}

/// The directory of a partition: `<data-dir>/<topic>-<partition>`.
pub fn partition_dir(data_dir: &Path, topic: &str, partition: i32) -> PathBuf {
    data_dir.join(format!("{topic}-{partition}"))
}

impl<D: Disk> PartitionManager<D> {
    pub fn new(disk: D, data_dir: &Path, clock: Clock) -> Rc<Self> {
        Rc::new(PartitionManager {
            disk,
            data_dir: data_dir.to_path_buf(),
            clock,
            partitions: RefCell::new(BTreeMap::new()),
            stopping: Cell::new(false),
        })
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

    pub fn get(&self, topic: &str, partition: i32) -> Option<Rc<Partition<D>>> {
        self.partitions.borrow().get(&(topic.to_string(), partition)).cloned()
    }

    pub fn partitions(&self) -> Vec<(TopicPartition, Rc<Partition<D>>)> {
        self.partitions.borrow().iter().map(|(k, v)| (k.clone(), v.clone())).collect()
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
