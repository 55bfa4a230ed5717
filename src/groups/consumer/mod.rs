//! One consumer group under the KIP-848 consumer protocol, as Kafka's group coordinator keeps
//! it: the broker owns the assignment. Every member heartbeats (ConsumerGroupHeartbeat); a
//! heartbeat may change the group (a member joins, leaves or changes its subscription, a
//! subscribed topic appears or grows), which bumps the **group epoch**; the server-side
//! assignor ([`assignor`]) then computes a **target assignment** at that epoch; each member
//! moves towards its target on its own heartbeats (**reconciliation**): it first gives up what
//! it must revoke, then gets what is free, and its **member epoch** reaches the target's.
//!
//! ```text
//!             target epoch moved                   member reported the revocation
//!  Stable ───────────────────────► Unrevoked ────────────────────────────────────┐
//!    ▲    nothing to revoke, some   Partitions   (nothing unreleased)             │
//!    │    partitions still owned         │                                       ▼
//!    │    by others ──────────────► Unreleased ──── they were released ────► Stable
//! ```
//!
//! Pure: no I/O, no runtime; time comes in as `now` (ms) and [`ConsumerGroup::tick`] applies
//! session and rebalance timeouts. Topics are seen through a [`Topics`] lookup (name to id and
//! partition count).
//!
//! Invariants (checked by the tests after every step):
//! - a partition is owned (assigned or pending revocation) by at most one member;
//! - a member is never given a partition another member still owns;
//! - `assignment_epoch <= group_epoch`, and every member epoch `<= assignment_epoch`.

pub mod assignor;
mod classic;
pub mod embedded;
pub mod records;

pub use classic::{ClassicJoined, MigrationPolicy};

use crate::groups::GroupError;
use crate::types::Uuid;
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet};

/// Partitions by topic id.
pub type Assignment = BTreeMap<Uuid, BTreeSet<i32>>;

/// A topic as the group sees it: its id and partition count.
pub type TopicMeta = (Uuid, i32);

/// How the group looks topics up by name.
pub trait Topics {
    fn get(&self, name: &str) -> Option<TopicMeta>;
    /// Every topic's name, for regular-expression subscriptions (internal topics left out).
    fn names(&self) -> Vec<String> {
        Vec::new()
    }
    /// A topic's name by id (classic members speak in names).
    fn name_of(&self, _id: Uuid) -> Option<String> {
        None
    }
    /// Whether this node leads a partition (a coordinator serves only the partitions of the
    /// internal topics it leads; always, standalone).
    fn leads(&self, _name: &str, _partition: i32) -> bool {
        true
    }
    /// How many replicas of a partition are in sync (`None`: unknown; standalone, one).
    fn in_sync(&self, _name: &str, _partition: i32) -> Option<usize> {
        Some(1)
    }
}

/// Whether a coordinator may write to its partition `partition` of `topic`, whose
/// `min.insync.replicas` is `min` (`offsets.topic...` defaults, `transaction.state.log.min.isr`):
/// as Kafka's coordinators write with acks=all, too few replicas in sync refuse the write
/// (NOT_ENOUGH_REPLICAS, which the coordinators answer as COORDINATOR_NOT_AVAILABLE).
pub fn enough_in_sync(topics: &dyn Topics, topic: &str, partition: i32, min: usize) -> bool {
    topics.in_sync(topic, partition).is_some_and(|n| n >= min)
}

impl<F: Fn(&str) -> Option<TopicMeta>> Topics for F {
    fn get(&self, name: &str) -> Option<TopicMeta> {
        self(name)
    }
}

/// Where a member is in its reconciliation (Kafka's MemberState).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    Stable,
    /// It must give up `pending_revocation` before it gets anything new.
    UnrevokedPartitions,
    /// Part of its target is still owned by others.
    UnreleasedPartitions,
}

/// What a member that speaks the classic protocol (JoinGroup, SyncGroup, Heartbeat) inside a
/// consumer group brings with it (Kafka's ClassicMemberMetadata).
#[derive(Debug, Clone, PartialEq)]
pub struct ClassicMember {
    pub session_timeout_ms: i32,
    /// Its protocols (assignor name, ConsumerProtocol subscription), in its order of preference.
    pub protocols: Vec<(String, Bytes)>,
}

/// One member of a consumer group.
#[derive(Debug, Clone)]
pub struct Member {
    pub id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub subscribed: Vec<String>,
    pub regex: Option<String>,
    pub rebalance_timeout_ms: i32,
    pub server_assignor: Option<String>,
    pub epoch: i32,
    pub previous_epoch: i32,
    pub state: MemberState,
    pub assigned: Assignment,
    pub pending_revocation: Assignment,
    /// `Some` for a member of the classic protocol (online migration, KIP-848).
    pub classic: Option<ClassicMember>,
    session_deadline: i64,
    /// Fenced if still set by then. A consumer-protocol member: set while it has partitions
    /// to revoke. A classic member: set when it joined (it must SyncGroup in time) and when
    /// it was told to rejoin (it must JoinGroup in time).
    rebalance_deadline: Option<i64>,
}

impl Member {
    /// Its session expired, or it kept partitions to revoke past its rebalance timeout.
    fn is_due(&self, now: i64) -> bool {
        self.session_deadline <= now || self.rebalance_deadline.is_some_and(|d| d <= now)
    }

    /// How long its session lasts without a heartbeat: its own for a classic member.
    fn session_timeout_ms(&self, limits: &ConsumerLimits) -> i64 {
        self.classic.as_ref().map_or(limits.session_timeout_ms, |c| c.session_timeout_ms) as i64
    }

    /// What a request says of the member: instance and rack ids and rebalance timeout when
    /// given (`None`, -1: unchanged), the client's id and address always.
    fn identify(
        &mut self,
        instance_id: Option<String>,
        rack_id: Option<String>,
        rebalance_timeout_ms: i32,
        client_id: String,
        client_host: String,
    ) {
        if instance_id.is_some() {
            self.instance_id = instance_id;
        }
        if rack_id.is_some() {
            self.rack_id = rack_id;
        }
        if rebalance_timeout_ms != -1 {
            self.rebalance_timeout_ms = rebalance_timeout_ms;
        }
        self.client_id = client_id;
        self.client_host = client_host;
    }

    /// Subscribe to `names` (sorted, without duplicates); whether that changed its subscription.
    fn subscribe(&mut self, mut names: Vec<String>) -> bool {
        names.sort();
        names.dedup();
        let changed = names != self.subscribed;
        self.subscribed = names;
        changed
    }

    /// A member that has just joined: nothing subscribed, assigned or owned yet, epoch 0.
    pub fn new(id: &str, rebalance_timeout_ms: i32) -> Member {
        Member {
            id: id.to_string(),
            instance_id: None,
            rack_id: None,
            client_id: String::new(),
            client_host: String::new(),
            subscribed: Vec::new(),
            regex: None,
            rebalance_timeout_ms,
            server_assignor: None,
            epoch: 0,
            previous_epoch: 0,
            state: MemberState::Stable,
            assigned: Assignment::new(),
            pending_revocation: Assignment::new(),
            classic: None,
            session_deadline: 0,
            rebalance_deadline: None,
        }
    }
}

/// Settings of consumer groups (Kafka's `group.consumer.*`).
#[derive(Debug, Clone, Copy)]
pub struct ConsumerLimits {
    pub heartbeat_interval_ms: i32,
    pub session_timeout_ms: i32,
    pub max_size: usize,
    /// `group.consumer.migration.policy`: which online conversions of a group with members
    /// between the classic and the consumer protocol are allowed.
    pub migration: MigrationPolicy,
}

impl Default for ConsumerLimits {
    fn default() -> Self {
        ConsumerLimits {
            heartbeat_interval_ms: 5000,
            session_timeout_ms: 45000,
            max_size: i32::MAX as usize,
            migration: MigrationPolicy::Bidirectional,
        }
    }
}

/// A heartbeat as the group takes it (the request's fields, the client's identity).
#[derive(Debug, Clone, Default)]
pub struct Heartbeat {
    pub member_id: String,
    pub member_epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub rebalance_timeout_ms: i32,
    pub subscribed_topic_names: Option<Vec<String>>,
    pub subscribed_topic_regex: Option<String>,
    pub server_assignor: Option<String>,
    pub owned: Option<Assignment>,
    pub client_id: String,
    pub client_host: String,
}

/// What a heartbeat gets back.
#[derive(Debug, Clone, PartialEq)]
pub struct Beat {
    pub member_id: String,
    pub member_epoch: i32,
    pub heartbeat_interval_ms: i32,
    /// The member's whole assignment when it changed or the heartbeat was a full one.
    pub assignment: Option<Assignment>,
}

/// A regular expression that must match a whole name (Kafka's `matches`), or `None` if it does
/// not compile. It must compile on its own first: an unbalanced one such as `a)|(b` would
/// otherwise close the anchoring group and match parts of names.
pub fn full_match(regex: &str) -> Option<regex::Regex> {
    regex::Regex::new(regex).ok()?;
    regex::Regex::new(&format!("^(?:{regex})$")).ok()
}

/// The server-side assignors, by the names clients ask for (`group.remote.assignor`).
pub const ASSIGNORS: [&str; 2] = ["uniform", "range"];

/// A consumer group.
#[derive(Debug, Clone)]
pub struct ConsumerGroup {
    pub id: String,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    members: BTreeMap<String, Member>,
    target: BTreeMap<String, Assignment>,
    /// The subscribed topics as of the last target computation.
    metadata: BTreeMap<String, TopicMeta>,
    /// Each member regular expression's topics, as of the same computation.
    resolved: BTreeMap<String, Vec<String>>,
    limits: ConsumerLimits,
    seed: u64,
}

impl ConsumerGroup {
    pub fn new(id: &str, limits: ConsumerLimits, seed: u64) -> ConsumerGroup {
        ConsumerGroup {
            id: id.to_string(),
            group_epoch: 0,
            assignment_epoch: 0,
            members: BTreeMap::new(),
            target: BTreeMap::new(),
            metadata: BTreeMap::new(),
            resolved: BTreeMap::new(),
            limits,
            seed: seed | 1,
        }
    }

    /// Kafka's `ModernGroup.isSubscribedToTopic`: a member names `topic`, or its regular
    /// expression matched it at the last target computation.
    pub fn subscribed_to(&self, topic: &str) -> bool {
        self.members.values().any(|m| {
            m.subscribed.iter().any(|t| t == topic)
                || m.regex.as_ref().and_then(|r| self.resolved.get(r)).is_some_and(|ts| ts.iter().any(|t| t == topic))
        })
    }

    pub fn members(&self) -> impl Iterator<Item = &Member> {
        self.members.values()
    }

    pub fn member(&self, id: &str) -> Option<&Member> {
        self.members.get(id)
    }

    pub fn target_of(&self, member: &str) -> Assignment {
        self.target.get(member).cloned().unwrap_or_default()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Kafka's group state: Empty, Assigning (a target is due), Reconciling (a member has not
    /// reached it), Stable.
    pub fn state(&self) -> &'static str {
        if self.members.is_empty() {
            "Empty"
        } else if self.group_epoch > self.assignment_epoch {
            "Assigning"
        } else if self.members.values().any(|m| m.state != MemberState::Stable || m.epoch != self.assignment_epoch) {
            "Reconciling"
        } else {
            "Stable"
        }
    }

    /// The assignor the group uses: the one most members ask for, else the first.
    pub fn assignor(&self) -> &'static str {
        let mut votes = [0usize; ASSIGNORS.len()];
        for m in self.members.values() {
            if let Some(i) = m.server_assignor.as_deref().and_then(|a| ASSIGNORS.iter().position(|x| *x == a)) {
                votes[i] += 1;
            }
        }
        let best = (0..ASSIGNORS.len()).max_by_key(|&i| (votes[i], usize::MAX - i)).unwrap_or(0);
        ASSIGNORS[best]
    }

    fn next_member_id(&mut self) -> String {
        self.seed = self.seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let a = self.seed;
        self.seed = self.seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&a.to_be_bytes());
        b[8..].copy_from_slice(&self.seed.to_be_bytes());
        Uuid(b).to_string()
    }

    /// One heartbeat at `now`: the member's answer, or Kafka's error code and message.
    pub fn heartbeat(&mut self, hb: Heartbeat, topics: &dyn Topics, now: i64) -> Result<Beat, (GroupError, String)> {
        if hb.member_epoch < 0 {
            return self.leave(&hb);
        }
        let full = hb.member_epoch == 0
            || (hb.rebalance_timeout_ms != -1 && hb.subscribed_topic_names.is_some() && hb.owned.is_some());
        let (member_id, new) = self.admit(&hb)?;
        let m = self.members.get_mut(&member_id).expect("admitted");
        // A known member rejoining (epoch 0) starts over from what it was given, owning nothing.
        let owned = if hb.member_epoch == 0 { Some(Assignment::new()) } else { hb.owned.clone() };
        let mut bump = new;
        if let Some(names) = hb.subscribed_topic_names {
            bump |= m.subscribe(names);
        }
        if let Some(regex) = hb.subscribed_topic_regex.filter(|r| !r.is_empty()) {
            if m.regex.as_deref() != Some(regex.as_str()) {
                m.regex = Some(regex);
                bump = true;
            }
        }
        m.identify(hb.instance_id, hb.rack_id, hb.rebalance_timeout_ms, hb.client_id, hb.client_host);
        if let Some(a) = hb.server_assignor {
            if m.server_assignor.as_deref() != Some(a.as_str()) {
                m.server_assignor = Some(a);
                bump = true;
            }
        }
        // A classic member that heartbeats this way has moved to the consumer protocol.
        m.classic = None;
        m.session_deadline = now + self.limits.session_timeout_ms as i64;
        let changed = self.advance(&member_id, bump, owned.as_ref(), topics, now);
        let m = &self.members[&member_id];
        Ok(Beat {
            member_id: member_id.clone(),
            member_epoch: m.epoch,
            heartbeat_interval_ms: self.limits.heartbeat_interval_ms,
            assignment: (full || changed).then(|| m.assigned.clone()),
        })
    }

    /// After a member's subscription or identity changed (`bump`: it is new or its subscription
    /// changed): take the subscribed topics again (their change bumps the group epoch too),
    /// compute a target at the new epoch if one is due, and reconcile the member with what it
    /// reported owning. Whether its assignment changed.
    fn advance(&mut self, id: &str, mut bump: bool, owned: Option<&Assignment>, topics: &dyn Topics, now: i64) -> bool {
        let (metadata, resolved) = self.subscribed_metadata(topics);
        if metadata != self.metadata || resolved != self.resolved {
            self.metadata = metadata;
            self.resolved = resolved;
            bump = true;
        }
        if bump {
            self.group_epoch += 1;
        }
        if self.group_epoch > self.assignment_epoch {
            self.compute_target();
        }
        let before = self.members[id].assigned.clone();
        self.reconcile(id, owned, now);
        self.members[id].assigned != before
    }

    /// The member a heartbeat speaks for, new (epoch 0) or known and at an acceptable epoch,
    /// and whether it is new to the group.
    fn admit(&mut self, hb: &Heartbeat) -> Result<(String, bool), (GroupError, String)> {
        if hb.member_epoch == 0 && !self.members.contains_key(&hb.member_id) {
            if let Some(instance) = &hb.instance_id {
                if let Some(old) = self.members.values().find(|m| m.instance_id.as_ref() == Some(instance)) {
                    if old.epoch != -2 && old.classic.is_none() {
                        let message = format!("static member {instance} is still held by member {}", old.id);
                        return Err((GroupError::UnreleasedInstanceId, message));
                    }
                    let old_id = old.id.clone();
                    let id = if hb.member_id.is_empty() { self.next_member_id() } else { hb.member_id.clone() };
                    self.replace(&old_id, &id);
                    return Ok((id, false));
                }
            }
            if self.members.len() >= self.limits.max_size {
                return Err((GroupError::GroupMaxSizeReached, format!("group {} is full", self.id)));
            }
            let id = if hb.member_id.is_empty() { self.next_member_id() } else { hb.member_id.clone() };
            let m = Member::new(&id, hb.rebalance_timeout_ms);
            self.members.insert(id.clone(), m);
            return Ok((id, true));
        }
        let Some(m) = self.members.get_mut(&hb.member_id) else {
            return Err((GroupError::UnknownMemberId, format!("member {} is not in group {}", hb.member_id, self.id)));
        };
        if hb.member_epoch == 0 {
            // KAFKA-19233: a known member rejoining after losing its partitions.
            m.assigned.clear();
            m.pending_revocation.clear();
            m.state = MemberState::Stable;
            m.previous_epoch = m.epoch;
            m.epoch = 0;
            m.rebalance_deadline = None;
            return Ok((hb.member_id.clone(), false));
        }
        let fenced = || {
            let message =
                format!("member {} is at epoch {}, the coordinator knows {}", hb.member_id, hb.member_epoch, m.epoch);
            (GroupError::FencedMemberEpoch, message)
        };
        if hb.member_epoch > m.epoch {
            return Err(fenced());
        }
        if hb.member_epoch < m.epoch {
            // Its answer carrying the new epoch was lost: accepted if it owns no more than it was given.
            let subset = hb.owned.as_ref().is_some_and(|owned| {
                owned.iter().all(|(t, ps)| ps.iter().all(|p| m.assigned.get(t).is_some_and(|a| a.contains(p))))
            });
            if hb.member_epoch != m.previous_epoch || !subset {
                return Err(fenced());
            }
        }
        Ok((hb.member_id.clone(), false))
    }

    /// Leave (-1), or a static member's temporary leave (-2: it keeps its partitions reserved
    /// until its session expires).
    fn leave(&mut self, hb: &Heartbeat) -> Result<Beat, (GroupError, String)> {
        let id = match (&hb.instance_id, hb.member_epoch) {
            (Some(instance), -2) => {
                self.members.values().find(|m| m.instance_id.as_ref() == Some(instance)).map(|m| m.id.clone())
            }
            _ => self.members.contains_key(&hb.member_id).then(|| hb.member_id.clone()),
        };
        let Some(id) = id else {
            return Err((GroupError::UnknownMemberId, format!("member {} is not in group {}", hb.member_id, self.id)));
        };
        if hb.member_epoch == -2 {
            let m = self.members.get_mut(&id).expect("found");
            m.pending_revocation.clear();
            m.epoch = -2;
            m.rebalance_deadline = None;
        } else {
            self.remove(&id);
        }
        Ok(Beat {
            member_id: id,
            member_epoch: hb.member_epoch,
            heartbeat_interval_ms: self.limits.heartbeat_interval_ms,
            assignment: None,
        })
    }

    /// A static member comes back under a new member id: it is the old one at epoch 0, its
    /// target carried over.
    fn replace(&mut self, old_id: &str, id: &str) {
        let mut m = self.members.remove(old_id).expect("a member");
        let target = self.target.remove(old_id);
        m.id = id.to_string();
        m.epoch = 0;
        m.previous_epoch = 0;
        m.state = MemberState::Stable;
        if let Some(t) = target {
            self.target.insert(id.to_string(), t);
        }
        self.members.insert(id.to_string(), m);
    }

    /// Fence a member out: it and its target go, the group epoch moves.
    fn remove(&mut self, id: &str) {
        self.members.remove(id);
        self.target.remove(id);
        self.group_epoch += 1;
    }

    /// Fence members whose session expired, or that kept partitions to revoke past their
    /// rebalance timeout. The members removed.
    pub fn tick(&mut self, now: i64) -> Vec<String> {
        let expired: Vec<String> = self.members.values().filter(|m| m.is_due(now)).map(|m| m.id.clone()).collect();
        for id in &expired {
            self.remove(id);
        }
        expired
    }

    /// Whether [`ConsumerGroup::tick`] at `now` would fence anyone (the sweep copies a group
    /// only then, to write what changed).
    pub fn has_due(&self, now: i64) -> bool {
        self.members.values().any(|m| m.is_due(now))
    }

    /// The subscribed topics that exist, with their ids and partition counts, and the topics
    /// each member regular expression matches (the whole name, as Kafka's RE2 `matches`).
    fn subscribed_metadata(&self, topics: &dyn Topics) -> (BTreeMap<String, TopicMeta>, BTreeMap<String, Vec<String>>) {
        let mut resolved: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let regexes: BTreeSet<&String> = self.members.values().filter_map(|m| m.regex.as_ref()).collect();
        if !regexes.is_empty() {
            let names = topics.names();
            for r in regexes {
                let Some(re) = full_match(r) else { continue };
                resolved.insert(r.clone(), names.iter().filter(|n| re.is_match(n)).cloned().collect());
            }
        }
        let mut out = BTreeMap::new();
        for m in self.members.values() {
            let matched = m.regex.as_ref().and_then(|r| resolved.get(r)).into_iter().flatten();
            for name in m.subscribed.iter().chain(matched) {
                if !out.contains_key(name) {
                    if let Some(meta) = topics.get(name) {
                        out.insert(name.clone(), meta);
                    }
                }
            }
        }
        (out, resolved)
    }

    /// A member's topics: the names it subscribed to and those its expression matched.
    fn member_topics(&self, m: &Member) -> Vec<TopicMeta> {
        let matched = m.regex.as_ref().and_then(|r| self.resolved.get(r)).into_iter().flatten();
        let names: BTreeSet<&String> = m.subscribed.iter().chain(matched).collect();
        names.into_iter().filter_map(|n| self.metadata.get(n).copied()).collect()
    }

    /// A new target assignment at the group epoch.
    fn compute_target(&mut self) {
        let subscriptions: BTreeMap<String, Vec<TopicMeta>> =
            self.members.iter().map(|(id, m)| (id.clone(), self.member_topics(m))).collect();
        let instances: BTreeMap<String, Option<String>> =
            self.members.iter().map(|(id, m)| (id.clone(), m.instance_id.clone())).collect();
        self.target = match self.assignor() {
            "range" => assignor::range(&subscriptions, &instances),
            _ => assignor::uniform(&subscriptions, &self.target),
        };
        self.assignment_epoch = self.group_epoch;
    }

    /// Move one member towards its target (Kafka's CurrentAssignmentBuilder); `owned` is what
    /// it reported owning (`None`: unchanged, counted as still owning).
    fn reconcile(&mut self, id: &str, owned: Option<&Assignment>, now: i64) {
        let target = self.target.get(id).cloned().unwrap_or_default();
        let target_epoch = self.assignment_epoch;
        // What the other members still hold.
        let mut held = BTreeSet::new();
        for (other, m) in &self.members {
            if other != id {
                for (t, ps) in m.assigned.iter().chain(m.pending_revocation.iter()) {
                    held.extend(ps.iter().map(|p| (*t, *p)));
                }
            }
        }
        let m = self.members.get_mut(id).expect("a member");
        let still_owns = |revoking: &Assignment| {
            owned.is_none_or(|o| revoking.iter().any(|(t, ps)| o.get(t).is_some_and(|q| !q.is_disjoint(ps))))
        };
        let from_epoch = match m.state {
            MemberState::Stable if m.epoch == target_epoch => return,
            MemberState::Stable | MemberState::UnreleasedPartitions => m.epoch,
            MemberState::UnrevokedPartitions if still_owns(&m.pending_revocation) => return,
            MemberState::UnrevokedPartitions => m.epoch + 1,
        };
        let mut keep = Assignment::new();
        let mut revoke = Assignment::new();
        for (t, ps) in &m.assigned {
            for p in ps {
                let kept = target.get(t).is_some_and(|q| q.contains(p));
                (if kept { &mut keep } else { &mut revoke }).entry(*t).or_default().insert(*p);
            }
        }
        let mut add = Assignment::new();
        let mut unreleased = false;
        for (t, ps) in &target {
            for p in ps {
                if keep.get(t).is_some_and(|q| q.contains(p)) {
                    continue;
                }
                if held.contains(&(*t, *p)) {
                    unreleased = true;
                } else {
                    add.entry(*t).or_default().insert(*p);
                }
            }
        }
        let previous = m.epoch;
        if !revoke.is_empty() && still_owns(&revoke) {
            m.state = MemberState::UnrevokedPartitions;
            m.epoch = from_epoch;
            m.assigned = keep;
            m.pending_revocation = revoke;
            if m.classic.is_none() {
                m.rebalance_deadline = Some(now + m.rebalance_timeout_ms.max(0) as i64);
            }
        } else {
            for (t, ps) in add {
                keep.entry(t).or_default().extend(ps);
            }
            m.state = if unreleased { MemberState::UnreleasedPartitions } else { MemberState::Stable };
            m.epoch = target_epoch;
            m.assigned = keep;
            m.pending_revocation.clear();
            if m.classic.is_none() {
                m.rebalance_deadline = None;
            }
        }
        if m.epoch != previous {
            m.previous_epoch = previous;
        }
    }
}

#[cfg(test)]
mod tests;
