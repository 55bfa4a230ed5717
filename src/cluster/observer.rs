//! An observer: how a broker-only node (`process.roles=broker`) follows the metadata quorum
//! without a vote, as KRaft's brokers do. It fetches the committed metadata log from a
//! controller (any of them: what a controller applied is committed) and applies it to its own
//! state machine, the same image every controller has; a controller that no longer holds the
//! entries it asks for sends its newest snapshot instead. Its writes (registration, ISR
//! changes, topics) and heartbeats go to the active controller, found through the replies'
//! leader and the membership's addresses.
//!
//! It keeps the snapshots it installs in its directory (`<data-dir>/__cluster_metadata-0`) and
//! starts from the newest; entries after it are fetched again at each start. Nothing it holds
//! counts towards the quorum: it may lag, never lead.

use super::net::{self, Peer, Reply};
use super::state::{MetaImage, MetaStateMachine};
use super::types::{MetaCommand, MetaResponse, QuorumDescription};
use crate::io::Disk;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// What an observer needs to know.
#[derive(Debug, Clone)]
pub struct ObserverConfig {
    /// `node.id`.
    pub node_id: u64,
    /// Where the controllers are: `controller.quorum.voters`' addresses or
    /// `controller.quorum.bootstrap.servers`.
    pub servers: Vec<String>,
    /// The voter set's hash when `controller.quorum.voters` is given, else [`net::OBSERVER`].
    pub cluster: u64,
    /// Its snapshots' directory.
    pub dir: PathBuf,
    /// How long a call to a controller may take before the next one is tried (heartbeats,
    /// describes).
    pub call_timeout: Duration,
    /// How its connections to the controllers are secured (TLS, SASL).
    pub security: crate::client::security::Shared,
}

/// A running observer.
pub struct Observer<D: Disk> {
    pub state: MetaStateMachine<D>,
    config: ObserverConfig,
    /// The active controller as the last reply named it.
    leader: Cell<Option<u64>>,
    /// The connection heartbeats go over, to the controller it was made for.
    heartbeats: RefCell<Option<(u64, Peer)>>,
    stop: Rc<Cell<bool>>,
}

impl<D: Disk> Observer<D> {
    /// Open the state from `config.dir` and start fetching.
    pub async fn start(disk: D, config: ObserverConfig) -> io::Result<Rc<Observer<D>>> {
        if config.servers.is_empty() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "an observer needs a controller's address"));
        }
        disk.create_dir_all(&config.dir).await.map_err(io::Error::other)?;
        let state = MetaStateMachine::open(disk, &config.dir).await?;
        let observer = Rc::new(Observer {
            state,
            config,
            leader: Cell::new(None),
            heartbeats: RefCell::new(None),
            stop: Rc::new(Cell::new(false)),
        });
        glommio::spawn_local(Self::follow(observer.clone())).detach();
        Ok(observer)
    }

    pub fn node_id(&self) -> u64 {
        self.config.node_id
    }

    /// The active controller as this node last heard.
    pub fn leader(&self) -> Option<u64> {
        self.leader.get()
    }

    pub fn image(&self) -> MetaImage {
        self.state.image()
    }

    /// The voters' controller listener addresses, as the applied membership has them.
    pub fn voter_addresses(&self) -> BTreeMap<u64, String> {
        let membership = self.state.membership();
        let voters: Vec<u64> = membership.membership().voter_ids().collect();
        membership
            .membership()
            .nodes()
            .filter(|(id, _)| voters.contains(id))
            .map(|(id, node)| (*id, node.addr.clone()))
            .collect()
    }

    fn peer(&self, target: u64, addr: String) -> Peer {
        let dial = net::Dial { security: self.config.security.clone(), links: None };
        Peer::new(self.config.node_id, target, addr, self.config.cluster, dial)
    }

    /// Where to send a call for the leader: its address when known, else the servers in turn.
    fn leader_peer(&self, attempt: usize) -> Peer {
        if let Some((l, addr)) = self.leader.get().and_then(|l| self.voter_addresses().remove(&l).map(|a| (l, a))) {
            if attempt.is_multiple_of(2) {
                return self.peer(l, addr);
            }
        }
        let servers = &self.config.servers;
        self.peer(u64::MAX, servers[attempt % servers.len()].clone())
    }

    /// Fetch and apply, from one controller while it answers, until stopped.
    async fn follow(self: Rc<Self>) {
        let mut attempt = 0usize;
        let mut peer: Option<Peer> = None;
        let mut failing_since: Option<Instant> = None;
        while !self.stop.get() {
            let p = peer.get_or_insert_with(|| self.leader_peer(attempt));
            let reply = p.fetch(self.state.last_applied(), Duration::from_millis(500)).await;
            let outcome = match reply {
                // A controller that knows no leader and has nothing (one not yet in the quorum,
                // or one cut off from it): ask another.
                Ok(Reply::Entries { entries, leader: None }) if entries.is_empty() => {
                    Err(io::Error::other("the controller knows no active controller"))
                }
                Ok(Reply::Entries { entries, leader }) => {
                    self.note_leader(leader);
                    self.state.apply_committed(&entries).map(|_| ())
                }
                Ok(Reply::Image { meta, data, leader }) => {
                    self.note_leader(leader);
                    self.state.install_fetched(&meta, data.into_bytes()).await.map(|installed| {
                        if installed {
                            tracing::info!(last = ?meta.last_log_id, "metadata snapshot installed from a controller");
                        }
                    })
                }
                Ok(other) => Err(io::Error::other(format!("unexpected reply {other:?}"))),
                Err(e) => Err(e),
            };
            match outcome {
                Ok(()) => {
                    failing_since = None;
                    // Fetch from the active controller once it is known, as KRaft's observers do
                    // (it lists them in DescribeQuorum).
                    if let Some(l) = self.leader.get().filter(|l| peer.as_ref().is_some_and(|p| p.target() != *l)) {
                        if let Some(addr) = self.voter_addresses().remove(&l) {
                            peer = Some(self.peer(l, addr));
                        }
                    }
                }
                Err(e) => {
                    let since = *failing_since.get_or_insert_with(Instant::now);
                    let addr = peer.as_ref().map(|p| p.addr().to_string()).unwrap_or_default();
                    if since.elapsed() > Duration::from_secs(5) {
                        tracing::warn!(controller = addr, error = %e, "cannot fetch the cluster's metadata; trying another controller");
                    } else {
                        tracing::debug!(controller = addr, error = %e, "metadata fetch failed; trying another controller");
                    }
                    peer = None;
                    attempt += 1;
                    glommio::timer::sleep(Duration::from_millis(200)).await;
                }
            }
        }
    }

    fn note_leader(&self, leader: Option<u64>) {
        if leader.is_some() {
            self.leader.set(leader);
        }
    }

    /// Commit `command` through the active controller within `limit`, with the index it
    /// committed at ([`super::controller::Controller::write_at`]'s contract).
    pub async fn write_at(&self, command: MetaCommand, limit: Duration) -> io::Result<(MetaResponse, u64)> {
        let deadline = Instant::now() + limit;
        let mut last_error = String::from("no controller answered");
        let mut attempt = 0;
        while Instant::now() < deadline {
            let left = deadline.saturating_duration_since(Instant::now());
            let mut peer = self.leader_peer(attempt);
            attempt += 1;
            match peer.write(command.clone(), left.min(net::WRITE_TIMEOUT + Duration::from_secs(1))).await {
                Ok(Reply::Written { response, log_id }) => return Ok((response, log_id.index)),
                Ok(Reply::NotLeader { leader }) => {
                    self.note_leader(leader);
                    last_error = format!("not the leader (leader {leader:?})");
                    if leader.is_some() {
                        // The even attempt goes to the leader's address.
                        attempt += attempt % 2;
                        continue;
                    }
                }
                Ok(other) => last_error = format!("unexpected reply {other:?}"),
                Err(e) => last_error = e.to_string(),
            }
            glommio::timer::sleep(Duration::from_millis(50)).await;
        }
        Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("metadata write not committed within {limit:?}: {last_error}"),
        ))
    }

    /// A voter change (AddRaftVoter, RemoveRaftVoter) through the active controller.
    pub async fn voter_change(&self, rpc: net::Rpc, limit: Duration) -> Result<(), super::types::VoterChangeError> {
        use super::types::VoterChangeError;
        let mut peer = self.leader_peer(0);
        match peer.call_rpc(rpc, limit).await {
            Ok(Reply::VoterChange(r)) => r,
            Ok(Reply::NotLeader { leader }) => {
                self.note_leader(leader);
                Err(VoterChangeError::NotLeader(leader))
            }
            Ok(other) => Err(VoterChangeError::Failed(format!("unexpected reply {other:?}"))),
            Err(e) => Err(VoterChangeError::Failed(e.to_string())),
        }
    }

    /// Broker `broker`'s heartbeat (registration `epoch`) to the active controller.
    pub async fn heartbeat(&self, broker: i32, epoch: u64) -> Reply {
        let Some(leader) = self.leader.get() else { return Reply::NotLeader { leader: None } };
        let Some(addr) = self.voter_addresses().remove(&leader) else {
            return Reply::NotLeader { leader: Some(leader) };
        };
        let kept = self.heartbeats.borrow_mut().take().filter(|(to, _)| *to == leader);
        let mut peer = kept.map_or_else(|| self.peer(leader, addr), |(_, p)| p);
        let reply = peer
            .heartbeat(broker, epoch, self.config.call_timeout)
            .await
            .unwrap_or_else(|e| Reply::Failed(e.to_string()));
        if let Reply::NotLeader { leader } = &reply {
            self.note_leader(*leader);
        }
        *self.heartbeats.borrow_mut() = Some((leader, peer));
        reply
    }

    /// The quorum as its leader describes it.
    pub async fn describe_quorum(&self) -> io::Result<QuorumDescription> {
        let mut last_error = String::from("no controller answered");
        for attempt in 0..2 * self.config.servers.len().max(2) {
            match self.leader_peer(attempt).describe_quorum(self.config.call_timeout).await {
                Ok(Reply::Quorum(q)) => return Ok(q),
                Ok(Reply::NotLeader { leader }) => {
                    self.note_leader(leader);
                    last_error = format!("not the leader (leader {leader:?})");
                }
                Ok(other) => last_error = format!("unexpected reply {other:?}"),
                Err(e) => last_error = e.to_string(),
            }
        }
        Err(io::Error::other(format!("the quorum's leader did not describe it: {last_error}")))
    }

    pub fn shutdown(&self) {
        self.stop.set(true);
    }
}
