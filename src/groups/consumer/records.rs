//! A consumer group's state in `__consumer_offsets`, in Kafka's own record layout (its
//! group coordinator's `ConsumerGroup*` records), so that the group survives a restart with its
//! epochs and assignments (members keep their partitions: no rebalance) and Kafka tooling reads
//! the records:
//!
//! | key version | key | value (version 0, flexible encoding) |
//! |---|---|---|
//! | 3 | group | group epoch |
//! | 5 | group, member | instance id, rack id, client id and host, subscribed topics, regex, rebalance timeout, server assignor |
//! | 6 | group | target assignment epoch |
//! | 7 | group, member | the member's target assignment |
//! | 8 | group, member | member epoch, previous epoch, state, assigned and pending-revocation partitions |
//!
//! Keys are classic encoding (an int16 version, int16-length strings), values an int16
//! version then the flexible encoding (Kafka's `flexibleVersions: 0+`). A null value is a
//! tombstone: a member removed writes 8, 7 and 5 as tombstones, in that order; a group gone,
//! 6 and 3. Kafka's subscription-metadata record (key 4) is not written: the broker computes
//! the subscribed topics again from its topics at the first heartbeat after a restart.

use super::{Assignment, ClassicMember, ConsumerGroup, Member, MemberState};
use crate::protocol::codec::{Codec, Reader, Writer};
use crate::protocol::groups::TopicPartitions;
use crate::protocol::messages::Message;
use crate::types::Uuid;
use bytes::Bytes;

crate::schema! {
    pub struct GroupEpochValue {
        pub epoch: i32 => int32,
    }
}

crate::schema! {
    pub struct ClassicProtocol {
        pub name: String => string,
        pub metadata: Bytes => bytes,
    }
}

crate::schema! {
    /// A member of the classic protocol: its session timeout and protocols.
    pub struct ClassicMemberMetadata {
        pub session_timeout_ms: i32 => int32,
        pub supported_protocols: Vec<ClassicProtocol> => array,
    }
}

crate::schema! {
    pub struct MemberValue {
        pub instance_id: Option<String> => nullable_string,
        pub rack_id: Option<String> => nullable_string,
        pub client_id: String => string,
        pub client_host: String => string,
        pub subscribed_topic_names: Vec<String> => string_array,
        pub subscribed_topic_regex: Option<String> => nullable_string,
        pub rebalance_timeout_ms: i32 => int32,
        pub server_assignor: Option<String> => nullable_string,
        pub classic_member_metadata: Option<ClassicMemberMetadata> => nullable_structure tag 0,
    }
}

crate::schema! {
    pub struct TargetValue {
        pub topic_partitions: Vec<TopicPartitions> => array,
    }
}

crate::schema! {
    pub struct CurrentValue {
        pub member_epoch: i32 => int32,
        pub previous_member_epoch: i32 => int32,
        pub state: i8 => int8,
        pub assigned_partitions: Vec<TopicPartitions> => array,
        pub partitions_pending_revocation: Vec<TopicPartitions> => array,
    }
}

pub use crate::groups::offsets::Record;

const GROUP: i16 = 3;
const MEMBER: i16 = 5;
const TARGET_EPOCH: i16 = 6;
const TARGET: i16 = 7;
const CURRENT: i16 = 8;

fn key(version: i16, group: &str, member: Option<&str>) -> Vec<u8> {
    let mut w = Writer::new(false);
    let (mut v, mut g) = (version, group.to_string());
    let _ = w.i16(&mut v);
    let _ = w.string(&mut g);
    if let Some(m) = member {
        let _ = w.string(&mut m.to_string());
    }
    w.buf.to_vec()
}

fn value<M: Message>(mut m: M) -> Vec<u8> {
    let mut w = Writer::new(true);
    let mut version = 0i16;
    let _ = w.i16(&mut version);
    let _ = m.codec(&mut w, 0);
    w.buf.to_vec()
}

/// An assignment as the wire and the records carry it: partitions by topic id.
pub fn parts(a: &Assignment) -> Vec<TopicPartitions> {
    a.iter()
        .map(|(t, ps)| TopicPartitions {
            topic_id: t.0,
            partitions: ps.iter().copied().collect(),
            ..Default::default()
        })
        .collect()
}

/// Partitions by topic id, from the wire or a record.
pub fn assignment(parts: &[TopicPartitions]) -> Assignment {
    let mut a = Assignment::new();
    for t in parts {
        a.entry(Uuid(t.topic_id)).or_default().extend(t.partitions.iter().copied());
    }
    a
}

fn state_code(s: MemberState) -> i8 {
    match s {
        MemberState::Stable => 0,
        MemberState::UnrevokedPartitions => 1,
        MemberState::UnreleasedPartitions => 2,
    }
}

fn member_record(g: &str, m: &Member) -> Record {
    let v = MemberValue {
        instance_id: m.instance_id.clone(),
        rack_id: m.rack_id.clone(),
        client_id: m.client_id.clone(),
        client_host: m.client_host.clone(),
        subscribed_topic_names: m.subscribed.clone(),
        subscribed_topic_regex: m.regex.clone(),
        rebalance_timeout_ms: m.rebalance_timeout_ms,
        server_assignor: m.server_assignor.clone(),
        classic_member_metadata: m.classic.as_ref().map(|c| ClassicMemberMetadata {
            session_timeout_ms: c.session_timeout_ms,
            supported_protocols: c
                .protocols
                .iter()
                .map(|(name, metadata)| ClassicProtocol {
                    name: name.clone(),
                    metadata: metadata.clone(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }),
        ..Default::default()
    };
    (key(MEMBER, g, Some(&m.id)), Some(value(v)))
}

fn current_record(g: &str, m: &Member) -> Record {
    let v = CurrentValue {
        member_epoch: m.epoch,
        previous_member_epoch: m.previous_epoch,
        state: state_code(m.state),
        assigned_partitions: parts(&m.assigned),
        partitions_pending_revocation: parts(&m.pending_revocation),
        ..Default::default()
    };
    (key(CURRENT, g, Some(&m.id)), Some(value(v)))
}

fn target_record(g: &str, member: &str, a: &Assignment) -> Record {
    (key(TARGET, g, Some(member)), Some(value(TargetValue { topic_partitions: parts(a), ..Default::default() })))
}

fn epoch_record(version: i16, g: &str, epoch: i32) -> Record {
    (key(version, g, None), Some(value(GroupEpochValue { epoch, ..Default::default() })))
}

/// Whether two members differ in what record 5 holds.
fn metadata_differs(a: &Member, b: &Member) -> bool {
    (
        &a.instance_id,
        &a.rack_id,
        &a.client_id,
        &a.client_host,
        &a.subscribed,
        &a.regex,
        a.rebalance_timeout_ms,
        &a.server_assignor,
        &a.classic,
    ) != (
        &b.instance_id,
        &b.rack_id,
        &b.client_id,
        &b.client_host,
        &b.subscribed,
        &b.regex,
        b.rebalance_timeout_ms,
        &b.server_assignor,
        &b.classic,
    )
}

impl ConsumerGroup {
    /// Every live record of the group (what compaction writes again).
    pub fn records(&self) -> Vec<Record> {
        let mut out = Vec::new();
        for m in self.members.values() {
            out.push(member_record(&self.id, m));
        }
        out.push(epoch_record(GROUP, &self.id, self.group_epoch));
        for (member, a) in &self.target {
            out.push(target_record(&self.id, member, a));
        }
        out.push(epoch_record(TARGET_EPOCH, &self.id, self.assignment_epoch));
        for m in self.members.values() {
            out.push(current_record(&self.id, m));
        }
        out
    }

    /// The records that take the group from `before` to its state now (nothing when nothing
    /// that is persisted changed). `before` is `None` for a new group.
    pub fn records_since(&self, before: Option<&ConsumerGroup>) -> Vec<Record> {
        let Some(b) = before else { return self.records() };
        let g = &self.id;
        let mut out = Vec::new();
        for id in b.members.keys() {
            if !self.members.contains_key(id) {
                out.extend(b.member_tombstones(id));
            }
        }
        for (id, m) in &self.members {
            if b.members.get(id).is_none_or(|old| metadata_differs(old, m)) {
                out.push(member_record(g, m));
            }
        }
        if self.group_epoch != b.group_epoch {
            out.push(epoch_record(GROUP, g, self.group_epoch));
        }
        for (id, a) in &self.target {
            if b.target.get(id) != Some(a) {
                out.push(target_record(g, id, a));
            }
        }
        for id in b.target.keys() {
            if !self.target.contains_key(id) && self.members.contains_key(id) {
                out.push((key(TARGET, g, Some(id)), None));
            }
        }
        if self.assignment_epoch != b.assignment_epoch {
            out.push(epoch_record(TARGET_EPOCH, g, self.assignment_epoch));
        }
        for (id, m) in &self.members {
            let changed = b.members.get(id).is_none_or(|old| {
                (old.epoch, old.previous_epoch, old.state, &old.assigned, &old.pending_revocation)
                    != (m.epoch, m.previous_epoch, m.state, &m.assigned, &m.pending_revocation)
            });
            if changed {
                out.push(current_record(g, m));
            }
        }
        out
    }

    /// A member's tombstones, in Kafka's order: current assignment, target (if it has one),
    /// metadata.
    fn member_tombstones(&self, id: &str) -> Vec<Record> {
        let g = &self.id;
        let mut out = vec![(key(CURRENT, g, Some(id)), None)];
        if self.target.contains_key(id) {
            out.push((key(TARGET, g, Some(id)), None));
        }
        out.push((key(MEMBER, g, Some(id)), None));
        out
    }

    /// The tombstones of a group that is gone (DeleteGroups, emptied and forgotten, or
    /// converted to a classic group): each member's (8, 7, 5), then the group's (6, 3).
    pub fn tombstones(&self) -> Vec<Record> {
        let g = &self.id;
        let mut out = Vec::new();
        for id in self.members.keys() {
            out.extend(self.member_tombstones(id));
        }
        out.push((key(TARGET_EPOCH, g, None), None));
        out.push((key(GROUP, g, None), None));
        out
    }
}

/// A decoded consumer-group record: the group it belongs to and what it says.
#[derive(Debug)]
pub enum Replayed {
    GroupEpoch(String, Option<i32>),
    Member(String, String, Option<Box<Member>>),
    TargetEpoch(String, Option<i32>),
    Target(String, String, Option<Assignment>),
    Current(String, String, Option<(i32, i32, MemberState, Assignment, Assignment)>),
}

/// A record of the group's layout whose key or value does not decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Undecodable;

fn read<M: Message>(v: &[u8]) -> Result<M, Undecodable> {
    let mut r = Reader::new(Bytes::copy_from_slice(v), true);
    let mut version = 0i16;
    r.i16(&mut version).map_err(|_| Undecodable)?;
    let mut m = M::default();
    m.codec(&mut r, 0).map_err(|_| Undecodable)?;
    Ok(m)
}

/// Decode a record of key version 3, 5, 6, 7 or 8 (`None` for other keys: offsets, classic
/// groups, Kafka's records tidemark does not keep).
pub fn decode(k: &[u8], v: Option<&[u8]>) -> Result<Option<Replayed>, Undecodable> {
    let mut r = Reader::new(Bytes::copy_from_slice(k), false);
    let bad = |_| Undecodable;
    let mut version = 0i16;
    r.i16(&mut version).map_err(bad)?;
    if !matches!(version, GROUP | MEMBER | TARGET_EPOCH | TARGET | CURRENT) {
        return Ok(None);
    }
    let mut group = String::new();
    r.string(&mut group).map_err(bad)?;
    let mut member = String::new();
    if matches!(version, MEMBER | TARGET | CURRENT) {
        r.string(&mut member).map_err(bad)?;
    }
    Ok(Some(match version {
        GROUP => Replayed::GroupEpoch(group, v.map(read::<GroupEpochValue>).transpose()?.map(|e| e.epoch)),
        TARGET_EPOCH => Replayed::TargetEpoch(group, v.map(read::<GroupEpochValue>).transpose()?.map(|e| e.epoch)),
        TARGET => {
            let a = v.map(read::<TargetValue>).transpose()?.map(|t| assignment(&t.topic_partitions));
            Replayed::Target(group, member, a)
        }
        CURRENT => {
            let c = v.map(read::<CurrentValue>).transpose()?.map(|c| {
                let state = match c.state {
                    1 => MemberState::UnrevokedPartitions,
                    2 => MemberState::UnreleasedPartitions,
                    _ => MemberState::Stable,
                };
                let (assigned, pending) =
                    (assignment(&c.assigned_partitions), assignment(&c.partitions_pending_revocation));
                (c.member_epoch, c.previous_member_epoch, state, assigned, pending)
            });
            Replayed::Current(group, member, c)
        }
        _ => {
            let m = v.map(read::<MemberValue>).transpose()?.map(|m| {
                let mut replayed = Member::new(&member, m.rebalance_timeout_ms);
                replayed.instance_id = m.instance_id;
                replayed.rack_id = m.rack_id;
                replayed.client_id = m.client_id;
                replayed.client_host = m.client_host;
                replayed.subscribed = m.subscribed_topic_names;
                replayed.regex = m.subscribed_topic_regex;
                replayed.server_assignor = m.server_assignor;
                replayed.classic = m.classic_member_metadata.map(|c| ClassicMember {
                    session_timeout_ms: c.session_timeout_ms,
                    protocols: c.supported_protocols.into_iter().map(|p| (p.name, p.metadata)).collect(),
                });
                Box::new(replayed)
            });
            Replayed::Member(group, member, m)
        }
    }))
}

impl ConsumerGroup {
    /// Apply one replayed record of this group. A member's session starts again at `now`.
    pub fn replay(&mut self, r: Replayed, now: i64) {
        match r {
            Replayed::GroupEpoch(_, e) => self.group_epoch = e.unwrap_or(0),
            Replayed::TargetEpoch(_, e) => self.assignment_epoch = e.unwrap_or(0),
            Replayed::Member(_, id, None) => {
                self.members.remove(&id);
                self.target.remove(&id);
            }
            Replayed::Member(_, id, Some(m)) => {
                let mut m = *m;
                if let Some(old) = self.members.remove(&id) {
                    (m.epoch, m.previous_epoch, m.state) = (old.epoch, old.previous_epoch, old.state);
                    (m.assigned, m.pending_revocation) = (old.assigned, old.pending_revocation);
                }
                m.session_deadline = now + m.session_timeout_ms(&self.limits);
                self.members.insert(id, m);
            }
            Replayed::Target(_, id, a) => match a {
                Some(a) => {
                    self.target.insert(id, a);
                }
                None => {
                    self.target.remove(&id);
                }
            },
            Replayed::Current(_, id, c) => {
                if let Some(m) = self.members.get_mut(&id) {
                    match c {
                        Some((epoch, previous, state, assigned, pending)) => {
                            (m.epoch, m.previous_epoch, m.state) = (epoch, previous, state);
                            (m.assigned, m.pending_revocation) = (assigned, pending);
                            m.rebalance_deadline = (state == MemberState::UnrevokedPartitions)
                                .then(|| now + m.rebalance_timeout_ms.max(0) as i64);
                        }
                        None => {
                            m.epoch = -1;
                            m.assigned.clear();
                            m.pending_revocation.clear();
                        }
                    }
                }
            }
        }
    }
}

impl Replayed {
    pub fn group(&self) -> &str {
        match self {
            Replayed::GroupEpoch(g, _)
            | Replayed::Member(g, _, _)
            | Replayed::TargetEpoch(g, _)
            | Replayed::Target(g, _, _)
            | Replayed::Current(g, _, _) => g,
        }
    }

    /// Whether it is the group's end (its epoch record's tombstone).
    pub fn ends_group(&self) -> bool {
        matches!(self, Replayed::GroupEpoch(_, None))
    }
}
