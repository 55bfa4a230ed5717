//! The coordinator's side of KIP-848's online migration: classic members (JoinGroup,
//! SyncGroup, Heartbeat, LeaveGroup) inside a consumer group, and the conversion of a group
//! with members between the protocols, as Kafka does it, so consumers move from one protocol to
//! the other one at a time with the group working throughout.
//!
//! - Upgrade: the first ConsumerGroupHeartbeat (epoch 0) to a classic group of consumers
//!   converts it ([`Coordinator::take_classic`]); the classic members stay, with their
//!   partitions, and are told to rejoin on their next heartbeat.
//! - Downgrade: when a member of the consumer protocol is fenced (leaves, times out) or a
//!   classic static member takes its place, and only classic members remain, the group becomes
//!   a classic group at the group epoch, each member holding its target
//!   ([`Coordinator::downgrade`]); after a fencing a rebalance starts at once.
//!
//! Both are allowed by `group.consumer.migration.policy`; a group too large for its new kind
//! (`group.max.size`, `group.consumer.max.size`) stays as it is. Classic membership is not
//! persisted (see [`super`]), so a downgrade writes only the consumer group's tombstones.

use super::Coordinator;
use crate::errors::{group_code, group_outcome};
use crate::groups::consumer::{embedded, ConsumerGroup};
use crate::groups::group::{Group, Join};
use crate::groups::GroupError;
use crate::protocol::errors::{self as code, ErrorCode};
use crate::protocol::groups::*;

impl Coordinator {
    /// Before a ConsumerGroupHeartbeat at `epoch`: a classic group of the same id without
    /// members gives way; one with members is converted if it can be (an epoch-0 heartbeat, the
    /// policy, consumers, not too many), otherwise GROUP_ID_NOT_FOUND. Whether it was converted.
    pub(super) fn take_classic(&self, group: &str, epoch: i32) -> Result<bool, (ErrorCode, String)> {
        let mut classic = self.groups.borrow_mut();
        let Some(g) = classic.get(group) else { return Ok(false) };
        if g.is_empty() {
            classic.remove(group);
            return Ok(false);
        }
        let refused = || (code::GROUP_ID_NOT_FOUND, format!("Group {group} is not a consumer group."));
        let limits = self.config.consumer;
        if epoch != 0 || !limits.migration.upgrades() || !g.uses_consumer_protocol() || g.len() > limits.max_size {
            return Err(refused());
        }
        let topics = self.topics();
        let converted = ConsumerGroup::from_classic(group, g.export(), &*topics, limits, self.next_seed(), self.now())
            .map_err(|e| {
                tracing::warn!(group, error = e, "classic group not converted to a consumer group");
                refused()
            })?;
        classic.remove(group).expect("found").dissolve();
        self.consumer_groups.borrow_mut().insert(group.to_string(), converted);
        tracing::info!(group, "classic group converted to a consumer group (online upgrade)");
        Ok(true)
    }

    /// Whether the consumer group `group`, which had members of the consumer protocol
    /// (`before`), now has only classic ones and may become a classic group.
    pub(super) fn downgrade_due(&self, group: &str, before: &ConsumerGroup) -> bool {
        before.has_consumer_member()
            && self.consumer_groups.borrow().get(group).is_some_and(|g| g.downgrade_due(self.config.limits.max_size))
    }

    /// Make the consumer group `group` a classic group of its (classic) members, each with its
    /// target as its assignment, and write the consumer group's tombstones (those of every
    /// member `before` the change that led here). With `rebalance` the members rejoin at once.
    /// If the tombstones cannot be written the group stays what it was before.
    pub(super) async fn downgrade(&self, group: &str, before: ConsumerGroup, rebalance: bool) -> Result<(), ErrorCode> {
        let Some(g) = self.consumer_groups.borrow_mut().remove(group) else { return Ok(()) };
        let topics = self.topics();
        let assign = |member: &str, metadata: &[u8]| g.classic_assignment(member, metadata, &*topics);
        let members = g.classic_members();
        let (limits, seed, now) = (self.config.limits, self.next_seed(), self.now());
        let classic = Group::import(group, limits, seed, g.group_epoch, members, &assign, rebalance, now);
        self.groups.borrow_mut().insert(group.to_string(), classic);
        let written = self.persist_group(group, Some(before)).await;
        if written.is_err() {
            // `persist_group` put the consumer group back.
            if let Some(c) = self.groups.borrow_mut().remove(group) {
                c.dissolve();
            }
        } else {
            tracing::info!(group, "consumer group converted to a classic group (online downgrade)");
        }
        written
    }

    /// JoinGroup to a consumer group with members: the member joins it with the classic
    /// protocol (`None`: not such a group; an empty consumer group gives way to the classic
    /// one).
    pub(super) async fn join_consumer_group(&self, group: &str, join: &Join) -> Option<JoinGroupResponse> {
        let fail = |error_code: ErrorCode, member_id: String| JoinGroupResponse {
            error_code,
            member_id,
            ..Default::default()
        };
        let (before, joined) = {
            let mut groups = self.consumer_groups.borrow_mut();
            let g = groups.get_mut(group)?;
            if g.is_empty() {
                groups.remove(group);
                return None;
            }
            let limits = self.config.limits;
            if !(limits.min_session_timeout_ms..=limits.max_session_timeout_ms).contains(&join.session_timeout_ms) {
                return Some(fail(code::INVALID_SESSION_TIMEOUT, join.member_id.clone()));
            }
            // The classic group's bounds on what a member offers.
            if join.protocol_type.is_empty()
                || join.protocols.is_empty()
                || join.protocols.len() > crate::groups::group::MAX_PROTOCOLS
            {
                return Some(fail(code::INCONSISTENT_GROUP_PROTOCOL, join.member_id.clone()));
            }
            let before = g.clone();
            (before, g.classic_join(join.clone(), &*self.topics(), self.now()))
        };
        let joined = match joined {
            Ok(joined) => joined,
            Err((GroupError::MemberIdRequired, member_id)) => return Some(fail(code::MEMBER_ID_REQUIRED, member_id)),
            Err((e, message)) => {
                tracing::debug!(group, error = message, "JoinGroup to a consumer group refused");
                return Some(fail(group_code(e), join.member_id.clone()));
            }
        };
        let written = if joined.replaced_consumer_member && self.downgrade_due(group, &before) {
            self.downgrade(group, before, false).await
        } else {
            self.persist_group(group, Some(before)).await
        };
        if let Err(e) = written {
            return Some(fail(e, join.member_id.clone()));
        }
        Some(JoinGroupResponse {
            member_id: joined.member_id,
            generation_id: joined.generation,
            protocol_type: Some(embedded::PROTOCOL_TYPE.to_string()),
            protocol_name: Some(joined.protocol_name),
            ..Default::default()
        })
    }

    /// SyncGroup of a classic member of a consumer group (`None`: not a consumer group).
    pub(super) fn sync_consumer_group(&self, s: &SyncGroupRequest) -> Option<SyncGroupResponse> {
        let mut groups = self.consumer_groups.borrow_mut();
        let g = groups.get_mut(&s.group_id)?;
        let protocol = (s.protocol_type.as_deref(), s.protocol_name.as_deref());
        let synced = g.classic_sync(
            &s.member_id,
            s.group_instance_id.as_deref(),
            s.generation_id,
            protocol,
            &*self.topics(),
            self.now(),
        );
        Some(match synced {
            Ok(assignment) => SyncGroupResponse {
                protocol_type: s.protocol_type.clone(),
                protocol_name: s.protocol_name.clone(),
                assignment,
                ..Default::default()
            },
            Err((e, _)) => SyncGroupResponse { error_code: group_code(e), ..Default::default() },
        })
    }

    /// Heartbeat of a classic member of a consumer group (`None`: not a consumer group).
    pub(super) fn heartbeat_consumer_group(&self, h: &HeartbeatRequest) -> Option<ErrorCode> {
        let mut groups = self.consumer_groups.borrow_mut();
        let g = groups.get_mut(&h.group_id)?;
        let beat = g.classic_heartbeat(&h.member_id, h.group_instance_id.as_deref(), h.generation_id, self.now());
        Some(beat.err().map_or(code::NONE, |(e, _)| group_code(e)))
    }

    /// LeaveGroup of classic members of a consumer group (`None`: not a consumer group): each
    /// member's answer once the group's change is durable.
    pub(super) async fn leave_consumer_group(&self, version: i16, l: &LeaveGroupRequest) -> Option<LeaveGroupResponse> {
        let leaving: Vec<(String, Option<String>)> = if version < 3 {
            vec![(l.member_id.clone(), None)]
        } else {
            l.members.iter().map(|m| (m.member_id.clone(), m.group_instance_id.clone())).collect()
        };
        let (before, mut answers): (_, Vec<ErrorCode>) = {
            let mut groups = self.consumer_groups.borrow_mut();
            let g = groups.get_mut(&l.group_id)?;
            (g.clone(), g.classic_leave(&leaving).into_iter().map(group_outcome).collect())
        };
        if let Err(e) = self.persist_group(&l.group_id, Some(before)).await {
            answers.iter_mut().filter(|a| **a == code::NONE).for_each(|a| *a = e);
        }
        if version < 3 {
            return Some(LeaveGroupResponse { error_code: answers[0], ..Default::default() });
        }
        let members = l
            .members
            .iter()
            .zip(answers)
            .map(|(m, error_code)| MemberResponse {
                member_id: m.member_id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                error_code,
                ..Default::default()
            })
            .collect();
        Some(LeaveGroupResponse { members, ..Default::default() })
    }
}
