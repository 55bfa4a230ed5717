//! The quorum's types: openraft's type configuration ([`Tm`]) and what the metadata log holds,
//! one [`MetaCommand`] per Raft entry (as KRaft's metadata records), with the answer its
//! application gives ([`MetaResponse`]).

use super::rt::GlommioRuntime;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

openraft::declare_raft_types!(
    /// openraft's types for the metadata quorum: node ids are Kafka's `node.id`, a node's
    /// address is its CONTROLLER listener (`host:port`), and openraft runs on glommio.
    pub Tm:
        D = MetaCommand,
        R = MetaResponse,
        NodeId = u64,
        Node = ControllerNode,
        AsyncRuntime = GlommioRuntime,
);

pub type LogId = openraft::alias::LogIdOf<Tm>;
pub type Vote = <Tm as openraft::RaftTypeConfig>::Vote;
pub type Entry = <Tm as openraft::RaftTypeConfig>::Entry;
pub type EntryPayload = openraft::alias::EntryPayloadOf<Tm>;
pub type StoredMembership = openraft::alias::StoredMembershipOf<Tm>;
pub type SnapshotMeta = openraft::alias::SnapshotMetaOf<Tm>;
pub type Snapshot = openraft::alias::SnapshotOf<Tm, SnapshotData>;
pub type LogState = openraft::storage::LogState<Tm>;
pub type IOFlushed = openraft::storage::IOFlushed<Tm>;

/// A member of the quorum as the membership names it: its CONTROLLER listener and, in a
/// dynamic quorum (KIP-853), its metadata directory's id (`meta.properties`' `directory.id`),
/// so that a node whose directory was replaced is not taken for the voter it was. Serialized
/// as openraft's `BasicNode` was (`{"addr": ...}`), with the directory id when there is one.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default)]
pub struct ControllerNode {
    pub addr: String,
    /// Empty for a static quorum (`controller.quorum.voters`, KRaft version 0: no check).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub directory_id: String,
}

impl std::fmt::Display for ControllerNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.directory_id.is_empty() {
            write!(f, "{}", self.addr)
        } else {
            write!(f, "{} (directory {})", self.addr, self.directory_id)
        }
    }
}

/// Why a voter change (AddRaftVoter, RemoveRaftVoter) was not made.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VoterChangeError {
    #[error("not the active controller (it is {0:?})")]
    NotLeader(Option<u64>),
    #[error("the quorum's voters are static (controller.quorum.voters): voters are added and removed only in a dynamic quorum (controller.quorum.bootstrap.servers)")]
    StaticQuorum,
    #[error("node {0} is already a voter")]
    DuplicateVoter(u64),
    #[error("no voter {0} with directory {1}")]
    VoterNotFound(u64, String),
    #[error("{0}")]
    Invalid(String),
    #[error("not done within {0:?}")]
    TimedOut(std::time::Duration),
    #[error("{0}")]
    Failed(String),
}

/// A snapshot's bytes: the metadata image as JSON ([`super::state`]).
pub type SnapshotData = std::io::Cursor<Vec<u8>>;

/// A listener a broker advertises: (listener name, host, port, security protocol).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub name: String,
    pub host: String,
    pub port: u16,
    pub security_protocol: String,
}

/// The metadata quorum as its leader sees it (what DescribeQuorum answers): Kafka's leader
/// epoch is the Raft term, offsets are log indexes plus one (the next index).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct QuorumDescription {
    pub leader: u64,
    pub term: u64,
    /// The committed end: the index after the last committed entry.
    pub high_watermark: u64,
    pub voters: Vec<ReplicaProgress>,
    /// Members that replicate the log without voting (openraft's learners).
    pub observers: Vec<ReplicaProgress>,
}

/// One member's replication of the metadata log, as the leader last heard it.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct ReplicaProgress {
    pub id: u64,
    /// Its directory id in a dynamic quorum (empty: none).
    #[serde(default)]
    pub directory_id: String,
    /// The index after its last entry the leader knows it has (0: none known).
    pub log_end: u64,
    /// When the leader last heard from it, in ms since the Unix epoch (-1: never).
    pub last_fetch_ms: i64,
    /// When it last had every committed entry, as far as the leader heard (-1: unknown).
    pub last_caught_up_ms: i64,
}

/// A broker's registration (KRaft's RegisterBrokerRecord).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct BrokerRegistration {
    pub id: i32,
    /// Changes with every start of the broker's process (its incarnation).
    pub incarnation: String,
    pub listeners: Vec<Endpoint>,
    pub rack: Option<String>,
}

/// One partition's replicas and leadership (KRaft's PartitionRecord).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct PartitionState {
    /// During a reassignment, the target replicas, then those being removed.
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    /// -1: none.
    pub leader: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    /// A reassignment under way: replicas being added (not in the original set) ...
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub adding: Vec<i32>,
    /// ... and being removed (not in the target set).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removing: Vec<i32>,
}

impl PartitionState {
    /// A new partition: the first ISR member leads, at epoch 0.
    pub fn new(replicas: Vec<i32>, isr: Vec<i32>) -> PartitionState {
        let leader = isr.first().copied().unwrap_or(-1);
        PartitionState {
            replicas,
            isr,
            leader,
            leader_epoch: 0,
            partition_epoch: 0,
            adding: Vec::new(),
            removing: Vec::new(),
        }
    }

    /// A new leader (-1: none): a new leader epoch.
    pub fn set_leader(&mut self, leader: i32) {
        self.leader = leader;
        self.leader_epoch += 1;
        self.partition_epoch += 1;
    }

    /// The replicas before the reassignment under way (all, with none under way).
    pub fn original(&self) -> Vec<i32> {
        self.replicas.iter().copied().filter(|r| !self.adding.contains(r)).collect()
    }

    /// The replicas a reassignment under way moves to.
    pub fn target(&self) -> Vec<i32> {
        self.replicas.iter().copied().filter(|r| !self.removing.contains(r)).collect()
    }

    /// Start a reassignment to `target` (checked replicas), or cancel the one under way
    /// (`None`), as KIP-455: the replicas are the target then those being removed, and the
    /// reassignment completes once every target replica is in the ISR.
    pub fn reassign(&mut self, target: Option<Vec<i32>>, unfenced: &[i32]) -> Result<(), (Refusal, String)> {
        let original = self.original();
        let target = match target {
            Some(t) => t,
            None if self.adding.is_empty() && self.removing.is_empty() => {
                return Err((Refusal::NoReassignmentInProgress, "There is no reassignment in progress.".into()))
            }
            None => original.clone(),
        };
        let adding: Vec<i32> = target.iter().copied().filter(|r| !original.contains(r)).collect();
        let removing: Vec<i32> = original.iter().copied().filter(|r| !target.contains(r)).collect();
        let replicas: Vec<i32> = target.iter().chain(removing.iter()).copied().collect();
        if !self.isr.iter().any(|r| replicas.contains(r)) {
            // No replica that has the data would be left (a cancellation after an unclean
            // election, say).
            let message = format!("The replicas {replicas:?} would leave no in-sync replica (ISR {:?}).", self.isr);
            return Err((Refusal::InvalidReplicaAssignment, message));
        }
        (self.adding, self.removing, self.replicas) = (adding, removing, replicas);
        self.isr.retain(|r| self.replicas.contains(r));
        self.partition_epoch += 1;
        if !self.replicas.contains(&self.leader) {
            self.elect_from_isr(unfenced);
        }
        self.complete_reassignment(unfenced);
        Ok(())
    }

    /// Finish the reassignment under way once every target replica is in the ISR (KIP-455):
    /// the removed replicas leave, and a leader outside the target hands over to the first
    /// target replica in the ISR that is unfenced. A reorder alone (nothing added or removed)
    /// completes at once.
    pub fn complete_reassignment(&mut self, unfenced: &[i32]) {
        let target = self.target();
        let reorder = self.adding.is_empty() && self.removing.is_empty();
        if !reorder && !target.iter().all(|r| self.isr.contains(r)) {
            return;
        }
        let moved = !self.adding.is_empty() || !self.removing.is_empty();
        self.replicas = target;
        self.adding.clear();
        self.removing.clear();
        self.isr.retain(|r| self.replicas.contains(r));
        if moved {
            self.partition_epoch += 1;
        }
        if !self.replicas.contains(&self.leader) {
            self.elect_from_isr(unfenced);
        }
    }

    /// The first replica in the ISR that is unfenced leads (none: -1).
    fn elect_from_isr(&mut self, unfenced: &[i32]) {
        let next = self.replicas.iter().copied().find(|r| self.isr.contains(r) && unfenced.contains(r));
        self.set_leader(next.unwrap_or(-1));
    }

    /// A new partition as the image takes it: the ISR keeps only unfenced brokers (an ISR of
    /// fenced brokers only becomes the first live replica: the partition is empty), and the
    /// first unfenced ISR member leads (none: -1), whatever the proposer saw.
    pub fn settle(&mut self, unfenced: &[i32]) {
        if self.isr.iter().any(|r| unfenced.contains(r)) {
            self.isr.retain(|r| unfenced.contains(r));
        } else if let Some(live) = self.replicas.iter().copied().find(|r| unfenced.contains(r)) {
            // A new partition is empty: any live replica is as in sync as the fenced one.
            self.isr = vec![live];
        }
        let next = self.replicas.iter().copied().find(|r| self.isr.contains(r) && unfenced.contains(r));
        self.leader = next.unwrap_or(-1);
    }
}

/// A topic (KRaft's TopicRecord with its PartitionRecords and ConfigRecords).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct TopicState {
    /// The topic id, as Kafka's base64 UUID.
    pub id: String,
    pub partitions: Vec<PartitionState>,
    pub configs: BTreeMap<String, String>,
}

/// A change to the cluster's metadata: what one Raft entry carries.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub enum MetaCommand {
    /// A broker registers (again, after a restart): it starts fenced, with the entry's log index
    /// as its broker epoch (as KRaft does).
    RegisterBroker(BrokerRegistration),
    /// The broker of that epoch may lead and follow (its first heartbeat).
    UnfenceBroker {
        id: i32,
        epoch: u64,
    },
    /// The broker of that epoch missed its session: it leads nothing.
    FenceBroker {
        id: i32,
        epoch: u64,
    },
    /// A broker gone for good (UnregisterBroker, `kafka-cluster unregister`): its registration
    /// is removed and it leads nothing, as when fenced. A broker still alive registers again.
    UnregisterBroker {
        id: i32,
    },
    CreateTopic {
        name: String,
        topic: TopicState,
    },
    DeleteTopic {
        name: String,
    },
    /// New partitions for a topic, appended after its first `from` (CreatePartitions): refused
    /// if the topic has another count by then, answered Done if these are already there (a
    /// proposal retried after it committed).
    CreatePartitions {
        name: String,
        from: u32,
        partitions: Vec<PartitionState>,
    },
    /// A topic's own settings, the whole new set (AlterConfigs, IncrementalAlterConfigs), made
    /// from the set `based_on`: refused with [`MetaResponse::Conflict`] if the topic's settings
    /// are another set by then.
    AlterTopicConfigs {
        name: String,
        configs: BTreeMap<String, String>,
        based_on: BTreeMap<String, String>,
    },
    /// ElectLeaders. Preferred: each partition's first replica leads again where it is in the
    /// ISR and unfenced. Unclean: a partition with no leader gets its first unfenced replica,
    /// in the ISR or not, as leader and only ISR member (it may lack acknowledged records).
    ElectLeaders {
        unclean: bool,
        partitions: Vec<(String, i32)>,
    },
    /// AlterPartitionReassignments: move each partition to the replicas given (`None`: cancel
    /// the reassignment under way). The new replicas are added; the reassignment completes
    /// when every target replica is in the ISR (at once where none is new).
    Reassign {
        partitions: Vec<(String, i32, Option<Vec<i32>>)>,
    },
    /// A block of producer ids for a broker (KRaft's ProducerIdsRecord).
    AllocateProducerIds {
        broker: i32,
        count: i64,
        /// The proposer's floor (its clock × 1024, as a standalone node's ids start): the block
        /// starts at least there, so ids stay above any a node handed out before it joined.
        #[serde(default)]
        floor: i64,
    },
    /// A new version of a cluster-wide document (the security state: ACLs, SCRAM credentials,
    /// client quotas, each as its file's text), made from the version `based_on` (0: none
    /// yet): refused with [`MetaResponse::Conflict`] if another change came first.
    SetDocument {
        name: String,
        text: String,
        based_on: u64,
    },
    /// A partition's leader changes its ISR (KRaft's AlterPartition): followers that fell
    /// behind leave, caught-up ones join. Made from the leadership and partition epochs it
    /// names: refused when either moved meanwhile (another change came first), when the ISR
    /// would lack the leader, name a non-replica, or add a fenced broker (KIP-841), or when a
    /// member's broker epoch (as its fetches told the leader) is not its registration's now
    /// (KIP-903: a replica that restarted, its disk perhaps lost, since it caught up).
    AlterPartition {
        topic: String,
        partition: i32,
        leader: i32,
        leader_epoch: i32,
        partition_epoch: i32,
        isr: Vec<i32>,
        /// Members' broker epochs as the leader knows them (a member missing is not checked).
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        broker_epochs: BTreeMap<i32, i64>,
    },
    /// The cluster's id, proposed by every node from its `meta.properties`: the first one
    /// committed is the cluster's (a cluster formed with no format step has no other source).
    SetClusterId {
        id: String,
    },
}

impl std::fmt::Display for MetaCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MetaCommand::RegisterBroker(b) => write!(f, "register broker {}", b.id),
            MetaCommand::UnfenceBroker { id, epoch } => write!(f, "unfence broker {id} epoch {epoch}"),
            MetaCommand::FenceBroker { id, epoch } => write!(f, "fence broker {id} epoch {epoch}"),
            MetaCommand::UnregisterBroker { id } => write!(f, "unregister broker {id}"),
            MetaCommand::CreateTopic { name, topic } => {
                write!(f, "create topic {name} ({} partitions)", topic.partitions.len())
            }
            MetaCommand::DeleteTopic { name } => write!(f, "delete topic {name}"),
            MetaCommand::CreatePartitions { name, partitions, .. } => {
                write!(f, "add {} partitions to {name}", partitions.len())
            }
            MetaCommand::AlterTopicConfigs { name, .. } => write!(f, "alter the settings of topic {name}"),
            MetaCommand::ElectLeaders { unclean, partitions } => {
                let kind = if *unclean { "unclean" } else { "preferred" };
                write!(f, "elect {kind} leaders of {} partitions", partitions.len())
            }
            MetaCommand::Reassign { partitions } => write!(f, "reassign {} partitions", partitions.len()),
            MetaCommand::AllocateProducerIds { broker, count, .. } => {
                write!(f, "allocate {count} producer ids to broker {broker}")
            }
            MetaCommand::SetClusterId { id } => write!(f, "cluster id {id}"),
            MetaCommand::AlterPartition { topic, partition, isr, .. } => {
                write!(f, "ISR of {topic}-{partition} to {isr:?}")
            }
            MetaCommand::SetDocument { name, .. } => write!(f, "new version of {name}"),
        }
    }
}

/// What applying a [`MetaCommand`] gave.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub enum MetaResponse {
    Done,
    /// A registration's broker epoch.
    BrokerEpoch(u64),
    /// The first id of an allocated block.
    ProducerIds {
        first: i64,
        count: i64,
    },
    /// The cluster's id (the one proposed, or the one committed before it).
    ClusterId(String),
    /// Per partition asked of [`MetaCommand::ElectLeaders`] or [`MetaCommand::Reassign`]: done,
    /// or why not (with a message, where there is more to say).
    Partitions(Vec<Result<(), (Refusal, Option<String>)>>),
    /// A [`MetaCommand::SetDocument`] based on an older version than this one.
    Conflict {
        version: u64,
    },
    /// The command does not apply to the current metadata: the entry stays in the log and
    /// changes nothing.
    Refused {
        reason: Refusal,
        message: String,
    },
}

/// Why the metadata refuses a command, or one partition of it. The API answers each with
/// Kafka's error code of the same name (`server::errors::refusal_code`).
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// A broker heartbeat or change from an older registration.
    StaleBrokerEpoch,
    BrokerIdNotRegistered,
    TopicAlreadyExists,
    UnknownTopicOrPartition,
    /// New partitions made from a count that is not the topic's now.
    InvalidPartitions,
    ElectionNotNeeded,
    EligibleLeadersNotAvailable,
    PreferredLeaderNotAvailable,
    /// An ISR change from a leadership that has ended.
    FencedLeaderEpoch,
    /// An ISR change made from a partition state that has changed since.
    InvalidUpdateVersion,
    /// A change that contradicts itself (an ISR without the leader, say).
    InvalidRequest,
    /// A broker that may not join the ISR (fenced, or restarted since it asked).
    IneligibleReplica,
    InvalidReplicaAssignment,
    InvalidReplicationFactor,
    NoReassignmentInProgress,
}
