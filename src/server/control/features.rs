//! UpdateFeatures on shard 0: the requested levels checked as Kafka's controller checks them
//! ([`crate::features::Features::updated`], all or none), then the new levels written to
//! `<data-dir>/features` with the epoch counted up and published to every shard. A clustered
//! node commits them through the metadata quorum instead, and every node's publisher writes
//! and applies them ([`documents::put_document`]).

use crate::features::{Update, FEATURES_FILE};
use crate::io::Disk;
use crate::protocol::errors::{self as code, ErrorCode};
use crate::server::control::commit::{control_of, publish};
use crate::server::control::documents;
use crate::server::publish::Delta;
use crate::server::router::ShardCall;
use crate::server::shard::Shard;
use std::rc::Rc;

/// To shard 0: finalize these levels (or, `validate_only`, only check them).
#[derive(Debug)]
pub struct UpdateFeatures {
    pub updates: Vec<Update>,
    pub validate_only: bool,
}

impl ShardCall<Shard> for UpdateFeatures {
    type Reply = Result<(), (ErrorCode, String)>;
    const NAME: &'static str = "update-features";

    async fn run(self, shard: Rc<Shard>) -> Self::Reply {
        let control = control_of(&shard).map_err(|e| (e.code, e.message))?;
        let node = shard.config().node_id;
        let attempt = async || {
            let based_on = documents::document_version(&shard, FEATURES_FILE);
            let lease = control.lease().await;
            let current = shard.features();
            let mut next = match current.updated(&self.updates, node) {
                Ok(next) => next,
                Err(e) => return Some(Err(e)),
            };
            if self.validate_only || next == *current {
                return Some(Ok(()));
            }
            next.epoch = current.epoch + 1;
            if shard.config().cluster.is_some() {
                drop(lease);
                return match documents::put_document(&shard, FEATURES_FILE, next.encode(), based_on).await {
                    Ok(true) => {
                        tracing::info!("feature levels changed through the metadata quorum");
                        Some(Ok(()))
                    }
                    Ok(false) => None,
                    Err(e) => Some(Err((e.code, e.message))),
                };
            }
            let path = shard.config().data_dir.join(FEATURES_FILE);
            if let Err(e) = control.disk.write_file_atomic(&path, next.encode().as_bytes()).await {
                tracing::error!(error = %e, "cannot write the features file");
                return Some(Err((code::KAFKA_STORAGE_ERROR, format!("the feature levels could not be written: {e}"))));
            }
            let levels: Vec<String> = next.finalized().map(|(n, l)| format!("{n}={l}")).collect();
            tracing::info!(levels = levels.join(","), epoch = next.epoch, "feature levels changed");
            publish(&shard, Delta::Features(next)).await;
            drop(lease);
            Some(Ok(()))
        };
        let gave_up = || Err((code::REQUEST_TIMED_OUT, "the feature levels kept changing: retry".to_string()));
        documents::with_retries(attempt, gave_up).await
    }
}
