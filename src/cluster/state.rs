//! The metadata state machine: the image every node applies from the metadata log ([`MetaImage`]:
//! brokers, topics with their partitions' replicas and leaders, configs, producer-id blocks), and
//! its snapshots.
//!
//! A snapshot is the image, the last applied log id and the membership, as JSON, in a file
//! `snapshot-<index>-<term>.json` beside the metadata log, written with `write_file_atomic` before
//! it counts (built, or installed from the leader); older snapshot files are then removed. At
//! start the newest snapshot is the state, and openraft applies the log's committed entries after
//! it (the log store keeps the committed log id).

use super::types::{
    BrokerRegistration, EntryPayload, LogId, MetaCommand, MetaResponse, PartitionState, Refusal, Snapshot,
    SnapshotData, SnapshotMeta, StoredMembership, Tm, TopicState,
};
use crate::io::Disk;
use futures_util::{Stream, TryStreamExt};
use openraft::storage::{EntryResponder, RaftSnapshotBuilder, RaftStateMachine};
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// A registered broker.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct BrokerState {
    pub registration: BrokerRegistration,
    /// The log index of its registration.
    pub epoch: u64,
    pub fenced: bool,
}

/// The cluster's metadata as the applied log makes it.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq)]
pub struct MetaImage {
    pub brokers: BTreeMap<i32, BrokerState>,
    pub topics: BTreeMap<String, TopicState>,
    /// The first producer id not yet handed out.
    pub next_producer_id: i64,
    /// The cluster's id (the first [`MetaCommand::SetClusterId`] committed).
    #[serde(default)]
    pub cluster_id: Option<String>,
    /// Cluster-wide documents by name (the security state's files).
    #[serde(default)]
    pub documents: BTreeMap<String, Document>,
}

/// A cluster-wide document: its text and version (the log index that set it).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Document {
    pub version: u64,
    pub text: String,
}

/// The metadata quorum's Raft node, over this state machine.
pub type Raft<D> = openraft::Raft<Tm, MetaStateMachine<D>>;

/// A command the image does not apply, why, and a message.
fn refused(reason: Refusal, message: String) -> MetaResponse {
    MetaResponse::Refused { reason, message }
}

impl MetaImage {
    /// Apply the command of the entry at `index`.
    pub fn apply(&mut self, index: u64, command: &MetaCommand) -> MetaResponse {
        match command {
            MetaCommand::RegisterBroker(r) => {
                // A new incarnation: the old one's leaderships end (it starts fenced).
                self.fence_leaderships(r.id);
                self.brokers.insert(r.id, BrokerState { registration: r.clone(), epoch: index, fenced: true });
                MetaResponse::BrokerEpoch(index)
            }
            MetaCommand::UnfenceBroker { id, epoch } | MetaCommand::FenceBroker { id, epoch } => {
                let fence = matches!(command, MetaCommand::FenceBroker { .. });
                match self.brokers.get_mut(id) {
                    Some(b) if b.epoch == *epoch => {
                        b.fenced = fence;
                        if fence {
                            self.fence_leaderships(*id);
                        } else {
                            self.elect_leaderless();
                        }
                        MetaResponse::Done
                    }
                    Some(b) => refused(Refusal::StaleBrokerEpoch, format!("broker {id} is at epoch {}", b.epoch)),
                    None => refused(Refusal::BrokerIdNotRegistered, format!("broker {id} is not registered")),
                }
            }
            MetaCommand::UnregisterBroker { id } => {
                if self.brokers.remove(id).is_none() {
                    return refused(Refusal::BrokerIdNotRegistered, format!("broker {id} is not registered"));
                }
                self.fence_leaderships(*id);
                MetaResponse::Done
            }
            MetaCommand::CreateTopic { name, topic } => {
                if self.topics.get(name).is_some_and(|t| t.id == topic.id) {
                    // The same creation again (a proposal retried after it committed).
                    return MetaResponse::Done;
                }
                if self.topics.contains_key(name) {
                    return refused(Refusal::TopicAlreadyExists, format!("topic '{name}' already exists"));
                }
                let unfenced = self.unfenced_ids();
                let mut topic = topic.clone();
                topic.partitions.iter_mut().for_each(|p| p.settle(&unfenced));
                self.topics.insert(name.clone(), topic);
                MetaResponse::Done
            }
            MetaCommand::DeleteTopic { name } => match self.topics.remove(name) {
                Some(_) => MetaResponse::Done,
                None => refused(Refusal::UnknownTopicOrPartition, format!("topic '{name}' does not exist")),
            },
            MetaCommand::CreatePartitions { name, from, partitions } => self.create_partitions(name, *from, partitions),
            MetaCommand::AlterTopicConfigs { name, configs, based_on } => match self.topics.get_mut(name) {
                Some(t) if t.configs == *configs => MetaResponse::Done,
                Some(t) if t.configs != *based_on => MetaResponse::Conflict { version: 0 },
                Some(t) => {
                    t.configs = configs.clone();
                    MetaResponse::Done
                }
                None => refused(Refusal::UnknownTopicOrPartition, format!("topic '{name}' does not exist")),
            },
            MetaCommand::ElectLeaders { unclean, partitions } => self.elect_leaders(*unclean, partitions),
            MetaCommand::Reassign { partitions } => self.reassign(partitions),
            MetaCommand::SetDocument { name, text, based_on } => {
                let current = self.documents.get(name).map_or(0, |d| d.version);
                if current != *based_on {
                    return MetaResponse::Conflict { version: current };
                }
                self.documents.insert(name.clone(), Document { version: index, text: text.clone() });
                MetaResponse::Done
            }
            MetaCommand::AlterPartition {
                topic,
                partition,
                leader,
                leader_epoch,
                partition_epoch,
                isr,
                broker_epochs,
            } => {
                self.alter_partition(topic, *partition, (*leader, *leader_epoch, *partition_epoch), isr, broker_epochs)
            }
            MetaCommand::SetClusterId { id } => {
                MetaResponse::ClusterId(self.cluster_id.get_or_insert_with(|| id.clone()).clone())
            }
            MetaCommand::AllocateProducerIds { count, floor, .. } => {
                let first = self.next_producer_id.max(*floor);
                self.next_producer_id = first.saturating_add((*count).max(1));
                MetaResponse::ProducerIds { first, count: (*count).max(1) }
            }
        }
    }

    /// CreatePartitions: the new partitions, settled on the unfenced brokers ([`MetaCommand`]).
    fn create_partitions(&mut self, name: &str, from: u32, partitions: &[PartitionState]) -> MetaResponse {
        let unfenced = self.unfenced_ids();
        match self.topics.get_mut(name) {
            Some(t) if t.partitions.len() == from as usize => {
                let mut added = partitions.to_vec();
                added.iter_mut().for_each(|p| p.settle(&unfenced));
                t.partitions.extend(added);
                MetaResponse::Done
            }
            // These partitions again (a proposal retried after it committed).
            Some(t)
                if t.partitions.len() == from as usize + partitions.len()
                    && t.partitions[from as usize..].iter().zip(partitions).all(|(a, b)| a.replicas == b.replicas) =>
            {
                MetaResponse::Done
            }
            Some(t) => refused(
                Refusal::InvalidPartitions,
                format!("Topic '{name}' has {} partitions now, not {from}.", t.partitions.len()),
            ),
            None => refused(Refusal::UnknownTopicOrPartition, format!("topic '{name}' does not exist")),
        }
    }

    /// ElectLeaders: preferred (the first replica, in the ISR and live) or unclean (a live
    /// replica, for a partition with no leader); a code and message per partition.
    fn elect_leaders(&mut self, unclean: bool, partitions: &[(String, i32)]) -> MetaResponse {
        let unfenced = self.unfenced_ids();
        let results = partitions
            .iter()
            .map(|(name, index)| {
                let Some(p) = self.partition_mut(name, *index) else {
                    return Err((Refusal::UnknownTopicOrPartition, None));
                };
                let done = |c: Refusal, m: &str| Err((c, Some(m.to_string())));
                if unclean {
                    if p.leader >= 0 {
                        return done(Refusal::ElectionNotNeeded, "The partition has a leader.");
                    }
                    let Some(next) = p.replicas.iter().copied().find(|r| unfenced.contains(r)) else {
                        return done(Refusal::EligibleLeadersNotAvailable, "No replica of the partition is live.");
                    };
                    p.isr = vec![next];
                    p.set_leader(next);
                    return Ok(());
                }
                let preferred = p.replicas[0];
                if p.leader == preferred {
                    done(Refusal::ElectionNotNeeded, "The preferred replica leads already.")
                } else if !p.isr.contains(&preferred) || !unfenced.contains(&preferred) {
                    done(Refusal::PreferredLeaderNotAvailable, "The preferred replica is not in the ISR or not live.")
                } else {
                    p.set_leader(preferred);
                    Ok(())
                }
            })
            .collect();
        MetaResponse::Partitions(results)
    }

    /// AlterPartitionReassignments: each partition toward its target replicas (`None`: cancel).
    fn reassign(&mut self, partitions: &[(String, i32, Option<Vec<i32>>)]) -> MetaResponse {
        let mut results = Vec::with_capacity(partitions.len());
        for (name, index, target) in partitions {
            let checked = match target {
                Some(t) => self.check_replicas(t).map(|()| Some(t.clone())),
                None => Ok(None),
            };
            let unfenced = self.unfenced_ids();
            let Some(p) = self.partition_mut(name, *index) else {
                results.push(Err((Refusal::UnknownTopicOrPartition, None)));
                continue;
            };
            match checked {
                Err((c, m)) => results.push(Err((c, Some(m)))),
                Ok(target) => results.push(match p.reassign(target, &unfenced) {
                    Ok(()) => Ok(()),
                    Err((c, m)) => Err((c, Some(m))),
                }),
            }
        }
        MetaResponse::Partitions(results)
    }

    /// AlterPartition: a leader's new ISR, made at `(leader, leader epoch, partition epoch)`,
    /// checked as Kafka's controller checks it (the leadership and partition epoch unchanged,
    /// members live, each at the broker epoch it was seen at: KIP-903).
    fn alter_partition(
        &mut self,
        topic: &str,
        partition: i32,
        (leader, leader_epoch, partition_epoch): (i32, i32, i32),
        isr: &[i32],
        broker_epochs: &BTreeMap<i32, i64>,
    ) -> MetaResponse {
        let unfenced = self.unfenced_ids();
        let stale = broker_epochs
            .iter()
            .find(|(r, e)| isr.contains(r) && self.brokers.get(r).is_none_or(|b| b.epoch as i64 != **e));
        let stale = stale.map(|(r, e)| (*r, *e));
        let Some(p) = self.partition_mut(topic, partition) else {
            return refused(Refusal::UnknownTopicOrPartition, "No such partition.".into());
        };
        if p.leader != leader || p.leader_epoch != leader_epoch {
            return refused(Refusal::FencedLeaderEpoch, "The leadership changed meanwhile.".into());
        }
        if p.partition_epoch != partition_epoch {
            return refused(Refusal::InvalidUpdateVersion, "The partition changed meanwhile.".into());
        }
        if !isr.contains(&leader) || isr.iter().any(|r| !p.replicas.contains(r)) {
            return refused(Refusal::InvalidRequest, "The ISR must hold the leader and replicas only.".into());
        }
        if isr.iter().any(|r| !p.isr.contains(r) && !unfenced.contains(r)) {
            return refused(Refusal::IneligibleReplica, "A fenced broker cannot join the ISR.".into());
        }
        if let Some((r, e)) = stale {
            let message = format!("Broker {r} at epoch {e} is not the broker registered now (KIP-903).");
            return refused(Refusal::IneligibleReplica, message);
        }
        p.isr = isr.to_vec();
        p.partition_epoch += 1;
        // A reassignment completes once every target replica is in sync.
        if !p.adding.is_empty() || !p.removing.is_empty() {
            p.complete_reassignment(&unfenced);
        }
        MetaResponse::Done
    }

    pub fn partition(&self, name: &str, index: i32) -> Option<&PartitionState> {
        self.topics.get(name)?.partitions.get(usize::try_from(index).ok()?)
    }

    fn partition_mut(&mut self, name: &str, index: i32) -> Option<&mut PartitionState> {
        self.topics.get_mut(name)?.partitions.get_mut(usize::try_from(index).ok()?)
    }

    /// A replica list of registered brokers, each once (Kafka's checks of a reassignment).
    fn check_replicas(&self, replicas: &[i32]) -> Result<(), (Refusal, String)> {
        let bad = |m: String| Err((Refusal::InvalidReplicaAssignment, m));
        if replicas.is_empty() {
            return bad("The replica list is empty.".into());
        }
        if let Some(b) = replicas.iter().find(|b| !self.brokers.contains_key(b)) {
            return bad(format!("The replica list includes broker {b}, which is not registered."));
        }
        let mut seen = replicas.to_vec();
        seen.sort_unstable();
        seen.dedup();
        if seen.len() != replicas.len() {
            return bad(format!("The replica list names a broker more than once: {replicas:?}."));
        }
        Ok(())
    }

    /// The ids of the registered brokers that are not fenced, in order.
    pub fn unfenced_ids(&self) -> Vec<i32> {
        self.brokers.values().filter(|b| !b.fenced).map(|b| b.registration.id).collect()
    }

    /// Broker `id` can no longer lead or count as in sync (fenced, or registered again): it
    /// leaves every ISR it is in unless it is the last member (KRaft keeps the last one, so
    /// that it leads again when it returns rather than a replica missing data), and each
    /// partition it led gets the first other ISR member that is unfenced as leader, or none.
    fn fence_leaderships(&mut self, id: i32) {
        let unfenced: Vec<i32> = self.unfenced_ids().into_iter().filter(|b| *b != id).collect();
        for p in self.topics.values_mut().flat_map(|t| t.partitions.iter_mut()) {
            if !p.isr.contains(&id) && p.leader != id {
                continue;
            }
            if p.isr.len() > 1 {
                p.isr.retain(|r| *r != id);
                p.partition_epoch += 1;
            }
            if p.leader == id {
                let next = p.replicas.iter().copied().find(|r| p.isr.contains(r) && unfenced.contains(r));
                p.set_leader(next.unwrap_or(-1));
            }
        }
    }

    /// Every partition without a leader gets the first ISR member that is unfenced, if any.
    fn elect_leaderless(&mut self) {
        let unfenced = self.unfenced_ids();
        for p in self.topics.values_mut().flat_map(|t| t.partitions.iter_mut()).filter(|p| p.leader < 0) {
            if let Some(next) = p.replicas.iter().copied().find(|r| p.isr.contains(r) && unfenced.contains(r)) {
                p.set_leader(next);
            }
        }
    }

    /// Place `count` new partitions of a topic, `replication_factor` replicas each, on the
    /// unfenced brokers (as Kafka without racks: partition `p`'s replicas are consecutive
    /// brokers from a start that moves one broker per partition, so leaders and replicas
    /// spread evenly; the start also moves with the partitions already placed, so small topics
    /// do not all lead on the same broker). The first replica leads; every replica is in the
    /// ISR (a new partition is empty: each has all of it, as in Kafka).
    pub fn place(&self, count: u32, replication_factor: i16) -> Result<Vec<PartitionState>, (Refusal, String)> {
        let brokers = self.unfenced_ids();
        if replication_factor < 1 {
            return Err((Refusal::InvalidReplicationFactor, "Replication factor must be larger than 0.".into()));
        }
        if replication_factor as usize > brokers.len() {
            return Err((
                Refusal::InvalidReplicationFactor,
                format!(
                    "Unable to replicate the partition {replication_factor} time(s): The target replication factor of \
                     {replication_factor} cannot be reached because only {} broker(s) are registered.",
                    brokers.len()
                ),
            ));
        }
        let n = brokers.len();
        let placed: usize = self.topics.values().map(|t| t.partitions.len()).sum();
        Ok((0..count as usize)
            .map(|p| {
                let replicas: Vec<i32> =
                    (0..replication_factor as usize).map(|j| brokers[(placed + p + j) % n]).collect();
                PartitionState::new(replicas.clone(), replicas)
            })
            .collect())
    }

    /// Partitions from explicit assignments (CreateTopics, CreatePartitions), checked as Kafka
    /// does: every replica a registered broker, none twice, one replication factor for all;
    /// the first unfenced replica leads and is the ISR (as [`MetaImage::place`]).
    pub fn assign(&self, assignments: &[Vec<i32>]) -> Result<Vec<PartitionState>, (Refusal, String)> {
        let bad = |m: String| Err((Refusal::InvalidReplicaAssignment, m));
        let unfenced = self.unfenced_ids();
        let mut out = Vec::with_capacity(assignments.len());
        for (i, replicas) in assignments.iter().enumerate() {
            if replicas.is_empty() {
                return bad(format!("The manual partition assignment includes an empty replica list (partition {i})."));
            }
            if replicas.len() != assignments[0].len() {
                return bad("All partitions in the manual partition assignment must have the same number of replicas."
                    .to_string());
            }
            if let Some(b) = replicas.iter().find(|b| !self.brokers.contains_key(b)) {
                return bad(format!(
                    "The manual partition assignment includes broker {b}, but no such broker is registered."
                ));
            }
            let mut seen = replicas.clone();
            seen.sort_unstable();
            seen.dedup();
            if seen.len() != replicas.len() {
                return bad(format!(
                    "The manual partition assignment includes the broker id more than once: {replicas:?}."
                ));
            }
            let isr: Vec<i32> = replicas.iter().copied().filter(|r| unfenced.contains(r)).collect();
            if isr.is_empty() {
                return Err((
                    Refusal::InvalidReplicationFactor,
                    format!("All brokers specified in the partition assignment for partition {i} are fenced."),
                ));
            }
            out.push(PartitionState::new(replicas.clone(), isr));
        }
        Ok(out)
    }
}

/// What a snapshot file holds.
#[derive(Serialize, Deserialize)]
struct SnapshotFile {
    meta: SnapshotMeta,
    image: MetaImage,
}

#[derive(Default)]
struct Applied {
    last_applied: Option<LogId>,
    membership: StoredMembership,
    image: MetaImage,
}

struct Inner<D: Disk> {
    disk: D,
    dir: PathBuf,
    applied: RefCell<Applied>,
    /// The newest snapshot: its meta and bytes.
    current: RefCell<Option<(SnapshotMeta, Vec<u8>)>>,
    /// The last applied index, for whoever waits for the image to change (the publisher).
    applied_index: tokio::sync::watch::Sender<Option<u64>>,
}

/// The state machine: cheap to clone (its snapshot builder is a clone).
pub struct MetaStateMachine<D: Disk> {
    inner: Rc<Inner<D>>,
}

impl<D: Disk> Clone for MetaStateMachine<D> {
    fn clone(&self) -> Self {
        MetaStateMachine { inner: self.inner.clone() }
    }
}

fn io_err(e: impl std::error::Error + Send + Sync + 'static) -> io::Error {
    io::Error::other(e)
}

fn snapshot_name(meta: &SnapshotMeta) -> Option<String> {
    meta.last_log_id.map(|l| format!("snapshot-{:020}-{}.json", l.index, l.leader_id.term))
}

/// The snapshot files in `dir`, newest (highest index) last.
async fn snapshot_files<D: Disk>(disk: &D, dir: &Path) -> io::Result<Vec<(u64, String)>> {
    let mut files: Vec<(u64, String)> = disk
        .list_dir(dir)
        .await
        .map_err(io_err)?
        .into_iter()
        .filter(|n| n.starts_with("snapshot-") && n.ends_with(".json"))
        .filter_map(|n| n.get(9..29).and_then(|i| i.parse().ok()).map(|i| (i, n)))
        .collect();
    files.sort();
    Ok(files)
}

impl<D: Disk> MetaStateMachine<D> {
    /// The state machine whose snapshots live in `dir`: the newest snapshot there (if any) is
    /// the state it starts from.
    pub async fn open(disk: D, dir: &Path) -> io::Result<MetaStateMachine<D>> {
        let mut applied = Applied::default();
        let mut current = None;
        if let Some((_, name)) = snapshot_files(&disk, dir).await?.pop() {
            let path = dir.join(&name);
            let bytes = disk.read_file(&path).await.map_err(io_err)?.unwrap_or_default();
            let file: SnapshotFile = serde_json::from_slice(&bytes)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{}: {e}", path.display())))?;
            applied.last_applied = file.meta.last_log_id;
            applied.membership = file.meta.last_membership.clone();
            applied.image = file.image;
            current = Some((file.meta, bytes));
        }
        Ok(MetaStateMachine {
            inner: Rc::new(Inner {
                disk,
                dir: dir.to_path_buf(),
                applied_index: tokio::sync::watch::Sender::new(applied.last_applied.map(|l| l.index)),
                applied: RefCell::new(applied),
                current: RefCell::new(current),
            }),
        })
    }

    /// The image as applied so far (a copy).
    pub fn image(&self) -> MetaImage {
        self.inner.applied.borrow().image.clone()
    }

    /// A registered broker's state.
    pub fn broker(&self, id: i32) -> Option<BrokerState> {
        self.inner.applied.borrow().image.brokers.get(&id).cloned()
    }

    /// The registered brokers that are not fenced.
    pub fn unfenced_brokers(&self) -> Vec<BrokerState> {
        self.inner.applied.borrow().image.brokers.values().filter(|b| !b.fenced).cloned().collect()
    }

    /// The cluster's id, once committed.
    pub fn cluster_id(&self) -> Option<String> {
        self.inner.applied.borrow().image.cluster_id.clone()
    }

    /// The registered brokers that are not fenced: (id, epoch).
    pub fn unfenced(&self) -> Vec<(i32, u64)> {
        let applied = self.inner.applied.borrow();
        applied.image.brokers.values().filter(|b| !b.fenced).map(|b| (b.registration.id, b.epoch)).collect()
    }

    /// The last applied entry's log id.
    pub fn last_applied(&self) -> Option<LogId> {
        self.inner.applied.borrow().last_applied
    }

    /// The last membership applied: the voters (and any learners) with their controller
    /// listener addresses.
    pub fn membership(&self) -> StoredMembership {
        self.inner.applied.borrow().membership.clone()
    }

    /// The last applied index as it changes.
    pub fn watch_applied(&self) -> tokio::sync::watch::Receiver<Option<u64>> {
        self.inner.applied_index.subscribe()
    }

    /// Apply one entry (committed: the log's order, each once).
    fn apply_entry(&self, entry: &super::types::Entry) -> MetaResponse {
        let mut applied = self.inner.applied.borrow_mut();
        applied.last_applied = Some(entry.log_id);
        let response = match &entry.payload {
            EntryPayload::Blank => MetaResponse::Done,
            EntryPayload::Normal(command) => applied.image.apply(entry.log_id.index, command),
            EntryPayload::Membership(m) => {
                applied.membership = StoredMembership::new(Some(entry.log_id), m.clone());
                MetaResponse::Done
            }
        };
        self.inner.applied_index.send_replace(Some(entry.log_id.index));
        response
    }

    /// An observer's apply (a broker-only node, which follows the quorum without a vote):
    /// committed entries fetched from a controller, in order; those at or below the last
    /// applied index are already applied and skipped. An entry that does not follow on (a
    /// gap) is refused: the caller fetches again from where it stands.
    pub fn apply_committed(&self, entries: &[super::types::Entry]) -> io::Result<usize> {
        let mut count = 0;
        for entry in entries {
            let next = self.last_applied().map_or(0, |l| l.index + 1);
            if entry.log_id.index < next {
                continue;
            }
            if entry.log_id.index > next {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("metadata entry {} does not follow the last applied ({next} expected)", entry.log_id.index),
                ));
            }
            self.apply_entry(entry);
            count += 1;
        }
        Ok(count)
    }

    /// An observer's install of a controller's snapshot (`bytes` as a snapshot file holds
    /// them), when it is ahead of what this node applied.
    pub async fn install_fetched(&self, meta: &SnapshotMeta, bytes: Vec<u8>) -> io::Result<bool> {
        let ahead = meta.last_log_id.map(|l| l.index) > self.last_applied().map(|l| l.index);
        if ahead {
            RaftStateMachine::install_snapshot(&mut self.clone(), meta, SnapshotData::new(bytes)).await?;
        }
        Ok(ahead)
    }

    /// Make `bytes` (a [`SnapshotFile`] for `meta`) the current snapshot: durable first, then
    /// older snapshot files removed.
    async fn persist(&self, meta: &SnapshotMeta, bytes: Vec<u8>) -> io::Result<()> {
        let Some(name) = snapshot_name(meta) else { return Ok(()) };
        let disk = &self.inner.disk;
        disk.write_file_atomic(&self.inner.dir.join(&name), &bytes).await.map_err(io_err)?;
        for (_, old) in snapshot_files(disk, &self.inner.dir).await? {
            if old != name {
                disk.remove_file(&self.inner.dir.join(old)).await.map_err(io_err)?;
            }
        }
        *self.inner.current.borrow_mut() = Some((meta.clone(), bytes));
        Ok(())
    }
}

impl<D: Disk> RaftSnapshotBuilder<Tm> for MetaStateMachine<D> {
    type SnapshotData = SnapshotData;

    async fn build_snapshot(&mut self) -> io::Result<Snapshot> {
        let (meta, bytes) = {
            let applied = self.inner.applied.borrow();
            let meta = SnapshotMeta { last_log_id: applied.last_applied, last_membership: applied.membership.clone() };
            let file = SnapshotFile { meta: meta.clone(), image: applied.image.clone() };
            (meta, serde_json::to_vec(&file).map_err(io_err)?)
        };
        self.persist(&meta, bytes.clone()).await?;
        Ok(Snapshot { meta, snapshot: SnapshotData::new(bytes) })
    }
}

impl<D: Disk> RaftStateMachine<Tm> for MetaStateMachine<D> {
    type SnapshotData = SnapshotData;
    type SnapshotBuilder = Self;

    async fn applied_state(&mut self) -> io::Result<(Option<LogId>, StoredMembership)> {
        let applied = self.inner.applied.borrow();
        Ok((applied.last_applied, applied.membership.clone()))
    }

    async fn apply<S>(&mut self, mut entries: S) -> io::Result<()>
    where
        S: Stream<Item = io::Result<EntryResponder<Tm>>> + Unpin,
    {
        while let Some((entry, responder)) = entries.try_next().await? {
            let response = self.apply_entry(&entry);
            if let Some(responder) = responder {
                responder.send(response);
            }
        }
        Ok(())
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn install_snapshot(&mut self, meta: &SnapshotMeta, snapshot: SnapshotData) -> io::Result<()> {
        let bytes = snapshot.into_inner();
        let file: SnapshotFile =
            serde_json::from_slice(&bytes).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        // The leader's bytes, with the meta openraft installs them under.
        let file = SnapshotFile { meta: meta.clone(), image: file.image };
        let bytes = serde_json::to_vec(&file).map_err(io_err)?;
        self.persist(meta, bytes).await?;
        let mut applied = self.inner.applied.borrow_mut();
        applied.last_applied = meta.last_log_id;
        applied.membership = meta.last_membership.clone();
        applied.image = file.image;
        self.inner.applied_index.send_replace(meta.last_log_id.map(|l| l.index));
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> io::Result<Option<Snapshot>> {
        Ok(self
            .inner
            .current
            .borrow()
            .as_ref()
            .map(|(meta, bytes)| Snapshot { meta: meta.clone(), snapshot: SnapshotData::new(bytes.clone()) }))
    }
}

/// The image a snapshot's bytes hold (tests, tools).
pub fn snapshot_image(bytes: &[u8]) -> io::Result<MetaImage> {
    let file: SnapshotFile =
        serde_json::from_slice(bytes).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    Ok(file.image)
}

#[cfg(test)]
mod tests;
