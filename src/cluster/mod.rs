//! The cluster: a metadata quorum on openraft, as KRaft does it.
//! - [`rt`]: the runtime openraft runs on (glommio);
//! - [`types`]: openraft's type configuration and the metadata commands;
//! - [`log_store`]: the Raft log, kept in a tidemark partition log (Raft index = offset);
//! - [`state`]: the metadata image and its snapshots;
//! - [`net`]: the RPCs between controllers (TCP, or TLS and SASL as the controller listener says; JSON frames);
//! - [`voters`]: a dynamic quorum's voter changes (AddRaftVoter, RemoveRaftVoter);
//! - [`controller`]: starting a voter, forming the quorum, writing through the leader;
//! - [`observer`]: a broker-only node following the quorum without a vote;
//! - [`member`]: either, as the broker sees its node's place in the quorum;
//! - [`liveness`]: when the active controller last heard from each broker;
//! - [`settings`]: KRaft's settings (`process.roles`, `controller.quorum.voters`, ...).
//!
//! docs/cluster-research.md has the plan; docs/architecture.md ("The cluster") what is built.
pub mod controller;
pub mod liveness;
pub mod log_store;
pub mod member;
pub mod net;
pub mod observer;
pub mod rt;
pub mod settings;
pub mod state;
pub mod types;
pub mod voters;
