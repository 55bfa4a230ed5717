//! Version-valued settings, read as Kafka reads them.

use super::{bad, ConfigError};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LogConfig;

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
}
