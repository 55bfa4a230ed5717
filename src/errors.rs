//! The one place domain errors become Kafka error codes (an exhaustive `match` each), and
//! the refusals the control plane answers with. The API handlers, the coordinators and the
//! control plane all take their codes from here.

use crate::cluster::types::Refusal;
use crate::groups::GroupError;
use crate::protocol::errors::{self as code, ErrorCode};
use crate::storage::format::FormatError;
use crate::storage::producers::SequenceError;
use crate::storage::topics::TopicError;
use crate::storage::StorageError;
use crate::txn::TxnError;

/// Why an admin operation (a topic or settings change) was refused: Kafka's error code and
/// the message the client shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminError {
    pub code: ErrorCode,
    pub message: String,
}

impl AdminError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        AdminError { code, message: message.into() }
    }
}

impl From<&TopicError> for AdminError {
    fn from(e: &TopicError) -> Self {
        AdminError::new(topic_code(e), e.to_string())
    }
}

pub fn storage_code(e: &StorageError) -> ErrorCode {
    match e {
        // Kafka: a bad record structure under a good CRC is InvalidRecordException (final for
        // clients); bad framing, CRC or compressed data is CorruptRecordException (retried).
        StorageError::InvalidBatch(FormatError::BadRecordCount { .. } | FormatError::BadRecords(_)) => {
            code::INVALID_RECORD
        }
        StorageError::InvalidBatch(_) => code::CORRUPT_MESSAGE,
        StorageError::BatchTooLarge { .. } => code::MESSAGE_TOO_LARGE,
        StorageError::EmptyAppend => code::INVALID_REQUEST,
        StorageError::InvalidTimestamp { .. } => code::INVALID_TIMESTAMP,
        StorageError::KeylessRecords { .. } => code::INVALID_RECORD,
        StorageError::OffsetOutOfRange { .. } => code::OFFSET_OUT_OF_RANGE,
        StorageError::Io(_) | StorageError::WritesSuspended(_) | StorageError::Corrupt { .. } => {
            code::KAFKA_STORAGE_ERROR
        }
        StorageError::Closed => code::KAFKA_STORAGE_ERROR,
        StorageError::Truncating | StorageError::Follower => code::NOT_LEADER_OR_FOLLOWER,
        StorageError::ReplicationTimedOut => code::REQUEST_TIMED_OUT,
        StorageError::TruncationIntoCompacted { .. } => code::KAFKA_STORAGE_ERROR,
        StorageError::Sequence(e) => match e {
            SequenceError::InvalidEpoch { .. } => code::INVALID_PRODUCER_EPOCH,
            SequenceError::OutOfOrder { .. } => code::OUT_OF_ORDER_SEQUENCE_NUMBER,
            SequenceError::NotAlone { .. } => code::INVALID_RECORD,
            SequenceError::InTransaction { .. } => code::INVALID_TXN_STATE,
            SequenceError::MarkerEpoch { .. } => code::INVALID_PRODUCER_EPOCH,
            SequenceError::CoordinatorFenced { .. } => code::TRANSACTION_COORDINATOR_FENCED,
        },
    }
}

pub fn topic_code(e: &TopicError) -> ErrorCode {
    match e {
        TopicError::AlreadyExists(_) => code::TOPIC_ALREADY_EXISTS,
        TopicError::Unknown(_) => code::UNKNOWN_TOPIC_OR_PARTITION,
        TopicError::InvalidName(..) => code::INVALID_TOPIC_EXCEPTION,
        TopicError::InvalidPartitions(_) | TopicError::NotAnIncrease { .. } => code::INVALID_PARTITIONS,
        TopicError::InvalidConfig(_) => code::INVALID_CONFIG,
        TopicError::Corrupt(..) | TopicError::Storage(_) => code::KAFKA_STORAGE_ERROR,
        TopicError::NoId(_) => code::UNKNOWN_SERVER_ERROR,
    }
}

/// Kafka's code for a refusal of the metadata quorum (each has Kafka's name).
pub fn refusal_code(r: Refusal) -> ErrorCode {
    match r {
        Refusal::StaleBrokerEpoch => code::STALE_BROKER_EPOCH,
        Refusal::BrokerIdNotRegistered => code::BROKER_ID_NOT_REGISTERED,
        Refusal::TopicAlreadyExists => code::TOPIC_ALREADY_EXISTS,
        Refusal::UnknownTopicOrPartition => code::UNKNOWN_TOPIC_OR_PARTITION,
        Refusal::InvalidPartitions => code::INVALID_PARTITIONS,
        Refusal::ElectionNotNeeded => code::ELECTION_NOT_NEEDED,
        Refusal::EligibleLeadersNotAvailable => code::ELIGIBLE_LEADERS_NOT_AVAILABLE,
        Refusal::PreferredLeaderNotAvailable => code::PREFERRED_LEADER_NOT_AVAILABLE,
        Refusal::FencedLeaderEpoch => code::FENCED_LEADER_EPOCH,
        Refusal::InvalidUpdateVersion => code::INVALID_UPDATE_VERSION,
        Refusal::InvalidRequest => code::INVALID_REQUEST,
        Refusal::IneligibleReplica => code::INELIGIBLE_REPLICA,
        Refusal::InvalidReplicaAssignment => code::INVALID_REPLICA_ASSIGNMENT,
        Refusal::InvalidReplicationFactor => code::INVALID_REPLICATION_FACTOR,
        Refusal::NoReassignmentInProgress => code::NO_REASSIGNMENT_IN_PROGRESS,
    }
}

/// Kafka's code for a refusal of the transaction state machine.
pub fn txn_code(e: TxnError) -> ErrorCode {
    match e {
        TxnError::Concurrent => code::CONCURRENT_TRANSACTIONS,
        TxnError::Fenced => code::PRODUCER_FENCED,
        TxnError::NotThisProducer => code::INVALID_PRODUCER_ID_MAPPING,
        TxnError::InvalidState => code::INVALID_TXN_STATE,
    }
}

/// Kafka's code for a group's refusal (each has Kafka's name).
pub fn group_code(e: GroupError) -> ErrorCode {
    match e {
        GroupError::UnknownMemberId => code::UNKNOWN_MEMBER_ID,
        GroupError::IllegalGeneration => code::ILLEGAL_GENERATION,
        GroupError::RebalanceInProgress => code::REBALANCE_IN_PROGRESS,
        GroupError::InconsistentGroupProtocol => code::INCONSISTENT_GROUP_PROTOCOL,
        GroupError::FencedInstanceId => code::FENCED_INSTANCE_ID,
        GroupError::MemberIdRequired => code::MEMBER_ID_REQUIRED,
        GroupError::GroupMaxSizeReached => code::GROUP_MAX_SIZE_REACHED,
        GroupError::FencedMemberEpoch => code::FENCED_MEMBER_EPOCH,
        GroupError::UnreleasedInstanceId => code::UNRELEASED_INSTANCE_ID,
        GroupError::InvalidSessionTimeout => code::INVALID_SESSION_TIMEOUT,
        GroupError::CoordinatorNotAvailable => code::COORDINATOR_NOT_AVAILABLE,
        GroupError::NonEmptyGroup => code::NON_EMPTY_GROUP,
    }
}

/// Kafka's code for a group request's outcome (NONE when it succeeded).
pub fn group_outcome(r: Result<(), GroupError>) -> ErrorCode {
    r.map_or_else(group_code, |()| code::NONE)
}
