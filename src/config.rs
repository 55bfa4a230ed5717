//! Typed, validated configuration. Topic (log) settings keep Kafka's names and meanings
//! (SPEC T2.4); tidemark's own settings are prefixed `tidemark.`. Units are last in field
//! names. A bad value is refused with a [`ConfigError`] naming the key, the value and the
//! rule (SPEC T2.5); nothing is half-applied.
//!
//! Who calls it: the binary (broker defaults), the server (topic overrides from clients) and
//! storage (which only reads the typed struct).

use crate::storage::format::TimestampType;
use std::collections::BTreeMap;

/// A refused configuration value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid value {value:?} for {key}: {reason}")]
pub struct ConfigError {
    pub key: String,
    pub value: String,
    pub reason: String,
}

fn bad(key: &str, value: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError { key: key.to_string(), value: value.to_string(), reason: reason.into() }
}

/// Per-log settings (a topic's partitions share one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogConfig {
    /// `segment.bytes`: roll the active segment before it would exceed this size.
    pub segment_bytes: u64,
    /// `segment.index.bytes`: the largest offset index a segment may have; a full index rolls.
    pub segment_index_bytes: u64,
    /// `index.interval.bytes`: bytes of batches between two offset-index entries.
    pub index_interval_bytes: u64,
    /// `retention.bytes`: delete oldest segments while the log is larger; `None` = unlimited.
    pub retention_bytes: Option<u64>,
    /// `flush.messages`: an append waits for fdatasync once this many records are unflushed.
    /// 1 (the default) makes every acknowledged append durable.
    pub flush_messages: u64,
    /// `flush.ms`: the longest unflushed data may wait when `flush.messages` lets appends
    /// return before their fdatasync.
    pub flush_ms: u64,
    /// `max.message.bytes`: the largest batch a producer may append.
    pub max_message_bytes: u64,
    /// `tidemark.preallocate.bytes`: fallocate step for segment data files.
    pub preallocate_bytes: u64,
    /// `tidemark.write.chunk.bytes`: size of the aligned write buffers (one DMA write each).
    pub write_chunk_bytes: u64,
    /// `tidemark.max.inflight.writes`: DMA writes one flush keeps in flight.
    pub max_inflight_writes: u32,
    /// `message.timestamp.type`: CreateTime (the producer's) or LogAppendTime (the broker's).
    pub message_timestamp_type: TimestampType,
    /// `max.message.time.difference.ms` (alias `message.timestamp.difference.max.ms`): how far
    /// a CreateTime may stray from the broker's clock either way; `None` = unlimited.
    pub timestamp_difference_max_ms: Option<u64>,
    /// `message.timestamp.difference.max.ms`: Kafka's older name for the same bound. Kept
    /// apart so that, where both are given, the tighter wins (SPEC T2.2).
    pub timestamp_difference_alias_ms: Option<u64>,
    /// `message.timestamp.before.max.ms` (KIP-937): how far in the past; `None` = unlimited.
    pub timestamp_before_max_ms: Option<u64>,
    /// `message.timestamp.after.max.ms` (KIP-937): how far in the future; `None` = unlimited.
    pub timestamp_after_max_ms: Option<u64>,
    /// `time.index.interval.ms`: bucket width of the time index (SPEC T5.2).
    pub time_index_interval_ms: u64,
    /// `segment.ms`: roll a non-empty active segment this long after the log's largest
    /// timestamp (SPEC T7.1).
    pub segment_ms: u64,
    /// `retention.ms`: delete segments whose largest timestamp is older; `None` = unlimited.
    pub retention_ms: Option<u64>,
    /// `tidemark.max.unflushed.bytes`: appended bytes a partition may hold in memory before
    /// its appends wait for the flusher (backpressure; bounds memory when producers outrun
    /// the disk under a relaxed flush policy).
    pub max_unflushed_bytes: u64,
    /// `producer.id.expiration.ms`: an idempotent producer not heard of for this long is
    /// forgotten (its next batch must start a new sequence).
    pub producer_id_expiration_ms: u64,
}

pub const KIB: u64 = 1024;
pub const MIB: u64 = 1024 * 1024;
pub const GIB: u64 = 1024 * MIB;
pub const DAY_MS: u64 = 24 * 3600 * 1000;

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: GIB,
            segment_index_bytes: 10 * MIB,
            index_interval_bytes: 4096,
            retention_bytes: None,
            flush_messages: 1,
            flush_ms: 1000,
            max_message_bytes: 1_048_588,
            preallocate_bytes: 32 * MIB,
            write_chunk_bytes: MIB,
            max_inflight_writes: 8,
            max_unflushed_bytes: 64 * MIB,
            message_timestamp_type: TimestampType::CreateTime,
            timestamp_difference_max_ms: None,
            timestamp_difference_alias_ms: None,
            timestamp_before_max_ms: None,
            timestamp_after_max_ms: None,
            time_index_interval_ms: 1000,
            segment_ms: 7 * DAY_MS,
            retention_ms: Some(7 * DAY_MS),
            producer_id_expiration_ms: DAY_MS,
        }
    }
}

/// Every key [`LogConfig::set`] understands.
pub const LOG_CONFIG_KEYS: &[&str] = &[
    "segment.bytes",
    "segment.index.bytes",
    "index.interval.bytes",
    "retention.bytes",
    "flush.messages",
    "flush.ms",
    "max.message.bytes",
    "tidemark.preallocate.bytes",
    "tidemark.write.chunk.bytes",
    "tidemark.max.inflight.writes",
    "tidemark.max.unflushed.bytes",
    "message.timestamp.type",
    "max.message.time.difference.ms",
    "message.timestamp.difference.max.ms",
    "message.timestamp.before.max.ms",
    "message.timestamp.after.max.ms",
    "time.index.interval.ms",
    "segment.ms",
    "retention.ms",
    "producer.id.expiration.ms",
];

/// A bound in ms where Kafka's Long.MAX_VALUE (its default) or -1 means unlimited.
fn bound_ms(key: &str, value: &str) -> Result<Option<u64>, ConfigError> {
    match parse_i64(key, value)? {
        -1 | i64::MAX => Ok(None),
        v if v >= 0 => Ok(Some(v as u64)),
        _ => Err(bad(key, value, "must be at least 0 (or -1 for unlimited)")),
    }
}

fn show_bound(b: Option<u64>) -> String {
    b.map_or(i64::MAX.to_string(), |v| v.to_string())
}

fn parse_i64(key: &str, value: &str) -> Result<i64, ConfigError> {
    value.trim().parse::<i64>().map_err(|_| bad(key, value, "not an integer"))
}

fn in_range(key: &str, value: &str, min: i64, max: i64) -> Result<u64, ConfigError> {
    let v = parse_i64(key, value)?;
    if v < min || v > max {
        return Err(bad(key, value, format!("must be between {min} and {max}")));
    }
    Ok(v as u64)
}

impl LogConfig {
    /// Apply one `key=value`; on error `self` is unchanged.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), ConfigError> {
        const I32: i64 = i32::MAX as i64;
        match key {
            // Positions in the offset index are u32 and Kafka caps segments at i32::MAX.
            "segment.bytes" => self.segment_bytes = in_range(key, value, 1024, I32)?,
            "segment.index.bytes" => self.segment_index_bytes = in_range(key, value, 8, I32)?,
            "index.interval.bytes" => self.index_interval_bytes = in_range(key, value, 0, I32)?,
            "retention.bytes" => {
                let v = parse_i64(key, value)?;
                self.retention_bytes = match v {
                    -1 => None,
                    v if v >= 0 => Some(v as u64),
                    _ => return Err(bad(key, value, "must be -1 (unlimited) or at least 0")),
                }
            }
            "flush.messages" => self.flush_messages = in_range(key, value, 1, i64::MAX)?,
            "flush.ms" => self.flush_ms = in_range(key, value, 0, i64::MAX)?,
            "max.message.bytes" => self.max_message_bytes = in_range(key, value, 61, I32)?,
            "tidemark.preallocate.bytes" => {
                let v = in_range(key, value, 0, I32)?;
                if v % crate::io::PAGE != 0 {
                    return Err(bad(key, value, "must be a multiple of 4096"));
                }
                self.preallocate_bytes = v
            }
            "tidemark.write.chunk.bytes" => {
                let v = in_range(key, value, 4096, 64 * MIB as i64)?;
                if v % crate::io::PAGE != 0 {
                    return Err(bad(key, value, "must be a multiple of 4096"));
                }
                self.write_chunk_bytes = v
            }
            "tidemark.max.inflight.writes" => self.max_inflight_writes = in_range(key, value, 1, 1024)? as u32,
            "tidemark.max.unflushed.bytes" => self.max_unflushed_bytes = in_range(key, value, 4096, i64::MAX)?,
            "message.timestamp.type" => {
                self.message_timestamp_type = match value.trim() {
                    "CreateTime" => TimestampType::CreateTime,
                    "LogAppendTime" => TimestampType::LogAppendTime,
                    _ => return Err(bad(key, value, "must be CreateTime or LogAppendTime")),
                }
            }
            "max.message.time.difference.ms" => self.timestamp_difference_max_ms = bound_ms(key, value)?,
            "message.timestamp.difference.max.ms" => self.timestamp_difference_alias_ms = bound_ms(key, value)?,
            "message.timestamp.before.max.ms" => self.timestamp_before_max_ms = bound_ms(key, value)?,
            "message.timestamp.after.max.ms" => self.timestamp_after_max_ms = bound_ms(key, value)?,
            "time.index.interval.ms" => self.time_index_interval_ms = in_range(key, value, 1, i64::MAX)?,
            "segment.ms" => self.segment_ms = in_range(key, value, 1, i64::MAX)?,
            "retention.ms" => self.retention_ms = bound_ms(key, value)?,
            "producer.id.expiration.ms" => self.producer_id_expiration_ms = in_range(key, value, 1, i64::MAX)?,
            _ => return Err(bad(key, value, "unknown configuration key")),
        }
        Ok(())
    }

    /// A copy with every pair applied, or the first error (nothing applied).
    pub fn with_overrides<'a>(
        &self,
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<LogConfig, ConfigError> {
        let mut c = self.clone();
        for (k, v) in pairs {
            c.set(k, v)?;
        }
        Ok(c)
    }

    /// Every setting as Kafka names it, with its current value.
    pub fn describe(&self) -> BTreeMap<&'static str, String> {
        let mut m = BTreeMap::new();
        m.insert("segment.bytes", self.segment_bytes.to_string());
        m.insert("segment.index.bytes", self.segment_index_bytes.to_string());
        m.insert("index.interval.bytes", self.index_interval_bytes.to_string());
        m.insert("retention.bytes", self.retention_bytes.map_or(-1, |v| v as i64).to_string());
        m.insert("flush.messages", self.flush_messages.to_string());
        m.insert("flush.ms", self.flush_ms.to_string());
        m.insert("max.message.bytes", self.max_message_bytes.to_string());
        m.insert("tidemark.preallocate.bytes", self.preallocate_bytes.to_string());
        m.insert("tidemark.write.chunk.bytes", self.write_chunk_bytes.to_string());
        m.insert("tidemark.max.inflight.writes", self.max_inflight_writes.to_string());
        m.insert("tidemark.max.unflushed.bytes", self.max_unflushed_bytes.to_string());
        let ts_type = match self.message_timestamp_type {
            TimestampType::CreateTime => "CreateTime",
            TimestampType::LogAppendTime => "LogAppendTime",
        };
        m.insert("message.timestamp.type", ts_type.to_string());
        m.insert("max.message.time.difference.ms", show_bound(self.timestamp_difference_max_ms));
        m.insert("message.timestamp.difference.max.ms", show_bound(self.timestamp_difference_alias_ms));
        m.insert("message.timestamp.before.max.ms", show_bound(self.timestamp_before_max_ms));
        m.insert("message.timestamp.after.max.ms", show_bound(self.timestamp_after_max_ms));
        m.insert("time.index.interval.ms", self.time_index_interval_ms.to_string());
        m.insert("segment.ms", self.segment_ms.to_string());
        m.insert("retention.ms", self.retention_ms.map_or(-1, |v| v as i64).to_string());
        m.insert("producer.id.expiration.ms", self.producer_id_expiration_ms.to_string());
        m
    }

    /// Bound on a batch's decompressed records (decompression bombs): 64 MiB or 16 times
    /// `max.message.bytes`, whichever is larger, and never more than 256 MiB. Checks on
    /// append, lookups by time and down-conversion all decompress within it.
    pub fn decompress_limit(&self) -> usize {
        (64usize << 20).max(self.max_message_bytes as usize * 16).min(256 << 20)
    }

    /// The allowed CreateTime window around `now` (SPEC T2.2, T3.1): the symmetric bound and
    /// the one-sided bounds, the tighter winning on each side. Inclusive.
    pub fn timestamp_window(&self, now: i64) -> (i64, i64) {
        let tighter = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, None) => x,
            (None, y) => y,
        };
        let both = tighter(self.timestamp_difference_max_ms, self.timestamp_difference_alias_ms);
        let before = tighter(both, self.timestamp_before_max_ms);
        let after = tighter(both, self.timestamp_after_max_ms);
        let lo = before.map_or(i64::MIN, |b| now.saturating_sub(b.min(i64::MAX as u64) as i64));
        let hi = after.map_or(i64::MAX, |a| now.saturating_add(a.min(i64::MAX as u64) as i64));
        (lo, hi)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // spec: T2.5 — bad values are refused with the key and the reason; nothing half-applied.
    // spec: T2.3, T2.4 — time.index.interval.ms defaults to 1000; Kafka's names and meanings.
    #[test]
    fn bad_values_are_refused_and_nothing_is_applied() {
        let base = LogConfig::default();
        assert_eq!(base.time_index_interval_ms, 1000);
        assert_eq!((base.segment_bytes, base.retention_ms, base.index_interval_bytes), (GIB, Some(7 * DAY_MS), 4096));
        let e = base.with_overrides([("segment.bytes", "2048"), ("flush.messages", "0")]).unwrap_err();
        assert_eq!(e.key, "flush.messages");
        assert!(e.to_string().contains("between 1"));
        assert_eq!(base, LogConfig::default());
        assert!(base.with_overrides([("segment.bytes", "abc")]).is_err());
        assert!(base.with_overrides([("segment.bytes", "4294967296")]).is_err());
        assert!(base.with_overrides([("retention.bytes", "-2")]).is_err());
        assert!(base.with_overrides([("no.such.key", "1")]).is_err());
        assert!(base.with_overrides([("tidemark.write.chunk.bytes", "5000")]).is_err());
    }

    // spec: T2.1, T2.2 — the symmetric bound, its alias and KIP-937's one-sided bounds; the
    // tighter bound wins on each side whatever the order given.
    #[test]
    fn timestamp_bounds_take_the_tighter() {
        let c = LogConfig::default();
        assert_eq!(c.timestamp_window(1000), (i64::MIN, i64::MAX), "unlimited by default");
        assert_eq!(c.message_timestamp_type, TimestampType::CreateTime);
        let c = LogConfig::default()
            .with_overrides([("message.timestamp.before.max.ms", "50"), ("max.message.time.difference.ms", "200")])
            .unwrap();
        assert_eq!(c.timestamp_window(1000), (950, 1200));
        let c = LogConfig::default()
            .with_overrides([("message.timestamp.difference.max.ms", "100"), ("message.timestamp.after.max.ms", "500")])
            .unwrap();
        assert_eq!(c.timestamp_window(1000), (900, 1100));
        // The name and its alias: the tighter wins, in either order.
        for pairs in [
            [("max.message.time.difference.ms", "300"), ("message.timestamp.difference.max.ms", "100")],
            [("message.timestamp.difference.max.ms", "100"), ("max.message.time.difference.ms", "300")],
        ] {
            assert_eq!(LogConfig::default().with_overrides(pairs).unwrap().timestamp_window(1000), (900, 1100));
        }
        let c = LogConfig::default().with_overrides([("message.timestamp.type", "LogAppendTime")]).unwrap();
        assert_eq!(c.message_timestamp_type, TimestampType::LogAppendTime);
        assert!(LogConfig::default().with_overrides([("message.timestamp.type", "createtime")]).is_err());
        assert!(LogConfig::default().with_overrides([("time.index.interval.ms", "0")]).is_err());
        assert!(LogConfig::default().with_overrides([("message.timestamp.before.max.ms", "-5")]).is_err());
        let c = LogConfig::default().with_overrides([("retention.ms", "-1")]).unwrap();
        assert_eq!(c.retention_ms, None);
    }

    #[test]
    fn every_key_round_trips_through_describe() {
        let c = LogConfig::default()
            .with_overrides([("segment.bytes", "65536"), ("retention.bytes", "-1"), ("flush.messages", "100")])
            .unwrap();
        let d = c.describe();
        assert_eq!(d.len(), LOG_CONFIG_KEYS.len());
        let again = LogConfig::default().with_overrides(d.iter().map(|(k, v)| (*k, v.as_str()))).unwrap();
        assert_eq!(again, c);
    }
}
