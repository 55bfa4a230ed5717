//! Changes of a dynamic quorum's voters (KIP-853's AddRaftVoter and RemoveRaftVoter), made on
//! the active controller through openraft's membership changes: a voter is added as a learner
//! and caught up first, then made a voter; a voter leaves with its node entry. A static
//! quorum's voters (`controller.quorum.voters`, no directory ids) are never changed.

use super::state::Raft;
use super::types::{ControllerNode, Tm};
use crate::deadline::within;
use crate::io::Disk;
use std::time::Duration;

/// On the leader, the membership a voter change starts from: a dynamic quorum's (its voters
/// carry directory ids). Only there are voters added and removed: a static quorum's voters are
/// `controller.quorum.voters`, the same on every node, as KRaft version 0.
async fn dynamic_membership<D: Disk>(
    raft: &Raft<D>,
) -> Result<openraft::Membership<u64, ControllerNode>, super::types::VoterChangeError> {
    use openraft_rt::WatchReceiver;
    if !raft.is_leader() {
        return Err(super::types::VoterChangeError::NotLeader(raft.current_leader().await));
    }
    let membership = raft.metrics().borrow_watched().membership_config.membership().clone();
    if !membership.nodes().all(|(_, n)| !n.directory_id.is_empty()) {
        return Err(super::types::VoterChangeError::StaticQuorum);
    }
    Ok(membership)
}

fn change_error(
    e: openraft::errors::RaftError<Tm, openraft::errors::ClientWriteError<Tm>>,
) -> super::types::VoterChangeError {
    use super::types::VoterChangeError;
    match e.forward_to_leader() {
        Some(f) => VoterChangeError::NotLeader(f.leader_id),
        None => VoterChangeError::Failed(e.to_string()),
    }
}

/// On the leader: node `id` at `node` becomes a voter. It is added as a learner and caught up
/// first (openraft's blocking `add_learner`), then made a voter (joint consensus), within `limit`.
pub async fn add_voter<D: Disk>(
    raft: &Raft<D>,
    id: u64,
    node: ControllerNode,
    limit: Duration,
) -> Result<(), super::types::VoterChangeError> {
    use super::types::VoterChangeError;
    let membership = dynamic_membership(raft).await?;
    if node.directory_id.is_empty() {
        return Err(VoterChangeError::Invalid("a voter needs its directory id".into()));
    }
    if membership.voter_ids().any(|v| v == id) {
        return Err(VoterChangeError::DuplicateVoter(id));
    }
    let work = async {
        raft.add_learner(id, node.clone(), true).await.map_err(change_error)?;
        let voters: std::collections::BTreeSet<u64> = [id].into();
        raft.change_membership(openraft::ChangeMembers::AddVoterIds(voters), false).await.map_err(change_error)?;
        Ok(())
    };
    match within(limit, work).await {
        Some(r) => {
            if r.is_ok() {
                tracing::info!(voter = id, %node, "voter added to the metadata quorum");
            }
            r
        }
        None => Err(VoterChangeError::TimedOut(limit)),
    }
}

/// On the leader: voter `id` of directory `directory_id` leaves the quorum (and its node
/// entry: a node of that id joins again only by [`add_voter`]).
pub async fn remove_voter<D: Disk>(
    raft: &Raft<D>,
    id: u64,
    directory_id: &str,
) -> Result<(), super::types::VoterChangeError> {
    use super::types::VoterChangeError;
    let membership = dynamic_membership(raft).await?;
    let known = membership.get_node(&id).filter(|_| membership.voter_ids().any(|v| v == id));
    if known.is_none_or(|n| n.directory_id != directory_id) {
        return Err(VoterChangeError::VoterNotFound(id, directory_id.to_string()));
    }
    if membership.voter_ids().count() == 1 {
        return Err(VoterChangeError::Invalid("the quorum's last voter cannot be removed".into()));
    }
    let voters: std::collections::BTreeSet<u64> = [id].into();
    match within(
        super::net::WRITE_TIMEOUT,
        raft.change_membership(openraft::ChangeMembers::RemoveVoters(voters), false),
    )
    .await
    {
        Some(Ok(_)) => {
            tracing::info!(voter = id, directory = directory_id, "voter removed from the metadata quorum");
            Ok(())
        }
        Some(Err(e)) => Err(change_error(e)),
        None => Err(VoterChangeError::TimedOut(super::net::WRITE_TIMEOUT)),
    }
}
