//! A partition's truncations (`storage::log::truncate`): a Raft log's conflicting entries, a
//! follower's divergent suffix (KIP-101), a follower started again at its leader's log start.
//! Appends are refused while one runs; a follower's is decided only while the copy still
//! follows, and a leadership taken meanwhile waits for its end ([`Partition::truncated`]).

use super::{Partition, ReadAhead};
use crate::io::Disk;
use crate::storage::error::{StorageError, StorageResult};
use crate::storage::log::{Cut, Log};
use crate::types::Offset;
use std::rc::Rc;

impl<D: Disk> Partition<D> {
    /// Remove every record at or after `offset` (a Raft log's entries that conflict with the
    /// leader's, a follower's divergent suffix, KIP-101), durably: see `storage::log::truncate`.
    /// Appends are refused meanwhile (NOT_LEADER_OR_FOLLOWER); what was appended before is
    /// made durable first; a waiter for an offset past the cut gets the same error. Returns the
    /// new log end: `offset`, or the start of the batch holding it (batches are atomic). An
    /// offset at or past the log end changes nothing; one below the log start is refused.
    /// A failure after the truncation was decided leaves the partition refusing appends; the
    /// next open finishes the truncation.
    pub async fn truncate_to(self: &Rc<Self>, offset: Offset) -> StorageResult<Offset> {
        self.cut(Cut::Suffix(offset.get()), false).await
    }

    /// [`Partition::truncate_to`] or, below the log start, [`Partition::restart_at`], for a
    /// follower's divergent suffix: refused (`Follower`) unless this copy is still a follower
    /// once the truncation may start (it may have become the leader while it waited).
    pub async fn truncate_as_follower(self: &Rc<Self>, offset: Offset) -> StorageResult<Offset> {
        let cut = if offset < self.log_start() { Cut::Restart(offset.get()) } else { Cut::Suffix(offset.get()) };
        self.cut(cut, true).await
    }

    /// [`Partition::restart_at`] for a follower whose log ends below its leader's log start
    /// (retention, DeleteRecords or compaction there; a new replica): refused (`Follower`)
    /// unless this copy is still a follower once the restart may start.
    pub async fn restart_as_follower(self: &Rc<Self>, offset: Offset) -> StorageResult<Offset> {
        self.cut(Cut::Restart(offset.get()), true).await
    }

    /// Whether a truncation is under way (a leadership taken meanwhile waits for its end:
    /// [`Partition::truncated`]).
    pub fn is_truncating(&self) -> bool {
        self.truncating.get()
    }

    /// Resolves once no truncation is under way (or the partition closed).
    pub async fn truncated(&self) {
        while self.truncating.get() && !self.closed.get() {
            self.changed().await;
        }
    }

    /// Remove every record and start again, empty, at `offset` (Kafka's
    /// `truncateFullyAndStartAt`: a replica whose log ends below the leader's start, a Raft
    /// follower that installed a snapshot past its log); as [`Partition::truncate_to`]. Returns
    /// the new log end, `offset`.
    pub async fn restart_at(self: &Rc<Self>, offset: Offset) -> StorageResult<Offset> {
        self.cut(Cut::Restart(offset.get()), false).await
    }

    async fn cut(self: &Rc<Self>, cut: Cut, as_follower: bool) -> StorageResult<Offset> {
        let _one = self.deleting.acquire_permit(1).await.map_err(|_| StorageError::Closed)?;
        let _cleaning = self.cleaning.acquire_permit(1).await.map_err(|_| StorageError::Closed)?;
        self.accepting()?;
        if as_follower && !self.follower.get() {
            return Err(StorageError::Follower);
        }
        let Some(target) = self.log.borrow().truncation_target(cut)? else {
            // No record to cut, but the epoch cache may name epochs that begin here (a former
            // leader's, assigned when it took over): they go, as Kafka's truncation does.
            if let Cut::Suffix(offset) = cut {
                self.log.borrow_mut().truncate_epochs(offset);
                self.save_epochs().await?;
            }
            return Ok(self.log_end());
        };
        self.truncating.set(true);
        let result = self.truncate_quiesced(target, as_follower).await;
        if result.is_ok() {
            *self.ahead.borrow_mut() = ReadAhead::default();
        }
        let end = self.log.borrow().log_end_offset();
        self.wake(|o| o > end, Err(StorageError::Truncating));
        let durable = self.log.borrow().durable_offset();
        self.wake(|o| o <= durable, Ok(()));
        self.notify_watchers();
        result.map(|()| Offset(end))
    }

    /// [`Partition::truncate_to`] once appends are refused: make everything durable, let the
    /// flusher, a read-ahead and index loads finish, decide the cut durably and reopen the log
    /// from its files, which carries the cut out. Appends are taken again after, or after a
    /// failure that left nothing decided.
    async fn truncate_quiesced(self: &Rc<Self>, target: Cut, as_follower: bool) -> StorageResult<()> {
        let ahead = self.ahead.borrow().task.clone();
        if let Some(task) = ahead {
            task.await;
        }
        if let Err(e) = self.flush().await {
            self.truncating.set(false);
            return Err(e);
        }
        // The reopen reads the epoch cache from its file: everything it learnt is there first.
        if let Err(e) = self.save_epochs().await {
            self.truncating.set(false);
            return Err(e);
        }
        while self.flusher_running.get() || self.log.borrow().loads_in_flight() {
            glommio::timer::sleep(std::time::Duration::from_micros(200)).await;
        }
        // A follower's cut is decided only while this copy still follows: a leadership taken
        // while the flush ran waits for the truncation's end (the shard's replication), but
        // one taken before it began must not see its log cut under it.
        if as_follower && !self.follower.get() {
            self.truncating.set(false);
            return Err(StorageError::Follower);
        }
        let (disk, dir, config) = {
            let log = self.log.borrow();
            (log.disk().clone(), log.dir().to_path_buf(), log.config().clone())
        };
        if let Err(e) = crate::storage::log::write_truncate_intent(&disk, &dir, target).await {
            // Appends resume only if no intent can be left to cut them at the next open.
            let intent = dir.join(crate::storage::log::TRUNCATE_FILE);
            if disk.remove_file(&intent).await.is_ok() && disk.sync_dir(&dir).await.is_ok() {
                self.truncating.set(false);
            }
            return Err(e);
        }
        self.log.borrow_mut().begin_truncate(target);
        let (mut log, report) = Log::open(disk, &dir, config).await?;
        log.take_over(&mut self.log.borrow_mut());
        tracing::info!(dir = %dir.display(), cut = ?target, end = ?report.suffix_truncated_to, "log truncated");
        *self.log.borrow_mut() = log;
        self.truncating.set(false);
        Ok(())
    }
}
