//! The cluster-wide state a clustered node takes from the metadata image as documents: ACLs,
//! SCRAM credentials, client quotas, feature levels and the cluster-default broker settings, each changed as one
//! whole new version based on the version in force ([`put_document`]).

use super::commit::{commit, until_published};
use crate::cluster::types::{MetaCommand, MetaResponse};
use crate::features::{Features, FEATURES_FILE};
use crate::protocol::errors as code;
use crate::security::acl::{Acls, ACLS_FILE};
use crate::security::quota::{Quotas, QUOTAS_FILE};
use crate::security::{Credentials, CREDENTIALS_FILE};
use crate::server::configs::DynamicConfigs;
use crate::server::errors::AdminError;
use crate::server::shard::Shard;
use std::collections::BTreeMap;

/// How many times a document change is made again when another node's change came first.
pub const DOCUMENT_ATTEMPTS: usize = 5;

/// The cluster-default dynamic broker settings, as a document: a `broker-configs` text with
/// its `default` lines only (each node keeps its own `node` lines).
pub const BROKER_DEFAULTS: &str = "broker-defaults";

/// The cluster-wide state a clustered node takes from the metadata image as documents: ACLs,
/// SCRAM credentials, client quotas, the finalized feature levels (each its file's whole text)
/// and the cluster-default broker settings. Each change is committed as one document version
/// ([`put_document`]); the publisher writes the file on every node and puts it in force.
pub const DOCUMENTS: [&str; 5] = [ACLS_FILE, CREDENTIALS_FILE, QUOTAS_FILE, FEATURES_FILE, BROKER_DEFAULTS];

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
pub enum Content {
    Acls(Acls),
    Credentials(Credentials),
    Quotas(Quotas),
    Features(Features),
    /// The cluster-default broker settings (a `broker-configs` text's `default` lines).
    BrokerDefaults(BTreeMap<String, String>),
}

/// Read `text` as document `name`.
pub fn read(name: &str, text: &str) -> Result<Content, String> {
    Ok(match name {
        ACLS_FILE => Content::Acls(Acls::decode(text)?),
        CREDENTIALS_FILE => Content::Credentials(Credentials::decode(text)?),
        QUOTAS_FILE => Content::Quotas(Quotas::decode(text)?),
        FEATURES_FILE => Content::Features(Features::decode(text)?),
        _ => Content::BrokerDefaults(DynamicConfigs::decode(text)?.default),
    })
}
