//! Partition replication (docs/architecture.md, "Replication"): Kafka's leader and followers,
//! with acks=all answered only once every in-sync replica has the records durable.
//!
//! Each shard replicates the partitions it owns, sharing nothing with other shards:
//! - **As leader** it tracks each follower's durable end (the offset its last Fetch asked
//!   for: a follower asks only once what it holds is fdatasynced), moves the partition's high
//!   watermark to the smallest durable end in the ISR, and asks the controller to change the
//!   ISR ([`AlterIsr`]): a follower that has not caught up for `replica.lag.time.max.ms` leaves,
//!   one that reached the high watermark in this leader epoch joins.
//! - **As follower** it runs one fetcher per leader node ([`fetcher`]): Kafka's Fetch with its
//!   replica id, on the leader's `inter.broker.listener.name` listener, appends what comes
//!   back byte for byte ([`Partition::append_replica`]), waits for the fdatasync, and asks
//!   again from the new end. A leader that answers with a diverging epoch (KIP-320, the Fetch
//!   form of OffsetsForLeaderEpoch) has the follower truncate exactly its divergent suffix.
//!
//! The metadata image drives both: [`Replication::placed`] runs for every placement a shard
//! takes (`control::metadata::PlacePartitions`).

use crate::cluster::types::{MetaCommand, PartitionState};
use crate::io::DmaDisk;
use crate::protocol::errors::{self as code, ErrorCode};
use crate::server::shard::Shard;
use crate::storage::Partition;
use crate::types::Offset;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::time::{Duration, Instant};

mod fetcher;
mod leader;

use leader::{Led, Outcome, Proposal};

use crate::client::Conn;
use std::net::{SocketAddr, ToSocketAddrs};

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

/// The settings [`ReplicaConfig`] reads.
pub const SETTINGS: [&str; 5] = [
    "replica.lag.time.max.ms",
    "replica.fetch.max.bytes",
    "replica.fetch.response.max.bytes",
    "replica.fetch.wait.max.ms",
    "replica.fetch.backoff.ms",
];

impl ReplicaConfig {
    /// Take one of [`SETTINGS`].
    pub fn apply(&mut self, key: &str, value: &str) -> anyhow::Result<()> {
        let n: i64 = value.trim().parse().map_err(|_| anyhow::anyhow!("{key}={value}: not an integer"))?;
        let at_least = |min: i64| {
            if n < min {
                anyhow::bail!("{key}={value}: must be at least {min}");
            }
            Ok(n.min(i32::MAX as i64))
        };
        match key {
            "replica.lag.time.max.ms" => self.lag_time_max = Duration::from_millis(at_least(1)? as u64),
            "replica.fetch.max.bytes" => self.fetch_max_bytes = at_least(1)? as i32,
            "replica.fetch.response.max.bytes" => self.fetch_response_max_bytes = at_least(1)? as i32,
            "replica.fetch.wait.max.ms" => self.fetch_wait_max_ms = at_least(0)? as i32,
            "replica.fetch.backoff.ms" => self.fetch_backoff = Duration::from_millis(at_least(0)? as u64),
            _ => anyhow::bail!("{key}: not a replication setting"),
        }
        Ok(())
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
    /// Connections to other nodes for short inter-broker requests (markers, KIP-890
    /// verification); fetchers keep their own (their long polls would hold these up).
    peers: RefCell<BTreeMap<(i32, Purpose), Rc<Conn>>>,
    /// This node's broker epoch (its registration's), which its fetches name (KIP-903).
    broker_epoch: std::cell::Cell<Option<u64>>,
}

/// From shard 0 to every shard: this node's broker epoch now (its registration was applied).
#[derive(Debug, Clone, Copy)]
pub struct BrokerEpoch(pub u64);

impl crate::server::router::ShardCall<Shard> for BrokerEpoch {
    type Reply = ();
    const NAME: &'static str = "broker-epoch";

    async fn run(self, shard: Rc<Shard>) {
        shard.replication().broker_epoch.set(Some(self.0));
    }
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

    /// A topic's placement reached this shard: for each partition it owns and has open, lead
    /// it (stamping its epoch, tracking followers), follow it (a fetcher for its leader), or
    /// neither.
    pub fn placed(&self, shard: &Rc<Shard>, topic: &str, placement: &[PartitionState]) {
        for (i, state) in placement.iter().enumerate() {
            let i = i as i32;
            if shard.owner(topic, i) == shard.id() {
                self.place(shard, topic, i, state);
            }
        }
    }

    /// One partition's placement ([`Replication::placed`]).
    fn place(&self, shard: &Rc<Shard>, topic: &str, i: i32, state: &PartitionState) {
        let node = shard.config().node_id;
        let tp = (topic.to_string(), i);
        let Some(p) = shard.partition(topic, i) else {
            self.led.borrow_mut().remove(&tp);
            self.followed.borrow_mut().remove(&tp);
            return;
        };
        if state.leader != node {
            self.follow(shard, &p, tp, state);
            return;
        }
        self.followed.borrow_mut().remove(&tp);
        if p.is_truncating() {
            // A follower's truncation under way finishes before this copy leads (Kafka takes
            // the partition from its fetcher first): its followers would else copy a suffix
            // about to be cut, and the high watermark could pass it. The leadership is taken
            // then, as the metadata has it by that time.
            let (shard, topic) = (shard.clone(), topic.to_string());
            glommio::spawn_local(async move {
                p.truncated().await;
                if let Some(now) = shard.leadership(&topic, i) {
                    shard.replication().place(&shard, &topic, i, &now);
                }
            })
            .detach();
            return;
        }
        let fresh = self.led.borrow().get(&tp).is_none_or(|l| l.leader_epoch != state.leader_epoch);
        if fresh {
            // The coordinators serve an internal partition from its copy as it is now (what
            // the previous leader wrote), loaded before anything is served or written there.
            load_coordinator(shard, topic, i);
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
    fn follow(&self, shard: &Rc<Shard>, p: &Rc<Partition<DmaDisk>>, tp: Tp, state: &PartitionState) {
        let (topic, i, node) = (tp.0.as_str(), tp.1, shard.config().node_id);
        if self.led.borrow_mut().remove(&tp).is_some() {
            resign_coordinator(shard, topic, i);
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
            self.ensure_fetcher(shard, state.leader);
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
    fn isr_changes(&self, shard: &Shard, lag: Duration) -> Vec<(Tp, Proposal, MetaCommand)> {
        let node = shard.config().node_id;
        let now = Instant::now();
        let mut out = Vec::new();
        for (tp, l) in self.led.borrow_mut().iter_mut() {
            let Some(p) = shard.partition(&tp.0, tp.1) else { continue };
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
    fn settle(&self, shard: &Shard, tp: &Tp, proposal: &Proposal, outcome: Outcome) {
        let mut led = self.led.borrow_mut();
        let Some(l) = led.get_mut(tp) else { return };
        let backoff =
            (shard.config().replication.lag_time_max / 4).clamp(Duration::from_millis(50), Duration::from_secs(1));
        if l.settle(proposal, outcome, Instant::now(), backoff) {
            if let Some(p) = shard.partition(&tp.0, tp.1) {
                advance(&p, l, shard.config().node_id);
            }
        }
    }

    fn ensure_fetcher(&self, shard: &Rc<Shard>, leader: i32) {
        if self.fetchers.borrow_mut().insert(leader) {
            glommio::spawn_local(fetcher::run(shard.clone(), leader)).detach();
        }
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

/// An internal partition this node now leads: its coordinator state is loaded (requests for
/// it wait meanwhile), in a task of its own.
fn load_coordinator(shard: &Rc<Shard>, topic: &str, index: i32) {
    if topic == crate::server::coordinator::OFFSETS_TOPIC {
        glommio::spawn_local(shard.coordinator().begin_load(index)).detach();
    } else if topic == crate::server::transactions::TXN_TOPIC {
        glommio::spawn_local(shard.txn().begin_load(shard, index)).detach();
    }
}

/// An internal partition this node led and no longer does: its coordinator state goes.
fn resign_coordinator(shard: &Rc<Shard>, topic: &str, index: i32) {
    if topic == crate::server::coordinator::OFFSETS_TOPIC {
        shard.coordinator().resign(index);
    } else if topic == crate::server::transactions::TXN_TOPIC {
        shard.txn().resign(index);
    }
}

/// The high watermark of a led partition ([`Led::high_watermark`]), put in force.
fn advance(p: &Rc<Partition<DmaDisk>>, l: &Led, node: i32) {
    let to = l.high_watermark(node, p.high_watermark().get());
    p.set_replicated_to(to.map(Offset));
}

/// acks=all on a clustered node: wait until the high watermark passes `end` (every in-sync
/// replica has the records durable), for at most `timeout` ([`Partition::wait_replicated`]:
/// NOT_LEADER_OR_FOLLOWER if this node stops leading at `epoch`, the epoch the records were
/// appended under; REQUEST_TIMED_OUT past the timeout); then NOT_ENOUGH_REPLICAS_AFTER_APPEND
/// when the ISR shrank below `min.insync.replicas` by then. A standalone node answers at once
/// (its appends are answered as the flush policy promises).
pub async fn wait_replicated(
    shard: &Rc<Shard>,
    p: &Rc<Partition<DmaDisk>>,
    topic: &str,
    partition: i32,
    end: Offset,
    epoch: Option<i32>,
    timeout: Duration,
) -> Result<(), ErrorCode> {
    if shard.config().cluster.is_none() {
        return Ok(());
    }
    p.wait_replicated(end, epoch, timeout).await.map_err(|e| crate::server::errors::storage_code(&e))?;
    let isr = shard.in_sync(topic, partition).unwrap_or(0);
    let min = shard.topic(topic, |t| t.config.min_insync_replicas as usize).unwrap_or(1);
    if isr < min {
        return Err(code::NOT_ENOUGH_REPLICAS_AFTER_APPEND);
    }
    Ok(())
}

/// Each shard's ISR keeper: every quarter of `replica.lag.time.max.ms` (at most every second),
/// propose the ISR changes due among the partitions it leads, one at a time per partition.
pub fn spawn_isr_keeper(shard: &Rc<Shard>) {
    let shard = shard.clone();
    glommio::spawn_local(async move {
        let lag = shard.config().replication.lag_time_max;
        let period = (lag / 4).clamp(Duration::from_millis(50), Duration::from_secs(1));
        while !shard.manager().is_stopping() {
            glommio::timer::sleep(period).await;
            for (tp, proposal, command) in shard.replication().isr_changes(&shard, lag) {
                tracing::info!(topic = tp.0, partition = tp.1, change = %command, "proposing an ISR change");
                let s = shard.clone();
                glommio::spawn_local(async move {
                    if let Err(lost) = injected_delay(&tp).await {
                        s.replication().settle(&s, &tp, &proposal, lost);
                        return;
                    }
                    let call = crate::server::control::metadata::AlterIsr(command);
                    let outcome = match s.call(0, call).await {
                        // Committed and published here: the placement settled it.
                        Ok(Ok(())) => return,
                        Ok(Err(e)) => {
                            tracing::info!(
                                topic = tp.0,
                                partition = tp.1,
                                code = e.code.0,
                                error = e.message,
                                "ISR change not committed"
                            );
                            Outcome::Refused(e.code)
                        }
                        Err(e) => {
                            tracing::warn!(topic = tp.0, partition = tp.1, error = %e, "ISR change's outcome unknown");
                            Outcome::Unknown
                        }
                    };
                    s.replication().settle(&s, &tp, &proposal, outcome);
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

/// What a connection to a peer carries: one connection each, so that markers waiting for
/// their in-sync replicas (answers come back in request order) never hold a verification up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Purpose {
    Markers,
    Verification,
}

/// A connection to node `id` for short inter-broker requests of one purpose, opened when none
/// is (within the socket timeout) and kept.
async fn peer(shard: &Rc<Shard>, id: i32, purpose: Purpose) -> anyhow::Result<Rc<Conn>> {
    let open = shard.replication().peers.borrow().get(&(id, purpose)).filter(|c| !c.is_closed()).cloned();
    if let Some(c) = open {
        return Ok(c);
    }
    let connecting = crate::cluster::net::within(Duration::from_secs(30), connect(shard, id)).await;
    let c = connecting.unwrap_or_else(|| Err(anyhow::anyhow!("connecting to node {id} timed out")))?;
    shard.replication().peers.borrow_mut().insert((id, purpose), c.clone());
    Ok(c)
}

/// One request to node `id` and its answer, within `limit`; a connection that fails or times
/// out is dropped (the next request opens another).
pub async fn call_peer<Q: crate::protocol::messages::Message, A: crate::protocol::messages::Message>(
    shard: &Rc<Shard>,
    (id, purpose): (i32, Purpose),
    api: i16,
    version: i16,
    req: &mut Q,
    limit: Duration,
) -> anyhow::Result<A> {
    let c = peer(shard, id, purpose).await?;
    let answer = crate::cluster::net::within(limit, c.call_at(api, version, req)).await;
    let answer = answer.unwrap_or_else(|| Err(anyhow::anyhow!("node {id} did not answer within {limit:?}")));
    if answer.is_err() {
        // Only this connection (another request may have opened a new one meanwhile).
        let mut peers = shard.replication().peers.borrow_mut();
        if peers.get(&(id, purpose)).is_some_and(|open| Rc::ptr_eq(open, &c)) {
            peers.remove(&(id, purpose));
        }
    }
    answer
}

/// A connection to `leader` at its `inter.broker.listener.name` listener (else its first), as
/// its registration names it.
pub(crate) async fn connect(shard: &Rc<Shard>, leader: i32) -> anyhow::Result<Rc<Conn>> {
    let view = shard.call(0, crate::server::control::quorum::QuorumStatus).await?;
    let Some(view) = view else { anyhow::bail!("the metadata quorum is not up") };
    let Some(b) = view.brokers.iter().find(|b| b.registration.id == leader) else {
        anyhow::bail!("broker {leader} is not registered and unfenced")
    };
    let wanted = shard.config().settings.get("inter.broker.listener.name").map(|n| n.trim().to_ascii_uppercase());
    let listeners = &b.registration.listeners;
    let Some(e) = wanted.and_then(|w| listeners.iter().find(|e| e.name == w)).or(listeners.first()) else {
        anyhow::bail!("broker {leader} registered no listener")
    };
    let addr: SocketAddr = (e.host.as_str(), e.port)
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| anyhow::anyhow!("{}:{} resolves to no address", e.host, e.port))?;
    Conn::connect(addr).await
}
