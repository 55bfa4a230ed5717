//! The consumer-group APIs (the classic protocol): each request goes to the shard that
//! coordinates its group (the owner of the group's `__consumer_offsets` partition) as a typed
//! call, issued while the request holds its connection's turn, so one connection's group
//! operations keep their order. A call without a reply, or a group whose offsets topic does
//! not exist yet, is COORDINATOR_NOT_AVAILABLE (retriable): clients find the coordinator
//! again.

use crate::coordinator::group::commit_response;
use crate::protocol::errors::{self as code, ErrorCode};
use crate::protocol::groups::*;
use crate::security::acl::{Operation, ResourceType};
use crate::server::api::route::to_coordinator;
use crate::server::api::Cx;
use crate::server::control::ensure_offsets_topic;
use crate::server::errors::call_code;
use crate::server::router::ShardCall;
use crate::server::shard::Shard;
use std::rc::Rc;
use std::time::Duration;

/// The deadline of a membership call: a JoinGroup or SyncGroup waits for the rebalance, up to
/// the group's rebalance timeout (Kafka's own bound on it).
fn membership_deadline(rebalance_timeout_ms: i32, shard: &Shard) -> Option<Duration> {
    let bound = shard.config().coordinator.limits.max_session_timeout_ms.max(rebalance_timeout_ms).max(0) as u64;
    Some(Duration::from_millis(bound) + Duration::from_secs(10))
}

/// JoinGroup, with the client id and address (for DescribeGroups).
#[derive(Debug)]
struct Join {
    version: i16,
    req: JoinGroupRequest,
    client_id: String,
    client_host: String,
    deadline: Option<Duration>,
}

impl ShardCall<Shard> for Join {
    type Reply = JoinGroupResponse;
    const NAME: &'static str = "join-group";
    fn deadline(&self) -> Option<Duration> {
        self.deadline
    }
    async fn run(self, shard: Rc<Shard>) -> JoinGroupResponse {
        shard.coordinator().join(self.version, self.req, self.client_id, self.client_host).await
    }
}

/// May the client do `op` on the group?
pub(super) fn group_allowed(cx: &Cx<'_>, op: Operation, group: &str) -> bool {
    cx.allowed(op, ResourceType::Group, group)
}

pub async fn join(cx: &mut Cx<'_>, j: JoinGroupRequest) -> JoinGroupResponse {
    let group = j.group_id.clone();
    let member_id = j.member_id.clone();
    if !group_allowed(cx, Operation::Read, &group) {
        cx.release_turn();
        return JoinGroupResponse { error_code: code::GROUP_AUTHORIZATION_FAILED, member_id, ..Default::default() };
    }
    let client_id = cx.header.client_id.clone().unwrap_or_default();
    // Kafka's form of the client host.
    let client_host = format!("/{}", cx.peer.rsplit_once(':').map_or(cx.peer, |(h, _)| h));
    let deadline = membership_deadline(j.rebalance_timeout_ms, cx.shard);
    let call = Join { version: cx.version(), req: j, client_id, client_host, deadline };
    to_coordinator(cx, &group, call).await.unwrap_or_else(|error_code| JoinGroupResponse {
        error_code,
        member_id,
        ..Default::default()
    })
}

#[derive(Debug)]
struct Sync(SyncGroupRequest, Option<Duration>);

impl ShardCall<Shard> for Sync {
    type Reply = SyncGroupResponse;
    const NAME: &'static str = "sync-group";
    fn deadline(&self) -> Option<Duration> {
        self.1
    }
    async fn run(self, shard: Rc<Shard>) -> SyncGroupResponse {
        shard.coordinator().sync(self.0).await
    }
}

pub async fn sync(cx: &mut Cx<'_>, s: SyncGroupRequest) -> SyncGroupResponse {
    let group = s.group_id.clone();
    if !group_allowed(cx, Operation::Read, &group) {
        cx.release_turn();
        return SyncGroupResponse { error_code: code::GROUP_AUTHORIZATION_FAILED, ..Default::default() };
    }
    let deadline = membership_deadline(0, cx.shard);
    to_coordinator(cx, &group, Sync(s, deadline))
        .await
        .unwrap_or_else(|error_code| SyncGroupResponse { error_code, ..Default::default() })
}

#[derive(Debug)]
struct Heartbeat(HeartbeatRequest);

impl ShardCall<Shard> for Heartbeat {
    type Reply = ErrorCode;
    const NAME: &'static str = "heartbeat";
    async fn run(self, shard: Rc<Shard>) -> ErrorCode {
        shard.coordinator().heartbeat(self.0)
    }
}

pub async fn heartbeat(cx: &mut Cx<'_>, h: HeartbeatRequest) -> HeartbeatResponse {
    let group = h.group_id.clone();
    if !group_allowed(cx, Operation::Read, &group) {
        cx.release_turn();
        return HeartbeatResponse { error_code: code::GROUP_AUTHORIZATION_FAILED, ..Default::default() };
    }
    let error_code = to_coordinator(cx, &group, Heartbeat(h)).await.unwrap_or_else(|e| e);
    HeartbeatResponse { error_code, ..Default::default() }
}

#[derive(Debug)]
struct Leave(i16, LeaveGroupRequest);

impl ShardCall<Shard> for Leave {
    type Reply = LeaveGroupResponse;
    const NAME: &'static str = "leave-group";
    async fn run(self, shard: Rc<Shard>) -> LeaveGroupResponse {
        shard.coordinator().leave(self.0, self.1).await
    }
}

pub async fn leave(cx: &mut Cx<'_>, l: LeaveGroupRequest) -> LeaveGroupResponse {
    let group = l.group_id.clone();
    if !group_allowed(cx, Operation::Read, &group) {
        cx.release_turn();
        return LeaveGroupResponse { error_code: code::GROUP_AUTHORIZATION_FAILED, ..Default::default() };
    }
    let call = Leave(cx.version(), l);
    to_coordinator(cx, &group, call)
        .await
        .unwrap_or_else(|error_code| LeaveGroupResponse { error_code, ..Default::default() })
}

#[derive(Debug)]
struct Commit(i16, OffsetCommitRequest);

impl ShardCall<Shard> for Commit {
    type Reply = OffsetCommitResponse;
    const NAME: &'static str = "offset-commit";
    async fn run(self, shard: Rc<Shard>) -> OffsetCommitResponse {
        let partitions_of = |topic: &str| shard.topic(topic, |t| t.partitions);
        shard.coordinator().commit(self.0, self.1, partitions_of).await
    }
}

pub async fn offset_commit(cx: &mut Cx<'_>, mut c: OffsetCommitRequest) -> OffsetCommitResponse {
    let group = c.group_id.clone();
    // The partitions asked for, to answer each with the error when the coordinator does not.
    let asked: Vec<(String, Vec<i32>)> =
        c.topics.iter().map(|t| (t.name.clone(), t.partitions.iter().map(|p| p.partition_index).collect())).collect();
    let every = |asked: Vec<(String, Vec<i32>)>, e: ErrorCode| {
        commit_response(asked.into_iter().map(|(name, ps)| (name, ps.into_iter().map(|p| (p, e)).collect())).collect())
    };
    // READ on the group, then on each topic (a denied topic's partitions are not committed).
    if !group_allowed(cx, Operation::Read, &group) {
        cx.release_turn();
        return every(asked, code::GROUP_AUTHORIZATION_FAILED);
    }
    let (allowed, denied): (Vec<_>, Vec<_>) = std::mem::take(&mut c.topics)
        .into_iter()
        .partition(|t| cx.allowed(Operation::Read, ResourceType::Topic, &t.name));
    c.topics = allowed;
    let denied: Vec<(String, Vec<i32>)> =
        denied.into_iter().map(|t| (t.name, t.partitions.iter().map(|p| p.partition_index).collect())).collect();
    let version = cx.version();
    let mut answer = match to_coordinator(cx, &group, Commit(version, c)).await {
        Ok(r) => r,
        Err(e) => every(asked.into_iter().filter(|(n, _)| !denied.iter().any(|d| d.0 == *n)).collect(), e),
    };
    answer.topics.extend(every(denied, code::TOPIC_AUTHORIZATION_FAILED).topics);
    answer
}

#[derive(Debug)]
struct FetchOffsets(OffsetFetchRequestGroup, bool);

impl ShardCall<Shard> for FetchOffsets {
    type Reply = OffsetFetchResponseGroup;
    const NAME: &'static str = "offset-fetch";
    async fn run(self, shard: Rc<Shard>) -> OffsetFetchResponseGroup {
        shard.coordinator().fetch(self.0, self.1)
    }
}

/// OffsetFetch: one group (v0-v7) or several (v8+), each from its coordinating shard.
pub async fn offset_fetch(cx: &mut Cx<'_>, f: OffsetFetchRequest) -> OffsetFetchResponse {
    let version = cx.version();
    let asked = f.topics.clone();
    let groups = if version >= 8 {
        f.groups
    } else {
        // v0-1 cannot ask for every topic: an empty list means none.
        vec![OffsetFetchRequestGroup { group_id: f.group_id, topics: f.topics, ..Default::default() }]
    };
    let mut out = Vec::with_capacity(groups.len());
    for g in groups {
        let id = g.group_id.clone();
        if !group_allowed(cx, Operation::Describe, &id) {
            let error_code = code::GROUP_AUTHORIZATION_FAILED;
            out.push(OffsetFetchResponseGroup { group_id: id, error_code, ..Default::default() });
            continue;
        }
        let every_topic = g.topics.is_none();
        let mut answer = match to_coordinator(cx, &id, FetchOffsets(g, f.require_stable)).await {
            Ok(r) => r,
            Err(error_code) => OffsetFetchResponseGroup { group_id: id, error_code, ..Default::default() },
        };
        // Topics the client may not describe: left out of an answer for every topic, their
        // offsets not told when named.
        if every_topic {
            answer.topics.retain(|t| cx.allowed(Operation::Describe, ResourceType::Topic, &t.name));
        }
        for t in answer.topics.iter_mut() {
            if !cx.allowed(Operation::Describe, ResourceType::Topic, &t.name) {
                for p in t.partitions.iter_mut() {
                    (p.committed_offset, p.committed_leader_epoch, p.metadata) = (-1, -1, Some(String::new()));
                    p.error_code = code::TOPIC_AUTHORIZATION_FAILED;
                }
            }
        }
        out.push(answer);
    }
    cx.release_turn();
    if version >= 8 {
        return OffsetFetchResponse { groups: out, ..Default::default() };
    }
    let one = out.into_iter().next().unwrap_or_default();
    let mut topics = one.topics;
    if version < 2 && one.error_code != code::NONE {
        // No group-level error field: every partition asked for carries it.
        topics = asked
            .unwrap_or_default()
            .into_iter()
            .map(|t| OffsetFetchResponseTopic {
                name: t.name,
                partitions: t
                    .partition_indexes
                    .into_iter()
                    .map(|i| OffsetFetchResponsePartition {
                        partition_index: i,
                        committed_offset: -1,
                        metadata: Some(String::new()),
                        error_code: one.error_code,
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
            .collect();
    }
    OffsetFetchResponse { topics, error_code: one.error_code, ..Default::default() }
}

#[derive(Debug)]
struct Describe(String, i16);

impl ShardCall<Shard> for Describe {
    type Reply = DescribedGroup;
    const NAME: &'static str = "describe-group";
    async fn run(self, shard: Rc<Shard>) -> DescribedGroup {
        shard.coordinator().describe(&self.0, self.1)
    }
}

pub async fn describe_groups(cx: &mut Cx<'_>, d: DescribeGroupsRequest) -> DescribeGroupsResponse {
    cx.release_turn();
    let mut groups = Vec::with_capacity(d.groups.len());
    for g in d.groups {
        if !group_allowed(cx, Operation::Describe, &g) {
            let error_code = code::GROUP_AUTHORIZATION_FAILED;
            groups.push(DescribedGroup {
                error_code,
                group_id: g,
                authorized_operations: i32::MIN,
                ..Default::default()
            });
            continue;
        }
        groups.push(match to_coordinator(cx, &g, Describe(g.clone(), cx.version())).await {
            // KIP-430: what the client may do on the group, when asked for.
            Ok(mut r) if d.include_authorized_operations && r.error_code == code::NONE => {
                r.authorized_operations = cx.authorized_operations(ResourceType::Group, &r.group_id);
                r
            }
            Ok(r) => r,
            Err(error_code) => {
                DescribedGroup { error_code, group_id: g, authorized_operations: i32::MIN, ..Default::default() }
            }
        });
    }
    DescribeGroupsResponse { groups, ..Default::default() }
}

/// ListGroups of one shard's groups, with Kafka's state filter (v4+).
#[derive(Debug, Clone)]
struct List(Vec<String>);

impl ShardCall<Shard> for List {
    type Reply = Vec<ListedGroup>;
    const NAME: &'static str = "list-groups";
    async fn run(self, shard: Rc<Shard>) -> Vec<ListedGroup> {
        shard.coordinator().list(&self.0)
    }
}

pub async fn list_groups(cx: &mut Cx<'_>, l: ListGroupsRequest) -> ListGroupsResponse {
    cx.release_turn();
    let mut groups = Vec::new();
    let mut error_code = code::NONE;
    for r in cx.shard.call_each(List(l.states_filter.clone())).await {
        match r {
            Ok(mut gs) => groups.append(&mut gs),
            // Kafka answers with what it has and the error of the coordinator that failed.
            Err(e) => error_code = call_code(&e, code::COORDINATOR_NOT_AVAILABLE),
        }
    }
    if !l.types_filter.is_empty() {
        groups.retain(|g| l.types_filter.iter().any(|t| t.eq_ignore_ascii_case(&g.group_type)));
    }
    // Every group with DESCRIBE on the cluster; else those the client may describe.
    if !cx.allowed_on_cluster(Operation::Describe) {
        groups.retain(|g| group_allowed(cx, Operation::Describe, &g.group_id));
    }
    groups.sort_by(|a, b| a.group_id.cmp(&b.group_id));
    ListGroupsResponse { error_code, groups, ..Default::default() }
}

#[derive(Debug)]
struct Delete(String);

impl ShardCall<Shard> for Delete {
    type Reply = ErrorCode;
    const NAME: &'static str = "delete-group";
    async fn run(self, shard: Rc<Shard>) -> ErrorCode {
        shard.coordinator().delete(&self.0).await
    }
}

pub async fn delete_groups(cx: &mut Cx<'_>, d: DeleteGroupsRequest) -> DeleteGroupsResponse {
    let mut results = Vec::with_capacity(d.groups_names.len());
    for g in d.groups_names {
        let error_code = if group_allowed(cx, Operation::Delete, &g) {
            to_coordinator(cx, &g, Delete(g.clone())).await.unwrap_or_else(|e| e)
        } else {
            code::GROUP_AUTHORIZATION_FAILED
        };
        results.push(DeletableGroupResult { group_id: g, error_code, ..Default::default() });
    }
    cx.release_turn();
    DeleteGroupsResponse { results, ..Default::default() }
}

#[derive(Debug)]
struct DeleteOffsets(String, Vec<(String, Vec<i32>)>);

impl ShardCall<Shard> for DeleteOffsets {
    type Reply = Result<crate::coordinator::group::Deleted, ErrorCode>;
    const NAME: &'static str = "delete-offsets";
    async fn run(self, shard: Rc<Shard>) -> Self::Reply {
        shard.coordinator().delete_offsets(&self.0, self.1).await
    }
}

/// OffsetDelete (KIP-496), as Kafka's `handleOffsetDeleteRequest`: DELETE on the group (else
/// GROUP_AUTHORIZATION_FAILED for the whole request), then READ on each topic
/// (TOPIC_AUTHORIZATION_FAILED on its partitions) and the partition's existence
/// (UNKNOWN_TOPIC_OR_PARTITION); the rest go to the group's coordinator, which is asked even when
/// none is left so that the group is checked. A whole-request error from it (GROUP_ID_NOT_FOUND,
/// NON_EMPTY_GROUP, ...) replaces the per-partition answers, as Kafka's response merge does.
pub async fn offset_delete(cx: &mut Cx<'_>, r: OffsetDeleteRequest) -> OffsetDeleteResponse {
    if !group_allowed(cx, Operation::Delete, &r.group_id) {
        cx.release_turn();
        return OffsetDeleteResponse { error_code: code::GROUP_AUTHORIZATION_FAILED, ..Default::default() };
    }
    let mut local: Vec<OffsetDeleteResponseTopic> = Vec::new();
    let mut asked: Vec<(String, Vec<i32>)> = Vec::new();
    for t in r.topics {
        let indexes: Vec<i32> = t.partitions.iter().map(|p| p.partition_index).collect();
        if !cx.allowed(Operation::Read, ResourceType::Topic, &t.name) {
            local.push(offset_delete_topic(t.name, indexes.iter().map(|&p| (p, code::TOPIC_AUTHORIZATION_FAILED))));
            continue;
        }
        let (known, unknown): (Vec<i32>, Vec<i32>) =
            indexes.iter().partition(|&&p| cx.shard.leadership(&t.name, p).is_some());
        if !unknown.is_empty() {
            let refused = unknown.iter().map(|&p| (p, code::UNKNOWN_TOPIC_OR_PARTITION));
            local.push(offset_delete_topic(t.name.clone(), refused));
        }
        if !known.is_empty() {
            asked.push((t.name, known));
        }
    }
    let group = r.group_id.clone();
    match to_coordinator(cx, &group, DeleteOffsets(r.group_id, asked)).await.and_then(|r| r) {
        Ok(deleted) => {
            local.extend(deleted.into_iter().map(|(name, partitions)| offset_delete_topic(name, partitions)));
            OffsetDeleteResponse { topics: local, ..Default::default() }
        }
        Err(error_code) => OffsetDeleteResponse { error_code, ..Default::default() },
    }
}

/// One topic of an OffsetDelete answer: each partition with its outcome.
fn offset_delete_topic(
    name: String,
    outcomes: impl IntoIterator<Item = (i32, ErrorCode)>,
) -> OffsetDeleteResponseTopic {
    OffsetDeleteResponseTopic {
        name,
        partitions: outcomes
            .into_iter()
            .map(|(partition_index, error_code)| OffsetDeleteResponsePartition {
                partition_index,
                error_code,
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

/// The node leading the partition of `key` in the offsets topic (or, `txn`, the transaction
/// state topic): (id, host, port) as a client of this listener reaches it.
async fn coordinator_node(cx: &Cx<'_>, key: &str, txn: bool) -> Option<(i32, String, i32)> {
    let shard = cx.shard;
    let (topic, partition) = if txn {
        let n = shard.txn().partitions()?;
        (crate::coordinator::txn::TXN_TOPIC, crate::txn::partition_for(key, n as i32))
    } else {
        let n = shard.offsets_partitions()?;
        (crate::coordinator::group::OFFSETS_TOPIC, crate::coordinator::group::offsets_partition(key, n))
    };
    let leader = shard.leader(topic, partition)?;
    if leader < 0 {
        return None;
    }
    super::cluster::node_endpoint(cx, leader).await
}

/// FindCoordinator, as Kafka's `KafkaApis.getCoordinator`: a group (key type 0) or a
/// transactional id (1) is coordinated by the leader of its partition of the internal topic.
/// A share partition's key (2) is INVALID_REQUEST below v6 or when malformed, needs
/// CLUSTER_ACTION (a lookup between brokers; CLUSTER_AUTHORIZATION_FAILED on every key), and is
/// COORDINATOR_NOT_AVAILABLE here: no share-state topic exists (as Kafka answers until it has
/// created `__share_group_state`). Any other key type is INVALID_REQUEST on every key.
pub async fn find_coordinator(cx: &mut Cx<'_>, f: FindCoordinatorRequest) -> FindCoordinatorResponse {
    cx.release_turn();
    let version = cx.version();
    let keys = if version >= 4 { f.coordinator_keys } else { vec![f.key] };
    let whole = match f.key_type {
        COORDINATOR_GROUP | COORDINATOR_TRANSACTION => None,
        COORDINATOR_SHARE if version >= 6 && !cx.allowed_on_cluster(Operation::ClusterAction) => {
            Some(code::CLUSTER_AUTHORIZATION_FAILED)
        }
        COORDINATOR_SHARE => None,
        _ => Some(code::INVALID_REQUEST),
    };
    let txn = f.key_type == COORDINATOR_TRANSACTION;
    let ready = match f.key_type {
        COORDINATOR_GROUP if whole.is_none() => ensure_offsets_topic(cx.shard).await,
        _ => true,
    };
    let mut coordinators: Vec<Coordinator> = Vec::with_capacity(keys.len());
    for key in keys {
        let (error_code, error_message) = if let Some(c) = whole {
            (c, None)
        } else if f.key_type == COORDINATOR_SHARE {
            if version < 6 || !share_key(&key) {
                (code::INVALID_REQUEST, None)
            } else {
                (code::COORDINATOR_NOT_AVAILABLE, Some("share groups are not available on this broker".to_string()))
            }
        } else if txn {
            super::transactions::find(cx, &key).await
        } else if !group_allowed(cx, Operation::Describe, &key) {
            (code::GROUP_AUTHORIZATION_FAILED, Some("Group authorization failed.".to_string()))
        } else if !ready {
            (code::COORDINATOR_NOT_AVAILABLE, Some("the offsets topic is not available yet".to_string()))
        } else {
            (code::NONE, None)
        };
        // The leader of the key's partition of the internal topic coordinates it.
        let node = if error_code == code::NONE { coordinator_node(cx, &key, txn).await } else { None };
        let (error_code, error_message) = match (&node, error_code) {
            (None, code::NONE) => {
                (code::COORDINATOR_NOT_AVAILABLE, Some("the coordinator's partition has no leader now".to_string()))
            }
            _ => (error_code, error_message),
        };
        let (node_id, host, port) = node.unwrap_or((-1, String::new(), -1));
        coordinators.push(Coordinator { key, node_id, host, port, error_code, error_message, ..Default::default() });
    }
    if version >= 4 {
        return FindCoordinatorResponse { coordinators, ..Default::default() };
    }
    let one = coordinators.into_iter().next().unwrap_or_default();
    FindCoordinatorResponse {
        error_code: one.error_code,
        error_message: one.error_message,
        node_id: one.node_id,
        host: one.host,
        port: one.port,
        ..Default::default()
    }
}

/// Whether `key` is a share partition's key as Kafka's `SharePartitionKey.validate` takes it:
/// `groupId:topicId:partition`, a non-blank group id, a topic id and a partition number.
fn share_key(key: &str) -> bool {
    let parts: Vec<&str> = key.split(':').collect();
    matches!(parts.as_slice(), [group, topic, partition]
        if !group.trim().is_empty()
            && crate::types::Uuid::parse(topic).is_some()
            && partition.parse::<i32>().is_ok())
}
