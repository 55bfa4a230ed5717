//! The leader-epoch cache at open (KIP-101): trusted after a clean shutdown, completed from the
//! rescanned last segment after a crash, rebuilt from every batch header when its file is
//! missing, damaged or behind the log by more than the last segment. The cache must name every
//! epoch a durable batch carries: a follower whose cache lacks one sends its leader the wrong
//! last-fetched epoch, and the leader cannot see where their logs part.

use super::super::scan::{scan_segment, ScanFrom, SegmentSpan};
use super::Opening;
use crate::io::{Disk, DiskFile};
use crate::storage::error::StorageResult;
use crate::storage::log::Epochs;
use crate::storage::segment::log_path;

impl<D: Disk> Opening<'_, D> {
    /// The leader-epoch cache at open, its file rewritten when it changes. Entries past the log
    /// end (a truncation, or data lost in a crash) go. The file is trusted after a clean
    /// shutdown; after a crash, the epochs the rescan of the last segment found beginning
    /// there (`scanned`) are added, as Kafka's segment recovery does. A missing or damaged
    /// file, or one behind the log by more than the last segment (its first batch's epoch is
    /// newer than the file's latest), is rebuilt from every batch header of the log: the cache
    /// must name every epoch a durable batch carries, or a follower's divergence from its
    /// leader goes unseen (KIP-101). `restart`: the log starts again empty (no epoch).
    pub(super) async fn epochs(
        &self,
        last: SegmentSpan,
        scanned: Option<Epochs>,
        restart: bool,
    ) -> StorageResult<Epochs> {
        let (disk, dir) = (self.disk, self.dir);
        let path = dir.join(crate::storage::log::EPOCH_FILE);
        let read = disk.read_file(&path).await?;
        let decoded = read.as_deref().and_then(Epochs::decode);
        let empty = self.spans.is_empty() && last.2 == 0;
        let mut write = restart || (read.is_some() && decoded.is_none());
        let mut epochs = match decoded {
            _ if restart => Epochs::default(),
            None if empty => Epochs::default(),
            None => {
                write = true;
                self.rebuild_epochs(last, read.is_some()).await?
            }
            Some(file) => {
                let behind = scanned
                    .as_ref()
                    .and_then(|s| s.entries().first())
                    .is_some_and(|&(e, _)| file.latest().is_none_or(|l| e > l));
                if behind {
                    write = true;
                    self.rebuild_epochs(last, false).await?
                } else {
                    let mut merged = file;
                    for &(e, start) in scanned.as_ref().map_or(&[][..], |s| s.entries()) {
                        write |= merged.on_batch(e, start);
                    }
                    merged
                }
            }
        };
        write |= epochs.truncate_from_end(last.1);
        if write {
            disk.write_file_atomic(&path, &epochs.encode()).await?;
        }
        Ok(epochs)
    }

    /// The leader-epoch cache rebuilt from every batch of the log (the sealed segments, then
    /// the last one, `last`); `damaged`: the file was there but unreadable.
    async fn rebuild_epochs(&self, last: SegmentSpan, damaged: bool) -> StorageResult<Epochs> {
        let (disk, dir, config) = (self.disk, self.dir, self.config);
        let mut epochs = Epochs::default();
        let mut bytes = 0u64;
        for &(base, _, size) in self.spans.iter().chain(std::iter::once(&last)) {
            let file = disk.open_existing(&log_path(dir, base)).await?;
            let mut from = ScanFrom::start(base, config, None);
            from.time = None;
            from.epochs = Some(epochs);
            let scan = scan_segment(&file, base, size, from).await?;
            file.close().await?;
            bytes += scan.scanned;
            epochs = scan.epochs.expect("asked for");
        }
        tracing::warn!(
            dir = %dir.display(),
            damaged,
            scanned_bytes = bytes,
            entries = epochs.entries().len(),
            "leader-epoch cache rebuilt from the log's batches (its file was missing, damaged or behind)"
        );
        Ok(epochs)
    }
}
