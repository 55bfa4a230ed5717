//! The metadata a shard serves from, and the deltas that change it.
//!
//! Every shard keeps its own copy of what clients are told: the topics with their settings and
//! placements, the ACLs, the SCRAM credentials, the dynamic broker settings, the finalized
//! feature levels. Only shard 0
//! changes them (the control plane, [`crate::server::control`], standalone or from the metadata
//! image): it persists a change, then publishes it to every shard as one [`Delta`] in a
//! [`Publish`] call. On each shard the delta is handed to every part that follows the metadata,
//! as Kafka's metadata publishers are (`MetadataPublisher.onMetadataUpdate`): the views
//! ([`Follower`], [`crate::server::view`]), the partitions the shard owns, and replication
//! ([`crate::server::shard`] wires them, in the order below).
//!
//! Order on a shard, for one delta:
//! 1. Partitions this node now replicates are opened (and those it no longer does closed) before
//!    the view shows their placement, so no client is sent to a partition not open yet.
//! 2. The views take the delta.
//! 3. Replication follows the new placements (leads, follows, or forgets).
//! 4. The partitions of a deleted topic are removed last, once nothing serves or fetches them.
//!
//! Invariant: a shard takes the deltas in the order shard 0 published them (shard 0 publishes
//! one change at a time, under the topic store's lease, and waits for every shard).

use crate::cluster::types::PartitionState;
use crate::config::LogConfig;
use crate::features::Features;
use crate::security::acl::Acls;
use crate::security::Credentials;
use crate::server::configs::DynamicConfigs;
use crate::types::Uuid;
use std::collections::BTreeMap;

/// What every shard knows about a topic.
#[derive(Debug, Clone)]
pub struct TopicInfo {
    /// The topic's id (KIP-516).
    pub id: Uuid,
    pub partitions: u32,
    pub config: LogConfig,
    /// The topic's own settings (the rest come from the broker defaults).
    pub overrides: BTreeMap<String, String>,
    /// On a clustered node, each partition's replicas and leadership from the metadata image
    /// (`None` until the image reached this shard: no partition is led here meanwhile). A
    /// standalone node is every partition's only replica and leader; this is `None` there.
    pub placement: Option<Vec<PartitionState>>,
}

/// One change of the metadata, as shard 0 publishes it to every shard.
#[derive(Clone)]
pub enum Delta {
    /// A topic exists (its partitions this shard owns are open already).
    TopicCreated { name: String, info: TopicInfo },
    /// A topic's settings changed (its own, or the broker defaults it follows).
    TopicAltered { name: String, config: LogConfig, overrides: BTreeMap<String, String> },
    /// A topic has `partitions` partitions now (the new ones are open already).
    TopicGrown { name: String, partitions: u32 },
    /// A topic is gone, with its `partitions` partitions.
    TopicDeleted { name: String, partitions: u32 },
    /// A clustered node: a topic's partitions are placed so. Partitions from `fresh_from` on
    /// are new (data an interrupted deletion left is cleared before they open).
    Placed { name: String, config: LogConfig, placement: Vec<PartitionState>, fresh_from: u32 },
    /// A clustered node: this node's broker epoch (its registration was applied).
    BrokerEpoch(u64),
    /// The ACL bindings now.
    Acls(Acls),
    /// The SCRAM credentials now.
    Credentials(Credentials),
    /// The dynamic broker settings now (checked on shard 0).
    BrokerSettings(DynamicConfigs),
    /// The cluster's finalized feature levels now (UpdateFeatures).
    Features(Features),
}

impl Delta {
    /// The delta's kind, for logs.
    pub fn kind(&self) -> &'static str {
        match self {
            Delta::TopicCreated { .. } => "topic-created",
            Delta::TopicAltered { .. } => "topic-altered",
            Delta::TopicGrown { .. } => "topic-grown",
            Delta::TopicDeleted { .. } => "topic-deleted",
            Delta::Placed { .. } => "placed",
            Delta::BrokerEpoch(_) => "broker-epoch",
            Delta::Acls(_) => "acls",
            Delta::Credentials(_) => "credentials",
            Delta::BrokerSettings(_) => "broker-settings",
            Delta::Features(_) => "features",
        }
    }
}

impl std::fmt::Debug for Delta {
    /// The kind and the topic, never the credentials' contents.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Delta::TopicCreated { name, .. }
            | Delta::TopicAltered { name, .. }
            | Delta::TopicGrown { name, .. }
            | Delta::TopicDeleted { name, .. }
            | Delta::Placed { name, .. } => write!(f, "{}({name})", self.kind()),
            Delta::BrokerEpoch(epoch) => write!(f, "broker-epoch({epoch})"),
            _ => f.write_str(self.kind()),
        }
    }
}

/// A part of a shard that follows the metadata: it takes every delta, in the order published,
/// and keeps what it needs of it (most deltas are nothing to most followers).
pub trait Follower {
    fn follow(&self, delta: &Delta);
}

/// From shard 0 to every shard: one delta to take ([`crate::server::shard`] runs it).
#[derive(Debug, Clone)]
pub struct Publish(pub Delta);
