//! Replication on a shard: the [`crate::replica::Host`] a shard is to its partitions' leaders
//! and followers: what they read of the shard, how they reach the metadata quorum (ISR changes,
//! through shard 0) and the other brokers, and the coordinators they tell of leaderships gained
//! and lost.

use crate::cluster::types::{MetaCommand, PartitionState};
use crate::coordinator::group::OFFSETS_TOPIC;
use crate::coordinator::txn::TXN_TOPIC;
use crate::io::DmaDisk;
use crate::replica::{Host, IsrChangeError, ReplicaConfig, Replication};
use crate::server::control::metadata::Commit;
use crate::server::shard::Shard;
use crate::storage::Partition;
use crate::types::Uuid;
use std::rc::Rc;

/// Replication on this shard: what it reads of the shard, how it reaches the quorum and the
/// other brokers, and the coordinators it tells of leaderships gained and lost.
impl Host for Shard {
    fn node_id(&self) -> i32 {
        self.config().node_id
    }

    fn replica_settings(&self) -> &ReplicaConfig {
        &self.config().replication
    }

    fn replication(&self) -> &Replication {
        Shard::replication(self)
    }

    fn is_stopping(&self) -> bool {
        self.manager().is_stopping()
    }

    fn partition(&self, topic: &str, partition: i32) -> Option<Rc<Partition<DmaDisk>>> {
        self.manager().get(topic, partition)
    }

    fn topic_id(&self, topic: &str) -> Option<Uuid> {
        self.topic(topic, |t| t.id)
    }

    fn topic_name(&self, id: Uuid) -> Option<String> {
        Shard::topic_name(self, id)
    }

    fn leadership(&self, topic: &str, partition: i32) -> Option<PartitionState> {
        Shard::leadership(self, topic, partition)
    }

    async fn connect_to(self: &Rc<Self>, node: i32) -> anyhow::Result<Rc<crate::client::Conn>> {
        crate::server::peers::connect_to(self, node).await
    }

    async fn alter_partition(self: &Rc<Self>, command: MetaCommand) -> Result<(), IsrChangeError> {
        match self.call(0, Commit(command)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(IsrChangeError::Refused(e.code, e.message)),
            Err(e) => Err(IsrChangeError::Unknown(e.to_string())),
        }
    }

    /// An internal partition's coordinator state is loaded (requests for it wait meanwhile),
    /// in a task of its own.
    fn leadership_gained(self: &Rc<Self>, topic: &str, partition: i32) {
        if topic == OFFSETS_TOPIC {
            glommio::spawn_local(self.coordinator().begin_load(partition)).detach();
        } else if topic == TXN_TOPIC {
            glommio::spawn_local(self.txn().begin_load(self, partition)).detach();
        }
    }

    fn leadership_lost(self: &Rc<Self>, topic: &str, partition: i32) {
        if topic == OFFSETS_TOPIC {
            self.coordinator().resign(partition);
        } else if topic == TXN_TOPIC {
            self.txn().resign(partition);
        }
    }
}
