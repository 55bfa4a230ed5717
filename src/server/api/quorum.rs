//! The metadata quorum's admin APIs. DescribeQuorum (55): the quorum as its leader sees it,
//! what `kafka-metadata-quorum describe --status` and `--replication` show. UnregisterBroker
//! (64): a broker gone for good leaves the cluster's registrations (`kafka-cluster
//! unregister`). AddRaftVoter (80) and RemoveRaftVoter (81): a dynamic quorum's controllers
//! added and removed while it serves (`kafka-metadata-quorum add-controller` and
//! `remove-controller`). Any node answers: a node that does not lead the quorum asks the leader
//! (Kafka's brokers forward them to the active controller).

use crate::cluster::types::MetaCommand;
use crate::cluster::types::ReplicaProgress;
use crate::cluster::types::{ControllerNode, VoterChangeError};
use crate::protocol::admin::{
    AddRaftVoterRequest, AddRaftVoterResponse, RemoveRaftVoterRequest, RemoveRaftVoterResponse,
};
use crate::protocol::admin::{
    DescribeQuorumRequest, DescribeQuorumResponse, QuorumListener, QuorumNode, QuorumPartitionData, QuorumReplicaState,
    QuorumTopicData, UnregisterBrokerRequest, UnregisterBrokerResponse,
};
use crate::protocol::errors::{self as code, ErrorCode};
use crate::security::acl::Operation;
use crate::server::api::Cx;
use crate::server::control::quorum::DescribeQuorum;
use crate::server::control::quorum::VoterChange;
use crate::types::Uuid;
use std::time::Duration;

/// The metadata log's topic, as Kafka names it (`__cluster_metadata`, partition 0).
const METADATA_TOPIC: &str = "__cluster_metadata";

/// DescribeQuorum: DESCRIBE on the cluster (CLUSTER_AUTHORIZATION_FAILED otherwise), for
/// `__cluster_metadata` partition 0 alone (any other partition asked: UNKNOWN_TOPIC_OR_PARTITION
/// on each, as Kafka's Raft client answers). A standalone node has no quorum: that partition is
/// UNKNOWN_TOPIC_OR_PARTITION too, with why. No leader answering: NOT_LEADER_OR_FOLLOWER
/// (retriable).
pub async fn describe(cx: &mut Cx<'_>, r: DescribeQuorumRequest) -> DescribeQuorumResponse {
    if !cx.allowed_on_cluster(Operation::Describe) {
        cx.release_turn();
        return DescribeQuorumResponse {
            error_code: code::CLUSTER_AUTHORIZATION_FAILED,
            error_message: Some("Cluster authorization failed.".into()),
            ..Default::default()
        };
    }
    let only_metadata = r.topics.len() == 1
        && r.topics[0].topic_name == METADATA_TOPIC
        && r.topics[0].partitions.len() == 1
        && r.topics[0].partitions[0].partition_index == 0;
    if !only_metadata {
        cx.release_turn();
        return each_partition(&r, code::UNKNOWN_TOPIC_OR_PARTITION, None);
    }
    let described = cx.shard.call(0, DescribeQuorum).await;
    cx.release_turn();
    let (q, voters) = match described {
        Ok(Ok(Some(d))) => d,
        Ok(Ok(None)) => {
            let why = "a standalone node has no metadata quorum (process.roles is not set)";
            return each_partition(&r, code::UNKNOWN_TOPIC_OR_PARTITION, Some(why.into()));
        }
        Ok(Err(e)) => return each_partition(&r, code::NOT_LEADER_OR_FOLLOWER, Some(e)),
        Err(e) => return each_partition(&r, code::NOT_LEADER_OR_FOLLOWER, Some(e.to_string())),
    };
    let state = |p: &ReplicaProgress| QuorumReplicaState {
        replica_id: p.id as i32,
        replica_directory_id: Uuid::parse(&p.directory_id).map_or([0; 16], |u| u.0),
        log_end_offset: p.log_end as i64,
        last_fetch_timestamp: p.last_fetch_ms,
        last_caught_up_timestamp: p.last_caught_up_ms,
        ..Default::default()
    };
    let listener = cx.shard.config().cluster.as_ref().map(|c| c.controller_listener.clone()).unwrap_or_default();
    let nodes = voters
        .iter()
        .filter_map(|(id, addr)| {
            let (host, port) = addr.rsplit_once(':')?;
            let port = port.parse().ok()?;
            let name = listener.clone();
            Some(QuorumNode {
                node_id: *id as i32,
                listeners: vec![QuorumListener { name, host: host.to_string(), port, ..Default::default() }],
                ..Default::default()
            })
        })
        .collect();
    DescribeQuorumResponse {
        topics: vec![QuorumTopicData {
            topic_name: METADATA_TOPIC.into(),
            partitions: vec![QuorumPartitionData {
                partition_index: 0,
                leader_id: q.leader as i32,
                leader_epoch: q.term as i32,
                high_watermark: q.high_watermark as i64,
                current_voters: q.voters.iter().map(state).collect(),
                observers: q.observers.iter().map(state).collect(),
                ..Default::default()
            }],
            ..Default::default()
        }],
        nodes,
        ..Default::default()
    }
}

/// Every partition asked answered with `error` (leader -1).
fn each_partition(r: &DescribeQuorumRequest, error: ErrorCode, message: Option<String>) -> DescribeQuorumResponse {
    DescribeQuorumResponse {
        topics: r
            .topics
            .iter()
            .map(|t| QuorumTopicData {
                topic_name: t.topic_name.clone(),
                partitions: t
                    .partitions
                    .iter()
                    .map(|p| QuorumPartitionData {
                        partition_index: p.partition_index,
                        error_code: error,
                        error_message: message.clone(),
                        leader_id: -1,
                        leader_epoch: -1,
                        high_watermark: -1,
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

/// UnregisterBroker: ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED otherwise); the
/// broker's registration is removed through the quorum and the partitions it led move to other
/// in-sync replicas, as when it is fenced (Kafka's controller does the same). A broker not
/// registered: BROKER_ID_NOT_REGISTERED. A broker still running registers again at its next
/// heartbeat, as a Kafka broker does. A standalone node has no registrations to remove:
/// INVALID_REQUEST, with why.
pub async fn unregister_broker(cx: &mut Cx<'_>, r: UnregisterBrokerRequest) -> UnregisterBrokerResponse {
    let refused = |error_code, message: String| UnregisterBrokerResponse {
        error_code,
        error_message: Some(message),
        ..Default::default()
    };
    if !cx.allowed_on_cluster(Operation::Alter) {
        cx.release_turn();
        return refused(code::CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.".into());
    }
    if cx.shard.config().cluster.is_none() {
        cx.release_turn();
        return refused(
            code::INVALID_REQUEST,
            "a standalone node has no broker registrations (process.roles is not set)".into(),
        );
    }
    let command = MetaCommand::UnregisterBroker { id: r.broker_id };
    let outcome = cx.shard.call(0, crate::server::control::metadata::Commit(command)).await;
    cx.release_turn();
    match outcome {
        Ok(Ok(())) => {
            tracing::info!(broker = r.broker_id, "broker unregistered");
            UnregisterBrokerResponse::default()
        }
        Ok(Err(e)) => refused(e.code, e.message),
        Err(e) => refused(crate::server::errors::call_code(&e, code::REQUEST_TIMED_OUT), e.to_string()),
    }
}

/// Kafka's error for a voter change not made.
fn voter_change_error(e: &VoterChangeError) -> ErrorCode {
    match e {
        VoterChangeError::NotLeader(_) => code::NOT_LEADER_OR_FOLLOWER,
        VoterChangeError::StaticQuorum => code::UNSUPPORTED_VERSION,
        VoterChangeError::DuplicateVoter(_) => ErrorCode(126), // DUPLICATE_VOTER
        VoterChangeError::VoterNotFound(..) => ErrorCode(127), // VOTER_NOT_FOUND
        VoterChangeError::Invalid(_) => code::INVALID_REQUEST,
        VoterChangeError::TimedOut(_) => code::REQUEST_TIMED_OUT,
        VoterChangeError::Failed(_) => code::UNKNOWN_SERVER_ERROR,
    }
}

/// Run a voter change on shard 0: `Ok(())`, or Kafka's error and why.
async fn change_voters(cx: &mut Cx<'_>, change: VoterChange) -> Result<(), (ErrorCode, String)> {
    if !cx.allowed_on_cluster(Operation::Alter) {
        cx.release_turn();
        return Err((code::CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.".into()));
    }
    if cx.shard.config().cluster.is_none() {
        cx.release_turn();
        return Err((
            code::INVALID_REQUEST,
            "a standalone node has no metadata quorum (process.roles is not set)".into(),
        ));
    }
    let outcome = cx.shard.call(0, change).await;
    cx.release_turn();
    match outcome {
        Ok(Some(Ok(()))) => Ok(()),
        Ok(Some(Err(e))) => Err((voter_change_error(&e), e.to_string())),
        Ok(None) => Err((code::NOT_LEADER_OR_FOLLOWER, "the metadata quorum is not up yet on this node".into())),
        Err(e) => Err((crate::server::errors::call_code(&e, code::REQUEST_TIMED_OUT), e.to_string())),
    }
}

/// AddRaftVoter: ALTER on the cluster. In a dynamic quorum (KIP-853), node `voter_id` with its
/// directory id, at its first controller listener, is caught up as a learner and then made a
/// voter, within `timeout_ms` (at least a second, at most two minutes); the answer comes once
/// the new voter set is committed. A voter of that id already: DUPLICATE_VOTER; a static
/// quorum (`controller.quorum.voters`): UNSUPPORTED_VERSION, as Kafka answers at kraft.version 0.
pub async fn add_raft_voter(cx: &mut Cx<'_>, r: AddRaftVoterRequest) -> AddRaftVoterResponse {
    let refused = |(error_code, message): (ErrorCode, String)| AddRaftVoterResponse {
        error_code,
        error_message: Some(message),
        ..Default::default()
    };
    let Some(listener) = r.listeners.first() else {
        cx.release_turn();
        return refused((code::INVALID_REQUEST, "a voter needs a controller listener".into()));
    };
    if r.voter_id < 0 || r.voter_directory_id == [0; 16] {
        cx.release_turn();
        return refused((code::INVALID_REQUEST, "a voter needs a node id and a directory id".into()));
    }
    let host = if listener.host.contains(':') { format!("[{}]", listener.host) } else { listener.host.clone() };
    let node = ControllerNode {
        addr: format!("{host}:{}", listener.port),
        directory_id: Uuid(r.voter_directory_id).to_string(),
    };
    let limit = Duration::from_millis(r.timeout_ms.max(0) as u64);
    let id = r.voter_id as u64;
    match change_voters(cx, VoterChange::Add { id, node, limit }).await {
        Ok(()) => AddRaftVoterResponse::default(),
        Err(e) => refused(e),
    }
}

/// RemoveRaftVoter: ALTER on the cluster. Voter `voter_id` of that directory leaves a dynamic
/// quorum (VOTER_NOT_FOUND when no voter has both); the last voter is not removed.
pub async fn remove_raft_voter(cx: &mut Cx<'_>, r: RemoveRaftVoterRequest) -> RemoveRaftVoterResponse {
    if r.voter_id < 0 {
        cx.release_turn();
        let message = Some(format!("voter id {} is not a node id", r.voter_id));
        return RemoveRaftVoterResponse {
            error_code: code::INVALID_REQUEST,
            error_message: message,
            ..Default::default()
        };
    }
    let change = VoterChange::Remove { id: r.voter_id as u64, directory_id: Uuid(r.voter_directory_id).to_string() };
    match change_voters(cx, change).await {
        Ok(()) => RemoveRaftVoterResponse::default(),
        Err((error_code, message)) => {
            RemoveRaftVoterResponse { error_code, error_message: Some(message), ..Default::default() }
        }
    }
}
