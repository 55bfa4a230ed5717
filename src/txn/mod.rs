//! The transaction coordinator's state machine (KIP-98, KIP-360), without I/O: each
//! transactional id's metadata, Kafka's states and their valid transitions, and what
//! InitProducerId, AddPartitionsToTxn / AddOffsetsToTxn, EndTxn, the markers' completion, the
//! timeout abort and expiry do in each state, with Kafka's error codes.
//!
//! Two transaction versions are served side by side, chosen by the client's request versions
//! (Kafka's `clientTransactionVersion`): version 0 (KIP-98) keeps a producer's epoch from one
//! InitProducerId to the next; version 2 (KIP-890 part 2: EndTxn v5, AddPartitionsToTxn v4+
//! from a partition's leader) bumps it at every commit or abort, so that the markers carry an
//! epoch no write of the ended transaction has, and rotates the producer id when the epochs run
//! out. Version 2 also lets a producer abort when no partition joined (from Empty or a
//! completed transaction), and tells a retried EndTxn from the next transaction's by its epoch.
//!
//! A change goes in three steps, as in Kafka's TransactionMetadata: an operation checks the
//! metadata and returns the [`Transit`] to persist, marking it pending (so that a concurrent
//! request gets CONCURRENT_TRANSACTIONS); the caller writes the transit's record to
//! `__transaction_state` ([`log`]); then [`TxnMetadata::complete`] applies it (or
//! [`TxnMetadata::abandon`] clears the pending state when the write failed).
//!
//! ```text
//!            InitProducerId                AddPartitions          EndTxn(commit)
//!   (new) ──────────────────► Empty ─────────────────► Ongoing ──────────────► PrepareCommit
//!                               ▲                        │  │                      │ markers written
//!                               │ InitProducerId         │  └─ EndTxn(abort) ──┐   ▼
//!                    CompleteCommit/Abort ◄──────────────┼─────────────── PrepareAbort / CompleteCommit
//!                               │                        └─ InitProducerId or timeout: epoch fence
//!                               └─ idle past transactional.id.expiration.ms: Dead (a tombstone)
//! ```

pub mod log;

use std::collections::BTreeSet;

/// Kafka's transaction states, with their persisted ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TxnState {
    Empty = 0,
    Ongoing = 1,
    PrepareCommit = 2,
    PrepareAbort = 3,
    CompleteCommit = 4,
    CompleteAbort = 5,
    /// Only ever pending: becomes a tombstone.
    Dead = 6,
    /// Only ever pending: the epoch bump of a fence, turned into PrepareAbort at once.
    PrepareEpochFence = 7,
}

impl TxnState {
    pub const ALL: [TxnState; 8] = [
        TxnState::Empty,
        TxnState::Ongoing,
        TxnState::PrepareCommit,
        TxnState::PrepareAbort,
        TxnState::CompleteCommit,
        TxnState::CompleteAbort,
        TxnState::Dead,
        TxnState::PrepareEpochFence,
    ];

    pub fn from_id(id: i8) -> Option<TxnState> {
        TxnState::ALL.into_iter().find(|s| *s as i8 == id)
    }

    /// The name DescribeTransactions and ListTransactions show.
    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
            TxnState::Dead => "Dead",
            TxnState::PrepareEpochFence => "PrepareEpochFence",
        }
    }

    pub fn from_name(name: &str) -> Option<TxnState> {
        TxnState::ALL.into_iter().find(|s| s.name() == name)
    }

    /// The states it may be entered from (Kafka's `validPreviousStates`).
    pub fn valid_previous(self) -> &'static [TxnState] {
        use TxnState::*;
        match self {
            Empty => &[Empty, CompleteCommit, CompleteAbort],
            Ongoing => &[Ongoing, Empty, CompleteCommit, CompleteAbort],
            PrepareCommit => &[Ongoing],
            PrepareAbort => &[Ongoing, PrepareEpochFence, Empty, CompleteCommit, CompleteAbort],
            CompleteCommit => &[PrepareCommit],
            CompleteAbort => &[PrepareAbort],
            Dead => &[Empty, CompleteAbort, CompleteCommit],
            PrepareEpochFence => &[Ongoing],
        }
    }

    /// Whether an id idle in this state may expire.
    pub fn expirable(self) -> bool {
        matches!(self, TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort)
    }
}

/// A partition of a transaction: topic and index.
pub type TopicPartition = (String, i32);

/// Epochs up to this one are handed to clients; the last value is kept for fencing.
pub const MAX_CLIENT_EPOCH: i16 = i16::MAX - 1;

/// The transaction version a client speaks (Kafka's `TransactionVersion` feature levels): 0
/// the original protocol, 2 the epoch bump at every end (KIP-890 part 2). Level 1 only changes
/// the log's value version and is spoken as 0.
pub type TxnVersion = i16;
/// Transactions version 2: an epoch bump at each commit or abort.
pub const TV2: TxnVersion = 2;

/// What `__transaction_state` keeps of a transactional id (and what a change persists).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnData {
    pub producer_id: i64,
    /// The producer id before the last rotation (KIP-360), -1 if none.
    pub previous_producer_id: i64,
    /// Version 2: the producer id the transaction being ended moves to when its epochs ran
    /// out (the markers are written at the old one), -1 if none.
    pub next_producer_id: i64,
    pub producer_epoch: i16,
    /// The epoch before the last bump (a retried InitProducerId gets the same answer); not
    /// persisted, -1 after a load, as in Kafka.
    pub last_producer_epoch: i16,
    pub timeout_ms: i32,
    pub state: TxnState,
    pub partitions: BTreeSet<TopicPartition>,
    /// When the open transaction started (-1: none).
    pub start_ms: i64,
    pub last_update_ms: i64,
    /// The transaction version the client spoke at its last change ([`TxnVersion`]).
    pub client_version: TxnVersion,
}

/// A change to persist, then apply: the data as it will be.
pub type Transit = TxnData;

/// One transactional id's metadata: its data and a change written but not yet applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnMetadata {
    pub transactional_id: String,
    pub data: TxnData,
    pub pending: Option<TxnState>,
}

/// Why the transaction state machine refuses a client's request. The coordinator answers each
/// with Kafka's code ([`crate::errors::txn_code`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnError {
    /// The transaction is between states (its markers are being written, a state change is
    /// being persisted): the client retries (CONCURRENT_TRANSACTIONS).
    Concurrent,
    /// An older epoch of the producer, or one whose id another instance took over: a newer
    /// producer has the transactional id (PRODUCER_FENCED).
    Fenced,
    /// The producer id is not the one this transactional id has (INVALID_PRODUCER_ID_MAPPING).
    NotThisProducer,
    /// The request does not fit the transaction's state: ending none, or committing one being
    /// aborted (INVALID_TXN_STATE).
    InvalidState,
}

/// What InitProducerId needs done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Init {
    /// Persist this, then answer with its producer id and epoch.
    Write(Transit),
    /// An open transaction is being fenced: persist this (PrepareAbort at a bumped epoch),
    /// write the abort markers, and answer CONCURRENT_TRANSACTIONS (the client retries).
    Fence(Transit),
}

/// What EndTxn needs done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    /// Persist this (PrepareCommit or PrepareAbort), answer, then write the markers.
    Prepare(Transit),
    /// A retry of an EndTxn that already completed: answer NONE (version 2: with the producer
    /// id and epoch the client goes on with).
    Done { producer_id: i64, producer_epoch: i16 },
}

impl Transit {
    /// The producer id and epoch a client goes on with once this prepared end completes (what
    /// EndTxn v5 answers): version 2's bumped epoch, or epoch 0 of the next producer id when
    /// the epochs ran out; version 0's unchanged.
    pub fn after_end(&self) -> (i64, i16) {
        if self.client_version >= TV2 && self.next_producer_id >= 0 {
            (self.next_producer_id, 0)
        } else {
            (self.producer_id, self.producer_epoch)
        }
    }
}

impl TxnMetadata {
    /// A new id (InitProducerId will bump its epoch to 0).
    pub fn new(transactional_id: &str, producer_id: i64, timeout_ms: i32, now: i64) -> TxnMetadata {
        let data = TxnData {
            producer_id,
            previous_producer_id: -1,
            producer_epoch: -1,
            last_producer_epoch: -1,
            timeout_ms,
            state: TxnState::Empty,
            partitions: BTreeSet::new(),
            start_ms: -1,
            last_update_ms: now,
            next_producer_id: -1,
            client_version: 0,
        };
        TxnMetadata { transactional_id: transactional_id.to_string(), data, pending: None }
    }

    fn transit(&self) -> Transit {
        self.data.clone()
    }

    /// Mark `t` pending, after checking Kafka's transition table.
    fn prepare(&mut self, t: Transit) -> Transit {
        crate::invariant!(
            t.state.valid_previous().contains(&self.data.state),
            "{:?} -> {:?}",
            self.data.state,
            t.state
        );
        self.pending = Some(t.state);
        t
    }

    /// Apply a persisted transit.
    pub fn complete(&mut self, t: Transit) {
        self.data = t;
        self.pending = None;
    }

    /// The transit's write failed: nothing changes. (The epoch of a fence is only ever
    /// applied with its PrepareAbort, so a fence retried after a failed write bumps from the
    /// same epoch again: Kafka's `hasFailedEpochFence` is not needed.)
    pub fn abandon(&mut self) {
        self.pending = None;
    }

    /// InitProducerId for this id (`expected`: KIP-360's producer id and epoch, when the
    /// client gives them; `allocate`: a fresh producer id, for a rotation).
    pub fn init_producer_id(
        &mut self,
        timeout_ms: i32,
        expected: Option<(i64, i16)>,
        allocate: &mut dyn FnMut() -> i64,
        now: i64,
    ) -> Result<Init, TxnError> {
        if self.pending.is_some() {
            return Err(TxnError::Concurrent);
        }
        if let Some((pid, epoch)) = expected {
            let valid = self.data.producer_epoch == -1
                || pid == self.data.producer_id
                || (pid == self.data.previous_producer_id && epoch >= MAX_CLIENT_EPOCH);
            if !valid {
                return Err(TxnError::Fenced);
            }
        }
        match self.data.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort => Err(TxnError::Concurrent),
            TxnState::Ongoing => {
                let next_pid = self.rotates_at_fence().then(allocate);
                Ok(Init::Fence(self.fence(next_pid, now)))
            }
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
                let mut t = self.transit();
                t.state = TxnState::Empty;
                t.partitions.clear();
                t.start_ms = -1;
                t.last_update_ms = now;
                t.timeout_ms = timeout_ms;
                let exhausted = self.data.producer_epoch >= MAX_CLIENT_EPOCH;
                if exhausted && expected.is_none_or(|(_, e)| e == self.data.producer_epoch) {
                    t.previous_producer_id = self.data.producer_id;
                    t.producer_id = allocate();
                    t.producer_epoch = 0;
                    t.last_producer_epoch = if expected.is_some() { self.data.producer_epoch } else { -1 };
                    return Ok(Init::Write(self.prepare(t)));
                }
                match expected.map(|(_, e)| e) {
                    None => {
                        t.producer_epoch = self.data.producer_epoch + 1;
                        t.last_producer_epoch = -1;
                    }
                    Some(e) if e == self.data.producer_epoch || self.data.producer_epoch == -1 => {
                        t.producer_epoch = self.data.producer_epoch + 1;
                        t.last_producer_epoch = self.data.producer_epoch;
                    }
                    // A retry of a bump that succeeded: the same answer again.
                    Some(e) if e == self.data.last_producer_epoch => {}
                    Some(_) => return Err(TxnError::Fenced),
                }
                Ok(Init::Write(self.prepare(t)))
            }
            TxnState::Dead | TxnState::PrepareEpochFence => Err(TxnError::Concurrent),
        }
    }

    /// Fence the open transaction: the epoch bumped and PrepareAbort at that epoch, in one
    /// step (its markers carry the bumped epoch, so the fenced producer's writes are refused).
    /// At version 2 (`next_pid` given when [`TxnMetadata::rotates_at_fence`]) the abort
    /// completes at the next producer id when the epochs ran out, as an end would.
    fn fence(&mut self, next_pid: Option<i64>, now: i64) -> Transit {
        let mut t = self.transit();
        t.producer_epoch = self.data.producer_epoch.saturating_add(1);
        t.last_producer_epoch = -1;
        t.next_producer_id = next_pid.unwrap_or(-1);
        t.state = TxnState::PrepareAbort;
        t.last_update_ms = now;
        self.prepare(t)
    }

    /// Whether fencing the open transaction moves the id to a new producer id: a version 2
    /// client whose epochs ran out.
    pub fn rotates_at_fence(&self) -> bool {
        self.data.client_version >= TV2 && self.epoch_exhausted()
    }

    /// The checks every client request about an open transaction starts with.
    fn check_producer(&self, pid: i64, epoch: i16) -> Result<(), TxnError> {
        if pid != self.data.producer_id {
            return Err(TxnError::NotThisProducer);
        }
        if epoch != self.data.producer_epoch {
            return Err(TxnError::Fenced);
        }
        if self.pending.is_some() {
            return Err(TxnError::Concurrent);
        }
        Ok(())
    }

    /// AddPartitionsToTxn (and AddOffsetsToTxn, with the group's offsets partition; version 2:
    /// a partition's leader adding it at the first write): `None` when every partition is
    /// already in the transaction (nothing to write). A change in flight is answered first (as
    /// Kafka 4 does): during a version 2 rotation the producer may already use the new id.
    pub fn add_partitions(
        &mut self,
        pid: i64,
        epoch: i16,
        partitions: &[TopicPartition],
        version: TxnVersion,
        now: i64,
    ) -> Result<Option<Transit>, TxnError> {
        if self.pending.is_some() {
            return Err(TxnError::Concurrent);
        }
        self.check_producer(pid, epoch)?;
        match self.data.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort => Err(TxnError::Concurrent),
            TxnState::Ongoing if partitions.iter().all(|p| self.data.partitions.contains(p)) => Ok(None),
            TxnState::Empty | TxnState::Ongoing | TxnState::CompleteCommit | TxnState::CompleteAbort => {
                let mut t = self.transit();
                if self.data.state != TxnState::Ongoing {
                    t.start_ms = now;
                    t.partitions.clear();
                }
                t.state = TxnState::Ongoing;
                t.partitions.extend(partitions.iter().cloned());
                t.last_update_ms = now;
                t.client_version = version;
                Ok(Some(self.prepare(t)))
            }
            TxnState::Dead | TxnState::PrepareEpochFence => Err(TxnError::Concurrent),
        }
    }

    /// Whether the epochs of the producer id are spent: version 2's next end must move to a
    /// new producer id (`allocate` in [`TxnMetadata::end`]).
    pub fn epoch_exhausted(&self) -> bool {
        self.data.producer_epoch >= MAX_CLIENT_EPOCH
    }

    /// EndTxn from the client, at transaction version `version` (`next_pid`: a fresh producer
    /// id, asked for only at version 2 when [`TxnMetadata::epoch_exhausted`]).
    pub fn end(
        &mut self,
        pid: i64,
        epoch: i16,
        commit: bool,
        version: TxnVersion,
        next_pid: Option<i64>,
        now: i64,
    ) -> Result<End, TxnError> {
        if version >= TV2 {
            return self.end_v2(pid, epoch, commit, next_pid, now);
        }
        self.check_producer(pid, epoch)?;
        use TxnState::*;
        match (self.data.state, commit) {
            (Ongoing, _) => {
                let mut t = self.transit();
                t.state = if commit { PrepareCommit } else { PrepareAbort };
                t.last_update_ms = now;
                t.client_version = version;
                t.next_producer_id = -1;
                Ok(End::Prepare(self.prepare(t)))
            }
            (CompleteCommit, true) | (CompleteAbort, false) => {
                Ok(End::Done { producer_id: self.data.producer_id, producer_epoch: self.data.producer_epoch })
            }
            (PrepareCommit, true) | (PrepareAbort, false) => Err(TxnError::Concurrent),
            _ => Err(TxnError::InvalidState),
        }
    }

    /// EndTxn at version 2 (Kafka's `endTransaction` for TV2). The epoch tells a retry from
    /// the next transaction's end: a retry carries the epoch before the bump (or, across a
    /// rotation, the old producer id at the last epoch); the next end carries the current one.
    ///
    /// ```text
    ///                  abort: retry / current     commit: retry / current
    ///   Empty          fenced / bump              fenced / invalid state
    ///   CompleteAbort  done   / bump              invalid / invalid state
    ///   CompleteCommit invalid / bump             done   / invalid state
    /// ```
    fn end_v2(&mut self, pid: i64, epoch: i16, commit: bool, next_pid: Option<i64>, now: i64) -> Result<End, TxnError> {
        use TxnState::*;
        let current = self.data.producer_epoch;
        let retry_on_overflow = self.data.previous_producer_id == pid && epoch == MAX_CLIENT_EPOCH && current == 0;
        let retry_on_bump = current as i32 == epoch as i32 + 1;
        if self.pending.is_some() {
            return Err(TxnError::Concurrent);
        }
        if self.data.producer_id != pid && !retry_on_overflow {
            return Err(TxnError::NotThisProducer);
        }
        let valid_epoch = match self.data.state {
            Ongoing | Empty | Dead | PrepareEpochFence => epoch == current,
            PrepareCommit | PrepareAbort => retry_on_bump,
            CompleteCommit | CompleteAbort => retry_on_bump || retry_on_overflow || epoch == current,
        };
        if !valid_epoch {
            return Err(TxnError::Fenced);
        }
        let retry = retry_on_bump || retry_on_overflow;
        let done = || Ok(End::Done { producer_id: self.data.producer_id, producer_epoch: current });
        let outcome = match (self.data.state, commit) {
            (Ongoing, true) => PrepareCommit,
            (Ongoing, false) => PrepareAbort,
            (CompleteCommit, true) | (CompleteAbort, false) if retry => return done(),
            (CompleteCommit, false) | (CompleteAbort, false) | (Empty, false) if !retry => PrepareAbort,
            (PrepareCommit, true) | (PrepareAbort, false) => return Err(TxnError::Concurrent),
            _ => return Err(TxnError::InvalidState),
        };
        let exhausted = self.epoch_exhausted();
        let next_producer_id = match (exhausted, next_pid) {
            (false, _) => -1,
            (true, Some(n)) => n,
            (true, None) => return Err(TxnError::Concurrent),
        };
        let mut t = self.transit();
        let none_added = self.data.state != Ongoing;
        if none_added {
            // Nothing joined: the abort still bumps the epoch, and the "transaction" starts now.
            t.partitions.clear();
            t.start_ms = now;
        }
        // An epoch at the very top (only a fence reaches it) aborts where it is.
        if !(current == i16::MAX && outcome == PrepareAbort) {
            t.producer_epoch = current.saturating_add(1);
        }
        t.last_producer_epoch = current;
        t.next_producer_id = next_producer_id;
        t.state = outcome;
        t.last_update_ms = now;
        t.client_version = TV2;
        Ok(End::Prepare(self.prepare(t)))
    }

    /// Every marker of a prepared transaction is written: CompleteCommit or CompleteAbort (at
    /// version 2 after a rotation: at the next producer id, epoch 0).
    pub fn markers_written(&mut self, now: i64) -> Option<Transit> {
        let done = match self.data.state {
            TxnState::PrepareCommit => TxnState::CompleteCommit,
            TxnState::PrepareAbort => TxnState::CompleteAbort,
            _ => return None,
        };
        if self.pending.is_some() {
            return None;
        }
        let mut t = self.transit();
        t.state = done;
        t.partitions.clear();
        t.last_update_ms = now;
        (t.producer_id, t.producer_epoch) = self.data.after_end();
        if t.producer_id != self.data.producer_id {
            t.previous_producer_id = self.data.producer_id;
        }
        t.next_producer_id = -1;
        Some(self.prepare(t))
    }

    /// Version 2: whether an enrolment by `pid`/`epoch`, refused as concurrent now, is the
    /// producer's next transaction begun while the prepared end's markers are being written (it
    /// would be accepted once they are): the coordinator holds it and writes it with the end's
    /// completion ([`TxnMetadata::markers_written_and_enrol`]).
    pub fn enrols_after_markers(&self, pid: i64, epoch: i16) -> bool {
        matches!(self.data.state, TxnState::PrepareCommit | TxnState::PrepareAbort)
            && self.pending.is_none()
            && self.data.client_version >= TV2
            && self.data.after_end() == (pid, epoch)
    }

    /// The prepared end's markers are written and `enrolments` (producer id, epoch, partitions)
    /// of the producer's next transaction were held meanwhile: the completion, then the next
    /// transaction's Ongoing when any enrolment is accepted, to be written together (one
    /// durable write, applied in order: apply the last), with each enrolment's answer (as
    /// [`TxnMetadata::add_partitions`] would give it after the completion). `None` as
    /// [`TxnMetadata::markers_written`].
    #[allow(clippy::type_complexity)]
    pub fn markers_written_and_enrol(
        &mut self,
        now: i64,
        enrolments: &[(i64, i16, Vec<TopicPartition>)],
    ) -> Option<(Vec<Transit>, Vec<Result<(), TxnError>>)> {
        let done = self.markers_written(now)?;
        let mut staged = self.clone();
        staged.complete(done.clone());
        let mut next = None;
        let answers = enrolments
            .iter()
            .map(|(pid, epoch, partitions)| match staged.add_partitions(*pid, *epoch, partitions, TV2, now) {
                Ok(Some(t)) => {
                    staged.complete(t.clone());
                    next = Some(t);
                    Ok(())
                }
                Ok(None) => Ok(()),
                Err(e) => Err(e),
            })
            .collect();
        Some((std::iter::once(done).chain(next).collect(), answers))
    }

    /// An open transaction past its timeout (`transaction.timeout.ms`): fenced and aborted.
    /// (`next_pid`: a fresh producer id when [`TxnMetadata::rotates_at_fence`].)
    pub fn timed_out(&mut self, next_pid: Option<i64>, now: i64) -> Option<Transit> {
        self.is_late(now).then(|| self.fence(next_pid, now))
    }

    /// Whether the open transaction is past its timeout and free to be fenced.
    pub fn is_late(&self, now: i64) -> bool {
        self.data.state == TxnState::Ongoing
            && self.pending.is_none()
            && self.data.start_ms.saturating_add(self.data.timeout_ms as i64) < now
    }

    /// An id idle past `transactional.id.expiration.ms`: marked Dead (write its tombstone,
    /// then forget it).
    pub fn expire(&mut self, now: i64, expiration_ms: i64) -> bool {
        let idle = self.data.state.expirable()
            && self.pending.is_none()
            && self.data.last_update_ms <= now.saturating_sub(expiration_ms);
        if idle {
            self.pending = Some(TxnState::Dead);
        }
        idle
    }
}

/// Kafka's partition of a key in an internal topic of `partitions` partitions:
/// `abs(Java's String.hashCode) % partitions` (UTF-16 code units; `abs(i32::MIN)` is 0).
pub fn partition_for(key: &str, partitions: i32) -> i32 {
    let h = key.encode_utf16().fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(c as i32));
    let abs = if h == i32::MIN { 0 } else { h.abs() };
    abs % partitions
}

#[cfg(test)]
mod tests;
