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

/// Whose a record's timestamp is: CreateTime (set by the producer) or LogAppendTime (set by
/// the broker); a topic setting and a batch attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampType {
    CreateTime,
    LogAppendTime,
}

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

/// A Kafka UUID (topic ids, KIP-516; the cluster id): 16 bytes on the wire, shown as Kafka
/// shows them, URL-safe base64 without padding (22 characters).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Uuid(pub [u8; 16]);

impl Uuid {
    /// All zeros: Kafka's "no id" (a request that names a topic by name).
    pub const ZERO: Uuid = Uuid([0; 16]);

    /// A new random (version 4) id, as Kafka makes them: never one of the reserved ids (zero,
    /// and Kafka's metadata topic id, 1) and never one whose text starts with '-' (it would
    /// read as a command-line option).
    pub fn random() -> std::io::Result<Uuid> {
        loop {
            let mut b = [0u8; 16];
            getrandom::fill(&mut b).map_err(|e| std::io::Error::other(format!("no random bytes: {e}")))?;
            b[6] = (b[6] & 0x0f) | 0x40;
            b[8] = (b[8] & 0x3f) | 0x80;
            let id = Uuid(b);
            if u128::from_be_bytes(b) > 1 && !id.to_string().starts_with('-') {
                return Ok(id);
            }
        }
    }

    /// The text form back (22 characters of URL-safe base64).
    pub fn parse(s: &str) -> Option<Uuid> {
        use base64::Engine;
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(s).ok()?;
        Some(Uuid(bytes.try_into().ok()?))
    }

    pub fn is_zero(self) -> bool {
        self == Uuid::ZERO
    }
}

impl fmt::Display for Uuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use base64::Engine;
        f.write_str(&base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(self.0))
    }
}

impl fmt::Debug for Uuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::Uuid;

    /// Kafka's text form of a UUID: 22 characters of URL-safe base64 that parse back to the
    /// same id; random ids are version 4, distinct, never zero and never start with '-'.
    #[test]
    fn uuids_read_and_print_as_kafka_does() {
        // Kafka's Uuid.toString of 0x0000...0001 (its metadata topic id).
        assert_eq!(
            Uuid({
                let mut b = [0; 16];
                b[15] = 1;
                b
            })
            .to_string(),
            "AAAAAAAAAAAAAAAAAAAAAQ"
        );
        let mut seen = std::collections::HashSet::new();
        for _ in 0..1000 {
            let id = Uuid::random().unwrap();
            let text = id.to_string();
            assert_eq!(text.len(), 22);
            assert!(!text.starts_with('-'));
            assert_eq!(id.0[6] >> 4, 4);
            assert_eq!(Uuid::parse(&text), Some(id));
            assert!(seen.insert(id));
        }
        assert_eq!(Uuid::parse("not an id"), None);
        assert_eq!(Uuid::parse("AAAA"), None);
    }
}
