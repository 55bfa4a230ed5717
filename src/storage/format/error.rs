//! Why bytes are not a valid batch, message or index: the one error type of `storage::format`.

/// Why bytes are not a valid batch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    #[error("batch truncated: need {need} bytes, have {have}")]
    Truncated { need: usize, have: usize },
    #[error("invalid batch length {0}")]
    BadLength(i64),
    #[error("unsupported magic {0}")]
    BadMagic(i8),
    #[error("CRC mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    BadCrc { stored: u32, computed: u32 },
    #[error("record count {count} does not match lastOffsetDelta {last_offset_delta}")]
    BadRecordCount { count: i32, last_offset_delta: i32 },
    #[error("corrupt records: {0}")]
    BadRecords(&'static str),
    #[error("unknown compression codec {0}")]
    UnknownCompression(i16),
    #[error("corrupt {0} data: {1}")]
    BadCompressed(&'static str, String),
    #[error("expected offset {expected}, found batch at {found}")]
    OffsetGap { expected: i64, found: i64 },
}
