//! The transaction APIs (KIP-98, KIP-664): AddPartitionsToTxn (24), AddOffsetsToTxn (25),
//! EndTxn (26), WriteTxnMarkers (27, between brokers), TxnOffsetCommit (28),
//! DescribeTransactions (65) and ListTransactions (66).
//! Every body is declared with [`schema!`](crate::schema); field versions and defaults follow
//! Kafka's message JSON definitions (`clients/src/main/resources/common/message/*.json`).
//! Transactions version 2 (KIP-890 part 2) is spoken from EndTxn 5 (its answer names the
//! producer id and epoch to go on with), TxnOffsetCommit 5 and AddPartitionsToTxn 5 (no new
//! fields: the version tells the broker the client's transaction version).

use super::errors::ErrorCode;

// ---------------------------------------------------------------- AddPartitionsToTxn (24)

crate::schema! {
    pub struct AddPartitionsToTxnTopic {
        pub name: String => string,
        pub partitions: Vec<i32> => int32_array,
    }
}

crate::schema! {
    /// v4+: one transaction of a batched request (from brokers: KIP-890 part 1 verification).
    pub struct AddPartitionsToTxnTransaction {
        pub transactional_id: String => string,
        pub producer_id: i64 => int64,
        pub producer_epoch: i16 => int16,
        /// Only check that the partitions are in the transaction; add nothing.
        pub verify_only: bool => boolean,
        pub topics: Vec<AddPartitionsToTxnTopic> => array,
    }
}

crate::schema! {
    pub struct AddPartitionsToTxnRequest {
        /// v4+
        pub transactions: Vec<AddPartitionsToTxnTransaction> => array if 4..,
        /// v0-3: the one transaction of a client's request.
        pub v3_and_below_transactional_id: String => string if ..=3,
        pub v3_and_below_producer_id: i64 => int64 if ..=3,
        pub v3_and_below_producer_epoch: i16 => int16 if ..=3,
        pub v3_and_below_topics: Vec<AddPartitionsToTxnTopic> => array if ..=3,
    }
}

crate::schema! {
    pub struct AddPartitionsToTxnPartitionResult {
        pub partition_index: i32 => int32,
        pub partition_error_code: ErrorCode => error_code,
    }
}

crate::schema! {
    pub struct AddPartitionsToTxnTopicResult {
        pub name: String => string,
        pub results_by_partition: Vec<AddPartitionsToTxnPartitionResult> => array,
    }
}

crate::schema! {
    pub struct AddPartitionsToTxnResult {
        pub transactional_id: String => string,
        pub topic_results: Vec<AddPartitionsToTxnTopicResult> => array,
    }
}

crate::schema! {
    pub struct AddPartitionsToTxnResponse {
        pub throttle_time_ms: i32 => int32,
        /// v4+
        pub error_code: ErrorCode => error_code if 4..,
        /// v4+
        pub results_by_transaction: Vec<AddPartitionsToTxnResult> => array if 4..,
        /// v0-3
        pub results_by_topic_v3_and_below: Vec<AddPartitionsToTxnTopicResult> => array if ..=3,
    }
}

// ---------------------------------------------------------------- AddOffsetsToTxn (25)

crate::schema! {
    pub struct AddOffsetsToTxnRequest {
        pub transactional_id: String => string,
        pub producer_id: i64 => int64,
        pub producer_epoch: i16 => int16,
        pub group_id: String => string,
    }
}

crate::schema! {
    pub struct AddOffsetsToTxnResponse {
        pub throttle_time_ms: i32 => int32,
        pub error_code: ErrorCode => error_code,
    }
}

// ---------------------------------------------------------------- EndTxn (26)

crate::schema! {
    pub struct EndTxnRequest {
        pub transactional_id: String => string,
        pub producer_id: i64 => int64,
        pub producer_epoch: i16 => int16,
        /// True to commit, false to abort.
        pub committed: bool => boolean,
    }
}

crate::schema! {
    pub struct EndTxnResponse {
        pub throttle_time_ms: i32 => int32,
        pub error_code: ErrorCode => error_code,
        /// v5+: the producer id to go on with (-1 on an error).
        pub producer_id: i64 = -1 => int64 if 5..,
        /// v5+: the epoch to go on with (-1 on an error).
        pub producer_epoch: i16 = -1 => int16 if 5..,
    }
}

// ---------------------------------------------------------------- TxnOffsetCommit (28)

crate::schema! {
    pub struct TxnOffsetCommitRequestPartition {
        pub partition_index: i32 => int32,
        pub committed_offset: i64 => int64,
        /// v2+
        pub committed_leader_epoch: i32 = -1 => int32 if 2..,
        pub committed_metadata: Option<String> => nullable_string,
    }
}

crate::schema! {
    pub struct TxnOffsetCommitRequestTopic {
        pub name: String => string,
        pub partitions: Vec<TxnOffsetCommitRequestPartition> => array,
    }
}

crate::schema! {
    pub struct TxnOffsetCommitRequest {
        pub transactional_id: String => string,
        pub group_id: String => string,
        pub producer_id: i64 => int64,
        pub producer_epoch: i16 => int16,
        /// v3+ (KIP-447): the committing consumer's generation and member, checked as an
        /// OffsetCommit's are.
        pub generation_id: i32 = -1 => int32 if 3..,
        pub member_id: String => string if 3..,
        pub group_instance_id: Option<String> => nullable_string if 3..,
        pub topics: Vec<TxnOffsetCommitRequestTopic> => array,
    }
}

crate::schema! {
    pub struct TxnOffsetCommitResponsePartition {
        pub partition_index: i32 => int32,
        pub error_code: ErrorCode => error_code,
    }
}

crate::schema! {
    pub struct TxnOffsetCommitResponseTopic {
        pub name: String => string,
        pub partitions: Vec<TxnOffsetCommitResponsePartition> => array,
    }
}

crate::schema! {
    pub struct TxnOffsetCommitResponse {
        pub throttle_time_ms: i32 => int32,
        pub topics: Vec<TxnOffsetCommitResponseTopic> => array,
    }
}

// ---------------------------------------------------------------- DescribeTransactions (65)

crate::schema! {
    pub struct DescribeTransactionsRequest {
        pub transactional_ids: Vec<String> => string_array,
    }
}

crate::schema! {
    pub struct TransactionTopicData {
        pub topic: String => string,
        pub partitions: Vec<i32> => int32_array,
    }
}

crate::schema! {
    pub struct DescribedTransaction {
        pub error_code: ErrorCode => error_code,
        pub transactional_id: String => string,
        pub transaction_state: String => string,
        pub transaction_timeout_ms: i32 => int32,
        pub transaction_start_time_ms: i64 => int64,
        pub producer_id: i64 => int64,
        pub producer_epoch: i16 => int16,
        pub topics: Vec<TransactionTopicData> => array,
    }
}

crate::schema! {
    pub struct DescribeTransactionsResponse {
        pub throttle_time_ms: i32 => int32,
        pub transaction_states: Vec<DescribedTransaction> => array,
    }
}

// ---------------------------------------------------------------- ListTransactions (66)

crate::schema! {
    pub struct ListTransactionsRequest {
        /// States to list (empty: all).
        pub state_filters: Vec<String> => string_array,
        /// Producer ids to list (empty: all).
        pub producer_id_filters: Vec<i64> => int64_array,
        /// v1+ (KIP-994): only transactions running longer than this many ms (-1: all).
        pub duration_filter: i64 = -1 => int64 if 1..,
        /// v2+ (KIP-1152): only ids the whole of which this regular expression matches (null
        /// or empty: all).
        pub transactional_id_pattern: Option<String> => nullable_string if 2..,
    }
}

crate::schema! {
    pub struct ListedTransaction {
        pub transactional_id: String => string,
        pub producer_id: i64 => int64,
        pub transaction_state: String => string,
    }
}

crate::schema! {
    pub struct ListTransactionsResponse {
        pub throttle_time_ms: i32 => int32,
        pub error_code: ErrorCode => error_code,
        pub unknown_state_filters: Vec<String> => string_array,
        pub transaction_states: Vec<ListedTransaction> => array,
    }
}

// ---------------------------------------------------------------- WriteTxnMarkers (27)

crate::schema! {
    pub struct WritableTxnMarkerTopic {
        pub name: String => string,
        pub partition_indexes: Vec<i32> => int32_array,
    }
}

crate::schema! {
    /// One transaction's markers: its producer, its result (true: commit) and its partitions.
    pub struct WritableTxnMarker {
        pub producer_id: i64 => int64,
        pub producer_epoch: i16 => int16,
        pub transaction_result: bool => boolean,
        pub topics: Vec<WritableTxnMarkerTopic> => array,
        pub coordinator_epoch: i32 => int32,
    }
}

crate::schema! {
    /// WriteTxnMarkers (27): a transaction coordinator asks a partition's leader to write
    /// transaction markers (inter-broker; CLUSTER_ACTION).
    pub struct WriteTxnMarkersRequest {
        pub markers: Vec<WritableTxnMarker> => array,
    }
}

crate::schema! {
    pub struct WritableTxnMarkerPartitionResult {
        pub partition_index: i32 => int32,
        pub error_code: ErrorCode => error_code,
    }
}

crate::schema! {
    pub struct WritableTxnMarkerTopicResult {
        pub name: String => string,
        pub partitions: Vec<WritableTxnMarkerPartitionResult> => array,
    }
}

crate::schema! {
    pub struct WritableTxnMarkerResult {
        pub producer_id: i64 => int64,
        pub topics: Vec<WritableTxnMarkerTopicResult> => array,
    }
}

crate::schema! {
    pub struct WriteTxnMarkersResponse {
        pub markers: Vec<WritableTxnMarkerResult> => array,
    }
}
