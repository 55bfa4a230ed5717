//! ACL bindings on shard 0 (CreateAcls, DeleteAcls): applied, persisted in `<data-dir>/acls`,
//! then applied on every shard. One change at a time (the control plane's lease). A clustered
//! node commits the new bindings through the metadata quorum instead, and every node's
//! publisher writes and applies them ([`documents::put_document`]).

use crate::io::Disk;
use crate::protocol::errors::{self as code, ErrorCode};
use crate::security::acl::{Acls, Binding, Filter, ACLS_FILE};
use crate::server::control::commit::{control_of, publish};
use crate::server::control::documents;
use crate::server::publish::Delta;
use crate::server::router::ShardCall;
use crate::server::shard::Shard;
use std::rc::Rc;

/// What to change: bindings to add (already checked), or filters whose matches to delete.
#[derive(Debug)]
pub enum AclChange {
    Create(Vec<Binding>),
    Delete(Vec<Filter>),
}

/// To shard 0: the change; per binding created, or per filter (with the bindings deleted),
/// its outcome.
#[derive(Debug)]
pub struct ChangeAcls(pub AclChange);

pub type AclOutcome = Vec<(ErrorCode, Option<String>, Vec<Binding>)>;

impl ShardCall<Shard> for ChangeAcls {
    type Reply = AclOutcome;
    const NAME: &'static str = "change-acls";

    async fn run(self, shard: Rc<Shard>) -> AclOutcome {
        let n = match &self.0 {
            AclChange::Create(b) => b.len(),
            AclChange::Delete(f) => f.len(),
        };
        let control = match control_of(&shard) {
            Ok(c) => c,
            Err(e) => return vec![(e.code, Some(e.message), Vec::new()); n],
        };
        let failed = |c: ErrorCode, message: String| vec![(c, Some(message), Vec::new()); n];
        let attempt = async || {
            // The version in force before the state it is computed from (a clustered node).
            let based_on = documents::document_version(&shard, ACLS_FILE);
            let lease = control.lease().await;
            let mut next: Acls = (*shard.acls()).clone();
            let outcome: AclOutcome = match &self.0 {
                AclChange::Create(bindings) => bindings
                    .iter()
                    .map(|b| {
                        next.insert(b.clone());
                        (code::NONE, None, Vec::new())
                    })
                    .collect(),
                AclChange::Delete(filters) => filters.iter().map(|f| (code::NONE, None, next.delete(f))).collect(),
            };
            if next == *shard.acls() {
                return Some(outcome);
            }
            let count = next.bindings().len();
            if shard.config().cluster.is_some() {
                // Through the metadata quorum: every node's publisher writes and applies it.
                drop(lease);
                return match documents::put_document(&shard, ACLS_FILE, next.encode(), based_on).await {
                    Ok(true) => {
                        tracing::info!(bindings = count, "ACLs changed through the metadata quorum");
                        Some(outcome)
                    }
                    Ok(false) => None,
                    Err(e) => Some(failed(e.code, e.message)),
                };
            }
            let path = shard.config().data_dir.join(ACLS_FILE);
            if let Err(e) = control.disk.write_file_atomic(&path, next.encode().as_bytes()).await {
                tracing::error!(error = %e, "cannot write the ACL file");
                return Some(failed(code::KAFKA_STORAGE_ERROR, format!("the ACLs could not be written: {e}")));
            }
            publish(&shard, Delta::Acls(next)).await;
            tracing::info!(bindings = count, "ACLs changed");
            Some(outcome)
        };
        documents::with_retries(attempt, || failed(code::REQUEST_TIMED_OUT, "the ACLs kept changing: retry".into()))
            .await
    }
}
