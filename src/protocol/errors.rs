//! Kafka error codes tidemark returns, as [`ErrorCode`]: a type of its own, so a code is never
//! taken for another `i16` of a message (a producer epoch, an API version, a partition count)
//! or the other way round.

/// A Kafka error code (0: none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ErrorCode(pub i16);

impl ErrorCode {
    /// The code as Kafka numbers it.
    pub const fn get(self) -> i16 {
        self.0
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

pub const NONE: ErrorCode = ErrorCode(0);
pub const OFFSET_OUT_OF_RANGE: ErrorCode = ErrorCode(1);
pub const CORRUPT_MESSAGE: ErrorCode = ErrorCode(2);
pub const UNKNOWN_TOPIC_OR_PARTITION: ErrorCode = ErrorCode(3);
pub const MESSAGE_TOO_LARGE: ErrorCode = ErrorCode(10);
pub const NOT_LEADER_OR_FOLLOWER: ErrorCode = ErrorCode(6);
pub const REQUEST_TIMED_OUT: ErrorCode = ErrorCode(7);
pub const NOT_ENOUGH_REPLICAS: ErrorCode = ErrorCode(19);
pub const INVALID_TOPIC_EXCEPTION: ErrorCode = ErrorCode(17);
pub const RECORD_LIST_TOO_LARGE: ErrorCode = ErrorCode(18);
pub const INVALID_REQUIRED_ACKS: ErrorCode = ErrorCode(21);
pub const INVALID_TIMESTAMP: ErrorCode = ErrorCode(32);
pub const UNSUPPORTED_VERSION: ErrorCode = ErrorCode(35);
pub const TOPIC_ALREADY_EXISTS: ErrorCode = ErrorCode(36);
pub const INVALID_PARTITIONS: ErrorCode = ErrorCode(37);
pub const INVALID_REPLICATION_FACTOR: ErrorCode = ErrorCode(38);
pub const INVALID_REPLICA_ASSIGNMENT: ErrorCode = ErrorCode(39);
pub const INVALID_REQUEST: ErrorCode = ErrorCode(42);
pub const UNSUPPORTED_FOR_MESSAGE_FORMAT: ErrorCode = ErrorCode(43);
pub const POLICY_VIOLATION: ErrorCode = ErrorCode(44);
pub const INVALID_CONFIG: ErrorCode = ErrorCode(40);
pub const KAFKA_STORAGE_ERROR: ErrorCode = ErrorCode(56);
pub const UNSUPPORTED_COMPRESSION_TYPE: ErrorCode = ErrorCode(76);
pub const INVALID_RECORD: ErrorCode = ErrorCode(87);
pub const OFFSET_METADATA_TOO_LARGE: ErrorCode = ErrorCode(12);
pub const COORDINATOR_LOAD_IN_PROGRESS: ErrorCode = ErrorCode(14);
pub const COORDINATOR_NOT_AVAILABLE: ErrorCode = ErrorCode(15);
pub const NOT_COORDINATOR: ErrorCode = ErrorCode(16);
pub const ILLEGAL_GENERATION: ErrorCode = ErrorCode(22);
pub const INCONSISTENT_GROUP_PROTOCOL: ErrorCode = ErrorCode(23);
pub const INVALID_GROUP_ID: ErrorCode = ErrorCode(24);
pub const UNKNOWN_MEMBER_ID: ErrorCode = ErrorCode(25);
pub const INVALID_SESSION_TIMEOUT: ErrorCode = ErrorCode(26);
pub const REBALANCE_IN_PROGRESS: ErrorCode = ErrorCode(27);
pub const OUT_OF_ORDER_SEQUENCE_NUMBER: ErrorCode = ErrorCode(45);
pub const DUPLICATE_SEQUENCE_NUMBER: ErrorCode = ErrorCode(46);
pub const INVALID_PRODUCER_EPOCH: ErrorCode = ErrorCode(47);
pub const INVALID_TXN_STATE: ErrorCode = ErrorCode(48);
pub const INVALID_PRODUCER_ID_MAPPING: ErrorCode = ErrorCode(49);
pub const INVALID_TRANSACTION_TIMEOUT: ErrorCode = ErrorCode(50);
pub const CONCURRENT_TRANSACTIONS: ErrorCode = ErrorCode(51);
pub const TRANSACTION_COORDINATOR_FENCED: ErrorCode = ErrorCode(52);
pub const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: ErrorCode = ErrorCode(53);
pub const UNKNOWN_PRODUCER_ID: ErrorCode = ErrorCode(59);
pub const PRODUCER_FENCED: ErrorCode = ErrorCode(90);
pub const TRANSACTIONAL_ID_NOT_FOUND: ErrorCode = ErrorCode(105);
/// OffsetFetch with require_stable: an open transaction holds an offset of the partition.
pub const UNSTABLE_OFFSET_COMMIT: ErrorCode = ErrorCode(88);
/// AddPartitionsToTxn: not tried because another partition of the request failed.
pub const OPERATION_NOT_ATTEMPTED: ErrorCode = ErrorCode(55);
pub const NON_EMPTY_GROUP: ErrorCode = ErrorCode(68);
pub const GROUP_SUBSCRIBED_TO_TOPIC: ErrorCode = ErrorCode(86);
pub const GROUP_ID_NOT_FOUND: ErrorCode = ErrorCode(69);
pub const MEMBER_ID_REQUIRED: ErrorCode = ErrorCode(79);
pub const GROUP_MAX_SIZE_REACHED: ErrorCode = ErrorCode(81);
pub const FENCED_INSTANCE_ID: ErrorCode = ErrorCode(82);
pub const UNKNOWN_SERVER_ERROR: ErrorCode = ErrorCode(-1);
/// KIP-516: a request names a topic by an id no topic has.
pub const UNKNOWN_TOPIC_ID: ErrorCode = ErrorCode(100);
/// KIP-516: a topic's id is not the one the request names (Fetch v13+ sessions).
pub const INCONSISTENT_TOPIC_ID: ErrorCode = ErrorCode(103);
/// KIP-848: a member's epoch is newer than the coordinator's, or too old to accept.
pub const FENCED_MEMBER_EPOCH: ErrorCode = ErrorCode(110);
/// KIP-848: a static member's instance id is still held by a member that has not left.
pub const UNRELEASED_INSTANCE_ID: ErrorCode = ErrorCode(111);
/// KIP-848: the server-side assignor asked for is not one the broker has.
pub const UNSUPPORTED_ASSIGNOR: ErrorCode = ErrorCode(112);
/// KIP-848: an offset commit or fetch from a member epoch that is not the member's current one.
pub const STALE_MEMBER_EPOCH: ErrorCode = ErrorCode(113);
/// KRaft: a broker's heartbeat or request names an epoch other than its registration's.
pub const STALE_BROKER_EPOCH: ErrorCode = ErrorCode(77);
/// KRaft: a broker that is not registered with the controller.
pub const BROKER_ID_NOT_REGISTERED: ErrorCode = ErrorCode(102);
/// KIP-848: a subscription's regular expression does not compile.
pub const INVALID_REGULAR_EXPRESSION: ErrorCode = ErrorCode(128);
/// The operation needs the cluster resource, which the principal may not use.
pub const CLUSTER_AUTHORIZATION_FAILED: ErrorCode = ErrorCode(31);
/// SaslHandshake: a mechanism this listener does not offer (the answer lists those it does).
pub const UNSUPPORTED_SASL_MECHANISM: ErrorCode = ErrorCode(33);
/// A SASL request where none belongs (another request during the exchange, or after it).
pub const ILLEGAL_SASL_STATE: ErrorCode = ErrorCode(34);
/// SaslAuthenticate: the credentials were not accepted.
pub const SASL_AUTHENTICATION_FAILED: ErrorCode = ErrorCode(58);
/// KIP-554: a user's credential that does not exist.
pub const RESOURCE_NOT_FOUND: ErrorCode = ErrorCode(91);
/// KIP-554: one user named twice in a request.
pub const DUPLICATE_RESOURCE: ErrorCode = ErrorCode(92);
/// KIP-554: a credential refused (iterations out of range, an empty name).
pub const UNACCEPTABLE_CREDENTIAL: ErrorCode = ErrorCode(93);
/// The principal may not use the topic for that operation.
pub const TOPIC_AUTHORIZATION_FAILED: ErrorCode = ErrorCode(29);
/// The principal may not use the group for that operation.
pub const GROUP_AUTHORIZATION_FAILED: ErrorCode = ErrorCode(30);
/// The ACL APIs without an authorizer (`authorizer.class.name` unset).
pub const SECURITY_DISABLED: ErrorCode = ErrorCode(54);
/// ElectLeaders: the preferred replica cannot lead (not in the ISR, or fenced).
pub const PREFERRED_LEADER_NOT_AVAILABLE: ErrorCode = ErrorCode(80);
/// ElectLeaders: the preferred replica leads already.
pub const ELECTION_NOT_NEEDED: ErrorCode = ErrorCode(84);
/// KIP-951 and partition leadership: the leader epoch a request names is older than the
/// partition's.
pub const FENCED_LEADER_EPOCH: ErrorCode = ErrorCode(74);
/// The leader epoch a request names is newer than the partition's here (this node has not
/// heard of the new leadership yet).
pub const UNKNOWN_LEADER_EPOCH: ErrorCode = ErrorCode(75);
/// KIP-207: a new leader's high watermark has not reached its epoch's start yet (retriable).
pub const OFFSET_NOT_AVAILABLE: ErrorCode = ErrorCode(78);
/// acks=all: the ISR shrank below `min.insync.replicas` after the records were appended.
pub const NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode = ErrorCode(20);
/// AlterPartition: made from a partition epoch that moved meanwhile.
pub const INVALID_UPDATE_VERSION: ErrorCode = ErrorCode(95);
/// AlterPartition: a replica that may not join the ISR (fenced, KIP-841).
pub const INELIGIBLE_REPLICA: ErrorCode = ErrorCode(107);
/// A controller request sent to a node that is not the active controller (or has none yet).
pub const NOT_CONTROLLER: ErrorCode = ErrorCode(41);
/// A partition with no leader now (its replicas are fenced or an election is under way).
pub const LEADER_NOT_AVAILABLE: ErrorCode = ErrorCode(5);
/// ElectLeaders (unclean): no replica of the partition can lead.
pub const ELIGIBLE_LEADERS_NOT_AVAILABLE: ErrorCode = ErrorCode(83);
/// AlterPartitionReassignments: a cancellation of a partition with no reassignment under way.
pub const NO_REASSIGNMENT_IN_PROGRESS: ErrorCode = ErrorCode(85);
