//! Topics: names, partition counts and per-topic config overrides, persisted in the data
//! directory so they survive restarts (SPEC T2: broker-wide defaults, per-topic overrides,
//! changeable at runtime, validated).
//!
//! One file per topic, `<data-dir>/topics/<topic>.topic`, replaced atomically on change:
//! ```text
//! tidemark-topic 2
//! id=<the topic id, KIP-516: 22 characters of URL-safe base64>
//! partitions=<n>
//! <key>=<value>          (one line per override, sorted)
//! crc32c=<8 hex digits>  (CRC-32C of every line above, newlines included)
//! ```
//! Version 1 (before topic ids) had no `id` line: such a topic gets an id the first time its
//! store opens, written back at once, and keeps it from then on.
//! Partition data lives in `<data-dir>/<topic>-<partition>/`.

use crate::config::{ConfigError, LogConfig};
use crate::io::Disk;
use crate::storage::error::StorageError;
use crate::types::Uuid;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Why a topic operation was refused.
#[derive(Debug, thiserror::Error)]
pub enum TopicError {
    #[error("topic {0} already exists")]
    AlreadyExists(String),
    #[error("topic {0} does not exist")]
    Unknown(String),
    #[error("invalid topic name {0:?}: {1}")]
    InvalidName(String, &'static str),
    #[error("invalid partition count {0}")]
    InvalidPartitions(i64),
    #[error("the topic {name} currently has {current} partition(s); {requested} would not be an increase")]
    NotAnIncrease { name: String, current: u32, requested: i64 },
    #[error(transparent)]
    InvalidConfig(#[from] ConfigError),
    #[error("corrupt topic file {0}: {1}")]
    Corrupt(PathBuf, String),
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error("cannot make a topic id: {0}")]
    NoId(std::io::Error),
}

impl From<crate::io::IoError> for TopicError {
    fn from(e: crate::io::IoError) -> Self {
        TopicError::Storage(e.into())
    }
}

/// Kafka's topic-name rules: 1 to 249 characters of `[a-zA-Z0-9._-]`, not `.` or `..`.
pub fn validate_topic_name(name: &str) -> Result<(), TopicError> {
    let bad = |why| Err(TopicError::InvalidName(name.to_string(), why));
    if name.is_empty() || name.len() > 249 {
        return bad("must be 1 to 249 characters");
    }
    if name == "." || name == ".." {
        return bad("cannot be '.' or '..'");
    }
    if name == "__cluster_metadata" {
        // KRaft's name: its partition 0's directory is the metadata log's.
        return bad("is reserved for the cluster's metadata log");
    }
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-') {
        return bad("may contain only ASCII letters, digits, '.', '_' and '-'");
    }
    Ok(())
}

/// One topic's persistent description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicMeta {
    pub name: String,
    /// The topic's id (KIP-516), made at creation and kept for its life.
    pub id: Uuid,
    pub partitions: u32,
    pub overrides: BTreeMap<String, String>,
}

impl TopicMeta {
    fn encode(&self) -> String {
        let mut s = format!("tidemark-topic 2\nid={}\npartitions={}\n", self.id, self.partitions);
        for (k, v) in &self.overrides {
            s.push_str(&format!("{k}={v}\n"));
        }
        let crc = crc32c::crc32c(s.as_bytes());
        s.push_str(&format!("crc32c={crc:08x}\n"));
        s
    }

    fn decode(name: &str, text: &str) -> Result<TopicMeta, String> {
        let body_end = text.rfind("crc32c=").ok_or("no checksum line")?;
        let (body, crc_line) = text.split_at(body_end);
        let crc = u32::from_str_radix(crc_line.trim().trim_start_matches("crc32c="), 16).map_err(|_| "bad checksum")?;
        if crc32c::crc32c(body.as_bytes()) != crc {
            return Err("checksum mismatch".into());
        }
        let mut lines = body.lines().peekable();
        // Version 1 had no id: it reads as zero (the store gives the topic one when it opens).
        let id = match lines.next() {
            Some("tidemark-topic 1") => Uuid::ZERO,
            Some("tidemark-topic 2") => lines
                .next()
                .and_then(|l| l.strip_prefix("id="))
                .and_then(Uuid::parse)
                .filter(|id| !id.is_zero())
                .ok_or("bad id line")?,
            _ => return Err("unknown version".into()),
        };
        let partitions = lines
            .next()
            .and_then(|l| l.strip_prefix("partitions="))
            .and_then(|v| v.parse().ok())
            .ok_or("bad partitions line")?;
        let mut overrides = BTreeMap::new();
        for l in lines {
            let (k, v) = l.split_once('=').ok_or("bad override line")?;
            overrides.insert(k.to_string(), v.to_string());
        }
        Ok(TopicMeta { name: name.to_string(), id, partitions, overrides })
    }
}

/// The topics of a data directory and the broker-wide defaults they override.
pub struct TopicStore<D: Disk> {
    disk: D,
    dir: PathBuf,
    defaults: LogConfig,
    topics: BTreeMap<String, TopicMeta>,
}

impl<D: Disk> TopicStore<D> {
    /// Load every topic file under `<data_dir>/topics`; a corrupt file or an override that
    /// no longer validates is an error naming the file (the broker refuses to start rather
    /// than serve a topic with the wrong settings).
    pub async fn open(disk: D, data_dir: &Path, defaults: LogConfig) -> Result<Self, TopicError> {
        let dir = data_dir.join("topics");
        disk.create_dir_all(&dir).await?;
        let mut topics = BTreeMap::new();
        for name in disk.list_dir(&dir).await? {
            let Some(topic) = name.strip_suffix(".topic") else { continue };
            let path = dir.join(&name);
            let bytes = disk.read_file(&path).await?.unwrap_or_default();
            let text = String::from_utf8(bytes).map_err(|_| TopicError::Corrupt(path.clone(), "not UTF-8".into()))?;
            let meta = TopicMeta::decode(topic, &text).map_err(|e| TopicError::Corrupt(path.clone(), e))?;
            defaults.with_overrides(meta.overrides.iter().map(|(k, v)| (k.as_str(), v.as_str())))?;
            topics.insert(topic.to_string(), meta);
        }
        let store = TopicStore { disk, dir, defaults, topics };
        // Topics written before topic ids get theirs now, durably, before anyone sees them.
        let mut upgraded = Vec::new();
        for meta in store.topics.values().filter(|m| m.id.is_zero()) {
            let meta = TopicMeta { id: Uuid::random().map_err(TopicError::NoId)?, ..meta.clone() };
            store.persist(&meta).await?;
            upgraded.push(meta);
        }
        let mut store = store;
        for meta in upgraded {
            store.topics.insert(meta.name.clone(), meta);
        }
        Ok(store)
    }

    pub fn defaults(&self) -> &LogConfig {
        &self.defaults
    }

    pub fn get(&self, name: &str) -> Option<&TopicMeta> {
        self.topics.get(name)
    }

    /// The name of the topic with this id.
    pub fn name_of(&self, id: Uuid) -> Option<&str> {
        self.topics.values().find(|m| m.id == id).map(|m| m.name.as_str())
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.topics.keys().map(|s| s.as_str())
    }

    /// The effective settings of a topic: the defaults with its overrides.
    pub fn config(&self, name: &str) -> Result<LogConfig, TopicError> {
        let meta = self.topics.get(name).ok_or_else(|| TopicError::Unknown(name.to_string()))?;
        Ok(self.defaults.with_overrides(meta.overrides.iter().map(|(k, v)| (k.as_str(), v.as_str())))?)
    }

    async fn persist(&self, meta: &TopicMeta) -> Result<(), TopicError> {
        let path = self.dir.join(format!("{}.topic", meta.name));
        self.disk.write_file_atomic(&path, meta.encode().as_bytes()).await?;
        Ok(())
    }

    /// Create a topic; every override is validated first (SPEC T2.5: INVALID_CONFIG).
    pub async fn create(
        &mut self,
        name: &str,
        partitions: i64,
        overrides: &[(&str, &str)],
    ) -> Result<LogConfig, TopicError> {
        let id = Uuid::random().map_err(TopicError::NoId)?;
        self.create_with_id(name, id, partitions, overrides).await
    }

    /// [`TopicStore::create`] with the id given (a clustered node takes the metadata's).
    pub async fn create_with_id(
        &mut self,
        name: &str,
        id: Uuid,
        partitions: i64,
        overrides: &[(&str, &str)],
    ) -> Result<LogConfig, TopicError> {
        validate_topic_name(name)?;
        if self.topics.contains_key(name) {
            return Err(TopicError::AlreadyExists(name.to_string()));
        }
        if !(1..=100_000).contains(&partitions) {
            return Err(TopicError::InvalidPartitions(partitions));
        }
        let config = self.defaults.with_overrides(overrides.iter().copied())?;
        let meta = TopicMeta {
            name: name.to_string(),
            id,
            partitions: partitions as u32,
            overrides: overrides.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        };
        self.persist(&meta).await?;
        self.topics.insert(name.to_string(), meta);
        Ok(config)
    }

    /// Set and remove overrides at runtime (AlterConfigs / IncrementalAlterConfigs); returns
    /// the new effective settings. Nothing changes if any value is refused.
    pub async fn alter(&mut self, name: &str, set: &[(&str, &str)], remove: &[&str]) -> Result<LogConfig, TopicError> {
        let mut overrides =
            self.topics.get(name).ok_or_else(|| TopicError::Unknown(name.to_string()))?.overrides.clone();
        for k in remove {
            overrides.remove(*k);
        }
        for (k, v) in set {
            overrides.insert(k.to_string(), v.to_string());
        }
        self.replace_overrides(name, overrides).await
    }

    /// Replace a topic's overrides; returns the new effective settings. Nothing changes if
    /// any value is refused.
    pub async fn replace_overrides(
        &mut self,
        name: &str,
        overrides: BTreeMap<String, String>,
    ) -> Result<LogConfig, TopicError> {
        let mut meta = self.topics.get(name).cloned().ok_or_else(|| TopicError::Unknown(name.to_string()))?;
        meta.overrides = overrides;
        let config = self.defaults.with_overrides(meta.overrides.iter().map(|(k, v)| (k.as_str(), v.as_str())))?;
        self.persist(&meta).await?;
        self.topics.insert(name.to_string(), meta);
        Ok(config)
    }

    /// The topics whose effective settings `defaults` would change, with their new settings,
    /// or the first topic whose overrides no longer validate against them.
    pub fn with_defaults(&self, defaults: &LogConfig) -> Result<Vec<(String, LogConfig)>, TopicError> {
        let mut changed = Vec::new();
        for (name, meta) in &self.topics {
            let pairs = || meta.overrides.iter().map(|(k, v)| (k.as_str(), v.as_str()));
            let new = defaults.with_overrides(pairs())?;
            if new != self.defaults.with_overrides(pairs())? {
                changed.push((name.clone(), new));
            }
        }
        Ok(changed)
    }

    /// Take new broker-wide defaults (dynamic broker settings); new topics and
    /// [`TopicStore::config`] use them.
    pub fn set_defaults(&mut self, defaults: LogConfig) {
        self.defaults = defaults;
    }

    /// CreatePartitions: raise a topic's partition count to `count` (never lower; at most
    /// 100000), persisted. Returns the old count and the topic's settings.
    pub async fn grow(&mut self, name: &str, count: i64, validate_only: bool) -> Result<(u32, LogConfig), TopicError> {
        let mut meta = self.topics.get(name).cloned().ok_or_else(|| TopicError::Unknown(name.to_string()))?;
        let current = meta.partitions;
        if count <= current as i64 {
            return Err(TopicError::NotAnIncrease { name: name.to_string(), current, requested: count });
        }
        if count > 100_000 {
            return Err(TopicError::InvalidPartitions(count));
        }
        let config = self.config(name)?;
        if !validate_only {
            meta.partitions = count as u32;
            self.persist(&meta).await?;
            self.topics.insert(name.to_string(), meta);
        }
        Ok((current, config))
    }

    /// Forget a topic (its partition directories are removed by the caller).
    pub async fn delete(&mut self, name: &str) -> Result<TopicMeta, TopicError> {
        let meta = self.topics.remove(name).ok_or_else(|| TopicError::Unknown(name.to_string()))?;
        self.disk.remove_file(&self.dir.join(format!("{name}.topic"))).await?;
        self.disk.sync_dir(&self.dir).await?;
        Ok(meta)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::MemDisk;
    use futures_lite::future::block_on;

    // spec: T2 — per-topic overrides over broker defaults, validated, persisted, changeable at
    // runtime; a refused change changes nothing.
    #[test]
    fn topics_persist_validate_and_alter() {
        block_on(async {
            let disk = MemDisk::new();
            let root = Path::new("/data");
            let defaults = LogConfig::default().with_overrides([("retention.ms", "1000")]).unwrap();
            let mut store = TopicStore::open(disk.clone(), root, defaults.clone()).await.unwrap();
            let c = store.create("orders", 3, &[("message.timestamp.type", "LogAppendTime")]).await.unwrap();
            assert_eq!(c.message_timestamp_type, crate::storage::format::TimestampType::LogAppendTime);
            assert_eq!(c.retention_ms, Some(1000), "broker default applies");
            assert!(matches!(store.create("orders", 1, &[]).await, Err(TopicError::AlreadyExists(_))));
            assert!(matches!(store.create("bad name", 1, &[]).await, Err(TopicError::InvalidName(..))));
            assert!(matches!(store.create("x", 0, &[]).await, Err(TopicError::InvalidPartitions(0))));
            assert!(matches!(store.create("y", 1, &[("segment.ms", "0")]).await, Err(TopicError::InvalidConfig(_))));
            assert!(store.get("y").is_none(), "a refused create leaves nothing");
            let c = store.alter("orders", &[("retention.ms", "5000")], &["message.timestamp.type"]).await.unwrap();
            assert_eq!(c.retention_ms, Some(5000));
            assert_eq!(c.message_timestamp_type, crate::storage::format::TimestampType::CreateTime);
            assert!(store.alter("orders", &[("retention.ms", "x")], &[]).await.is_err());
            assert_eq!(store.config("orders").unwrap().retention_ms, Some(5000), "refused alter changed nothing");
            // Restart: the same topics and settings.
            let store2 = TopicStore::open(disk.clone(), root, defaults.clone()).await.unwrap();
            assert_eq!(store2.get("orders").unwrap().partitions, 3);
            assert_eq!(store2.config("orders").unwrap(), store.config("orders").unwrap());
            // A corrupt topic file is refused with its name.
            let p = Path::new("/data/topics/orders.topic");
            let mut b = disk.file_bytes(p).unwrap();
            b[20] ^= 1;
            disk.set_file_bytes(p, b);
            let e = TopicStore::open(disk.clone(), root, defaults).await.err().unwrap();
            assert!(e.to_string().contains("orders.topic"), "{e}");
        });
    }
}
