//! Handlers of the admin APIs in `protocol::admin`: CreatePartitions, DeleteRecords,
//! DescribeLogDirs, DescribeCluster and DescribeProducers. Each partition's work goes to the
//! shard that owns it; partition-count changes run on shard 0 like every topic change.

use crate::protocol::admin::*;
use crate::protocol::errors as code;
use crate::server::coordinator::OFFSETS_TOPIC;
use crate::server::shard::{owner, Shard, ShardOp, ShardReply};
use crate::storage::topics::validate_topic_name;
use std::collections::HashSet;
use std::rc::Rc;

/// The cluster id this node reports (Metadata v2+, DescribeCluster): one node, one cluster.
pub const CLUSTER_ID: &str = "tidemark";

/// CreatePartitions: grow each topic to its new count. With one node and replication factor
/// 1, explicit assignments must name this node once per new partition, as Kafka checks them.
pub async fn create_partitions(shard: &Rc<Shard>, req: CreatePartitionsRequest) -> CreatePartitionsResponse {
    let mut seen = HashSet::new();
    let duplicated: HashSet<String> =
        req.topics.iter().filter(|t| !seen.insert(t.name.clone())).map(|t| t.name.clone()).collect();
    let mut results = Vec::with_capacity(req.topics.len());
    for t in req.topics {
        let outcome = if duplicated.contains(&t.name) {
            Err((code::INVALID_REQUEST, "Duplicate topic name.".to_string()))
        } else {
            match check_assignments(shard, &t) {
                Err(e) => Err(e),
                Ok(()) => {
                    let op = ShardOp::CreatePartitions {
                        name: t.name.clone(),
                        count: t.count as i64,
                        validate_only: req.validate_only,
                    };
                    match shard.call(0, op).await {
                        ShardReply::Admin(r) => r,
                        _ => Err((code::UNKNOWN_SERVER_ERROR, "no reply".to_string())),
                    }
                }
            }
        };
        let (error_code, error_message) = match outcome {
            Ok(()) => (code::NONE, None),
            Err((c, m)) => (c, Some(m)),
        };
        results.push(CreatePartitionsTopicResult { name: t.name, error_code, error_message, ..Default::default() });
    }
    CreatePartitionsResponse { results, ..Default::default() }
}

/// Kafka's checks of explicit assignments: one per new partition, each naming the replicas
/// (here: this node, once).
fn check_assignments(shard: &Rc<Shard>, t: &CreatePartitionsTopic) -> Result<(), (i16, String)> {
    let Some(assignments) = &t.assignments else { return Ok(()) };
    let current = shard.topics.borrow().get(&t.name).map(|i| i.partitions as i64);
    let Some(current) = current else {
        return Err((code::UNKNOWN_TOPIC_OR_PARTITION, format!("topic {} does not exist", t.name)));
    };
    let adding = t.count as i64 - current;
    if adding > 0 && assignments.len() as i64 != adding {
        return Err((
            code::INVALID_REPLICA_ASSIGNMENT,
            format!(
                "Attempted to add {adding} additional partition(s), but only {} assignment(s) were specified.",
                assignments.len()
            ),
        ));
    }
    let node = shard.config.node_id;
    for a in assignments {
        if a.broker_ids.len() != 1 {
            return Err((
                code::INVALID_REPLICA_ASSIGNMENT,
                format!("Inconsistent replication factor between partitions: this topic has 1 replica, an assignment names {}", a.broker_ids.len()),
            ));
        }
        if a.broker_ids[0] != node {
            return Err((
                code::INVALID_REPLICA_ASSIGNMENT,
                format!("Unknown broker {} in the assignment (this node is {node})", a.broker_ids[0]),
            ));
        }
    }
    Ok(())
}

/// DeleteRecords: each partition's log start moves to the given offset (-1: the high
/// watermark), durably, before the answer; the answer's low watermark is the new log start.
pub async fn delete_records(shard: &Rc<Shard>, req: DeleteRecordsRequest) -> DeleteRecordsResponse {
    let mut topics = Vec::with_capacity(req.topics.len());
    for t in req.topics {
        let mut partitions = Vec::with_capacity(t.partitions.len());
        for p in t.partitions {
            let result = if t.name == OFFSETS_TOPIC {
                // Kafka: a compacted topic's records cannot be deleted this way.
                Err(code::POLICY_VIOLATION)
            } else if validate_topic_name(&t.name).is_err() || p.partition_index < 0 {
                Err(code::UNKNOWN_TOPIC_OR_PARTITION)
            } else {
                let target = owner(&t.name, p.partition_index, shard.shards);
                let op =
                    ShardOp::DeleteRecords { topic: t.name.clone(), partition: p.partition_index, offset: p.offset };
                match shard.call(target, op).await {
                    ShardReply::DeleteRecords(r) => r,
                    _ => Err(code::UNKNOWN_SERVER_ERROR),
                }
            };
            let (low_watermark, error_code) = match result {
                Ok(start) => (start, code::NONE),
                Err(c) => (-1, c),
            };
            partitions.push(DeleteRecordsPartitionResult {
                partition_index: p.partition_index,
                low_watermark,
                error_code,
                ..Default::default()
            });
        }
        topics.push(DeleteRecordsTopicResult { name: t.name, partitions, ..Default::default() });
    }
    DeleteRecordsResponse { topics, ..Default::default() }
}

/// DescribeLogDirs: one log directory (the data directory) with every partition asked for
/// (null: all), its bytes on disk and its lag (log end minus high watermark: data appended
/// but not yet durable), and the volume's total and usable bytes (v4).
pub async fn describe_log_dirs(shard: &Rc<Shard>, req: DescribeLogDirsRequest) -> DescribeLogDirsResponse {
    let only: Option<Vec<(String, Vec<i32>)>> =
        req.topics.map(|ts| ts.into_iter().map(|t| (t.topic, t.partitions)).collect());
    let mut all = Vec::new();
    for target in 0..shard.shards {
        if let ShardReply::LogDirs(mut ps) = shard.call(target, ShardOp::LogDirs { only: only.clone() }).await {
            all.append(&mut ps);
        }
    }
    all.sort();
    let mut topics: Vec<DescribeLogDirsTopic> = Vec::new();
    for (topic, partition, size, lag) in all {
        if topics.last().is_none_or(|t| t.name != topic) {
            topics.push(DescribeLogDirsTopic { name: topic, ..Default::default() });
        }
        topics.last_mut().expect("pushed").partitions.push(DescribeLogDirsPartition {
            partition_index: partition,
            partition_size: size as i64,
            offset_lag: lag,
            ..Default::default()
        });
    }
    let dir = std::path::absolute(&shard.config.data_dir).unwrap_or_else(|_| shard.config.data_dir.clone());
    let (total_bytes, usable_bytes) = volume_bytes(&dir).unwrap_or((-1, -1));
    DescribeLogDirsResponse {
        results: vec![DescribeLogDirsResult {
            log_dir: dir.display().to_string(),
            topics,
            total_bytes,
            usable_bytes,
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// (total, usable) bytes of the filesystem holding `dir` (statvfs; usable as an unprivileged
/// user would see it).
fn volume_bytes(dir: &std::path::Path) -> Option<(i64, i64)> {
    let st = rustix::fs::statvfs(dir).ok()?;
    let frag = st.f_frsize as i64;
    Some((st.f_blocks as i64 * frag, st.f_bavail as i64 * frag))
}

/// DescribeCluster: this node is the whole cluster (and its controller). Only the broker
/// endpoint type exists here: a request for controllers gets MISMATCHED_ENDPOINT_TYPE (v1+),
/// an unknown type UNSUPPORTED_ENDPOINT_TYPE (INVALID_REQUEST at v0), as Kafka answers.
pub fn describe_cluster(shard: &Rc<Shard>, version: i16, req: DescribeClusterRequest) -> DescribeClusterResponse {
    const MISMATCHED_ENDPOINT_TYPE: i16 = 114;
    const UNSUPPORTED_ENDPOINT_TYPE: i16 = 115;
    let error = match req.endpoint_type {
        1 => None,
        2 => Some((
            if version == 0 { code::INVALID_REQUEST } else { MISMATCHED_ENDPOINT_TYPE },
            "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER"
                .to_string(),
        )),
        t => Some((
            if version == 0 { code::INVALID_REQUEST } else { UNSUPPORTED_ENDPOINT_TYPE },
            format!("Unsupported endpoint type {t}"),
        )),
    };
    let node = shard.config.node_id;
    match error {
        Some((error_code, message)) => {
            DescribeClusterResponse { error_code, error_message: Some(message), ..Default::default() }
        }
        None => DescribeClusterResponse {
            cluster_id: CLUSTER_ID.to_string(),
            controller_id: node,
            brokers: vec![DescribeClusterBroker {
                broker_id: node,
                host: shard.config.advertised_host.clone(),
                port: shard.config.advertised_port,
                ..Default::default()
            }],
            ..Default::default()
        },
    }
}

/// DescribeProducers: the idempotent producers each partition knows (no transactions here:
/// coordinator epoch 0, no open transaction). LastTimestamp is the broker's time of the
/// producer's last append.
pub async fn describe_producers(shard: &Rc<Shard>, req: DescribeProducersRequest) -> DescribeProducersResponse {
    let mut topics = Vec::with_capacity(req.topics.len());
    for t in req.topics {
        let mut partitions = Vec::with_capacity(t.partition_indexes.len());
        for p in t.partition_indexes {
            let result = match validate_topic_name(&t.name) {
                Err(e) => Err((code::INVALID_TOPIC_EXCEPTION, Some(e.to_string()))),
                Ok(()) if p < 0 => Err((code::UNKNOWN_TOPIC_OR_PARTITION, None)),
                Ok(()) => {
                    let op = ShardOp::DescribeProducers { topic: t.name.clone(), partition: p };
                    match shard.call(owner(&t.name, p, shard.shards), op).await {
                        ShardReply::Producers(r) => r.map_err(|c| (c, None)),
                        _ => Err((code::UNKNOWN_SERVER_ERROR, None)),
                    }
                }
            };
            partitions.push(match result {
                Ok(active) => DescribeProducersPartition {
                    partition_index: p,
                    active_producers: active
                        .into_iter()
                        .map(|(producer_id, epoch, last_sequence, last_ms)| ProducerStateEntry {
                            producer_id,
                            producer_epoch: epoch as i32,
                            last_sequence,
                            last_timestamp: last_ms,
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                },
                Err((error_code, error_message)) => {
                    DescribeProducersPartition { partition_index: p, error_code, error_message, ..Default::default() }
                }
            });
        }
        topics.push(DescribeProducersTopicResponse { name: t.name, partitions, ..Default::default() });
    }
    DescribeProducersResponse { topics, ..Default::default() }
}
