//! The group coordinator of one shard: the consumer groups whose `__consumer_offsets`
//! partition this shard owns, their membership ([`crate::groups::group`]) and their committed
//! offsets ([`crate::groups::offsets`]).
//!
//! A group lives on one shard: `__consumer_offsets` partition `crc32c(group) % partitions`,
//! owned like any partition ([`owner`]); handlers route every group request there. Commits are
//! appended to that partition and answered once durable; the offset table is the replay of
//! the partitions this shard owns, read at startup. Membership is not persisted: after a
//! restart members rejoin (as after a Kafka coordinator failover without group metadata).
//!
//! A sweep every [`TICK`] applies deadlines (session expiry, rebalance timeouts, the initial
//! rebalance delay) and, every `tidemark.offsets.compaction.check.ms`, compacts a partition grown
//! past `tidemark.offsets.compaction.bytes`: it rolls, writes every live offset again, and
//! deletes the segments before them.

mod consumer;
mod load;
mod migration;
mod offset_delete;
mod txn_offsets;

pub use offset_delete::Deleted;
pub use txn_offsets::txn_commit_topics;

use crate::coordinator::runtime::{partitions_of, rewrite};
use crate::errors::storage_code;
use crate::errors::{group_code, group_outcome};
use crate::groups::consumer::{ConsumerGroup, ConsumerLimits, TopicMeta, Topics};
use crate::groups::group::{Group, GroupLimits, GroupState, Join, Sync};
use crate::groups::offsets::Record;
use crate::groups::offsets::{self, Committed, OffsetTable, Tp};
use crate::io::DmaDisk;
use crate::placement::owner;
use crate::protocol::errors::{self as code, ErrorCode};
use crate::protocol::groups::*;
use crate::storage::format::batch::BatchBuilder;
use crate::storage::manager::PartitionManager;
use crate::storage::Clock;
use crate::types::Offset;
use bytes::Bytes;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::time::Duration;

/// The internal topic holding committed offsets.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";
/// How often deadlines are applied.
pub const TICK: Duration = Duration::from_millis(100);
/// Compaction, and a consumer group's change, are written in batches of about this size
/// (well below any `max.message.bytes`).
const BATCH_BYTES: usize = 256 << 10;
/// Kafka's INVALID_COMMIT_OFFSET_SIZE: a commit too large for one batch.
const INVALID_COMMIT_OFFSET_SIZE: ErrorCode = ErrorCode(28);

/// The `__consumer_offsets` partition of a group.
pub fn offsets_partition(group: &str, partitions: u32) -> i32 {
    (crc32c::crc32c(group.as_bytes()) % partitions.max(1)) as i32
}

/// The shard that coordinates a group.
pub fn group_shard(group: &str, partitions: u32, shards: usize) -> usize {
    owner(OFFSETS_TOPIC, offsets_partition(group, partitions), shards)
}

/// Settings of the coordinator (broker settings with Kafka's names where Kafka has one).
#[derive(Debug, Clone)]
pub struct CoordinatorConfig {
    pub limits: GroupLimits,
    /// `group.consumer.*`: groups of the consumer protocol (KIP-848).
    pub consumer: ConsumerLimits,
    /// `offsets.topic.num.partitions` (when the topic is created).
    pub offsets_partitions: u32,
    /// `offsets.topic.segment.bytes`
    pub offsets_segment_bytes: u64,
    /// `offset.metadata.max.bytes`
    pub metadata_max_bytes: usize,
    /// `tidemark.offsets.compaction.bytes`: an offsets partition larger than this (and than
    /// twice its live records) is compacted.
    pub compaction_bytes: u64,
    /// `tidemark.offsets.compaction.check.ms`: how often partitions are looked at.
    pub compaction_check: Duration,
}

impl Default for CoordinatorConfig {
    fn default() -> Self {
        CoordinatorConfig {
            limits: GroupLimits::default(),
            consumer: ConsumerLimits::default(),
            offsets_partitions: 8,
            offsets_segment_bytes: 100 << 20,
            metadata_max_bytes: 4096,
            compaction_bytes: 16 << 20,
            compaction_check: Duration::from_secs(10),
        }
    }
}

pub struct Coordinator {
    config: CoordinatorConfig,
    shards: usize,
    /// The shard's partitions (this coordinator's `__consumer_offsets` partitions among them).
    manager: Rc<PartitionManager<DmaDisk>>,
    clock: Clock,
    /// The partition count of `__consumer_offsets`, once it exists (the shard keeps it
    /// current).
    offsets_partitions: Cell<Option<u32>>,
    groups: RefCell<HashMap<String, Group>>,
    /// Groups of the consumer protocol (KIP-848); a group id is in one map or the other.
    consumer_groups: RefCell<HashMap<String, ConsumerGroup>>,
    offsets: RefCell<OffsetTable>,
    /// Offsets partitions being loaded after this node became their leader, with the load's
    /// generation (a later leadership's load supersedes an earlier one).
    loads: crate::coordinator::runtime::Loads,
    /// The shard's topics, as consumer groups see them ([`Coordinator::attach_topics`]).
    topics: RefCell<Option<Rc<dyn Topics>>>,
    seed: Cell<u64>,
    ticks: Cell<u64>,
}

impl Coordinator {
    pub fn new(
        config: CoordinatorConfig,
        shard_id: usize,
        shards: usize,
        manager: Rc<PartitionManager<DmaDisk>>,
        clock: Clock,
    ) -> Coordinator {
        let seed =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
        Coordinator {
            config,
            shards,
            manager,
            clock,
            offsets_partitions: Cell::new(None),
            groups: RefCell::new(HashMap::new()),
            consumer_groups: RefCell::new(HashMap::new()),
            offsets: RefCell::new(OffsetTable::default()),
            loads: Default::default(),
            topics: RefCell::new(None),
            seed: Cell::new(seed ^ ((shard_id as u64) << 56)),
            ticks: Cell::new(0),
        }
    }

    /// How consumer groups look the shard's topics up (set once the shard exists).
    pub fn attach_topics(&self, topics: Rc<dyn Topics>) {
        *self.topics.borrow_mut() = Some(topics);
    }

    /// The shard's topics (none before [`Coordinator::attach_topics`]).
    fn topics(&self) -> Rc<dyn Topics> {
        self.topics.borrow().clone().unwrap_or_else(|| Rc::new(|_: &str| None::<TopicMeta>))
    }

    fn next_seed(&self) -> u64 {
        let seed = self.seed.get().wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.seed.set(seed);
        seed
    }

    pub fn config(&self) -> &CoordinatorConfig {
        &self.config
    }

    /// `__consumer_offsets` exists with this many partitions (or not yet).
    pub fn set_offsets_partitions(&self, partitions: Option<u32>) {
        self.offsets_partitions.set(partitions);
    }

    /// The shard that coordinates `group`, once `__consumer_offsets` exists.
    pub fn shard_of(&self, group: &str) -> Option<usize> {
        self.offsets_partitions.get().map(|n| group_shard(group, n, self.shards))
    }

    fn now(&self) -> i64 {
        (self.clock)()
    }

    fn new_group(&self, id: &str) -> Group {
        Group::new(id, self.config.limits, self.next_seed())
    }

    /// Replay this shard's `__consumer_offsets` partitions into the offset table (startup).
    pub async fn load(&self) -> anyhow::Result<usize> {
        let mut records = 0;
        for (index, p) in partitions_of(&self.manager, OFFSETS_TOPIC) {
            records += self.load_partition(index, &p, None).await?;
        }
        Ok(records)
    }

    async fn load_partition(
        &self,
        index: i32,
        p: &Rc<crate::storage::Partition<DmaDisk>>,
        generation: Option<u64>,
    ) -> anyhow::Result<usize> {
        let mut records = 0;
        let limit = p.log().config().decompress_limit();
        p.for_each_chunk(|bytes| -> anyhow::Result<()> {
            // A leadership's load (`generation`) stops at once when superseded.
            if generation.is_some_and(|g| !self.loads.is_current(index, g)) {
                anyhow::bail!("{OFFSETS_TOPIC}-{index}: load superseded");
            }
            records += self
                .offsets
                .borrow_mut()
                .replay(bytes, limit, index)
                .map_err(|e| anyhow::anyhow!("{OFFSETS_TOPIC}-{index}: unreadable offset records: {e}"))?;
            self.replay_consumer_groups(bytes, limit)
                .map_err(|e| anyhow::anyhow!("{OFFSETS_TOPIC}-{index}: unreadable group records: {e}"))
        })
        .await?;
        Ok(records)
    }

    /// Apply deadlines every [`TICK`], and compact now and then, until the shard stops.
    pub fn spawn_ticker(self: &Rc<Self>) {
        let me = self.clone();
        glommio::spawn_local(async move {
            while !me.manager.is_stopping() {
                glommio::timer::sleep(TICK).await;
                let now = me.now();
                let c = &me;
                {
                    let table = c.offsets.borrow();
                    let mut groups = c.groups.borrow_mut();
                    for g in groups.values_mut() {
                        g.tick(now);
                    }
                    // Forget groups with nothing left: no member and no offset.
                    groups
                        .retain(|id, g| !(g.is_empty() && g.state() == GroupState::Empty && table.group(id).is_none()));
                }
                me.tick_consumer_groups(now).await;
                let n = c.ticks.get() + 1;
                c.ticks.set(n);
                let every = (c.config.compaction_check.as_millis() / TICK.as_millis()).max(1) as u64;
                if n.is_multiple_of(every) {
                    me.compact_all().await;
                }
            }
        })
        .detach();
    }

    /// Compact every offsets partition of this shard that has grown past the threshold.
    pub async fn compact_all(&self) {
        for (index, _) in partitions_of(&self.manager, OFFSETS_TOPIC) {
            if let Err(e) = self.compact(index, false).await {
                tracing::warn!(partition = index, error = %e, "offsets compaction failed");
            }
        }
    }

    /// Write partition `index`'s live offsets again in a new segment and delete the segments
    /// before it, if it is larger than the threshold (or `force`) and no commit is in flight.
    /// Returns the segments deleted.
    pub async fn compact(&self, index: i32, force: bool) -> anyhow::Result<usize> {
        let c = self;
        let Some(p) = self.manager.get(OFFSETS_TOPIC, index) else { return Ok(0) };
        let Some(partitions) = self.offsets_partitions.get() else { return Ok(0) };
        // Only the leader, with the partition loaded, knows its live offsets.
        if !self.serves(index) {
            return Ok(0);
        }
        let live = c.offsets.borrow().live(|g| offsets_partition(g, partitions) == index);
        let live_bytes: u64 =
            live.iter().map(|(g, (t, _), c)| (40 + g.len() + t.len() + c.metadata.len()) as u64).sum();
        let size = p.log().size_bytes();
        if !force && (size <= c.config.compaction_bytes || size <= 2 * live_bytes) {
            return Ok(0);
        }
        // Offsets staged by an open transaction live only in its records: they stay until
        // its marker (a later pass compacts).
        if c.offsets.borrow().has_pending_on(index) || p.log().producers().first_unstable_offset().is_some() {
            return Ok(0);
        }
        // Synchronously from here to the appends: no commit can slip in between.
        let mut records: Vec<Record> = live.iter().map(|(g, tp, c)| offsets::record(g, tp, Some(c))).collect();
        // Consumer groups (KIP-848): their live state again.
        for g in self.consumer_groups.borrow().values().filter(|g| offsets_partition(&g.id, partitions) == index) {
            records.extend(g.records());
        }
        let removed = rewrite(&p, offsets::batches(&records, BATCH_BYTES, self.now())).await?;
        tracing::info!(partition = index, live = live.len(), segments_deleted = removed.len(), "compacted offsets");
        Ok(removed.len())
    }

    /// The error for a group request this shard cannot serve, if any. An empty group id is
    /// refused for membership requests only (Kafka's rule); an id too long for the offsets
    /// records' int16 strings always.
    fn unavailable(&self, group: &str, membership: bool) -> Option<ErrorCode> {
        if (membership && group.is_empty()) || group.len() > i16::MAX as usize {
            return Some(code::INVALID_GROUP_ID);
        }
        let Some(partitions) = self.offsets_partitions.get() else { return Some(code::COORDINATOR_NOT_AVAILABLE) };
        let index = offsets_partition(group, partitions);
        if self.manager.get(OFFSETS_TOPIC, index).is_none() || !self.topics().leads(OFFSETS_TOPIC, index) {
            return Some(code::NOT_COORDINATOR);
        }
        if self.loads.is_loading(index) {
            return Some(code::COORDINATOR_LOAD_IN_PROGRESS);
        }
        None
    }

    pub async fn join(
        &self,
        version: i16,
        j: JoinGroupRequest,
        client_id: String,
        client_host: String,
    ) -> JoinGroupResponse {
        let fail =
            |e: ErrorCode| JoinGroupResponse { error_code: e, member_id: j.member_id.clone(), ..Default::default() };
        if let Some(e) = self.unavailable(&j.group_id, true) {
            return fail(e);
        }
        let c = self;
        let join = Join {
            member_id: j.member_id.clone(),
            instance_id: j.group_instance_id.clone(),
            client_id,
            client_host,
            session_timeout_ms: j.session_timeout_ms,
            rebalance_timeout_ms: j.rebalance_timeout_ms,
            protocol_type: j.protocol_type.clone(),
            // Copied: a slice would keep the member's whole request frame alive.
            protocols: j.protocols.iter().map(|p| (p.name.clone(), Bytes::copy_from_slice(&p.metadata))).collect(),
            require_known_member_id: version >= 4,
            skip_assignment_supported: version >= 9,
        };
        if let Some(joined) = self.join_consumer_group(&j.group_id, &join).await {
            return joined;
        }
        let pending = {
            let mut groups = c.groups.borrow_mut();
            let g = groups.entry(j.group_id.clone()).or_insert_with(|| c.new_group(&j.group_id));
            g.join(join, self.now())
        };
        let Ok(joined) = pending.await else { return fail(code::COORDINATOR_NOT_AVAILABLE) };
        if joined.error.is_none() {
            tracing::debug!(group = j.group_id, member = joined.member_id, generation = joined.generation, "joined");
        }
        JoinGroupResponse {
            error_code: joined.error.map_or(code::NONE, group_code),
            generation_id: joined.generation,
            protocol_type: joined.protocol_type,
            protocol_name: joined.protocol_name,
            leader: joined.leader,
            skip_assignment: joined.skip_assignment,
            member_id: joined.member_id,
            members: joined
                .members
                .into_iter()
                .map(|m| JoinGroupResponseMember {
                    member_id: m.member_id,
                    group_instance_id: m.instance_id,
                    metadata: m.metadata,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    pub async fn sync(&self, s: SyncGroupRequest) -> SyncGroupResponse {
        let fail = |e: ErrorCode| SyncGroupResponse { error_code: e, ..Default::default() };
        if let Some(e) = self.unavailable(&s.group_id, true) {
            return fail(e);
        }
        if let Some(synced) = self.sync_consumer_group(&s) {
            return synced;
        }
        let sync = Sync {
            generation: s.generation_id,
            member_id: s.member_id,
            instance_id: s.group_instance_id,
            protocol_type: s.protocol_type,
            protocol_name: s.protocol_name,
            assignments: s
                .assignments
                .into_iter()
                .map(|a| (a.member_id, Bytes::copy_from_slice(&a.assignment)))
                .collect(),
        };
        let pending = {
            let mut groups = self.groups.borrow_mut();
            match groups.get_mut(&s.group_id) {
                None => return fail(code::UNKNOWN_MEMBER_ID),
                Some(g) => g.sync(sync, self.now()),
            }
        };
        let Ok(synced) = pending.await else { return fail(code::COORDINATOR_NOT_AVAILABLE) };
        SyncGroupResponse {
            error_code: synced.error.map_or(code::NONE, group_code),
            protocol_type: synced.protocol_type,
            protocol_name: synced.protocol_name,
            assignment: synced.assignment,
            ..Default::default()
        }
    }

    pub fn heartbeat(&self, h: HeartbeatRequest) -> ErrorCode {
        if let Some(e) = self.unavailable(&h.group_id, true) {
            return e;
        }
        if let Some(e) = self.heartbeat_consumer_group(&h) {
            return e;
        }
        let mut groups = self.groups.borrow_mut();
        match groups.get_mut(&h.group_id) {
            None => code::UNKNOWN_MEMBER_ID,
            Some(g) => {
                group_outcome(g.heartbeat(&h.member_id, h.group_instance_id.as_deref(), h.generation_id, self.now()))
            }
        }
    }

    pub async fn leave(&self, version: i16, l: LeaveGroupRequest) -> LeaveGroupResponse {
        if let Some(e) = self.unavailable(&l.group_id, true) {
            return LeaveGroupResponse { error_code: e, ..Default::default() };
        }
        if let Some(left) = self.leave_consumer_group(version, &l).await {
            return left;
        }
        let now = self.now();
        let mut groups = self.groups.borrow_mut();
        let group = groups.get_mut(&l.group_id);
        if version < 3 {
            let error_code = group.map_or(code::UNKNOWN_MEMBER_ID, |g| group_outcome(g.leave(&l.member_id, None, now)));
            return LeaveGroupResponse { error_code, ..Default::default() };
        }
        let Some(g) = group else {
            // Kafka: the request is fine, each member is unknown.
            let members = l
                .members
                .into_iter()
                .map(|m| MemberResponse {
                    member_id: m.member_id,
                    group_instance_id: m.group_instance_id,
                    error_code: code::UNKNOWN_MEMBER_ID,
                    ..Default::default()
                })
                .collect();
            return LeaveGroupResponse { members, ..Default::default() };
        };
        let members = l
            .members
            .into_iter()
            .map(|m| MemberResponse {
                error_code: group_outcome(g.leave(&m.member_id, m.group_instance_id.as_deref(), now)),
                member_id: m.member_id,
                group_instance_id: m.group_instance_id,
                ..Default::default()
            })
            .collect();
        LeaveGroupResponse { members, ..Default::default() }
    }

    /// OffsetCommit; `partitions_of` gives a topic's partition count (commits to partitions
    /// that do not exist are refused).
    pub async fn commit(
        &self,
        version: i16,
        req: OffsetCommitRequest,
        partitions_of: impl Fn(&str) -> Option<u32>,
    ) -> OffsetCommitResponse {
        let refused = match self.unavailable(&req.group_id, false) {
            Some(e) => Some(e),
            None => self.check_committer(&req, version),
        };
        if let Some(e) = refused {
            let codes = req
                .topics
                .iter()
                .map(|t| (t.name.clone(), t.partitions.iter().map(|p| (p.partition_index, e)).collect()));
            return commit_response(codes.collect());
        }
        let now = self.now();
        let mut accepted: Vec<(Tp, Option<Committed>)> = Vec::new();
        let mut answers: Vec<(String, Vec<(i32, ErrorCode)>)> = Vec::new();
        for t in &req.topics {
            let partitions = partitions_of(&t.name);
            let mut codes = Vec::new();
            for p in &t.partitions {
                let metadata = p.committed_metadata.clone().unwrap_or_default();
                let e = if partitions.is_none_or(|n| p.partition_index < 0 || p.partition_index as u32 >= n) {
                    code::UNKNOWN_TOPIC_OR_PARTITION
                } else if metadata.len() > self.config.metadata_max_bytes {
                    code::OFFSET_METADATA_TOO_LARGE
                } else {
                    let committed = Committed {
                        offset: p.committed_offset,
                        leader_epoch: p.committed_leader_epoch,
                        metadata,
                        commit_timestamp: now,
                    };
                    accepted.push(((t.name.clone(), p.partition_index), Some(committed)));
                    code::NONE
                };
                codes.push((p.partition_index, e));
            }
            answers.push((t.name.clone(), codes));
        }
        if !accepted.is_empty() {
            if let Err(e) = self.persist(&req.group_id, accepted, false).await {
                for (_, codes) in answers.iter_mut() {
                    codes.iter_mut().for_each(|c| c.1 = e);
                }
            }
        }
        commit_response(answers)
    }

    /// The group's verdict on a committer: its member and generation (a commit with generation
    /// -1 and no member id, from a standalone consumer or an admin, is taken when the group is
    /// unknown, and makes it known).
    fn check_committer(&self, req: &OffsetCommitRequest, version: i16) -> Option<ErrorCode> {
        let generation = req.generation_id_or_member_epoch;
        if let Some(g) = self.consumer_groups.borrow().get(&req.group_id) {
            return consumer::check_member(g, &req.member_id, generation, Some(version));
        }
        let mut groups = self.groups.borrow_mut();
        match groups.get_mut(&req.group_id) {
            Some(g) => {
                g.check_commit(&req.member_id, req.group_instance_id.as_deref(), generation, self.now()).map(group_code)
            }
            None if generation < 0 && req.member_id.is_empty() => {
                groups.insert(req.group_id.clone(), self.new_group(&req.group_id));
                None
            }
            // KIP-848: v9 says the group is not there.
            None if version >= 9 => Some(code::GROUP_ID_NOT_FOUND),
            None => Some(code::ILLEGAL_GENERATION),
        }
    }

    /// Append commits (or tombstones) of `group` to its offsets partition and apply them to the
    /// table at once (synchronously, so the table follows the log's order and a compaction
    /// snapshot includes every appended commit), then wait until they are durable: the
    /// answer, not the table, waits for the disk. One batch, or with `split` (DeleteGroups'
    /// tombstones, however many) several.
    async fn persist(&self, group: &str, commits: Vec<(Tp, Option<Committed>)>, split: bool) -> Result<(), ErrorCode> {
        let records = commits.iter().map(|(tp, c)| offsets::record(group, tp, c.as_ref())).collect();
        let batching = if split { Batching::Split } else { Batching::One };
        self.append(group, records, batching, |_, end, high_watermark| {
            let mut table = self.offsets.borrow_mut();
            for (tp, value) in commits {
                table.apply_written(group, tp, value, end, high_watermark);
            }
        })
        .await
    }

    /// Append `records` (key, value or tombstone) of `group` to its offsets partition, run
    /// `applied` with the partition's index, the appended end offset and the high watermark
    /// once they are in the log (synchronously, before any other append), then wait until
    /// they are durable. Commits are one batch (a commit
    /// too large for one is refused, as Kafka's); a consumer group's change (`Split`) may take
    /// several, appended together (a group of thousands of members writes more than
    /// `max.message.bytes` at once); a TxnOffsetCommit's is one transactional batch of its
    /// producer, checked by the partition's producer state (a fenced epoch: PRODUCER_FENCED).
    async fn append(
        &self,
        group: &str,
        records: Vec<Record>,
        batching: Batching,
        applied: impl FnOnce(i32, i64, i64),
    ) -> Result<(), ErrorCode> {
        let partitions = self.offsets_partitions.get().ok_or(code::COORDINATOR_NOT_AVAILABLE)?;
        let index = offsets_partition(group, partitions);
        let p = self.manager.get(OFFSETS_TOPIC, index).ok_or(code::NOT_COORDINATOR)?;
        // (Checked again here: a request that passed its checks before an await may find
        // the leadership gone or a load under way.)
        if self.loads.is_loading(index) {
            return Err(code::COORDINATOR_LOAD_IN_PROGRESS);
        }
        if !self.topics().leads(OFFSETS_TOPIC, index) {
            return Err(code::NOT_COORDINATOR);
        }
        let now = self.now();
        let batches = match batching {
            Batching::One => offsets::batches(&records, usize::MAX, now),
            Batching::Split => offsets::batches(&records, BATCH_BYTES, now),
            Batching::Transactional { pid, epoch } => {
                let seq = p.log().producers().next_sequence(pid, epoch);
                let mut b = BatchBuilder::new().transactional().producer(pid, epoch, seq);
                records.iter().for_each(|(k, v)| b.push(now, Some(k), v.as_deref(), &[]));
                vec![b.finish()]
            }
        };
        if batches.iter().any(|b| b.len() as u64 > p.log().config().max_message_bytes) {
            return Err(INVALID_COMMIT_OFFSET_SIZE);
        }
        let min_isr = p.log().config().min_insync_replicas as usize;
        let enough = || crate::groups::consumer::enough_in_sync(&*self.topics(), OFFSETS_TOPIC, index, min_isr);
        if !enough() {
            // Kafka: NOT_ENOUGH_REPLICAS, answered as COORDINATOR_NOT_AVAILABLE (retriable).
            return Err(code::COORDINATOR_NOT_AVAILABLE);
        }
        let mut next = None;
        let epoch = p.leader_epoch();
        for batch in &batches {
            let info = p.append_nowait(batch).map_err(|e| match storage_code(&e) {
                // Only a transactional batch meets the producer rules.
                code::INVALID_PRODUCER_EPOCH => code::PRODUCER_FENCED,
                c @ (code::INVALID_TXN_STATE | code::OUT_OF_ORDER_SEQUENCE_NUMBER) => c,
                _ => {
                    tracing::error!(group, partition = index, error = %e, "cannot write to {OFFSETS_TOPIC}");
                    code::COORDINATOR_NOT_AVAILABLE
                }
            })?;
            next = Some(Offset(info.last_offset + 1));
        }
        applied(index, next.map_or(0, |n| n.0), p.high_watermark().0);
        let Some(next) = next else { return Ok(()) };
        // Durable on every in-sync replica (Kafka writes these with acks=all), and on at least
        // min.insync.replicas of them (else NOT_ENOUGH_REPLICAS_AFTER_APPEND: not acknowledged).
        p.wait_replicated(next, epoch, crate::replica::INTERNAL_WRITE_TIMEOUT).await.map_err(|e| match e {
            crate::storage::StorageError::Follower => code::NOT_COORDINATOR,
            e => {
                tracing::error!(group, partition = index, error = %e, "{OFFSETS_TOPIC} records not replicated");
                code::COORDINATOR_NOT_AVAILABLE
            }
        })?;
        if !enough() {
            return Err(code::COORDINATOR_NOT_AVAILABLE);
        }
        Ok(())
    }

    /// OffsetFetch of one group; with `require_stable` (v7+), a partition whose offset an
    /// open transaction holds is UNSTABLE_OFFSET_COMMIT (the client retries), else its last
    /// committed offset.
    pub fn fetch(&self, f: OffsetFetchRequestGroup, require_stable: bool) -> OffsetFetchResponseGroup {
        let checked = self.unavailable(&f.group_id, false).or_else(|| {
            // KIP-848 (v9): a member of a consumer group fetches at its current epoch.
            let groups = self.consumer_groups.borrow();
            let g = groups.get(&f.group_id)?;
            consumer::check_member(g, f.member_id.as_deref().unwrap_or(""), f.member_epoch, None)
        });
        if let Some(e) = checked {
            return OffsetFetchResponseGroup { group_id: f.group_id, error_code: e, ..Default::default() };
        }
        let table = self.offsets.borrow();
        let group = &f.group_id;
        // What is replicated only (Kafka's coordinator reads at its last committed offset).
        let high_watermark = self
            .offsets_partitions
            .get()
            .and_then(|n| self.manager.get(OFFSETS_TOPIC, offsets_partition(group, n)))
            .map_or(i64::MAX, |p| p.high_watermark().0);
        let answer = |topic: &str, partition_index: i32, c: Option<&Committed>| {
            if require_stable && table.has_pending(group, &(topic.to_string(), partition_index)) {
                return OffsetFetchResponsePartition {
                    partition_index,
                    committed_offset: -1,
                    committed_leader_epoch: -1,
                    metadata: Some(String::new()),
                    error_code: code::UNSTABLE_OFFSET_COMMIT,
                    ..Default::default()
                };
            }
            OffsetFetchResponsePartition {
                partition_index,
                committed_offset: c.map_or(-1, |c| c.offset),
                committed_leader_epoch: c.map_or(-1, |c| c.leader_epoch),
                metadata: Some(c.map(|c| c.metadata.clone()).unwrap_or_default()),
                error_code: code::NONE,
                ..Default::default()
            }
        };
        let topics = match f.topics {
            Some(topics) => topics
                .into_iter()
                .map(|t| OffsetFetchResponseTopic {
                    partitions: t
                        .partition_indexes
                        .iter()
                        .map(|&i| {
                            answer(&t.name, i, table.visible(group, &(t.name.clone(), i), high_watermark).as_ref())
                        })
                        .collect(),
                    name: t.name,
                    ..Default::default()
                })
                .collect(),
            None => {
                let mut by_topic: BTreeMap<String, Vec<OffsetFetchResponsePartition>> = BTreeMap::new();
                let visible = table.visible_group(group, high_watermark);
                for ((topic, partition), c) in &visible {
                    by_topic.entry(topic.clone()).or_default().push(answer(topic, *partition, Some(c)));
                }
                by_topic
                    .into_iter()
                    .map(|(name, partitions)| OffsetFetchResponseTopic {
                        name: name.to_string(),
                        partitions,
                        ..Default::default()
                    })
                    .collect()
            }
        };
        OffsetFetchResponseGroup { group_id: f.group_id, topics, error_code: code::NONE, ..Default::default() }
    }

    /// DescribeGroups of one group, as Kafka's `GroupMetadataManager.describeGroups`: a group
    /// it does not know, or one of the consumer protocol (not a classic group), is Dead, and
    /// from v6 (KIP-1043) also GROUP_ID_NOT_FOUND with Kafka's message.
    pub fn describe(&self, group: &str, version: i16) -> DescribedGroup {
        let base =
            DescribedGroup { group_id: group.to_string(), authorized_operations: i32::MIN, ..Default::default() };
        if let Some(e) = self.unavailable(group, false) {
            return DescribedGroup { error_code: e, group_state: GroupState::Dead.name().to_string(), ..base };
        }
        let c = self;
        let groups = c.groups.borrow();
        match groups.get(group) {
            Some(g) => {
                let d = g.describe();
                DescribedGroup {
                    group_state: d.state.name().to_string(),
                    protocol_type: d.protocol_type,
                    protocol_data: d.protocol,
                    members: d
                        .members
                        .into_iter()
                        .map(|m| DescribedGroupMember {
                            member_id: m.member_id,
                            group_instance_id: m.instance_id,
                            client_id: m.client_id,
                            client_host: m.client_host,
                            member_metadata: m.metadata,
                            member_assignment: m.assignment,
                            ..Default::default()
                        })
                        .collect(),
                    ..base
                }
            }
            // Offsets but no members (e.g. after a restart): an empty group. Neither: Dead,
            // as Kafka describes a group it does not know.
            None if c.offsets.borrow().group(group).is_some() => {
                DescribedGroup { group_state: GroupState::Empty.name().to_string(), ..base }
            }
            None => {
                let consumer = self.consumer_groups.borrow().get(group).is_some_and(|g| !g.is_empty());
                let why = if consumer { "is not a classic group" } else { "not found" };
                let dead = DescribedGroup { group_state: GroupState::Dead.name().to_string(), ..base };
                if version < 6 {
                    return dead;
                }
                DescribedGroup {
                    error_code: code::GROUP_ID_NOT_FOUND,
                    error_message: Some(format!("Group {group} {why}.")),
                    ..dead
                }
            }
        }
    }

    pub fn list(&self, states: &[String]) -> Vec<ListedGroup> {
        let c = self;
        let groups = c.groups.borrow();
        let table = c.offsets.borrow();
        let mut out: BTreeMap<String, (String, GroupState)> = BTreeMap::new();
        for id in table.groups() {
            out.insert(id.clone(), (String::new(), GroupState::Empty));
        }
        for (id, g) in groups.iter() {
            out.insert(id.clone(), (g.protocol_type().unwrap_or_default().to_string(), g.state()));
        }
        let mut listed: Vec<ListedGroup> = out
            .into_iter()
            .filter(|(_, (_, s))| *s != GroupState::Dead)
            .filter(|(_, (_, s))| states.is_empty() || states.iter().any(|w| w.eq_ignore_ascii_case(s.name())))
            .map(|(group_id, (protocol_type, s))| ListedGroup {
                group_id,
                protocol_type,
                group_state: s.name().to_string(),
                group_type: "classic".into(),
                ..Default::default()
            })
            .collect();
        for (id, g) in c.consumer_groups.borrow().iter() {
            listed.retain(|l| l.group_id != *id);
            if states.is_empty() || states.iter().any(|w| w.eq_ignore_ascii_case(g.state())) {
                listed.push(ListedGroup {
                    group_id: id.clone(),
                    protocol_type: "consumer".into(),
                    group_state: g.state().to_string(),
                    group_type: "consumer".into(),
                    ..Default::default()
                });
            }
        }
        listed
    }

    pub async fn delete(&self, group: &str) -> ErrorCode {
        if let Some(e) = self.unavailable(group, false) {
            return e;
        }
        let c = self;
        let has_offsets = c.offsets.borrow().group(group).is_some();
        let consumer = c.consumer_groups.borrow().get(group).map(|g| g.is_empty());
        if consumer == Some(false) {
            return code::NON_EMPTY_GROUP;
        }
        match c.groups.borrow().get(group) {
            Some(g) => {
                if let Err(e) = g.deletable() {
                    return group_code(e);
                }
            }
            None if !has_offsets && consumer.is_none() => return code::GROUP_ID_NOT_FOUND,
            None => {}
        }
        let tombstones: Vec<(Tp, Option<Committed>)> = c
            .offsets
            .borrow()
            .group(group)
            .map(|o| o.keys().map(|tp| (tp.clone(), None)).collect())
            .unwrap_or_default();
        if !tombstones.is_empty() {
            if let Err(e) = self.persist(group, tombstones, true).await {
                return e;
            }
        }
        // Forget the group unless members joined while the tombstones were written.
        {
            let mut groups = c.groups.borrow_mut();
            if groups.get(group).is_some_and(|g| g.deletable().is_ok()) {
                groups.remove(group);
            }
        }
        let emptied = {
            let mut consumer_groups = c.consumer_groups.borrow_mut();
            match consumer_groups.get(group) {
                Some(g) if g.is_empty() => consumer_groups.remove(group),
                _ => None,
            }
        };
        if let Some(before) = emptied {
            if let Err(e) = self.persist_group(group, Some(before)).await {
                return e;
            }
        }
        tracing::info!(group, "group deleted");
        code::NONE
    }
}

/// How [`Coordinator::append`] batches its records.
enum Batching {
    One,
    Split,
    Transactional { pid: i64, epoch: i16 },
}

/// An OffsetCommit response: each topic's partitions with their codes.
pub fn commit_response(answers: Vec<(String, Vec<(i32, ErrorCode)>)>) -> OffsetCommitResponse {
    OffsetCommitResponse {
        topics: answers
            .into_iter()
            .map(|(name, codes)| OffsetCommitResponseTopic {
                name,
                partitions: codes
                    .into_iter()
                    .map(|(partition_index, error_code)| OffsetCommitResponsePartition {
                        partition_index,
                        error_code,
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}
