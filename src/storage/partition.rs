//! A partition: its [`Log`] plus group commit.
//!
//! Appends run synchronously in the log; durability is a separate wait. One flusher task per
//! partition (spawned on demand on the current glommio executor) runs flush jobs while work
//! remains, writing full chunks ahead while a commit syncs (`log::flush`); every waiter whose
//! offset a completed commit covers is woken, so one fdatasync acknowledges every append that
//! arrived before its job started (group commit).
//! A failed flush fails every waiter registered at that moment (their data may or may not be
//! durable; none is acknowledged); the data stays in memory, new appends are refused
//! (KAFKA_STORAGE_ERROR) and the flush is retried with a backoff of 50 ms doubling to 2 s; once
//! a retry succeeds (a full disk has space again), appends resume. Reads serve what is durable
//! throughout.
//!
//! Who calls it: the shard that owns the partition, only from that shard's executor.

use crate::config::LogConfig;
use crate::io::Disk;
use crate::storage::access;
use crate::storage::cache::CacheHandle;
use crate::storage::cleaner::{self, CleanerLimits, IoBudget, PassReport};
use crate::storage::error::{StorageError, StorageResult};
use crate::storage::format::index::encode_clean_marker;
use crate::storage::log::CleanTarget;
use crate::storage::log::{AppendInfo, FlushDemand, FlushDone, Log, OpenReport, ReadUpTo, Written, CLEAN_MARKER};
use crate::types::{Offset, TimestampMs};
use futures_channel::oneshot;
use futures_util::future::{FutureExt, LocalBoxFuture};
use std::cell::{Cell, Ref, RefCell};
use std::path::Path;
use std::rc::Rc;

mod truncate;
use std::task::Poll;

type Waiter = (i64, oneshot::Sender<StorageResult<()>>);

/// Wall-clock time in ms; storage takes it as a parameter so tests control time.
pub type Clock = Rc<dyn Fn() -> i64>;

/// The system clock.
pub fn system_clock() -> Clock {
    Rc::new(|| std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64))
}

pub struct Partition<D: Disk> {
    log: RefCell<Log<D>>,
    clock: Clock,
    waiters: RefCell<Vec<Waiter>>,
    flusher_running: Cell<bool>,
    /// Wakes the running flusher ([`Partition::kick`]).
    nudge: RefCell<Option<oneshot::Sender<()>>>,
    /// A `flush.ms` timer is pending.
    timer_armed: Cell<bool>,
    closed: Cell<bool>,
    /// What deletes files runs one at a time: DeleteRecords (each replaces the log start file
    /// whole), retention, truncation (which reopens the log from its files), and `close`.
    deleting: glommio::sync::Semaphore,
    /// A suffix truncation is under way ([`Partition::truncate_to`]): appends are refused.
    truncating: Cell<bool>,
    /// A follower's copy ([`Partition::set_follower`]).
    follower: Cell<bool>,
    /// Held by a compaction pass; `close` waits for it.
    cleaning: glommio::sync::Semaphore,
    /// Held while the leader-epoch cache is saved ([`Partition::save_epochs`]).
    saving: glommio::sync::Semaphore,
    /// Long polls waiting for the readable range to change ([`Partition::changed`]).
    watchers: RefCell<Vec<oneshot::Sender<()>>>,
    /// The read-ahead of a consumer catching up ([`Partition::fetch_read`]).
    ahead: RefCell<ReadAhead>,
}

/// A read-ahead: the records from offset `from` on, read into the batch cache by a task while
/// the consumer handles what it has. `to`: where they end, once the task is done.
#[derive(Default)]
struct ReadAhead {
    from: i64,
    to: Option<i64>,
    task: Option<futures_util::future::Shared<LocalBoxFuture<'static, ()>>>,
    /// Reads to go without read-ahead: the last one was of no use (what it read was not in the
    /// cache when the consumer came for it: refused or evicted under memory pressure).
    backoff: u32,
}

/// Reads without read-ahead after one that was of no use.
const READ_AHEAD_BACKOFF: u32 = 64;

/// Smallest and largest read-ahead (twice what the consumer's last read returned, within these).
const READ_AHEAD_MIN: usize = 256 << 10;
const READ_AHEAD_MAX: usize = 8 << 20;

/// The offset after the last batch of `bytes` (whole batches), if any.
fn next_offset_after(bytes: &bytes::Bytes) -> Option<i64> {
    crate::storage::format::BatchWalk::new(bytes, usize::MAX >> 1)
        .filter_map(Result::ok)
        .last()
        .map(|(_, h, _)| h.next_offset())
}

impl<D: Disk> Partition<D> {
    pub async fn open(disk: D, dir: &Path, config: LogConfig, clock: Clock) -> StorageResult<(Rc<Self>, OpenReport)> {
        let (log, report) = Log::open(disk, dir, config).await?;
        let p = Partition {
            log: RefCell::new(log),
            clock,
            waiters: RefCell::new(Vec::new()),
            flusher_running: Cell::new(false),
            nudge: RefCell::new(None),
            timer_armed: Cell::new(false),
            closed: Cell::new(false),
            deleting: glommio::sync::Semaphore::new(1),
            truncating: Cell::new(false),
            follower: Cell::new(false),
            cleaning: glommio::sync::Semaphore::new(1),
            saving: glommio::sync::Semaphore::new(1),
            watchers: RefCell::new(Vec::new()),
            ahead: RefCell::new(ReadAhead::default()),
        };
        Ok((Rc::new(p), report))
    }

    /// Use the shard's batch cache ([`crate::storage::cache`]).
    pub fn attach_cache(&self, cache: CacheHandle<D::Buf>) {
        self.log.borrow_mut().attach_cache(cache);
    }

    /// Change the partition's settings at runtime (they apply from the next append, roll and
    /// upkeep pass).
    pub fn set_config(&self, config: LogConfig) {
        self.log.borrow_mut().set_config(config);
    }

    /// The high watermark: what readers may see. Every offset below it is durable, and on a
    /// replicated partition durable on every in-sync replica ([`Partition::set_replicated_to`]).
    pub fn high_watermark(&self) -> Offset {
        Offset(self.log.borrow().high_watermark())
    }

    /// The durable end: every offset below it is durable here.
    pub fn durable_end(&self) -> Offset {
        Offset(self.log.borrow().durable_offset())
    }

    /// On a replicated partition, the offset below which every in-sync replica has the records
    /// durable (`None`: not replicated). Readers and long polls follow it.
    pub fn set_replicated_to(&self, to: Option<Offset>) {
        let before = self.high_watermark();
        self.log.borrow_mut().set_replicated_to(to.map(Offset::get));
        if self.high_watermark() != before {
            self.notify_watchers();
        }
    }

    /// A copy of a replicated log, just opened: its high watermark starts at its log start, not
    /// at its durable end, and moves only as its followers' fetches (as leader) or its leader's
    /// answers (as follower) say (Kafka's, without a checkpoint). A restarted node that leads
    /// again thus never shows readers a tail its followers may not have.
    pub fn start_replicated(&self) {
        if self.log.borrow().replicated_to().is_none() {
            let start = self.log_start();
            self.set_replicated_to(Some(start));
        }
    }

    /// The leader epoch stamped on this node's appends as leader (`None`: standalone, or a
    /// follower).
    pub fn set_leader_epoch(self: &Rc<Self>, epoch: Option<i32>) {
        self.log.borrow_mut().set_leader_epoch(epoch);
        self.save_epochs_soon();
    }

    /// The leader epoch of this node's appends now (`None`: standalone, or a follower).
    pub fn leader_epoch(&self) -> Option<i32> {
        self.log.borrow().leader_epoch()
    }

    /// acks=all: wait until every offset below `end` is below the high watermark (durable
    /// here and, replicated, on every in-sync replica), for at most `timeout`. `epoch` is the
    /// leader epoch the records were appended under ([`Partition::leader_epoch`] before the
    /// append): if this copy stops leading at it meanwhile (a follower now, or leading again at
    /// a newer epoch), the records may be cut as a divergent suffix: `Follower`
    /// (NOT_LEADER_OR_FOLLOWER). The flusher is started first (a relaxed flush policy would
    /// else hold the high watermark back until `flush.ms`).
    pub async fn wait_replicated(
        self: &Rc<Self>,
        end: Offset,
        epoch: Option<i32>,
        timeout: std::time::Duration,
    ) -> StorageResult<()> {
        let deadline = std::time::Instant::now() + timeout;
        let leading = |p: &Self| !p.follower.get() && p.leader_epoch() == epoch;
        if !leading(self) {
            return Err(StorageError::Follower);
        }
        let durable = self.wait_durable(end);
        futures_lite::future::or(durable, async {
            glommio::timer::sleep(timeout).await;
            Err(StorageError::ReplicationTimedOut)
        })
        .await?;
        loop {
            if self.closed.get() {
                return Err(StorageError::Closed);
            }
            if !leading(self) {
                return Err(StorageError::Follower);
            }
            if self.high_watermark() >= end {
                return Ok(());
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Err(StorageError::ReplicationTimedOut);
            }
            futures_lite::future::or(self.changed(), glommio::timer::sleep(left)).await;
        }
    }

    /// Where leader epoch `epoch` ends in this log, and the largest epoch at or below it that
    /// wrote here (Kafka's OffsetsForLeaderEpoch answer; `(-1, -1)`: unknown).
    pub fn end_offset_for_epoch(&self, epoch: i32) -> (i32, Offset) {
        let log = self.log.borrow();
        let (e, end) = log.epochs().end_offset_for(epoch, log.log_end_offset());
        (e, Offset(end))
    }

    /// The newest leader epoch that wrote to this log (`None`: none known).
    pub fn latest_epoch(&self) -> Option<i32> {
        self.log.borrow().epochs().latest()
    }

    /// Save the leader-epoch cache if it changed: once per new epoch, at the first batch of
    /// it. One save at a time, each writing what the cache holds when it starts.
    async fn save_epochs(&self) -> StorageResult<()> {
        // The permit first: a save under way (started by another append) is waited for.
        let _one = self.saving.acquire_permit(1).await.map_err(|_| StorageError::Closed)?;
        let (disk, path, bytes) = {
            let mut log = self.log.borrow_mut();
            let Some(bytes) = log.take_epochs_changed() else { return Ok(()) };
            (log.disk().clone(), log.dir().join(crate::storage::log::EPOCH_FILE), bytes)
        };
        disk.write_file_atomic(&path, &bytes).await?;
        Ok(())
    }

    /// [`Partition::save_epochs`] in a task of its own (an append that does not wait).
    fn save_epochs_soon(self: &Rc<Self>) {
        if self.log.borrow().epochs_dirty() {
            let me = self.clone();
            glommio::spawn_local(async move {
                if let Err(e) = me.save_epochs().await {
                    tracing::warn!(dir = %me.log.borrow().dir().display(), error = %e, "cannot save the leader-epoch cache");
                }
            })
            .detach();
        }
    }

    /// Append batches as the leader stored them (a follower's fetch, [`Log::append_replica`]);
    /// the flusher is started and the caller waits for durability
    /// ([`Partition::wait_durable`]).
    pub async fn append_replica(self: &Rc<Self>, records: &[u8]) -> StorageResult<AppendInfo> {
        self.accepting()?;
        if !self.follower.get() {
            // A leader's log takes only its own appends (a fetch answer that came back after
            // this node became the leader).
            return Err(StorageError::Follower);
        }
        if !self.log.borrow().may_have_gaps() && self.log.borrow().replica_gaps(records) {
            // A compacted leader's gaps: recorded durably before any batch past one is
            // appended, so that recovery keeps what follows a gap ([`Log::replica_gaps`]).
            let (disk, path) = {
                let log = self.log.borrow();
                (log.disk().clone(), log.dir().join(crate::storage::log::CLEANER_CHECKPOINT))
            };
            if disk.read_file(&path).await?.is_none() {
                let bytes = crate::storage::format::index::encode_cleaner_checkpoint(i64::MIN);
                disk.write_file_atomic(&path, &bytes).await?;
            }
            self.log.borrow_mut().set_may_have_gaps();
            self.accepting()?;
        }
        // A batch that begins a new epoch: the cache naming it is durable before the batch can
        // be (a crash between the two would else leave a durable batch whose epoch the cache
        // lacks, and divergence from the leader would go unseen).
        let ahead = self.log.borrow().epochs_after(records);
        if let Some(epochs) = ahead {
            self.save_epoch_cache(&epochs).await?;
            self.accepting()?;
            if !self.follower.get() {
                return Err(StorageError::Follower);
            }
        }
        let now = (self.clock)();
        let (info, _) = self.log.borrow_mut().append_replica(records, now)?;
        self.kick();
        self.save_epochs().await?;
        Ok(info)
    }

    /// Write `epochs` as the leader-epoch cache file now, under the same permit as
    /// [`Partition::save_epochs`] (one save at a time).
    async fn save_epoch_cache(&self, epochs: &crate::storage::log::Epochs) -> StorageResult<()> {
        let _one = self.saving.acquire_permit(1).await.map_err(|_| StorageError::Closed)?;
        let (disk, path) = {
            let log = self.log.borrow();
            (log.disk().clone(), log.dir().join(crate::storage::log::EPOCH_FILE))
        };
        disk.write_file_atomic(&path, &epochs.encode()).await?;
        Ok(())
    }

    /// The log start offset (DeleteRecords and retention move it).
    pub fn log_start(&self) -> Offset {
        Offset(self.log.borrow().log_start_offset())
    }

    /// The log end offset: the next offset to be appended.
    pub fn log_end(&self) -> Offset {
        Offset(self.log.borrow().log_end_offset())
    }

    /// Read-only access to the log (offsets, sizes). Never hold it across an await.
    pub fn log(&self) -> Ref<'_, Log<D>> {
        self.log.borrow()
    }

    /// Append `records` (v2 batches) and return once they are as durable as the flush policy
    /// promises (SPEC T3.5): with the default `flush.messages=1`, after their fdatasync.
    pub async fn append(self: &Rc<Self>, records: &[u8]) -> StorageResult<AppendInfo> {
        self.writable()?;
        let now = (self.clock)();
        let (info, demand) = self.log.borrow_mut().append(records, now)?;
        self.save_epochs().await?;
        match demand {
            FlushDemand::Wait => {
                // The group commit: until a commit job covering the batch has synced.
                let waiting = std::time::Instant::now();
                self.wait_durable(Offset(info.last_offset + 1)).await?;
                crate::metrics::since(crate::metrics::Stage::CommitWait, waiting);
            }
            FlushDemand::Kick => self.kick(),
            FlushDemand::None => self.arm_flush_timer(),
        }
        Ok(info)
    }

    /// Append `records` now, synchronously, without waiting for durability (the caller waits
    /// with [`Partition::flush`] or [`Partition::wait_durable`]); the flusher is started.
    pub fn append_nowait(self: &Rc<Self>, records: &[u8]) -> StorageResult<AppendInfo> {
        self.writable()?;
        let now = (self.clock)();
        let (info, _) = self.log.borrow_mut().append(records, now)?;
        self.kick();
        self.save_epochs_soon();
        Ok(info)
    }

    /// Append a transaction marker (the coordinator's write) now, without waiting for
    /// durability ([`Log::append_marker`]); the flusher is started.
    pub fn append_marker(
        self: &Rc<Self>,
        pid: i64,
        epoch: i16,
        marker: crate::storage::format::marker::Marker,
    ) -> StorageResult<AppendInfo> {
        self.writable()?;
        let now = (self.clock)();
        let (info, _, _) = self.log.borrow_mut().append_marker(pid, epoch, marker, now)?;
        self.kick();
        self.save_epochs_soon();
        Ok(info)
    }

    /// Whether appends are taken now.
    fn accepting(&self) -> StorageResult<()> {
        if self.closed.get() {
            return Err(StorageError::Closed);
        }
        if self.truncating.get() {
            return Err(StorageError::Truncating);
        }
        Ok(())
    }

    /// Whether this node's own appends (a producer's, a coordinator's) are taken: not on a
    /// follower's copy.
    fn writable(&self) -> StorageResult<()> {
        self.accepting()?;
        if self.follower.get() {
            return Err(StorageError::Follower);
        }
        Ok(())
    }

    /// This copy follows another node's (replication): only [`Partition::append_replica`]
    /// writes to it; or it leads again (`false`).
    pub fn set_follower(&self, follower: bool) {
        self.follower.set(follower);
    }

    /// `flush.ms`: data an append did not wait for is flushed at most this long after it.
    fn arm_flush_timer(self: &Rc<Self>) {
        if self.timer_armed.replace(true) {
            return;
        }
        let delay = std::time::Duration::from_millis(self.log.borrow().config().flush_ms);
        let me = self.clone();
        glommio::spawn_local(async move {
            glommio::timer::sleep(delay).await;
            me.timer_armed.set(false);
            me.kick();
        })
        .detach();
    }

    /// Wait until every offset below `offset` is durable.
    pub async fn wait_durable(self: &Rc<Self>, offset: Offset) -> StorageResult<()> {
        let offset = offset.get();
        if self.log.borrow().durable_offset() >= offset {
            return Ok(());
        }
        let (tx, rx) = oneshot::channel();
        self.waiters.borrow_mut().push((offset, tx));
        self.kick();
        rx.await.unwrap_or(Err(StorageError::Closed))
    }

    /// Make everything appended so far durable.
    pub async fn flush(self: &Rc<Self>) -> StorageResult<()> {
        let end = self.log_end();
        self.wait_durable(end).await
    }

    /// Resolves when what a reader can see changes: the high watermark (durable offset) or the
    /// log start moves, a flush fails, or the partition closes. Long polls wait on it instead
    /// of polling. Waiters that went away are dropped at the next registration, so an idle
    /// partition does not collect them.
    pub fn changed(&self) -> impl std::future::Future<Output = ()> + 'static {
        let (tx, rx) = oneshot::channel();
        let mut watchers = self.watchers.borrow_mut();
        watchers.retain(|w| !w.is_canceled());
        watchers.push(tx);
        async move {
            let _ = rx.await;
        }
    }

    /// Wake whatever waits on [`Partition::changed`] (what it waits for may have moved
    /// elsewhere: a leadership).
    pub fn poke(&self) {
        self.notify_watchers();
    }

    fn notify_watchers(&self) {
        for w in self.watchers.borrow_mut().drain(..) {
            let _ = w.send(());
        }
    }

    /// Start the flusher if it is not running and there is work. A running one is woken only
    /// when a job could start now (full chunks while its commit syncs, or any data while it
    /// runs only a zero job); otherwise it finds the new data itself when the commit completes
    /// (an append would else wake it every time).
    pub fn kick(self: &Rc<Self>) {
        if self.flusher_running.get() {
            if !self.log.borrow().can_start_job() {
                return;
            }
            if let Some(nudge) = self.nudge.borrow_mut().take() {
                let _ = nudge.send(());
            }
        } else if self.log.borrow().has_unflushed() {
            self.flusher_running.set(true);
            glommio::spawn_local(self.clone().flush_loop()).detach();
        }
    }

    /// The flusher: runs flush jobs while work remains (`log::flush`): a commit job writes,
    /// then syncs (one synced write for a commit of one write), and while it syncs write-ahead
    /// jobs write the full chunks that fill
    /// meanwhile; beside them, while commits are small, a zero job writes zeros past the data.
    /// Each completed commit wakes the waiters it covers. After a failure no job starts; the
    /// jobs in flight drain (as failures) and a retry is scheduled.
    async fn flush_loop(self: Rc<Self>) {
        enum Event<D: Disk> {
            Wrote(Result<Written<D>, FlushDone<D>>),
            Synced(FlushDone<D>),
            Zeroed(FlushDone<D>),
            Nudged,
        }
        let mut writing: Option<LocalBoxFuture<'static, Result<Written<D>, FlushDone<D>>>> = None;
        let mut syncing: Option<LocalBoxFuture<'static, FlushDone<D>>> = None;
        let mut zeroing: Option<LocalBoxFuture<'static, FlushDone<D>>> = None;
        let mut failed = false;
        loop {
            if writing.is_none() && !failed {
                let work = self.log.borrow_mut().prepare_flush();
                writing = work.map(|w| w.write().boxed_local());
            }
            // No zeros for a log about to be closed or cut: its seal or reopen drops them.
            if zeroing.is_none() && !failed && !self.closed.get() && !self.truncating.get() {
                let work = self.log.borrow_mut().prepare_zeros();
                zeroing = work.map(|w| w.run().boxed_local());
            }
            if writing.is_none() && syncing.is_none() && zeroing.is_none() {
                break;
            }
            let (tx, mut nudged) = oneshot::channel();
            *self.nudge.borrow_mut() = Some(tx);
            let event = std::future::poll_fn(|cx| {
                if let Some(Poll::Ready(r)) = writing.as_mut().map(|w| w.poll_unpin(cx)) {
                    return Poll::Ready(Event::Wrote(r));
                }
                if let Some(Poll::Ready(done)) = syncing.as_mut().map(|s| s.poll_unpin(cx)) {
                    return Poll::Ready(Event::Synced(done));
                }
                if let Some(Poll::Ready(done)) = zeroing.as_mut().map(|z| z.poll_unpin(cx)) {
                    return Poll::Ready(Event::Zeroed(done));
                }
                match nudged.poll_unpin(cx) {
                    Poll::Ready(_) => Poll::Ready(Event::Nudged),
                    Poll::Pending => Poll::Pending,
                }
            })
            .await;
            let done = match event {
                Event::Wrote(Ok(written)) if written.is_commit() => {
                    writing = None;
                    self.log.borrow_mut().flush_written();
                    syncing = Some(written.finish().boxed_local());
                    continue;
                }
                Event::Wrote(r) => {
                    writing = None;
                    match r {
                        Ok(written) => written.finish().await,
                        Err(done) => done,
                    }
                }
                Event::Synced(done) => {
                    syncing = None;
                    done
                }
                Event::Zeroed(done) => {
                    zeroing = None;
                    // Zeros make nothing durable and fail nothing: no waiter to wake.
                    let _ = self.log.borrow_mut().complete_flush(done);
                    continue;
                }
                Event::Nudged => continue,
            };
            let result = self.log.borrow_mut().complete_flush(done);
            self.notify_watchers();
            match result {
                Ok(durable) => self.wake(|offset| offset <= durable, Ok(())),
                Err(e) => {
                    self.wake(|_| true, Err(e));
                    failed = true;
                }
            }
        }
        self.nudge.borrow_mut().take();
        self.flusher_running.set(false);
        if failed {
            self.schedule_retry();
        }
        // Waiters that registered after the last job was prepared but whose data was covered.
        let durable = self.log.borrow().durable_offset();
        self.wake(|offset| offset <= durable, Ok(()));
        if !failed && !self.waiters.borrow().is_empty() && !self.closed.get() {
            self.kick();
        }
    }

    /// After a failed flush: try again after a backoff, until one succeeds.
    fn schedule_retry(self: &Rc<Self>) {
        let failures = self.log.borrow().flush_failures();
        let delay = std::time::Duration::from_millis((50u64 << failures.saturating_sub(1).min(6)).min(2_000));
        let me = self.clone();
        glommio::spawn_local(async move {
            glommio::timer::sleep(delay).await;
            if me.closed.get() {
                return;
            }
            me.log.borrow_mut().clear_flush_failure_if_idle();
            me.kick();
        })
        .detach();
    }

    fn wake(&self, pick: impl Fn(i64) -> bool, result: StorageResult<()>) {
        let mut waiters = self.waiters.borrow_mut();
        let mut keep = Vec::with_capacity(waiters.len());
        for (offset, tx) in waiters.drain(..) {
            if pick(offset) {
                let _ = tx.send(result.clone());
            } else {
                keep.push((offset, tx));
            }
        }
        *waiters = keep;
    }

    /// Read whole batches from the one holding `offset`, up to about `max_bytes`.
    pub async fn read(&self, offset: Offset, max_bytes: usize, upto: ReadUpTo) -> StorageResult<bytes::Bytes> {
        access::read(&self.log, offset.get(), max_bytes, upto).await
    }

    /// A consumer's read of durable records ([`Partition::read`]) with read-ahead: when a read
    /// had to go to disk (the reader is behind what memory holds) the records after it are read
    /// into the batch cache by a task of their own while the consumer handles these, and once
    /// the reader is half way through what was read ahead, the next stretch is. A read of an
    /// offset whose read-ahead is still running waits for it instead of reading the same bytes.
    /// Without a batch cache this is [`Partition::read`].
    pub async fn fetch_read(self: &Rc<Self>, offset: Offset, max_bytes: usize) -> StorageResult<bytes::Bytes> {
        let o = offset.get();
        let pending = {
            let ahead = self.ahead.borrow();
            ahead.task.clone().filter(|_| ahead.to.is_none() && o == ahead.from)
        };
        if let Some(task) = pending {
            task.await;
        }
        let (bytes, from_disk) = access::read_traced(&self.log, o, max_bytes, ReadUpTo::HighWatermark).await?;
        // How much one cache entry may take now (nothing while a fetch waits for memory).
        let room = self.log.borrow().cache_room();
        if room < READ_AHEAD_MIN || self.closed.get() || self.truncating.get() {
            return Ok(bytes);
        }
        let start = {
            let mut ahead = self.ahead.borrow_mut();
            let running = ahead.task.is_some() && ahead.to.is_none();
            if from_disk && !running && ahead.to.is_some_and(|to| to > ahead.from) && o == ahead.from {
                // What was read ahead for this very read is not in the cache.
                ahead.backoff = READ_AHEAD_BACKOFF;
            }
            // The batches are walked (for where they end) only when a read-ahead may start: not
            // for a consumer at the tail.
            if running {
                None
            } else if ahead.backoff > 0 {
                ahead.backoff -= 1;
                None
            } else if from_disk {
                next_offset_after(&bytes)
            } else if let Some(to) = ahead.to.filter(|&to| (ahead.from..to).contains(&o)) {
                // Reading through what was read ahead: past half of it, the next stretch.
                let half = (to - ahead.from) / 2;
                next_offset_after(&bytes).filter(|&end| end + half >= to).map(|_| to)
            } else {
                None
            }
        };
        if let Some(start) = start {
            let len = (bytes.len() * 2).clamp(READ_AHEAD_MIN, READ_AHEAD_MAX).min(room);
            let me = self.clone();
            let task = async move {
                if me.closed.get() || me.truncating.get() {
                    me.ahead.borrow_mut().to = Some(start);
                    return;
                }
                let read = access::read(&me.log, start, len, ReadUpTo::Durable).await;
                let to = read.ok().and_then(|b| next_offset_after(&b)).unwrap_or(start);
                me.ahead.borrow_mut().to = Some(to);
            }
            .boxed_local()
            .shared();
            *self.ahead.borrow_mut() = ReadAhead { from: start, to: None, task: Some(task.clone()), backoff: 0 };
            glommio::spawn_local(task).detach();
        }
        Ok(bytes)
    }

    /// Call `f` with every durable batch from the log start, about 1 MiB of whole batches at
    /// a time (the startup replay of an internal topic).
    pub async fn for_each_chunk<E>(&self, mut f: impl FnMut(&bytes::Bytes) -> Result<(), E>) -> Result<(), E>
    where
        E: From<StorageError> + From<crate::storage::format::FormatError>,
    {
        let mut at = self.log_start();
        loop {
            let bytes = self.read(at, 1 << 20, ReadUpTo::Durable).await?;
            if bytes.is_empty() {
                return Ok(());
            }
            for item in crate::storage::format::BatchWalk::new(&bytes, usize::MAX >> 1) {
                let (_, info, _) = item?;
                at = Offset(info.next_offset());
            }
            f(&bytes)?;
        }
    }

    /// ListOffsets by time (SPEC T6): (offset, timestamp), or `None` for Kafka's (-1, -1).
    pub async fn offset_for_time(
        &self,
        t: TimestampMs,
        upto: ReadUpTo,
    ) -> StorageResult<Option<(Offset, TimestampMs)>> {
        let found = access::offset_for_time(&self.log, t.get(), upto).await?;
        Ok(found.map(|(offset, timestamp)| (Offset(offset), TimestampMs(timestamp))))
    }

    /// Periodic upkeep: time-based roll and retention by time and size (SPEC T7); returns
    /// the deleted segments' base offsets. A rolled segment is sealed by the flusher.
    pub async fn maintain(self: &Rc<Self>) -> StorageResult<Vec<i64>> {
        let Ok(_one) = self.deleting.acquire_permit(1).await else { return Ok(Vec::new()) };
        if self.closed.get() {
            return Ok(Vec::new());
        }
        let removed = access::maintain(&self.log, (self.clock)()).await?;
        self.kick();
        Ok(removed)
    }

    /// The cleanable range of a compacted log now (`None`: not compacted, closed, or nothing
    /// dirty), for the cleaner's choice and `/metrics`.
    pub async fn clean_target(&self) -> StorageResult<Option<CleanTarget>> {
        if self.closed.get() || !self.log.borrow().config().cleanup_compact {
            return Ok(None);
        }
        cleaner::clean_target(&self.log, (self.clock)()).await
    }

    /// One compaction pass over `target` (docs/architecture.md, "Log compaction"). Appends
    /// and reads go on meanwhile.
    pub async fn clean(
        &self,
        target: CleanTarget,
        limits: CleanerLimits,
        budget: &mut IoBudget,
    ) -> StorageResult<PassReport> {
        // `close` takes this permit after setting `closed`, which stops the pass within a
        // read window: no cleaner file appears in a closed (or deleted) partition's directory.
        let _one = self.cleaning.acquire_permit(1).await.map_err(|_| StorageError::Closed)?;
        if self.closed.get() {
            return Err(StorageError::Closed);
        }
        let abort = || self.closed.get();
        let report = cleaner::run_pass(&self.log, (self.clock)(), target, limits, budget, &abort).await?;
        self.notify_watchers();
        Ok(report)
    }

    /// Start a new active segment now (the old one is sealed by the flusher).
    pub fn roll(self: &Rc<Self>) {
        self.log.borrow_mut().roll((self.clock)());
        self.kick();
    }

    /// DeleteRecords (KIP-107): the log start moves to `offset` (`-1`: the high watermark),
    /// durably; returns the new log start. Reads below it are out of range, and the segments
    /// wholly below it are deleted now or, for an active one (rolled), at the next upkeep.
    pub async fn delete_records(self: &Rc<Self>, offset: Offset) -> StorageResult<Offset> {
        let _one = self.deleting.acquire_permit(1).await.map_err(|_| StorageError::Closed)?;
        // Checked with the permit held: `close` takes it too, so no deletion writes into a
        // partition directory after its close (or its removal) began.
        if self.closed.get() {
            return Err(StorageError::Closed);
        }
        let start = Offset(access::delete_records(&self.log, offset.get(), (self.clock)()).await?);
        self.notify_watchers();
        self.kick();
        Ok(start)
    }

    /// Delete the sealed segments wholly below `offset`; see [`Log::take_segments_before`].
    pub async fn remove_before(&self, offset: Offset) -> StorageResult<Vec<i64>> {
        let _one = self.deleting.acquire_permit(1).await.map_err(|_| StorageError::Closed)?;
        if self.closed.get() {
            return Err(StorageError::Closed);
        }
        access::remove_before(&self.log, offset.get()).await
    }

    /// Clean shutdown: refuse new appends, flush and seal the active segment, write the
    /// clean-shutdown marker. Appends in flight finish first.
    pub async fn close(self: &Rc<Self>) -> StorageResult<()> {
        self.closed.set(true);
        self.notify_watchers();
        // A DeleteRecords under way finishes first; later ones see `closed`. A compaction pass
        // sees `closed` and stops (its files removed, or its committed swap finished).
        let _deletions = self.deleting.acquire_permit(1).await;
        let _cleaning = self.cleaning.acquire_permit(1).await;
        // A read-ahead under way finishes (it may write a rebuilt index file); later ones see
        // `closed` and do not start.
        let ahead = self.ahead.borrow().task.clone();
        if let Some(task) = ahead {
            task.await;
        }
        // The flusher's jobs finish first: `begin_close` drops a never-written active segment,
        // which must not be one whose file a job is creating.
        while self.flusher_running.get() {
            glommio::timer::sleep(std::time::Duration::from_micros(200)).await;
        }
        self.log.borrow_mut().begin_close();
        loop {
            if self.flusher_running.get() {
                glommio::timer::sleep(std::time::Duration::from_micros(200)).await;
                continue;
            }
            let work = self.log.borrow_mut().prepare_flush();
            let Some(work) = work else { break };
            let done = work.run().await;
            let result = self.log.borrow_mut().complete_flush(done);
            match result {
                Ok(durable) => self.wake(|offset| offset <= durable, Ok(())),
                Err(e) => {
                    self.wake(|_| true, Err(e.clone()));
                    return Err(e);
                }
            }
        }
        self.wake(|_| true, Err(StorageError::Closed));
        // A clean marker vouches for the epoch cache too (the next open trusts its file).
        self.save_epochs().await?;
        // The marker write does not touch the log's state: no borrow is held across it.
        let (disk, path, marker) = {
            let log = self.log.borrow();
            (
                log.disk().clone(),
                log.dir().join(CLEAN_MARKER),
                encode_clean_marker(log.log_end_offset(), log.last_time_entry()),
            )
        };
        disk.write_file_atomic(&path, &marker).await?;
        Ok(())
    }
}
