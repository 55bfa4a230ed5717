//! The cluster (issue 20): a metadata quorum on openraft, as KRaft does it.
//! - [`rt`]: the runtime openraft runs on (glommio);
//! - [`types`]: openraft's type configuration and the metadata commands;
//! - [`log_store`]: the Raft log, kept in a tidemark partition log (Raft index = offset);
//! - [`state`]: the metadata image and its snapshots.
//!
//! docs/cluster-research.md has the plan; docs/architecture.md ("The cluster") what is built.

pub mod log_store;
pub mod rt;
pub mod state;
pub mod types;
