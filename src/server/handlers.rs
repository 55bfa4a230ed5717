//! The one place the protocol meets storage: each API's request becomes shard operations on
//! the owners of its partitions, and their results become the response.

use crate::protocol::errors as code;
use crate::protocol::groups::*;
use crate::protocol::messages::*;
use crate::protocol::{api_versions_response, encode_response, ProtoError, ProtoResult, Request, RequestHeader};
use crate::server::admin;
use crate::server::coordinator::{group_shard, GroupRequest, GroupResponse, OFFSETS_TOPIC};
use crate::server::limits::Held;
use crate::server::shard::{owner, FetchOut, Shard, ShardOp, ShardReply};
use crate::storage::format::convert::down_convert;
use bytes::Bytes;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// Signals that a request has issued its side effects, so the next request of the same
/// connection may start issuing its own: requests are pipelined, yet their effects (appends,
/// topic changes) happen in request order, as Kafka clients expect.
#[derive(Debug, Default)]
pub struct Dispatched(Option<futures_channel::oneshot::Sender<()>>);

impl Dispatched {
    pub fn new(tx: futures_channel::oneshot::Sender<()>) -> Self {
        Dispatched(Some(tx))
    }

    pub fn done(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(());
        }
    }
}

/// Answer one request from the client at `peer`; `None` when no response is due (produce
/// with acks=0). `held` receives the fetch budget the response's records hold, to be given
/// back once the response is written.
pub async fn handle(
    shard: &Rc<Shard>,
    peer: &str,
    header: &RequestHeader,
    req: Request,
    mut dispatched: Dispatched,
    held: &mut Held,
) -> ProtoResult<Option<Bytes>> {
    let v = header.api_version;
    match req {
        // No side effects: the next request may start at once.
        Request::ApiVersions(_) => {
            dispatched.done();
            let mut resp = api_versions_response(code::NONE);
            // No feature flag is finalized here: every one Kafka defines (metadata.version,
            // kraft.version, group.version, transaction.version, ...) names KRaft or protocols
            // tidemark does not implement, and advertising one makes clients use them. The
            // epoch says the (empty) set is settled.
            resp.finalized_features_epoch = 0;
            encode_response(header, &mut resp).map(Some)
        }
        Request::Fetch(f) => {
            dispatched.done();
            let (mut resp, records_held) = fetch(shard, header.api_version, f).await;
            held.absorb(records_held);
            encode_response(header, &mut resp).map(Some)
        }
        Request::ListOffsets(l) => {
            dispatched.done();
            encode_response(header, &mut list_offsets(shard, header.api_version, l).await).map(Some)
        }
        Request::DescribeConfigs(d) => {
            dispatched.done();
            encode_response(header, &mut crate::server::configs::describe_configs(shard, v, d)).map(Some)
        }
        // Produce signals once its appends are issued (it then waits for durability).
        Request::Produce(p) => {
            let acks = p.acks;
            let mut resp = produce(shard, header.api_version, p, &mut dispatched).await;
            if acks == 0 {
                return Ok(None);
            }
            encode_response(header, &mut resp).map(Some)
        }
        // Topic changes (and Metadata's auto-creation) complete before the next request.
        Request::Metadata(m) => encode_response(header, &mut metadata(shard, m).await).map(Some),
        Request::CreateTopics(c) => encode_response(header, &mut create_topics(shard, c).await).map(Some),
        Request::DeleteTopics(d) => encode_response(header, &mut delete_topics(shard, d).await).map(Some),
        Request::AlterConfigs(a) => encode_response(header, &mut alter_configs(shard, a).await).map(Some),
        // Groups: each request goes to the group's coordinating shard.
        Request::FindCoordinator(f) => {
            dispatched.done();
            encode_response(header, &mut find_coordinator(shard, v, f).await).map(Some)
        }
        Request::JoinGroup(j) => {
            let group = j.group_id.clone();
            let client = header.client_id.clone().unwrap_or_default();
            // Kafka's form of the client host.
            let host = format!("/{}", peer.rsplit_once(':').map_or(peer, |(h, _)| h));
            let mut resp =
                match group_call(shard, v, &group, GroupRequest::Join(j, client, host), &mut dispatched).await {
                    Some(GroupResponse::Join(r)) => r,
                    _ => JoinGroupResponse { error_code: code::COORDINATOR_NOT_AVAILABLE, ..Default::default() },
                };
            encode_response(header, &mut resp).map(Some)
        }
        Request::SyncGroup(sg) => {
            let group = sg.group_id.clone();
            let mut resp = match group_call(shard, v, &group, GroupRequest::Sync(sg), &mut dispatched).await {
                Some(GroupResponse::Sync(r)) => r,
                _ => SyncGroupResponse { error_code: code::COORDINATOR_NOT_AVAILABLE, ..Default::default() },
            };
            encode_response(header, &mut resp).map(Some)
        }
        Request::Heartbeat(h) => {
            let group = h.group_id.clone();
            let error_code = match group_call(shard, v, &group, GroupRequest::Heartbeat(h), &mut dispatched).await {
                Some(GroupResponse::Heartbeat(e)) => e,
                _ => code::COORDINATOR_NOT_AVAILABLE,
            };
            encode_response(header, &mut HeartbeatResponse { error_code, ..Default::default() }).map(Some)
        }
        Request::LeaveGroup(l) => {
            let group = l.group_id.clone();
            let mut resp = match group_call(shard, v, &group, GroupRequest::Leave(l), &mut dispatched).await {
                Some(GroupResponse::Leave(r)) => r,
                _ => LeaveGroupResponse { error_code: code::COORDINATOR_NOT_AVAILABLE, ..Default::default() },
            };
            encode_response(header, &mut resp).map(Some)
        }
        Request::OffsetCommit(c) => {
            let group = c.group_id.clone();
            let fallback = commit_error(&c, code::COORDINATOR_NOT_AVAILABLE);
            let mut resp = match group_call(shard, v, &group, GroupRequest::Commit(c), &mut dispatched).await {
                Some(GroupResponse::Commit(r)) => r,
                _ => fallback,
            };
            encode_response(header, &mut resp).map(Some)
        }
        Request::OffsetFetch(f) => {
            let mut resp = offset_fetch(shard, v, f, &mut dispatched).await;
            encode_response(header, &mut resp).map(Some)
        }
        Request::DescribeGroups(d) => {
            dispatched.done();
            let mut groups = Vec::with_capacity(d.groups.len());
            for g in d.groups {
                groups.push(
                    match group_call(shard, v, &g, GroupRequest::Describe(g.clone()), &mut Dispatched::default()).await
                    {
                        Some(GroupResponse::Describe(r)) => r,
                        _ => DescribedGroup {
                            error_code: code::COORDINATOR_NOT_AVAILABLE,
                            group_id: g,
                            authorized_operations: i32::MIN,
                            ..Default::default()
                        },
                    },
                );
            }
            encode_response(header, &mut DescribeGroupsResponse { groups, ..Default::default() }).map(Some)
        }
        Request::ListGroups(l) => {
            dispatched.done();
            let mut groups = Vec::new();
            for target in 0..shard.shards {
                let op = ShardOp::Group { version: v, req: GroupRequest::List(l.states_filter.clone()) };
                if let ShardReply::Group(GroupResponse::List(mut gs)) = shard.call(target, op).await {
                    groups.append(&mut gs);
                }
            }
            groups.sort_by(|a, b| a.group_id.cmp(&b.group_id));
            encode_response(header, &mut ListGroupsResponse { groups, ..Default::default() }).map(Some)
        }
        Request::DeleteGroups(d) => {
            let mut results = Vec::with_capacity(d.groups_names.len());
            for g in d.groups_names {
                let error_code = match group_call(shard, v, &g, GroupRequest::Delete(g.clone()), &mut dispatched).await
                {
                    Some(GroupResponse::Delete(e)) => e,
                    _ => code::COORDINATOR_NOT_AVAILABLE,
                };
                results.push(DeletableGroupResult { group_id: g, error_code, ..Default::default() });
            }
            dispatched.done();
            encode_response(header, &mut DeleteGroupsResponse { results, ..Default::default() }).map(Some)
        }
        Request::InitProducerId(i) => {
            dispatched.done();
            // An idempotent producer gets a new id, epoch 0 (Kafka does the same for one without
            // a transactional id, also when it asks to bump an epoch). No transactions here.
            let (error_code, producer_id) = if i.transactional_id.is_some() {
                (code::COORDINATOR_NOT_AVAILABLE, -1)
            } else {
                match shard.call(0, ShardOp::AllocateProducerId).await {
                    ShardReply::ProducerId(Ok(id)) => (code::NONE, id),
                    ShardReply::ProducerId(Err(e)) => (e, -1),
                    _ => (code::UNKNOWN_SERVER_ERROR, -1),
                }
            };
            let producer_epoch = if error_code == code::NONE { 0 } else { -1 };
            let mut resp = InitProducerIdResponse { error_code, producer_id, producer_epoch, ..Default::default() };
            encode_response(header, &mut resp).map(Some)
        }
        // Admin: partition-count changes and deletions complete before the next request.
        Request::CreatePartitions(c) => {
            encode_response(header, &mut admin::create_partitions(shard, c).await).map(Some)
        }
        Request::DeleteRecords(d) => encode_response(header, &mut admin::delete_records(shard, d).await).map(Some),
        Request::DescribeLogDirs(d) => {
            dispatched.done();
            encode_response(header, &mut admin::describe_log_dirs(shard, d).await).map(Some)
        }
        Request::DescribeCluster(d) => {
            dispatched.done();
            encode_response(header, &mut admin::describe_cluster(shard, v, d)).map(Some)
        }
        Request::DescribeProducers(d) => {
            dispatched.done();
            encode_response(header, &mut admin::describe_producers(shard, d).await).map(Some)
        }
    }
}

/// Send a group request to the shard coordinating `group` (issued before `dispatched` is
/// signalled, so a connection's group operations keep their order). `None` when
/// `__consumer_offsets` does not exist yet or the shard did not answer.
async fn group_call(
    shard: &Rc<Shard>,
    version: i16,
    group: &str,
    req: GroupRequest,
    dispatched: &mut Dispatched,
) -> Option<GroupResponse> {
    let Some(partitions) = shard.offsets_partitions() else {
        dispatched.done();
        return None;
    };
    let target = group_shard(group, partitions, shard.shards);
    let s = shard.clone();
    let task = glommio::spawn_local(async move { s.call(target, ShardOp::Group { version, req }).await }).detach();
    dispatched.done();
    match task.await {
        Some(ShardReply::Group(r)) => Some(r),
        _ => None,
    }
}

/// FindCoordinator: this broker coordinates every group, once `__consumer_offsets` exists.
/// Transactions are not implemented: a transactional id gets COORDINATOR_NOT_AVAILABLE.
async fn find_coordinator(shard: &Rc<Shard>, version: i16, f: FindCoordinatorRequest) -> FindCoordinatorResponse {
    let keys = if version >= 4 { f.coordinator_keys } else { vec![f.key] };
    let ready = shard.ensure_offsets_topic().await;
    let c = &shard.config;
    let coordinators: Vec<Coordinator> = keys
        .into_iter()
        .map(|key| {
            let (error_code, error_message) = if f.key_type == COORDINATOR_TRANSACTION {
                (code::COORDINATOR_NOT_AVAILABLE, Some("transactions are not supported by tidemark".to_string()))
            } else if !ready {
                (code::COORDINATOR_NOT_AVAILABLE, Some("the offsets topic is not available yet".to_string()))
            } else {
                (code::NONE, None)
            };
            let found = error_code == code::NONE;
            Coordinator {
                key,
                node_id: if found { c.node_id } else { -1 },
                host: if found { c.advertised_host.clone() } else { String::new() },
                port: if found { c.advertised_port } else { -1 },
                error_code,
                error_message,
                ..Default::default()
            }
        })
        .collect();
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

/// An OffsetCommit answer with one error for every partition.
fn commit_error(c: &OffsetCommitRequest, error_code: i16) -> OffsetCommitResponse {
    OffsetCommitResponse {
        topics: c
            .topics
            .iter()
            .map(|t| OffsetCommitResponseTopic {
                name: t.name.clone(),
                partitions: t
                    .partitions
                    .iter()
                    .map(|p| OffsetCommitResponsePartition {
                        partition_index: p.partition_index,
                        error_code,
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

/// OffsetFetch: one group (v0-v7) or several (v8+), each from its coordinating shard.
async fn offset_fetch(
    shard: &Rc<Shard>,
    version: i16,
    f: OffsetFetchRequest,
    dispatched: &mut Dispatched,
) -> OffsetFetchResponse {
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
        out.push(match group_call(shard, version, &id, GroupRequest::Fetch(g), dispatched).await {
            Some(GroupResponse::Fetch(r)) => r,
            _ => OffsetFetchResponseGroup {
                group_id: id,
                error_code: code::COORDINATOR_NOT_AVAILABLE,
                ..Default::default()
            },
        });
    }
    dispatched.done();
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

async fn delete_topics(shard: &Rc<Shard>, d: DeleteTopicsRequest) -> DeleteTopicsResponse {
    let names: Vec<Option<String>> = if d.topics.is_empty() {
        d.topic_names.into_iter().map(Some).collect()
    } else {
        d.topics.into_iter().map(|t| t.name).collect()
    };
    let mut responses = Vec::new();
    for name in names {
        let (error_code, error_message) = match &name {
            // Deletion by topic id: tidemark's topic ids are all zero.
            None => (code::UNKNOWN_TOPIC_OR_PARTITION, Some("topic ids are not supported".to_string())),
            Some(n) => match shard.call(0, ShardOp::DeleteTopic { name: n.clone() }).await {
                ShardReply::Admin(Ok(())) => (code::NONE, None),
                ShardReply::Admin(Err((c, m))) => (c, Some(m)),
                _ => (code::UNKNOWN_SERVER_ERROR, None),
            },
        };
        responses.push(DeletableTopicResult { name, error_code, error_message, ..Default::default() });
    }
    DeleteTopicsResponse { responses, ..Default::default() }
}

/// AlterConfigs (the given set replaces the resource's settings) and IncrementalAlterConfigs
/// (SET, DELETE, and APPEND/SUBTRACT on list settings), for topics and for this broker's
/// dynamic settings (resource `""`: the cluster-wide defaults; this node's id: its own). Every
/// value is validated before anything changes; a change reaches every shard at once. Kafka's
/// request checks first: a resource named twice, a key given twice or a null value to set are
/// INVALID_REQUEST.
async fn alter_configs(shard: &Rc<Shard>, a: AlterConfigsRequest) -> AlterConfigsResponse {
    let mut seen = std::collections::HashSet::new();
    let twice: std::collections::HashSet<(i8, String)> = a
        .resources
        .iter()
        .map(|r| (r.resource_type, r.resource_name.clone()))
        .filter(|r| !seen.insert(r.clone()))
        .collect();
    let mut responses = Vec::new();
    let (incremental, validate_only) = (a.incremental, a.validate_only);
    for r in a.resources {
        let twice = twice.contains(&(r.resource_type, r.resource_name.clone()));
        let outcome = alter_resource(shard, incremental, validate_only, &r, twice).await;
        let (error_code, error_message) = match outcome {
            Ok(()) => (code::NONE, None),
            Err((c, m)) => (c, Some(m)),
        };
        responses.push(AlterConfigsResourceResponse {
            error_code,
            error_message,
            resource_type: r.resource_type,
            resource_name: r.resource_name,
            ..Default::default()
        });
    }
    AlterConfigsResponse { responses, ..Default::default() }
}

async fn alter_resource(
    shard: &Rc<Shard>,
    incremental: bool,
    validate_only: bool,
    r: &AlterConfigsResource,
    twice: bool,
) -> Result<(), (i16, String)> {
    use crate::server::configs::{AlterOp, RESOURCE_BROKER, RESOURCE_TOPIC};
    if twice {
        return Err((code::INVALID_REQUEST, "Each resource must appear at most once.".to_string()));
    }
    let mut keys = std::collections::HashSet::new();
    if r.configs.iter().any(|k| !keys.insert(k.name.clone())) {
        return Err((code::INVALID_REQUEST, "Error due to duplicate config keys".to_string()));
    }
    let mut ops = Vec::with_capacity(r.configs.len());
    let mut nulls = Vec::new();
    for k in &r.configs {
        let op = match (incremental, k.operation, k.value.clone()) {
            (true, 1, _) => AlterOp::Delete,
            (false, _, Some(v)) | (true, 0, Some(v)) => AlterOp::Set(v),
            (true, 2, Some(v)) => AlterOp::Append(v),
            (true, 3, Some(v)) => AlterOp::Subtract(v),
            (_, 0..=3, None) => {
                nulls.push(k.name.clone());
                continue;
            }
            (_, op, _) => return Err((code::INVALID_REQUEST, format!("Unknown operation {op} for {}", k.name))),
        };
        ops.push((k.name.clone(), op));
    }
    if !nulls.is_empty() {
        return Err((code::INVALID_REQUEST, format!("Null value not supported for : {}", nulls.join(", "))));
    }
    let replace = !incremental;
    let op = match r.resource_type {
        RESOURCE_TOPIC if r.resource_name == OFFSETS_TOPIC => {
            // Retention there would delete live offsets; its settings are the broker's.
            return Err((
                code::INVALID_REQUEST,
                format!("{OFFSETS_TOPIC} is internal: its settings cannot be changed"),
            ));
        }
        RESOURCE_TOPIC if r.resource_name.is_empty() => {
            return Err((code::INVALID_REQUEST, "Default topic resources are not allowed.".to_string()));
        }
        RESOURCE_TOPIC => ShardOp::AlterTopic { name: r.resource_name.clone(), ops, replace, validate_only },
        RESOURCE_BROKER => {
            let node = if r.resource_name.is_empty() {
                false
            } else {
                match r.resource_name.trim().parse::<i32>() {
                    Ok(id) if id == shard.config.node_id => true,
                    Ok(id) => {
                        let msg = format!("Unexpected broker id, expected {}, but received {id}", shard.config.node_id);
                        return Err((code::INVALID_REQUEST, msg));
                    }
                    Err(_) => {
                        let msg = format!("Node id must be an integer, but it is: {}", r.resource_name);
                        return Err((code::INVALID_REQUEST, msg));
                    }
                }
            };
            ShardOp::AlterBroker { node, ops, replace, validate_only }
        }
        other => return Err((code::INVALID_REQUEST, format!("Unknown resource type {other}"))),
    };
    match shard.call(0, op).await {
        ShardReply::Admin(r) => r,
        _ => Err((code::UNKNOWN_SERVER_ERROR, "no reply".to_string())),
    }
}

/// The answer to a request that could not be decoded, when one can be given. An unknown API
/// or an unsupported version (no response schema exists for it) gets what KIP-511 gives an
/// unsupported ApiVersions request: a v0 ApiVersions body with UNSUPPORTED_VERSION and the
/// versions supported, under the request's correlation id; the connection stays open. A
/// malformed body of a supported request has no answer: the caller closes the connection.
pub fn error_response(header: &RequestHeader, error: &ProtoError) -> Option<Bytes> {
    let c = match error {
        ProtoError::UnsupportedVersion { .. } | ProtoError::UnknownApi(_) => code::UNSUPPORTED_VERSION,
        _ if header.api_key == crate::protocol::API_VERSIONS => code::INVALID_REQUEST,
        _ => return None,
    };
    let v0 = RequestHeader { api_key: crate::protocol::API_VERSIONS, api_version: 0, ..header.clone() };
    encode_response(&v0, &mut api_versions_response(c)).ok()
}

async fn metadata(shard: &Rc<Shard>, m: MetadataRequest) -> MetadataResponse {
    let names: Vec<String> = match &m.topics {
        None => shard.topics.borrow().keys().cloned().collect(),
        Some(ts) => ts.iter().filter_map(|t| t.name.clone()).collect(),
    };
    let mut topics = Vec::new();
    for name in names {
        if crate::storage::topics::validate_topic_name(&name).is_err() {
            topics.push(MetadataTopic {
                error_code: code::INVALID_TOPIC_EXCEPTION,
                name: Some(name),
                ..Default::default()
            });
            continue;
        }
        let exists = shard.topics.borrow().contains_key(&name)
            || (m.allow_auto_topic_creation && m.topics.is_some() && shard.ensure_topic(&name).await);
        let partitions = shard.topics.borrow().get(&name).map(|t| t.partitions);
        match partitions.filter(|_| exists) {
            None => topics.push(MetadataTopic {
                error_code: code::UNKNOWN_TOPIC_OR_PARTITION,
                name: Some(name),
                ..Default::default()
            }),
            Some(n) => topics.push(MetadataTopic {
                error_code: code::NONE,
                is_internal: name == OFFSETS_TOPIC,
                name: Some(name),
                topic_authorized_operations: i32::MIN,
                partitions: (0..n as i32)
                    .map(|p| MetadataPartition {
                        partition_index: p,
                        leader_id: shard.config.node_id,
                        leader_epoch: 0,
                        replica_nodes: vec![shard.config.node_id],
                        isr_nodes: vec![shard.config.node_id],
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }),
        }
    }
    MetadataResponse {
        brokers: vec![MetadataBroker {
            node_id: shard.config.node_id,
            host: shard.config.advertised_host.clone(),
            port: shard.config.advertised_port,
            ..Default::default()
        }],
        cluster_id: Some(admin::CLUSTER_ID.to_string()),
        controller_id: shard.config.node_id,
        topics,
        cluster_authorized_operations: i32::MIN,
        ..Default::default()
    }
}

/// Kafka's checks of a Produce request's records for one partition before any append
/// (`ProduceRequest.validateRecords`): from v3 on, exactly one complete batch, of magic 2, not
/// zstd before v7. A length below the smallest message is CORRUPT_MESSAGE; no complete batch,
/// another magic or a second batch is INVALID_RECORD. v0-v2 carry legacy message sets (or v2
/// batches from clients that send them): storage checks those.
fn produce_records_error(version: i16, records: &[u8]) -> Option<i16> {
    use crate::storage::format::batch::{ATTR_COMPRESSION_MASK, LOG_OVERHEAD, OFF_ATTRIBUTES, OFF_MAGIC};
    if version < 3 {
        return None;
    }
    // A frame's length field, and whether the whole frame is there.
    let frame = |at: usize| -> Result<Option<usize>, i16> {
        let rest = &records[at.min(records.len())..];
        if rest.len() < LOG_OVERHEAD {
            return Ok(None);
        }
        let len = i32::from_be_bytes(rest[8..12].try_into().expect("4 bytes"));
        // LegacyRecord.RECORD_OVERHEAD_V0: no message of any magic is shorter.
        if len < 14 {
            return Err(code::CORRUPT_MESSAGE);
        }
        let total = LOG_OVERHEAD + len as usize;
        Ok((rest.len() >= total && rest.len() > OFF_MAGIC).then_some(total))
    };
    let first = match frame(0) {
        Err(c) => return Some(c),
        Ok(None) => return Some(code::INVALID_RECORD),
        Ok(Some(n)) => n,
    };
    if records[OFF_MAGIC] != 2 {
        return Some(code::INVALID_RECORD);
    }
    if version < 7 && first > OFF_ATTRIBUTES + 1 {
        let attributes = i16::from_be_bytes([records[OFF_ATTRIBUTES], records[OFF_ATTRIBUTES + 1]]);
        if attributes & ATTR_COMPRESSION_MASK == 4 {
            return Some(code::UNSUPPORTED_COMPRESSION_TYPE);
        }
    }
    match frame(first) {
        Ok(Some(_)) => Some(code::INVALID_RECORD),
        // Trailing bytes that are no complete batch: storage refuses them (CORRUPT_MESSAGE).
        _ => None,
    }
}

async fn produce(shard: &Rc<Shard>, version: i16, p: ProduceRequest, dispatched: &mut Dispatched) -> ProduceResponse {
    let acks_ok = matches!(p.acks, -1..=1);
    // Topics first (auto-creation), in request order, while this request holds the turn.
    let mut known = Vec::with_capacity(p.topics.len());
    for t in &p.topics {
        known.push(acks_ok && shard.ensure_topic(&t.name).await);
    }
    let error = |index, c| ProducePartitionResponse {
        index,
        error_code: c,
        base_offset: -1,
        log_append_time_ms: -1,
        log_start_offset: -1,
        ..Default::default()
    };
    // Issue every append in request order: glommio runs spawned tasks first in, first out, so
    // the appends happen in this order, before the next request's (which waits for the
    // signal below). Detached: a closed connection does not cancel an append half done.
    let mut pending = Vec::new();
    for (t, known) in p.topics.into_iter().zip(known) {
        let mut parts = Vec::new();
        for part in t.partitions {
            let outcome = if !acks_ok {
                Err(code::INVALID_REQUIRED_ACKS)
            } else if t.name == OFFSETS_TOPIC {
                // Only the coordinator writes there (Kafka: "cannot append to internal topic").
                Err(code::INVALID_TOPIC_EXCEPTION)
            } else if p.acks == -1
                && shard.topics.borrow().get(&t.name).is_some_and(|i| i.config.min_insync_replicas > 1)
            {
                // One replica can never satisfy min.insync.replicas above 1 (Kafka's answer).
                Err(code::NOT_ENOUGH_REPLICAS)
            } else if !known || part.index < 0 {
                Err(code::UNKNOWN_TOPIC_OR_PARTITION)
            } else if let Some(c) = part.records.as_ref().and_then(|r| produce_records_error(version, r)) {
                Err(c)
            } else if let Some(records) = part.records {
                let (shard, topic) = (shard.clone(), t.name.clone());
                let target = owner(&topic, part.index, shard.shards);
                let op = ShardOp::Produce { topic, partition: part.index, records };
                Ok(glommio::spawn_local(async move { shard.call(target, op).await }).detach())
            } else {
                Err(code::CORRUPT_MESSAGE)
            };
            parts.push((part.index, outcome));
        }
        pending.push((t.name, parts));
    }
    dispatched.done();
    let mut topics = Vec::with_capacity(pending.len());
    for (name, parts) in pending {
        let mut partitions = Vec::with_capacity(parts.len());
        for (index, outcome) in parts {
            partitions.push(match outcome {
                Err(c) => error(index, c),
                Ok(task) => match task.await {
                    Some(ShardReply::Produce(Ok((base, log_append_time, start)))) => ProducePartitionResponse {
                        index,
                        error_code: code::NONE,
                        base_offset: base,
                        log_append_time_ms: log_append_time,
                        log_start_offset: start,
                        ..Default::default()
                    },
                    Some(ShardReply::Produce(Err(refused))) => ProducePartitionResponse {
                        log_start_offset: refused.log_start_offset,
                        error_message: refused.message,
                        record_errors: refused
                            .record_errors
                            .into_iter()
                            .map(|(batch_index, why)| RecordError {
                                batch_index,
                                message: Some(why),
                                ..Default::default()
                            })
                            .collect(),
                        ..error(index, refused.code)
                    },
                    _ => error(index, code::UNKNOWN_SERVER_ERROR),
                },
            });
        }
        topics.push(ProduceTopicResponse { name, partitions, ..Default::default() });
    }
    ProduceResponse { topics, ..Default::default() }
}

/// The newest message format a Fetch version reads: magic 0 for v0-v1, 1 for v2-v3, 2 after.
fn fetch_magic(version: i16) -> i8 {
    match version {
        0 | 1 => 0,
        2 | 3 => 1,
        _ => 2,
    }
}

/// One pass over every requested partition, within the request's byte budgets. Readers of an
/// older format get newer batches down-converted (SPEC T1.1), here on the connection's shard,
/// within the same byte budget. The records are held against the shard's fetch memory
/// budget (the returned [`Held`]): the first partition read waits for its share; once the
/// pass has data, a partition whose share is not free now reports offsets only (waiting
/// while holding could deadlock the budget), and the client fetches it next time.
async fn fetch_once(
    shard: &Rc<Shard>,
    version: i16,
    f: &FetchRequest,
    deadline: Instant,
) -> (FetchResponse, usize, Held) {
    let magic = fetch_magic(version);
    // The request's total, capped by the broker's `fetch.max.bytes`.
    let mut budget = (f.max_bytes.max(0) as usize).min(shard.config.limits.fetch_max_bytes);
    let mut total = 0usize;
    let mut held = Held::default();
    let mut topics = Vec::new();
    for t in &f.topics {
        let mut partitions = Vec::new();
        for p in &t.partitions {
            // KIP-74: only the first partition with data may exceed the budget (by one batch);
            // once it is spent, the rest report offsets only.
            let mut max =
                if total > 0 && budget == 0 { 0 } else { (p.partition_max_bytes.max(0) as usize).min(budget).max(1) };
            let mut part_held = Held::default();
            if max > 0 {
                if held.units() == 0 {
                    // Wait for the first share, but not past the fetch's own deadline: a fetch
                    // that gets no memory in time answers offsets only, so no fetch (nor the
                    // responses queued behind it on its connection) waits on another for ever.
                    let reserve = async { Some(shard.fetch_memory.reserve(max as u64).await) };
                    let expire = async {
                        glommio::timer::sleep(deadline.saturating_duration_since(Instant::now())).await;
                        None
                    };
                    match futures_lite::future::or(reserve, expire).await {
                        Some(h) => part_held = h,
                        None => max = 0,
                    }
                } else if let Some(h) = shard.fetch_memory.try_reserve(max as u64) {
                    part_held = h;
                } else {
                    max = 0;
                }
            }
            let target = owner(&t.topic, p.partition, shard.shards);
            let op = ShardOp::Fetch {
                topic: t.topic.clone(),
                partition: p.partition,
                offset: p.fetch_offset,
                max_bytes: max,
            };
            let (mut error_code, hw, start, mut records) = match shard.call(target, op).await {
                ShardReply::Fetch(Ok(FetchOut { high_watermark, log_start_offset, records })) => {
                    (code::NONE, high_watermark, log_start_offset, records)
                }
                ShardReply::Fetch(Err((c, hw, start))) => (c, hw, start, Bytes::new()),
                _ => (code::UNKNOWN_SERVER_ERROR, -1, -1, Bytes::new()),
            };
            if magic < 2 && !records.is_empty() {
                let (limit, convert) = shard
                    .topics
                    .borrow()
                    .get(&t.topic)
                    .map_or((64 << 20, true), |i| (i.config.decompress_limit(), i.config.downconversion));
                let newer = crate::storage::format::stored::magics(&records).any(|m| m.is_ok_and(|m| m > magic));
                if !convert && newer {
                    // message.downconversion.enable=false: as Kafka, the old reader is refused.
                    (error_code, records) = (code::UNSUPPORTED_VERSION, Bytes::new());
                } else {
                    match down_convert(records, magic, max, limit) {
                        Ok(converted) => records = converted,
                        Err(e) => {
                            tracing::error!(topic = t.topic, partition = p.partition, error = %e, "cannot down-convert stored batches");
                            // An error code these old clients know.
                            (error_code, records) = (code::CORRUPT_MESSAGE, Bytes::new());
                        }
                    }
                }
            }
            // Keep what the records take (a first batch larger than its share takes what is
            // free of the difference).
            let len = records.len() as u64;
            if len > part_held.units() {
                if let Some(more) = shard.fetch_memory.try_reserve(len - part_held.units()) {
                    part_held.absorb(more);
                }
            }
            part_held.shrink(len);
            held.absorb(part_held);
            budget = budget.saturating_sub(records.len());
            total += records.len();
            partitions.push(FetchPartitionResponse {
                partition_index: p.partition,
                error_code,
                high_watermark: hw,
                last_stable_offset: hw,
                log_start_offset: start,
                aborted_transactions: None,
                preferred_read_replica: -1,
                records: Some(records),
                ..Default::default()
            });
        }
        topics.push(FetchTopicResponse { topic: t.topic.clone(), partitions, ..Default::default() });
    }
    (FetchResponse { topics, ..Default::default() }, total, held)
}

/// Fetch with long polling: until `min_bytes` are there or `max_wait_ms` passes.
async fn fetch(shard: &Rc<Shard>, version: i16, f: FetchRequest) -> (FetchResponse, Held) {
    let deadline = Instant::now() + Duration::from_millis(f.max_wait_ms.clamp(0, 60_000) as u64);
    loop {
        let (resp, bytes, held) = fetch_once(shard, version, &f, deadline).await;
        let has_error = resp.topics.iter().flat_map(|t| &t.partitions).any(|p| p.error_code != code::NONE);
        if bytes >= f.min_bytes.max(0) as usize || has_error || Instant::now() >= deadline {
            return (resp, held);
        }
        drop(held);
        glommio::timer::sleep(Duration::from_millis(5).min(deadline - Instant::now())).await;
    }
}

async fn list_offsets(shard: &Rc<Shard>, version: i16, l: ListOffsetsRequest) -> ListOffsetsResponse {
    let mut topics = Vec::new();
    for t in l.topics {
        let mut partitions = Vec::new();
        for p in t.partitions {
            let target = owner(&t.name, p.partition_index, shard.shards);
            let op =
                ShardOp::ListOffsets { topic: t.name.clone(), partition: p.partition_index, timestamp: p.timestamp };
            let (error_code, found) = match shard.call(target, op).await {
                ShardReply::ListOffsets(Ok(found)) => (code::NONE, found),
                ShardReply::ListOffsets(Err(c)) => (c, None),
                _ => (code::UNKNOWN_SERVER_ERROR, None),
            };
            let (offset, timestamp) = found.unwrap_or((-1, -1));
            partitions.push(ListOffsetsPartitionResponse {
                partition_index: p.partition_index,
                error_code,
                old_style_offsets: if version == 0 && found.is_some() { vec![offset] } else { Vec::new() },
                timestamp,
                offset,
                leader_epoch: 0,
                ..Default::default()
            });
        }
        topics.push(ListOffsetsTopicResponse { name: t.name, partitions, ..Default::default() });
    }
    ListOffsetsResponse { topics, ..Default::default() }
}

async fn create_topics(shard: &Rc<Shard>, c: CreateTopicsRequest) -> CreateTopicsResponse {
    let mut topics = Vec::new();
    for t in c.topics {
        let partitions = match (t.num_partitions, t.assignments.len()) {
            (-1, 0) => shard.effective().num_partitions as i64,
            (-1, n) => n as i64,
            (n, _) => n as i64,
        };
        let result = if t.name == OFFSETS_TOPIC {
            let exists = shard.offsets_partitions().is_some();
            let c = if exists { code::TOPIC_ALREADY_EXISTS } else { code::INVALID_TOPIC_EXCEPTION };
            Err((c, format!("{OFFSETS_TOPIC} is internal: the broker creates it")))
        } else if !matches!(t.replication_factor, -1 | 1) {
            Err((code::INVALID_REPLICATION_FACTOR, "a single broker: the replication factor must be 1".to_string()))
        } else if let Some(k) = t.configs.iter().find(|k| k.value.is_none()) {
            Err((code::INVALID_CONFIG, format!("null value for {}", k.name)))
        } else {
            let configs = t.configs.iter().map(|k| (k.name.clone(), k.value.clone().unwrap_or_default())).collect();
            let op = ShardOp::CreateTopic { name: t.name.clone(), partitions, configs, validate_only: c.validate_only };
            match shard.call(0, op).await {
                ShardReply::Admin(r) => r,
                _ => Err((code::UNKNOWN_SERVER_ERROR, "no reply".to_string())),
            }
        };
        let (error_code, error_message) = match result {
            Ok(()) => (code::NONE, None),
            Err((c, m)) => (c, Some(m)),
        };
        topics.push(CreatableTopicResult {
            name: t.name,
            error_code,
            error_message,
            num_partitions: if error_code == code::NONE { partitions as i32 } else { -1 },
            replication_factor: if error_code == code::NONE { 1 } else { -1 },
            // An empty list, not null: the Java AdminClient reads the list whenever
            // num_partitions is set (v5+).
            configs: Some(Vec::new()),
            ..Default::default()
        });
    }
    CreateTopicsResponse { topics, ..Default::default() }
}
