//! Fetch: each partition is read on the shard that owns it ([`Read`]), within the request's
//! byte budgets and the shard's fetch memory; readers of an older format get newer batches
//! down-converted here, on the connection's shard (SPEC T1.1). A long poll that finds too
//! little waits on the owners ([`Watch`]) until a partition's high watermark or log start
//! moves, or its `max_wait_ms` passes: an append wakes it, nothing polls.

use crate::budget::Held;
use crate::io::DmaDisk;
use crate::protocol::errors::{self as code, ErrorCode};
use crate::protocol::fetch_reader_magic;
use crate::protocol::messages::*;
use crate::security::acl::{Operation, ResourceType};
use crate::security::quota::CONSUMER_BYTE_RATE;
use crate::server::api::Cx;
use crate::server::errors::{call_code, storage_code};
use crate::server::limits::MAX_FETCH_WAIT;
use crate::server::router::ShardCall;
use crate::server::shard::Shard;
use crate::storage::format::batch::MAGIC_V2;
use crate::storage::format::convert::{for_reader, nothing_for_legacy_reader, ForReader};
use crate::storage::{Partition, StorageResult};
use crate::types::{Offset, Uuid};
use bytes::Bytes;
use futures_util::stream::{FuturesUnordered, StreamExt};
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::time::{Duration, Instant};

/// When a partition has data the fetch memory could not take now, the fetch tries again after
/// this long (memory comes back as responses are written; nothing to wake on at the owner).
const MEMORY_RETRY: Duration = Duration::from_millis(5);

/// Read whole batches of one partition from `offset`, up to about `max_bytes` (0: offsets
/// only), on the shard that owns it.
#[derive(Debug)]
pub struct Read {
    pub topic: String,
    pub partition: i32,
    pub offset: Offset,
    pub max_bytes: usize,
    /// READ_COMMITTED (isolation_level 1): only below the last stable offset, with the
    /// aborted transactions of what is returned.
    pub committed: bool,
    /// The magic the reader reads (Fetch v0-1: 0, v2-3: 1, later: 2): a legacy reader's read
    /// goes on past batches that give it no message.
    pub reader_magic: i8,
    /// A follower's fetch (`crate::replica`): it reads what is durable here, past
    /// the high watermark, and its progress moves the high watermark.
    pub replica: Option<ReplicaRead>,
}

pub use crate::replica::ReplicaRead;

/// What a read found: the records, and the partition's high watermark (read after the data,
/// so it never lags what is returned) and log start.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadOut {
    pub high_watermark: Offset,
    pub log_start_offset: Offset,
    pub last_stable_offset: Offset,
    pub records: Bytes,
    /// READ_COMMITTED: (producer id, first offset) of the aborted transactions overlapping
    /// the records.
    pub aborted: Option<Vec<(i64, i64)>>,
    /// Where the read of the records began: the fetch offset, or for a legacy reader past the
    /// batches it gets nothing from ([`read_for`]).
    pub read_from: Offset,
    /// A follower's log diverges from this one (KIP-320): the epoch and where it ends here.
    pub diverging: Option<(i32, i64)>,
    /// The durable end (what a follower's long poll waits to move).
    pub durable_end: Offset,
}

/// The whole batches of `records` that begin below `end`, and the offset after the last of
/// them (`None`: no batch).
fn below(records: Bytes, end: i64) -> (Bytes, Option<i64>) {
    let mut walk = crate::storage::format::BatchWalk::new(&records, usize::MAX >> 1);
    let (mut keep, mut next) = (0, None);
    for (at, info, bytes) in walk.by_ref().map_while(Result::ok) {
        if info.index_offset() >= end {
            break;
        }
        keep = at + bytes.len();
        next = Some(info.next_offset());
    }
    (records.slice(..keep), next)
}

/// The read of `r`. A legacy reader (magic 0 or 1) gets nothing from v2 batches without
/// messages for it: transaction markers, a compacted log's empty placeholders. Were those all
/// a read found (a segment ending with a marker, a cleaned segment left with a placeholder),
/// the reader, which moves on only past a message it got, would ask for the same offset for
/// ever; so the read goes on after them, to the first batch it can see or the end.
/// Not when the topic refuses down-conversion: as Kafka, the reader is then refused what holds
/// newer batches (markers included). Returns the records and where their read began.
async fn read_for(shard: &Shard, p: &Rc<Partition<DmaDisk>>, r: &Read) -> StorageResult<(Bytes, Offset)> {
    // The decompression limit, for a legacy reader whose read may skip (nothing to look up
    // for a current one).
    let skipping = (r.reader_magic < MAGIC_V2)
        .then(|| conversion_settings(shard, &r.topic))
        .and_then(|(limit, allowed)| allowed.then_some(limit));
    let mut at = r.offset;
    loop {
        let bytes = p.fetch_read(at, r.max_bytes).await?;
        match skipping.and_then(|limit| nothing_for_legacy_reader(&bytes, at.get(), limit)) {
            Some(next) if next > at.get() => at = Offset(next),
            _ => return Ok((bytes, at)),
        }
        // Reads served from memory never suspend: a long run of such batches leaves the core
        // to others between reads.
        glommio::yield_if_needed().await;
    }
}

/// Why a read failed, with the offsets the response still carries (-1 when unknown).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadRefused {
    pub code: ErrorCode,
    pub high_watermark: Offset,
    pub log_start_offset: Offset,
}

impl ReadRefused {
    fn code(code: ErrorCode) -> Self {
        ReadRefused { code, high_watermark: Offset::NONE, log_start_offset: Offset::NONE }
    }
}

impl ShardCall<Shard> for Read {
    type Reply = Result<ReadOut, ReadRefused>;
    const NAME: &'static str = "read";

    async fn run(self, shard: Rc<Shard>) -> Self::Reply {
        let p = shard.led_partition(&self.topic, self.partition).map_err(ReadRefused::code)?;
        if let Some(r) = self.replica {
            return follower_read(&shard, &p, &self, r).await;
        }
        let read =
            if self.max_bytes == 0 { Ok((Bytes::new(), self.offset)) } else { read_for(&shard, &p, &self).await };
        let (high_watermark, log_start_offset) = (p.high_watermark(), p.log_start());
        let last_stable_offset = p.log().last_stable_offset();
        let (diverging, durable_end) = (None, p.durable_end());
        match read {
            Ok((records, read_from)) if self.committed => {
                // The aborted transactions of what is returned (Kafka bounds the list by the
                // fetched data too): none without records.
                let (records, next) = below(records, last_stable_offset);
                let upper = next.map_or(self.offset.get(), |n| n.min(last_stable_offset));
                let aborted = Some(p.log().aborted_between(self.offset.get(), upper));
                let last_stable_offset = Offset(last_stable_offset);
                Ok(ReadOut {
                    high_watermark,
                    log_start_offset,
                    last_stable_offset,
                    records,
                    aborted,
                    read_from,
                    diverging,
                    durable_end,
                })
            }
            Ok((records, read_from)) => {
                let last_stable_offset = Offset(last_stable_offset);
                Ok(ReadOut {
                    high_watermark,
                    log_start_offset,
                    last_stable_offset,
                    records,
                    aborted: None,
                    read_from,
                    diverging,
                    durable_end,
                })
            }
            Err(e) => {
                let code = storage_code(&e);
                if code == code::KAFKA_STORAGE_ERROR {
                    if let Some(skipped) = shard.read_errors_log().ready() {
                        tracing::warn!(topic = self.topic, partition = self.partition, offset = self.offset.get(), error = %e, failed_reads_since_last_line = skipped, "read failed: KAFKA_STORAGE_ERROR");
                    }
                }
                Err(ReadRefused { code, high_watermark, log_start_offset })
            }
        }
    }
}

/// A follower's read of a partition this node leads: its epochs checked and its progress
/// recorded ([`crate::replica::Replication::follower_fetch`]), then what is
/// durable here from its offset (no read-ahead: a follower at the tail reads from memory).
async fn follower_read(
    shard: &Rc<Shard>,
    p: &Rc<Partition<DmaDisk>>,
    r: &Read,
    replica: ReplicaRead,
) -> Result<ReadOut, ReadRefused> {
    use crate::replica::FollowerFetch;
    let tp = (r.topic.clone(), r.partition);
    let node = shard.config().node_id;
    let refused = |code| ReadRefused { code, high_watermark: p.high_watermark(), log_start_offset: p.log_start() };
    let decision = shard.replication().follower_fetch(p, node, &tp, replica, r.offset.get()).map_err(refused)?;
    let (records, diverging) = match decision {
        FollowerFetch::Diverging(epoch, end) => (Bytes::new(), Some((epoch, end))),
        FollowerFetch::Read if r.max_bytes == 0 => (Bytes::new(), None),
        FollowerFetch::Read => {
            let read = p.read(r.offset, r.max_bytes, crate::storage::ReadUpTo::Durable).await;
            (read.map_err(|e| refused(storage_code(&e)))?, None)
        }
    };
    Ok(ReadOut {
        high_watermark: p.high_watermark(),
        log_start_offset: p.log_start(),
        last_stable_offset: Offset(p.log().last_stable_offset()),
        records,
        aborted: None,
        read_from: r.offset,
        diverging,
        durable_end: p.durable_end(),
    })
}

/// One partition as a fetch last saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub topic: String,
    pub partition: i32,
    pub high_watermark: Offset,
    pub log_start_offset: Offset,
    pub durable_end: Offset,
}

/// Wait, on the shard that owns them, until one of `partitions` differs from what the fetch
/// saw (an append made data durable, DeleteRecords moved the start, the partition closed), or
/// `wait` passes.
#[derive(Debug)]
pub struct Watch {
    pub partitions: Vec<Seen>,
    pub wait: Duration,
}

impl ShardCall<Shard> for Watch {
    type Reply = ();
    const NAME: &'static str = "watch";

    fn deadline(&self) -> Option<Duration> {
        Some(self.wait + Duration::from_secs(5))
    }

    async fn run(self, shard: Rc<Shard>) {
        let mut changes = FuturesUnordered::new();
        for s in &self.partitions {
            // Gone (deleted, closed): the fetch will say so at once.
            let Some(p) = shard.partition(&s.topic, s.partition) else { return };
            let now = (p.high_watermark(), p.log_start(), p.durable_end());
            if now != (s.high_watermark, s.log_start_offset, s.durable_end) {
                return;
            }
            changes.push(p.changed());
        }
        let waited = async {
            glommio::timer::sleep(self.wait).await;
        };
        futures_lite::future::or(async { changes.next().await.unwrap_or(()) }, waited).await;
    }
}

/// One pass over every requested partition.
struct Pass {
    resp: FetchResponse,
    bytes: usize,
    held: Held,
    /// The partitions to watch for a long poll, by owner.
    seen: BTreeMap<usize, Vec<Seen>>,
    /// A partition had data below its high watermark that this pass did not take (no fetch
    /// memory free): waiting at the owner would not see it.
    unread: bool,
}

/// Fetch with long polling: until `min_bytes` are there or `max_wait_ms` passes, waking when a
/// partition changes.
pub async fn handle(cx: &mut Cx<'_>, mut f: FetchRequest) -> FetchResponse {
    cx.release_turn();
    let shard = cx.shard;
    if cx.version() >= 13 {
        // KIP-516: topics by id; an unknown id keeps an empty name (UNKNOWN_TOPIC_ID below).
        for t in &mut f.topics {
            t.topic = shard.topic_name(Uuid(t.topic_id)).unwrap_or_default();
        }
    }
    // A follower (a replica id, in the body before v15, in ReplicaState from v15) needs
    // CLUSTER_ACTION on the cluster, as in Kafka; a consumer needs READ on each topic (a
    // denied one is answered TOPIC_AUTHORIZATION_FAILED, never read).
    let replica = if cx.version() >= 15 { f.replica_state.replica_id } else { f.replica_id };
    let follower = replica >= 0;
    if follower && (shard.config().cluster.is_none() || !cx.allowed_on_cluster(Operation::ClusterAction)) {
        let error_code = if shard.config().cluster.is_none() {
            code::NOT_LEADER_OR_FOLLOWER
        } else {
            code::CLUSTER_AUTHORIZATION_FAILED
        };
        return FetchResponse { error_code, ..Default::default() };
    }
    let denied: std::collections::BTreeSet<String> = f
        .topics
        .iter()
        .filter(|t| !follower && !t.topic.is_empty() && !cx.allowed(Operation::Read, ResourceType::Topic, &t.topic))
        .map(|t| t.topic.clone())
        .collect();
    let deadline = Instant::now() + Duration::from_millis(f.max_wait_ms.max(0) as u64).min(MAX_FETCH_WAIT);
    // KIP-1166 (v18): the high watermarks a follower says it knows, looked up once per fetch.
    let known_hw = if follower { KnownHighWatermarks::of(&f) } else { KnownHighWatermarks::default() };
    loop {
        let pass = fetch_once(shard, cx.version(), &f, &denied, replica, deadline).await;
        // An error, or a follower's diverging epoch, is answered at once.
        let has_error = pass
            .resp
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .any(|p| p.error_code != code::NONE || p.diverging_epoch.end_offset >= 0);
        let left = deadline.saturating_duration_since(Instant::now());
        // KIP-1166 (v18): a follower whose high watermark is behind this leader's learns it now.
        let behind = !known_hw.is_empty() && known_hw.behind(&pass.resp);
        if pass.bytes >= f.min_bytes.max(0) as usize || has_error || behind || left.is_zero() {
            // KIP-219: over its consumer_byte_rate, the client gets nothing now (the bytes are
            // not counted) and is throttled.
            let throttle_time_ms = if follower { 0 } else { cx.quota(CONSUMER_BYTE_RATE, pass.bytes as f64, false) };
            if throttle_time_ms > 0 {
                return FetchResponse { throttle_time_ms, ..Default::default() };
            }
            cx.hold(pass.held);
            let mut resp = pass.resp;
            // KIP-951 (v12+): a partition led elsewhere names its leader; from v16 the answer
            // carries the leaders' addresses.
            let mut leaders = std::collections::BTreeSet::new();
            if cx.version() >= 12 {
                for t in &mut resp.topics {
                    let led_elsewhere = |x: &&mut FetchPartitionResponse| x.error_code == code::NOT_LEADER_OR_FOLLOWER;
                    for part in t.partitions.iter_mut().filter(led_elsewhere) {
                        if let Some(l) = super::cluster::current_leader(shard, &t.topic, part.partition_index) {
                            leaders.insert(l.leader_id);
                            part.current_leader = l;
                        }
                    }
                }
            }
            if cx.version() >= 16 {
                resp.node_endpoints = super::cluster::leader_endpoints(cx, leaders).await;
            }
            return resp;
        }
        drop(pass.held);
        if pass.unread {
            glommio::timer::sleep(MEMORY_RETRY.min(left)).await;
        } else {
            wait_for_change(shard, pass.seen, left).await;
        }
    }
}

/// Wait until one owner reports a change among the partitions it owns, or `left` passes. With
/// no partition to watch (a fetch of none), nothing can change: it waits out `left`.
async fn wait_for_change(shard: &Rc<Shard>, seen: BTreeMap<usize, Vec<Seen>>, left: Duration) {
    if seen.is_empty() {
        glommio::timer::sleep(left).await;
        return;
    }
    let mut watches: FuturesUnordered<_> =
        seen.into_iter().map(|(owner, partitions)| shard.call(owner, Watch { partitions, wait: left })).collect();
    let first = async {
        if let Some(Err(e)) = watches.next().await {
            // The next pass reports the partition's state; no busy loop on a lost owner.
            tracing::debug!(error = %e, "long-poll watch ended without a change");
            glommio::timer::sleep(MEMORY_RETRY).await;
        }
    };
    futures_lite::future::or(first, glommio::timer::sleep(left)).await;
}

/// Reserve fetch memory for a partition's share: the first partition read waits for its
/// share, but not past the fetch's deadline (a fetch that gets no memory in time answers
/// offsets only, so no fetch, nor the responses queued behind it on its connection, waits on
/// another for ever); once the pass holds data, a share not free now means offsets only
/// (waiting while holding could deadlock the budget), and the client fetches it next time.
async fn reserve_share(shard: &Shard, max: usize, holding: bool, deadline: Instant) -> Option<Held> {
    if let Some(held) = shard.fetch_memory().try_reserve(max as u64) {
        return Some(held);
    }
    // The batch cache lives in the budget's free part: it gives memory back first.
    shard.release_cached(max as u64);
    if holding {
        return shard.fetch_memory().try_reserve(max as u64);
    }
    let reserve = async { Some(shard.fetch_memory().reserve(max as u64).await) };
    let expire = async {
        glommio::timer::sleep(deadline.saturating_duration_since(Instant::now())).await;
        None
    };
    futures_lite::future::or(reserve, expire).await
}

/// One pass over every requested partition, within the request's byte budgets (KIP-74: only
/// the first partition with data may exceed the budget, by one batch; once it is spent, the
/// rest report offsets only). The records are held against the shard's fetch memory.
async fn fetch_once(
    shard: &Rc<Shard>,
    version: i16,
    f: &FetchRequest,
    denied: &std::collections::BTreeSet<String>,
    replica: i32,
    deadline: Instant,
) -> Pass {
    let magic = fetch_reader_magic(version);
    // The request's total, capped by the broker's `fetch.max.bytes`.
    let mut budget = (f.max_bytes.max(0) as usize).min(shard.config().limits.fetch_max_bytes);
    let mut pass =
        Pass { resp: FetchResponse::default(), bytes: 0, held: Held::default(), seen: BTreeMap::new(), unread: false };
    let one = FetchOne { version, magic, request: f, replica, deadline };
    for t in &f.topics {
        let mut partitions = Vec::with_capacity(t.partitions.len());
        let refused = if t.topic.is_empty() && version >= 13 {
            Some(code::UNKNOWN_TOPIC_ID)
        } else if denied.contains(&t.topic) {
            Some(code::TOPIC_AUTHORIZATION_FAILED)
        } else {
            None
        };
        if let Some(error_code) = refused {
            let unknown = |p: &FetchPartition| FetchPartitionResponse {
                partition_index: p.partition,
                error_code,
                high_watermark: -1,
                records: Some(Bytes::new()),
                ..Default::default()
            };
            partitions.extend(t.partitions.iter().map(unknown));
            pass.resp.topics.push(FetchTopicResponse {
                topic: t.topic.clone(),
                topic_id: t.topic_id,
                partitions,
                ..Default::default()
            });
            continue;
        }
        for p in &t.partitions {
            partitions.push(one.partition(shard, &t.topic, p, &mut budget, &mut pass).await);
        }
        pass.resp.topics.push(FetchTopicResponse {
            topic: t.topic.clone(),
            topic_id: t.topic_id,
            partitions,
            ..Default::default()
        });
    }
    pass
}

/// What reading one partition of a fetch needs of its request.
struct FetchOne<'a> {
    version: i16,
    /// The newest message format the reader reads.
    magic: i8,
    request: &'a FetchRequest,
    /// The follower's id, or -1 for a consumer.
    replica: i32,
    deadline: Instant,
}

impl FetchOne<'_> {
    /// The read of one partition, for the shard that owns it (`max`: its share of the budget).
    fn read_call(&self, topic: &str, p: &FetchPartition, max: usize) -> Read {
        let (version, magic, f, replica) = (self.version, self.magic, self.request, self.replica);
        Read {
            topic: topic.to_string(),
            partition: p.partition,
            offset: Offset(p.fetch_offset),
            max_bytes: max,
            committed: f.isolation_level == 1,
            reader_magic: magic,
            replica: (replica >= 0).then_some(ReplicaRead {
                id: replica,
                // KIP-903: from v15 the follower names its broker epoch.
                broker_epoch: if version >= 15 { f.replica_state.replica_epoch } else { -1 },
                current_leader_epoch: p.current_leader_epoch,
                last_fetched_epoch: p.last_fetched_epoch,
            }),
        }
    }

    /// Read one partition within the request's budget (`budget`: what is left of it), from
    /// the shard that owns it; its records are held against the fetch memory in `pass`.
    async fn partition(
        &self,
        shard: &Rc<Shard>,
        topic: &str,
        p: &FetchPartition,
        budget: &mut usize,
        pass: &mut Pass,
    ) -> FetchPartitionResponse {
        let (magic, f, deadline) = (self.magic, self.request, self.deadline);
        let mut max = if pass.bytes > 0 && *budget == 0 {
            0
        } else {
            (p.partition_max_bytes.max(0) as usize).min(*budget).max(1)
        };
        let mut part_held = Held::default();
        if max > 0 {
            match reserve_share(shard, max, pass.held.units() > 0, deadline).await {
                Some(h) => part_held = h,
                None => max = 0,
            }
        }
        let owner = shard.owner(topic, p.partition);
        let call = self.read_call(topic, p, max);
        let read = match shard.call(owner, call).await {
            Ok(r) => r,
            Err(e) => Err(ReadRefused::code(call_code(&e, code::NOT_LEADER_OR_FOLLOWER))),
        };
        let (mut error_code, hw, start, lso, aborted, mut records, read_from) = match &read {
            Ok(out) => (
                code::NONE,
                out.high_watermark,
                out.log_start_offset,
                out.last_stable_offset,
                out.aborted.clone(),
                out.records.clone(),
                out.read_from,
            ),
            Err(r) => {
                (r.code, r.high_watermark, r.log_start_offset, r.high_watermark, None, Bytes::new(), Offset::NONE)
            }
        };
        let (diverging, durable_end) =
            read.as_ref().map_or((None, Offset::NONE), |out| (out.diverging, out.durable_end));
        // What this reader may see ends at the LSO under READ_COMMITTED.
        let visible = if f.isolation_level == 1 { lso } else { hw };
        if magic < 2 && !records.is_empty() {
            (error_code, records) = match down_convert(shard, topic, p.partition, records, magic, max) {
                Ok(converted) => (error_code, converted),
                Err(c) => (c, Bytes::new()),
            };
        }
        // Keep what the records take (a first batch larger than its share takes what is
        // free of the difference).
        let len = records.len() as u64;
        if len > part_held.units() {
            if let Some(more) = shard.fetch_memory().try_reserve(len - part_held.units()) {
                part_held.absorb(more);
            }
        }
        part_held.shrink(len);
        pass.held.absorb(part_held);
        *budget = budget.saturating_sub(records.len());
        pass.bytes += records.len();
        if error_code == code::NONE {
            // (Past batches a legacy reader gets nothing from, nothing is left to read: the
            // long poll waits for a change, it does not read them again.)
            pass.unread |= records.is_empty() && Offset(p.fetch_offset).max(read_from) < visible;
            let seen = Seen {
                topic: topic.to_string(),
                partition: p.partition,
                high_watermark: hw,
                log_start_offset: start,
                durable_end,
            };
            pass.seen.entry(owner).or_default().push(seen);
        }
        FetchPartitionResponse {
            partition_index: p.partition,
            error_code,
            high_watermark: hw.get(),
            last_stable_offset: lso.get(),
            log_start_offset: start.get(),
            aborted_transactions: aborted.map(aborted_transactions),
            preferred_read_replica: -1,
            diverging_epoch: diverging
                .map(|(epoch, end_offset)| EpochEndOffset { epoch, end_offset, ..Default::default() })
                .unwrap_or_default(),
            records: Some(records),
            ..Default::default()
        }
    }
}

/// The aborted transactions of a READ_COMMITTED read, as Fetch answers them.
fn aborted_transactions(aborted: Vec<(i64, i64)>) -> Vec<AbortedTransaction> {
    let entry = |(producer_id, first_offset)| AbortedTransaction { producer_id, first_offset, ..Default::default() };
    aborted.into_iter().map(entry).collect()
}

/// A topic's decompression limit and whether it allows down-conversion
/// (`message.downconversion.enable`).
fn conversion_settings(shard: &Shard, topic: &str) -> (usize, bool) {
    shard.topic(topic, |i| (i.config.decompress_limit(), i.config.downconversion)).unwrap_or((64 << 20, true))
}

/// The records as a reader of `magic` reads them, under the topic's settings, or the error
/// code such a reader gets.
fn down_convert(
    shard: &Shard,
    topic: &str,
    partition: i32,
    records: Bytes,
    magic: i8,
    max: usize,
) -> Result<Bytes, ErrorCode> {
    let (limit, allowed) = conversion_settings(shard, topic);
    match for_reader(records, magic, allowed, max, limit) {
        Ok(records) => Ok(records),
        // message.downconversion.enable=false: as Kafka, the old reader is refused.
        Err(ForReader::Refused) => Err(code::UNSUPPORTED_VERSION),
        Err(ForReader::Failed(e)) => {
            tracing::error!(topic, partition, error = %e, "cannot down-convert stored batches");
            // An error code these old clients know.
            Err(code::CORRUPT_MESSAGE)
        }
    }
}

/// The high watermark a follower's fetch names for each partition (KIP-1166, v18), where it
/// names one (the default, i64::MAX, says nothing), by topic id (v13+) or, without one, name.
#[derive(Default)]
struct KnownHighWatermarks {
    by_id: HashMap<[u8; 16], HashMap<i32, i64>>,
    by_name: HashMap<String, HashMap<i32, i64>>,
}

impl KnownHighWatermarks {
    fn of(f: &FetchRequest) -> Self {
        let mut known = KnownHighWatermarks::default();
        for t in &f.topics {
            for p in t.partitions.iter().filter(|p| p.high_watermark != i64::MAX) {
                let topic = if t.topic_id != [0; 16] {
                    known.by_id.entry(t.topic_id).or_default()
                } else {
                    known.by_name.entry(t.topic.clone()).or_default()
                };
                topic.insert(p.partition, p.high_watermark);
            }
        }
        known
    }

    fn is_empty(&self) -> bool {
        self.by_id.is_empty() && self.by_name.is_empty()
    }

    /// Whether some partition of this answer carries a high watermark past the one the
    /// follower named, so that it should not wait for data to learn it.
    fn behind(&self, resp: &FetchResponse) -> bool {
        resp.topics.iter().any(|t| {
            let known = if t.topic_id != [0; 16] { self.by_id.get(&t.topic_id) } else { self.by_name.get(&t.topic) };
            known.is_some_and(|k| {
                t.partitions.iter().any(|p| k.get(&p.partition_index).is_some_and(|&hw| hw < p.high_watermark))
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(topic_id: [u8; 16], topic: &str, hws: &[(i32, i64)]) -> FetchRequest {
        FetchRequest {
            topics: vec![FetchTopic {
                topic: topic.into(),
                topic_id,
                partitions: hws
                    .iter()
                    .map(|&(partition, high_watermark)| FetchPartition {
                        partition,
                        high_watermark,
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    fn answer(topic_id: [u8; 16], topic: &str, hws: &[(i32, i64)]) -> FetchResponse {
        FetchResponse {
            topics: vec![FetchTopicResponse {
                topic: topic.into(),
                topic_id,
                partitions: hws
                    .iter()
                    .map(|&(partition_index, high_watermark)| FetchPartitionResponse {
                        partition_index,
                        high_watermark,
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    /// KIP-1166: a follower is behind when a partition's answer carries a high watermark past
    /// the one it named, by topic id or (before v13) name; a partition that names none (the
    /// default, i64::MAX) never is.
    #[test]
    fn a_follower_is_behind_only_where_it_named_a_lower_high_watermark() {
        let id = [7; 16];
        let known = KnownHighWatermarks::of(&request(id, "", &[(0, 10), (1, i64::MAX)]));
        assert!(!known.behind(&answer(id, "", &[(0, 10), (1, 99)])), "equal, and one not named");
        assert!(known.behind(&answer(id, "", &[(0, 11)])));
        assert!(!known.behind(&answer([8; 16], "", &[(0, 11)])), "another topic");
        let by_name = KnownHighWatermarks::of(&request([0; 16], "t", &[(2, 5)]));
        assert!(by_name.behind(&answer([0; 16], "t", &[(2, 6)])));
        assert!(KnownHighWatermarks::of(&request(id, "", &[(0, i64::MAX)])).is_empty());
    }
}
