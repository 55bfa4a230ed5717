//! Storage: partition logs made of segments on direct I/O.
//!
//! Layers, bottom up: `format` (pure bytes: batches, index entries), `segment` (one data file,
//! its offset index and its write tail), `log` (segments, append, flush jobs, reads,
//! recovery, retention), `partition` (group commit and the flusher task). Storage sees the
//! disk only through [`crate::io::Disk`], and never imports `protocol`.

pub mod access;
pub mod error;
pub mod format;
pub mod log;
pub mod manager;
pub mod partition;
pub mod segment;
pub mod topics;

pub use error::{StorageError, StorageResult};
pub use log::{AppendInfo, Log, OpenReport, ReadUpTo, TimePlan};
pub use partition::{system_clock, Clock, Partition};
