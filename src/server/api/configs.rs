//! Settings through the admin APIs: DescribeConfigs for topics and this broker (every
//! setting, or those asked for, with Kafka's sources, synonyms, types and documentation), and
//! (Incremental)AlterConfigs, which are control-plane calls to shard 0. The layers themselves
//! are [`crate::server::configs`]'.

use crate::config::{ConfigType, TOPIC_KEYS};
use crate::protocol::admin::{ConfigResourceListed, ListConfigResourcesRequest, ListConfigResourcesResponse};
use crate::protocol::errors as code;
use crate::protocol::messages::*;
use crate::security::acl::{Operation, ResourceType};
use crate::server::api::topics::{on_shard0, outcome};
use crate::server::api::Cx;
use crate::server::configs::*;
use crate::server::control;
use crate::server::errors::AdminError;
use crate::server::registry;
use crate::server::shard::Shard;
use crate::server::BrokerConfig;

/// DescribeConfigs for topics and this broker: every setting (or those asked for; an empty
/// list means all), with its value, source, type, synonyms (on request) and documentation (on
/// request, v3+).
/// May the client do `op` (DESCRIBE_CONFIGS, ALTER_CONFIGS) on a config resource: the cluster
/// for a broker, the topic for a topic.
fn config_allowed(cx: &Cx<'_>, op: Operation, resource_type: i8, name: &str) -> bool {
    match resource_type {
        RESOURCE_TOPIC => cx.allowed(op, ResourceType::Topic, name),
        _ => cx.allowed_on_cluster(op),
    }
}

/// The authorization error of a config resource type.
fn denied(resource_type: i8) -> code::ErrorCode {
    if resource_type == RESOURCE_TOPIC {
        code::TOPIC_AUTHORIZATION_FAILED
    } else {
        code::CLUSTER_AUTHORIZATION_FAILED
    }
}

pub fn describe_configs(cx: &mut Cx<'_>, d: DescribeConfigsRequest) -> DescribeConfigsResponse {
    cx.release_turn();
    let (shard, version) = (cx.shard, cx.version());
    let mut results = Vec::new();
    for r in d.resources {
        let keys = r.configuration_keys.clone().filter(|k| !k.is_empty());
        let wanted = |k: &str| keys.as_ref().is_none_or(|ks| ks.iter().any(|w| w == k));
        let shape = |name: &str,
                     value: Option<String>,
                     kind: ConfigType,
                     read_only: bool,
                     doc: &str,
                     chain: Vec<DescribeConfigsSynonym>| {
            let source = chain.first().map_or(SOURCE_DEFAULT, |s| s.source);
            DescribeConfigsEntry {
                name: name.to_string(),
                value,
                read_only,
                is_default: source == SOURCE_DEFAULT,
                config_source: if version == 0 { -1 } else { source },
                is_sensitive: sensitive(name),
                synonyms: if d.include_synonyms { chain } else { Vec::new() },
                config_type: kind as i8,
                documentation: (d.include_documentation && version >= 3).then(|| doc.to_string()),
                ..Default::default()
            }
        };
        let result = match r.resource_type {
            t if !config_allowed(cx, Operation::DescribeConfigs, t, &r.resource_name) => DescribeConfigsResult {
                error_code: denied(t),
                error_message: Some("Authorization failed.".into()),
                resource_type: r.resource_type,
                resource_name: r.resource_name.clone(),
                ..Default::default()
            },
            RESOURCE_TOPIC => match shard.topic(&r.resource_name, |t| t.clone()) {
                None => DescribeConfigsResult {
                    error_code: code::UNKNOWN_TOPIC_OR_PARTITION,
                    error_message: Some(format!("topic {} does not exist", r.resource_name)),
                    ..Default::default()
                },
                Some(t) => {
                    let values = t.config.describe();
                    let dynamic = shard.dynamic();
                    let configs = TOPIC_KEYS
                        .iter()
                        .filter(|k| wanted(k.name))
                        .map(|k| {
                            let mut chain = Vec::new();
                            if let Some(v) = t.overrides.get(k.name) {
                                chain.push(synonym(k.name, v, SOURCE_TOPIC));
                            }
                            // Its broker synonyms, then (tidemark's extension) its own name.
                            let mut names: Vec<&str> = k.synonyms.iter().map(|s| s.name).collect();
                            if !names.contains(&k.name) {
                                names.push(k.name);
                            }
                            broker_chain(shard.config(), &dynamic, &names, &mut chain);
                            let default_name = k.synonyms.first().map_or(k.name, |s| s.name);
                            chain.push(synonym(default_name, k.default, SOURCE_DEFAULT));
                            shape(k.name, Some(values[k.name].clone()), k.kind, false, k.doc, chain)
                        })
                        .collect();
                    DescribeConfigsResult { configs, ..Default::default() }
                }
            },
            RESOURCE_BROKER => describe_broker(shard, &r.resource_name, &wanted, &shape),
            other => DescribeConfigsResult {
                error_code: code::INVALID_REQUEST,
                error_message: Some(format!("Unsupported resource type {other}")),
                ..Default::default()
            },
        };
        results.push(DescribeConfigsResult {
            resource_type: r.resource_type,
            resource_name: r.resource_name,
            ..result
        });
    }
    DescribeConfigsResponse { results, ..Default::default() }
}

fn synonym(name: &str, value: &str, source: i8) -> DescribeConfigsSynonym {
    DescribeConfigsSynonym { name: name.to_string(), value: Some(value.to_string()), source, ..Default::default() }
}

/// The layered values of broker settings `names` (in their priority order), highest layer
/// first within each name, appended to `chain`.
fn broker_chain(
    config: &BrokerConfig,
    dynamic: &DynamicConfigs,
    names: &[&str],
    chain: &mut Vec<DescribeConfigsSynonym>,
) {
    for name in names {
        for (layer, map) in layers(config, dynamic) {
            if let Some(v) = map.get(*name) {
                chain.push(synonym(name, v, layer.source()));
            }
        }
    }
}

type Shape<'a> =
    dyn Fn(&str, Option<String>, ConfigType, bool, &str, Vec<DescribeConfigsSynonym>) -> DescribeConfigsEntry + 'a;

/// DescribeConfigs of a broker resource: `""` lists the cluster-wide dynamic defaults set;
/// this node's id every broker setting; another id is INVALID_REQUEST, as in Kafka.
fn describe_broker(
    shard: &Shard,
    name: &str,
    wanted: &dyn Fn(&str) -> bool,
    shape: &Shape<'_>,
) -> DescribeConfigsResult {
    let dynamic = shard.dynamic();
    if name.is_empty() {
        let configs = dynamic
            .default
            .iter()
            .filter(|(k, _)| wanted(k))
            .map(|(k, v)| {
                let (kind, dynamic_key, doc) = broker_key(k).unwrap_or((ConfigType::String, true, ""));
                shape(k, Some(v.clone()), kind, !dynamic_key, doc, vec![synonym(k, v, SOURCE_DYNAMIC_DEFAULT)])
            })
            .collect();
        return DescribeConfigsResult { configs, ..Default::default() };
    }
    if name.trim().parse::<i32>().ok() != Some(shard.config().node_id) {
        return DescribeConfigsResult {
            error_code: code::INVALID_REQUEST,
            error_message: Some(format!(
                "Unexpected broker id, expected {} or empty string, but received {name}",
                shard.config().node_id
            )),
            ..Default::default()
        };
    }
    let effective = shard.effective();
    let defaults = effective.log_defaults.describe();
    let mut configs = Vec::new();
    // Every broker setting but those a listener may have its own value of (below, when set).
    for b in registry::all().filter(|b| !b.per_listener && wanted(b.name)) {
        let mut chain = Vec::new();
        broker_chain(shard.config(), &dynamic, &[b.name], &mut chain);
        let value = b.value(shard.config(), &effective);
        if let Some(v) = &value {
            if chain.is_empty() {
                chain.push(synonym(b.name, v, SOURCE_DEFAULT));
            }
        }
        configs.push(shape(b.name, value, b.kind, !b.dynamic(), b.doc, chain));
    }
    // TLS and other listener settings that are set (a key store's key is sensitive: no value).
    let set: std::collections::BTreeSet<&String> = layers(shard.config(), &dynamic)
        .into_iter()
        .flat_map(|(_, m)| m.keys())
        .filter(|k| listener_key(k).is_some() || registry::broker(k).is_some_and(|s| s.per_listener))
        .collect();
    for k in set.into_iter().filter(|k| wanted(k)) {
        let Some((kind, dynamic_key, doc)) = broker_key(k) else { continue };
        let mut chain = Vec::new();
        broker_chain(shard.config(), &dynamic, &[k.as_str()], &mut chain);
        let value = lookup(shard.config(), &dynamic, k).map(|(_, v)| v.clone()).filter(|_| !sensitive(k));
        if sensitive(k) {
            chain.iter_mut().for_each(|s| s.value = None);
        }
        configs.push(shape(k, value, kind, !dynamic_key, doc, chain));
    }
    // Topic defaults under their broker names: the first synonym carries the value in force,
    // the others the value set for them, if any.
    for k in TOPIC_KEYS {
        for (i, s) in k.synonyms.iter().enumerate() {
            if !wanted(s.name) || (k.name == s.name && registry::broker(s.name).is_some()) {
                continue;
            }
            let rest: Vec<&str> = k.synonyms[i..].iter().map(|s| s.name).collect();
            let mut chain = Vec::new();
            broker_chain(shard.config(), &dynamic, &rest, &mut chain);
            let value = if i == 0 {
                chain.push(synonym(s.name, k.default, SOURCE_DEFAULT));
                Some(defaults[k.name].clone())
            } else {
                lookup(shard.config(), &dynamic, s.name).map(|(_, v)| v.clone())
            };
            configs.push(shape(s.name, value, k.kind, i != 0, k.doc, chain));
        }
    }
    configs.sort_by(|a, b| a.name.cmp(&b.name));
    configs.dedup_by(|a, b| a.name == b.name);
    DescribeConfigsResult { configs, ..Default::default() }
}

/// ListConfigResources (74, KIP-1142), as Kafka's `handleListConfigResources`: DESCRIBE_CONFIGS
/// on the cluster (else CLUSTER_AUTHORIZATION_FAILED); v0 lists client metrics resources, v1
/// the types asked (none asked: every type it lists), a type it does not list
/// UNSUPPORTED_VERSION. Listed, in Kafka's order: groups with settings of their own and client
/// metrics subscriptions (tidemark has neither kind of setting: none), each broker's id as a
/// broker logger and as a broker, and every topic, internal ones included.
pub async fn list_config_resources(cx: &mut Cx<'_>, r: ListConfigResourcesRequest) -> ListConfigResourcesResponse {
    const BROKER_LOGGER: i8 = 8;
    const CLIENT_METRICS: i8 = 16;
    const GROUP: i8 = 32;
    if !cx.allowed_on_cluster(Operation::DescribeConfigs) {
        cx.release_turn();
        return ListConfigResourcesResponse { error_code: code::CLUSTER_AUTHORIZATION_FAILED, ..Default::default() };
    }
    let listed: &[i8] = if cx.version() >= 1 {
        &[RESOURCE_TOPIC, RESOURCE_BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP]
    } else {
        &[CLIENT_METRICS]
    };
    let asked = if r.resource_types.is_empty() { listed.to_vec() } else { r.resource_types };
    if asked.iter().any(|t| !listed.contains(t)) {
        cx.release_turn();
        return ListConfigResourcesResponse { error_code: code::UNSUPPORTED_VERSION, ..Default::default() };
    }
    let mut config_resources = Vec::new();
    let mut add = |resource_type: i8, names: &[String]| {
        if asked.contains(&resource_type) {
            config_resources.extend(names.iter().map(|n| ConfigResourceListed {
                resource_name: n.clone(),
                resource_type,
                ..Default::default()
            }));
        }
    };
    let brokers: Vec<String> = if asked.contains(&BROKER_LOGGER) || asked.contains(&RESOURCE_BROKER) {
        super::cluster::broker_ids(cx).await.iter().map(i32::to_string).collect()
    } else {
        Vec::new()
    };
    add(BROKER_LOGGER, &brokers);
    add(RESOURCE_BROKER, &brokers);
    add(RESOURCE_TOPIC, &cx.shard.topic_names());
    cx.release_turn();
    ListConfigResourcesResponse { config_resources, ..Default::default() }
}

/// AlterConfigs (the given set replaces the resource's settings) and IncrementalAlterConfigs
/// (SET, DELETE, and APPEND/SUBTRACT on list settings), for topics and for this broker's
/// dynamic settings (resource `""`: the cluster-wide defaults; this node's id: its own). Every
/// value is validated before anything changes; a change reaches every shard at once. Kafka's
/// request checks first: a resource named twice, a key given twice or a null value to set are
/// INVALID_REQUEST.
pub async fn alter_configs(cx: &mut Cx<'_>, a: AlterConfigsRequest) -> AlterConfigsResponse {
    let shard = cx.shard;
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
        let (error_code, error_message) =
            if config_allowed(cx, Operation::AlterConfigs, r.resource_type, &r.resource_name) {
                outcome(alter_resource(shard, incremental, validate_only, &r, twice).await)
            } else {
                (denied(r.resource_type), Some("Authorization failed.".to_string()))
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
    shard: &std::rc::Rc<Shard>,
    incremental: bool,
    validate_only: bool,
    r: &AlterConfigsResource,
    twice: bool,
) -> control::AdminResult {
    if twice {
        return Err(AdminError::new(code::INVALID_REQUEST, "Each resource must appear at most once.".to_string()));
    }
    let mut keys = std::collections::HashSet::new();
    if r.configs.iter().any(|k| !keys.insert(k.name.clone())) {
        return Err(AdminError::new(code::INVALID_REQUEST, "Error due to duplicate config keys".to_string()));
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
            (_, op, _) => {
                return Err(AdminError::new(code::INVALID_REQUEST, format!("Unknown operation {op} for {}", k.name)))
            }
        };
        ops.push((k.name.clone(), op));
    }
    if !nulls.is_empty() {
        return Err(AdminError::new(
            code::INVALID_REQUEST,
            format!("Null value not supported for : {}", nulls.join(", ")),
        ));
    }
    let replace = !incremental;
    let op = match r.resource_type {
        RESOURCE_TOPIC if crate::server::is_internal_topic(&r.resource_name) => {
            // Retention there would delete live state; its settings are the broker's.
            let message = format!("{} is internal: its settings cannot be changed", r.resource_name);
            return Err(AdminError::new(code::INVALID_REQUEST, message));
        }
        RESOURCE_TOPIC if r.resource_name.is_empty() => {
            return Err(AdminError::new(code::INVALID_REQUEST, "Default topic resources are not allowed.".to_string()));
        }
        RESOURCE_TOPIC => {
            let call = control::AlterTopic { name: r.resource_name.clone(), ops, replace, validate_only };
            return on_shard0(shard, call).await;
        }
        RESOURCE_BROKER => {
            let node = if r.resource_name.is_empty() {
                false
            } else {
                match r.resource_name.trim().parse::<i32>() {
                    Ok(id) if id == shard.config().node_id => true,
                    Ok(id) => {
                        let msg =
                            format!("Unexpected broker id, expected {}, but received {id}", shard.config().node_id);
                        return Err(AdminError::new(code::INVALID_REQUEST, msg));
                    }
                    Err(_) => {
                        let msg = format!("Node id must be an integer, but it is: {}", r.resource_name);
                        return Err(AdminError::new(code::INVALID_REQUEST, msg));
                    }
                }
            };
            control::AlterBroker { node, ops, replace, validate_only }
        }
        other => return Err(AdminError::new(code::INVALID_REQUEST, format!("Unknown resource type {other}"))),
    };
    on_shard0(shard, op).await
}
