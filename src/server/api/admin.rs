//! Partition administration: DeleteRecords (a durable log start, KIP-107) and DescribeLogDirs
//! (sizes and lag of the partitions each shard owns).

use crate::protocol::admin::*;
use crate::protocol::errors::{self as code, ErrorCode};
use crate::security::acl::{Operation, ResourceType};
use crate::server::api::Cx;
use crate::server::errors::{call_code, storage_code};
use crate::server::router::ShardCall;
use crate::server::shard::Shard;
use crate::storage::topics::validate_topic_name;
use crate::types::Offset;
use std::rc::Rc;

/// Move one partition's log start to `offset` (-1: the high watermark), on its owner.
#[derive(Debug)]
struct DeleteRecords {
    topic: String,
    partition: i32,
    /// The new log start, or Kafka's -1: the high watermark.
    offset: Offset,
}

impl ShardCall<Shard> for DeleteRecords {
    /// The new log start offset, or an error code.
    type Reply = Result<Offset, ErrorCode>;
    const NAME: &'static str = "delete-records";

    async fn run(self, shard: Rc<Shard>) -> Self::Reply {
        let p = shard.led_partition(&self.topic, self.partition)?;
        if !p.log().config().cleanup_delete {
            // Kafka: records of a topic whose cleanup.policy lacks `delete` cannot be deleted.
            return Err(code::POLICY_VIOLATION);
        }
        p.delete_records(self.offset).await.map_err(|e| {
            tracing::debug!(topic = self.topic, partition = self.partition, offset = self.offset.get(), error = %e, "DeleteRecords refused");
            storage_code(&e)
        })
    }
}

/// DeleteRecords: each partition's log start moves to the given offset (-1: the high
/// watermark), durably, before the answer; the answer's low watermark is the new log start.
/// Completes before the connection's next request.
pub async fn delete_records(cx: &mut Cx<'_>, req: DeleteRecordsRequest) -> DeleteRecordsResponse {
    let mut topics = Vec::with_capacity(req.topics.len());
    for t in req.topics {
        let mut partitions = Vec::with_capacity(t.partitions.len());
        let allowed = cx.allowed(Operation::Delete, ResourceType::Topic, &t.name);
        for p in t.partitions {
            let result = if !allowed {
                Err(code::TOPIC_AUTHORIZATION_FAILED)
            } else if crate::server::is_internal_topic(&t.name) {
                // Kafka: a compacted topic's records cannot be deleted this way.
                Err(code::POLICY_VIOLATION)
            } else if validate_topic_name(&t.name).is_err() || p.partition_index < 0 {
                Err(code::UNKNOWN_TOPIC_OR_PARTITION)
            } else {
                let owner = cx.shard.owner(&t.name, p.partition_index);
                let call =
                    DeleteRecords { topic: t.name.clone(), partition: p.partition_index, offset: Offset(p.offset) };
                match cx.shard.call(owner, call).await {
                    Ok(r) => r,
                    Err(e) => Err(call_code(&e, code::NOT_LEADER_OR_FOLLOWER)),
                }
            };
            let (low_watermark, error_code) = match result {
                Ok(start) => (start.get(), code::NONE),
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

/// The partitions one shard owns (all, or those named), with their sizes.
#[derive(Debug, Clone)]
struct LogDirs {
    only: Option<Vec<(String, Vec<i32>)>>,
}

/// One partition in DescribeLogDirs.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct PartitionDir {
    topic: String,
    partition: i32,
    size_bytes: u64,
    /// Log end minus high watermark: data appended but not yet durable.
    lag: i64,
}

impl ShardCall<Shard> for LogDirs {
    type Reply = Vec<PartitionDir>;
    const NAME: &'static str = "log-dirs";

    async fn run(self, shard: Rc<Shard>) -> Vec<PartitionDir> {
        let wanted = |t: &str, p: i32| {
            self.only.as_ref().is_none_or(|o| o.iter().any(|(name, ps)| name == t && ps.contains(&p)))
        };
        let mut out: Vec<PartitionDir> = shard
            .manager()
            .partitions()
            .into_iter()
            .filter(|(tp, _)| wanted(&tp.0, tp.1))
            .map(|((topic, partition), p)| {
                let log = p.log();
                let lag = log.log_end_offset() - log.durable_offset();
                PartitionDir { topic, partition, size_bytes: log.size_bytes(), lag }
            })
            .collect();
        out.sort();
        out
    }
}

/// DescribeLogDirs: one log directory (the data directory) with every partition asked for
/// (null: all), its bytes on disk and its lag, and the volume's total and usable bytes (v4).
/// A shard that does not answer leaves its partitions out and the directory marked with its
/// error.
pub async fn describe_log_dirs(cx: &mut Cx<'_>, req: DescribeLogDirsRequest) -> DescribeLogDirsResponse {
    cx.release_turn();
    if !cx.allowed_on_cluster(Operation::Describe) {
        return DescribeLogDirsResponse { error_code: code::CLUSTER_AUTHORIZATION_FAILED, ..Default::default() };
    }
    let only: Option<Vec<(String, Vec<i32>)>> =
        req.topics.map(|ts| ts.into_iter().map(|t| (t.topic, t.partitions)).collect());
    let mut all = Vec::new();
    let mut error_code = code::NONE;
    for r in cx.shard.call_each(LogDirs { only }).await {
        match r {
            Ok(mut ps) => all.append(&mut ps),
            Err(e) => error_code = call_code(&e, code::KAFKA_STORAGE_ERROR),
        }
    }
    all.sort();
    let mut topics: Vec<DescribeLogDirsTopic> = Vec::new();
    for d in all {
        if topics.last().is_none_or(|t| t.name != d.topic) {
            topics.push(DescribeLogDirsTopic { name: d.topic.clone(), ..Default::default() });
        }
        if let Some(t) = topics.last_mut() {
            t.partitions.push(DescribeLogDirsPartition {
                partition_index: d.partition,
                partition_size: d.size_bytes as i64,
                offset_lag: d.lag,
                ..Default::default()
            });
        }
    }
    let c = cx.shard.config();
    let dir = std::path::absolute(&c.data_dir).unwrap_or_else(|_| c.data_dir.clone());
    let (total_bytes, usable_bytes) = volume_bytes(&dir).unwrap_or((-1, -1));
    DescribeLogDirsResponse {
        results: vec![DescribeLogDirsResult {
            error_code,
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
