//! Typed, validated configuration. Topic (log) settings keep Kafka's names and meanings
//! (SPEC T2.4); tidemark's own settings are prefixed `tidemark.`. Units are last in field
//! names. A bad value is refused with a [`ConfigError`] naming the key, the value and the
//! rule (SPEC T2.5); nothing is half-applied.
//!
//! Who calls it: the binary (broker defaults), the server (topic overrides from clients) and
//! storage (which only reads the typed struct).

pub mod kafka_names;
mod keys;
mod version;

pub use keys::{topic_key, topic_key_of_broker_name, ConfigType, Effect, Rule, Synonym, Taken, TopicKey, TOPIC_KEYS};
pub use version::kafka_version;

use crate::types::TimestampType;
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
    /// `tidemark.zero.ahead.bytes`: how far past an active segment's data the flusher keeps
    /// the file written with zeros (0: not at all), so appends overwrite written blocks and an
    /// fdatasync needs no filesystem journal commit.
    pub zero_ahead_bytes: u64,
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
    /// timestamp, or before a batch this much newer than the segment's first (SPEC T7.1).
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
    /// `min.insync.replicas`: with one replica, a value above 1 makes acks=all produce fail
    /// with NOT_ENOUGH_REPLICAS, as Kafka does.
    pub min_insync_replicas: u32,
    /// `message.downconversion.enable`: false refuses fetches that need down-conversion
    /// (Fetch v0-v3 of newer batches) with UNSUPPORTED_VERSION.
    pub downconversion: bool,
    /// `cleanup.policy` holds `delete`: retention by time and size removes old segments.
    pub cleanup_delete: bool,
    /// `cleanup.policy` holds `compact`: the cleaner keeps the last record of each key.
    pub cleanup_compact: bool,
    /// `delete.retention.ms`: how long a tombstone stays after the pass that first kept it.
    pub delete_retention_ms: u64,
    /// `min.compaction.lag.ms`: a segment holding a younger record is not cleaned.
    pub min_compaction_lag_ms: u64,
    /// `max.compaction.lag.ms`: a partition whose oldest dirty segment is older is cleaned
    /// whatever its dirty ratio; `None` = unbounded (Kafka's Long.MAX_VALUE).
    pub max_compaction_lag_ms: Option<u64>,
    /// `min.cleanable.dirty.ratio`, in millionths: the dirty share that starts a pass.
    pub min_cleanable_dirty_ratio_ppm: u32,
    /// Kafka settings that change nothing on one node without compaction or tiered storage
    /// (their values are kept, validated, for DescribeConfigs): see [`TopicKey::effect`].
    pub inert: BTreeMap<&'static str, String>,
}

pub const KIB: u64 = 1024;
pub const MIB: u64 = 1024 * 1024;
pub const GIB: u64 = 1024 * MIB;
pub const DAY_MS: u64 = 24 * 3600 * 1000;

/// How DescribeConfigs shows a bound where `None` is unlimited: Kafka's Long.MAX_VALUE.
fn show_bound(b: Option<u64>) -> String {
    b.map_or(i64::MAX.to_string(), |v| v.to_string())
}

/// A value may not hold control characters (a line break would corrupt the files settings are
/// kept in, and no setting needs one).
pub fn check_text(key: &str, value: &str) -> Result<(), ConfigError> {
    if value.chars().any(char::is_control) {
        return Err(bad(key, value, "must not contain control characters"));
    }
    Ok(())
}

/// The built-in defaults: every topic setting's table default, taken once.
static DEFAULTS: std::sync::LazyLock<LogConfig> = std::sync::LazyLock::new(|| {
    let mut c = LogConfig::unset();
    for k in TOPIC_KEYS {
        // The table is constant and its test takes every default, so this cannot fail at run time.
        if let Err(e) = c.set(k.name, k.default) {
            panic!("the topic settings table holds a default its own rule refuses: {e}");
        }
    }
    c
});

impl Default for LogConfig {
    /// Each setting at its default in [`TOPIC_KEYS`].
    fn default() -> Self {
        DEFAULTS.clone()
    }
}

impl LogConfig {
    /// Every field empty, before the table's defaults are taken.
    fn unset() -> Self {
        LogConfig {
            segment_bytes: 0,
            segment_index_bytes: 0,
            index_interval_bytes: 0,
            retention_bytes: None,
            flush_messages: 0,
            flush_ms: 0,
            max_message_bytes: 0,
            preallocate_bytes: 0,
            write_chunk_bytes: 0,
            max_inflight_writes: 0,
            zero_ahead_bytes: 0,
            max_unflushed_bytes: 0,
            message_timestamp_type: TimestampType::CreateTime,
            timestamp_difference_max_ms: None,
            timestamp_difference_alias_ms: None,
            timestamp_before_max_ms: None,
            timestamp_after_max_ms: None,
            time_index_interval_ms: 0,
            segment_ms: 0,
            retention_ms: None,
            producer_id_expiration_ms: 0,
            min_insync_replicas: 0,
            downconversion: false,
            cleanup_delete: false,
            cleanup_compact: false,
            delete_retention_ms: 0,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: None,
            min_cleanable_dirty_ratio_ppm: 0,
            inert: BTreeMap::new(),
        }
    }

    /// Apply one `key=value`, taken by the setting's [`Rule`]; on error `self` is unchanged.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), ConfigError> {
        check_text(key, value)?;
        let Some(k) = topic_key(key) else { return Err(bad(key, value, "unknown configuration key")) };
        if let Effect::Only(only) = k.effect {
            if value.trim() != only {
                return Err(bad(key, value, format!("tidemark supports only {only}: {}", k.doc)));
            }
        }
        let taken = k.rule.take(key, value)?;
        if k.effect != Effect::Applied {
            // Kept only when it differs from the default (equal configs compare equal).
            if value.trim() == k.default {
                self.inert.remove(k.name);
            } else {
                self.inert.insert(k.name, value.trim().to_string());
            }
            return Ok(());
        }
        self.apply(k, taken)
            .ok_or_else(|| bad(key, value, "the settings table gives this setting a rule its field cannot take"))
    }

    /// Put a taken value into its field; `None` when the table's rule does not fit the field
    /// (a programming error the table's tests catch). Integers are within the rule's bounds,
    /// all of which are at least 0 for applied settings.
    fn apply(&mut self, k: &TopicKey, taken: Taken) -> Option<()> {
        let n = |t: &Taken| match *t {
            Taken::Int(n) => u64::try_from(n).ok(),
            _ => None,
        };
        let limit = |t: &Taken| match *t {
            Taken::Limit(l) => Some(l),
            _ => None,
        };
        match k.name {
            "segment.bytes" => self.segment_bytes = n(&taken)?,
            "segment.index.bytes" => self.segment_index_bytes = n(&taken)?,
            "index.interval.bytes" => self.index_interval_bytes = n(&taken)?,
            "retention.bytes" => self.retention_bytes = limit(&taken)?,
            "flush.messages" => self.flush_messages = n(&taken)?,
            "flush.ms" => self.flush_ms = n(&taken)?,
            "max.message.bytes" => self.max_message_bytes = n(&taken)?,
            "tidemark.preallocate.bytes" => self.preallocate_bytes = n(&taken)?,
            "tidemark.write.chunk.bytes" => self.write_chunk_bytes = n(&taken)?,
            "tidemark.zero.ahead.bytes" => self.zero_ahead_bytes = n(&taken)?,
            "tidemark.max.inflight.writes" => self.max_inflight_writes = u32::try_from(n(&taken)?).ok()?,
            "tidemark.max.unflushed.bytes" => self.max_unflushed_bytes = n(&taken)?,
            "message.timestamp.type" => {
                self.message_timestamp_type = match taken {
                    Taken::Words(w) if w == ["LogAppendTime"] => TimestampType::LogAppendTime,
                    Taken::Words(w) if w == ["CreateTime"] => TimestampType::CreateTime,
                    _ => return None,
                }
            }
            "max.message.time.difference.ms" => self.timestamp_difference_max_ms = limit(&taken)?,
            "message.timestamp.difference.max.ms" => self.timestamp_difference_alias_ms = limit(&taken)?,
            "message.timestamp.before.max.ms" => self.timestamp_before_max_ms = limit(&taken)?,
            "message.timestamp.after.max.ms" => self.timestamp_after_max_ms = limit(&taken)?,
            "time.index.interval.ms" => self.time_index_interval_ms = n(&taken)?,
            "segment.ms" => self.segment_ms = n(&taken)?,
            "retention.ms" => self.retention_ms = limit(&taken)?,
            "producer.id.expiration.ms" => self.producer_id_expiration_ms = n(&taken)?,
            "min.insync.replicas" => self.min_insync_replicas = u32::try_from(n(&taken)?).ok()?,
            "message.downconversion.enable" => match taken {
                Taken::Flag(f) => self.downconversion = f,
                _ => return None,
            },
            "cleanup.policy" => match taken {
                Taken::Words(w) => {
                    (self.cleanup_compact, self.cleanup_delete) = (w.contains(&"compact"), w.contains(&"delete"))
                }
                _ => return None,
            },
            "delete.retention.ms" => self.delete_retention_ms = n(&taken)?,
            "min.compaction.lag.ms" => self.min_compaction_lag_ms = n(&taken)?,
            // Kafka's Long.MAX_VALUE (its default) is unbounded.
            "max.compaction.lag.ms" => {
                self.max_compaction_lag_ms = n(&taken).map(|v| (v != i64::MAX as u64).then_some(v))?
            }
            "min.cleanable.dirty.ratio" => match taken {
                Taken::Ratio(r) => self.min_cleanable_dirty_ratio_ppm = (r * 1e6).round() as u32,
                _ => return None,
            },
            _ => return None,
        }
        Some(())
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
        m.insert("tidemark.zero.ahead.bytes", self.zero_ahead_bytes.to_string());
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
        m.insert("min.insync.replicas", self.min_insync_replicas.to_string());
        m.insert("message.downconversion.enable", self.downconversion.to_string());
        let policy = match (self.cleanup_compact, self.cleanup_delete) {
            (true, true) => "compact,delete",
            (true, false) => "compact",
            _ => "delete",
        };
        m.insert("cleanup.policy", policy.to_string());
        m.insert("delete.retention.ms", self.delete_retention_ms.to_string());
        m.insert("min.compaction.lag.ms", self.min_compaction_lag_ms.to_string());
        m.insert("max.compaction.lag.ms", show_bound(self.max_compaction_lag_ms));
        m.insert("min.cleanable.dirty.ratio", (self.min_cleanable_dirty_ratio_ppm as f64 / 1e6).to_string());
        for k in TOPIC_KEYS.iter().filter(|k| k.effect != Effect::Applied) {
            m.insert(k.name, self.inert.get(k.name).cloned().unwrap_or_else(|| k.default.to_string()));
        }
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

/// Topic defaults from raw broker settings (`get` looks a name up in the merged layers): each
/// topic setting takes the first of its broker synonyms that is set (converted from hours or
/// minutes), or tidemark's extension, the topic name itself, or the built-in default.
pub fn topic_defaults<'a>(get: impl Fn(&str) -> Option<&'a String>) -> Result<LogConfig, ConfigError> {
    let mut c = LogConfig::default();
    for k in TOPIC_KEYS {
        let found = k.synonyms.iter().find_map(|s| get(s.name).map(|v| (s.name, s.scale, v)));
        let (name, scale, value) = match found {
            Some(f) => f,
            None => match get(k.name) {
                Some(v) => (k.name, 1, v),
                None => continue,
            },
        };
        let value = if scale == 1 {
            value.clone()
        } else {
            match value.trim().parse::<i64>() {
                Ok(v) if v < 0 => "-1".to_string(), // Kafka: negative hours or minutes mean unlimited
                Ok(v) => v.saturating_mul(scale as i64).to_string(),
                Err(_) => {
                    return Err(ConfigError {
                        key: name.to_string(),
                        value: value.clone(),
                        reason: "not an integer".into(),
                    })
                }
            }
        };
        c.set(k.name, &value).map_err(|e| ConfigError { key: name.to_string(), ..e })?;
    }
    Ok(c)
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

    // cleanup.policy takes Kafka's forms (one name, a comma list, a bracketed list) and
    // refuses others; the compaction settings are validated as Kafka validates them.
    #[test]
    fn cleanup_policy_and_compaction_settings() {
        let base = LogConfig::default();
        assert_eq!((base.cleanup_compact, base.cleanup_delete), (false, true));
        for (v, want, shown) in [
            ("compact", (true, false), "compact"),
            ("delete", (false, true), "delete"),
            ("compact,delete", (true, true), "compact,delete"),
            ("delete, compact", (true, true), "compact,delete"),
            ("[compact, delete]", (true, true), "compact,delete"),
            ("[compact]", (true, false), "compact"),
        ] {
            let c = base.with_overrides([("cleanup.policy", v)]).unwrap();
            assert_eq!((c.cleanup_compact, c.cleanup_delete), want, "{v}");
            assert_eq!(c.describe()["cleanup.policy"], shown);
        }
        for v in ["", "compacted", "compact;delete", "[compact", "compact,,delete"] {
            assert!(base.with_overrides([("cleanup.policy", v)]).is_err(), "{v:?}");
        }
        let c = base
            .with_overrides([
                ("delete.retention.ms", "0"),
                ("min.compaction.lag.ms", "5"),
                ("max.compaction.lag.ms", "60000"),
                ("min.cleanable.dirty.ratio", "0.01"),
            ])
            .unwrap();
        assert_eq!(
            (c.delete_retention_ms, c.min_compaction_lag_ms, c.max_compaction_lag_ms, c.min_cleanable_dirty_ratio_ppm),
            (0, 5, Some(60000), 10_000)
        );
        assert_eq!(c.describe()["min.cleanable.dirty.ratio"], "0.01");
        assert_eq!(base.describe()["max.compaction.lag.ms"], i64::MAX.to_string());
        for (k, v) in
            [("max.compaction.lag.ms", "0"), ("delete.retention.ms", "-1"), ("min.cleanable.dirty.ratio", "1.5")]
        {
            assert!(base.with_overrides([(k, v)]).is_err(), "{k}={v}");
        }
    }

    // Kafka's settings tidemark cannot honour are refused unless set to what tidemark does;
    // those that change nothing on one node are validated as Kafka validates them and shown;
    // min.insync.replicas and message.downconversion.enable are applied.
    #[test]
    fn kafka_settings_without_a_tidemark_counterpart() {
        let base = LogConfig::default();
        for (k, v) in [
            ("compression.type", "gzip"),
            ("preallocate", "false"),
            ("remote.storage.enable", "true"),
            ("segment.jitter.ms", "5"),
        ] {
            let e = base.with_overrides([(k, v)]).unwrap_err();
            assert!(e.reason.contains("tidemark supports only"), "{k}={v}: {e}");
        }
        assert_eq!(base.with_overrides([("cleanup.policy", "delete")]).unwrap(), base);
        let c = base
            .with_overrides([
                ("unclean.leader.election.enable", "true"),
                ("min.cleanable.dirty.ratio", "0.25"),
                ("leader.replication.throttled.replicas", "0:1,1:1"),
            ])
            .unwrap();
        let d = c.describe();
        assert_eq!(
            (d["unclean.leader.election.enable"].as_str(), d["min.cleanable.dirty.ratio"].as_str()),
            ("true", "0.25")
        );
        assert_eq!(d["delete.retention.ms"], "86400000");
        for (k, v) in [
            ("unclean.leader.election.enable", "yes"),
            ("min.cleanable.dirty.ratio", "2"),
            ("compression.gzip.level", "0"),
            ("message.format.version", "three"),
            ("local.retention.ms", "-3"),
        ] {
            assert!(base.with_overrides([(k, v)]).is_err(), "{k}={v}");
        }
        let c =
            base.with_overrides([("min.insync.replicas", "2"), ("message.downconversion.enable", "false")]).unwrap();
        assert_eq!((c.min_insync_replicas, c.downconversion), (2, false));
        assert!(base.with_overrides([("min.insync.replicas", "0")]).is_err());
        // No line breaks or other control characters, even around a valid value.
        for (k, v) in [
            ("retention.ms", "5000\n"),
            ("leader.replication.throttled.replicas", "0:1,\n1:1"),
            ("message.format.version", "3.0\r"),
        ] {
            assert!(base.with_overrides([(k, v)]).unwrap_err().reason.contains("control"), "{k}={v:?}");
        }
    }

    #[test]
    fn every_key_round_trips_through_describe() {
        let c = LogConfig::default()
            .with_overrides([("segment.bytes", "65536"), ("retention.bytes", "-1"), ("flush.messages", "100")])
            .unwrap();
        let d = c.describe();
        assert_eq!(d.len(), TOPIC_KEYS.len(), "describe lists every topic key once");
        assert!(TOPIC_KEYS.iter().all(|k| d.contains_key(k.name)));
        let again = LogConfig::default().with_overrides(d.iter().map(|(k, v)| (*k, v.as_str()))).unwrap();
        assert_eq!(again, c);
    }
}
