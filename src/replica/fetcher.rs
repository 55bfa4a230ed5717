//! A shard's fetcher for one leader node: Kafka's replica fetcher. One connection to the
//! leader's inter-broker listener; each round asks for every partition this shard follows
//! from it (Fetch v15, by topic id, with this node's replica id and broker epoch, the leader
//! epoch it knows and the epoch of its last batch), appends what comes back, waits for the
//! fdatasync, and sets each partition's high watermark from the leader's. The task ends when
//! nothing is followed from the leader any more.

use super::{Host, Tp};
use crate::client::Conn;
use crate::io::DmaDisk;
use crate::protocol::errors as code;
use crate::protocol::messages::*;
use crate::storage::Partition;
use crate::types::Offset;
use std::rc::Rc;
use std::time::Duration;

/// The Fetch version followers speak: topics by id (KIP-516), the replica's id and broker
/// epoch in ReplicaState (KIP-903), KIP-320's epochs (last fetched, diverging).
const FETCH_VERSION: i16 = 18;

/// How long a connection to a leader or a fetch's answer (beyond its own wait) may take
/// (Kafka's `replica.socket.timeout.ms`).
const SOCKET_TIMEOUT: Duration = Duration::from_secs(30);

pub(super) async fn run<H: Host>(host: Rc<H>, leader: i32) {
    let settings = host.replica_settings().clone();
    let mut conn: Option<Rc<Conn>> = None;
    let mut failures = 0u32;
    loop {
        if host.is_stopping() || host.replication().fetcher_done(leader) {
            return;
        }
        let partitions = host.replication().followed_from(leader);
        if conn.as_ref().is_none_or(|c| c.is_closed()) {
            let connecting = crate::deadline::within(SOCKET_TIMEOUT, connect(&host, leader)).await;
            conn = match connecting.unwrap_or_else(|| Err(anyhow::anyhow!("timed out"))) {
                Ok(c) => Some(c),
                Err(e) => {
                    failures += 1;
                    if failures == 1 || failures.is_multiple_of(30) {
                        tracing::warn!(leader, error = %e, "cannot reach the leader to replicate");
                    }
                    glommio::timer::sleep(settings.fetch_backoff.max(Duration::from_millis(100))).await;
                    continue;
                }
            };
        }
        let c = conn.clone().expect("connected");
        let (mut req, asked) = request(&*host, &partitions).await;
        if asked.is_empty() {
            glommio::timer::sleep(Duration::from_millis(100)).await;
            continue;
        }
        // A leader gone silent (a cut link: no reset) answers nothing: the connection goes.
        let wait = SOCKET_TIMEOUT + Duration::from_millis(settings.fetch_wait_max_ms.max(0) as u64);
        let called = crate::deadline::within(wait, c.call_at(1, FETCH_VERSION, &mut req)).await;
        let resp: FetchResponse = match called.unwrap_or_else(|| Err(anyhow::anyhow!("no answer within {wait:?}"))) {
            Ok(r) => r,
            Err(e) => {
                tracing::debug!(leader, error = %e, "replica fetch failed");
                conn = None;
                glommio::timer::sleep(settings.fetch_backoff).await;
                continue;
            }
        };
        failures = 0;
        if resp.error_code != code::NONE {
            tracing::warn!(leader, code = resp.error_code.0, "the leader refused this replica's fetch");
            glommio::timer::sleep(settings.fetch_backoff).await;
            continue;
        }
        let mut backoff = false;
        for t in resp.topics {
            let Some(topic) = host.topic_name(crate::types::Uuid(t.topic_id)) else { continue };
            for part in t.partitions {
                let tp = (topic.clone(), part.partition_index);
                let Some(&(_, epoch)) = asked.iter().find(|(a, _)| *a == tp) else { continue };
                backoff |= !take(&*host, &c, leader, epoch, &tp, part).await;
            }
        }
        if backoff {
            glommio::timer::sleep(settings.fetch_backoff.min(Duration::from_millis(200))).await;
        }
    }
}

/// The Fetch for `partitions` (each with the leader epoch it is followed at), each from what
/// is durable here: the offset asked is what the leader counts as this replica's durable end.
/// With the partitions asked (some may be gone or unreadable meanwhile).
async fn request<H: Host>(host: &H, partitions: &[(Tp, i32)]) -> (FetchRequest, Vec<(Tp, i32)>) {
    let (node, settings) = (host.node_id(), host.replica_settings());
    let mut topics: Vec<FetchTopic> = Vec::new();
    let mut asked = Vec::with_capacity(partitions.len());
    for ((topic, partition), epoch) in partitions {
        let Some(p) = host.partition(topic, *partition) else { continue };
        let Some(id) = host.topic_id(topic) else { continue };
        let end = p.log_end();
        if p.wait_durable(end).await.is_err() {
            continue;
        }
        let fp = FetchPartition {
            partition: *partition,
            current_leader_epoch: *epoch,
            fetch_offset: end.get(),
            last_fetched_epoch: p.latest_epoch().unwrap_or(-1),
            log_start_offset: p.log_start().get(),
            partition_max_bytes: settings.fetch_max_bytes,
            // KIP-1166: the leader answers at once while this is behind its own.
            high_watermark: p.high_watermark().get(),
            ..Default::default()
        };
        match topics.iter_mut().find(|t| t.topic == *topic) {
            Some(t) => t.partitions.push(fp),
            None => topics.push(FetchTopic {
                topic: topic.clone(),
                topic_id: id.0,
                partitions: vec![fp],
                ..Default::default()
            }),
        }
        asked.push(((topic.clone(), *partition), *epoch));
    }
    let replica_state =
        ReplicaState { replica_id: node, replica_epoch: host.replication().broker_epoch(), ..Default::default() };
    let req = FetchRequest {
        replica_id: node,
        replica_state,
        max_wait_ms: settings.fetch_wait_max_ms,
        min_bytes: 1,
        max_bytes: settings.fetch_response_max_bytes,
        isolation_level: 0,
        session_id: 0,
        session_epoch: -1,
        topics,
        ..Default::default()
    };
    (req, asked)
}

/// A connection to `leader` for replication.
async fn connect<H: Host>(host: &Rc<H>, leader: i32) -> anyhow::Result<Rc<Conn>> {
    host.connect_to(leader).await
}

/// Take one partition's answer; `false` when the partition should wait a little before its
/// next fetch (an error the metadata will resolve).
async fn take<H: Host>(host: &H, c: &Conn, leader: i32, epoch: i32, tp: &Tp, part: FetchPartitionResponse) -> bool {
    let replication = host.replication();
    let Some(p) = host.partition(&tp.0, tp.1) else { return true };
    if !replication.still_follows(tp, leader, epoch) {
        return true;
    }
    let (topic, partition) = (tp.0.as_str(), tp.1);
    if part.error_code != code::NONE {
        return refused(host, c, epoch, tp, &p, &part).await;
    }
    if part.diverging_epoch.end_offset >= 0 {
        // KIP-320: the leader's log ends that epoch earlier (or never had it): cut what
        // diverges, the smaller of the leader's end for it and this log's.
        let div = part.diverging_epoch;
        let (_, mine) = p.end_offset_for_epoch(div.epoch);
        let to = if mine.get() >= 0 { div.end_offset.min(mine.get()) } else { div.end_offset };
        let leader_end = div.end_offset;
        tracing::info!(topic, partition, epoch = div.epoch, leader_end, to, "truncating a divergent suffix");
        let before = p.log_end();
        return match p.truncate_as_follower(Offset(to)).await {
            // Nothing cut: the next fetch would hear the same; wait a little first.
            Ok(end) => end != before,
            Err(e) => {
                tracing::warn!(topic, partition, error = %e, "cannot truncate the replica's divergent suffix");
                false
            }
        };
    }
    let records = part.records.unwrap_or_default();
    if let Some(base) = first_offset(&records).filter(|&b| b >= 0 && b < p.log_end().get()) {
        // An empty copy restarted at a log start inside a batch (DeleteRecords): the leader
        // sends the whole batch; the copy starts again at its first offset (Kafka's answer to
        // an unexpected append offset).
        if p.log_start() == p.log_end() {
            if let Err(e) = p.truncate_as_follower(Offset(base)).await {
                tracing::warn!(topic, partition, error = %e, "cannot restart the replica at a batch's start");
                return false;
            }
        }
    }
    if !records.is_empty() {
        match p.append_replica(&records).await {
            Ok(info) => {
                if let Err(e) = p.wait_durable(Offset(info.last_offset + 1)).await {
                    tracing::warn!(topic, partition, error = %e, "replicated records not made durable");
                    return false;
                }
            }
            Err(e) => {
                tracing::warn!(topic, partition, error = %e, "cannot append what the leader sent");
                return false;
            }
        }
    }
    // The leader's log start (DeleteRecords, retention) and high watermark, within this log,
    // unless the leadership moved while this answer was taken in.
    if !replication.still_follows(tp, leader, epoch) {
        return true;
    }
    if part.log_start_offset > p.log_start().get() && part.log_start_offset <= p.log_end().get() {
        if let Err(e) = p.delete_records(Offset(part.log_start_offset)).await {
            tracing::debug!(topic, partition, error = %e, "cannot move the replica's log start");
        }
    }
    let hw = part.high_watermark.min(p.log_end().get());
    if hw >= 0 && replication.still_follows(tp, leader, epoch) {
        p.set_replicated_to(Some(Offset(hw)));
    }
    true
}

/// A partition's answer with an error: a copy behind the leader's log start starts again
/// there, one past the leader's end is cut to it; `false` for the others (the metadata will
/// resolve them: wait a little before the next fetch).
async fn refused<H: Host>(
    host: &H,
    c: &Conn,
    epoch: i32,
    tp: &Tp,
    p: &Rc<Partition<DmaDisk>>,
    part: &FetchPartitionResponse,
) -> bool {
    let (topic, partition) = (tp.0.as_str(), tp.1);
    match part.error_code {
        code::OFFSET_OUT_OF_RANGE if part.log_start_offset > p.log_end().get() => {
            // Behind the leader's log start (retention, DeleteRecords or compaction there, or
            // a new replica): everything here goes and the copy starts again, empty, at the
            // leader's start (Kafka's truncateFullyAndStartAt).
            let start = part.log_start_offset;
            tracing::info!(
                topic,
                partition,
                start,
                end = p.log_end().get(),
                "replica restarts at the leader's log start"
            );
            if let Err(e) = p.restart_as_follower(Offset(start)).await {
                tracing::warn!(topic, partition, error = %e, "cannot restart the replica's log");
                return false;
            }
            true
        }
        code::OFFSET_OUT_OF_RANGE => {
            // Past the leader's end with no epoch to tell where the logs part: keep what the
            // leader has, up to its log end (Kafka's; cutting to its high watermark instead
            // would drop records the leader has and may have acknowledged meanwhile).
            let to = match leader_end(c, host.node_id(), epoch, tp).await {
                Ok(end) => end,
                Err(e) => {
                    tracing::info!(topic, partition, error = %e, "cannot learn the leader's log end");
                    return false;
                }
            };
            if to >= p.log_end().get() {
                return false;
            }
            tracing::info!(topic, partition, to, "replica past its leader's end: truncating to the leader's log end");
            if let Err(e) = p.truncate_as_follower(Offset(to)).await {
                tracing::warn!(topic, partition, error = %e, "cannot truncate the replica");
                return false;
            }
            true
        }
        c => {
            tracing::debug!(topic, partition, code = c.0, "replica fetch of a partition refused");
            false
        }
    }
}

/// The leader's log end for `tp`: where its own epoch (`epoch`, the one this copy follows at)
/// ends, as OffsetForLeaderEpoch answers a replica (Kafka asks ListOffsets; the answer is the
/// same).
async fn leader_end(c: &Conn, node: i32, epoch: i32, tp: &Tp) -> anyhow::Result<i64> {
    let partition = OffsetForLeaderPartition {
        partition: tp.1,
        current_leader_epoch: epoch,
        leader_epoch: epoch,
        ..Default::default()
    };
    let topic = OffsetForLeaderTopic { topic: tp.0.clone(), partitions: vec![partition], ..Default::default() };
    let mut req = OffsetForLeaderEpochRequest { replica_id: node, topics: vec![topic], ..Default::default() };
    let asked = crate::deadline::within(SOCKET_TIMEOUT, c.call_at(23, 3, &mut req)).await;
    let resp: OffsetForLeaderEpochResponse = asked.unwrap_or_else(|| Err(anyhow::anyhow!("no answer")))?;
    let found = resp.topics.iter().flat_map(|t| t.partitions.iter()).find(|p| p.partition == tp.1);
    match found {
        Some(p) if p.error_code == code::NONE && p.leader_epoch == epoch && p.end_offset >= 0 => Ok(p.end_offset),
        Some(p) => anyhow::bail!("answered code {} epoch {} end {}", p.error_code.0, p.leader_epoch, p.end_offset),
        None => anyhow::bail!("no answer for the partition"),
    }
}

/// The first offset of the first batch of `records`, if any.
fn first_offset(records: &[u8]) -> Option<i64> {
    let (_, info, _) = crate::storage::format::BatchWalk::new(records, usize::MAX >> 1).next()?.ok()?;
    info.first_offset
}
