//! Reading the broker's settings: one `key=value` at a time as [`GROUPS`] declares it (`--set`,
//! a settings file in Kafka's properties form or simple TOML), then, at startup, the listeners,
//! their TLS and SASL settings and the cluster resolved with every setting known.

use super::*;
use crate::server::broker_config::{host_name, sasl_mechanisms, DEFAULT_SASL_MECHANISMS};
use crate::server::listeners;
use crate::server::tls;
use std::collections::BTreeMap;
use std::net::SocketAddr;

/// Whether tidemark uses the setting `key`: a broker setting (with a listener's prefix where
/// it may have one), a topic setting (a topic default) or a broker name of a topic default.
fn uses(key: &str) -> bool {
    broker(key).is_some()
        || crate::config::topic_key_of_broker_name(key).is_some()
        || crate::config::topic_key(key).is_some()
}

impl BrokerConfig {
    /// Apply one `key=value` from a properties file: broker settings, Kafka's `log.*` names,
    /// or topic settings (as topic defaults; where several of Kafka's names give one topic
    /// setting, the first in Kafka's order wins, as in Kafka).
    ///
    /// A setting tidemark does not use is ignored and logged once, as Kafka logs the settings
    /// it was given but does not use: one of Kafka's (a file written for Kafka works), or a
    /// name neither knows, with the closest known name (a misspelling). `--strict-config`
    /// refuses both.
    pub fn set(&mut self, key: &str, value: &str) -> anyhow::Result<()> {
        crate::config::check_text(key, value)?;
        if !uses(key) {
            return self.not_used(key);
        }
        self.apply(key, value)?;
        self.settings.insert(key.to_string(), value.to_string());
        Ok(())
    }

    fn not_used(&mut self, key: &str) -> anyhow::Result<()> {
        use crate::config::kafka_names;
        let why = if kafka_names::knows(key) {
            "a Kafka setting tidemark does not use".to_string()
        } else {
            let ours = all().map(|s| s.name).chain(crate::config::TOPIC_KEYS.iter().map(|k| k.name));
            let setting = listener_key(key).map_or(key, |(_, s)| s);
            match kafka_names::closest(setting, ours.chain(kafka_names::all())) {
                Some(name) => format!("unknown setting (did you mean {name}?)"),
                None => "unknown setting".to_string(),
            }
        };
        if self.strict_config {
            bail!("{key}: {why} (refused: --strict-config)");
        }
        if !self.unused.contains_key(key) {
            tracing::warn!("{key}: {why}; ignored");
            self.unused.insert(key.to_string(), why);
        }
        Ok(())
    }

    fn apply(&mut self, key: &str, value: &str) -> anyhow::Result<()> {
        if let Some(setting) = broker(key) {
            return setting.take(self, key, value);
        }
        // A topic default, validated with the others (the topic defaults come from all of
        // them, configs::Effective).
        let mut settings = self.settings.clone();
        settings.insert(key.to_string(), value.to_string());
        crate::config::topic_defaults(|name| settings.get(name))?;
        Ok(())
    }

    /// Resolve `listeners`, `advertised.listeners` and `listener.security.protocol.map` (with
    /// `--listen` and `advertised.host`) once every setting is known: at startup.
    pub fn resolve_listeners(&mut self, node: &BTreeMap<String, String>) -> anyhow::Result<()> {
        let get = |k: &str| self.settings.get(k).map(String::as_str);
        let map = listeners::effective_protocol_map(
            get("listener.security.protocol.map"),
            get("listeners"),
            get("controller.listener.names"),
        )?;
        let mut resolved = listeners::resolve(
            get("listeners"),
            get("advertised.listeners"),
            map.as_deref(),
            self.listen,
            &host_name(),
        )?;
        if let Some(host) = get("advertised.host").map(str::trim) {
            let named = listeners::names(get("advertised.listeners").unwrap_or_default());
            for l in resolved.iter_mut().filter(|l| !named.contains(&l.name)) {
                l.advertised_host = host.to_string();
            }
        }
        for l in resolved.iter_mut() {
            if l.protocol.sasl() {
                let enabled = tls::listener_setting(&self.settings, &l.name, "sasl.enabled.mechanisms")
                    .unwrap_or(DEFAULT_SASL_MECHANISMS);
                l.sasl_mechanisms = sasl_mechanisms(enabled).with_context(|| format!("listener {}", l.name))?;
            }
        }
        let named: Vec<(String, SocketAddr)> = resolved.iter().map(|l| (l.name.clone(), l.addr)).collect();
        if let Some(name) = get("inter.broker.listener.name").map(|n| n.trim().to_ascii_uppercase()) {
            let controller = get("controller.listener.names").map(|n| n.to_ascii_uppercase()).unwrap_or_default();
            let controllers: Vec<&str> = controller.split(',').map(str::trim).collect();
            let broker_listeners = named.iter().filter(|(n, _)| !controllers.contains(&n.as_str())).count();
            // A controller-only node serves no broker listener: the setting is its brokers'.
            let unserved = !named.iter().any(|(n, _)| *n == name) || controllers.contains(&name.as_str());
            if broker_listeners > 0 && unserved {
                bail!("inter.broker.listener.name={name}: not one of the listeners brokers serve clients on");
            }
        }
        // Each cluster setting as given, or its default.
        let given = |k: &str| {
            let default = || broker(k).and_then(|s| s.default).map(str::to_string);
            self.settings.get(k).cloned().or_else(default)
        };
        self.cluster = crate::cluster::settings::resolve(given, self.node_id, &named)?;
        if let Some(c) = &self.cluster {
            self.controller_listener = resolved.iter().find(|l| l.name == c.controller_listener).cloned();
            resolved.retain(|l| l.name != c.controller_listener);
        }
        self.listeners = resolved;
        for (i, acceptor) in self.tls_acceptors(node)? {
            let rules = tls::mapping_rules(&self.settings, &self.listeners[i].name)?;
            self.listeners[i].tls = Some(tls::Tls::new(acceptor, rules));
        }
        let settings = self.with_node_tls(node);
        if let Some(l) = self.controller_listener.as_mut().filter(|l| l.protocol.tls()) {
            let acceptor = tls::acceptor(&settings, &l.name)?;
            l.tls = Some(tls::Tls::new(acceptor, tls::mapping_rules(&settings, &l.name)?));
        }
        self.links = self.resolve_links(node, map.as_deref())?;
        Ok(())
    }

    /// The static settings with this node's dynamic TLS settings over them.
    pub fn with_node_tls(&self, node: &BTreeMap<String, String>) -> BTreeMap<String, String> {
        let mut settings = self.settings.clone();
        settings.extend(node.iter().filter(|(k, _)| dynamic_tls(k)).map(|(k, v)| (k.clone(), v.clone())));
        settings
    }

    /// How this node's links to other brokers and to the controllers are secured, from the
    /// resolved listeners (`map`: the protocol map in force, for a controller listener this
    /// node does not serve).
    pub fn resolve_links(
        &self,
        node: &BTreeMap<String, String>,
        map: Option<&str>,
    ) -> anyhow::Result<crate::server::links::ClusterLinks> {
        use crate::server::links;
        if self.cluster.is_none() {
            // A standalone node calls no other node.
            return Ok(links::ClusterLinks::default());
        }
        let settings = self.with_node_tls(node);
        let named: Vec<_> = self.listeners.iter().map(|l| (l.name.clone(), l.protocol)).collect();
        let brokers = if named.is_empty() {
            // A controller-only node calls no broker.
            ("PLAINTEXT".to_string(), listeners::SecurityProtocol::Plaintext)
        } else {
            links::inter_broker_listener(&settings, &named)?
        };
        let controllers = match &self.cluster {
            None => None,
            Some(c) => {
                let protocol = match &self.controller_listener {
                    Some(l) => l.protocol,
                    None => *listeners::protocol_map(map)?.get(&c.controller_listener).with_context(|| {
                        format!("controller listener {}: not in listener.security.protocol.map", c.controller_listener)
                    })?,
                };
                Some((c.controller_listener.clone(), protocol))
            }
        };
        links::resolve(&settings, brokers, controllers)
    }

    /// Every TLS listener's acceptor (by its index in `listeners`), from the static settings
    /// with this node's dynamic ones (`node`) over them; the first problem is an error naming
    /// the listener and the setting.
    pub fn tls_acceptors(
        &self,
        node: &BTreeMap<String, String>,
    ) -> anyhow::Result<Vec<(usize, futures_rustls::TlsAcceptor)>> {
        let settings = self.with_node_tls(node);
        let tls = self.listeners.iter().enumerate().filter(|(_, l)| l.protocol.tls());
        tls.map(|(i, l)| Ok((i, tls::acceptor(&settings, &l.name)?))).collect()
    }

    /// Read a settings file: `key=value` lines (a Kafka server.properties) or simple TOML
    /// (`key = "value"`, section headers ignored); `#` starts a comment line.
    pub fn load_file(&mut self, path: &std::path::Path) -> anyhow::Result<()> {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with('[') {
                continue;
            }
            let (k, v) =
                line.split_once('=').with_context(|| format!("{}:{}: expected key=value", path.display(), i + 1))?;
            let unquote = |s: &str| s.trim().trim_matches('"').to_string();
            self.set(&unquote(k), &unquote(v)).with_context(|| format!("{}:{}", path.display(), i + 1))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::configs;
    use std::path::PathBuf;

    // spec: T2.5 — broker settings and topic defaults from a file, Kafka's `log.*` names
    // mapped to topic settings, simple TOML accepted, a bad value refused with file and line.
    #[test]
    fn settings_file_properties_and_toml() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tidemark.toml");
        std::fs::write(
            &path,
            "# broker\n[broker]\nnum.partitions = 3\nauto.create.topics.enable=false\nlog.retention.ms = \"60000\"\n\
             message.timestamp.type = \"LogAppendTime\"\n",
        )
        .unwrap();
        let mut c = BrokerConfig::new(PathBuf::from("/tmp/x"), "127.0.0.1:9092", 1).unwrap();
        c.load_file(&path).unwrap();
        assert_eq!(c.num_partitions, 3);
        assert!(!c.auto_create_topics);
        let defaults = configs::Effective::compute(&c, &configs::DynamicConfigs::default()).unwrap().log_defaults;
        assert_eq!(defaults.retention_ms, Some(60_000));
        assert_eq!(defaults.message_timestamp_type, crate::storage::format::TimestampType::LogAppendTime);
        std::fs::write(&path, "num.partitions=1\nlog.segment.bytes=12\n").unwrap();
        let e = format!("{:#}", c.load_file(&path).unwrap_err());
        assert!(e.contains("tidemark.toml:2") && e.contains("segment.bytes"), "{e}");
        assert!(BrokerConfig::new(PathBuf::from("/tmp/x"), "not-an-address", 1).is_err());
    }
}
