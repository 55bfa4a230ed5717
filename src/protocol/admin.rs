//! Admin APIs beyond topics and configs: CreatePartitions (37), DeleteRecords (21),
//! DescribeLogDirs (35), DescribeCluster (60) and DescribeProducers (61). One `codec` per
//! message covers every supported version; field versions follow Kafka's message JSON
//! definitions (`clients/src/main/resources/common/message/*.json`).

use super::codec::{array, nullable_array, Codec, ProtoResult, TaggedFields};
use super::messages::Message;

// ---------------------------------------------------------------- CreatePartitions (37)

#[derive(Debug, Clone, Default, PartialEq)]
pub struct CreatePartitionsAssignment {
    pub broker_ids: Vec<i32>,
    pub tags: TaggedFields,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct CreatePartitionsTopic {
    pub name: String,
    /// The new partition count.
    pub count: i32,
    /// `None`: the broker places the new partitions.
    pub assignments: Option<Vec<CreatePartitionsAssignment>>,
    pub tags: TaggedFields,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct CreatePartitionsRequest {
    pub topics: Vec<CreatePartitionsTopic>,
    pub timeout_ms: i32,
    pub validate_only: bool,
    pub tags: TaggedFields,
}

impl Message for CreatePartitionsRequest {
    fn codec<C: Codec>(&mut self, c: &mut C, _v: i16) -> ProtoResult<()> {
        array(c, &mut self.topics, |c, t| {
            c.string(&mut t.name)?;
            c.i32(&mut t.count)?;
            nullable_array(c, &mut t.assignments, |c, a| {
                array(c, &mut a.broker_ids, |c, id| c.i32(id))?;
                c.tagged(&mut a.tags)
            })?;
            c.tagged(&mut t.tags)
        })?;
        c.i32(&mut self.timeout_ms)?;
        c.bool(&mut self.validate_only)?;
        c.tagged(&mut self.tags)
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct CreatePartitionsTopicResult {
    pub name: String,
    pub error_code: i16,
    pub error_message: Option<String>,
    pub tags: TaggedFields,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct CreatePartitionsResponse {
    pub throttle_time_ms: i32,
    pub results: Vec<CreatePartitionsTopicResult>,
    pub tags: TaggedFields,
}

impl Message for CreatePartitionsResponse {
    fn codec<C: Codec>(&mut self, c: &mut C, _v: i16) -> ProtoResult<()> {
        c.i32(&mut self.throttle_time_ms)?;
        array(c, &mut self.results, |c, r| {
            c.string(&mut r.name)?;
            c.i16(&mut r.error_code)?;
            c.nullable_string(&mut r.error_message)?;
            c.tagged(&mut r.tags)
        })?;
        c.tagged(&mut self.tags)
    }
}

// ---------------------------------------------------------------- DeleteRecords (21)

#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeleteRecordsPartition {
    pub partition_index: i32,
    /// Delete every record below this offset; -1: below the high watermark.
    pub offset: i64,
    pub tags: TaggedFields,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeleteRecordsTopic {
    pub name: String,
    pub partitions: Vec<DeleteRecordsPartition>,
    pub tags: TaggedFields,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeleteRecordsRequest {
    pub topics: Vec<DeleteRecordsTopic>,
    pub timeout_ms: i32,
    pub tags: TaggedFields,
}

impl Message for DeleteRecordsRequest {
    fn codec<C: Codec>(&mut self, c: &mut C, _v: i16) -> ProtoResult<()> {
        array(c, &mut self.topics, |c, t| {
            c.string(&mut t.name)?;
            array(c, &mut t.partitions, |c, p| {
                c.i32(&mut p.partition_index)?;
                c.i64(&mut p.offset)?;
                c.tagged(&mut p.tags)
            })?;
            c.tagged(&mut t.tags)
        })?;
        c.i32(&mut self.timeout_ms)?;
        c.tagged(&mut self.tags)
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeleteRecordsPartitionResult {
    pub partition_index: i32,
    /// The new log start offset, or -1 on error.
    pub low_watermark: i64,
    pub error_code: i16,
    pub tags: TaggedFields,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeleteRecordsTopicResult {
    pub name: String,
    pub partitions: Vec<DeleteRecordsPartitionResult>,
    pub tags: TaggedFields,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeleteRecordsResponse {
    pub throttle_time_ms: i32,
    pub topics: Vec<DeleteRecordsTopicResult>,
    pub tags: TaggedFields,
}

impl Message for DeleteRecordsResponse {
    fn codec<C: Codec>(&mut self, c: &mut C, _v: i16) -> ProtoResult<()> {
        c.i32(&mut self.throttle_time_ms)?;
        array(c, &mut self.topics, |c, t| {
            c.string(&mut t.name)?;
            array(c, &mut t.partitions, |c, p| {
                c.i32(&mut p.partition_index)?;
                c.i64(&mut p.low_watermark)?;
                c.i16(&mut p.error_code)?;
                c.tagged(&mut p.tags)
            })?;
            c.tagged(&mut t.tags)
        })?;
        c.tagged(&mut self.tags)
    }
}

// ---------------------------------------------------------------- DescribeLogDirs (35)

#[derive(Debug, Clone, Default, PartialEq)]
pub struct DescribableLogDirTopic {
    pub topic: String,
    pub partitions: Vec<i32>,
    pub tags: TaggedFields,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct DescribeLogDirsRequest {
    /// `None`: every partition.
    pub topics: Option<Vec<DescribableLogDirTopic>>,
    pub tags: TaggedFields,
}

impl Message for DescribeLogDirsRequest {
    fn codec<C: Codec>(&mut self, c: &mut C, _v: i16) -> ProtoResult<()> {
        nullable_array(c, &mut self.topics, |c, t| {
            c.string(&mut t.topic)?;
            array(c, &mut t.partitions, |c, p| c.i32(p))?;
            c.tagged(&mut t.tags)
        })?;
        c.tagged(&mut self.tags)
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct DescribeLogDirsPartition {
    pub partition_index: i32,
    pub partition_size: i64,
    pub offset_lag: i64,
    pub is_future_key: bool,
    pub tags: TaggedFields,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct DescribeLogDirsTopic {
    pub name: String,
    pub partitions: Vec<DescribeLogDirsPartition>,
    pub tags: TaggedFields,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DescribeLogDirsResult {
    pub error_code: i16,
    pub log_dir: String,
    pub topics: Vec<DescribeLogDirsTopic>,
    /// v4+
    pub total_bytes: i64,
    /// v4+
    pub usable_bytes: i64,
    pub tags: TaggedFields,
}

impl Default for DescribeLogDirsResult {
    fn default() -> Self {
        DescribeLogDirsResult {
            error_code: 0,
            log_dir: String::new(),
            topics: Vec::new(),
            total_bytes: -1,
            usable_bytes: -1,
            tags: TaggedFields::default(),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct DescribeLogDirsResponse {
    pub throttle_time_ms: i32,
    /// v3+
    pub error_code: i16,
    pub results: Vec<DescribeLogDirsResult>,
    pub tags: TaggedFields,
}

impl Message for DescribeLogDirsResponse {
    fn codec<C: Codec>(&mut self, c: &mut C, v: i16) -> ProtoResult<()> {
        c.i32(&mut self.throttle_time_ms)?;
        if v >= 3 {
            c.i16(&mut self.error_code)?;
        }
        array(c, &mut self.results, |c, r| {
            c.i16(&mut r.error_code)?;
            c.string(&mut r.log_dir)?;
            array(c, &mut r.topics, |c, t| {
                c.string(&mut t.name)?;
                array(c, &mut t.partitions, |c, p| {
                    c.i32(&mut p.partition_index)?;
                    c.i64(&mut p.partition_size)?;
                    c.i64(&mut p.offset_lag)?;
                    c.bool(&mut p.is_future_key)?;
                    c.tagged(&mut p.tags)
                })?;
                c.tagged(&mut t.tags)
            })?;
            if v >= 4 {
                c.i64(&mut r.total_bytes)?;
                c.i64(&mut r.usable_bytes)?;
            }
            c.tagged(&mut r.tags)
        })?;
        c.tagged(&mut self.tags)
    }
}

// ---------------------------------------------------------------- DescribeCluster (60)

#[derive(Debug, Clone, PartialEq)]
pub struct DescribeClusterRequest {
    pub include_cluster_authorized_operations: bool,
    /// v1+: 1 brokers, 2 controllers.
    pub endpoint_type: i8,
    /// v2+
    pub include_fenced_brokers: bool,
    pub tags: TaggedFields,
}

impl Default for DescribeClusterRequest {
    fn default() -> Self {
        DescribeClusterRequest {
            include_cluster_authorized_operations: false,
            endpoint_type: 1,
            include_fenced_brokers: false,
            tags: TaggedFields::default(),
        }
    }
}

impl Message for DescribeClusterRequest {
    fn codec<C: Codec>(&mut self, c: &mut C, v: i16) -> ProtoResult<()> {
        c.bool(&mut self.include_cluster_authorized_operations)?;
        if v >= 1 {
            c.i8(&mut self.endpoint_type)?;
        }
        if v >= 2 {
            c.bool(&mut self.include_fenced_brokers)?;
        }
        c.tagged(&mut self.tags)
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct DescribeClusterBroker {
    pub broker_id: i32,
    pub host: String,
    pub port: i32,
    pub rack: Option<String>,
    /// v2+
    pub is_fenced: bool,
    pub tags: TaggedFields,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DescribeClusterResponse {
    pub throttle_time_ms: i32,
    pub error_code: i16,
    pub error_message: Option<String>,
    /// v1+
    pub endpoint_type: i8,
    pub cluster_id: String,
    pub controller_id: i32,
    pub brokers: Vec<DescribeClusterBroker>,
    pub cluster_authorized_operations: i32,
    pub tags: TaggedFields,
}

impl Default for DescribeClusterResponse {
    fn default() -> Self {
        DescribeClusterResponse {
            throttle_time_ms: 0,
            error_code: 0,
            error_message: None,
            endpoint_type: 1,
            cluster_id: String::new(),
            controller_id: -1,
            brokers: Vec::new(),
            cluster_authorized_operations: i32::MIN,
            tags: TaggedFields::default(),
        }
    }
}

impl Message for DescribeClusterResponse {
    fn codec<C: Codec>(&mut self, c: &mut C, v: i16) -> ProtoResult<()> {
        c.i32(&mut self.throttle_time_ms)?;
        c.i16(&mut self.error_code)?;
        c.nullable_string(&mut self.error_message)?;
        if v >= 1 {
            c.i8(&mut self.endpoint_type)?;
        }
        c.string(&mut self.cluster_id)?;
        c.i32(&mut self.controller_id)?;
        array(c, &mut self.brokers, |c, b| {
            c.i32(&mut b.broker_id)?;
            c.string(&mut b.host)?;
            c.i32(&mut b.port)?;
            c.nullable_string(&mut b.rack)?;
            if v >= 2 {
                c.bool(&mut b.is_fenced)?;
            }
            c.tagged(&mut b.tags)
        })?;
        c.i32(&mut self.cluster_authorized_operations)?;
        c.tagged(&mut self.tags)
    }
}

// ---------------------------------------------------------------- DescribeProducers (61)

#[derive(Debug, Clone, Default, PartialEq)]
pub struct DescribeProducersTopic {
    pub name: String,
    pub partition_indexes: Vec<i32>,
    pub tags: TaggedFields,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct DescribeProducersRequest {
    pub topics: Vec<DescribeProducersTopic>,
    pub tags: TaggedFields,
}

impl Message for DescribeProducersRequest {
    fn codec<C: Codec>(&mut self, c: &mut C, _v: i16) -> ProtoResult<()> {
        array(c, &mut self.topics, |c, t| {
            c.string(&mut t.name)?;
            array(c, &mut t.partition_indexes, |c, p| c.i32(p))?;
            c.tagged(&mut t.tags)
        })?;
        c.tagged(&mut self.tags)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ProducerStateEntry {
    pub producer_id: i64,
    pub producer_epoch: i32,
    pub last_sequence: i32,
    pub last_timestamp: i64,
    pub coordinator_epoch: i32,
    pub current_txn_start_offset: i64,
    pub tags: TaggedFields,
}

impl Default for ProducerStateEntry {
    fn default() -> Self {
        ProducerStateEntry {
            producer_id: 0,
            producer_epoch: 0,
            last_sequence: -1,
            last_timestamp: -1,
            coordinator_epoch: 0,
            current_txn_start_offset: -1,
            tags: TaggedFields::default(),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct DescribeProducersPartition {
    pub partition_index: i32,
    pub error_code: i16,
    pub error_message: Option<String>,
    pub active_producers: Vec<ProducerStateEntry>,
    pub tags: TaggedFields,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct DescribeProducersTopicResponse {
    pub name: String,
    pub partitions: Vec<DescribeProducersPartition>,
    pub tags: TaggedFields,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct DescribeProducersResponse {
    pub throttle_time_ms: i32,
    pub topics: Vec<DescribeProducersTopicResponse>,
    pub tags: TaggedFields,
}

impl Message for DescribeProducersResponse {
    fn codec<C: Codec>(&mut self, c: &mut C, _v: i16) -> ProtoResult<()> {
        c.i32(&mut self.throttle_time_ms)?;
        array(c, &mut self.topics, |c, t| {
            c.string(&mut t.name)?;
            array(c, &mut t.partitions, |c, p| {
                c.i32(&mut p.partition_index)?;
                c.i16(&mut p.error_code)?;
                c.nullable_string(&mut p.error_message)?;
                array(c, &mut p.active_producers, |c, s| {
                    c.i64(&mut s.producer_id)?;
                    c.i32(&mut s.producer_epoch)?;
                    c.i32(&mut s.last_sequence)?;
                    c.i64(&mut s.last_timestamp)?;
                    c.i32(&mut s.coordinator_epoch)?;
                    c.i64(&mut s.current_txn_start_offset)?;
                    c.tagged(&mut s.tags)
                })?;
                c.tagged(&mut p.tags)
            })?;
            c.tagged(&mut t.tags)
        })?;
        c.tagged(&mut self.tags)
    }
}
