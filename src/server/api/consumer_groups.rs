//! The consumer group protocol (KIP-848): ConsumerGroupHeartbeat and ConsumerGroupDescribe,
//! each sent to the shard that coordinates its group (as the classic group APIs are), where
//! [`crate::coordinator::group`] answers them from the group's state and the topics as that
//! shard knows them. Both need the cluster's `group.version` at 1 or above: below it they are
//! UNSUPPORTED_VERSION, as Kafka 4 answers when the protocol is not enabled.

use crate::protocol::errors::ErrorCode;
use crate::protocol::groups::*;
use crate::security::acl::{Operation, ResourceType};
use crate::server::api::route::to_coordinator;
use crate::server::api::Cx;
use crate::server::router::ShardCall;
use crate::server::shard::Shard;
use std::rc::Rc;

#[derive(Debug)]
struct Beat {
    version: i16,
    req: ConsumerGroupHeartbeatRequest,
    client_id: String,
    client_host: String,
}

impl ShardCall<Shard> for Beat {
    type Reply = ConsumerGroupHeartbeatResponse;
    const NAME: &'static str = "consumer-group-heartbeat";
    async fn run(self, shard: Rc<Shard>) -> ConsumerGroupHeartbeatResponse {
        shard.coordinator().consumer_heartbeat(self.version, self.req, self.client_id, self.client_host).await
    }
}

/// Whether the consumer group protocol is enabled: the cluster's `group.version` is 1 or more.
fn enabled(cx: &Cx<'_>) -> bool {
    cx.shard.features().level(crate::features::GROUP_VERSION) >= 1
}

/// ConsumerGroupHeartbeat: join, heartbeat, reconcile or leave.
pub async fn heartbeat(cx: &mut Cx<'_>, req: ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatResponse {
    if !enabled(cx) {
        cx.release_turn();
        let error_code = crate::protocol::errors::UNSUPPORTED_VERSION;
        return ConsumerGroupHeartbeatResponse { error_code, ..Default::default() };
    }
    let group = req.group_id.clone();
    if !cx.allowed(Operation::Read, ResourceType::Group, &group) {
        cx.release_turn();
        let error_code = crate::protocol::errors::GROUP_AUTHORIZATION_FAILED;
        return ConsumerGroupHeartbeatResponse { error_code, ..Default::default() };
    }
    // Kafka 4 (KAFKA-18813): a member may subscribe only to topics it may describe.
    let topics = req.subscribed_topic_names.as_deref().unwrap_or_default();
    if topics.iter().any(|t| !cx.allowed(Operation::Describe, ResourceType::Topic, t)) {
        cx.release_turn();
        let error_code = crate::protocol::errors::TOPIC_AUTHORIZATION_FAILED;
        return ConsumerGroupHeartbeatResponse { error_code, ..Default::default() };
    }
    let client_id = cx.header.client_id.clone().unwrap_or_default();
    let client_host = format!("/{}", cx.peer.rsplit_once(':').map_or(cx.peer, |(h, _)| h));
    let call = Beat { version: cx.version(), req, client_id, client_host };
    to_coordinator(cx, &group, call)
        .await
        .unwrap_or_else(|error_code: ErrorCode| ConsumerGroupHeartbeatResponse { error_code, ..Default::default() })
}

#[derive(Debug)]
struct Describe(String);

impl ShardCall<Shard> for Describe {
    type Reply = ConsumerGroupDescribeGroup;
    const NAME: &'static str = "consumer-group-describe";
    async fn run(self, shard: Rc<Shard>) -> ConsumerGroupDescribeGroup {
        shard.coordinator().consumer_describe(&self.0)
    }
}

/// ConsumerGroupDescribe: each group from its coordinating shard; as in Kafka 4 (KAFKA-18813),
/// a group naming a topic the client may not describe is TOPIC_AUTHORIZATION_FAILED and
/// nothing more; the authorized operations (KIP-430) when asked for.
pub async fn describe(cx: &mut Cx<'_>, req: ConsumerGroupDescribeRequest) -> ConsumerGroupDescribeResponse {
    if !enabled(cx) {
        cx.release_turn();
        let error_code = crate::protocol::errors::UNSUPPORTED_VERSION;
        let groups = req
            .group_ids
            .into_iter()
            .map(|group_id| ConsumerGroupDescribeGroup { error_code, group_id, ..Default::default() })
            .collect();
        return ConsumerGroupDescribeResponse { groups, ..Default::default() };
    }
    let mut groups = Vec::with_capacity(req.group_ids.len());
    for id in req.group_ids {
        if !cx.allowed(Operation::Describe, ResourceType::Group, &id) {
            let error_code = crate::protocol::errors::GROUP_AUTHORIZATION_FAILED;
            groups.push(ConsumerGroupDescribeGroup { error_code, group_id: id, ..Default::default() });
            continue;
        }
        let described = to_coordinator(cx, &id, Describe(id.clone())).await;
        let mut g = described.unwrap_or_else(|error_code| ConsumerGroupDescribeGroup {
            error_code,
            group_id: id.clone(),
            ..Default::default()
        });
        let named = g.members.iter().flat_map(|m| {
            let assigned = [&m.assignment, &m.target_assignment].into_iter().flat_map(|a| &a.topic_partitions);
            m.subscribed_topic_names.iter().chain(assigned.map(|t| &t.topic_name))
        });
        if named.into_iter().any(|t| !cx.allowed(Operation::Describe, ResourceType::Topic, t)) {
            g = ConsumerGroupDescribeGroup {
                error_code: crate::protocol::errors::TOPIC_AUTHORIZATION_FAILED,
                error_message: Some(
                    "The group has described topic(s) that the client is not authorized to describe.".into(),
                ),
                group_id: id,
                ..Default::default()
            };
        } else if req.include_authorized_operations && g.error_code == crate::protocol::errors::NONE {
            g.authorized_operations = cx.authorized_operations(ResourceType::Group, &g.group_id);
        }
        groups.push(g);
    }
    ConsumerGroupDescribeResponse { groups, ..Default::default() }
}
