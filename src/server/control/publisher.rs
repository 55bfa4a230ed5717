//! A clustered node's publisher (shard 0): it follows the metadata log this node applies and
//! brings the local topic store and every shard's view in line with the image, as deltas
//! ([`crate::server::publish`]) with the same meaning a standalone node's changes have:
//!
//! - a topic the image no longer has (or has with another id) is deleted here; a new one is
//!   created with the image's id and settings; partitions are opened where this node is a
//!   replica and closed where it is not ([`Delta::Placed`], before the topic is published), and
//!   each shard learns every partition's leadership;
//! - the cluster-wide documents (ACLs, credentials, quotas, broker defaults) newer than those in
//!   force here are written to their files and put in force on every shard.
//!
//! The local store is thus a copy of the image's topics, kept so that a restart opens the
//! partitions before the quorum answers. Nothing here locks: the image is read on shard 0 and
//! reaches the other shards in typed calls.

use super::commit::{control_of, publish as publish_delta};
use super::documents::{document_version, put_document, read, Content, BROKER_DEFAULTS, DOCUMENTS};
use crate::cluster::member::Member;
use crate::cluster::state::MetaImage;
use crate::cluster::types::{PartitionState, TopicState};
use crate::io::{Disk, DmaDisk};
use crate::server::configs::DynamicConfigs;
use crate::server::publish::{Delta, TopicInfo};
use crate::server::shard::{ControlState, Shard, StoreLease};
use crate::types::Uuid;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Put the documents of `image` newer than those in force here into force: the file written
/// (so that a restart reads it before the quorum answers), then the state it holds on every
/// shard. A document this node cannot read is logged and left out (the file stays as it was).
async fn publish_documents(shard: &Rc<Shard>, image: &MetaImage, seeded: &mut bool) {
    let Ok(control) = control_of(shard) else { return };
    if !*seeded {
        *seeded = true;
        seed_documents(shard, control, image).await;
    }
    for (name, doc) in &image.documents {
        if document_version(shard, name) == doc.version || !DOCUMENTS.contains(&name.as_str()) {
            continue;
        }
        let applied = take_document(shard, control, name, &doc.text, doc.version).await;
        match applied {
            Ok(()) => {
                control.failed_documents.borrow_mut().remove(name);
                control.documents.borrow_mut().insert(name.clone(), doc.version);
                tracing::info!(document = name, version = doc.version, "cluster-wide settings in force");
            }
            Err(e) => {
                // Not in force: tried again at the publisher's next look; meanwhile changes made
                // here are refused (made from the older state, they would undo the newer).
                let first =
                    control.failed_documents.borrow_mut().insert(name.clone(), doc.version) != Some(doc.version);
                if first {
                    tracing::error!(
                        document = name,
                        version = doc.version,
                        error = e,
                        "cannot take a cluster-wide document"
                    );
                }
            }
        }
    }
}

/// A cluster formed with no format step has no other source: each node proposes its own files
/// as the first version of a document the metadata lacks, and the first one committed is the
/// cluster's (as the cluster id).
async fn seed_documents(shard: &Rc<Shard>, control: &ControlState, image: &MetaImage) {
    for name in DOCUMENTS.into_iter().filter(|n| !image.documents.contains_key(*n)) {
        let text = if name == BROKER_DEFAULTS {
            let default = shard.dynamic().default;
            if default.is_empty() {
                continue;
            }
            DynamicConfigs { default, node: Default::default() }.encode()
        } else {
            let path = shard.config().data_dir.join(name);
            let Ok(Some(bytes)) = control.disk.read_file(&path).await else { continue };
            let Ok(text) = String::from_utf8(bytes) else { continue };
            // Only a file this build reads is proposed (a bad one would reach every node).
            if let Err(e) = read(name, &text) {
                tracing::warn!(document = name, error = e, "this node's file is not proposed: it does not read");
                continue;
            }
            text
        };
        let shard = shard.clone();
        glommio::spawn_local(async move {
            match put_document(&shard, name, text, 0).await {
                Ok(true) => tracing::info!(document = name, "this node's file is the cluster's first version"),
                Ok(false) => tracing::info!(document = name, "the cluster has another node's version"),
                Err(e) => tracing::warn!(document = name, error = e.message, "could not propose this node's file"),
            }
        })
        .detach();
    }
}

/// Put one cluster-wide document in force here: its file written, its state on every shard.
async fn take_document(
    shard: &Rc<Shard>,
    control: &ControlState,
    name: &str,
    text: &str,
    version: u64,
) -> Result<(), String> {
    let path = shard.config().data_dir.join(name);
    let write = || async {
        // The first version this node takes replaces its own file: kept beside it if it
        // differs (nothing an operator put there is lost).
        if document_version(shard, name) == 0 {
            if let Ok(Some(old)) = control.disk.read_file(&path).await {
                let kept = path.with_file_name(format!("{name}.before-cluster"));
                // (Once: a later start's older cluster version is not the operator's.)
                if old != text.as_bytes() && !control.disk.exists(&kept).await.unwrap_or(true) {
                    control.disk.rename(&path, &kept).await.map_err(|e| format!("keeping the old file: {e}"))?;
                    tracing::warn!(document = name, kept = %kept.display(), "this node's own file is replaced by the cluster's");
                }
            }
        }
        control.disk.write_file_atomic(&path, text.as_bytes()).await.map_err(|e| format!("writing: {e}"))
    };
    match read(name, text)? {
        Content::BrokerDefaults(default) => {
            // Into this node's `broker-configs`, beside its own layer; its own defaults,
            // if they differ, kept once beside it.
            let own = shard.dynamic();
            let kept = path.with_file_name(format!("{}.before-cluster", crate::server::configs::BROKER_CONFIGS_FILE));
            let first = document_version(shard, name) == 0;
            if first && own.default != default && !control.disk.exists(&kept).await.unwrap_or(true) {
                let written = control.disk.write_file_atomic(&kept, own.encode().as_bytes()).await;
                written.map_err(|e| format!("keeping the old defaults: {e}"))?;
                tracing::warn!(kept = %kept.display(), "this node's own broker defaults are replaced by the cluster's");
            }
            let mut lease = control.lease().await;
            super::broker::take_defaults(shard, lease.store(), default).await?;
        }
        Content::Acls(acls) => {
            write().await?;
            publish_delta(shard, Delta::Acls(acls)).await;
        }
        Content::Credentials(credentials) => {
            write().await?;
            publish_delta(shard, Delta::Credentials(credentials)).await;
        }
        Content::Quotas(quotas) => {
            write().await?;
            shard.connections().set_quotas(quotas);
        }
        Content::Features(mut features) => {
            write().await?;
            // The cluster's count of changes is the document's version.
            features.epoch = version as i64;
            publish_delta(shard, Delta::Features(features)).await;
        }
    }
    Ok(())
}

/// Shard 0 of a clustered node: publish the image each time this node applies more of the
/// metadata log (and retry a document it could not take), until the broker stops. `adopt`:
/// the metadata log existed before this start ([`Origin::load`]).
///
/// Topics and placements are published only once the image holds this start's registration
/// (`incarnation`): as Kafka's broker, which takes no leadership before its registration is
/// committed and its metadata caught up to it. The image a restarted node applies from its own
/// log may name it leader at an epoch the cluster has since moved past, of a tail its followers
/// never copied; its registration ends every leadership of its former incarnation (the
/// controller fences them), so each one it takes after is a new epoch the controller gave it.
pub fn spawn_publisher(
    shard: Rc<Shard>,
    controller: Rc<Member<DmaDisk>>,
    stop: Arc<AtomicBool>,
    adopt: bool,
    incarnation: String,
) {
    glommio::spawn_local(async move {
        let mut applied_watch = controller.state().watch_applied();
        let mut placed: BTreeMap<String, Vec<PartitionState>> = BTreeMap::new();
        let mut origin = Origin::load(&shard, adopt).await;
        let mut seeded = false;
        let mut published = None;
        let mut broker_epoch = None;
        while !stop.load(Ordering::Relaxed) {
            let applied = controller.state().last_applied().map(|l| l.index);
            let retry = shard.control().is_some_and(|c| !c.failed_documents.borrow().is_empty());
            if applied.is_some() && (applied != published || retry) {
                let image = controller.image();
                let me = shard.config().node_id;
                let registered = image.brokers.get(&me).filter(|b| b.registration.incarnation == incarnation);
                if let Some(b) = registered {
                    if broker_epoch != Some(b.epoch) {
                        broker_epoch = Some(b.epoch);
                        publish_delta(&shard, Delta::BrokerEpoch(b.epoch)).await;
                    }
                    publish(&shard, &image, &mut placed, &mut origin).await;
                    publish_documents(&shard, &image, &mut seeded).await;
                    published = applied;
                    if let (Some(i), Some(control)) = (applied, shard.control()) {
                        control.published.send_replace(i);
                    }
                } else if published.is_none() {
                    tracing::debug!(applied = ?applied, "metadata not published: this start's registration is not applied yet");
                }
            }
            // A change of the applied index, or a look every second. Once the state machine
            // is gone (its watch closed), a look every second: never a busy loop.
            if let Some(Err(_)) = crate::deadline::within(Duration::from_secs(1), applied_watch.changed()).await {
                glommio::timer::sleep(Duration::from_secs(1)).await;
            }
        }
    })
    .detach();
}

/// The ids of the local topics that came from the metadata image (`<data-dir>/cluster-topics`,
/// one per line, replaced whole): only those are deleted when the image no longer has them. A
/// local topic not among them (a standalone node's, an older build's) is never deleted: it is
/// left on disk, unserved, and reported.
struct Origin {
    ids: std::collections::BTreeSet<Uuid>,
    path: std::path::PathBuf,
    /// Topics already reported as not the cluster's (once each per start).
    reported: std::collections::BTreeSet<String>,
}

impl Origin {
    const FILE: &'static str = "cluster-topics";

    /// `adopt`: the metadata log existed before this start; with no file yet (an older
    /// build's data directory), every local topic came from the image then.
    async fn load(shard: &Shard, adopt: bool) -> Origin {
        let path = shard.config().data_dir.join(Self::FILE);
        let mut ids = std::collections::BTreeSet::new();
        let mut origin = Origin { ids: Default::default(), path: path.clone(), reported: Default::default() };
        let Some(control) = shard.control() else { return origin };
        match control.disk.read_file(&path).await {
            Ok(Some(bytes)) => ids = String::from_utf8_lossy(&bytes).lines().filter_map(Uuid::parse).collect(),
            Ok(None) if adopt => {
                let mut lease = control.lease().await;
                let store = lease.store();
                ids = store.names().filter_map(|n| store.get(n)).map(|m| m.id).collect();
                origin.ids = ids;
                origin.save(shard).await;
                return origin;
            }
            Ok(None) => {}
            Err(e) => tracing::error!(error = %e, "cannot read {}", path.display()),
        }
        origin.ids = ids;
        origin
    }

    async fn save(&self, shard: &Shard) {
        let text: String = self.ids.iter().map(|id| format!("{id}\n")).collect();
        if let Some(control) = shard.control() {
            if let Err(e) = control.disk.write_file_atomic(&self.path, text.as_bytes()).await {
                tracing::error!(error = %e, "cannot write {}", self.path.display());
            }
        }
    }
}

/// Bring the local topic store and every shard's view in line with `image` (`placed`: the
/// placement each topic was last published with; `origin`: the local topics that came from
/// the image).
async fn publish(
    shard: &Rc<Shard>,
    image: &MetaImage,
    placed: &mut BTreeMap<String, Vec<PartitionState>>,
    origin: &mut Origin,
) {
    let Ok(control) = control_of(shard) else { return };
    let mut lease = control.lease().await;
    let strays = remove_gone_topics(shard, &mut lease, image, placed, origin).await;
    for (name, topic) in &image.topics {
        if !strays.contains(name) {
            publish_topic(shard, &mut lease, name, topic, placed, origin).await;
        }
    }
}

/// Delete the local topics that came from the image and are no longer in it; the names of
/// the local topics that never came from it (kept on disk, unserved, reported once).
async fn remove_gone_topics(
    shard: &Rc<Shard>,
    lease: &mut StoreLease<'_>,
    image: &MetaImage,
    placed: &mut BTreeMap<String, Vec<PartitionState>>,
    origin: &mut Origin,
) -> std::collections::BTreeSet<String> {
    let local: Vec<(String, Uuid, u32)> = {
        let store = lease.store();
        store.names().map(|n| store.get(n).map(|m| (n.to_string(), m.id, m.partitions)).expect("listed")).collect()
    };
    let mut strays = std::collections::BTreeSet::new();
    for (name, id, partitions) in local {
        let same = image.topics.get(&name).and_then(|t| Uuid::parse(&t.id)) == Some(id);
        if same {
            if origin.ids.insert(id) {
                origin.save(shard).await;
            }
            continue;
        }
        if !origin.ids.contains(&id) {
            if origin.reported.insert(name.clone()) {
                tracing::error!(
                    topic = name,
                    %id,
                    "a topic on disk is not the cluster's (never in its metadata): kept, not served; move its \
                     directories away to take the cluster's"
                );
            }
            strays.insert(name);
            continue;
        }
        if let Err(e) = lease.store().delete(&name).await {
            tracing::error!(topic = name, error = %e, "cannot delete a topic the metadata no longer has");
            continue;
        }
        origin.ids.remove(&id);
        origin.save(shard).await;
        placed.remove(&name);
        publish_delta(shard, Delta::TopicDeleted { name: name.clone(), partitions }).await;
        tracing::info!(topic = name, "topic deleted (metadata image)");
    }
    strays
}

/// One topic of the image here: created (with its id) if the store lacks it, else its
/// settings, partition count and placement brought in line; each change published.
async fn publish_topic(
    shard: &Rc<Shard>,
    lease: &mut StoreLease<'_>,
    name: &str,
    topic: &TopicState,
    placed: &mut BTreeMap<String, Vec<PartitionState>>,
    origin: &mut Origin,
) {
    let count = topic.partitions.len() as u32;
    let configs: Vec<(&str, &str)> = topic.configs.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let existing = lease.store().get(name).cloned();
    let Some(meta) = existing else {
        let Some(id) = Uuid::parse(&topic.id) else {
            tracing::error!(topic = name, id = topic.id, "the metadata names a topic with a malformed id");
            return;
        };
        // Recorded first: a crash after the store's file is written leaves a topic this
        // node knows came from the image.
        origin.ids.insert(id);
        origin.save(shard).await;
        let config = match lease.store().create_with_id(name, id, count as i64, &configs).await {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(topic = name, error = %e, "cannot create a topic of the metadata here");
                return;
            }
        };
        let place = Delta::Placed {
            name: name.to_string(),
            config: config.clone(),
            placement: topic.partitions.clone(),
            fresh_from: 0,
        };
        publish_delta(shard, place).await;
        let info = TopicInfo {
            id,
            partitions: count,
            config,
            overrides: topic.configs.clone(),
            placement: Some(topic.partitions.clone()),
        };
        publish_delta(shard, Delta::TopicCreated { name: name.to_string(), info }).await;
        placed.insert(name.to_string(), topic.partitions.clone());
        tracing::info!(topic = name, partitions = count, "topic created (metadata image)");
        return;
    };
    let mut config = match lease.store().config(name) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(topic = name, error = %e, "a topic's settings do not apply here");
            return;
        }
    };
    if meta.overrides != topic.configs {
        match lease.store().replace_overrides(name, topic.configs.clone()).await {
            Ok(c) => {
                config = c;
                let altered = Delta::TopicAltered {
                    name: name.to_string(),
                    config: config.clone(),
                    overrides: topic.configs.clone(),
                };
                publish_delta(shard, altered).await;
            }
            Err(e) => tracing::error!(topic = name, error = %e, "cannot take a topic's new settings"),
        }
    }
    let grown = count > meta.partitions;
    if grown {
        if let Err(e) = lease.store().grow(name, count as i64, false).await {
            tracing::error!(topic = name, error = %e, "cannot add the metadata's new partitions here");
            return;
        }
    }
    if grown || placed.get(name) != Some(&topic.partitions) {
        let place = Delta::Placed {
            name: name.to_string(),
            config,
            placement: topic.partitions.clone(),
            fresh_from: meta.partitions,
        };
        publish_delta(shard, place).await;
        placed.insert(name.to_string(), topic.partitions.clone());
    }
    if grown {
        publish_delta(shard, Delta::TopicGrown { name: name.to_string(), partitions: count }).await;
    }
}
