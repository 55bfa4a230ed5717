//! Consumer groups: the classic group protocol's membership state machine ([`group`]) and the
//! committed offsets replayed from `__consumer_offsets` ([`offsets`]). Pure: no I/O and no
//! runtime; `coordinator::group` drives them on the shard that owns each group, with the
//! clock, the log and the network.

pub mod consumer;
pub mod group;
pub mod offsets;
