//! Storage errors. The server maps each to a Kafka error code in one exhaustive `match`.

use crate::io::IoError;
use crate::storage::format::FormatError;
use std::path::PathBuf;
use std::sync::Arc;

#[derive(Debug, Clone, thiserror::Error)]
pub enum StorageError {
    /// A producer sent bytes that are not valid batches (CORRUPT_MESSAGE).
    #[error("invalid record batch: {0}")]
    InvalidBatch(#[from] FormatError),
    /// A batch larger than `max.message.bytes` (MESSAGE_TOO_LARGE).
    #[error("batch of {size} bytes exceeds max.message.bytes {max}")]
    BatchTooLarge { size: usize, max: u64 },
    /// A CreateTime record outside the allowed window (INVALID_TIMESTAMP, SPEC T3.1). For a
    /// v2 batch, `records` lists every record out of the window as (index in the batch, its
    /// timestamp): Kafka's per-record errors (KIP-467).
    #[error("timestamp {ts} is outside the allowed range [{lo}, {hi}]")]
    InvalidTimestamp { ts: i64, lo: i64, hi: i64, records: Vec<(i32, i64)> },
    /// Records without a key sent to a compacted topic (INVALID_RECORD): their indexes in
    /// the batch, Kafka's per-record errors (KIP-467).
    #[error("a compacted topic cannot accept records without a key")]
    KeylessRecords { records: Vec<i32> },
    /// An empty records section where at least one batch is required (INVALID_REQUEST).
    #[error("no record batch in the request")]
    EmptyAppend,
    /// A read below the log start or past the log end (OFFSET_OUT_OF_RANGE).
    #[error("offset {offset} is outside the log [{start}, {end}]")]
    OffsetOutOfRange { offset: i64, start: i64, end: i64 },
    /// The disk failed (KAFKA_STORAGE_ERROR). Shared: one flush failure reaches every waiter.
    #[error("{0}")]
    Io(Arc<IoError>),
    /// The partition's last flush failed: appends are refused until a retry succeeds
    /// (KAFKA_STORAGE_ERROR; a full disk resumes once space returns).
    #[error("appends suspended until the disk recovers: {0}")]
    WritesSuspended(Arc<IoError>),
    /// Stored bytes failed their check on the read path (KAFKA_STORAGE_ERROR); never served.
    #[error("corrupt data in {path} at position {position}: {error}")]
    Corrupt { path: PathBuf, position: u64, error: FormatError },
    /// The partition is closing or closed.
    #[error("partition is closed")]
    Closed,
    /// A suffix truncation would leave a compacted segment as the log's last (not offered:
    /// recovery rescans the last segment as never compacted).
    #[error("cannot truncate at {offset}: the log is compacted up to {cleaned_to}")]
    TruncationIntoCompacted { offset: i64, cleaned_to: i64 },
    /// The partition's log is being cut back (a replica truncating its divergent suffix):
    /// no append is taken meanwhile (NOT_LEADER_OR_FOLLOWER: the replica is a follower).
    #[error("the partition's log is being truncated")]
    Truncating,
    /// A follower's copy of a partition: only what its leader stored is appended to it.
    #[error("a follower's replica takes appends from its leader only")]
    Follower,
    /// acks=all: the in-sync replicas did not all have the records durable in time.
    #[error("the records were not replicated to every in-sync replica in time")]
    ReplicationTimedOut,
    /// An idempotent producer's batch breaks the sequence rules (INVALID_PRODUCER_EPOCH,
    /// OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_RECORD).
    #[error("{0}")]
    Sequence(#[from] crate::storage::producers::SequenceError),
}

impl From<IoError> for StorageError {
    fn from(e: IoError) -> Self {
        StorageError::Io(Arc::new(e))
    }
}

pub type StorageResult<T> = Result<T, StorageError>;
