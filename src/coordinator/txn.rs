//! The transaction coordinator of one shard (KIP-98): the transactional ids whose
//! `__transaction_state` partition this shard owns, their metadata ([`crate::txn`]) and the
//! markers that end their transactions.
//!
//! A transactional id lives on one shard: `__transaction_state` partition
//! `txn::partition_for(id)` (Kafka's placement), owned like any partition; the handlers route
//! every request about an id there. A change is prepared on the metadata (pending), written to
//! that partition as one record and applied once durable ([`TxnCoordinator::persist`]).
//! Startup replays the partitions this shard owns: a prepared commit or abort resumes its
//! markers, an open transaction waits for its timeout.
//!
//! Markers go to the leaders of the transaction's partitions through the [`TxnHost`] (the
//! broker's shard: a typed call to the owning shard, or WriteTxnMarkers to another node); each
//! appends its control batch and answers once it is durable; when every partition answered,
//! CompleteCommit or CompleteAbort is written. A marker that cannot
//! be written (a disk failure) is retried until it is; a partition that no longer exists is
//! skipped, as Kafka skips a deleted topic's.
//!
//! A sweep every `transaction.abort.timed.out.transaction.cleanup.interval.ms` aborts the
//! transactions open past their timeout (an epoch fence, then the abort markers), and every
//! `transaction.remove.expired.transaction.cleanup.interval.ms` forgets the ids idle past
//! `transactional.id.expiration.ms` (a tombstone). The partition is compacted as
//! `__consumer_offsets` is: past `tidemark.offsets.compaction.bytes`, every live id written
//! again and the older segments deleted.

use crate::errors::txn_code;
use crate::io::DmaDisk;
use crate::placement::owner;
use crate::protocol::errors::{self as code, ErrorCode};
use crate::storage::format::batch::BatchBuilder;
use crate::storage::format::marker::Marker;
use crate::storage::manager::PartitionManager;
use crate::storage::Clock;
use crate::txn::{self, End, Init, TopicPartition, Transit, TxnMetadata, TxnState, TxnVersion};
use crate::types::Offset;
use futures_channel::oneshot;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;

/// What the transaction coordinator needs of the shard it runs on (the broker's shard
/// implements it).
pub trait TxnHost: Sized + 'static {
    /// A new producer id from the cluster's allocator.
    async fn allocate_producer_id(self: &Rc<Self>) -> Result<i64, ErrorCode>;
    /// The epoch markers of `__transaction_state` partition `index`'s ids carry: its leader
    /// epoch, clustered ([`COORDINATOR_EPOCH`] standalone). A partition refuses markers of an
    /// older coordinator.
    fn coordinator_epoch(&self, index: i32) -> i32;
    /// Write one marker at the partition's leader, durable on its in-sync replicas. `Err`: no
    /// answer (the caller retries).
    async fn write_marker(
        self: &Rc<Self>,
        topic: &str,
        partition: i32,
        pid: i64,
        epoch: i16,
        marker: Marker,
    ) -> Result<Result<(), ErrorCode>, String>;
}

/// The internal topic holding the transactions' state.
pub const TXN_TOPIC: &str = "__transaction_state";
/// The coordinator epoch markers carry: one node, one coordinator for good (a cluster will
/// use the partition's leader epoch).
pub const COORDINATOR_EPOCH: i32 = 0;
/// How long a failed marker or state write waits before it is tried again.
const RETRY: Duration = Duration::from_millis(200);

/// Settings of the transaction coordinator, with Kafka's names.
#[derive(Debug, Clone)]
pub struct TxnConfig {
    /// `transaction.state.log.num.partitions` (when the topic is created; 8, Kafka's 50 as
    /// `offsets.topic.num.partitions`).
    pub partitions: u32,
    /// `transaction.state.log.segment.bytes`
    pub segment_bytes: u64,
    /// `transaction.max.timeout.ms`: the longest `transaction.timeout.ms` a producer may ask.
    pub max_timeout_ms: i32,
    /// `transactional.id.expiration.ms`
    pub id_expiration_ms: i64,
    /// `transaction.abort.timed.out.transaction.cleanup.interval.ms`
    pub abort_check: Duration,
    /// `transaction.remove.expired.transaction.cleanup.interval.ms`
    pub expire_check: Duration,
}

impl Default for TxnConfig {
    fn default() -> Self {
        TxnConfig {
            partitions: 8,
            segment_bytes: 100 << 20,
            max_timeout_ms: 900_000,
            id_expiration_ms: 604_800_000,
            abort_check: Duration::from_secs(10),
            expire_check: Duration::from_secs(3600),
        }
    }
}

/// The shard that coordinates a transactional id.
pub fn txn_shard(id: &str, partitions: u32, shards: usize) -> usize {
    owner(TXN_TOPIC, txn::partition_for(id, partitions as i32), shards)
}

pub struct TxnCoordinator {
    config: TxnConfig,
    shards: usize,
    manager: Rc<PartitionManager<DmaDisk>>,
    clock: Clock,
    /// The partition count of `__transaction_state`, once it exists.
    partitions: Cell<Option<u32>>,
    ids: RefCell<HashMap<String, TxnMetadata>>,
    /// `__transaction_state` partitions being loaded after this node became their leader,
    /// with the load's generation.
    loads: crate::coordinator::runtime::Loads,
    /// The shard's topics, to ask which partitions this node leads ([`TxnCoordinator::attach_topics`]).
    topics: RefCell<Option<Rc<dyn crate::groups::consumer::Topics>>>,
    /// `tidemark.offsets.compaction.bytes`: a state partition larger than this (and than twice
    /// its live records) is compacted.
    compaction_bytes: u64,
    /// The cluster's finalized `transaction.version`: at 1 and above the state records are
    /// written at value version 1, as Kafka writes them (below, only those that need it).
    transaction_version: Cell<TxnVersion>,
    /// Version 2 enrolments of a producer's next transaction that arrived while its previous
    /// one's markers were being written, by transactional id: written with that end's
    /// completion, in the same durable write, instead of refused (CONCURRENT_TRANSACTIONS) and
    /// retried after it.
    held: RefCell<HashMap<String, Vec<Held>>>,
}

/// A held enrolment ([`TxnCoordinator::held`]): producer id, epoch, partitions, and where its
/// answer goes.
struct Held {
    enrolment: (i64, i16, Vec<TopicPartition>),
    answer: oneshot::Sender<Result<(), ErrorCode>>,
}

/// How long a held enrolment waits for the markers before it is answered
/// CONCURRENT_TRANSACTIONS (the partition leader then retries as Kafka's does), well inside
/// the leader's `add.partitions.to.txn.retry.backoff.max.ms`.
const HOLD_MAX: Duration = Duration::from_millis(50);

/// What DescribeTransactions shows of an id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Described {
    pub state: TxnState,
    pub timeout_ms: i32,
    pub start_ms: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub partitions: Vec<TopicPartition>,
}

impl TxnCoordinator {
    pub fn new(
        config: TxnConfig,
        shards: usize,
        manager: Rc<PartitionManager<DmaDisk>>,
        clock: Clock,
        compaction_bytes: u64,
    ) -> TxnCoordinator {
        TxnCoordinator {
            config,
            shards,
            manager,
            clock,
            partitions: Cell::new(None),
            ids: RefCell::new(HashMap::new()),
            loads: Default::default(),
            topics: RefCell::new(None),
            compaction_bytes,
            transaction_version: Cell::new(txn::TV2),
            held: RefCell::new(HashMap::new()),
        }
    }

    /// The cluster's finalized `transaction.version` changed (UpdateFeatures).
    pub fn set_transaction_version(&self, level: TxnVersion) {
        self.transaction_version.set(level);
    }

    /// The value version `m`'s record is written at ([`txn::log::version_for`]).
    fn log_version(&self, m: &TxnMetadata) -> i16 {
        txn::log::version_for(m, self.transaction_version.get())
    }

    /// How the coordinator learns which partitions this node leads (set once the shard exists).
    pub fn attach_topics(&self, topics: Rc<dyn crate::groups::consumer::Topics>) {
        *self.topics.borrow_mut() = Some(topics);
    }

    pub fn config(&self) -> &TxnConfig {
        &self.config
    }

    /// `__transaction_state` exists with this many partitions (or not yet).
    pub fn set_partitions(&self, partitions: Option<u32>) {
        self.partitions.set(partitions);
    }

    /// The partition count of `__transaction_state`, once it exists.
    pub fn partitions(&self) -> Option<u32> {
        self.partitions.get()
    }

    /// The shard that coordinates `id`, once `__transaction_state` exists.
    pub fn shard_of(&self, id: &str) -> Option<usize> {
        self.partitions.get().map(|n| txn_shard(id, n, self.shards))
    }

    fn now(&self) -> i64 {
        (self.clock)()
    }

    /// The error for a request about `id` this shard cannot serve, if any.
    fn unavailable(&self, id: &str) -> Option<ErrorCode> {
        if id.is_empty() || id.len() > i16::MAX as usize {
            return Some(code::INVALID_REQUEST);
        }
        let Some(n) = self.partitions.get() else { return Some(code::COORDINATOR_NOT_AVAILABLE) };
        let index = txn::partition_for(id, n as i32);
        let led = self.topics.borrow().as_ref().is_none_or(|t| t.leads(TXN_TOPIC, index));
        if self.manager.get(TXN_TOPIC, index).is_none() || !led {
            return Some(code::NOT_COORDINATOR);
        }
        if self.loads.is_loading(index) {
            return Some(code::COORDINATOR_LOAD_IN_PROGRESS);
        }
        None
    }

    /// Replay this shard's `__transaction_state` partitions (startup); then resume the
    /// markers of prepared transactions.
    pub async fn load(&self) -> anyhow::Result<usize> {
        let mut records = 0;
        for (index, p) in crate::coordinator::runtime::partitions_of(&self.manager, TXN_TOPIC) {
            records += self.load_partition(index, &p, None).await?;
        }
        Ok(records)
    }

    /// Replay partition `index`; a leadership's load (`generation`) stops at once when a newer
    /// one (or a resignation) supersedes it, writing nothing more into the state.
    async fn load_partition(
        &self,
        index: i32,
        p: &Rc<crate::storage::Partition<DmaDisk>>,
        generation: Option<u64>,
    ) -> anyhow::Result<usize> {
        let mut records = 0;
        let limit = p.log().config().decompress_limit();
        p.for_each_chunk(|bytes| -> anyhow::Result<()> {
            if generation.is_some_and(|g| !self.loads.is_current(index, g)) {
                anyhow::bail!("{TXN_TOPIC}-{index}: load superseded");
            }
            let mut failed = None;
            crate::groups::offsets::for_each_record(bytes, limit, |key, value, offset| {
                records += 1;
                if let Err(e) = self.replay(key, value) {
                    failed.get_or_insert(format!("offset {offset}: {e}"));
                }
            })
            .map_err(|e| anyhow::anyhow!("{TXN_TOPIC}-{index}: unreadable records: {e}"))?;
            if let Some(e) = failed {
                // Not ours to fail startup on (Kafka skips what it cannot read): logged.
                tracing::warn!(partition = index, error = e, "undecodable transaction record skipped");
            }
            Ok(())
        })
        .await?;
        Ok(records)
    }

    /// This node became the leader of `__transaction_state` partition `index` (replication):
    /// its transactional ids are loaded from its copy (what the previous leader wrote), and the
    /// markers of transactions left prepared are resumed. Called synchronously when the
    /// leadership arrives: requests for its ids are answered COORDINATOR_LOAD_IN_PROGRESS and
    /// its writes refused until the load ends; the returned load runs in a task of its own. A
    /// later leadership's load supersedes this one.
    pub fn begin_load<H: TxnHost>(
        self: &Rc<Self>,
        host: &Rc<H>,
        index: i32,
    ) -> impl std::future::Future<Output = ()> + 'static {
        let generation = self.loads.begin(index);
        self.unload(index);
        let (me, host) = (self.clone(), host.clone());
        async move {
            let Some(p) = me.manager.get(TXN_TOPIC, index) else { return };
            let loaded = me.load_partition(index, &p, Some(generation)).await;
            if !me.loads.finish(index, generation) {
                return; // superseded
            }
            match loaded {
                Ok(records) => tracing::info!(partition = index, records, "transaction partition loaded as its leader"),
                Err(e) => tracing::error!(partition = index, error = %e, "cannot load a transaction partition"),
            }
            let Some(n) = me.partitions.get() else { return };
            let prepared: Vec<String> =
                me.prepared().into_iter().filter(|id| txn::partition_for(id, n as i32) == index).collect();
            for id in prepared {
                me.spawn_markers(&host, id);
            }
        }
    }

    /// Forget the ids of partition `index` (this node no longer leads it, or loads it again).
    pub fn unload(&self, index: i32) {
        let Some(n) = self.partitions.get() else { return };
        self.ids.borrow_mut().retain(|id, _| txn::partition_for(id, n as i32) != index);
    }

    /// This node no longer leads `__transaction_state` partition `index`.
    pub fn resign(&self, index: i32) {
        self.loads.cancel(index);
        self.unload(index);
    }

    /// Whether this shard coordinates the ids of partition `index` now: led here, loaded.
    fn serves(&self, index: i32) -> bool {
        let led = self.topics.borrow().as_ref().is_none_or(|t| t.leads(TXN_TOPIC, index));
        led && !self.loads.is_loading(index)
    }

    /// Whether this shard coordinates `id` now ([`TxnCoordinator::serves`] of its partition).
    fn serves_id(&self, id: &str) -> bool {
        self.partitions.get().is_some_and(|n| self.serves(txn::partition_for(id, n as i32)))
    }

    fn replay(&self, key: Option<&[u8]>, value: Option<&[u8]>) -> Result<(), String> {
        let Some(key) = key else { return Ok(()) };
        let Some(id) = txn::log::read_key(key)? else { return Ok(()) };
        let mut ids = self.ids.borrow_mut();
        match value {
            None => {
                ids.remove(&id);
            }
            Some(v) => {
                let m = txn::log::read_value(&id, v)?;
                ids.insert(id, m);
            }
        }
        Ok(())
    }

    /// The ids whose transaction is prepared and needs its markers (after a load).
    pub fn prepared(&self) -> Vec<String> {
        let ids = self.ids.borrow();
        let prepared = |m: &&TxnMetadata| matches!(m.data.state, TxnState::PrepareCommit | TxnState::PrepareAbort);
        ids.values().filter(prepared).map(|m| m.transactional_id.clone()).collect()
    }

    /// Write `t` (the id's data as it will be; `None`: a tombstone) to the id's partition and
    /// wait until it is durable.
    async fn persist(&self, id: &str, t: Option<&Transit>) -> Result<(), ErrorCode> {
        self.persist_all(id, &[t]).await
    }

    /// Write `records` (each the id's data as it will be, in order; `None`: a tombstone) to the
    /// id's partition in one batch and wait until it is durable.
    async fn persist_all(&self, id: &str, records: &[Option<&Transit>]) -> Result<(), ErrorCode> {
        let n = self.partitions.get().ok_or(code::COORDINATOR_NOT_AVAILABLE)?;
        let index = txn::partition_for(id, n as i32);
        let p = self.manager.get(TXN_TOPIC, index).ok_or(code::NOT_COORDINATOR)?;
        if self.loads.is_loading(index) {
            return Err(code::COORDINATOR_LOAD_IN_PROGRESS);
        }
        if !self.serves(index) {
            return Err(code::NOT_COORDINATOR);
        }
        let (now, key) = (self.now(), txn::log::key(id));
        let mut b = BatchBuilder::new();
        for t in records {
            let value = t.map(|t| {
                let m = TxnMetadata { transactional_id: id.to_string(), data: t.clone(), pending: None };
                txn::log::value(&m, self.log_version(&m))
            });
            b.push(now, Some(&key), value.as_deref(), &[]);
        }
        // transaction.state.log.min.isr (the topic's min.insync.replicas), before and after,
        // as Kafka's coordinator writes with acks=all: too few in sync is
        // COORDINATOR_NOT_AVAILABLE (Kafka's NOT_ENOUGH_REPLICAS, mapped so).
        let min_isr = p.log().config().min_insync_replicas as usize;
        let enough = || {
            let topics = self.topics.borrow().clone();
            topics.is_none_or(|t| crate::groups::consumer::enough_in_sync(&*t, TXN_TOPIC, index, min_isr))
        };
        if !enough() {
            return Err(code::COORDINATOR_NOT_AVAILABLE);
        }
        let epoch = p.leader_epoch();
        let info = p.append_nowait(&b.finish()).map_err(|e| {
            tracing::error!(transactional_id = id, partition = index, error = %e, "cannot write to {TXN_TOPIC}");
            code::COORDINATOR_NOT_AVAILABLE
        })?;
        // Durable on every in-sync replica (Kafka writes the transaction log with acks=all).
        let end = Offset(info.last_offset + 1);
        p.wait_replicated(end, epoch, crate::replica::INTERNAL_WRITE_TIMEOUT).await.map_err(|e| match e {
            crate::storage::StorageError::Follower => code::NOT_COORDINATOR,
            e => {
                tracing::error!(transactional_id = id, partition = index, error = %e, "{TXN_TOPIC} record not replicated");
                code::COORDINATOR_NOT_AVAILABLE
            }
        })?;
        if !enough() {
            return Err(code::COORDINATOR_NOT_AVAILABLE);
        }
        Ok(())
    }

    /// Persist a prepared transit of `id` and apply it; on failure the metadata is left as
    /// it was.
    async fn commit_transit(&self, id: &str, t: Transit) -> Result<(), ErrorCode> {
        let written = self.persist(id, Some(&t)).await;
        let mut ids = self.ids.borrow_mut();
        let Some(m) = ids.get_mut(id) else { return Err(code::COORDINATOR_NOT_AVAILABLE) };
        match written {
            Ok(()) => {
                m.complete(t);
                Ok(())
            }
            Err(e) => {
                m.abandon();
                Err(e)
            }
        }
    }

    /// InitProducerId for a transactional id: its producer id and new epoch.
    pub async fn init_producer_id<H: TxnHost>(
        self: &Rc<Self>,
        host: &Rc<H>,
        id: String,
        timeout_ms: i32,
        expected: Option<(i64, i16)>,
    ) -> Result<(i64, i16), ErrorCode> {
        if let Some(e) = self.unavailable(&id) {
            return Err(e);
        }
        if timeout_ms <= 0 || timeout_ms > self.config.max_timeout_ms {
            return Err(code::INVALID_TRANSACTION_TIMEOUT);
        }
        let allocate = || host.allocate_producer_id();
        if !self.ids.borrow().contains_key(&id) {
            let pid = allocate().await?;
            let fresh = TxnMetadata::new(&id, pid, timeout_ms, self.now());
            self.ids.borrow_mut().entry(id.clone()).or_insert(fresh);
        }
        // A rotation (KIP-360, epoch exhausted) needs a fresh producer id: fetched first.
        let exhausted = self.ids.borrow().get(&id).is_some_and(|m| m.data.producer_epoch >= txn::MAX_CLIENT_EPOCH);
        let spare = if exhausted { Some(allocate().await?) } else { None };
        let now = self.now();
        let init = {
            let mut ids = self.ids.borrow_mut();
            let m = ids.get_mut(&id).ok_or(code::COORDINATOR_NOT_AVAILABLE)?;
            let mut missing = false;
            let mut take = || {
                spare.unwrap_or_else(|| {
                    missing = true;
                    -1
                })
            };
            let init = m.init_producer_id(timeout_ms, expected, &mut take, now).map_err(txn_code)?;
            if missing {
                m.abandon();
                return Err(code::COORDINATOR_NOT_AVAILABLE);
            }
            init
        };
        match init {
            Init::Write(t) => {
                let answer = (t.producer_id, t.producer_epoch);
                self.commit_transit(&id, t).await?;
                tracing::debug!(
                    transactional_id = id,
                    producer_id = answer.0,
                    epoch = answer.1,
                    "producer initialised"
                );
                Ok(answer)
            }
            Init::Fence(t) => {
                self.commit_transit(&id, t).await?;
                tracing::info!(transactional_id = id, "open transaction fenced by a new producer instance; aborting");
                self.spawn_markers(host, id);
                Err(code::CONCURRENT_TRANSACTIONS)
            }
        }
    }

    /// AddPartitionsToTxn (and AddOffsetsToTxn: the group's offsets partition), from a client
    /// at transaction version `version` (2: a partition's leader adding it at the first write).
    pub async fn add_partitions(
        &self,
        id: &str,
        pid: i64,
        epoch: i16,
        partitions: Vec<TopicPartition>,
        version: TxnVersion,
    ) -> Result<(), ErrorCode> {
        if let Some(e) = self.unavailable(id) {
            return Err(e);
        }
        let added = {
            let mut ids = self.ids.borrow_mut();
            let m = ids.get_mut(id).ok_or(code::INVALID_PRODUCER_ID_MAPPING)?;
            // Checked first: across a rotation the producer's next transaction comes with the
            // next producer id, which the prepared end would refuse as another producer's.
            if version >= txn::TV2 && m.enrols_after_markers(pid, epoch) {
                let (answer, held) = oneshot::channel();
                let enrolment = (pid, epoch, partitions);
                self.held.borrow_mut().entry(id.to_string()).or_default().push(Held { enrolment, answer });
                Err(held)
            } else {
                Ok(m.add_partitions(pid, epoch, &partitions, version, self.now()).map_err(txn_code)?)
            }
        };
        let held = match added {
            Ok(None) => return Ok(()),
            Ok(Some(t)) => return self.commit_transit(id, t).await,
            Err(held) => held,
        };
        // The producer's next transaction, begun while the markers of its previous one are
        // being written: answered when that end completes (`write_markers`).
        let answer = match crate::deadline::within(HOLD_MAX, held).await {
            Some(Ok(answer)) => answer,
            _ => Err(code::CONCURRENT_TRANSACTIONS),
        };
        // A hold that timed out (the markers stalled, or this shard stopped coordinating the
        // id) leaves no entry behind.
        let mut held = self.held.borrow_mut();
        if let Some(waiting) = held.get_mut(id) {
            waiting.retain(|h| !h.answer.is_canceled());
            if waiting.is_empty() {
                held.remove(id);
            }
        }
        answer
    }

    /// KIP-890 part 1: is `partition` in the open transaction of `id` at `pid`/`epoch`? (A
    /// transaction's first write to a partition is checked before it is appended.)
    pub fn verify(&self, id: &str, pid: i64, epoch: i16, partition: &TopicPartition) -> Result<(), ErrorCode> {
        if let Some(e) = self.unavailable(id) {
            return Err(e);
        }
        let ids = self.ids.borrow();
        let m = ids.get(id).ok_or(code::INVALID_PRODUCER_ID_MAPPING)?;
        if m.data.producer_id != pid {
            return Err(code::INVALID_PRODUCER_ID_MAPPING);
        }
        if m.data.producer_epoch != epoch {
            return Err(code::INVALID_PRODUCER_EPOCH);
        }
        if m.data.state != TxnState::Ongoing || !m.data.partitions.contains(partition) {
            return Err(code::INVALID_TXN_STATE);
        }
        Ok(())
    }

    /// EndTxn at transaction version `version`: the transaction prepared (answered then), its
    /// markers written after. The answer is the producer id and epoch the client goes on with
    /// (version 2 bumps the epoch, or moves to a new producer id when the epochs ran out).
    pub async fn end<H: TxnHost>(
        self: &Rc<Self>,
        host: &Rc<H>,
        id: String,
        pid: i64,
        epoch: i16,
        commit: bool,
        version: TxnVersion,
    ) -> Result<(i64, i16), ErrorCode> {
        if let Some(e) = self.unavailable(&id) {
            return Err(e);
        }
        // A version 2 end past the last epoch moves to a new producer id: fetched first.
        let exhausted = self.ids.borrow().get(&id).is_some_and(|m| m.epoch_exhausted());
        let next_pid = if version >= txn::TV2 && exhausted { Some(host.allocate_producer_id().await?) } else { None };
        let end = {
            let mut ids = self.ids.borrow_mut();
            let m = ids.get_mut(&id).ok_or(code::INVALID_PRODUCER_ID_MAPPING)?;
            m.end(pid, epoch, commit, version, next_pid, self.now()).map_err(txn_code)?
        };
        match end {
            End::Done { producer_id, producer_epoch } => Ok((producer_id, producer_epoch)),
            End::Prepare(t) => {
                let after = t.after_end();
                self.commit_transit(&id, t).await?;
                self.spawn_markers(host, id);
                Ok(after)
            }
        }
    }

    /// Write the markers of `id`'s prepared transaction in the background, then complete it.
    pub fn spawn_markers<H: TxnHost>(self: &Rc<Self>, host: &Rc<H>, id: String) {
        let (me, host) = (self.clone(), host.clone());
        glommio::spawn_local(async move { me.write_markers(&host, &id).await }).detach();
    }

    async fn write_markers<H: TxnHost>(&self, host: &Rc<H>, id: &str) {
        let (commit, pid, epoch, partitions) = {
            let ids = self.ids.borrow();
            let Some(m) = ids.get(id) else { return };
            let commit = match m.data.state {
                TxnState::PrepareCommit => true,
                TxnState::PrepareAbort => false,
                _ => return,
            };
            (commit, m.data.producer_id, m.data.producer_epoch, m.data.partitions.clone())
        };
        let index = self.partitions.get().map_or(0, |n| txn::partition_for(id, n as i32));
        let marker = Marker { commit, coordinator_epoch: host.coordinator_epoch(index) };
        let writes = partitions.into_iter().map(|(topic, partition)| {
            let host = host.clone();
            async move {
                loop {
                    // A coordinator that stopped leading the id's partition writes no more: the
                    // new leader resumes the markers.
                    if !self.serves(index) {
                        return;
                    }
                    match host.write_marker(&topic, partition, pid, epoch, marker).await {
                        Ok(Ok(())) => return,
                        Ok(Err(code::UNKNOWN_TOPIC_OR_PARTITION)) => {
                            tracing::info!(topic, partition, pid, "partition gone: no marker written");
                            return;
                        }
                        // Fenced: a newer marker was written there already; nothing to add.
                        Ok(Err(c @ (code::INVALID_PRODUCER_EPOCH | code::TRANSACTION_COORDINATOR_FENCED))) => {
                            tracing::warn!(topic, partition, pid, code = c.0, "marker refused as stale");
                            return;
                        }
                        Ok(Err(c)) => tracing::warn!(topic, partition, pid, code = c.0, "marker not written; retrying"),
                        Err(e) => tracing::warn!(topic, partition, pid, error = %e, "marker not written; retrying"),
                    }
                    if self.manager.is_stopping() {
                        return;
                    }
                    glommio::timer::sleep(RETRY).await;
                }
            }
        });
        futures_util::future::join_all(writes).await;
        loop {
            if self.manager.is_stopping() {
                return;
            }
            let completion = {
                let mut ids = self.ids.borrow_mut();
                let Some(m) = ids.get_mut(id) else { return };
                if m.pending.is_some() {
                    None
                } else {
                    // The producer's next transaction may have begun meanwhile (version 2): its
                    // enrolments are written with the completion.
                    let held = self.held.borrow_mut().remove(id).unwrap_or_default();
                    let held: Vec<Held> = held.into_iter().filter(|h| !h.answer.is_canceled()).collect();
                    let enrolments: Vec<_> = held.iter().map(|h| h.enrolment.clone()).collect();
                    match m.markers_written_and_enrol(self.now(), &enrolments) {
                        Some((records, answers)) => Some((records, held, answers)),
                        None => return,
                    }
                }
            };
            if let Some((records, held, answers)) = completion {
                let written = self.persist_all(id, &records.iter().map(Some).collect::<Vec<_>>()).await;
                let applied = {
                    let mut ids = self.ids.borrow_mut();
                    let Some(m) = ids.get_mut(id) else { return };
                    match (written, records.last()) {
                        (Ok(()), Some(last)) => {
                            m.complete(last.clone());
                            true
                        }
                        _ => {
                            m.abandon();
                            false
                        }
                    }
                };
                // Held enrolments get their answers once the write is durable; when it failed
                // they are dropped (answered CONCURRENT_TRANSACTIONS: the leaders retry).
                if applied {
                    for (h, answer) in held.into_iter().zip(answers) {
                        let _ = h.answer.send(answer.map_err(txn_code));
                    }
                    tracing::debug!(transactional_id = id, commit, "transaction completed");
                    return;
                }
            }
            glommio::timer::sleep(RETRY).await;
        }
    }

    /// DescribeTransactions of one id.
    pub fn describe(&self, id: &str) -> Result<Described, ErrorCode> {
        if let Some(e) = self.unavailable(id) {
            return Err(e);
        }
        let ids = self.ids.borrow();
        let m = ids.get(id).ok_or(code::TRANSACTIONAL_ID_NOT_FOUND)?;
        Ok(Described {
            state: m.data.state,
            timeout_ms: m.data.timeout_ms,
            start_ms: m.data.start_ms,
            producer_id: m.data.producer_id,
            producer_epoch: m.data.producer_epoch,
            partitions: m.data.partitions.iter().cloned().collect(),
        })
    }

    /// ListTransactions on this shard: (id, producer id, state) of those matching the
    /// filters (empty: any), running longer than `min_duration_ms` (-1: any).
    pub fn list(&self, states: &[TxnState], pids: &[i64], min_duration_ms: i64) -> Vec<(String, i64, TxnState)> {
        let now = self.now();
        let ids = self.ids.borrow();
        let mut out: Vec<_> = ids
            .values()
            .filter(|m| states.is_empty() || states.contains(&m.data.state))
            .filter(|m| pids.is_empty() || pids.contains(&m.data.producer_id))
            .filter(|m| min_duration_ms < 0 || (m.data.start_ms >= 0 && now - m.data.start_ms > min_duration_ms))
            .map(|m| (m.transactional_id.clone(), m.data.producer_id, m.data.state))
            .collect();
        out.sort();
        out
    }

    /// Abort the transactions open past their timeout, forget ids idle past the expiration,
    /// and compact, every check interval, until the shard stops.
    pub fn spawn_ticker<H: TxnHost>(self: &Rc<Self>, host: &Rc<H>) {
        let (me, host) = (self.clone(), host.clone());
        glommio::spawn_local(async move {
            let mut last_expiry = std::time::Instant::now();
            while !me.manager.is_stopping() {
                glommio::timer::sleep(me.config.abort_check).await;
                me.abort_timed_out(&host).await;
                if last_expiry.elapsed() >= me.config.expire_check {
                    last_expiry = std::time::Instant::now();
                    me.expire().await;
                }
                me.compact_all().await;
            }
        })
        .detach();
    }

    /// Fence and abort every transaction open past its timeout.
    pub async fn abort_timed_out<H: TxnHost>(self: &Rc<Self>, host: &Rc<H>) {
        let now = self.now();
        let late: Vec<(String, bool)> = {
            let ids = self.ids.borrow();
            ids.values()
                .filter(|m| self.serves_id(&m.transactional_id) && m.is_late(now))
                .map(|m| (m.transactional_id.clone(), m.rotates_at_fence()))
                .collect()
        };
        for (id, rotates) in late {
            let next_pid = match rotates {
                true => match host.allocate_producer_id().await {
                    Ok(p) => Some(p),
                    Err(_) => continue, // tried again at the next check
                },
                false => None,
            };
            let t = self.ids.borrow_mut().get_mut(&id).and_then(|m| m.timed_out(next_pid, self.now()));
            let Some(t) = t else { continue };
            if self.commit_transit(&id, t).await.is_ok() {
                tracing::info!(transactional_id = id, "transaction timed out; aborting");
                self.spawn_markers(host, id);
            }
        }
    }

    /// Forget the ids idle past `transactional.id.expiration.ms` (a tombstone each).
    pub async fn expire(&self) {
        let now = self.now();
        let idle: Vec<String> = {
            let mut ids = self.ids.borrow_mut();
            ids.values_mut()
                .filter(|m| self.serves_id(&m.transactional_id))
                .filter_map(|m| m.expire(now, self.config.id_expiration_ms).then(|| m.transactional_id.clone()))
                .collect()
        };
        for id in idle {
            let written = self.persist(&id, None).await;
            let mut ids = self.ids.borrow_mut();
            match written {
                Ok(()) => {
                    ids.remove(&id);
                    tracing::info!(transactional_id = id, "transactional id expired");
                }
                Err(_) => {
                    if let Some(m) = ids.get_mut(&id) {
                        m.abandon();
                    }
                }
            }
        }
    }

    /// Compact every state partition of this shard grown past the threshold, unless a change
    /// is being written (its record would be left behind the rewrite).
    pub async fn compact_all(&self) {
        let Some(n) = self.partitions.get() else { return };
        for (index, p) in crate::coordinator::runtime::partitions_of(&self.manager, TXN_TOPIC) {
            // Only the leader, with the partition loaded, knows its live ids.
            if !self.serves(index) {
                continue;
            }
            let live: Vec<TxnMetadata> = {
                let ids = self.ids.borrow();
                let mine: Vec<&TxnMetadata> =
                    ids.values().filter(|m| txn::partition_for(&m.transactional_id, n as i32) == index).collect();
                if mine.iter().any(|m| m.pending.is_some()) {
                    continue;
                }
                mine.into_iter().cloned().collect()
            };
            let live_bytes: u64 = live.iter().map(|m| 120 + m.transactional_id.len() as u64 * 2).sum();
            let size = p.log().size_bytes();
            if size <= self.compaction_bytes || size <= 2 * live_bytes {
                continue;
            }
            // Synchronously from here to the appends: no change can slip in between.
            let records: Vec<crate::groups::offsets::Record> = live
                .iter()
                .map(|m| (txn::log::key(&m.transactional_id), Some(txn::log::value(m, self.log_version(m)))))
                .collect();
            let batches = crate::groups::offsets::batches(&records, 256 << 10, self.now());
            match crate::coordinator::runtime::rewrite(&p, batches).await {
                Ok(removed) => tracing::info!(
                    partition = index,
                    live = live.len(),
                    segments_deleted = removed.len(),
                    "compacted transaction state"
                ),
                Err(e) => {
                    tracing::warn!(partition = index, error = %e, "{TXN_TOPIC} compaction failed; the old segments stay")
                }
            }
        }
    }
}
