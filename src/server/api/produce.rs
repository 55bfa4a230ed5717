//! Produce: each partition's records go to the shard that owns the partition ([`Append`]),
//! which appends them and answers once they are as durable as the flush policy promises
//! (SPEC T3.5). Appends are issued in request order while the request holds its
//! connection's turn, then awaited together.

use crate::io::DmaDisk;
use crate::protocol::errors::{self as code, ErrorCode};
use crate::protocol::messages::*;
use crate::security::acl::{Operation, ResourceType};
use crate::security::quota::PRODUCER_BYTE_RATE;
use crate::server::api::Cx;
use crate::server::control::ensure_topic;
use crate::server::errors::{call_code, storage_code};
use crate::server::router::{CallError, ShardCall};
use crate::server::shard::Shard;
use crate::server::transactions::{enrol_partitions, verify_txn_write, Enrolled, TxnWrite, WriteTurn};
use crate::storage::format::batch::BatchHeader;
use crate::storage::format::stored::{check_produce_shape, ProduceShape};
use crate::storage::partition::Partition;
use crate::storage::StorageError;
use crate::types::{Offset, TimestampMs, Uuid};
use bytes::Bytes;
use std::rc::Rc;
use std::time::Duration;

/// Append one partition's records on the shard that owns it.
#[derive(Debug)]
pub struct Append {
    pub topic: String,
    pub partition: i32,
    pub records: Bytes,
    /// The request's transactional id: a transactional batch opening its producer's
    /// transaction on this partition is verified with the coordinator first (KIP-890 part 1).
    pub transactional_id: Option<String>,
    /// Produce v12+: the producer speaks transactions version 2, and this broker adds the
    /// partition to the transaction at its first write (KIP-890 part 2).
    pub adds_to_txn: bool,
    /// acks=all (-1) on a clustered node: the answer waits until every in-sync replica has
    /// the records durable, for at most `timeout` (a standalone node answers as its flush
    /// policy promises, within the shard call's deadline).
    pub replicated: bool,
    pub timeout: std::time::Duration,
}

/// Where an append landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    pub base_offset: Offset,
    /// The broker's time for LogAppendTime topics (SPEC T3.4), -1 otherwise.
    pub log_append_time: TimestampMs,
    pub log_start_offset: Offset,
}

/// Why a partition refused a produce: the error code, the log start offset (the Java
/// producer reads it), a message, and the records that made a batch invalid (KIP-467: index in
/// the batch, why).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ProduceRefused {
    pub code: ErrorCode,
    pub log_start_offset: Offset,
    pub message: Option<String>,
    pub record_errors: Vec<(i32, String)>,
}

impl ProduceRefused {
    pub fn code(code: ErrorCode) -> Self {
        ProduceRefused { code, log_start_offset: Offset::NONE, ..Default::default() }
    }

    /// From a storage error, with Kafka's messages for invalid timestamps.
    fn from_storage(e: &StorageError, log_start_offset: Offset) -> Self {
        let (message, record_errors) = match e {
            StorageError::InvalidTimestamp { lo, hi, records, .. } => (
                "One or more records have been rejected due to invalid timestamp".to_string(),
                records
                    .iter()
                    .map(|&(i, ts)| {
                        let why = format!("Timestamp {ts} of message with offset {i} is out of range. The timestamp should be within [{lo}, {hi}]");
                        (i, why)
                    })
                    .collect(),
            ),
            StorageError::KeylessRecords { records } => (
                "One or more records have been rejected due to records without a key in a compacted topic".to_string(),
                records.iter().map(|&i| (i, "Compacted topic cannot accept message without key.".to_string())).collect(),
            ),
            // Disk trouble: a fixed text (the error itself, with paths, is in the broker's log).
            StorageError::Io(_) => ("the partition's disk failed".to_string(), Vec::new()),
            StorageError::WritesSuspended(_) => {
                ("writes are suspended until the partition's disk recovers".to_string(), Vec::new())
            }
            StorageError::Corrupt { .. } => ("the partition's stored data failed a check".to_string(), Vec::new()),
            e => (e.to_string(), Vec::new()),
        };
        ProduceRefused { code: storage_code(e), log_start_offset, message: Some(message), record_errors }
    }
}

impl ShardCall<Shard> for Append {
    type Reply = Result<Appended, ProduceRefused>;
    const NAME: &'static str = "append";

    /// acks=all on a replicated partition waits for the ISR up to the request's timeout.
    fn deadline(&self) -> Option<std::time::Duration> {
        self.replicated.then(|| self.timeout + std::time::Duration::from_secs(5))
    }

    async fn run(self, shard: Rc<Shard>) -> Self::Reply {
        let p = shard.led_partition(&self.topic, self.partition).map_err(ProduceRefused::code)?;
        // Held until the records have their offsets (a first transactional write's turn).
        let turn = match self.verify_txn(&shard, &p).await {
            Ok(turn) => turn,
            Err(c) => return Err(ProduceRefused { code: c, log_start_offset: p.log_start(), ..Default::default() }),
        };
        // The leadership the records are appended under: acks=all fails if it ends before they
        // are replicated.
        let epoch = p.leader_epoch();
        let appended = if turn.is_held() {
            // The first poll appends (offsets assigned, no yield before); the turn goes to the
            // producer's next write then, not after the flush.
            let mut appending = std::pin::pin!(p.append(&self.records));
            let first = futures_lite::future::poll_once(&mut appending).await;
            drop(turn);
            match first {
                Some(r) => r,
                None => appending.await,
            }
        } else {
            p.append(&self.records).await
        };
        match appended {
            Ok(info) => {
                if self.replicated {
                    let end = Offset(info.last_offset + 1);
                    let (topic, partition, timeout) = (&self.topic, self.partition, self.timeout);
                    let replicated = wait_replicated(&shard, &p, topic, partition, end, epoch, timeout);
                    if let Err(c) = replicated.await {
                        return Err(ProduceRefused { code: c, log_start_offset: p.log_start(), ..Default::default() });
                    }
                }
                crate::metrics::count(crate::metrics::Counter::RecordsProduced, info.records);
                Ok(Appended {
                    base_offset: Offset(info.base_offset),
                    log_append_time: TimestampMs(info.log_append_time),
                    log_start_offset: p.log_start(),
                })
            }
            Err(e) => {
                crate::metrics::count(crate::metrics::Counter::ProduceErrors, 1);
                tracing::debug!(topic = self.topic, partition = self.partition, error = %e, "produce refused");
                Err(ProduceRefused::from_storage(&e, p.log_start()))
            }
        }
    }
}

impl Append {
    /// KIP-890 for a transactional batch ([`verify_txn_write`]).
    async fn verify_txn(&self, shard: &Rc<Shard>, p: &Rc<Partition<DmaDisk>>) -> Result<WriteTurn, ErrorCode> {
        if !is_transactional(&self.records) {
            return Ok(WriteTurn::none());
        }
        let Ok(h) = BatchHeader::parse(&self.records) else { return Ok(WriteTurn::none()) }; // storage refuses it
        let Some(id) = self.transactional_id.as_deref() else {
            return Err(code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
        };
        let write = TxnWrite {
            id: id.to_string(),
            pid: h.producer_id,
            epoch: h.producer_epoch,
            partition: (self.topic.clone(), self.partition),
            add: self.adds_to_txn,
        };
        verify_txn_write(shard, p, write).await
    }
}

/// Kafka's checks of a Produce request's records for one partition before any append
/// (`ProduceRequest.validateRecords`), from v3 on; v0-v2 carry legacy message sets (or v2
/// batches from clients that send them): storage checks those.
fn records_error(version: i16, records: &[u8]) -> Option<ErrorCode> {
    if version < 3 {
        return None;
    }
    // zstd from Produce v7 on.
    match check_produce_shape(records, version >= 7) {
        Ok(()) => None,
        Err(ProduceShape::TooShort) => Some(code::CORRUPT_MESSAGE),
        Err(ProduceShape::NotOneV2Batch) => Some(code::INVALID_RECORD),
        Err(ProduceShape::Zstd) => Some(code::UNSUPPORTED_COMPRESSION_TYPE),
    }
}

/// Whether records start with a transactional v2 batch (attributes bit 4; Produce v3+ sends
/// one batch per partition).
fn is_transactional(records: &[u8]) -> bool {
    records.len() > 22 && records[16] == 2 && i16::from_be_bytes([records[21], records[22]]) & 0x10 != 0
}

/// The refusal of a partition before its records reach storage, if any.
fn refusal(cx: &Cx<'_>, acks: i16, topic: &str, known: bool, part: &ProducePartition) -> Option<ErrorCode> {
    if !matches!(acks, -1..=1) {
        return Some(code::INVALID_REQUIRED_ACKS);
    }
    if crate::server::is_internal_topic(topic) {
        // Only the coordinators write there (Kafka: "cannot append to internal topic").
        return Some(code::INVALID_TOPIC_EXCEPTION);
    }
    if acks == -1 && cx.shard.leads(topic, part.index) {
        // On the leader, fewer replicas in sync than min.insync.replicas (a standalone node has
        // one): Kafka's answer. (Elsewhere the append says who leads.)
        let isr = cx.shard.in_sync(topic, part.index).unwrap_or(1) as i32;
        if cx.shard.topic(topic, |i| i.config.min_insync_replicas as i32 > isr).unwrap_or(false) {
            return Some(code::NOT_ENOUGH_REPLICAS);
        }
    }
    if !known || part.index < 0 {
        return Some(code::UNKNOWN_TOPIC_OR_PARTITION);
    }
    match &part.records {
        None => Some(code::CORRUPT_MESSAGE),
        Some(r) => records_error(cx.version(), r),
    }
}

/// Transactions version 2 (Produce v12+): the request's transactional partitions not yet added
/// by this connection are added to the producer's transaction in one coordinator write, as
/// Kafka's leaders add a request's partitions together, rather than one write per partition
/// from each partition's own check (which still runs, and answers if this fails). One
/// partition is left to its own check.
async fn enrol_request(cx: &Cx<'_>, p: &ProduceRequest, known: &[bool], allowed: &[bool]) {
    let Some(id) = p.transactional_id.as_deref() else { return };
    let mut producer = None;
    let mut wanted = Vec::new();
    for ((t, known), allowed) in p.topics.iter().zip(known).zip(allowed) {
        // Only what the appends will be tried on: a topic that exists, writable, not internal.
        if !(*known && *allowed) || crate::server::is_internal_topic(&t.name) {
            continue;
        }
        let count = cx.shard.topic(&t.name, |info| info.partitions).unwrap_or(0);
        for part in t.partitions.iter().filter(|x| x.index >= 0 && (x.index as u32) < count) {
            let Some(records) = part.records.as_deref().filter(|r| is_transactional(r)) else { continue };
            let Ok(h) = BatchHeader::parse(records) else { continue };
            if *producer.get_or_insert((h.producer_id, h.producer_epoch)) == (h.producer_id, h.producer_epoch) {
                wanted.push((t.name.clone(), part.index));
            }
        }
    }
    let Some((pid, epoch)) = producer else { return };
    {
        let enrolled = cx.session.enrolled.borrow();
        if (enrolled.id.as_str(), enrolled.pid, enrolled.epoch) == (id, pid, epoch) {
            wanted.retain(|tp| !enrolled.partitions.contains(tp));
        }
    }
    if wanted.len() < 2 || !enrol_partitions(cx.shard, id, pid, epoch, wanted.clone()).await {
        return;
    }
    let mut enrolled = cx.session.enrolled.borrow_mut();
    if (enrolled.id.as_str(), enrolled.pid, enrolled.epoch) != (id, pid, epoch) {
        *enrolled = Enrolled { id: id.to_string(), pid, epoch, ..Default::default() };
    }
    enrolled.partitions.extend(wanted);
}

/// An append issued to its owner, or the code it was refused with before that.
type Issued = Result<glommio::task::JoinHandle<Result<<Append as ShardCall<Shard>>::Reply, CallError>>, ErrorCode>;

/// One topic's appends, issued: its name, its id (v13) and each partition's append.
type IssuedTopic = (String, [u8; 16], Vec<(i32, Issued)>);

/// Produce; `None` for acks=0 (no response is due).
pub async fn handle(cx: &mut Cx<'_>, mut p: ProduceRequest) -> Option<ProduceResponse> {
    let acks_ok = matches!(p.acks, -1..=1);
    // v13 (KIP-516): topics by id, never created by a produce; an id this broker does not know
    // is UNKNOWN_TOPIC_ID, as Kafka answers, before any other check.
    let by_id = cx.version() >= 13;
    let unknown_id: Vec<bool> = p
        .topics
        .iter_mut()
        .map(|t| {
            if !by_id {
                return false;
            }
            t.name = cx.shard.topic_name(Uuid(t.topic_id)).unwrap_or_default();
            t.name.is_empty()
        })
        .collect();
    // Topics first (auto-creation), in request order, while this request holds the turn.
    // Authorization first (WRITE on each topic): a topic the client may not write is
    // TOPIC_AUTHORIZATION_FAILED whether it exists or not, and is never auto-created.
    // Transactional records (KIP-98) also need WRITE on the request's transactional id, else
    // every partition is TRANSACTIONAL_ID_AUTHORIZATION_FAILED (Kafka's answer).
    let transactional =
        p.topics.iter().flat_map(|t| &t.partitions).any(|x| x.records.as_deref().is_some_and(is_transactional));
    let txn_refused = transactional
        && !p
            .transactional_id
            .as_deref()
            .is_some_and(|id| cx.allowed(Operation::Write, ResourceType::TransactionalId, id));
    let allowed: Vec<bool> =
        p.topics.iter().map(|t| cx.allowed(Operation::Write, ResourceType::Topic, &t.name)).collect();
    let mut known = Vec::with_capacity(p.topics.len());
    for (t, ok) in p.topics.iter().zip(&allowed) {
        // Auto-creation also needs CREATE (on the cluster or the topic), as Metadata's does.
        let may_create = || {
            !by_id
                && (cx.allowed_on_cluster(Operation::Create)
                    || cx.allowed(Operation::Create, ResourceType::Topic, &t.name))
        };
        let usable =
            *ok && acks_ok && (cx.shard.has_topic(&t.name) || (may_create() && ensure_topic(cx.shard, &t.name).await));
        known.push(usable);
    }
    if cx.version() >= 12 && transactional && !txn_refused {
        enrol_request(cx, &p, &known, &allowed).await;
    }
    // KIP-219: the request's bytes count against the client's producer_byte_rate; the records
    // are appended anyway, and the answer says how long the client is throttled.
    let bytes: usize =
        p.topics.iter().flat_map(|t| &t.partitions).filter_map(|x| x.records.as_ref()).map(|r| r.len()).sum();
    let throttle_time_ms = cx.quota(PRODUCER_BYTE_RATE, bytes as f64, true);
    // Issue every append in request order: glommio runs spawned tasks first in, first out, so
    // the appends happen in this order, before the next request's (which waits for the turn).
    // Detached: a closed connection does not cancel an append half done.
    let mut pending: Vec<IssuedTopic> = Vec::with_capacity(p.topics.len());
    for (((t, known), allowed), unknown_id) in p.topics.into_iter().zip(known).zip(allowed).zip(unknown_id) {
        let mut parts = Vec::with_capacity(t.partitions.len());
        for part in t.partitions {
            let refused = if unknown_id {
                Some(code::UNKNOWN_TOPIC_ID)
            } else if txn_refused {
                Some(code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
            } else if allowed {
                refusal(cx, p.acks, &t.name, known, &part)
            } else {
                Some(code::TOPIC_AUTHORIZATION_FAILED)
            };
            let outcome = match (refused, part.records) {
                (Some(c), _) => Err(c),
                (None, None) => Err(code::CORRUPT_MESSAGE),
                (None, Some(records)) => {
                    let shard = cx.shard.clone();
                    let target = shard.owner(&t.name, part.index);
                    let transactional_id = p.transactional_id.clone();
                    let call = Append {
                        topic: t.name.clone(),
                        partition: part.index,
                        records,
                        transactional_id,
                        adds_to_txn: cx.version() >= 12,
                        replicated: p.acks == -1 && shard.config().cluster.is_some(),
                        timeout: std::time::Duration::from_millis(p.timeout_ms.max(0) as u64),
                    };
                    Ok(glommio::spawn_local(async move { shard.call(target, call).await }).detach())
                }
            };
            parts.push((part.index, outcome));
        }
        pending.push((t.name, t.topic_id, parts));
    }
    cx.release_turn();
    // Awaited with acks=0 too: the request (its frame, its in-flight slot) is held until its
    // appends are done, so a client that wants no answer cannot pile up unbounded work.
    let mut topics = answers(pending).await;
    if p.acks == 0 {
        return None;
    }
    // KIP-951 (v10+): a partition led elsewhere names its leader, and the answer its address.
    let mut leaders = std::collections::BTreeSet::new();
    if cx.version() >= 10 {
        for t in &mut topics {
            for part in t.partitions.iter_mut().filter(|x| x.error_code == code::NOT_LEADER_OR_FOLLOWER) {
                if let Some(l) = super::cluster::current_leader(cx.shard, &t.name, part.index) {
                    leaders.insert(l.leader_id);
                    part.current_leader = l;
                }
            }
        }
    }
    let node_endpoints = super::cluster::leader_endpoints(cx, leaders).await;
    Some(ProduceResponse { topics, throttle_time_ms, node_endpoints, ..Default::default() })
}

/// Each partition's answer once its append is done (or the code it was refused with), in
/// request order.
async fn answers(pending: Vec<IssuedTopic>) -> Vec<ProduceTopicResponse> {
    let mut topics = Vec::with_capacity(pending.len());
    for (name, topic_id, parts) in pending {
        let mut partitions = Vec::with_capacity(parts.len());
        for (index, outcome) in parts {
            let result = match outcome {
                Err(c) => Err(ProduceRefused::code(c)),
                Ok(task) => match task.await {
                    Some(Ok(r)) => r,
                    Some(Err(e)) => Err(ProduceRefused::code(call_code(&e, code::NOT_LEADER_OR_FOLLOWER))),
                    // The task is gone only when the shard is stopping.
                    None => Err(ProduceRefused::code(code::NOT_LEADER_OR_FOLLOWER)),
                },
            };
            partitions.push(partition_response(index, result));
        }
        topics.push(ProduceTopicResponse { name, topic_id, partitions, ..Default::default() });
    }
    topics
}

fn partition_response(index: i32, result: Result<Appended, ProduceRefused>) -> ProducePartitionResponse {
    match result {
        Ok(a) => ProducePartitionResponse {
            index,
            error_code: code::NONE,
            base_offset: a.base_offset.get(),
            log_append_time_ms: a.log_append_time.get(),
            log_start_offset: a.log_start_offset.get(),
            ..Default::default()
        },
        Err(refused) => ProducePartitionResponse {
            index,
            error_code: refused.code,
            base_offset: -1,
            log_append_time_ms: -1,
            log_start_offset: refused.log_start_offset.get(),
            error_message: refused.message,
            record_errors: refused
                .record_errors
                .into_iter()
                .map(|(batch_index, why)| RecordError { batch_index, message: Some(why), ..Default::default() })
                .collect(),
            ..Default::default()
        },
    }
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
