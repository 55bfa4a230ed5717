//! A classic group converted to a consumer group and back (KIP-848's online migration; the
//! consumer group's side is [`crate::groups::consumer`]'s `classic` module).

use super::*;

impl Group {
    /// Whether its members are consumers (protocol type `consumer`): only such a group can
    /// become a consumer group.
    pub fn uses_consumer_protocol(&self) -> bool {
        self.protocol_type.as_deref() == Some("consumer")
    }

    /// How many members it has.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// The group as a consumer group takes it over: its generation, protocol and members with
    /// their last assignments.
    pub fn export(&self) -> Exported {
        let mut ms: Vec<(&String, &Member)> = self.members.iter().collect();
        ms.sort_by_key(|(_, m)| m.joined_seq);
        let members = ms
            .into_iter()
            .map(|(id, m)| Migrating {
                member_id: id.clone(),
                instance_id: m.instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                session_timeout_ms: m.session_timeout_ms,
                rebalance_timeout_ms: m.rebalance_timeout_ms,
                protocols: m.protocols.clone(),
                assignment: m.assignment.clone(),
            })
            .collect();
        Exported { generation: self.generation, protocol: self.protocol.clone(), members }
    }

    /// The group is gone (converted): every JoinGroup and SyncGroup still waiting is answered
    /// REBALANCE_IN_PROGRESS, so its member joins again, wherever the group now is.
    pub fn dissolve(mut self) {
        for (id, m) in self.members.iter_mut() {
            if let Some(w) = m.join.take() {
                let _ = w.send(Joined::error(GroupError::RebalanceInProgress, id));
            }
            if let Some(w) = m.sync.take() {
                let _ = w.send(Synced::error(GroupError::RebalanceInProgress));
            }
        }
    }

    /// A consumer group's classic members as a classic group: stable at `generation`, each
    /// member's assignment from `assign` (its id and its metadata for the protocol the group
    /// chose). With `rebalance`, a rebalance starts at once, so the members rejoin.
    #[allow(clippy::too_many_arguments)]
    pub fn import(
        id: &str,
        limits: GroupLimits,
        seed: u64,
        generation: i32,
        members: Vec<Migrating>,
        assign: &dyn Fn(&str, &[u8]) -> Bytes,
        rebalance: bool,
        now: i64,
    ) -> Group {
        let mut g = Group::new(id, limits, seed);
        g.generation = generation;
        g.protocol_type = Some("consumer".to_string());
        for m in members {
            g.join_seq += 1;
            if let Some(instance) = &m.instance_id {
                g.statics.insert(instance.clone(), m.member_id.clone());
            }
            let member = Member {
                instance_id: m.instance_id,
                client_id: m.client_id,
                client_host: m.client_host,
                session_timeout_ms: m.session_timeout_ms,
                rebalance_timeout_ms: m.rebalance_timeout_ms,
                protocol_type: "consumer".to_string(),
                protocols: m.protocols,
                assignment: Bytes::new(),
                join: None,
                sync: None,
                session_deadline: now + m.session_timeout_ms as i64,
                joined_seq: g.join_seq,
                synced: true,
            };
            g.members.insert(m.member_id, member);
        }
        g.protocol = g.select_protocol();
        let protocol = g.protocol.clone().unwrap_or_default();
        for (id, m) in g.members.iter_mut() {
            m.assignment = assign(id, &m.metadata_for(&protocol));
        }
        g.state = if g.members.is_empty() { GroupState::Empty } else { GroupState::Stable };
        if rebalance && !g.members.is_empty() {
            g.prepare_rebalance(now);
        }
        g
    }
}
