//! The names of the settings Kafka's broker and controller take in `server.properties`
//! (`kafka_broker_names.txt`: every name of the configuration definitions Kafka's `KafkaConfig`
//! is built from, with where the list came from; `kafka_broker_names.md` tells how), so a file written for Kafka is read as
//! Kafka reads it: a setting Kafka knows but tidemark does not use is accepted and reported as
//! unused, a name neither knows is reported with the closest known name.

use std::collections::BTreeSet;
use std::sync::OnceLock;

const NAMES: &str = include_str!("kafka_broker_names.txt");

/// Settings Kafka's broker reads outside its configuration definitions: the authorizer's, JMX
/// metrics' and the ones only set dynamically (`kafka_broker_names.md`).
const OUTSIDE_CONFIG_DEFS: &[&str] = &[
    "super.users",
    "allow.everyone.if.no.acl.found",
    "metrics.jmx.include",
    "metrics.jmx.exclude",
    "leader.replication.throttled.rate",
    "follower.replication.throttled.rate",
    "replica.alter.log.dirs.io.max.bytes.per.second",
];

/// Families of settings Kafka reads by prefix: config providers, metrics context labels,
/// remote storage plug-ins' own settings.
const PREFIXES: &[&str] = &["config.providers", "metrics.context.", "rsm.config.", "rlmm.config."];

fn names() -> &'static BTreeSet<&'static str> {
    static SET: OnceLock<BTreeSet<&'static str>> = OnceLock::new();
    SET.get_or_init(|| NAMES.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).collect())
}

/// Whether Kafka's broker knows the setting `name`. A listener's own value
/// (`listener.name.<listener>.<setting>`, or `listener.name.<listener>.<mechanism>.<setting>`
/// for SASL's per-mechanism ones) counts as its setting, as Kafka reads it.
pub fn knows(name: &str) -> bool {
    if names().contains(name) || OUTSIDE_CONFIG_DEFS.contains(&name) {
        return true;
    }
    if PREFIXES.iter().any(|p| name.starts_with(p)) {
        return true;
    }
    let Some(rest) = name.strip_prefix("listener.name.").and_then(|r| r.split_once('.')).map(|(_, s)| s) else {
        return false;
    };
    names().contains(rest) || rest.split_once('.').is_some_and(|(_, s)| names().contains(s))
}

/// Every name Kafka's broker knows, sorted.
pub fn all() -> impl Iterator<Item = &'static str> {
    names().iter().copied()
}

/// The name among `candidates` closest to `name` by edit distance, when it is close enough to be
/// a likely misspelling (at most a quarter of the name's length, and at least 2, edits away).
pub fn closest<'a>(name: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    // No setting name is this long: an absurd key is not compared with every name.
    if name.len() > MAX_NAME {
        return None;
    }
    let limit = (name.len() / 4).max(2);
    candidates
        .map(|c| (edit_distance(name, c), c))
        .filter(|(d, _)| *d <= limit)
        .min_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(b.1)))
        .map(|(_, c)| c)
}

/// Longer than any setting name (Kafka's longest is under 80 characters).
const MAX_NAME: usize = 200;

/// Levenshtein distance (insertions, deletions and substitutions of characters).
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = if ca == cb { diagonal } else { 1 + diagonal.min(above).min(row[j]) };
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The list holds what Kafka 4.1's shipped files and common operators' files set, and
    /// per-listener forms count as their setting.
    #[test]
    fn kafkas_names() {
        for name in [
            "num.network.threads",
            "num.io.threads",
            "socket.send.buffer.bytes",
            "num.recovery.threads.per.data.dir",
            "share.coordinator.state.topic.replication.factor",
            "group.initial.rebalance.delay.ms",
            "controller.quorum.bootstrap.servers",
            "log.retention.hours",
            "metric.reporters",
        ] {
            assert!(knows(name), "{name}");
        }
        assert!(knows("listener.name.internal.ssl.keystore.location"));
        assert!(knows("listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config"));
        assert!(knows("super.users") && knows("config.providers.file.class"));
        assert!(!knows("num.netwrok.threads"));
        assert!(!knows("listener.name.internal.no.such.thing"));
        assert!(names().len() > 300, "{} names", names().len());
    }

    #[test]
    fn closest_names() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(closest("num.netwrok.threads", all()), Some("num.network.threads"));
        assert_eq!(closest("log.retention.hour", all()), Some("log.retention.hours"));
        assert_eq!(closest("completely.different", all()), None);
        assert_eq!(closest(&"x".repeat(100_000), all()), None, "an absurd key is not compared");
    }
}
