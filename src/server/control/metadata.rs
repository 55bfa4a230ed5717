//! A clustered node's topic changes, made through the metadata quorum: CreateTopics,
//! DeleteTopics, CreatePartitions, AlterConfigs, and the per-partition commands (ElectLeaders,
//! reassignments, a leader's ISR change). Each is checked on shard 0 against the image, placed
//! there ([`crate::cluster::state::MetaImage::place`]), and committed as one [`MetaCommand`]; it is answered once this
//! node has published the entry ([`super::publisher`]), so the client's next request here
//! sees it.

use super::commit::{commit, control_of, controller, not_ready, until_published, AdminResult};
use crate::cluster::member::Member;
use crate::cluster::types::{MetaCommand, MetaResponse, Refusal, TopicState};
use crate::io::DmaDisk;
use crate::protocol::errors::{self as code, ErrorCode};
use crate::server::errors::{refusal_code, AdminError};
use crate::server::router::ShardCall;
use crate::server::shard::Shard;
use crate::types::Uuid;
use std::collections::BTreeMap;
use std::rc::Rc;

fn placement_error((reason, message): (Refusal, String)) -> AdminError {
    AdminError::new(refusal_code(reason), message)
}

/// CreateTopics on a clustered node: checked against the image (name, partition count,
/// settings, replication factor up to the unfenced brokers, or explicit assignments), placed,
/// committed. `replication_factor` -1 is `default.replication.factor`.
pub async fn create_topic(
    shard: &Shard,
    name: &str,
    partitions: i64,
    replication_factor: i16,
    assignments: &[Vec<i32>],
    configs: &[(String, String)],
    validate_only: bool,
) -> AdminResult {
    let controller = controller(shard).ok_or_else(not_ready)?;
    crate::storage::topics::validate_topic_name(name).map_err(|e| AdminError::from(&e))?;
    unfenced_here(shard, &controller).await;
    let image = controller.image();
    if image.topics.contains_key(name) {
        return Err(AdminError::new(code::TOPIC_ALREADY_EXISTS, format!("Topic '{name}' already exists.")));
    }
    if assignments.is_empty() && !(1..=100_000).contains(&partitions) {
        return Err(AdminError::new(code::INVALID_PARTITIONS, format!("invalid partition count {partitions}")));
    }
    {
        let control = control_of(shard)?;
        let mut lease = control.lease().await;
        let pairs = configs.iter().map(|(k, v)| (k.as_str(), v.as_str()));
        lease
            .store()
            .defaults()
            .with_overrides(pairs)
            .map_err(|e| AdminError::new(code::INVALID_CONFIG, e.to_string()))?;
    }
    let placement = if assignments.is_empty() {
        let factor = match replication_factor {
            -1 => shard.config().cluster.as_ref().map_or(1, |c| c.default_replication_factor),
            f => f,
        };
        image.place(partitions as u32, factor)
    } else {
        image.assign(assignments)
    }
    .map_err(placement_error)?;
    if validate_only {
        return Ok(());
    }
    let id = Uuid::random().map_err(|e| AdminError::new(code::UNKNOWN_SERVER_ERROR, e.to_string()))?;
    let topic = TopicState { id: id.to_string(), partitions: placement, configs: configs.iter().cloned().collect() };
    commit(shard, MetaCommand::CreateTopic { name: name.to_string(), topic }).await?;
    tracing::info!(topic = name, partitions, "topic created through the metadata quorum");
    Ok(())
}

/// Wait (within the commit limit) until this node's broker is registered and unfenced: a
/// node just started places nothing before it counts itself among the brokers (Kafka's broker
/// serves only once unfenced).
async fn unfenced_here(shard: &Shard, controller: &Member<DmaDisk>) {
    let me = shard.config().node_id;
    until_published(shard, |_| controller.state().broker(me).is_some_and(|b| !b.fenced)).await;
}

/// DeleteTopics on a clustered node.
pub async fn delete_topic(shard: &Shard, name: &str) -> AdminResult {
    commit(shard, MetaCommand::DeleteTopic { name: name.to_string() }).await?;
    tracing::info!(topic = name, "topic deleted through the metadata quorum");
    Ok(())
}

/// CreatePartitions on a clustered node: the new partitions keep the topic's replication
/// factor (or follow the explicit assignments).
pub async fn create_partitions(
    shard: &Shard,
    name: &str,
    count: i64,
    assignments: &[Vec<i32>],
    validate_only: bool,
) -> AdminResult {
    let controller = controller(shard).ok_or_else(not_ready)?;
    let image = controller.image();
    let topic = image
        .topics
        .get(name)
        .ok_or_else(|| AdminError::new(code::UNKNOWN_TOPIC_OR_PARTITION, format!("Topic '{name}' does not exist.")))?;
    let current = topic.partitions.len() as i64;
    if count <= current {
        let message = format!("Topic currently has {current} partitions, which is higher than the requested {count}.");
        return Err(AdminError::new(code::INVALID_PARTITIONS, message));
    }
    if count > 100_000 {
        return Err(AdminError::new(code::INVALID_PARTITIONS, format!("invalid partition count {count}")));
    }
    // The topic's factor: its first partition's target replicas (a reassignment may be under
    // way there).
    let factor = topic.partitions.first().map_or(1, |p| p.target().len()) as i16;
    let placement = if assignments.is_empty() {
        image.place((count - current) as u32, factor)
    } else if assignments.len() as i64 != count - current {
        Err((
            Refusal::InvalidReplicaAssignment,
            format!(
                "Attempted to add {} additional partition(s), but only {} assignment(s) were specified.",
                count - current,
                assignments.len()
            ),
        ))
    } else if assignments.iter().any(|a| a.len() as i16 != factor) {
        Err((
            Refusal::InvalidReplicaAssignment,
            format!(
                "Inconsistent replication factor between partitions: the topic has {factor} replicas per partition."
            ),
        ))
    } else {
        image.assign(assignments)
    }
    .map_err(placement_error)?;
    if validate_only {
        return Ok(());
    }
    let from = current as u32;
    commit(shard, MetaCommand::CreatePartitions { name: name.to_string(), from, partitions: placement }).await?;
    tracing::info!(topic = name, partitions = count, "partitions added through the metadata quorum");
    Ok(())
}

/// AlterConfigs on a clustered node: the topic's whole new set of settings (checked by the
/// caller), made from the set `based_on`; `false` if the topic's settings changed first (the
/// caller makes its change again from the set now in force).
pub async fn alter_topic(
    shard: &Shard,
    name: &str,
    configs: BTreeMap<String, String>,
    based_on: BTreeMap<String, String>,
) -> Result<bool, AdminError> {
    let command = MetaCommand::AlterTopicConfigs { name: name.to_string(), configs, based_on };
    match commit(shard, command).await? {
        MetaResponse::Conflict { .. } => {
            // Wait for this node to publish the newer settings before the caller tries again.
            let applied = controller(shard).and_then(|c| c.state().last_applied()).map_or(0, |l| l.index);
            until_published(shard, |i| *i >= applied).await;
            Ok(false)
        }
        _ => {
            tracing::info!(topic = name, "topic settings changed through the metadata quorum");
            Ok(true)
        }
    }
}

/// To shard 0 of a clustered node: a per-partition command (ElectLeaders, Reassign); each
/// partition's Kafka error code and message, in the order asked.
#[derive(Debug)]
pub struct PartitionCommand(pub MetaCommand);

impl ShardCall<Shard> for PartitionCommand {
    type Reply = Result<Vec<(ErrorCode, Option<String>)>, AdminError>;
    const NAME: &'static str = "partition-command";

    async fn run(self, shard: Rc<Shard>) -> Self::Reply {
        match commit(&shard, self.0).await? {
            MetaResponse::Partitions(results) => Ok(results
                .into_iter()
                .map(|r| r.map_or_else(|(reason, m)| (refusal_code(reason), m), |()| (code::NONE, None)))
                .collect()),
            other => Err(AdminError::new(code::UNKNOWN_SERVER_ERROR, format!("unexpected answer {other:?}"))),
        }
    }
}

/// To shard 0 of a clustered node: a change answered by success or refusal alone (a partition
/// leader's ISR change, [`MetaCommand::AlterPartition`]; a broker unregistered), committed and
/// published here before the answer.
#[derive(Debug)]
pub struct Commit(pub MetaCommand);

impl ShardCall<Shard> for Commit {
    type Reply = Result<(), AdminError>;
    const NAME: &'static str = "commit";

    async fn run(self, shard: Rc<Shard>) -> Self::Reply {
        commit(&shard, self.0).await.map(|_| ())
    }
}
