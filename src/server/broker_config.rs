//! The broker's settings as given (`--set`, `--config`, the command line): Kafka's names
//! where Kafka has one, each validated as it is set. Dynamic settings layer over these
//! ([`crate::server::configs`]).

use crate::config::LogConfig;
use crate::coordinator::group as coordinator;
use crate::server::limits;
use crate::server::listeners::{self, Listener};
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
    /// A controller's CONTROLLER listener (the quorum binds it; Kafka's clients of a controller
    /// are served there too).
    pub controller_listener: Option<Listener>,
    /// How this node's links to the other brokers and to the controllers are secured
    /// (resolved with the listeners).
    pub links: crate::server::links::ClusterLinks,
    /// SASL/OAUTHBEARER's token validator, when a listener offers it (made at startup).
    pub oauth: Option<crate::server::oauth::OAuth>,
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
    /// `--strict-config`: a setting tidemark does not use (one Kafka knows, or a name neither
    /// knows) is refused instead of reported and ignored.
    pub strict_config: bool,
    /// The settings given that tidemark does not use, each with why (a Kafka setting tidemark
    /// has no use for, or an unknown name and the closest known one): ignored, logged once.
    pub unused: BTreeMap<String, String>,
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
            controller_listener: None,
            links: Default::default(),
            oauth: None,
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
            strict_config: false,
            unused: BTreeMap::new(),
        })
    }
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
pub(crate) fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}
