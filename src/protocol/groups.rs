//! The consumer-group APIs (FindCoordinator, OffsetCommit, OffsetFetch, JoinGroup, Heartbeat,
//! LeaveGroup, SyncGroup, DescribeGroups, ListGroups, DeleteGroups) and InitProducerId: request
//! and response bodies, one `codec` function each, covering every supported version (field
//! versions, nullability and defaults from Kafka's message JSON definitions). A field absent in
//! a version keeps its Kafka default when decoding and is skipped when encoding, as in
//! [`super::messages`].
//!
//! Where Kafka replaced a single-item form by a batched one (FindCoordinator v4, OffsetFetch v8,
//! LeaveGroup v3), both forms are fields here, each used only in its versions; the handler reads
//! and fills the one `version` selects.
//!
//! Opaque client payloads (JoinGroup protocol metadata, SyncGroup assignments, DescribeGroups
//! member metadata and assignments) are [`Bytes`]: zero-copy slices of the frame, never parsed
//! by the broker.

use super::codec::{array, nullable_array, Codec, ProtoResult, TaggedFields};
use super::messages::Message;
use bytes::Bytes;

fn string_array<C: Codec>(c: &mut C, v: &mut Vec<String>) -> ProtoResult<()> {
    array(c, v, |c, s| c.string(s))
}

fn int32_array<C: Codec>(c: &mut C, v: &mut Vec<i32>) -> ProtoResult<()> {
    array(c, v, |c, x| c.i32(x))
}

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

#[derive(Debug, Clone, Default, PartialEq)]
pub struct FindCoordinatorRequest {
    /// v0-3: the group id or transactional id to find the coordinator of.
    pub key: String,
    /// v1+: [`COORDINATOR_GROUP`] or [`COORDINATOR_TRANSACTION`] (v0: always a group).
    pub key_type: i8,
    /// v4+: the keys (KIP-699 batching), all of `key_type`.
    pub coordinator_keys: Vec<String>,
    pub tags: TaggedFields,
}

impl Message for FindCoordinatorRequest {
    fn codec<C: Codec>(&mut self, c: &mut C, v: i16) -> ProtoResult<()> {
        if v <= 3 {
            c.string(&mut self.key)?;
        }
        if v >= 1 {
            c.i8(&mut self.key_type)?;
        }
        if v >= 4 {
            string_array(c, &mut self.coordinator_keys)?;
        }
        c.tagged(&mut self.tags)
    }
}

/// One v4+ FindCoordinator result.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Coordinator {
    pub key: String,
    pub node_id: i32,
    pub host: String,
    pub port: i32,
    pub error_code: i16,
    pub error_message: Option<String>,
    pub tags: TaggedFields,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct FindCoordinatorResponse {
    pub throttle_time_ms: i32,
    /// v0-3 (single key); v4+ carries these per key in `coordinators`.
    pub error_code: i16,
    /// v1-3
    pub error_message: Option<String>,
    /// v0-3
    pub node_id: i32,
    /// v0-3
    pub host: String,
    /// v0-3
    pub port: i32,
    /// v4+: one per requested key.
    pub coordinators: Vec<Coordinator>,
    pub tags: TaggedFields,
}

impl Message for FindCoordinatorResponse {
    fn codec<C: Codec>(&mut self, c: &mut C, v: i16) -> ProtoResult<()> {
        if v >= 1 {
            c.i32(&mut self.throttle_time_ms)?;
        }
        if v <= 3 {
            c.i16(&mut self.error_code)?;
            if v >= 1 {
                c.nullable_string(&mut self.error_message)?;
            }
            c.i32(&mut self.node_id)?;
            c.string(&mut self.host)?;
            c.i32(&mut self.port)?;
        } else {
            array(c, &mut self.coordinators, |c, k| {
                c.string(&mut k.key)?;
                c.i32(&mut k.node_id)?;
                c.string(&mut k.host)?;
                c.i32(&mut k.port)?;
                c.i16(&mut k.error_code)?;
                c.nullable_string(&mut k.error_message)?;
                c.tagged(&mut k.tags)
            })?;
        }
        c.tagged(&mut self.tags)
    }
}

// ---------------------------------------------------------------- OffsetCommit (8)

#[derive(Debug, Clone, PartialEq)]
pub struct OffsetCommitRequestPartition {
    pub partition_index: i32,
    pub committed_offset: i64,
    /// v6+; -1 when absent.
    pub committed_leader_epoch: i32,
    /// v1 only: the commit time the client asks for; -1 when absent (the broker's clock).
    pub commit_timestamp: i64,
    pub committed_metadata: Option<String>,
    pub tags: TaggedFields,
}

impl Default for OffsetCommitRequestPartition {
    fn default() -> Self {
        OffsetCommitRequestPartition {
            partition_index: 0,
            committed_offset: 0,
            committed_leader_epoch: -1,
            commit_timestamp: -1,
            committed_metadata: None,
            tags: TaggedFields::default(),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct OffsetCommitRequestTopic {
    pub name: String,
    pub partitions: Vec<OffsetCommitRequestPartition>,
    pub tags: TaggedFields,
}

#[derive(Debug, Clone, PartialEq)]
pub struct OffsetCommitRequest {
    pub group_id: String,
    /// v1+: the generation the committing member belongs to (Kafka's newest definition names it
    /// GenerationIdOrMemberEpoch: a member epoch under KIP-848, v9+); -1 when absent (v0: a
    /// commit from outside any generation).
    pub generation_id_or_member_epoch: i32,
    /// v1+
    pub member_id: String,
    /// v7+: the static member id (KIP-345), if any.
    pub group_instance_id: Option<String>,
    /// v2-4: how long to keep the offsets; -1 (absent or asked) means the broker's setting.
    pub retention_time_ms: i64,
    pub topics: Vec<OffsetCommitRequestTopic>,
    pub tags: TaggedFields,
}

impl Default for OffsetCommitRequest {
    fn default() -> Self {
        OffsetCommitRequest {
            group_id: String::new(),
            generation_id_or_member_epoch: -1,
            member_id: String::new(),
            group_instance_id: None,
            retention_time_ms: -1,
            topics: Vec::new(),
            tags: TaggedFields::default(),
        }
    }
}

impl Message for OffsetCommitRequest {
    fn codec<C: Codec>(&mut self, c: &mut C, v: i16) -> ProtoResult<()> {
        c.string(&mut self.group_id)?;
        if v >= 1 {
            c.i32(&mut self.generation_id_or_member_epoch)?;
            c.string(&mut self.member_id)?;
        }
        if v >= 7 {
            c.nullable_string(&mut self.group_instance_id)?;
        }
        if (2..=4).contains(&v) {
            c.i64(&mut self.retention_time_ms)?;
        }
        array(c, &mut self.topics, |c, t| {
            c.string(&mut t.name)?;
            array(c, &mut t.partitions, |c, p| {
                c.i32(&mut p.partition_index)?;
                c.i64(&mut p.committed_offset)?;
                if v >= 6 {
                    c.i32(&mut p.committed_leader_epoch)?;
                }
                if v == 1 {
                    c.i64(&mut p.commit_timestamp)?;
                }
                c.nullable_string(&mut p.committed_metadata)?;
                c.tagged(&mut p.tags)
            })?;
            c.tagged(&mut t.tags)
        })?;
        c.tagged(&mut self.tags)
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct OffsetCommitResponsePartition {
    pub partition_index: i32,
    pub error_code: i16,
    pub tags: TaggedFields,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct OffsetCommitResponseTopic {
    pub name: String,
    pub partitions: Vec<OffsetCommitResponsePartition>,
    pub tags: TaggedFields,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct OffsetCommitResponse {
    /// v3+
    pub throttle_time_ms: i32,
    pub topics: Vec<OffsetCommitResponseTopic>,
    pub tags: TaggedFields,
}

impl Message for OffsetCommitResponse {
    fn codec<C: Codec>(&mut self, c: &mut C, v: i16) -> ProtoResult<()> {
        if v >= 3 {
            c.i32(&mut self.throttle_time_ms)?;
        }
        array(c, &mut self.topics, |c, t| {
            c.string(&mut t.name)?;
            array(c, &mut t.partitions, |c, p| {
                c.i32(&mut p.partition_index)?;
                c.i16(&mut p.error_code)?;
                c.tagged(&mut p.tags)
            })?;
            c.tagged(&mut t.tags)
        })?;
        c.tagged(&mut self.tags)
    }
}

// ---------------------------------------------------------------- OffsetFetch (9)

/// A topic whose committed offsets are asked for (Kafka's OffsetFetchRequestTopic, v0-7, and
/// OffsetFetchRequestTopics, v8: the same fields).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OffsetFetchRequestTopic {
    pub name: String,
    pub partition_indexes: Vec<i32>,
    pub tags: TaggedFields,
}

/// One group of a v8+ (batched) OffsetFetch.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OffsetFetchRequestGroup {
    pub group_id: String,
    /// `None`: every topic the group has offsets for.
    pub topics: Option<Vec<OffsetFetchRequestTopic>>,
    pub tags: TaggedFields,
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

fn offset_fetch_topic<C: Codec>(c: &mut C, t: &mut OffsetFetchRequestTopic) -> ProtoResult<()> {
    c.string(&mut t.name)?;
    int32_array(c, &mut t.partition_indexes)?;
    c.tagged(&mut t.tags)
}

impl Message for OffsetFetchRequest {
    fn codec<C: Codec>(&mut self, c: &mut C, v: i16) -> ProtoResult<()> {
        if v <= 7 {
            c.string(&mut self.group_id)?;
            if v >= 2 {
                nullable_array(c, &mut self.topics, offset_fetch_topic)?;
            } else {
                let mut topics = self.topics.take().unwrap_or_default();
                array(c, &mut topics, offset_fetch_topic)?;
                self.topics = Some(topics);
            }
        } else {
            array(c, &mut self.groups, |c, g| {
                c.string(&mut g.group_id)?;
                nullable_array(c, &mut g.topics, offset_fetch_topic)?;
                c.tagged(&mut g.tags)
            })?;
        }
        if v >= 7 {
            c.bool(&mut self.require_stable)?;
        }
        c.tagged(&mut self.tags)
    }
}

/// A partition's committed offset (Kafka's OffsetFetchResponsePartition, v0-7, and
/// OffsetFetchResponsePartitions, v8: the same fields).
#[derive(Debug, Clone, PartialEq)]
pub struct OffsetFetchResponsePartition {
    pub partition_index: i32,
    /// -1: no committed offset.
    pub committed_offset: i64,
    /// v5+; -1 when absent or unknown.
    pub committed_leader_epoch: i32,
    pub metadata: Option<String>,
    pub error_code: i16,
    pub tags: TaggedFields,
}

impl Default for OffsetFetchResponsePartition {
    fn default() -> Self {
        OffsetFetchResponsePartition {
            partition_index: 0,
            committed_offset: 0,
            committed_leader_epoch: -1,
            metadata: None,
            error_code: 0,
            tags: TaggedFields::default(),
        }
    }
}

/// Kafka's OffsetFetchResponseTopic (v0-7) and OffsetFetchResponseTopics (v8).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OffsetFetchResponseTopic {
    pub name: String,
    pub partitions: Vec<OffsetFetchResponsePartition>,
    pub tags: TaggedFields,
}

/// One group of a v8+ OffsetFetch response.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OffsetFetchResponseGroup {
    pub group_id: String,
    pub topics: Vec<OffsetFetchResponseTopic>,
    /// The group-level error.
    pub error_code: i16,
    pub tags: TaggedFields,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct OffsetFetchResponse {
    /// v3+
    pub throttle_time_ms: i32,
    /// v0-7
    pub topics: Vec<OffsetFetchResponseTopic>,
    /// v2-7: the group-level error (v0-1 report it in every partition).
    pub error_code: i16,
    /// v8+
    pub groups: Vec<OffsetFetchResponseGroup>,
    pub tags: TaggedFields,
}

impl Message for OffsetFetchResponse {
    fn codec<C: Codec>(&mut self, c: &mut C, v: i16) -> ProtoResult<()> {
        if v >= 3 {
            c.i32(&mut self.throttle_time_ms)?;
        }
        // The leader epoch is in v5-7 and in every batched (v8+) partition.
        let partition = |c: &mut C, p: &mut OffsetFetchResponsePartition| -> ProtoResult<()> {
            c.i32(&mut p.partition_index)?;
            c.i64(&mut p.committed_offset)?;
            if v >= 5 {
                c.i32(&mut p.committed_leader_epoch)?;
            }
            c.nullable_string(&mut p.metadata)?;
            c.i16(&mut p.error_code)?;
            c.tagged(&mut p.tags)
        };
        let topic = |c: &mut C, t: &mut OffsetFetchResponseTopic| -> ProtoResult<()> {
            c.string(&mut t.name)?;
            array(c, &mut t.partitions, partition)?;
            c.tagged(&mut t.tags)
        };
        if v <= 7 {
            array(c, &mut self.topics, topic)?;
            if v >= 2 {
                c.i16(&mut self.error_code)?;
            }
        } else {
            array(c, &mut self.groups, |c, g| {
                c.string(&mut g.group_id)?;
                array(c, &mut g.topics, topic)?;
                c.i16(&mut g.error_code)?;
                c.tagged(&mut g.tags)
            })?;
        }
        c.tagged(&mut self.tags)
    }
}

// ---------------------------------------------------------------- JoinGroup (11)

/// A partition assignment protocol the joining member supports ("range", "roundrobin", ...).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JoinGroupRequestProtocol {
    pub name: String,
    /// The member's subscription in that protocol's format, opaque to the broker.
    pub metadata: Bytes,
    pub tags: TaggedFields,
}

#[derive(Debug, Clone, PartialEq)]
pub struct JoinGroupRequest {
    pub group_id: String,
    /// No heartbeat for this long and the member is dead.
    pub session_timeout_ms: i32,
    /// v1+: how long a rebalance waits for each member to rejoin; -1 when absent (v0), when
    /// the session timeout serves instead.
    pub rebalance_timeout_ms: i32,
    /// "" on a first join; the coordinator assigns one (v4+: in a MEMBER_ID_REQUIRED answer).
    pub member_id: String,
    /// v5+: the static member id (KIP-345), if any.
    pub group_instance_id: Option<String>,
    /// The class of protocols ("consumer", "connect").
    pub protocol_type: String,
    pub protocols: Vec<JoinGroupRequestProtocol>,
    /// v8+: why the member (re-)joins (KIP-800), for the log.
    pub reason: Option<String>,
    pub tags: TaggedFields,
}

impl Default for JoinGroupRequest {
    fn default() -> Self {
        JoinGroupRequest {
            group_id: String::new(),
            session_timeout_ms: 0,
            rebalance_timeout_ms: -1,
            member_id: String::new(),
            group_instance_id: None,
            protocol_type: String::new(),
            protocols: Vec::new(),
            reason: None,
            tags: TaggedFields::default(),
        }
    }
}

impl Message for JoinGroupRequest {
    fn codec<C: Codec>(&mut self, c: &mut C, v: i16) -> ProtoResult<()> {
        c.string(&mut self.group_id)?;
        c.i32(&mut self.session_timeout_ms)?;
        if v >= 1 {
            c.i32(&mut self.rebalance_timeout_ms)?;
        }
        c.string(&mut self.member_id)?;
        if v >= 5 {
            c.nullable_string(&mut self.group_instance_id)?;
        }
        c.string(&mut self.protocol_type)?;
        array(c, &mut self.protocols, |c, p| {
            c.string(&mut p.name)?;
            c.bytes(&mut p.metadata)?;
            c.tagged(&mut p.tags)
        })?;
        if v >= 8 {
            c.nullable_string(&mut self.reason)?;
        }
        c.tagged(&mut self.tags)
    }
}

/// A member as the leader sees it in the JoinGroup response (empty for followers).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JoinGroupResponseMember {
    pub member_id: String,
    /// v5+
    pub group_instance_id: Option<String>,
    /// The member's metadata for the chosen protocol, as it sent it.
    pub metadata: Bytes,
    pub tags: TaggedFields,
}

#[derive(Debug, Clone, PartialEq)]
pub struct JoinGroupResponse {
    /// v2+
    pub throttle_time_ms: i32,
    pub error_code: i16,
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
            error_code: 0,
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

impl Message for JoinGroupResponse {
    fn codec<C: Codec>(&mut self, c: &mut C, v: i16) -> ProtoResult<()> {
        if v >= 2 {
            c.i32(&mut self.throttle_time_ms)?;
        }
        c.i16(&mut self.error_code)?;
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
        array(c, &mut self.members, |c, m| {
            c.string(&mut m.member_id)?;
            if v >= 5 {
                c.nullable_string(&mut m.group_instance_id)?;
            }
            c.bytes(&mut m.metadata)?;
            c.tagged(&mut m.tags)
        })?;
        c.tagged(&mut self.tags)
    }
}

// ---------------------------------------------------------------- Heartbeat (12)

#[derive(Debug, Clone, Default, PartialEq)]
pub struct HeartbeatRequest {
    pub group_id: String,
    pub generation_id: i32,
    pub member_id: String,
    /// v3+: the static member id (KIP-345), if any.
    pub group_instance_id: Option<String>,
    pub tags: TaggedFields,
}

impl Message for HeartbeatRequest {
    fn codec<C: Codec>(&mut self, c: &mut C, v: i16) -> ProtoResult<()> {
        c.string(&mut self.group_id)?;
        c.i32(&mut self.generation_id)?;
        c.string(&mut self.member_id)?;
        if v >= 3 {
            c.nullable_string(&mut self.group_instance_id)?;
        }
        c.tagged(&mut self.tags)
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct HeartbeatResponse {
    /// v1+
    pub throttle_time_ms: i32,
    pub error_code: i16,
    pub tags: TaggedFields,
}

impl Message for HeartbeatResponse {
    fn codec<C: Codec>(&mut self, c: &mut C, v: i16) -> ProtoResult<()> {
        if v >= 1 {
            c.i32(&mut self.throttle_time_ms)?;
        }
        c.i16(&mut self.error_code)?;
        c.tagged(&mut self.tags)
    }
}

// ---------------------------------------------------------------- LeaveGroup (13)

/// A leaving member (v3+).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MemberIdentity {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    /// v5+: why the member leaves (KIP-800), for the log.
    pub reason: Option<String>,
    pub tags: TaggedFields,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct LeaveGroupRequest {
    pub group_id: String,
    /// v0-2: the one leaving member.
    pub member_id: String,
    /// v3+: the leaving members (batch, by member id and/or static instance id).
    pub members: Vec<MemberIdentity>,
    pub tags: TaggedFields,
}

impl Message for LeaveGroupRequest {
    fn codec<C: Codec>(&mut self, c: &mut C, v: i16) -> ProtoResult<()> {
        c.string(&mut self.group_id)?;
        if v <= 2 {
            c.string(&mut self.member_id)?;
        } else {
            array(c, &mut self.members, |c, m| {
                c.string(&mut m.member_id)?;
                c.nullable_string(&mut m.group_instance_id)?;
                if v >= 5 {
                    c.nullable_string(&mut m.reason)?;
                }
                c.tagged(&mut m.tags)
            })?;
        }
        c.tagged(&mut self.tags)
    }
}

/// The outcome for one leaving member (v3+).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MemberResponse {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub error_code: i16,
    pub tags: TaggedFields,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct LeaveGroupResponse {
    /// v1+
    pub throttle_time_ms: i32,
    /// The request-level error (v3+: per member in `members` as well).
    pub error_code: i16,
    /// v3+
    pub members: Vec<MemberResponse>,
    pub tags: TaggedFields,
}

impl Message for LeaveGroupResponse {
    fn codec<C: Codec>(&mut self, c: &mut C, v: i16) -> ProtoResult<()> {
        if v >= 1 {
            c.i32(&mut self.throttle_time_ms)?;
        }
        c.i16(&mut self.error_code)?;
        if v >= 3 {
            array(c, &mut self.members, |c, m| {
                c.string(&mut m.member_id)?;
                c.nullable_string(&mut m.group_instance_id)?;
                c.i16(&mut m.error_code)?;
                c.tagged(&mut m.tags)
            })?;
        }
        c.tagged(&mut self.tags)
    }
}

// ---------------------------------------------------------------- SyncGroup (14)

/// The leader's assignment for one member.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SyncGroupRequestAssignment {
    pub member_id: String,
    /// In the protocol's format, opaque to the broker.
    pub assignment: Bytes,
    pub tags: TaggedFields,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct SyncGroupRequest {
    pub group_id: String,
    pub generation_id: i32,
    pub member_id: String,
    /// v3+: the static member id (KIP-345), if any.
    pub group_instance_id: Option<String>,
    /// v5+ (KIP-559): checked against the group's, when given.
    pub protocol_type: Option<String>,
    /// v5+ (KIP-559): checked against the group's, when given.
    pub protocol_name: Option<String>,
    /// From the leader: every member's assignment; from followers: empty.
    pub assignments: Vec<SyncGroupRequestAssignment>,
    pub tags: TaggedFields,
}

impl Message for SyncGroupRequest {
    fn codec<C: Codec>(&mut self, c: &mut C, v: i16) -> ProtoResult<()> {
        c.string(&mut self.group_id)?;
        c.i32(&mut self.generation_id)?;
        c.string(&mut self.member_id)?;
        if v >= 3 {
            c.nullable_string(&mut self.group_instance_id)?;
        }
        if v >= 5 {
            c.nullable_string(&mut self.protocol_type)?;
            c.nullable_string(&mut self.protocol_name)?;
        }
        array(c, &mut self.assignments, |c, a| {
            c.string(&mut a.member_id)?;
            c.bytes(&mut a.assignment)?;
            c.tagged(&mut a.tags)
        })?;
        c.tagged(&mut self.tags)
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct SyncGroupResponse {
    /// v1+
    pub throttle_time_ms: i32,
    pub error_code: i16,
    /// v5+
    pub protocol_type: Option<String>,
    /// v5+
    pub protocol_name: Option<String>,
    /// This member's assignment, as the leader sent it.
    pub assignment: Bytes,
    pub tags: TaggedFields,
}

impl Message for SyncGroupResponse {
    fn codec<C: Codec>(&mut self, c: &mut C, v: i16) -> ProtoResult<()> {
        if v >= 1 {
            c.i32(&mut self.throttle_time_ms)?;
        }
        c.i16(&mut self.error_code)?;
        if v >= 5 {
            c.nullable_string(&mut self.protocol_type)?;
            c.nullable_string(&mut self.protocol_name)?;
        }
        c.bytes(&mut self.assignment)?;
        c.tagged(&mut self.tags)
    }
}

// ---------------------------------------------------------------- DescribeGroups (15)

#[derive(Debug, Clone, Default, PartialEq)]
pub struct DescribeGroupsRequest {
    pub groups: Vec<String>,
    /// v3+
    pub include_authorized_operations: bool,
    pub tags: TaggedFields,
}

impl Message for DescribeGroupsRequest {
    fn codec<C: Codec>(&mut self, c: &mut C, v: i16) -> ProtoResult<()> {
        string_array(c, &mut self.groups)?;
        if v >= 3 {
            c.bool(&mut self.include_authorized_operations)?;
        }
        c.tagged(&mut self.tags)
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct DescribedGroupMember {
    pub member_id: String,
    /// v4+
    pub group_instance_id: Option<String>,
    /// The client id of the member's latest JoinGroup.
    pub client_id: String,
    pub client_host: String,
    /// The member's metadata for the protocol in use (filled only when the group is Stable).
    pub member_metadata: Bytes,
    /// The member's assignment from the leader (filled only when the group is Stable).
    pub member_assignment: Bytes,
    pub tags: TaggedFields,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DescribedGroup {
    pub error_code: i16,
    pub group_id: String,
    /// "Stable", "PreparingRebalance", "CompletingRebalance", "Empty", "Dead", or "".
    pub group_state: String,
    /// The protocol type, or "".
    pub protocol_type: String,
    /// The chosen protocol's name when Stable, otherwise "".
    pub protocol_data: String,
    /// Empty for a Dead group.
    pub members: Vec<DescribedGroupMember>,
    /// v3+: a bit field of the operations the caller may perform; `i32::MIN` when not asked.
    pub authorized_operations: i32,
    pub tags: TaggedFields,
}

impl Default for DescribedGroup {
    fn default() -> Self {
        DescribedGroup {
            error_code: 0,
            group_id: String::new(),
            group_state: String::new(),
            protocol_type: String::new(),
            protocol_data: String::new(),
            members: Vec::new(),
            authorized_operations: i32::MIN,
            tags: TaggedFields::default(),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct DescribeGroupsResponse {
    /// v1+
    pub throttle_time_ms: i32,
    pub groups: Vec<DescribedGroup>,
    pub tags: TaggedFields,
}

impl Message for DescribeGroupsResponse {
    fn codec<C: Codec>(&mut self, c: &mut C, v: i16) -> ProtoResult<()> {
        if v >= 1 {
            c.i32(&mut self.throttle_time_ms)?;
        }
        array(c, &mut self.groups, |c, g| {
            c.i16(&mut g.error_code)?;
            c.string(&mut g.group_id)?;
            c.string(&mut g.group_state)?;
            c.string(&mut g.protocol_type)?;
            c.string(&mut g.protocol_data)?;
            array(c, &mut g.members, |c, m| {
                c.string(&mut m.member_id)?;
                if v >= 4 {
                    c.nullable_string(&mut m.group_instance_id)?;
                }
                c.string(&mut m.client_id)?;
                c.string(&mut m.client_host)?;
                c.bytes(&mut m.member_metadata)?;
                c.bytes(&mut m.member_assignment)?;
                c.tagged(&mut m.tags)
            })?;
            if v >= 3 {
                c.i32(&mut g.authorized_operations)?;
            }
            c.tagged(&mut g.tags)
        })?;
        c.tagged(&mut self.tags)
    }
}

// ---------------------------------------------------------------- ListGroups (16)

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ListGroupsRequest {
    /// v4+ (KIP-518): only groups in these states; empty means all.
    pub states_filter: Vec<String>,
    pub tags: TaggedFields,
}

impl Message for ListGroupsRequest {
    fn codec<C: Codec>(&mut self, c: &mut C, v: i16) -> ProtoResult<()> {
        if v >= 4 {
            string_array(c, &mut self.states_filter)?;
        }
        c.tagged(&mut self.tags)
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ListedGroup {
    pub group_id: String,
    pub protocol_type: String,
    /// v4+
    pub group_state: String,
    pub tags: TaggedFields,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ListGroupsResponse {
    /// v1+
    pub throttle_time_ms: i32,
    pub error_code: i16,
    pub groups: Vec<ListedGroup>,
    pub tags: TaggedFields,
}

impl Message for ListGroupsResponse {
    fn codec<C: Codec>(&mut self, c: &mut C, v: i16) -> ProtoResult<()> {
        if v >= 1 {
            c.i32(&mut self.throttle_time_ms)?;
        }
        c.i16(&mut self.error_code)?;
        array(c, &mut self.groups, |c, g| {
            c.string(&mut g.group_id)?;
            c.string(&mut g.protocol_type)?;
            if v >= 4 {
                c.string(&mut g.group_state)?;
            }
            c.tagged(&mut g.tags)
        })?;
        c.tagged(&mut self.tags)
    }
}

// ---------------------------------------------------------------- DeleteGroups (42)

#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeleteGroupsRequest {
    /// Kafka's `GroupsNames`.
    pub groups_names: Vec<String>,
    pub tags: TaggedFields,
}

impl Message for DeleteGroupsRequest {
    fn codec<C: Codec>(&mut self, c: &mut C, _v: i16) -> ProtoResult<()> {
        string_array(c, &mut self.groups_names)?;
        c.tagged(&mut self.tags)
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeletableGroupResult {
    pub group_id: String,
    pub error_code: i16,
    pub tags: TaggedFields,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeleteGroupsResponse {
    /// In every version (v0 included).
    pub throttle_time_ms: i32,
    pub results: Vec<DeletableGroupResult>,
    pub tags: TaggedFields,
}

impl Message for DeleteGroupsResponse {
    fn codec<C: Codec>(&mut self, c: &mut C, _v: i16) -> ProtoResult<()> {
        c.i32(&mut self.throttle_time_ms)?;
        array(c, &mut self.results, |c, r| {
            c.string(&mut r.group_id)?;
            c.i16(&mut r.error_code)?;
            c.tagged(&mut r.tags)
        })?;
        c.tagged(&mut self.tags)
    }
}

// ---------------------------------------------------------------- InitProducerId (22)

#[derive(Debug, Clone, PartialEq)]
pub struct InitProducerIdRequest {
    /// `None` for an idempotent (non-transactional) producer.
    pub transactional_id: Option<String>,
    /// How long an idle transaction lives before it is aborted (transactional producers only).
    pub transaction_timeout_ms: i32,
    /// v3+: the producer's current id, to resume after INVALID_PRODUCER_EPOCH (KIP-360); -1
    /// when absent or new.
    pub producer_id: i64,
    /// v3+: the producer's current epoch; -1 when absent or new.
    pub producer_epoch: i16,
    pub tags: TaggedFields,
}

impl Default for InitProducerIdRequest {
    fn default() -> Self {
        InitProducerIdRequest {
            transactional_id: None,
            transaction_timeout_ms: 0,
            producer_id: -1,
            producer_epoch: -1,
            tags: TaggedFields::default(),
        }
    }
}

impl Message for InitProducerIdRequest {
    fn codec<C: Codec>(&mut self, c: &mut C, v: i16) -> ProtoResult<()> {
        c.nullable_string(&mut self.transactional_id)?;
        c.i32(&mut self.transaction_timeout_ms)?;
        if v >= 3 {
            c.i64(&mut self.producer_id)?;
            c.i16(&mut self.producer_epoch)?;
        }
        c.tagged(&mut self.tags)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct InitProducerIdResponse {
    pub throttle_time_ms: i32,
    pub error_code: i16,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub tags: TaggedFields,
}

impl Default for InitProducerIdResponse {
    fn default() -> Self {
        InitProducerIdResponse {
            throttle_time_ms: 0,
            error_code: 0,
            producer_id: -1,
            producer_epoch: 0,
            tags: TaggedFields::default(),
        }
    }
}

impl Message for InitProducerIdResponse {
    fn codec<C: Codec>(&mut self, c: &mut C, _v: i16) -> ProtoResult<()> {
        c.i32(&mut self.throttle_time_ms)?;
        c.i16(&mut self.error_code)?;
        c.i64(&mut self.producer_id)?;
        c.i16(&mut self.producer_epoch)?;
        c.tagged(&mut self.tags)
    }
}
