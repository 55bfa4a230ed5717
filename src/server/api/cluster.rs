//! What a client learns about the cluster: ApiVersions, Metadata (with topic auto-creation),
//! DescribeTopicPartitions and DescribeCluster. A standalone node is the whole cluster, its
//! own controller and every partition's only replica; a clustered node reports the metadata
//! image's brokers, controller and leaderships.

use crate::protocol::admin::{
    DescribeClusterBroker, DescribeClusterRequest, DescribeClusterResponse, DescribeTopicPartitionsCursor,
    DescribeTopicPartitionsPartition, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse,
    DescribeTopicPartitionsTopicResponse,
};
use crate::protocol::api_versions_response;
use crate::protocol::errors::{self as code, ErrorCode};
use crate::protocol::messages::*;
use crate::security::acl::{Operation, ResourceType};
use crate::server::api::Cx;
use crate::server::control::ensure_topic;
use crate::types::Uuid;

/// ApiVersions: the table the decoder dispatches on, and the feature levels. No side effects.
pub fn api_versions(cx: &mut Cx<'_>, r: ApiVersionsRequest) -> ApiVersionsResponse {
    cx.release_turn();
    // v3+ name the client's software; Kafka (`ApiVersionsRequest.isValid`) answers a name or
    // version outside [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])? with INVALID_REQUEST and no table.
    if cx.header.api_version >= 3
        && !(software_word(&r.client_software_name) && software_word(&r.client_software_version))
    {
        return ApiVersionsResponse { error_code: code::INVALID_REQUEST, ..Default::default() };
    }
    let mut answer = api_versions_response(code::NONE);
    if cx.session.on_controller_listener {
        answer.api_keys.retain(|k| super::CONTROLLER_APIS.contains(&k.api_key));
    }
    super::features::advertise(cx, &mut answer);
    answer
}

/// Whether `s` is a client software name or version as Kafka takes them: letters, digits,
/// `-` and `.`, beginning and ending with a letter or digit.
fn software_word(s: &str) -> bool {
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    alnum(s.chars().next())
        && alnum(s.chars().last())
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
}

/// The topic names a Metadata request asks about (every topic when it names none); the topics
/// it asks about by id that are unknown or not describable go straight into `topics`.
fn requested_names(cx: &Cx<'_>, m: &MetadataRequest, topics: &mut Vec<MetadataTopic>) -> Vec<String> {
    let shard = cx.shard;
    match &m.topics {
        None => shard.topic_names(),
        Some(ts) => {
            let mut names = Vec::new();
            for t in ts {
                let id = Uuid(t.topic_id);
                match (&t.name, id.is_zero()) {
                    // Asked by id and not describable: the id, never the name (Kafka's rule).
                    (_, false)
                        if shard
                            .topic_name(id)
                            .is_some_and(|n| !cx.allowed(Operation::Describe, ResourceType::Topic, &n)) =>
                    {
                        topics.push(MetadataTopic {
                            error_code: code::TOPIC_AUTHORIZATION_FAILED,
                            topic_id: id.0,
                            ..Default::default()
                        })
                    }
                    (_, false) => match shard.topic_name(id) {
                        Some(name) => names.push(name),
                        None => topics.push(MetadataTopic {
                            error_code: code::UNKNOWN_TOPIC_ID,
                            topic_id: id.0,
                            ..Default::default()
                        }),
                    },
                    (Some(name), true) => names.push(name.clone()),
                    (None, true) => {
                        topics.push(MetadataTopic { error_code: code::INVALID_REQUEST, ..Default::default() })
                    }
                }
            }
            names
        }
    }
}

/// One named topic of a Metadata answer (`None`: left out, a topic of a full listing the
/// client may not describe), auto-created first when the request allows it.
async fn describe_topic(cx: &mut Cx<'_>, m: &MetadataRequest, name: String, all_topics: bool) -> Option<MetadataTopic> {
    let shard = cx.shard;
    // DESCRIBE on the topic, before anything is said of it: every topic listed leaves out
    // those denied; one asked for is TOPIC_AUTHORIZATION_FAILED, exists or not.
    if !cx.allowed(Operation::Describe, ResourceType::Topic, &name) {
        if !all_topics {
            return Some(MetadataTopic {
                error_code: code::TOPIC_AUTHORIZATION_FAILED,
                name: Some(name),
                ..Default::default()
            });
        }
        return None;
    }
    if crate::storage::topics::validate_topic_name(&name).is_err() {
        return Some(MetadataTopic {
            error_code: code::INVALID_TOPIC_EXCEPTION,
            name: Some(name),
            ..Default::default()
        });
    }
    let may_create =
        || cx.allowed_on_cluster(Operation::Create) || cx.allowed(Operation::Create, ResourceType::Topic, &name);
    if !shard.has_topic(&name) && m.allow_auto_topic_creation && !all_topics && !may_create() {
        return Some(MetadataTopic {
            error_code: code::TOPIC_AUTHORIZATION_FAILED,
            name: Some(name),
            ..Default::default()
        });
    }
    let exists = shard.has_topic(&name)
        || (m.allow_auto_topic_creation && m.topics.is_some() && ensure_topic(shard, &name).await);
    match shard.topic(&name, |t| (t.partitions, t.id)).filter(|_| exists) {
        None => {
            Some(MetadataTopic { error_code: code::UNKNOWN_TOPIC_OR_PARTITION, name: Some(name), ..Default::default() })
        }
        Some((n, id)) => Some(MetadataTopic {
            error_code: code::NONE,
            is_internal: crate::server::is_internal_topic(&name),
            // KIP-430, when asked.
            topic_authorized_operations: if m.include_topic_authorized_operations {
                cx.authorized_operations(ResourceType::Topic, &name)
            } else {
                i32::MIN
            },
            partitions: (0..n as i32)
                .filter_map(|p| {
                    let l = shard.leadership(&name, p)?;
                    Some(MetadataPartition {
                        error_code: if l.leader < 0 { code::LEADER_NOT_AVAILABLE } else { code::NONE },
                        partition_index: p,
                        leader_id: l.leader,
                        leader_epoch: l.leader_epoch,
                        replica_nodes: l.replicas,
                        isr_nodes: l.isr,
                        ..Default::default()
                    })
                })
                .collect(),
            name: Some(name),
            topic_id: id.0,
            ..Default::default()
        }),
    }
}

/// Metadata: every topic (or those named, by name or from v12 by id (KIP-516), auto-created
/// by name when the client allows it) with each partition's leader, epoch, replicas and ISR
/// ([`crate::server::shard::Shard::leadership`]), and each topic's id (v10+). Auto-creation
/// completes before the connection's next request.
pub async fn metadata(cx: &mut Cx<'_>, m: MetadataRequest) -> MetadataResponse {
    let version = cx.version();
    let mut topics: Vec<MetadataTopic> = Vec::new();
    // Names only before v12 (Kafka refuses the whole request: every topic INVALID_REQUEST,
    // as asked, with no partitions).
    let by_id_too_early = |t: &MetadataRequestTopic| t.name.is_none() || !Uuid(t.topic_id).is_zero();
    if let Some(ts) = m.topics.as_ref().filter(|ts| version < 12 && ts.iter().any(by_id_too_early)) {
        let refused = |t: &MetadataRequestTopic| MetadataTopic {
            error_code: code::INVALID_REQUEST,
            name: Some(t.name.clone().unwrap_or_default()),
            topic_id: t.topic_id,
            ..Default::default()
        };
        topics = ts.iter().map(refused).collect();
    }
    if topics.is_empty() {
        for name in requested_names(cx, &m, &mut topics) {
            let all_topics = m.topics.is_none();
            topics.extend(describe_topic(cx, &m, name, all_topics).await);
        }
    }
    let (controller_id, listed, cluster_id) = cluster_view(cx).await;
    let brokers = listed
        .into_iter()
        .map(|b| MetadataBroker { node_id: b.id, host: b.host, port: b.port, rack: b.rack, ..Default::default() })
        .collect();
    MetadataResponse {
        brokers,
        cluster_id: Some(cluster_id),
        controller_id,
        topics,
        cluster_authorized_operations: if m.include_cluster_authorized_operations {
            cluster_operations(cx)
        } else {
            i32::MIN
        },
        ..Default::default()
    }
}

/// A broker as Metadata and DescribeCluster list it.
struct Listed {
    id: i32,
    host: String,
    port: i32,
    rack: Option<String>,
}

/// What Metadata and DescribeCluster say of the cluster: (controller, brokers, cluster id).
/// Standalone: this node, its own controller, with its directory's cluster id. Clustered: the
/// active controller as this node knows it (-1 during an election), the unfenced brokers
/// registered with the metadata quorum, each at the listener the request came in on (or its
/// first), this node always among them, by id, and the quorum's cluster id once committed.
async fn cluster_view(cx: &Cx<'_>) -> (i32, Vec<Listed>, String) {
    let c = cx.shard.config();
    let me = || Listed {
        id: c.node_id,
        host: cx.listener.advertised_host.clone(),
        port: cx.listener.advertised_port,
        rack: None,
    };
    if c.cluster.is_none() {
        return (c.node_id, vec![me()], cx.shard.cluster_id().to_string());
    }
    let view = cx.shard.call(0, crate::server::control::quorum::QuorumStatus).await.ok().flatten();
    let (leader, registered, cluster_id) =
        view.map_or((None, Vec::new(), None), |v| (v.leader, v.brokers, v.cluster_id));
    let cluster_id = cluster_id.unwrap_or_else(|| cx.shard.cluster_id().to_string());
    let name = &cx.listener.name;
    let mut out: Vec<Listed> = registered
        .iter()
        .filter_map(|b| {
            let r = &b.registration;
            let e = r.listeners.iter().find(|e| e.name == *name).or(r.listeners.first())?;
            Some(Listed { id: r.id, host: e.host.clone(), port: e.port as i32, rack: r.rack.clone() })
        })
        .collect();
    if !out.iter().any(|b| b.id == c.node_id) {
        out.push(me());
    }
    out.sort_by_key(|b| b.id);
    // The controller a client is told of is a broker it can reach: the active controller when
    // it is one (combined mode), else this broker, which forwards what a controller does (as
    // Kafka's brokers name a live broker, and forward).
    let controller = match leader {
        Some(l) if out.iter().any(|b| b.id as u64 == l) => l as i32,
        Some(_) => c.node_id,
        None => -1,
    };
    (controller, out, cluster_id)
}

/// The quorum as a client of the CONTROLLER listener sees it (DescribeCluster with endpoint
/// type CONTROLLER, as Kafka's controllers answer it): the voters at their controller listener
/// addresses, and the active controller.
async fn controller_view(cx: &Cx<'_>) -> (i32, Vec<Listed>, String) {
    let view = cx.shard.call(0, crate::server::control::quorum::QuorumStatus).await.ok().flatten();
    let (leader, voters, cluster_id) =
        view.map_or((None, Default::default(), None), |v| (v.leader, v.voters, v.cluster_id));
    let listed = voters
        .into_iter()
        .filter_map(|(id, addr)| {
            let (host, port) = addr.rsplit_once(':')?;
            let host = host.trim_start_matches('[').trim_end_matches(']').to_string();
            Some(Listed { id: id as i32, host, port: port.parse().ok()?, rack: None })
        })
        .collect();
    let cluster_id = cluster_id.unwrap_or_else(|| cx.shard.cluster_id().to_string());
    (leader.map_or(-1, |l| l as i32), listed, cluster_id)
}

/// The ids of the brokers a client of this listener sees (those of [`cluster_view`]).
pub(super) async fn broker_ids(cx: &Cx<'_>) -> Vec<i32> {
    cluster_view(cx).await.1.into_iter().map(|b| b.id).collect()
}

/// Where a client of this listener reaches node `id` (this node, or an unfenced broker of
/// the cluster): (id, host, port).
pub(super) async fn node_endpoint(cx: &Cx<'_>, id: i32) -> Option<(i32, String, i32)> {
    let (_, listed, _) = cluster_view(cx).await;
    listed.into_iter().find(|b| b.id == id).map(|b| (b.id, b.host, b.port))
}

/// KIP-951: who leads a partition now (for an answer refusing it with NOT_LEADER_OR_FOLLOWER),
/// if anyone does.
pub(super) fn current_leader(
    shard: &crate::server::shard::Shard,
    topic: &str,
    partition: i32,
) -> Option<LeaderIdAndEpoch> {
    let l = shard.leadership(topic, partition)?;
    (l.leader >= 0).then(|| LeaderIdAndEpoch {
        leader_id: l.leader,
        leader_epoch: l.leader_epoch,
        ..Default::default()
    })
}

/// KIP-951: the endpoints of the leaders an answer names, as a client of this listener reaches
/// them.
pub(super) async fn leader_endpoints(cx: &Cx<'_>, leaders: std::collections::BTreeSet<i32>) -> Vec<NodeEndpoint> {
    if leaders.is_empty() {
        return Vec::new();
    }
    let (_, listed, _) = cluster_view(cx).await;
    listed
        .into_iter()
        .filter(|b| leaders.contains(&b.id))
        .map(|b| NodeEndpoint { node_id: b.id, host: b.host, port: b.port, rack: b.rack, ..Default::default() })
        .collect()
}

/// KIP-430: the cluster operations the client may do (0 without DESCRIBE on the cluster).
fn cluster_operations(cx: &Cx<'_>) -> i32 {
    if cx.allowed_on_cluster(Operation::Describe) {
        cx.authorized_operations(ResourceType::Cluster, crate::security::acl::CLUSTER_NAME)
    } else {
        0
    }
}

/// DescribeCluster: a standalone node is the whole cluster (and its controller); a clustered
/// node reports the active controller as it knows it (-1 during an election) and the brokers
/// registered with the metadata quorum, each at the listener the request came in on (or its
/// first). On a controller's CONTROLLER listener it answers endpoint type CONTROLLER instead:
/// the voters at their controller listeners and the active controller. The other type gets
/// MISMATCHED_ENDPOINT_TYPE (v1+), an unknown type UNSUPPORTED_ENDPOINT_TYPE (INVALID_REQUEST
/// at v0), as Kafka answers.
pub async fn describe_cluster(cx: &mut Cx<'_>, req: DescribeClusterRequest) -> DescribeClusterResponse {
    cx.release_turn();
    const MISMATCHED_ENDPOINT_TYPE: ErrorCode = ErrorCode(114);
    const UNSUPPORTED_ENDPOINT_TYPE: ErrorCode = ErrorCode(115);
    let version = cx.version();
    let controllers = cx.session.on_controller_listener;
    let error = match req.endpoint_type {
        1 if !controllers => None,
        2 if controllers => None,
        1 | 2 => Some((
            if version == 0 { code::INVALID_REQUEST } else { MISMATCHED_ENDPOINT_TYPE },
            format!(
                "The request was sent to an endpoint of type {}, but we wanted an endpoint of type {}",
                if controllers { "CONTROLLER" } else { "BROKER" },
                if controllers { "BROKER" } else { "CONTROLLER" }
            ),
        )),
        t => Some((
            if version == 0 { code::INVALID_REQUEST } else { UNSUPPORTED_ENDPOINT_TYPE },
            format!("Unsupported endpoint type {t}"),
        )),
    };
    match error {
        Some((error_code, message)) => {
            DescribeClusterResponse { error_code, error_message: Some(message), ..Default::default() }
        }
        None => {
            let (controller_id, listed, cluster_id) =
                if controllers { controller_view(cx).await } else { cluster_view(cx).await };
            let brokers = listed
                .into_iter()
                .map(|b| DescribeClusterBroker {
                    broker_id: b.id,
                    host: b.host,
                    port: b.port,
                    rack: b.rack,
                    ..Default::default()
                })
                .collect();
            DescribeClusterResponse {
                endpoint_type: req.endpoint_type,
                cluster_id,
                controller_id,
                brokers,
                cluster_authorized_operations: if req.include_cluster_authorized_operations {
                    cluster_operations(cx)
                } else {
                    i32::MIN
                },
                ..Default::default()
            }
        }
    }
}

/// The most partitions one DescribeTopicPartitions answer describes, whatever it asks (Kafka's
/// `max.request.partition.size.limit` default).
const DESCRIBE_PARTITIONS_LIMIT: i32 = 2000;

/// DescribeTopicPartitions (KIP-966), as Kafka's broker answers it: the topics asked (none: all
/// topics) in name order from the cursor's, their partitions from the cursor's, at most
/// `response_partition_limit` partitions (capped at 2000) in one answer, with a cursor to the
/// next one when some are left. A cursor naming a topic not asked for, or a negative partition,
/// refuses the request (INVALID_REQUEST on every topic asked). Asked topics that do not exist
/// get UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an invalid name).
pub fn describe_topic_partitions(
    cx: &mut Cx<'_>,
    req: DescribeTopicPartitionsRequest,
) -> DescribeTopicPartitionsResponse {
    cx.release_turn();
    let shard = cx.shard;
    let all = req.topics.is_empty();
    let (cursor_topic, cursor_partition) =
        req.cursor.as_ref().map_or((String::new(), 0), |c| (c.topic_name.clone(), c.partition_index));
    let mut names: Vec<String> =
        if all { shard.topic_names() } else { req.topics.iter().map(|t| t.name.clone()).collect() };
    names.retain(|n| *n >= cursor_topic);
    names.sort();
    names.dedup();
    let bad_cursor = req.cursor.is_some() && ((!all && !names.contains(&cursor_topic)) || cursor_partition < 0);
    if bad_cursor {
        let refused = |name: &String| DescribeTopicPartitionsTopicResponse {
            error_code: code::INVALID_REQUEST,
            name: Some(name.clone()),
            ..Default::default()
        };
        let topics = req.topics.iter().map(|t| refused(&t.name)).collect();
        return DescribeTopicPartitionsResponse { topics, ..Default::default() };
    }
    let mut remaining = req.response_partition_limit.clamp(1, DESCRIBE_PARTITIONS_LIMIT);
    let mut resp = DescribeTopicPartitionsResponse::default();
    for name in names {
        if !cx.allowed(Operation::Describe, ResourceType::Topic, &name) {
            if !all {
                resp.topics.push(DescribeTopicPartitionsTopicResponse {
                    error_code: code::TOPIC_AUTHORIZATION_FAILED,
                    name: Some(name),
                    topic_authorized_operations: i32::MIN,
                    ..Default::default()
                });
            }
            continue;
        }
        if remaining == 0 {
            // The answer is full: the next one starts at this topic.
            resp.next_cursor = Some(DescribeTopicPartitionsCursor { topic_name: name, ..Default::default() });
            break;
        }
        let Some((count, id)) = shard.topic(&name, |t| (t.partitions as i32, t.id)) else {
            if !all {
                let invalid = crate::storage::topics::validate_topic_name(&name).is_err();
                resp.topics.push(DescribeTopicPartitionsTopicResponse {
                    error_code: if invalid { code::INVALID_TOPIC_EXCEPTION } else { code::UNKNOWN_TOPIC_OR_PARTITION },
                    is_internal: crate::server::is_internal_topic(&name),
                    name: Some(name),
                    ..Default::default()
                });
            }
            continue;
        };
        let first = if name == cursor_topic { cursor_partition } else { 0 };
        let upper = count.min(first.saturating_add(remaining));
        let partitions: Vec<_> = (first..upper)
            .filter_map(|p| {
                let l = shard.leadership(&name, p)?;
                Some(DescribeTopicPartitionsPartition {
                    error_code: if l.leader < 0 { code::LEADER_NOT_AVAILABLE } else { code::NONE },
                    partition_index: p,
                    leader_id: l.leader,
                    leader_epoch: l.leader_epoch,
                    replica_nodes: l.replicas,
                    isr_nodes: l.isr,
                    eligible_leader_replicas: Some(Vec::new()),
                    last_known_elr: Some(Vec::new()),
                    ..Default::default()
                })
            })
            .collect();
        remaining -= partitions.len() as i32;
        resp.topics.push(DescribeTopicPartitionsTopicResponse {
            is_internal: crate::server::is_internal_topic(&name),
            name: Some(name.clone()),
            topic_id: id.0,
            partitions,
            topic_authorized_operations: cx.authorized_operations(ResourceType::Topic, &name),
            ..Default::default()
        });
        if upper < count {
            resp.next_cursor =
                Some(DescribeTopicPartitionsCursor { topic_name: name, partition_index: upper, ..Default::default() });
            break;
        }
    }
    resp
}
