//! What every control-plane change on shard 0 stands on: the control state, the publishing of a
//! delta to every shard, and, on a clustered node, the commit of a change through the metadata
//! quorum (answered once this node has published it).

use crate::cluster::member::Member;
use crate::cluster::types::{MetaCommand, MetaResponse};
use crate::io::DmaDisk;
use crate::protocol::errors as code;
use crate::server::errors::{refusal_code, AdminError};
use crate::server::publish::{Delta, Publish};
use crate::server::shard::{ControlState, Shard};
use std::rc::Rc;
use std::time::Duration;

/// The outcome of a control-plane change.
pub type AdminResult = Result<(), AdminError>;

/// Shard 0's control state, or the error a call that reached another shard gets (a bug in
/// the caller: these calls are sent to shard 0).
pub fn control_of(shard: &Shard) -> Result<&ControlState, AdminError> {
    shard.control().ok_or_else(|| AdminError::new(code::UNKNOWN_SERVER_ERROR, "topic changes run on shard 0"))
}

/// Publish `delta` to every shard, one after another ([`crate::server::publish`]); a shard that
/// did not take it is logged (its view is stale until the next change or restart).
pub async fn publish(shard: &Rc<Shard>, delta: Delta) {
    let kind = delta.kind();
    for (target, r) in shard.call_each(Publish(delta)).await.into_iter().enumerate() {
        if let Err(e) = r {
            tracing::error!(shard = target, delta = kind, error = %e, "a shard did not take a metadata change");
        }
    }
}

/// How long a topic change waits for its commit, and then for this node to publish it.
const COMMIT_LIMIT: Duration = Duration::from_secs(10);

/// This node's controller, if it is clustered and the controller has started.
pub fn controller(shard: &Shard) -> Option<Rc<Member<DmaDisk>>> {
    shard.control()?.quorum.borrow().clone()
}

/// The error a topic change gets on a clustered node whose controller is not up yet.
pub fn not_ready() -> AdminError {
    AdminError::new(code::NOT_CONTROLLER, "the metadata quorum is not up yet on this node")
}

/// Commit `command` through the quorum; once this node has published it, its response (a
/// refusal is its error).
pub async fn commit(shard: &Shard, command: MetaCommand) -> Result<MetaResponse, AdminError> {
    let controller = controller(shard).ok_or_else(not_ready)?;
    let (response, index) = controller
        .write_at(command, COMMIT_LIMIT)
        .await
        .map_err(|e| AdminError::new(code::REQUEST_TIMED_OUT, e.to_string()))?;
    if let MetaResponse::Refused { reason, message } = response {
        return Err(AdminError::new(refusal_code(reason), message));
    }
    if !until_published(shard, |i| *i >= index).await {
        let message = format!("committed at {index}, not yet applied on this node");
        return Err(AdminError::new(code::REQUEST_TIMED_OUT, message));
    }
    Ok(response)
}

/// Wait, within the commit limit, until `ready` holds at a publish of this node's image (at
/// once if it holds now); whether it does.
pub async fn until_published(shard: &Shard, ready: impl FnMut(&u64) -> bool) -> bool {
    let Some(control) = shard.control() else { return false };
    let mut published = control.published.subscribe();
    let waited = crate::deadline::within(COMMIT_LIMIT, published.wait_for(ready)).await;
    matches!(waited, Some(Ok(_)))
}
