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
            zero_ahead_bytes: MIB,
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
            min_insync_replicas: 1,
            downconversion: true,
            cleanup_delete: true,
            cleanup_compact: false,
            delete_retention_ms: DAY_MS,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: None,
            min_cleanable_dirty_ratio_ppm: 500_000,
            inert: BTreeMap::new(),
        }
    }
}

/// Kafka's configuration value types (DescribeConfigs `ConfigType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigType {
    Boolean = 1,
    String = 2,
    Int = 3,
    Short = 4,
    Long = 5,
    Double = 6,
    List = 7,
}

/// What a topic setting does in tidemark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Applied (a field of [`LogConfig`]).
    Applied,
    /// Taken and validated, but it changes nothing on one node: it concerns log compaction,
    /// replication, tiered storage or a feature that only applies with another setting tidemark
    /// does not offer (as in Kafka, where it changes nothing in the same situation).
    Inert,
    /// Only this value is supported (tidemark lacks the alternative); another is refused.
    Only(&'static str),
}

/// A broker setting that gives a topic setting its default: its name and the factor from its
/// unit to the topic setting's (`log.retention.hours` × 3600000 = `retention.ms`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Synonym {
    pub name: &'static str,
    pub scale: u64,
}

const fn syn(name: &'static str) -> Synonym {
    Synonym { name, scale: 1 }
}

/// A topic setting: Kafka's name and type, the broker settings that give its default (in
/// Kafka's priority order: the first set wins; the first is the one that can change at
/// runtime), its Kafka default where tidemark's differs, and what it does here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopicKey {
    pub name: &'static str,
    pub kind: ConfigType,
    pub synonyms: &'static [Synonym],
    pub effect: Effect,
    pub doc: &'static str,
}

const HOUR_MS: u64 = 3_600_000;

/// Every topic setting: Kafka's (3.9) and tidemark's own. DescribeConfigs lists them all.
pub const TOPIC_KEYS: &[TopicKey] = &[
    TopicKey { name: "cleanup.policy", kind: ConfigType::List, synonyms: &[syn("log.cleanup.policy")], effect: Effect::Applied, doc: "How old records go: `delete` (retention by time and size), `compact` (the last record of each key stays), or both (`compact,delete`; Kafka's bracketed lists are accepted)." },
    TopicKey { name: "compression.type", kind: ConfigType::String, synonyms: &[syn("compression.type")], effect: Effect::Only("producer"), doc: "Batches are stored as the producer compressed them (`producer`); recompression by the broker is not available in tidemark." },
    TopicKey { name: "compression.gzip.level", kind: ConfigType::Int, synonyms: &[syn("compression.gzip.level")], effect: Effect::Inert, doc: "The gzip level when the broker recompresses; tidemark never does (compression.type=producer)." },
    TopicKey { name: "compression.lz4.level", kind: ConfigType::Int, synonyms: &[syn("compression.lz4.level")], effect: Effect::Inert, doc: "The lz4 level when the broker recompresses; tidemark never does (compression.type=producer)." },
    TopicKey { name: "compression.zstd.level", kind: ConfigType::Int, synonyms: &[syn("compression.zstd.level")], effect: Effect::Inert, doc: "The zstd level when the broker recompresses; tidemark never does (compression.type=producer)." },
    TopicKey { name: "delete.retention.ms", kind: ConfigType::Long, synonyms: &[syn("log.cleaner.delete.retention.ms")], effect: Effect::Applied, doc: "How long compaction keeps delete tombstones (and markers of emptied transactions) readable after the pass that first kept them." },
    TopicKey { name: "file.delete.delay.ms", kind: ConfigType::Long, synonyms: &[syn("log.segment.delete.delay.ms")], effect: Effect::Inert, doc: "How long Kafka waits before deleting a removed segment's files; tidemark deletes them at once." },
    TopicKey { name: "flush.messages", kind: ConfigType::Long, synonyms: &[syn("log.flush.interval.messages")], effect: Effect::Applied, doc: "Records appended since the last flush after which an append waits for its fdatasync (1: every acknowledged record is durable)." },
    TopicKey { name: "flush.ms", kind: ConfigType::Long, synonyms: &[syn("log.flush.interval.ms"), syn("log.flush.scheduler.interval.ms")], effect: Effect::Applied, doc: "The longest appended data waits for its fdatasync." },
    TopicKey { name: "follower.replication.throttled.replicas", kind: ConfigType::List, synonyms: &[], effect: Effect::Inert, doc: "Replicas whose replication is throttled on the follower side; one replica here." },
    TopicKey { name: "index.interval.bytes", kind: ConfigType::Int, synonyms: &[syn("log.index.interval.bytes")], effect: Effect::Applied, doc: "Bytes of batches between two offset-index entries." },
    TopicKey { name: "leader.replication.throttled.replicas", kind: ConfigType::List, synonyms: &[], effect: Effect::Inert, doc: "Replicas whose replication is throttled on the leader side; one replica here." },
    TopicKey { name: "local.retention.bytes", kind: ConfigType::Long, synonyms: &[syn("log.local.retention.bytes")], effect: Effect::Inert, doc: "Local retention with tiered storage; no effect without it (-2: retention.bytes)." },
    TopicKey { name: "local.retention.ms", kind: ConfigType::Long, synonyms: &[syn("log.local.retention.ms")], effect: Effect::Inert, doc: "Local retention with tiered storage; no effect without it (-2: retention.ms)." },
    TopicKey { name: "max.compaction.lag.ms", kind: ConfigType::Long, synonyms: &[syn("log.cleaner.max.compaction.lag.ms")], effect: Effect::Applied, doc: "A partition whose oldest dirty segment is older than this is compacted whatever its dirty ratio." },
    TopicKey { name: "max.message.bytes", kind: ConfigType::Int, synonyms: &[syn("message.max.bytes")], effect: Effect::Applied, doc: "The largest record batch a producer may append, whole (MESSAGE_TOO_LARGE beyond)." },
    TopicKey { name: "max.message.time.difference.ms", kind: ConfigType::Long, synonyms: &[syn("max.message.time.difference.ms")], effect: Effect::Applied, doc: "How far a CreateTime timestamp may stray from the broker's clock either way (tidemark's name; the tighter of it and its aliases wins)." },
    TopicKey { name: "message.downconversion.enable", kind: ConfigType::Boolean, synonyms: &[syn("log.message.downconversion.enable")], effect: Effect::Applied, doc: "Whether fetches of older versions get newer batches down-converted; false answers them UNSUPPORTED_VERSION." },
    TopicKey { name: "message.format.version", kind: ConfigType::String, synonyms: &[syn("log.message.format.version")], effect: Effect::Inert, doc: "Deprecated; ignored, as by Kafka 3 (batches are stored as produced)." },
    TopicKey { name: "message.timestamp.after.max.ms", kind: ConfigType::Long, synonyms: &[syn("log.message.timestamp.after.max.ms")], effect: Effect::Applied, doc: "How far in the future a CreateTime timestamp may be (KIP-937)." },
    TopicKey { name: "message.timestamp.before.max.ms", kind: ConfigType::Long, synonyms: &[syn("log.message.timestamp.before.max.ms")], effect: Effect::Applied, doc: "How far in the past a CreateTime timestamp may be (KIP-937)." },
    TopicKey { name: "message.timestamp.difference.max.ms", kind: ConfigType::Long, synonyms: &[syn("log.message.timestamp.difference.max.ms")], effect: Effect::Applied, doc: "How far a CreateTime timestamp may stray from the broker's clock either way." },
    TopicKey { name: "message.timestamp.type", kind: ConfigType::String, synonyms: &[syn("log.message.timestamp.type")], effect: Effect::Applied, doc: "CreateTime (the producer's timestamps) or LogAppendTime (the broker's)." },
    TopicKey { name: "min.cleanable.dirty.ratio", kind: ConfigType::Double, synonyms: &[syn("log.cleaner.min.cleanable.ratio")], effect: Effect::Applied, doc: "Compaction starts once this share of the cleanable log is dirty (written since the last pass)." },
    TopicKey { name: "min.compaction.lag.ms", kind: ConfigType::Long, synonyms: &[syn("log.cleaner.min.compaction.lag.ms")], effect: Effect::Applied, doc: "The shortest a record stays uncompacted: a segment holding a younger record is not cleaned." },
    TopicKey { name: "min.insync.replicas", kind: ConfigType::Int, synonyms: &[syn("min.insync.replicas")], effect: Effect::Applied, doc: "Replicas that must have a record before acks=all answers; above 1 (one replica here) acks=all fails with NOT_ENOUGH_REPLICAS." },
    TopicKey { name: "preallocate", kind: ConfigType::Boolean, synonyms: &[syn("log.preallocate")], effect: Effect::Only("true"), doc: "Segment files are always preallocated (fallocate, tidemark.preallocate.bytes steps)." },
    TopicKey { name: "producer.id.expiration.ms", kind: ConfigType::Long, synonyms: &[syn("producer.id.expiration.ms")], effect: Effect::Applied, doc: "An idempotent producer not heard of for this long is forgotten." },
    TopicKey { name: "remote.log.copy.disable", kind: ConfigType::Boolean, synonyms: &[], effect: Effect::Inert, doc: "Tiered storage; not available in tidemark." },
    TopicKey { name: "remote.log.delete.on.disable", kind: ConfigType::Boolean, synonyms: &[], effect: Effect::Inert, doc: "Tiered storage; not available in tidemark." },
    TopicKey { name: "remote.storage.enable", kind: ConfigType::Boolean, synonyms: &[], effect: Effect::Only("false"), doc: "Tiered storage; not available in tidemark." },
    TopicKey { name: "retention.bytes", kind: ConfigType::Long, synonyms: &[syn("log.retention.bytes")], effect: Effect::Applied, doc: "Delete the oldest segments while the partition is larger (-1: unlimited)." },
    TopicKey { name: "retention.ms", kind: ConfigType::Long, synonyms: &[syn("log.retention.ms"), Synonym { name: "log.retention.minutes", scale: 60_000 }, Synonym { name: "log.retention.hours", scale: HOUR_MS }], effect: Effect::Applied, doc: "Delete segments whose largest timestamp is older (-1: unlimited)." },
    TopicKey { name: "segment.bytes", kind: ConfigType::Int, synonyms: &[syn("log.segment.bytes")], effect: Effect::Applied, doc: "Roll the active segment before it would pass this size." },
    TopicKey { name: "segment.index.bytes", kind: ConfigType::Int, synonyms: &[syn("log.index.size.max.bytes")], effect: Effect::Applied, doc: "The largest offset index of a segment; a full index rolls it." },
    TopicKey { name: "segment.jitter.ms", kind: ConfigType::Long, synonyms: &[syn("log.roll.jitter.ms"), Synonym { name: "log.roll.jitter.hours", scale: HOUR_MS }], effect: Effect::Only("0"), doc: "Random jitter on segment.ms; not available in tidemark (rolls follow SPEC T7.1 exactly)." },
    TopicKey { name: "segment.ms", kind: ConfigType::Long, synonyms: &[syn("log.roll.ms"), Synonym { name: "log.roll.hours", scale: HOUR_MS }], effect: Effect::Applied, doc: "Roll a non-empty active segment this long after the partition's largest timestamp." },
    TopicKey { name: "tidemark.max.inflight.writes", kind: ConfigType::Int, synonyms: &[syn("tidemark.max.inflight.writes")], effect: Effect::Applied, doc: "DMA writes a flush keeps in flight." },
    TopicKey { name: "tidemark.max.unflushed.bytes", kind: ConfigType::Long, synonyms: &[syn("tidemark.max.unflushed.bytes")], effect: Effect::Applied, doc: "Appended bytes not yet durable after which an append waits for its flush." },
    TopicKey { name: "tidemark.preallocate.bytes", kind: ConfigType::Long, synonyms: &[syn("tidemark.preallocate.bytes")], effect: Effect::Applied, doc: "The fallocate step of segment files." },
    TopicKey { name: "tidemark.write.chunk.bytes", kind: ConfigType::Long, synonyms: &[syn("tidemark.write.chunk.bytes")], effect: Effect::Applied, doc: "The size of the aligned write buffers (one DMA write each)." },
    TopicKey { name: "tidemark.zero.ahead.bytes", kind: ConfigType::Long, synonyms: &[syn("tidemark.zero.ahead.bytes")], effect: Effect::Applied, doc: "How far past an active segment's data the flusher keeps its file written with zeros, in 128 KiB writes while a flush syncs (0: off); appends then land on written blocks and their fdatasync needs no journal commit." },
    TopicKey { name: "time.index.interval.ms", kind: ConfigType::Long, synonyms: &[syn("time.index.interval.ms")], effect: Effect::Applied, doc: "The bucket width of the time index (SPEC T5.2)." },
    TopicKey { name: "unclean.leader.election.enable", kind: ConfigType::Boolean, synonyms: &[syn("unclean.leader.election.enable")], effect: Effect::Inert, doc: "Leader election among replicas; one replica here." },
];

/// The topic setting `name`, if it is one.
pub fn topic_key(name: &str) -> Option<&'static TopicKey> {
    TOPIC_KEYS.iter().find(|k| k.name == name)
}

/// The topic setting a broker setting gives the default of, and the unit factor.
pub fn topic_key_of_broker_name(name: &str) -> Option<(&'static TopicKey, u64)> {
    TOPIC_KEYS.iter().find_map(|k| k.synonyms.iter().find(|s| s.name == name).map(|s| (k, s.scale)))
}

/// Kafka's default of an inert or fixed setting (what DescribeConfigs shows until it is set).
fn inert_default(key: &str) -> &'static str {
    match key {
        "compression.gzip.level" => "-1",
        "compression.lz4.level" => "9",
        "compression.zstd.level" => "3",
        "file.delete.delay.ms" => "60000",
        "follower.replication.throttled.replicas" | "leader.replication.throttled.replicas" => "",
        "local.retention.bytes" | "local.retention.ms" => "-2",
        "message.format.version" => "3.0-IV1",
        "remote.log.copy.disable" | "remote.log.delete.on.disable" | "unclean.leader.election.enable" => "false",
        _ => "",
    }
}

/// Validate a value of an inert setting as Kafka would (type and range).
fn check_inert(key: &str, value: &str) -> Result<(), ConfigError> {
    let v = value.trim();
    let long_at_least = |min: i64| match v.parse::<i64>() {
        Ok(n) if n >= min => Ok(()),
        _ => Err(bad(key, value, format!("must be an integer of at least {min}"))),
    };
    match key {
        "compression.gzip.level" => match v.parse::<i32>() {
            Ok(-1 | 1..=9) => Ok(()),
            _ => Err(bad(key, value, "must be -1 or between 1 and 9")),
        },
        "compression.lz4.level" => in_range(key, value, 1, 17).map(|_| ()),
        "compression.zstd.level" => in_range(key, value, -131072, 22).map(|_| ()),
        "file.delete.delay.ms" => long_at_least(0),
        "local.retention.bytes" | "local.retention.ms" => long_at_least(-2),
        "follower.replication.throttled.replicas" | "leader.replication.throttled.replicas" => {
            let ok = v.is_empty()
                || v == "*"
                || v.split(',').all(|p| {
                    p.trim().split_once(':').is_some_and(|(a, b)| a.parse::<u32>().is_ok() && b.parse::<u32>().is_ok())
                });
            if ok {
                Ok(())
            } else {
                Err(bad(key, value, "must be empty, * or partition:broker pairs separated by commas"))
            }
        }
        "message.format.version" => kafka_version(key, value).map(|_| ()),
        "remote.log.copy.disable" | "remote.log.delete.on.disable" | "unclean.leader.election.enable" => {
            parse_bool(key, value).map(|_| ())
        }
        _ => Err(bad(key, value, "unknown configuration key")),
    }
}

/// Kafka's releases and the internal versions of each (its `MetadataVersion`), oldest first:
/// what a version-valued setting (`message.format.version`, `inter.broker.protocol.version`)
/// may name.
const KAFKA_VERSIONS: &[(&str, &[&str])] = &[
    ("0.8.0", &[]),
    ("0.8.1", &[]),
    ("0.8.2", &[]),
    ("0.9.0", &[]),
    ("0.10.0", &["IV0", "IV1"]),
    ("0.10.1", &["IV0", "IV1", "IV2"]),
    ("0.10.2", &["IV0"]),
    ("0.11.0", &["IV0", "IV1", "IV2"]),
    ("1.0", &["IV0"]),
    ("1.1", &["IV0"]),
    ("2.0", &["IV0", "IV1"]),
    ("2.1", &["IV0", "IV1", "IV2"]),
    ("2.2", &["IV0", "IV1"]),
    ("2.3", &["IV0", "IV1"]),
    ("2.4", &["IV0", "IV1"]),
    ("2.5", &["IV0"]),
    ("2.6", &["IV0"]),
    ("2.7", &["IV0", "IV1", "IV2"]),
    ("2.8", &["IV0", "IV1"]),
    ("3.0", &["IV0", "IV1"]),
    ("3.1", &["IV0"]),
    ("3.2", &["IV0"]),
    ("3.3", &["IV0", "IV1", "IV2", "IV3"]),
    ("3.4", &["IV0"]),
    ("3.5", &["IV0", "IV1", "IV2"]),
    ("3.6", &["IV0", "IV1", "IV2"]),
    ("3.7", &["IV0", "IV1", "IV2", "IV3", "IV4"]),
    ("3.8", &["IV0"]),
    ("3.9", &["IV0"]),
    // 4.0-IV0 is the last production version; the later ones are named only in full.
    ("4.0", &["IV0", "IV1", "IV2", "IV3"]),
];

/// A version-valued setting, read as Kafka reads it (`MetadataVersion.fromVersionString`):
/// a release (`0.10.0`, `2.8`: its latest internal version; `4.0`: 4.0-IV0), a release with an
/// internal version (`0.10.0-IV1`, `3.0-IV1`), or a longer form whose extra segments are
/// ignored (`0.10.0.0`, `2.8.1`; three segments for releases before 1.0, two after). The
/// internal version it names, in full (`0.10.0-IV1`; releases before 0.10 have none).
pub fn kafka_version(key: &str, value: &str) -> Result<String, ConfigError> {
    let v = value.trim();
    let segments: Vec<&str> = v.split('.').collect();
    let keep = if v.starts_with("0.") { 3 } else { 2 };
    let named = if segments.len() <= keep { v.to_string() } else { segments[..keep].join(".") };
    let (release, iv) = match named.split_once('-') {
        Some((r, iv)) => (r, Some(iv)),
        None => (named.as_str(), None),
    };
    let full = |iv: &str| if iv.is_empty() { release.to_string() } else { format!("{release}-{iv}") };
    let found = KAFKA_VERSIONS.iter().find(|(r, _)| *r == release).and_then(|(_, ivs)| match iv {
        None if release == "4.0" => Some(full("IV0")),
        None => Some(full(ivs.last().copied().unwrap_or(""))),
        Some(iv) => ivs.contains(&iv).then(|| full(iv)),
    });
    found.ok_or_else(|| bad(key, value, "is not a valid Kafka version (such as 0.10.0, 2.8, 3.0-IV1)"))
}

fn parse_bool(key: &str, value: &str) -> Result<bool, ConfigError> {
    match value.trim() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(bad(key, value, "must be true or false")),
    }
}

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

/// `cleanup.policy`: a list of `compact` and `delete` (commas, optionally in brackets, as
/// Kafka's list parser takes them): (compact, delete). Empty or unknown entries are refused.
fn cleanup_policy(key: &str, value: &str) -> Result<(bool, bool), ConfigError> {
    let v = value.trim();
    let v = v.strip_prefix('[').and_then(|v| v.strip_suffix(']')).unwrap_or(v);
    let (mut compact, mut delete) = (false, false);
    for item in v.split(',') {
        match item.trim() {
            "compact" => compact = true,
            "delete" => delete = true,
            _ => return Err(bad(key, value, "must be delete, compact or compact,delete")),
        }
    }
    Ok((compact, delete))
}

/// A value may not hold control characters (a line break would corrupt the files settings are
/// kept in, and no setting needs one).
pub fn check_text(key: &str, value: &str) -> Result<(), ConfigError> {
    if value.chars().any(char::is_control) {
        return Err(bad(key, value, "must not contain control characters"));
    }
    Ok(())
}

impl LogConfig {
    /// Apply one `key=value`; on error `self` is unchanged.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), ConfigError> {
        const I32: i64 = i32::MAX as i64;
        check_text(key, value)?;
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
            "tidemark.zero.ahead.bytes" => {
                let v = in_range(key, value, 0, I32)?;
                if v % crate::io::PAGE != 0 {
                    return Err(bad(key, value, "must be a multiple of 4096"));
                }
                self.zero_ahead_bytes = v
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
            "min.insync.replicas" => self.min_insync_replicas = in_range(key, value, 1, i32::MAX as i64)? as u32,
            "message.downconversion.enable" => self.downconversion = parse_bool(key, value)?,
            "cleanup.policy" => (self.cleanup_compact, self.cleanup_delete) = cleanup_policy(key, value)?,
            "delete.retention.ms" => self.delete_retention_ms = in_range(key, value, 0, i64::MAX)?,
            "min.compaction.lag.ms" => self.min_compaction_lag_ms = in_range(key, value, 0, i64::MAX)?,
            "max.compaction.lag.ms" => {
                let v = in_range(key, value, 1, i64::MAX)?;
                self.max_compaction_lag_ms = (v != i64::MAX as u64).then_some(v)
            }
            "min.cleanable.dirty.ratio" => match value.trim().parse::<f64>() {
                Ok(r) if (0.0..=1.0).contains(&r) => self.min_cleanable_dirty_ratio_ppm = (r * 1e6).round() as u32,
                _ => return Err(bad(key, value, "must be a number between 0 and 1")),
            },
            _ => {
                let Some(k) = topic_key(key) else { return Err(bad(key, value, "unknown configuration key")) };
                let default = match k.effect {
                    Effect::Only(only) => {
                        if value.trim() != only {
                            return Err(bad(key, value, format!("tidemark supports only {only}: {}", k.doc)));
                        }
                        only
                    }
                    Effect::Inert => {
                        check_inert(key, value)?;
                        inert_default(key)
                    }
                    Effect::Applied => unreachable!("{key}: an applied setting without a field"),
                };
                // Kept only when it differs from the default (equal configs compare equal).
                if value.trim() == default {
                    self.inert.remove(k.name);
                } else {
                    self.inert.insert(k.name, value.trim().to_string());
                }
            }
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
            let default = match k.effect {
                Effect::Only(v) => v,
                _ => inert_default(k.name),
            };
            m.insert(k.name, self.inert.get(k.name).cloned().unwrap_or_else(|| default.to_string()));
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

    /// Version-valued settings take every form Kafka's MetadataVersion.fromVersionString
    /// takes, and name the internal version Kafka would; unknown releases and internal
    /// versions are refused.
    #[test]
    fn kafka_versions_read_as_kafka_reads_them() {
        for (given, named) in [
            ("0.8.2", "0.8.2"),
            ("0.8.2.1", "0.8.2"),
            ("0.10.0", "0.10.0-IV1"),
            ("0.10.0.0", "0.10.0-IV1"),
            ("0.10.0.1", "0.10.0-IV1"),
            ("0.10.0-IV0", "0.10.0-IV0"),
            ("0.11.0", "0.11.0-IV2"),
            ("1.0", "1.0-IV0"),
            ("2.8", "2.8-IV1"),
            ("2.8.1", "2.8-IV1"),
            ("3.0-IV1", "3.0-IV1"),
            ("3.7", "3.7-IV4"),
            ("4.0", "4.0-IV0"),
            ("4.0-IV3", "4.0-IV3"),
        ] {
            assert_eq!(kafka_version("message.format.version", given).unwrap(), named, "{given}");
            assert!(LogConfig::default().with_overrides([("message.format.version", given)]).is_ok(), "{given}");
        }
        for bad in ["three", "", "0.10", "0.10.3", "3.0-IV2", "3.0-iv1", "9.9", "3", "0.10.0-IV9", "3.0-"] {
            assert!(kafka_version("message.format.version", bad).is_err(), "{bad:?}");
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
