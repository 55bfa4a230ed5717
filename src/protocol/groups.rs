//! The consumer-group APIs (FindCoordinator, OffsetCommit, OffsetFetch, JoinGroup, Heartbeat,
//! LeaveGroup, SyncGroup, DescribeGroups, ListGroups, DeleteGroups) and InitProducerId: request
//! and response bodies, declared with [`schema!`](crate::schema) (field versions, nullability
//! and defaults from Kafka's message JSON definitions), covering every supported version. A
//! field absent in a version keeps its Kafka default when decoding and is skipped when
//! encoding, as in [`super::messages`]. The two bodies whose wire form is not a plain sequence
//! of fields (OffsetFetchRequest, JoinGroupResponse) keep a hand-written codec, each saying why.
//!
//! Where Kafka replaced a single-item form by a batched one (FindCoordinator v4, OffsetFetch v8,
//! LeaveGroup v3), both forms are fields here, each used only in its versions; the handler reads
//! and fills the one `version` selects.
//!
//! Opaque client payloads (JoinGroup protocol metadata, SyncGroup assignments, DescribeGroups
//! member metadata and assignments) are [`Bytes`]: zero-copy slices of the frame, never parsed
//! by the broker.

use super::codec::{Codec, ProtoResult, TaggedFields};
use super::errors::ErrorCode;
use super::messages::Message;
use super::schema::kind;
use bytes::Bytes;

/// A string that is nullable only from `since` on: before, `None` is written as "" and a
/// decoded value is always `Some`.
fn string_nullable_since<C: Codec>(c: &mut C, v: &mut Option<String>, version: i16, since: i16) -> ProtoResult<()> {
    if version >= since {
        c.nullable_string(v)
    } else {
        let mut s = v.take().unwrap_or_default();
        c.string(&mut s)?;
        *v = Some(s);
        Ok(())
    }
}

// ---------------------------------------------------------------- FindCoordinator (10)

/// FindCoordinator `KeyType`: a consumer group.
pub const COORDINATOR_GROUP: i8 = 0;
/// FindCoordinator `KeyType`: a transactional id.
pub const COORDINATOR_TRANSACTION: i8 = 1;
/// FindCoordinator key type 2 (v6, KIP-932): a share partition's state, keyed
/// `groupId:topicId:partition`.
pub const COORDINATOR_SHARE: i8 = 2;

crate::schema! {
    pub struct FindCoordinatorRequest {
        /// v0-3: the group id or transactional id to find the coordinator of.
        pub key: String => string if ..=3,
        /// v1+: [`COORDINATOR_GROUP`] or [`COORDINATOR_TRANSACTION`] (v0: always a group).
        pub key_type: i8 => int8 if 1..,
        /// v4+: the keys (KIP-699 batching), all of `key_type`.
        pub coordinator_keys: Vec<String> => string_array if 4..,
    }
}

crate::schema! {
    /// One v4+ FindCoordinator result.
    pub struct Coordinator {
        pub key: String => string,
        pub node_id: i32 => int32,
        pub host: String => string,
        pub port: i32 => int32,
        pub error_code: ErrorCode => error_code,
        pub error_message: Option<String> => nullable_string,
    }
}

crate::schema! {
    pub struct FindCoordinatorResponse {
        pub throttle_time_ms: i32 => int32 if 1..,
        /// v0-3 (single key); v4+ carries these per key in `coordinators`.
        pub error_code: ErrorCode => error_code if ..=3,
        /// v1-3
        pub error_message: Option<String> => nullable_string if 1..=3,
        /// v0-3
        pub node_id: i32 => int32 if ..=3,
        /// v0-3
        pub host: String => string if ..=3,
        /// v0-3
        pub port: i32 => int32 if ..=3,
        /// v4+: one per requested key.
        pub coordinators: Vec<Coordinator> => array if 4..,
    }
}

// ---------------------------------------------------------------- OffsetCommit (8)

crate::schema! {
    pub struct OffsetCommitRequestPartition {
        pub partition_index: i32 => int32,
        pub committed_offset: i64 => int64,
        /// v6+; -1 when absent.
        pub committed_leader_epoch: i32 = -1 => int32 if 6..,
        /// v1 only: the commit time the client asks for; -1 when absent (the broker's clock).
        pub commit_timestamp: i64 = -1 => int64 if 1..=1,
        pub committed_metadata: Option<String> => nullable_string,
    }
}

crate::schema! {
    pub struct OffsetCommitRequestTopic {
        pub name: String => string,
        pub partitions: Vec<OffsetCommitRequestPartition> => array,
    }
}

crate::schema! {
    pub struct OffsetCommitRequest {
        pub group_id: String => string,
        /// v1+: the generation the committing member belongs to (Kafka's newest definition names it
        /// GenerationIdOrMemberEpoch: a member epoch under KIP-848, v9+); -1 when absent (v0: a
        /// commit from outside any generation).
        pub generation_id_or_member_epoch: i32 = -1 => int32 if 1..,
        /// v1+
        pub member_id: String => string if 1..,
        /// v7+: the static member id (KIP-345), if any.
        pub group_instance_id: Option<String> => nullable_string if 7..,
        /// v2-4: how long to keep the offsets; -1 (absent or asked) means the broker's setting.
        pub retention_time_ms: i64 = -1 => int64 if 2..=4,
        pub topics: Vec<OffsetCommitRequestTopic> => array,
    }
}

crate::schema! {
    pub struct OffsetCommitResponsePartition {
        pub partition_index: i32 => int32,
        pub error_code: ErrorCode => error_code,
    }
}

crate::schema! {
    pub struct OffsetCommitResponseTopic {
        pub name: String => string,
        pub partitions: Vec<OffsetCommitResponsePartition> => array,
    }
}

crate::schema! {
    pub struct OffsetCommitResponse {
        /// v3+
        pub throttle_time_ms: i32 => int32 if 3..,
        pub topics: Vec<OffsetCommitResponseTopic> => array,
    }
}

// ---------------------------------------------------------------- OffsetFetch (9)

crate::schema! {
    /// A topic whose committed offsets are asked for (Kafka's OffsetFetchRequestTopic, v0-7, and
    /// OffsetFetchRequestTopics, v8: the same fields).
    pub struct OffsetFetchRequestTopic {
        pub name: String => string,
        pub partition_indexes: Vec<i32> => int32_array,
    }
}

crate::schema! {
    /// One group of a v8+ (batched) OffsetFetch.
    pub struct OffsetFetchRequestGroup {
        pub group_id: String => string,
        /// v9+ (KIP-848): the fetching member of a consumer group and its epoch (null and -1
        /// from outside the group).
        pub member_id: Option<String> => nullable_string if 9..,
        pub member_epoch: i32 = -1 => int32 if 9..,
        /// `None`: every topic the group has offsets for.
        pub topics: Option<Vec<OffsetFetchRequestTopic>> => nullable_array,
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct OffsetFetchRequest {
    /// v0-7
    pub group_id: String,
    /// v0-7. `None` (v2+): every topic the group has offsets for; v0-1 cannot say that, a `None`
    /// is written as an empty array.
    pub topics: Option<Vec<OffsetFetchRequestTopic>>,
    /// v8+: the groups (KIP-709 batching), each with its own topics.
    pub groups: Vec<OffsetFetchRequestGroup>,
    /// v7+: answer UNSTABLE_OFFSET_COMMIT for partitions with pending transactional commits
    /// instead of the last stable offset.
    pub require_stable: bool,
    pub tags: TaggedFields,
}

impl Default for OffsetFetchRequest {
    fn default() -> Self {
        OffsetFetchRequest {
            group_id: String::new(),
            topics: Some(Vec::new()),
            groups: Vec::new(),
            require_stable: false,
            tags: TaggedFields::default(),
        }
    }
}

// Hand-written: the topics are a non-null array in v0-1 (`None` written as empty) and a
// nullable one from v2.
impl Message for OffsetFetchRequest {
    fn codec<C: Codec>(&mut self, c: &mut C, v: i16) -> ProtoResult<()> {
        if v <= 7 {
            c.string(&mut self.group_id)?;
            if v >= 2 {
                kind::nullable_array(c, &mut self.topics, v)?;
            } else {
                let mut topics = self.topics.take().unwrap_or_default();
                kind::array(c, &mut topics, v)?;
                self.topics = Some(topics);
            }
        } else {
            kind::array(c, &mut self.groups, v)?;
        }
        if v >= 7 {
            c.bool(&mut self.require_stable)?;
        }
        c.tagged(&mut self.tags)
    }
}

crate::schema! {
    /// A partition's committed offset (Kafka's OffsetFetchResponsePartition, v0-7, and
    /// OffsetFetchResponsePartitions, v8: the same fields).
    pub struct OffsetFetchResponsePartition {
        pub partition_index: i32 => int32,
        /// -1: no committed offset.
        pub committed_offset: i64 => int64,
        /// v5+ (v5-7 and every batched, v8+, partition); -1 when absent or unknown.
        pub committed_leader_epoch: i32 = -1 => int32 if 5..,
        pub metadata: Option<String> => nullable_string,
        pub error_code: ErrorCode => error_code,
    }
}

crate::schema! {
    /// Kafka's OffsetFetchResponseTopic (v0-7) and OffsetFetchResponseTopics (v8).
    pub struct OffsetFetchResponseTopic {
        pub name: String => string,
        pub partitions: Vec<OffsetFetchResponsePartition> => array,
    }
}

crate::schema! {
    /// One group of a v8+ OffsetFetch response.
    pub struct OffsetFetchResponseGroup {
        pub group_id: String => string,
        pub topics: Vec<OffsetFetchResponseTopic> => array,
        /// The group-level error.
        pub error_code: ErrorCode => error_code,
    }
}

crate::schema! {
    pub struct OffsetFetchResponse {
        /// v3+
        pub throttle_time_ms: i32 => int32 if 3..,
        /// v0-7
        pub topics: Vec<OffsetFetchResponseTopic> => array if ..=7,
        /// v2-7: the group-level error (v0-1 report it in every partition).
        pub error_code: ErrorCode => error_code if 2..=7,
        /// v8+
        pub groups: Vec<OffsetFetchResponseGroup> => array if 8..,
    }
}

// ---------------------------------------------------------------- JoinGroup (11)

crate::schema! {
    /// A partition assignment protocol the joining member supports ("range", "roundrobin", ...).
    pub struct JoinGroupRequestProtocol {
        pub name: String => string,
        /// The member's subscription in that protocol's format, opaque to the broker.
        pub metadata: Bytes => bytes,
    }
}

crate::schema! {
    pub struct JoinGroupRequest {
        pub group_id: String => string,
        /// No heartbeat for this long and the member is dead.
        pub session_timeout_ms: i32 => int32,
        /// v1+: how long a rebalance waits for each member to rejoin; -1 when absent (v0), when
        /// the session timeout serves instead.
        pub rebalance_timeout_ms: i32 = -1 => int32 if 1..,
        /// "" on a first join; the coordinator assigns one (v4+: in a MEMBER_ID_REQUIRED answer).
        pub member_id: String => string,
        /// v5+: the static member id (KIP-345), if any.
        pub group_instance_id: Option<String> => nullable_string if 5..,
        /// The class of protocols ("consumer", "connect").
        pub protocol_type: String => string,
        pub protocols: Vec<JoinGroupRequestProtocol> => array,
        /// v8+: why the member (re-)joins (KIP-800), for the log.
        pub reason: Option<String> => nullable_string if 8..,
    }
}

crate::schema! {
    /// A member as the leader sees it in the JoinGroup response (empty for followers).
    pub struct JoinGroupResponseMember {
        pub member_id: String => string,
        /// v5+
        pub group_instance_id: Option<String> => nullable_string if 5..,
        /// The member's metadata for the chosen protocol, as it sent it.
        pub metadata: Bytes => bytes,
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct JoinGroupResponse {
    /// v2+
    pub throttle_time_ms: i32,
    pub error_code: ErrorCode,
    pub generation_id: i32,
    /// v7+ (KIP-559)
    pub protocol_type: Option<String>,
    /// The protocol the coordinator chose; nullable from v7 (before, `None` is written as "").
    pub protocol_name: Option<String>,
    /// The leader's member id.
    pub leader: String,
    /// v9+: the leader must not compute an assignment (the coordinator has one).
    pub skip_assignment: bool,
    /// The id the coordinator gave this member.
    pub member_id: String,
    pub members: Vec<JoinGroupResponseMember>,
    pub tags: TaggedFields,
}

impl Default for JoinGroupResponse {
    fn default() -> Self {
        JoinGroupResponse {
            throttle_time_ms: 0,
            error_code: ErrorCode(0),
            generation_id: -1,
            protocol_type: None,
            protocol_name: None,
            leader: String::new(),
            skip_assignment: false,
            member_id: String::new(),
            members: Vec::new(),
            tags: TaggedFields::default(),
        }
    }
}

// Hand-written: the protocol name is a string before v7 and a nullable string from v7.
impl Message for JoinGroupResponse {
    fn codec<C: Codec>(&mut self, c: &mut C, v: i16) -> ProtoResult<()> {
        if v >= 2 {
            c.i32(&mut self.throttle_time_ms)?;
        }
        c.i16(&mut self.error_code.0)?;
        c.i32(&mut self.generation_id)?;
        if v >= 7 {
            c.nullable_string(&mut self.protocol_type)?;
        }
        string_nullable_since(c, &mut self.protocol_name, v, 7)?;
        c.string(&mut self.leader)?;
        if v >= 9 {
            c.bool(&mut self.skip_assignment)?;
        }
        c.string(&mut self.member_id)?;
        kind::array(c, &mut self.members, v)?;
        c.tagged(&mut self.tags)
    }
}

// ---------------------------------------------------------------- Heartbeat (12)

crate::schema! {
    pub struct HeartbeatRequest {
        pub group_id: String => string,
        pub generation_id: i32 => int32,
        pub member_id: String => string,
        /// v3+: the static member id (KIP-345), if any.
        pub group_instance_id: Option<String> => nullable_string if 3..,
    }
}

crate::schema! {
    pub struct HeartbeatResponse {
        /// v1+
        pub throttle_time_ms: i32 => int32 if 1..,
        pub error_code: ErrorCode => error_code,
    }
}

// ---------------------------------------------------------------- LeaveGroup (13)

crate::schema! {
    /// A leaving member (v3+).
    pub struct MemberIdentity {
        pub member_id: String => string,
        pub group_instance_id: Option<String> => nullable_string,
        /// v5+: why the member leaves (KIP-800), for the log.
        pub reason: Option<String> => nullable_string if 5..,
    }
}

crate::schema! {
    pub struct LeaveGroupRequest {
        pub group_id: String => string,
        /// v0-2: the one leaving member.
        pub member_id: String => string if ..=2,
        /// v3+: the leaving members (batch, by member id and/or static instance id).
        pub members: Vec<MemberIdentity> => array if 3..,
    }
}

crate::schema! {
    /// The outcome for one leaving member (v3+).
    pub struct MemberResponse {
        pub member_id: String => string,
        pub group_instance_id: Option<String> => nullable_string,
        pub error_code: ErrorCode => error_code,
    }
}

crate::schema! {
    pub struct LeaveGroupResponse {
        /// v1+
        pub throttle_time_ms: i32 => int32 if 1..,
        /// The request-level error (v3+: per member in `members` as well).
        pub error_code: ErrorCode => error_code,
        /// v3+
        pub members: Vec<MemberResponse> => array if 3..,
    }
}

// ---------------------------------------------------------------- SyncGroup (14)

crate::schema! {
    /// The leader's assignment for one member.
    pub struct SyncGroupRequestAssignment {
        pub member_id: String => string,
        /// In the protocol's format, opaque to the broker.
        pub assignment: Bytes => bytes,
    }
}

crate::schema! {
    pub struct SyncGroupRequest {
        pub group_id: String => string,
        pub generation_id: i32 => int32,
        pub member_id: String => string,
        /// v3+: the static member id (KIP-345), if any.
        pub group_instance_id: Option<String> => nullable_string if 3..,
        /// v5+ (KIP-559): checked against the group's, when given.
        pub protocol_type: Option<String> => nullable_string if 5..,
        /// v5+ (KIP-559): checked against the group's, when given.
        pub protocol_name: Option<String> => nullable_string if 5..,
        /// From the leader: every member's assignment; from followers: empty.
        pub assignments: Vec<SyncGroupRequestAssignment> => array,
    }
}

crate::schema! {
    pub struct SyncGroupResponse {
        /// v1+
        pub throttle_time_ms: i32 => int32 if 1..,
        pub error_code: ErrorCode => error_code,
        /// v5+
        pub protocol_type: Option<String> => nullable_string if 5..,
        /// v5+
        pub protocol_name: Option<String> => nullable_string if 5..,
        /// This member's assignment, as the leader sent it.
        pub assignment: Bytes => bytes,
    }
}

// ---------------------------------------------------------------- DescribeGroups (15)

crate::schema! {
    pub struct DescribeGroupsRequest {
        pub groups: Vec<String> => string_array,
        /// v3+
        pub include_authorized_operations: bool => boolean if 3..,
    }
}

crate::schema! {
    pub struct DescribedGroupMember {
        pub member_id: String => string,
        /// v4+
        pub group_instance_id: Option<String> => nullable_string if 4..,
        /// The client id of the member's latest JoinGroup.
        pub client_id: String => string,
        pub client_host: String => string,
        /// The member's metadata for the protocol in use (filled only when the group is Stable).
        pub member_metadata: Bytes => bytes,
        /// The member's assignment from the leader (filled only when the group is Stable).
        pub member_assignment: Bytes => bytes,
    }
}

crate::schema! {
    pub struct DescribedGroup {
        pub error_code: ErrorCode => error_code,
        /// v6 (KIP-1043): why, with the error.
        pub error_message: Option<String> => nullable_string if 6..,
        pub group_id: String => string,
        /// "Stable", "PreparingRebalance", "CompletingRebalance", "Empty", "Dead", or "".
        pub group_state: String => string,
        /// The protocol type, or "".
        pub protocol_type: String => string,
        /// The chosen protocol's name when Stable, otherwise "".
        pub protocol_data: String => string,
        /// Empty for a Dead group.
        pub members: Vec<DescribedGroupMember> => array,
        /// v3+: a bit field of the operations the caller may perform; `i32::MIN` when not asked.
        pub authorized_operations: i32 = i32::MIN => int32 if 3..,
    }
}

crate::schema! {
    pub struct DescribeGroupsResponse {
        /// v1+
        pub throttle_time_ms: i32 => int32 if 1..,
        pub groups: Vec<DescribedGroup> => array,
    }
}

// ---------------------------------------------------------------- ListGroups (16)

crate::schema! {
    pub struct ListGroupsRequest {
        /// v4+ (KIP-518): only groups in these states; empty means all.
        pub states_filter: Vec<String> => string_array if 4..,
        /// v5+ (KIP-848): only groups of these types ("classic", "consumer"); empty means all.
        pub types_filter: Vec<String> => string_array if 5..,
    }
}

crate::schema! {
    pub struct ListedGroup {
        pub group_id: String => string,
        pub protocol_type: String => string,
        /// v4+
        pub group_state: String => string if 4..,
        /// v5+ (KIP-848): "classic" or "consumer".
        pub group_type: String => string if 5..,
    }
}

crate::schema! {
    pub struct ListGroupsResponse {
        /// v1+
        pub throttle_time_ms: i32 => int32 if 1..,
        pub error_code: ErrorCode => error_code,
        pub groups: Vec<ListedGroup> => array,
    }
}

// ---------------------------------------------------------------- DeleteGroups (42)

crate::schema! {
    pub struct DeleteGroupsRequest {
        /// Kafka's `GroupsNames`.
        pub groups_names: Vec<String> => string_array,
    }
}

crate::schema! {
    pub struct DeletableGroupResult {
        pub group_id: String => string,
        pub error_code: ErrorCode => error_code,
    }
}

crate::schema! {
    pub struct DeleteGroupsResponse {
        /// In every version (v0 included).
        pub throttle_time_ms: i32 => int32,
        pub results: Vec<DeletableGroupResult> => array,
    }
}

// ---------------------------------------------------------------- OffsetDelete (47)

crate::schema! {
    pub struct OffsetDeleteRequestPartition {
        pub partition_index: i32 => int32,
    }
}

crate::schema! {
    pub struct OffsetDeleteRequestTopic {
        pub name: String => string,
        pub partitions: Vec<OffsetDeleteRequestPartition> => array,
    }
}

crate::schema! {
    pub struct OffsetDeleteRequest {
        pub group_id: String => string,
        pub topics: Vec<OffsetDeleteRequestTopic> => array,
    }
}

crate::schema! {
    pub struct OffsetDeleteResponsePartition {
        pub partition_index: i32 => int32,
        pub error_code: ErrorCode => error_code,
    }
}

crate::schema! {
    pub struct OffsetDeleteResponseTopic {
        pub name: String => string,
        pub partitions: Vec<OffsetDeleteResponsePartition> => array,
    }
}

crate::schema! {
    pub struct OffsetDeleteResponse {
        pub error_code: ErrorCode => error_code,
        pub throttle_time_ms: i32 => int32,
        pub topics: Vec<OffsetDeleteResponseTopic> => array,
    }
}

// ---------------------------------------------------------------- InitProducerId (22)

crate::schema! {
    pub struct InitProducerIdRequest {
        /// `None` for an idempotent (non-transactional) producer.
        pub transactional_id: Option<String> => nullable_string,
        /// How long an idle transaction lives before it is aborted (transactional producers only).
        pub transaction_timeout_ms: i32 => int32,
        /// v3+: the producer's current id, to resume after INVALID_PRODUCER_EPOCH (KIP-360); -1
        /// when absent or new.
        pub producer_id: i64 = -1 => int64 if 3..,
        /// v3+: the producer's current epoch; -1 when absent or new.
        pub producer_epoch: i16 = -1 => int16 if 3..,
    }
}

crate::schema! {
    pub struct InitProducerIdResponse {
        pub throttle_time_ms: i32 => int32,
        pub error_code: ErrorCode => error_code,
        pub producer_id: i64 = -1 => int64,
        pub producer_epoch: i16 => int16,
    }
}

// ---------------------------------------------------------------- ConsumerGroupHeartbeat (68)

crate::schema! {
    /// Partitions of one topic, by topic id (KIP-848 assignments).
    pub struct TopicPartitions {
        pub topic_id: [u8; 16] => uuid,
        pub partitions: Vec<i32> => int32_array,
    }
}

crate::schema! {
    /// KIP-848: a member's heartbeat, which is also how it joins (epoch 0), leaves (-1; -2 for
    /// a static member leaving for a while), reports the partitions it owns and learns its
    /// assignment. Null fields are "unchanged".
    pub struct ConsumerGroupHeartbeatRequest {
        pub group_id: String => string,
        pub member_id: String => string,
        pub member_epoch: i32 => int32,
        pub instance_id: Option<String> => nullable_string,
        pub rack_id: Option<String> => nullable_string,
        pub rebalance_timeout_ms: i32 = -1 => int32,
        pub subscribed_topic_names: Option<Vec<String>> => nullable_string_array,
        /// v1+
        pub subscribed_topic_regex: Option<String> => nullable_string if 1..,
        pub server_assignor: Option<String> => nullable_string,
        pub topic_partitions: Option<Vec<TopicPartitions>> => nullable_array,
    }
}

crate::schema! {
    pub struct ConsumerGroupAssignment {
        pub topic_partitions: Vec<TopicPartitions> => array,
    }
}

crate::schema! {
    pub struct ConsumerGroupHeartbeatResponse {
        pub throttle_time_ms: i32 => int32,
        pub error_code: ErrorCode => error_code,
        pub error_message: Option<String> => nullable_string,
        pub member_id: Option<String> => nullable_string,
        pub member_epoch: i32 => int32,
        pub heartbeat_interval_ms: i32 => int32,
        /// `None`: no change.
        pub assignment: Option<ConsumerGroupAssignment> => nullable_structure,
    }
}

// ---------------------------------------------------------------- ConsumerGroupDescribe (69)

crate::schema! {
    pub struct ConsumerGroupDescribeRequest {
        pub group_ids: Vec<String> => string_array,
        pub include_authorized_operations: bool => boolean,
    }
}

crate::schema! {
    pub struct DescribedTopicPartitions {
        pub topic_id: [u8; 16] => uuid,
        pub topic_name: String => string,
        pub partitions: Vec<i32> => int32_array,
    }
}

crate::schema! {
    pub struct DescribedAssignment {
        pub topic_partitions: Vec<DescribedTopicPartitions> => array,
    }
}

crate::schema! {
    pub struct ConsumerGroupDescribeMember {
        pub member_id: String => string,
        pub instance_id: Option<String> => nullable_string,
        pub rack_id: Option<String> => nullable_string,
        pub member_epoch: i32 => int32,
        pub client_id: String => string,
        pub client_host: String => string,
        pub subscribed_topic_names: Vec<String> => string_array,
        pub subscribed_topic_regex: Option<String> => nullable_string,
        pub assignment: DescribedAssignment => structure,
        pub target_assignment: DescribedAssignment => structure,
        /// v1+ (KIP-1099): -1 unknown, 0 classic, 1 consumer.
        pub member_type: i8 = -1 => int8 if 1..,
    }
}

crate::schema! {
    pub struct ConsumerGroupDescribeGroup {
        pub error_code: ErrorCode => error_code,
        pub error_message: Option<String> => nullable_string,
        pub group_id: String => string,
        pub group_state: String => string,
        pub group_epoch: i32 => int32,
        pub assignment_epoch: i32 => int32,
        pub assignor_name: String => string,
        pub members: Vec<ConsumerGroupDescribeMember> => array,
        pub authorized_operations: i32 = i32::MIN => int32,
    }
}

crate::schema! {
    pub struct ConsumerGroupDescribeResponse {
        pub throttle_time_ms: i32 => int32,
        pub groups: Vec<ConsumerGroupDescribeGroup> => array,
    }
}
