//! # tidemark
//!
//! A Kafka-compatible broker node: thread-per-core on glommio, partition logs on direct I/O.
//!
//! The map, bottom up (imports point down this list, never up; `protocol` and `storage`
//! never import each other, and nothing below `server` imports it):
//! - [`types`]: newtypes for numbers easily mixed up (`Offset`, `TimestampMs`).
//! - [`metrics`]: per-shard latency histograms by stage and counters.
//! - [`budget`]: a shard's memory budgets (requests, fetches, the batch cache).
//! - [`deadline`]: bounded waits (`within`).
//! - [`io`]: the disk seam; the only code that calls glommio's file APIs. [`io::DmaDisk`] for
//!   real disks, [`io::MemDisk`] for tests that crash and inject faults.
//! - [`placement`]: which shard owns a partition (a stable hash).
//! - `storage::format`: record batches, index entries, small files: pure bytes, no I/O.
//! - [`config`]: typed, validated topic settings with Kafka's names (`LogConfig`, the table of
//!   every topic setting, topic defaults from broker names); it uses only `storage::format`.
//! - [`storage`]: segments, the partition log, recovery, group commit, the topic store.
//! - [`protocol`]: the Kafka wire codec, every API's request and response bodies; no storage,
//!   no runtime, so it is tested and fuzzed alone.
//! - [`errors`]: the one mapping of domain errors to Kafka's error codes.
//! - [`groups`]: consumer-group membership and the committed-offsets table (pure state over
//!   `storage::format` and `protocol`'s error codes).
//! - [`txn`]: a transactional id's state machine and its log records (pure).
//! - [`features`]: the cluster's finalized feature levels (`transaction.version`,
//!   `group.version`) and UpdateFeatures' rules (pure, but for reading its file at startup).
//! - [`security`]: SCRAM credentials, the SASL mechanisms, ACLs and quotas (pure: no I/O).
//! - [`cluster`]: the metadata quorum on openraft (its log, the image, its network).
//! - [`client`]: our Kafka client: a pipelined connection, pools of connections to peers.
//! - [`replica`]: replication: followers' fetchers, the ISR, the high watermark; the one owner
//!   of a partition's leadership on a shard.
//! - [`coordinator`]: the group and transaction coordinators.
//! - [`server`]: the broker: shards (where the services above are wired together), typed calls
//!   between them, the control plane on shard 0 and the metadata deltas it publishes to every
//!   shard (`server::publish`), one module per API family (`server::api`), connections.
//! - [`load`]: `tidemark load`, a load generator for any Kafka-compatible broker.
//! - [`storage_load`]: `tidemark storage-load`, the storage engine under load.
//! - [`dump`]: human-readable dumps of segment and index files (`tidemark dump`).
//!
//! See `docs/architecture.md` for how a record flows and `docs/format.md` for every byte on
//! disk.
#![forbid(unsafe_code)]
#![warn(missing_debug_implementations)]
#![allow(missing_debug_implementations)]

/// Check an invariant where it matters (TigerBeetle's habit): in debug builds and in the unit
/// tests it stops the program where a broken one shows; in release builds it costs nothing.
/// Write it as `assert!` (`invariant!(cond, "format", args)`), or with `==` for equality.
#[macro_export]
macro_rules! invariant {
    ($($arg:tt)*) => {
        if cfg!(any(debug_assertions, test)) {
            assert!($($arg)*);
        }
    };
}

pub mod budget;
pub mod client;
pub mod cluster;
pub mod config;
pub mod coordinator;
pub mod deadline;
pub mod dump;
pub mod errors;
pub mod features;
pub mod groups;
pub mod io;
pub mod load;
pub mod metrics;
pub mod placement;
pub mod protocol;
pub mod replica;
pub mod security;
pub mod server;
pub mod storage;
pub mod storage_load;
pub mod txn;
pub mod types;
