//! The request and response bodies tidemark implements, one `codec` function each, covering
//! every supported version (field versions from Kafka's message JSON definitions). A field
//! absent in a version keeps its default when decoding and is skipped when encoding.

use super::codec::{array, nullable_array, Codec, ProtoResult, TaggedFields};
use super::schema::kind;
use bytes::Bytes;

/// A message body of some API.
pub trait Message: Default + std::fmt::Debug + Clone + PartialEq {
    /// Read or write the body at `version` (the codec's `flexible` flag is already set).
    fn codec<C: Codec>(&mut self, c: &mut C, version: i16) -> ProtoResult<()>;
}

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
    pub error_code: i16,
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
            error_code: 0,
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
        c.i16(&mut self.error_code)?;
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
        pub error_code: i16 => int16,
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
    pub error_code: i16,
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
        c.i16(&mut self.error_code)?;
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
        pub name: String => string,
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
    pub struct ProducePartitionResponse {
        pub index: i32 => int32,
        pub error_code: i16 => int16,
        pub base_offset: i64 => int64,
        pub log_append_time_ms: i64 => int64 if 2..,
        pub log_start_offset: i64 => int64 if 5..,
        pub record_errors: Vec<RecordError> => array if 8..,
        pub error_message: Option<String> => nullable_string if 8..,
    }
}

crate::schema! {
    pub struct ProduceTopicResponse {
        pub name: String => string,
        pub partitions: Vec<ProducePartitionResponse> => array,
    }
}

crate::schema! {
    pub struct ProduceResponse {
        pub topics: Vec<ProduceTopicResponse> => array,
        pub throttle_time_ms: i32 => int32 if 1..,
    }
}

// ---------------------------------------------------------------- Fetch (1)

crate::schema! {
    pub struct FetchPartition {
        pub partition: i32 => int32,
        pub current_leader_epoch: i32 => int32 if 9..,
        pub fetch_offset: i64 => int64,
        pub last_fetched_epoch: i32 => int32 if 12..,
        pub log_start_offset: i64 => int64 if 5..,
        pub partition_max_bytes: i32 => int32,
    }
}

crate::schema! {
    pub struct FetchTopic {
        pub topic: String => string,
        pub partitions: Vec<FetchPartition> => array,
    }
}

crate::schema! {
    pub struct ForgottenTopic {
        pub topic: String => string,
        pub partitions: Vec<i32> => int32_array,
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct FetchRequest {
    pub replica_id: i32,
    pub max_wait_ms: i32,
    pub min_bytes: i32,
    /// v3+; absent (v0-2) reads as `i32::MAX`, Kafka's default (`Default` keeps 0).
    pub max_bytes: i32,
    pub isolation_level: i8,
    pub session_id: i32,
    pub session_epoch: i32,
    pub topics: Vec<FetchTopic>,
    pub forgotten_topics: Vec<ForgottenTopic>,
    pub rack_id: String,
    pub tags: TaggedFields,
}

// Hand-written: an absent MaxBytes (v0-2) reads as i32::MAX, not as its `Default` (0).
impl Message for FetchRequest {
    fn codec<C: Codec>(&mut self, c: &mut C, v: i16) -> ProtoResult<()> {
        c.i32(&mut self.replica_id)?;
        c.i32(&mut self.max_wait_ms)?;
        c.i32(&mut self.min_bytes)?;
        if v >= 3 {
            c.i32(&mut self.max_bytes)?;
        } else if c.reading() {
            self.max_bytes = i32::MAX;
        }
        if v >= 4 {
            c.i8(&mut self.isolation_level)?;
        }
        if v >= 7 {
            c.i32(&mut self.session_id)?;
            c.i32(&mut self.session_epoch)?;
        }
        kind::array(c, &mut self.topics, v)?;
        if v >= 7 {
            kind::array(c, &mut self.forgotten_topics, v)?;
        }
        if v >= 11 {
            c.string(&mut self.rack_id)?;
        }
        c.tagged(&mut self.tags)
    }
}

crate::schema! {
    pub struct AbortedTransaction {
        pub producer_id: i64 => int64,
        pub first_offset: i64 => int64,
    }
}

crate::schema! {
    pub struct FetchPartitionResponse {
        pub partition_index: i32 => int32,
        pub error_code: i16 => int16,
        pub high_watermark: i64 => int64,
        pub last_stable_offset: i64 => int64 if 4..,
        pub log_start_offset: i64 => int64 if 5..,
        pub aborted_transactions: Option<Vec<AbortedTransaction>> => nullable_array if 4..,
        pub preferred_read_replica: i32 => int32 if 11..,
        pub records: Option<Bytes> => nullable_bytes,
    }
}

crate::schema! {
    pub struct FetchTopicResponse {
        pub topic: String => string,
        pub partitions: Vec<FetchPartitionResponse> => array,
    }
}

crate::schema! {
    pub struct FetchResponse {
        pub throttle_time_ms: i32 => int32 if 1..,
        pub error_code: i16 => int16 if 7..,
        pub session_id: i32 => int32 if 7..,
        pub topics: Vec<FetchTopicResponse> => array,
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
    }
}

crate::schema! {
    pub struct ListOffsetsPartitionResponse {
        pub partition_index: i32 => int32,
        pub error_code: i16 => int16,
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

#[derive(Debug, Clone, Default, PartialEq)]
pub struct CreatableAssignment {
    pub partition_index: i32,
    pub broker_ids: Vec<i32>,
    pub tags: TaggedFields,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct CreatableConfig {
    pub name: String,
    pub value: Option<String>,
    pub tags: TaggedFields,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct CreatableTopic {
    pub name: String,
    pub num_partitions: i32,
    pub replication_factor: i16,
    pub assignments: Vec<CreatableAssignment>,
    pub configs: Vec<CreatableConfig>,
    pub tags: TaggedFields,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct CreateTopicsRequest {
    pub topics: Vec<CreatableTopic>,
    pub timeout_ms: i32,
    pub validate_only: bool,
    pub tags: TaggedFields,
}

impl Message for CreateTopicsRequest {
    fn codec<C: Codec>(&mut self, c: &mut C, v: i16) -> ProtoResult<()> {
        array(c, &mut self.topics, |c, t| {
            c.string(&mut t.name)?;
            c.i32(&mut t.num_partitions)?;
            c.i16(&mut t.replication_factor)?;
            array(c, &mut t.assignments, |c, a| {
                c.i32(&mut a.partition_index)?;
                kind::int32_array(c, &mut a.broker_ids, v)?;
                c.tagged(&mut a.tags)
            })?;
            array(c, &mut t.configs, |c, k| {
                c.string(&mut k.name)?;
                c.nullable_string(&mut k.value)?;
                c.tagged(&mut k.tags)
            })?;
            c.tagged(&mut t.tags)
        })?;
        c.i32(&mut self.timeout_ms)?;
        if v >= 1 {
            c.bool(&mut self.validate_only)?;
        }
        c.tagged(&mut self.tags)
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct CreatableTopicConfigs {
    pub name: String,
    pub value: Option<String>,
    pub read_only: bool,
    pub config_source: i8,
    pub is_sensitive: bool,
    pub tags: TaggedFields,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct CreatableTopicResult {
    pub name: String,
    pub topic_id: [u8; 16],
    pub error_code: i16,
    pub error_message: Option<String>,
    pub num_partitions: i32,
    pub replication_factor: i16,
    pub configs: Option<Vec<CreatableTopicConfigs>>,
    pub tags: TaggedFields,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct CreateTopicsResponse {
    pub throttle_time_ms: i32,
    pub topics: Vec<CreatableTopicResult>,
    pub tags: TaggedFields,
}

impl Message for CreateTopicsResponse {
    fn codec<C: Codec>(&mut self, c: &mut C, v: i16) -> ProtoResult<()> {
        if v >= 2 {
            c.i32(&mut self.throttle_time_ms)?;
        }
        array(c, &mut self.topics, |c, t| {
            c.string(&mut t.name)?;
            if v >= 7 {
                c.uuid(&mut t.topic_id)?;
            }
            c.i16(&mut t.error_code)?;
            if v >= 1 {
                c.nullable_string(&mut t.error_message)?;
            }
            if v >= 5 {
                c.i32(&mut t.num_partitions)?;
                c.i16(&mut t.replication_factor)?;
                nullable_array(c, &mut t.configs, |c, k| {
                    c.string(&mut k.name)?;
                    c.nullable_string(&mut k.value)?;
                    c.bool(&mut k.read_only)?;
                    c.i8(&mut k.config_source)?;
                    c.bool(&mut k.is_sensitive)?;
                    c.tagged(&mut k.tags)
                })?;
            }
            c.tagged(&mut t.tags)
        })?;
        c.tagged(&mut self.tags)
    }
}

// ---------------------------------------------------------------- DeleteTopics (20)

#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeleteTopicState {
    pub name: Option<String>,
    pub topic_id: [u8; 16],
    pub tags: TaggedFields,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeleteTopicsRequest {
    /// v6+
    pub topics: Vec<DeleteTopicState>,
    /// v0-5
    pub topic_names: Vec<String>,
    pub timeout_ms: i32,
    pub tags: TaggedFields,
}

impl Message for DeleteTopicsRequest {
    fn codec<C: Codec>(&mut self, c: &mut C, v: i16) -> ProtoResult<()> {
        if v >= 6 {
            array(c, &mut self.topics, |c, t| {
                c.nullable_string(&mut t.name)?;
                c.uuid(&mut t.topic_id)?;
                c.tagged(&mut t.tags)
            })?;
        } else {
            array(c, &mut self.topic_names, |c, n| c.string(n))?;
        }
        c.i32(&mut self.timeout_ms)?;
        c.tagged(&mut self.tags)
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeletableTopicResult {
    pub name: Option<String>,
    pub topic_id: [u8; 16],
    pub error_code: i16,
    pub error_message: Option<String>,
    pub tags: TaggedFields,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeleteTopicsResponse {
    pub throttle_time_ms: i32,
    pub responses: Vec<DeletableTopicResult>,
    pub tags: TaggedFields,
}

impl Message for DeleteTopicsResponse {
    fn codec<C: Codec>(&mut self, c: &mut C, v: i16) -> ProtoResult<()> {
        if v >= 1 {
            c.i32(&mut self.throttle_time_ms)?;
        }
        array(c, &mut self.responses, |c, r| {
            if v >= 6 {
                c.nullable_string(&mut r.name)?;
                c.uuid(&mut r.topic_id)?;
            } else {
                let mut name = r.name.clone().unwrap_or_default();
                c.string(&mut name)?;
                r.name = Some(name);
            }
            c.i16(&mut r.error_code)?;
            if v >= 5 {
                c.nullable_string(&mut r.error_message)?;
            }
            c.tagged(&mut r.tags)
        })?;
        c.tagged(&mut self.tags)
    }
}

// ---------------------------------------------------------------- DescribeConfigs (32)

#[derive(Debug, Clone, Default, PartialEq)]
pub struct DescribeConfigsResource {
    pub resource_type: i8,
    pub resource_name: String,
    pub configuration_keys: Option<Vec<String>>,
    pub tags: TaggedFields,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct DescribeConfigsRequest {
    pub resources: Vec<DescribeConfigsResource>,
    pub include_synonyms: bool,
    pub include_documentation: bool,
    pub tags: TaggedFields,
}

impl Message for DescribeConfigsRequest {
    fn codec<C: Codec>(&mut self, c: &mut C, v: i16) -> ProtoResult<()> {
        array(c, &mut self.resources, |c, r| {
            c.i8(&mut r.resource_type)?;
            c.string(&mut r.resource_name)?;
            nullable_array(c, &mut r.configuration_keys, |c, k| c.string(k))?;
            c.tagged(&mut r.tags)
        })?;
        if v >= 1 {
            c.bool(&mut self.include_synonyms)?;
        }
        if v >= 3 {
            c.bool(&mut self.include_documentation)?;
        }
        c.tagged(&mut self.tags)
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct DescribeConfigsSynonym {
    pub name: String,
    pub value: Option<String>,
    pub source: i8,
    pub tags: TaggedFields,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct DescribeConfigsEntry {
    pub name: String,
    pub value: Option<String>,
    pub read_only: bool,
    pub is_default: bool,
    pub config_source: i8,
    pub is_sensitive: bool,
    pub synonyms: Vec<DescribeConfigsSynonym>,
    pub config_type: i8,
    pub documentation: Option<String>,
    pub tags: TaggedFields,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct DescribeConfigsResult {
    pub error_code: i16,
    pub error_message: Option<String>,
    pub resource_type: i8,
    pub resource_name: String,
    pub configs: Vec<DescribeConfigsEntry>,
    pub tags: TaggedFields,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct DescribeConfigsResponse {
    pub throttle_time_ms: i32,
    pub results: Vec<DescribeConfigsResult>,
    pub tags: TaggedFields,
}

impl Message for DescribeConfigsResponse {
    fn codec<C: Codec>(&mut self, c: &mut C, v: i16) -> ProtoResult<()> {
        c.i32(&mut self.throttle_time_ms)?;
        array(c, &mut self.results, |c, r| {
            c.i16(&mut r.error_code)?;
            c.nullable_string(&mut r.error_message)?;
            c.i8(&mut r.resource_type)?;
            c.string(&mut r.resource_name)?;
            array(c, &mut r.configs, |c, e| {
                c.string(&mut e.name)?;
                c.nullable_string(&mut e.value)?;
                c.bool(&mut e.read_only)?;
                if v == 0 {
                    c.bool(&mut e.is_default)?;
                } else {
                    c.i8(&mut e.config_source)?;
                }
                c.bool(&mut e.is_sensitive)?;
                if v >= 1 {
                    array(c, &mut e.synonyms, |c, s| {
                        c.string(&mut s.name)?;
                        c.nullable_string(&mut s.value)?;
                        c.i8(&mut s.source)?;
                        c.tagged(&mut s.tags)
                    })?;
                }
                if v >= 3 {
                    c.i8(&mut e.config_type)?;
                    c.nullable_string(&mut e.documentation)?;
                }
                c.tagged(&mut e.tags)
            })?;
            c.tagged(&mut r.tags)
        })?;
        c.tagged(&mut self.tags)
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

#[derive(Debug, Clone, Default, PartialEq)]
pub struct AlterConfigsResourceResponse {
    pub error_code: i16,
    pub error_message: Option<String>,
    pub resource_type: i8,
    pub resource_name: String,
    pub tags: TaggedFields,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct AlterConfigsResponse {
    pub throttle_time_ms: i32,
    pub responses: Vec<AlterConfigsResourceResponse>,
    pub tags: TaggedFields,
}

impl Message for AlterConfigsResponse {
    fn codec<C: Codec>(&mut self, c: &mut C, _v: i16) -> ProtoResult<()> {
        c.i32(&mut self.throttle_time_ms)?;
        array(c, &mut self.responses, |c, r| {
            c.i16(&mut r.error_code)?;
            c.nullable_string(&mut r.error_message)?;
            c.i8(&mut r.resource_type)?;
            c.string(&mut r.resource_name)?;
            c.tagged(&mut r.tags)
        })?;
        c.tagged(&mut self.tags)
    }
}
