//! The metadata state machine: the image every node applies from the metadata log ([`MetaImage`]:
//! brokers, topics with their partitions' replicas and leaders, configs, producer-id blocks), and
//! its snapshots.
//!
//! A snapshot is the image, the last applied log id and the membership, as JSON, in a file
//! `snapshot-<index>-<term>.json` beside the metadata log, written with `write_file_atomic` before
//! it counts (built, or installed from the leader); older snapshot files are then removed. At
//! start the newest snapshot is the state, and openraft applies the log's committed entries after
//! it (the log store keeps the committed log id).

use super::types::{
    BrokerRegistration, EntryPayload, LogId, MetaCommand, MetaResponse, Snapshot, SnapshotData, SnapshotMeta,
    StoredMembership, Tm, TopicState,
};
use crate::io::Disk;
use crate::protocol::errors as code;
use futures_util::{Stream, TryStreamExt};
use openraft::storage::{EntryResponder, RaftSnapshotBuilder, RaftStateMachine};
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// A registered broker.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct BrokerState {
    pub registration: BrokerRegistration,
    /// The log index of its registration.
    pub epoch: u64,
    pub fenced: bool,
}

/// The cluster's metadata as the applied log makes it.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq)]
pub struct MetaImage {
    pub brokers: BTreeMap<i32, BrokerState>,
    pub topics: BTreeMap<String, TopicState>,
    /// The first producer id not yet handed out.
    pub next_producer_id: i64,
    /// The cluster's id (the first [`MetaCommand::SetClusterId`] committed).
    #[serde(default)]
    pub cluster_id: Option<String>,
}

impl MetaImage {
    /// Apply the command of the entry at `index`.
    pub fn apply(&mut self, index: u64, command: &MetaCommand) -> MetaResponse {
        let refused =
            |code: crate::protocol::errors::ErrorCode, message: String| MetaResponse::Refused { code: code.0, message };
        match command {
            MetaCommand::RegisterBroker(r) => {
                self.brokers.insert(r.id, BrokerState { registration: r.clone(), epoch: index, fenced: true });
                MetaResponse::BrokerEpoch(index)
            }
            MetaCommand::UnfenceBroker { id, epoch } | MetaCommand::FenceBroker { id, epoch } => {
                match self.brokers.get_mut(id) {
                    Some(b) if b.epoch == *epoch => {
                        b.fenced = matches!(command, MetaCommand::FenceBroker { .. });
                        MetaResponse::Done
                    }
                    Some(b) => refused(code::STALE_BROKER_EPOCH, format!("broker {id} is at epoch {}", b.epoch)),
                    None => refused(code::BROKER_ID_NOT_REGISTERED, format!("broker {id} is not registered")),
                }
            }
            MetaCommand::CreateTopic { name, topic } => {
                if self.topics.contains_key(name) {
                    return refused(code::TOPIC_ALREADY_EXISTS, format!("topic '{name}' already exists"));
                }
                self.topics.insert(name.clone(), topic.clone());
                MetaResponse::Done
            }
            MetaCommand::DeleteTopic { name } => match self.topics.remove(name) {
                Some(_) => MetaResponse::Done,
                None => refused(code::UNKNOWN_TOPIC_OR_PARTITION, format!("topic '{name}' does not exist")),
            },
            MetaCommand::SetClusterId { id } => {
                MetaResponse::ClusterId(self.cluster_id.get_or_insert_with(|| id.clone()).clone())
            }
            MetaCommand::AllocateProducerIds { count, floor, .. } => {
                let first = self.next_producer_id.max(*floor);
                self.next_producer_id = first.saturating_add((*count).max(1));
                MetaResponse::ProducerIds { first, count: (*count).max(1) }
            }
        }
    }
}

/// What a snapshot file holds.
#[derive(Serialize, Deserialize)]
struct SnapshotFile {
    meta: SnapshotMeta,
    image: MetaImage,
}

#[derive(Default)]
struct Applied {
    last_applied: Option<LogId>,
    membership: StoredMembership,
    image: MetaImage,
}

struct Inner<D: Disk> {
    disk: D,
    dir: PathBuf,
    applied: RefCell<Applied>,
    /// The newest snapshot: its meta and bytes.
    current: RefCell<Option<(SnapshotMeta, Vec<u8>)>>,
}

/// The state machine: cheap to clone (its snapshot builder is a clone).
pub struct MetaStateMachine<D: Disk> {
    inner: Rc<Inner<D>>,
}

impl<D: Disk> Clone for MetaStateMachine<D> {
    fn clone(&self) -> Self {
        MetaStateMachine { inner: self.inner.clone() }
    }
}

fn io_err(e: impl std::error::Error + Send + Sync + 'static) -> io::Error {
    io::Error::other(e)
}

fn snapshot_name(meta: &SnapshotMeta) -> Option<String> {
    meta.last_log_id.map(|l| format!("snapshot-{:020}-{}.json", l.index, l.leader_id.term))
}

/// The snapshot files in `dir`, newest (highest index) last.
async fn snapshot_files<D: Disk>(disk: &D, dir: &Path) -> io::Result<Vec<(u64, String)>> {
    let mut files: Vec<(u64, String)> = disk
        .list_dir(dir)
        .await
        .map_err(io_err)?
        .into_iter()
        .filter(|n| n.starts_with("snapshot-") && n.ends_with(".json"))
        .filter_map(|n| n.get(9..29).and_then(|i| i.parse().ok()).map(|i| (i, n)))
        .collect();
    files.sort();
    Ok(files)
}

impl<D: Disk> MetaStateMachine<D> {
    /// The state machine whose snapshots live in `dir`: the newest snapshot there (if any) is
    /// the state it starts from.
    pub async fn open(disk: D, dir: &Path) -> io::Result<MetaStateMachine<D>> {
        let mut applied = Applied::default();
        let mut current = None;
        if let Some((_, name)) = snapshot_files(&disk, dir).await?.pop() {
            let path = dir.join(&name);
            let bytes = disk.read_file(&path).await.map_err(io_err)?.unwrap_or_default();
            let file: SnapshotFile = serde_json::from_slice(&bytes)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{}: {e}", path.display())))?;
            applied.last_applied = file.meta.last_log_id;
            applied.membership = file.meta.last_membership.clone();
            applied.image = file.image;
            current = Some((file.meta, bytes));
        }
        Ok(MetaStateMachine {
            inner: Rc::new(Inner {
                disk,
                dir: dir.to_path_buf(),
                applied: RefCell::new(applied),
                current: RefCell::new(current),
            }),
        })
    }

    /// The image as applied so far (a copy).
    pub fn image(&self) -> MetaImage {
        self.inner.applied.borrow().image.clone()
    }

    /// A registered broker's state.
    pub fn broker(&self, id: i32) -> Option<BrokerState> {
        self.inner.applied.borrow().image.brokers.get(&id).cloned()
    }

    /// The registered brokers that are not fenced.
    pub fn unfenced_brokers(&self) -> Vec<BrokerState> {
        self.inner.applied.borrow().image.brokers.values().filter(|b| !b.fenced).cloned().collect()
    }

    /// The cluster's id, once committed.
    pub fn cluster_id(&self) -> Option<String> {
        self.inner.applied.borrow().image.cluster_id.clone()
    }

    /// The registered brokers that are not fenced: (id, epoch).
    pub fn unfenced(&self) -> Vec<(i32, u64)> {
        let applied = self.inner.applied.borrow();
        applied.image.brokers.values().filter(|b| !b.fenced).map(|b| (b.registration.id, b.epoch)).collect()
    }

    /// The last applied entry's log id.
    pub fn last_applied(&self) -> Option<LogId> {
        self.inner.applied.borrow().last_applied
    }

    /// Make `bytes` (a [`SnapshotFile`] for `meta`) the current snapshot: durable first, then
    /// older snapshot files removed.
    async fn persist(&self, meta: &SnapshotMeta, bytes: Vec<u8>) -> io::Result<()> {
        let Some(name) = snapshot_name(meta) else { return Ok(()) };
        let disk = &self.inner.disk;
        disk.write_file_atomic(&self.inner.dir.join(&name), &bytes).await.map_err(io_err)?;
        for (_, old) in snapshot_files(disk, &self.inner.dir).await? {
            if old != name {
                disk.remove_file(&self.inner.dir.join(old)).await.map_err(io_err)?;
            }
        }
        *self.inner.current.borrow_mut() = Some((meta.clone(), bytes));
        Ok(())
    }
}

impl<D: Disk> RaftSnapshotBuilder<Tm> for MetaStateMachine<D> {
    type SnapshotData = SnapshotData;

    async fn build_snapshot(&mut self) -> io::Result<Snapshot> {
        let (meta, bytes) = {
            let applied = self.inner.applied.borrow();
            let meta = SnapshotMeta { last_log_id: applied.last_applied, last_membership: applied.membership.clone() };
            let file = SnapshotFile { meta: meta.clone(), image: applied.image.clone() };
            (meta, serde_json::to_vec(&file).map_err(io_err)?)
        };
        self.persist(&meta, bytes.clone()).await?;
        Ok(Snapshot { meta, snapshot: SnapshotData::new(bytes) })
    }
}

impl<D: Disk> RaftStateMachine<Tm> for MetaStateMachine<D> {
    type SnapshotData = SnapshotData;
    type SnapshotBuilder = Self;

    async fn applied_state(&mut self) -> io::Result<(Option<LogId>, StoredMembership)> {
        let applied = self.inner.applied.borrow();
        Ok((applied.last_applied, applied.membership.clone()))
    }

    async fn apply<S>(&mut self, mut entries: S) -> io::Result<()>
    where
        S: Stream<Item = io::Result<EntryResponder<Tm>>> + Unpin,
    {
        while let Some((entry, responder)) = entries.try_next().await? {
            let response = {
                let mut applied = self.inner.applied.borrow_mut();
                applied.last_applied = Some(entry.log_id);
                match &entry.payload {
                    EntryPayload::Blank => MetaResponse::Done,
                    EntryPayload::Normal(command) => applied.image.apply(entry.log_id.index, command),
                    EntryPayload::Membership(m) => {
                        applied.membership = StoredMembership::new(Some(entry.log_id), m.clone());
                        MetaResponse::Done
                    }
                }
            };
            if let Some(responder) = responder {
                responder.send(response);
            }
        }
        Ok(())
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn install_snapshot(&mut self, meta: &SnapshotMeta, snapshot: SnapshotData) -> io::Result<()> {
        let bytes = snapshot.into_inner();
        let file: SnapshotFile =
            serde_json::from_slice(&bytes).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        // The leader's bytes, with the meta openraft installs them under.
        let file = SnapshotFile { meta: meta.clone(), image: file.image };
        let bytes = serde_json::to_vec(&file).map_err(io_err)?;
        self.persist(meta, bytes).await?;
        let mut applied = self.inner.applied.borrow_mut();
        applied.last_applied = meta.last_log_id;
        applied.membership = meta.last_membership.clone();
        applied.image = file.image;
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> io::Result<Option<Snapshot>> {
        Ok(self
            .inner
            .current
            .borrow()
            .as_ref()
            .map(|(meta, bytes)| Snapshot { meta: meta.clone(), snapshot: SnapshotData::new(bytes.clone()) }))
    }
}

/// The image a snapshot's bytes hold (tests, tools).
pub fn snapshot_image(bytes: &[u8]) -> io::Result<MetaImage> {
    let file: SnapshotFile =
        serde_json::from_slice(bytes).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    Ok(file.image)
}
