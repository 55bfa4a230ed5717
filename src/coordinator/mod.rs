//! The coordinators: the services that keep their state in an internal topic and serve it from
//! that partition's leader. [`group`] is the consumer groups' coordinator (membership, both
//! rebalance protocols, committed offsets in `__consumer_offsets`).

pub mod group;
