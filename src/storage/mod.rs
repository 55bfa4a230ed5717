//! Storage: partition logs made of segments on direct I/O, and the topics and partitions a
//! shard owns.
//!
//! Layers, bottom up:
//! - `format`: pure bytes, no I/O: v2 record batches and records, CRC-32C, varints, the
//!   compression codecs, offset- and time-index entries, the clean-shutdown marker.
//! - `segment`: one segment: its `.log` data file, the in-memory write tail of aligned chunks,
//!   the offset index (`IndexBuilder`) and the time index (`TimeBuilder`, with its
//!   `time.index.interval.ms` fixed for the segment's life), and its lifecycle
//!   (`SegmentState`: active, closing, sealed with its indexes loaded or not).
//! - `log`: a partition's segments, one file per job: `recovery` (open, the segment scan,
//!   loading and rebuilding sealed segments' indexes), `append` (timestamp checks and stamping,
//!   roll, close), `flush` (flush jobs), `read` (read and time-lookup plans), `retention`
//!   (expiry, the log start). Synchronous state; the I/O is returned as jobs so no borrow is
//!   held across an await, and a plan that needs a sealed segment's indexes says so with
//!   [`NeedIndex`].
//! - `access`: the operations that alternate between the log's state and I/O, written once
//!   over [`access::LogCell`]: reads, lookups by time (ListOffsets, including `-3`), and upkeep
//!   (time roll, retention by time and size, deletion of expired segments' files). It uses the
//!   log's public API; the log never imports it.
//! - `partition`: one partition on its shard's executor: group commit with one flusher task,
//!   durability waiters, the `flush.ms` timer, the injected clock, clean shutdown.
//! - `manager`: a shard's open partitions (`<data-dir>/<topic>-<partition>`), runtime config
//!   changes, the periodic upkeep task (`log.retention.check.interval.ms`), closing them all.
//! - `topics` (beside the others; it uses `config`, `error` and the disk): the topic store:
//!   names, partition counts and validated config overrides, persisted atomically in
//!   `<data-dir>/topics/<topic>.topic` with a CRC line.
//!
//! `error` holds [`StorageError`]. Storage sees the disk only through [`crate::io::Disk`], and
//! never imports `protocol`.

pub mod access;
pub mod cache;
pub mod cleaner;
pub mod compaction;
pub mod error;
pub mod format;
pub mod log;
pub mod manager;
pub mod partition;
pub mod producers;
pub mod segment;
pub mod topics;

pub use error::{StorageError, StorageResult};
pub use log::{AppendInfo, Log, NeedIndex, OpenReport, ReadUpTo, TimePlan};
pub use partition::{system_clock, Clock, Partition};
