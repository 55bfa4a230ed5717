//! The transaction APIs (KIP-98, KIP-664): every request about a transactional id goes to
//! the shard coordinating it (the owner of its `__transaction_state` partition,
//! [`crate::server::transactions`]) as a typed call; TxnOffsetCommit goes to the group's
//! coordinator, as OffsetCommit does. Until `__transaction_state` exists the answer is
//! COORDINATOR_NOT_AVAILABLE (retriable).

use crate::coordinator::group::{offsets_partition, txn_commit_topics, OFFSETS_TOPIC};
use crate::coordinator::txn::{Described, TXN_TOPIC};
use crate::protocol::errors::{self as code, ErrorCode};
use crate::protocol::groups::{InitProducerIdRequest, InitProducerIdResponse};
use crate::protocol::txn::*;
use crate::security::acl::{Operation, ResourceType};
use crate::server::api::route::{to_coordinating_shard, to_coordinator};
use crate::server::api::Cx;
use crate::server::control::{ensure_offsets_topic, ensure_txn_topic};
use crate::server::errors::call_code;
use crate::server::router::ShardCall;
use crate::server::shard::Shard;
use crate::server::transactions::{verify_txn_write, TxnWrite, WriteTurn};
use crate::storage::topics::validate_topic_name;
use crate::txn::{TopicPartition, TxnState, TxnVersion, TV2};
use std::rc::Rc;

/// Send `call` to the shard coordinating transactional id `id`, releasing the turn once it
/// is issued.
async fn to_txn_coordinator<C: ShardCall<Shard>>(cx: &mut Cx<'_>, id: &str, call: C) -> Result<C::Reply, ErrorCode> {
    let target = cx.shard.txn().shard_of(id);
    to_coordinating_shard(cx, target, call).await
}

/// WRITE on the transactional id, then READ on the group (AddOffsetsToTxn, TxnOffsetCommit):
/// the error for the first denied, if any.
fn id_and_group_refusal(cx: &Cx<'_>, id: &str, group: &str) -> Option<ErrorCode> {
    if !id_allowed(cx, Operation::Write, id) {
        Some(code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    } else if !cx.allowed(Operation::Read, ResourceType::Group, group) {
        Some(code::GROUP_AUTHORIZATION_FAILED)
    } else {
        None
    }
}

/// PRODUCER_FENCED for clients that know it (the API's version `since` on), else
/// INVALID_PRODUCER_EPOCH, as Kafka answers.
fn fenced_for(cx: &Cx<'_>, e: ErrorCode, since: i16) -> ErrorCode {
    if e == code::PRODUCER_FENCED && cx.version() < since {
        code::INVALID_PRODUCER_EPOCH
    } else {
        e
    }
}

fn id_allowed(cx: &Cx<'_>, op: Operation, id: &str) -> bool {
    cx.allowed(op, ResourceType::TransactionalId, id)
}

#[derive(Debug)]
struct InitTxn {
    id: String,
    timeout_ms: i32,
    expected: Option<(i64, i16)>,
}

impl ShardCall<Shard> for InitTxn {
    type Reply = Result<(i64, i16), ErrorCode>;
    const NAME: &'static str = "txn-init-producer-id";
    async fn run(self, shard: Rc<Shard>) -> Self::Reply {
        shard.txn().clone().init_producer_id(&shard, self.id, self.timeout_ms, self.expected).await
    }
}

/// InitProducerId with a transactional id: WRITE on the id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED
/// otherwise), then its coordinator bumps the epoch and fences the previous instance.
pub async fn init_transactional(cx: &mut Cx<'_>, id: String, i: &InitProducerIdRequest) -> InitProducerIdResponse {
    let result = if !id_allowed(cx, Operation::Write, &id) {
        cx.release_turn();
        Err(code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    } else {
        let expected = (i.producer_id != -1 || i.producer_epoch != -1).then_some((i.producer_id, i.producer_epoch));
        let call = InitTxn { id: id.clone(), timeout_ms: i.transaction_timeout_ms, expected };
        to_txn_coordinator(cx, &id, call).await.and_then(|r| r)
    };
    let (error_code, producer_id, producer_epoch) = match result {
        Ok((pid, epoch)) => (code::NONE, pid, epoch),
        Err(c) => (fenced_for(cx, c, 4), -1, -1),
    };
    InitProducerIdResponse { error_code, producer_id, producer_epoch, ..Default::default() }
}

#[derive(Debug)]
struct AddPartitions {
    id: String,
    pid: i64,
    epoch: i16,
    partitions: Vec<TopicPartition>,
    /// KIP-890 (v4, brokers asking): only check the partitions are in the transaction.
    verify_only: bool,
    /// The client's transaction version (2: a partition's leader adding the partition).
    version: TxnVersion,
}

impl ShardCall<Shard> for AddPartitions {
    type Reply = Result<(), ErrorCode>;
    const NAME: &'static str = "txn-add-partitions";
    async fn run(self, shard: Rc<Shard>) -> Self::Reply {
        if self.verify_only {
            return self.partitions.iter().try_for_each(|tp| shard.txn().verify(&self.id, self.pid, self.epoch, tp));
        }
        shard.txn().add_partitions(&self.id, self.pid, self.epoch, self.partitions, self.version).await
    }
}

/// One transaction's AddPartitionsToTxn: each topic checked (name, WRITE, existence, the
/// partition in range); when any fails, it carries its error and the others
/// OPERATION_NOT_ATTEMPTED, as Kafka answers; else the coordinator's one answer for all.
async fn add_one(
    cx: &mut Cx<'_>,
    t: AddPartitionsToTxnTransaction,
    verify_only: bool,
) -> Vec<AddPartitionsToTxnTopicResult> {
    let mut checked: Vec<(String, Vec<(i32, ErrorCode)>)> = Vec::new();
    let mut failed = false;
    if !id_allowed(cx, Operation::Write, &t.transactional_id) {
        let all = t.topics.iter().map(|tp| {
            (tp.name.clone(), tp.partitions.iter().map(|p| (*p, code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED)).collect())
        });
        return results(all.collect());
    }
    for tp in &t.topics {
        let topic_error = if validate_topic_name(&tp.name).is_err() || tp.name == TXN_TOPIC {
            Some(code::UNKNOWN_TOPIC_OR_PARTITION)
        } else if !cx.allowed(Operation::Write, ResourceType::Topic, &tp.name) {
            Some(code::TOPIC_AUTHORIZATION_FAILED)
        } else {
            None
        };
        let count = cx.shard.topic(&tp.name, |info| info.partitions);
        let codes = tp
            .partitions
            .iter()
            .map(|p| {
                let in_range = count.is_some_and(|n| *p >= 0 && (*p as u32) < n);
                let e = topic_error.unwrap_or(if in_range { code::NONE } else { code::UNKNOWN_TOPIC_OR_PARTITION });
                failed |= e != code::NONE;
                (*p, e)
            })
            .collect();
        checked.push((tp.name.clone(), codes));
    }
    if failed {
        for (_, codes) in checked.iter_mut() {
            codes.iter_mut().filter(|c| c.1 == code::NONE).for_each(|c| c.1 = code::OPERATION_NOT_ATTEMPTED);
        }
        cx.release_turn();
        return results(checked);
    }
    let partitions: Vec<TopicPartition> =
        checked.iter().flat_map(|(n, codes)| codes.iter().map(move |(p, _)| (n.clone(), *p))).collect();
    let call = AddPartitions {
        id: t.transactional_id.clone(),
        pid: t.producer_id,
        epoch: t.producer_epoch,
        partitions,
        verify_only,
        // Kafka: a broker's request (v4+) speaks for a version 2 client.
        version: if cx.version() >= 4 { TV2 } else { 0 },
    };
    let e = match to_txn_coordinator(cx, &t.transactional_id, call).await.and_then(|r| r) {
        Ok(()) => code::NONE,
        Err(e) => fenced_for(cx, e, 2),
    };
    for (_, codes) in checked.iter_mut() {
        codes.iter_mut().for_each(|c| c.1 = e);
    }
    results(checked)
}

fn results(checked: Vec<(String, Vec<(i32, ErrorCode)>)>) -> Vec<AddPartitionsToTxnTopicResult> {
    checked
        .into_iter()
        .map(|(name, codes)| AddPartitionsToTxnTopicResult {
            name,
            results_by_partition: codes
                .into_iter()
                .map(|(partition_index, partition_error_code)| AddPartitionsToTxnPartitionResult {
                    partition_index,
                    partition_error_code,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        })
        .collect()
}

/// AddPartitionsToTxn: v0-3 one transaction from its producer; v4 (KIP-890) a batch from a
/// broker (CLUSTER_ACTION), possibly only verifying.
pub async fn add_partitions(cx: &mut Cx<'_>, r: AddPartitionsToTxnRequest) -> AddPartitionsToTxnResponse {
    if cx.version() <= 3 {
        let t = AddPartitionsToTxnTransaction {
            transactional_id: r.v3_and_below_transactional_id,
            producer_id: r.v3_and_below_producer_id,
            producer_epoch: r.v3_and_below_producer_epoch,
            verify_only: false,
            topics: r.v3_and_below_topics,
            ..Default::default()
        };
        let results_by_topic_v3_and_below = add_one(cx, t, false).await;
        return AddPartitionsToTxnResponse { results_by_topic_v3_and_below, ..Default::default() };
    }
    if !cx.allowed_on_cluster(Operation::ClusterAction) {
        cx.release_turn();
        return AddPartitionsToTxnResponse { error_code: code::CLUSTER_AUTHORIZATION_FAILED, ..Default::default() };
    }
    let mut results_by_transaction = Vec::with_capacity(r.transactions.len());
    for t in r.transactions {
        let transactional_id = t.transactional_id.clone();
        let verify_only = t.verify_only;
        let topic_results = add_one(cx, t, verify_only).await;
        results_by_transaction.push(AddPartitionsToTxnResult { transactional_id, topic_results, ..Default::default() });
    }
    cx.release_turn();
    AddPartitionsToTxnResponse { results_by_transaction, ..Default::default() }
}

/// AddOffsetsToTxn: READ on the group, WRITE on the id; the group's `__consumer_offsets`
/// partition joins the transaction (its marker commits or drops the offsets).
pub async fn add_offsets(cx: &mut Cx<'_>, r: AddOffsetsToTxnRequest) -> AddOffsetsToTxnResponse {
    if let Some(error_code) = id_and_group_refusal(cx, &r.transactional_id, &r.group_id) {
        cx.release_turn();
        return AddOffsetsToTxnResponse { error_code, ..Default::default() };
    }
    let Some(n) = cx.shard.offsets_partitions() else {
        cx.release_turn();
        ensure_offsets_topic(cx.shard).await;
        return AddOffsetsToTxnResponse { error_code: code::COORDINATOR_NOT_AVAILABLE, ..Default::default() };
    };
    let call = AddPartitions {
        id: r.transactional_id.clone(),
        pid: r.producer_id,
        epoch: r.producer_epoch,
        partitions: vec![(OFFSETS_TOPIC.to_string(), offsets_partition(&r.group_id, n))],
        verify_only: false,
        version: 0,
    };
    let error_code = match to_txn_coordinator(cx, &r.transactional_id, call).await.and_then(|r| r) {
        Ok(()) => code::NONE,
        Err(e) => fenced_for(cx, e, 2),
    };
    AddOffsetsToTxnResponse { error_code, ..Default::default() }
}

#[derive(Debug)]
struct End {
    id: String,
    pid: i64,
    epoch: i16,
    commit: bool,
    version: TxnVersion,
}

impl ShardCall<Shard> for End {
    type Reply = Result<(i64, i16), ErrorCode>;
    const NAME: &'static str = "txn-end";
    async fn run(self, shard: Rc<Shard>) -> Self::Reply {
        shard.txn().clone().end(&shard, self.id, self.pid, self.epoch, self.commit, self.version).await
    }
}

/// EndTxn: answered once the commit or abort is prepared (durable); the markers follow. From
/// v5 the client speaks transactions version 2: the epoch is bumped, and the answer names the
/// producer id and epoch to go on with.
pub async fn end(cx: &mut Cx<'_>, r: EndTxnRequest) -> EndTxnResponse {
    if !id_allowed(cx, Operation::Write, &r.transactional_id) {
        cx.release_turn();
        return EndTxnResponse { error_code: code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED, ..Default::default() };
    }
    let version = if cx.version() >= 5 { TV2 } else { 0 };
    let call = End {
        id: r.transactional_id.clone(),
        pid: r.producer_id,
        epoch: r.producer_epoch,
        commit: r.committed,
        version,
    };
    match to_txn_coordinator(cx, &r.transactional_id, call).await.and_then(|r| r) {
        Ok((producer_id, producer_epoch)) => EndTxnResponse { producer_id, producer_epoch, ..Default::default() },
        Err(e) => EndTxnResponse { error_code: fenced_for(cx, e, 2), ..Default::default() },
    }
}

/// WriteTxnMarkers (inter-broker): a transaction coordinator on another node has this node,
/// the partitions' leader, write their markers ([`crate::server::transactions::WriteMarker`]
/// on each partition's shard: appended, durable on every in-sync replica, a marker on an
/// offsets partition settling the group's transactional offsets). CLUSTER_ACTION on the
/// cluster, as in Kafka; a partition this node does not lead is NOT_LEADER_OR_FOLLOWER (the
/// coordinator retries at the new leader).
pub async fn write_markers(cx: &mut Cx<'_>, r: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse {
    cx.release_turn();
    let allowed = cx.allowed_on_cluster(Operation::ClusterAction);
    let shard = cx.shard.clone();
    let mut markers = Vec::with_capacity(r.markers.len());
    for m in r.markers {
        let marker = crate::storage::format::marker::Marker {
            commit: m.transaction_result,
            coordinator_epoch: m.coordinator_epoch,
        };
        let mut topics = Vec::with_capacity(m.topics.len());
        for t in m.topics {
            let writes = t.partition_indexes.iter().map(|&partition| {
                let shard = shard.clone();
                let call = crate::server::transactions::WriteMarker {
                    topic: t.name.clone(),
                    partition,
                    pid: m.producer_id,
                    epoch: m.producer_epoch,
                    marker,
                };
                async move {
                    if !allowed {
                        return code::CLUSTER_AUTHORIZATION_FAILED;
                    }
                    if shard.topic(&call.topic, |_| ()).is_none() {
                        return code::UNKNOWN_TOPIC_OR_PARTITION;
                    }
                    let owner = shard.owner(&call.topic, partition);
                    match shard.call(owner, call).await {
                        Ok(Ok(())) => code::NONE,
                        Ok(Err(c)) => c,
                        Err(e) => call_code(&e, code::NOT_LEADER_OR_FOLLOWER),
                    }
                }
            });
            let codes = futures_util::future::join_all(writes).await;
            let partitions = t
                .partition_indexes
                .iter()
                .zip(codes)
                .map(|(&partition_index, error_code)| WritableTxnMarkerPartitionResult {
                    partition_index,
                    error_code,
                    ..Default::default()
                })
                .collect();
            topics.push(WritableTxnMarkerTopicResult { name: t.name, partitions, ..Default::default() });
        }
        markers.push(WritableTxnMarkerResult { producer_id: m.producer_id, topics, ..Default::default() });
    }
    WriteTxnMarkersResponse { markers, ..Default::default() }
}

/// Every partition of `topics` answered `e`.
fn every_partition(topics: Vec<TxnOffsetCommitRequestTopic>, e: ErrorCode) -> Vec<TxnOffsetCommitResponseTopic> {
    txn_commit_topics(
        topics.into_iter().map(|t| (t.name, t.partitions.iter().map(|p| (p.partition_index, e)).collect())).collect(),
    )
}

/// TxnOffsetCommit at the group's coordinator (`adds`: v5+, transactions version 2).
#[derive(Debug)]
struct TxnCommit {
    r: TxnOffsetCommitRequest,
    adds: bool,
}

impl ShardCall<Shard> for TxnCommit {
    type Reply = TxnOffsetCommitResponse;
    const NAME: &'static str = "txn-offset-commit";
    async fn run(self, shard: Rc<Shard>) -> TxnOffsetCommitResponse {
        let r = self.r;
        // KIP-890: the group's offsets partition must be in the transaction (added by
        // AddOffsetsToTxn, or at version 2 by this commit), else the write could open a
        // transaction no marker ends.
        let offsets = shard.offsets_partitions().map(|n| offsets_partition(&r.group_id, n));
        let mut _turn = WriteTurn::none();
        if let Some((index, p)) = offsets.and_then(|i| shard.partition(OFFSETS_TOPIC, i).map(|p| (i, p))) {
            let write = TxnWrite {
                id: r.transactional_id.clone(),
                pid: r.producer_id,
                epoch: r.producer_epoch,
                partition: (OFFSETS_TOPIC.to_string(), index),
                add: self.adds,
            };
            match verify_txn_write(&shard, &p, write).await {
                // Held until the offsets are written.
                Ok(turn) => _turn = turn,
                Err(e) => {
                    let e = if e == code::INVALID_PRODUCER_EPOCH { code::PRODUCER_FENCED } else { e };
                    return TxnOffsetCommitResponse { topics: every_partition(r.topics, e), ..Default::default() };
                }
            }
        }
        let partitions_of = |topic: &str| shard.topic(topic, |t| t.partitions);
        shard.coordinator().txn_commit(r, partitions_of).await
    }
}

/// TxnOffsetCommit: WRITE on the id, READ on the group and on each topic; the group's
/// coordinator stages the offsets until the transaction ends.
pub async fn txn_offset_commit(cx: &mut Cx<'_>, mut r: TxnOffsetCommitRequest) -> TxnOffsetCommitResponse {
    let every = every_partition;
    if let Some(e) = id_and_group_refusal(cx, &r.transactional_id, &r.group_id) {
        cx.release_turn();
        return TxnOffsetCommitResponse { topics: every(r.topics, e), ..Default::default() };
    }
    let (allowed, denied): (Vec<_>, Vec<_>) = std::mem::take(&mut r.topics)
        .into_iter()
        .partition(|t| cx.allowed(Operation::Read, ResourceType::Topic, &t.name));
    r.topics = allowed;
    let asked = r.topics.clone();
    let group = r.group_id.clone();
    let adds = cx.version() >= 5;
    let mut answer = match to_coordinator(cx, &group, TxnCommit { r, adds }).await {
        Ok(a) => a,
        Err(e) => TxnOffsetCommitResponse { topics: every(asked, e), ..Default::default() },
    };
    answer.topics.extend(every(denied, code::TOPIC_AUTHORIZATION_FAILED));
    for p in answer.topics.iter_mut().flat_map(|t| t.partitions.iter_mut()) {
        p.error_code = fenced_for(cx, p.error_code, 3);
    }
    answer
}

#[derive(Debug)]
struct DescribeTxn(String);

impl ShardCall<Shard> for DescribeTxn {
    type Reply = Result<Described, ErrorCode>;
    const NAME: &'static str = "txn-describe";
    async fn run(self, shard: Rc<Shard>) -> Self::Reply {
        shard.txn().describe(&self.0)
    }
}

/// DescribeTransactions (KIP-664): DESCRIBE on each id.
pub async fn describe(cx: &mut Cx<'_>, r: DescribeTransactionsRequest) -> DescribeTransactionsResponse {
    let mut transaction_states = Vec::with_capacity(r.transactional_ids.len());
    for id in r.transactional_ids {
        let result = if !id_allowed(cx, Operation::Describe, &id) {
            Err(code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        } else {
            let Some(target) = cx.shard.txn().shard_of(&id) else {
                transaction_states.push(DescribedTransaction {
                    error_code: code::COORDINATOR_NOT_AVAILABLE,
                    transactional_id: id,
                    ..Default::default()
                });
                continue;
            };
            match cx.shard.call(target, DescribeTxn(id.clone())).await {
                Ok(r) => r,
                Err(e) => Err(call_code(&e, code::COORDINATOR_NOT_AVAILABLE)),
            }
        };
        transaction_states.push(match result {
            Ok(d) => {
                let mut topics: Vec<TransactionTopicData> = Vec::new();
                for (topic, p) in d.partitions {
                    match topics.iter_mut().find(|t| t.topic == topic) {
                        Some(t) => t.partitions.push(p),
                        None => topics.push(TransactionTopicData { topic, partitions: vec![p], ..Default::default() }),
                    }
                }
                DescribedTransaction {
                    error_code: code::NONE,
                    transactional_id: id,
                    transaction_state: d.state.name().to_string(),
                    transaction_timeout_ms: d.timeout_ms,
                    transaction_start_time_ms: d.start_ms,
                    producer_id: d.producer_id,
                    producer_epoch: d.producer_epoch,
                    topics,
                    ..Default::default()
                }
            }
            Err(error_code) => DescribedTransaction { error_code, transactional_id: id, ..Default::default() },
        });
    }
    cx.release_turn();
    DescribeTransactionsResponse { transaction_states, ..Default::default() }
}

#[derive(Debug, Clone)]
struct ListTxns {
    states: Vec<TxnState>,
    pids: Vec<i64>,
    min_duration_ms: i64,
}

impl ShardCall<Shard> for ListTxns {
    type Reply = Vec<(String, i64, TxnState)>;
    const NAME: &'static str = "txn-list";
    async fn run(self, shard: Rc<Shard>) -> Self::Reply {
        shard.txn().list(&self.states, &self.pids, self.min_duration_ms)
    }
}

/// ListTransactions (KIP-664): every shard's ids the client may DESCRIBE; unknown state
/// names come back in `unknown_state_filters` (and match nothing); from v2 (KIP-1152) only the
/// ids a regular expression matches whole (Kafka: `Pattern.matcher(id).matches()`; here Rust's
/// `regex` syntax, which has no look-around or back-references), INVALID_REGULAR_EXPRESSION
/// when it does not compile.
pub async fn list(cx: &mut Cx<'_>, r: ListTransactionsRequest) -> ListTransactionsResponse {
    cx.release_turn();
    let pattern = match r.transactional_id_pattern.as_deref().filter(|p| !p.is_empty()) {
        None => None,
        Some(p) => match crate::groups::consumer::full_match(p) {
            Some(re) => Some(re),
            None => {
                return ListTransactionsResponse { error_code: code::INVALID_REGULAR_EXPRESSION, ..Default::default() }
            }
        },
    };
    let mut states = Vec::new();
    let mut unknown_state_filters = Vec::new();
    for s in &r.state_filters {
        match TxnState::from_name(s) {
            Some(st) => states.push(st),
            None => unknown_state_filters.push(s.clone()),
        }
    }
    if !r.state_filters.is_empty() && states.is_empty() {
        return ListTransactionsResponse { unknown_state_filters, ..Default::default() };
    }
    let call = ListTxns { states, pids: r.producer_id_filters, min_duration_ms: r.duration_filter };
    let mut transaction_states = Vec::new();
    for target in 0..cx.shard.shards() {
        let listed = match cx.shard.call(target, call.clone()).await {
            Ok(l) => l,
            Err(e) => {
                let error_code = call_code(&e, code::COORDINATOR_NOT_AVAILABLE);
                return ListTransactionsResponse { error_code, ..Default::default() };
            }
        };
        for (id, producer_id, state) in listed {
            if id_allowed(cx, Operation::Describe, &id) && pattern.as_ref().is_none_or(|re| re.is_match(&id)) {
                transaction_states.push(ListedTransaction {
                    transactional_id: id,
                    producer_id,
                    transaction_state: state.name().to_string(),
                    ..Default::default()
                });
            }
        }
    }
    ListTransactionsResponse { unknown_state_filters, transaction_states, ..Default::default() }
}

/// FindCoordinator for a transactional id: DESCRIBE on it, and `__transaction_state`
/// created at the first ask.
pub async fn find(cx: &Cx<'_>, id: &str) -> (ErrorCode, Option<String>) {
    if !id_allowed(cx, Operation::Describe, id) {
        return (
            code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            Some("Transactional Id authorization failed.".to_string()),
        );
    }
    if id.is_empty() {
        return (code::INVALID_REQUEST, Some("an empty transactional id".to_string()));
    }
    if !ensure_txn_topic(cx.shard).await {
        return (code::COORDINATOR_NOT_AVAILABLE, Some("the transaction state topic is not available yet".to_string()));
    }
    (code::NONE, None)
}
