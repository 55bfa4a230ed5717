//! Client quotas on shard 0 (AlterClientQuotas, KIP-546): each entry checked as Kafka's
//! controller does, the new quotas written to `<data-dir>/quotas`, then put in force for every
//! shard at once (the quotas live in the table the shards share,
//! [`crate::server::limits::ConnectionTable`]). A clustered node commits the new quotas through
//! the metadata quorum instead, and every node's publisher writes and applies them
//! ([`documents::put_document`]).

use crate::io::Disk;
use crate::protocol::errors::{self as code, ErrorCode};
use crate::security::quota::{Change, Quotas, QUOTAS_FILE};
use crate::server::control::commit::control_of;
use crate::server::control::documents;
use crate::server::router::ShardCall;
use crate::server::shard::Shard;
use std::rc::Rc;

/// To shard 0: the changes (each entity's), and whether only to check them; each one's outcome.
#[derive(Debug)]
pub struct AlterQuotas {
    pub changes: Vec<Change>,
    pub validate_only: bool,
}

impl ShardCall<Shard> for AlterQuotas {
    type Reply = Vec<(ErrorCode, Option<String>)>;
    const NAME: &'static str = "alter-quotas";

    async fn run(self, shard: Rc<Shard>) -> Vec<(ErrorCode, Option<String>)> {
        let n = self.changes.len();
        let control = match control_of(&shard) {
            Ok(c) => c,
            Err(e) => return vec![(e.code, Some(e.message)); n],
        };
        let failed = |c: ErrorCode, message: String| vec![(c, Some(message)); n];
        let attempt = async || {
            let based_on = documents::document_version(&shard, QUOTAS_FILE);
            let lease = control.lease().await;
            let table = shard.connections();
            let mut next: Quotas = (*table.quotas()).clone();
            let mut outcome = Vec::with_capacity(n);
            for (i, change) in self.changes.iter().enumerate() {
                let mut sorted = change.0.clone();
                sorted.sort();
                let twice = self.changes[..i].iter().any(|(e, _)| {
                    let mut e = e.clone();
                    e.sort();
                    e == sorted
                });
                match Quotas::invalid(change) {
                    _ if twice => outcome.push((code::INVALID_REQUEST, Some("Duplicate quota entity".to_string()))),
                    Some(why) => outcome.push((code::INVALID_REQUEST, Some(why))),
                    None => {
                        next.apply(change.clone());
                        outcome.push((code::NONE, None));
                    }
                }
            }
            if self.validate_only || next == *table.quotas() {
                return Some(outcome);
            }
            if shard.config().cluster.is_some() {
                // Through the metadata quorum: every node's publisher writes and applies them.
                drop(lease);
                return match documents::put_document(&shard, QUOTAS_FILE, next.encode(), based_on).await {
                    Ok(true) => {
                        tracing::info!("client quotas changed through the metadata quorum");
                        Some(outcome)
                    }
                    Ok(false) => None,
                    Err(e) => Some(failed(e.code, e.message)),
                };
            }
            let path = shard.config().data_dir.join(QUOTAS_FILE);
            if let Err(e) = control.disk.write_file_atomic(&path, next.encode().as_bytes()).await {
                tracing::error!(error = %e, "cannot write the quotas file");
                return Some(failed(code::KAFKA_STORAGE_ERROR, format!("the quotas could not be written: {e}")));
            }
            table.set_quotas(next);
            tracing::info!("client quotas changed");
            Some(outcome)
        };
        documents::with_retries(attempt, || failed(code::REQUEST_TIMED_OUT, "the quotas kept changing: retry".into()))
            .await
    }
}
