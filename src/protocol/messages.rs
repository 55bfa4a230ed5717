//! The request and response bodies of the produce, fetch, metadata, topic and config APIs (the
//! consumer-group APIs are in [`super::groups`], the other admin APIs in [`super::admin`]),
//! declared with [`schema!`](crate::schema) and covering every supported version (field
//! versions from Kafka's message JSON definitions). A field absent in a version keeps its
//! default when decoding and is skipped when encoding. The few bodies whose wire form is not a
//! plain sequence of fields keep a hand-written [`Message`] impl, each saying why.

use super::codec::{array, Codec, ProtoResult, TaggedFields};
use super::errors::ErrorCode;
use super::schema::kind;
use bytes::Bytes;

pub use super::schema::Message;

// ---------------------------------------------------------------- ApiVersions (18)

crate::schema! {
    pub struct ApiVersionsRequest {
        pub client_software_name: String => string if 3..,
        pub client_software_version: String => string if 3..,
    }
}

crate::schema! {
    pub struct ApiVersion {
        pub api_key: i16 => int16,
        pub min_version: i16 => int16,
        pub max_version: i16 => int16,
    }
}

/// A feature flag and a version range (SupportedFeatures: min and max version;
/// FinalizedFeatures: max then min version level, in that order on the wire).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FeatureRange {
    pub name: String,
    pub min: i16,
    pub max: i16,
    pub tags: TaggedFields,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ApiVersionsResponse {
    pub error_code: ErrorCode,
    pub api_keys: Vec<ApiVersion>,
    pub throttle_time_ms: i32,
    /// v3+, tag 0.
    pub supported_features: Vec<FeatureRange>,
    /// v3+, tag 1; -1: unknown (not sent).
    pub finalized_features_epoch: i64,
    /// v3+, tag 2.
    pub finalized_features: Vec<FeatureRange>,
    /// Other tagged fields (ZkMigrationReady, tag 3, and any newer).
    pub tags: TaggedFields,
}

impl Default for ApiVersionsResponse {
    fn default() -> Self {
        ApiVersionsResponse {
            error_code: ErrorCode(0),
            api_keys: Vec::new(),
            throttle_time_ms: 0,
            supported_features: Vec::new(),
            finalized_features_epoch: -1,
            finalized_features: Vec::new(),
            tags: TaggedFields::default(),
        }
    }
}

const TAG_SUPPORTED_FEATURES: u32 = 0;
const TAG_FINALIZED_EPOCH: u32 = 1;
const TAG_FINALIZED_FEATURES: u32 = 2;

/// A feature array as a tagged field's bytes (compact encoding), `max_first` for
/// FinalizedFeatures' field order.
fn encode_features(features: &mut [FeatureRange], max_first: bool) -> ProtoResult<Bytes> {
    let mut w = super::codec::Writer::new(true);
    let mut v = features.to_vec();
    features_codec(&mut w, &mut v, max_first)?;
    Ok(w.buf.freeze())
}

fn features_codec<C: Codec>(c: &mut C, v: &mut Vec<FeatureRange>, max_first: bool) -> ProtoResult<()> {
    array(c, v, |c, f| {
        c.string(&mut f.name)?;
        if max_first {
            c.i16(&mut f.max)?;
            c.i16(&mut f.min)?;
        } else {
            c.i16(&mut f.min)?;
            c.i16(&mut f.max)?;
        }
        c.tagged(&mut f.tags)
    })
}

// Hand-written: the feature fields are tagged fields with meaning (KIP-584), and the two
// feature arrays put their version fields in opposite orders.
impl Message for ApiVersionsResponse {
    fn codec<C: Codec>(&mut self, c: &mut C, v: i16) -> ProtoResult<()> {
        c.i16(&mut self.error_code.0)?;
        kind::array(c, &mut self.api_keys, v)?;
        if v >= 1 {
            c.i32(&mut self.throttle_time_ms)?;
        }
        if v < 3 {
            return Ok(());
        }
        // The feature fields are tagged (KIP-584): written when not their default, in tag
        // order with the other tagged fields.
        let mut tags = TaggedFields::default();
        if !c.reading() {
            if !self.supported_features.is_empty() {
                tags.0.push((TAG_SUPPORTED_FEATURES, encode_features(&mut self.supported_features, false)?));
            }
            if self.finalized_features_epoch != -1 {
                tags.0
                    .push((TAG_FINALIZED_EPOCH, Bytes::copy_from_slice(&self.finalized_features_epoch.to_be_bytes())));
            }
            if !self.finalized_features.is_empty() {
                tags.0.push((TAG_FINALIZED_FEATURES, encode_features(&mut self.finalized_features, true)?));
            }
            tags.0.extend(self.tags.0.iter().cloned());
            tags.0.sort_by_key(|t| t.0);
        }
        c.tagged(&mut tags)?;
        if c.reading() {
            self.tags = TaggedFields::default();
            for (tag, bytes) in tags.0 {
                let mut r = super::codec::Reader::new(bytes.clone(), true);
                match tag {
                    TAG_SUPPORTED_FEATURES => features_codec(&mut r, &mut self.supported_features, false)?,
                    TAG_FINALIZED_EPOCH => r.i64(&mut self.finalized_features_epoch)?,
                    TAG_FINALIZED_FEATURES => features_codec(&mut r, &mut self.finalized_features, true)?,
                    _ => self.tags.0.push((tag, bytes)),
                }
            }
        }
        Ok(())
    }
}

// ---------------------------------------------------------------- Metadata (3)

crate::schema! {
    pub struct MetadataRequestTopic {
        pub topic_id: [u8; 16] => uuid if 10..,
        pub name: Option<String> => nullable_string,
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct MetadataRequest {
    /// `None`: all topics (v1+; at v0 an empty array means all).
    pub topics: Option<Vec<MetadataRequestTopic>>,
    pub allow_auto_topic_creation: bool,
    pub include_cluster_authorized_operations: bool,
    pub include_topic_authorized_operations: bool,
    pub tags: TaggedFields,
}

impl Default for MetadataRequest {
    fn default() -> Self {
        MetadataRequest {
            topics: Some(Vec::new()),
            allow_auto_topic_creation: true,
            include_cluster_authorized_operations: false,
            include_topic_authorized_operations: false,
            tags: TaggedFields::default(),
        }
    }
}

// Hand-written: at v0 an empty topic array reads as `None` (all topics).
impl Message for MetadataRequest {
    fn codec<C: Codec>(&mut self, c: &mut C, v: i16) -> ProtoResult<()> {
        kind::nullable_array(c, &mut self.topics, v)?;
        if v == 0 && c.reading() && self.topics.as_ref().is_some_and(|t| t.is_empty()) {
            self.topics = None; // v0: empty means all
        }
        if v >= 4 {
            c.bool(&mut self.allow_auto_topic_creation)?;
        }
        if (8..=10).contains(&v) {
            c.bool(&mut self.include_cluster_authorized_operations)?;
        }
        if v >= 8 {
            c.bool(&mut self.include_topic_authorized_operations)?;
        }
        c.tagged(&mut self.tags)
    }
}

crate::schema! {
    pub struct MetadataBroker {
        pub node_id: i32 => int32,
        pub host: String => string,
        pub port: i32 => int32,
        pub rack: Option<String> => nullable_string if 1..,
    }
}

crate::schema! {
    pub struct MetadataPartition {
        pub error_code: ErrorCode => error_code,
        pub partition_index: i32 => int32,
        pub leader_id: i32 => int32,
        pub leader_epoch: i32 => int32 if 7..,
        pub replica_nodes: Vec<i32> => int32_array,
        pub isr_nodes: Vec<i32> => int32_array,
        pub offline_replicas: Vec<i32> => int32_array if 5..,
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct MetadataTopic {
    pub error_code: ErrorCode,
    pub name: Option<String>,
    pub topic_id: [u8; 16],
    pub is_internal: bool,
    pub partitions: Vec<MetadataPartition>,
    pub topic_authorized_operations: i32,
    pub tags: TaggedFields,
}

// Hand-written: the name is a string before v12 and a nullable string from v12.
impl Message for MetadataTopic {
    fn codec<C: Codec>(&mut self, c: &mut C, v: i16) -> ProtoResult<()> {
        c.i16(&mut self.error_code.0)?;
        if v >= 12 {
            c.nullable_string(&mut self.name)?;
        } else {
            let mut name = self.name.clone().unwrap_or_default();
            c.string(&mut name)?;
            self.name = Some(name);
        }
        if v >= 10 {
            c.uuid(&mut self.topic_id)?;
        }
        if v >= 1 {
            c.bool(&mut self.is_internal)?;
        }
        kind::array(c, &mut self.partitions, v)?;
        if v >= 8 {
            c.i32(&mut self.topic_authorized_operations)?;
        }
        c.tagged(&mut self.tags)
    }
}

crate::schema! {
    pub struct MetadataResponse {
        pub throttle_time_ms: i32 => int32 if 3..,
        pub brokers: Vec<MetadataBroker> => array,
        pub cluster_id: Option<String> => nullable_string if 2..,
        pub controller_id: i32 => int32 if 1..,
        pub topics: Vec<MetadataTopic> => array,
        pub cluster_authorized_operations: i32 => int32 if 8..=10,
        /// v13 (KIP-1102): a whole-request error (REBOOTSTRAP_REQUIRED tells a client to
        /// bootstrap again); 0 on every answer, as Kafka's broker.
        pub error_code: ErrorCode => error_code if 13..,
    }
}

// ---------------------------------------------------------------- Produce (0)

crate::schema! {
    pub struct ProducePartition {
        pub index: i32 => int32,
        /// The records: a zero-copy slice of the request frame.
        pub records: Option<Bytes> => nullable_bytes,
    }
}

crate::schema! {
    pub struct ProduceTopic {
        pub name: String => string if ..=12,
        /// v13+ (KIP-516): the topic by id instead of by name.
        pub topic_id: [u8; 16] => uuid if 13..,
        pub partitions: Vec<ProducePartition> => array,
    }
}

crate::schema! {
    pub struct ProduceRequest {
        pub transactional_id: Option<String> => nullable_string if 3..,
        pub acks: i16 => int16,
        pub timeout_ms: i32 => int32,
        pub topics: Vec<ProduceTopic> => array,
    }
}

crate::schema! {
    /// KIP-467: a record that made its batch invalid.
    pub struct RecordError {
        pub batch_index: i32 => int32,
        pub message: Option<String> => nullable_string,
    }
}

crate::schema! {
    /// KIP-951: who leads a partition now, sent with NOT_LEADER_OR_FOLLOWER so a client need
    /// not ask Metadata first (Produce v10+, Fetch v12+).
    pub struct LeaderIdAndEpoch {
        pub leader_id: i32 = -1 => int32,
        pub leader_epoch: i32 = -1 => int32,
    }
}

crate::schema! {
    /// KIP-951: the address of a broker named in a leader hint (Produce v10+, Fetch v16+).
    pub struct NodeEndpoint {
        pub node_id: i32 => int32,
        pub host: String => string,
        pub port: i32 => int32,
        pub rack: Option<String> => nullable_string,
    }
}

crate::schema! {
    pub struct ProducePartitionResponse {
        pub index: i32 => int32,
        pub error_code: ErrorCode => error_code,
        pub base_offset: i64 => int64,
        pub log_append_time_ms: i64 => int64 if 2..,
        pub log_start_offset: i64 => int64 if 5..,
        pub record_errors: Vec<RecordError> => array if 8..,
        pub error_message: Option<String> => nullable_string if 8..,
        pub current_leader: LeaderIdAndEpoch => structure tag 0 if 10..,
    }
}

crate::schema! {
    pub struct ProduceTopicResponse {
        pub name: String => string if ..=12,
        /// v13+: the topic's id, as the request named it.
        pub topic_id: [u8; 16] => uuid if 13..,
        pub partitions: Vec<ProducePartitionResponse> => array,
    }
}

crate::schema! {
    pub struct ProduceResponse {
        pub topics: Vec<ProduceTopicResponse> => array,
        pub throttle_time_ms: i32 => int32 if 1..,
        pub node_endpoints: Vec<NodeEndpoint> => array tag 0 if 10..,
    }
}

// ---------------------------------------------------------------- Fetch (1)

crate::schema! {
    pub struct FetchPartition {
        pub partition: i32 => int32,
        pub current_leader_epoch: i32 = -1 => int32 if 9..,
        pub fetch_offset: i64 => int64,
        pub last_fetched_epoch: i32 = -1 => int32 if 12..,
        pub log_start_offset: i64 = -1 => int64 if 5..,
        pub partition_max_bytes: i32 => int32,
        /// KIP-853 (v17+): the follower's log directory (replication only).
        pub replica_directory_id: [u8; 16] => uuid tag 0 if 17..,
        /// KIP-1166 (v18+): the high watermark the follower knows (-1: none; the default,
        /// i64::MAX: the follower does not say).
        pub high_watermark: i64 = i64::MAX => int64 tag 1 if 18..,
    }
}

crate::schema! {
    /// A topic to fetch from: by name before v13, by id (KIP-516) from v13.
    pub struct FetchTopic {
        pub topic: String => string if ..=12,
        pub topic_id: [u8; 16] => uuid if 13..,
        pub partitions: Vec<FetchPartition> => array,
    }
}

crate::schema! {
    pub struct ForgottenTopic {
        pub topic: String => string if ..=12,
        pub topic_id: [u8; 16] => uuid if 13..,
        pub partitions: Vec<i32> => int32_array,
    }
}

crate::schema! {
    /// KIP-903 (v15+): the fetching replica and its broker epoch (replication only).
    pub struct ReplicaState {
        pub replica_id: i32 = -1 => int32,
        pub replica_epoch: i64 = -1 => int64,
    }
}

crate::schema! {
    /// Fetch (1). An absent MaxBytes (v0-2) is Kafka's default, i32::MAX.
    pub struct FetchRequest {
        pub cluster_id: Option<String> => nullable_string tag 0 if 12..,
        pub replica_id: i32 = -1 => int32 if ..=14,
        pub replica_state: ReplicaState => structure tag 1 if 15..,
        pub max_wait_ms: i32 => int32,
        pub min_bytes: i32 => int32,
        pub max_bytes: i32 = i32::MAX => int32 if 3..,
        pub isolation_level: i8 => int8 if 4..,
        pub session_id: i32 => int32 if 7..,
        pub session_epoch: i32 = -1 => int32 if 7..,
        pub topics: Vec<FetchTopic> => array,
        pub forgotten_topics: Vec<ForgottenTopic> => array if 7..,
        pub rack_id: String => string if 11..,
    }
}

crate::schema! {
    pub struct AbortedTransaction {
        pub producer_id: i64 => int64,
        pub first_offset: i64 => int64,
    }
}

crate::schema! {
    /// KIP-595: where a follower's log diverges from the leader's (replication only).
    pub struct EpochEndOffset {
        pub epoch: i32 = -1 => int32,
        pub end_offset: i64 = -1 => int64,
    }
}

crate::schema! {
    /// KIP-630: a snapshot to fetch instead (the metadata log only).
    pub struct SnapshotId {
        pub end_offset: i64 = -1 => int64,
        pub epoch: i32 = -1 => int32,
    }
}

crate::schema! {
    pub struct FetchPartitionResponse {
        pub partition_index: i32 => int32,
        pub error_code: ErrorCode => error_code,
        pub high_watermark: i64 => int64,
        pub last_stable_offset: i64 = -1 => int64 if 4..,
        pub log_start_offset: i64 = -1 => int64 if 5..,
        pub diverging_epoch: EpochEndOffset => structure tag 0 if 12..,
        pub current_leader: LeaderIdAndEpoch => structure tag 1 if 12..,
        pub snapshot_id: SnapshotId => structure tag 2 if 12..,
        pub aborted_transactions: Option<Vec<AbortedTransaction>> => nullable_array if 4..,
        pub preferred_read_replica: i32 = -1 => int32 if 11..,
        pub records: Option<Bytes> => nullable_bytes,
    }
}

crate::schema! {
    /// One topic's answer: by name before v13, by id (KIP-516) from v13.
    pub struct FetchTopicResponse {
        pub topic: String => string if ..=12,
        pub topic_id: [u8; 16] => uuid if 13..,
        pub partitions: Vec<FetchPartitionResponse> => array,
    }
}

crate::schema! {
    pub struct FetchResponse {
        pub throttle_time_ms: i32 => int32 if 1..,
        pub error_code: ErrorCode => error_code if 7..,
        pub session_id: i32 => int32 if 7..,
        pub topics: Vec<FetchTopicResponse> => array,
        pub node_endpoints: Vec<NodeEndpoint> => array tag 0 if 16..,
    }
}

// ---------------------------------------------------------------- OffsetForLeaderEpoch (23)

crate::schema! {
    pub struct OffsetForLeaderPartition {
        pub partition: i32 => int32,
        /// Fences a reader with old metadata (FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH).
        pub current_leader_epoch: i32 = -1 => int32 if 2..,
        /// The epoch to look the end offset of up.
        pub leader_epoch: i32 => int32,
    }
}

crate::schema! {
    pub struct OffsetForLeaderTopic {
        pub topic: String => string,
        pub partitions: Vec<OffsetForLeaderPartition> => array,
    }
}

crate::schema! {
    /// OffsetForLeaderEpoch (23): where a leader epoch ends in the leader's log (KIP-101,
    /// KIP-320: a consumer checks its position after a leader change).
    pub struct OffsetForLeaderEpochRequest {
        /// v3+: the follower's id, -1 for a consumer (-2: debugging).
        pub replica_id: i32 = -2 => int32 if 3..,
        pub topics: Vec<OffsetForLeaderTopic> => array,
    }
}

crate::schema! {
    pub struct EpochEndOffsetResult {
        pub error_code: ErrorCode => error_code,
        pub partition: i32 => int32,
        pub leader_epoch: i32 = -1 => int32 if 1..,
        pub end_offset: i64 = -1 => int64,
    }
}

crate::schema! {
    pub struct OffsetForLeaderTopicResult {
        pub topic: String => string,
        pub partitions: Vec<EpochEndOffsetResult> => array,
    }
}

crate::schema! {
    pub struct OffsetForLeaderEpochResponse {
        pub throttle_time_ms: i32 => int32 if 2..,
        pub topics: Vec<OffsetForLeaderTopicResult> => array,
    }
}

// ---------------------------------------------------------------- ListOffsets (2)

crate::schema! {
    pub struct ListOffsetsPartition {
        pub partition_index: i32 => int32,
        pub current_leader_epoch: i32 => int32 if 4..,
        pub timestamp: i64 => int64,
        pub max_num_offsets: i32 => int32 if ..=0,
    }
}

crate::schema! {
    pub struct ListOffsetsTopic {
        pub name: String => string,
        pub partitions: Vec<ListOffsetsPartition> => array,
    }
}

crate::schema! {
    pub struct ListOffsetsRequest {
        pub replica_id: i32 => int32,
        pub isolation_level: i8 => int8 if 2..,
        pub topics: Vec<ListOffsetsTopic> => array,
        /// KIP-1075 (v10+): how long a lookup in remote storage may take (none here).
        pub timeout_ms: i32 => int32 if 10..,
    }
}

crate::schema! {
    pub struct ListOffsetsPartitionResponse {
        pub partition_index: i32 => int32,
        pub error_code: ErrorCode => error_code,
        pub old_style_offsets: Vec<i64> => int64_array if ..=0,
        pub timestamp: i64 => int64 if 1..,
        pub offset: i64 => int64 if 1..,
        pub leader_epoch: i32 => int32 if 4..,
    }
}

crate::schema! {
    pub struct ListOffsetsTopicResponse {
        pub name: String => string,
        pub partitions: Vec<ListOffsetsPartitionResponse> => array,
    }
}

crate::schema! {
    pub struct ListOffsetsResponse {
        pub throttle_time_ms: i32 => int32 if 2..,
        pub topics: Vec<ListOffsetsTopicResponse> => array,
    }
}

// ---------------------------------------------------------------- CreateTopics (19)

crate::schema! {
    pub struct CreatableAssignment {
        pub partition_index: i32 => int32,
        pub broker_ids: Vec<i32> => int32_array,
    }
}

crate::schema! {
    pub struct CreatableConfig {
        pub name: String => string,
        pub value: Option<String> => nullable_string,
    }
}

crate::schema! {
    pub struct CreatableTopic {
        pub name: String => string,
        pub num_partitions: i32 => int32,
        pub replication_factor: i16 => int16,
        pub assignments: Vec<CreatableAssignment> => array,
        pub configs: Vec<CreatableConfig> => array,
    }
}

crate::schema! {
    pub struct CreateTopicsRequest {
        pub topics: Vec<CreatableTopic> => array,
        pub timeout_ms: i32 => int32,
        pub validate_only: bool => boolean if 1..,
    }
}

crate::schema! {
    pub struct CreatableTopicConfigs {
        pub name: String => string,
        pub value: Option<String> => nullable_string,
        pub read_only: bool => boolean,
        pub config_source: i8 => int8,
        pub is_sensitive: bool => boolean,
    }
}

crate::schema! {
    pub struct CreatableTopicResult {
        pub name: String => string,
        pub topic_id: [u8; 16] => uuid if 7..,
        pub error_code: ErrorCode => error_code,
        pub error_message: Option<String> => nullable_string if 1..,
        pub num_partitions: i32 => int32 if 5..,
        pub replication_factor: i16 => int16 if 5..,
        pub configs: Option<Vec<CreatableTopicConfigs>> => nullable_array if 5..,
    }
}

crate::schema! {
    pub struct CreateTopicsResponse {
        pub throttle_time_ms: i32 => int32 if 2..,
        pub topics: Vec<CreatableTopicResult> => array,
    }
}

// ---------------------------------------------------------------- DeleteTopics (20)

crate::schema! {
    pub struct DeleteTopicState {
        pub name: Option<String> => nullable_string,
        pub topic_id: [u8; 16] => uuid,
    }
}

crate::schema! {
    pub struct DeleteTopicsRequest {
        /// v6+
        pub topics: Vec<DeleteTopicState> => array if 6..,
        /// v0-5
        pub topic_names: Vec<String> => string_array if ..=5,
        pub timeout_ms: i32 => int32,
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeletableTopicResult {
    pub name: Option<String>,
    pub topic_id: [u8; 16],
    pub error_code: ErrorCode,
    pub error_message: Option<String>,
    pub tags: TaggedFields,
}

// Hand-written: the name is a string before v6 and a nullable string from v6.
impl Message for DeletableTopicResult {
    fn codec<C: Codec>(&mut self, c: &mut C, v: i16) -> ProtoResult<()> {
        if v >= 6 {
            c.nullable_string(&mut self.name)?;
            c.uuid(&mut self.topic_id)?;
        } else {
            let mut name = self.name.clone().unwrap_or_default();
            c.string(&mut name)?;
            self.name = Some(name);
        }
        c.i16(&mut self.error_code.0)?;
        if v >= 5 {
            c.nullable_string(&mut self.error_message)?;
        }
        c.tagged(&mut self.tags)
    }
}

crate::schema! {
    pub struct DeleteTopicsResponse {
        pub throttle_time_ms: i32 => int32 if 1..,
        pub responses: Vec<DeletableTopicResult> => array,
    }
}

// ---------------------------------------------------------------- DescribeConfigs (32)

crate::schema! {
    pub struct DescribeConfigsResource {
        pub resource_type: i8 => int8,
        pub resource_name: String => string,
        pub configuration_keys: Option<Vec<String>> => nullable_string_array,
    }
}

crate::schema! {
    pub struct DescribeConfigsRequest {
        pub resources: Vec<DescribeConfigsResource> => array,
        pub include_synonyms: bool => boolean if 1..,
        pub include_documentation: bool => boolean if 3..,
    }
}

crate::schema! {
    pub struct DescribeConfigsSynonym {
        pub name: String => string,
        pub value: Option<String> => nullable_string,
        pub source: i8 => int8,
    }
}

crate::schema! {
    pub struct DescribeConfigsEntry {
        pub name: String => string,
        pub value: Option<String> => nullable_string,
        pub read_only: bool => boolean,
        pub is_default: bool => boolean if ..=0,
        pub config_source: i8 => int8 if 1..,
        pub is_sensitive: bool => boolean,
        pub synonyms: Vec<DescribeConfigsSynonym> => array if 1..,
        pub config_type: i8 => int8 if 3..,
        pub documentation: Option<String> => nullable_string if 3..,
    }
}

crate::schema! {
    pub struct DescribeConfigsResult {
        pub error_code: ErrorCode => error_code,
        pub error_message: Option<String> => nullable_string,
        pub resource_type: i8 => int8,
        pub resource_name: String => string,
        pub configs: Vec<DescribeConfigsEntry> => array,
    }
}

crate::schema! {
    pub struct DescribeConfigsResponse {
        pub throttle_time_ms: i32 => int32,
        pub results: Vec<DescribeConfigsResult> => array,
    }
}

// ---------------------------------------------------------------- AlterConfigs (33) and
// IncrementalAlterConfigs (44): one request shape (the incremental one adds an operation per
// config) and one response shape.

#[derive(Debug, Clone, Default, PartialEq)]
pub struct AlterableConfig {
    pub name: String,
    /// IncrementalAlterConfigs only: SET 0, DELETE 1, APPEND 2, SUBTRACT 3.
    pub operation: i8,
    pub value: Option<String>,
    pub tags: TaggedFields,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct AlterConfigsResource {
    pub resource_type: i8,
    pub resource_name: String,
    pub configs: Vec<AlterableConfig>,
    pub tags: TaggedFields,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct AlterConfigsRequest {
    /// True for IncrementalAlterConfigs (set by the decoder from the API key).
    pub incremental: bool,
    pub resources: Vec<AlterConfigsResource>,
    pub validate_only: bool,
    pub tags: TaggedFields,
}

// Hand-written: each config's operation exists by API (`incremental`), not by version.
impl Message for AlterConfigsRequest {
    fn codec<C: Codec>(&mut self, c: &mut C, _v: i16) -> ProtoResult<()> {
        let incremental = self.incremental;
        array(c, &mut self.resources, |c, r| {
            c.i8(&mut r.resource_type)?;
            c.string(&mut r.resource_name)?;
            array(c, &mut r.configs, |c, k| {
                c.string(&mut k.name)?;
                if incremental {
                    c.i8(&mut k.operation)?;
                }
                c.nullable_string(&mut k.value)?;
                c.tagged(&mut k.tags)
            })?;
            c.tagged(&mut r.tags)
        })?;
        c.bool(&mut self.validate_only)?;
        c.tagged(&mut self.tags)
    }
}

crate::schema! {
    pub struct AlterConfigsResourceResponse {
        pub error_code: ErrorCode => error_code,
        pub error_message: Option<String> => nullable_string,
        pub resource_type: i8 => int8,
        pub resource_name: String => string,
    }
}

crate::schema! {
    pub struct AlterConfigsResponse {
        pub throttle_time_ms: i32 => int32,
        pub responses: Vec<AlterConfigsResourceResponse> => array,
    }
}
