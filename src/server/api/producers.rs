//! Producers: InitProducerId (an idempotent producer's id, from shard 0's blocks) and
//! DescribeProducers (what each partition's producer state holds, from its owner).

use crate::protocol::admin::*;
use crate::protocol::errors::{self as code, ErrorCode};
use crate::protocol::groups::{InitProducerIdRequest, InitProducerIdResponse};
use crate::security::acl::{Operation, ResourceType};
use crate::server::api::Cx;
use crate::server::control::AllocateProducerId;
use crate::server::errors::call_code;
use crate::server::router::ShardCall;
use crate::server::shard::Shard;
use crate::storage::producers::ActiveProducer;
use crate::storage::topics::validate_topic_name;
use std::rc::Rc;

pub async fn init_producer_id(cx: &mut Cx<'_>, i: InitProducerIdRequest) -> InitProducerIdResponse {
    if let Some(id) = i.transactional_id.clone() {
        return super::transactions::init_transactional(cx, id, &i).await;
    }
    cx.release_turn();
    // An idempotent producer gets a new id, epoch 0 (Kafka does the same for one without a
    // transactional id, also when it asks to bump an epoch).
    // KIP-679: an idempotent producer needs IDEMPOTENT_WRITE on the cluster or WRITE on some
    // topic.
    let may = || {
        cx.allowed_on_cluster(Operation::IdempotentWrite) || cx.allowed_on_any(Operation::Write, ResourceType::Topic)
    };
    let result = if !may() {
        Err(code::CLUSTER_AUTHORIZATION_FAILED)
    } else {
        match cx.shard.call(0, AllocateProducerId).await {
            Ok(r) => r,
            Err(e) => Err(call_code(&e, code::COORDINATOR_NOT_AVAILABLE)),
        }
    };
    let (error_code, producer_id, producer_epoch) = match result {
        Ok(id) => (code::NONE, id, 0),
        Err(c) => (c, -1, -1),
    };
    InitProducerIdResponse { error_code, producer_id, producer_epoch, ..Default::default() }
}

/// The producers one partition knows, on the shard that owns it.
#[derive(Debug)]
struct Producers {
    topic: String,
    partition: i32,
}

impl ShardCall<Shard> for Producers {
    type Reply = Result<Vec<ActiveProducer>, ErrorCode>;
    const NAME: &'static str = "describe-producers";

    async fn run(self, shard: Rc<Shard>) -> Self::Reply {
        let p = shard.led_partition(&self.topic, self.partition)?;
        let active = p.log().producers().active();
        Ok(active)
    }
}

/// DescribeProducers: the producers each partition knows, with the coordinator epoch of
/// their last marker and the first offset of their open transaction. LastTimestamp is the broker's time of the
/// producer's last append.
pub async fn describe_producers(cx: &mut Cx<'_>, req: DescribeProducersRequest) -> DescribeProducersResponse {
    cx.release_turn();
    let mut topics = Vec::with_capacity(req.topics.len());
    for t in req.topics {
        let mut partitions = Vec::with_capacity(t.partition_indexes.len());
        let allowed = cx.allowed(Operation::Read, ResourceType::Topic, &t.name);
        for p in t.partition_indexes {
            let result = match validate_topic_name(&t.name) {
                Err(e) => Err((code::INVALID_TOPIC_EXCEPTION, Some(e.to_string()))),
                Ok(()) if !allowed => Err((code::TOPIC_AUTHORIZATION_FAILED, None)),
                Ok(()) if p < 0 => Err((code::UNKNOWN_TOPIC_OR_PARTITION, None)),
                Ok(()) => {
                    let call = Producers { topic: t.name.clone(), partition: p };
                    match cx.shard.call(cx.shard.owner(&t.name, p), call).await {
                        Ok(r) => r.map_err(|c| (c, None)),
                        Err(e) => Err((call_code(&e, code::NOT_LEADER_OR_FOLLOWER), Some(e.to_string()))),
                    }
                }
            };
            partitions.push(match result {
                Ok(active) => DescribeProducersPartition {
                    partition_index: p,
                    active_producers: active
                        .into_iter()
                        .map(|a| ProducerStateEntry {
                            producer_id: a.producer_id,
                            producer_epoch: a.epoch as i32,
                            last_sequence: a.last_sequence,
                            last_timestamp: a.last_append_ms,
                            coordinator_epoch: a.coordinator_epoch,
                            current_txn_start_offset: a.txn_start_offset,
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
