//! A shard: one executor pinned to one core, owning the partitions that hash to it
//! ([`crate::placement`]), its view of the topics, the consumer groups it coordinates,
//! and its share of the memory budgets. Its state is private: the API modules read it through
//! the methods here, and change it only through typed calls ([`crate::server::router`]), which
//! are the only way work crosses to another shard. Nothing here is shared across threads
//! except the connection table and the messages.
//!
//! Shard 0 also holds the control plane's state (the topic store and the producer-id blocks,
//! [`ControlState`]); the operations on it are [`crate::server::control`]'s.

use crate::budget::Budget;
use crate::cluster::types::PartitionState;
use crate::config::LogConfig;
use crate::coordinator::group::{Coordinator, OFFSETS_TOPIC};
use crate::coordinator::txn::{TxnCoordinator, TXN_TOPIC};
use crate::groups::consumer::{TopicMeta, Topics};
use crate::io::{Disk, DmaDisk};
use crate::placement::owner;
use crate::protocol::errors::{self as code, ErrorCode};
use crate::security::acl::Acls;
use crate::security::Credentials;
use crate::server::configs::{DynamicConfigs, Effective};
use crate::server::data_dir::Identity;
use crate::server::limits::{ConnectionTable, LogEvery};
use crate::server::producer_ids::ProducerIds;
use crate::server::publish::{Delta, Follower, Publish, TopicInfo};
use crate::server::router::{CallError, Envelope, Routed, Router, ShardCall};
use crate::server::view::{Access, Settings, TopicsView};
use crate::server::BrokerConfig;
use crate::storage::cache::BatchCache;
use crate::storage::manager::PartitionManager;
use crate::storage::topics::TopicStore;
use crate::storage::{system_clock, Clock, Partition};
use crate::types::Uuid;
use glommio::channels::channel_mesh::{Receivers, Senders};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;

/// Shard 0's control-plane state: the persistent topic store (taken out of its cell while an
/// operation on it awaits, `lock` serializing those operations) and the producer-id blocks.
pub struct ControlState {
    store: RefCell<Option<TopicStore<DmaDisk>>>,
    lock: glommio::sync::Semaphore,
    pub producer_ids: ProducerIds,
    /// For the control plane's own files (`broker-configs`).
    pub disk: DmaDisk,
    /// A clustered node's controller (`control::quorum`), once started.
    pub quorum: RefCell<Option<Rc<crate::cluster::member::Member<DmaDisk>>>>,
    /// The metadata log index whose image the shards have (`control::publisher`).
    pub published: tokio::sync::watch::Sender<u64>,
    /// The version of each cluster-wide document in force here (`control::documents`).
    pub documents: RefCell<BTreeMap<String, u64>>,
    /// Documents whose newer version this node could not take yet (retried by the publisher).
    pub failed_documents: RefCell<BTreeMap<String, u64>>,
}

/// The topic store, lent to one control operation at a time; it goes back when this drops.
pub struct StoreLease<'a> {
    state: &'a ControlState,
    store: Option<TopicStore<DmaDisk>>,
    _permit: glommio::sync::Permit<'a>,
}

impl StoreLease<'_> {
    pub fn store(&mut self) -> &mut TopicStore<DmaDisk> {
        self.store.as_mut().expect("a lease holds the store until it drops")
    }
}

impl Drop for StoreLease<'_> {
    fn drop(&mut self) {
        *self.state.store.borrow_mut() = self.store.take();
    }
}

impl ControlState {
    /// Shard 0's control-plane state, over the topic store it opened.
    async fn open(
        store: TopicStore<DmaDisk>,
        disk: DmaDisk,
        config: &BrokerConfig,
        clock: &Clock,
    ) -> anyhow::Result<ControlState> {
        let producer_ids = ProducerIds::open(disk.clone(), &config.data_dir, clock()).await?;
        Ok(ControlState {
            store: RefCell::new(Some(store)),
            lock: glommio::sync::Semaphore::new(1),
            producer_ids,
            disk,
            quorum: RefCell::new(None),
            published: tokio::sync::watch::Sender::new(0),
            documents: RefCell::new(BTreeMap::new()),
            failed_documents: RefCell::new(BTreeMap::new()),
        })
    }

    /// Wait for the topic store (topic changes run one at a time) and take it, so no borrow
    /// is held across the change's awaits.
    pub async fn lease(&self) -> StoreLease<'_> {
        let permit = self.lock.acquire_permit(1).await.expect("the store lock is never closed");
        let store = self.store.borrow_mut().take().expect("the store is back whenever the lock is free");
        StoreLease { state: self, store: Some(store), _permit: permit }
    }
}

/// The topics as a shard knows them, for consumer groups: subscriptions by name, assignments
/// by id, and names again for their classic members. Held weakly by the shard's coordinator
/// (the shard owns the coordinator).
pub struct ShardTopics(std::rc::Weak<Shard>);

impl Topics for ShardTopics {
    fn get(&self, name: &str) -> Option<TopicMeta> {
        self.0.upgrade()?.topic(name, |t| (t.id, t.partitions as i32))
    }

    fn names(&self) -> Vec<String> {
        let Some(shard) = self.0.upgrade() else { return Vec::new() };
        let mut names = shard.topic_names();
        names.retain(|n| n != OFFSETS_TOPIC);
        names
    }

    fn name_of(&self, id: Uuid) -> Option<String> {
        self.0.upgrade()?.topic_name(id)
    }

    fn leads(&self, name: &str, partition: i32) -> bool {
        self.0.upgrade().is_some_and(|s| s.leads(name, partition))
    }

    fn in_sync(&self, name: &str, partition: i32) -> Option<usize> {
        self.0.upgrade()?.in_sync(name, partition)
    }
}

/// Every topic of the store as a shard knows it, with the partitions shard `id` of `shards`
/// owns opened: all of them standalone; clustered, those it is a replica of (it has their
/// directory: the metadata image then opens or closes the rest).
async fn open_topics(
    store: &TopicStore<DmaDisk>,
    manager: &PartitionManager<DmaDisk>,
    disk: &DmaDisk,
    config: &BrokerConfig,
    (id, shards): (usize, usize),
) -> anyhow::Result<BTreeMap<String, TopicInfo>> {
    let mut topics = BTreeMap::new();
    for name in store.names().map(str::to_string).collect::<Vec<_>>() {
        let meta = store.get(&name).expect("listed");
        let info = TopicInfo {
            id: meta.id,
            partitions: meta.partitions,
            config: store.config(&name)?,
            overrides: meta.overrides.clone(),
            placement: None,
        };
        for p in (0..info.partitions as i32).filter(|p| owner(&name, *p, shards) == id) {
            let dir = crate::storage::manager::partition_dir(&config.data_dir, &name, p);
            if config.cluster.is_none() || disk.exists(&dir).await? {
                manager.open_partition(&name, p, info.config.clone()).await?;
            }
        }
        topics.insert(name, info);
    }
    Ok(topics)
}

pub struct Shard {
    router: Router<Shard>,
    config: Arc<BrokerConfig>,
    manager: Rc<PartitionManager<DmaDisk>>,
    /// The topics as this shard knows them.
    topics: TopicsView,
    coordinator: Rc<Coordinator>,
    /// The transaction coordinator of the transactional ids this shard owns.
    txn: Rc<TxnCoordinator>,
    /// This shard's share of `queued.max.request.bytes`: request frames read, not answered.
    request_memory: Budget,
    /// This shard's share of `tidemark.fetch.max.memory.bytes`: fetched records not written.
    fetch_memory: Budget,
    /// The dynamic broker settings, and the settings they give with the static ones.
    settings: Settings,
    /// Whose data directory this is (cluster id, node id).
    identity: Identity,
    /// Users' SCRAM credentials and the ACL bindings.
    access: Access,
    /// Repeated log lines, at most one a second each: refused connections, failed reads.
    refusals_log: LogEvery,
    read_errors_log: LogEvery,
    clock: Clock,
    /// Shard 0 only.
    control: Option<ControlState>,
    /// The partitions this shard leads or follows ([`crate::replica`]).
    replication: crate::replica::Replication,
    /// Connections to the other brokers for short requests ([`crate::server::peers`]);
    /// replication's fetchers keep their own (their long polls would hold these up).
    peers: crate::client::Peers,
    /// Transactional first writes waiting for their coordinator, one at a time per producer
    /// and partition ([`crate::server::txn_writes::FirstWrites`]).
    first_writes: crate::server::txn_writes::FirstWrites,
}

impl Shard {
    /// Open this shard's view of the topics and the partitions it owns.
    pub async fn open(
        id: usize,
        shards: usize,
        config: Arc<BrokerConfig>,
        dynamic: DynamicConfigs,
        connections: Arc<ConnectionTable>,
        identity: Identity,
    ) -> anyhow::Result<Rc<Shard>> {
        let effective = Effective::compute(&config, &dynamic)?;
        let disk = DmaDisk::open(&config.data_dir).await?;
        let store = TopicStore::open(disk.clone(), &config.data_dir, effective.log_defaults.clone()).await?;
        let clock = system_clock();
        let share = |total: u64| total / shards as u64;
        let fetch_memory = Budget::new(share(config.limits.fetch_max_memory_bytes));
        // The batch cache lives in the fetch budget's free part and keeps at most a quarter of
        // the registered DMA pool (the write tails need the rest).
        let cache = config.batch_cache.then(|| BatchCache::new(fetch_memory.clone(), config.shard_io_memory / 4));
        let manager = PartitionManager::new(disk.clone(), &config.data_dir, clock.clone(), cache);
        if config.cluster.is_some() {
            manager.set_replicated();
        }
        let topics = open_topics(&store, &manager, &disk, &config, (id, shards)).await?;
        manager.spawn_upkeep(config.retention_check_interval);
        manager.spawn_cleaner(config.cleaner, shards);
        let control = match id {
            0 => Some(ControlState::open(store, disk, &config, &clock).await?),
            _ => None,
        };
        let coordinator =
            Rc::new(Coordinator::new(config.coordinator.clone(), id, shards, manager.clone(), clock.clone()));
        coordinator.set_offsets_partitions(topics.get(OFFSETS_TOPIC).map(|t: &TopicInfo| t.partitions));
        let txn = Rc::new(TxnCoordinator::new(
            config.txn.clone(),
            shards,
            manager.clone(),
            clock.clone(),
            config.coordinator.compaction_bytes,
        ));
        txn.set_partitions(topics.get(TXN_TOPIC).map(|t: &TopicInfo| t.partitions));
        let features = crate::features::Features::load(&config.data_dir)?;
        txn.set_transaction_version(features.level(crate::features::TRANSACTION_VERSION));
        let credentials = Credentials::load(&config.data_dir)?;
        let acls = Acls::load(&config.data_dir)?;
        let shard = Rc::new(Shard {
            router: Router::new(id, shards, config.shard_call_timeout),
            request_memory: Budget::new(share(config.limits.queued_max_request_bytes)),
            fetch_memory,
            refusals_log: LogEvery::default(),
            read_errors_log: LogEvery::default(),
            settings: Settings::new(config.clone(), dynamic, effective, connections, features),
            identity,
            access: Access::new(credentials, acls),
            topics: TopicsView::new(config.node_id, config.cluster.is_some(), topics),
            config,
            manager,
            coordinator,
            txn,
            clock,
            control,
            replication: Default::default(),
            peers: Default::default(),
            first_writes: Default::default(),
        });
        shard.coordinator.attach_topics(Rc::new(ShardTopics(Rc::downgrade(&shard))));
        shard.txn.attach_topics(Rc::new(ShardTopics(Rc::downgrade(&shard))));
        // A clustered node loads an internal partition's state when it becomes its leader
        // (`crate::replica`); a standalone node leads them all, now.
        if shard.config.cluster.is_none() {
            let records = shard.coordinator.load().await?;
            if records > 0 {
                tracing::info!(shard = id, records, "committed offsets loaded");
            }
            let records = shard.txn.load().await?;
            if records > 0 {
                tracing::info!(shard = id, records, "transaction state loaded");
            }
        }
        Ok(shard)
    }

    /// Connect to the mesh: calls from the other shards run here from now on.
    pub fn attach(self: &Rc<Self>, senders: Senders<Envelope<Shard>>, receivers: Receivers<Envelope<Shard>>) {
        self.router.attach(self, senders, receivers);
    }

    /// Run `call` on shard `target` (here when it is this one), within its deadline.
    pub async fn call<C: ShardCall<Shard>>(self: &Rc<Self>, target: usize, call: C) -> Result<C::Reply, CallError> {
        self.router.call(self, target, call).await
    }

    /// Run `call` on every shard, one after another; the replies in shard order.
    pub async fn call_each<C: ShardCall<Shard> + Clone>(self: &Rc<Self>, call: C) -> Vec<Result<C::Reply, CallError>> {
        self.router.call_each(self, call).await
    }

    pub fn id(&self) -> usize {
        self.router.id()
    }

    pub fn shards(&self) -> usize {
        self.router.shards()
    }

    /// The shard that owns a partition.
    pub fn owner(&self, topic: &str, partition: i32) -> usize {
        owner(topic, partition, self.shards())
    }

    pub fn config(&self) -> &BrokerConfig {
        &self.config
    }

    /// The settings in force (static with dynamic over them).
    pub fn effective(&self) -> Rc<Effective> {
        self.settings.effective()
    }

    /// Users' SCRAM credentials as this shard knows them.
    pub fn credentials(&self) -> Rc<Credentials> {
        self.access.credentials()
    }

    /// The ACL bindings as this shard knows them.
    pub fn acls(&self) -> Rc<Acls> {
        self.access.acls()
    }

    /// The dynamic broker settings as this shard applies them.
    pub fn dynamic(&self) -> DynamicConfigs {
        self.settings.dynamic()
    }

    /// The cluster's finalized feature levels as this shard knows them.
    pub fn features(&self) -> Rc<crate::features::Features> {
        self.settings.features()
    }

    /// Broker wall-clock time in ms.
    pub fn now(&self) -> i64 {
        (self.clock)()
    }

    /// A partition this shard owns and has open.
    pub fn partition(&self, topic: &str, partition: i32) -> Option<Rc<Partition<DmaDisk>>> {
        self.manager.get(topic, partition)
    }

    /// A partition's replicas and leadership as clients are told them ([`TopicsView::leadership`]).
    pub fn leadership(&self, topic: &str, partition: i32) -> Option<PartitionState> {
        self.topics.leadership(topic, partition)
    }

    /// A partition's leader (-1: none now). `None`: no such partition.
    pub fn leader(&self, topic: &str, partition: i32) -> Option<i32> {
        self.topics.leader(topic, partition)
    }

    /// How many replicas of a partition are in sync (one, standalone; none while unknown).
    pub fn in_sync(&self, topic: &str, partition: i32) -> Option<usize> {
        self.topics.in_sync(topic, partition)
    }

    /// The partition a client's produce, fetch or offset request is for, if this node leads it
    /// and this shard has it open: UNKNOWN_TOPIC_OR_PARTITION when no such partition exists,
    /// NOT_LEADER_OR_FOLLOWER when another node leads it (or none does), so the client
    /// refreshes its metadata and goes there.
    pub fn led_partition(&self, topic: &str, partition: i32) -> Result<Rc<Partition<DmaDisk>>, ErrorCode> {
        match self.leader(topic, partition) {
            None => Err(code::UNKNOWN_TOPIC_OR_PARTITION),
            Some(l) if l != self.config.node_id => Err(code::NOT_LEADER_OR_FOLLOWER),
            // Led here but not open (it failed to open): as a partition this node lacks.
            Some(_) => self.manager.get(topic, partition).ok_or(code::UNKNOWN_TOPIC_OR_PARTITION),
        }
    }

    /// Whether this node leads a partition (always, standalone).
    pub fn leads(&self, topic: &str, partition: i32) -> bool {
        self.leader(topic, partition) == Some(self.config.node_id)
    }

    pub fn replication(&self) -> &crate::replica::Replication {
        &self.replication
    }

    pub fn peers(&self) -> &crate::client::Peers {
        &self.peers
    }

    pub fn manager(&self) -> &Rc<PartitionManager<DmaDisk>> {
        &self.manager
    }

    pub fn coordinator(&self) -> &Rc<Coordinator> {
        &self.coordinator
    }

    pub fn txn(&self) -> &Rc<TxnCoordinator> {
        &self.txn
    }

    pub fn first_writes(&self) -> &crate::server::txn_writes::FirstWrites {
        &self.first_writes
    }

    pub fn request_memory(&self) -> &Budget {
        &self.request_memory
    }

    pub fn fetch_memory(&self) -> &Budget {
        &self.fetch_memory
    }

    /// Give at least `bytes` of the fetch budget back from the batch cache (a fetch needs them).
    pub fn release_cached(&self, bytes: u64) {
        if let Some(cache) = self.manager.batch_cache() {
            cache.release(bytes);
        }
    }

    pub fn connections(&self) -> &Arc<ConnectionTable> {
        self.settings.connections()
    }

    /// Refused connections: at most one log line a second.
    pub fn refusals_log(&self) -> &LogEvery {
        &self.refusals_log
    }

    /// Failed reads: at most one log line a second.
    pub fn read_errors_log(&self) -> &LogEvery {
        &self.read_errors_log
    }

    /// Shard 0's control-plane state; `None` on the others.
    pub fn control(&self) -> Option<&ControlState> {
        self.control.as_ref()
    }

    /// The cluster id, from the data directory.
    pub fn cluster_id(&self) -> Uuid {
        self.identity.cluster_id
    }

    /// The data directory's id (`meta.properties`' `directory.id`).
    pub fn directory_id(&self) -> Uuid {
        self.identity.directory_id
    }

    /// Look at a topic as this shard knows it.
    pub fn topic<R>(&self, name: &str, f: impl FnOnce(&TopicInfo) -> R) -> Option<R> {
        self.topics.topic(name, f)
    }

    /// The name of the topic with this id (KIP-516), if this shard knows it.
    pub fn topic_name(&self, id: Uuid) -> Option<String> {
        self.topics.name_of(id)
    }

    pub fn has_topic(&self, name: &str) -> bool {
        self.topics.contains(name)
    }

    pub fn topic_names(&self) -> Vec<String> {
        self.topics.names()
    }

    /// The partition count of `__consumer_offsets`, once it exists.
    pub fn offsets_partitions(&self) -> Option<u32> {
        self.topic(OFFSETS_TOPIC, |t| t.partitions)
    }

    /// Take one metadata delta from shard 0 (the order is [`crate::server::publish`]'s).
    async fn follow(self: &Rc<Self>, delta: Delta) {
        if let Delta::Placed { name, config, placement, fresh_from } = &delta {
            self.place_partitions(name, config, placement, *fresh_from).await;
        }
        self.topics.follow(&delta);
        self.access.follow(&delta);
        self.settings.follow(&delta);
        match &delta {
            Delta::TopicCreated { name, info } => self.internal_topic_created(name, info.partitions),
            Delta::TopicAltered { name, config, .. } => self.manager.set_topic_config(name, config),
            Delta::Placed { name, placement, .. } => self.replication.placed(self, name, placement),
            Delta::BrokerEpoch(epoch) => self.replication.set_broker_epoch(*epoch),
            Delta::TopicDeleted { name, partitions } => {
                self.replication.forget_topic(name);
                self.remove_partitions(name, *partitions).await;
            }
            Delta::Features(f) => self.txn.set_transaction_version(f.level(crate::features::TRANSACTION_VERSION)),
            Delta::TopicGrown { .. } | Delta::Acls(_) | Delta::Credentials(_) | Delta::BrokerSettings(_) => {}
        }
    }

    /// The coordinators place groups and transactional ids by their topic's partition count
    /// (which never changes: internal topics do not grow).
    fn internal_topic_created(&self, name: &str, partitions: u32) {
        if name == OFFSETS_TOPIC {
            self.coordinator.set_offsets_partitions(Some(partitions));
        } else if name == TXN_TOPIC {
            self.txn.set_partitions(Some(partitions));
        }
    }

    /// A topic's placement: open the partitions this shard owns where this node is a replica
    /// (a new one, from `fresh_from` on, cleared first of what an interrupted deletion left),
    /// close those where it is not.
    async fn place_partitions(&self, name: &str, config: &LogConfig, placement: &[PartitionState], fresh_from: u32) {
        let node = self.config.node_id;
        for (p, state) in placement.iter().enumerate() {
            let p = p as i32;
            if self.owner(name, p) != self.id() {
                continue;
            }
            let replica = state.replicas.contains(&node);
            let open = self.manager.get(name, p).is_some();
            if replica && !open {
                let cleared =
                    if p as u32 >= fresh_from { self.manager.delete_partition(name, p).await } else { Ok(()) };
                let opened = match cleared {
                    Ok(()) => self.manager.open_partition(name, p, config.clone()).await.map(|_| ()),
                    Err(e) => Err(e),
                };
                if let Err(e) = opened {
                    tracing::error!(topic = name, partition = p, error = %e, "cannot open a partition this node is a replica of");
                }
            } else if !replica && open {
                self.manager.close_partition(name, p).await;
            }
        }
    }

    /// A deleted topic's partitions this shard owns: closed and removed from disk.
    async fn remove_partitions(&self, name: &str, partitions: u32) {
        for p in (0..partitions as i32).filter(|p| self.owner(name, *p) == self.id()) {
            if let Err(e) = self.manager.delete_partition(name, p).await {
                tracing::error!(topic = name, partition = p, error = %e, "cannot remove partition");
            }
        }
    }

    /// This shard's measurements, with its gauges read now.
    pub fn metrics(&self) -> crate::metrics::ShardMetrics {
        let mut m = crate::metrics::snapshot();
        let suspended = self.manager.partitions().iter().filter(|(_, p)| p.log().flush_failures() > 0).count();
        let (req, fetch) = (&self.request_memory, &self.fetch_memory);
        let cleaner = self.manager.cleaner_stats();
        let cache = self.manager.batch_cache().map(|c| c.stats()).unwrap_or_default();
        m.gauges = vec![
            ("request_memory_bytes", "Bytes of requests read and not yet answered.", req.in_use()),
            ("request_memory_peak_bytes", "The most request bytes held at once.", req.peak()),
            ("request_memory_capacity_bytes", "This shard's share of queued.max.request.bytes.", req.capacity()),
            ("fetch_memory_bytes", "Bytes of fetched records not yet written to clients.", fetch.in_use()),
            ("fetch_memory_peak_bytes", "The most fetched bytes held at once.", fetch.peak()),
            ("fetch_memory_capacity_bytes", "This shard's share of tidemark.fetch.max.memory.bytes.", fetch.capacity()),
            ("partitions_writes_suspended", "Partitions whose last flush failed (appends refused).", suspended as u64),
            ("batch_cache_bytes", "Memory the batch cache holds (part of fetch_memory_bytes).", cache.bytes),
            ("batch_cache_dma_bytes", "Of batch_cache_bytes, DMA buffers of the registered pool.", cache.dma_bytes),
            ("batch_cache_entries", "Byte ranges the batch cache holds.", cache.entries),
            ("batch_cache_hits_total", "Log reads served from the batch cache.", cache.hits),
            ("batch_cache_hit_bytes_total", "Bytes of log reads served from the batch cache.", cache.hit_bytes),
            ("batch_cache_misses_total", "Log reads that went to disk.", cache.misses),
            ("batch_cache_miss_bytes_total", "Bytes of log reads that went to disk.", cache.miss_bytes),
            ("batch_cache_evictions_total", "Entries dropped for room or for fetches.", cache.evictions),
            ("cleaner_passes_total", "Compaction passes completed.", cleaner.passes),
            (
                "cleaner_failures_total",
                "Compaction passes that failed (retried after log.cleaner.backoff.ms).",
                cleaner.failures,
            ),
            (
                "cleaner_bytes_read_total",
                "Bytes of log compaction passes read (the cleanable range).",
                cleaner.bytes_read,
            ),
            ("cleaner_bytes_written_total", "Bytes compaction passes wrote (what stayed).", cleaner.bytes_written),
            ("cleaner_time_ms_total", "Time spent in compaction passes (ms).", cleaner.time_ms),
            (
                "cleaner_max_compaction_delay_ms",
                "Age of the oldest uncompacted (dirty) data of any compacted partition at the last check (ms).",
                cleaner.max_delay_ms,
            ),
        ];
        m.partition_gauges = cleaner
            .dirty_ratios
            .into_iter()
            .map(|((topic, partition), ratio)| ("log_dirty_ratio", topic, partition, ratio))
            .collect();
        m
    }
}

impl Routed for Shard {
    fn router(&self) -> &Router<Shard> {
        &self.router
    }
}

/// A shard's measurements (for /metrics on shard 0).
#[derive(Debug, Clone, Copy)]
pub struct Metrics;

impl ShardCall<Shard> for Metrics {
    type Reply = Box<crate::metrics::ShardMetrics>;
    const NAME: &'static str = "metrics";

    async fn run(self, shard: Rc<Shard>) -> Self::Reply {
        Box::new(shard.metrics())
    }
}

impl ShardCall<Shard> for Publish {
    type Reply = ();
    const NAME: &'static str = "publish";

    async fn run(self, shard: Rc<Shard>) {
        shard.follow(self.0).await;
    }
}
