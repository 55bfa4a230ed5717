//! One client connection. A reader task reads size-prefixed frames and starts a handler task
//! per request (at most `tidemark.max.inflight.requests.per.connection` read and not yet
//! answered: requests are pipelined); a writer sends the responses in request order. Every
//! frame is held against the shard's request budget (`queued.max.request.bytes`) until it is
//! answered, and fetched records against the fetch budget until written, so a flood of large
//! requests waits instead of growing memory. Bad input is a Kafka error where one can be
//! encoded, otherwise the connection closes with one log line; the broker keeps serving
//! everyone else.

use crate::budget::Held;
use crate::cluster::net::QuorumDoor;
use crate::deadline::within;
use crate::io::DmaDisk;
use crate::metrics::{self, Counter, Stage};
use crate::protocol::{decode_request, error_response};
use crate::server::api::{handle, Dispatched};
use crate::server::authenticate::{authenticate, SaslSession};
use crate::server::limits::Admitted;
use crate::server::listeners::Listener;
use crate::server::session::Session;
use crate::server::shard::Shard;
use crate::server::tls;
use bytes::Bytes;
use futures_channel::oneshot;
use futures_lite::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use glommio::channels::local_channel::{self, LocalReceiver, LocalSender};
use glommio::net::TcpStream;
use glommio::sync::Semaphore;
use std::rc::Rc;
use std::time::Duration;

/// What a handler task yields: bytes to write (with the memory they hold), nothing (acks=0),
/// or "close the connection"; whether its answer is the connection's last (a failed
/// re-authentication); and when it was ready (the `response_queue` stage runs from then to the
/// writer taking it). The in-flight permit rides along until the answer is written.
type Outcome = (Result<Option<(Bytes, Held)>, ()>, glommio::sync::StaticPermit, bool, std::time::Instant);

/// Serve one connection until the client closes it, it idles past `connections.max.idle.ms`,
/// or a frame is out of bounds. On a TLS listener the handshake comes first (within
/// `connections.max.idle.ms`); a failed one closes the connection with a log line.
pub async fn serve(shard: Rc<Shard>, stream: TcpStream, listener: Rc<Listener>, admitted: Admitted) {
    let peer = stream.peer_addr().map(|a| a.to_string()).unwrap_or_default();
    metrics::count(Counter::Connections, 1);
    let _ = stream.set_nodelay(true);
    let Some(tls) = &listener.tls else {
        return open(shard, stream, peer, tls::ANONYMOUS.to_string(), listener, admitted).await;
    };
    if let Some((stream, principal)) = handshake(&shard, tls, stream, &peer, &listener).await {
        open(shard, stream, peer, principal, listener, admitted).await
    }
}

/// The TLS handshake on a TLS listener: the stream and its principal (the client
/// certificate's, mapped; on SASL_SSL SASL names the principal later), or `None` with a log
/// line (the connection is dropped).
async fn handshake(
    shard: &Shard,
    tls: &tls::Tls,
    stream: TcpStream,
    peer: &str,
    listener: &Listener,
) -> Option<(futures_rustls::server::TlsStream<TcpStream>, String)> {
    let idle = shard.config().limits.connections_max_idle;
    match within(idle, tls.acceptor().accept(stream)).await {
        // On SASL_SSL the principal is SASL's: the certificate is not mapped (as in Kafka).
        Some(Ok(stream)) if listener.protocol.sasl() => Some((stream, tls::ANONYMOUS.to_string())),
        Some(Ok(stream)) => match tls.principal(stream.get_ref().1) {
            Ok(principal) => {
                tracing::debug!(peer, principal, listener = listener.name, "TLS connection");
                Some((stream, principal))
            }
            Err(error) => {
                metrics::count(Counter::AuthenticationFailures, 1);
                tracing::info!(peer, listener = listener.name, error, "client certificate refused; closing");
                None
            }
        },
        Some(Err(error)) => {
            metrics::count(Counter::TlsHandshakeFailures, 1);
            tracing::info!(peer, listener = listener.name, %error, "TLS handshake failed; closing");
            None
        }
        None => {
            metrics::count(Counter::TlsHandshakeFailures, 1);
            tracing::info!(
                peer,
                listener = listener.name,
                "TLS handshake not done within connections.max.idle.ms; closing"
            );
            None
        }
    }
}

/// A connection on the CONTROLLER listener, handed over by the quorum: secured as the
/// listener's protocol says (TLS, then SASL), then by its first 4 bytes either a quorum
/// connection (the quorum's preface), passed to `quorum` once its principal may act for the
/// cluster, or a Kafka client of the controller, served with only the controller's APIs
/// ([`crate::server::api::CONTROLLER_APIS`]).
pub async fn serve_controller_listener(
    shard: Rc<Shard>,
    stream: TcpStream,
    listener: Rc<Listener>,
    admitted: Admitted,
    quorum: QuorumDoor<DmaDisk>,
) {
    let peer = stream.peer_addr().map(|a| a.to_string()).unwrap_or_default();
    metrics::count(Counter::Connections, 1);
    let _ = stream.set_nodelay(true);
    let Some(tls) = &listener.tls else {
        let principal = tls::ANONYMOUS.to_string();
        return controller_connection(shard, stream, peer, principal, listener, admitted, quorum).await;
    };
    if let Some((stream, principal)) = handshake(&shard, tls, stream, &peer, &listener).await {
        controller_connection(shard, stream, peer, principal, listener, admitted, quorum).await
    }
}

/// A connection on the CONTROLLER listener past TLS.
async fn controller_connection<S: AsyncRead + AsyncWrite + Unpin + 'static>(
    shard: Rc<Shard>,
    mut stream: S,
    peer: String,
    principal: String,
    listener: Rc<Listener>,
    admitted: Admitted,
    quorum: QuorumDoor<DmaDisk>,
) {
    let Some((principal, sasl)) = authenticated(&shard, &mut stream, &peer, principal, &listener).await else {
        return;
    };
    let idle = shard.config().limits.connections_max_idle;
    let mut first = [0u8; 4];
    if !matches!(within(idle, stream.read_exact(&mut first)).await, Some(Ok(()))) {
        return;
    }
    if first == crate::cluster::net::PREFACE {
        if !may_act_for_cluster(&shard, &principal, &acl_host(&peer)) {
            metrics::count(Counter::AuthenticationFailures, 1);
            tracing::warn!(
                peer,
                principal,
                listener = listener.name,
                "a quorum connection refused: its principal is not a super user and has no CLUSTER_ACTION on the \
                 cluster; closing"
            );
            return;
        }
        let _admitted = admitted;
        return quorum.serve(Handed::expiring(stream, sasl.expires)).await;
    }
    let stream = Handed::prefixed(first, stream);
    start_session(shard, stream, peer, principal, sasl, listener, admitted).await
}

/// Whether `principal` may take part in the cluster's own traffic (the quorum's RPCs, a
/// broker's metadata fetches and heartbeats): as Kafka requires of them, a super user or
/// CLUSTER_ACTION on the cluster; anyone without an authorizer.
fn may_act_for_cluster(shard: &Shard, principal: &str, host: &str) -> bool {
    use crate::security::acl::{Asker, Operation, ResourceType, CLUSTER_NAME};
    let c = shard.config();
    !c.authorizer_enabled
        || shard.acls().authorize(
            &c.authorizer,
            Asker { principal, host },
            Operation::ClusterAction,
            ResourceType::Cluster,
            CLUSTER_NAME,
        )
}

/// A stream as the CONTROLLER listener hands it on: the bytes already read from it (`first`
/// from `taken` on) are read again first, and once `expires` has passed (a quorum
/// connection's SASL session, `connections.max.reauth.ms`) it reads as closed, so the other
/// node dials and authenticates again.
struct Handed<S> {
    first: [u8; 4],
    taken: usize,
    inner: S,
    expires: Option<std::time::Instant>,
}

impl<S> Handed<S> {
    /// A Kafka client's stream, its first 4 bytes read.
    fn prefixed(first: [u8; 4], inner: S) -> Handed<S> {
        Handed { first, taken: 0, inner, expires: None }
    }

    /// A quorum connection's stream (its preface consumed), closed once `expires` passes.
    fn expiring(inner: S, expires: Option<std::time::Instant>) -> Handed<S> {
        Handed { first: [0; 4], taken: 4, inner, expires }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Handed<S> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut [u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        if self.taken < self.first.len() {
            let n = (self.first.len() - self.taken).min(buf.len());
            let from = self.taken;
            buf[..n].copy_from_slice(&self.first[from..from + n]);
            self.taken += n;
            return std::task::Poll::Ready(Ok(n));
        }
        if self.expires.is_some_and(|at| std::time::Instant::now() >= at) {
            metrics::count(Counter::ExpiredSessionsClosed, 1);
            return std::task::Poll::Ready(Ok(0));
        }
        std::pin::Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Handed<S> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_close(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_close(cx)
    }
}

/// A connection past TLS: on a SASL listener the SASL exchange comes first and names the
/// principal (`User:<name>`; a client certificate does not count there, as in Kafka).
async fn open<S: AsyncRead + AsyncWrite + Unpin + 'static>(
    shard: Rc<Shard>,
    mut stream: S,
    peer: String,
    principal: String,
    listener: Rc<Listener>,
    admitted: Admitted,
) {
    if let Some((principal, sasl)) = authenticated(&shard, &mut stream, &peer, principal, &listener).await {
        start_session(shard, stream, peer, principal, sasl, listener, admitted).await
    }
}

/// On a SASL listener, the SASL exchange and the principal it names; else `principal` (TLS's
/// or ANONYMOUS). `None`: the connection is to be closed.
async fn authenticated<S: AsyncRead + AsyncWrite + Unpin>(
    shard: &Shard,
    stream: &mut S,
    peer: &str,
    principal: String,
    listener: &Listener,
) -> Option<(String, SaslSession)> {
    if !listener.protocol.sasl() {
        return Some((principal, SaslSession::default()));
    }
    let sasl = authenticate(shard, stream, peer, &listener.sasl_mechanisms).await?;
    tracing::debug!(peer, user = sasl.user, listener = listener.name, "SASL authenticated");
    Some((format!("User:{}", sasl.user), sasl))
}

/// Serve an authenticated connection's requests.
async fn start_session<S: AsyncRead + AsyncWrite + Unpin + 'static>(
    shard: Rc<Shard>,
    stream: S,
    peer: String,
    principal: String,
    sasl: SaslSession,
    listener: Rc<Listener>,
    admitted: Admitted,
) {
    let host = acl_host(&peer);
    let on_controller_listener =
        shard.config().cluster.as_ref().is_some_and(|c| c.controller_listener == listener.name);
    let session = Rc::new(Session {
        on_controller_listener,
        peer,
        principal,
        listener,
        host,
        muted_until: Default::default(),
        sasl: std::cell::RefCell::new(sasl),
        closing: Default::default(),
        enrolled: Default::default(),
    });
    serve_stream(shard, stream, session, admitted).await
}

/// A peer address (`ip:port`) as an ACL host.
fn acl_host(peer: &str) -> String {
    match peer.parse::<std::net::SocketAddr>().map(|a| a.ip().to_canonical()) {
        Ok(std::net::IpAddr::V4(ip)) => ip.to_string(),
        Ok(std::net::IpAddr::V6(ip)) => ip.segments().iter().map(|s| format!("{s:x}")).collect::<Vec<_>>().join(":"),
        Err(_) => peer.to_string(),
    }
}

/// Serve requests on a connection (plain or TLS).
async fn serve_stream<S: AsyncRead + AsyncWrite + Unpin + 'static>(
    shard: Rc<Shard>,
    stream: S,
    session: Rc<Session>,
    admitted: Admitted,
) {
    let (reader, writer) = futures_lite::io::split(stream);
    let limits = shard.config().limits.clone();
    let (tx, rx) = local_channel::new_bounded::<glommio::Task<Outcome>>(limits.max_inflight_per_connection);
    let reading = glommio::spawn_local(read_requests(shard, reader, tx, session.clone()));
    write_responses(writer, rx, limits.connections_max_idle, &session).await;
    reading.cancel().await;
    drop(admitted);
}

/// The reader: frames in, one handler task per request (at most the in-flight limit), each
/// handed to the writer in request order. Each request waits for the one before it to have
/// issued its side effects. An idle or out-of-bounds connection ends with an `Err` outcome,
/// which closes it.
async fn read_requests<R: AsyncRead + Unpin>(
    shard: Rc<Shard>,
    mut reader: R,
    tx: LocalSender<glommio::Task<Outcome>>,
    session: Rc<Session>,
) {
    let peer = session.peer.as_str();
    let limits = shard.config().limits.clone();
    let (idle, max) = (limits.connections_max_idle, shard.config().max_request_bytes);
    let in_flight = Rc::new(Semaphore::new(limits.max_inflight_per_connection as u64));
    let close = |permit| glommio::spawn_local(async move { (Err(()), permit, true, std::time::Instant::now()) });
    let mut turn: Option<oneshot::Receiver<()>> = None;
    loop {
        let Ok(permit) = in_flight.acquire_static_permit(1).await else { return };
        // A client over its quota waits before its next request is read (KIP-219).
        session.unmuted().await;
        let mut len = [0u8; 4];
        match within(idle, reader.read_exact(&mut len)).await {
            Some(Ok(())) => {}
            Some(Err(_)) => return, // closed by the client
            None => {
                let idle_ms = idle.as_millis() as u64;
                tracing::info!(peer, idle_ms, "idle connection closed (connections.max.idle.ms)");
                let _ = tx.send(close(permit)).await;
                return;
            }
        }
        let n = i32::from_be_bytes(len);
        if n < 8 || n as usize > max {
            tracing::warn!(
                peer,
                size = n,
                max,
                "request size out of bounds (socket.request.max.bytes); closing the connection"
            );
            let _ = tx.send(close(permit)).await;
            return;
        }
        // The frame's memory is held from before it is read until it is answered.
        let frame_held = shard.request_memory().reserve(n as u64).await;
        let started = std::time::Instant::now();
        let mut buf = vec![0u8; n as usize];
        match within(idle, reader.read_exact(&mut buf)).await {
            Some(Ok(())) => {}
            Some(Err(_)) => return,
            None => {
                tracing::warn!(peer, size = n, "request not received in connections.max.idle.ms; closing");
                let _ = tx.send(close(permit)).await;
                return;
            }
        }
        // A session past connections.max.reauth.ms takes nothing but a re-authentication
        // (KIP-368; Kafka's processor closes it the same way); a failed one closes.
        let api_key = i16::from_be_bytes([buf[0], buf[1]]);
        let reauth = matches!(api_key, crate::protocol::SASL_HANDSHAKE | crate::protocol::SASL_AUTHENTICATE);
        if session.closing.get() || (!reauth && session.sasl.borrow().expired(std::time::Instant::now())) {
            if !session.closing.get() {
                metrics::count(Counter::ExpiredSessionsClosed, 1);
                tracing::info!(peer, "SASL session expired (connections.max.reauth.ms); closing");
            }
            let _ = tx.send(close(permit)).await;
            return;
        }
        metrics::since(Stage::NetworkRead, started);
        metrics::count(Counter::BytesIn, n as u64 + 4);
        metrics::count(Counter::Requests, 1);
        let (shard, session) = (shard.clone(), session.clone());
        let (done_tx, done_rx) = oneshot::channel();
        let wait = turn.replace(done_rx);
        let task = glommio::spawn_local(async move {
            if let Some(w) = wait {
                let _ = w.await; // a dropped sender (error, closed) also ends the wait
            }
            // A request read while the one before it earned a throttle waits it out too, as
            // if it had not been read yet (the throttles counted before a handler lets the next
            // request start: Produce's): pipelining does not let a producer past its quota.
            session.unmuted().await;
            if session.closing.get() {
                return (Err(()), permit, true, std::time::Instant::now()); // read after a failed re-authentication
            }
            let outcome = answer(&shard, &session, Bytes::from(buf), Dispatched::new(done_tx)).await;
            drop(frame_held);
            // Only a failed SaslAuthenticate sets `closing`: its answer is the last.
            let last = api_key == crate::protocol::SASL_AUTHENTICATE && session.closing.get();
            (outcome, permit, last, std::time::Instant::now())
        });
        if tx.send(task).await.is_err() {
            return; // the writer closed the connection
        }
    }
}

/// The writer: each handler's outcome in request order, written within `write_limit` (a
/// client that stops reading holds its responses' memory that long at most), then the
/// memory and the in-flight slot go back.
async fn write_responses<W: AsyncWrite + Unpin>(
    mut writer: W,
    rx: LocalReceiver<glommio::Task<Outcome>>,
    write_limit: Duration,
    session: &Session,
) {
    let peer = session.peer.as_str();
    while let Some(task) = rx.recv().await {
        let (outcome, permit, last, ready) = task.await;
        match outcome {
            Ok(Some((bytes, held))) => {
                // How long the answer waited behind earlier ones on this connection (0 when
                // the writer was already waiting for it).
                metrics::since(Stage::ResponseQueue, ready);
                let started = std::time::Instant::now();
                match within(write_limit, writer.write_all(&bytes)).await {
                    Some(Ok(())) => {}
                    Some(Err(_)) => break,
                    None => {
                        tracing::warn!(
                            peer,
                            bytes = bytes.len(),
                            "response not taken in connections.max.idle.ms; closing"
                        );
                        break;
                    }
                }
                metrics::since(Stage::ResponseWrite, started);
                metrics::count(Counter::BytesOut, bytes.len() as u64);
                drop(held);
                if last {
                    break;
                }
            }
            Ok(None) => {}
            Err(()) => break,
        }
        drop(permit);
    }
    drop(rx);
    let _ = writer.close().await;
}

async fn answer(
    shard: &Rc<Shard>,
    session: &Session,
    frame: Bytes,
    dispatched: Dispatched,
) -> Result<Option<(Bytes, Held)>, ()> {
    let peer = session.peer.as_str();
    match decode_request(frame) {
        Ok((header, _))
            if session.on_controller_listener && !crate::server::api::CONTROLLER_APIS.contains(&header.api_key) =>
        {
            // Kafka's controller closes a connection asking for an API its listener does not
            // offer ("Received request api key ... which is not enabled").
            tracing::info!(peer, api = header.api_key, "an API the controller listener does not serve; closing");
            Err(())
        }
        Ok((header, request)) => {
            let started = std::time::Instant::now();
            let stage = match header.api_key {
                crate::protocol::PRODUCE => Stage::RequestProduce,
                crate::protocol::FETCH => Stage::RequestFetch,
                _ => Stage::RequestOther,
            };
            let answer = handle(shard, session, &header, request, dispatched).await;
            metrics::since(stage, started);
            answer.map_err(|e| {
                tracing::warn!(peer, api = header.api_key, version = header.api_version, error = %e, "cannot encode response; closing");
            })
        }
        Err(failure) => match failure.header.as_ref().and_then(|h| error_response(h, &failure.error)) {
            Some(answer) => Ok(Some((answer, Held::default()))),
            None => {
                tracing::warn!(peer, error = %failure.error, api = failure.header.as_ref().map(|h| h.api_key), "undecodable request; closing");
                Err(())
            }
        },
    }
}

#[cfg(test)]
mod tests {
    /// ACL hosts as Kafka names them: an IPv4 client on a dual-stack listener as IPv4, IPv6
    /// uncompressed (Java's `getHostAddress`).
    #[test]
    fn acl_hosts() {
        assert_eq!(super::acl_host("10.0.0.1:5000"), "10.0.0.1");
        assert_eq!(super::acl_host("[::ffff:10.0.0.1]:5000"), "10.0.0.1");
        assert_eq!(super::acl_host("[::1]:5000"), "0:0:0:0:0:0:0:1");
    }
}
