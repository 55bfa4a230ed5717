//! What both coordinators share: an internal partition's state is loaded from its copy when
//! this node becomes its leader (the loading state, with generations so a later leadership's
//! load supersedes an earlier one), and the partition is compacted by writing its live records
//! again and deleting the segments before them.

use crate::io::DmaDisk;
use crate::storage::{Partition, StorageError};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

/// The internal partitions being loaded on a shard, each with its load's generation.
#[derive(Debug, Default)]
pub struct Loads {
    loading: RefCell<BTreeMap<i32, u64>>,
    generation: Cell<u64>,
}

impl Loads {
    /// A load of partition `index` starts (superseding one under way): its generation.
    pub fn begin(&self, index: i32) -> u64 {
        let generation = self.generation.get() + 1;
        self.generation.set(generation);
        self.loading.borrow_mut().insert(index, generation);
        generation
    }

    /// The load of `generation` ended: `false` if another load or a resignation superseded it
    /// (its result is not to be used), else the partition is served from now on.
    pub fn finish(&self, index: i32, generation: u64) -> bool {
        let mut loading = self.loading.borrow_mut();
        if loading.get(&index) != Some(&generation) {
            return false;
        }
        loading.remove(&index);
        true
    }

    /// Whether the load of `generation` is still the one that counts for `index`: a load
    /// checks it before each chunk it replays and stops at once when superseded (a newer
    /// leadership's load, or none), so it never writes into the state the newer one builds.
    pub fn is_current(&self, index: i32, generation: u64) -> bool {
        self.loading.borrow().get(&index) == Some(&generation)
    }

    /// No load of `index` counts any more (this node stopped leading it).
    pub fn cancel(&self, index: i32) {
        self.loading.borrow_mut().remove(&index);
    }

    /// Whether partition `index` is being loaded (its requests wait, COORDINATOR_LOAD_IN_PROGRESS).
    pub fn is_loading(&self, index: i32) -> bool {
        self.loading.borrow().contains_key(&index)
    }
}

/// The partitions of internal topic `topic` this shard has open, by index.
pub fn partitions_of(
    manager: &crate::storage::manager::PartitionManager<DmaDisk>,
    topic: &str,
) -> Vec<(i32, Rc<Partition<DmaDisk>>)> {
    manager.partitions().into_iter().filter(|((t, _), _)| t == topic).map(|((_, i), p)| (i, p)).collect()
}

/// Compaction by rewrite: `batches` (the partition's live records, made by the caller with no
/// await since it read its state) appended in a new segment, made durable on every in-sync
/// replica, then every segment before it deleted (followers follow the log start). Returns
/// the segments deleted. Called with no await between reading the live state and this call,
/// and nothing here yields before the appends, so no write can slip in between.
pub async fn rewrite(
    p: &Rc<Partition<DmaDisk>>,
    batches: impl IntoIterator<Item = Vec<u8>>,
) -> Result<Vec<i64>, StorageError> {
    let epoch = p.leader_epoch();
    p.roll();
    let from = p.log_end();
    for batch in batches {
        p.append_nowait(&batch)?;
    }
    let end = p.log_end();
    p.wait_replicated(end, epoch, crate::replica::INTERNAL_WRITE_TIMEOUT).await?;
    p.remove_before(from).await
}

#[cfg(test)]
mod tests {
    use super::*;

    // A load counts only if no later load or resignation of its partition came after it;
    // partitions load independently.
    #[test]
    fn a_later_load_or_a_resignation_supersedes_a_load() {
        let loads = Loads::default();
        let first = loads.begin(3);
        assert!(loads.is_loading(3) && !loads.is_loading(4));
        assert!(loads.is_current(3, first));
        let second = loads.begin(3);
        assert!(!loads.is_current(3, first), "the first load stops at its next chunk");
        assert!(loads.is_current(3, second));
        let other = loads.begin(4);
        assert!(!loads.finish(3, first), "a superseded load must not be used");
        assert!(loads.is_loading(3));
        assert!(loads.finish(3, second));
        assert!(!loads.is_loading(3));
        loads.cancel(4);
        assert!(!loads.is_current(4, other), "a resignation stops the load under way");
        assert!(!loads.finish(4, other), "a load after resigning must not be used");
        assert!(!loads.is_loading(4));
    }
}
