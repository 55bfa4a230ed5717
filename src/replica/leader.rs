//! A led partition's replication state, without I/O: each follower's progress, the ISR as the
//! metadata has it, the ISR change being committed, and the high watermark they allow. The
//! shard's replication feeds it (placements, followers' fetches, the outcomes of ISR
//! proposals) and carries out what it answers (the high watermark, the proposals to send).
//!
//! Invariants (Kafka's, `Partition.scala` and `AlterPartitionManager`):
//! - the high watermark is the smallest durable end among the ISR and the members a pending
//!   expansion would add (the "maximal ISR"); a follower not heard from in this leadership
//!   counts at the high watermark as it is, so it never moves back;
//! - one ISR change at a time; it stays pending until its outcome is known: a newer partition
//!   epoch from the metadata (it, or another, committed), or a refusal that says it was not
//!   applied (INELIGIBLE_REPLICA and the like). A timeout or a lost answer says nothing: the same
//!   proposal is sent again after a pause, and a resend of a committed change refused as stale
//!   (INVALID_UPDATE_VERSION) waits for the metadata. The outcome of one proposal never settles
//!   another.

use crate::cluster::types::PartitionState;
use crate::protocol::errors::{self as code, ErrorCode};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// A partition this shard leads, as replication sees it.
#[derive(Debug)]
pub(super) struct Led {
    pub(super) leader_epoch: i32,
    pub(super) partition_epoch: i32,
    pub(super) replicas: Vec<i32>,
    pub(super) isr: Vec<i32>,
    /// The log end when this leadership began: a follower joins the ISR only past it (it then
    /// has everything of this epoch's start, Kafka's rule), and readers' offset lookups wait
    /// until the high watermark reaches it (KIP-207).
    pub(super) epoch_start: i64,
    followers: BTreeMap<i32, Follower>,
    pending: Option<Pending>,
}

/// A follower of a partition this shard leads.
#[derive(Debug, Clone, Copy)]
struct Follower {
    /// Its durable end (its last fetch offset); `None` until it fetches in this leadership,
    /// and again after it left the ISR (its copy may be another now: a lost disk).
    end: Option<i64>,
    /// When it last fetched, and this leader's durable end then.
    last_fetch: Instant,
    leader_end_at_last_fetch: i64,
    /// When it last had everything this leader had (Kafka's lastCaughtUpTime).
    caught_up: Instant,
    /// The broker epoch its last fetch named (KIP-903; -1: none named).
    broker_epoch: i64,
}

impl Follower {
    fn new(now: Instant) -> Follower {
        Follower { end: None, last_fetch: now, leader_end_at_last_fetch: -1, caught_up: now, broker_epoch: -1 }
    }
}

/// An ISR change: the ISR proposed, the partition epoch it was made from, and the broker epoch
/// each follower in it fetched with (KIP-903: the controller refuses a member registered anew
/// since).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Proposal {
    pub(super) isr: Vec<i32>,
    pub(super) partition_epoch: i32,
    pub(super) broker_epochs: BTreeMap<i32, i64>,
}

/// A proposal whose outcome is not known yet; `retry_at`: when to send it again (its last
/// sending got no answer that settles it).
#[derive(Debug)]
struct Pending {
    proposal: Proposal,
    retry_at: Option<Instant>,
}

/// What became of a proposal that did not come back committed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Outcome {
    /// The controller answered with this code.
    Refused(ErrorCode),
    /// No answer that says whether it committed (a timeout, the controller out of reach, or
    /// committed but not yet applied on this node).
    Unknown,
}

impl Led {
    /// A new leadership of `state` by `node`, at log end `log_end`: followers start unknown,
    /// counted as caught up now (Kafka).
    pub(super) fn new(node: i32, state: &PartitionState, log_end: i64, now: Instant) -> Led {
        let followers = state.replicas.iter().filter(|r| **r != node).map(|r| (*r, Follower::new(now))).collect();
        Led {
            leader_epoch: state.leader_epoch,
            partition_epoch: state.partition_epoch,
            replicas: state.replicas.clone(),
            isr: state.isr.clone(),
            epoch_start: log_end,
            followers,
            pending: None,
        }
    }

    /// The metadata published `state` for this leadership (same leader epoch): a newer
    /// partition epoch settles the pending change (it, or another, committed); a follower that
    /// left the ISR must fetch again before its progress counts.
    pub(super) fn update(&mut self, node: i32, state: &PartitionState, now: Instant) {
        crate::invariant!(state.leader_epoch == self.leader_epoch, "a new leader epoch is a new leadership");
        if self.partition_epoch != state.partition_epoch {
            self.pending = None;
        }
        for (r, f) in self.followers.iter_mut() {
            if self.isr.contains(r) && !state.isr.contains(r) {
                f.end = None;
            }
        }
        self.partition_epoch = state.partition_epoch;
        self.isr = state.isr.clone();
        self.replicas = state.replicas.clone();
        for r in state.replicas.iter().filter(|r| **r != node) {
            self.followers.entry(*r).or_insert(Follower::new(now));
        }
        self.followers.retain(|r, _| state.replicas.contains(r));
    }

    /// Whether `replica` is one of this partition's followers.
    pub(super) fn has_follower(&self, replica: i32) -> bool {
        self.followers.contains_key(&replica)
    }

    /// A follower fetched at `fetch_offset` (its durable end) while this leader's durable end
    /// was `leader_end`, naming broker epoch `broker_epoch` (-1: none). A new broker epoch is a
    /// new incarnation: what the old one fetched says nothing of its copy.
    pub(super) fn fetched(
        &mut self,
        replica: i32,
        fetch_offset: i64,
        leader_end: i64,
        broker_epoch: i64,
        now: Instant,
    ) {
        let Some(f) = self.followers.get_mut(&replica) else { return };
        if f.broker_epoch != broker_epoch {
            *f = Follower { broker_epoch, ..Follower::new(f.last_fetch) };
        }
        if fetch_offset >= leader_end {
            f.caught_up = now;
        } else if fetch_offset >= f.leader_end_at_last_fetch {
            f.caught_up = f.last_fetch;
        }
        f.last_fetch = now;
        f.leader_end_at_last_fetch = leader_end;
        f.end = Some(fetch_offset);
    }

    /// The replicas' high watermark given the current one, `hw`: the smallest durable end in
    /// the maximal ISR (never below `hw`); `i64::MAX` (the durable end alone) with no other
    /// member; `None` for a partition with one replica (not replicated).
    pub(super) fn high_watermark(&self, node: i32, hw: i64) -> Option<i64> {
        if self.replicas.len() < 2 {
            return None;
        }
        let pending = self.pending.iter().flat_map(|p| p.proposal.isr.iter()).filter(|r| !self.isr.contains(r));
        let members = self.isr.iter().chain(pending).filter(|r| **r != node);
        let ends = members.map(|r| self.followers.get(r).and_then(|f| f.end).unwrap_or(hw));
        Some(ends.min().map_or(i64::MAX, |m| m.max(hw)))
    }

    /// The ISR change to send now, if any: the pending one when its retry is due; otherwise,
    /// with none pending, followers not caught up for `lag` leave and followers at the high
    /// watermark `hw` past this leadership's start join. A new change becomes the pending one
    /// (the caller moves the high watermark again: an expansion's members count at once).
    pub(super) fn proposal_due(&mut self, node: i32, hw: i64, now: Instant, lag: Duration) -> Option<Proposal> {
        if self.replicas.len() < 2 {
            return None;
        }
        if let Some(p) = self.pending.as_mut() {
            let due = p.retry_at.is_some_and(|at| at <= now);
            if due {
                p.retry_at = None;
                return Some(p.proposal.clone());
            }
            return None;
        }
        let mut isr = self.isr.clone();
        isr.retain(|r| *r == node || self.followers.get(r).is_some_and(|f| now.duration_since(f.caught_up) < lag));
        for (r, f) in &self.followers {
            let in_sync = f.end.is_some_and(|e| e >= hw && e >= self.epoch_start);
            if !isr.contains(r) && in_sync && now.duration_since(f.caught_up) < lag {
                isr.push(*r);
            }
        }
        if !isr.contains(&node) {
            isr.insert(0, node);
        }
        if isr == self.isr {
            return None;
        }
        let broker_epochs = isr
            .iter()
            .filter_map(|r| self.followers.get(r).filter(|f| f.broker_epoch >= 0).map(|f| (*r, f.broker_epoch)))
            .collect();
        let proposal = Proposal { isr, partition_epoch: self.partition_epoch, broker_epochs };
        self.pending = Some(Pending { proposal: proposal.clone(), retry_at: None });
        Some(proposal)
    }

    /// `proposal` did not come back committed: drop it where the controller says it was not
    /// applied; wait for the metadata where the controller says this leader's view is stale;
    /// send it again after `backoff` otherwise. Whether the pending change went (the caller
    /// moves the high watermark again). A proposal that is not the pending one changes nothing.
    pub(super) fn settle(&mut self, proposal: &Proposal, outcome: Outcome, now: Instant, backoff: Duration) -> bool {
        let Some(p) = self.pending.as_mut().filter(|p| p.proposal == *proposal) else { return false };
        match outcome {
            // Kafka's INELIGIBLE_REPLICA (and OPERATION_NOT_ATTEMPTED): the controller checked
            // the change against the current partition epoch and did not apply it. The others
            // here are refusals of a change no controller could apply.
            Outcome::Refused(c)
                if c == code::INELIGIBLE_REPLICA
                    || c == code::INVALID_REQUEST
                    || c == code::UNKNOWN_TOPIC_OR_PARTITION =>
            {
                self.pending = None;
                true
            }
            // The leadership or the partition moved on: the metadata will say how, and settles
            // the change then ([`Led::update`], or a new leadership).
            Outcome::Refused(c) if c == code::FENCED_LEADER_EPOCH || c == code::INVALID_UPDATE_VERSION => false,
            Outcome::Refused(_) | Outcome::Unknown => {
                p.retry_at = Some(now + backoff);
                false
            }
        }
    }

    /// The pending change, if any.
    #[cfg(test)]
    fn pending(&self) -> Option<&Proposal> {
        self.pending.as_ref().map(|p| &p.proposal)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODE: i32 = 1;
    const LAG: Duration = Duration::from_secs(30);
    const BACKOFF: Duration = Duration::from_millis(500);

    fn state(isr: &[i32], partition_epoch: i32) -> PartitionState {
        let mut s = PartitionState::new(vec![1, 2, 3], isr.to_vec());
        s.leader = NODE;
        s.leader_epoch = 4;
        s.partition_epoch = partition_epoch;
        s
    }

    /// Node 1 leads with ISR [1, 2], log end 100; follower 2 is at 100 and follower 3, out of
    /// the ISR, has caught up to 100 too: the expansion to [1, 2, 3] is proposed.
    fn expanding(now: Instant) -> (Led, Proposal) {
        let mut l = Led::new(NODE, &state(&[1, 2], 7), 100, now);
        l.fetched(2, 100, 100, -1, now);
        l.fetched(3, 100, 100, -1, now);
        let p = l.proposal_due(NODE, 100, now, LAG).expect("an expansion is due");
        assert_eq!(p, Proposal { isr: vec![1, 2, 3], partition_epoch: 7, broker_epochs: BTreeMap::new() });
        (l, p)
    }

    /// A pending expansion counts its new member in the high watermark, and keeps counting it
    /// when the proposal's outcome is unknown (a timeout: the change may have committed, and
    /// the new member may already be electable). Kafka keeps the pending ISR until a newer
    /// partition epoch or a refusal that says it was not applied; the old code dropped it on
    /// every error, and the high watermark then passed records member 3 did not have.
    #[test]
    fn an_expansion_of_unknown_outcome_still_holds_the_high_watermark() {
        let now = Instant::now();
        let (mut l, p) = expanding(now);
        // Leader and member 2 reach 150; the joining member 3 stays at 100.
        l.fetched(2, 150, 150, -1, now);
        assert_eq!(l.high_watermark(NODE, 100), Some(100), "member 3 (pending) holds it");
        assert!(!l.settle(&p, Outcome::Unknown, now, BACKOFF));
        assert_eq!(l.high_watermark(NODE, 100), Some(100), "still held after a timeout");
        assert!(!l.settle(&p, Outcome::Refused(code::REQUEST_TIMED_OUT), now, BACKOFF));
        assert_eq!(l.pending(), Some(&p));
        // No other change is proposed meanwhile; the same one is sent again after the pause.
        assert_eq!(l.proposal_due(NODE, 100, now, LAG), None);
        assert_eq!(l.proposal_due(NODE, 100, now + BACKOFF, LAG), Some(p.clone()), "resent as it was");
        assert_eq!(l.proposal_due(NODE, 100, now + BACKOFF, LAG), None, "once per pause");
    }

    /// A resend of a change that committed meanwhile is refused as stale
    /// (INVALID_UPDATE_VERSION): the change stays pending until the metadata brings the newer
    /// partition epoch, which settles it.
    #[test]
    fn a_stale_refusal_waits_for_the_metadata() {
        let now = Instant::now();
        let (mut l, p) = expanding(now);
        assert!(!l.settle(&p, Outcome::Refused(code::INVALID_UPDATE_VERSION), now, BACKOFF));
        assert!(!l.settle(&p, Outcome::Refused(code::FENCED_LEADER_EPOCH), now, BACKOFF));
        assert_eq!(l.pending(), Some(&p));
        assert_eq!(l.proposal_due(NODE, 100, now + BACKOFF * 4, LAG), None, "not resent: the metadata decides");
        l.update(NODE, &state(&[1, 2, 3], 8), now);
        assert_eq!(l.pending(), None);
        assert_eq!(l.isr, vec![1, 2, 3]);
    }

    /// INELIGIBLE_REPLICA says the change was not applied: it goes, and the high watermark
    /// no longer waits for the member it would have added.
    #[test]
    fn an_ineligible_refusal_drops_the_change() {
        let now = Instant::now();
        let (mut l, p) = expanding(now);
        l.fetched(2, 150, 150, -1, now);
        assert!(l.settle(&p, Outcome::Refused(code::INELIGIBLE_REPLICA), now, BACKOFF));
        assert_eq!(l.pending(), None);
        assert_eq!(l.high_watermark(NODE, 100), Some(150));
    }

    /// A late answer to an older proposal never settles the pending one.
    #[test]
    fn a_late_refusal_of_another_change_settles_nothing() {
        let now = Instant::now();
        let (mut l, p) = expanding(now);
        let older = Proposal { isr: vec![1], partition_epoch: 6, broker_epochs: BTreeMap::new() };
        assert!(!l.settle(&older, Outcome::Refused(code::INELIGIBLE_REPLICA), now, BACKOFF));
        assert_eq!(l.pending(), Some(&p));
    }

    /// A follower not heard from in this leadership counts at the high watermark as it is: a
    /// new leadership never moves it past what it was (a restarted leader's starts at its log
    /// start, `Partition::start_replicated`), and it moves only as the followers fetch.
    #[test]
    fn unheard_followers_hold_the_high_watermark() {
        let now = Instant::now();
        let mut l = Led::new(NODE, &state(&[1, 2, 3], 7), 500, now);
        assert_eq!(l.high_watermark(NODE, 0), Some(0));
        l.fetched(2, 500, 500, -1, now);
        assert_eq!(l.high_watermark(NODE, 0), Some(0), "member 3 not heard from");
        l.fetched(3, 420, 500, -1, now);
        assert_eq!(l.high_watermark(NODE, 0), Some(420));
        assert_eq!(l.high_watermark(NODE, 450), Some(450), "never back");
        // A member that leaves the ISR must fetch again before it counts.
        l.update(NODE, &state(&[1, 2], 8), now);
        l.update(NODE, &state(&[1, 2, 3], 9), now);
        assert_eq!(l.high_watermark(NODE, 450), Some(450));
        let single = Led::new(NODE, &PartitionState::new(vec![1], vec![1]), 500, now);
        assert_eq!(single.high_watermark(NODE, 0), None, "one replica: not replicated");
    }

    /// KIP-903: a proposal names the broker epoch each follower in it fetched with; a follower
    /// that fetches under a new broker epoch (it restarted, its disk perhaps lost) starts over:
    /// its old progress no longer counts.
    #[test]
    fn proposals_name_the_followers_broker_epochs() {
        let now = Instant::now();
        let mut l = Led::new(NODE, &state(&[1, 2], 7), 100, now);
        l.fetched(2, 100, 100, 20, now);
        l.fetched(3, 100, 100, 30, now);
        let p = l.proposal_due(NODE, 100, now, LAG).expect("3 joins");
        assert_eq!(p.broker_epochs, BTreeMap::from([(2, 20), (3, 30)]));
        assert!(l.settle(&p, Outcome::Refused(code::INELIGIBLE_REPLICA), now, BACKOFF));
        // Broker 3 comes back as a new incarnation with an empty log.
        l.fetched(3, 0, 100, 31, now);
        assert_eq!(l.proposal_due(NODE, 100, now, LAG), None, "not in sync at 0");
        l.fetched(3, 100, 100, 31, now);
        let p = l.proposal_due(NODE, 100, now, LAG).expect("caught up again");
        assert_eq!(p.broker_epochs.get(&3), Some(&31));
    }

    /// Members not caught up for `replica.lag.time.max.ms` leave; a follower joins only once
    /// it reached the high watermark and this leadership's start.
    #[test]
    fn shrink_and_join_rules() {
        let now = Instant::now();
        let mut l = Led::new(NODE, &state(&[1, 2, 3], 7), 100, now);
        l.fetched(2, 100, 100, -1, now);
        let later = now + LAG + Duration::from_secs(1);
        l.fetched(2, 100, 100, -1, later);
        let p = l.proposal_due(NODE, 100, later, LAG).expect("3 lags");
        assert_eq!(p.isr, vec![1, 2]);
        l.update(NODE, &state(&[1, 2], 8), later);
        // Member 3 comes back below the leadership's start: not yet.
        l.fetched(3, 90, 100, -1, later);
        assert_eq!(l.proposal_due(NODE, 90, later, LAG), None);
        l.fetched(3, 100, 100, -1, later);
        assert_eq!(l.proposal_due(NODE, 100, later, LAG).map(|p| p.isr), Some(vec![1, 2, 3]));
    }
}
