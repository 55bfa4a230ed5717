//! Consumer groups: the classic group protocol's membership state machine ([`group`]) and the
//! committed offsets replayed from `__consumer_offsets` ([`offsets`]). Pure: no I/O and no
//! runtime; `coordinator::group` drives them on the shard that owns each group, with the
//! clock, the log and the network.

pub mod consumer;
pub mod group;
pub mod offsets;

/// Why a group refuses a member's request. The coordinator answers each with Kafka's error
/// code of the same name ([`crate::errors::group_code`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupError {
    /// The member is not (or no longer) in the group.
    UnknownMemberId,
    /// The member's generation is not the group's.
    IllegalGeneration,
    /// The group is rebalancing: the member rejoins.
    RebalanceInProgress,
    /// The member's protocol type or protocols match none of the group's.
    InconsistentGroupProtocol,
    /// Another member took the static instance id.
    FencedInstanceId,
    /// A first JoinGroup (v4+): the member joins again with the id it was given.
    MemberIdRequired,
    GroupMaxSizeReached,
    /// A consumer-protocol member's epoch is not the group's view of it (KIP-848).
    FencedMemberEpoch,
    /// A static member's instance id is still held by a member that has not left.
    UnreleasedInstanceId,
    InvalidSessionTimeout,
    /// The group is being loaded or moved (the coordinator's partition is changing hands).
    CoordinatorNotAvailable,
    /// A group with members cannot be deleted.
    NonEmptyGroup,
}
