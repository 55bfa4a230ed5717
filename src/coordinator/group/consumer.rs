//! The coordinator's side of the consumer protocol (KIP-848): ConsumerGroupHeartbeat and
//! ConsumerGroupDescribe on the groups this shard coordinates ([`crate::groups::consumer`]),
//! and the member checks of OffsetCommit and OffsetFetch v9 for them.
//!
//! A group id belongs to one protocol at a time. A heartbeat to an empty classic group
//! replaces it, to one with members converts it ([`super::migration`]); a JoinGroup to an
//! empty consumer group replaces it, to one with members joins it as a classic member.
//!
//! Every change of a group's state is written to its `__consumer_offsets` partition in Kafka's
//! record layout ([`crate::groups::consumer::records`]) before the heartbeat is answered, and
//! replayed at startup: after a restart members keep their epochs and partitions, and their
//! sessions start again.

use super::Coordinator;
use crate::errors::group_code;
use crate::groups::consumer::{self, records, Assignment, ConsumerGroup, Heartbeat, ASSIGNORS};
use crate::protocol::errors::{self as code, ErrorCode};
use crate::protocol::groups::*;

/// The request's own checks (Kafka's `throwIfConsumerGroupHeartbeatRequestIsInvalid`).
fn invalid(h: &ConsumerGroupHeartbeatRequest, version: i16) -> Option<(ErrorCode, String)> {
    let bad = |m: &str| Some((code::INVALID_REQUEST, m.to_string()));
    if h.group_id.trim().is_empty() {
        return bad("GroupId can't be empty.");
    }
    if h.instance_id.as_deref().is_some_and(|s| s.trim().is_empty()) {
        return bad("InstanceId can't be empty.");
    }
    if h.rack_id.as_deref().is_some_and(|s| s.trim().is_empty()) {
        return bad("RackId can't be empty.");
    }
    if (h.member_epoch != 0 || version >= 1) && h.member_id.trim().is_empty() {
        return bad("MemberId can't be empty.");
    }
    match h.member_epoch {
        0 => {
            if h.rebalance_timeout_ms == -1 {
                return bad("RebalanceTimeoutMs must be provided in first request.");
            }
            if h.topic_partitions.as_ref().is_none_or(|t| !t.is_empty()) {
                return bad("TopicPartitions must be empty when (re-)joining.");
            }
            let regex = h.subscribed_topic_regex.as_deref().filter(|r| !r.is_empty());
            if h.subscribed_topic_names.is_none() && regex.is_none() {
                return bad("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.");
            }
        }
        -2 if h.instance_id.is_none() => return bad("InstanceId can't be null."),
        e if e < -2 => return bad("MemberEpoch is invalid."),
        _ => {}
    }
    if let Some(a) = h.server_assignor.as_deref().filter(|a| !ASSIGNORS.contains(a)) {
        return Some((
            code::UNSUPPORTED_ASSIGNOR,
            format!("ServerAssignor {a} is not supported. Supported assignors: uniform, range."),
        ));
    }
    if let Some(r) = h.subscribed_topic_regex.as_deref().filter(|r| !r.is_empty() && consumer::full_match(r).is_none())
    {
        return Some((
            code::INVALID_REGULAR_EXPRESSION,
            format!("SubscribedTopicRegex `{r}` is not a valid regular expression."),
        ));
    }
    None
}

/// A member of a consumer group checked for an offset commit (`commit_version`) or fetch
/// (`None`): from outside the group (epoch < 0, no member id) only while it has no members;
/// otherwise a known member at its current epoch (STALE_MEMBER_EPOCH otherwise), committing
/// with OffsetCommit v9 or later; a classic member at its generation (ILLEGAL_GENERATION).
pub(super) fn check_member(
    g: &ConsumerGroup,
    member: &str,
    epoch: i32,
    commit_version: Option<i16>,
) -> Option<ErrorCode> {
    if epoch < 0 && member.is_empty() {
        return (commit_version.is_some() && !g.is_empty()).then_some(code::UNKNOWN_MEMBER_ID);
    }
    let Some(m) = g.member(member) else { return Some(code::UNKNOWN_MEMBER_ID) };
    if m.classic.is_some() {
        // A classic member commits with its generation (its member epoch), at any version.
        return (epoch != m.epoch).then_some(code::ILLEGAL_GENERATION);
    }
    if commit_version.is_some_and(|v| v < 9) {
        return Some(code::UNSUPPORTED_VERSION);
    }
    (epoch != m.epoch).then_some(code::STALE_MEMBER_EPOCH)
}

impl Coordinator {
    /// Replay the consumer-group records of stored `__consumer_offsets` batches (startup).
    pub(super) fn replay_consumer_groups(
        &self,
        stored: &[u8],
        limit: usize,
    ) -> Result<(), crate::storage::format::FormatError> {
        let now = self.now();
        let mut groups = self.consumer_groups.borrow_mut();
        crate::groups::offsets::for_each_record(stored, limit, |key, value, offset| {
            let Some(key) = key else { return };
            match records::decode(key, value) {
                Ok(Some(r)) if r.ends_group() => {
                    groups.remove(r.group());
                }
                Ok(Some(r)) => {
                    let id = r.group().to_string();
                    let limits = self.config.consumer;
                    groups
                        .entry(id.clone())
                        .or_insert_with(|| ConsumerGroup::new(&id, limits, offset as u64))
                        .replay(r, now);
                }
                Ok(None) => {}
                Err(_) => tracing::warn!(offset, "undecodable consumer group record skipped"),
            }
        })
    }

    /// Write what changed in `group` since `before` (a new group: `None`) and wait until it
    /// is durable; on failure the group goes back to `before`.
    pub(super) async fn persist_group(&self, group: &str, before: Option<ConsumerGroup>) -> Result<(), ErrorCode> {
        let records = match self.consumer_groups.borrow().get(group) {
            Some(g) => g.records_since(before.as_ref()),
            None => before.as_ref().map(|b| b.tombstones()).unwrap_or_default(),
        };
        if records.is_empty() {
            return Ok(());
        }
        let written = self.append(group, records, super::Batching::Split, |_, _, _| {}).await;
        if written.is_err() {
            let mut groups = self.consumer_groups.borrow_mut();
            match before {
                Some(b) => {
                    groups.insert(group.to_string(), b);
                }
                None => {
                    groups.remove(group);
                }
            }
        }
        written
    }

    /// ConsumerGroupHeartbeat.
    pub async fn consumer_heartbeat(
        &self,
        version: i16,
        h: ConsumerGroupHeartbeatRequest,
        client_id: String,
        client_host: String,
    ) -> ConsumerGroupHeartbeatResponse {
        let fail = |(error_code, message): (ErrorCode, String)| ConsumerGroupHeartbeatResponse {
            error_code,
            error_message: Some(message),
            ..Default::default()
        };
        if let Some(e) = self.unavailable(&h.group_id, true) {
            return fail((e, "the coordinator cannot serve this group".into()));
        }
        if let Some(refused) = invalid(&h, version) {
            return fail(refused);
        }
        let upgraded = match self.take_classic(&h.group_id, h.member_epoch) {
            Ok(upgraded) => upgraded,
            Err(refused) => return fail(refused),
        };
        let topics = self.topics();
        let (before, beat) = {
            let mut groups = self.consumer_groups.borrow_mut();
            if !groups.contains_key(&h.group_id) && h.member_epoch != 0 {
                let message = format!("Group {} not found.", h.group_id);
                return fail((code::GROUP_ID_NOT_FOUND, message));
            }
            // A group just converted is written whole.
            let before = if upgraded { None } else { groups.get(&h.group_id).cloned() };
            let (limits, seed) = (self.config.consumer, self.next_seed());
            let g = groups.entry(h.group_id.clone()).or_insert_with(|| ConsumerGroup::new(&h.group_id, limits, seed));
            let hb = Heartbeat {
                member_id: h.member_id,
                member_epoch: h.member_epoch,
                instance_id: h.instance_id,
                rack_id: h.rack_id,
                rebalance_timeout_ms: h.rebalance_timeout_ms,
                subscribed_topic_names: h.subscribed_topic_names,
                subscribed_topic_regex: h.subscribed_topic_regex,
                server_assignor: h.server_assignor,
                owned: h.topic_partitions.as_deref().map(records::assignment),
                client_id,
                client_host,
            };
            (before, g.heartbeat(hb, &*topics, self.now()))
        };
        let beat = match beat {
            Ok(beat) => beat,
            Err(e) => {
                // A group converted for this heartbeat is kept (written whole) even though the
                // heartbeat itself is refused.
                if upgraded {
                    let _ = self.persist_group(&h.group_id, None).await;
                }
                return fail((group_code(e.0), e.1));
            }
        };
        // The answer waits until the group's new state is durable, as a commit's does. A
        // member of the consumer protocol that left may leave only classic members: the group
        // becomes a classic one again.
        let written = match before {
            Some(b) if beat.member_epoch == -1 && self.downgrade_due(&h.group_id, &b) => {
                self.downgrade(&h.group_id, b, true).await
            }
            before => self.persist_group(&h.group_id, before).await,
        };
        if let Err(e) = written {
            return fail((e, "the group's state could not be written".into()));
        }
        ConsumerGroupHeartbeatResponse {
            member_id: Some(beat.member_id),
            member_epoch: beat.member_epoch,
            heartbeat_interval_ms: beat.heartbeat_interval_ms,
            assignment: beat
                .assignment
                .map(|a| ConsumerGroupAssignment { topic_partitions: records::parts(&a), ..Default::default() }),
            ..Default::default()
        }
    }

    /// Fence the members of consumer groups whose session or rebalance timeout passed, and
    /// forget empty groups without offsets; their records are written (nobody waits).
    pub(super) async fn tick_consumer_groups(&self, now: i64) {
        let mut changed = Vec::new();
        {
            let table = self.offsets.borrow();
            let mut groups = self.consumer_groups.borrow_mut();
            for g in groups.values_mut().filter(|g| g.has_due(now)) {
                let before = g.clone();
                let fenced = g.tick(now);
                for member in &fenced {
                    tracing::info!(group = g.id, member, "consumer group member fenced (session or rebalance timeout)");
                }
                if !fenced.is_empty() {
                    changed.push((g.id.clone(), before));
                }
            }
            let gone: Vec<String> = groups
                .iter()
                .filter(|(id, g)| g.is_empty() && table.group(id).is_none())
                .map(|(id, _)| id.clone())
                .collect();
            for id in gone {
                let g = groups.remove(&id).expect("listed");
                changed.retain(|(c, _)| *c != id);
                changed.push((id, g));
            }
        }
        for (group, before) in changed {
            // A failed write keeps the group in memory as it was; the next sweep tries again.
            let _ = if self.downgrade_due(&group, &before) {
                self.downgrade(&group, before, true).await
            } else {
                self.persist_group(&group, Some(before)).await
            };
        }
    }

    /// ConsumerGroupDescribe of one group.
    pub fn consumer_describe(&self, group: &str) -> ConsumerGroupDescribeGroup {
        let fail = |error_code: ErrorCode, message: String| ConsumerGroupDescribeGroup {
            error_code,
            error_message: Some(message),
            group_id: group.to_string(),
            ..Default::default()
        };
        if let Some(e) = self.unavailable(group, true) {
            return fail(e, "the coordinator cannot serve this group".into());
        }
        let groups = self.consumer_groups.borrow();
        let Some(g) = groups.get(group) else {
            return fail(code::GROUP_ID_NOT_FOUND, format!("Group {group} not found."));
        };
        let topics = self.topics();
        let described = |a: &Assignment| DescribedAssignment {
            topic_partitions: a
                .iter()
                .filter_map(|(t, ps)| {
                    Some(DescribedTopicPartitions {
                        topic_id: t.0,
                        topic_name: topics.name_of(*t)?,
                        partitions: ps.iter().copied().collect(),
                        ..Default::default()
                    })
                })
                .collect(),
            ..Default::default()
        };
        ConsumerGroupDescribeGroup {
            group_id: group.to_string(),
            group_state: g.state().to_string(),
            group_epoch: g.group_epoch,
            assignment_epoch: g.assignment_epoch,
            assignor_name: g.assignor().to_string(),
            members: g
                .members()
                .map(|m| ConsumerGroupDescribeMember {
                    member_id: m.id.clone(),
                    instance_id: m.instance_id.clone(),
                    rack_id: m.rack_id.clone(),
                    member_epoch: m.epoch,
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    subscribed_topic_names: m.subscribed.clone(),
                    subscribed_topic_regex: m.regex.clone(),
                    assignment: described(&m.assigned),
                    target_assignment: described(&g.target_of(&m.id)),
                    // KIP-1099: 0 a classic member, 1 a consumer-protocol one.
                    member_type: if m.classic.is_some() { 0 } else { 1 },
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }
}
