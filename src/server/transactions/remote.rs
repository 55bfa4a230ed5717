//! A transaction coordinator's requests to other nodes: a marker written at a partition's
//! leader on another node (WriteTxnMarkers), and KIP-890's verification at a coordinator on
//! another node (AddPartitionsToTxn v4, verify only).

use super::{VerifyTxn, WriteMarker};
use crate::client::Purpose::{Markers, Verification};
use crate::protocol::errors::{self as code, ErrorCode};
use crate::protocol::txn::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
    WritableTxnMarker, WritableTxnMarkerTopic, WriteTxnMarkersRequest, WriteTxnMarkersResponse,
};
use crate::server::shard::Shard;
use crate::storage::format::marker::Marker;
use std::rc::Rc;

/// Write one marker at the partition's leader: on this node, the partition's shard
/// ([`WriteMarker`]); on another, that node through WriteTxnMarkers. `Err`: no answer (the
/// caller retries).
pub(super) async fn write_marker_at_leader(
    shard: &Rc<Shard>,
    topic: &str,
    partition: i32,
    pid: i64,
    epoch: i16,
    marker: Marker,
) -> Result<Result<(), ErrorCode>, String> {
    let node = shard.config().node_id;
    let leader = match shard.config().cluster {
        None => node,
        Some(_) => match shard.leader(topic, partition) {
            None => return Ok(Err(code::UNKNOWN_TOPIC_OR_PARTITION)),
            Some(l) => l,
        },
    };
    if leader < 0 {
        return Ok(Err(code::LEADER_NOT_AVAILABLE));
    }
    if leader == node {
        let call = WriteMarker { topic: topic.to_string(), partition, pid, epoch, marker };
        return shard.call(shard.owner(topic, partition), call).await.map_err(|e| e.to_string());
    }
    let mut req = WriteTxnMarkersRequest {
        markers: vec![WritableTxnMarker {
            producer_id: pid,
            producer_epoch: epoch,
            transaction_result: marker.commit,
            topics: vec![WritableTxnMarkerTopic {
                name: topic.to_string(),
                partition_indexes: vec![partition],
                ..Default::default()
            }],
            coordinator_epoch: marker.coordinator_epoch,
            ..Default::default()
        }],
        ..Default::default()
    };
    let limit = crate::replica::INTERNAL_WRITE_TIMEOUT + std::time::Duration::from_secs(10);
    let api = crate::protocol::WRITE_TXN_MARKERS;
    let resp: WriteTxnMarkersResponse =
        crate::server::peers::call_peer(shard, (leader, Markers), api, 1, &mut req, limit)
            .await
            .map_err(|e| e.to_string())?;
    let code = resp
        .markers
        .first()
        .and_then(|m| m.topics.first())
        .and_then(|t| t.partitions.first())
        .map(|p| p.error_code)
        .ok_or_else(|| format!("node {leader} answered WriteTxnMarkers without the partition"))?;
    if code == code::UNKNOWN_TOPIC_OR_PARTITION && shard.topic(topic, |_| ()).is_some() {
        // The leader's metadata lags this node's: the partition is there; try again.
        return Err(format!("node {leader} does not know {topic}-{partition} yet"));
    }
    Ok(if code == code::NONE { Ok(()) } else { Err(code) })
}

/// [`VerifyTxn`] at the coordinator on node `coordinator`: AddPartitionsToTxn v4 verify only,
/// or v5 adding the partitions (transactions version 2).
pub(super) async fn verify_at(shard: &Rc<Shard>, coordinator: i32, call: &VerifyTxn) -> Result<(), ErrorCode> {
    let mut topics: Vec<AddPartitionsToTxnTopic> = Vec::new();
    for (topic, partition) in &call.partitions {
        match topics.iter_mut().find(|t| &t.name == topic) {
            Some(t) => t.partitions.push(*partition),
            None => topics.push(AddPartitionsToTxnTopic {
                name: topic.clone(),
                partitions: vec![*partition],
                ..Default::default()
            }),
        }
    }
    let mut req = AddPartitionsToTxnRequest {
        transactions: vec![AddPartitionsToTxnTransaction {
            transactional_id: call.id.clone(),
            producer_id: call.pid,
            producer_epoch: call.epoch,
            verify_only: !call.add,
            topics,
            ..Default::default()
        }],
        ..Default::default()
    };
    let version = if call.add { 5 } else { 4 };
    let limit = std::time::Duration::from_secs(10);
    let api = crate::protocol::ADD_PARTITIONS_TO_TXN;
    let resp: AddPartitionsToTxnResponse =
        crate::server::peers::call_peer(shard, (coordinator, Verification), api, version, &mut req, limit)
            .await
            .map_err(|e| {
                tracing::debug!(coordinator, error = %e, "transaction verification at the coordinator failed");
                code::NOT_ENOUGH_REPLICAS
            })?;
    if resp.error_code != code::NONE {
        return Err(resp.error_code);
    }
    // The first partition's error (they share the coordinator's one answer); none answered is
    // no answer.
    let codes: Vec<ErrorCode> = resp
        .results_by_transaction
        .first()
        .into_iter()
        .flat_map(|t| &t.topic_results)
        .flat_map(|t| &t.results_by_partition)
        .map(|p| p.partition_error_code)
        .collect();
    match codes.iter().find(|c| **c != code::NONE) {
        _ if codes.is_empty() => Err(code::NOT_ENOUGH_REPLICAS),
        Some(c) => Err(*c),
        None => Ok(()),
    }
}
