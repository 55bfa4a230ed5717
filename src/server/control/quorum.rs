//! The metadata quorum inside the broker: on a clustered node (`process.roles`), shard 0 runs
//! the node's place in it ([`Member`]: a voter, [`crate::cluster::controller`], on a node with
//! the controller role; an observer, [`crate::cluster::observer`], on a broker-only node) beside
//! its control plane, registers the broker with the quorum (a node with the broker role), and
//! answers the other shards' questions about it with typed calls ([`QuorumStatus`]); no shard
//! reads the quorum's state any other way. A controller-only node registers no broker and hosts
//! no partitions.
//!
//! Brokers register (with their listeners) and heartbeat to the active controller, which
//! fences one silent for `broker.session.timeout.ms` (its leaderships move) and unfences it at
//! its next heartbeat; topics and their placement come from the metadata image
//! ([`super::metadata`]); Metadata and DescribeCluster report the active controller, the
//! unfenced brokers and each partition's leadership (docs/architecture.md, "The cluster").

use crate::cluster::controller::{self, voter_set_hash, Controller, ControllerConfig};
use crate::cluster::member::Member;
use crate::cluster::net::Reply;
use crate::cluster::observer::{Observer, ObserverConfig};
use crate::cluster::settings::ClusterSettings;
use crate::cluster::state::BrokerState;
use crate::cluster::types::{
    BrokerRegistration, ControllerNode, Endpoint, MetaCommand, MetaResponse, QuorumDescription,
};
use crate::io::{Disk, DmaDisk};
use crate::server::router::ShardCall;
use crate::server::shard::Shard;
use anyhow::Context as _;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The metadata log's directory in the data directory (KRaft's name).
pub const METADATA_DIR: &str = "__cluster_metadata-0";

/// Start this node's place in the quorum on shard 0 (a clustered node only) and, on a node with
/// the broker role, register the broker in the background until it is registered or the
/// broker stops.
pub async fn start(shard: &Rc<Shard>, stop: Arc<AtomicBool>) -> anyhow::Result<Option<Rc<Member<DmaDisk>>>> {
    let config = shard.config();
    let Some(cluster) = config.cluster.clone() else { return Ok(None) };
    let control = shard.control().expect("the quorum runs on shard 0");
    let dir = config.data_dir.join(METADATA_DIR);
    // A node joins a cluster with no topics of its own: the metadata's topics replace the
    // local ones, so a standalone node's data would be deleted.
    let existed = control.disk.exists(&dir).await?;
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
    let member = match cluster.controller_addr {
        Some(listen) => Member::Voter(Box::new(start_voter(shard, &cluster, listen, dir).await?)),
        None => Member::Observer(start_observer(shard, &cluster, dir).await?),
    };
    let member = Rc::new(member);
    if !cluster.roles.broker() {
        // A controller-only node: the quorum gets a cluster id from it too (the first one
        // committed is the cluster's), and nothing else here.
        let (m, cluster_id) = (member.clone(), shard.cluster_id().to_string());
        glommio::spawn_local(async move { commit_cluster_id(&m, &cluster_id, &stop).await }).detach();
        return Ok(Some(member));
    }
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
    super::publisher::spawn_publisher(shard.clone(), member.clone(), stop.clone(), existed, incarnation);
    let c = member.clone();
    let cluster_id = shard.cluster_id().to_string();
    let heartbeat = cluster.broker_heartbeat;
    glommio::spawn_local(async move {
        commit_cluster_id(&c, &cluster_id, &stop).await;
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
    Ok(Some(member))
}

/// A node with the controller role: its voter, listening at `listen`, with Kafka's controller
/// APIs served on the same listener.
async fn start_voter(
    shard: &Rc<Shard>,
    cluster: &ClusterSettings,
    listen: std::net::SocketAddr,
    dir: std::path::PathBuf,
) -> anyhow::Result<Controller<DmaDisk>> {
    let control = shard.control().expect("the quorum runs on shard 0");
    let directory_id = shard.directory_id().to_string();
    let mut cc = if cluster.dynamic {
        // A dynamic quorum: voters carry directory ids. The initial voters `tidemark storage
        // format` wrote start it; else this node alone when its bootstrap servers name only
        // itself; else it waits to be added.
        let mut cc = ControllerConfig::new(cluster.node_id, BTreeMap::new(), listen, dir);
        let formatted = crate::server::data_dir::initial_voters(&shard.config().data_dir)?;
        cc.initial = match formatted {
            Some(voters) => {
                let me = voters.iter().find(|v| v.id == cluster.node_id);
                if me.is_none_or(|v| v.directory_id.to_string() != directory_id) {
                    anyhow::bail!(
                        "{}: the initial voters do not name this node (node.id={}) with this directory ({directory_id}): \
                         format it again",
                        crate::server::data_dir::BOOTSTRAP_VOTERS,
                        cluster.node_id
                    );
                }
                let node = |v: &crate::server::data_dir::InitialVoter| ControllerNode {
                    addr: v.addr.clone(),
                    directory_id: v.directory_id.to_string(),
                };
                Some(voters.iter().map(|v| (v.id, node(v))).collect())
            }
            None => (!cluster.voters.is_empty()).then(|| {
                let node = |addr: &String| ControllerNode { addr: addr.clone(), directory_id: directory_id.clone() };
                cluster.voters.iter().map(|(&id, addr)| (id, node(addr))).collect()
            }),
        };
        cc
    } else {
        ControllerConfig::new(cluster.node_id, cluster.voters.clone(), listen, dir)
    };
    cc.directory_id = directory_id;
    cc.security = controller_link(shard)?;
    cc.election_timeout = cluster.election_timeout;
    cc.session_timeout = cluster.broker_session_timeout;
    cc.heartbeat = (cluster.election_timeout / 5).max(Duration::from_millis(20));
    let controller = controller::start(control.disk.clone(), cc)
        .await
        .map_err(|e| anyhow::anyhow!("starting the metadata quorum's controller: {e}"))?;
    tracing::info!(node = cluster.node_id, roles = ?cluster.roles, voters = ?cluster.voters, %listen, "controller started");
    if let Some(listener) = shard.config().controller_listener.clone() {
        let (shard, listener, door) = (shard.clone(), Rc::new(listener), controller.door());
        controller.accept_with(Rc::new(move |stream: glommio::net::TcpStream| {
            let ip = stream.peer_addr().map_or(std::net::IpAddr::from([0, 0, 0, 0]), |a| a.ip());
            match shard.connections().admit(ip) {
                Ok(admitted) => {
                    let serve = crate::server::connection::serve_controller_listener(
                        shard.clone(),
                        stream,
                        listener.clone(),
                        admitted,
                        door.clone(),
                    );
                    glommio::spawn_local(serve).detach();
                }
                Err(why) => tracing::info!(reason = %why, "controller listener: connection refused"),
            }
        }));
    }
    Ok(controller)
}

/// How this node's connections to the controllers are secured.
fn controller_link(shard: &Shard) -> anyhow::Result<crate::client::security::Shared> {
    let links = &shard.config().links;
    let link = links.controllers.as_ref().context("a node of a cluster has a link to its controllers")?;
    Ok(link.security.clone())
}

/// A broker-only node: its observer, following the controllers the settings name.
async fn start_observer(
    shard: &Rc<Shard>,
    cluster: &ClusterSettings,
    dir: std::path::PathBuf,
) -> anyhow::Result<Rc<Observer<DmaDisk>>> {
    let control = shard.control().expect("the quorum runs on shard 0");
    let oc = ObserverConfig {
        node_id: cluster.node_id,
        servers: cluster.controller_servers.clone(),
        cluster: if cluster.dynamic { crate::cluster::net::OBSERVER } else { voter_set_hash(&cluster.voters) },
        dir,
        call_timeout: (cluster.election_timeout * 2).max(Duration::from_secs(1)),
        security: controller_link(shard)?,
    };
    let observer = Observer::start(control.disk.clone(), oc)
        .await
        .map_err(|e| anyhow::anyhow!("following the metadata quorum: {e}"))?;
    tracing::info!(node = cluster.node_id, controllers = ?cluster.controller_servers, "following the metadata quorum as a broker-only node");
    Ok(observer)
}

/// Propose this node's cluster id until the quorum has one (the first committed is the
/// cluster's) or the node stops.
async fn commit_cluster_id(member: &Member<DmaDisk>, cluster_id: &str, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        match member.write(MetaCommand::SetClusterId { id: cluster_id.to_string() }, Duration::from_secs(5)).await {
            Ok(MetaResponse::ClusterId(id)) => {
                if id != cluster_id {
                    tracing::info!(cluster = %id, own = %cluster_id, "the quorum's cluster id is another node's: reported as the cluster's");
                }
                return;
            }
            Ok(other) => tracing::warn!(?other, "cluster id proposal answered oddly; retrying"),
            Err(e) => tracing::info!(error = %e, "cluster id not committed yet; retrying"),
        }
    }
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
    /// The voters' controller listener addresses.
    pub voters: BTreeMap<u64, String>,
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
            brokers: controller.state().unfenced_brokers(),
            voters: controller.voter_addresses(),
            cluster_id: controller.state().cluster_id(),
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
        Ok(Some((described, controller.voter_addresses())))
    }
}

/// A change of the quorum's voters (AddRaftVoter, RemoveRaftVoter), made through the active
/// controller. Sent to shard 0; `None` from a standalone node.
#[derive(Debug, Clone)]
pub enum VoterChange {
    Add { id: u64, node: ControllerNode, limit: Duration },
    Remove { id: u64, directory_id: String },
}

impl ShardCall<Shard> for VoterChange {
    type Reply = Option<Result<(), crate::cluster::types::VoterChangeError>>;
    const NAME: &'static str = "voter-change";

    async fn run(self, shard: Rc<Shard>) -> Self::Reply {
        let member = shard.control().and_then(|c| c.quorum.borrow().clone())?;
        Some(match self {
            VoterChange::Add { id, node, limit } => member.add_voter(id, node, limit).await,
            VoterChange::Remove { id, directory_id } => member.remove_voter(id, &directory_id).await,
        })
    }
}

/// The quorum's gauges in Prometheus text, for `/metrics` (served by shard 0; empty on a
/// standalone node): whether this node is the active controller, the Raft term, its last log
/// index, the committed and applied indexes, and the unfenced brokers.
pub fn prometheus(shard: &Shard) -> String {
    use openraft_rt::WatchReceiver;
    use std::fmt::Write as _;
    let Some(member) = shard.control().and_then(|c| c.quorum.borrow().clone()) else { return String::new() };
    let index = |l: Option<u64>| l.map_or(-1, |i| i as i64);
    let Some(controller) = member.controller() else {
        let applied = index(member.state().last_applied().map(|l| l.index));
        let unfenced = member.state().unfenced().len();
        return format!(
            "# HELP tidemark_controller_applied_index The last metadata index this node applied (-1: none).\n\
             # TYPE tidemark_controller_applied_index gauge\ntidemark_controller_applied_index {applied}\n\
             # HELP tidemark_controller_unfenced_brokers Brokers registered and not fenced.\n\
             # TYPE tidemark_controller_unfenced_brokers gauge\ntidemark_controller_unfenced_brokers {unfenced}\n"
        );
    };
    let m = controller.raft.metrics().borrow_watched().clone();
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
