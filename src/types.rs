//! Newtypes for the numbers that are easy to mix up: an offset in a partition's log and a
//! timestamp in ms are both `i64` on the wire and on disk, and a call that takes or returns
//! both (a lookup by time, a read that answers the high watermark and the log start) must
//! not be able to swap them. Kafka's `-1` ("none") is a value of each, as on the wire.
//!
//! Used where values cross between layers (the typed calls between shards and their
//! replies); the storage engine's internals keep plain `i64` inside one function's reach.

use std::fmt;

/// An offset in a partition's log (or a count of offsets past one: a high watermark, a log
/// end, a log start).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Offset(pub i64);

/// A time in ms since the Unix epoch: a record's timestamp, a log-append time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct TimestampMs(pub i64);

impl Offset {
    /// Kafka's "no offset".
    pub const NONE: Offset = Offset(-1);

    pub fn get(self) -> i64 {
        self.0
    }
}

impl TimestampMs {
    /// Kafka's "no timestamp" (and ListOffsets' "latest").
    pub const NONE: TimestampMs = TimestampMs(-1);

    pub fn get(self) -> i64 {
        self.0
    }
}

impl fmt::Display for Offset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl fmt::Display for TimestampMs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}
