//! ListOffsets: each partition's lookup (by time, or `-1`/`-2`/`-3`, SPEC T6) runs on the
//! shard that owns it ([`Lookup`]). Kafka's tiered-storage targets answer as Kafka does with
//! no remote storage: `-4` (earliest local, v8+) is the log start, `-5` (latest tiered, v9+)
//! is none. A special target older than the request's version is UNSUPPORTED_VERSION.

use crate::protocol::errors::{self as code, ErrorCode};
use crate::protocol::messages::*;
use crate::security::acl::{Operation, ResourceType};
use crate::server::api::Cx;
use crate::server::errors::{call_code, storage_code};
use crate::server::router::ShardCall;
use crate::server::shard::Shard;
use crate::storage::ReadUpTo;
use crate::types::{Offset, TimestampMs};
use std::rc::Rc;

/// Look a partition up by time on the shard that owns it.
#[derive(Debug)]
pub struct Lookup {
    pub topic: String,
    pub partition: i32,
    /// A time, or one of Kafka's `-1` (latest), `-2` (earliest), `-3` (largest timestamp).
    pub timestamp: TimestampMs,
    /// READ_COMMITTED (isolation_level 1): the latest is the last stable offset, and no
    /// record at or past it is found by time (the earliest stays the log start).
    pub committed: bool,
}

/// The record a lookup found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Found {
    pub offset: Offset,
    pub timestamp: TimestampMs,
}

impl ShardCall<Shard> for Lookup {
    /// `None`: no record matches (Kafka's -1, -1); or an error code.
    type Reply = Result<Option<Found>, ErrorCode>;
    const NAME: &'static str = "lookup";

    async fn run(self, shard: Rc<Shard>) -> Self::Reply {
        let p = shard.led_partition(&self.topic, self.partition)?;
        if shard.replication().catching_up(&self.topic, self.partition, p.high_watermark()) {
            // KIP-207: a new leader's high watermark below its epoch's start would tell a reader
            // a latest offset older than the previous leader did.
            return Err(code::OFFSET_NOT_AVAILABLE);
        }
        let found = p.offset_for_time(self.timestamp, ReadUpTo::HighWatermark).await.map_err(|e| storage_code(&e))?;
        let found = found.map(|(offset, timestamp)| Found { offset, timestamp });
        if !self.committed {
            return Ok(found);
        }
        let lso = Offset(p.log().last_stable_offset());
        match self.timestamp.get() {
            -1 => Ok(found.map(|f| Found { offset: lso, ..f })),
            // The earliest offsets are the log start whatever the isolation (Kafka's).
            -2 | -4 => Ok(found),
            _ => Ok(found.filter(|f| f.offset < lso)),
        }
    }
}

pub async fn handle(cx: &mut Cx<'_>, l: ListOffsetsRequest) -> ListOffsetsResponse {
    cx.release_turn();
    let version = cx.version();
    let mut topics = Vec::with_capacity(l.topics.len());
    for t in l.topics {
        let mut partitions = Vec::with_capacity(t.partitions.len());
        let allowed = cx.allowed(Operation::Describe, ResourceType::Topic, &t.name);
        for p in t.partitions {
            let result = match special_target(p.timestamp, version) {
                _ if !allowed => Err(code::TOPIC_AUTHORIZATION_FAILED),
                Err(c) => Err(c),
                // KIP-1005, no tiered storage: nothing is tiered.
                Ok(Some(LATEST_TIERED)) => Ok(None),
                Ok(target) => {
                    let timestamp = TimestampMs(target.unwrap_or(p.timestamp));
                    let owner = cx.shard.owner(&t.name, p.partition_index);
                    let committed = version >= 2 && l.isolation_level == 1;
                    let call = Lookup { topic: t.name.clone(), partition: p.partition_index, timestamp, committed };
                    match cx.shard.call(owner, call).await {
                        Ok(r) => r,
                        Err(e) => Err(call_code(&e, code::NOT_LEADER_OR_FOLLOWER)),
                    }
                }
            };
            let (error_code, found) = match result {
                Ok(found) => (code::NONE, found),
                Err(c) => (c, None),
            };
            let Found { offset, timestamp } =
                found.unwrap_or(Found { offset: Offset::NONE, timestamp: TimestampMs::NONE });
            partitions.push(ListOffsetsPartitionResponse {
                partition_index: p.partition_index,
                error_code,
                old_style_offsets: if version == 0 && found.is_some() { vec![offset.get()] } else { Vec::new() },
                timestamp: timestamp.get(),
                offset: offset.get(),
                // The partition's leader epoch now (Kafka answers the epoch of the batch found;
                // the two differ only for a record written under an older leadership).
                leader_epoch: match found {
                    Some(_) => cx.shard.leadership(&t.name, p.partition_index).map_or(0, |l| l.leader_epoch.max(0)),
                    None => -1,
                },
                ..Default::default()
            });
        }
        topics.push(ListOffsetsTopicResponse { name: t.name, partitions, ..Default::default() });
    }
    ListOffsetsResponse { topics, ..Default::default() }
}

/// ListOffsets' `-5`: the latest offset in tiered storage (KIP-1005).
const LATEST_TIERED: i64 = -5;

/// A target below zero names an offset rather than a time, each from the version Kafka gave
/// it: `-1` latest and `-2` earliest (all), `-3` largest timestamp (v7, KIP-734), `-4` earliest
/// local (v8, KIP-405: the log start here, as nothing is remote) and `-5` latest tiered (v9,
/// KIP-1005). The target to look up instead (`None`: the time as given), or
/// UNSUPPORTED_VERSION.
fn special_target(timestamp: i64, version: i16) -> Result<Option<i64>, ErrorCode> {
    let (since, target) = match timestamp {
        0.. => return Ok(None),
        -1 | -2 => (0, timestamp),
        -3 => (7, -3),
        -4 => (8, -2),
        LATEST_TIERED => (9, LATEST_TIERED),
        _ => return Err(code::UNSUPPORTED_VERSION),
    };
    if version < since {
        return Err(code::UNSUPPORTED_VERSION);
    }
    Ok(Some(target))
}

/// Where a leader epoch ends in one partition, on the shard that owns it (OffsetForLeaderEpoch).
#[derive(Debug)]
pub struct EpochEnd {
    pub topic: String,
    pub partition: i32,
    /// The reader's leader epoch (-1: none): an older one is FENCED_LEADER_EPOCH, a newer one
    /// UNKNOWN_LEADER_EPOCH.
    pub current_leader_epoch: i32,
    pub leader_epoch: i32,
}

impl ShardCall<Shard> for EpochEnd {
    /// (the largest epoch at or below the one asked that this log has, where it ends).
    type Reply = Result<(i32, i64), ErrorCode>;
    const NAME: &'static str = "epoch-end";

    async fn run(self, shard: Rc<Shard>) -> Self::Reply {
        let p = shard.led_partition(&self.topic, self.partition)?;
        let current = shard.leadership(&self.topic, self.partition).map_or(0, |l| l.leader_epoch);
        if self.current_leader_epoch >= 0 && self.current_leader_epoch < current {
            return Err(code::FENCED_LEADER_EPOCH);
        }
        if self.current_leader_epoch > current {
            return Err(code::UNKNOWN_LEADER_EPOCH);
        }
        if p.latest_epoch().is_none() {
            // No epoch stamped (a standalone node: one leadership, epoch 0, the whole log).
            return Ok(if self.leader_epoch == current { (current, p.log_end().get()) } else { (-1, -1) });
        }
        let (epoch, end) = p.end_offset_for_epoch(self.leader_epoch);
        Ok((epoch, end.get()))
    }
}

/// OffsetForLeaderEpoch (KIP-101, KIP-320): for each partition, where the asked leader epoch
/// ends in its leader's log. A follower (a replica id) needs CLUSTER_ACTION, a consumer
/// DESCRIBE on the topic.
pub async fn offset_for_leader_epoch(cx: &mut Cx<'_>, r: OffsetForLeaderEpochRequest) -> OffsetForLeaderEpochResponse {
    cx.release_turn();
    let replica = cx.version() >= 3 && r.replica_id >= 0;
    let mut topics = Vec::with_capacity(r.topics.len());
    for t in r.topics {
        let allowed = if replica {
            cx.allowed_on_cluster(Operation::ClusterAction)
        } else {
            cx.allowed(Operation::Describe, ResourceType::Topic, &t.topic)
        };
        let denied = if replica { code::CLUSTER_AUTHORIZATION_FAILED } else { code::TOPIC_AUTHORIZATION_FAILED };
        let mut partitions = Vec::with_capacity(t.partitions.len());
        for p in t.partitions {
            let result = if !allowed {
                Err(denied)
            } else if cx.shard.topic(&t.topic, |i| p.partition >= 0 && (p.partition as u32) < i.partitions)
                != Some(true)
            {
                Err(code::UNKNOWN_TOPIC_OR_PARTITION)
            } else {
                let owner = cx.shard.owner(&t.topic, p.partition);
                let call = EpochEnd {
                    topic: t.topic.clone(),
                    partition: p.partition,
                    current_leader_epoch: p.current_leader_epoch,
                    leader_epoch: p.leader_epoch,
                };
                cx.shard.call(owner, call).await.unwrap_or_else(|e| Err(call_code(&e, code::NOT_LEADER_OR_FOLLOWER)))
            };
            let (error_code, (leader_epoch, end_offset)) = match result {
                Ok(found) => (code::NONE, found),
                Err(c) => (c, (-1, -1)),
            };
            partitions.push(EpochEndOffsetResult {
                error_code,
                partition: p.partition,
                leader_epoch,
                end_offset,
                ..Default::default()
            });
        }
        topics.push(OffsetForLeaderTopicResult { topic: t.topic, partitions, ..Default::default() });
    }
    OffsetForLeaderEpochResponse { topics, ..Default::default() }
}
