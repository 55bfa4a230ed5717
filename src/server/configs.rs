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

pub use crate::config::topic_defaults;
use crate::config::{topic_key, topic_key_of_broker_name, ConfigType};
use crate::protocol::errors as code;
pub use crate::server::broker_config::Effective;
use crate::server::errors::AdminError;
use crate::server::registry;
use crate::server::BrokerConfig;
use std::collections::BTreeMap;

/// Kafka's ConfigResource types.
pub const RESOURCE_TOPIC: i8 = 2;
pub const RESOURCE_BROKER: i8 = 4;
/// Kafka's ConfigSource values.
pub const SOURCE_TOPIC: i8 = 1;
pub const SOURCE_DYNAMIC_BROKER: i8 = 2;
pub const SOURCE_DYNAMIC_DEFAULT: i8 = 3;
pub const SOURCE_STATIC: i8 = 4;
pub const SOURCE_DEFAULT: i8 = 5;

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
    /// `tidemark-broker-configs 2`, then `default <key>=<value>` and `node <key>=<value>`
    /// lines (in values, `\\` is a backslash, `\n` a line feed and `\r` a carriage return: an
    /// inline PEM key spans lines), then `crc32c=<hex>` over everything before it (docs/format.md section 9c).
    /// Version 1 (no escapes) is still read.
    pub fn encode(&self) -> String {
        let mut s = String::from("tidemark-broker-configs 2\n");
        for (scope, map) in [("default", &self.default), ("node", &self.node)] {
            for (k, v) in map {
                let v = v.replace('\\', "\\\\").replace('\n', "\\n").replace('\r', "\\r");
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
        let escaped = match lines.next() {
            Some("tidemark-broker-configs 1") => false,
            Some("tidemark-broker-configs 2") => true,
            _ => return Err("unknown version".into()),
        };
        let mut d = DynamicConfigs::default();
        for l in lines {
            let (scope, kv) = l.split_once(' ').ok_or("bad line")?;
            let (k, v) = kv.split_once('=').ok_or("bad line")?;
            let map = match scope {
                "default" => &mut d.default,
                "node" => &mut d.node,
                _ => return Err(format!("unknown scope {scope}")),
            };
            map.insert(k.to_string(), if escaped { unescape(v)? } else { v.to_string() });
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

/// A value as [`DynamicConfigs::encode`] wrote it.
fn unescape(v: &str) -> Result<String, String> {
    let mut out = String::with_capacity(v.len());
    let mut chars = v.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('\\') => out.push('\\'),
            other => return Err(format!("bad escape {other:?}")),
        }
    }
    Ok(out)
}

/// Which layer set a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layer {
    Node,
    Default,
    Static,
}

impl Layer {
    pub fn source(self) -> i8 {
        match self {
            Layer::Node => SOURCE_DYNAMIC_BROKER,
            Layer::Default => SOURCE_DYNAMIC_DEFAULT,
            Layer::Static => SOURCE_STATIC,
        }
    }
}

/// The layers of raw settings, highest first.
pub fn layers<'a>(config: &'a BrokerConfig, dynamic: &'a DynamicConfigs) -> [(Layer, &'a BTreeMap<String, String>); 3] {
    [(Layer::Node, &dynamic.node), (Layer::Default, &dynamic.default), (Layer::Static, &config.settings)]
}

/// The value of a broker setting in the highest layer that sets it.
pub fn lookup<'a>(config: &'a BrokerConfig, dynamic: &'a DynamicConfigs, name: &str) -> Option<(Layer, &'a String)> {
    layers(config, dynamic).into_iter().find_map(|(layer, map)| map.get(name).map(|v| (layer, v)))
}

impl Effective {
    /// The settings with `dynamic` over `config`'s static ones; an invalid value is an error
    /// naming it.
    pub fn compute(config: &BrokerConfig, dynamic: &DynamicConfigs) -> anyhow::Result<Effective> {
        let mut c = config.clone();
        for (k, v) in dynamic.default.iter().chain(&dynamic.node) {
            if registry::broker(k).is_some() {
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

/// A broker setting's type, whether it can change at runtime and its documentation; `None`
/// if it is not one ([`registry`], or a topic default under its broker name). Topic defaults:
/// the first synonym of each topic setting is dynamic, the others are not (Kafka's rule:
/// `log.retention.ms` is, `log.retention.hours` is not).
pub fn broker_key(name: &str) -> Option<(ConfigType, bool, &'static str)> {
    if let Some(s) = registry::broker(name) {
        return Some((s.kind, s.dynamic(), s.doc));
    }
    if registry::listener_key(name).is_some() {
        return None;
    }
    let (k, _) = topic_key_of_broker_name(name)?;
    let first = k.synonyms.first().is_some_and(|s| s.name == name);
    Some((k.kind, first, k.doc))
}

pub use registry::{dynamic_tls, listener_key, sensitive};

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
) -> Result<BTreeMap<String, String>, AdminError> {
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
                    let message = format!("Config value {verb} is not allowed for config key: {k}");
                    return Err(AdminError::new(code::INVALID_CONFIG, message));
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

    // The dynamic settings file round-trips (multi-line values too) and is refused when
    // damaged; version 1 files are read.
    #[test]
    fn dynamic_configs_file_round_trips() {
        let mut d = DynamicConfigs::default();
        d.default.insert("num.partitions".into(), "3".into());
        d.node.insert("log.retention.ms".into(), "1000".into());
        d.node.insert("ssl.keystore.key".into(), "-----BEGIN\r\nAB\\C\n-----END".into());
        let text = d.encode();
        assert_eq!(text.lines().count(), 5, "a multi-line value is one line");
        assert_eq!(DynamicConfigs::decode(&text).unwrap(), d);
        let v1 = "tidemark-broker-configs 1\nnode a=b\\n\n";
        let v1 = format!("{v1}crc32c={:08x}\n", crc32c::crc32c(v1.as_bytes()));
        assert_eq!(DynamicConfigs::decode(&v1).unwrap().node["a"], "b\\n", "version 1 has no escapes");
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
        assert_eq!(e.code, code::INVALID_CONFIG);
        let next = apply_ops(&cur, &[("b".to_string(), AlterOp::Set("2".into()))], true, |_| None, kind).unwrap();
        assert_eq!(next.len(), 1);
    }
}
