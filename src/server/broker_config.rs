//! The broker's settings as given (`--set`, `--config`, the command line): Kafka's names
//! where Kafka has one, each validated as it is set. Dynamic settings layer over these
//! ([`crate::server::configs`]).

use crate::coordinator::group as coordinator;
use crate::server::listeners::{self, Listener};
use crate::server::tls;
use crate::server::{configs, limits, registry};
use anyhow::{bail, Context};
use std::collections::BTreeMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

/// Kafka's authorizer class names; tidemark's authorizer decides as they do.
pub const AUTHORIZER: &str = "org.apache.kafka.metadata.authorizer.StandardAuthorizer";
pub const LEGACY_AUTHORIZER: &str = "kafka.security.authorizer.AclAuthorizer";

/// Settings of the SASL exchange on SASL listeners.
#[derive(Debug, Clone)]
pub struct SaslConfig {
    /// `sasl.server.max.receive.size`: the largest frame before authentication.
    pub max_receive_size: usize,
    /// `connection.failed.authentication.delay.ms`: how long a failed client waits for its
    /// answer (and the close), slowing password guessing.
    pub failed_authentication_delay: Duration,
    /// `connections.max.reauth.ms` (KIP-368): how long an authentication lasts before the
    /// client must authenticate again on its connection; `None` (0, the default): for ever.
    pub max_reauth: Option<Duration>,
}

impl Default for SaslConfig {
    fn default() -> Self {
        SaslConfig {
            max_receive_size: 524_288,
            failed_authentication_delay: Duration::from_millis(100),
            max_reauth: None,
        }
    }
}

/// The SASL mechanisms a listener offers when `sasl.enabled.mechanisms` is not set (Kafka's
/// default, GSSAPI, is not served; PLAIN sends passwords as they are, so it is opt-in).
pub const DEFAULT_SASL_MECHANISMS: &str = "SCRAM-SHA-256,SCRAM-SHA-512";

/// Broker settings (Kafka's names where Kafka has one).
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    pub data_dir: PathBuf,
    /// `--listen`: the PLAINTEXT listener when `listeners` is not set.
    pub listen: SocketAddr,
    /// `listeners` with their protocols and advertised addresses: `--listen` alone until
    /// [`BrokerConfig::resolve_listeners`] (at startup) reads the listener settings.
    pub listeners: Vec<Listener>,
    pub shards: usize,
    /// `tidemark.shard.io.memory.bytes`: each shard's registered DMA buffer pool
    /// ([`crate::io::DEFAULT_SHARD_IO_MEMORY`]).
    pub shard_io_memory: usize,
    /// `tidemark.batch.cache.enable`: each shard keeps recently written and read log bytes in
    /// memory (`storage::cache`), within its fetch memory.
    pub batch_cache: bool,
    /// `node.id`
    pub node_id: i32,
    /// `auto.create.topics.enable`
    pub auto_create_topics: bool,
    /// `num.partitions`
    pub num_partitions: u32,
    /// `log.retention.check.interval.ms`
    pub retention_check_interval: Duration,
    /// `log.cleaner.*`: log compaction's settings.
    pub cleaner: crate::storage::cleaner::CleanerConfig,
    /// `socket.request.max.bytes`
    pub max_request_bytes: usize,
    /// Limits on clients and the memory they may make the broker hold (docs/operations.md).
    pub limits: limits::Limits,
    /// Consumer groups and `__consumer_offsets` (`group.*`, `offsets.*`).
    pub coordinator: coordinator::CoordinatorConfig,
    /// The transaction coordinator's settings (`transaction.*`).
    pub txn: crate::coordinator::txn::TxnConfig,
    /// `--metrics-listen`: where shard 0 serves Prometheus text at `/metrics`.
    pub metrics_listen: Option<SocketAddr>,
    /// `--fault-injection`: the metrics endpoint also takes disk faults at `/faults` (tests).
    pub fault_injection: bool,
    /// SASL listeners' exchange (`sasl.*`, `connection.failed.authentication.delay.ms`).
    pub sasl: SaslConfig,
    /// `authorizer.class.name` set: every request is checked against the ACLs.
    pub authorizer_enabled: bool,
    /// `super.users`, `allow.everyone.if.no.acl.found`.
    pub authorizer: crate::security::acl::AuthorizerConfig,
    /// `tidemark.shard.call.timeout.ms`: how long a call to another shard may take before the
    /// client gets REQUEST_TIMED_OUT (calls that wait by design, a long poll, a rebalance,
    /// name their own).
    pub shard_call_timeout: Duration,
    /// `process.roles` and `controller.*`: this node's place in a cluster (`None`: standalone),
    /// resolved with the listeners at startup (the controller listener is then not among
    /// `listeners`: it serves the metadata quorum, not clients).
    pub cluster: Option<crate::cluster::settings::ClusterSettings>,
    /// `replica.*`: partition replication's settings.
    pub replication: crate::replica::ReplicaConfig,
    /// Every setting given (`--set`, `--config`) as written: the static layer of
    /// [`configs`] (DescribeConfigs sources, topic defaults by Kafka's synonym order).
    pub settings: BTreeMap<String, String>,
}

impl BrokerConfig {
    pub fn new(data_dir: PathBuf, listen: &str, shards: usize) -> anyhow::Result<Self> {
        let addr = listen
            .to_socket_addrs()
            .with_context(|| format!("--listen {listen}: not a host:port"))?
            .next()
            .with_context(|| format!("--listen {listen}: resolves to no address"))?;
        Ok(BrokerConfig {
            data_dir,
            listen: addr,
            listeners: listeners::resolve(None, None, None, addr, &host_name())?,
            shards,
            shard_io_memory: crate::io::DEFAULT_SHARD_IO_MEMORY,
            batch_cache: true,
            node_id: 0,
            auto_create_topics: true,
            num_partitions: 1,
            retention_check_interval: crate::storage::manager::DEFAULT_RETENTION_CHECK_INTERVAL,
            cleaner: Default::default(),
            max_request_bytes: 100 * 1024 * 1024,
            limits: limits::Limits::default(),
            coordinator: coordinator::CoordinatorConfig::default(),
            txn: crate::coordinator::txn::TxnConfig::default(),
            metrics_listen: None,
            fault_injection: false,
            shard_call_timeout: crate::server::router::DEFAULT_CALL_TIMEOUT,
            sasl: SaslConfig::default(),
            authorizer_enabled: false,
            authorizer: Default::default(),
            replication: Default::default(),
            cluster: None,
            settings: BTreeMap::new(),
        })
    }

    /// Apply one `key=value` from a properties file: broker settings, Kafka's `log.*` names,
    /// or topic settings (as topic defaults; where several of Kafka's names give one topic
    /// setting, the first in Kafka's order wins, as in Kafka).
    pub fn set(&mut self, key: &str, value: &str) -> anyhow::Result<()> {
        crate::config::check_text(key, value)?;
        self.apply(key, value)?;
        self.settings.insert(key.to_string(), value.to_string());
        Ok(())
    }

    fn apply(&mut self, key: &str, value: &str) -> anyhow::Result<()> {
        if let Some(setting) = registry::broker(key) {
            return setting.take(self, key, value);
        }
        if let Some((_, setting)) = registry::listener_key(key) {
            bail!("{key}: unknown listener setting ({setting})");
        }
        if crate::config::topic_key_of_broker_name(key).is_none() && crate::config::topic_key(key).is_none() {
            bail!("{key}: unknown setting");
        }
        // A topic default, validated with the others (the topic defaults come from all of
        // them, configs::Effective).
        let mut settings = self.settings.clone();
        settings.insert(key.to_string(), value.to_string());
        configs::topic_defaults(|name| settings.get(name))?;
        Ok(())
    }

    /// Resolve `listeners`, `advertised.listeners` and `listener.security.protocol.map` (with
    /// `--listen` and `advertised.host`) once every setting is known: at startup.
    pub fn resolve_listeners(&mut self, node: &BTreeMap<String, String>) -> anyhow::Result<()> {
        let get = |k: &str| self.settings.get(k).map(String::as_str);
        let mut resolved = listeners::resolve(
            get("listeners"),
            get("advertised.listeners"),
            get("listener.security.protocol.map"),
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
            if !named.iter().any(|(n, _)| *n == name) || controller.split(',').any(|c| c.trim() == name) {
                bail!("inter.broker.listener.name={name}: not one of the listeners brokers serve clients on");
            }
        }
        // Each cluster setting as given, or its default.
        let given = |k: &str| {
            let default = || registry::broker(k).and_then(|s| s.default).map(str::to_string);
            self.settings.get(k).cloned().or_else(default)
        };
        self.cluster = crate::cluster::settings::resolve(given, self.node_id, &named)?;
        if let Some(c) = &self.cluster {
            resolved.retain(|l| l.name != c.controller_listener);
        }
        self.listeners = resolved;
        for (i, acceptor) in self.tls_acceptors(node)? {
            let rules = tls::mapping_rules(&self.settings, &self.listeners[i].name)?;
            self.listeners[i].tls = Some(tls::Tls::new(acceptor, rules));
        }
        Ok(())
    }

    /// Every TLS listener's acceptor (by its index in `listeners`), from the static settings
    /// with this node's dynamic ones (`node`) over them; the first problem is an error naming
    /// the listener and the setting.
    pub fn tls_acceptors(
        &self,
        node: &BTreeMap<String, String>,
    ) -> anyhow::Result<Vec<(usize, futures_rustls::TlsAcceptor)>> {
        let mut settings = self.settings.clone();
        settings.extend(node.iter().filter(|(k, _)| configs::dynamic_tls(k)).map(|(k, v)| (k.clone(), v.clone())));
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

/// `sasl.enabled.mechanisms`: mechanisms tidemark serves, at least one.
pub(crate) fn sasl_mechanisms(value: &str) -> anyhow::Result<Vec<String>> {
    let served = crate::security::sasl::MECHANISMS;
    let mut out = Vec::new();
    for m in value.split(',').map(str::trim).filter(|m| !m.is_empty()) {
        if !served.contains(&m) {
            bail!("sasl.enabled.mechanisms: {m} is not served (only {})", served.join(", "));
        }
        out.push(m.to_string());
    }
    if out.is_empty() {
        bail!("sasl.enabled.mechanisms: no mechanism");
    }
    Ok(out)
}

/// This machine's host name (for Metadata when listening on a wildcard address).
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
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
