//! A shard's views of the metadata, each a [`Follower`] of the deltas shard 0 publishes
//! ([`crate::server::publish`]): the topics with their placements ([`TopicsView`]), who may do
//! what ([`Access`]), and the broker settings in force ([`Settings`]). Reads borrow briefly and
//! never across an await.

use crate::cluster::types::PartitionState;
use crate::config::LogConfig;
use crate::features::Features;
use crate::security::acl::Acls;
use crate::security::Credentials;
use crate::server::configs::{DynamicConfigs, Effective};
use crate::server::limits::ConnectionTable;
use crate::server::publish::{Delta, Follower, TopicInfo};
use crate::server::BrokerConfig;
use crate::types::Uuid;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::sync::Arc;

/// A partition's placement as [`TopicsView::placed`] lends it.
enum Placed<'a> {
    /// A standalone node: its only replica and leader.
    Alone,
    /// Clustered, before the metadata image reached this shard.
    Unknown,
    At(&'a PartitionState),
}

/// The topics as this shard knows them: settings, partition counts, placements.
pub struct TopicsView {
    node_id: i32,
    clustered: bool,
    topics: RefCell<BTreeMap<String, TopicInfo>>,
    /// Topic ids to names (KIP-516: Fetch v13+, DeleteTopics and Metadata by id).
    ids: RefCell<HashMap<Uuid, String>>,
}

impl TopicsView {
    pub fn new(node_id: i32, clustered: bool, topics: BTreeMap<String, TopicInfo>) -> TopicsView {
        let ids = topics.iter().map(|(name, t)| (t.id, name.clone())).collect();
        TopicsView { node_id, clustered, topics: RefCell::new(topics), ids: RefCell::new(ids) }
    }

    /// `f` of a topic, borrowed.
    pub fn topic<R>(&self, name: &str, f: impl FnOnce(&TopicInfo) -> R) -> Option<R> {
        self.topics.borrow().get(name).map(f)
    }

    /// The name of the topic with this id.
    pub fn name_of(&self, id: Uuid) -> Option<String> {
        self.ids.borrow().get(&id).cloned()
    }

    pub fn contains(&self, name: &str) -> bool {
        self.topics.borrow().contains_key(name)
    }

    pub fn names(&self) -> Vec<String> {
        self.topics.borrow().keys().cloned().collect()
    }

    /// A partition's replicas and leadership as clients are told them: standalone, this node
    /// alone at leader epoch 0; clustered, the metadata image's (no leader, -1, until the
    /// image reached this shard). `None`: no such topic or partition.
    pub fn leadership(&self, topic: &str, partition: i32) -> Option<PartitionState> {
        let node = self.node_id;
        self.placed(topic, partition, |p| match p {
            Placed::Alone => PartitionState::new(vec![node], vec![node]),
            Placed::Unknown => PartitionState { leader: -1, ..PartitionState::new(Vec::new(), Vec::new()) },
            Placed::At(state) => state.clone(),
        })
    }

    /// A partition's leader (-1: none now), as [`TopicsView::leadership`] says, without copying
    /// its placement (produce and fetch ask it for every partition).
    pub fn leader(&self, topic: &str, partition: i32) -> Option<i32> {
        self.placed(topic, partition, |p| match p {
            Placed::Alone => self.node_id,
            Placed::Unknown => -1,
            Placed::At(state) => state.leader,
        })
    }

    /// How many replicas of a partition are in sync (one, standalone; none while unknown).
    pub fn in_sync(&self, topic: &str, partition: i32) -> Option<usize> {
        self.placed(topic, partition, |p| match p {
            Placed::Alone => 1,
            Placed::Unknown => 0,
            Placed::At(state) => state.isr.len(),
        })
    }

    /// `f` of a partition's placement, borrowed (`None`: no such topic or partition).
    fn placed<R>(&self, topic: &str, partition: i32, f: impl FnOnce(Placed<'_>) -> R) -> Option<R> {
        let topics = self.topics.borrow();
        let t = topics.get(topic)?;
        if partition < 0 || partition as u32 >= t.partitions {
            return None;
        }
        if !self.clustered {
            return Some(f(Placed::Alone));
        }
        match t.placement.as_ref().and_then(|p| p.get(partition as usize)) {
            Some(state) => Some(f(Placed::At(state))),
            None => Some(f(Placed::Unknown)),
        }
    }

    fn set_config(&self, name: &str, config: &LogConfig, overrides: &BTreeMap<String, String>) {
        if let Some(t) = self.topics.borrow_mut().get_mut(name) {
            t.config = config.clone();
            t.overrides = overrides.clone();
        }
    }
}

impl Follower for TopicsView {
    fn follow(&self, delta: &Delta) {
        match delta {
            Delta::TopicCreated { name, info } => {
                self.ids.borrow_mut().insert(info.id, name.clone());
                self.topics.borrow_mut().insert(name.clone(), info.clone());
            }
            Delta::TopicAltered { name, config, overrides } => self.set_config(name, config, overrides),
            Delta::TopicGrown { name, partitions } => {
                if let Some(t) = self.topics.borrow_mut().get_mut(name) {
                    t.partitions = t.partitions.max(*partitions);
                }
            }
            Delta::TopicDeleted { name, .. } => {
                if let Some(info) = self.topics.borrow_mut().remove(name) {
                    self.ids.borrow_mut().remove(&info.id);
                }
            }
            Delta::Placed { name, placement, .. } => {
                crate::invariant!(self.clustered, "only a clustered node's topics are placed");
                if let Some(t) = self.topics.borrow_mut().get_mut(name) {
                    crate::invariant!(placement.len() as u32 >= t.partitions, "a placement covers every partition");
                    t.placement = Some(placement.clone());
                }
            }
            Delta::BrokerEpoch(_)
            | Delta::Acls(_)
            | Delta::Credentials(_)
            | Delta::BrokerSettings(_)
            | Delta::Features(_) => {}
        }
    }
}

/// Who may do what: users' SCRAM credentials and the ACL bindings (`<data-dir>/credentials`,
/// `<data-dir>/acls`, or the cluster's documents).
pub struct Access {
    credentials: RefCell<Rc<Credentials>>,
    acls: RefCell<Rc<Acls>>,
}

impl Access {
    pub fn new(credentials: Credentials, acls: Acls) -> Access {
        Access { credentials: RefCell::new(Rc::new(credentials)), acls: RefCell::new(Rc::new(acls)) }
    }

    pub fn credentials(&self) -> Rc<Credentials> {
        self.credentials.borrow().clone()
    }

    pub fn acls(&self) -> Rc<Acls> {
        self.acls.borrow().clone()
    }
}

impl Follower for Access {
    fn follow(&self, delta: &Delta) {
        match delta {
            Delta::Acls(acls) => *self.acls.borrow_mut() = Rc::new(acls.clone()),
            Delta::Credentials(credentials) => *self.credentials.borrow_mut() = Rc::new(credentials.clone()),
            _ => {}
        }
    }
}

/// The broker settings in force: the static ones with the dynamic ones over them.
pub struct Settings {
    config: Arc<BrokerConfig>,
    dynamic: RefCell<DynamicConfigs>,
    effective: RefCell<Rc<Effective>>,
    /// Open connections of every shard (its limits are dynamic settings).
    connections: Arc<ConnectionTable>,
    /// The cluster's finalized feature levels.
    features: RefCell<Rc<Features>>,
}

impl Settings {
    pub fn new(
        config: Arc<BrokerConfig>,
        dynamic: DynamicConfigs,
        effective: Effective,
        connections: Arc<ConnectionTable>,
        features: Features,
    ) -> Settings {
        Settings {
            config,
            dynamic: RefCell::new(dynamic),
            effective: RefCell::new(Rc::new(effective)),
            connections,
            features: RefCell::new(Rc::new(features)),
        }
    }

    pub fn features(&self) -> Rc<Features> {
        self.features.borrow().clone()
    }

    pub fn dynamic(&self) -> DynamicConfigs {
        self.dynamic.borrow().clone()
    }

    pub fn effective(&self) -> Rc<Effective> {
        self.effective.borrow().clone()
    }

    pub fn connections(&self) -> &Arc<ConnectionTable> {
        &self.connections
    }
}

impl Follower for Settings {
    fn follow(&self, delta: &Delta) {
        if let Delta::Features(features) = delta {
            *self.features.borrow_mut() = Rc::new(features.clone());
            return;
        }
        let Delta::BrokerSettings(dynamic) = delta else { return };
        match Effective::compute(&self.config, dynamic) {
            Ok(effective) => {
                self.connections.set_limits(effective.max_connections, effective.max_connections_per_ip);
                *self.effective.borrow_mut() = Rc::new(effective);
                *self.dynamic.borrow_mut() = dynamic.clone();
            }
            // Shard 0 checked them; a failure here is a bug, logged, not applied.
            Err(e) => tracing::error!(error = %e, "dynamic broker settings not applied"),
        }
    }
}
