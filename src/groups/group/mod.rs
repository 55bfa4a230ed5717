//! One consumer group's membership, as Kafka's classic group coordinator keeps it: a state
//! machine driven by JoinGroup, SyncGroup, Heartbeat and LeaveGroup and by the clock.
//!
//! ```text
//!            join (first member)              all members rejoined, or the rebalance
//!  Empty ───────────────────────► Preparing ─ deadline passed (laggards removed) ─► Completing
//!    ▲                           Rebalance  ◄──────── a member joins, leaves or ────  Rebalance
//!    │ last member gone              ▲                 expires; new protocols            │
//!    └───────────────────────────────┤                                                   │ leader's
//!                                    └──────────────────── Stable ◄──────────────────────┘ SyncGroup
//! ```
//!
//! Pure: no I/O, no runtime. Time comes in as `now` (ms); the owner calls [`Group::tick`]
//! often (the coordinator's sweep) so deadlines take effect. JoinGroup and SyncGroup answers
//! may wait for other members: they are delivered through oneshot channels, answered when the
//! rebalance completes, never dropped unanswered (a removed or fenced member gets its error).
//!
//! Invariants:
//! - `generation` only grows; every member answered a JoinGroup in `CompletingRebalance` or
//!   `Stable` holds the current generation;
//! - in `Stable` every member has an assignment (possibly empty) from the leader's SyncGroup;
//! - a static member (`group.instance.id`) maps to exactly one member id (`statics`).

mod messages;
mod migrate;

pub use messages::*;

use crate::groups::GroupError;
use bytes::Bytes;
use futures_channel::oneshot;
use std::collections::{BTreeMap, HashMap};

struct Member {
    instance_id: Option<String>,
    client_id: String,
    client_host: String,
    session_timeout_ms: i32,
    rebalance_timeout_ms: i32,
    protocol_type: String,
    protocols: Vec<(String, Bytes)>,
    assignment: Bytes,
    /// Its JoinGroup waits for the rebalance to complete.
    join: Option<oneshot::Sender<Joined>>,
    /// Its SyncGroup waits for the leader's.
    sync: Option<oneshot::Sender<Synced>>,
    /// When the session expires without a heartbeat.
    session_deadline: i64,
    /// When it joined (the leader is the earliest member).
    joined_seq: u64,
    /// CompletingRebalance: it sent its SyncGroup.
    synced: bool,
}

impl Member {
    fn metadata_for(&self, protocol: &str) -> Bytes {
        self.protocols.iter().find(|(n, _)| n == protocol).map(|(_, m)| m.clone()).unwrap_or_default()
    }

    /// A member waiting for a JoinGroup or SyncGroup answer is governed by the rebalance
    /// deadline, not its session.
    fn waiting(&self) -> bool {
        self.join.is_some() || self.sync.is_some()
    }
}

/// One consumer group.
pub struct Group {
    pub id: String,
    state: GroupState,
    generation: i32,
    protocol_type: Option<String>,
    protocol: Option<String>,
    leader: Option<String>,
    members: BTreeMap<String, Member>,
    /// group.instance.id -> member id.
    statics: HashMap<String, String>,
    /// Member ids handed out with MEMBER_ID_REQUIRED, not joined yet, with their expiry.
    pending: HashMap<String, i64>,
    /// PreparingRebalance: when it completes whoever has not rejoined.
    rebalance_deadline: i64,
    /// PreparingRebalance of an empty group: the initial delay's end (extended by joins).
    initial_delay_until: Option<i64>,
    /// CompletingRebalance: members that have not sent their SyncGroup by then are removed.
    sync_deadline: i64,
    join_seq: u64,
    limits: GroupLimits,
    ids: IdSource,
}

/// Member ids: `<client id>-<32 hex digits>`, unique within the process.
struct IdSource {
    state: u64,
}

impl IdSource {
    fn new(seed: u64) -> Self {
        IdSource { state: seed | 1 }
    }

    fn next(&mut self, client_id: &str) -> String {
        // splitmix64, twice: unique enough (no two members of a group share an id; a collision
        // across groups is harmless).
        let mut word = || {
            self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        let mut cut = client_id.len().min(MAX_CLIENT_ID_IN_MEMBER_ID);
        while !client_id.is_char_boundary(cut) {
            cut -= 1;
        }
        format!("{}-{:016x}{:016x}", &client_id[..cut], word(), word())
    }
}

impl Group {
    pub fn new(id: &str, limits: GroupLimits, seed: u64) -> Group {
        Group {
            id: id.to_string(),
            state: GroupState::Empty,
            generation: 0,
            protocol_type: None,
            protocol: None,
            leader: None,
            members: BTreeMap::new(),
            statics: HashMap::new(),
            pending: HashMap::new(),
            rebalance_deadline: 0,
            initial_delay_until: None,
            sync_deadline: 0,
            join_seq: 0,
            limits,
            ids: IdSource::new(seed ^ crc32c::crc32c(id.as_bytes()) as u64),
        }
    }

    pub fn state(&self) -> GroupState {
        self.state
    }

    pub fn generation(&self) -> i32 {
        self.generation
    }

    pub fn protocol_type(&self) -> Option<&str> {
        self.protocol_type.as_deref()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty() && self.pending.is_empty()
    }

    /// JoinGroup. The answer comes when the rebalance completes (or at once for an error, a
    /// MEMBER_ID_REQUIRED, or a static member rejoining a stable group unchanged).
    pub fn join(&mut self, j: Join, now: i64) -> Pending<Joined> {
        let (tx, rx) = oneshot::channel();
        if let Err(e) = self.try_join(j, now, tx) {
            let (error, member_id, tx) = e;
            let _ = tx.send(Joined::error(error, &member_id));
        }
        rx
    }

    #[allow(clippy::result_large_err)]
    fn try_join(
        &mut self,
        j: Join,
        now: i64,
        tx: oneshot::Sender<Joined>,
    ) -> Result<(), (GroupError, String, oneshot::Sender<Joined>)> {
        let fail = |e: GroupError, tx| Err((e, j.member_id.clone(), tx));
        if self.state == GroupState::Dead {
            return fail(GroupError::CoordinatorNotAvailable, tx);
        }
        if !(self.limits.min_session_timeout_ms..=self.limits.max_session_timeout_ms).contains(&j.session_timeout_ms) {
            return fail(GroupError::InvalidSessionTimeout, tx);
        }
        if j.protocol_type.is_empty() || j.protocols.is_empty() || j.protocols.len() > MAX_PROTOCOLS {
            return fail(GroupError::InconsistentGroupProtocol, tx);
        }
        let compatible = match &self.protocol_type {
            _ if self.members.is_empty() => true,
            Some(t) if *t != j.protocol_type => false,
            _ => self.supported_by_all(&j.protocols).next().is_some(),
        };
        if !compatible {
            return fail(GroupError::InconsistentGroupProtocol, tx);
        }
        // A member keeps the instance id it joined with; a stale mapping (never expected) is
        // dropped rather than trusted.
        if let Some(instance) = &j.instance_id {
            if self.statics.get(instance).is_some_and(|id| !self.members.contains_key(id)) {
                self.statics.remove(instance);
            }
        }
        if let Some(m) = self.members.get(&j.member_id).filter(|_| !j.member_id.is_empty()) {
            if m.instance_id != j.instance_id {
                let e =
                    if j.instance_id.is_some() { GroupError::FencedInstanceId } else { GroupError::UnknownMemberId };
                return fail(e, tx);
            }
        }
        // Static membership (KIP-345): the instance id names the member.
        if let Some(instance) = j.instance_id.clone() {
            match self.statics.get(&instance).cloned() {
                Some(current) if j.member_id.is_empty() => return self.rejoin_static(j, current, now, tx),
                Some(current) if j.member_id != current => return fail(GroupError::FencedInstanceId, tx),
                Some(_) => {}
                None if !j.member_id.is_empty() => return fail(GroupError::UnknownMemberId, tx),
                None => {}
            }
        }
        let member_id = if j.member_id.is_empty() {
            let id = self.ids.next(&j.client_id);
            if j.require_known_member_id && j.instance_id.is_none() {
                // KIP-394: hand out the id; the member joins with it.
                self.pending.insert(id.clone(), now + j.session_timeout_ms as i64);
                return fail_with_id(GroupError::MemberIdRequired, id, tx);
            }
            id
        } else if self.members.contains_key(&j.member_id) || self.pending.remove(&j.member_id).is_some() {
            j.member_id.clone()
        } else {
            return fail(GroupError::UnknownMemberId, tx);
        };
        if !self.members.contains_key(&member_id) && self.members.len() >= self.limits.max_size {
            return fail(GroupError::GroupMaxSizeReached, tx);
        }
        let changed = self.members.get(&member_id).is_none_or(|m| m.protocols != j.protocols);
        self.upsert(&member_id, j, now, Some(tx));
        match self.state {
            GroupState::PreparingRebalance => {
                if let Some(until) = self.initial_delay_until.as_mut() {
                    // A new member extends the initial delay, up to the rebalance deadline.
                    *until = (now + self.limits.initial_rebalance_delay_ms as i64).min(self.rebalance_deadline);
                }
                self.maybe_complete_join(now);
            }
            GroupState::Empty => self.prepare_rebalance(now),
            GroupState::CompletingRebalance | GroupState::Stable => {
                let is_leader = self.leader.as_deref() == Some(member_id.as_str());
                let completing = self.state == GroupState::CompletingRebalance;
                if changed || (is_leader && !completing) {
                    self.prepare_rebalance(now);
                } else {
                    // The same protocols: its current state, at once (a follower in Stable, or
                    // anyone who missed its JoinGroup answer while the group completes).
                    self.answer_join_now(&member_id);
                }
            }
            GroupState::Dead => unreachable!("refused above"),
        }
        Ok(())
    }

    /// A static member rejoining without its member id: it gets a new one, the old one is
    /// fenced; in a stable group whose protocol it still supports no rebalance happens.
    #[allow(clippy::result_large_err)]
    fn rejoin_static(
        &mut self,
        j: Join,
        old_id: String,
        now: i64,
        tx: oneshot::Sender<Joined>,
    ) -> Result<(), (GroupError, String, oneshot::Sender<Joined>)> {
        let new_id = self.ids.next(&j.client_id);
        let mut old = self.members.remove(&old_id).expect("statics maps to members (checked in try_join)");
        if let Some(w) = old.join.take() {
            let _ = w.send(Joined::error(GroupError::FencedInstanceId, &old_id));
        }
        if let Some(w) = old.sync.take() {
            let _ = w.send(Synced::error(GroupError::FencedInstanceId));
        }
        // Kafka's rule: no rebalance unless the group's protocol would change. (Metadata bytes
        // differ on every restart: a consumer's subscription carries its owned partitions.)
        let keeps_protocol = old.protocol_type == j.protocol_type
            && self.protocol.as_ref().is_some_and(|p| j.protocols.iter().any(|(n, _)| n == p));
        self.members.insert(new_id.clone(), old);
        self.statics.insert(j.instance_id.clone().expect("static"), new_id.clone());
        let was_leader = self.leader.as_deref() == Some(old_id.as_str());
        if was_leader {
            self.leader = Some(new_id.clone());
        }
        let skip_supported = j.skip_assignment_supported;
        if self.state == GroupState::Stable && keeps_protocol {
            self.upsert(&new_id, j, now, None);
            let mut answer = self.joined_for(&new_id);
            if was_leader {
                if skip_supported {
                    answer.skip_assignment = true;
                } else {
                    // Before JoinGroup v9 a leader cannot be told to skip its assignment: it is
                    // answered as a follower (the old leader id, no members), as Kafka does.
                    answer.leader = old_id;
                    answer.members.clear();
                }
            }
            let _ = tx.send(answer);
            return Ok(());
        }
        self.upsert(&new_id, j, now, Some(tx));
        match self.state {
            GroupState::PreparingRebalance => self.maybe_complete_join(now),
            _ => self.prepare_rebalance(now),
        }
        Ok(())
    }

    fn upsert(&mut self, member_id: &str, j: Join, now: i64, join: Option<oneshot::Sender<Joined>>) {
        self.join_seq += 1;
        let seq = self.join_seq;
        let m = self.members.entry(member_id.to_string()).or_insert_with(|| Member {
            instance_id: None,
            client_id: String::new(),
            client_host: String::new(),
            session_timeout_ms: 0,
            rebalance_timeout_ms: 0,
            protocol_type: String::new(),
            protocols: Vec::new(),
            assignment: Bytes::new(),
            join: None,
            sync: None,
            session_deadline: 0,
            joined_seq: seq,
            synced: false,
        });
        if let Some(old) = m.join.take() {
            // A second JoinGroup from the same member replaces the first, which is answered.
            let _ = old.send(Joined::error(GroupError::RebalanceInProgress, member_id));
        }
        if m.protocols.is_empty() {
            // A new member: its instance id is fixed for its life.
            m.instance_id = j.instance_id.clone();
        }
        m.client_id = j.client_id;
        m.client_host = j.client_host;
        m.session_timeout_ms = j.session_timeout_ms;
        m.rebalance_timeout_ms = if j.rebalance_timeout_ms > 0 { j.rebalance_timeout_ms } else { j.session_timeout_ms };
        m.protocol_type = j.protocol_type.clone();
        m.protocols = j.protocols;
        m.join = join;
        m.session_deadline = now + m.session_timeout_ms as i64;
        if let Some(instance) = m.instance_id.clone() {
            self.statics.insert(instance, member_id.to_string());
        }
        if self.protocol_type.is_none() || self.members.len() == 1 {
            self.protocol_type = Some(j.protocol_type);
        }
    }

    /// The protocols of `offered` every current member supports.
    fn supported_by_all<'a>(&'a self, offered: &'a [(String, Bytes)]) -> impl Iterator<Item = &'a str> + 'a {
        let sets: Vec<std::collections::HashSet<&str>> =
            self.members.values().map(|m| m.protocols.iter().map(|(p, _)| p.as_str()).collect()).collect();
        offered.iter().map(|(n, _)| n.as_str()).filter(move |n| sets.iter().all(|s| s.contains(n)))
    }

    /// The protocol the group agrees on: each member votes for its first choice among the
    /// ones every member supports; the most votes win (ties: the name first in order).
    fn select_protocol(&self) -> Option<String> {
        let mut support: HashMap<&str, usize> = HashMap::new();
        for m in self.members.values() {
            for (p, _) in &m.protocols {
                *support.entry(p.as_str()).or_default() += 1;
            }
        }
        let n = self.members.len();
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some((choice, _)) = m.protocols.iter().find(|(p, _)| support.get(p.as_str()) == Some(&n)) {
                *votes.entry(choice.as_str()).or_default() += 1;
            }
        }
        votes.into_iter().max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(a.0))).map(|(n, _)| n.to_string())
    }

    fn prepare_rebalance(&mut self, now: i64) {
        // Waiting SyncGroups of the old generation must rejoin.
        for m in self.members.values_mut() {
            if let Some(w) = m.sync.take() {
                let _ = w.send(Synced::error(GroupError::RebalanceInProgress));
            }
        }
        let timeout = self.members.values().map(|m| m.rebalance_timeout_ms).max().unwrap_or(0) as i64;
        let from_empty = self.state == GroupState::Empty;
        self.state = GroupState::PreparingRebalance;
        self.rebalance_deadline = now + timeout;
        self.initial_delay_until =
            from_empty.then(|| (now + self.limits.initial_rebalance_delay_ms as i64).min(self.rebalance_deadline));
        self.maybe_complete_join(now);
    }

    /// Complete the join phase when every member has rejoined (and the initial delay is over),
    /// or when the deadline passed (members that did not rejoin are removed).
    fn maybe_complete_join(&mut self, now: i64) {
        if self.state != GroupState::PreparingRebalance {
            return;
        }
        let delayed = self.initial_delay_until.is_some_and(|until| now < until);
        let all_joined = self.members.values().all(|m| m.join.is_some()) && self.pending.is_empty();
        let expired = now >= self.rebalance_deadline;
        if !(expired || (all_joined && !delayed)) {
            return;
        }
        // Dynamic members that did not rejoin are gone; static ones stay until their session
        // expires (KIP-345: a restarting static member keeps its place).
        let laggards: Vec<String> = self
            .members
            .iter()
            .filter(|(_, m)| m.join.is_none() && m.instance_id.is_none())
            .map(|(id, _)| id.clone())
            .collect();
        for id in laggards {
            self.remove_member(&id);
        }
        self.initial_delay_until = None;
        self.generation += 1;
        if self.members.is_empty() {
            self.state = GroupState::Empty;
            self.protocol = None;
            self.leader = None;
            return;
        }
        self.protocol = self.select_protocol();
        if self.leader.as_ref().is_none_or(|l| !self.members.contains_key(l)) {
            self.leader = self.members.iter().min_by_key(|(_, m)| m.joined_seq).map(|(id, _)| id.clone());
        }
        self.state = GroupState::CompletingRebalance;
        let timeout = self.members.values().map(|m| m.rebalance_timeout_ms).max().unwrap_or(0) as i64;
        self.sync_deadline = now + timeout;
        let ids: Vec<String> = self.members.keys().cloned().collect();
        for id in ids {
            let answer = self.joined_for(&id);
            let m = self.members.get_mut(&id).expect("member");
            m.assignment = Bytes::new();
            m.synced = false;
            m.session_deadline = now + m.session_timeout_ms as i64;
            if let Some(w) = m.join.take() {
                let _ = w.send(answer);
            }
        }
    }

    /// The JoinGroup answer of a member of the current generation.
    fn joined_for(&self, member_id: &str) -> Joined {
        let leader = self.leader.clone().unwrap_or_default();
        let protocol = self.protocol.clone().unwrap_or_default();
        let members = if leader == member_id {
            let mut ms: Vec<(&String, &Member)> = self.members.iter().collect();
            ms.sort_by_key(|(_, m)| m.joined_seq);
            ms.into_iter()
                .map(|(id, m)| JoinedMember {
                    member_id: id.clone(),
                    instance_id: m.instance_id.clone(),
                    metadata: m.metadata_for(&protocol),
                })
                .collect()
        } else {
            Vec::new()
        };
        Joined {
            error: None,
            generation: self.generation,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol.clone(),
            leader,
            skip_assignment: false,
            member_id: member_id.to_string(),
            members,
        }
    }

    fn answer_join_now(&mut self, member_id: &str) {
        let answer = self.joined_for(member_id);
        if let Some(w) = self.members.get_mut(member_id).and_then(|m| m.join.take()) {
            let _ = w.send(answer);
        }
    }

    fn remove_member(&mut self, member_id: &str) {
        if let Some(mut m) = self.members.remove(member_id) {
            if let Some(w) = m.join.take() {
                let _ = w.send(Joined::error(GroupError::UnknownMemberId, member_id));
            }
            if let Some(w) = m.sync.take() {
                let _ = w.send(Synced::error(GroupError::UnknownMemberId));
            }
            if let Some(instance) = m.instance_id {
                if self.statics.get(&instance).is_some_and(|id| id == member_id) {
                    self.statics.remove(&instance);
                }
            }
        }
        if self.leader.as_deref() == Some(member_id) {
            self.leader = None;
        }
    }

    /// A member is gone (left or expired): the rest rebalance.
    fn member_gone(&mut self, member_id: &str, now: i64) {
        self.remove_member(member_id);
        match self.state {
            GroupState::Stable | GroupState::CompletingRebalance => {
                if self.members.is_empty() {
                    self.generation += 1;
                    self.state = GroupState::Empty;
                    self.protocol = None;
                } else {
                    self.prepare_rebalance(now);
                }
            }
            GroupState::PreparingRebalance => self.maybe_complete_join(now),
            GroupState::Empty | GroupState::Dead => {}
        }
    }

    /// Check a request's member and generation: the error to answer, if any.
    fn check_member(&self, member_id: &str, instance_id: Option<&str>, generation: Option<i32>) -> Option<GroupError> {
        if self.state == GroupState::Dead {
            return Some(GroupError::CoordinatorNotAvailable);
        }
        if let Some(instance) = instance_id {
            match self.statics.get(instance) {
                Some(current) if current != member_id => return Some(GroupError::FencedInstanceId),
                _ => {}
            }
        }
        if !self.members.contains_key(member_id) {
            return Some(GroupError::UnknownMemberId);
        }
        match generation {
            Some(g) if g != self.generation => Some(GroupError::IllegalGeneration),
            _ => None,
        }
    }

    /// SyncGroup: followers wait for the leader's assignments; the leader's completes the
    /// rebalance for everyone.
    pub fn sync(&mut self, s: Sync, now: i64) -> Pending<Synced> {
        let (tx, rx) = oneshot::channel();
        if let Some(e) = self.check_member(&s.member_id, s.instance_id.as_deref(), Some(s.generation)) {
            let _ = tx.send(Synced::error(e));
            return rx;
        }
        let mismatch =
            |mine: &Option<String>, theirs: &Option<String>| theirs.as_ref().is_some_and(|t| Some(t) != mine.as_ref());
        if mismatch(&self.protocol_type, &s.protocol_type) || mismatch(&self.protocol, &s.protocol_name) {
            let _ = tx.send(Synced::error(GroupError::InconsistentGroupProtocol));
            return rx;
        }
        match self.state {
            GroupState::PreparingRebalance => {
                let _ = tx.send(Synced::error(GroupError::RebalanceInProgress));
            }
            GroupState::Stable => {
                let m = self.members.get_mut(&s.member_id).expect("checked");
                m.session_deadline = now + m.session_timeout_ms as i64;
                let _ = tx.send(self.synced(&s.member_id));
            }
            GroupState::CompletingRebalance => {
                let m = self.members.get_mut(&s.member_id).expect("checked");
                m.session_deadline = now + m.session_timeout_ms as i64;
                m.synced = true;
                if let Some(old) = m.sync.replace(tx) {
                    let _ = old.send(Synced::error(GroupError::RebalanceInProgress));
                }
                if self.leader.as_deref() == Some(s.member_id.as_str()) {
                    let given: HashMap<String, Bytes> = s.assignments.into_iter().collect();
                    for (id, m) in self.members.iter_mut() {
                        m.assignment = given.get(id).cloned().unwrap_or_default();
                    }
                    self.state = GroupState::Stable;
                    let ids: Vec<String> = self.members.keys().cloned().collect();
                    for id in ids {
                        let answer = self.synced(&id);
                        if let Some(w) = self.members.get_mut(&id).and_then(|m| m.sync.take()) {
                            let _ = w.send(answer);
                        }
                    }
                }
            }
            GroupState::Empty | GroupState::Dead => {
                let _ = tx.send(Synced::error(GroupError::UnknownMemberId));
            }
        }
        rx
    }

    fn synced(&self, member_id: &str) -> Synced {
        Synced {
            error: None,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol.clone(),
            assignment: self.members.get(member_id).map(|m| m.assignment.clone()).unwrap_or_default(),
        }
    }

    /// Heartbeat: keeps the session alive; tells a member when it must rejoin.
    pub fn heartbeat(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        now: i64,
    ) -> Result<(), GroupError> {
        if let Some(e) = self.check_member(member_id, instance_id, Some(generation)) {
            return Err(e);
        }
        let m = self.members.get_mut(member_id).expect("checked");
        m.session_deadline = now + m.session_timeout_ms as i64;
        match self.state {
            GroupState::PreparingRebalance => Err(GroupError::RebalanceInProgress),
            _ => Ok(()),
        }
    }

    /// LeaveGroup of one member, by member id or (v3+) by instance id.
    pub fn leave(&mut self, member_id: &str, instance_id: Option<&str>, now: i64) -> Result<(), GroupError> {
        let id = match instance_id {
            Some(instance) => match self.statics.get(instance) {
                None => return Err(GroupError::UnknownMemberId),
                Some(current) if !member_id.is_empty() && current != member_id => {
                    return Err(GroupError::FencedInstanceId)
                }
                Some(current) => current.clone(),
            },
            None => member_id.to_string(),
        };
        if self.pending.remove(&id).is_some() {
            self.maybe_complete_join(now);
            return Ok(());
        }
        if !self.members.contains_key(&id) {
            return Err(GroupError::UnknownMemberId);
        }
        self.member_gone(&id, now);
        Ok(())
    }

    /// OffsetCommit's membership check: `None` to accept. A commit outside any generation
    /// (generation -1, no member id: a standalone consumer or an admin) is accepted while the
    /// group has no members.
    /// A commit from a member counts as a heartbeat (in Stable and PreparingRebalance).
    pub fn check_commit(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        now: i64,
    ) -> Option<GroupError> {
        if generation < 0 && member_id.is_empty() {
            return (!self.members.is_empty()).then_some(GroupError::UnknownMemberId);
        }
        if let Some(e) = self.check_member(member_id, instance_id, Some(generation)) {
            return Some(e);
        }
        if self.state == GroupState::CompletingRebalance {
            return Some(GroupError::RebalanceInProgress);
        }
        let m = self.members.get_mut(member_id).expect("checked");
        m.session_deadline = now + m.session_timeout_ms as i64;
        None
    }

    /// Deadlines: expired sessions, the end of a rebalance, expired pending member ids.
    pub fn tick(&mut self, now: i64) {
        self.pending.retain(|_, until| *until > now);
        let expired: Vec<String> = self
            .members
            .iter()
            .filter(|(_, m)| !m.waiting() && m.session_deadline <= now)
            .map(|(id, _)| id.clone())
            .collect();
        for id in expired {
            tracing::info!(group = self.id, member = id, "member session expired");
            self.member_gone(&id, now);
        }
        if self.state == GroupState::CompletingRebalance && now >= self.sync_deadline {
            // Members that never sent their SyncGroup (a leader that cannot assign, say) are
            // removed so the others are not stuck waiting.
            let unsynced: Vec<String> =
                self.members.iter().filter(|(_, m)| !m.synced).map(|(id, _)| id.clone()).collect();
            for id in unsynced {
                tracing::info!(group = self.id, member = id, "member did not sync in time");
                self.member_gone(&id, now);
            }
        }
        self.maybe_complete_join(now);
    }

    pub fn describe(&self) -> Description {
        let protocol = self.protocol.clone().unwrap_or_default();
        let with_metadata = self.state == GroupState::Stable;
        let mut ms: Vec<(&String, &Member)> = self.members.iter().collect();
        ms.sort_by_key(|(_, m)| m.joined_seq);
        Description {
            state: self.state,
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            protocol: if with_metadata { protocol.clone() } else { String::new() },
            members: ms
                .into_iter()
                .map(|(id, m)| MemberDescription {
                    member_id: id.clone(),
                    instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    metadata: if with_metadata { m.metadata_for(&protocol) } else { Bytes::new() },
                    assignment: if self.state == GroupState::Stable { m.assignment.clone() } else { Bytes::new() },
                })
                .collect(),
        }
    }

    /// The chosen protocol's metadata of each member (a consumer's subscription), or `None`
    /// while no generation has chosen a protocol.
    pub fn member_metadata(&self) -> Option<Vec<Bytes>> {
        let protocol = self.protocol.as_ref()?;
        Some(self.members.values().map(|m| m.metadata_for(protocol)).collect())
    }

    /// DeleteGroups may delete only a group without members.
    pub fn deletable(&self) -> Result<(), GroupError> {
        if self.members.is_empty() {
            Ok(())
        } else {
            Err(GroupError::NonEmptyGroup)
        }
    }
}

fn fail_with_id(
    e: GroupError,
    member_id: String,
    tx: oneshot::Sender<Joined>,
) -> Result<(), (GroupError, String, oneshot::Sender<Joined>)> {
    Err((e, member_id, tx))
}

#[cfg(test)]
mod tests;
