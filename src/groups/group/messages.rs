//! What a group's owner sends in and gets back: the states, the limits, JoinGroup and
//! SyncGroup as the state machine takes them and the answers it gives, and DescribeGroups'
//! view. Plain data.

use crate::groups::GroupError;
use bytes::Bytes;
use futures_channel::oneshot;

/// The states of a classic group (Kafka's names, as DescribeGroups and ListGroups report them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    Dead,
}

impl GroupState {
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }
}

/// Timeouts the coordinator enforces (Kafka's broker settings).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupLimits {
    /// `group.min.session.timeout.ms`
    pub min_session_timeout_ms: i32,
    /// `group.max.session.timeout.ms`
    pub max_session_timeout_ms: i32,
    /// `group.initial.rebalance.delay.ms`: how long the first rebalance of an empty group
    /// waits for more members (extended by each join, up to the rebalance timeout).
    pub initial_rebalance_delay_ms: i32,
    /// `group.max.size`
    pub max_size: usize,
}

impl Default for GroupLimits {
    fn default() -> Self {
        GroupLimits {
            min_session_timeout_ms: 6_000,
            max_session_timeout_ms: 1_800_000,
            initial_rebalance_delay_ms: 3_000,
            max_size: 1_000,
        }
    }
}

/// A JoinGroup request, as the coordinator needs it.
#[derive(Debug, Clone, Default)]
pub struct Join {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    /// (name, metadata), in the member's order of preference.
    pub protocols: Vec<(String, Bytes)>,
    /// JoinGroup v4+: a member without an id first gets one with MEMBER_ID_REQUIRED (KIP-394).
    pub require_known_member_id: bool,
    /// JoinGroup v9+: the answer can tell a static leader to skip its assignment.
    pub skip_assignment_supported: bool,
}

/// Protocols a member may offer (clients send one to three): more is refused, so choosing one
/// stays cheap.
pub const MAX_PROTOCOLS: usize = 64;
/// The client id part of a member id is cut to this many bytes (member ids travel in int16
/// strings).
pub const MAX_CLIENT_ID_IN_MEMBER_ID: usize = 128;

/// A member as the leader sees it in a JoinGroup answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinedMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub metadata: Bytes,
}

/// A JoinGroup answer.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Joined {
    /// Why the join failed (`None`: it succeeded).
    pub error: Option<GroupError>,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: String,
    /// A static leader rejoining a stable group: it must not assign again (JoinGroup v9).
    pub skip_assignment: bool,
    pub member_id: String,
    /// Only for the leader: every member with its metadata for the chosen protocol.
    pub members: Vec<JoinedMember>,
}

impl Joined {
    pub(super) fn error(error: GroupError, member_id: &str) -> Joined {
        Joined { error: Some(error), generation: -1, member_id: member_id.to_string(), ..Default::default() }
    }
}

/// A SyncGroup request.
#[derive(Debug, Clone, Default)]
pub struct Sync {
    pub generation: i32,
    pub member_id: String,
    pub instance_id: Option<String>,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    /// The leader's assignments: (member id, assignment).
    pub assignments: Vec<(String, Bytes)>,
}

/// A SyncGroup answer.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Synced {
    /// Why the sync failed (`None`: it succeeded).
    pub error: Option<GroupError>,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignment: Bytes,
}

impl Synced {
    pub(super) fn error(error: GroupError) -> Synced {
        Synced { error: Some(error), ..Default::default() }
    }
}

/// A member in DescribeGroups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberDescription {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    /// Its metadata for the group's protocol (empty outside Stable/CompletingRebalance).
    pub metadata: Bytes,
    pub assignment: Bytes,
}

/// DescribeGroups of one group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Description {
    pub state: GroupState,
    pub protocol_type: String,
    pub protocol: String,
    pub members: Vec<MemberDescription>,
}

/// An answer that will come: JoinGroup and SyncGroup may wait for the rest of the group.
pub type Pending<T> = oneshot::Receiver<T>;

/// A member of the classic protocol as it moves between a classic group and a consumer group
/// (KIP-848's online migration, either way).
#[derive(Debug, Clone, PartialEq)]
pub struct Migrating {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    /// Its protocols (name, metadata), in its order of preference.
    pub protocols: Vec<(String, Bytes)>,
    /// Its assignment as the classic protocol carries it (empty: none yet).
    pub assignment: Bytes,
}

/// A classic group as it is converted to a consumer group.
#[derive(Debug, Clone, PartialEq)]
pub struct Exported {
    pub generation: i32,
    /// The protocol its members agreed on (none before its first rebalance completed).
    pub protocol: Option<String>,
    pub members: Vec<Migrating>,
}
