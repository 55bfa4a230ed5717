//! Errors at the broker's edge: a call between shards that got no reply, on top of the
//! domain errors' codes ([`crate::errors`]).

use crate::protocol::errors::{self as code, ErrorCode};
use crate::server::router::CallError;

pub use crate::errors::{refusal_code, storage_code, topic_code, AdminError};

impl From<CallError> for AdminError {
    fn from(e: CallError) -> Self {
        AdminError::new(call_code(&e, code::UNKNOWN_SERVER_ERROR), e.to_string())
    }
}

/// The code for a call that got no reply: REQUEST_TIMED_OUT past its deadline (the work may
/// still complete), `lost` when the shard stopped (each API names the retriable error its
/// clients expect: NOT_LEADER_OR_FOLLOWER for a partition, COORDINATOR_NOT_AVAILABLE for a
/// group).
pub fn call_code(e: &CallError, lost: ErrorCode) -> ErrorCode {
    match e {
        CallError::TimedOut { .. } => code::REQUEST_TIMED_OUT,
        CallError::Lost { .. } => lost,
    }
}
