//! A controller: one voter of the metadata quorum, running on the shard that calls [`start`]
//! (shard 0 in the broker). It opens the metadata log and state machine from its directory,
//! starts openraft, serves the quorum's RPCs on the CONTROLLER listener, and forms the cluster
//! on first start with no format step: every voter calls `initialize` with the same voter set
//! (from `controller.quorum.voters`, sorted), which openraft allows on a pristine node only and
//! documents as safe when the sets are equal. Each voter's initial membership entry (index 0)
//! carries its own id, so they differ; the first leader's wins and the others' are truncated
//! away as any conflicting entry. The set's hash travels with every RPC, so a node configured
//! with another set is refused instead of splitting the quorum.
//!
//! A dynamic quorum (KIP-853, `controller.quorum.bootstrap.servers`) names each voter with its
//! directory id. Its first controller initializes it alone ([`ControllerConfig::initial`]);
//! every other controller starts pristine and waits to be added (AddRaftVoter: a learner,
//! caught up, then a voter). A voter whose directory was wiped has a new directory id: the
//! others' calls name the old one, so it refuses to vote or replicate as that voter until it is
//! removed and added again.

use super::log_store::{metadata_log_config, MetaLog};
use super::net::{self, Network, Peer, Reply};
use super::state::Raft;
use super::state::{MetaImage, MetaStateMachine};
use super::types::MetaCommand;
use crate::io::Disk;
use crate::storage::{system_clock, Partition};
use openraft_rt::WatchReceiver;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

/// What a controller needs to know.
#[derive(Debug, Clone)]
pub struct ControllerConfig {
    /// `node.id`.
    pub node_id: u64,
    /// `controller.quorum.voters`: node id → `host:port` of its CONTROLLER listener (empty in
    /// a dynamic quorum: the membership names the voters).
    pub voters: BTreeMap<u64, String>,
    /// The membership a pristine node initializes the quorum with: the static voters (no
    /// directory ids), or this node alone with its directory id (a dynamic quorum's first
    /// controller); `None`: it joins a dynamic quorum that exists, once added.
    pub initial: Option<BTreeMap<u64, super::types::ControllerNode>>,
    /// This node's directory id (`meta.properties`).
    pub directory_id: String,
    /// Where this node's CONTROLLER listener binds.
    pub listen: SocketAddr,
    /// The metadata log's directory (`<data-dir>/__cluster_metadata-0`).
    pub dir: PathBuf,
    /// Leader heartbeat period.
    pub heartbeat: Duration,
    /// Election timeout: a follower that hears nothing for a random time in [min, 1.5 × min]
    /// starts an election.
    pub election_timeout: Duration,
    /// Build a snapshot (and purge the log below it) every this many applied entries.
    pub snapshot_every: u64,
    /// Entries kept below a snapshot when the log is purged, so a follower a little behind
    /// catches up from the log rather than by a snapshot.
    pub keep_below_snapshot: u64,
    /// `broker.session.timeout.ms`: the active controller fences a broker it has not heard
    /// from for this long.
    pub session_timeout: Duration,
    /// Tests only: links they cut to make network partitions ([`net::Links`]).
    pub links: Option<Rc<net::Links>>,
    /// How this node's connections to the other controllers are secured (TLS, SASL).
    pub security: crate::client::security::Shared,
}

impl ControllerConfig {
    /// How this node dials the others.
    pub fn dial(&self) -> net::Dial {
        net::Dial { security: self.security.clone(), links: self.links.clone() }
    }

    /// Defaults for a quorum on one machine or a LAN (KRaft's are 2 s fetch timeouts and 1 s
    /// elections; these are shorter, and generous enough for three nodes on two cores).
    pub fn new(node_id: u64, voters: BTreeMap<u64, String>, listen: SocketAddr, dir: PathBuf) -> Self {
        let initial = Some(
            voters
                .iter()
                .map(|(&id, addr)| {
                    (id, super::types::ControllerNode { addr: addr.clone(), directory_id: String::new() })
                })
                .collect(),
        );
        ControllerConfig {
            node_id,
            voters,
            initial,
            directory_id: String::new(),
            listen,
            dir,
            heartbeat: Duration::from_millis(200),
            election_timeout: Duration::from_millis(1000),
            snapshot_every: 1000,
            keep_below_snapshot: 100,
            session_timeout: Duration::from_secs(9),
            links: None,
            security: Default::default(),
        }
    }

    /// The voter set's hash: what every RPC carries ([`voter_set_hash`]).
    pub fn cluster_hash(&self) -> u64 {
        voter_set_hash(&self.voters)
    }
}

/// A static voter set's hash (FNV-1a over the sorted `id=addr` pairs; a dynamic quorum's is the
/// empty set's).
pub fn voter_set_hash(voters: &BTreeMap<u64, String>) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for (id, addr) in voters {
        for b in format!("{id}={addr};").bytes() {
            h ^= b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// A running controller.
pub struct Controller<D: Disk> {
    pub raft: Raft<D>,
    pub state: MetaStateMachine<D>,
    pub log: MetaLog<D>,
    served: Rc<net::Served<D>>,
    /// The connection heartbeats go over, to the leader it was made for (kept between them).
    heartbeats: RefCell<Option<(u64, Peer)>>,
    config: ControllerConfig,
    stop: Rc<Cell<bool>>,
}

/// On the active controller, every heartbeat period: fence the unfenced brokers silent longer
/// than the session timeout (committed through the quorum).
async fn fence_silent_brokers<D: Disk>(served: Rc<net::Served<D>>, config: ControllerConfig, stop: Rc<Cell<bool>>) {
    // The term this node last led in: leading in a new term (even after a loss and a win
    // within one period) gives every broker a full session again.
    let mut led_term = None;
    while !stop.get() {
        glommio::timer::sleep(config.heartbeat).await;
        if !served.raft.is_leader() {
            led_term = None;
            continue;
        }
        let term = served.raft.metrics().borrow_watched().current_term;
        if led_term != Some(term) {
            served.liveness.restart();
            led_term = Some(term);
        }
        for (id, epoch) in served.state.unfenced() {
            if served.liveness.expired(id, config.session_timeout) {
                match net::write(&served.raft, MetaCommand::FenceBroker { id, epoch }).await {
                    Reply::Written { .. } => tracing::warn!(
                        broker = id,
                        epoch,
                        "broker fenced: no heartbeat within broker.session.timeout.ms"
                    ),
                    other => tracing::info!(broker = id, ?other, "fencing a silent broker did not commit; retrying"),
                }
            }
        }
    }
}

/// Start the controller described by `config` on this executor.
pub async fn start<D: Disk>(disk: D, config: ControllerConfig) -> io::Result<Controller<D>> {
    if !config.voters.is_empty() && !config.voters.contains_key(&config.node_id) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("node.id {} is not among controller.quorum.voters", config.node_id),
        ));
    }
    let (partition, report) = Partition::open(disk.clone(), &config.dir, metadata_log_config(), system_clock())
        .await
        .map_err(io::Error::other)?;
    tracing::info!(dir = %config.dir.display(), clean = report.clean, "metadata log opened");
    let log = MetaLog::open(partition).await?;
    let state = MetaStateMachine::open(disk, &config.dir).await?;
    let raft_config = openraft::Config {
        cluster_name: "tidemark".into(),
        heartbeat_interval: config.heartbeat.as_millis() as u64,
        election_timeout_min: config.election_timeout.as_millis() as u64,
        election_timeout_max: config.election_timeout.as_millis() as u64 * 3 / 2,
        snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(config.snapshot_every),
        max_in_snapshot_log_to_keep: config.keep_below_snapshot,
        ..Default::default()
    };
    let raft_config = Arc::new(raft_config.validate().map_err(io::Error::other)?);
    let network = Network { cluster: config.cluster_hash(), me: config.node_id, dial: config.dial() };
    let raft =
        Raft::new(config.node_id, raft_config, network, log.clone(), state.clone()).await.map_err(io::Error::other)?;
    let listener = glommio::net::TcpListener::bind(config.listen).map_err(io::Error::from)?;
    let stop = Rc::new(Cell::new(false));
    let served = Rc::new(net::Served {
        me: config.node_id,
        links: config.links.clone(),
        raft: raft.clone(),
        state: state.clone(),
        log: log.clone(),
        directory_id: config.directory_id.clone(),
        mismatch_logged: Cell::new(None),
        election_timeout: config.election_timeout,
        liveness: Rc::default(),
        accept: RefCell::new(None),
        stop: stop.clone(),
        cluster: config.cluster_hash(),
        observers: RefCell::default(),
    });
    glommio::spawn_local(net::serve(served.clone(), listener)).detach();
    glommio::spawn_local(fence_silent_brokers(served.clone(), config.clone(), stop.clone())).detach();
    if !raft.is_initialized().await.map_err(io::Error::other)? {
        match config.initial.clone() {
            Some(members) => match raft.initialize(members).await {
                Ok(()) => tracing::info!(node = config.node_id, "metadata quorum initialized"),
                // Another voter's membership reached this node first: it is formed.
                Err(e) => tracing::info!(node = config.node_id, error = %e, "metadata quorum already initialized"),
            },
            None => tracing::info!(
                node = config.node_id,
                directory = config.directory_id,
                "a controller not yet in the quorum: it takes part once added (AddRaftVoter with this directory id)"
            ),
        }
    }
    Ok(Controller { raft, state, log, served, heartbeats: RefCell::new(None), config, stop })
}

impl<D: Disk> Controller<D> {
    pub fn node_id(&self) -> u64 {
        self.config.node_id
    }

    /// The active controller as this node knows it.
    pub async fn leader(&self) -> Option<u64> {
        self.raft.current_leader().await
    }

    /// The metadata image this node has applied.
    pub fn image(&self) -> MetaImage {
        self.state.image()
    }

    /// Commit `command` through the active controller (this node, or forwarded to the one it
    /// knows), retrying while a leader is being elected, within `limit`. Returns the response.
    pub async fn write(&self, command: MetaCommand, limit: Duration) -> io::Result<super::types::MetaResponse> {
        self.write_at(command, limit).await.map(|(response, _)| response)
    }

    /// [`Controller::write`], with the log index the command committed at (this node has
    /// applied it once its applied index reaches that).
    pub async fn write_at(
        &self,
        command: MetaCommand,
        limit: Duration,
    ) -> io::Result<(super::types::MetaResponse, u64)> {
        let deadline = std::time::Instant::now() + limit;
        let mut last_error = String::from("no leader");
        while std::time::Instant::now() < deadline {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let leader = self.leader().await;
            // Each attempt within the time left: a proposal made by a leader about to lose its
            // quorum is never answered. (An attempt that timed out may still commit, and is
            // then made again: the commands are applied so that a repeat does no harm but say
            // so, TOPIC_ALREADY_EXISTS or a newer broker epoch.)
            let reply = match leader {
                Some(l) if l == self.config.node_id => {
                    crate::deadline::within(left, net::write(&self.raft, command.clone()))
                        .await
                        .unwrap_or_else(|| Reply::Failed(format!("not committed within {limit:?}")))
                }
                Some(l) => match self.address_of(l) {
                    Some(addr) => {
                        let mut peer = self.peer(l, &addr);
                        peer.write(command.clone(), left.min(net::WRITE_TIMEOUT + Duration::from_secs(1)))
                            .await
                            .unwrap_or_else(|e| Reply::Failed(e.to_string()))
                    }
                    None => Reply::NotLeader { leader: None },
                },
                None => Reply::NotLeader { leader: None },
            };
            match reply {
                Reply::Written { response, log_id } => return Ok((response, log_id.index)),
                Reply::Failed(why) => last_error = why,
                Reply::NotLeader { leader } => last_error = format!("not the leader (leader {leader:?})"),
                other => last_error = format!("unexpected reply {other:?}"),
            }
            glommio::timer::sleep(Duration::from_millis(50)).await;
        }
        Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("metadata write not committed within {limit:?}: {last_error}"),
        ))
    }

    /// Send broker `broker`'s heartbeat (at registration `epoch`) to the active controller
    /// (this node, or the one it knows); the reply is a [`Reply::Heartbeat`] or why not.
    pub async fn heartbeat(&self, broker: i32, epoch: u64) -> Reply {
        match self.leader().await {
            Some(l) if l == self.config.node_id => net::heartbeat(&self.served, broker, epoch).await,
            Some(l) => match self.address_of(l) {
                Some(addr) => {
                    // The connection of the last heartbeat, if it went to this leader (taken
                    // out while in use: no borrow is held across the call).
                    let kept = self.heartbeats.borrow_mut().take().filter(|(to, _)| *to == l);
                    let mut peer = kept.map_or_else(|| self.peer(l, &addr), |(_, p)| p);
                    let reply = peer
                        .heartbeat(broker, epoch, self.config.heartbeat * 5)
                        .await
                        .unwrap_or_else(|e| Reply::Failed(e.to_string()));
                    *self.heartbeats.borrow_mut() = Some((l, peer));
                    reply
                }
                None => Reply::NotLeader { leader: Some(l) },
            },
            None => Reply::NotLeader { leader: None },
        }
    }

    /// The quorum as its leader sees it: this node's view if it leads, else the leader's, asked
    /// over the quorum's connections. `Err`: no leader known, or it did not answer in time.
    pub async fn describe_quorum(&self) -> io::Result<super::types::QuorumDescription> {
        let reply = match self.leader().await {
            Some(l) if l == self.config.node_id => net::describe_quorum(&self.served).await,
            Some(l) => match self.address_of(l) {
                Some(addr) => self.peer(l, &addr).describe_quorum(self.config.heartbeat * 5).await?,
                None => Reply::NotLeader { leader: Some(l) },
            },
            None => Reply::NotLeader { leader: None },
        };
        match reply {
            Reply::Quorum(q) => Ok(q),
            other => Err(io::Error::other(format!("the quorum's leader did not describe it: {other:?}"))),
        }
    }

    /// The controller listener address of each voter, as the quorum's membership has them.
    pub fn voter_addresses(&self) -> BTreeMap<u64, String> {
        let membership = self.state.membership();
        let nodes: BTreeMap<u64, String> =
            membership.membership().nodes().map(|(id, node)| (*id, node.addr.clone())).collect();
        if nodes.is_empty() {
            self.config.voters.clone()
        } else {
            nodes
        }
    }

    /// Where node `id`'s controller listener is (the membership's address, else the configured one).
    fn address_of(&self, id: u64) -> Option<String> {
        self.voter_addresses().remove(&id)
    }

    /// Make node `id` a voter (AddRaftVoter), through the active controller, within `limit`.
    pub async fn add_voter(
        &self,
        id: u64,
        node: super::types::ControllerNode,
        limit: Duration,
    ) -> Result<(), super::types::VoterChangeError> {
        match self.leader().await {
            Some(l) if l == self.config.node_id => super::voters::add_voter(&self.raft, id, node, limit).await,
            leader => {
                let rpc = net::Rpc::AddVoter { id, node, timeout_ms: limit.as_millis() as u64 };
                self.voter_change_at(leader, rpc, limit + Duration::from_secs(2)).await
            }
        }
    }

    /// Remove voter `id` of directory `directory_id` (RemoveRaftVoter), through the active
    /// controller.
    pub async fn remove_voter(&self, id: u64, directory_id: &str) -> Result<(), super::types::VoterChangeError> {
        match self.leader().await {
            Some(l) if l == self.config.node_id => super::voters::remove_voter(&self.raft, id, directory_id).await,
            leader => {
                let rpc = net::Rpc::RemoveVoter { id, directory_id: directory_id.to_string() };
                self.voter_change_at(leader, rpc, net::WRITE_TIMEOUT + Duration::from_secs(2)).await
            }
        }
    }

    async fn voter_change_at(
        &self,
        leader: Option<u64>,
        rpc: net::Rpc,
        limit: Duration,
    ) -> Result<(), super::types::VoterChangeError> {
        use super::types::VoterChangeError;
        let Some((l, addr)) = leader.and_then(|l| self.address_of(l).map(|a| (l, a))) else {
            return Err(VoterChangeError::NotLeader(leader));
        };
        match self.peer(l, &addr).call_rpc(rpc, limit).await {
            Ok(Reply::VoterChange(r)) => r,
            Ok(Reply::NotLeader { leader }) => Err(VoterChangeError::NotLeader(leader)),
            Ok(other) => Err(VoterChangeError::Failed(format!("unexpected reply {other:?}"))),
            Err(e) => Err(VoterChangeError::Failed(e.to_string())),
        }
    }

    /// This node's directory id.
    pub fn directory_id(&self) -> &str {
        &self.config.directory_id
    }

    /// Hand every connection on the CONTROLLER listener to the node's server (`accept`), which
    /// passes quorum connections back through [`Controller::door`].
    pub fn accept_with(&self, accept: net::Handoff) {
        *self.served.accept.borrow_mut() = Some(accept);
    }

    /// Where the node's server passes quorum connections.
    pub fn door(&self) -> net::QuorumDoor<D> {
        net::QuorumDoor(Rc::downgrade(&self.served))
    }

    fn peer(&self, target: u64, addr: &str) -> Peer {
        Peer::new(self.config.node_id, target, addr.to_string(), self.config.cluster_hash(), self.config.dial())
    }

    /// Stop serving and shut openraft down (the metadata log stays as it is on disk).
    pub async fn shutdown(&self) {
        self.stop.set(true);
        let _ = self.raft.shutdown().await;
    }
}
