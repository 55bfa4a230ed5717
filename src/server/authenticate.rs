//! The SASL exchange that opens every connection of a SASL listener (SASL_PLAINTEXT,
//! SASL_SSL), before any other request is served, as Kafka's SaslServerAuthenticator runs it:
//!
//! ```text
//!  ApiVersions (at most once) ─► SaslHandshake v0 ─► raw SASL tokens (size-prefixed frames)
//!                            └─► SaslHandshake v1 ─► SaslAuthenticate requests (v0-2)
//!                                                      └─► authenticated: User:<name>
//! ```
//!
//! Any other request before authentication closes the connection without an answer. A
//! mechanism the listener does not offer is answered UNSUPPORTED_SASL_MECHANISM with the ones
//! it does; failed credentials SASL_AUTHENTICATION_FAILED with Kafka's message (which does not
//! say whether the user exists); then, after `connection.failed.authentication.delay.ms`, the
//! connection closes. Each failure is logged with the client's address and counted at
//! `/metrics`. Frames are bounded by `sasl.server.max.receive.size`; the whole exchange by
//! `connections.max.idle.ms` per frame.
//!
//! With `connections.max.reauth.ms` (KIP-368) an authentication lasts that long: SaslAuthenticate
//! v1+ tells the client (`session_lifetime_ms`), which authenticates again on the same
//! connection before then (SaslHandshake v1 and SaslAuthenticate among its requests, handled by
//! [`Reauth`]: same mechanism, same user, else SASL_AUTHENTICATION_FAILED and the close). A
//! request other than those after the session ended closes the connection, as Kafka's
//! processor does (clients that cannot re-authenticate reconnect).

use crate::deadline::within;
use crate::metrics::{self, Counter};
use crate::protocol::errors::{self as code, ErrorCode};
use crate::protocol::messages::Message;
use crate::protocol::security::{SaslAuthenticateResponse, SaslHandshakeResponse};
use crate::protocol::{api_versions_response, decode_request, encode_response, error_response, Request, RequestHeader};
use crate::security::sasl::{Exchange, Step};
use crate::server::shard::Shard;
use futures_lite::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use std::time::{Duration, Instant};

/// A connection's SASL session once authenticated, and a re-authentication under way.
#[derive(Default)]
pub struct SaslSession {
    /// The authenticated user and the mechanism it used (empty on other listeners).
    pub user: String,
    pub mechanism: String,
    /// When the session ends (`connections.max.reauth.ms`); `None`: never.
    pub expires: Option<Instant>,
    reauth: Option<Reauth>,
}

impl std::fmt::Debug for SaslSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslSession")
            .field("user", &self.user)
            .field("mechanism", &self.mechanism)
            .field("expires", &self.expires)
            .field("reauthenticating", &self.reauth.is_some())
            .finish()
    }
}

impl SaslSession {
    /// Whether the session has ended at `now` (a re-authentication under way does not
    /// extend it: the SASL requests that complete one are let through, nothing else).
    pub fn expired(&self, now: Instant) -> bool {
        self.expires.is_some_and(|e| now >= e)
    }
}

/// A re-authentication under way: its exchange, or why it is to fail (another mechanism).
struct Reauth {
    exchange: Exchange,
    refused: Option<String>,
}

/// OAUTHBEARER's validator, as it is now (none: no listener offers it).
fn oauth(shard: &Shard) -> Option<crate::security::oauth::Validator> {
    shard.config().oauth.as_ref().map(|o| o.current())
}

/// The session lifetime that starts now: when it ends and what SaslAuthenticate v1+ says.
fn lifetime(shard: &Shard) -> (Option<Instant>, i64) {
    match shard.config().sasl.max_reauth {
        Some(d) => (Some(Instant::now() + d), d.as_millis().min(i64::MAX as u128) as i64),
        None => (None, 0),
    }
}

/// SaslHandshake on an authenticated connection (KIP-368): a re-authentication starts, with
/// the session's mechanism (another one offered here is answered, and fails at the
/// SaslAuthenticate that follows, as in Kafka).
pub fn reauth_handshake(
    session: &mut SaslSession,
    mechanisms: &[String],
    version: i16,
    mechanism: &str,
) -> SaslHandshakeResponse {
    let refuse =
        |error_code| SaslHandshakeResponse { error_code, mechanisms: mechanisms.to_vec(), ..Default::default() };
    if session.mechanism.is_empty() || version == 0 || session.reauth.is_some() {
        return refuse(code::ILLEGAL_SASL_STATE);
    }
    if !mechanisms.iter().any(|m| m == mechanism) {
        return refuse(code::UNSUPPORTED_SASL_MECHANISM);
    }
    let Some(exchange) = Exchange::start(&session.mechanism) else { return refuse(code::ILLEGAL_SASL_STATE) };
    let refused = (mechanism != session.mechanism).then(|| {
        format!(
            "SASL mechanism '{mechanism}' requested by client is not supported for re-authentication of mechanism '{}'",
            session.mechanism
        )
    });
    session.reauth = Some(Reauth { exchange, refused });
    SaslHandshakeResponse { mechanisms: mechanisms.to_vec(), ..Default::default() }
}

/// SaslAuthenticate on an authenticated connection: the next step of a re-authentication
/// (no borrow of the session is held while a PLAIN password is hashed off the thread).
/// `Err`: the answer to send before the connection closes (a failure, counted and logged).
pub async fn reauth_step(
    shard: &Shard,
    session: &std::cell::RefCell<SaslSession>,
    auth_bytes: &[u8],
    peer: &str,
) -> Result<SaslAuthenticateResponse, SaslAuthenticateResponse> {
    let Some(mut r) = session.borrow_mut().reauth.take() else {
        let message = "SaslAuthenticate request received after successful authentication".to_string();
        return Ok(SaslAuthenticateResponse {
            error_code: code::ILLEGAL_SASL_STATE,
            error_message: Some(message),
            ..Default::default()
        });
    };
    let failed = |reason: String| {
        metrics::count(Counter::AuthenticationFailures, 1);
        tracing::info!(peer, reason, "SASL re-authentication failed; closing");
        SaslAuthenticateResponse {
            error_code: code::SASL_AUTHENTICATION_FAILED,
            error_message: Some(reason),
            ..Default::default()
        }
    };
    if let Some(reason) = r.refused.take() {
        return Err(failed(reason));
    }
    match r.exchange.step_off_thread(auth_bytes, &shard.credentials(), oauth(shard).as_ref()).await {
        Ok(Step::Continue(reply)) => {
            session.borrow_mut().reauth = Some(r);
            Ok(SaslAuthenticateResponse { auth_bytes: reply.into(), ..Default::default() })
        }
        Ok(Step::Done { user, reply }) => {
            let mut session = session.borrow_mut();
            if user != session.user {
                let reason = format!(
                    "Cannot change principals during re-authentication from User.{}: User.{user}",
                    session.user
                );
                return Err(failed(reason));
            }
            let (expires, session_lifetime_ms) = lifetime(shard);
            session.expires = expires;
            metrics::count(Counter::Reauthentications, 1);
            tracing::debug!(peer, user, "SASL re-authenticated");
            Ok(SaslAuthenticateResponse { auth_bytes: reply.into(), session_lifetime_ms, ..Default::default() })
        }
        Err(e) => Err(failed(e.0)),
    }
}

/// How tokens travel after the handshake.
#[derive(Clone, Copy, PartialEq)]
enum Framing {
    /// SaslHandshake v0: raw size-prefixed tokens.
    Raw,
    /// SaslHandshake v1: SaslAuthenticate requests.
    Requests,
}

/// Run the exchange on a new connection from `peer`, offering `mechanisms`: the authenticated
/// session, or `None` (the connection is to be closed; the client was told why where Kafka
/// tells).
pub async fn authenticate<S: AsyncRead + AsyncWrite + Unpin>(
    shard: &Shard,
    stream: &mut S,
    peer: &str,
    mechanisms: &[String],
) -> Option<SaslSession> {
    let c = shard.config();
    let (idle, max) = (c.limits.connections_max_idle, c.sasl.max_receive_size);
    let delay = c.sasl.failed_authentication_delay;
    let mut versions_seen = false;
    let mut exchange: Option<(Exchange, Framing)> = None;
    loop {
        let frame = read_frame(stream, idle, max, peer).await?;
        if let Some((x, Framing::Raw)) = exchange.as_mut() {
            // A raw token: answered with a raw token, failures close without a word.
            match x.step_off_thread(&frame, &shard.credentials(), oauth(shard).as_ref()).await {
                Ok(Step::Continue(reply)) => write_frame(stream, &reply).await?,
                Ok(Step::Done { user, reply }) => {
                    write_frame(stream, &reply).await?;
                    let mechanism = x.mechanism().to_string();
                    return Some(SaslSession { user, mechanism, expires: lifetime(shard).0, reauth: None });
                }
                Err(failed) => {
                    return fail::<_, SaslAuthenticateResponse>(stream, None, delay, peer, x.mechanism(), &failed.0)
                        .await
                }
            }
            continue;
        }
        let (header, request) = match decode_request(bytes::Bytes::from(frame)) {
            Ok(decoded) => decoded,
            Err(failure) => {
                // An ApiVersions of a version we do not have is answered (the client retries
                // at one we do); anything else undecodable closes.
                let answer = failure.header.as_ref().and_then(|h| error_response(h, &failure.error));
                match (answer, failure.header.map(|h| h.api_key)) {
                    (Some(a), Some(crate::protocol::API_VERSIONS)) if !versions_seen => {
                        write_all(stream, &a).await?;
                        continue;
                    }
                    _ => return closing(peer, "an undecodable request before authentication"),
                }
            }
        };
        match (request, exchange.as_mut()) {
            (Request::ApiVersions(_), None) if !versions_seen => {
                versions_seen = true;
                respond(stream, &header, api_versions_response(code::NONE)).await?;
            }
            (Request::SaslHandshake(h), None) => {
                let offered = mechanisms.contains(&h.mechanism);
                let started = if offered { Exchange::start(&h.mechanism) } else { None };
                let Some(x) = started else {
                    let answer = SaslHandshakeResponse {
                        error_code: code::UNSUPPORTED_SASL_MECHANISM,
                        mechanisms: mechanisms.to_vec(),
                        ..Default::default()
                    };
                    let reason = format!("unsupported SASL mechanism {}", h.mechanism);
                    return fail(stream, Some((&header, answer)), delay, peer, "-", &reason).await;
                };
                let answer = SaslHandshakeResponse { mechanisms: mechanisms.to_vec(), ..Default::default() };
                respond(stream, &header, answer).await?;
                let framing = if header.api_version == 0 { Framing::Raw } else { Framing::Requests };
                exchange = Some((x, framing));
            }
            (Request::SaslAuthenticate(a), Some((x, Framing::Requests))) => {
                match x.step_off_thread(&a.auth_bytes, &shard.credentials(), oauth(shard).as_ref()).await {
                    Ok(Step::Continue(reply)) => {
                        respond(stream, &header, auth_response(code::NONE, None, reply)).await?
                    }
                    Ok(Step::Done { user, reply }) => {
                        let (expires, session_lifetime_ms) = lifetime(shard);
                        let answer =
                            SaslAuthenticateResponse { session_lifetime_ms, ..auth_response(code::NONE, None, reply) };
                        respond(stream, &header, answer).await?;
                        let mechanism = x.mechanism().to_string();
                        return Some(SaslSession { user, mechanism, expires, reauth: None });
                    }
                    Err(failed) => {
                        let answer =
                            auth_response(code::SASL_AUTHENTICATION_FAILED, Some(failed.0.clone()), Vec::new());
                        return fail(stream, Some((&header, answer)), delay, peer, x.mechanism(), &failed.0).await;
                    }
                }
            }
            (other, _) => {
                let api = header.api_key;
                tracing::info!(peer, api, request = ?std::mem::discriminant(&other), "a request before SASL authentication; closing");
                return closing(peer, "a request before authentication");
            }
        }
    }
}

/// A SaslAuthenticate answer.
fn auth_response(
    error_code: ErrorCode,
    error_message: Option<String>,
    auth_bytes: Vec<u8>,
) -> SaslAuthenticateResponse {
    SaslAuthenticateResponse { error_code, error_message, auth_bytes: auth_bytes.into(), ..Default::default() }
}

fn closing<T>(peer: &str, why: &str) -> Option<T> {
    metrics::count(Counter::AuthenticationFailures, 1);
    tracing::info!(peer, why, "SASL authentication failed; closing");
    None
}

/// A failed exchange: the answer (where Kafka gives one), the delay, then the end, once the
/// client has closed or a second has passed (what it sends meanwhile is read and dropped): a
/// client that reads the answer and the close in one go may drop the answer (kafka-python
/// does), and a socket closed with unread bytes resets the connection.
async fn fail<S: AsyncRead + AsyncWrite + Unpin, M: Message>(
    stream: &mut S,
    answer: Option<(&RequestHeader, M)>,
    delay: Duration,
    peer: &str,
    mechanism: &str,
    reason: &str,
) -> Option<SaslSession> {
    metrics::count(Counter::AuthenticationFailures, 1);
    tracing::info!(peer, mechanism, reason, "SASL authentication failed; closing");
    glommio::timer::sleep(delay).await;
    if let Some((header, body)) = answer {
        let _ = respond(stream, header, body).await;
    }
    let mut sink = [0u8; 4096];
    let linger = async {
        while let Ok(n) = stream.read(&mut sink).await {
            if n == 0 {
                break;
            }
        }
    };
    within(Duration::from_secs(1), linger).await;
    let _ = stream.close().await;
    None
}

async fn respond<S: AsyncWrite + Unpin, M: Message>(stream: &mut S, header: &RequestHeader, mut body: M) -> Option<()> {
    let bytes = encode_response(header, &mut body).ok()?;
    write_all(stream, &bytes).await
}

/// Write and flush, within [`WRITE_LIMIT`] (a client that stops reading mid-exchange is
/// dropped, not waited for).
async fn write_all<S: AsyncWrite + Unpin>(stream: &mut S, bytes: &[u8]) -> Option<()> {
    within(WRITE_LIMIT, async {
        stream.write_all(bytes).await.ok()?;
        stream.flush().await.ok()
    })
    .await?
}

/// How long one answer of the SASL exchange may take to be taken by the client.
const WRITE_LIMIT: Duration = Duration::from_secs(30);

async fn write_frame<S: AsyncWrite + Unpin>(stream: &mut S, body: &[u8]) -> Option<()> {
    let mut frame = (body.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(body);
    write_all(stream, &frame).await
}

/// One size-prefixed frame, within `idle` and at most `max` bytes (`None`: closed, idle, too
/// large: the connection ends).
async fn read_frame<S: AsyncRead + Unpin>(stream: &mut S, idle: Duration, max: usize, peer: &str) -> Option<Vec<u8>> {
    let mut len = [0u8; 4];
    within(idle, stream.read_exact(&mut len)).await?.ok()?;
    let n = i32::from_be_bytes(len);
    if n < 0 || n as usize > max {
        return closing(peer, "a frame larger than sasl.server.max.receive.size");
    }
    let mut buf = vec![0u8; n as usize];
    within(idle, stream.read_exact(&mut buf)).await?.ok()?;
    Some(buf)
}
