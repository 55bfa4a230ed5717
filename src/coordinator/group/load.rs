//! Loading an offsets partition's groups when this node becomes its leader (replication), and
//! dropping them when it stops leading it.

use super::{offsets_partition, Coordinator, OFFSETS_TOPIC};
use std::rc::Rc;

impl Coordinator {
    /// This node became the leader of offsets partition `index` (replication): its groups
    /// are loaded from its copy of the partition (Kafka's load on election), which replaces
    /// whatever this shard knew of them. Called synchronously when the leadership arrives, so
    /// no request is served from older state: requests for its groups are answered
    /// COORDINATOR_LOAD_IN_PROGRESS and its writes refused until the load ends; the returned
    /// load runs in a task of its own. A later leadership's load supersedes this one.
    pub fn begin_load(self: &Rc<Self>, index: i32) -> impl std::future::Future<Output = ()> + 'static {
        let generation = self.loads.begin(index);
        self.unload(index);
        let me = self.clone();
        async move {
            let Some(p) = me.manager.get(OFFSETS_TOPIC, index) else { return };
            let loaded = me.load_partition(index, &p, Some(generation)).await;
            if !me.loads.finish(index, generation) {
                return; // superseded (another leadership, or none)
            }
            match loaded {
                Ok(records) => tracing::info!(partition = index, records, "offsets partition loaded as its leader"),
                Err(e) => tracing::error!(partition = index, error = %e, "cannot load an offsets partition"),
            }
        }
    }

    /// Forget the groups of offsets partition `index` (this node no longer leads it, or loads
    /// it again); a load under way is abandoned.
    pub fn unload(&self, index: i32) {
        let Some(partitions) = self.offsets_partitions.get() else { return };
        let mine = |g: &str| offsets_partition(g, partitions) == index;
        self.groups.borrow_mut().retain(|g, _| !mine(g));
        self.consumer_groups.borrow_mut().retain(|g, _| !mine(g));
        self.offsets.borrow_mut().forget_groups(|g| mine(g), index);
    }

    /// Whether offsets partition `index` is being loaded (a marker waits: the load would
    /// replace what it settles).
    pub fn is_loading(&self, index: i32) -> bool {
        self.loads.is_loading(index)
    }

    /// This node no longer leads offsets partition `index`.
    pub fn resign(&self, index: i32) {
        self.loads.cancel(index);
        self.unload(index);
    }

    /// Whether this shard serves offsets partition `index` now: led here, loaded. Writes to it
    /// (commits, group records, compaction) happen only then.
    pub(super) fn serves(&self, index: i32) -> bool {
        self.topics().leads(OFFSETS_TOPIC, index) && !self.loads.is_loading(index)
    }
}
