//! Users' SCRAM credentials on shard 0 (KIP-554 AlterUserScramCredentials): validated as
//! Kafka's controller validates them, persisted in `<data-dir>/credentials` (salted and
//! hashed: never a password), then applied on every shard. One change at a time (the control
//! plane's lease). A clustered node commits the new credentials through the metadata quorum
//! instead, and every node's publisher writes and applies them ([`documents::put_document`]).

use crate::io::Disk;
use crate::protocol::errors::{self as code, ErrorCode};
use crate::protocol::security::ScramCredentialUpsertion;
use crate::security::{Credential, Credentials, Mechanism, CREDENTIALS_FILE, MAX_ITERATIONS, MIN_ITERATIONS};
use crate::server::control::commit::{control_of, publish};
use crate::server::control::documents;
use crate::server::publish::Delta;
use crate::server::router::ShardCall;
use crate::server::shard::Shard;
use std::rc::Rc;

/// To shard 0: delete and upsert credentials; each user's outcome, in the order users first
/// appear.
#[derive(Debug)]
pub struct AlterUsers {
    pub deletions: Vec<(String, i8)>,
    pub upsertions: Vec<ScramCredentialUpsertion>,
}

/// One user's outcome.
pub type UserOutcome = (String, ErrorCode, Option<String>);

/// The credentials `request` makes of `current`: each user's outcome (a refusal as Kafka
/// answers it), and whether anything changed. `names`: every user the request names, once per
/// mention; `order`: each once, in request order.
fn stage(
    request: &AlterUsers,
    names: &[&str],
    order: &[String],
    current: &Credentials,
) -> (Credentials, Vec<UserOutcome>, bool) {
    let mut next = current.clone();
    let mut outcome: Vec<UserOutcome> = order.iter().map(|u| (u.clone(), code::NONE, None)).collect();
    let mut refuse = |user: &str, e: ErrorCode, message: &str| {
        if let Some(o) = outcome.iter_mut().find(|o| o.0 == user && o.1 == code::NONE) {
            (o.1, o.2) = (e, Some(message.to_string()));
        }
    };
    for n in order {
        if names.iter().filter(|x| **x == n.as_str()).count() > 1 {
            refuse(n, code::DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request");
        }
    }
    let mut changed = false;
    for (name, mechanism) in &request.deletions {
        match (name.is_empty(), Mechanism::from_code(*mechanism)) {
            (true, _) => refuse(name, code::UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
            (_, None) => refuse(name, code::UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
            (_, Some(m)) if next.get(name, m).is_none() => {
                refuse(name, code::RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")
            }
            (_, Some(m)) => {
                if names.iter().filter(|x| **x == name.as_str()).count() == 1 {
                    next.set(name, m, None);
                    changed = true;
                }
            }
        }
    }
    for u in &request.upsertions {
        match (u.name.is_empty(), Mechanism::from_code(u.mechanism)) {
            (true, _) => refuse(&u.name, code::UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
            (_, None) => refuse(&u.name, code::UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
            _ if u.iterations < MIN_ITERATIONS => refuse(&u.name, code::UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
            _ if u.iterations > MAX_ITERATIONS => refuse(&u.name, code::UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
            (_, Some(m)) => {
                if names.iter().filter(|x| **x == u.name.as_str()).count() == 1 {
                    let c = Credential::from_salted(m, &u.salt, &u.salted_password, u.iterations);
                    next.set(&u.name, m, Some(c));
                    changed = true;
                }
            }
        }
    }
    (next, outcome, changed)
}

impl ShardCall<Shard> for AlterUsers {
    type Reply = Vec<UserOutcome>;
    const NAME: &'static str = "alter-users";

    async fn run(self, shard: Rc<Shard>) -> Vec<UserOutcome> {
        let names: Vec<&str> = self
            .deletions
            .iter()
            .map(|d| d.0.as_str())
            .chain(self.upsertions.iter().map(|u| u.name.as_str()))
            .collect();
        let mut order: Vec<String> = Vec::new();
        for n in &names {
            if !order.iter().any(|o| o == n) {
                order.push(n.to_string());
            }
        }
        let control = match control_of(&shard) {
            Ok(c) => c,
            Err(e) => return order.into_iter().map(|u| (u, e.code, Some(e.message.clone()))).collect(),
        };
        let failed = |c: ErrorCode, message: String| -> Vec<UserOutcome> {
            order.iter().map(|u| (u.clone(), c, Some(message.clone()))).collect()
        };
        let attempt = async || {
            let based_on = documents::document_version(&shard, CREDENTIALS_FILE);
            let lease = control.lease().await;
            let (next, mut outcome, changed) = stage(&self, &names, &order, &shard.credentials());
            if !changed {
                return Some(outcome);
            }
            let users: Vec<String> = outcome.iter().filter(|o| o.1 == code::NONE).map(|o| o.0.clone()).collect();
            if shard.config().cluster.is_some() {
                // Through the metadata quorum: every node's publisher writes and applies them.
                drop(lease);
                return match documents::put_document(&shard, CREDENTIALS_FILE, next.encode(), based_on).await {
                    Ok(true) => {
                        tracing::info!(
                            users = users.join(","),
                            "SCRAM credentials changed through the metadata quorum"
                        );
                        Some(outcome)
                    }
                    Ok(false) => None,
                    Err(e) => Some(failed(e.code, e.message)),
                };
            }
            let path = shard.config().data_dir.join(CREDENTIALS_FILE);
            if let Err(e) = control.disk.write_file_atomic(&path, next.encode().as_bytes()).await {
                tracing::error!(error = %e, "cannot write the credentials file");
                for o in outcome.iter_mut().filter(|o| o.1 == code::NONE) {
                    (o.1, o.2) =
                        (code::KAFKA_STORAGE_ERROR, Some(format!("the credentials could not be written: {e}")));
                }
                return Some(outcome);
            }
            publish(&shard, Delta::Credentials(next)).await;
            tracing::info!(users = users.join(","), "SCRAM credentials changed");
            Some(outcome)
        };
        documents::with_retries(attempt, || {
            failed(code::REQUEST_TIMED_OUT, "the credentials kept changing: retry".into())
        })
        .await
    }
}
