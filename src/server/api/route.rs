//! Requests for a coordinator (a group's, a transactional id's) travel to the shard that
//! coordinates them as typed calls, issued while the request holds its connection's turn, so
//! one connection's coordinator operations keep their order.

use crate::protocol::errors::{self as code, ErrorCode};
use crate::server::api::Cx;
use crate::server::errors::call_code;
use crate::server::router::ShardCall;
use crate::server::shard::Shard;

/// Send `call` to the shard coordinating `group`, releasing the turn once it is issued; the
/// reply, or the error code for none.
pub(super) async fn to_coordinator<C: ShardCall<Shard>>(
    cx: &mut Cx<'_>,
    group: &str,
    call: C,
) -> Result<C::Reply, ErrorCode> {
    let target = cx.shard.coordinator().shard_of(group);
    to_coordinating_shard(cx, target, call).await
}

/// Send `call` to a coordinator's shard (`None`: its topic does not exist yet), releasing the
/// turn once it is issued; the reply, or COORDINATOR_NOT_AVAILABLE (retriable) for none.
pub(super) async fn to_coordinating_shard<C: ShardCall<Shard>>(
    cx: &mut Cx<'_>,
    target: Option<usize>,
    call: C,
) -> Result<C::Reply, ErrorCode> {
    let Some(target) = target else {
        cx.release_turn();
        return Err(code::COORDINATOR_NOT_AVAILABLE);
    };
    let shard = cx.shard.clone();
    let task = glommio::spawn_local(async move { shard.call(target, call).await }).detach();
    cx.release_turn();
    match task.await {
        Some(Ok(reply)) => Ok(reply),
        Some(Err(e)) => Err(call_code(&e, code::COORDINATOR_NOT_AVAILABLE)),
        None => Err(code::COORDINATOR_NOT_AVAILABLE),
    }
}
