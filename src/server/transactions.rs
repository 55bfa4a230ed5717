//! Transactions at the broker's edge: the transaction coordinator ([`crate::coordinator::txn`])
//! on this shard's services, KIP-890's check of a transactional write against its
//! coordinator, and the typed calls that carry a verification or a marker to the shard owning
//! it (`VerifyTxn`, [`WriteMarker`]) or, on another node, as Kafka requests (`remote`).

pub use super::txn_writes::{Enrolled, FirstWrites, WriteTurn};
use crate::coordinator::group::OFFSETS_TOPIC;
use crate::coordinator::txn::{TxnHost, COORDINATOR_EPOCH, TXN_TOPIC};
use crate::errors::storage_code;
use crate::io::DmaDisk;
use crate::protocol::errors::{self as code, ErrorCode};
use crate::server::control::AllocateProducerId;
use crate::server::router::ShardCall;
use crate::server::shard::Shard;
use crate::storage::format::marker::Marker;
use crate::txn::{self, TopicPartition};
use crate::types::Offset;
use std::rc::Rc;

mod remote;
use remote::{verify_at, write_marker_at_leader};

/// The transaction coordinator on a shard: producer ids from shard 0's allocator, markers
/// through [`write_marker_at_leader`].
impl TxnHost for Shard {
    async fn allocate_producer_id(self: &Rc<Self>) -> Result<i64, ErrorCode> {
        match self.call(0, AllocateProducerId).await {
            Ok(r) => r,
            Err(_) => Err(code::COORDINATOR_NOT_AVAILABLE),
        }
    }

    fn coordinator_epoch(&self, index: i32) -> i32 {
        match self.config().cluster {
            Some(_) => self.leadership(TXN_TOPIC, index).map_or(COORDINATOR_EPOCH, |l| l.leader_epoch),
            None => COORDINATOR_EPOCH,
        }
    }

    async fn write_marker(
        self: &Rc<Self>,
        topic: &str,
        partition: i32,
        pid: i64,
        epoch: i16,
        marker: Marker,
    ) -> Result<Result<(), ErrorCode>, String> {
        write_marker_at_leader(self, topic, partition, pid, epoch, marker).await
    }
}

/// KIP-890: a transactional write (a produce, a TxnOffsetCommit) that would open producer
/// `pid`'s transaction on partition `tp` (`p`, on this shard) must belong to a transaction the
/// coordinator of `id` has `tp` in, so that a late or stray write never opens a transaction no
/// marker will end (it would hold the LSO for good). Writes into a transaction already open
/// here go straight through.
///
/// At transaction version 0 (part 1) the coordinator is only asked: INVALID_TXN_STATE when the
/// partition is not in the transaction. At version 2 (part 2: Produce v12+, TxnOffsetCommit
/// v5+) this broker adds the partition to the transaction itself, as Kafka's leaders do, and
/// retries CONCURRENT_TRANSACTIONS (the previous transaction's markers being written) for up
/// to [`ADD_RETRY_MAX`] before answering it (retriable). Kafka retries every 20 ms; here the
/// wait starts at 1 ms and doubles up to [`ADD_RETRY_BACKOFF`], so a producer whose previous
/// markers take a few milliseconds waits that long, not 20.
///
/// A marker appended here while the coordinator was asked may have ended that transaction:
/// the question is asked again. Kafka's answers: INVALID_PRODUCER_EPOCH for a fenced producer,
/// NOT_ENOUGH_REPLICAS (retriable) when the coordinator cannot say. The caller appends without
/// yielding after an `Ok`, holding the returned [`WriteTurn`] until its records have their
/// offsets: the producer's next writes to the partition, pipelined behind this one, wait for it
/// in arrival order (their own check would race this one's, and a later batch could be
/// appended first).
pub async fn verify_txn_write(
    shard: &Rc<Shard>,
    p: &Rc<crate::storage::partition::Partition<DmaDisk>>,
    write: TxnWrite,
) -> Result<WriteTurn, ErrorCode> {
    // Behind a first write still under way, a later write waits its turn even when the
    // transaction is open by now (the first one may be appended, a second one not yet).
    let waiting = shard.first_writes().busy(&write.partition, write.pid);
    if !waiting && p.log().producers().in_transaction(write.pid, write.epoch) {
        return Ok(WriteTurn::none());
    }
    let turn = shard.first_writes().turn(&write.partition, write.pid).await;
    // The write before this one may have opened the transaction meanwhile: no question, but
    // the turn is kept until this one is appended too.
    if p.log().producers().in_transaction(write.pid, write.epoch) {
        return Ok(turn);
    }
    check_with_coordinator(shard, p, &write).await.map(|()| turn)
}

async fn check_with_coordinator(
    shard: &Rc<Shard>,
    p: &Rc<crate::storage::partition::Partition<DmaDisk>>,
    write: &TxnWrite,
) -> Result<(), ErrorCode> {
    let started = std::time::Instant::now();
    let mut backoff = std::time::Duration::from_millis(1);
    loop {
        match ask_coordinator(shard, p, write).await {
            Err(code::CONCURRENT_TRANSACTIONS) if write.add && started.elapsed() < ADD_RETRY_MAX => {
                glommio::timer::sleep(backoff).await;
                backoff = (backoff * 2).min(ADD_RETRY_BACKOFF);
            }
            verdict => return verdict,
        }
    }
}

/// The longest wait between two tries (Kafka's `add.partitions.to.txn.retry.backoff.ms`).
pub const ADD_RETRY_BACKOFF: std::time::Duration = std::time::Duration::from_millis(20);
/// `add.partitions.to.txn.retry.backoff.max.ms` (Kafka's default).
pub const ADD_RETRY_MAX: std::time::Duration = std::time::Duration::from_millis(100);

/// A transactional write to check (or, at version 2, enrol) with the coordinator of `id`.
#[derive(Debug, Clone)]
pub struct TxnWrite {
    pub id: String,
    pub pid: i64,
    pub epoch: i16,
    pub partition: TopicPartition,
    /// Transactions version 2: add the partition to the transaction, not only check it.
    pub add: bool,
}

/// Where the coordinator of a transactional id is: a shard of this node, or another node.
#[derive(Debug, Clone, Copy)]
enum CoordinatorAt {
    Shard(usize),
    Node(i32),
}

/// The coordinator of `id`: clustered, the leader of its `__transaction_state` partition,
/// maybe another node (asked with AddPartitionsToTxn v4, v5 to add, as Kafka's brokers do).
fn coordinator_of(shard: &Shard, id: &str) -> Result<CoordinatorAt, ErrorCode> {
    let target = shard.txn().shard_of(id).ok_or(code::NOT_ENOUGH_REPLICAS)?;
    let node = shard.config().node_id;
    let coordinator = match (shard.config().cluster.as_ref(), shard.txn().partitions()) {
        (Some(_), Some(n)) => shard.leader(TXN_TOPIC, txn::partition_for(id, n as i32)).unwrap_or(-1),
        _ => node,
    };
    match coordinator {
        c if c < 0 => Err(code::NOT_ENOUGH_REPLICAS),
        c if c != node => Ok(CoordinatorAt::Node(c)),
        _ => Ok(CoordinatorAt::Shard(target)),
    }
}

async fn ask(shard: &Rc<Shard>, at: CoordinatorAt, call: VerifyTxn) -> Result<(), ErrorCode> {
    match at {
        CoordinatorAt::Node(node) => verify_at(shard, node, &call).await,
        CoordinatorAt::Shard(target) if target == shard.id() => call.check(shard).await,
        CoordinatorAt::Shard(target) => shard.call(target, call).await.unwrap_or(Err(code::NOT_ENOUGH_REPLICAS)),
    }
}

async fn ask_coordinator(
    shard: &Rc<Shard>,
    p: &Rc<crate::storage::partition::Partition<DmaDisk>>,
    write: &TxnWrite,
) -> Result<(), ErrorCode> {
    let at = coordinator_of(shard, &write.id)?;
    for _ in 0..3 {
        let markers = p.log().markers_appended();
        let call = VerifyTxn {
            id: write.id.clone(),
            pid: write.pid,
            epoch: write.epoch,
            partitions: vec![write.partition.clone()],
            add: write.add,
        };
        let verdict = ask(shard, at, call).await;
        if p.log().markers_appended() != markers {
            continue;
        }
        return verdict.map_err(|c| match c {
            code::INVALID_PRODUCER_EPOCH | code::PRODUCER_FENCED => code::INVALID_PRODUCER_EPOCH,
            code::COORDINATOR_NOT_AVAILABLE | code::NOT_COORDINATOR | code::COORDINATOR_LOAD_IN_PROGRESS => {
                code::NOT_ENOUGH_REPLICAS
            }
            // Version 2 clients are told as Kafka tells them; older ones retry on this one.
            code::CONCURRENT_TRANSACTIONS if !write.add => code::NOT_ENOUGH_REPLICAS,
            c if write.add => c,
            _ => code::INVALID_TXN_STATE,
        });
    }
    Err(code::NOT_ENOUGH_REPLICAS)
}

/// Transactions version 2: add every partition of one Produce request to producer `pid`'s
/// transaction in one coordinator write, as Kafka's `AddPartitionsToTxnManager` adds a
/// request's partitions together (one AddPartitionsToTxn per coordinator), retrying
/// CONCURRENT_TRANSACTIONS as [`verify_txn_write`] does. Whether it worked: on any failure
/// each partition's own check ([`verify_txn_write`], which every write still makes) gives the
/// answer, so this only saves coordinator writes.
pub async fn enrol_partitions(
    shard: &Rc<Shard>,
    id: &str,
    pid: i64,
    epoch: i16,
    partitions: Vec<TopicPartition>,
) -> bool {
    let Ok(at) = coordinator_of(shard, id) else { return false };
    let started = std::time::Instant::now();
    let mut backoff = std::time::Duration::from_millis(1);
    loop {
        let call = VerifyTxn { id: id.to_string(), pid, epoch, partitions: partitions.clone(), add: true };
        match ask(shard, at, call).await {
            Ok(()) => return true,
            Err(code::CONCURRENT_TRANSACTIONS) if started.elapsed() < ADD_RETRY_MAX => {
                glommio::timer::sleep(backoff).await;
                backoff = (backoff * 2).min(ADD_RETRY_BACKOFF);
            }
            Err(_) => return false,
        }
    }
}

/// To the transaction coordinator of `id`: are `partitions` in its open transaction at
/// `pid`/`epoch` (`add`, version 2: add them)?
#[derive(Debug)]
struct VerifyTxn {
    id: String,
    pid: i64,
    epoch: i16,
    partitions: Vec<TopicPartition>,
    add: bool,
}

impl VerifyTxn {
    async fn check(&self, shard: &Shard) -> Result<(), ErrorCode> {
        if self.add {
            shard.txn().add_partitions(&self.id, self.pid, self.epoch, self.partitions.clone(), txn::TV2).await
        } else {
            self.partitions.iter().try_for_each(|tp| shard.txn().verify(&self.id, self.pid, self.epoch, tp))
        }
    }
}

impl ShardCall<Shard> for VerifyTxn {
    type Reply = Result<(), ErrorCode>;
    const NAME: &'static str = "txn-verify";
    async fn run(self, shard: Rc<Shard>) -> Self::Reply {
        self.check(&shard).await
    }
}

/// To the shard owning a partition: append a transaction marker for producer `pid` at
/// `epoch` and answer once it is durable. A marker on a `__consumer_offsets` partition also
/// commits or drops the group coordinator's pending transactional offsets of `pid`.
#[derive(Debug, Clone)]
pub struct WriteMarker {
    pub topic: String,
    pub partition: i32,
    pub pid: i64,
    pub epoch: i16,
    pub marker: Marker,
}

impl ShardCall<Shard> for WriteMarker {
    type Reply = Result<(), ErrorCode>;
    const NAME: &'static str = "write-txn-marker";

    fn deadline(&self) -> Option<std::time::Duration> {
        Some(crate::replica::INTERNAL_WRITE_TIMEOUT + std::time::Duration::from_secs(5))
    }

    async fn run(self, shard: Rc<Shard>) -> Self::Reply {
        let p = shard.led_partition(&self.topic, self.partition)?;
        if self.topic == OFFSETS_TOPIC && shard.coordinator().is_loading(self.partition) {
            // The load would replace the pending offsets this marker settles: after it.
            return Err(code::COORDINATOR_LOAD_IN_PROGRESS);
        }
        let leader_epoch = p.leader_epoch();
        let info = p.append_marker(self.pid, self.epoch, self.marker).map_err(|e| {
            if !matches!(e, crate::storage::StorageError::Sequence(_)) {
                tracing::warn!(topic = self.topic, partition = self.partition, error = %e, "marker append failed");
            }
            storage_code(&e)
        })?;
        if self.topic == OFFSETS_TOPIC {
            shard.coordinator().complete_txn_offsets(self.partition, self.pid, self.marker.commit);
        }
        // Durable on every in-sync replica before the transaction counts as ended there.
        let end = Offset(info.last_offset + 1);
        let timeout = crate::replica::INTERNAL_WRITE_TIMEOUT;
        p.wait_replicated(end, leader_epoch, timeout).await.map_err(|e| storage_code(&e))
    }
}
