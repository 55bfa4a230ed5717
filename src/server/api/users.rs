//! SCRAM users (KIP-554): DescribeUserScramCredentials from this shard's copy of the
//! credentials (mechanisms and iterations; never salts or keys), AlterUserScramCredentials on
//! shard 0 ([`crate::server::control::users`]); and the SASL requests that arrive after
//! authentication (or on a listener without SASL), which Kafka answers ILLEGAL_SASL_STATE.

use crate::protocol::errors::{self as code};
use crate::protocol::security::*;
use crate::security::acl::Operation;
use crate::server::api::Cx;
use crate::server::control::AlterUsers;
use crate::server::errors::call_code;

pub fn describe(cx: &mut Cx<'_>, req: DescribeUserScramCredentialsRequest) -> DescribeUserScramCredentialsResponse {
    cx.release_turn();
    if !cx.allowed_on_cluster(Operation::Describe) {
        let error_code = code::CLUSTER_AUTHORIZATION_FAILED;
        let results = req
            .users
            .unwrap_or_default()
            .into_iter()
            .map(|u| DescribeUserScramCredentialsResult { user: u.name, error_code, ..Default::default() })
            .collect();
        return DescribeUserScramCredentialsResponse { error_code, results, ..Default::default() };
    }
    let credentials = cx.shard.credentials();
    // None or empty: every user (Kafka's rule; Java's admin sends an empty list).
    let asked: Vec<String> = match req.users.filter(|u| !u.is_empty()) {
        None => credentials.users.keys().cloned().collect(),
        Some(users) => users.into_iter().map(|u| u.name).collect(),
    };
    let mut results: Vec<DescribeUserScramCredentialsResult> = Vec::new();
    for (i, user) in asked.iter().enumerate() {
        if asked[..i].contains(user) {
            continue;
        }
        let result = |error_code, error_message: Option<String>, credential_infos| DescribeUserScramCredentialsResult {
            user: user.clone(),
            error_code,
            error_message,
            credential_infos,
            ..Default::default()
        };
        results.push(if asked.iter().filter(|u| *u == user).count() > 1 {
            let message =
                format!("Cannot describe SCRAM credentials for the same user twice in a single request: {user}");
            result(code::DUPLICATE_RESOURCE, Some(message), Vec::new())
        } else {
            match credentials.users.get(user) {
                None => {
                    let message = format!("Attempt to describe a user credential that does not exist: {user}");
                    result(code::RESOURCE_NOT_FOUND, Some(message), Vec::new())
                }
                Some(by) => {
                    let infos = by
                        .iter()
                        .map(|(m, c)| CredentialInfo {
                            mechanism: m.code(),
                            iterations: c.iterations,
                            ..Default::default()
                        })
                        .collect();
                    result(code::NONE, None, infos)
                }
            }
        });
    }
    DescribeUserScramCredentialsResponse { results, ..Default::default() }
}

pub async fn alter(cx: &mut Cx<'_>, req: AlterUserScramCredentialsRequest) -> AlterUserScramCredentialsResponse {
    let deletions: Vec<(String, i8)> = req.deletions.into_iter().map(|d| (d.name, d.mechanism)).collect();
    let users: Vec<String> =
        deletions.iter().map(|d| d.0.clone()).chain(req.upsertions.iter().map(|u| u.name.clone())).collect();
    if !cx.allowed_on_cluster(Operation::Alter) {
        cx.release_turn();
        let mut users = users;
        users.sort();
        users.dedup();
        let error_code = code::CLUSTER_AUTHORIZATION_FAILED;
        let results = users
            .into_iter()
            .map(|user| AlterUserScramCredentialsResult { user, error_code, ..Default::default() })
            .collect();
        return AlterUserScramCredentialsResponse { results, ..Default::default() };
    }
    let outcome = cx.shard.call(0, AlterUsers { deletions, upsertions: req.upsertions }).await;
    cx.release_turn();
    let results = match outcome {
        Ok(outcome) => outcome
            .into_iter()
            .map(|(user, error_code, error_message)| AlterUserScramCredentialsResult {
                user,
                error_code,
                error_message,
                ..Default::default()
            })
            .collect(),
        Err(e) => {
            let mut users = users;
            users.sort();
            users.dedup();
            let error_code = call_code(&e, code::REQUEST_TIMED_OUT);
            users
                .into_iter()
                .map(|user| AlterUserScramCredentialsResult { user, error_code, ..Default::default() })
                .collect()
        }
    };
    AlterUserScramCredentialsResponse { results, ..Default::default() }
}

/// SaslHandshake once authenticated: a re-authentication (KIP-368) on a SASL listener,
/// ILLEGAL_SASL_STATE anywhere else.
pub fn handshake(cx: &mut Cx<'_>, r: SaslHandshakeRequest) -> SaslHandshakeResponse {
    cx.release_turn();
    let mut sasl = cx.session.sasl.borrow_mut();
    let version = cx.header.api_version;
    crate::server::authenticate::reauth_handshake(&mut sasl, &cx.listener.sasl_mechanisms, version, &r.mechanism)
}

/// SaslAuthenticate once authenticated: the next step of a re-authentication (a failed one
/// is answered, then the connection closes), ILLEGAL_SASL_STATE without one.
pub async fn authenticate(cx: &mut Cx<'_>, r: SaslAuthenticateRequest) -> SaslAuthenticateResponse {
    cx.release_turn();
    match crate::server::authenticate::reauth_step(cx.shard, &cx.session.sasl, &r.auth_bytes, cx.peer).await {
        Ok(answer) => answer,
        Err(answer) => {
            cx.session.closing.set(true);
            answer
        }
    }
}
