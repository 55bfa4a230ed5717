//! The consumer protocol's group (KIP-848): reconciliation, epochs, assignors, timeouts.

use super::*;
use proptest::prelude::*;

fn topic(n: u8) -> Uuid {
    Uuid([n; 16])
}

/// Topics "a" (6 partitions) and "b" (3).
fn topics(name: &str) -> Option<TopicMeta> {
    match name {
        "a" => Some((topic(1), 6)),
        "b" => Some((topic(2), 3)),
        _ => None,
    }
}

fn join(g: &mut ConsumerGroup, id: &str, subscribed: &[&str], now: i64) -> Beat {
    let hb = Heartbeat {
        member_id: id.into(),
        member_epoch: 0,
        rebalance_timeout_ms: 30_000,
        subscribed_topic_names: Some(subscribed.iter().map(|s| s.to_string()).collect()),
        owned: Some(Assignment::new()),
        ..Default::default()
    };
    g.heartbeat(hb, &topics, now).unwrap()
}

/// A member's next heartbeat, as a well-behaved client sends it: its epoch and what it owns
/// (what it was given, minus what it was asked to revoke: revocation is immediate).
fn beat(g: &mut ConsumerGroup, id: &str, now: i64) -> Result<Beat, (GroupError, String)> {
    let m = g.member(id).expect("a member").clone();
    let hb = Heartbeat {
        member_id: id.into(),
        member_epoch: m.epoch,
        owned: Some(m.assigned.clone()),
        ..Default::default()
    };
    g.heartbeat(hb, &topics, now)
}

fn count(a: &Assignment) -> usize {
    a.values().map(BTreeSet::len).sum()
}

/// No partition is owned (assigned or pending revocation) by two members; epochs ordered.
fn check_invariants(g: &ConsumerGroup) {
    let mut seen = BTreeSet::new();
    for m in g.members() {
        for (t, ps) in m.assigned.iter().chain(m.pending_revocation.iter()) {
            for p in ps {
                assert!(seen.insert((*t, *p)), "partition {t:?}-{p} owned twice");
            }
        }
        assert!(m.epoch <= g.assignment_epoch, "member epoch {} > assignment epoch {}", m.epoch, g.assignment_epoch);
    }
    assert!(g.assignment_epoch <= g.group_epoch);
}

/// Heartbeat every member in turn until nothing changes; the group ends Stable.
fn settle(g: &mut ConsumerGroup, now: i64) {
    for _ in 0..20 {
        let ids: Vec<String> = g.members().map(|m| m.id.clone()).collect();
        for id in ids {
            beat(g, &id, now).unwrap();
            check_invariants(g);
        }
        if g.state() == "Stable" {
            return;
        }
    }
    panic!("group did not settle: {}", g.state());
}

/// A first member gets every partition at once, at epoch 1; a second one joins: the first is
/// asked to revoke half (its epoch stays until it does), the second gets them only once they
/// are released; both end Stable at the new epoch, 3 partitions each, the first keeping 3 of
/// its own (sticky).
#[test]
fn members_join_revoke_and_settle() {
    let mut g = ConsumerGroup::new("g", ConsumerLimits::default(), 7);
    let b = join(&mut g, "m1", &["a"], 0);
    assert_eq!((b.member_epoch, count(&b.assignment.clone().unwrap())), (1, 6));
    assert_eq!(g.state(), "Stable");
    let b2 = join(&mut g, "m2", &["a"], 0);
    assert_eq!(b2.member_epoch, 2);
    assert_eq!(count(&b2.assignment.unwrap()), 0, "nothing free yet: m1 still owns it all");
    assert_eq!(g.member("m2").unwrap().state, MemberState::UnreleasedPartitions);
    // m1 learns it must revoke 3.
    let b1 = beat(&mut g, "m1", 0).unwrap();
    assert_eq!(b1.member_epoch, 1, "the epoch moves only once the revocation is done");
    assert_eq!(count(&b1.assignment.unwrap()), 3);
    assert_eq!(count(&g.member("m1").unwrap().pending_revocation), 3);
    settle(&mut g, 0);
    let (m1, m2) = (g.member("m1").unwrap(), g.member("m2").unwrap());
    assert_eq!((m1.epoch, m2.epoch, count(&m1.assigned), count(&m2.assigned)), (2, 2, 3, 3));
}

/// A heartbeat from a newer epoch than the coordinator's, or an older one that is not the
/// member's previous epoch, is FENCED_MEMBER_EPOCH; the previous epoch with a subset of its
/// partitions (a lost answer) is accepted; an unknown member is UNKNOWN_MEMBER_ID; epoch 0 from
/// a known member starts it over.
#[test]
fn epochs_are_checked() {
    let mut g = ConsumerGroup::new("g", ConsumerLimits::default(), 7);
    join(&mut g, "m1", &["a"], 0);
    join(&mut g, "m2", &["a"], 0);
    settle(&mut g, 0);
    let m1 = g.member("m1").unwrap().clone();
    let at = |epoch: i32, owned: Option<Assignment>| Heartbeat {
        member_id: "m1".into(),
        member_epoch: epoch,
        owned,
        ..Default::default()
    };
    assert_eq!(g.heartbeat(at(m1.epoch + 1, None), &topics, 0).unwrap_err().0, GroupError::FencedMemberEpoch);
    assert_eq!(
        g.heartbeat(at(m1.previous_epoch, Some(m1.assigned.clone())), &topics, 0).unwrap().member_epoch,
        m1.epoch
    );
    let mut more = m1.assigned.clone();
    more.entry(topic(9)).or_default().insert(0);
    assert_eq!(
        g.heartbeat(at(m1.previous_epoch, Some(more)), &topics, 0).unwrap_err().0,
        GroupError::FencedMemberEpoch
    );
    let unknown = Heartbeat { member_id: "zz".into(), member_epoch: 3, ..Default::default() };
    assert_eq!(g.heartbeat(unknown, &topics, 0).unwrap_err().0, GroupError::UnknownMemberId);
    let again = g.heartbeat(at(0, Some(Assignment::new())), &topics, 0).unwrap();
    assert_eq!(count(&again.assignment.unwrap()), 3, "its target given back at once (nobody else holds it)");
}

/// Leaving (-1) frees a member's partitions for the others at once; a session that expires
/// does the same; a static member's temporary leave (-2) keeps its partitions reserved, and
/// the same instance coming back under a new member id gets them again; a second live member
/// with the same instance id is UNRELEASED_INSTANCE_ID.
#[test]
fn leave_expiry_and_static_members() {
    let limits = ConsumerLimits { session_timeout_ms: 1000, ..Default::default() };
    let mut g = ConsumerGroup::new("g", limits, 7);
    join(&mut g, "m1", &["a", "b"], 0);
    join(&mut g, "m2", &["a", "b"], 0);
    settle(&mut g, 0);
    let leave = Heartbeat { member_id: "m2".into(), member_epoch: -1, ..Default::default() };
    assert_eq!(g.heartbeat(leave, &topics, 0).unwrap().member_epoch, -1);
    settle(&mut g, 0);
    assert_eq!(count(&g.member("m1").unwrap().assigned), 9);
    join(&mut g, "m3", &["a"], 0);
    settle(&mut g, 500);
    assert!(g.tick(1400).is_empty() || g.member("m1").is_none());
    beat(&mut g, "m1", 1400).unwrap();
    assert_eq!(g.tick(1600), vec!["m3".to_string()], "m3 did not heartbeat since 500");
    settle(&mut g, 1600);
    assert_eq!(count(&g.member("m1").unwrap().assigned), 9);
    // Static membership.
    let mut g = ConsumerGroup::new("s", ConsumerLimits::default(), 7);
    let st = |id: &str, epoch: i32| Heartbeat {
        member_id: id.into(),
        member_epoch: epoch,
        instance_id: Some("i1".into()),
        rebalance_timeout_ms: 30_000,
        subscribed_topic_names: Some(vec!["a".into()]),
        owned: Some(Assignment::new()),
        ..Default::default()
    };
    g.heartbeat(st("x1", 0), &topics, 0).unwrap();
    join(&mut g, "d", &["a"], 0);
    settle(&mut g, 0);
    let had = g.member("x1").unwrap().assigned.clone();
    assert_eq!(g.heartbeat(st("x2", 0), &topics, 0).unwrap_err().0, GroupError::UnreleasedInstanceId);
    assert_eq!(g.heartbeat(st("x1", -2), &topics, 0).unwrap().member_epoch, -2);
    beat(&mut g, "d", 0).unwrap();
    assert_eq!(count(&g.member("d").unwrap().assigned), 3, "the static member's partitions stay reserved");
    let back = g.heartbeat(st("x2", 0), &topics, 0).unwrap();
    assert_eq!(back.assignment.unwrap(), had, "the same partitions under the new member id");
    assert!(g.member("x1").is_none());
}

/// The range assignor gives contiguous ranges, the first members one more; the group uses the
/// assignor most members ask for.
#[test]
fn range_assignor_by_majority() {
    let mut g = ConsumerGroup::new("g", ConsumerLimits::default(), 7);
    for id in ["m1", "m2", "m3", "m4"] {
        let hb = Heartbeat {
            member_id: id.into(),
            member_epoch: 0,
            rebalance_timeout_ms: 1000,
            subscribed_topic_names: Some(vec!["a".into()]),
            server_assignor: Some(if id == "m4" { "uniform" } else { "range" }.into()),
            owned: Some(Assignment::new()),
            ..Default::default()
        };
        g.heartbeat(hb, &topics, 0).unwrap();
    }
    settle(&mut g, 0);
    assert_eq!(g.assignor(), "range");
    let got: Vec<Vec<i32>> = ["m1", "m2", "m3", "m4"]
        .iter()
        .map(|m| g.target_of(m).get(&topic(1)).map_or(vec![], |s| s.iter().copied().collect()))
        .collect();
    assert_eq!(got, vec![vec![0, 1], vec![2, 3], vec![4], vec![5]]);
}

proptest! {
    /// Random joins, leaves, subscription changes and heartbeats: after every step no
    /// partition has two owners and epochs are ordered; once every member heartbeats until
    /// nothing changes, the group is Stable, every subscribed partition is assigned to exactly
    /// one subscriber, and the uniform assignor's loads of members with the same subscription
    /// differ by at most one.
    #[test]
    fn random_membership_keeps_the_invariants(steps in proptest::collection::vec((0u8..4, 0u8..5, 0u8..3), 1..40)) {
        let mut g = ConsumerGroup::new("p", ConsumerLimits::default(), 3);
        let subs = [vec!["a"], vec!["b"], vec!["a", "b"]];
        for (op, who, sub) in steps {
            let id = format!("m{who}");
            match (op, g.member(&id).is_some()) {
                (0, false) => { join(&mut g, &id, &subs[sub as usize], 0); }
                (1, true) => {
                    let leave = Heartbeat { member_id: id.clone(), member_epoch: -1, ..Default::default() };
                    g.heartbeat(leave, &topics, 0).unwrap();
                }
                (2, true) => {
                    let m = g.member(&id).unwrap().clone();
                    let hb = Heartbeat {
                        member_id: id.clone(),
                        member_epoch: m.epoch,
                        subscribed_topic_names: Some(subs[sub as usize].iter().map(|s| s.to_string()).collect()),
                        owned: Some(m.assigned.clone()),
                        ..Default::default()
                    };
                    g.heartbeat(hb, &topics, 0).unwrap();
                }
                (_, true) => { beat(&mut g, &id, 0).unwrap(); }
                _ => {}
            }
            check_invariants(&g);
        }
        if g.is_empty() {
            return Ok(());
        }
        settle(&mut g, 0);
        let mut owners: BTreeMap<(Uuid, i32), usize> = BTreeMap::new();
        for m in g.members() {
            for (t, ps) in &m.assigned {
                for p in ps {
                    *owners.entry((*t, *p)).or_default() += 1;
                }
            }
        }
        for name in ["a", "b"] {
            let (t, n) = topics(name).unwrap();
            let subscribed = g.members().any(|m| m.subscribed.iter().any(|s| s == name));
            for p in 0..n {
                prop_assert_eq!(owners.get(&(t, p)).copied().unwrap_or(0), usize::from(subscribed), "{}-{}", name, p);
            }
        }
        for s in &subs {
            let loads: Vec<usize> = g.members().filter(|m| m.subscribed == *s).map(|m| count(&m.assigned)).collect();
            if let (Some(lo), Some(hi)) = (loads.iter().min(), loads.iter().max()) {
                prop_assert!(hi - lo <= 1, "{:?}: loads {:?}", s, loads);
            }
        }
    }
}

/// Replaying a group's records (all of them, or a snapshot then the records of each later
/// change) gives back the same group: epochs, members with their subscriptions, assignments,
/// pending revocations and targets; a member removed and the group's tombstones replay too.
#[test]
fn records_replay_to_the_same_group() {
    fn replay(records: &[records::Record], into: &mut Option<ConsumerGroup>) {
        for (k, v) in records {
            let r = records::decode(k, v.as_deref()).unwrap().expect("a consumer group record");
            if r.ends_group() {
                *into = None;
                continue;
            }
            into.get_or_insert_with(|| ConsumerGroup::new("g", ConsumerLimits::default(), 1)).replay(r, 0);
        }
    }
    fn same(a: &ConsumerGroup, b: &ConsumerGroup) {
        assert_eq!((a.group_epoch, a.assignment_epoch), (b.group_epoch, b.assignment_epoch));
        assert_eq!(a.target, b.target);
        let view = |g: &ConsumerGroup| {
            g.members()
                .map(|m| {
                    (
                        m.id.clone(),
                        m.subscribed.clone(),
                        m.epoch,
                        m.previous_epoch,
                        m.state,
                        m.assigned.clone(),
                        m.pending_revocation.clone(),
                    )
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(view(a), view(b));
    }
    let mut g = ConsumerGroup::new("g", ConsumerLimits::default(), 7);
    join(&mut g, "m1", &["a", "b"], 0);
    let mut replayed = None;
    replay(&g.records_since(None), &mut replayed);
    same(&g, replayed.as_ref().unwrap());
    type Step = Box<dyn Fn(&mut ConsumerGroup)>;
    let steps: Vec<Step> = vec![
        Box::new(|g| {
            join(g, "m2", &["a"], 0);
        }),
        Box::new(|g| {
            beat(g, "m1", 0).unwrap();
        }),
        Box::new(|g| settle(g, 0)),
        Box::new(|g| {
            let leave = Heartbeat { member_id: "m1".into(), member_epoch: -1, ..Default::default() };
            g.heartbeat(leave, &topics, 0).unwrap();
        }),
        Box::new(|g| settle(g, 0)),
    ];
    for step in steps {
        let before = g.clone();
        step(&mut g);
        replay(&g.records_since(Some(&before)), &mut replayed);
        same(&g, replayed.as_ref().unwrap());
        let mut whole = None;
        replay(&g.records(), &mut whole);
        same(&g, whole.as_ref().unwrap());
    }
    assert!(g.member("m1").is_none() && replayed.as_ref().unwrap().member("m1").is_none());
    // The group's end.
    let leave = Heartbeat { member_id: "m2".into(), member_epoch: -1, ..Default::default() };
    g.heartbeat(leave, &topics, 0).unwrap();
    let before = g.clone();
    replay(&before.records_since(Some(&before)), &mut replayed);
    replay(&g.tombstones(), &mut replayed);
    assert!(replayed.is_none());
}

/// Topics "a", "b" and, after `grown`, "a2": for regular-expression subscriptions.
struct Named {
    grown: bool,
}

impl Topics for Named {
    fn get(&self, name: &str) -> Option<TopicMeta> {
        match name {
            "a2" if self.grown => Some((topic(3), 2)),
            _ => topics(name),
        }
    }
    fn names(&self) -> Vec<String> {
        let mut n = vec!["a".to_string(), "b".to_string()];
        if self.grown {
            n.push("a2".into());
        }
        n
    }
}

/// KIP-848 regular-expression subscriptions: the expression matches whole topic names (`a.*`
/// takes "a" and later "a2", never "b"); a topic created later that matches bumps the group
/// epoch at the next heartbeat and is assigned; an expression that does not compile is not a
/// subscription.
#[test]
fn regex_subscriptions_follow_new_topics() {
    let mut g = ConsumerGroup::new("r", ConsumerLimits::default(), 7);
    let hb = Heartbeat {
        member_id: "m".into(),
        member_epoch: 0,
        rebalance_timeout_ms: 1000,
        subscribed_topic_names: Some(vec![]),
        subscribed_topic_regex: Some("a.*".into()),
        owned: Some(Assignment::new()),
        ..Default::default()
    };
    let b = g.heartbeat(hb, &Named { grown: false }, 0).unwrap();
    assert_eq!(b.assignment.unwrap().keys().copied().collect::<Vec<_>>(), vec![topic(1)]);
    let epoch = g.group_epoch;
    let m = g.member("m").unwrap().clone();
    let again = Heartbeat {
        member_id: "m".into(),
        member_epoch: m.epoch,
        owned: Some(m.assigned.clone()),
        ..Default::default()
    };
    let b = g.heartbeat(again, &Named { grown: true }, 0).unwrap();
    assert_eq!(g.group_epoch, epoch + 1, "a new matching topic moves the group epoch");
    let got = b.assignment.unwrap();
    assert_eq!(got.keys().copied().collect::<Vec<_>>(), vec![topic(1), topic(3)]);
    assert_eq!(count(&got), 8);
    assert!(full_match("a.*").unwrap().is_match("a2") && !full_match("a").unwrap().is_match("a2"));
    assert!(full_match("(unclosed").is_none());
    // Unbalanced the other way: wrapped, it would read `^(?:a)|(b)$` and match "ax" and "xb".
    assert!(full_match("a)|(b").is_none());
    assert!(full_match("a|ab").unwrap().is_match("ab"), "leftmost-first must not stop at \"a\"");
}
