//! The broker: one shard (glommio executor) per core, each accepting connections on the same
//! port (SO_REUSEPORT) and owning the partitions that hash to it; work for a partition owned
//! elsewhere goes over the channel mesh. SIGTERM/SIGINT stop accepting, let requests finish,
//! close every partition cleanly (close entries, clean markers) and exit.

pub mod admin;
pub mod configs;
pub mod connection;
pub mod coordinator;
pub mod errors;
pub mod handlers;
pub mod limits;
pub mod metrics_http;
pub mod shard;

use anyhow::{bail, Context};
use glommio::channels::channel_mesh::MeshBuilder;
use glommio::{LocalExecutorBuilder, Placement};
use shard::{Shard, ShardMsg};
use std::collections::BTreeMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Broker settings (Kafka's names where Kafka has one).
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    pub data_dir: PathBuf,
    pub listen: SocketAddr,
    pub advertised_host: String,
    pub advertised_port: i32,
    pub shards: usize,
    /// `node.id`
    pub node_id: i32,
    /// `auto.create.topics.enable`
    pub auto_create_topics: bool,
    /// `num.partitions`
    pub num_partitions: u32,
    /// `log.retention.check.interval.ms`
    pub retention_check_interval: Duration,
    /// `socket.request.max.bytes`
    pub max_request_bytes: usize,
    /// Limits on clients and the memory they may make the broker hold (docs/operations.md).
    pub limits: limits::Limits,
    /// Consumer groups and `__consumer_offsets` (`group.*`, `offsets.*`).
    pub coordinator: coordinator::CoordinatorConfig,
    /// `--metrics-listen`: where shard 0 serves Prometheus text at `/metrics`.
    pub metrics_listen: Option<SocketAddr>,
    /// `--fault-injection`: the metrics endpoint also takes disk faults at `/faults` (tests).
    pub fault_injection: bool,
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
            // A wildcard address is no use to clients: advertise the host name instead
            // (override with advertised.host).
            advertised_host: if addr.ip().is_unspecified() { host_name() } else { addr.ip().to_string() },
            advertised_port: addr.port() as i32,
            shards,
            node_id: 0,
            auto_create_topics: true,
            num_partitions: 1,
            retention_check_interval: crate::storage::manager::DEFAULT_RETENTION_CHECK_INTERVAL,
            max_request_bytes: 100 * 1024 * 1024,
            limits: limits::Limits::default(),
            coordinator: coordinator::CoordinatorConfig::default(),
            metrics_listen: None,
            fault_injection: false,
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
        match key {
            "node.id" | "broker.id" => self.node_id = int(value)? as i32,
            "auto.create.topics.enable" => {
                self.auto_create_topics = match value.trim() {
                    "true" => true,
                    "false" => false,
                    _ => bail!("{key}={value}: expected true or false"),
                }
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
            "socket.request.max.bytes" => {
                let n = int(value)?;
                if !(1024..=i32::MAX as i64).contains(&n) {
                    bail!("{key}={value}: must be between 1024 and {}", i32::MAX);
                }
                self.max_request_bytes = n as usize;
            }
            "advertised.host" => self.advertised_host = value.trim().to_string(),
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

/// Take the data directory for this process: an exclusive `flock` on `<data-dir>/.lock`
/// (holding our pid), held until the returned file drops. Fails fast, with a clear message,
/// when the directory cannot be written or another broker holds it. The kernel releases the
/// lock when a process dies, kill -9 included.
fn lock_data_dir(dir: &std::path::Path) -> anyhow::Result<std::fs::File> {
    use std::io::{Read, Seek, Write};
    let path = dir.join(".lock");
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .with_context(|| format!("data dir {} is not writable (opening {})", dir.display(), path.display()))?;
    match f.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut pid = String::new();
            let _ = f.read_to_string(&mut pid);
            bail!("data dir {} is in use by another tidemark process (pid {})", dir.display(), pid.trim());
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(e).with_context(|| format!("locking {}", path.display())),
    }
    let written = f
        .set_len(0)
        .and_then(|_| f.rewind())
        .and_then(|_| write!(f, "{}", std::process::id()))
        .and_then(|_| f.sync_all());
    written.with_context(|| format!("data dir {} is not writable (writing {})", dir.display(), path.display()))?;
    Ok(f)
}

/// Run the broker until `stop` is set (by SIGTERM/SIGINT in the binary).
pub fn run(config: BrokerConfig, stop: Arc<AtomicBool>) -> anyhow::Result<()> {
    std::fs::create_dir_all(&config.data_dir)
        .with_context(|| format!("creating data dir {}", config.data_dir.display()))?;
    let _lock = lock_data_dir(&config.data_dir)?;
    // Fail fast, with a clear message, when another process serves the port. (Not a test
    // bind: after a kill -9, connections of the old process linger and a plain bind fails,
    // while the shards' SO_REUSEPORT listeners bind fine.)
    let probe = match config.listen {
        SocketAddr::V4(a) if a.ip().is_unspecified() => SocketAddr::from(([127, 0, 0, 1], a.port())),
        SocketAddr::V6(a) if a.ip().is_unspecified() => SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, a.port())),
        a => a,
    };
    // A process killed with -9 can leave its listener accepting for a moment (its io_uring
    // ring, holding a pending accept, is torn down asynchronously): a server that is really
    // there stays, a dying one goes. Wait up to 3 s before calling the port taken.
    let mut taken = true;
    for _ in 0..30 {
        match std::net::TcpStream::connect_timeout(&probe, Duration::from_millis(200)) {
            // With nothing listening, a connect to a free port in the ephemeral range can be
            // given that very port as its source (TCP simultaneous open): not a server.
            Ok(s) if s.local_addr().ok() != s.peer_addr().ok() => std::thread::sleep(Duration::from_millis(100)),
            _ => {
                taken = false;
                break;
            }
        }
    }
    if taken {
        bail!("cannot listen on {}: another process accepts connections there", config.listen);
    }
    // Dynamic broker settings, over the static ones: a bad file stops startup, naming it.
    let dynamic = configs::DynamicConfigs::load(&config.data_dir)?;
    let effective = configs::Effective::compute(&config, &dynamic)
        .with_context(|| format!("applying {}", config.data_dir.join(configs::BROKER_CONFIGS_FILE).display()))?;
    let config = Arc::new(config);
    let mesh = MeshBuilder::<ShardMsg, _>::full(config.shards, 1024);
    let connections = limits::ConnectionTable::new(effective.max_connections, effective.max_connections_per_ip);
    let mut handles = Vec::new();
    for id in 0..config.shards {
        let (config, mesh, stop, connections) = (config.clone(), mesh.clone(), stop.clone(), connections.clone());
        let dynamic = dynamic.clone();
        let h = LocalExecutorBuilder::new(Placement::Fixed(id))
            .name(&format!("shard-{id}"))
            .spawn(move || async move { run_shard(id, config, dynamic, mesh, stop, connections).await })
            .map_err(|e| anyhow::anyhow!("starting shard {id}: {e}"))?;
        handles.push(h);
    }
    tracing::info!(listen = %config.listen, shards = config.shards, data_dir = %config.data_dir.display(), "tidemark serving");
    // Join every shard (a failing one sets `stop` for the others), then report the first error.
    let mut first_err = None;
    for (id, h) in handles.into_iter().enumerate() {
        let r = h
            .join()
            .map_err(|e| anyhow::anyhow!("shard {id} failed: {e:?}"))
            .and_then(|r| r.with_context(|| format!("shard {id}")));
        if let Err(e) = r {
            stop.store(true, Ordering::Relaxed);
            first_err.get_or_insert(e);
        }
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    tracing::info!("tidemark stopped cleanly");
    Ok(())
}

async fn run_shard(
    id: usize,
    config: Arc<BrokerConfig>,
    dynamic: configs::DynamicConfigs,
    mesh: MeshBuilder<ShardMsg, glommio::channels::channel_mesh::Full>,
    stop: Arc<AtomicBool>,
    connections: Arc<limits::ConnectionTable>,
) -> anyhow::Result<()> {
    let shard = match Shard::open(id, config.shards, config.clone(), dynamic, connections.clone()).await {
        Ok(s) => s,
        Err(e) => {
            // The other shards wait for this one at the mesh: release them.
            stop.store(true, Ordering::Relaxed);
            return Err(e);
        }
    };
    // Joining the mesh is the startup barrier: every shard has opened its partitions (unless
    // one failed and set `stop`).
    let joined = futures_lite::future::or(async { Some(mesh.join().await) }, async {
        while !stop.load(Ordering::Relaxed) {
            glommio::timer::sleep(Duration::from_millis(50)).await;
        }
        None
    })
    .await;
    let Some(joined) = joined else {
        shard.manager.close_all().await?;
        bail!("shard {id}: startup stopped (another shard failed or a signal arrived)");
    };
    let (senders, receivers) = joined.map_err(|_| anyhow::anyhow!("joining the shard mesh"))?;
    shard.attach(senders, receivers);
    coordinator::Coordinator::spawn_ticker(&shard);
    if let (0, Some(addr)) = (id, config.metrics_listen) {
        let listener = glommio::net::TcpListener::bind(addr)
            .map_err(std::io::Error::from)
            .with_context(|| format!("--metrics-listen {addr}"))?;
        glommio::spawn_local(metrics_http::serve(shard.clone(), listener, stop.clone())).detach();
        tracing::info!(%addr, "metrics at http://{addr}/metrics");
    }
    if id == 0 {
        // Committed offsets need their topic before the first group request (FindCoordinator
        // answers COORDINATOR_NOT_AVAILABLE until it exists).
        let s = shard.clone();
        glommio::spawn_local(async move {
            s.ensure_offsets_topic().await;
        })
        .detach();
    }
    let listener = glommio::net::TcpListener::bind(config.listen)
        .map_err(std::io::Error::from)
        .with_context(|| format!("listening on {}", config.listen))?;
    let stopped = || async {
        while !stop.load(Ordering::Relaxed) {
            glommio::timer::sleep(Duration::from_millis(50)).await;
        }
        None
    };
    loop {
        let accepted = futures_lite::future::or(async { Some(listener.accept().await) }, stopped()).await;
        match accepted {
            None => break,
            Some(Ok(stream)) => {
                let peer = stream.peer_addr().ok();
                let ip = peer.map_or(std::net::IpAddr::from([0, 0, 0, 0]), |a| a.ip());
                match connections.admit(ip) {
                    Ok(admitted) => {
                        glommio::spawn_local(connection::serve(shard.clone(), stream, admitted)).detach();
                    }
                    Err(why) => {
                        crate::metrics::count(crate::metrics::Counter::ConnectionsRefused, 1);
                        if let Some(skipped) = shard.refusals_log.ready() {
                            let peer = peer.map(|a| a.to_string()).unwrap_or_default();
                            tracing::warn!(peer, reason = %why, refused_since_last_line = skipped, "connection refused; closing it");
                        }
                        drop(stream);
                    }
                }
            }
            Some(Err(e)) => {
                // Out of descriptors and the like: back off instead of spinning.
                tracing::warn!(error = %e, "accept failed");
                glommio::timer::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    // Let in-flight requests finish, then close every partition cleanly.
    glommio::timer::sleep(Duration::from_millis(200)).await;
    shard.manager.close_all().await?;
    tracing::info!(shard = id, "latency: {}", crate::metrics::summary(&crate::metrics::snapshot()));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
