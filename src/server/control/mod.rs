//! Shard 0's control plane: topic changes, dynamic broker settings ([`broker`]), ACLs
//! ([`acls`]), SCRAM credentials ([`users`]), client quotas ([`quotas`]), feature levels
//! ([`features`]) and producer ids, each a
//! typed call to shard 0, which validates and persists the change, then publishes it to every
//! shard as a delta ([`crate::server::publish`]). On a clustered node a change is committed
//! through the metadata quorum ([`metadata`], [`documents`], [`commit`]) and reaches every node
//! through its publisher ([`publisher`]); [`quorum`] starts and runs the node's controller.
//!
//! Invariants:
//! - Changes run one at a time (the topic store's lease, [`crate::server::shard::ControlState`]).
//! - A new topic (or new partitions) is published to clients only after every shard has
//!   opened its partitions ([`OpenPartitions`] before [`Delta::TopicCreated`] or
//!   [`Delta::TopicGrown`]), so no client sees a partition that is not open yet.
//! - The change is durable (the topic store's file) before any shard applies it.
//!
//! Who calls it: the API modules (CreateTopics, DeleteTopics, AlterConfigs, CreatePartitions,
//! InitProducerId, auto-creation in Metadata and Produce, the offsets topic at startup).

pub mod acls;
pub mod broker;
pub mod commit;
pub mod documents;
pub mod features;
pub mod metadata;
pub mod publisher;
pub mod quorum;
pub mod quotas;
pub mod users;

use crate::config::LogConfig;
use crate::coordinator::group::OFFSETS_TOPIC;
use crate::coordinator::txn::TXN_TOPIC;
use crate::protocol::errors::{self as code, ErrorCode};
use crate::server::configs::{self, AlterOp};
use crate::server::errors::{topic_code, AdminError};
use crate::server::publish::{Delta, TopicInfo};
use crate::server::router::ShardCall;
use crate::server::shard::Shard;
use commit::{control_of, publish};
use std::collections::BTreeMap;
use std::rc::Rc;

pub use broker::AlterBroker;
pub use commit::AdminResult;
pub use users::AlterUsers;

/// To shard 0: create a topic (validated and persisted there, then broadcast).
#[derive(Debug)]
pub struct CreateTopic {
    pub name: String,
    pub partitions: i64,
    /// -1: `default.replication.factor` (a standalone node has one replica of everything).
    pub replication_factor: i16,
    /// Explicit replica assignments, one per partition (clustered; none: placed).
    pub assignments: Vec<Vec<i32>>,
    pub configs: Vec<(String, String)>,
    pub validate_only: bool,
}

impl ShardCall<Shard> for CreateTopic {
    type Reply = AdminResult;
    const NAME: &'static str = "create-topic";

    async fn run(self, shard: Rc<Shard>) -> AdminResult {
        if shard.config().cluster.is_some() {
            let (name, rf, assigned) = (&self.name, self.replication_factor, &self.assignments);
            return metadata::create_topic(
                &shard,
                name,
                self.partitions,
                rf,
                assigned,
                &self.configs,
                self.validate_only,
            )
            .await;
        }
        if !matches!(self.replication_factor, -1 | 1) {
            let message = "a single broker: the replication factor must be 1";
            return Err(AdminError::new(code::INVALID_REPLICATION_FACTOR, message));
        }
        let control = control_of(&shard)?;
        let mut lease = control.lease().await;
        let store = lease.store();
        let pairs: Vec<(&str, &str)> = self.configs.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let name = self.name;
        if self.validate_only {
            crate::storage::topics::validate_topic_name(&name).map_err(|e| AdminError::from(&e))?;
            if store.get(&name).is_some() {
                return Err(AdminError::new(code::TOPIC_ALREADY_EXISTS, format!("topic {name} already exists")));
            }
            if !(1..=100_000).contains(&self.partitions) {
                let message = format!("invalid partition count {}", self.partitions);
                return Err(AdminError::new(code::INVALID_PARTITIONS, message));
            }
            let checked = store.defaults().with_overrides(pairs.iter().copied());
            return checked.map(|_| ()).map_err(|e| AdminError::new(code::INVALID_CONFIG, e.to_string()));
        }
        let config = store.create(&name, self.partitions, &pairs).await.map_err(|e| AdminError::from(&e))?;
        let id = store.get(&name).expect("just created").id;
        let partitions = self.partitions as u32;
        let opened = open_everywhere(&shard, &name, 0, partitions, &config).await;
        let overrides: BTreeMap<String, String> = self.configs.into_iter().collect();
        let info = TopicInfo { id, partitions, config, overrides, placement: None };
        publish(&shard, Delta::TopicCreated { name: name.clone(), info }).await;
        opened?;
        tracing::info!(topic = name, partitions, "topic created");
        Ok(())
    }
}

/// To shard 0: delete a topic (then broadcast).
#[derive(Debug)]
pub struct DeleteTopic {
    pub name: String,
}

impl ShardCall<Shard> for DeleteTopic {
    type Reply = AdminResult;
    const NAME: &'static str = "delete-topic";

    async fn run(self, shard: Rc<Shard>) -> AdminResult {
        let name = self.name;
        if crate::server::is_internal_topic(&name) {
            let message = format!("{name} is internal: it cannot be deleted");
            return Err(AdminError::new(code::INVALID_TOPIC_EXCEPTION, message));
        }
        if shard.config().cluster.is_some() {
            return metadata::delete_topic(&shard, &name).await;
        }
        let control = control_of(&shard)?;
        let mut lease = control.lease().await;
        let store = lease.store();
        let partitions = store.get(&name).map_or(0, |m| m.partitions);
        store.delete(&name).await.map_err(|e| AdminError::from(&e))?;
        publish(&shard, Delta::TopicDeleted { name: name.clone(), partitions }).await;
        tracing::info!(topic = name, "topic deleted");
        Ok(())
    }
}

/// To shard 0: change a topic's overrides (with `replace`, the set operations are the whole
/// new set).
#[derive(Debug)]
pub struct AlterTopic {
    pub name: String,
    pub ops: Vec<(String, AlterOp)>,
    pub replace: bool,
    pub validate_only: bool,
}

impl ShardCall<Shard> for AlterTopic {
    type Reply = AdminResult;
    const NAME: &'static str = "alter-topic";

    async fn run(self, shard: Rc<Shard>) -> AdminResult {
        let control = control_of(&shard)?;
        let name = &self.name;
        // A clustered node's change is made again if another one came first (from the settings
        // then in force); a standalone node's the first time.
        for _ in 0..documents::DOCUMENT_ATTEMPTS {
            let mut lease = control.lease().await;
            let store = lease.store();
            let unknown = || AdminError::new(code::UNKNOWN_TOPIC_OR_PARTITION, format!("topic {name} does not exist"));
            let current = store.get(name).ok_or_else(unknown)?.overrides.clone();
            let values = store.config(name).map_err(|e| AdminError::from(&e))?.describe();
            let next =
                configs::apply_ops(&current, &self.ops, self.replace, |k| values.get(k).cloned(), configs::topic_kind)?;
            let config = store
                .defaults()
                .with_overrides(next.iter().map(|(k, v)| (k.as_str(), v.as_str())))
                .map_err(|e| AdminError::new(code::INVALID_CONFIG, e.to_string()))?;
            if self.validate_only {
                return Ok(());
            }
            if shard.config().cluster.is_some() {
                drop(lease);
                if metadata::alter_topic(&shard, name, next, current).await? {
                    return Ok(());
                }
                continue;
            }
            store
                .replace_overrides(name, next.clone())
                .await
                .map_err(|e| AdminError::new(topic_code(&e), e.to_string()))?;
            publish(&shard, Delta::TopicAltered { name: name.clone(), config, overrides: next }).await;
            tracing::info!(topic = name, "topic settings changed");
            return Ok(());
        }
        Err(AdminError::new(code::REQUEST_TIMED_OUT, "the topic's settings kept changing: retry"))
    }
}

/// To shard 0: raise a topic's partition count (CreatePartitions), persist it, then have every
/// shard open the new partitions it owns.
#[derive(Debug)]
pub struct CreatePartitions {
    pub name: String,
    pub count: i64,
    /// Explicit replica assignments of the new partitions (clustered; none: placed).
    pub assignments: Vec<Vec<i32>>,
    pub validate_only: bool,
}

impl ShardCall<Shard> for CreatePartitions {
    type Reply = AdminResult;
    const NAME: &'static str = "create-partitions";

    async fn run(self, shard: Rc<Shard>) -> AdminResult {
        let name = self.name;
        if crate::server::is_internal_topic(&name) {
            // Groups and transactional ids are placed by the partition count: growing it
            // would move them.
            let message = format!("{name} is internal: its partitions cannot change");
            return Err(AdminError::new(code::INVALID_REQUEST, message));
        }
        if shard.config().cluster.is_some() {
            return metadata::create_partitions(&shard, &name, self.count, &self.assignments, self.validate_only).await;
        }
        let control = control_of(&shard)?;
        let mut lease = control.lease().await;
        let grown = lease.store().grow(&name, self.count, self.validate_only).await;
        let (from, config) = grown.map_err(|e| AdminError::from(&e))?;
        if self.validate_only {
            return Ok(());
        }
        let count = self.count as u32;
        let opened = open_everywhere(&shard, &name, from, count, &config).await;
        publish(&shard, Delta::TopicGrown { name: name.clone(), partitions: count }).await;
        opened?;
        tracing::info!(topic = name, from, partitions = count, "partitions added");
        Ok(())
    }
}

/// To shard 0: a new producer id for an idempotent producer (InitProducerId), or Kafka's
/// error code.
#[derive(Debug, Clone, Copy)]
pub struct AllocateProducerId;

impl ShardCall<Shard> for AllocateProducerId {
    type Reply = Result<i64, ErrorCode>;
    const NAME: &'static str = "allocate-producer-id";

    async fn run(self, shard: Rc<Shard>) -> Result<i64, ErrorCode> {
        let control = shard.control().ok_or(code::COORDINATOR_NOT_AVAILABLE)?;
        let quorum = control.quorum.borrow().clone();
        control.producer_ids.allocate(quorum).await
    }
}

/// On shard 0: have every shard open its partitions `from..to` of a topic; the first failure,
/// if any (the others still open theirs).
async fn open_everywhere(shard: &Rc<Shard>, name: &str, from: u32, to: u32, config: &LogConfig) -> AdminResult {
    let call = OpenPartitions { name: name.to_string(), from, to, config: config.clone() };
    let mut result = Ok(());
    for r in shard.call_each(call).await {
        result = result.and(r.map_err(AdminError::from).and_then(|r| r));
    }
    result
}

/// From shard 0 to every shard, first: open the partitions `from..to` of a topic you own
/// (clearing data an interrupted deletion left).
#[derive(Debug, Clone)]
pub struct OpenPartitions {
    pub name: String,
    pub from: u32,
    pub to: u32,
    pub config: LogConfig,
}

impl ShardCall<Shard> for OpenPartitions {
    type Reply = AdminResult;
    const NAME: &'static str = "open-partitions";

    async fn run(self, shard: Rc<Shard>) -> AdminResult {
        let mut result = Ok(());
        for p in self.from as i32..self.to as i32 {
            if shard.owner(&self.name, p) != shard.id() {
                continue;
            }
            // A new partition starts empty: data left by an interrupted deletion of a topic
            // with the same name must not come back.
            let manager = shard.manager();
            let opened = match manager.delete_partition(&self.name, p).await {
                Ok(()) => manager.open_partition(&self.name, p, self.config.clone()).await.map(|_| ()),
                Err(e) => Err(e),
            };
            if let Err(e) = opened {
                tracing::error!(topic = self.name, partition = p, error = %e, "cannot open new partition");
                let message = format!("partition {p} could not be opened: {e}");
                result = Err(AdminError::new(code::KAFKA_STORAGE_ERROR, message));
            }
        }
        result
    }
}

/// Create a topic with the broker defaults if auto-creation is on and it is missing; whether
/// it exists now.
pub async fn ensure_topic(shard: &Rc<Shard>, name: &str) -> bool {
    if shard.has_topic(name) {
        return true;
    }
    if !shard.effective().auto_create_topics {
        return false;
    }
    let call = CreateTopic {
        name: name.to_string(),
        partitions: shard.effective().num_partitions as i64,
        replication_factor: -1,
        assignments: Vec::new(),
        configs: Vec::new(),
        validate_only: false,
    };
    match shard.call(0, call).await {
        Ok(Ok(())) => true,
        Ok(Err(e)) => e.code == code::TOPIC_ALREADY_EXISTS,
        Err(e) => {
            tracing::warn!(topic = name, error = %e, "topic auto-creation got no answer");
            false
        }
    }
}

/// Create `__consumer_offsets` if it does not exist yet (on shard 0, at startup): Kafka's
/// `offsets.topic.*` settings, no time retention (compaction keeps it small).
pub async fn ensure_offsets_topic(shard: &Rc<Shard>) -> bool {
    if shard.offsets_partitions().is_some() {
        return true;
    }
    let c = &shard.config().coordinator;
    let factor = shard.config().cluster.as_ref().map_or(-1, |c| c.offsets_replication_factor);
    ensure_internal_topic(shard, OFFSETS_TOPIC, c.offsets_partitions, factor, c.offsets_segment_bytes, Vec::new()).await
}

/// Create `__transaction_state` unless it exists (as [`ensure_offsets_topic`]).
pub async fn ensure_txn_topic(shard: &Rc<Shard>) -> bool {
    if shard.txn().partitions().is_some() {
        return true;
    }
    let c = shard.txn().config();
    let factor = shard.config().cluster.as_ref().map_or(-1, |c| c.txn_replication_factor);
    // Clustered, its min.insync.replicas is transaction.state.log.min.isr, as Kafka creates it.
    let min_isr = shard.config().cluster.as_ref().map(|_| {
        let given = shard.config().settings.get("transaction.state.log.min.isr");
        given.and_then(|v| v.trim().parse::<i32>().ok()).unwrap_or(2)
    });
    let extra: Vec<(String, String)> =
        min_isr.into_iter().map(|n| ("min.insync.replicas".to_string(), n.to_string())).collect();
    ensure_internal_topic(shard, TXN_TOPIC, c.partitions, factor, c.segment_bytes, extra).await
}

/// Create an internal topic kept for good, every write durable before it is answered.
/// On a clustered node it has `factor` replicas, and is not created while fewer brokers are
/// unfenced (Kafka's rule: until then, its coordinators are not available).
async fn ensure_internal_topic(
    shard: &Rc<Shard>,
    name: &str,
    partitions: u32,
    factor: i16,
    segment_bytes: u64,
    extra: Vec<(String, String)>,
) -> bool {
    let mut call = CreateTopic {
        name: name.to_string(),
        partitions: partitions as i64,
        replication_factor: factor,
        assignments: Vec::new(),
        configs: vec![
            ("segment.bytes".to_string(), segment_bytes.to_string()),
            ("retention.ms".to_string(), "-1".to_string()),
            ("retention.bytes".to_string(), "-1".to_string()),
            // Every write is answered once durable; compaction batches fit easily.
            ("flush.messages".to_string(), "1".to_string()),
            ("tidemark.preallocate.bytes".to_string(), (1u64 << 20).to_string()),
        ],
        validate_only: false,
    };
    call.configs.extend(extra);
    match shard.call(0, call).await {
        Ok(Ok(())) => true,
        Ok(Err(e)) if e.code == code::TOPIC_ALREADY_EXISTS => true,
        Ok(Err(e)) if shard.config().cluster.is_some() => {
            tracing::info!(error = e.message, "{name} not created yet");
            false
        }
        Ok(Err(e)) => {
            tracing::error!(error = e.message, "cannot create {name}");
            false
        }
        Err(e) => {
            tracing::error!(error = %e, "cannot create {name}");
            false
        }
    }
}
