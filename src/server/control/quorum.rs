//! The metadata quorum inside the broker: on a clustered node (`process.roles`),
//! shard 0 runs the node's controller ([`crate::cluster::controller`]) beside its control
//! plane, registers the broker with the quorum, and answers the other shards' questions about
//! it with typed calls ([`QuorumStatus`]); no shard reads the quorum's state any other way.
//!
//! Brokers register (with their listeners) and heartbeat to the active controller, which
//! fences one silent for `broker.session.timeout.ms` (its leaderships move) and unfences it at
//! its next heartbeat; topics and their placement come from the metadata image
//! ([`super::metadata`]); Metadata and DescribeCluster report the active controller, the
//! unfenced brokers and each partition's leadership (docs/architecture.md, "The cluster").

use crate::cluster::controller::{self, Controller, ControllerConfig};
use crate::cluster::net::Reply;
use crate::cluster::state::BrokerState;
use crate::cluster::types::{BrokerRegistration, Endpoint, MetaCommand, MetaResponse, QuorumDescription};
use crate::io::{Disk, DmaDisk};
use crate::server::router::ShardCall;
use crate::server::shard::Shard;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The metadata log's directory in the data directory (KRaft's name).
pub const METADATA_DIR: &str = "__cluster_metadata-0";

/// Start this node's controller on shard 0 (a clustered node only), and register the broker in
/// the background until it is registered or the broker stops.
pub async fn start(shard: &Rc<Shard>, stop: Arc<AtomicBool>) -> anyhow::Result<Option<Rc<Controller<DmaDisk>>>> {
    let config = shard.config();
    let Some(cluster) = config.cluster.clone() else { return Ok(None) };
    let control = shard.control().expect("the quorum runs on shard 0");
    let mut cc = ControllerConfig::new(
        cluster.node_id,
        cluster.voters.clone(),
        cluster.controller_addr,
        config.data_dir.join(METADATA_DIR),
    );
    cc.election_timeout = cluster.election_timeout;
    cc.session_timeout = cluster.broker_session_timeout;
    cc.heartbeat = (cluster.election_timeout / 5).max(Duration::from_millis(20));
    // A node joins a cluster with no topics of its own: the metadata's topics replace the
    // local ones, so a standalone node's data would be deleted.
    let existed = control.disk.exists(&config.data_dir.join(METADATA_DIR)).await?;
    if !existed {
        let mut lease = control.lease().await;
        let names: Vec<String> = lease.store().names().map(str::to_string).collect();
        if !names.is_empty() {
            anyhow::bail!(
                "{} holds topics of a standalone node ({}): a node joins a cluster with an empty data directory \
                 (its topics would be replaced by the cluster's)",
                config.data_dir.display(),
                names.join(", ")
            );
        }
    }
    let controller = Rc::new(
        controller::start(control.disk.clone(), cc)
            .await
            .map_err(|e| anyhow::anyhow!("starting the metadata quorum's controller: {e}"))?,
    );
    tracing::info!(node = cluster.node_id, voters = ?cluster.voters, listen = %cluster.controller_addr, "controller started");
    let registration = BrokerRegistration {
        id: config.node_id,
        incarnation: format!("{:016x}", rand_u64()),
        listeners: config
            .listeners
            .iter()
            .map(|l| Endpoint {
                name: l.name.clone(),
                host: l.advertised_host.clone(),
                port: l.advertised_port as u16,
                security_protocol: l.protocol.name().to_string(),
            })
            .collect(),
        rack: None,
    };
    let incarnation = registration.incarnation.clone();
    super::publisher::spawn_publisher(shard.clone(), controller.clone(), stop.clone(), existed, incarnation);
    let c = controller.clone();
    let cluster_id = shard.cluster_id().to_string();
    let heartbeat = cluster.broker_heartbeat;
    glommio::spawn_local(async move {
        while !stop.load(Ordering::Relaxed) {
            match c.write(MetaCommand::SetClusterId { id: cluster_id.clone() }, Duration::from_secs(5)).await {
                Ok(MetaResponse::ClusterId(id)) => {
                    if id != cluster_id {
                        tracing::info!(cluster = %id, own = %cluster_id, "the quorum's cluster id is another node's: reported as the cluster's");
                    }
                    break;
                }
                Ok(other) => tracing::warn!(?other, "cluster id proposal answered oddly; retrying"),
                Err(e) => tracing::info!(error = %e, "cluster id not committed yet; retrying"),
            }
        }
        // Register, then heartbeat; register again whenever the active controller does not
        // know this registration (its epoch).
        'register: while !stop.load(Ordering::Relaxed) {
            let epoch = match c.write(MetaCommand::RegisterBroker(registration.clone()), Duration::from_secs(5)).await {
                Ok(MetaResponse::BrokerEpoch(epoch)) => {
                    tracing::info!(broker = registration.id, epoch, "broker registered with the metadata quorum");
                    epoch
                }
                Ok(other) => {
                    tracing::warn!(?other, "broker registration refused; retrying");
                    continue;
                }
                Err(e) => {
                    tracing::info!(error = %e, "broker registration not committed yet; retrying");
                    continue;
                }
            };
            while !stop.load(Ordering::Relaxed) {
                match c.heartbeat(registration.id, epoch).await {
                    Reply::Heartbeat { registered: false, .. } => continue 'register,
                    Reply::Heartbeat { .. } => {}
                    other => tracing::debug!(?other, "heartbeat not answered by the active controller"),
                }
                glommio::timer::sleep(heartbeat).await;
            }
        }
    })
    .detach();
    Ok(Some(controller))
}

fn rand_u64() -> u64 {
    let mut b = [0u8; 8];
    let _ = getrandom::fill(&mut b);
    u64::from_le_bytes(b)
}

/// What the quorum looks like from this node: the active controller (as this node knows it)
/// and the registered brokers that are not fenced. Sent to shard 0; `None` from a standalone
/// node.
#[derive(Debug, Clone)]
pub struct QuorumStatus;

/// The answer to [`QuorumStatus`].
#[derive(Debug, Clone)]
pub struct QuorumView {
    pub leader: Option<u64>,
    pub brokers: Vec<BrokerState>,
    /// The cluster's id, once the quorum has one.
    pub cluster_id: Option<String>,
}

impl ShardCall<Shard> for QuorumStatus {
    type Reply = Option<QuorumView>;
    const NAME: &'static str = "quorum-status";

    async fn run(self, shard: Rc<Shard>) -> Option<QuorumView> {
        let controller = shard.control()?.quorum.borrow().clone()?;
        let leader = controller.leader().await;
        Some(QuorumView {
            leader,
            brokers: controller.state.unfenced_brokers(),
            cluster_id: controller.state.cluster_id(),
        })
    }
}

/// How the metadata quorum stands, as its leader sees it (DescribeQuorum), with each voter's
/// controller listener address. Sent to shard 0; `Ok(None)` from a standalone node, `Err` when
/// no leader answered.
#[derive(Debug, Clone)]
pub struct DescribeQuorum;

impl ShardCall<Shard> for DescribeQuorum {
    type Reply = Result<Option<(QuorumDescription, BTreeMap<u64, String>)>, String>;
    const NAME: &'static str = "describe-quorum";

    async fn run(self, shard: Rc<Shard>) -> Self::Reply {
        let Some(controller) = shard.control().and_then(|c| c.quorum.borrow().clone()) else { return Ok(None) };
        let described = controller.describe_quorum().await.map_err(|e| e.to_string())?;
        Ok(Some((described, controller.voter_addresses().clone())))
    }
}

/// The quorum's gauges in Prometheus text, for `/metrics` (served by shard 0; empty on a
/// standalone node): whether this node is the active controller, the Raft term, its last log
/// index, the committed and applied indexes, and the unfenced brokers.
pub fn prometheus(shard: &Shard) -> String {
    use openraft_rt::WatchReceiver;
    use std::fmt::Write as _;
    let Some(controller) = shard.control().and_then(|c| c.quorum.borrow().clone()) else { return String::new() };
    let m = controller.raft.metrics().borrow_watched().clone();
    let index = |l: Option<u64>| l.map_or(-1, |i| i as i64);
    let gauges = [
        ("tidemark_controller_active", "1 if this node is the active controller.", controller.raft.is_leader() as i64),
        ("tidemark_controller_term", "The metadata quorum's Raft term as this node knows it.", m.current_term as i64),
        (
            "tidemark_controller_last_log_index",
            "The last index in this node's metadata log (-1: none).",
            index(m.last_log_index),
        ),
        (
            "tidemark_controller_committed_index",
            "The last committed index this node knows (-1: none).",
            index(m.local_committed.map(|l| l.index)),
        ),
        (
            "tidemark_controller_applied_index",
            "The last index this node applied (-1: none).",
            index(m.last_applied.map(|l| l.index)),
        ),
        (
            "tidemark_controller_unfenced_brokers",
            "Brokers registered and not fenced.",
            controller.state.unfenced().len() as i64,
        ),
    ];
    let mut out = String::new();
    for (name, help, value) in gauges {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}");
    }
    out
}
