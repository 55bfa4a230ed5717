//! Admin APIs beyond topics and configs: CreatePartitions (37), DeleteRecords (21),
//! DescribeLogDirs (35), DescribeCluster (60), DescribeProducers (61) and
//! DescribeTopicPartitions (75). Every body is declared
//! with [`schema!`](crate::schema), covering every supported version; field versions and
//! defaults follow Kafka's message JSON definitions
//! (`clients/src/main/resources/common/message/*.json`).

use super::errors::ErrorCode;

// ---------------------------------------------------------------- CreatePartitions (37)

crate::schema! {
    pub struct CreatePartitionsAssignment {
        pub broker_ids: Vec<i32> => int32_array,
    }
}

crate::schema! {
    pub struct CreatePartitionsTopic {
        pub name: String => string,
        /// The new partition count.
        pub count: i32 => int32,
        /// `None`: the broker places the new partitions.
        pub assignments: Option<Vec<CreatePartitionsAssignment>> => nullable_array,
    }
}

crate::schema! {
    pub struct CreatePartitionsRequest {
        pub topics: Vec<CreatePartitionsTopic> => array,
        pub timeout_ms: i32 => int32,
        pub validate_only: bool => boolean,
    }
}

crate::schema! {
    pub struct CreatePartitionsTopicResult {
        pub name: String => string,
        pub error_code: ErrorCode => error_code,
        pub error_message: Option<String> => nullable_string,
    }
}

crate::schema! {
    pub struct CreatePartitionsResponse {
        pub throttle_time_ms: i32 => int32,
        pub results: Vec<CreatePartitionsTopicResult> => array,
    }
}

// ---------------------------------------------------------------- DeleteRecords (21)

crate::schema! {
    pub struct DeleteRecordsPartition {
        pub partition_index: i32 => int32,
        /// Delete every record below this offset; -1: below the high watermark.
        pub offset: i64 => int64,
    }
}

crate::schema! {
    pub struct DeleteRecordsTopic {
        pub name: String => string,
        pub partitions: Vec<DeleteRecordsPartition> => array,
    }
}

crate::schema! {
    pub struct DeleteRecordsRequest {
        pub topics: Vec<DeleteRecordsTopic> => array,
        pub timeout_ms: i32 => int32,
    }
}

crate::schema! {
    pub struct DeleteRecordsPartitionResult {
        pub partition_index: i32 => int32,
        /// The new log start offset, or -1 on error.
        pub low_watermark: i64 => int64,
        pub error_code: ErrorCode => error_code,
    }
}

crate::schema! {
    pub struct DeleteRecordsTopicResult {
        pub name: String => string,
        pub partitions: Vec<DeleteRecordsPartitionResult> => array,
    }
}

crate::schema! {
    pub struct DeleteRecordsResponse {
        pub throttle_time_ms: i32 => int32,
        pub topics: Vec<DeleteRecordsTopicResult> => array,
    }
}

// ---------------------------------------------------------------- DescribeLogDirs (35)

crate::schema! {
    pub struct DescribableLogDirTopic {
        pub topic: String => string,
        pub partitions: Vec<i32> => int32_array,
    }
}

crate::schema! {
    pub struct DescribeLogDirsRequest {
        /// `None`: every partition.
        pub topics: Option<Vec<DescribableLogDirTopic>> => nullable_array,
    }
}

crate::schema! {
    pub struct DescribeLogDirsPartition {
        pub partition_index: i32 => int32,
        pub partition_size: i64 => int64,
        pub offset_lag: i64 => int64,
        pub is_future_key: bool => boolean,
    }
}

crate::schema! {
    pub struct DescribeLogDirsTopic {
        pub name: String => string,
        pub partitions: Vec<DescribeLogDirsPartition> => array,
    }
}

crate::schema! {
    pub struct DescribeLogDirsResult {
        pub error_code: ErrorCode => error_code,
        pub log_dir: String => string,
        pub topics: Vec<DescribeLogDirsTopic> => array,
        /// v4+
        pub total_bytes: i64 = -1 => int64 if 4..,
        /// v4+
        pub usable_bytes: i64 = -1 => int64 if 4..,
    }
}

crate::schema! {
    pub struct DescribeLogDirsResponse {
        pub throttle_time_ms: i32 => int32,
        /// v3+
        pub error_code: ErrorCode => error_code if 3..,
        pub results: Vec<DescribeLogDirsResult> => array,
    }
}

// ---------------------------------------------------------------- DescribeCluster (60)

crate::schema! {
    pub struct DescribeClusterRequest {
        pub include_cluster_authorized_operations: bool => boolean,
        /// v1+: 1 brokers, 2 controllers.
        pub endpoint_type: i8 = 1 => int8 if 1..,
        /// v2+
        pub include_fenced_brokers: bool => boolean if 2..,
    }
}

crate::schema! {
    pub struct DescribeClusterBroker {
        pub broker_id: i32 => int32,
        pub host: String => string,
        pub port: i32 => int32,
        pub rack: Option<String> => nullable_string,
        /// v2+
        pub is_fenced: bool => boolean if 2..,
    }
}

crate::schema! {
    pub struct DescribeClusterResponse {
        pub throttle_time_ms: i32 => int32,
        pub error_code: ErrorCode => error_code,
        pub error_message: Option<String> => nullable_string,
        /// v1+
        pub endpoint_type: i8 = 1 => int8 if 1..,
        pub cluster_id: String => string,
        pub controller_id: i32 = -1 => int32,
        pub brokers: Vec<DescribeClusterBroker> => array,
        pub cluster_authorized_operations: i32 = i32::MIN => int32,
    }
}

// ---------------------------------------------------------------- DescribeProducers (61)

crate::schema! {
    pub struct DescribeProducersTopic {
        pub name: String => string,
        pub partition_indexes: Vec<i32> => int32_array,
    }
}

crate::schema! {
    pub struct DescribeProducersRequest {
        pub topics: Vec<DescribeProducersTopic> => array,
    }
}

crate::schema! {
    pub struct ProducerStateEntry {
        pub producer_id: i64 => int64,
        pub producer_epoch: i32 => int32,
        pub last_sequence: i32 = -1 => int32,
        pub last_timestamp: i64 = -1 => int64,
        pub coordinator_epoch: i32 => int32,
        pub current_txn_start_offset: i64 = -1 => int64,
    }
}

crate::schema! {
    pub struct DescribeProducersPartition {
        pub partition_index: i32 => int32,
        pub error_code: ErrorCode => error_code,
        pub error_message: Option<String> => nullable_string,
        pub active_producers: Vec<ProducerStateEntry> => array,
    }
}

crate::schema! {
    pub struct DescribeProducersTopicResponse {
        pub name: String => string,
        pub partitions: Vec<DescribeProducersPartition> => array,
    }
}

crate::schema! {
    pub struct DescribeProducersResponse {
        pub throttle_time_ms: i32 => int32,
        pub topics: Vec<DescribeProducersTopicResponse> => array,
    }
}

// ---------------------------------------------------------------- DescribeTopicPartitions (75)

crate::schema! {
    pub struct DescribeTopicPartitionsTopic {
        pub name: String => string,
    }
}

crate::schema! {
    /// Where a paginated description goes on: this topic, from this partition.
    pub struct DescribeTopicPartitionsCursor {
        pub topic_name: String => string,
        pub partition_index: i32 => int32,
    }
}

crate::schema! {
    /// KIP-966: topics and their partitions, paginated (what current admin clients use to
    /// describe topics).
    pub struct DescribeTopicPartitionsRequest {
        pub topics: Vec<DescribeTopicPartitionsTopic> => array,
        pub response_partition_limit: i32 = 2000 => int32,
        pub cursor: Option<DescribeTopicPartitionsCursor> => nullable_structure,
    }
}

crate::schema! {
    pub struct DescribeTopicPartitionsPartition {
        pub error_code: ErrorCode => error_code,
        pub partition_index: i32 => int32,
        pub leader_id: i32 => int32,
        pub leader_epoch: i32 = -1 => int32,
        pub replica_nodes: Vec<i32> => int32_array,
        pub isr_nodes: Vec<i32> => int32_array,
        pub eligible_leader_replicas: Option<Vec<i32>> => nullable_int32_array,
        pub last_known_elr: Option<Vec<i32>> => nullable_int32_array,
        pub offline_replicas: Vec<i32> => int32_array,
    }
}

crate::schema! {
    pub struct DescribeTopicPartitionsTopicResponse {
        pub error_code: ErrorCode => error_code,
        pub name: Option<String> => nullable_string,
        pub topic_id: [u8; 16] => uuid,
        pub is_internal: bool => boolean,
        pub partitions: Vec<DescribeTopicPartitionsPartition> => array,
        pub topic_authorized_operations: i32 = i32::MIN => int32,
    }
}

crate::schema! {
    pub struct DescribeTopicPartitionsResponse {
        pub throttle_time_ms: i32 => int32,
        pub topics: Vec<DescribeTopicPartitionsTopicResponse> => array,
        pub next_cursor: Option<DescribeTopicPartitionsCursor> => nullable_structure,
    }
}

// ---------------------------------------------------------------- ElectLeaders (43)

crate::schema! {
    pub struct ElectLeadersTopic {
        pub topic: String => string,
        pub partitions: Vec<i32> => int32_array,
    }
}

crate::schema! {
    /// Preferred (0) or unclean (1) leader election for the partitions named (null: all).
    pub struct ElectLeadersRequest {
        pub election_type: i8 => int8 if 1..,
        pub topic_partitions: Option<Vec<ElectLeadersTopic>> => nullable_array,
        pub timeout_ms: i32 = 60000 => int32,
    }
}

crate::schema! {
    pub struct ElectLeadersPartitionResult {
        pub partition_id: i32 => int32,
        pub error_code: ErrorCode => error_code,
        pub error_message: Option<String> => nullable_string,
    }
}

crate::schema! {
    pub struct ElectLeadersTopicResult {
        pub topic: String => string,
        pub partition_result: Vec<ElectLeadersPartitionResult> => array,
    }
}

crate::schema! {
    pub struct ElectLeadersResponse {
        pub throttle_time_ms: i32 => int32,
        pub error_code: ErrorCode => error_code if 1..,
        pub replica_election_results: Vec<ElectLeadersTopicResult> => array,
    }
}

// ---------------------------------------------------------------- AlterPartitionReassignments (45)

crate::schema! {
    pub struct ReassignablePartition {
        pub partition_index: i32 => int32,
        /// The replicas to move to; null cancels the partition's reassignment.
        pub replicas: Option<Vec<i32>> => nullable_int32_array,
    }
}

crate::schema! {
    pub struct ReassignableTopic {
        pub name: String => string,
        pub partitions: Vec<ReassignablePartition> => array,
    }
}

crate::schema! {
    pub struct AlterPartitionReassignmentsRequest {
        pub timeout_ms: i32 = 60000 => int32,
        /// v1+ (KIP-860): false refuses a target whose size is not the partition's replication
        /// factor (INVALID_REPLICATION_FACTOR).
        pub allow_replication_factor_change: bool = true => boolean if 1..,
        pub topics: Vec<ReassignableTopic> => array,
    }
}

crate::schema! {
    pub struct ReassignablePartitionResponse {
        pub partition_index: i32 => int32,
        pub error_code: ErrorCode => error_code,
        pub error_message: Option<String> => nullable_string,
    }
}

crate::schema! {
    pub struct ReassignableTopicResponse {
        pub name: String => string,
        pub partitions: Vec<ReassignablePartitionResponse> => array,
    }
}

crate::schema! {
    pub struct AlterPartitionReassignmentsResponse {
        pub throttle_time_ms: i32 => int32,
        /// v1+: the request's value, echoed.
        pub allow_replication_factor_change: bool = true => boolean if 1..,
        pub error_code: ErrorCode => error_code,
        pub error_message: Option<String> => nullable_string,
        pub responses: Vec<ReassignableTopicResponse> => array,
    }
}

// ---------------------------------------------------------------- ListPartitionReassignments (46)

crate::schema! {
    pub struct ListPartitionReassignmentsTopics {
        pub name: String => string,
        pub partition_indexes: Vec<i32> => int32_array,
    }
}

crate::schema! {
    /// The reassignments under way of the partitions named (null: every one).
    pub struct ListPartitionReassignmentsRequest {
        pub timeout_ms: i32 = 60000 => int32,
        pub topics: Option<Vec<ListPartitionReassignmentsTopics>> => nullable_array,
    }
}

crate::schema! {
    pub struct OngoingPartitionReassignment {
        pub partition_index: i32 => int32,
        pub replicas: Vec<i32> => int32_array,
        pub adding_replicas: Vec<i32> => int32_array,
        pub removing_replicas: Vec<i32> => int32_array,
    }
}

crate::schema! {
    pub struct OngoingTopicReassignment {
        pub name: String => string,
        pub partitions: Vec<OngoingPartitionReassignment> => array,
    }
}

crate::schema! {
    pub struct ListPartitionReassignmentsResponse {
        pub throttle_time_ms: i32 => int32,
        pub error_code: ErrorCode => error_code,
        pub error_message: Option<String> => nullable_string,
        pub topics: Vec<OngoingTopicReassignment> => array,
    }
}

// ---------------------------------------------------------------- ListConfigResources (74)

crate::schema! {
    pub struct ListConfigResourcesRequest {
        /// v1+ (KIP-1142): the resource types to list (empty: every type listed); v0 lists
        /// client metrics resources only.
        pub resource_types: Vec<i8> => int8_array if 1..,
    }
}

crate::schema! {
    pub struct ConfigResourceListed {
        pub resource_name: String => string,
        /// v1+; 16 (client metrics) is what a v0 answer means.
        pub resource_type: i8 = 16 => int8 if 1..,
    }
}

crate::schema! {
    pub struct ListConfigResourcesResponse {
        pub throttle_time_ms: i32 => int32,
        pub error_code: ErrorCode => error_code,
        pub config_resources: Vec<ConfigResourceListed> => array,
    }
}

// ---------------------------------------------------------------- DescribeQuorum (55)

crate::schema! {
    pub struct QuorumPartitionRequest {
        pub partition_index: i32 => int32,
    }
}

crate::schema! {
    pub struct QuorumTopicRequest {
        pub topic_name: String => string,
        pub partitions: Vec<QuorumPartitionRequest> => array,
    }
}

crate::schema! {
    pub struct DescribeQuorumRequest {
        pub topics: Vec<QuorumTopicRequest> => array,
    }
}

crate::schema! {
    /// A voter's or an observer's replication of the metadata log, as the leader sees it.
    pub struct QuorumReplicaState {
        pub replica_id: i32 => int32,
        /// v2+: the replica's directory id (KIP-853); zero when it has none.
        pub replica_directory_id: [u8; 16] => uuid if 2..,
        pub log_end_offset: i64 => int64,
        /// v1+: when the leader last heard from it (ms since the epoch; -1: unknown).
        pub last_fetch_timestamp: i64 = -1 => int64 if 1..,
        /// v1+: when it last had everything committed (-1: unknown).
        pub last_caught_up_timestamp: i64 = -1 => int64 if 1..,
    }
}

crate::schema! {
    pub struct QuorumPartitionData {
        pub partition_index: i32 => int32,
        pub error_code: ErrorCode => error_code,
        /// v2+
        pub error_message: Option<String> => nullable_string if 2..,
        pub leader_id: i32 => int32,
        pub leader_epoch: i32 => int32,
        pub high_watermark: i64 => int64,
        pub current_voters: Vec<QuorumReplicaState> => array,
        pub observers: Vec<QuorumReplicaState> => array,
    }
}

crate::schema! {
    pub struct QuorumTopicData {
        pub topic_name: String => string,
        pub partitions: Vec<QuorumPartitionData> => array,
    }
}

crate::schema! {
    pub struct QuorumListener {
        pub name: String => string,
        pub host: String => string,
        pub port: u16 => uint16,
    }
}

crate::schema! {
    /// v2+: a voter and its controller listeners.
    pub struct QuorumNode {
        pub node_id: i32 => int32,
        pub listeners: Vec<QuorumListener> => array,
    }
}

crate::schema! {
    pub struct DescribeQuorumResponse {
        pub error_code: ErrorCode => error_code,
        /// v2+
        pub error_message: Option<String> => nullable_string if 2..,
        pub topics: Vec<QuorumTopicData> => array,
        /// v2+
        pub nodes: Vec<QuorumNode> => array if 2..,
    }
}

// ---------------------------------------------------------------- UnregisterBroker (64)

crate::schema! {
    pub struct UnregisterBrokerRequest {
        pub broker_id: i32 => int32,
    }
}

crate::schema! {
    pub struct UnregisterBrokerResponse {
        pub throttle_time_ms: i32 => int32,
        pub error_code: ErrorCode => error_code,
        pub error_message: Option<String> => nullable_string,
    }
}

// ---------------------------------------------------------------- AddRaftVoter (80)

crate::schema! {
    pub struct AddRaftVoterRequest {
        pub cluster_id: Option<String> => nullable_string,
        pub timeout_ms: i32 => int32,
        pub voter_id: i32 => int32,
        pub voter_directory_id: [u8; 16] => uuid,
        /// Its controller listeners (the first is used).
        pub listeners: Vec<QuorumListener> => array,
        /// v1+: answer once the new voter set is committed (always so here).
        pub ack_when_committed: bool = true => boolean if 1..,
    }
}

crate::schema! {
    pub struct AddRaftVoterResponse {
        pub throttle_time_ms: i32 => int32,
        pub error_code: ErrorCode => error_code,
        pub error_message: Option<String> => nullable_string,
    }
}

// ---------------------------------------------------------------- RemoveRaftVoter (81)

crate::schema! {
    pub struct RemoveRaftVoterRequest {
        pub cluster_id: Option<String> => nullable_string,
        pub voter_id: i32 => int32,
        pub voter_directory_id: [u8; 16] => uuid,
    }
}

crate::schema! {
    pub struct RemoveRaftVoterResponse {
        pub throttle_time_ms: i32 => int32,
        pub error_code: ErrorCode => error_code,
        pub error_message: Option<String> => nullable_string,
    }
}

// ---------------------------------------------------------------- UpdateFeatures (57)

crate::schema! {
    pub struct FeatureUpdateKey {
        pub feature: String => string,
        /// The new finalized level (below 1: no longer finalized).
        pub max_version_level: i16 => int16,
        /// v0 only: a downgrade is allowed (v1+: `upgrade_type`).
        pub allow_downgrade: bool => boolean if ..=0,
        /// v1+: 1 upgrade, 2 safe downgrade, 3 unsafe downgrade.
        pub upgrade_type: i8 = 1 => int8 if 1..,
    }
}

crate::schema! {
    pub struct UpdateFeaturesRequest {
        pub timeout_ms: i32 = 60000 => int32,
        pub feature_updates: Vec<FeatureUpdateKey> => array,
        /// v1+
        pub validate_only: bool => boolean if 1..,
    }
}

crate::schema! {
    pub struct UpdatableFeatureResult {
        pub feature: String => string,
        pub error_code: ErrorCode => error_code,
        pub error_message: Option<String> => nullable_string,
    }
}

crate::schema! {
    pub struct UpdateFeaturesResponse {
        pub throttle_time_ms: i32 => int32,
        pub error_code: ErrorCode => error_code,
        pub error_message: Option<String> => nullable_string,
        /// v0-1: each feature's outcome (v2 answers with the top-level error only).
        pub results: Vec<UpdatableFeatureResult> => array if ..=1,
    }
}
