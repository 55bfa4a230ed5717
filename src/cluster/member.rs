//! A node's place in the metadata quorum, by its `process.roles`: a voter ([`Controller`], on a
//! combined or controller-only node) or an observer ([`Observer`], on a broker-only node). The
//! broker asks the same things of either: the applied image, writes and heartbeats through the
//! active controller, how the quorum stands.

use super::controller::Controller;
use super::net::Reply;
use super::observer::Observer;
use super::state::{MetaImage, MetaStateMachine};
use super::types::{ControllerNode, MetaCommand, MetaResponse, QuorumDescription, VoterChangeError};
use crate::io::Disk;
use std::collections::BTreeMap;
use std::io;
use std::rc::Rc;
use std::time::Duration;

pub enum Member<D: Disk> {
    /// A voter of the quorum (process.roles has controller).
    Voter(Box<Controller<D>>),
    /// A broker-only node following the quorum.
    Observer(Rc<Observer<D>>),
}

impl<D: Disk> Member<D> {
    pub fn node_id(&self) -> u64 {
        match self {
            Member::Voter(c) => c.node_id(),
            Member::Observer(o) => o.node_id(),
        }
    }

    /// The voter's controller, if this node is one.
    pub fn controller(&self) -> Option<&Controller<D>> {
        match self {
            Member::Voter(c) => Some(c),
            Member::Observer(_) => None,
        }
    }

    /// The applied metadata.
    pub fn state(&self) -> &MetaStateMachine<D> {
        match self {
            Member::Voter(c) => &c.state,
            Member::Observer(o) => &o.state,
        }
    }

    pub fn image(&self) -> MetaImage {
        self.state().image()
    }

    /// The active controller as this node knows it.
    pub async fn leader(&self) -> Option<u64> {
        match self {
            Member::Voter(c) => c.leader().await,
            Member::Observer(o) => o.leader(),
        }
    }

    /// Whether this node is the active controller.
    pub fn is_active_controller(&self) -> bool {
        self.controller().is_some_and(|c| c.raft.is_leader())
    }

    pub async fn write(&self, command: MetaCommand, limit: Duration) -> io::Result<MetaResponse> {
        self.write_at(command, limit).await.map(|(response, _)| response)
    }

    pub async fn write_at(&self, command: MetaCommand, limit: Duration) -> io::Result<(MetaResponse, u64)> {
        match self {
            Member::Voter(c) => c.write_at(command, limit).await,
            Member::Observer(o) => o.write_at(command, limit).await,
        }
    }

    pub async fn heartbeat(&self, broker: i32, epoch: u64) -> Reply {
        match self {
            Member::Voter(c) => c.heartbeat(broker, epoch).await,
            Member::Observer(o) => o.heartbeat(broker, epoch).await,
        }
    }

    pub async fn describe_quorum(&self) -> io::Result<QuorumDescription> {
        match self {
            Member::Voter(c) => c.describe_quorum().await,
            Member::Observer(o) => o.describe_quorum().await,
        }
    }

    /// Each voter's controller listener address.
    pub fn voter_addresses(&self) -> BTreeMap<u64, String> {
        match self {
            Member::Voter(c) => c.voter_addresses(),
            Member::Observer(o) => o.voter_addresses(),
        }
    }

    /// Make node `id` a voter (AddRaftVoter), through the active controller, within `limit`.
    pub async fn add_voter(&self, id: u64, node: ControllerNode, limit: Duration) -> Result<(), VoterChangeError> {
        match self {
            Member::Voter(c) => c.add_voter(id, node, limit).await,
            Member::Observer(o) => {
                let rpc = super::net::Rpc::AddVoter { id, node, timeout_ms: limit.as_millis() as u64 };
                o.voter_change(rpc, limit + Duration::from_secs(2)).await
            }
        }
    }

    /// Remove voter `id` of directory `directory_id` (RemoveRaftVoter), through the active
    /// controller.
    pub async fn remove_voter(&self, id: u64, directory_id: &str) -> Result<(), VoterChangeError> {
        match self {
            Member::Voter(c) => c.remove_voter(id, directory_id).await,
            Member::Observer(o) => {
                let rpc = super::net::Rpc::RemoveVoter { id, directory_id: directory_id.to_string() };
                o.voter_change(rpc, super::net::WRITE_TIMEOUT + Duration::from_secs(2)).await
            }
        }
    }

    /// Stop: a voter shuts openraft down and closes its metadata log; an observer stops fetching.
    pub async fn shutdown(&self) -> io::Result<()> {
        match self {
            Member::Voter(c) => {
                c.shutdown().await;
                c.log.partition().close().await.map_err(io::Error::other)
            }
            Member::Observer(o) => {
                o.shutdown();
                Ok(())
            }
        }
    }
}
