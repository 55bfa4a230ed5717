//! Settings as Kafka's admin APIs see them: the broker's settings in layers, and
//! DescribeConfigs for topics and brokers.
//!
//! Layers, highest first (Kafka's order): this node's dynamic settings (resource `"<node id>"`),
//! the cluster-wide dynamic defaults (resource `""`), the static settings (`--set`,
//! `--config`), the built-in defaults. Dynamic settings are changed by (Incremental)AlterConfigs
//! on shard 0, persisted in `<data-dir>/broker-configs` and applied on every shard at once
//! ([`Effective`]). A topic setting's default comes from the first of its broker synonyms set in
//! the merged layers (`log.retention.ms` before `log.retention.minutes` before
//! `log.retention.hours`), as in Kafka.

use crate::config::{topic_key, topic_key_of_broker_name, ConfigError, ConfigType, LogConfig, TOPIC_KEYS};
use crate::protocol::errors as code;
use crate::protocol::messages::{
    DescribeConfigsEntry, DescribeConfigsRequest, DescribeConfigsResponse, DescribeConfigsResult,
    DescribeConfigsSynonym,
};
use crate::server::shard::Shard;
use crate::server::BrokerConfig;
use std::collections::BTreeMap;
use std::rc::Rc;

/// Kafka's ConfigResource types.
pub const RESOURCE_TOPIC: i8 = 2;
pub const RESOURCE_BROKER: i8 = 4;
/// Kafka's ConfigSource values.
const SOURCE_TOPIC: i8 = 1;
const SOURCE_DYNAMIC_BROKER: i8 = 2;
const SOURCE_DYNAMIC_DEFAULT: i8 = 3;
const SOURCE_STATIC: i8 = 4;
const SOURCE_DEFAULT: i8 = 5;

/// The file of the dynamic broker settings in the data directory.
pub const BROKER_CONFIGS_FILE: &str = "broker-configs";

/// Dynamic broker settings: the cluster-wide defaults (resource `""`) and this node's
/// (resource `"<node id>"`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DynamicConfigs {
    pub default: BTreeMap<String, String>,
    pub node: BTreeMap<String, String>,
}

impl DynamicConfigs {
    /// `tidemark-broker-configs 1`, then `default <key>=<value>` and `node <key>=<value>`
    /// lines, then `crc32c=<hex>` over everything before it (docs/format.md section 9c).
    pub fn encode(&self) -> String {
        let mut s = String::from("tidemark-broker-configs 1\n");
        for (scope, map) in [("default", &self.default), ("node", &self.node)] {
            for (k, v) in map {
                s.push_str(&format!("{scope} {k}={v}\n"));
            }
        }
        let crc = crc32c::crc32c(s.as_bytes());
        s.push_str(&format!("crc32c={crc:08x}\n"));
        s
    }

    pub fn decode(text: &str) -> Result<DynamicConfigs, String> {
        let at = text.rfind("crc32c=").ok_or("no checksum line")?;
        let (body, crc_line) = text.split_at(at);
        let crc = u32::from_str_radix(crc_line.trim().trim_start_matches("crc32c="), 16).map_err(|_| "bad checksum")?;
        if crc32c::crc32c(body.as_bytes()) != crc {
            return Err("checksum mismatch".into());
        }
        let mut lines = body.lines();
        if lines.next() != Some("tidemark-broker-configs 1") {
            return Err("unknown version".into());
        }
        let mut d = DynamicConfigs::default();
        for l in lines {
            let (scope, kv) = l.split_once(' ').ok_or("bad line")?;
            let (k, v) = kv.split_once('=').ok_or("bad line")?;
            let map = match scope {
                "default" => &mut d.default,
                "node" => &mut d.node,
                _ => return Err(format!("unknown scope {scope}")),
            };
            map.insert(k.to_string(), v.to_string());
        }
        Ok(d)
    }

    /// Read the file; none means no dynamic settings.
    pub fn load(data_dir: &std::path::Path) -> anyhow::Result<DynamicConfigs> {
        let path = data_dir.join(BROKER_CONFIGS_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => DynamicConfigs::decode(&text).map_err(|e| anyhow::anyhow!("corrupt {}: {e}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(DynamicConfigs::default()),
            Err(e) => Err(anyhow::anyhow!("reading {}: {e}", path.display())),
        }
    }
}

/// Which layer set a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layer {
    Node,
    Default,
    Static,
}

impl Layer {
    fn source(self) -> i8 {
        match self {
            Layer::Node => SOURCE_DYNAMIC_BROKER,
            Layer::Default => SOURCE_DYNAMIC_DEFAULT,
            Layer::Static => SOURCE_STATIC,
        }
    }
}

/// The layers of raw settings, highest first.
fn layers<'a>(config: &'a BrokerConfig, dynamic: &'a DynamicConfigs) -> [(Layer, &'a BTreeMap<String, String>); 3] {
    [(Layer::Node, &dynamic.node), (Layer::Default, &dynamic.default), (Layer::Static, &config.settings)]
}

/// The value of a broker setting in the highest layer that sets it.
fn lookup<'a>(config: &'a BrokerConfig, dynamic: &'a DynamicConfigs, name: &str) -> Option<(Layer, &'a String)> {
    layers(config, dynamic).into_iter().find_map(|(layer, map)| map.get(name).map(|v| (layer, v)))
}

/// Topic defaults from raw broker settings (`get` looks a name up in the merged layers): each
/// topic setting takes the first of its broker synonyms that is set (converted from hours or
/// minutes), or tidemark's extension, the topic name itself, or the built-in default.
pub fn topic_defaults<'a>(get: impl Fn(&str) -> Option<&'a String>) -> Result<LogConfig, ConfigError> {
    let mut c = LogConfig::default();
    for k in TOPIC_KEYS {
        let found = k.synonyms.iter().find_map(|s| get(s.name).map(|v| (s.name, s.scale, v)));
        let (name, scale, value) = match found {
            Some(f) => f,
            None => match get(k.name) {
                Some(v) => (k.name, 1, v),
                None => continue,
            },
        };
        let value = if scale == 1 {
            value.clone()
        } else {
            match value.trim().parse::<i64>() {
                Ok(v) if v < 0 => "-1".to_string(), // Kafka: negative hours or minutes mean unlimited
                Ok(v) => v.saturating_mul(scale as i64).to_string(),
                Err(_) => {
                    return Err(ConfigError {
                        key: name.to_string(),
                        value: value.clone(),
                        reason: "not an integer".into(),
                    })
                }
            }
        };
        c.set(k.name, &value).map_err(|e| ConfigError { key: name.to_string(), ..e })?;
    }
    Ok(c)
}

/// What the layers give: the settings dynamic broker configs can change, as every shard
/// applies them.
#[derive(Debug, Clone, PartialEq)]
pub struct Effective {
    pub num_partitions: u32,
    pub auto_create_topics: bool,
    pub max_connections: usize,
    pub max_connections_per_ip: usize,
    pub log_defaults: LogConfig,
}

impl Effective {
    /// The settings with `dynamic` over `config`'s static ones; an invalid value is an error
    /// naming it.
    pub fn compute(config: &BrokerConfig, dynamic: &DynamicConfigs) -> anyhow::Result<Effective> {
        let mut c = config.clone();
        for (k, v) in dynamic.default.iter().chain(&dynamic.node) {
            if BROKER_KEYS.iter().any(|b| b.name == k) {
                c.set(k, v)?;
            }
        }
        let log_defaults = topic_defaults(|name| lookup(config, dynamic, name).map(|(_, v)| v))?;
        Ok(Effective {
            num_partitions: c.num_partitions,
            auto_create_topics: c.auto_create_topics,
            max_connections: c.limits.max_connections,
            max_connections_per_ip: c.limits.max_connections_per_ip,
            log_defaults,
        })
    }
}

/// A broker setting that is not a topic default.
pub struct BrokerKey {
    pub name: &'static str,
    pub kind: ConfigType,
    /// Changeable at runtime with (Incremental)AlterConfigs.
    pub dynamic: bool,
    pub doc: &'static str,
}

const fn key(name: &'static str, kind: ConfigType, dynamic: bool, doc: &'static str) -> BrokerKey {
    BrokerKey { name, kind, dynamic, doc }
}

/// The broker's own settings (topic defaults are the synonyms of [`TOPIC_KEYS`]).
pub const BROKER_KEYS: &[BrokerKey] = &[
    key("advertised.host", ConfigType::String, false, "The host clients are told to connect to."),
    key(
        "advertised.listeners",
        ConfigType::String,
        false,
        "The listener clients are told to use (from advertised.host and the listen port).",
    ),
    key(
        "auto.create.topics.enable",
        ConfigType::Boolean,
        true,
        "Create unknown topics on Metadata and Produce (dynamic in tidemark).",
    ),
    key("broker.id", ConfigType::Int, false, "The node id (alias of node.id)."),
    key("connections.max.idle.ms", ConfigType::Long, false, "A connection that sends nothing this long is closed."),
    key("default.replication.factor", ConfigType::Int, false, "One node: every partition has one replica."),
    key("delete.topic.enable", ConfigType::Boolean, false, "Topics can always be deleted."),
    key("fetch.max.bytes", ConfigType::Int, false, "The most one Fetch response carries."),
    key(
        "group.initial.rebalance.delay.ms",
        ConfigType::Int,
        false,
        "How long the first rebalance of an empty group waits for more members.",
    ),
    key("group.max.session.timeout.ms", ConfigType::Int, false, "The longest session timeout a member may ask for."),
    key("group.max.size", ConfigType::Int, false, "Members a group takes."),
    key("group.min.session.timeout.ms", ConfigType::Int, false, "The shortest session timeout a member may ask for."),
    key("listeners", ConfigType::String, false, "The address the broker listens on (--listen)."),
    key("log.dirs", ConfigType::String, false, "The data directory (--data-dir)."),
    key(
        "log.retention.check.interval.ms",
        ConfigType::Long,
        false,
        "Period of each shard's upkeep pass (time rolls, retention).",
    ),
    key("max.connections", ConfigType::Int, true, "Client connections the broker keeps at once."),
    key("max.connections.per.ip", ConfigType::Int, true, "Connections from one client address."),
    key("node.id", ConfigType::Int, false, "The node id in Metadata, FindCoordinator and DescribeCluster."),
    key(
        "num.partitions",
        ConfigType::Int,
        true,
        "Partitions of auto-created topics and of CreateTopics asking for -1 (dynamic in tidemark).",
    ),
    key("offset.metadata.max.bytes", ConfigType::Int, false, "Longest metadata string of a committed offset."),
    key("offsets.topic.num.partitions", ConfigType::Int, false, "Partitions of __consumer_offsets when it is created."),
    key("offsets.topic.replication.factor", ConfigType::Short, false, "One node: one replica."),
    key(
        "offsets.topic.segment.bytes",
        ConfigType::Int,
        false,
        "segment.bytes of __consumer_offsets when it is created.",
    ),
    key(
        "queued.max.request.bytes",
        ConfigType::Long,
        false,
        "Bytes of requests read and not yet answered, per broker.",
    ),
    key("socket.request.max.bytes", ConfigType::Int, false, "The largest request frame."),
    key(
        "tidemark.fetch.max.memory.bytes",
        ConfigType::Long,
        false,
        "Bytes of fetched records held for responses not yet written, per broker.",
    ),
    key(
        "tidemark.max.inflight.requests.per.connection",
        ConfigType::Int,
        false,
        "Requests of one connection read and not yet answered.",
    ),
    key(
        "tidemark.offsets.compaction.bytes",
        ConfigType::Long,
        false,
        "Size past which a __consumer_offsets partition is compacted.",
    ),
    key(
        "tidemark.offsets.compaction.check.ms",
        ConfigType::Long,
        false,
        "How often offsets partitions are looked at for compaction.",
    ),
];

/// A broker setting's type and whether it can change at runtime; `None` if it is not one.
/// Topic defaults: the first synonym of each topic setting is dynamic, the others are not
/// (Kafka's rule: `log.retention.ms` is, `log.retention.hours` is not).
pub fn broker_key(name: &str) -> Option<(ConfigType, bool, &'static str)> {
    if let Some(b) = BROKER_KEYS.iter().find(|b| b.name == name) {
        return Some((b.kind, b.dynamic, b.doc));
    }
    let (k, _) = topic_key_of_broker_name(name)?;
    let first = k.synonyms.first().is_some_and(|s| s.name == name);
    Some((k.kind, first, k.doc))
}

/// The current value of a broker-only setting, as this shard applies it.
fn broker_value(shard: &Shard, name: &str) -> Option<String> {
    let c = &shard.config;
    let e = shard.effective();
    let v = match name {
        "advertised.host" => c.advertised_host.clone(),
        "advertised.listeners" => format!("PLAINTEXT://{}:{}", c.advertised_host, c.advertised_port),
        "auto.create.topics.enable" => e.auto_create_topics.to_string(),
        "broker.id" | "node.id" => c.node_id.to_string(),
        "connections.max.idle.ms" => c.limits.connections_max_idle.as_millis().to_string(),
        "default.replication.factor" | "offsets.topic.replication.factor" => "1".into(),
        "delete.topic.enable" => "true".into(),
        "fetch.max.bytes" => c.limits.fetch_max_bytes.to_string(),
        "group.initial.rebalance.delay.ms" => c.coordinator.limits.initial_rebalance_delay_ms.to_string(),
        "group.max.session.timeout.ms" => c.coordinator.limits.max_session_timeout_ms.to_string(),
        "group.max.size" => c.coordinator.limits.max_size.to_string(),
        "group.min.session.timeout.ms" => c.coordinator.limits.min_session_timeout_ms.to_string(),
        "listeners" => format!("PLAINTEXT://{}", c.listen),
        "log.dirs" => std::path::absolute(&c.data_dir).unwrap_or_else(|_| c.data_dir.clone()).display().to_string(),
        "log.retention.check.interval.ms" => c.retention_check_interval.as_millis().to_string(),
        "max.connections" => e.max_connections.to_string(),
        "max.connections.per.ip" => e.max_connections_per_ip.to_string(),
        "num.partitions" => e.num_partitions.to_string(),
        "offset.metadata.max.bytes" => c.coordinator.metadata_max_bytes.to_string(),
        "offsets.topic.num.partitions" => c.coordinator.offsets_partitions.to_string(),
        "offsets.topic.segment.bytes" => c.coordinator.offsets_segment_bytes.to_string(),
        "queued.max.request.bytes" => c.limits.queued_max_request_bytes.to_string(),
        "socket.request.max.bytes" => c.max_request_bytes.to_string(),
        "tidemark.fetch.max.memory.bytes" => c.limits.fetch_max_memory_bytes.to_string(),
        "tidemark.max.inflight.requests.per.connection" => c.limits.max_inflight_per_connection.to_string(),
        "tidemark.offsets.compaction.bytes" => c.coordinator.compaction_bytes.to_string(),
        "tidemark.offsets.compaction.check.ms" => c.coordinator.compaction_check.as_millis().to_string(),
        _ => return None,
    };
    Some(v)
}

/// DescribeConfigs for topics and this broker: every setting (or those asked for; an empty
/// list means all), with its value, source, type, synonyms (on request) and documentation (on
/// request, v3+).
pub fn describe_configs(shard: &Rc<Shard>, version: i16, d: DescribeConfigsRequest) -> DescribeConfigsResponse {
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
                is_sensitive: false,
                synonyms: if d.include_synonyms { chain } else { Vec::new() },
                config_type: kind as i8,
                documentation: (d.include_documentation && version >= 3).then(|| doc.to_string()),
                ..Default::default()
            }
        };
        let result = match r.resource_type {
            RESOURCE_TOPIC => match shard.topics.borrow().get(&r.resource_name) {
                None => DescribeConfigsResult {
                    error_code: code::UNKNOWN_TOPIC_OR_PARTITION,
                    error_message: Some(format!("topic {} does not exist", r.resource_name)),
                    ..Default::default()
                },
                Some(t) => {
                    let values = t.config.describe();
                    let builtin = LogConfig::default().describe();
                    let dynamic = shard.dynamic.borrow();
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
                            broker_chain(&shard.config, &dynamic, &names, &mut chain);
                            let default_name = k.synonyms.first().map_or(k.name, |s| s.name);
                            chain.push(synonym(default_name, &builtin[k.name], SOURCE_DEFAULT));
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
    shard: &Rc<Shard>,
    name: &str,
    wanted: &dyn Fn(&str) -> bool,
    shape: &Shape<'_>,
) -> DescribeConfigsResult {
    let dynamic = shard.dynamic.borrow().clone();
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
    if name.trim().parse::<i32>().ok() != Some(shard.config.node_id) {
        return DescribeConfigsResult {
            error_code: code::INVALID_REQUEST,
            error_message: Some(format!(
                "Unexpected broker id, expected {} or empty string, but received {name}",
                shard.config.node_id
            )),
            ..Default::default()
        };
    }
    let effective = shard.effective();
    let defaults = effective.log_defaults.describe();
    let builtin = LogConfig::default().describe();
    let mut configs = Vec::new();
    for b in BROKER_KEYS.iter().filter(|b| wanted(b.name)) {
        let mut chain = Vec::new();
        broker_chain(&shard.config, &dynamic, &[b.name], &mut chain);
        let value = broker_value(shard, b.name);
        if let Some(v) = &value {
            if chain.is_empty() {
                chain.push(synonym(b.name, v, SOURCE_DEFAULT));
            }
        }
        configs.push(shape(b.name, value, b.kind, !b.dynamic, b.doc, chain));
    }
    // Topic defaults under their broker names: the first synonym carries the value in force,
    // the others the value set for them, if any.
    for k in TOPIC_KEYS {
        for (i, s) in k.synonyms.iter().enumerate() {
            if !wanted(s.name) || (k.name == s.name && BROKER_KEYS.iter().any(|b| b.name == s.name)) {
                continue;
            }
            let rest: Vec<&str> = k.synonyms[i..].iter().map(|s| s.name).collect();
            let mut chain = Vec::new();
            broker_chain(&shard.config, &dynamic, &rest, &mut chain);
            let value = if i == 0 {
                chain.push(synonym(s.name, &builtin[k.name], SOURCE_DEFAULT));
                Some(defaults[k.name].clone())
            } else {
                lookup(&shard.config, &dynamic, s.name).map(|(_, v)| v.clone())
            };
            configs.push(shape(s.name, value, k.kind, i != 0, k.doc, chain));
        }
    }
    configs.sort_by(|a, b| a.name.cmp(&b.name));
    configs.dedup_by(|a, b| a.name == b.name);
    DescribeConfigsResult { configs, ..Default::default() }
}

/// One change of a setting (IncrementalAlterConfigs' operations; AlterConfigs sets).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AlterOp {
    Set(String),
    Delete,
    Append(String),
    Subtract(String),
}

/// Apply `ops` to `current` overrides (`replace`: the set ops are the whole new set), where
/// `value_of` gives a setting's value in force (for APPEND and SUBTRACT on list settings)
/// and `kind_of` its type. Kafka's errors: a list operation on a non-list setting.
pub fn apply_ops(
    current: &BTreeMap<String, String>,
    ops: &[(String, AlterOp)],
    replace: bool,
    value_of: impl Fn(&str) -> Option<String>,
    kind_of: impl Fn(&str) -> Option<ConfigType>,
) -> Result<BTreeMap<String, String>, (i16, String)> {
    let mut next = if replace { BTreeMap::new() } else { current.clone() };
    for (k, op) in ops {
        match op {
            AlterOp::Set(v) => {
                next.insert(k.clone(), v.clone());
            }
            AlterOp::Delete => {
                next.remove(k);
            }
            AlterOp::Append(v) | AlterOp::Subtract(v) => {
                let verb = if matches!(op, AlterOp::Append(_)) { "append" } else { "subtract" };
                if kind_of(k) != Some(ConfigType::List) {
                    return Err((
                        code::INVALID_CONFIG,
                        format!("Config value {verb} is not allowed for config key: {k}"),
                    ));
                }
                let now = next.get(k).cloned().or_else(|| value_of(k)).unwrap_or_default();
                let mut items: Vec<String> =
                    now.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect();
                for item in v.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                    if verb == "append" {
                        if !items.iter().any(|i| i == item) {
                            items.push(item.to_string());
                        }
                    } else {
                        items.retain(|i| i != item);
                    }
                }
                next.insert(k.clone(), items.join(","));
            }
        }
    }
    Ok(next)
}

/// The type of a topic setting.
pub fn topic_kind(name: &str) -> Option<ConfigType> {
    topic_key(name).map(|k| k.kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    // The dynamic settings file round-trips and is refused when damaged.
    #[test]
    fn dynamic_configs_file_round_trips() {
        let mut d = DynamicConfigs::default();
        d.default.insert("num.partitions".into(), "3".into());
        d.node.insert("log.retention.ms".into(), "1000".into());
        let text = d.encode();
        assert_eq!(DynamicConfigs::decode(&text).unwrap(), d);
        assert!(DynamicConfigs::decode(&text.replace("=3", "=4")).is_err());
        assert!(DynamicConfigs::decode("tidemark-broker-configs 2\ncrc32c=0\n").is_err());
    }

    // Kafka's synonym order: log.retention.ms before minutes before hours, whatever layer sets
    // each; hours convert to ms; negative hours mean unlimited.
    #[test]
    fn topic_defaults_follow_synonym_priority() {
        let mut m = BTreeMap::new();
        m.insert("log.retention.hours".to_string(), "2".to_string());
        let c = topic_defaults(|n| m.get(n)).unwrap();
        assert_eq!(c.retention_ms, Some(2 * 3_600_000));
        m.insert("log.retention.minutes".to_string(), "5".to_string());
        assert_eq!(topic_defaults(|n| m.get(n)).unwrap().retention_ms, Some(300_000));
        m.insert("log.retention.ms".to_string(), "7".to_string());
        assert_eq!(topic_defaults(|n| m.get(n)).unwrap().retention_ms, Some(7));
        let mut m = BTreeMap::new();
        m.insert("log.retention.hours".to_string(), "-1".to_string());
        m.insert("message.max.bytes".to_string(), "5000".to_string());
        let c = topic_defaults(|n| m.get(n)).unwrap();
        assert_eq!((c.retention_ms, c.max_message_bytes), (None, 5000));
        m.insert("log.segment.bytes".to_string(), "12".to_string());
        assert_eq!(topic_defaults(|n| m.get(n)).unwrap_err().key, "log.segment.bytes");
    }

    // APPEND and SUBTRACT work on list settings only; SET, DELETE and replace as Kafka.
    #[test]
    fn alter_ops_apply_like_kafka() {
        let kind = |k: &str| if k == "l" { Some(ConfigType::List) } else { Some(ConfigType::Int) };
        let mut cur = BTreeMap::new();
        cur.insert("a".to_string(), "1".to_string());
        let ops = vec![
            ("l".to_string(), AlterOp::Append("x,y".into())),
            ("l".to_string(), AlterOp::Subtract("w".into())),
            ("a".to_string(), AlterOp::Delete),
        ];
        let next = apply_ops(&cur, &ops, false, |_| Some("w".into()), kind).unwrap();
        assert_eq!(next.get("l").map(String::as_str), Some("x,y"));
        assert!(!next.contains_key("a"));
        let e = apply_ops(&cur, &[("a".to_string(), AlterOp::Append("2".into()))], false, |_| None, kind).unwrap_err();
        assert_eq!(e.0, code::INVALID_CONFIG);
        let next = apply_ops(&cur, &[("b".to_string(), AlterOp::Set("2".into()))], true, |_| None, kind).unwrap();
        assert_eq!(next.len(), 1);
    }
}
