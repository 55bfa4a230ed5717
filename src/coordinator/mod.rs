//! The coordinators: the services that keep their state in an internal topic and serve it from
//! that partition's leader. [`group`] is the consumer groups' coordinator (membership, both
//! rebalance protocols, committed offsets in `__consumer_offsets`); [`txn`] is the
//! transactions' (KIP-98: transactional ids in `__transaction_state`, the markers that end
//! their transactions). Each runs on a shard; what it needs of the shard is a trait the
//! broker implements ([`txn::TxnHost`]).
#![allow(async_fn_in_trait)]

pub mod group;
pub mod runtime;
pub mod txn;
