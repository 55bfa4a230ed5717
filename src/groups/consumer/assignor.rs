//! The server-side assignors of the consumer protocol (KIP-848): from each member's
//! subscribed topics (ids and partition counts of those that exist) to a target assignment.
//!
//! - **uniform** (the default): balanced (no member more than one partition above another
//!   among the members that could take it) and sticky: a member keeps what it had in the
//!   previous target while that stays balanced; free partitions go to the least-loaded
//!   subscriber; then partitions move from the most- to the least-loaded subscriber of their
//!   topic until no move helps.
//! - **range**: per topic, contiguous ranges over its subscribers in order (static members by
//!   instance id first, then the others by member id); the first `P % N` get one more.
//!
//! Both are deterministic: the same input gives the same target.

use super::{Assignment, TopicMeta};
use crate::types::Uuid;
use std::collections::{BTreeMap, BTreeSet};

/// The uniform assignor: `subscriptions` maps each member to the existing topics it
/// subscribes to; `previous` is the previous target.
pub fn uniform(
    subscriptions: &BTreeMap<String, Vec<TopicMeta>>,
    previous: &BTreeMap<String, Assignment>,
) -> BTreeMap<String, Assignment> {
    let mut subscribers: BTreeMap<Uuid, (i32, Vec<&str>)> = BTreeMap::new();
    for (member, topics) in subscriptions {
        for &(id, partitions) in topics {
            let entry = subscribers.entry(id).or_insert((partitions, Vec::new()));
            entry.1.push(member.as_str());
        }
    }
    let mut out: BTreeMap<String, Assignment> = subscriptions.keys().map(|m| (m.clone(), Assignment::new())).collect();
    let mut load: BTreeMap<&str, usize> = subscriptions.keys().map(|m| (m.as_str(), 0)).collect();
    let mut taken: BTreeSet<(Uuid, i32)> = BTreeSet::new();
    // Keep what each member had, if it still subscribes and the partition still exists.
    for (member, had) in previous {
        if !out.contains_key(member) {
            continue;
        }
        for (t, ps) in had {
            let Some((count, subs)) = subscribers.get(t) else { continue };
            if !subs.contains(&member.as_str()) {
                continue;
            }
            for &p in ps.iter().filter(|&&p| p < *count) {
                if taken.insert((*t, p)) {
                    out.get_mut(member).expect("a member").entry(*t).or_default().insert(p);
                    *load.get_mut(member.as_str()).expect("a member") += 1;
                }
            }
        }
    }
    // Free partitions to the least-loaded subscriber (ties: member id).
    for (t, (count, subs)) in &subscribers {
        for p in 0..*count {
            if taken.contains(&(*t, p)) {
                continue;
            }
            let to = *subs.iter().min_by_key(|m| (load[**m], **m)).expect("a topic has subscribers");
            out.get_mut(to).expect("a member").entry(*t).or_default().insert(p);
            *load.get_mut(to).expect("a member") += 1;
            taken.insert((*t, p));
        }
    }
    // Balance: move a partition from a member to a subscriber of its topic with at least two
    // fewer, until no such move is left (each move lowers the sum of squared loads).
    let mut moved = true;
    while moved {
        moved = false;
        let mut order: Vec<&str> = load.keys().copied().collect();
        order.sort_by_key(|m| (std::cmp::Reverse(load[m]), *m));
        'members: for from in order {
            let owned: Vec<(Uuid, i32)> =
                out[from].iter().flat_map(|(t, ps)| ps.iter().rev().map(move |p| (*t, *p))).collect();
            for (t, p) in owned {
                let subs = &subscribers[&t].1;
                let Some(to) = subs.iter().filter(|m| load[**m] + 1 < load[from]).min_by_key(|m| (load[**m], **m))
                else {
                    continue;
                };
                let to = *to;
                let from_set = out.get_mut(from).expect("a member").get_mut(&t).expect("owned");
                from_set.remove(&p);
                if from_set.is_empty() {
                    out.get_mut(from).expect("a member").remove(&t);
                }
                out.get_mut(to).expect("a member").entry(t).or_default().insert(p);
                *load.get_mut(from).expect("a member") -= 1;
                *load.get_mut(to).expect("a member") += 1;
                moved = true;
                break 'members;
            }
        }
    }
    out
}

/// The range assignor: per topic, contiguous ranges over its subscribers (static members by
/// instance id, then dynamic ones by member id).
pub fn range(
    subscriptions: &BTreeMap<String, Vec<TopicMeta>>,
    instances: &BTreeMap<String, Option<String>>,
) -> BTreeMap<String, Assignment> {
    let mut out: BTreeMap<String, Assignment> = subscriptions.keys().map(|m| (m.clone(), Assignment::new())).collect();
    let mut topics: BTreeMap<Uuid, (i32, Vec<&str>)> = BTreeMap::new();
    for (member, subscribed) in subscriptions {
        for &(id, partitions) in subscribed {
            topics.entry(id).or_insert((partitions, Vec::new())).1.push(member.as_str());
        }
    }
    for (t, (count, mut subs)) in topics {
        subs.sort_by_key(|m| match instances.get(*m).and_then(|i| i.as_deref()) {
            Some(instance) => (0, instance.to_string()),
            None => (1, m.to_string()),
        });
        let n = subs.len() as i32;
        let (quota, extra) = (count / n, count % n);
        let mut next = 0;
        for (i, m) in subs.iter().enumerate() {
            let take = quota + i32::from((i as i32) < extra);
            if take > 0 {
                out.get_mut(*m).expect("a member").entry(t).or_default().extend(next..next + take);
            }
            next += take;
        }
    }
    out
}
