//! Cluster-wide feature levels (KIP-584), as Kafka 4 finalizes them: each feature a broker
//! supports has a range of levels, and the cluster runs at one finalized level of each, shown to
//! clients in ApiVersions and changed with UpdateFeatures (all the updates of a request or
//! none). tidemark serves the two features clients act on:
//!
//! - `transaction.version`: 0 and 1 the original transaction protocol (1 writes the
//!   `__transaction_state` values at version 1), 2 transactions version 2 (KIP-890 part 2): a
//!   Java client 4 uses it only when the cluster finalized level 2.
//! - `group.version`: 1 enables the consumer group protocol (KIP-848, ConsumerGroupHeartbeat).
//!
//! A new cluster starts at the newest levels (Kafka 4.1's defaults for a new cluster). A
//! standalone node keeps the levels in `<data-dir>/features`; a clustered one in the metadata
//! quorum. The text is `name=level` lines, and `epoch=N`, which counts the changes (ApiVersions'
//! `FinalizedFeaturesEpoch`).

use crate::protocol::errors::{self as code, ErrorCode};
use std::collections::BTreeMap;

/// The file (standalone) and the metadata document (clustered) holding the finalized levels.
pub const FEATURES_FILE: &str = "features";

pub const TRANSACTION_VERSION: &str = "transaction.version";
pub const GROUP_VERSION: &str = "group.version";

/// A feature this broker supports: its name, the levels it takes, and a new cluster's level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Feature {
    pub name: &'static str,
    pub min: i16,
    pub max: i16,
    pub default: i16,
}

/// Every feature this broker supports, by name.
pub const SUPPORTED: [Feature; 2] = [
    Feature { name: GROUP_VERSION, min: 0, max: 1, default: 1 },
    Feature { name: TRANSACTION_VERSION, min: 0, max: 2, default: 2 },
];

/// How an update may move a level (UpdateFeatures' `UpgradeType`; v0's `AllowDowngrade` is a
/// safe downgrade).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpgradeType {
    Upgrade,
    SafeDowngrade,
    UnsafeDowngrade,
}

impl UpgradeType {
    /// The wire value's meaning (`None`: Kafka's UNKNOWN and anything else).
    pub fn from_wire(v: i8) -> Option<UpgradeType> {
        match v {
            1 => Some(UpgradeType::Upgrade),
            2 => Some(UpgradeType::SafeDowngrade),
            3 => Some(UpgradeType::UnsafeDowngrade),
            _ => None,
        }
    }
}

/// One requested change: a feature to a level (0: not finalized) by an upgrade type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Update {
    pub feature: String,
    pub level: i16,
    pub kind: Option<UpgradeType>,
}

/// The finalized levels and the epoch of their last change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Features {
    levels: BTreeMap<String, i16>,
    pub epoch: i64,
}

impl Default for Features {
    /// A new cluster's: every supported feature at its default, epoch 0.
    fn default() -> Self {
        Features { levels: SUPPORTED.iter().map(|f| (f.name.to_string(), f.default)).collect(), epoch: 0 }
    }
}

impl Features {
    /// The finalized level of `name` (0 when not finalized).
    pub fn level(&self, name: &str) -> i16 {
        self.levels.get(name).copied().unwrap_or(0)
    }

    /// The finalized features, levels above 0 only (as ApiVersions lists them).
    pub fn finalized(&self) -> impl Iterator<Item = (&str, i16)> {
        self.levels.iter().filter(|(_, l)| **l > 0).map(|(n, l)| (n.as_str(), *l))
    }

    /// The levels after `updates`, all of them or none (Kafka's `FeatureControlManager`): the
    /// first refused one's error (INVALID_UPDATE_VERSION, or INVALID_REQUEST for a feature
    /// named twice) with Kafka's message. The epoch is the caller's to set.
    pub fn updated(&self, updates: &[Update], node_id: i32) -> Result<Features, (ErrorCode, String)> {
        let mut next = self.clone();
        for (i, u) in updates.iter().enumerate() {
            if updates[..i].iter().any(|v| v.feature == u.feature) {
                return Err((code::INVALID_REQUEST, format!("Feature {} was specified more than once.", u.feature)));
            }
            let invalid = |why: String| {
                Err((
                    code::INVALID_UPDATE_VERSION,
                    format!("Invalid update version {} for feature {}. {why}", u.level, u.feature),
                ))
            };
            let Some(kind) = u.kind else {
                return invalid("The controller does not support the given upgrade type.".into());
            };
            if u.level < 0 {
                return invalid("A feature version cannot be less than 0.".into());
            }
            let Some(f) = SUPPORTED.iter().find(|f| f.name == u.feature) else {
                return invalid(format!("Local controller {node_id} does not support this feature."));
            };
            if !(f.min..=f.max).contains(&u.level) {
                return invalid(format!("Local controller {node_id} only supports versions [{}-{}]", f.min, f.max));
            }
            let current = self.level(&u.feature);
            if u.level < current && kind == UpgradeType::Upgrade {
                return invalid(
                    "Can't downgrade the version of this feature without setting the upgrade type to either safe \
                     or unsafe downgrade."
                        .into(),
                );
            }
            if u.level > current && kind != UpgradeType::Upgrade {
                return invalid("Can't downgrade to a newer version.".into());
            }
            next.levels.insert(u.feature.clone(), u.level);
        }
        Ok(next)
    }

    /// As the file and the metadata document hold them.
    pub fn encode(&self) -> String {
        let mut out = String::from("# Finalized feature levels (UpdateFeatures); written by tidemark.\n");
        out.push_str(&format!("epoch={}\n", self.epoch));
        for (name, level) in &self.levels {
            out.push_str(&format!("{name}={level}\n"));
        }
        out
    }

    /// Read [`Features::encode`]'s text: unknown features are kept (a newer broker's), a level
    /// outside a known feature's range is an error.
    pub fn decode(text: &str) -> Result<Features, String> {
        let mut levels = BTreeMap::new();
        let mut epoch = 0;
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (k, v) = line.split_once('=').ok_or_else(|| format!("line {}: expected name=level", n + 1))?;
            let (k, v) = (k.trim(), v.trim());
            if k == "epoch" {
                epoch = v.parse().map_err(|_| format!("line {}: bad epoch {v:?}", n + 1))?;
                continue;
            }
            let level: i16 = v.parse().map_err(|_| format!("line {}: bad level {v:?} for {k}", n + 1))?;
            if let Some(f) = SUPPORTED.iter().find(|f| f.name == k) {
                if !(f.min..=f.max).contains(&level) {
                    return Err(format!("line {}: {k}={level} is outside [{}-{}]", n + 1, f.min, f.max));
                }
            }
            levels.insert(k.to_string(), level);
        }
        // A feature the file does not name is at 0 (not finalized): the file says all there is.
        Ok(Features { levels, epoch })
    }

    /// `<data_dir>/features`, or a new cluster's levels when there is none.
    pub fn load(data_dir: &std::path::Path) -> anyhow::Result<Features> {
        crate::io::load_text(&data_dir.join(FEATURES_FILE), Features::decode)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn up(feature: &str, level: i16, kind: UpgradeType) -> Update {
        Update { feature: feature.into(), level, kind: Some(kind) }
    }

    /// A new cluster is at the newest levels, epoch 0; the text round-trips; a level outside a
    /// known range is refused, an unknown feature kept.
    #[test]
    fn defaults_and_text() {
        let f = Features::default();
        assert_eq!((f.level(TRANSACTION_VERSION), f.level(GROUP_VERSION), f.epoch), (2, 1, 0));
        assert_eq!(Features::decode(&f.encode()), Ok(f.clone()));
        assert!(Features::decode("transaction.version=3").is_err());
        assert!(Features::decode("transaction.version").is_err());
        let other = Features::decode("epoch=4\nshare.version=1\n").unwrap();
        assert_eq!((other.epoch, other.level("share.version"), other.level(TRANSACTION_VERSION)), (4, 1, 0));
        assert_eq!(f.finalized().collect::<Vec<_>>(), [(GROUP_VERSION, 1), (TRANSACTION_VERSION, 2)]);
    }

    /// Kafka's rules (`FeatureControlManager.updateFeature`): a downgrade needs a downgrade
    /// type, an upgrade the upgrade type; levels within the supported range; unknown features
    /// and upgrade types refused; one refusal refuses the whole request; level 0 takes the
    /// feature out of the finalized list.
    #[test]
    fn updates_follow_kafkas_rules() {
        use UpgradeType::*;
        let f = Features::default();
        let err = |r: Result<Features, (ErrorCode, String)>| r.unwrap_err();
        let (c, m) = err(f.updated(&[up(TRANSACTION_VERSION, 1, Upgrade)], 1));
        assert_eq!(c, code::INVALID_UPDATE_VERSION);
        assert!(m.starts_with("Invalid update version 1 for feature transaction.version. Can't downgrade"), "{m}");
        let down = f.updated(&[up(TRANSACTION_VERSION, 0, SafeDowngrade)], 1).unwrap();
        assert_eq!(down.level(TRANSACTION_VERSION), 0);
        assert_eq!(down.finalized().collect::<Vec<_>>(), [(GROUP_VERSION, 1)]);
        assert_eq!(err(down.updated(&[up(TRANSACTION_VERSION, 2, SafeDowngrade)], 1)).0, code::INVALID_UPDATE_VERSION);
        assert_eq!(down.updated(&[up(TRANSACTION_VERSION, 2, Upgrade)], 1).unwrap(), f);
        let (_, m) = err(f.updated(&[up(TRANSACTION_VERSION, 3, Upgrade)], 1));
        assert!(m.ends_with("Local controller 1 only supports versions [0-2]"), "{m}");
        let (_, m) = err(f.updated(&[up("metadata.version", 27, Upgrade)], 7));
        assert!(m.ends_with("Local controller 7 does not support this feature."), "{m}");
        let unknown = Update { feature: GROUP_VERSION.into(), level: 0, kind: None };
        assert_eq!(err(f.updated(&[unknown], 1)).0, code::INVALID_UPDATE_VERSION);
        let all_or_none = [up(GROUP_VERSION, 0, UnsafeDowngrade), up(TRANSACTION_VERSION, -1, SafeDowngrade)];
        assert_eq!(err(f.updated(&all_or_none, 1)).0, code::INVALID_UPDATE_VERSION);
        let twice = [up(GROUP_VERSION, 0, SafeDowngrade), up(GROUP_VERSION, 1, Upgrade)];
        assert_eq!(err(f.updated(&twice, 1)).0, code::INVALID_REQUEST);
        assert_eq!(f.updated(&[up(GROUP_VERSION, 1, Upgrade)], 1).unwrap(), f, "the same level: no change");
    }
}
