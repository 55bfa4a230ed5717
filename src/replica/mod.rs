//! Partition replication (docs/architecture.md, "Replication"): Kafka's leader and followers,
//! with acks=all answered only once every in-sync replica has the records durable. This is
//! the one owner of a partition's leadership on a shard.
//!
//! Each shard replicates the partitions it owns, sharing nothing with other shards:
//! - **As leader** it tracks each follower's durable end (the offset its last Fetch asked
//!   for: a follower asks only once what it holds is fdatasynced), moves the partition's high
//!   watermark to the smallest durable end in the ISR (`leader`), and asks the controller to
//!   change the ISR ([`Host::alter_partition`]): a follower that has not caught up for
//!   `replica.lag.time.max.ms` leaves, one that reached the high watermark in this leader
//!   epoch joins.
//! - **As follower** it runs one fetcher per leader node (`fetcher`): Kafka's Fetch with its
//!   replica id, on the leader's `inter.broker.listener.name` listener, appends what comes
//!   back byte for byte ([`Partition::append_replica`]), waits for the fdatasync, and asks
//!   again from the new end. A leader that answers with a diverging epoch (KIP-320, the Fetch
//!   form of OffsetsForLeaderEpoch) has the follower truncate exactly its divergent suffix.
//!
//! The metadata image drives both: [`Replication::placed`] runs for every placement a shard
//! takes. What replication needs of the shard it runs on is [`Host`]; the services that serve
//! from a leader's copy (the coordinators) learn of leaderships gained and lost through it,
//! never from here directly.
#![allow(async_fn_in_trait)]

use crate::cluster::types::{MetaCommand, PartitionState};
use crate::io::DmaDisk;
use crate::protocol::errors::{self as code, ErrorCode};
use crate::storage::Partition;
use crate::types::{Offset, Uuid};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::time::{Duration, Instant};

mod fetcher;
mod leader;

use leader::{Led, Outcome, Proposal};

/// What replication needs of the shard it runs on (the broker's shard implements it).
pub trait Host: Sized + 'static {
    /// This node's id.
    fn node_id(&self) -> i32;
    fn replica_settings(&self) -> &ReplicaConfig;
    /// The shard's replication state.
    fn replication(&self) -> &Replication;
    /// Whether the broker is shutting down (fetchers and the ISR keeper stop).
    fn is_stopping(&self) -> bool;
    /// A partition this shard owns and has open.
    fn partition(&self, topic: &str, partition: i32) -> Option<Rc<Partition<DmaDisk>>>;
    fn topic_id(&self, topic: &str) -> Option<Uuid>;
    fn topic_name(&self, id: Uuid) -> Option<String>;
    /// A partition's placement as the metadata image has it now.
    fn leadership(&self, topic: &str, partition: i32) -> Option<PartitionState>;
    /// A connection to `node` for replication: its inter-broker listener, secured as the
    /// cluster's links are.
    async fn connect_to(self: &Rc<Self>, node: i32) -> anyhow::Result<Rc<crate::client::Conn>>;
    /// Send an ISR change to the metadata quorum: `Ok` once it is committed and published here.
    async fn alter_partition(self: &Rc<Self>, command: MetaCommand) -> Result<(), IsrChangeError>;
    /// This node leads `partition` from now on, at a new leader epoch (the coordinators load
    /// an internal partition's state).
    fn leadership_gained(self: &Rc<Self>, topic: &str, partition: i32);
    /// This node no longer leads `partition` (the coordinators drop its state).
    fn leadership_lost(self: &Rc<Self>, topic: &str, partition: i32);
}

/// Why an ISR change did not come back committed.
#[derive(Debug, Clone)]
pub enum IsrChangeError {
    /// The quorum (or this node's wait for it) answered with this error.
    Refused(ErrorCode, String),
    /// No answer: it may or may not have committed.
    Unknown(String),
}

/// `replica.*`: the replication settings (Kafka's names and defaults).
#[derive(Debug, Clone)]
pub struct ReplicaConfig {
    /// `replica.lag.time.max.ms`: a follower not caught up for this long leaves the ISR.
    pub lag_time_max: Duration,
    /// `replica.fetch.max.bytes`: a follower's share per partition of one fetch.
    pub fetch_max_bytes: i32,
    /// `replica.fetch.response.max.bytes`: a follower's fetch in all.
    pub fetch_response_max_bytes: i32,
    /// `replica.fetch.wait.max.ms`: how long a follower's fetch waits at the leader for data.
    pub fetch_wait_max_ms: i32,
    /// `replica.fetch.backoff.ms`: the pause after a failed fetch.
    pub fetch_backoff: Duration,
}

impl Default for ReplicaConfig {
    fn default() -> Self {
        ReplicaConfig {
            lag_time_max: Duration::from_secs(30),
            fetch_max_bytes: 1 << 20,
            fetch_response_max_bytes: 10 << 20,
            fetch_wait_max_ms: 500,
            fetch_backoff: Duration::from_secs(1),
        }
    }
}

type Tp = (String, i32);

/// How long a coordinator's write (committed offsets, the transaction log, a marker) waits for
/// the in-sync replicas.
pub const INTERNAL_WRITE_TIMEOUT: Duration = Duration::from_secs(20);

/// A partition this shard follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Followed {
    leader: i32,
    leader_epoch: i32,
}

/// One shard's replication state.
#[derive(Default)]
pub struct Replication {
    led: RefCell<BTreeMap<Tp, Led>>,
    followed: RefCell<BTreeMap<Tp, Followed>>,
    /// The leaders a fetcher task runs for on this shard.
    fetchers: RefCell<BTreeSet<i32>>,
    /// This node's broker epoch (its registration's), which its fetches name (KIP-903).
    broker_epoch: std::cell::Cell<Option<u64>>,
}

/// Who fetches as a follower, and the epochs its request names.
#[derive(Debug, Clone, Copy)]
pub struct ReplicaRead {
    pub id: i32,
    /// Its broker epoch (Fetch v15+, KIP-903; -1: none named).
    pub broker_epoch: i64,
    pub current_leader_epoch: i32,
    pub last_fetched_epoch: i32,
}

/// What a leader answers a follower's fetch of one partition before reading: go on, or where
/// the follower's log diverges (epoch, end offset), or an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FollowerFetch {
    Read,
    Diverging(i32, i64),
}

impl Replication {
    /// Whether this shard leads `tp` with followers (acks=all then waits for the ISR).
    pub fn replicated(&self, topic: &str, partition: i32) -> bool {
        self.led.borrow().get(&(topic.to_string(), partition)).is_some_and(|l| l.replicas.len() > 1)
    }

    /// A topic's placement reached this shard: for each partition it has open, lead it
    /// (stamping its epoch, tracking followers), follow it (a fetcher for its leader), or
    /// neither.
    pub fn placed<H: Host>(&self, host: &Rc<H>, topic: &str, placement: &[PartitionState]) {
        for (i, state) in placement.iter().enumerate() {
            self.place(host, topic, i as i32, state);
        }
    }

    /// One partition's placement ([`Replication::placed`]).
    fn place<H: Host>(&self, host: &Rc<H>, topic: &str, i: i32, state: &PartitionState) {
        let node = host.node_id();
        let tp = (topic.to_string(), i);
        let Some(p) = host.partition(topic, i) else {
            self.led.borrow_mut().remove(&tp);
            self.followed.borrow_mut().remove(&tp);
            return;
        };
        if state.leader != node {
            self.follow(host, &p, tp, state);
            return;
        }
        self.followed.borrow_mut().remove(&tp);
        if p.is_truncating() {
            // A follower's truncation under way finishes before this copy leads (Kafka takes
            // the partition from its fetcher first): its followers would else copy a suffix
            // about to be cut, and the high watermark could pass it. The leadership is taken
            // then, as the metadata has it by that time.
            let (host, topic) = (host.clone(), topic.to_string());
            glommio::spawn_local(async move {
                p.truncated().await;
                if let Some(now) = host.leadership(&topic, i) {
                    host.replication().place(&host, &topic, i, &now);
                }
            })
            .detach();
            return;
        }
        let fresh = self.led.borrow().get(&tp).is_none_or(|l| l.leader_epoch != state.leader_epoch);
        if fresh {
            // The coordinators serve an internal partition from its copy as it is now (what
            // the previous leader wrote), loaded before anything is served or written there.
            host.leadership_gained(topic, i);
        }
        p.set_follower(false);
        p.set_leader_epoch(Some(state.leader_epoch));
        let mut led = self.led.borrow_mut();
        let now = Instant::now();
        match led.get_mut(&tp) {
            Some(l) if !fresh => l.update(node, state, now),
            _ => {
                tracing::info!(topic, partition = i, epoch = state.leader_epoch, isr = ?state.isr, "leading");
                led.insert(tp.clone(), Led::new(node, state, p.log_end().get(), now));
            }
        }
        advance(&p, &led[&tp], node);
    }

    /// A placement that another node leads (or none does): follow it if this node is one of
    /// its replicas.
    fn follow<H: Host>(&self, host: &Rc<H>, p: &Rc<Partition<DmaDisk>>, tp: Tp, state: &PartitionState) {
        let (topic, i, node) = (tp.0.as_str(), tp.1, host.node_id());
        if self.led.borrow_mut().remove(&tp).is_some() {
            host.leadership_lost(topic, i);
        }
        p.set_leader_epoch(None);
        p.set_follower(true);
        // The produce requests waiting for the ISR learn the leadership moved.
        p.poke();
        if state.replicas.contains(&node) && state.leader >= 0 {
            let f = Followed { leader: state.leader, leader_epoch: state.leader_epoch };
            let before = self.followed.borrow_mut().insert(tp.clone(), f);
            if before != Some(f) {
                tracing::info!(topic, partition = i, leader = state.leader, epoch = state.leader_epoch, "following");
            }
            self.ensure_fetcher(host, state.leader);
        } else {
            self.followed.borrow_mut().remove(&tp);
        }
    }

    /// KIP-207: whether a partition this shard leads has a high watermark still below its
    /// leadership's start (`hw`: its high watermark now). Readers' offset lookups are then
    /// answered OFFSET_NOT_AVAILABLE, so the latest offset a client is told never goes back
    /// across a leader change.
    pub fn catching_up(&self, topic: &str, partition: i32, hw: Offset) -> bool {
        let led = self.led.borrow();
        led.get(&(topic.to_string(), partition)).is_some_and(|l| l.replicas.len() > 1 && hw.get() < l.epoch_start)
    }

    /// A topic went away: nothing of it is led or followed here.
    pub fn forget_topic(&self, topic: &str) {
        self.led.borrow_mut().retain(|(t, _), _| t != topic);
        self.followed.borrow_mut().retain(|(t, _), _| t != topic);
    }

    /// A follower's fetch of a partition this shard leads, at `fetch_offset` (its durable
    /// end) with the epochs it knows: fenced, unknown or diverging epochs answered as Kafka
    /// does; otherwise its progress is recorded (the high watermark may move) and it reads.
    pub fn follower_fetch(
        &self,
        p: &Rc<Partition<DmaDisk>>,
        node: i32,
        tp: &Tp,
        r: ReplicaRead,
        fetch_offset: i64,
    ) -> Result<FollowerFetch, ErrorCode> {
        let ReplicaRead { id: replica, broker_epoch, current_leader_epoch, last_fetched_epoch } = r;
        let mut led = self.led.borrow_mut();
        let Some(l) = led.get_mut(tp) else { return Err(code::NOT_LEADER_OR_FOLLOWER) };
        if current_leader_epoch >= 0 && current_leader_epoch < l.leader_epoch {
            return Err(code::FENCED_LEADER_EPOCH);
        }
        if current_leader_epoch > l.leader_epoch {
            return Err(code::UNKNOWN_LEADER_EPOCH);
        }
        if !l.has_follower(replica) {
            return Err(code::NOT_LEADER_OR_FOLLOWER);
        }
        if last_fetched_epoch >= 0 {
            // KIP-320: where the follower's last epoch ends here. A follower past that end, or
            // whose epoch this log never had, truncates first.
            // (A log that knows no epoch at all cannot judge: the fetch goes on.)
            let (epoch, end) = p.end_offset_for_epoch(last_fetched_epoch);
            if end.get() < 0 {
                // An epoch newer than any this log knows (a leader records its own epoch when
                // it takes over, so this is a follower ahead of it): Kafka's answer.
                return Err(code::OFFSET_OUT_OF_RANGE);
            }
            if end.get() < fetch_offset || epoch < last_fetched_epoch {
                return Ok(FollowerFetch::Diverging(epoch, end.get()));
            }
        }
        if fetch_offset > p.log_end().get() {
            return Err(code::OFFSET_OUT_OF_RANGE);
        }
        l.fetched(replica, fetch_offset, p.durable_end().get(), broker_epoch, Instant::now());
        advance(p, l, node);
        Ok(FollowerFetch::Read)
    }

    /// The ISR changes due now among the partitions this shard leads: followers not caught up
    /// for `lag` leave, followers at the high watermark past this leadership's start join; a
    /// change whose last sending got no settling answer is sent again ([`leader`]).
    fn isr_changes<H: Host>(&self, host: &H, lag: Duration) -> Vec<(Tp, Proposal, MetaCommand)> {
        let node = host.node_id();
        let now = Instant::now();
        let mut out = Vec::new();
        for (tp, l) in self.led.borrow_mut().iter_mut() {
            let Some(p) = host.partition(&tp.0, tp.1) else { continue };
            let Some(proposal) = l.proposal_due(node, p.high_watermark().get(), now, lag) else { continue };
            advance(&p, l, node);
            let command = MetaCommand::AlterPartition {
                topic: tp.0.clone(),
                partition: tp.1,
                leader: node,
                leader_epoch: l.leader_epoch,
                partition_epoch: proposal.partition_epoch,
                isr: proposal.isr.clone(),
                broker_epochs: proposal.broker_epochs.clone(),
            };
            out.push((tp.clone(), proposal, command));
        }
        out
    }

    /// An ISR change did not come back committed ([`Led::settle`]).
    fn settle<H: Host>(&self, host: &H, tp: &Tp, proposal: &Proposal, outcome: Outcome) {
        let mut led = self.led.borrow_mut();
        let Some(l) = led.get_mut(tp) else { return };
        let backoff = keeper_period(host.replica_settings().lag_time_max);
        if l.settle(proposal, outcome, Instant::now(), backoff) {
            if let Some(p) = host.partition(&tp.0, tp.1) {
                advance(&p, l, host.node_id());
            }
        }
    }

    fn ensure_fetcher<H: Host>(&self, host: &Rc<H>, leader: i32) {
        if self.fetchers.borrow_mut().insert(leader) {
            glommio::spawn_local(fetcher::run(host.clone(), leader)).detach();
        }
    }

    /// This node's broker epoch now (its registration was applied), for its fetches to name.
    pub fn set_broker_epoch(&self, epoch: u64) {
        self.broker_epoch.set(Some(epoch));
    }

    /// This node's broker epoch, as its fetches name it (-1 before its registration is applied).
    fn broker_epoch(&self) -> i64 {
        self.broker_epoch.get().map_or(-1, |e| e as i64)
    }

    /// The partitions this shard follows from `leader`, with the leader epoch each is at.
    fn followed_from(&self, leader: i32) -> Vec<(Tp, i32)> {
        let followed = self.followed.borrow();
        followed.iter().filter(|(_, f)| f.leader == leader).map(|(tp, f)| (tp.clone(), f.leader_epoch)).collect()
    }

    /// Whether `tp` is still followed from `leader` at `epoch` (a fetch answer may come back
    /// after the leadership moved).
    fn still_follows(&self, tp: &Tp, leader: i32, epoch: i32) -> bool {
        self.followed.borrow().get(tp) == Some(&Followed { leader, leader_epoch: epoch })
    }

    /// The fetcher for `leader` stops: nothing is followed from it.
    fn fetcher_done(&self, leader: i32) -> bool {
        if self.followed.borrow().values().any(|f| f.leader == leader) {
            return false;
        }
        self.fetchers.borrow_mut().remove(&leader);
        true
    }
}

/// The high watermark of a led partition ([`Led::high_watermark`]), put in force.
fn advance(p: &Rc<Partition<DmaDisk>>, l: &Led, node: i32) {
    let now = p.high_watermark().get();
    let to = l.high_watermark(node, now);
    crate::invariant!(to.is_none_or(|t| t >= now), "a leader's high watermark never goes back: {now} to {to:?}");
    p.set_replicated_to(to.map(Offset));
}

/// How often the ISR keeper looks: a quarter of `replica.lag.time.max.ms`, from 50 ms to a
/// second (also the pause before an ISR change of unknown outcome is sent again).
fn keeper_period(lag: Duration) -> Duration {
    (lag / 4).clamp(Duration::from_millis(50), Duration::from_secs(1))
}

/// Each shard's ISR keeper: every quarter of `replica.lag.time.max.ms` (from 50 ms to a
/// second), propose the ISR changes due among the partitions it leads, one at a time per
/// partition.
pub fn spawn_isr_keeper<H: Host>(host: &Rc<H>) {
    let host = host.clone();
    glommio::spawn_local(async move {
        let lag = host.replica_settings().lag_time_max;
        while !host.is_stopping() {
            glommio::timer::sleep(keeper_period(lag)).await;
            for (tp, proposal, command) in host.replication().isr_changes(&*host, lag) {
                tracing::info!(topic = tp.0, partition = tp.1, change = %command, "proposing an ISR change");
                let h = host.clone();
                glommio::spawn_local(async move {
                    let outcome = match injected_delay(&tp).await {
                        Err(lost) => lost,
                        Ok(()) => match h.alter_partition(command).await {
                            // Committed and published here: the placement settled it.
                            Ok(()) => return,
                            Err(IsrChangeError::Refused(code, error)) => {
                                tracing::info!(
                                    topic = tp.0,
                                    partition = tp.1,
                                    code = code.0,
                                    error,
                                    "ISR change not committed"
                                );
                                Outcome::Refused(code)
                            }
                            Err(IsrChangeError::Unknown(error)) => {
                                tracing::warn!(topic = tp.0, partition = tp.1, error, "ISR change's outcome unknown");
                                Outcome::Unknown
                            }
                        },
                    };
                    h.replication().settle(&*h, &tp, &proposal, outcome);
                })
                .detach();
            }
        }
    })
    .detach();
}

/// The fault seam on an ISR change leaving for the quorum (`serve --fault-injection`, op
/// `propose`): a slow rule holds it back, any other loses it.
async fn injected_delay(tp: &(String, i32)) -> Result<(), Outcome> {
    use crate::io::faults::{self, Fault, FaultOp};
    if !faults::armed() {
        return Ok(());
    }
    let name = format!("{}-{}", tp.0, tp.1);
    match faults::take(FaultOp::Propose, std::path::Path::new(&name)) {
        None => Ok(()),
        Some(Fault::Slow(ms)) => {
            tracing::warn!(partition = name, ms, "fault injection: ISR change held back");
            glommio::timer::sleep(Duration::from_millis(ms as u64)).await;
            Ok(())
        }
        Some(_) => {
            tracing::warn!(partition = name, "fault injection: ISR change lost");
            Err(Outcome::Unknown)
        }
    }
}
