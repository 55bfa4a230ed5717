//! Members of the classic protocol inside a consumer group, and the conversion of a group with
//! members between the two protocols: KIP-848's online migration, as Kafka's coordinator does
//! it, so a consumer group can be upgraded (or rolled back) one consumer at a time.
//!
//! - **Upgrade**: the first ConsumerGroupHeartbeat to a classic group of consumers makes it a
//!   consumer group ([`ConsumerGroup::from_classic`]): each classic member stays, at the
//!   classic generation, with its last assignment as both its partitions and its target.
//! - **Classic members** then speak JoinGroup, SyncGroup, Heartbeat and LeaveGroup to the
//!   consumer group: a JoinGroup is a heartbeat carrying the member's subscription and owned
//!   partitions (from its ConsumerProtocol metadata, [`super::embedded`]), answered at once
//!   with its member epoch as the generation; SyncGroup hands out its current partitions;
//!   Heartbeat answers REBALANCE_IN_PROGRESS when it must rejoin to make progress.
//! - **Downgrade**: when the last member of the consumer protocol is fenced (or a classic
//!   static member takes its place), the group becomes a classic one again
//!   ([`ConsumerGroup::classic_members`], [`ConsumerGroup::classic_assignment`]).
//!
//! `group.consumer.migration.policy` ([`MigrationPolicy`]) says which conversions are allowed;
//! a group without members converts freely either way.

use super::embedded::{self, Subscription, TopicPartition};
use super::{Assignment, ClassicMember, ConsumerGroup, ConsumerLimits, Member, MemberState, Topics};
use crate::groups::group::{Exported, Join, Migrating};
use crate::groups::GroupError;
use crate::types::Uuid;
use bytes::Bytes;
use std::collections::BTreeSet;

/// Kafka's `group.consumer.migration.policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MigrationPolicy {
    Bidirectional,
    Upgrade,
    Downgrade,
    Disabled,
}

impl MigrationPolicy {
    pub fn parse(s: &str) -> Option<MigrationPolicy> {
        Some(match s.trim().to_ascii_lowercase().as_str() {
            "bidirectional" => MigrationPolicy::Bidirectional,
            "upgrade" => MigrationPolicy::Upgrade,
            "downgrade" => MigrationPolicy::Downgrade,
            "disabled" => MigrationPolicy::Disabled,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            MigrationPolicy::Bidirectional => "bidirectional",
            MigrationPolicy::Upgrade => "upgrade",
            MigrationPolicy::Downgrade => "downgrade",
            MigrationPolicy::Disabled => "disabled",
        }
    }

    pub fn upgrades(self) -> bool {
        matches!(self, MigrationPolicy::Bidirectional | MigrationPolicy::Upgrade)
    }

    pub fn downgrades(self) -> bool {
        matches!(self, MigrationPolicy::Bidirectional | MigrationPolicy::Downgrade)
    }
}

/// A JoinGroup's answer from a consumer group.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassicJoined {
    pub member_id: String,
    /// The member epoch, which classic members use as their generation.
    pub generation: i32,
    pub protocol_name: String,
    /// It took the place of a static member of the consumer protocol (a downgrade may be due).
    pub replaced_consumer_member: bool,
}

/// Partitions by topic id, from partitions by topic name (topics that do not exist left out).
fn by_id(parts: &[TopicPartition], topics: &dyn Topics) -> Assignment {
    let mut a = Assignment::new();
    for t in parts {
        if let Some((id, count)) = topics.get(&t.topic) {
            let ps = t.partitions.iter().copied().filter(|p| (0..count).contains(p));
            a.entry(id).or_default().extend(ps);
        }
    }
    a.retain(|_, ps| !ps.is_empty());
    a
}

/// Partitions by topic name, from partitions by topic id (topics since deleted left out).
fn by_name(a: &Assignment, topics: &dyn Topics) -> Vec<TopicPartition> {
    a.iter()
        .filter_map(|(id, ps)| {
            Some(TopicPartition {
                topic: topics.name_of(*id)?,
                partitions: ps.iter().copied().collect(),
                ..Default::default()
            })
        })
        .collect()
}

impl ConsumerGroup {
    /// A classic group of consumers as a consumer group: every member stable at the classic
    /// generation, its last assignment its partitions and its target. Fails if a member's
    /// ConsumerProtocol metadata or assignment is malformed.
    pub fn from_classic(
        id: &str,
        classic: Exported,
        topics: &dyn Topics,
        limits: ConsumerLimits,
        seed: u64,
        now: i64,
    ) -> Result<ConsumerGroup, String> {
        let Exported { generation, protocol, members } = classic;
        let mut g = ConsumerGroup::new(id, limits, seed);
        g.group_epoch = generation;
        g.assignment_epoch = generation;
        let mut taken = BTreeSet::new();
        for c in members {
            let metadata = protocol
                .as_deref()
                .and_then(|p| c.protocols.iter().find(|(n, _)| n == p))
                .or(c.protocols.first())
                .map(|(_, m)| m.clone())
                .unwrap_or_default();
            let malformed =
                |what: &str| format!("member {}'s {what} is not a valid consumer protocol one", c.member_id);
            let subscription: Subscription = embedded::decode(&metadata).ok_or_else(|| malformed("subscription"))?;
            let mut assigned = if c.assignment.is_empty() {
                Assignment::new()
            } else {
                let a: embedded::Assignment = embedded::decode(&c.assignment).ok_or_else(|| malformed("assignment"))?;
                by_id(&a.assigned_partitions, topics)
            };
            // A partition has one owner (a classic leader's assignor could give one twice).
            for (t, ps) in assigned.iter_mut() {
                ps.retain(|p| taken.insert((*t, *p)));
            }
            assigned.retain(|_, ps| !ps.is_empty());
            let mut m = Member::new(&c.member_id, c.rebalance_timeout_ms);
            m.epoch = generation;
            m.previous_epoch = generation;
            m.instance_id = c.instance_id;
            m.rack_id = subscription.rack_id;
            m.client_id = c.client_id;
            m.client_host = c.client_host;
            m.subscribe(subscription.topics);
            m.assigned = assigned.clone();
            m.classic = Some(ClassicMember { session_timeout_ms: c.session_timeout_ms, protocols: c.protocols });
            m.session_deadline = now + c.session_timeout_ms as i64;
            g.target.insert(c.member_id.clone(), assigned);
            g.members.insert(c.member_id, m);
        }
        Ok(g)
    }

    /// Whether a JoinGroup offering `protocols` of `protocol_type` fits: the consumer protocol
    /// type, and a protocol every classic member supports.
    fn supports_classic(&self, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
        if self.members.is_empty() {
            return !protocol_type.is_empty() && !protocols.is_empty();
        }
        let classic: Vec<&ClassicMember> = self.members.values().filter_map(|m| m.classic.as_ref()).collect();
        protocol_type == embedded::PROTOCOL_TYPE
            && protocols.iter().any(|(name, _)| classic.iter().all(|c| c.protocols.iter().any(|(n, _)| n == name)))
    }

    /// JoinGroup of a classic member: a heartbeat with its subscription and owned partitions,
    /// answered at once. Errors carry Kafka's code and a message, except MEMBER_ID_REQUIRED,
    /// whose second part is the member id to join with.
    pub fn classic_join(
        &mut self,
        j: Join,
        topics: &dyn Topics,
        now: i64,
    ) -> Result<ClassicJoined, (GroupError, String)> {
        let unknown = j.member_id.is_empty();
        let member_id = if unknown { self.next_member_id() } else { j.member_id.clone() };
        let static_id = j
            .instance_id
            .as_ref()
            .and_then(|i| self.members.values().find(|m| m.instance_id.as_ref() == Some(i)))
            .map(|m| m.id.clone());
        if !self.members.contains_key(&member_id) && static_id.is_none() && self.members.len() >= self.limits.max_size {
            return Err((GroupError::GroupMaxSizeReached, format!("group {} is full", self.id)));
        }
        if !self.supports_classic(&j.protocol_type, &j.protocols) {
            return Err((
                GroupError::InconsistentGroupProtocol,
                format!("Member {member_id}'s protocols are not supported."),
            ));
        }
        if j.require_known_member_id && unknown && j.instance_id.is_none() {
            return Err((GroupError::MemberIdRequired, member_id));
        }
        // `supports_classic` made sure there is a protocol.
        let Some(subscription) = j.protocols.first().and_then(|p| embedded::decode::<Subscription>(&p.1)) else {
            let message = format!("Member {member_id}'s subscription is not a valid consumer protocol one.");
            return Err((GroupError::InconsistentGroupProtocol, message));
        };
        let mut new = false;
        let mut replaced_consumer_member = false;
        let id = match (&j.instance_id, static_id) {
            (Some(_), Some(old)) if unknown => {
                // A static member comes back (from either protocol): it takes the old one's place.
                replaced_consumer_member = self.members[&old].classic.is_none();
                self.replace(&old, &member_id);
                member_id
            }
            (Some(instance), Some(old)) if old != member_id => {
                let message = format!("instance {instance} is member {old}, not {member_id}");
                return Err((GroupError::FencedInstanceId, message));
            }
            (Some(instance), None) if !unknown => {
                return Err((GroupError::UnknownMemberId, format!("instance {instance} is not in group {}", self.id)));
            }
            _ => {
                if !self.members.contains_key(&member_id) {
                    self.members.insert(member_id.clone(), Member::new(&member_id, j.rebalance_timeout_ms));
                    new = true;
                }
                member_id
            }
        };
        let m = self.members.get_mut(&id).expect("a member");
        m.identify(j.instance_id, subscription.rack_id, j.rebalance_timeout_ms, j.client_id, j.client_host);
        let bump = m.subscribe(subscription.topics) || new;
        let protocol_name = j.protocols[0].0.clone();
        m.classic = Some(ClassicMember { session_timeout_ms: j.session_timeout_ms, protocols: j.protocols });
        let owned = by_id(&subscription.owned_partitions, topics);
        self.advance(&id, bump, Some(&owned), topics, now);
        let m = self.members.get_mut(&id).expect("a member");
        m.session_deadline = now + j.session_timeout_ms as i64;
        // It must send its SyncGroup within its rebalance timeout.
        m.rebalance_deadline = Some(now + m.rebalance_timeout_ms.max(0) as i64);
        Ok(ClassicJoined { member_id: id, generation: m.epoch, protocol_name, replaced_consumer_member })
    }

    /// The classic member a SyncGroup, Heartbeat or LeaveGroup names (by instance id for a
    /// static member).
    fn classic_member(&self, member_id: &str, instance_id: Option<&str>) -> Result<String, (GroupError, String)> {
        let m = match instance_id {
            None => self.members.get(member_id),
            Some(instance) => {
                let m = self.members.values().find(|m| m.instance_id.as_deref() == Some(instance));
                if let Some(m) = m.filter(|m| !member_id.is_empty() && m.id != member_id) {
                    let message = format!("instance {instance} is member {}, not {member_id}", m.id);
                    return Err((GroupError::FencedInstanceId, message));
                }
                m
            }
        };
        match m {
            Some(m) if m.classic.is_some() => Ok(m.id.clone()),
            Some(m) => {
                Err((GroupError::UnknownMemberId, format!("Member {} does not use the classic protocol.", m.id)))
            }
            None => Err((GroupError::UnknownMemberId, format!("member {member_id} is not in group {}", self.id))),
        }
    }

    /// A classic member of the generation `generation` (its member epoch), or the error.
    fn classic_at(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
    ) -> Result<String, (GroupError, String)> {
        let id = self.classic_member(member_id, instance_id)?;
        let epoch = self.members[&id].epoch;
        if generation != epoch {
            return Err((
                GroupError::IllegalGeneration,
                format!("member {id} is at generation {epoch}, not {generation}"),
            ));
        }
        Ok(id)
    }

    /// Tell a classic member to rejoin: it must within its rebalance timeout.
    fn rejoin(&mut self, id: &str, now: i64) -> (GroupError, String) {
        let m = self.members.get_mut(id).expect("a member");
        m.rebalance_deadline.get_or_insert(now + m.rebalance_timeout_ms.max(0) as i64);
        (GroupError::RebalanceInProgress, format!("group {} is rebalancing: member {id} must rejoin", self.id))
    }

    /// SyncGroup of a classic member: its partitions, in its ConsumerProtocol version.
    pub fn classic_sync(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        protocol: (Option<&str>, Option<&str>),
        topics: &dyn Topics,
        now: i64,
    ) -> Result<Bytes, (GroupError, String)> {
        let id = self.classic_at(member_id, instance_id, generation)?;
        let m = &self.members[&id];
        let Some((name, metadata)) = m.classic.as_ref().and_then(|c| c.protocols.first()).cloned() else {
            return Err((GroupError::InconsistentGroupProtocol, format!("member {id} has no protocol")));
        };
        if protocol.0.is_some_and(|t| t != embedded::PROTOCOL_TYPE) || protocol.1.is_some_and(|p| p != name) {
            return Err((GroupError::InconsistentGroupProtocol, format!("member {id} joined with protocol {name}")));
        }
        // A new epoch is due: it rejoins first (unless it is giving up partitions: that rejoin
        // follows).
        if self.group_epoch > m.epoch && m.state != MemberState::UnrevokedPartitions {
            return Err(self.rejoin(&id, now));
        }
        let m = self.members.get_mut(&id).expect("a member");
        m.rebalance_deadline = None;
        m.session_deadline = now + m.session_timeout_ms(&self.limits);
        let a = embedded::Assignment { assigned_partitions: by_name(&m.assigned, topics), ..Default::default() };
        Ok(embedded::encode(a, embedded::version(&metadata)))
    }

    /// Heartbeat of a classic member: its session goes on; REBALANCE_IN_PROGRESS when it must
    /// rejoin to move on (a new epoch, partitions to give up, or partitions now free for it).
    pub fn classic_heartbeat(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        now: i64,
    ) -> Result<(), (GroupError, String)> {
        let id = self.classic_at(member_id, instance_id, generation)?;
        let waiting = self.waiting_on_unreleased(&id);
        let limits = self.limits;
        let m = self.members.get_mut(&id).expect("a member");
        m.session_deadline = now + m.session_timeout_ms(&limits);
        let behind = m.epoch < self.group_epoch
            || m.state == MemberState::UnrevokedPartitions
            || (m.state == MemberState::UnreleasedPartitions && !waiting);
        if behind {
            return Err(self.rejoin(&id, now));
        }
        Ok(())
    }

    /// Whether part of a member's target is still owned by another member.
    fn waiting_on_unreleased(&self, id: &str) -> bool {
        let Some(target) = self.target.get(id) else { return false };
        let mine = &self.members[id].assigned;
        let held = |t: &Uuid, p: &i32| {
            self.members.values().any(|o| {
                o.id != id
                    && [&o.assigned, &o.pending_revocation].iter().any(|a| a.get(t).is_some_and(|q| q.contains(p)))
            })
        };
        target.iter().any(|(t, ps)| ps.iter().any(|p| !mine.get(t).is_some_and(|q| q.contains(p)) && held(t, p)))
    }

    /// LeaveGroup of classic members (by member id, or instance id): each one's answer. The
    /// group epoch moves once if any left.
    pub fn classic_leave(&mut self, leaving: &[(String, Option<String>)]) -> Vec<Result<(), GroupError>> {
        let mut answers = Vec::new();
        let mut left = false;
        for (member_id, instance_id) in leaving {
            match self.classic_member(member_id, instance_id.as_deref()) {
                Ok(id) => {
                    self.members.remove(&id);
                    self.target.remove(&id);
                    left = true;
                    answers.push(Ok(()));
                }
                Err((e, _)) => answers.push(Err(e)),
            }
        }
        if left {
            self.group_epoch += 1;
        }
        answers
    }

    /// Whether the group has members, all of the classic protocol, and the policy lets it
    /// become a classic group of at most `classic_max` members (asked after a member of the
    /// consumer protocol was fenced or replaced).
    pub fn downgrade_due(&self, classic_max: usize) -> bool {
        !self.members.is_empty()
            && self.members.values().all(|m| m.classic.is_some())
            && self.limits.migration.downgrades()
            && self.members.len() <= classic_max
    }

    /// Whether any member speaks the consumer protocol.
    pub fn has_consumer_member(&self) -> bool {
        self.members.values().any(|m| m.classic.is_none())
    }

    /// The members as a classic group takes them over (a downgrade); their assignments come
    /// from [`ConsumerGroup::classic_assignment`] once the group's protocol is chosen.
    pub fn classic_members(&self) -> Vec<Migrating> {
        self.members
            .values()
            .filter_map(|m| {
                let c = m.classic.as_ref()?;
                Some(Migrating {
                    member_id: m.id.clone(),
                    instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    session_timeout_ms: c.session_timeout_ms,
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    protocols: c.protocols.clone(),
                    assignment: Bytes::new(),
                })
            })
            .collect()
    }

    /// A member's target as a classic assignment, in the version of `metadata` (its
    /// subscription for the protocol the classic group chose).
    pub fn classic_assignment(&self, member: &str, metadata: &[u8], topics: &dyn Topics) -> Bytes {
        let a = embedded::Assignment {
            assigned_partitions: by_name(&self.target_of(member), topics),
            ..Default::default()
        };
        embedded::encode(a, embedded::version(metadata))
    }
}

#[cfg(test)]
mod tests;
