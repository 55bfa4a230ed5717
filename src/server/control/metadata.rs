//! A clustered node's topics: changed through the metadata quorum, and brought to the shards
//! from the metadata image this node applies.
//!
//! - A topic change (CreateTopics, DeleteTopics, CreatePartitions, AlterConfigs) is checked on
//!   shard 0 against the image, placed there ([`MetaImage::place`]), and committed as one
//!   [`MetaCommand`]; it is answered once this node has published the entry, so the client's
//!   next request here sees it.
//! - The publisher ([`spawn_publisher`], shard 0) follows the applied index and brings the
//!   local topic store and every shard's view in line with the image, with the same broadcasts
//!   a standalone node's changes use: a topic the image no longer has (or has with another id)
//!   is deleted here; a new one is created with the image's id and settings; partitions are
//!   opened where this node is a replica and closed where it is not ([`PlacePartitions`],
//!   before the topic is published), and each shard learns every partition's leadership.
//!
//! The local store is thus a copy of the image's topics, kept so that a restart opens the
//! partitions before the quorum answers. Nothing here locks: the image is read on shard 0 and
//! reaches the other shards in typed calls.

use super::{broadcast, control_of, AdminResult, TopicCreated, TopicDeleted, TopicGrown};
use crate::cluster::controller::Controller;
use crate::cluster::state::MetaImage;
use crate::cluster::types::{MetaCommand, MetaResponse, PartitionState, TopicState};
use crate::config::LogConfig;
use crate::io::{Disk, DmaDisk};
use crate::protocol::errors::{self as code, ErrorCode};
use crate::security::acl::{Acls, ACLS_FILE};
use crate::security::quota::{Quotas, QUOTAS_FILE};
use crate::security::{Credentials, CREDENTIALS_FILE};
use crate::server::configs::DynamicConfigs;
use crate::server::errors::AdminError;
use crate::server::router::ShardCall;
use crate::server::shard::{ControlState, Shard, StoreLease, TopicInfo};
use crate::types::Uuid;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How long a topic change waits for its commit, and then for this node to publish it.
const COMMIT_LIMIT: Duration = Duration::from_secs(10);

/// This node's controller, if it is clustered and the controller has started.
pub fn controller(shard: &Shard) -> Option<Rc<Controller<DmaDisk>>> {
    shard.control()?.quorum.borrow().clone()
}

/// The error a topic change gets on a clustered node whose controller is not up yet.
fn not_ready() -> AdminError {
    AdminError::new(code::NOT_CONTROLLER, "the metadata quorum is not up yet on this node")
}

/// Commit `command` through the quorum; once this node has published it, its response (a
/// refusal is its error).
async fn commit(shard: &Shard, command: MetaCommand) -> Result<MetaResponse, AdminError> {
    let controller = controller(shard).ok_or_else(not_ready)?;
    let (response, index) = controller
        .write_at(command, COMMIT_LIMIT)
        .await
        .map_err(|e| AdminError::new(code::REQUEST_TIMED_OUT, e.to_string()))?;
    if let MetaResponse::Refused { code, message } = response {
        return Err(AdminError::new(ErrorCode(code), message));
    }
    if !until_published(shard, |i| *i >= index).await {
        let message = format!("committed at {index}, not yet applied on this node");
        return Err(AdminError::new(code::REQUEST_TIMED_OUT, message));
    }
    Ok(response)
}

/// Wait, within the commit limit, until `ready` holds at a publish of this node's image (at
/// once if it holds now); whether it does.
async fn until_published(shard: &Shard, ready: impl FnMut(&u64) -> bool) -> bool {
    let Some(control) = shard.control() else { return false };
    let mut published = control.published.subscribe();
    let waited = crate::deadline::within(COMMIT_LIMIT, published.wait_for(ready)).await;
    matches!(waited, Some(Ok(_)))
}

fn placement_error((c, message): (ErrorCode, String)) -> AdminError {
    AdminError::new(c, message)
}

/// CreateTopics on a clustered node: checked against the image (name, partition count,
/// settings, replication factor up to the unfenced brokers, or explicit assignments), placed,
/// committed. `replication_factor` -1 is `default.replication.factor`.
pub async fn create_topic(
    shard: &Shard,
    name: &str,
    partitions: i64,
    replication_factor: i16,
    assignments: &[Vec<i32>],
    configs: &[(String, String)],
    validate_only: bool,
) -> AdminResult {
    let controller = controller(shard).ok_or_else(not_ready)?;
    crate::storage::topics::validate_topic_name(name).map_err(|e| AdminError::from(&e))?;
    unfenced_here(shard, &controller).await;
    let image = controller.image();
    if image.topics.contains_key(name) {
        return Err(AdminError::new(code::TOPIC_ALREADY_EXISTS, format!("Topic '{name}' already exists.")));
    }
    if assignments.is_empty() && !(1..=100_000).contains(&partitions) {
        return Err(AdminError::new(code::INVALID_PARTITIONS, format!("invalid partition count {partitions}")));
    }
    {
        let control = control_of(shard)?;
        let mut lease = control.lease().await;
        let pairs = configs.iter().map(|(k, v)| (k.as_str(), v.as_str()));
        lease
            .store()
            .defaults()
            .with_overrides(pairs)
            .map_err(|e| AdminError::new(code::INVALID_CONFIG, e.to_string()))?;
    }
    let placement = if assignments.is_empty() {
        let factor = match replication_factor {
            -1 => shard.config().cluster.as_ref().map_or(1, |c| c.default_replication_factor),
            f => f,
        };
        image.place(partitions as u32, factor)
    } else {
        image.assign(assignments)
    }
    .map_err(placement_error)?;
    if validate_only {
        return Ok(());
    }
    let id = Uuid::random().map_err(|e| AdminError::new(code::UNKNOWN_SERVER_ERROR, e.to_string()))?;
    let topic = TopicState { id: id.to_string(), partitions: placement, configs: configs.iter().cloned().collect() };
    commit(shard, MetaCommand::CreateTopic { name: name.to_string(), topic }).await?;
    tracing::info!(topic = name, partitions, "topic created through the metadata quorum");
    Ok(())
}

/// Wait (within the commit limit) until this node's broker is registered and unfenced: a
/// node just started places nothing before it counts itself among the brokers (Kafka's broker
/// serves only once unfenced).
async fn unfenced_here(shard: &Shard, controller: &Controller<DmaDisk>) {
    let me = shard.config().node_id;
    until_published(shard, |_| controller.state.broker(me).is_some_and(|b| !b.fenced)).await;
}

/// DeleteTopics on a clustered node.
pub async fn delete_topic(shard: &Shard, name: &str) -> AdminResult {
    commit(shard, MetaCommand::DeleteTopic { name: name.to_string() }).await?;
    tracing::info!(topic = name, "topic deleted through the metadata quorum");
    Ok(())
}

/// CreatePartitions on a clustered node: the new partitions keep the topic's replication
/// factor (or follow the explicit assignments).
pub async fn create_partitions(
    shard: &Shard,
    name: &str,
    count: i64,
    assignments: &[Vec<i32>],
    validate_only: bool,
) -> AdminResult {
    let controller = controller(shard).ok_or_else(not_ready)?;
    let image = controller.image();
    let topic = image
        .topics
        .get(name)
        .ok_or_else(|| AdminError::new(code::UNKNOWN_TOPIC_OR_PARTITION, format!("Topic '{name}' does not exist.")))?;
    let current = topic.partitions.len() as i64;
    if count <= current {
        let message = format!("Topic currently has {current} partitions, which is higher than the requested {count}.");
        return Err(AdminError::new(code::INVALID_PARTITIONS, message));
    }
    if count > 100_000 {
        return Err(AdminError::new(code::INVALID_PARTITIONS, format!("invalid partition count {count}")));
    }
    // The topic's factor: its first partition's target replicas (a reassignment may be under
    // way there).
    let factor = topic.partitions.first().map_or(1, |p| p.target().len()) as i16;
    let placement = if assignments.is_empty() {
        image.place((count - current) as u32, factor)
    } else if assignments.len() as i64 != count - current {
        Err((
            code::INVALID_REPLICA_ASSIGNMENT,
            format!(
                "Attempted to add {} additional partition(s), but only {} assignment(s) were specified.",
                count - current,
                assignments.len()
            ),
        ))
    } else if assignments.iter().any(|a| a.len() as i16 != factor) {
        Err((
            code::INVALID_REPLICA_ASSIGNMENT,
            format!(
                "Inconsistent replication factor between partitions: the topic has {factor} replicas per partition."
            ),
        ))
    } else {
        image.assign(assignments)
    }
    .map_err(placement_error)?;
    if validate_only {
        return Ok(());
    }
    let from = current as u32;
    commit(shard, MetaCommand::CreatePartitions { name: name.to_string(), from, partitions: placement }).await?;
    tracing::info!(topic = name, partitions = count, "partitions added through the metadata quorum");
    Ok(())
}

/// AlterConfigs on a clustered node: the topic's whole new set of settings (checked by the
/// caller), made from the set `based_on`; `false` if the topic's settings changed first (the
/// caller makes its change again from the set now in force).
pub async fn alter_topic(
    shard: &Shard,
    name: &str,
    configs: BTreeMap<String, String>,
    based_on: BTreeMap<String, String>,
) -> Result<bool, AdminError> {
    let command = MetaCommand::AlterTopicConfigs { name: name.to_string(), configs, based_on };
    match commit(shard, command).await? {
        MetaResponse::Conflict { .. } => {
            // Wait for this node to publish the newer settings before the caller tries again.
            let applied = controller(shard).and_then(|c| c.state.last_applied()).map_or(0, |l| l.index);
            until_published(shard, |i| *i >= applied).await;
            Ok(false)
        }
        _ => {
            tracing::info!(topic = name, "topic settings changed through the metadata quorum");
            Ok(true)
        }
    }
}

/// To shard 0 of a clustered node: a per-partition command (ElectLeaders, Reassign); each
/// partition's Kafka error code and message, in the order asked.
#[derive(Debug)]
pub struct PartitionCommand(pub MetaCommand);

impl ShardCall<Shard> for PartitionCommand {
    type Reply = Result<Vec<(ErrorCode, Option<String>)>, AdminError>;
    const NAME: &'static str = "partition-command";

    async fn run(self, shard: Rc<Shard>) -> Self::Reply {
        match commit(&shard, self.0).await? {
            MetaResponse::Partitions(results) => Ok(results.into_iter().map(|(c, m)| (ErrorCode(c), m)).collect()),
            other => Err(AdminError::new(code::UNKNOWN_SERVER_ERROR, format!("unexpected answer {other:?}"))),
        }
    }
}

/// To shard 0 of a clustered node: a partition leader's ISR change
/// ([`MetaCommand::AlterPartition`]), committed and published here before the answer.
#[derive(Debug)]
pub struct AlterIsr(pub MetaCommand);

impl ShardCall<Shard> for AlterIsr {
    type Reply = Result<(), AdminError>;
    const NAME: &'static str = "alter-isr";

    async fn run(self, shard: Rc<Shard>) -> Self::Reply {
        commit(&shard, self.0).await.map(|_| ())
    }
}

/// How many times a document change is made again when another node's change came first.
pub const DOCUMENT_ATTEMPTS: usize = 5;

/// The cluster-default dynamic broker settings, as a document: a `broker-configs` text with
/// its `default` lines only (each node keeps its own `node` lines).
pub const BROKER_DEFAULTS: &str = "broker-defaults";

/// The cluster-wide state a clustered node takes from the metadata image as documents: ACLs,
/// SCRAM credentials, client quotas (each its file's whole text) and the cluster-default
/// broker settings. Each change is committed as one document version ([`put_document`]); the
/// publisher writes the file on every node and puts it in force.
pub const DOCUMENTS: [&str; 4] = [ACLS_FILE, CREDENTIALS_FILE, QUOTAS_FILE, BROKER_DEFAULTS];

/// The version of document `name` in force on this node (0: none from the metadata yet). A
/// change computed from the state in force is based on it.
pub fn document_version(shard: &Shard, name: &str) -> u64 {
    shard.control().and_then(|c| c.documents.borrow().get(name).copied()).unwrap_or(0)
}

/// Commit a new version of document `name` made from version `based_on`: `false` if another
/// change came first (the caller computes its change again from the state now in force).
pub async fn put_document(shard: &Shard, name: &str, text: String, based_on: u64) -> Result<bool, AdminError> {
    let pending = shard.control().and_then(|c| c.failed_documents.borrow().get(name).copied());
    if let Some(version) = pending {
        let message =
            format!("this node could not take version {version} of {name} (see its log): change it elsewhere");
        return Err(AdminError::new(code::KAFKA_STORAGE_ERROR, message));
    }
    match commit(shard, MetaCommand::SetDocument { name: name.to_string(), text, based_on }).await? {
        MetaResponse::Conflict { version } => {
            // Wait until this node has the newer version before the caller tries again.
            until_published(shard, |_| document_version(shard, name) >= version).await;
            Ok(false)
        }
        _ => Ok(true),
    }
}

/// Run a change of a document: `attempt` computes it from the state in force and stores it,
/// returning `None` when another node's change came first; tried [`DOCUMENT_ATTEMPTS`] times.
pub async fn with_retries<T>(mut attempt: impl AsyncFnMut() -> Option<T>, gave_up: impl FnOnce() -> T) -> T {
    for _ in 0..DOCUMENT_ATTEMPTS {
        if let Some(t) = attempt().await {
            return t;
        }
    }
    gave_up()
}

/// A document's text, read.
enum Content {
    Acls(Acls),
    Credentials(Credentials),
    Quotas(Quotas),
    /// The cluster-default broker settings (a `broker-configs` text's `default` lines).
    BrokerDefaults(BTreeMap<String, String>),
}

/// Read `text` as document `name`.
fn read(name: &str, text: &str) -> Result<Content, String> {
    Ok(match name {
        ACLS_FILE => Content::Acls(Acls::decode(text)?),
        CREDENTIALS_FILE => Content::Credentials(Credentials::decode(text)?),
        QUOTAS_FILE => Content::Quotas(Quotas::decode(text)?),
        _ => Content::BrokerDefaults(DynamicConfigs::decode(text)?.default),
    })
}

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
        let applied = take_document(shard, control, name, &doc.text).await;
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
async fn take_document(shard: &Rc<Shard>, control: &ControlState, name: &str, text: &str) -> Result<(), String> {
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
            broadcast(shard, super::acls::AclsChanged(acls)).await;
        }
        Content::Credentials(credentials) => {
            write().await?;
            broadcast(shard, super::users::CredentialsChanged(credentials)).await;
        }
        Content::Quotas(quotas) => {
            write().await?;
            shard.connections().set_quotas(quotas);
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
    controller: Rc<Controller<DmaDisk>>,
    stop: Arc<AtomicBool>,
    adopt: bool,
    incarnation: String,
) {
    use openraft_rt::WatchReceiver;
    glommio::spawn_local(async move {
        let mut metrics = controller.raft.metrics();
        let mut placed: BTreeMap<String, Vec<PartitionState>> = BTreeMap::new();
        let mut origin = Origin::load(&shard, adopt).await;
        let mut seeded = false;
        let mut published = None;
        let mut broker_epoch = None;
        while !stop.load(Ordering::Relaxed) {
            let applied = controller.state.last_applied().map(|l| l.index);
            let retry = shard.control().is_some_and(|c| !c.failed_documents.borrow().is_empty());
            if applied.is_some() && (applied != published || retry) {
                let image = controller.image();
                let me = shard.config().node_id;
                let registered = image.brokers.get(&me).filter(|b| b.registration.incarnation == incarnation);
                if let Some(b) = registered {
                    if broker_epoch != Some(b.epoch) {
                        broker_epoch = Some(b.epoch);
                        broadcast(&shard, BrokerEpoch(b.epoch)).await;
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
            // A change of the metrics (applied index among them), or a look every second. Once
            // openraft has stopped (its watch closed), a look every second: never a busy loop.
            if let Some(Err(_)) = crate::deadline::within(Duration::from_secs(1), metrics.changed()).await {
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
    let local: Vec<(String, Uuid)> = {
        let store = lease.store();
        store.names().map(|n| (n.to_string(), store.get(n).expect("listed").id)).collect()
    };
    let mut strays = std::collections::BTreeSet::new();
    for (name, id) in local {
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
        broadcast(shard, TopicDeleted { name: name.clone() }).await;
        tracing::info!(topic = name, "topic deleted (metadata image)");
    }
    strays
}

/// One topic of the image here: created (with its id) if the store lacks it, else its
/// settings, partition count and placement brought in line; each change broadcast.
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
        let place = PlacePartitions {
            name: name.to_string(),
            config: config.clone(),
            placement: topic.partitions.clone(),
            fresh_from: 0,
        };
        broadcast(shard, place).await;
        let info = TopicInfo {
            id,
            partitions: count,
            config,
            overrides: topic.configs.clone(),
            placement: Some(topic.partitions.clone()),
        };
        broadcast(shard, TopicCreated { name: name.to_string(), info }).await;
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
                let altered = super::TopicAltered {
                    name: name.to_string(),
                    config: config.clone(),
                    overrides: topic.configs.clone(),
                };
                broadcast(shard, altered).await;
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
        let place = PlacePartitions {
            name: name.to_string(),
            config,
            placement: topic.partitions.clone(),
            fresh_from: meta.partitions,
        };
        broadcast(shard, place).await;
        placed.insert(name.to_string(), topic.partitions.clone());
    }
    if grown {
        broadcast(shard, TopicGrown { name: name.to_string(), partitions: count }).await;
    }
}

/// From shard 0 to every shard: this node's broker epoch now (its registration was applied).
#[derive(Debug, Clone, Copy)]
pub struct BrokerEpoch(pub u64);

impl ShardCall<Shard> for BrokerEpoch {
    type Reply = ();
    const NAME: &'static str = "broker-epoch";

    async fn run(self, shard: Rc<Shard>) {
        shard.replication().set_broker_epoch(self.0);
    }
}

/// From shard 0 to every shard: a topic's partitions are placed so. Each shard opens those it
/// owns where this node is a replica (partitions from `fresh_from` on are new: data an
/// interrupted deletion left is cleared first) and closes those where it is not, then takes
/// the leadership of each.
#[derive(Debug, Clone)]
pub struct PlacePartitions {
    pub name: String,
    pub config: LogConfig,
    pub placement: Vec<PartitionState>,
    pub fresh_from: u32,
}

impl ShardCall<Shard> for PlacePartitions {
    type Reply = ();
    const NAME: &'static str = "place-partitions";

    async fn run(self, shard: Rc<Shard>) {
        let node = shard.config().node_id;
        let manager = shard.manager();
        for (p, state) in self.placement.iter().enumerate() {
            let p = p as i32;
            if shard.owner(&self.name, p) != shard.id() {
                continue;
            }
            let replica = state.replicas.contains(&node);
            let open = manager.get(&self.name, p).is_some();
            if replica && !open {
                let fresh = p as u32 >= self.fresh_from;
                let cleared = if fresh { manager.delete_partition(&self.name, p).await } else { Ok(()) };
                let opened = match cleared {
                    Ok(()) => manager.open_partition(&self.name, p, self.config.clone()).await.map(|_| ()),
                    Err(e) => Err(e),
                };
                if let Err(e) = opened {
                    tracing::error!(topic = self.name, partition = p, error = %e, "cannot open a partition this node is a replica of");
                }
            } else if !replica && open {
                manager.close_partition(&self.name, p).await;
            }
        }
        shard.set_placement(&self.name, self.placement.clone());
        shard.replication().placed(&shard, &self.name, &self.placement);
    }
}
