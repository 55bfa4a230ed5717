//! A shard: one executor pinned to one core, owning a set of partitions. Work for a partition
//! owned by another shard travels over the glommio channel mesh as a [`ShardOp`] with a
//! request id; the reply comes back by id. Topic changes are serialized on shard 0, which
//! persists them and broadcasts them to every shard. Nothing here is shared across threads
//! except the messages.

use crate::config::LogConfig;
use crate::io::{Disk, DmaDisk};
use crate::protocol::errors as code;
use crate::server::configs::{self, AlterOp, DynamicConfigs, Effective};
use crate::server::coordinator::{Coordinator, GroupRequest, GroupResponse, OFFSETS_TOPIC};
use crate::server::errors::{storage_code, topic_code};
use crate::server::limits::{Budget, ConnectionTable, LogEvery};
use crate::server::BrokerConfig;
use crate::storage::manager::PartitionManager;
use crate::storage::topics::TopicStore;
use crate::storage::{system_clock, Clock, ReadUpTo, StorageError};
use bytes::Bytes;
use futures_channel::oneshot;
use glommio::channels::channel_mesh::Senders;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::sync::Arc;

/// The shard that owns a partition: a stable hash (the same on every restart and shard).
pub fn owner(topic: &str, partition: i32, shards: usize) -> usize {
    ((crc32c::crc32c(topic.as_bytes()) as u64).wrapping_add(partition as u32 as u64) % shards as u64) as usize
}

/// Work for one shard.
#[derive(Debug)]
pub enum ShardOp {
    Produce {
        topic: String,
        partition: i32,
        records: Bytes,
    },
    Fetch {
        topic: String,
        partition: i32,
        offset: i64,
        max_bytes: usize,
    },
    ListOffsets {
        topic: String,
        partition: i32,
        timestamp: i64,
    },
    /// To shard 0: create a topic (validated and persisted there, then broadcast).
    CreateTopic {
        name: String,
        partitions: i64,
        configs: Vec<(String, String)>,
        validate_only: bool,
    },
    /// From shard 0 to every shard, first: open the partitions `from..to` of a topic you own
    /// (clearing data an interrupted deletion left). The topic (or its new count) is published
    /// to clients only once every shard has, so no client sees a partition not yet open.
    OpenPartitions {
        name: String,
        from: u32,
        to: u32,
        config: LogConfig,
    },
    /// From shard 0 to every shard, then: a topic exists.
    TopicCreated {
        name: String,
        partitions: u32,
        config: LogConfig,
        overrides: BTreeMap<String, String>,
    },
    /// To shard 0: delete a topic (then broadcast).
    DeleteTopic {
        name: String,
    },
    /// From shard 0 to every shard: close and remove the partitions of a deleted topic.
    TopicDeleted {
        name: String,
    },
    /// To shard 0: change a topic's overrides (with `replace`, the set operations are the
    /// whole new set).
    AlterTopic {
        name: String,
        ops: Vec<(String, AlterOp)>,
        replace: bool,
        validate_only: bool,
    },
    /// To shard 0: change the dynamic broker settings of this node (`node`) or the cluster
    /// defaults, then broadcast them.
    AlterBroker {
        node: bool,
        ops: Vec<(String, AlterOp)>,
        replace: bool,
        validate_only: bool,
    },
    /// From shard 0 to every shard: the dynamic broker settings changed.
    BrokerConfigs {
        dynamic: DynamicConfigs,
    },
    /// From shard 0 to every shard: a topic's settings changed.
    TopicAltered {
        name: String,
        config: LogConfig,
        overrides: BTreeMap<String, String>,
    },
    /// To the shard coordinating a group (`coordinator::group_shard`).
    Group {
        version: i16,
        req: GroupRequest,
    },
    /// To shard 0: a new producer id for an idempotent producer (InitProducerId).
    AllocateProducerId,
    /// A shard's latency histograms and counters (for /metrics).
    Metrics,
    /// To shard 0: raise a topic's partition count (CreatePartitions), then broadcast.
    CreatePartitions {
        name: String,
        count: i64,
        validate_only: bool,
    },
    /// From shard 0 to every shard, after [`ShardOp::OpenPartitions`]: a topic has
    /// `partitions` partitions now.
    TopicGrown {
        name: String,
        partitions: u32,
    },
    /// DeleteRecords on one partition: move its log start to `offset` (-1: the high watermark).
    DeleteRecords {
        topic: String,
        partition: i32,
        offset: i64,
    },
    /// DescribeProducers of one partition.
    DescribeProducers {
        topic: String,
        partition: i32,
    },
    /// DescribeLogDirs: the partitions this shard owns (all, or those named), with sizes.
    LogDirs {
        only: Option<Vec<(String, Vec<i32>)>>,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct FetchOut {
    pub high_watermark: i64,
    pub log_start_offset: i64,
    pub records: Bytes,
}

/// Why a partition refused a produce: the error code, the log start offset (the Java
/// producer reads it), a message, and the records that made a batch invalid (KIP-467: index in
/// the batch, why).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ProduceRefused {
    pub code: i16,
    pub log_start_offset: i64,
    pub message: Option<String>,
    pub record_errors: Vec<(i32, String)>,
}

impl ProduceRefused {
    pub fn code(code: i16) -> Self {
        ProduceRefused { code, log_start_offset: -1, ..Default::default() }
    }

    /// From a storage error, with Kafka's messages for invalid timestamps.
    fn from_storage(e: &StorageError, log_start_offset: i64) -> Self {
        let (message, record_errors) = match e {
            StorageError::InvalidTimestamp { lo, hi, records, .. } => (
                "One or more records have been rejected due to invalid timestamp".to_string(),
                records
                    .iter()
                    .map(|&(i, ts)| {
                        let why = format!("Timestamp {ts} of message with offset {i} is out of range. The timestamp should be within [{lo}, {hi}]");
                        (i, why)
                    })
                    .collect(),
            ),
            // Disk trouble: a fixed text (the error itself, with paths, is in the broker's log).
            StorageError::Io(_) => ("the partition's disk failed".to_string(), Vec::new()),
            StorageError::WritesSuspended(_) => {
                ("writes are suspended until the partition's disk recovers".to_string(), Vec::new())
            }
            StorageError::Corrupt { .. } => ("the partition's stored data failed a check".to_string(), Vec::new()),
            e => (e.to_string(), Vec::new()),
        };
        ProduceRefused { code: storage_code(e), log_start_offset, message: Some(message), record_errors }
    }
}

#[derive(Debug)]
pub enum ShardReply {
    /// (base offset, log-append time, log start offset), or why not.
    Produce(Result<(i64, i64, i64), ProduceRefused>),
    Fetch(Result<FetchOut, (i16, i64, i64)>),
    ListOffsets(Result<Option<(i64, i64)>, i16>),
    /// The outcome of a topic change (create, delete, alter): an error code and message.
    Admin(Result<(), (i16, String)>),
    Group(GroupResponse),
    /// A producer id, or an error code.
    ProducerId(Result<i64, i16>),
    Metrics(Box<crate::metrics::ShardMetrics>),
    /// The new log start offset, or an error code.
    DeleteRecords(Result<i64, i16>),
    /// (producer id, epoch, last sequence, last append ms) of each producer, or an error code.
    Producers(Result<Vec<(i64, i16, i32, i64)>, i16>),
    /// (topic, partition, bytes on disk, high watermark lag) of each partition.
    LogDirs(Vec<(String, i32, u64, i64)>),
    Done,
}

#[derive(Debug)]
pub enum ShardMsg {
    Request { id: u64, from: usize, op: ShardOp },
    Reply { id: u64, reply: ShardReply },
}

/// Producer ids are handed out in blocks this large (each block's end persisted once).
const PRODUCER_ID_BLOCK: i64 = 1000;
/// `<data-dir>/producer-ids`: `tidemark-producer-ids 1`, then `next <id>`: no id at or above it
/// was ever handed out.
const PRODUCER_IDS_FILE: &str = "producer-ids";

/// The first producer id to hand out: past every id the file says was handed out, and past
/// `now_ms × 1024`, so ids stay unique across restarts even if the file is lost or damaged
/// (as long as the clock does not run back further than the ids handed out since).
async fn read_producer_ids(disk: &DmaDisk, data_dir: &std::path::Path, now_ms: i64) -> anyhow::Result<i64> {
    use crate::io::Disk;
    let floor = now_ms.max(0).saturating_mul(1024);
    let path = data_dir.join(PRODUCER_IDS_FILE);
    let Some(bytes) = disk.read_file(&path).await? else { return Ok(floor) };
    let text = String::from_utf8_lossy(&bytes);
    let mut lines = text.lines();
    let next = match (lines.next(), lines.next().and_then(|l| l.strip_prefix("next "))) {
        (Some("tidemark-producer-ids 1"), Some(n)) => n.trim().parse::<i64>().ok().filter(|&n| n >= 0),
        _ => None,
    };
    match next {
        Some(n) => Ok(n.max(floor)),
        None => {
            tracing::warn!(path = %path.display(), "not a producer-ids file; ids continue from the clock");
            Ok(floor)
        }
    }
}

/// What every shard knows about a topic.
#[derive(Debug, Clone)]
pub struct TopicInfo {
    pub partitions: u32,
    pub config: LogConfig,
    /// The topic's own settings (the rest come from the broker defaults).
    pub overrides: BTreeMap<String, String>,
}

pub struct Shard {
    pub id: usize,
    pub shards: usize,
    pub config: Arc<BrokerConfig>,
    pub manager: Rc<PartitionManager<DmaDisk>>,
    pub topics: RefCell<BTreeMap<String, TopicInfo>>,
    /// The consumer groups this shard coordinates.
    pub coordinator: Coordinator,
    /// This shard's share of `queued.max.request.bytes`: request frames read, not answered.
    pub request_memory: Budget,
    /// This shard's share of `tidemark.fetch.max.memory.bytes`: fetched records not written.
    pub fetch_memory: Budget,
    /// The dynamic broker settings, and the settings they give with the static ones.
    pub dynamic: RefCell<DynamicConfigs>,
    effective: RefCell<Rc<Effective>>,
    /// Open connections of every shard (its limits are dynamic settings).
    pub connections: Arc<ConnectionTable>,
    /// Repeated log lines, at most one a second each: refused connections, failed reads.
    pub refusals_log: LogEvery,
    read_errors_log: LogEvery,
    clock: Clock,
    /// Shard 0 only: the persistent topic store, taken out while an operation on it awaits,
    /// with `store_lock` serializing those operations.
    store: RefCell<Option<TopicStore<DmaDisk>>>,
    store_lock: glommio::sync::Semaphore,
    /// Shard 0 only: producer ids handed out (next, end of the block persisted).
    producer_ids: RefCell<Option<(i64, i64)>>,
    producer_ids_lock: glommio::sync::Semaphore,
    disk: DmaDisk,
    senders: RefCell<Option<Rc<Senders<ShardMsg>>>>,
    pending: RefCell<HashMap<u64, oneshot::Sender<ShardReply>>>,
    next_id: Cell<u64>,
}

impl Shard {
    /// Open this shard's view of the topics and the partitions it owns.
    pub async fn open(
        id: usize,
        shards: usize,
        config: Arc<BrokerConfig>,
        dynamic: DynamicConfigs,
        connections: Arc<ConnectionTable>,
    ) -> anyhow::Result<Rc<Shard>> {
        let effective = Effective::compute(&config, &dynamic)?;
        let disk = DmaDisk::open(&config.data_dir).await?;
        let store = TopicStore::open(disk.clone(), &config.data_dir, effective.log_defaults.clone()).await?;
        let clock = system_clock();
        let producer_ids =
            if id == 0 { Some(read_producer_ids(&disk, &config.data_dir, clock()).await?) } else { None };
        let manager = PartitionManager::new(disk.clone(), &config.data_dir, clock.clone());
        let mut topics = BTreeMap::new();
        for name in store.names().map(str::to_string).collect::<Vec<_>>() {
            let meta = store.get(&name).expect("listed");
            let info = TopicInfo {
                partitions: meta.partitions,
                config: store.config(&name)?,
                overrides: meta.overrides.clone(),
            };
            for p in 0..info.partitions as i32 {
                if owner(&name, p, shards) == id {
                    manager.open_partition(&name, p, info.config.clone()).await?;
                }
            }
            topics.insert(name, info);
        }
        manager.spawn_upkeep(config.retention_check_interval);
        let coordinator = Coordinator::new(config.coordinator.clone(), id);
        let share = |total: u64| total / shards as u64;
        let shard = Rc::new(Shard {
            id,
            shards,
            request_memory: Budget::new(share(config.limits.queued_max_request_bytes)),
            fetch_memory: Budget::new(share(config.limits.fetch_max_memory_bytes)),
            refusals_log: LogEvery::default(),
            read_errors_log: LogEvery::default(),
            dynamic: RefCell::new(dynamic),
            effective: RefCell::new(Rc::new(effective)),
            connections,
            config,
            manager,
            topics: RefCell::new(topics),
            coordinator,
            clock,
            producer_ids: RefCell::new(producer_ids.map(|next| (next, next))),
            producer_ids_lock: glommio::sync::Semaphore::new(1),
            disk,
            store: RefCell::new((id == 0).then_some(store)),
            store_lock: glommio::sync::Semaphore::new(1),
            senders: RefCell::new(None),
            pending: RefCell::new(HashMap::new()),
            next_id: Cell::new(1),
        });
        let records = Coordinator::load(&shard).await?;
        if records > 0 {
            tracing::info!(shard = id, records, "committed offsets loaded");
        }
        Ok(shard)
    }

    /// The settings in force (static with dynamic over them).
    pub fn effective(&self) -> Rc<Effective> {
        self.effective.borrow().clone()
    }

    /// On shard 0: the next producer id. Ids are handed out in blocks of
    /// [`PRODUCER_ID_BLOCK`]; the end of a block is persisted before its first id is used, so no
    /// id is given twice, across restarts too.
    async fn allocate_producer_id(&self) -> Result<i64, i16> {
        let _permit = self.producer_ids_lock.acquire_permit(1).await.map_err(|_| code::UNKNOWN_SERVER_ERROR)?;
        let (next, end) = self.producer_ids.borrow().ok_or(code::COORDINATOR_NOT_AVAILABLE)?;
        let end = if next < end {
            end
        } else {
            let end = next.checked_add(PRODUCER_ID_BLOCK).ok_or(code::UNKNOWN_SERVER_ERROR)?;
            let path = self.config.data_dir.join(PRODUCER_IDS_FILE);
            let text = format!("tidemark-producer-ids 1\nnext {end}\n");
            if let Err(e) = self.disk.write_file_atomic(&path, text.as_bytes()).await {
                tracing::error!(error = %e, "cannot persist producer ids");
                return Err(code::KAFKA_STORAGE_ERROR);
            }
            end
        };
        *self.producer_ids.borrow_mut() = Some((next + 1, end));
        Ok(next)
    }

    /// Broker wall-clock time in ms.
    pub fn now(&self) -> i64 {
        (self.clock)()
    }

    /// The partition count of `__consumer_offsets`, once it exists.
    pub fn offsets_partitions(&self) -> Option<u32> {
        self.topics.borrow().get(OFFSETS_TOPIC).map(|t| t.partitions)
    }

    /// Create `__consumer_offsets` if it does not exist yet (on shard 0, at startup): Kafka's
    /// `offsets.topic.*` settings, no time retention (compaction keeps it small).
    pub async fn ensure_offsets_topic(self: &Rc<Self>) -> bool {
        if self.offsets_partitions().is_some() {
            return true;
        }
        let c = &self.config.coordinator;
        let op = ShardOp::CreateTopic {
            name: OFFSETS_TOPIC.to_string(),
            partitions: c.offsets_partitions as i64,
            configs: vec![
                ("segment.bytes".to_string(), c.offsets_segment_bytes.to_string()),
                ("retention.ms".to_string(), "-1".to_string()),
                ("retention.bytes".to_string(), "-1".to_string()),
                // Every commit is answered once durable; compaction batches fit easily.
                ("flush.messages".to_string(), "1".to_string()),
                ("tidemark.preallocate.bytes".to_string(), (1u64 << 20).to_string()),
            ],
            validate_only: false,
        };
        match self.call(0, op).await {
            ShardReply::Admin(Ok(())) => true,
            ShardReply::Admin(Err((c, _))) if c == code::TOPIC_ALREADY_EXISTS => true,
            ShardReply::Admin(Err((_, m))) => {
                tracing::error!(error = m, "cannot create {OFFSETS_TOPIC}");
                false
            }
            _ => false,
        }
    }

    /// Connect to the mesh and serve messages from every peer.
    pub fn attach(
        self: &Rc<Self>,
        senders: Senders<ShardMsg>,
        mut receivers: glommio::channels::channel_mesh::Receivers<ShardMsg>,
    ) {
        *self.senders.borrow_mut() = Some(Rc::new(senders));
        for (_, rx) in receivers.streams() {
            let me = self.clone();
            glommio::spawn_local(async move {
                while let Some(msg) = rx.recv().await {
                    match msg {
                        ShardMsg::Reply { id, reply } => {
                            if let Some(tx) = me.pending.borrow_mut().remove(&id) {
                                let _ = tx.send(reply);
                            }
                        }
                        ShardMsg::Request { id, from, op } => {
                            let me = me.clone();
                            glommio::spawn_local(async move {
                                let reply = me.execute(op).await;
                                let senders = me.senders.borrow().clone();
                                if let Some(s) = senders {
                                    let _ = s.send_to(from, ShardMsg::Reply { id, reply }).await;
                                }
                            })
                            .detach();
                        }
                    }
                }
            })
            .detach();
        }
    }

    /// Run `op` on shard `target` (locally when it is this one).
    pub async fn call(self: &Rc<Self>, target: usize, op: ShardOp) -> ShardReply {
        if target == self.id {
            // Detached: a caller that goes away (a closed connection) must not cancel work
            // half done (an append, a topic change holding the topic store).
            let me = self.clone();
            return glommio::spawn_local(async move { me.execute(op).await })
                .detach()
                .await
                .unwrap_or(ShardReply::Done);
        }
        let started = std::time::Instant::now();
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        let (tx, rx) = oneshot::channel();
        let senders = self.senders.borrow().clone().expect("attached to the mesh");
        if senders.send_to(target, ShardMsg::Request { id, from: self.id, op }).await.is_err() {
            return ShardReply::Done;
        }
        // Registered after the send (one thread: no reply is processed before this task
        // yields), so a caller cancelled while the channel was full leaves nothing behind.
        self.pending.borrow_mut().insert(id, tx);
        let reply = rx.await.unwrap_or(ShardReply::Done);
        crate::metrics::since(crate::metrics::Stage::Hop, started);
        reply
    }

    async fn execute(self: &Rc<Self>, op: ShardOp) -> ShardReply {
        match op {
            ShardOp::Produce { topic, partition, records } => {
                let Some(p) = self.manager.get(&topic, partition) else {
                    return ShardReply::Produce(Err(ProduceRefused::code(code::UNKNOWN_TOPIC_OR_PARTITION)));
                };
                ShardReply::Produce(match p.append(&records).await {
                    Ok(info) => {
                        crate::metrics::count(crate::metrics::Counter::RecordsProduced, info.records);
                        Ok((info.base_offset, info.log_append_time, p.log().log_start_offset()))
                    }
                    Err(e) => {
                        crate::metrics::count(crate::metrics::Counter::ProduceErrors, 1);
                        tracing::debug!(topic, partition, error = %e, "produce refused");
                        Err(ProduceRefused::from_storage(&e, p.log().log_start_offset()))
                    }
                })
            }
            ShardOp::Fetch { topic, partition, offset, max_bytes } => {
                let Some(p) = self.manager.get(&topic, partition) else {
                    return ShardReply::Fetch(Err((code::UNKNOWN_TOPIC_OR_PARTITION, -1, -1)));
                };
                // max_bytes 0: the request's byte budget is spent; offsets only.
                let read =
                    if max_bytes == 0 { Ok(Bytes::new()) } else { p.read(offset, max_bytes, ReadUpTo::Durable).await };
                // The high watermark read after the data, so it never lags what is returned.
                let (hw, start) = {
                    let log = p.log();
                    (log.durable_offset(), log.log_start_offset())
                };
                ShardReply::Fetch(match read {
                    Ok(bytes) => Ok(FetchOut { high_watermark: hw, log_start_offset: start, records: bytes }),
                    Err(e) => {
                        let code = storage_code(&e);
                        if code == code::KAFKA_STORAGE_ERROR {
                            if let Some(skipped) = self.read_errors_log.ready() {
                                tracing::warn!(topic, partition, offset, error = %e, failed_reads_since_last_line = skipped, "read failed: KAFKA_STORAGE_ERROR");
                            }
                        }
                        Err((code, hw, start))
                    }
                })
            }
            ShardOp::ListOffsets { topic, partition, timestamp } => {
                let Some(p) = self.manager.get(&topic, partition) else {
                    return ShardReply::ListOffsets(Err(code::UNKNOWN_TOPIC_OR_PARTITION));
                };
                ShardReply::ListOffsets(
                    p.offset_for_time(timestamp, ReadUpTo::Durable).await.map_err(|e| storage_code(&e)),
                )
            }
            ShardOp::CreateTopic { name, partitions, configs, validate_only } => {
                ShardReply::Admin(self.create_topic(name, partitions, configs, validate_only).await)
            }
            ShardOp::DeleteTopic { name } => ShardReply::Admin(self.delete_topic(name).await),
            ShardOp::AlterTopic { name, ops, replace, validate_only } => {
                ShardReply::Admin(self.alter_topic(name, ops, replace, validate_only).await)
            }
            ShardOp::AlterBroker { node, ops, replace, validate_only } => {
                ShardReply::Admin(self.alter_broker(node, ops, replace, validate_only).await)
            }
            ShardOp::BrokerConfigs { dynamic } => {
                match Effective::compute(&self.config, &dynamic) {
                    Ok(e) => {
                        self.connections.set_limits(e.max_connections, e.max_connections_per_ip);
                        *self.effective.borrow_mut() = Rc::new(e);
                        *self.dynamic.borrow_mut() = dynamic;
                    }
                    // Shard 0 checked them; a failure here is a bug, logged, not applied.
                    Err(e) => tracing::error!(error = %e, "dynamic broker settings not applied"),
                }
                ShardReply::Done
            }
            ShardOp::TopicDeleted { name } => {
                let partitions = self.topics.borrow_mut().remove(&name).map_or(0, |t| t.partitions);
                for p in 0..partitions as i32 {
                    if owner(&name, p, self.shards) == self.id {
                        if let Err(e) = self.manager.delete_partition(&name, p).await {
                            tracing::error!(topic = name, partition = p, error = %e, "cannot remove partition");
                        }
                    }
                }
                ShardReply::Done
            }
            ShardOp::Group { version, req } => ShardReply::Group(Coordinator::handle(self, version, req).await),
            ShardOp::AllocateProducerId => ShardReply::ProducerId(self.allocate_producer_id().await),
            ShardOp::Metrics => ShardReply::Metrics(Box::new(self.metrics())),
            ShardOp::CreatePartitions { name, count, validate_only } => {
                ShardReply::Admin(self.create_partitions(name, count, validate_only).await)
            }
            ShardOp::OpenPartitions { name, from, to, config } => {
                let mut result = Ok(());
                for p in from as i32..to as i32 {
                    if owner(&name, p, self.shards) != self.id {
                        continue;
                    }
                    // A new partition starts empty: data left by an interrupted deletion of a
                    // topic with the same name must not come back.
                    let opened = match self.manager.delete_partition(&name, p).await {
                        Ok(()) => self.manager.open_partition(&name, p, config.clone()).await,
                        Err(e) => Err(e),
                    };
                    if let Err(e) = opened {
                        tracing::error!(topic = name, partition = p, error = %e, "cannot open new partition");
                        result = Err((code::KAFKA_STORAGE_ERROR, format!("partition {p} could not be opened: {e}")));
                    }
                }
                ShardReply::Admin(result)
            }
            ShardOp::TopicGrown { name, partitions } => {
                if let Some(t) = self.topics.borrow_mut().get_mut(&name) {
                    t.partitions = t.partitions.max(partitions);
                }
                ShardReply::Done
            }
            ShardOp::DeleteRecords { topic, partition, offset } => {
                let Some(p) = self.manager.get(&topic, partition) else {
                    return ShardReply::DeleteRecords(Err(code::UNKNOWN_TOPIC_OR_PARTITION));
                };
                ShardReply::DeleteRecords(p.delete_records(offset).await.map_err(|e| {
                    tracing::debug!(topic, partition, offset, error = %e, "DeleteRecords refused");
                    storage_code(&e)
                }))
            }
            ShardOp::DescribeProducers { topic, partition } => ShardReply::Producers(
                self.manager
                    .get(&topic, partition)
                    .map(|p| p.log().producers().active())
                    .ok_or(code::UNKNOWN_TOPIC_OR_PARTITION),
            ),
            ShardOp::LogDirs { only } => {
                let wanted = |t: &str, p: i32| {
                    only.as_ref().is_none_or(|o| o.iter().any(|(name, ps)| name == t && ps.contains(&p)))
                };
                let mut out: Vec<_> = self
                    .manager
                    .partitions()
                    .into_iter()
                    .filter(|(tp, _)| wanted(&tp.0, tp.1))
                    .map(|(tp, p)| {
                        let log = p.log();
                        (tp.0, tp.1, log.size_bytes(), log.log_end_offset() - log.durable_offset())
                    })
                    .collect();
                out.sort();
                ShardReply::LogDirs(out)
            }
            ShardOp::TopicAltered { name, config, overrides } => {
                self.manager.set_topic_config(&name, &config);
                if let Some(t) = self.topics.borrow_mut().get_mut(&name) {
                    t.config = config;
                    t.overrides = overrides;
                }
                ShardReply::Done
            }
            ShardOp::TopicCreated { name, partitions, config, overrides } => {
                self.topics.borrow_mut().insert(name, TopicInfo { partitions, config, overrides });
                ShardReply::Done
            }
        }
    }

    /// This shard's measurements, with its gauges read now.
    fn metrics(&self) -> crate::metrics::ShardMetrics {
        let mut m = crate::metrics::snapshot();
        let suspended = self.manager.partitions().iter().filter(|(_, p)| p.log().flush_failures() > 0).count();
        let (req, fetch) = (&self.request_memory, &self.fetch_memory);
        m.gauges = vec![
            ("request_memory_bytes", "Bytes of requests read and not yet answered.", req.in_use()),
            ("request_memory_peak_bytes", "The most request bytes held at once.", req.peak()),
            ("request_memory_capacity_bytes", "This shard's share of queued.max.request.bytes.", req.capacity()),
            ("fetch_memory_bytes", "Bytes of fetched records not yet written to clients.", fetch.in_use()),
            ("fetch_memory_peak_bytes", "The most fetched bytes held at once.", fetch.peak()),
            ("fetch_memory_capacity_bytes", "This shard's share of tidemark.fetch.max.memory.bytes.", fetch.capacity()),
            ("partitions_writes_suspended", "Partitions whose last flush failed (appends refused).", suspended as u64),
        ];
        m
    }

    /// On shard 0: wait for the topic store (topic changes run one at a time) and take it out
    /// of its cell, so no borrow is held across the change's awaits. Put it back with
    /// `self.store.borrow_mut().replace(store)` before the permit is dropped.
    async fn take_store(&self) -> Result<(glommio::sync::Permit<'_>, TopicStore<DmaDisk>), (i16, String)> {
        let permit =
            self.store_lock.acquire_permit(1).await.map_err(|e| (code::UNKNOWN_SERVER_ERROR, e.to_string()))?;
        let store = self
            .store
            .borrow_mut()
            .take()
            .ok_or((code::UNKNOWN_SERVER_ERROR, "topic changes run on shard 0".to_string()))?;
        Ok((permit, store))
    }

    /// On shard 0: validate, persist, then tell every shard (which opens its partitions).
    async fn create_topic(
        self: &Rc<Self>,
        name: String,
        partitions: i64,
        configs: Vec<(String, String)>,
        validate_only: bool,
    ) -> Result<(), (i16, String)> {
        let (_permit, mut store) = self.take_store().await?;
        let pairs: Vec<(&str, &str)> = configs.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let result = if validate_only {
            crate::storage::topics::validate_topic_name(&name)
                .map_err(|e| (topic_code(&e), e.to_string()))
                .and_then(|_| match store.get(&name) {
                    Some(_) => Err((code::TOPIC_ALREADY_EXISTS, format!("topic {name} already exists"))),
                    None => Ok(()),
                })
                .and_then(|_| {
                    if !(1..=100_000).contains(&partitions) {
                        return Err((code::INVALID_PARTITIONS, format!("invalid partition count {partitions}")));
                    }
                    store
                        .defaults()
                        .with_overrides(pairs.iter().copied())
                        .map(|_| ())
                        .map_err(|e| (code::INVALID_CONFIG, e.to_string()))
                })
                .map(|_| None)
        } else {
            store.create(&name, partitions, &pairs).await.map(Some).map_err(|e| (topic_code(&e), e.to_string()))
        };
        let overrides: BTreeMap<String, String> = configs.iter().cloned().collect();
        *self.store.borrow_mut() = Some(store);
        let Some(config) = result? else { return Ok(()) };
        let opened = self.open_everywhere(&name, 0, partitions as u32, &config).await;
        for shard in 0..self.shards {
            let op = ShardOp::TopicCreated {
                name: name.clone(),
                partitions: partitions as u32,
                config: config.clone(),
                overrides: overrides.clone(),
            };
            // Boxed: call -> execute -> create_topic -> call is recursive.
            Box::pin(self.call(shard, op)).await;
        }
        opened?;
        tracing::info!(topic = name, partitions, "topic created");
        Ok(())
    }

    /// On shard 0: forget the topic, then have every shard remove its partitions.
    async fn delete_topic(self: &Rc<Self>, name: String) -> Result<(), (i16, String)> {
        if name == OFFSETS_TOPIC {
            return Err((code::INVALID_TOPIC_EXCEPTION, format!("{OFFSETS_TOPIC} is internal: it cannot be deleted")));
        }
        let (_permit, mut store) = self.take_store().await?;
        let result = store.delete(&name).await.map_err(|e| (topic_code(&e), e.to_string()));
        *self.store.borrow_mut() = Some(store);
        result?;
        for shard in 0..self.shards {
            Box::pin(self.call(shard, ShardOp::TopicDeleted { name: name.clone() })).await;
        }
        tracing::info!(topic = name, "topic deleted");
        Ok(())
    }

    /// On shard 0: validate and persist new overrides, then tell every shard.
    async fn alter_topic(
        self: &Rc<Self>,
        name: String,
        ops: Vec<(String, AlterOp)>,
        replace: bool,
        validate_only: bool,
    ) -> Result<(), (i16, String)> {
        let (_permit, mut store) = self.take_store().await?;
        let result = async {
            let current = store
                .get(&name)
                .ok_or((code::UNKNOWN_TOPIC_OR_PARTITION, format!("topic {name} does not exist")))?
                .overrides
                .clone();
            let values = store.config(&name).map_err(|e| (topic_code(&e), e.to_string()))?.describe();
            let next = configs::apply_ops(&current, &ops, replace, |k| values.get(k).cloned(), configs::topic_kind)?;
            let config = store
                .defaults()
                .with_overrides(next.iter().map(|(k, v)| (k.as_str(), v.as_str())))
                .map_err(|e| (code::INVALID_CONFIG, e.to_string()))?;
            if validate_only {
                return Ok(None);
            }
            store.replace_overrides(&name, next.clone()).await.map_err(|e| (topic_code(&e), e.to_string()))?;
            Ok(Some((config, next)))
        }
        .await;
        *self.store.borrow_mut() = Some(store);
        let Some((config, overrides)) = result? else { return Ok(()) };
        for shard in 0..self.shards {
            let op = ShardOp::TopicAltered { name: name.clone(), config: config.clone(), overrides: overrides.clone() };
            Box::pin(self.call(shard, op)).await;
        }
        tracing::info!(topic = name, "topic settings changed");
        Ok(())
    }

    /// On shard 0: change the dynamic broker settings (this node's, or the cluster defaults):
    /// only settings that can change at runtime (Kafka's INVALID_REQUEST "Cannot update these
    /// configs dynamically" otherwise), validated together with the others, persisted, then
    /// applied on every shard; topics whose settings follow a changed default are updated
    /// everywhere.
    async fn alter_broker(
        self: &Rc<Self>,
        node: bool,
        ops: Vec<(String, AlterOp)>,
        replace: bool,
        validate_only: bool,
    ) -> Result<(), (i16, String)> {
        let unknown: Vec<&str> =
            ops.iter().map(|(k, _)| k.as_str()).filter(|k| configs::broker_key(k).is_none()).collect();
        if !unknown.is_empty() {
            return Err((code::INVALID_CONFIG, format!("Unknown broker configs: {}", unknown.join(", "))));
        }
        let fixed: Vec<&str> =
            ops.iter().map(|(k, _)| k.as_str()).filter(|k| configs::broker_key(k).is_some_and(|b| !b.1)).collect();
        if !fixed.is_empty() {
            return Err((
                code::INVALID_REQUEST,
                format!("Cannot update these configs dynamically: Set({})", fixed.join(", ")),
            ));
        }
        let (_permit, mut store) = self.take_store().await?;
        let result = async {
            let current = self.dynamic.borrow().clone();
            let layer = if node { &current.node } else { &current.default };
            let defaults = self.effective().log_defaults.describe();
            let value_of =
                |k: &str| crate::config::topic_key_of_broker_name(k).and_then(|(t, _)| defaults.get(t.name).cloned());
            let kind_of = |k: &str| configs::broker_key(k).map(|b| b.0);
            let layer = configs::apply_ops(layer, &ops, replace, value_of, kind_of)?;
            let mut next = current;
            *(if node { &mut next.node } else { &mut next.default }) = layer;
            let effective =
                Effective::compute(&self.config, &next).map_err(|e| (code::INVALID_REQUEST, format!("{e:#}")))?;
            let changed =
                store.with_defaults(&effective.log_defaults).map_err(|e| (code::INVALID_REQUEST, e.to_string()))?;
            if validate_only {
                return Ok(None);
            }
            let path = self.config.data_dir.join(configs::BROKER_CONFIGS_FILE);
            self.disk
                .write_file_atomic(&path, next.encode().as_bytes())
                .await
                .map_err(|e| (code::KAFKA_STORAGE_ERROR, e.to_string()))?;
            store.set_defaults(effective.log_defaults.clone());
            Ok(Some((next, changed)))
        }
        .await;
        *self.store.borrow_mut() = Some(store);
        let Some((dynamic, changed)) = result? else { return Ok(()) };
        for shard in 0..self.shards {
            Box::pin(self.call(shard, ShardOp::BrokerConfigs { dynamic: dynamic.clone() })).await;
        }
        for (name, config) in changed {
            let overrides = self.topics.borrow().get(&name).map(|t| t.overrides.clone()).unwrap_or_default();
            for shard in 0..self.shards {
                let op =
                    ShardOp::TopicAltered { name: name.clone(), config: config.clone(), overrides: overrides.clone() };
                Box::pin(self.call(shard, op)).await;
            }
        }
        tracing::info!(scope = if node { "node" } else { "cluster default" }, "dynamic broker settings changed");
        Ok(())
    }

    /// On shard 0: have every shard open its partitions `from..to` of a topic; the first
    /// failure, if any (the others still open theirs).
    async fn open_everywhere(
        self: &Rc<Self>,
        name: &str,
        from: u32,
        to: u32,
        config: &LogConfig,
    ) -> Result<(), (i16, String)> {
        let mut result = Ok(());
        for shard in 0..self.shards {
            let op = ShardOp::OpenPartitions { name: name.to_string(), from, to, config: config.clone() };
            if let ShardReply::Admin(Err(e)) = Box::pin(self.call(shard, op)).await {
                result = result.and(Err(e));
            }
        }
        result
    }

    /// On shard 0: raise a topic's partition count, persist it, then have every shard open
    /// the new partitions it owns.
    async fn create_partitions(
        self: &Rc<Self>,
        name: String,
        count: i64,
        validate_only: bool,
    ) -> Result<(), (i16, String)> {
        if name == OFFSETS_TOPIC {
            // Groups are placed by the partition count: growing it would move them.
            return Err((code::INVALID_REQUEST, format!("{OFFSETS_TOPIC} is internal: its partitions cannot change")));
        }
        let (_permit, mut store) = self.take_store().await?;
        let result = store.grow(&name, count, validate_only).await.map_err(|e| (topic_code(&e), e.to_string()));
        *self.store.borrow_mut() = Some(store);
        let (from, config) = result?;
        if validate_only {
            return Ok(());
        }
        let opened = self.open_everywhere(&name, from, count as u32, &config).await;
        for shard in 0..self.shards {
            Box::pin(self.call(shard, ShardOp::TopicGrown { name: name.clone(), partitions: count as u32 })).await;
        }
        opened?;
        tracing::info!(topic = name, from, partitions = count, "partitions added");
        Ok(())
    }

    /// Create a topic with the broker defaults if auto-creation is on and it is missing.
    pub async fn ensure_topic(self: &Rc<Self>, name: &str) -> bool {
        if self.topics.borrow().contains_key(name) {
            return true;
        }
        if !self.effective().auto_create_topics {
            return false;
        }
        let op = ShardOp::CreateTopic {
            name: name.to_string(),
            partitions: self.effective().num_partitions as i64,
            configs: Vec::new(),
            validate_only: false,
        };
        match self.call(0, op).await {
            ShardReply::Admin(Ok(())) => true,
            ShardReply::Admin(Err((c, _))) if c == code::TOPIC_ALREADY_EXISTS => true,
            _ => false,
        }
    }
}
