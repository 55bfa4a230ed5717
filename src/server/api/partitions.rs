//! Partition leadership and placement: ElectLeaders (43), AlterPartitionReassignments (45) and
//! ListPartitionReassignments (46). On a clustered node each change is one command through the
//! metadata quorum ([`control::metadata::PartitionCommand`], on shard 0), answered per partition
//! with Kafka's codes; the reassignments under way are read from the shard's view of the
//! image. A standalone node is every partition's only replica: elections are never needed and
//! the only placement is this node.

use crate::cluster::types::MetaCommand;
use crate::protocol::admin::*;
use crate::protocol::errors::{self as code, ErrorCode};
use crate::security::acl::Operation;
use crate::server::api::Cx;
use crate::server::control::metadata::PartitionCommand;
use crate::server::errors::AdminError;
use std::collections::BTreeMap;

type Outcome = (ErrorCode, Option<String>);

/// Run a per-partition command on shard 0; a failure of the whole is every partition's.
async fn on_shard0(cx: &Cx<'_>, command: MetaCommand, n: usize) -> Vec<Outcome> {
    let r = cx.shard.call(0, PartitionCommand(command)).await.map_err(AdminError::from).and_then(|r| r);
    match r {
        Ok(results) if results.len() == n => results,
        Ok(results) => vec![(code::UNKNOWN_SERVER_ERROR, Some(format!("{} answers for {n}", results.len()))); n],
        Err(e) => vec![(e.code, Some(e.message)); n],
    }
}

/// Every partition of every topic this shard knows (a request naming none).
fn every_partition(shard: &crate::server::shard::Shard) -> Vec<(String, i32)> {
    let count = |t: &str| shard.topic(t, |i| i.partitions as i32).unwrap_or(0);
    shard.topic_names().into_iter().flat_map(|t| (0..count(&t)).map(move |p| (t.clone(), p))).collect()
}

/// Results per partition, grouped by topic in the order first asked.
fn by_topic<T>(
    asked: Vec<(String, i32)>,
    outcomes: Vec<Outcome>,
    make: impl Fn(i32, Outcome) -> T,
) -> Vec<(String, Vec<T>)> {
    let mut out: Vec<(String, Vec<T>)> = Vec::new();
    for ((topic, p), o) in asked.into_iter().zip(outcomes) {
        match out.iter_mut().find(|(t, _)| *t == topic) {
            Some((_, v)) => v.push(make(p, o)),
            None => out.push((topic, vec![make(p, o)])),
        }
    }
    out
}

/// ElectLeaders: preferred (type 0; v0 has no type) or unclean (1) election of the partitions
/// named, or (none named) of every partition, where the answer lists only those an election
/// was needed for. Needs ALTER on the cluster.
pub async fn elect_leaders(cx: &mut Cx<'_>, req: ElectLeadersRequest) -> ElectLeadersResponse {
    let shard = cx.shard;
    let all = req.topic_partitions.is_none();
    let asked: Vec<(String, i32)> = match req.topic_partitions {
        Some(ts) => ts.into_iter().flat_map(|t| t.partitions.into_iter().map(move |p| (t.topic.clone(), p))).collect(),
        None => every_partition(shard),
    };
    let (top, outcomes): (ErrorCode, Vec<Outcome>) = if !cx.allowed_on_cluster(Operation::Alter) {
        let denied = (code::CLUSTER_AUTHORIZATION_FAILED, Some("Cluster authorization failed.".to_string()));
        (code::CLUSTER_AUTHORIZATION_FAILED, vec![denied; asked.len()])
    } else if !matches!(req.election_type, 0 | 1) {
        let bad = (code::INVALID_REQUEST, Some(format!("unknown election type {}", req.election_type)));
        (code::INVALID_REQUEST, vec![bad; asked.len()])
    } else if shard.config().cluster.is_some() {
        let command = MetaCommand::ElectLeaders { unclean: req.election_type == 1, partitions: asked.clone() };
        (code::NONE, on_shard0(cx, command, asked.len()).await)
    } else {
        let standalone = |(t, p): &(String, i32)| match shard.leadership(t, *p) {
            None => (code::UNKNOWN_TOPIC_OR_PARTITION, None),
            Some(_) => (code::ELECTION_NOT_NEEDED, Some("The only replica leads.".to_string())),
        };
        (code::NONE, asked.iter().map(standalone).collect())
    };
    let (asked, outcomes): (Vec<_>, Vec<_>) =
        asked.into_iter().zip(outcomes).filter(|(_, o)| !(all && o.0 == code::ELECTION_NOT_NEEDED)).unzip();
    let make = |partition_id, (error_code, error_message)| ElectLeadersPartitionResult {
        partition_id,
        error_code,
        error_message,
        ..Default::default()
    };
    let replica_election_results = by_topic(asked, outcomes, make)
        .into_iter()
        .map(|(topic, partition_result)| ElectLeadersTopicResult { topic, partition_result, ..Default::default() })
        .collect();
    ElectLeadersResponse { error_code: top, replica_election_results, ..Default::default() }
}

/// AlterPartitionReassignments: move partitions to new replicas (or cancel their move). Needs
/// ALTER on the cluster.
pub async fn alter_reassignments(
    cx: &mut Cx<'_>,
    req: AlterPartitionReassignmentsRequest,
) -> AlterPartitionReassignmentsResponse {
    let shard = cx.shard;
    if !cx.allowed_on_cluster(Operation::Alter) {
        return AlterPartitionReassignmentsResponse {
            error_code: code::CLUSTER_AUTHORIZATION_FAILED,
            error_message: Some("Cluster authorization failed.".to_string()),
            ..Default::default()
        };
    }
    let allow_rf_change = req.allow_replication_factor_change;
    let mut asked = Vec::new();
    let mut targets = Vec::new();
    // KIP-860 (v1): a target of another size than the replication factor, refused up front.
    let mut refused: Vec<Option<(ErrorCode, Option<String>)>> = Vec::new();
    for t in req.topics {
        for p in t.partitions {
            let changed = match (&p.replicas, shard.leadership(&t.name, p.partition_index)) {
                (Some(r), Some(l)) if !allow_rf_change => {
                    // Kafka's count: the replicas and those being added, less those being removed.
                    let mut set: std::collections::BTreeSet<i32> =
                        l.replicas.iter().chain(&l.adding).copied().collect();
                    l.removing.iter().for_each(|r| {
                        set.remove(r);
                    });
                    let rf = set.len();
                    (r.len() != rf).then(|| {
                        let why = format!("The replication factor is changed from {rf} to {}", r.len());
                        (code::INVALID_REPLICATION_FACTOR, Some(why))
                    })
                }
                _ => None,
            };
            asked.push((t.name.clone(), p.partition_index));
            if changed.is_none() {
                targets.push((t.name.clone(), p.partition_index, p.replicas));
            }
            refused.push(changed);
        }
    }
    let outcomes = if shard.config().cluster.is_some() {
        let n = targets.len();
        if n == 0 {
            Vec::new()
        } else {
            on_shard0(cx, MetaCommand::Reassign { partitions: targets }, n).await
        }
    } else {
        let node = shard.config().node_id;
        let standalone = |(t, p, target): &(String, i32, Option<Vec<i32>>)| match (shard.leadership(t, *p), target) {
            (None, _) => (code::UNKNOWN_TOPIC_OR_PARTITION, None),
            (Some(_), None) => {
                (code::NO_REASSIGNMENT_IN_PROGRESS, Some("There is no reassignment in progress.".into()))
            }
            (Some(_), Some(r)) if *r == [node] => (code::NONE, None),
            (Some(_), Some(r)) => (
                code::INVALID_REPLICA_ASSIGNMENT,
                Some(format!("A standalone node has one broker, {node}; the replica list {r:?} names others.")),
            ),
        };
        targets.iter().map(standalone).collect()
    };
    // The refused ones back in their places among the outcomes of the others.
    let mut rest = outcomes.into_iter();
    let outcomes: Vec<_> = refused
        .into_iter()
        .map(|r| r.unwrap_or_else(|| rest.next().unwrap_or((code::UNKNOWN_SERVER_ERROR, None))))
        .collect();
    let make = |partition_index, (error_code, error_message)| ReassignablePartitionResponse {
        partition_index,
        error_code,
        error_message,
        ..Default::default()
    };
    let responses = by_topic(asked, outcomes, make)
        .into_iter()
        .map(|(name, partitions)| ReassignableTopicResponse { name, partitions, ..Default::default() })
        .collect();
    AlterPartitionReassignmentsResponse {
        responses,
        allow_replication_factor_change: allow_rf_change,
        ..Default::default()
    }
}

/// ListPartitionReassignments: the reassignments under way of the partitions named (none named:
/// every one), from this shard's view of the image. Needs DESCRIBE on the cluster.
pub fn list_reassignments(
    cx: &mut Cx<'_>,
    req: ListPartitionReassignmentsRequest,
) -> ListPartitionReassignmentsResponse {
    cx.release_turn();
    let shard = cx.shard;
    if !cx.allowed_on_cluster(Operation::Describe) {
        return ListPartitionReassignmentsResponse {
            error_code: code::CLUSTER_AUTHORIZATION_FAILED,
            error_message: Some("Cluster authorization failed.".to_string()),
            ..Default::default()
        };
    }
    let asked: Vec<(String, i32)> = match req.topics {
        Some(ts) => {
            ts.into_iter().flat_map(|t| t.partition_indexes.into_iter().map(move |p| (t.name.clone(), p))).collect()
        }
        None => every_partition(shard),
    };
    let mut topics: BTreeMap<String, Vec<OngoingPartitionReassignment>> = BTreeMap::new();
    for (t, p) in asked {
        let Some(l) = shard.leadership(&t, p) else { continue };
        if l.adding.is_empty() && l.removing.is_empty() {
            continue;
        }
        topics.entry(t).or_default().push(OngoingPartitionReassignment {
            partition_index: p,
            replicas: l.replicas,
            adding_replicas: l.adding,
            removing_replicas: l.removing,
            ..Default::default()
        });
    }
    let topics = topics
        .into_iter()
        .map(|(name, partitions)| OngoingTopicReassignment { name, partitions, ..Default::default() })
        .collect();
    ListPartitionReassignmentsResponse { topics, ..Default::default() }
}
