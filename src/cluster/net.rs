//! The quorum's links: openraft's RPCs between controllers, over TCP on the CONTROLLER listener.
//!
//! A connection opens with a 4-byte preface ([`PREFACE`]), which no Kafka request begins with
//! (its first byte would be a frame size's top byte), so the CONTROLLER listener also serves
//! Kafka's clients of a controller (`--bootstrap-controller`): anything else is handed to
//! [`Served::kafka`]. Then frames: a 4-byte big-endian length and a JSON body. A request
//! ([`Request`]) carries the sender's cluster check (a hash of `controller.quorum.voters`, so a
//! node configured with another voter set is refused rather than split the quorum; an observer
//! that knows no voter set sends [`OBSERVER`] and may only fetch, write through, heartbeat and
//! describe) and one [`Rpc`]; the answer is one [`Reply`]. A connection carries one request at a
//! time: openraft's replication to a peer is sequential, and heartbeats and snapshots get clients
//! of their own.
//!
//! Failures are openraft's to handle: a peer that cannot be reached is `Unreachable` (openraft
//! backs off), a broken connection or timeout is a network error, and the connection is dropped
//! and dialled again on the next call. Nothing connects eagerly.

use super::state::Raft;
use super::types::{ControllerNode, LogId, MetaCommand, MetaResponse, Snapshot, SnapshotData, SnapshotMeta, Tm, Vote};
use crate::deadline::within;
use crate::io::Disk;
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use openraft::errors::{NetworkError, RPCError, ReplicationClosed, StreamingError, Timeout, Unreachable};
use openraft::network::v2::RaftNetworkV2;
use openraft::network::RPCOption;
use openraft::raft::{AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, VoteRequest, VoteResponse};
use openraft::RaftNetworkFactory;
use serde::{Deserialize, Serialize};
use std::cell::Cell;
use std::future::Future;
use std::io;
use std::rc::Rc;
use std::time::Duration;

/// The largest frame accepted (a snapshot of a large cluster's metadata fits).
pub const MAX_FRAME: usize = 256 << 20;

/// How long a connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// How long the leader waits for a write to commit before answering that it did not (openraft
/// does not bound a proposal made by a leader about to lose its quorum).
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// The first bytes of every quorum connection (0xFF: never a Kafka frame size's first byte).
pub const PREFACE: [u8; 4] = [0xff, b'T', b'M', b'Q'];

/// The cluster check an observer sends when it knows no voter set (`controller.quorum.bootstrap.servers`).
pub const OBSERVER: u64 = 0;

/// The most entries one [`Rpc::Fetch`] answers with.
pub const FETCH_MAX_ENTRIES: u64 = 1000;

/// The longest an [`Rpc::Fetch`] waits for a new entry before answering with none.
pub const FETCH_MAX_WAIT: Duration = Duration::from_secs(5);

/// What one controller asks another.
#[derive(Serialize, Deserialize, Debug)]
pub enum Rpc {
    Append(AppendEntriesRequest<Tm>),
    Vote(VoteRequest<Tm>),
    PreVote(VoteRequest<Tm>),
    Snapshot {
        vote: Vote,
        meta: SnapshotMeta,
        /// The snapshot's bytes, which are JSON text (`cluster::state`): a JSON string here,
        /// not an array of numbers.
        data: String,
    },
    /// A metadata change for the leader to commit (a node that is not the leader forwards it).
    Write(MetaCommand),
    /// A broker's heartbeat to the active controller (KRaft's BrokerHeartbeat).
    Heartbeat {
        broker: i32,
        epoch: u64,
    },
    /// The quorum as the leader sees it (DescribeQuorum).
    DescribeQuorum,
    /// An observer's fetch of the committed metadata log after `after` (KRaft's observers
    /// fetch the same way), waiting up to `wait_ms` for something new.
    Fetch {
        after: Option<LogId>,
        wait_ms: u64,
    },
    /// Make node `id` a voter (AddRaftVoter): a learner first, caught up, then a voter.
    AddVoter {
        id: u64,
        node: ControllerNode,
        timeout_ms: u64,
    },
    /// Remove voter `id` with directory `directory_id` (RemoveRaftVoter).
    RemoveVoter {
        id: u64,
        directory_id: String,
    },
}

impl Rpc {
    /// Whether it is openraft's replication or election, which a node whose directory is not
    /// the one the sender's membership names must refuse.
    fn is_raft(&self) -> bool {
        matches!(self, Rpc::Append(_) | Rpc::Vote(_) | Rpc::PreVote(_) | Rpc::Snapshot { .. })
    }
}

impl Rpc {
    /// What an observer (a broker-only node) may ask of a controller: what its broker needs and
    /// the quorum's admin calls it forwards (authorized by the broker, as Kafka's forwarding).
    fn observer_may(&self) -> bool {
        matches!(
            self,
            Rpc::Fetch { .. }
                | Rpc::Write(_)
                | Rpc::Heartbeat { .. }
                | Rpc::DescribeQuorum
                | Rpc::AddVoter { .. }
                | Rpc::RemoveVoter { .. }
        )
    }
}

/// The answer to an [`Rpc`].
#[derive(Serialize, Deserialize, Debug)]
pub enum Reply {
    Append(AppendEntriesResponse<Tm>),
    Vote(VoteResponse<Tm>),
    Snapshot(SnapshotResponse<Tm>),
    /// A write committed and applied: its response and log id.
    Written {
        response: MetaResponse,
        log_id: LogId,
    },
    /// This node is not the leader (the leader it knows, if any).
    NotLeader {
        leader: Option<u64>,
    },
    /// A heartbeat's answer: whether the broker is registered at that epoch (if not, it
    /// registers again), and whether it is fenced.
    Heartbeat {
        registered: bool,
        fenced: bool,
    },
    /// The quorum as the leader sees it.
    Quorum(super::types::QuorumDescription),
    /// A fetch's answer: committed entries following on from the fetch's `after` (none: nothing
    /// new yet), and the leader the answering node knows.
    Entries {
        entries: Vec<super::types::Entry>,
        leader: Option<u64>,
    },
    /// A fetch's answer when the entries after `after` are no longer in the log: the newest
    /// snapshot (a snapshot file's JSON), then fetch on from its last log id.
    Image {
        meta: SnapshotMeta,
        data: String,
        leader: Option<u64>,
    },
    /// The request could not be served (a cluster mismatch, a shutdown, a bad frame).
    Failed(String),
    /// A voter change's outcome.
    VoterChange(Result<(), super::types::VoterChangeError>),
}

#[derive(Serialize, Deserialize, Debug)]
struct Request {
    cluster: u64,
    /// The sending node's id.
    #[serde(default)]
    from: u64,
    /// The directory id the sender's membership gives the receiver (KIP-853's voter key; empty:
    /// none, a static quorum).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    to_dir: String,
    rpc: Rpc,
}

/// Links cut between nodes (fault injection for tests: a network partition without network
/// namespaces). A cut link behaves as a dropped one: calls over it fail as unreachable, and a
/// request that arrives over it is not answered (its connection closes).
#[derive(Debug, Default)]
pub struct Links {
    cut: std::cell::RefCell<std::collections::HashSet<(u64, u64)>>,
}

impl Links {
    /// Cut the links between `a` and `b`, both ways.
    pub fn cut(&self, a: u64, b: u64) {
        self.cut.borrow_mut().extend([(a, b), (b, a)]);
    }

    /// Restore every link.
    pub fn heal(&self) {
        self.cut.borrow_mut().clear();
    }

    fn is_cut(links: &Option<Rc<Links>>, from: u64, to: u64) -> bool {
        links.as_ref().is_some_and(|l| l.cut.borrow().contains(&(from, to)))
    }
}

/// Write one frame.
pub async fn write_frame<W: futures_lite::AsyncWrite + Unpin>(w: &mut W, body: &[u8]) -> io::Result<()> {
    write_prefixed(w, &[], body).await
}

/// Write one request frame: the voter set's hash first, so that a peer of another cluster (or
/// anything else reaching the port) is refused before its body is read.
async fn write_request<W: futures_lite::AsyncWrite + Unpin>(w: &mut W, cluster: u64, body: &[u8]) -> io::Result<()> {
    write_prefixed(w, &cluster.to_be_bytes(), body).await
}

async fn write_prefixed<W: futures_lite::AsyncWrite + Unpin>(w: &mut W, prefix: &[u8], body: &[u8]) -> io::Result<()> {
    let len = u32::try_from(body.len()).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "frame too large"))?;
    let mut frame = Vec::with_capacity(prefix.len() + 4 + body.len());
    frame.extend_from_slice(prefix);
    frame.extend_from_slice(&len.to_be_bytes());
    frame.extend_from_slice(body);
    w.write_all(&frame).await?;
    w.flush().await
}

/// Read one frame (`None`: the peer closed the connection between frames).
pub async fn read_frame<R: futures_lite::AsyncRead + Unpin>(r: &mut R) -> io::Result<Option<Vec<u8>>> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len).await {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = u32::from_be_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("frame of {len} bytes (at most {MAX_FRAME})")));
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).await?;
    Ok(Some(body))
}

/// A failure of one call.
#[derive(Debug, thiserror::Error)]
enum CallError {
    #[error("cannot connect to controller {0}: {1}")]
    Connect(String, io::Error),
    #[error("controller {0}: {1}")]
    Io(String, io::Error),
    #[error("controller {0} did not answer within {1:?}")]
    Timeout(String, Duration),
    #[error("controller {0} refused the request: {1}")]
    Refused(String, String),
}

/// The connections to one peer controller (openraft asks for one per purpose).
pub struct Peer {
    from: u64,
    target: u64,
    addr: String,
    /// The target's directory id as the membership names it (empty: none).
    to_dir: String,
    cluster: u64,
    dial: Dial,
    stream: Option<crate::client::security::Stream>,
}

/// How a node dials another: its link's security (TLS, SASL) and, in tests, the links cut.
#[derive(Clone, Default)]
pub struct Dial {
    pub security: crate::client::security::Shared,
    pub links: Option<Rc<Links>>,
}

impl Peer {
    /// Calls from node `from` to node `target` at `addr`.
    pub fn new(from: u64, target: u64, addr: String, cluster: u64, dial: Dial) -> Peer {
        Peer { from, target, addr, to_dir: String::new(), cluster, dial, stream: None }
    }

    /// Calls to a member of the quorum as the membership names it.
    pub fn to_member(from: u64, target: u64, node: &ControllerNode, cluster: u64, dial: Dial) -> Peer {
        Peer { to_dir: node.directory_id.clone(), ..Peer::new(from, target, node.addr.clone(), cluster, dial) }
    }

    /// Connect to the peer, secure the connection as the link says and open it as a quorum
    /// connection (the preface).
    async fn dial(&self, limit: Duration) -> Result<crate::client::security::Stream, CallError> {
        use std::net::ToSocketAddrs;
        let addr = self.addr.clone();
        let failed = |e: io::Error| CallError::Connect(addr.clone(), e);
        let resolved = addr.to_socket_addrs().map_err(failed)?.next();
        let socket = resolved.ok_or_else(|| failed(io::Error::new(io::ErrorKind::NotFound, "no address")))?;
        let host = addr.rsplit_once(':').map_or(addr.as_str(), |(h, _)| h).trim_matches(['[', ']']);
        let security = self.dial.security.current();
        // A plain connection within the call's bound; TLS and SASL take round trips of their
        // own (and SCRAM's hashing), so a secured one gets the whole connect timeout.
        let limit = if security.tls.is_none() && security.login.is_none() { limit } else { CONNECT_TIMEOUT };
        let mut stream = match security.connect(host, socket, limit).await {
            Ok(s) => s,
            // Refused or unreachable: openraft backs off. Authentication refused or a failed
            // handshake: the same, and this node's log says why (each attempt).
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied || e.to_string().contains("TLS") => {
                tracing::warn!(peer = addr, error = %e, "cannot authenticate to the controller; retrying");
                return Err(failed(e));
            }
            Err(e) => return Err(failed(e)),
        };
        stream.write_all(&PREFACE).await.map_err(|e| CallError::Io(addr.clone(), e))?;
        Ok(stream)
    }

    /// One round trip, dialling first if needed; any failure drops the connection.
    async fn call(&mut self, rpc: Rpc, limit: Duration) -> Result<Reply, CallError> {
        if Links::is_cut(&self.dial.links, self.from, self.target) {
            self.stream = None;
            return Err(CallError::Connect(self.addr.clone(), io::Error::from(io::ErrorKind::ConnectionRefused)));
        }
        let request = Request { cluster: self.cluster, from: self.from, to_dir: self.to_dir.clone(), rpc };
        let body = serde_json::to_vec(&request).map_err(|e| CallError::Io(self.addr.clone(), io::Error::other(e)))?;
        if body.len() > MAX_FRAME {
            let e = io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a request of {} bytes (at most {MAX_FRAME})", body.len()),
            );
            return Err(CallError::Io(self.addr.clone(), e));
        }
        if self.stream.is_none() {
            self.stream = Some(self.dial(CONNECT_TIMEOUT.min(limit)).await?);
        }
        let stream = self.stream.as_mut().expect("connected");
        let round_trip = async {
            write_request(stream, self.cluster, &body).await?;
            read_frame(stream).await?.ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))
        };
        let result = match within(limit, round_trip).await {
            Some(Ok(bytes)) => serde_json::from_slice::<Reply>(&bytes)
                .map_err(|e| CallError::Io(self.addr.clone(), io::Error::new(io::ErrorKind::InvalidData, e))),
            Some(Err(e)) => Err(CallError::Io(self.addr.clone(), e)),
            None => Err(CallError::Timeout(self.addr.clone(), limit)),
        };
        match result {
            Ok(Reply::Failed(why)) => {
                self.stream = None;
                Err(CallError::Refused(self.addr.clone(), why))
            }
            Ok(reply) => Ok(reply),
            Err(e) => {
                self.stream = None;
                Err(e)
            }
        }
    }

    /// Forward a metadata change to this peer (the leader, as far as the caller knows).
    pub async fn write(&mut self, command: MetaCommand, limit: Duration) -> io::Result<Reply> {
        self.call(Rpc::Write(command), limit).await.map_err(io::Error::other)
    }

    /// Ask this peer (the leader, as far as the caller knows) how the quorum stands.
    pub async fn describe_quorum(&mut self, limit: Duration) -> io::Result<Reply> {
        self.call(Rpc::DescribeQuorum, limit).await.map_err(io::Error::other)
    }

    /// Any call, answered by the peer's reply (a refusal is an error).
    pub async fn call_rpc(&mut self, rpc: Rpc, limit: Duration) -> io::Result<Reply> {
        self.call(rpc, limit).await.map_err(io::Error::other)
    }

    /// Fetch the committed metadata after `after` from this peer (any controller).
    pub async fn fetch(&mut self, after: Option<LogId>, wait: Duration) -> io::Result<Reply> {
        let rpc = Rpc::Fetch { after, wait_ms: wait.as_millis() as u64 };
        self.call(rpc, wait + CONNECT_TIMEOUT + Duration::from_secs(5)).await.map_err(io::Error::other)
    }

    /// The peer's address.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The node called (`u64::MAX`: a bootstrap server, its id not known).
    pub fn target(&self) -> u64 {
        self.target
    }

    /// Send a broker's heartbeat to this peer (the leader, as far as the caller knows).
    pub async fn heartbeat(&mut self, broker: i32, epoch: u64, limit: Duration) -> io::Result<Reply> {
        self.call(Rpc::Heartbeat { broker, epoch }, limit).await.map_err(io::Error::other)
    }

    fn rpc_error(&self, e: CallError) -> RPCError<Tm> {
        match e {
            CallError::Connect(..) => RPCError::Unreachable(Unreachable::new(&e)),
            CallError::Timeout(_, limit) => RPCError::Timeout(Timeout {
                action: openraft::network::RPCTypes::AppendEntries,
                id: 0,
                target: self.target,
                timeout: limit,
            }),
            CallError::Io(..) | CallError::Refused(..) => RPCError::Network(NetworkError::new(&e)),
        }
    }

    fn unexpected(&self, reply: Reply) -> RPCError<Tm> {
        let e = CallError::Refused(self.addr.clone(), format!("unexpected reply {reply:?}"));
        RPCError::Network(NetworkError::new(&e))
    }
}

impl RaftNetworkV2<Tm> for Peer {
    type SnapshotData = SnapshotData;

    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<Tm>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<Tm>, RPCError<Tm>> {
        match self.call(Rpc::Append(rpc), option.hard_ttl()).await {
            Ok(Reply::Append(r)) => Ok(r),
            Ok(other) => Err(self.unexpected(other)),
            Err(e) => Err(self.rpc_error(e)),
        }
    }

    async fn vote(&mut self, rpc: VoteRequest<Tm>, option: RPCOption) -> Result<VoteResponse<Tm>, RPCError<Tm>> {
        match self.call(Rpc::Vote(rpc), option.hard_ttl()).await {
            Ok(Reply::Vote(r)) => Ok(r),
            Ok(other) => Err(self.unexpected(other)),
            Err(e) => Err(self.rpc_error(e)),
        }
    }

    async fn pre_vote(&mut self, rpc: VoteRequest<Tm>, option: RPCOption) -> Result<VoteResponse<Tm>, RPCError<Tm>> {
        match self.call(Rpc::PreVote(rpc), option.hard_ttl()).await {
            Ok(Reply::Vote(r)) => Ok(r),
            Ok(other) => Err(self.unexpected(other)),
            Err(e) => Err(self.rpc_error(e)),
        }
    }

    async fn full_snapshot(
        &mut self,
        vote: Vote,
        snapshot: Snapshot,
        cancel: impl Future<Output = ReplicationClosed> + 'static,
        option: RPCOption,
    ) -> Result<SnapshotResponse<Tm>, StreamingError<Tm>> {
        let data = String::from_utf8(snapshot.snapshot.into_inner()).map_err(|e| {
            let e = CallError::Refused(self.addr.clone(), format!("a snapshot that is not UTF-8 JSON: {e}"));
            StreamingError::Network(NetworkError::new(&e))
        })?;
        let rpc = Rpc::Snapshot { vote, meta: snapshot.meta, data };
        let outcome = {
            let call = std::pin::pin!(self.call(rpc, option.hard_ttl()));
            let cancel = std::pin::pin!(cancel);
            match futures_util::future::select(call, cancel).await {
                futures_util::future::Either::Left((r, _)) => Ok(r),
                futures_util::future::Either::Right((closed, _)) => Err(closed),
            }
        };
        match outcome {
            Ok(Ok(Reply::Snapshot(r))) => Ok(r),
            Ok(Ok(other)) => Err(StreamingError::from(self.unexpected(other))),
            Ok(Err(e)) => Err(StreamingError::from(self.rpc_error(e))),
            Err(closed) => {
                self.stream = None;
                Err(StreamingError::Closed(closed))
            }
        }
    }
}

/// Makes a [`Peer`] per target; `cluster` is this node's voter-set hash.
#[derive(Clone)]
pub struct Network {
    pub cluster: u64,
    /// This node's id.
    pub me: u64,
    pub dial: Dial,
}

impl RaftNetworkFactory<Tm> for Network {
    type Network = Peer;

    async fn new_client(&mut self, target: u64, node: &ControllerNode) -> Peer {
        Peer::to_member(self.me, target, node, self.cluster, self.dial.clone())
    }
}

/// Where every connection on the CONTROLLER listener goes when the node's server takes them:
/// it secures the connection (TLS, SASL), authorizes a quorum connection and passes it back
/// ([`QuorumDoor`]), and serves any other as a Kafka client of the controller.
pub type Handoff = Rc<dyn Fn(glommio::net::TcpStream)>;

/// What serving the quorum's RPCs needs: the Raft handle, the applied metadata (for
/// heartbeats and observers' fetches), the log (fetches) and the brokers' liveness.
pub struct Served<D: Disk> {
    /// This node's id.
    pub me: u64,
    pub links: Option<Rc<Links>>,
    pub raft: Raft<D>,
    pub state: super::state::MetaStateMachine<D>,
    pub log: super::log_store::MetaLog<D>,
    /// This node's directory id (`meta.properties`).
    pub directory_id: String,
    /// When a directory id mismatch was last logged.
    pub mismatch_logged: Cell<Option<std::time::Instant>>,
    /// `controller.quorum.election.timeout.ms`: a leader no quorum acknowledged for twice this
    /// long is not named to others ([`leader_for_others`]).
    pub election_timeout: Duration,
    pub liveness: Rc<super::liveness::Liveness>,
    /// The node's server, which takes every connection on this listener (none: this module
    /// serves quorum connections in plaintext and closes others; the quorum's own tests).
    pub accept: std::cell::RefCell<Option<Handoff>>,
    pub stop: Rc<Cell<bool>>,
    /// This node's voter-set hash.
    pub cluster: u64,
    /// The observers that fetched from this node: id → (log end they asked from, when in
    /// milliseconds since the epoch). DescribeQuorum lists them, as Kafka lists its brokers.
    pub observers: std::cell::RefCell<std::collections::BTreeMap<u64, (u64, i64)>>,
}

/// Serve the quorum's RPCs on `listener` until the node stops (`served.stop`): one task per connection.
pub async fn serve<D: Disk>(served: Rc<Served<D>>, listener: glommio::net::TcpListener) {
    let stop = served.stop.clone();
    loop {
        let accepted = within(Duration::from_millis(200), listener.accept()).await;
        if stop.get() {
            return;
        }
        let stream = match accepted {
            None => continue,
            Some(Ok(s)) => s,
            Some(Err(e)) => {
                tracing::warn!(error = %e, "controller listener: accept failed");
                glommio::timer::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let accept = served.accept.borrow().clone();
        if let Some(accept) = accept {
            accept(stream);
            continue;
        }
        let served = served.clone();
        glommio::spawn_local(async move {
            let mut stream = stream;
            let mut first = [0u8; 4];
            match within(Duration::from_secs(10), stream.read_exact(&mut first)).await {
                Some(Ok(())) if first == PREFACE => {
                    if let Err(e) = connection(served, stream).await {
                        tracing::debug!(error = %e, "controller connection closed");
                    }
                }
                _ => tracing::debug!("controller listener: a connection that is not the quorum's; closed"),
            }
        })
        .detach();
    }
}

/// Where the node's server passes the quorum connections it accepted, secured and authorized
/// (their preface read). It does not keep the controller alive.
pub struct QuorumDoor<D: Disk>(pub(super) std::rc::Weak<Served<D>>);

impl<D: Disk> Clone for QuorumDoor<D> {
    fn clone(&self) -> Self {
        QuorumDoor(self.0.clone())
    }
}

impl<D: Disk> QuorumDoor<D> {
    /// Serve `stream` as a quorum connection, until it closes.
    pub async fn serve<S: futures_lite::AsyncRead + futures_lite::AsyncWrite + Unpin>(&self, stream: S) {
        let Some(served) = self.0.upgrade() else { return };
        if let Err(e) = connection(served, stream).await {
            tracing::debug!(error = %e, "controller connection closed");
        }
    }
}

async fn connection<D: Disk, S: futures_lite::AsyncRead + futures_lite::AsyncWrite + Unpin>(
    served: Rc<Served<D>>,
    mut stream: S,
) -> io::Result<()> {
    let (cluster, stop) = (served.cluster, served.stop.clone());
    loop {
        // The voter set's hash, before any body is read: a connection of another cluster (or
        // of anything that is not a controller) is answered and closed, never buffered.
        let mut hash = [0u8; 8];
        match stream.read_exact(&mut hash).await {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e),
        }
        let theirs = u64::from_be_bytes(hash);
        if theirs != cluster && theirs != OBSERVER {
            let why =
                format!("cluster mismatch: the peer's controller.quorum.voters hash {theirs:x}, ours {cluster:x}");
            let bytes = serde_json::to_vec(&Reply::Failed(why)).map_err(io::Error::other)?;
            write_frame(&mut stream, &bytes).await?;
            return Ok(());
        }
        let Some(body) = read_frame(&mut stream).await? else { return Ok(()) };
        if stop.get() {
            return Ok(());
        }
        let reply = match serde_json::from_slice::<Request>(&body) {
            Err(e) => Reply::Failed(format!("bad request: {e}")),
            Ok(r) if r.cluster != cluster && !(r.cluster == OBSERVER && r.rpc.observer_may()) => Reply::Failed(
                format!("cluster mismatch: the peer's controller.quorum.voters hash {:x}, ours {cluster:x}", r.cluster),
            ),
            // Over a cut link: as if it never arrived.
            Ok(r) if Links::is_cut(&served.links, r.from, served.me) => return Ok(()),
            // The sender takes this node for a voter whose directory was another (this one
            // was wiped or replaced): it must neither vote nor count as that voter's copy
            // until it is added again (KIP-853).
            Ok(r) if r.rpc.is_raft() && !r.to_dir.is_empty() && r.to_dir != served.directory_id => {
                let why = format!(
                    "directory id mismatch: node {} is a voter with directory {}, this node's directory is {}; \
                     remove that voter and add this node again (RemoveRaftVoter, AddRaftVoter)",
                    served.me, r.to_dir, served.directory_id
                );
                // Once every 10 s at most: the leader retries at every heartbeat.
                let now = std::time::Instant::now();
                if served.mismatch_logged.get().is_none_or(|at| now.duration_since(at) > Duration::from_secs(10)) {
                    served.mismatch_logged.set(Some(now));
                    tracing::warn!(leader = r.from, "refusing to stand in for a voter: {why}");
                }
                Reply::Failed(why)
            }
            Ok(r) => handle(&served, r.from, r.rpc).await,
        };
        let bytes = serde_json::to_vec(&reply).map_err(io::Error::other)?;
        write_frame(&mut stream, &bytes).await?;
    }
}

async fn handle<D: Disk>(served: &Served<D>, from: u64, rpc: Rpc) -> Reply {
    let raft = &served.raft;
    let failed = |e: &dyn std::fmt::Display| Reply::Failed(e.to_string());
    match rpc {
        Rpc::Append(r) => raft.append_entries(r).await.map_or_else(|e| failed(&e), Reply::Append),
        Rpc::Vote(r) => raft.vote(r).await.map_or_else(|e| failed(&e), Reply::Vote),
        Rpc::PreVote(r) => raft.pre_vote(r).await.map_or_else(|e| failed(&e), Reply::Vote),
        Rpc::Snapshot { vote, meta, data } => {
            let snapshot = Snapshot { meta, snapshot: SnapshotData::new(data.into_bytes()) };
            raft.install_full_snapshot(vote, snapshot).await.map_or_else(|e| failed(&e), Reply::Snapshot)
        }
        Rpc::Write(command) => match within(WRITE_TIMEOUT, write(raft, command)).await {
            Some(reply) => reply,
            None => Reply::Failed(format!("not committed within {WRITE_TIMEOUT:?}")),
        },
        Rpc::Heartbeat { broker, epoch } => heartbeat(served, broker, epoch).await,
        Rpc::DescribeQuorum => describe_quorum(served).await,
        Rpc::AddVoter { id, node, timeout_ms } => {
            let limit = Duration::from_millis(timeout_ms).clamp(Duration::from_secs(1), Duration::from_secs(120));
            Reply::VoterChange(super::voters::add_voter(raft, id, node, limit).await)
        }
        Rpc::RemoveVoter { id, directory_id } => {
            Reply::VoterChange(super::voters::remove_voter(raft, id, &directory_id).await)
        }
        Rpc::Fetch { after, wait_ms } => {
            let log_end = after.map_or(0, |l| l.index + 1);
            {
                let mut observers = served.observers.borrow_mut();
                // Bounded: ids are the senders' word (a stranger's too, until the quorum's links
                // are authenticated); the longest silent goes first.
                if observers.len() >= MAX_OBSERVERS_LISTED && !observers.contains_key(&from) {
                    if let Some(oldest) = observers.iter().min_by_key(|(_, (_, at))| *at).map(|(id, _)| *id) {
                        observers.remove(&oldest);
                    }
                }
                observers.insert(from, (log_end, now_ms()));
            }
            fetch(served, after, Duration::from_millis(wait_ms).min(FETCH_MAX_WAIT)).await
        }
    }
}

/// An observer's fetch: the committed entries after `after` (at most [`FETCH_MAX_ENTRIES`]),
/// waiting up to `wait` for one; the newest snapshot when they are no longer in the log. Any
/// controller answers: what it applied is committed.
async fn fetch<D: Disk>(served: &Served<D>, after: Option<LogId>, wait: Duration) -> Reply {
    use openraft::storage::{RaftLogReader, RaftLogStorage, RaftStateMachine};
    let next = after.map_or(0, |l| l.index + 1);
    let mut applied = served.state.watch_applied();
    let deadline = std::time::Instant::now() + wait;
    let last = loop {
        let last = *applied.borrow_and_update();
        if let Some(last) = last.filter(|l| *l >= next) {
            break last;
        }
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() || within(left, applied.changed()).await.is_some_and(|r| r.is_err()) {
            return Reply::Entries { entries: Vec::new(), leader: leader_for_others(served).await };
        }
    };
    let leader = leader_for_others(served).await;
    let mut log = served.log.clone();
    let first_kept = match RaftLogStorage::get_log_state(&mut log).await {
        Ok(state) => state.last_purged_log_id.map_or(0, |l| l.index + 1),
        Err(e) => return Reply::Failed(format!("reading the metadata log's state: {e}")),
    };
    if next < first_kept {
        return match RaftStateMachine::get_current_snapshot(&mut served.state.clone()).await {
            Ok(Some(snapshot)) => match String::from_utf8(snapshot.snapshot.into_inner()) {
                Ok(data) => Reply::Image { meta: snapshot.meta, data, leader },
                Err(e) => Reply::Failed(format!("a snapshot that is not UTF-8 JSON: {e}")),
            },
            Ok(None) => Reply::Failed(format!("entries from {next} were purged and no snapshot is kept")),
            Err(e) => Reply::Failed(format!("reading the snapshot: {e}")),
        };
    }
    let to = last.min(next + FETCH_MAX_ENTRIES - 1);
    match log.try_get_log_entries(next..=to).await {
        Ok(entries) => Reply::Entries { entries, leader },
        Err(e) => Reply::Failed(format!("reading metadata entries {next}..={to}: {e}")),
    }
}

/// The active controller to name to observers and brokers. This node only while a quorum of
/// voters acknowledged it within twice the election timeout: a leader cut off from the others calls
/// itself leader until it hears of a newer term, and a broker that heartbeats to it or fetches
/// from it would never learn that it was fenced or that its partitions moved.
async fn leader_for_others<D: Disk>(served: &Served<D>) -> Option<u64> {
    use openraft::Instant as _;
    use openraft_rt::WatchReceiver;
    let leader = served.raft.current_leader().await;
    if leader != Some(served.me) {
        return leader;
    }
    let m = served.raft.metrics().borrow_watched().clone();
    let alone = m.membership_config.membership().voter_ids().all(|v| v == served.me);
    let acked = m.last_quorum_acked.is_some_and(|at| at.elapsed() < served.election_timeout * 2);
    (alone || acked).then_some(served.me)
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// The most observers kept for DescribeQuorum.
const MAX_OBSERVERS_LISTED: usize = 4096;

/// How long an observer that stopped fetching is still listed.
const OBSERVER_LISTED: Duration = Duration::from_secs(60);

/// The quorum as this node sees it if it is the leader (from openraft's metrics: each member's
/// matched log id and last acknowledgement; the observers that fetched from it within a minute),
/// else NotLeader.
pub async fn describe_quorum(served: &Served<impl Disk>) -> Reply {
    use openraft::Instant as _;
    use openraft_rt::WatchReceiver;
    let raft = &served.raft;
    if !raft.is_leader() {
        return Reply::NotLeader { leader: raft.current_leader().await };
    }
    let m = raft.metrics().borrow_watched().clone();
    let now_ms = now_ms();
    let high_watermark = m.local_committed.map_or(0, |l| l.index + 1);
    let membership = m.membership_config.membership();
    let directory = |id: u64| membership.get_node(&id).map(|n| n.directory_id.clone()).unwrap_or_default();
    let progress = |id: u64| {
        let directory_id = directory(id);
        if id == m.id {
            let log_end = m.last_log_index.map_or(0, |i| i + 1);
            return super::types::ReplicaProgress {
                id,
                directory_id,
                log_end,
                last_fetch_ms: now_ms,
                last_caught_up_ms: now_ms,
            };
        }
        let log_end = m.replication.as_ref().and_then(|r| r.get(&id).cloned().flatten()).map_or(0, |l| l.index + 1);
        let acked = m.heartbeat.as_ref().and_then(|h| h.get(&id).cloned().flatten());
        let last_fetch_ms = acked.map_or(-1, |at| now_ms - at.elapsed().as_millis() as i64);
        let last_caught_up_ms = if log_end >= high_watermark { last_fetch_ms } else { -1 };
        super::types::ReplicaProgress { id, directory_id, log_end, last_fetch_ms, last_caught_up_ms }
    };
    Reply::Quorum(super::types::QuorumDescription {
        leader: m.id,
        term: m.current_term,
        high_watermark,
        voters: membership.voter_ids().map(progress).collect(),
        observers: {
            let mut observers: Vec<_> = membership.learner_ids().map(progress).collect();
            let mut fetched = served.observers.borrow_mut();
            fetched.retain(|_, (_, at)| now_ms - *at < OBSERVER_LISTED.as_millis() as i64);
            for (&id, &(log_end, at)) in fetched.iter() {
                let caught_up = if log_end >= high_watermark { at } else { -1 };
                observers.push(super::types::ReplicaProgress {
                    directory_id: String::new(),
                    id,
                    log_end,
                    last_fetch_ms: at,
                    last_caught_up_ms: caught_up,
                });
            }
            observers
        },
    })
}

/// A broker's heartbeat, on the active controller: it is alive now; a fenced broker of that
/// epoch is unfenced (committed before the answer).
pub async fn heartbeat<D: Disk>(served: &Served<D>, broker: i32, epoch: u64) -> Reply {
    let raft = &served.raft;
    let leader = leader_for_others(served).await;
    if leader != Some(served.me) {
        return Reply::NotLeader { leader };
    }
    match served.state.broker(broker) {
        Some(b) if b.epoch == epoch => {
            served.liveness.seen(broker);
            if b.fenced {
                let unfence = write(raft, MetaCommand::UnfenceBroker { id: broker, epoch });
                match within(WRITE_TIMEOUT, unfence)
                    .await
                    .unwrap_or_else(|| Reply::Failed("unfencing timed out".into()))
                {
                    Reply::Written { .. } => {
                        tracing::info!(broker, epoch, "broker unfenced");
                        Reply::Heartbeat { registered: true, fenced: false }
                    }
                    other => other,
                }
            } else {
                Reply::Heartbeat { registered: true, fenced: false }
            }
        }
        _ => Reply::Heartbeat { registered: false, fenced: true },
    }
}

/// Commit `command` if this node leads, or say who does.
pub async fn write<D: Disk>(raft: &Raft<D>, command: MetaCommand) -> Reply {
    match raft.client_write(command).await {
        Ok(r) => Reply::Written { response: r.response().clone(), log_id: r.log_id },
        Err(e) => match e.forward_to_leader() {
            Some(f) => Reply::NotLeader { leader: f.leader_id },
            None => Reply::Failed(e.to_string()),
        },
    }
}
