//! # tidemark
//!
//! A Kafka-compatible broker node: thread-per-core on glommio, partition logs on direct I/O.
//!
//! The map (dependencies point one way, `types <- io <- storage`):
//! - [`config`]: typed, validated settings with Kafka's names.
//! - [`io`]: the disk seam; the only code that calls glommio's file APIs. [`io::DmaDisk`] for
//!   real disks, [`io::MemDisk`] for tests that crash and inject faults.
//! - [`storage`]: record-batch formats, segments, the partition log, recovery, group commit.
//! - [`dump`]: human-readable dumps of segment and index files (`tidemark dump`).
//!
//! See `docs/architecture.md` for how a record flows and `docs/format.md` for every byte on
//! disk.
#![forbid(unsafe_code)]
#![warn(missing_debug_implementations)]
#![allow(missing_debug_implementations)]

pub mod config;
pub mod dump;
pub mod groups;
pub mod io;
pub mod load;
pub mod metrics;
pub mod protocol;
pub mod server;
pub mod storage;
pub mod storage_load;
