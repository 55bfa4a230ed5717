//! Classic members inside a consumer group and the conversions between the protocols
//! (KIP-848's online migration), against the pure group: every step keeps a partition with
//! one owner at most, and the groups settle with every partition assigned once.

use super::*;
use crate::groups::consumer::{Beat, Heartbeat};
use crate::groups::group::{Group, GroupLimits, GroupState};
use std::collections::BTreeMap;

/// Topics "a" (6 partitions) and "b" (3), by name and by id.
struct Ab;

impl Topics for Ab {
    fn get(&self, name: &str) -> Option<(Uuid, i32)> {
        match name {
            "a" => Some((Uuid([1; 16]), 6)),
            "b" => Some((Uuid([2; 16]), 3)),
            _ => None,
        }
    }

    fn name_of(&self, id: Uuid) -> Option<String> {
        match id.0[0] {
            1 => Some("a".into()),
            2 => Some("b".into()),
            _ => None,
        }
    }
}

fn tp(topic: &str, partitions: &[i32]) -> TopicPartition {
    TopicPartition { topic: topic.into(), partitions: partitions.to_vec(), ..Default::default() }
}

/// A classic consumer's subscription (v1: with the partitions it owns).
fn subscription(topics: &[&str], owned: Vec<TopicPartition>) -> Bytes {
    let s = Subscription {
        topics: topics.iter().map(|t| t.to_string()).collect(),
        owned_partitions: owned,
        ..Default::default()
    };
    embedded::encode(s, 1)
}

fn classic_join(id: &str, topics: &[&str], owned: Vec<TopicPartition>) -> Join {
    Join {
        member_id: id.into(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 20_000,
        protocol_type: "consumer".into(),
        protocols: vec![("cooperative-sticky".into(), subscription(topics, owned))],
        require_known_member_id: true,
        ..Default::default()
    }
}

/// What a member owns, by topic name (as a classic consumer reports it).
fn owned_by_name(g: &ConsumerGroup, id: &str) -> Vec<TopicPartition> {
    by_name(&g.member(id).unwrap().assigned, &Ab)
}

fn consumer_join(g: &mut ConsumerGroup, id: &str, now: i64) -> Beat {
    let hb = Heartbeat {
        member_id: id.into(),
        member_epoch: 0,
        rebalance_timeout_ms: 30_000,
        subscribed_topic_names: Some(vec!["a".into(), "b".into()]),
        owned: Some(Assignment::new()),
        ..Default::default()
    };
    g.heartbeat(hb, &Ab, now).unwrap()
}

/// One round as well-behaved clients of each protocol make it: a consumer-protocol member
/// heartbeats with what it owns; a classic member heartbeats and, when told to, rejoins with
/// what it owns (a cooperative consumer) and syncs.
fn round(g: &mut ConsumerGroup, now: i64) {
    let ids: Vec<String> = g.members().map(|m| m.id.clone()).collect();
    for id in ids {
        let m = g.member(&id).unwrap().clone();
        if m.classic.is_none() {
            let hb = Heartbeat {
                member_id: id.clone(),
                member_epoch: m.epoch,
                owned: Some(m.assigned.clone()),
                ..Default::default()
            };
            g.heartbeat(hb, &Ab, now).unwrap();
        } else if let Err((e, _)) = g.classic_heartbeat(&id, None, m.epoch, now) {
            assert_eq!(e, GroupError::RebalanceInProgress);
            let topics: Vec<&str> = m.subscribed.iter().map(String::as_str).collect();
            let joined = g.classic_join(classic_join(&id, &topics, owned_by_name(g, &id)), &Ab, now).unwrap();
            let synced = g.classic_sync(&id, None, joined.generation, (Some("consumer"), None), &Ab, now);
            if let Ok(bytes) = synced {
                let a: embedded::Assignment = embedded::decode(&bytes).unwrap();
                assert_eq!(a.assigned_partitions, owned_by_name(g, &id), "SyncGroup hands out its partitions");
            }
        }
        check(g);
    }
}

/// No partition has two owners; epochs are ordered.
fn check(g: &ConsumerGroup) {
    let mut seen = BTreeSet::new();
    for m in g.members() {
        for (t, ps) in m.assigned.iter().chain(m.pending_revocation.iter()) {
            for p in ps {
                assert!(seen.insert((*t, *p)), "partition {t:?}-{p} owned twice");
            }
        }
        assert!(m.epoch <= g.assignment_epoch);
    }
}

/// Rounds until the group is Stable; then every partition of "a" and "b" has one owner.
fn settle(g: &mut ConsumerGroup, now: i64) {
    for _ in 0..20 {
        round(g, now);
        if g.state() == "Stable" && g.members().all(|m| m.epoch == g.group_epoch) {
            let mut owners: BTreeMap<(Uuid, i32), usize> = BTreeMap::new();
            for m in g.members() {
                for (t, ps) in &m.assigned {
                    ps.iter().for_each(|p| *owners.entry((*t, *p)).or_default() += 1);
                }
            }
            assert_eq!(owners.len(), 9, "every partition assigned: {owners:?}");
            return;
        }
    }
    panic!("did not settle: {}", g.state());
}

/// A classic group of two consumers, "c1" with a:0-2 and b:0, "c2" with the rest, at
/// generation 4.
fn classic_group() -> Exported {
    let assignment = |parts: Vec<TopicPartition>| {
        embedded::encode(embedded::Assignment { assigned_partitions: parts, ..Default::default() }, 1)
    };
    let member = |id: &str, parts: Vec<TopicPartition>| Migrating {
        member_id: id.into(),
        instance_id: None,
        client_id: "cl".into(),
        client_host: "/127.0.0.1".into(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 20_000,
        protocols: vec![("cooperative-sticky".into(), subscription(&["a", "b"], vec![]))],
        assignment: assignment(parts),
    };
    Exported {
        generation: 4,
        protocol: Some("cooperative-sticky".into()),
        members: vec![
            member("c1", vec![tp("a", &[0, 1, 2]), tp("b", &[0])]),
            member("c2", vec![tp("a", &[3, 4, 5]), tp("b", &[1, 2])]),
        ],
    }
}

/// Upgrade: the classic members become stable members at the classic generation holding
/// their last assignments; a consumer-protocol member joins (the epoch moves), the classic
/// members are told to rejoin on their next heartbeat, give up partitions through JoinGroup
/// and get their new ones through SyncGroup, and the group settles across both protocols.
#[test]
fn upgrade_then_mixed_members_settle() {
    let mut g = ConsumerGroup::from_classic("g", classic_group(), &Ab, ConsumerLimits::default(), 1, 0).unwrap();
    assert_eq!((g.group_epoch, g.assignment_epoch, g.state()), (4, 4, "Stable"));
    let c1 = g.member("c1").unwrap();
    assert_eq!((c1.epoch, c1.assigned.values().map(BTreeSet::len).sum::<usize>()), (4, 4));
    assert_eq!(g.target_of("c1"), c1.assigned);
    assert_eq!(g.classic_heartbeat("c1", None, 4, 0), Ok(()), "nothing changed yet");
    check(&g);
    let b = consumer_join(&mut g, "k1", 0);
    assert_eq!(b.member_epoch, 5);
    assert_eq!(g.classic_heartbeat("c1", None, 4, 0).unwrap_err().0, GroupError::RebalanceInProgress);
    assert_eq!(g.classic_heartbeat("c1", None, 3, 0).unwrap_err().0, GroupError::IllegalGeneration);
    settle(&mut g, 0);
    let loads: Vec<usize> = g.members().map(|m| m.assigned.values().map(BTreeSet::len).sum()).collect();
    assert_eq!(loads.iter().sum::<usize>(), 9);
    assert!(loads.iter().all(|&l| l == 3), "uniform across both protocols: {loads:?}");
}

/// A malformed ConsumerProtocol subscription stops an upgrade (the coordinator answers
/// GROUP_ID_NOT_FOUND and the classic group stays).
#[test]
fn malformed_metadata_refuses_upgrade() {
    let mut exported = classic_group();
    exported.members[1].protocols[0].1 = Bytes::from_static(&[0, 1, 0]);
    assert!(ConsumerGroup::from_classic("g", exported, &Ab, ConsumerLimits::default(), 1, 0).is_err());
}

/// JoinGroup into a consumer group: v4+ without a member id gets MEMBER_ID_REQUIRED and an id;
/// protocols no classic member shares are INCONSISTENT_GROUP_PROTOCOL; a member of the consumer
/// protocol cannot SyncGroup or LeaveGroup as a classic one (UNKNOWN_MEMBER_ID); a generation
/// that is not the member's epoch is ILLEGAL_GENERATION; a protocol name other than the one
/// it joined with is INCONSISTENT_GROUP_PROTOCOL.
#[test]
fn classic_requests_are_checked() {
    let mut g = ConsumerGroup::new("g", ConsumerLimits::default(), 1);
    consumer_join(&mut g, "k1", 0);
    let (e, id) = g.classic_join(classic_join("", &["a"], vec![]), &Ab, 0).unwrap_err();
    assert_eq!(e, GroupError::MemberIdRequired);
    assert!(!id.is_empty() && g.member(&id).is_none());
    let joined = g.classic_join(classic_join(&id, &["a"], vec![]), &Ab, 0).unwrap();
    assert_eq!((joined.member_id.as_str(), joined.protocol_name.as_str()), (id.as_str(), "cooperative-sticky"));
    let mut other = classic_join("x", &["a"], vec![]);
    other.protocols[0].0 = "range".into();
    assert_eq!(g.classic_join(other, &Ab, 0).unwrap_err().0, GroupError::InconsistentGroupProtocol);
    let k1 = g.member("k1").unwrap().epoch;
    assert_eq!(g.classic_sync("k1", None, k1, (None, None), &Ab, 0).unwrap_err().0, GroupError::UnknownMemberId);
    let gen = joined.generation;
    assert_eq!(g.classic_sync(&id, None, gen + 1, (None, None), &Ab, 0).unwrap_err().0, GroupError::IllegalGeneration);
    let wrong = (Some("consumer"), Some("range"));
    assert_eq!(g.classic_sync(&id, None, gen, wrong, &Ab, 0).unwrap_err().0, GroupError::InconsistentGroupProtocol);
    let answers = g.classic_leave(&[("k1".into(), None), (id.clone(), None), ("nobody".into(), None)]);
    assert_eq!(answers, vec![Err(GroupError::UnknownMemberId), Ok(()), Err(GroupError::UnknownMemberId)]);
    assert!(g.member(&id).is_none() && g.member("k1").is_some());
}

/// A classic member that joined but never sent its SyncGroup is fenced after its rebalance
/// timeout (20 s); one that synced lives on its own session timeout (30 s, not the group's
/// 45 s).
#[test]
fn classic_timers() {
    let mut g = ConsumerGroup::new("g", ConsumerLimits::default(), 1);
    consumer_join(&mut g, "k1", 0);
    let slow = |id: &str| Join { session_timeout_ms: 30_000, ..classic_join(id, &["a"], vec![]) };
    g.classic_join(slow("lazy"), &Ab, 0).unwrap();
    let j = g.classic_join(slow("busy"), &Ab, 0).unwrap();
    g.classic_sync("busy", None, j.generation, (None, None), &Ab, 0).unwrap();
    assert!(g.tick(19_999).is_empty());
    assert_eq!(g.tick(20_000), vec!["lazy".to_string()], "no SyncGroup within the rebalance timeout");
    assert_eq!(g.tick(30_000), vec!["busy".to_string()], "its own 30 s session");
}

/// Downgrade: once only classic members remain (the consumer-protocol member left), the
/// group may become classic: a stable classic group at the group epoch whose members hold
/// their targets in the ConsumerProtocol form; with a rebalance it starts rebalancing. The
/// policy and the classic size limit can forbid it.
#[test]
fn downgrade_to_a_classic_group() {
    let mut g = ConsumerGroup::from_classic("g", classic_group(), &Ab, ConsumerLimits::default(), 1, 0).unwrap();
    consumer_join(&mut g, "k1", 0);
    settle(&mut g, 0);
    assert!(!g.downgrade_due(1000), "a consumer-protocol member is still there");
    g.heartbeat(Heartbeat { member_id: "k1".into(), member_epoch: -1, ..Default::default() }, &Ab, 0).unwrap();
    assert!(g.downgrade_due(2) && !g.downgrade_due(1));
    let strict = ConsumerLimits { migration: MigrationPolicy::Upgrade, ..Default::default() };
    let mut kept = ConsumerGroup::from_classic("g", classic_group(), &Ab, strict, 1, 0).unwrap();
    consumer_join(&mut kept, "k1", 0);
    kept.heartbeat(Heartbeat { member_id: "k1".into(), member_epoch: -1, ..Default::default() }, &Ab, 0).unwrap();
    assert!(!kept.downgrade_due(1000), "the policy allows upgrades only");
    let assign = |member: &str, metadata: &[u8]| g.classic_assignment(member, metadata, &Ab);
    let c = Group::import("g", GroupLimits::default(), 1, g.group_epoch, g.classic_members(), &assign, false, 0);
    assert_eq!((c.state(), c.generation()), (GroupState::Stable, g.group_epoch));
    let described = c.describe();
    assert_eq!(described.protocol, "cooperative-sticky");
    for m in described.members {
        let a: embedded::Assignment = embedded::decode(&m.assignment).unwrap();
        assert_eq!(a.assigned_partitions, by_name(&g.target_of(&m.member_id), &Ab), "{}", m.member_id);
    }
    let c = Group::import("g", GroupLimits::default(), 1, g.group_epoch, g.classic_members(), &assign, true, 0);
    assert_eq!(c.state(), GroupState::PreparingRebalance);
}

/// A classic member's record keeps its protocols and session timeout across a replay.
#[test]
fn classic_members_replay() {
    let g = ConsumerGroup::from_classic("g", classic_group(), &Ab, ConsumerLimits::default(), 1, 0).unwrap();
    let mut back = ConsumerGroup::new("g", ConsumerLimits::default(), 1);
    for (k, v) in g.records() {
        back.replay(super::super::records::decode(&k, v.as_deref()).unwrap().unwrap(), 0);
    }
    assert_eq!(back.member("c1").unwrap().classic, g.member("c1").unwrap().classic);
    assert_eq!(back.member("c2").unwrap().assigned, g.member("c2").unwrap().assigned);
    assert_eq!(back.tick(10_000), vec!["c1".to_string(), "c2".to_string()], "their own session timeout");
}

proptest::proptest! {
    /// Members of both protocols joining, leaving, heartbeating and rejoining in any order
    /// (a classic member rejoins with what it owns, or, eager, with nothing after giving it all
    /// up): no partition ever has two owners, and the group settles with every partition
    /// assigned once.
    #[test]
    fn mixed_protocols_keep_the_invariants(steps in proptest::collection::vec((0u8..5, 0u8..5), 1..40)) {
        let mut g = ConsumerGroup::from_classic("p", classic_group(), &Ab, ConsumerLimits::default(), 3, 0).unwrap();
        for (op, who) in steps {
            let id = format!("m{who}");
            let known = g.member(&id).cloned();
            match (op, known) {
                (0, None) => {
                    consumer_join(&mut g, &id, 0);
                }
                (1, None) => {
                    g.classic_join(classic_join(&id, &["a", "b"], vec![]), &Ab, 0).unwrap();
                }
                (2, Some(m)) if m.classic.is_some() => {
                    g.classic_leave(&[(id.clone(), None)]);
                }
                (2, Some(_)) => {
                    g.heartbeat(Heartbeat { member_id: id.clone(), member_epoch: -1, ..Default::default() }, &Ab, 0)
                        .unwrap();
                }
                (3, Some(m)) if m.classic.is_some() => {
                    // An eager consumer: it gives up everything, then rejoins owning nothing.
                    g.classic_join(classic_join(&id, &["a", "b"], vec![]), &Ab, 0).unwrap();
                }
                (_, Some(_)) => round(&mut g, 0),
                _ => {}
            }
            check(&g);
        }
        if !g.is_empty() {
            settle(&mut g, 0);
        }
    }
}
