//! Dynamic broker settings on shard 0: (Incremental)AlterConfigs of this node's settings or
//! the cluster defaults, validated with the others, persisted in `<data-dir>/broker-configs`,
//! then applied on every shard; topics whose settings follow a changed default are updated
//! everywhere; a TLS listener's new key store or trust store (KIP-226) is read, checked and
//! then taken by new connections on every shard.

use crate::config::LogConfig;
use crate::io::Disk;
use crate::io::DmaDisk;
use crate::protocol::errors as code;
use crate::server::configs::{self, AlterOp, DynamicConfigs, Effective};
use crate::server::control::commit::{control_of, publish, AdminResult};
use crate::server::control::documents;
use crate::server::errors::AdminError;
use crate::server::publish::Delta;
use crate::server::router::ShardCall;
use crate::server::shard::Shard;
use crate::storage::topics::TopicStore;
use std::rc::Rc;

/// To shard 0: change the dynamic broker settings of this node (`node`) or the cluster
/// defaults, then broadcast them. Only settings that can change at runtime (Kafka's
/// INVALID_REQUEST "Cannot update these configs dynamically" otherwise).
#[derive(Debug)]
pub struct AlterBroker {
    pub node: bool,
    pub ops: Vec<(String, AlterOp)>,
    pub replace: bool,
    pub validate_only: bool,
}

impl ShardCall<Shard> for AlterBroker {
    type Reply = AdminResult;
    const NAME: &'static str = "alter-broker";

    async fn run(self, shard: Rc<Shard>) -> AdminResult {
        let keys = || self.ops.iter().map(|(k, _)| k.as_str());
        let unknown: Vec<&str> = keys().filter(|k| configs::broker_key(k).is_none()).collect();
        if !unknown.is_empty() {
            return Err(AdminError::new(
                code::INVALID_CONFIG,
                format!("Unknown broker configs: {}", unknown.join(", ")),
            ));
        }
        let fixed: Vec<&str> = keys().filter(|k| configs::broker_key(k).is_some_and(|b| !b.1)).collect();
        if !fixed.is_empty() {
            let message = format!("Cannot update these configs dynamically: Set({})", fixed.join(", "));
            return Err(AdminError::new(code::INVALID_REQUEST, message));
        }
        let tls: Vec<&str> = keys().filter(|k| configs::dynamic_tls(k)).collect();
        if !self.node && !tls.is_empty() {
            // Kafka's rule: a key store belongs to one broker.
            let message = format!(
                "Cannot update these configs at default cluster level, broker id must be specified: Set({})",
                tls.join(", ")
            );
            return Err(AdminError::new(code::INVALID_REQUEST, message));
        }
        if let Some(k) = tls.iter().find(|k| {
            configs::listener_key(k).is_some_and(|(l, setting)| {
                // Settings name listeners in lower case (Kafka's `listener.name.<lower>.`).
                let sasl = setting.ends_with("sasl.jaas.config");
                l != l.to_ascii_lowercase()
                    || !known_listeners(&shard)
                        .any(|(name, p)| name.eq_ignore_ascii_case(l) && if sasl { p.sasl() } else { p.tls() })
            })
        }) {
            let message =
                format!("{k}: this node has no listener of that name (in lower case) with TLS, or SASL for a login");
            return Err(AdminError::new(code::INVALID_REQUEST, message));
        }
        let control = control_of(&shard)?;
        // A clustered node's cluster defaults go through the metadata quorum, made again from
        // the defaults then in force if another node's change came first.
        let clustered_default = !self.node && shard.config().cluster.is_some();
        for _ in 0..documents::DOCUMENT_ATTEMPTS {
            let based_on = documents::document_version(&shard, documents::BROKER_DEFAULTS);
            let mut lease = control.lease().await;
            let Some((next, effective, acceptors, changed)) = self.checked(&shard, lease.store(), &tls)? else {
                return Ok(());
            };
            if clustered_default {
                drop(lease);
                let text = DynamicConfigs { default: next.default, node: Default::default() }.encode();
                if documents::put_document(&shard, documents::BROKER_DEFAULTS, text, based_on).await? {
                    tracing::info!("cluster-default broker settings changed through the metadata quorum");
                    return Ok(());
                }
                continue;
            }
            put_in_force(&shard, lease.store(), next, effective, acceptors, changed).await?;
            tracing::info!(
                scope = if self.node { "node" } else { "cluster default" },
                "dynamic broker settings changed"
            );
            return Ok(());
        }
        Err(AdminError::new(code::REQUEST_TIMED_OUT, "the broker settings kept changing: retry"))
    }
}

/// What [`AlterBroker::checked`] gives: the new settings, their effect, the new TLS stores and
/// logins, and the topics whose settings change with them.
type Checked = (DynamicConfigs, Effective, Secured, Vec<(String, LogConfig)>);

/// New TLS acceptors (listener index, acceptor) and the cluster's links' new security.
#[derive(Default)]
pub(super) struct Secured {
    acceptors: Vec<(usize, futures_rustls::TlsAcceptor)>,
    links: Vec<(crate::server::links::Link, crate::client::Security)>,
}

impl AlterBroker {
    /// The change checked against the settings in force (`None`: only validation was asked).
    fn checked(&self, shard: &Shard, store: &TopicStore<DmaDisk>, tls: &[&str]) -> Result<Option<Checked>, AdminError> {
        let current = shard.dynamic();
        let layer = if self.node { &current.node } else { &current.default };
        let defaults = shard.effective().log_defaults.describe();
        let value_of =
            |k: &str| crate::config::topic_key_of_broker_name(k).and_then(|(t, _)| defaults.get(t.name).cloned());
        let kind_of = |k: &str| configs::broker_key(k).map(|b| b.0);
        let layer = configs::apply_ops(layer, &self.ops, self.replace, value_of, kind_of)?;
        let mut next = current;
        *(if self.node { &mut next.node } else { &mut next.default }) = layer;
        let effective = Effective::compute(shard.config(), &next)
            .map_err(|e| AdminError::new(code::INVALID_REQUEST, format!("{e:#}")))?;
        let changed = store
            .with_defaults(&effective.log_defaults)
            .map_err(|e| AdminError::new(code::INVALID_REQUEST, e.to_string()))?;
        // New TLS stores are read and checked now (files included; a file changed in place is
        // read again), and used by new connections only once they are persisted.
        // Rebuilt when the TLS settings of this node change (AlterConfigs replaces them all).
        let tls_of = |m: &std::collections::BTreeMap<String, String>| {
            m.iter().filter(|(k, _)| configs::dynamic_tls(k)).map(|(k, v)| (k.clone(), v.clone())).collect::<Vec<_>>()
        };
        let tls_changed = !tls.is_empty() || (self.node && tls_of(&shard.dynamic().node) != tls_of(&next.node));
        let secured = if !tls_changed {
            Secured::default()
        } else {
            let invalid = |e: anyhow::Error| {
                AdminError::new(
                    code::INVALID_CONFIG,
                    format!("Validation of dynamic config update of SSLFactory failed: {e:#}"),
                )
            };
            let c = shard.config();
            Secured {
                acceptors: c.tls_acceptors(&next.node).map_err(invalid)?,
                links: c.links.remade(&c.with_node_tls(&next.node)).map_err(invalid)?,
            }
        };
        if self.validate_only {
            return Ok(None);
        }
        Ok(Some((next, effective, secured, changed)))
    }
}

/// Put dynamic broker settings in force on this node: written to `<data-dir>/broker-configs`
/// (read at start), the topic store's defaults, the TLS listeners' new stores, every shard,
/// and the topics whose settings follow a changed default.
pub(super) async fn put_in_force(
    shard: &Rc<Shard>,
    store: &mut TopicStore<DmaDisk>,
    next: DynamicConfigs,
    effective: Effective,
    secured: Secured,
    changed: Vec<(String, LogConfig)>,
) -> AdminResult {
    let control = control_of(shard)?;
    let path = shard.config().data_dir.join(configs::BROKER_CONFIGS_FILE);
    let written = control.disk.write_file_atomic(&path, next.encode().as_bytes()).await;
    written.map_err(|e| AdminError::new(code::KAFKA_STORAGE_ERROR, e.to_string()))?;
    store.set_defaults(effective.log_defaults.clone());
    for (i, acceptor) in secured.acceptors {
        let listener = &shard.config().listeners[i];
        if let Some(t) = &listener.tls {
            t.replace(acceptor);
            tracing::info!(listener = %listener.name, "TLS stores changed: new connections use them");
        }
    }
    for (link, security) in secured.links {
        link.replace(security);
        tracing::info!(listener = %link.listener, "the cluster's link changed (TLS stores, login): new connections to other nodes use it");
    }
    publish(shard, Delta::BrokerSettings(next)).await;
    for (name, config) in changed {
        let overrides = shard.topic(&name, |t| t.overrides.clone()).unwrap_or_default();
        publish(shard, Delta::TopicAltered { name, config, overrides }).await;
    }
    Ok(())
}

/// The cluster defaults `default` put in force on this node with its own layer (a clustered
/// node's publisher, [`metadata`]): checked as a change would be; the topics that follow them
/// updated.
pub(super) async fn take_defaults(
    shard: &Rc<Shard>,
    store: &mut TopicStore<DmaDisk>,
    default: std::collections::BTreeMap<String, String>,
) -> Result<(), String> {
    let next = DynamicConfigs { default, node: shard.dynamic().node };
    let effective = Effective::compute(shard.config(), &next).map_err(|e| format!("{e:#}"))?;
    let changed = store.with_defaults(&effective.log_defaults).map_err(|e| e.to_string())?;
    put_in_force(shard, store, next, effective, Secured::default(), changed).await.map_err(|e| e.message)
}

/// The listeners this node serves or connects to, with their protocols: its own, its
/// controller listener, and the controllers' listener its link to them uses.
fn known_listeners(shard: &Shard) -> impl Iterator<Item = (String, crate::server::listeners::SecurityProtocol)> + '_ {
    let c = shard.config();
    let own = c.listeners.iter().chain(c.controller_listener.iter()).map(|l| (l.name.clone(), l.protocol));
    own.chain(c.links.controllers.iter().map(|l| (l.listener.clone(), l.protocol)))
}
