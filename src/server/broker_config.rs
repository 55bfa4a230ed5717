//! The broker's settings as given (`--set`, `--config`, the command line): Kafka's names
//! where Kafka has one, each validated as it is set. Dynamic settings layer over these
//! ([`crate::server::configs`]).

use crate::coordinator::group as coordinator;
use crate::server::listeners::{self, Listener};
use crate::server::tls;
use crate::server::{configs, limits};
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
        let int = |v: &str| v.trim().parse::<i64>().with_context(|| format!("{key}={v}: not an integer"));
        let flag = |v: &str| match v.trim() {
            "true" => Ok(true),
            "false" => Ok(false),
            _ => Err(anyhow::anyhow!("{key}={v}: expected true or false")),
        };
        match key {
            "node.id" | "broker.id" => self.node_id = int(value)? as i32,
            // Accepted in every form Kafka accepts, and inert: one protocol between tidemark
            // nodes, whatever a server.properties names.
            "inter.broker.protocol.version" => {
                crate::config::kafka_version(key, value)?;
            }
            // Kafka's data directories: tidemark keeps one per node (`--data-dir` unless these
            // are set; `log.dirs` wins over `log.dir`, as in Kafka).
            "log.dirs" | "log.dir" => {
                let dirs: Vec<&str> = value.split(',').map(str::trim).filter(|d| !d.is_empty()).collect();
                let [dir] = dirs.as_slice() else {
                    bail!("{key}={value}: tidemark keeps one data directory per node; name exactly one");
                };
                if key == "log.dirs" || !self.settings.contains_key("log.dirs") {
                    self.data_dir = PathBuf::from(dir);
                }
            }
            // Accepted as Kafka validates them, and inert here: thread-per-core has one shard per
            // core (`--cores`) doing network, I/O and recovery; the OS sizes socket buffers; a
            // shard runs one fetcher per leader node; the transaction log's writes wait for the
            // topic's own ISR.
            "num.network.threads" | "num.io.threads" | "num.recovery.threads.per.data.dir" | "background.threads"
            | "num.replica.fetchers" | "transaction.state.log.min.isr" => {
                bounded(key, int(value)?, 1, i32::MAX as i64)?;
            }
            "socket.send.buffer.bytes" | "socket.receive.buffer.bytes" => {
                bounded(key, int(value)?, -1, i32::MAX as i64)?;
            }
            "default.replication.factor" | "offsets.topic.replication.factor" | "transaction.state.log.replication.factor" => {
                bounded(key, int(value)?, 1, i16::MAX as i64)?;
            }
            // The listener brokers replicate over: one of the listeners, checked at
            // startup with them.
            "inter.broker.listener.name" => {
                if value.trim().is_empty() {
                    bail!("{key}: no listener name given");
                }
            }
            "auto.create.topics.enable" => {
                self.auto_create_topics = flag(value)?
            }
            "num.partitions" => {
                let n = int(value)?;
                if !(1..=100_000).contains(&n) {
                    bail!("{key}={value}: must be between 1 and 100000");
                }
                self.num_partitions = n as u32;
            }
            "log.retention.check.interval.ms" => {
                let n = int(value)?;
                if n < 1 {
                    bail!("{key}={value}: must be at least 1");
                }
                self.retention_check_interval = Duration::from_millis(n as u64);
            }
            "log.cleaner.enable" => {
                self.cleaner.enable = flag(value)?
            }
            "log.cleaner.threads" => {
                let n = int(value)?;
                if !(1..=64).contains(&n) {
                    bail!("{key}={value}: must be between 1 and 64");
                }
                self.cleaner.threads = n as usize;
            }
            "log.cleaner.io.max.bytes.per.second" => {
                // Kafka's type is a double; its default (Double.MAX_VALUE) means unlimited.
                let v: f64 = value.trim().parse().with_context(|| format!("{key}={value}: not a number"))?;
                if v.is_nan() || v <= 0.0 {
                    bail!("{key}={value}: must be above 0");
                }
                self.cleaner.io_max_bytes_per_second = (v < u64::MAX as f64).then_some(v as u64);
            }
            "log.cleaner.dedupe.buffer.size" => {
                let n = int(value)?;
                if n < 1024 * 1024 {
                    bail!("{key}={value}: must be at least 1048576");
                }
                self.cleaner.dedupe_buffer_size = n as u64;
            }
            "log.cleaner.backoff.ms" => {
                let n = int(value)?;
                if n < 0 {
                    bail!("{key}={value}: must be at least 0");
                }
                self.cleaner.backoff = Duration::from_millis(n as u64);
            }
            "socket.request.max.bytes" => {
                let n = int(value)?;
                if !(1024..=i32::MAX as i64).contains(&n) {
                    bail!("{key}={value}: must be between 1024 and {}", i32::MAX);
                }
                self.max_request_bytes = n as usize;
            }
            // tidemark's own: the host advertised by every listener `advertised.listeners`
            // does not name.
            "advertised.host" => {}
            "listeners" | "advertised.listeners" | "listener.security.protocol.map" => listeners::check(key, value)?,
            k if crate::cluster::settings::SETTINGS.contains(&k) => crate::cluster::settings::check(k, value)?,
            k if crate::replica::SETTINGS.contains(&k) => self.replication.apply(k, value)?,
            k if tls::SETTINGS.contains(&k) => tls::check(k, value)?,
            "sasl.enabled.mechanisms" => {
                sasl_mechanisms(value)?;
            }
            "authorizer.class.name" => {
                self.authorizer_enabled = match value.trim() {
                    "" => false,
                    AUTHORIZER | LEGACY_AUTHORIZER => true,
                    other => bail!("{key}={other}: tidemark authorizes as Kafka's {AUTHORIZER} (or {LEGACY_AUTHORIZER}); name one of them, or nothing"),
                }
            }
            "super.users" => {
                let mut users = Vec::new();
                for u in value.split(';').map(str::trim).filter(|u| !u.is_empty()) {
                    if !u.split_once(':').is_some_and(|(t, n)| !t.is_empty() && !n.is_empty()) {
                        bail!("{key}: {u} is not a principal (Type:name, e.g. User:admin)");
                    }
                    users.push(u.to_string());
                }
                self.authorizer.super_users = users;
            }
            "allow.everyone.if.no.acl.found" => {
                self.authorizer.allow_if_no_acl = flag(value)?
            }
            "sasl.server.max.receive.size" => {
                self.sasl.max_receive_size = bounded(key, int(value)?, 1024, i32::MAX as i64)? as usize
            }
            "connections.max.reauth.ms" => {
                let ms = bounded(key, int(value)?, 0, i64::MAX)? as u64;
                self.sasl.max_reauth = (ms > 0).then(|| Duration::from_millis(ms));
            }
            "connection.failed.authentication.delay.ms" => {
                self.sasl.failed_authentication_delay =
                    Duration::from_millis(bounded(key, int(value)?, 0, 60_000)? as u64)
            }
            k if k.starts_with("listener.name.") => {
                let (_, setting) = k["listener.name.".len()..]
                    .split_once('.')
                    .with_context(|| format!("{k}: expected listener.name.<listener>.<setting>"))?;
                match setting {
                    "sasl.enabled.mechanisms" => {
                        sasl_mechanisms(value)?;
                    }
                    s if tls::SETTINGS.contains(&s) => tls::check(s, value)?,
                    _ => bail!("{k}: unknown listener setting ({setting})"),
                }
            }
            "max.connections" => self.limits.max_connections = bounded(key, int(value)?, 1, i32::MAX as i64)? as usize,
            "max.connections.per.ip" => {
                self.limits.max_connections_per_ip = bounded(key, int(value)?, 1, i32::MAX as i64)? as usize
            }
            "tidemark.max.inflight.requests.per.connection" => {
                self.limits.max_inflight_per_connection = bounded(key, int(value)?, 1, 1024)? as usize
            }
            "queued.max.request.bytes" => {
                // Kafka's -1 (unbounded) is not offered: memory is always bounded here.
                self.limits.queued_max_request_bytes = bounded(key, int(value)?, 1 << 20, i64::MAX)? as u64
            }
            "tidemark.batch.cache.enable" => {
                self.batch_cache = flag(value)?
            }
            "tidemark.shard.io.memory.bytes" => {
                self.shard_io_memory = bounded(key, int(value)?, 64 << 10, 1 << 40)? as usize
            }
            "tidemark.fetch.max.memory.bytes" => {
                self.limits.fetch_max_memory_bytes = bounded(key, int(value)?, 1 << 20, i64::MAX)? as u64
            }
            "fetch.max.bytes" => {
                self.limits.fetch_max_bytes = bounded(key, int(value)?, 1024, i32::MAX as i64)? as usize
            }
            "connections.max.idle.ms" => {
                self.limits.connections_max_idle =
                    Duration::from_millis(bounded(key, int(value)?, 100, i64::MAX)? as u64)
            }
            "group.min.session.timeout.ms" => {
                self.coordinator.limits.min_session_timeout_ms = bounded(key, int(value)?, 1, i32::MAX as i64)? as i32
            }
            "group.max.session.timeout.ms" => {
                self.coordinator.limits.max_session_timeout_ms = bounded(key, int(value)?, 1, i32::MAX as i64)? as i32
            }
            "group.initial.rebalance.delay.ms" => {
                self.coordinator.limits.initial_rebalance_delay_ms =
                    bounded(key, int(value)?, 0, i32::MAX as i64)? as i32
            }
            "group.max.size" => self.coordinator.limits.max_size = bounded(key, int(value)?, 1, 1_000_000)? as usize,
            // KIP-848 consumer groups. Kafka bounds the interval and timeout by min/max
            // settings; tidemark takes any positive value (tests use short ones).
            "group.consumer.heartbeat.interval.ms" => {
                self.coordinator.consumer.heartbeat_interval_ms = bounded(key, int(value)?, 1, i32::MAX as i64)? as i32
            }
            "group.consumer.session.timeout.ms" => {
                self.coordinator.consumer.session_timeout_ms = bounded(key, int(value)?, 1, i32::MAX as i64)? as i32
            }
            "group.consumer.max.size" => {
                self.coordinator.consumer.max_size = bounded(key, int(value)?, 1, i32::MAX as i64)? as usize
            }
            "group.consumer.migration.policy" => {
                let Some(policy) = crate::groups::consumer::MigrationPolicy::parse(value) else {
                    bail!("{key}={value}: must be bidirectional, upgrade, downgrade or disabled");
                };
                self.coordinator.consumer.migration = policy
            }
            "offsets.topic.num.partitions" => {
                self.coordinator.offsets_partitions = bounded(key, int(value)?, 1, 1000)? as u32
            }
            "offsets.topic.segment.bytes" => {
                self.coordinator.offsets_segment_bytes = bounded(key, int(value)?, 1 << 20, i32::MAX as i64)? as u64
            }
            "offset.metadata.max.bytes" => {
                // Metadata travels in int16 strings in the offset records.
                self.coordinator.metadata_max_bytes = bounded(key, int(value)?, 0, i16::MAX as i64)? as usize
            }
            "tidemark.offsets.compaction.check.ms" => {
                self.coordinator.compaction_check =
                    Duration::from_millis(bounded(key, int(value)?, 100, i64::MAX)? as u64)
            }
            "tidemark.shard.call.timeout.ms" => {
                self.shard_call_timeout = Duration::from_millis(bounded(key, int(value)?, 100, i32::MAX as i64)? as u64)
            }
            "transaction.state.log.num.partitions" => {
                self.txn.partitions = bounded(key, int(value)?, 1, 1000)? as u32
            }
            "transaction.state.log.segment.bytes" => {
                self.txn.segment_bytes = bounded(key, int(value)?, 1 << 20, i32::MAX as i64)? as u64
            }
            "transaction.max.timeout.ms" => self.txn.max_timeout_ms = bounded(key, int(value)?, 1, i32::MAX as i64)? as i32,
            "transactional.id.expiration.ms" => {
                self.txn.id_expiration_ms = bounded(key, int(value)?, 1, i32::MAX as i64)?
            }
            "transaction.abort.timed.out.transaction.cleanup.interval.ms" => {
                self.txn.abort_check = Duration::from_millis(bounded(key, int(value)?, 1, i32::MAX as i64)? as u64)
            }
            "transaction.remove.expired.transaction.cleanup.interval.ms" => {
                self.txn.expire_check = Duration::from_millis(bounded(key, int(value)?, 1, i32::MAX as i64)? as u64)
            }
            "tidemark.offsets.compaction.bytes" => {
                self.coordinator.compaction_bytes = bounded(key, int(value)?, 0, i64::MAX)? as u64
            }
            _ => {
                if crate::config::topic_key_of_broker_name(key).is_none() && crate::config::topic_key(key).is_none() {
                    bail!("{key}: unknown setting");
                }
                // Validated with the others (the topic defaults come from all of them,
                // configs::Effective).
                let mut settings = self.settings.clone();
                settings.insert(key.to_string(), value.to_string());
                configs::topic_defaults(|name| settings.get(name))?;
            }
        }
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
        self.cluster = crate::cluster::settings::resolve(|k| self.settings.get(k).cloned(), self.node_id, &named)?;
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
        settings.extend(
            node.iter().filter(|(k, _)| crate::server::configs::dynamic_tls(k)).map(|(k, v)| (k.clone(), v.clone())),
        );
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
fn sasl_mechanisms(value: &str) -> anyhow::Result<Vec<String>> {
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

fn bounded(key: &str, n: i64, lo: i64, hi: i64) -> anyhow::Result<i64> {
    if !(lo..=hi).contains(&n) {
        bail!("{key}={n}: must be between {lo} and {hi}");
    }
    Ok(n)
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
