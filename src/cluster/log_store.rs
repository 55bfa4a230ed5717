//! The Raft log of the metadata quorum, kept in a tidemark partition log as KRaft keeps its own in
//! a Kafka log (`__cluster_metadata-0`): one v2 batch per Raft entry, its one record's value the
//! entry as JSON, the entry's term in the batch's `partitionLeaderEpoch`, and **Raft log index =
//! offset**. The storage engine's direct I/O, group commit, crash recovery and their tests serve
//! the quorum unchanged.
//!
//! openraft's storage rules, and how each is kept:
//! - *entries are readable once `append` returns*: they are appended to the partition at once
//!   (`append_nowait`) and read back with [`ReadUpTo::LogEnd`];
//! - *`IOFlushed` only once on disk*: a task waits for the partition's durable point to pass the
//!   last entry ([`Partition::wait_durable`], the fdatasync), then completes it;
//! - *the vote is durable before `save_vote` returns*: the vote, the committed log id and the
//!   purged log id live in one small file (`raft-meta`, JSON) replaced whole with
//!   `write_file_atomic`;
//! - *no hole*: an entry is appended only at the log end (its index must be the next offset);
//!   `truncate_after` is the partition's suffix truncation, durable when it returns; `purge` records
//!   the purged id first, then moves the log start (DeleteRecords) or, past the log end (a snapshot
//!   installed ahead of the log), starts the log again empty after it
//!   ([`Partition::restart_at`]); an open finishes a purge a crash interrupted.
//!
//! Everything runs on the quorum's shard; openraft calls the writes one at a time.

use super::types::{Entry, IOFlushed, LogId, LogState, Tm, Vote};
use crate::io::Disk;
use crate::storage::format::batch::{records_section, BatchBuilder, Records};
use crate::storage::format::{BatchHeader, BatchWalk};
use crate::storage::{Partition, ReadUpTo, StorageError};
use crate::types::Offset;
use openraft::storage::{RaftLogReader, RaftLogStorage};
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::fmt::Debug;
use std::io;
use std::ops::{Bound, RangeBounds};
use std::path::PathBuf;
use std::rc::Rc;

/// The file beside the log's segments that holds the vote, the committed and the purged log id.
pub const META_FILE: &str = "raft-meta";

/// Bytes read per step when entries are read back.
const READ_BYTES: usize = 1 << 20;

/// Largest entry the decoder accepts (a batch's records section).
pub const MAX_ENTRY_BYTES: usize = 64 << 20;

#[derive(Serialize, Deserialize, Debug, Default, Clone, PartialEq)]
struct RaftMeta {
    vote: Option<Vote>,
    committed: Option<LogId>,
    purged: Option<LogId>,
}

/// The metadata log: cheap to clone (the log reader openraft's replication tasks use is a clone).
pub struct MetaLog<D: Disk> {
    inner: Rc<Inner<D>>,
}

impl<D: Disk> Clone for MetaLog<D> {
    fn clone(&self) -> Self {
        MetaLog { inner: self.inner.clone() }
    }
}

struct Inner<D: Disk> {
    partition: Rc<Partition<D>>,
    disk: D,
    meta_path: PathBuf,
    meta: RefCell<RaftMeta>,
    /// The last entry's log id; `None` when no entry is past the purged one.
    last: RefCell<Option<LogId>>,
}

fn io_err(e: impl std::error::Error + Send + Sync + 'static) -> io::Error {
    io::Error::other(e)
}

fn corrupt(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

/// The batch that stores `entry`: one record, the entry as JSON, its term as the batch's
/// partition leader epoch (outside the CRC, as Kafka sets it).
fn encode_entry(entry: &Entry, now_ms: i64) -> io::Result<Vec<u8>> {
    let json = serde_json::to_vec(entry).map_err(io_err)?;
    let mut b = BatchBuilder::new().reserve(json.len() + 32);
    b.push(now_ms, None, Some(&json), &[]);
    let mut batch = b.finish();
    let term = i32::try_from(entry.log_id.leader_id.term).unwrap_or(i32::MAX);
    batch[12..16].copy_from_slice(&term.to_be_bytes());
    Ok(batch)
}

/// The entry a stored batch holds, checked to sit at its own index.
fn decode_entry(batch: &[u8]) -> io::Result<Entry> {
    let h = BatchHeader::parse(batch).map_err(io_err)?;
    let section = records_section(&h, batch, MAX_ENTRY_BYTES).map_err(io_err)?;
    let record = Records::new(&section, h.record_count)
        .next()
        .ok_or_else(|| corrupt(format!("metadata log batch at {} holds no record", h.base_offset)))?
        .map_err(io_err)?;
    let value =
        record.value.ok_or_else(|| corrupt(format!("metadata log record at {} has no value", h.base_offset)))?;
    let entry: Entry = serde_json::from_slice(value).map_err(io_err)?;
    if entry.log_id.index as i64 != h.base_offset {
        return Err(corrupt(format!("metadata log entry {} stored at offset {}", entry.log_id.index, h.base_offset)));
    }
    Ok(entry)
}

/// The metadata log's settings (KRaft's `metadata.log.*` defaults where they fit): segments
/// of 8 MiB, no retention (purges after snapshots remove entries), large entries allowed (a
/// topic with many partitions is one entry), and small preallocation and write chunks (the log
/// is small and its appends are small).
pub fn metadata_log_config() -> crate::config::LogConfig {
    crate::config::LogConfig {
        segment_bytes: 8 << 20,
        retention_bytes: None,
        retention_ms: None,
        max_message_bytes: MAX_ENTRY_BYTES as u64,
        preallocate_bytes: 1 << 20,
        write_chunk_bytes: 64 << 10,
        ..Default::default()
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

impl<D: Disk> MetaLog<D> {
    /// The metadata log over `partition` (opened by the caller, its directory holding
    /// [`META_FILE`] too): reads the vote and log ids, and finishes a purge a crash interrupted.
    pub async fn open(partition: Rc<Partition<D>>) -> io::Result<MetaLog<D>> {
        let (disk, dir) = {
            let log = partition.log();
            (log.disk().clone(), log.dir().to_path_buf())
        };
        let meta_path = dir.join(META_FILE);
        let meta = match disk.read_file(&meta_path).await.map_err(io_err)? {
            Some(bytes) => {
                serde_json::from_slice(&bytes).map_err(|e| corrupt(format!("{}: {e}", meta_path.display())))?
            }
            None => RaftMeta::default(),
        };
        let store = MetaLog {
            inner: Rc::new(Inner { partition, disk, meta_path, meta: RefCell::new(meta), last: RefCell::new(None) }),
        };
        let purged = store.inner.meta.borrow().purged;
        if let Some(p) = purged {
            store.drop_through(p.index).await?;
        }
        let end = store.end();
        if end > store.first_readable() {
            let last = store.read_entries(end - 1, end).await?;
            *store.inner.last.borrow_mut() = last.last().map(|e| e.log_id);
        }
        Ok(store)
    }

    /// The partition the log is kept in.
    pub fn partition(&self) -> &Rc<Partition<D>> {
        &self.inner.partition
    }

    /// The log end: the index the next entry takes.
    fn end(&self) -> u64 {
        self.inner.partition.log_end().get() as u64
    }

    /// The first index that may be read: past the log start and the purged entry.
    fn first_readable(&self) -> u64 {
        let start = self.inner.partition.log_start().get() as u64;
        let purged = self.inner.meta.borrow().purged.map_or(0, |p| p.index + 1);
        start.max(purged)
    }

    /// Change and persist the vote, committed or purged id. Everything appended before is made
    /// durable first: openraft's writes must reach the disk in the order made (a vote saved
    /// ahead of entries appended before it would let a follower acknowledge entries a power cut
    /// then takes).
    async fn save_meta(&self, change: impl FnOnce(&mut RaftMeta)) -> io::Result<()> {
        self.inner.partition.flush().await.map_err(io_err)?;
        let bytes = {
            let mut meta = self.inner.meta.borrow_mut();
            change(&mut meta);
            serde_json::to_vec(&*meta).map_err(io_err)?
        };
        self.inner.disk.write_file_atomic(&self.inner.meta_path, &bytes).await.map_err(io_err)
    }

    /// Remove the entries through `index`: the log start moves past it (once durable), or, past
    /// the log end, the log starts again empty after it.
    async fn drop_through(&self, index: u64) -> io::Result<()> {
        let p = &self.inner.partition;
        let to = Offset(index as i64 + 1);
        if to > p.log_end() {
            p.restart_at(to).await.map_err(io_err)?;
        } else if to > p.log_start() {
            p.wait_durable(to).await.map_err(io_err)?;
            p.delete_records(to).await.map_err(io_err)?;
        }
        let mut last = self.inner.last.borrow_mut();
        if last.is_some_and(|l| l.index <= index) {
            *last = None;
        }
        Ok(())
    }

    /// The entries with indexes in `[from, to)` that the log holds.
    async fn read_entries(&self, from: u64, to: u64) -> io::Result<Vec<Entry>> {
        let (from, to) = (from.max(self.first_readable()), to.min(self.end()));
        let mut out = Vec::with_capacity(to.saturating_sub(from) as usize);
        let mut at = from;
        while at < to {
            let bytes =
                self.inner.partition.read(Offset(at as i64), READ_BYTES, ReadUpTo::LogEnd).await.map_err(io_err)?;
            if bytes.is_empty() {
                return Err(corrupt(format!("metadata log: nothing at index {at} below the end {to}")));
            }
            for item in BatchWalk::new(&bytes, usize::MAX >> 1) {
                let (_, info, batch) = item.map_err(io_err)?;
                at = info.next_offset() as u64;
                let entry = decode_entry(batch)?;
                if (from..to).contains(&entry.log_id.index) {
                    out.push(entry);
                }
                if at >= to {
                    break;
                }
            }
        }
        Ok(out)
    }
}

fn bounds(range: &impl RangeBounds<u64>) -> (u64, u64) {
    let from = match range.start_bound() {
        Bound::Included(&i) => i,
        Bound::Excluded(&i) => i.saturating_add(1),
        Bound::Unbounded => 0,
    };
    let to = match range.end_bound() {
        Bound::Included(&i) => i.saturating_add(1),
        Bound::Excluded(&i) => i,
        Bound::Unbounded => u64::MAX,
    };
    (from, to)
}

impl<D: Disk> RaftLogReader<Tm> for MetaLog<D> {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug>(&mut self, range: RB) -> io::Result<Vec<Entry>> {
        let (from, to) = bounds(&range);
        self.read_entries(from, to).await
    }

    async fn read_vote(&mut self) -> io::Result<Option<Vote>> {
        Ok(self.inner.meta.borrow().vote)
    }
}

impl<D: Disk> RaftLogStorage<Tm> for MetaLog<D> {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> io::Result<LogState> {
        let purged = self.inner.meta.borrow().purged;
        let last = self.inner.last.borrow().or(purged);
        Ok(LogState { last_purged_log_id: purged, last_log_id: last })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> io::Result<()> {
        let vote = *vote;
        self.save_meta(|m| m.vote = Some(vote)).await
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> io::Result<()> {
        if self.inner.meta.borrow().committed == committed {
            return Ok(());
        }
        self.save_meta(|m| m.committed = committed).await
    }

    async fn read_committed(&mut self) -> io::Result<Option<LogId>> {
        Ok(self.inner.meta.borrow().committed)
    }

    async fn append<I>(&mut self, entries: I, callback: IOFlushed) -> io::Result<()>
    where
        I: IntoIterator<Item = Entry>,
    {
        let now = now_ms();
        let mut entries = entries.into_iter().peekable();
        // An empty log begins at its first entry (openraft's first is 0, or the one after the
        // purged entry, where the log already ends; its storage tests begin elsewhere).
        if let Some(first) = entries.peek().map(|e| e.log_id.index) {
            if first != self.end() && self.end() == self.first_readable() && self.inner.last.borrow().is_none() {
                self.inner.partition.restart_at(Offset(first as i64)).await.map_err(io_err)?;
            }
        }
        let mut bytes = Vec::new();
        let mut next = self.end();
        let mut last = None;
        for entry in entries {
            if entry.log_id.index != next {
                return Err(corrupt(format!("metadata log: entry {} appended at the end {next}", entry.log_id.index)));
            }
            bytes.extend_from_slice(&encode_entry(&entry, now)?);
            next += 1;
            last = Some(entry.log_id);
        }
        let Some(last) = last else {
            callback.io_completed(Ok(()));
            return Ok(());
        };
        let p = self.inner.partition.clone();
        p.append_nowait(&bytes).map_err(io_err)?;
        *self.inner.last.borrow_mut() = Some(last);
        glommio::spawn_local(async move {
            let done = p.wait_durable(Offset(next as i64)).await.map_err(io_err);
            callback.io_completed(done);
        })
        .detach();
        Ok(())
    }

    async fn truncate_after(&mut self, last_log_id: Option<LogId>) -> io::Result<()> {
        let to = last_log_id.map_or(self.first_readable(), |l| l.index + 1);
        match self.inner.partition.truncate_to(Offset(to as i64)).await {
            Ok(_) => {}
            // Nothing to cut below the log start: the purged entries are gone already.
            Err(StorageError::OffsetOutOfRange { .. }) if to <= self.first_readable() => {}
            Err(e) => return Err(io_err(e)),
        }
        let mut last = self.inner.last.borrow_mut();
        if last.is_some_and(|l| l.index >= to) {
            *last = last_log_id.filter(|l| l.index + 1 > self.first_readable());
        }
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId) -> io::Result<()> {
        self.save_meta(|m| m.purged = Some(log_id)).await?;
        self.drop_through(log_id.index).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::state::MetaStateMachine;
    use crate::cluster::types::EntryPayload;
    use crate::io::MemDisk;
    use openraft::testing::log::{StoreBuilder, Suite};
    use openraft::type_config::TypeConfigExt;
    use std::path::Path;

    struct Builder;

    impl StoreBuilder<Tm, MetaLog<MemDisk>, MetaStateMachine<MemDisk>, ()> for Builder {
        async fn build(&self) -> Result<((), MetaLog<MemDisk>, MetaStateMachine<MemDisk>), openraft::StorageError<Tm>> {
            let fail = |e: io::Error| openraft::StorageError::read(<Tm as TypeConfigExt>::err_from_error(&e));
            let disk = MemDisk::new();
            let dir = Path::new("/meta/__cluster_metadata-0");
            let clock = crate::storage::system_clock();
            let (p, _) =
                Partition::open(disk.clone(), dir, metadata_log_config(), clock).await.map_err(|e| fail(io_err(e)))?;
            let log = MetaLog::open(p).await.map_err(fail)?;
            let sm = MetaStateMachine::open(disk, dir).await.map_err(fail)?;
            Ok(((), log, sm))
        }
    }

    /// openraft's own storage suite (log and state machine: membership, initial state, vote,
    /// reads, purge, truncation, append, snapshots, apply) over the metadata log on the memory
    /// disk.
    #[test]
    fn openraft_storage_suite() {
        glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
            .spawn(|| async move { Suite::test_all(Builder).await.expect("suite") })
            .expect("executor")
            .join()
            .expect("join");
    }

    fn entry(term: u64, index: u64) -> Entry {
        Entry {
            log_id: LogId::new(openraft::impls::leader_id_adv::LeaderId { term, node_id: 1 }, index),
            payload: EntryPayload::Blank,
        }
    }

    async fn open(disk: &MemDisk) -> MetaLog<MemDisk> {
        let dir = Path::new("/meta/__cluster_metadata-0");
        let (p, _) =
            Partition::open(disk.clone(), dir, metadata_log_config(), crate::storage::system_clock()).await.unwrap();
        MetaLog::open(p).await.unwrap()
    }

    async fn append(log: &mut MetaLog<MemDisk>, entries: Vec<Entry>) {
        let (tx, rx) = <Tm as TypeConfigExt>::oneshot();
        log.append(entries, IOFlushed::signal(tx)).await.unwrap();
        rx.await.unwrap().unwrap();
    }

    async fn indexes(log: &mut MetaLog<MemDisk>) -> Vec<(u64, u64)> {
        log.try_get_log_entries(0..1000)
            .await
            .unwrap()
            .iter()
            .map(|e| (e.log_id.leader_id.term, e.log_id.index))
            .collect()
    }

    /// What the metadata log promises openraft survives a power cut: once `IOFlushed` fired the
    /// entries are there, the vote and committed id are durable when saved, a purge and a
    /// truncation hold; a purge past the log end (a snapshot installed ahead of the log) leaves
    /// an empty log that continues after it; each entry's term is its batch's leader epoch.
    #[test]
    fn metadata_log_survives_power_cuts() {
        use crate::io::CrashMode;
        glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
            .spawn(|| async move {
                let disk = MemDisk::new();
                let mut log = open(&disk).await;
                append(&mut log, (0..10).map(|i| entry(1 + i / 5, i)).collect()).await;
                let vote = Vote::new_committed(2, 1);
                log.save_vote(&vote).await.unwrap();
                log.save_committed(Some(entry(2, 6).log_id)).await.unwrap();
                log.purge(entry(1, 3).log_id).await.unwrap();
                log.truncate_after(Some(entry(2, 7).log_id)).await.unwrap();
                let batch = log.partition().read(Offset(5), 1 << 20, ReadUpTo::LogEnd).await.unwrap();
                assert_eq!(BatchHeader::parse(&batch).unwrap().partition_leader_epoch, 2, "term in the epoch");
                drop(log);
                disk.crash(CrashMode::DropUnsynced);
                let mut log = open(&disk).await;
                let state = log.get_log_state().await.unwrap();
                assert_eq!(state.last_purged_log_id, Some(entry(1, 3).log_id));
                assert_eq!(state.last_log_id, Some(entry(2, 7).log_id));
                assert_eq!(log.read_vote().await.unwrap(), Some(vote));
                assert_eq!(log.read_committed().await.unwrap(), Some(entry(2, 6).log_id));
                assert_eq!(indexes(&mut log).await, vec![(1, 4), (2, 5), (2, 6), (2, 7)]);
                // Appends continue at 8; an entry anywhere else is refused (no hole).
                assert!(log.append(vec![entry(3, 10)], IOFlushed::noop()).await.is_err());
                append(&mut log, vec![entry(3, 8)]).await;
                // A purge past the end: empty, continuing after it.
                log.purge(entry(4, 20).log_id).await.unwrap();
                let state = log.get_log_state().await.unwrap();
                assert_eq!(
                    (state.last_purged_log_id, state.last_log_id),
                    (Some(entry(4, 20).log_id), Some(entry(4, 20).log_id))
                );
                append(&mut log, vec![entry(4, 21)]).await;
                drop(log);
                disk.crash(CrashMode::DropUnsynced);
                let mut log = open(&disk).await;
                assert_eq!(indexes(&mut log).await, vec![(4, 21)]);
                assert_eq!(log.get_log_state().await.unwrap().last_log_id, Some(entry(4, 21).log_id));
            })
            .expect("executor")
            .join()
            .expect("join");
    }
}
