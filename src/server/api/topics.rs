//! Topic changes: CreateTopics, DeleteTopics and CreatePartitions, each a control-plane call to
//! shard 0 ([`crate::server::control`]). They complete before the connection's next request
//! (the turn is held to the end).

use crate::protocol::admin::{
    CreatePartitionsRequest, CreatePartitionsResponse, CreatePartitionsTopic, CreatePartitionsTopicResult,
};
use crate::protocol::errors::{self as code, ErrorCode};
use crate::protocol::messages::*;
use crate::security::acl::{Operation, ResourceType};
use crate::server::api::Cx;
use crate::server::control::{self, AdminResult};
use crate::server::errors::AdminError;
use crate::server::router::ShardCall;
use crate::server::shard::Shard;
use crate::types::Uuid;
use std::collections::HashSet;
use std::rc::Rc;

/// A control-plane call to shard 0; a call without a reply is an error like any other.
pub(super) async fn on_shard0<C: ShardCall<Shard, Reply = AdminResult>>(shard: &Rc<Shard>, call: C) -> AdminResult {
    shard.call(0, call).await.map_err(AdminError::from).and_then(|r| r)
}

/// (error code, message) of an outcome, as responses carry them.
pub(super) fn outcome(r: AdminResult) -> (ErrorCode, Option<String>) {
    match r {
        Ok(()) => (code::NONE, None),
        Err(e) => (e.code, Some(e.message)),
    }
}

pub async fn create_topics(cx: &mut Cx<'_>, c: CreateTopicsRequest) -> CreateTopicsResponse {
    let shard = cx.shard;
    let mut topics = Vec::with_capacity(c.topics.len());
    for t in c.topics {
        let partitions = match (t.num_partitions, t.assignments.len()) {
            (-1, 0) => shard.effective().num_partitions as i64,
            (-1, n) => n as i64,
            (n, _) => n as i64,
        };
        let may_create =
            cx.allowed_on_cluster(Operation::Create) || cx.allowed(Operation::Create, ResourceType::Topic, &t.name);
        let result = if !may_create {
            Err(AdminError::new(code::TOPIC_AUTHORIZATION_FAILED, "Authorization failed."))
        } else if crate::server::is_internal_topic(&t.name) {
            let exists = shard.has_topic(&t.name);
            let c = if exists { code::TOPIC_ALREADY_EXISTS } else { code::INVALID_TOPIC_EXCEPTION };
            Err(AdminError::new(c, format!("{} is internal: the broker creates it", t.name)))
        } else if let Some(k) = t.configs.iter().find(|k| k.value.is_none()) {
            Err(AdminError::new(code::INVALID_CONFIG, format!("null value for {}", k.name)))
        } else {
            match assignments(&t) {
                Err(e) => Err(e),
                Ok(assignments) => {
                    let configs =
                        t.configs.iter().map(|k| (k.name.clone(), k.value.clone().unwrap_or_default())).collect();
                    let call = control::CreateTopic {
                        name: t.name.clone(),
                        partitions,
                        replication_factor: t.replication_factor,
                        assignments,
                        configs,
                        validate_only: c.validate_only,
                    };
                    on_shard0(shard, call).await
                }
            }
        };
        let (error_code, error_message) = outcome(result);
        // KIP-516 (v7+): the new topic's id.
        let created = error_code == code::NONE && !c.validate_only;
        let topic_id = if created { shard.topic(&t.name, |i| i.id.0).unwrap_or_default() } else { [0; 16] };
        // The replicas each partition got (one, standalone).
        let factor = shard.leadership(&t.name, 0).map_or(1, |l| l.replicas.len().max(1) as i16);
        topics.push(CreatableTopicResult {
            name: t.name,
            topic_id,
            error_code,
            error_message,
            num_partitions: if error_code == code::NONE { partitions as i32 } else { -1 },
            replication_factor: if error_code != code::NONE {
                -1
            } else if created {
                factor
            } else {
                t.replication_factor.max(1)
            },
            // An empty list, not null: the Java AdminClient reads the list whenever
            // num_partitions is set (v5+).
            configs: Some(Vec::new()),
            ..Default::default()
        });
    }
    CreateTopicsResponse { topics, ..Default::default() }
}

/// A CreateTopics topic's explicit assignments, one replica list per partition in partition
/// order, checked as Kafka does: given only with the partition count and replication factor
/// left at -1, and naming each partition from 0 once.
fn assignments(t: &CreatableTopic) -> Result<Vec<Vec<i32>>, AdminError> {
    if t.assignments.is_empty() {
        return Ok(Vec::new());
    }
    if t.num_partitions != -1 || t.replication_factor != -1 {
        let message = "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time.";
        return Err(AdminError::new(code::INVALID_REQUEST, message));
    }
    let mut sorted: Vec<&CreatableAssignment> = t.assignments.iter().collect();
    sorted.sort_by_key(|a| a.partition_index);
    if sorted.iter().enumerate().any(|(i, a)| a.partition_index != i as i32) {
        let message = "Partitions should be consecutive and start from 0.";
        return Err(AdminError::new(code::INVALID_REPLICA_ASSIGNMENT, message));
    }
    Ok(sorted.into_iter().map(|a| a.broker_ids.clone()).collect())
}

/// DeleteTopics, by name or (v6+, KIP-516) by topic id: each answer names the topic both ways
/// where it is known.
pub async fn delete_topics(cx: &mut Cx<'_>, d: DeleteTopicsRequest) -> DeleteTopicsResponse {
    let wanted: Vec<(Option<String>, Uuid)> = if d.topics.is_empty() {
        d.topic_names.into_iter().map(|n| (Some(n), Uuid::ZERO)).collect()
    } else {
        d.topics.into_iter().map(|t| (t.name, Uuid(t.topic_id))).collect()
    };
    let shard = cx.shard;
    let mut responses = Vec::with_capacity(wanted.len());
    for (name, id) in wanted {
        let target = match (name, id.is_zero()) {
            (Some(_), false) => {
                Err((None, AdminError::new(code::INVALID_REQUEST, "name a topic by name or by id, not both")))
            }
            (Some(n), true) => Ok(n),
            (None, true) => Err((None, AdminError::new(code::INVALID_REQUEST, "a topic needs a name or an id"))),
            (None, false) => shard
                .topic_name(id)
                .ok_or_else(|| (None, AdminError::new(code::UNKNOWN_TOPIC_ID, format!("no topic has the id {id}")))),
        };
        let (name, result) = match target {
            Ok(n) if !cx.allowed(Operation::Delete, ResourceType::Topic, &n) => {
                let denied = AdminError::new(code::TOPIC_AUTHORIZATION_FAILED, "Authorization failed.");
                // A name is told only to who may describe the topic.
                let told = cx.allowed(Operation::Describe, ResourceType::Topic, &n).then_some(n);
                ((told, id), Err(denied))
            }
            Ok(n) => {
                let id = shard.topic(&n, |t| t.id).unwrap_or(id);
                let r = on_shard0(shard, control::DeleteTopic { name: n.clone() }).await;
                ((Some(n), id), r)
            }
            Err((n, e)) => ((n, id), Err(e)),
        };
        let (error_code, error_message) = outcome(result);
        responses.push(DeletableTopicResult {
            name: name.0,
            topic_id: name.1 .0,
            error_code,
            error_message,
            ..Default::default()
        });
    }
    DeleteTopicsResponse { responses, ..Default::default() }
}

/// CreatePartitions: grow each topic to its new count. Standalone, with one node and
/// replication factor 1, explicit assignments must name this node once per new partition, as
/// Kafka checks them; clustered, the quorum's checks apply ([`control::metadata`]).
pub async fn create_partitions(cx: &mut Cx<'_>, req: CreatePartitionsRequest) -> CreatePartitionsResponse {
    let shard = cx.shard;
    let mut seen = HashSet::new();
    let duplicated: HashSet<String> =
        req.topics.iter().filter(|t| !seen.insert(t.name.clone())).map(|t| t.name.clone()).collect();
    let mut results = Vec::with_capacity(req.topics.len());
    for t in req.topics {
        let result = if duplicated.contains(&t.name) {
            Err(AdminError::new(code::INVALID_REQUEST, "Duplicate topic name."))
        } else if !cx.allowed(Operation::Alter, ResourceType::Topic, &t.name) {
            Err(AdminError::new(code::TOPIC_AUTHORIZATION_FAILED, "Authorization failed."))
        } else if shard.config().cluster.is_none() && check_assignments(shard, &t).is_err() {
            check_assignments(shard, &t)
        } else {
            let assignments = t.assignments.iter().flatten().map(|a| a.broker_ids.clone()).collect();
            let call = control::CreatePartitions {
                name: t.name.clone(),
                count: t.count as i64,
                assignments,
                validate_only: req.validate_only,
            };
            on_shard0(shard, call).await
        };
        let (error_code, error_message) = outcome(result);
        results.push(CreatePartitionsTopicResult { name: t.name, error_code, error_message, ..Default::default() });
    }
    CreatePartitionsResponse { results, ..Default::default() }
}

/// Kafka's checks of explicit assignments: one per new partition, each naming the replicas
/// (here: this node, once).
fn check_assignments(shard: &Shard, t: &CreatePartitionsTopic) -> AdminResult {
    let Some(assignments) = &t.assignments else { return Ok(()) };
    let Some(current) = shard.topic(&t.name, |i| i.partitions as i64) else {
        return Err(AdminError::new(code::UNKNOWN_TOPIC_OR_PARTITION, format!("topic {} does not exist", t.name)));
    };
    let adding = t.count as i64 - current;
    if adding > 0 && assignments.len() as i64 != adding {
        let message = format!(
            "Attempted to add {adding} additional partition(s), but only {} assignment(s) were specified.",
            assignments.len()
        );
        return Err(AdminError::new(code::INVALID_REPLICA_ASSIGNMENT, message));
    }
    let node = shard.config().node_id;
    for a in assignments {
        if a.broker_ids.len() != 1 {
            let message = format!(
                "Inconsistent replication factor between partitions: this topic has 1 replica, an assignment names {}",
                a.broker_ids.len()
            );
            return Err(AdminError::new(code::INVALID_REPLICA_ASSIGNMENT, message));
        }
        if a.broker_ids[0] != node {
            let message = format!("Unknown broker {} in the assignment (this node is {node})", a.broker_ids[0]);
            return Err(AdminError::new(code::INVALID_REPLICA_ASSIGNMENT, message));
        }
    }
    Ok(())
}
