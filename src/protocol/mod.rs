//! The Kafka wire protocol: request and response headers and the request and response bodies
//! of every API tidemark implements ([`messages`]; the consumer-group APIs and InitProducerId in
//! [`groups`]; the other admin APIs in [`admin`]), declared with [`schema!`](crate::schema) over
//! the primitive types of [`codec`]. Pure encoding and decoding: no storage and no glommio here,
//! so it is tested and fuzzed without a runtime.
//!
//! A frame is an int32 size then the bytes. Request header v1 (`api_key`, `api_version`,
//! `correlation_id`, `client_id` with an int16 length) or v2 for flexible versions (the same
//! plus tagged fields); response header v0 (`correlation_id`) or v1 for flexible versions,
//! except ApiVersions responses, whose header is always v0 (KIP-511).

pub mod admin;
pub mod codec;
pub mod errors;
pub mod groups;
pub mod messages;
pub mod schema;
pub mod security;
pub mod txn;

pub use codec::{ProtoError, ProtoResult};

use admin::*;
use bytes::{BufMut, Bytes, BytesMut};
use codec::{Codec, Reader, TaggedFields, Writer};
use groups::*;
use messages::*;
use security::*;
use txn::*;

pub const PRODUCE: i16 = 0;
pub const FETCH: i16 = 1;
pub const LIST_OFFSETS: i16 = 2;
pub const METADATA: i16 = 3;
pub const OFFSET_COMMIT: i16 = 8;
pub const OFFSET_FETCH: i16 = 9;
pub const FIND_COORDINATOR: i16 = 10;
pub const JOIN_GROUP: i16 = 11;
pub const HEARTBEAT: i16 = 12;
pub const LEAVE_GROUP: i16 = 13;
pub const SYNC_GROUP: i16 = 14;
pub const DESCRIBE_GROUPS: i16 = 15;
pub const LIST_GROUPS: i16 = 16;
pub const SASL_HANDSHAKE: i16 = 17;
pub const API_VERSIONS: i16 = 18;
pub const CREATE_TOPICS: i16 = 19;
pub const DELETE_TOPICS: i16 = 20;
pub const DELETE_RECORDS: i16 = 21;
pub const INIT_PRODUCER_ID: i16 = 22;
pub const OFFSET_FOR_LEADER_EPOCH: i16 = 23;
pub const ADD_PARTITIONS_TO_TXN: i16 = 24;
pub const ADD_OFFSETS_TO_TXN: i16 = 25;
pub const END_TXN: i16 = 26;
pub const WRITE_TXN_MARKERS: i16 = 27;
pub const TXN_OFFSET_COMMIT: i16 = 28;
pub const DESCRIBE_ACLS: i16 = 29;
pub const CREATE_ACLS: i16 = 30;
pub const DELETE_ACLS: i16 = 31;
pub const DESCRIBE_CONFIGS: i16 = 32;
pub const ALTER_CONFIGS: i16 = 33;
pub const DESCRIBE_LOG_DIRS: i16 = 35;
pub const CREATE_PARTITIONS: i16 = 37;
pub const DELETE_GROUPS: i16 = 42;
pub const OFFSET_DELETE: i16 = 47;
pub const ELECT_LEADERS: i16 = 43;
pub const ALTER_PARTITION_REASSIGNMENTS: i16 = 45;
pub const LIST_PARTITION_REASSIGNMENTS: i16 = 46;
pub const INCREMENTAL_ALTER_CONFIGS: i16 = 44;
pub const SASL_AUTHENTICATE: i16 = 36;
pub const DESCRIBE_CLIENT_QUOTAS: i16 = 48;
pub const ALTER_CLIENT_QUOTAS: i16 = 49;
pub const DESCRIBE_USER_SCRAM_CREDENTIALS: i16 = 50;
pub const ALTER_USER_SCRAM_CREDENTIALS: i16 = 51;
pub const DESCRIBE_QUORUM: i16 = 55;
pub const UPDATE_FEATURES: i16 = 57;
pub const DESCRIBE_CLUSTER: i16 = 60;
pub const UNREGISTER_BROKER: i16 = 64;
pub const ADD_RAFT_VOTER: i16 = 80;
pub const REMOVE_RAFT_VOTER: i16 = 81;
pub const DESCRIBE_PRODUCERS: i16 = 61;
pub const DESCRIBE_TRANSACTIONS: i16 = 65;
pub const LIST_TRANSACTIONS: i16 = 66;
pub const CONSUMER_GROUP_HEARTBEAT: i16 = 68;
pub const CONSUMER_GROUP_DESCRIBE: i16 = 69;
pub const LIST_CONFIG_RESOURCES: i16 = 74;
pub const DESCRIBE_TOPIC_PARTITIONS: i16 = 75;

/// What tidemark implements: (API key, min version, max version, first flexible version).
/// ApiVersions advertises exactly this table.
pub const SUPPORTED: &[(i16, i16, i16, i16)] = &[
    (PRODUCE, 0, 13, 9),
    (FETCH, 0, 18, 12),
    (LIST_OFFSETS, 0, 10, 6),
    (METADATA, 0, 13, 9),
    (OFFSET_COMMIT, 0, 9, 8),
    (OFFSET_FETCH, 0, 9, 6),
    (FIND_COORDINATOR, 0, 6, 3),
    (JOIN_GROUP, 0, 9, 6),
    (HEARTBEAT, 0, 4, 4),
    (LEAVE_GROUP, 0, 5, 4),
    (SYNC_GROUP, 0, 5, 4),
    (DESCRIBE_GROUPS, 0, 6, 5),
    (LIST_GROUPS, 0, 5, 3),
    (SASL_HANDSHAKE, 0, 1, i16::MAX),
    (API_VERSIONS, 0, 4, 3),
    (CREATE_TOPICS, 0, 7, 5),
    (DELETE_TOPICS, 0, 6, 4),
    (DELETE_RECORDS, 0, 2, 2),
    (INIT_PRODUCER_ID, 0, 5, 2),
    (OFFSET_FOR_LEADER_EPOCH, 0, 4, 4),
    (ADD_PARTITIONS_TO_TXN, 0, 5, 3),
    (ADD_OFFSETS_TO_TXN, 0, 4, 3),
    (END_TXN, 0, 5, 3),
    (WRITE_TXN_MARKERS, 0, 1, 1),
    (TXN_OFFSET_COMMIT, 0, 5, 3),
    (DESCRIBE_ACLS, 0, 3, 2),
    (CREATE_ACLS, 0, 3, 2),
    (DELETE_ACLS, 0, 3, 2),
    (DESCRIBE_CONFIGS, 0, 4, 4),
    (ALTER_CONFIGS, 0, 2, 2),
    (DESCRIBE_LOG_DIRS, 0, 4, 2),
    (CREATE_PARTITIONS, 0, 3, 2),
    (DELETE_GROUPS, 0, 2, 2),
    (OFFSET_DELETE, 0, 0, i16::MAX),
    (ELECT_LEADERS, 0, 2, 2),
    (ALTER_PARTITION_REASSIGNMENTS, 0, 1, 0),
    (LIST_PARTITION_REASSIGNMENTS, 0, 0, 0),
    (INCREMENTAL_ALTER_CONFIGS, 0, 1, 1),
    (SASL_AUTHENTICATE, 0, 2, 2),
    (DESCRIBE_CLIENT_QUOTAS, 0, 1, 1),
    (ALTER_CLIENT_QUOTAS, 0, 1, 1),
    (DESCRIBE_USER_SCRAM_CREDENTIALS, 0, 0, 0),
    (ALTER_USER_SCRAM_CREDENTIALS, 0, 0, 0),
    (DESCRIBE_QUORUM, 0, 2, 0),
    (UPDATE_FEATURES, 0, 2, 0),
    (DESCRIBE_CLUSTER, 0, 2, 0),
    (UNREGISTER_BROKER, 0, 0, 0),
    (DESCRIBE_PRODUCERS, 0, 0, 0),
    (DESCRIBE_TRANSACTIONS, 0, 0, 0),
    (LIST_TRANSACTIONS, 0, 2, 0),
    (CONSUMER_GROUP_HEARTBEAT, 0, 1, 0),
    (CONSUMER_GROUP_DESCRIBE, 0, 1, 0),
    (LIST_CONFIG_RESOURCES, 0, 1, 0),
    (DESCRIBE_TOPIC_PARTITIONS, 0, 0, 0),
    (ADD_RAFT_VOTER, 0, 1, 0),
    (REMOVE_RAFT_VOTER, 0, 0, 0),
];

/// Whether `version` of `api` is flexible. Unknown APIs are treated as not flexible (their
/// header is read only as far as the correlation id, which sits at the same place in every
/// header version).
pub fn is_flexible(api: i16, version: i16) -> bool {
    match SUPPORTED.iter().find(|s| s.0 == api) {
        Some(&(_, _, _, flex)) => version >= flex,
        None => false,
    }
}

pub fn supported(api: i16, version: i16) -> bool {
    SUPPORTED.iter().any(|&(k, lo, hi, _)| k == api && (lo..=hi).contains(&version))
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestHeader {
    pub api_key: i16,
    pub api_version: i16,
    pub correlation_id: i32,
    pub client_id: Option<String>,
    pub tags: TaggedFields,
}

impl RequestHeader {
    fn codec<C: Codec>(&mut self, c: &mut C) -> ProtoResult<()> {
        c.i16(&mut self.api_key)?;
        c.i16(&mut self.api_version)?;
        c.i32(&mut self.correlation_id)?;
        // ClientId keeps its int16 length even in header v2.
        let flexible = c.flexible();
        c.set_flexible(false);
        let r = c.nullable_string(&mut self.client_id);
        c.set_flexible(flexible);
        r?;
        c.tagged(&mut self.tags)
    }
}

/// A decoded request body.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    Produce(ProduceRequest),
    Fetch(FetchRequest),
    ListOffsets(ListOffsetsRequest),
    Metadata(MetadataRequest),
    ApiVersions(ApiVersionsRequest),
    CreateTopics(CreateTopicsRequest),
    DeleteTopics(DeleteTopicsRequest),
    DescribeConfigs(DescribeConfigsRequest),
    ListConfigResources(ListConfigResourcesRequest),
    UpdateFeatures(UpdateFeaturesRequest),
    DescribeQuorum(DescribeQuorumRequest),
    UnregisterBroker(UnregisterBrokerRequest),
    AddRaftVoter(AddRaftVoterRequest),
    RemoveRaftVoter(RemoveRaftVoterRequest),
    /// AlterConfigs or IncrementalAlterConfigs (`incremental` tells which).
    AlterConfigs(AlterConfigsRequest),
    FindCoordinator(FindCoordinatorRequest),
    OffsetCommit(OffsetCommitRequest),
    OffsetFetch(OffsetFetchRequest),
    JoinGroup(JoinGroupRequest),
    Heartbeat(HeartbeatRequest),
    LeaveGroup(LeaveGroupRequest),
    SyncGroup(SyncGroupRequest),
    DescribeGroups(DescribeGroupsRequest),
    ListGroups(ListGroupsRequest),
    DeleteGroups(DeleteGroupsRequest),
    OffsetDelete(OffsetDeleteRequest),
    InitProducerId(InitProducerIdRequest),
    OffsetForLeaderEpoch(OffsetForLeaderEpochRequest),
    AddPartitionsToTxn(AddPartitionsToTxnRequest),
    AddOffsetsToTxn(AddOffsetsToTxnRequest),
    EndTxn(EndTxnRequest),
    WriteTxnMarkers(WriteTxnMarkersRequest),
    TxnOffsetCommit(TxnOffsetCommitRequest),
    DescribeTransactions(DescribeTransactionsRequest),
    ListTransactions(ListTransactionsRequest),
    CreatePartitions(CreatePartitionsRequest),
    ElectLeaders(ElectLeadersRequest),
    AlterPartitionReassignments(AlterPartitionReassignmentsRequest),
    ListPartitionReassignments(ListPartitionReassignmentsRequest),
    DeleteRecords(DeleteRecordsRequest),
    DescribeLogDirs(DescribeLogDirsRequest),
    DescribeCluster(DescribeClusterRequest),
    DescribeProducers(DescribeProducersRequest),
    DescribeTopicPartitions(DescribeTopicPartitionsRequest),
    ConsumerGroupHeartbeat(ConsumerGroupHeartbeatRequest),
    ConsumerGroupDescribe(ConsumerGroupDescribeRequest),
    SaslHandshake(SaslHandshakeRequest),
    SaslAuthenticate(SaslAuthenticateRequest),
    DescribeUserScramCredentials(DescribeUserScramCredentialsRequest),
    AlterUserScramCredentials(AlterUserScramCredentialsRequest),
    DescribeAcls(AclFilter),
    CreateAcls(CreateAclsRequest),
    DeleteAcls(DeleteAclsRequest),
    DescribeClientQuotas(DescribeClientQuotasRequest),
    AlterClientQuotas(AlterClientQuotasRequest),
}

impl Request {
    /// The API key this request is sent under.
    pub fn api_key(&self) -> i16 {
        match self {
            Self::Produce(_) => PRODUCE,
            Self::Fetch(_) => FETCH,
            Self::ListOffsets(_) => LIST_OFFSETS,
            Self::Metadata(_) => METADATA,
            Self::ApiVersions(_) => API_VERSIONS,
            Self::CreateTopics(_) => CREATE_TOPICS,
            Self::DeleteTopics(_) => DELETE_TOPICS,
            Self::DescribeConfigs(_) => DESCRIBE_CONFIGS,
            Self::ListConfigResources(_) => LIST_CONFIG_RESOURCES,
            Self::UpdateFeatures(_) => UPDATE_FEATURES,
            Self::DescribeQuorum(_) => DESCRIBE_QUORUM,
            Self::UnregisterBroker(_) => UNREGISTER_BROKER,
            Self::AddRaftVoter(_) => ADD_RAFT_VOTER,
            Self::RemoveRaftVoter(_) => REMOVE_RAFT_VOTER,
            Self::AlterConfigs(m) if m.incremental => INCREMENTAL_ALTER_CONFIGS,
            Self::AlterConfigs(_) => ALTER_CONFIGS,
            Self::FindCoordinator(_) => FIND_COORDINATOR,
            Self::OffsetCommit(_) => OFFSET_COMMIT,
            Self::OffsetFetch(_) => OFFSET_FETCH,
            Self::JoinGroup(_) => JOIN_GROUP,
            Self::Heartbeat(_) => HEARTBEAT,
            Self::LeaveGroup(_) => LEAVE_GROUP,
            Self::SyncGroup(_) => SYNC_GROUP,
            Self::DescribeGroups(_) => DESCRIBE_GROUPS,
            Self::ListGroups(_) => LIST_GROUPS,
            Self::DeleteGroups(_) => DELETE_GROUPS,
            Self::OffsetDelete(_) => OFFSET_DELETE,
            Self::InitProducerId(_) => INIT_PRODUCER_ID,
            Self::AddPartitionsToTxn(_) => ADD_PARTITIONS_TO_TXN,
            Self::AddOffsetsToTxn(_) => ADD_OFFSETS_TO_TXN,
            Self::EndTxn(_) => END_TXN,
            Self::OffsetForLeaderEpoch(_) => OFFSET_FOR_LEADER_EPOCH,
            Self::WriteTxnMarkers(_) => WRITE_TXN_MARKERS,
            Self::TxnOffsetCommit(_) => TXN_OFFSET_COMMIT,
            Self::DescribeTransactions(_) => DESCRIBE_TRANSACTIONS,
            Self::ListTransactions(_) => LIST_TRANSACTIONS,
            Self::CreatePartitions(_) => CREATE_PARTITIONS,
            Self::DeleteRecords(_) => DELETE_RECORDS,
            Self::DescribeLogDirs(_) => DESCRIBE_LOG_DIRS,
            Self::DescribeCluster(_) => DESCRIBE_CLUSTER,
            Self::DescribeProducers(_) => DESCRIBE_PRODUCERS,
            Self::DescribeTopicPartitions(_) => DESCRIBE_TOPIC_PARTITIONS,
            Self::ElectLeaders(_) => ELECT_LEADERS,
            Self::AlterPartitionReassignments(_) => ALTER_PARTITION_REASSIGNMENTS,
            Self::ListPartitionReassignments(_) => LIST_PARTITION_REASSIGNMENTS,
            Self::ConsumerGroupHeartbeat(_) => CONSUMER_GROUP_HEARTBEAT,
            Self::ConsumerGroupDescribe(_) => CONSUMER_GROUP_DESCRIBE,
            Self::SaslHandshake(_) => SASL_HANDSHAKE,
            Self::SaslAuthenticate(_) => SASL_AUTHENTICATE,
            Self::DescribeUserScramCredentials(_) => DESCRIBE_USER_SCRAM_CREDENTIALS,
            Self::AlterUserScramCredentials(_) => ALTER_USER_SCRAM_CREDENTIALS,
            Self::DescribeAcls(_) => DESCRIBE_ACLS,
            Self::CreateAcls(_) => CREATE_ACLS,
            Self::DeleteAcls(_) => DELETE_ACLS,
            Self::DescribeClientQuotas(_) => DESCRIBE_CLIENT_QUOTAS,
            Self::AlterClientQuotas(_) => ALTER_CLIENT_QUOTAS,
        }
    }

    /// Encode the request under `header` (for the load generator, tests and fuzzing): size
    /// prefix, header, body.
    pub fn encode(self, header: &RequestHeader) -> ProtoResult<Bytes> {
        match self {
            Self::Produce(mut m) => encode_request(header, &mut m),
            Self::Fetch(mut m) => encode_request(header, &mut m),
            Self::ListOffsets(mut m) => encode_request(header, &mut m),
            Self::Metadata(mut m) => encode_request(header, &mut m),
            Self::ApiVersions(mut m) => encode_request(header, &mut m),
            Self::CreateTopics(mut m) => encode_request(header, &mut m),
            Self::DeleteTopics(mut m) => encode_request(header, &mut m),
            Self::DescribeConfigs(mut m) => encode_request(header, &mut m),
            Self::ListConfigResources(mut m) => encode_request(header, &mut m),
            Self::UpdateFeatures(mut m) => encode_request(header, &mut m),
            Self::DescribeQuorum(mut m) => encode_request(header, &mut m),
            Self::UnregisterBroker(mut m) => encode_request(header, &mut m),
            Self::AddRaftVoter(mut m) => encode_request(header, &mut m),
            Self::RemoveRaftVoter(mut m) => encode_request(header, &mut m),
            Self::AlterConfigs(mut m) => encode_request(header, &mut m),
            Self::FindCoordinator(mut m) => encode_request(header, &mut m),
            Self::OffsetCommit(mut m) => encode_request(header, &mut m),
            Self::OffsetFetch(mut m) => encode_request(header, &mut m),
            Self::JoinGroup(mut m) => encode_request(header, &mut m),
            Self::Heartbeat(mut m) => encode_request(header, &mut m),
            Self::LeaveGroup(mut m) => encode_request(header, &mut m),
            Self::SyncGroup(mut m) => encode_request(header, &mut m),
            Self::DescribeGroups(mut m) => encode_request(header, &mut m),
            Self::ListGroups(mut m) => encode_request(header, &mut m),
            Self::DeleteGroups(mut m) => encode_request(header, &mut m),
            Self::OffsetDelete(mut m) => encode_request(header, &mut m),
            Self::InitProducerId(mut m) => encode_request(header, &mut m),
            Self::AddPartitionsToTxn(mut m) => encode_request(header, &mut m),
            Self::AddOffsetsToTxn(mut m) => encode_request(header, &mut m),
            Self::EndTxn(mut m) => encode_request(header, &mut m),
            Self::OffsetForLeaderEpoch(mut m) => encode_request(header, &mut m),
            Self::WriteTxnMarkers(mut m) => encode_request(header, &mut m),
            Self::TxnOffsetCommit(mut m) => encode_request(header, &mut m),
            Self::DescribeTransactions(mut m) => encode_request(header, &mut m),
            Self::ListTransactions(mut m) => encode_request(header, &mut m),
            Self::CreatePartitions(mut m) => encode_request(header, &mut m),
            Self::DeleteRecords(mut m) => encode_request(header, &mut m),
            Self::DescribeLogDirs(mut m) => encode_request(header, &mut m),
            Self::DescribeCluster(mut m) => encode_request(header, &mut m),
            Self::DescribeProducers(mut m) => encode_request(header, &mut m),
            Self::DescribeTopicPartitions(mut m) => encode_request(header, &mut m),
            Self::ElectLeaders(mut m) => encode_request(header, &mut m),
            Self::AlterPartitionReassignments(mut m) => encode_request(header, &mut m),
            Self::ListPartitionReassignments(mut m) => encode_request(header, &mut m),
            Self::ConsumerGroupHeartbeat(mut m) => encode_request(header, &mut m),
            Self::ConsumerGroupDescribe(mut m) => encode_request(header, &mut m),
            Self::SaslHandshake(mut m) => encode_request(header, &mut m),
            Self::SaslAuthenticate(mut m) => encode_request(header, &mut m),
            Self::DescribeUserScramCredentials(mut m) => encode_request(header, &mut m),
            Self::AlterUserScramCredentials(mut m) => encode_request(header, &mut m),
            Self::DescribeAcls(mut m) => encode_request(header, &mut m),
            Self::CreateAcls(mut m) => encode_request(header, &mut m),
            Self::DeleteAcls(mut m) => encode_request(header, &mut m),
            Self::DescribeClientQuotas(mut m) => encode_request(header, &mut m),
            Self::AlterClientQuotas(mut m) => encode_request(header, &mut m),
        }
    }
}

/// Why a request frame could not be decoded: with the header when it could be read, so the
/// broker can still answer (UNSUPPORTED_VERSION, INVALID_REQUEST) instead of dropping the
/// connection.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodeFailure {
    pub header: Option<RequestHeader>,
    pub error: ProtoError,
}

fn body<M: Message>(r: &mut Reader, version: i16) -> ProtoResult<M> {
    let mut m = M::default();
    m.codec(r, version)?;
    Ok(m)
}

/// Decode one request frame (without its size prefix).
pub fn decode_request(frame: Bytes) -> Result<(RequestHeader, Request), DecodeFailure> {
    if frame.len() < 8 {
        return Err(DecodeFailure { header: None, error: ProtoError::Truncated });
    }
    let api = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    // ApiVersions is flexible from v3 on, even past what we support (clients ask high first).
    let flexible = if api == API_VERSIONS { version >= 3 } else { is_flexible(api, version) };
    let correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
    // The key, version and correlation id sit at fixed places in every header version: an
    // unknown API or unsupported version is reported before the rest is parsed (its header
    // layout may be one this broker does not know).
    let basic = || RequestHeader { api_key: api, api_version: version, correlation_id, ..Default::default() };
    if !SUPPORTED.iter().any(|s| s.0 == api) {
        return Err(DecodeFailure { header: Some(basic()), error: ProtoError::UnknownApi(api) });
    }
    if !supported(api, version) {
        return Err(DecodeFailure { header: Some(basic()), error: ProtoError::UnsupportedVersion { api, version } });
    }
    let mut r = Reader::new(frame, flexible);
    let mut h = RequestHeader::default();
    if let Err(error) = h.codec(&mut r) {
        // As Kafka: a header that does not parse closes the connection (no answer can be
        // trusted to reach the right request).
        return Err(DecodeFailure { header: None, error });
    }
    let fail = |h: &RequestHeader, error| DecodeFailure { header: Some(h.clone()), error };
    let req = match api {
        PRODUCE => body(&mut r, version).map(Request::Produce),
        FETCH => body(&mut r, version).map(Request::Fetch),
        LIST_OFFSETS => body(&mut r, version).map(Request::ListOffsets),
        METADATA => body(&mut r, version).map(Request::Metadata),
        API_VERSIONS => body(&mut r, version).map(Request::ApiVersions),
        CREATE_TOPICS => body(&mut r, version).map(Request::CreateTopics),
        DELETE_TOPICS => body(&mut r, version).map(Request::DeleteTopics),
        DESCRIBE_CONFIGS => body(&mut r, version).map(Request::DescribeConfigs),
        LIST_CONFIG_RESOURCES => body(&mut r, version).map(Request::ListConfigResources),
        UPDATE_FEATURES => body(&mut r, version).map(Request::UpdateFeatures),
        DESCRIBE_QUORUM => body(&mut r, version).map(Request::DescribeQuorum),
        UNREGISTER_BROKER => body(&mut r, version).map(Request::UnregisterBroker),
        ADD_RAFT_VOTER => body(&mut r, version).map(Request::AddRaftVoter),
        REMOVE_RAFT_VOTER => body(&mut r, version).map(Request::RemoveRaftVoter),
        ALTER_CONFIGS | INCREMENTAL_ALTER_CONFIGS => {
            let mut m = AlterConfigsRequest { incremental: api == INCREMENTAL_ALTER_CONFIGS, ..Default::default() };
            m.codec(&mut r, version).map(|_| Request::AlterConfigs(m))
        }
        FIND_COORDINATOR => body(&mut r, version).map(Request::FindCoordinator),
        OFFSET_COMMIT => body(&mut r, version).map(Request::OffsetCommit),
        OFFSET_FETCH => body(&mut r, version).map(Request::OffsetFetch),
        JOIN_GROUP => body(&mut r, version).map(Request::JoinGroup),
        HEARTBEAT => body(&mut r, version).map(Request::Heartbeat),
        LEAVE_GROUP => body(&mut r, version).map(Request::LeaveGroup),
        SYNC_GROUP => body(&mut r, version).map(Request::SyncGroup),
        DESCRIBE_GROUPS => body(&mut r, version).map(Request::DescribeGroups),
        LIST_GROUPS => body(&mut r, version).map(Request::ListGroups),
        DELETE_GROUPS => body(&mut r, version).map(Request::DeleteGroups),
        OFFSET_DELETE => body(&mut r, version).map(Request::OffsetDelete),
        INIT_PRODUCER_ID => body(&mut r, version).map(Request::InitProducerId),
        OFFSET_FOR_LEADER_EPOCH => body(&mut r, version).map(Request::OffsetForLeaderEpoch),
        ADD_PARTITIONS_TO_TXN => body(&mut r, version).map(Request::AddPartitionsToTxn),
        ADD_OFFSETS_TO_TXN => body(&mut r, version).map(Request::AddOffsetsToTxn),
        END_TXN => body(&mut r, version).map(Request::EndTxn),
        WRITE_TXN_MARKERS => body(&mut r, version).map(Request::WriteTxnMarkers),
        TXN_OFFSET_COMMIT => body(&mut r, version).map(Request::TxnOffsetCommit),
        DESCRIBE_TRANSACTIONS => body(&mut r, version).map(Request::DescribeTransactions),
        LIST_TRANSACTIONS => body(&mut r, version).map(Request::ListTransactions),
        CREATE_PARTITIONS => body(&mut r, version).map(Request::CreatePartitions),
        ELECT_LEADERS => body(&mut r, version).map(Request::ElectLeaders),
        ALTER_PARTITION_REASSIGNMENTS => body(&mut r, version).map(Request::AlterPartitionReassignments),
        LIST_PARTITION_REASSIGNMENTS => body(&mut r, version).map(Request::ListPartitionReassignments),
        DELETE_RECORDS => body(&mut r, version).map(Request::DeleteRecords),
        DESCRIBE_LOG_DIRS => body(&mut r, version).map(Request::DescribeLogDirs),
        DESCRIBE_CLUSTER => body(&mut r, version).map(Request::DescribeCluster),
        DESCRIBE_PRODUCERS => body(&mut r, version).map(Request::DescribeProducers),
        DESCRIBE_TOPIC_PARTITIONS => body(&mut r, version).map(Request::DescribeTopicPartitions),
        CONSUMER_GROUP_HEARTBEAT => body(&mut r, version).map(Request::ConsumerGroupHeartbeat),
        CONSUMER_GROUP_DESCRIBE => body(&mut r, version).map(Request::ConsumerGroupDescribe),
        SASL_HANDSHAKE => body(&mut r, version).map(Request::SaslHandshake),
        SASL_AUTHENTICATE => body(&mut r, version).map(Request::SaslAuthenticate),
        DESCRIBE_USER_SCRAM_CREDENTIALS => body(&mut r, version).map(Request::DescribeUserScramCredentials),
        ALTER_USER_SCRAM_CREDENTIALS => body(&mut r, version).map(Request::AlterUserScramCredentials),
        DESCRIBE_ACLS => body(&mut r, version).map(Request::DescribeAcls),
        CREATE_ACLS => body(&mut r, version).map(Request::CreateAcls),
        DELETE_ACLS => body(&mut r, version).map(Request::DeleteAcls),
        DESCRIBE_CLIENT_QUOTAS => body(&mut r, version).map(Request::DescribeClientQuotas),
        ALTER_CLIENT_QUOTAS => body(&mut r, version).map(Request::AlterClientQuotas),
        _ => unreachable!("checked against SUPPORTED"),
    }
    .map_err(|e| fail(&h, e))?;
    Ok((h, req))
}

/// Encode a request (for the load generator and tests): size prefix, header, body.
pub fn encode_request<M: Message>(header: &RequestHeader, body: &mut M) -> ProtoResult<Bytes> {
    let flexible = is_flexible(header.api_key, header.api_version);
    let mut w = Writer::with_buf(BytesMut::with_capacity(256), flexible);
    w.buf.put_i32(0);
    header.clone().codec(&mut w)?;
    body.codec(&mut w, header.api_version)?;
    let len = (w.buf.len() - 4) as i32;
    w.buf[0..4].copy_from_slice(&len.to_be_bytes());
    Ok(w.buf.freeze())
}

/// Encode a response frame to the request `header`: size prefix, response header, body.
pub fn encode_response<M: Message>(header: &RequestHeader, body: &mut M) -> ProtoResult<Bytes> {
    let flexible = is_flexible(header.api_key, header.api_version);
    let mut w = Writer::with_buf(BytesMut::with_capacity(256), flexible);
    w.buf.put_i32(0);
    w.buf.put_i32(header.correlation_id);
    if flexible && header.api_key != API_VERSIONS {
        w.buf.put_u8(0); // response header v1: no tagged fields
    }
    body.codec(&mut w, header.api_version)?;
    let len = (w.buf.len() - 4) as i32;
    w.buf[0..4].copy_from_slice(&len.to_be_bytes());
    Ok(w.buf.freeze())
}

/// Decode a response body (for the load generator and tests), given the request header.
pub fn decode_response<M: Message>(header: &RequestHeader, frame: Bytes) -> ProtoResult<(i32, M)> {
    let flexible = is_flexible(header.api_key, header.api_version);
    let mut r = Reader::new(frame, flexible);
    let mut correlation_id = 0;
    r.i32(&mut correlation_id)?;
    if flexible && header.api_key != API_VERSIONS {
        r.tagged(&mut TaggedFields::default())?;
    }
    let mut m = M::default();
    m.codec(&mut r, header.api_version)?;
    Ok((correlation_id, m))
}

/// The ApiVersions response advertising [`SUPPORTED`]; the broker adds its feature levels
/// (`server::api::features`). Alone (an error answer), it says no feature is finalized, and the
/// epoch that this (empty) set is settled.
pub fn api_versions_response(error_code: errors::ErrorCode) -> ApiVersionsResponse {
    ApiVersionsResponse {
        error_code,
        api_keys: SUPPORTED
            .iter()
            .map(|&(api_key, min_version, max_version, _)| ApiVersion {
                api_key,
                min_version,
                max_version,
                ..Default::default()
            })
            .collect(),
        finalized_features_epoch: 0,
        ..Default::default()
    }
}

/// The answer to a request that could not be decoded, when one can be given, as Kafka gives
/// it: only an ApiVersions request has one. At a version this broker does not have it gets a v0
/// body with UNSUPPORTED_VERSION listing ApiVersions' own versions (KIP-511, Kafka's
/// `ApiVersionsRequest.getErrorResponse`), so the client asks again at one it has; a malformed
/// one gets INVALID_REQUEST. Anything else (an unknown API, an unsupported version of another
/// API, a malformed body) has no answer: the caller closes the connection, as Kafka's
/// `SocketServer` does, since no body of that API can be written.
pub fn error_response(header: &RequestHeader, error: &ProtoError) -> Option<Bytes> {
    if header.api_key != API_VERSIONS {
        return None;
    }
    let mut body = match error {
        ProtoError::UnsupportedVersion { .. } => {
            let own = SUPPORTED.iter().find(|s| s.0 == API_VERSIONS).map_or((0, 0), |s| (s.1, s.2));
            ApiVersionsResponse {
                error_code: errors::UNSUPPORTED_VERSION,
                api_keys: vec![ApiVersion {
                    api_key: API_VERSIONS,
                    min_version: own.0,
                    max_version: own.1,
                    ..Default::default()
                }],
                ..Default::default()
            }
        }
        _ => ApiVersionsResponse { error_code: errors::INVALID_REQUEST, ..Default::default() },
    };
    let v0 = RequestHeader { api_version: 0, ..header.clone() };
    encode_response(&v0, &mut body).ok()
}

/// The newest message format a Fetch version reads: magic 0 for v0-v1, 1 for v2-v3, 2 after
/// (newer stored batches are down-converted for such readers, SPEC T1.1).
pub fn fetch_reader_magic(version: i16) -> i8 {
    match version {
        0 | 1 => 0,
        2 | 3 => 1,
        _ => 2,
    }
}

/// A response's `throttle_time_ms` (KIP-219), so that a quota's throttle can be set in any
/// answer (those without the field have none to set).
pub trait Throttled {
    fn throttle_time_ms(&mut self) -> Option<&mut i32> {
        None
    }
}

macro_rules! throttled {
    ($($t:ty),* $(,)?) => {
        $(impl Throttled for $t {
            fn throttle_time_ms(&mut self) -> Option<&mut i32> {
                Some(&mut self.throttle_time_ms)
            }
        })*
    };
}

throttled!(
    ApiVersionsResponse,
    MetadataResponse,
    DescribeClusterResponse,
    DescribeTopicPartitionsResponse,
    ProduceResponse,
    FetchResponse,
    ListOffsetsResponse,
    OffsetForLeaderEpochResponse,
    CreateTopicsResponse,
    DeleteTopicsResponse,
    CreatePartitionsResponse,
    ElectLeadersResponse,
    AlterPartitionReassignmentsResponse,
    ListPartitionReassignmentsResponse,
    DescribeConfigsResponse,
    ListConfigResourcesResponse,
    UpdateFeaturesResponse,
    UnregisterBrokerResponse,
    AddRaftVoterResponse,
    RemoveRaftVoterResponse,
    AlterConfigsResponse,
    FindCoordinatorResponse,
    JoinGroupResponse,
    SyncGroupResponse,
    HeartbeatResponse,
    LeaveGroupResponse,
    OffsetCommitResponse,
    OffsetFetchResponse,
    DescribeGroupsResponse,
    ListGroupsResponse,
    DeleteGroupsResponse,
    OffsetDeleteResponse,
    ConsumerGroupHeartbeatResponse,
    ConsumerGroupDescribeResponse,
    InitProducerIdResponse,
    AddPartitionsToTxnResponse,
    AddOffsetsToTxnResponse,
    EndTxnResponse,
    TxnOffsetCommitResponse,
    DescribeTransactionsResponse,
    ListTransactionsResponse,
    DescribeProducersResponse,
    DeleteRecordsResponse,
    DescribeLogDirsResponse,
    DescribeUserScramCredentialsResponse,
    AlterUserScramCredentialsResponse,
    DescribeAclsResponse,
    CreateAclsResponse,
    DeleteAclsResponse,
    DescribeClientQuotasResponse,
    AlterClientQuotasResponse,
);

impl Throttled for SaslHandshakeResponse {}
impl Throttled for DescribeQuorumResponse {}
impl Throttled for WriteTxnMarkersResponse {}
impl Throttled for SaslAuthenticateResponse {}
