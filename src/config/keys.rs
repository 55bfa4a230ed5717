//! The topic settings: Kafka's name and type of each, its default, the values it takes, the
//! broker settings that give its default and what it does in tidemark.

use super::{bad, ConfigError, MIB};

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
    /// Applied (a field of [`super::LogConfig`]).
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
/// runtime), its default, the values it takes, and what it does here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopicKey {
    pub name: &'static str,
    pub kind: ConfigType,
    pub synonyms: &'static [Synonym],
    /// The value in force when neither the topic nor the broker sets it, written as
    /// DescribeConfigs shows it. [`super::LogConfig::default`] is made of these.
    pub default: &'static str,
    pub rule: Rule,
    pub effect: Effect,
    pub doc: &'static str,
}

const HOUR_MS: u64 = 3_600_000;
const I32: i64 = i32::MAX as i64;
const MAX: i64 = i64::MAX;

/// Every topic setting: Kafka's (3.9) and tidemark's own. DescribeConfigs lists them all.
pub const TOPIC_KEYS: &[TopicKey] = &[
    TopicKey { name: "cleanup.policy", kind: ConfigType::List, synonyms: &[syn("log.cleanup.policy")], default: "delete", rule: Rule::ListOf(&["compact", "delete"]), effect: Effect::Applied, doc: "How old records go: `delete` (retention by time and size), `compact` (the last record of each key stays), or both (`compact,delete`; Kafka's bracketed lists are accepted)." },
    TopicKey { name: "compression.type", kind: ConfigType::String, synonyms: &[syn("compression.type")], default: "producer", rule: Rule::OneOf(&["producer"]), effect: Effect::Only("producer"), doc: "Batches are stored as the producer compressed them (`producer`); recompression by the broker is not available in tidemark." },
    TopicKey { name: "compression.gzip.level", kind: ConfigType::Int, synonyms: &[syn("compression.gzip.level")], default: "-1", rule: Rule::IntOr { or: -1, min: 1, max: 9 }, effect: Effect::Inert, doc: "The gzip level when the broker recompresses; tidemark never does (compression.type=producer)." },
    TopicKey { name: "compression.lz4.level", kind: ConfigType::Int, synonyms: &[syn("compression.lz4.level")], default: "9", rule: Rule::Int { min: 1, max: 17 }, effect: Effect::Inert, doc: "The lz4 level when the broker recompresses; tidemark never does (compression.type=producer)." },
    TopicKey { name: "compression.zstd.level", kind: ConfigType::Int, synonyms: &[syn("compression.zstd.level")], default: "3", rule: Rule::Int { min: -131072, max: 22 }, effect: Effect::Inert, doc: "The zstd level when the broker recompresses; tidemark never does (compression.type=producer)." },
    TopicKey { name: "delete.retention.ms", kind: ConfigType::Long, synonyms: &[syn("log.cleaner.delete.retention.ms")], default: "86400000", rule: Rule::Int { min: 0, max: MAX }, effect: Effect::Applied, doc: "How long compaction keeps delete tombstones (and markers of emptied transactions) readable after the pass that first kept them." },
    TopicKey { name: "file.delete.delay.ms", kind: ConfigType::Long, synonyms: &[syn("log.segment.delete.delay.ms")], default: "60000", rule: Rule::Int { min: 0, max: MAX }, effect: Effect::Inert, doc: "How long Kafka waits before deleting a removed segment's files; tidemark deletes them at once." },
    TopicKey { name: "flush.messages", kind: ConfigType::Long, synonyms: &[syn("log.flush.interval.messages")], default: "1", rule: Rule::Int { min: 1, max: MAX }, effect: Effect::Applied, doc: "Records appended since the last flush after which an append waits for its fdatasync (1: every acknowledged record is durable)." },
    TopicKey { name: "flush.ms", kind: ConfigType::Long, synonyms: &[syn("log.flush.interval.ms"), syn("log.flush.scheduler.interval.ms")], default: "1000", rule: Rule::Int { min: 0, max: MAX }, effect: Effect::Applied, doc: "The longest appended data waits for its fdatasync." },
    TopicKey { name: "follower.replication.throttled.replicas", kind: ConfigType::List, synonyms: &[], default: "", rule: Rule::Replicas, effect: Effect::Inert, doc: "Replicas whose replication is throttled on the follower side; one replica here." },
    TopicKey { name: "index.interval.bytes", kind: ConfigType::Int, synonyms: &[syn("log.index.interval.bytes")], default: "4096", rule: Rule::Int { min: 0, max: I32 }, effect: Effect::Applied, doc: "Bytes of batches between two offset-index entries." },
    TopicKey { name: "leader.replication.throttled.replicas", kind: ConfigType::List, synonyms: &[], default: "", rule: Rule::Replicas, effect: Effect::Inert, doc: "Replicas whose replication is throttled on the leader side; one replica here." },
    TopicKey { name: "local.retention.bytes", kind: ConfigType::Long, synonyms: &[syn("log.local.retention.bytes")], default: "-2", rule: Rule::Int { min: -2, max: MAX }, effect: Effect::Inert, doc: "Local retention with tiered storage; no effect without it (-2: retention.bytes)." },
    TopicKey { name: "local.retention.ms", kind: ConfigType::Long, synonyms: &[syn("log.local.retention.ms")], default: "-2", rule: Rule::Int { min: -2, max: MAX }, effect: Effect::Inert, doc: "Local retention with tiered storage; no effect without it (-2: retention.ms)." },
    TopicKey { name: "max.compaction.lag.ms", kind: ConfigType::Long, synonyms: &[syn("log.cleaner.max.compaction.lag.ms")], default: "9223372036854775807", rule: Rule::Int { min: 1, max: MAX }, effect: Effect::Applied, doc: "A partition whose oldest dirty segment is older than this is compacted whatever its dirty ratio." },
    TopicKey { name: "max.message.bytes", kind: ConfigType::Int, synonyms: &[syn("message.max.bytes")], default: "1048588", rule: Rule::Int { min: 61, max: I32 }, effect: Effect::Applied, doc: "The largest record batch a producer may append, whole (MESSAGE_TOO_LARGE beyond)." },
    TopicKey { name: "max.message.time.difference.ms", kind: ConfigType::Long, synonyms: &[syn("max.message.time.difference.ms")], default: "9223372036854775807", rule: Rule::Unlimited, effect: Effect::Applied, doc: "How far a CreateTime timestamp may stray from the broker's clock either way (tidemark's name; the tighter of it and its aliases wins)." },
    TopicKey { name: "message.downconversion.enable", kind: ConfigType::Boolean, synonyms: &[syn("log.message.downconversion.enable")], default: "true", rule: Rule::Flag, effect: Effect::Applied, doc: "Whether fetches of older versions get newer batches down-converted; false answers them UNSUPPORTED_VERSION." },
    TopicKey { name: "message.format.version", kind: ConfigType::String, synonyms: &[syn("log.message.format.version")], default: "3.0-IV1", rule: Rule::Version, effect: Effect::Inert, doc: "Deprecated; ignored, as by Kafka 3 (batches are stored as produced)." },
    TopicKey { name: "message.timestamp.after.max.ms", kind: ConfigType::Long, synonyms: &[syn("log.message.timestamp.after.max.ms")], default: "9223372036854775807", rule: Rule::Unlimited, effect: Effect::Applied, doc: "How far in the future a CreateTime timestamp may be (KIP-937)." },
    TopicKey { name: "message.timestamp.before.max.ms", kind: ConfigType::Long, synonyms: &[syn("log.message.timestamp.before.max.ms")], default: "9223372036854775807", rule: Rule::Unlimited, effect: Effect::Applied, doc: "How far in the past a CreateTime timestamp may be (KIP-937)." },
    TopicKey { name: "message.timestamp.difference.max.ms", kind: ConfigType::Long, synonyms: &[syn("log.message.timestamp.difference.max.ms")], default: "9223372036854775807", rule: Rule::Unlimited, effect: Effect::Applied, doc: "How far a CreateTime timestamp may stray from the broker's clock either way." },
    TopicKey { name: "message.timestamp.type", kind: ConfigType::String, synonyms: &[syn("log.message.timestamp.type")], default: "CreateTime", rule: Rule::OneOf(&["CreateTime", "LogAppendTime"]), effect: Effect::Applied, doc: "CreateTime (the producer's timestamps) or LogAppendTime (the broker's)." },
    TopicKey { name: "min.cleanable.dirty.ratio", kind: ConfigType::Double, synonyms: &[syn("log.cleaner.min.cleanable.ratio")], default: "0.5", rule: Rule::Ratio, effect: Effect::Applied, doc: "Compaction starts once this share of the cleanable log is dirty (written since the last pass)." },
    TopicKey { name: "min.compaction.lag.ms", kind: ConfigType::Long, synonyms: &[syn("log.cleaner.min.compaction.lag.ms")], default: "0", rule: Rule::Int { min: 0, max: MAX }, effect: Effect::Applied, doc: "The shortest a record stays uncompacted: a segment holding a younger record is not cleaned." },
    TopicKey { name: "min.insync.replicas", kind: ConfigType::Int, synonyms: &[syn("min.insync.replicas")], default: "1", rule: Rule::Int { min: 1, max: I32 }, effect: Effect::Applied, doc: "Replicas that must have a record before acks=all answers; above 1 (one replica here) acks=all fails with NOT_ENOUGH_REPLICAS." },
    TopicKey { name: "preallocate", kind: ConfigType::Boolean, synonyms: &[syn("log.preallocate")], default: "true", rule: Rule::Flag, effect: Effect::Only("true"), doc: "Segment files are always preallocated (fallocate, tidemark.preallocate.bytes steps)." },
    TopicKey { name: "producer.id.expiration.ms", kind: ConfigType::Long, synonyms: &[syn("producer.id.expiration.ms")], default: "86400000", rule: Rule::Int { min: 1, max: MAX }, effect: Effect::Applied, doc: "An idempotent producer not heard of for this long is forgotten." },
    TopicKey { name: "remote.log.copy.disable", kind: ConfigType::Boolean, synonyms: &[], default: "false", rule: Rule::Flag, effect: Effect::Inert, doc: "Tiered storage; not available in tidemark." },
    TopicKey { name: "remote.log.delete.on.disable", kind: ConfigType::Boolean, synonyms: &[], default: "false", rule: Rule::Flag, effect: Effect::Inert, doc: "Tiered storage; not available in tidemark." },
    TopicKey { name: "remote.storage.enable", kind: ConfigType::Boolean, synonyms: &[], default: "false", rule: Rule::Flag, effect: Effect::Only("false"), doc: "Tiered storage; not available in tidemark." },
    TopicKey { name: "retention.bytes", kind: ConfigType::Long, synonyms: &[syn("log.retention.bytes")], default: "-1", rule: Rule::Unlimited, effect: Effect::Applied, doc: "Delete the oldest segments while the partition is larger (-1: unlimited)." },
    TopicKey { name: "retention.ms", kind: ConfigType::Long, synonyms: &[syn("log.retention.ms"), Synonym { name: "log.retention.minutes", scale: 60_000 }, Synonym { name: "log.retention.hours", scale: HOUR_MS }], default: "604800000", rule: Rule::Unlimited, effect: Effect::Applied, doc: "Delete segments whose largest timestamp is older (-1: unlimited)." },
    TopicKey { name: "segment.bytes", kind: ConfigType::Int, synonyms: &[syn("log.segment.bytes")], default: "1073741824", rule: Rule::Int { min: 1024, max: I32 }, effect: Effect::Applied, doc: "Roll the active segment before it would pass this size." },
    TopicKey { name: "segment.index.bytes", kind: ConfigType::Int, synonyms: &[syn("log.index.size.max.bytes")], default: "10485760", rule: Rule::Int { min: 8, max: I32 }, effect: Effect::Applied, doc: "The largest offset index of a segment; a full index rolls it." },
    TopicKey { name: "segment.jitter.ms", kind: ConfigType::Long, synonyms: &[syn("log.roll.jitter.ms"), Synonym { name: "log.roll.jitter.hours", scale: HOUR_MS }], default: "0", rule: Rule::Int { min: 0, max: MAX }, effect: Effect::Only("0"), doc: "Random jitter on segment.ms; not available in tidemark (rolls follow SPEC T7.1 exactly)." },
    TopicKey { name: "segment.ms", kind: ConfigType::Long, synonyms: &[syn("log.roll.ms"), Synonym { name: "log.roll.hours", scale: HOUR_MS }], default: "604800000", rule: Rule::Int { min: 1, max: MAX }, effect: Effect::Applied, doc: "Roll a non-empty active segment this long after the partition's largest timestamp (idle), or before a batch this much newer than the segment's first (busy)." },
    TopicKey { name: "tidemark.max.inflight.writes", kind: ConfigType::Int, synonyms: &[syn("tidemark.max.inflight.writes")], default: "8", rule: Rule::Int { min: 1, max: 1024 }, effect: Effect::Applied, doc: "DMA writes a flush keeps in flight." },
    TopicKey { name: "tidemark.max.unflushed.bytes", kind: ConfigType::Long, synonyms: &[syn("tidemark.max.unflushed.bytes")], default: "67108864", rule: Rule::Int { min: 4096, max: MAX }, effect: Effect::Applied, doc: "Appended bytes not yet durable after which an append waits for its flush." },
    TopicKey { name: "tidemark.preallocate.bytes", kind: ConfigType::Long, synonyms: &[syn("tidemark.preallocate.bytes")], default: "33554432", rule: Rule::Pages { min: 0, max: I32 }, effect: Effect::Applied, doc: "The fallocate step of segment files." },
    TopicKey { name: "tidemark.write.chunk.bytes", kind: ConfigType::Long, synonyms: &[syn("tidemark.write.chunk.bytes")], default: "1048576", rule: Rule::Pages { min: 4096, max: 64 * MIB as i64 }, effect: Effect::Applied, doc: "The size of the aligned write buffers (one DMA write each)." },
    TopicKey { name: "tidemark.zero.ahead.bytes", kind: ConfigType::Long, synonyms: &[syn("tidemark.zero.ahead.bytes")], default: "1048576", rule: Rule::Pages { min: 0, max: I32 }, effect: Effect::Applied, doc: "How far past an active segment's data the flusher keeps its file written with zeros, in 128 KiB writes while a flush syncs (0: off); appends then land on written blocks and their fdatasync needs no journal commit." },
    TopicKey { name: "time.index.interval.ms", kind: ConfigType::Long, synonyms: &[syn("time.index.interval.ms")], default: "1000", rule: Rule::Int { min: 1, max: MAX }, effect: Effect::Applied, doc: "The bucket width of the time index (SPEC T5.2)." },
    TopicKey { name: "unclean.leader.election.enable", kind: ConfigType::Boolean, synonyms: &[syn("unclean.leader.election.enable")], default: "false", rule: Rule::Flag, effect: Effect::Inert, doc: "Leader election among replicas; one replica here." },
];

/// The topic setting `name`, if it is one.
pub fn topic_key(name: &str) -> Option<&'static TopicKey> {
    TOPIC_KEYS.iter().find(|k| k.name == name)
}

/// The topic setting a broker setting gives the default of, and the unit factor.
pub fn topic_key_of_broker_name(name: &str) -> Option<(&'static TopicKey, u64)> {
    TOPIC_KEYS.iter().find_map(|k| k.synonyms.iter().find(|s| s.name == name).map(|s| (k, s.scale)))
}

/// What values a topic setting takes, as Kafka validates it (its `ConfigDef` type and
/// validator), and what the value means once taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// An integer from `min` to `max`.
    Int { min: i64, max: i64 },
    /// `or`, or an integer from `min` to `max` (gzip's -1 for the codec's default).
    IntOr { or: i64, min: i64, max: i64 },
    /// An integer from `min` to `max` that is a multiple of the 4096-byte page.
    Pages { min: i64, max: i64 },
    /// At least 0, or -1 (and Kafka's default, Long.MAX_VALUE) for unlimited.
    Unlimited,
    /// A number from 0 to 1.
    Ratio,
    /// `true` or `false`.
    Flag,
    /// One of these words, as written.
    OneOf(&'static [&'static str]),
    /// One or more of these words, separated by commas, optionally in brackets (Kafka's lists).
    ListOf(&'static [&'static str]),
    /// A Kafka version (`message.format.version`): see [`super::kafka_version`].
    Version,
    /// Empty, `*`, or `partition:broker` pairs separated by commas (the throttled replicas).
    Replicas,
}

/// A value taken by its setting's [`Rule`].
#[derive(Debug, Clone, PartialEq)]
pub enum Taken {
    /// An integer within the rule's bounds.
    Int(i64),
    /// A bound; `None` is unlimited.
    Limit(Option<u64>),
    Ratio(f64),
    Flag(bool),
    /// The words given, each one of the rule's (a [`Rule::OneOf`] gives one).
    Words(Vec<&'static str>),
    /// A value that is kept as written (a version, replicas).
    Text,
}

impl Rule {
    /// Take `value` for `key`, or say what the rule wants.
    pub fn take(&self, key: &str, value: &str) -> Result<Taken, ConfigError> {
        let v = value.trim();
        Ok(match *self {
            Rule::Int { min, max } => Taken::Int(in_range(key, value, min, max)?),
            Rule::IntOr { or, min, max } => match parse_i64(key, value)? {
                n if n == or || (min..=max).contains(&n) => Taken::Int(n),
                _ => return Err(bad(key, value, format!("must be {or} or between {min} and {max}"))),
            },
            Rule::Pages { min, max } => {
                let n = in_range(key, value, min, max)?;
                if n % crate::io::PAGE as i64 != 0 {
                    return Err(bad(key, value, "must be a multiple of 4096"));
                }
                Taken::Int(n)
            }
            Rule::Unlimited => match parse_i64(key, value)? {
                -1 | i64::MAX => Taken::Limit(None),
                n if n >= 0 => Taken::Limit(Some(n as u64)),
                _ => return Err(bad(key, value, "must be at least 0 (or -1 for unlimited)")),
            },
            Rule::Ratio => match v.parse::<f64>() {
                Ok(r) if (0.0..=1.0).contains(&r) => Taken::Ratio(r),
                _ => return Err(bad(key, value, "must be a number between 0 and 1")),
            },
            Rule::Flag => match v {
                "true" => Taken::Flag(true),
                "false" => Taken::Flag(false),
                _ => return Err(bad(key, value, "must be true or false")),
            },
            Rule::OneOf(words) => match words.iter().find(|w| **w == v) {
                Some(w) => Taken::Words(vec![w]),
                None => return Err(bad(key, value, format!("must be {}", words.join(" or ")))),
            },
            Rule::ListOf(words) => Taken::Words(list_of(key, value, words)?),
            Rule::Version => {
                super::kafka_version(key, value)?;
                Taken::Text
            }
            Rule::Replicas => {
                let pair = |p: &str| {
                    p.trim().split_once(':').is_some_and(|(a, b)| a.parse::<u32>().is_ok() && b.parse::<u32>().is_ok())
                };
                if !(v.is_empty() || v == "*" || v.split(',').all(pair)) {
                    return Err(bad(key, value, "must be empty, * or partition:broker pairs separated by commas"));
                }
                Taken::Text
            }
        })
    }

    /// The values the rule takes, for the docs.
    pub fn describe(&self) -> String {
        let n = |v: i64| match v {
            i64::MAX => "2^63-1".to_string(),
            v if v == i32::MAX as i64 => "2^31-1".to_string(),
            v => v.to_string(),
        };
        match *self {
            Rule::Int { min, max } => format!("{} to {}", n(min), n(max)),
            Rule::IntOr { or, min, max } => format!("{or}, or {} to {}", n(min), n(max)),
            Rule::Pages { min, max } => format!("{} to {}, a multiple of 4096", n(min), n(max)),
            Rule::Unlimited => "0 to 2^63-1; -1: unlimited".to_string(),
            Rule::Ratio => "0 to 1".to_string(),
            Rule::Flag => "true, false".to_string(),
            Rule::OneOf(words) => words.join(", "),
            Rule::ListOf(words) => format!("a list of {}", words.join(", ")),
            Rule::Version => "a Kafka version (0.10.0, 2.8, 3.0-IV1)".to_string(),
            Rule::Replicas => "empty, *, or partition:broker pairs".to_string(),
        }
    }
}

fn parse_i64(key: &str, value: &str) -> Result<i64, ConfigError> {
    value.trim().parse::<i64>().map_err(|_| bad(key, value, "not an integer"))
}

fn in_range(key: &str, value: &str, min: i64, max: i64) -> Result<i64, ConfigError> {
    let v = parse_i64(key, value)?;
    if v < min || v > max {
        return Err(bad(key, value, format!("must be between {min} and {max}")));
    }
    Ok(v)
}

/// A list of `words` (commas, optionally in brackets, as Kafka's list parser takes them), in
/// the rule's order whatever the order given. Empty or unknown entries are refused.
fn list_of(key: &str, value: &str, words: &'static [&'static str]) -> Result<Vec<&'static str>, ConfigError> {
    let v = value.trim();
    let v = v.strip_prefix('[').and_then(|v| v.strip_suffix(']')).unwrap_or(v);
    let mut given = Vec::new();
    for item in v.split(',') {
        match words.iter().find(|w| **w == item.trim()) {
            Some(w) => given.push(*w),
            None => return Err(bad(key, value, format!("must be a list of {}", words.join(", ")))),
        }
    }
    Ok(words.iter().copied().filter(|w| given.contains(w)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LogConfig;

    /// The table is the one source of the defaults: each default is taken by its own rule,
    /// `LogConfig::default()` shows exactly the table's defaults, and a setting held to one
    /// value defaults to it.
    #[test]
    fn defaults_come_from_the_table() {
        let shown = LogConfig::default().describe();
        for k in TOPIC_KEYS {
            assert!(k.rule.take(k.name, k.default).is_ok(), "{}: its default {:?} breaks its rule", k.name, k.default);
            assert_eq!(shown[k.name], k.default, "{}", k.name);
            if let Effect::Only(only) = k.effect {
                assert_eq!(only, k.default, "{}", k.name);
            }
        }
    }

    /// Every applied setting takes values its field holds: integer rules start at 0 or more,
    /// and the bounds of each rule are taken and the values just outside refused.
    #[test]
    fn rules_hold_their_bounds() {
        for k in TOPIC_KEYS {
            let (min, max) = match k.rule {
                Rule::Int { min, max } | Rule::Pages { min, max } | Rule::IntOr { min, max, .. } => (min, max),
                _ => continue,
            };
            if k.effect == Effect::Applied {
                assert!(min >= 0, "{}: an applied setting's field is unsigned", k.name);
            }
            let page = |v: i64| if matches!(k.rule, Rule::Pages { .. }) { v / 4096 * 4096 } else { v };
            if let Effect::Only(_) = k.effect {
                continue;
            }
            let mut c = LogConfig::default();
            for v in [page(min), page(max)] {
                c.set(k.name, &v.to_string()).unwrap_or_else(|e| panic!("{}: {v}: {e}", k.name));
            }
            if min > i64::MIN && !matches!(k.rule, Rule::IntOr { or, .. } if or == min - 1) {
                assert!(c.set(k.name, &(min - 1).to_string()).is_err(), "{}: {} taken", k.name, min - 1);
            }
            if max < i64::MAX {
                assert!(c.set(k.name, &(max + 1).to_string()).is_err(), "{}: {} taken", k.name, max + 1);
            }
        }
    }

    /// The rules beside integers, as Kafka validates those settings.
    #[test]
    fn other_rules() {
        let take = |r: Rule, v: &str| r.take("k", v);
        assert_eq!(take(Rule::Unlimited, "-1"), Ok(Taken::Limit(None)));
        assert_eq!(take(Rule::Unlimited, &i64::MAX.to_string()), Ok(Taken::Limit(None)));
        assert_eq!(take(Rule::Unlimited, "0"), Ok(Taken::Limit(Some(0))));
        assert!(take(Rule::Unlimited, "-2").is_err());
        assert_eq!(take(Rule::IntOr { or: -1, min: 1, max: 9 }, "-1"), Ok(Taken::Int(-1)));
        assert!(take(Rule::IntOr { or: -1, min: 1, max: 9 }, "0").is_err());
        assert_eq!(take(Rule::Ratio, "0.25"), Ok(Taken::Ratio(0.25)));
        assert!(take(Rule::Ratio, "1.01").is_err());
        assert!(take(Rule::Ratio, "NaN").is_err());
        assert!(take(Rule::Flag, "True").is_err());
        assert!(take(Rule::OneOf(&["CreateTime"]), "createtime").is_err());
        let policy = Rule::ListOf(&["compact", "delete"]);
        assert_eq!(take(policy, "[delete, compact]"), Ok(Taken::Words(vec!["compact", "delete"])));
        assert!(take(policy, "compact,,delete").is_err());
        assert!(take(Rule::Pages { min: 0, max: 1 << 20 }, "4097").is_err());
        assert_eq!(take(Rule::Replicas, "0:1, 1:2"), Ok(Taken::Text));
        assert!(take(Rule::Replicas, "0-1").is_err());
    }
}
