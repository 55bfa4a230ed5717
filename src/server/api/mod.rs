//! The Kafka APIs, one module per family, as mini-redis keeps one file per command: each
//! module takes its decoded request, routes the work to the shards that own it (typed calls,
//! [`crate::server::router`]), and builds its response. This is the one place the protocol
//! meets storage. [`handle`] is the dispatch table.
//!
//! Ordering: requests of one connection are pipelined, yet their side effects (appends, topic
//! changes, group operations) happen in request order, as Kafka clients expect. A request
//! holds its connection's turn ([`Cx::release_turn`]) until it has issued its side effects;
//! a request without side effects releases it at once; one that does not release it (topic
//! changes) completes before the next request starts.

mod acls;
mod admin;
pub(crate) mod cluster;
mod configs;
mod consumer_groups;
mod features;
mod fetch;
mod groups;
mod list_offsets;
mod partitions;
mod produce;
mod producers;
mod quorum;
mod quotas;
mod route;
mod topics;
mod transactions;
mod users;

use crate::budget::Held;
use crate::protocol::messages::Message;
use crate::protocol::{encode_response, ProtoResult, Request, RequestHeader, Throttled};
use crate::security::acl::{Asker, Operation, ResourceType, CLUSTER_NAME};
use crate::security::quota::REQUEST_PERCENTAGE;
use crate::server::listeners::Listener;
use crate::server::session::Session;
use crate::server::shard::Shard;
use bytes::Bytes;
use std::rc::Rc;

/// Signals that a request has issued its side effects, so the next request of the same
/// connection may start issuing its own. Dropped without a signal, it ends the turn too.
#[derive(Debug, Default)]
pub struct Dispatched(Option<futures_channel::oneshot::Sender<()>>);

impl Dispatched {
    pub fn new(tx: futures_channel::oneshot::Sender<()>) -> Self {
        Dispatched(Some(tx))
    }

    fn done(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(());
        }
    }
}

/// What a handler has of its request besides the body.
pub struct Cx<'a> {
    pub shard: &'a Rc<Shard>,
    pub header: &'a RequestHeader,
    /// The client's address (`host:port`).
    pub peer: &'a str,
    /// The listener the client came in on (its advertised address is the broker's, for it).
    pub listener: &'a Listener,
    /// The client's principal (`User:ANONYMOUS`, a certificate's subject).
    pub principal: &'a str,
    /// The client's address as ACL hosts name it (Java's `getHostAddress`).
    host: &'a str,
    /// Set to mute the connection after this answer (a quota violation).
    muted_until: &'a std::cell::Cell<Option<std::time::Instant>>,
    /// The connection's session (its SASL state).
    pub session: &'a Session,
    /// The handler's time on the thread, when quotas are set.
    busy: Option<&'a Busy>,
    turn: Dispatched,
    /// Fetch memory the response's records hold, given back once it is written.
    held: Held,
}

impl Cx<'_> {
    pub fn version(&self) -> i16 {
        self.header.api_version
    }

    /// This request's side effects are issued: the connection's next request may start.
    pub fn release_turn(&mut self) {
        self.turn.done();
    }

    /// May this client do `op` on the resource `name` of type `rt`? (Always, without an
    /// authorizer.)
    pub fn allowed(&self, op: Operation, rt: ResourceType, name: &str) -> bool {
        let c = self.shard.config();
        !c.authorizer_enabled || self.shard.acls().authorize(&c.authorizer, self.asker(), op, rt, name)
    }

    /// May this client do `op` on the cluster?
    pub fn allowed_on_cluster(&self, op: Operation) -> bool {
        self.allowed(op, ResourceType::Cluster, CLUSTER_NAME)
    }

    /// KIP-679: may it do `op` on some resource of type `rt`?
    pub fn allowed_on_any(&self, op: Operation, rt: ResourceType) -> bool {
        let c = self.shard.config();
        !c.authorizer_enabled || self.shard.acls().authorize_any(&c.authorizer, self.asker(), op, rt)
    }

    /// KIP-430: what it may do on a resource, as a bit field.
    pub fn authorized_operations(&self, rt: ResourceType, name: &str) -> i32 {
        let c = self.shard.config();
        if !c.authorizer_enabled {
            return crate::security::acl::all_operations(rt);
        }
        self.shard.acls().authorized_operations(&c.authorizer, self.asker(), rt, name)
    }

    fn asker(&self) -> Asker<'_> {
        Asker { principal: self.principal, host: self.host }
    }

    /// Count `value` against the client's `key` quota (user: the principal's name; client:
    /// the client id); the throttle time (ms) it earns, and the connection muted that long
    /// after this answer. `keep` false forgets a value that violates.
    pub fn quota(&self, key: &str, value: f64, keep: bool) -> i32 {
        let user = self.principal.split_once(':').map_or(self.principal, |(_, n)| n);
        let client = self.header.client_id.as_deref().unwrap_or("");
        let ms = self.shard.connections().record(key, (user, client), value, self.shard.now(), keep);
        if ms > 0 {
            let until = std::time::Instant::now() + std::time::Duration::from_millis(ms as u64);
            self.muted_until.set(Some(self.muted_until.get().map_or(until, |u| u.max(until))));
        }
        ms.min(i32::MAX as i64) as i32
    }

    /// Keep `held` until the response is written.
    pub fn hold(&mut self, held: Held) {
        self.held.absorb(held);
    }
}

/// Encode `body` as the response to the request, after counting the time the request took
/// on this shard's thread against the client's `request_percentage` quota: a throttle it
/// earns goes into the answer (the longer of it and the byte-rate one already there) and
/// mutes the connection.
fn reply<M: Message + Throttled>(cx: &Cx<'_>, mut body: M) -> ProtoResult<Option<Bytes>> {
    let ms = request_time(cx);
    if let Some(t) = body.throttle_time_ms().filter(|_| ms > 0) {
        *t = (*t).max(ms);
    }
    encode_response(cx.header, &mut body).map(Some)
}

/// Count the request's time on the thread against `request_percentage` (Kafka's unit: the
/// percentage of one thread's second, 100 = a whole thread): the throttle it earns, in ms.
fn request_time(cx: &Cx<'_>) -> i32 {
    // The SASL exchange (a re-authentication) is not a request the quota counts, as in Kafka.
    if matches!(cx.header.api_key, crate::protocol::SASL_HANDSHAKE | crate::protocol::SASL_AUTHENTICATE) {
        return 0;
    }
    cx.busy.map_or(0, |busy| cx.quota(REQUEST_PERCENTAGE, busy.so_far().as_secs_f64() * 100.0, true))
}

/// The time a request's handler has spent on the shard's thread (its polls), for the
/// `request_percentage` quota (Kafka's request handler time).
#[derive(Debug, Default)]
pub struct Busy {
    spent: std::cell::Cell<std::time::Duration>,
    since: std::cell::Cell<Option<std::time::Instant>>,
}

impl Busy {
    /// The time spent so far, the poll under way included.
    fn so_far(&self) -> std::time::Duration {
        self.spent.get() + self.since.get().map_or(std::time::Duration::ZERO, |s| s.elapsed())
    }

    /// Run `f`, timing its polls.
    async fn time<F: std::future::Future>(&self, f: F) -> F::Output {
        let mut f = std::pin::pin!(f);
        futures_lite::future::poll_fn(|cx| {
            let start = std::time::Instant::now();
            self.since.set(Some(start));
            let out = f.as_mut().poll(cx);
            self.since.set(None);
            self.spent.set(self.spent.get() + start.elapsed());
            out
        })
        .await
    }
}

/// The APIs a controller serves on its CONTROLLER listener (Kafka's controller APIs that
/// tidemark has): how `--bootstrap-controller` tools see the quorum. A connection there asking
/// for another API is closed, as Kafka's controller closes it.
pub const CONTROLLER_APIS: &[i16] = &[
    crate::protocol::API_VERSIONS,
    crate::protocol::SASL_HANDSHAKE,
    crate::protocol::SASL_AUTHENTICATE,
    crate::protocol::DESCRIBE_CLUSTER,
    crate::protocol::DESCRIBE_QUORUM,
    crate::protocol::UPDATE_FEATURES,
    crate::protocol::UNREGISTER_BROKER,
    crate::protocol::ADD_RAFT_VOTER,
    crate::protocol::REMOVE_RAFT_VOTER,
];

/// Answer one request from the client at `peer`: the response bytes (`None` when no response
/// is due: produce with acks=0) with the fetch memory they hold.
pub async fn handle(
    shard: &Rc<Shard>,
    session: &Session,
    header: &RequestHeader,
    req: Request,
    turn: Dispatched,
) -> ProtoResult<Option<(Bytes, Held)>> {
    // Timed only while some quota is set (request_percentage may apply to this client).
    if !shard.connections().any_quota() {
        return dispatch(shard, session, header, req, turn, None).await;
    }
    let busy = Busy::default();
    busy.time(dispatch(shard, session, header, req, turn, Some(&busy))).await
}

async fn dispatch(
    shard: &Rc<Shard>,
    session: &Session,
    header: &RequestHeader,
    req: Request,
    turn: Dispatched,
    busy: Option<&Busy>,
) -> ProtoResult<Option<(Bytes, Held)>> {
    let (peer, listener, principal) = (session.peer.as_str(), &*session.listener, session.principal.as_str());
    let host = session.host.as_str();
    let muted_until = &session.muted_until;
    let mut cx =
        Cx { shard, header, peer, listener, principal, host, muted_until, session, busy, turn, held: Held::default() };
    let cx = &mut cx;
    // The handler's response, then the reply (which reads `cx` once the handler is done).
    macro_rules! answer {
        ($body:expr) => {{
            let body = $body;
            reply(cx, body)
        }};
    }
    let out = match req {
        Request::ApiVersions(r) => answer!(cluster::api_versions(cx, r)),
        Request::Metadata(r) => answer!(cluster::metadata(cx, r).await),
        Request::DescribeCluster(r) => answer!(cluster::describe_cluster(cx, r).await),
        Request::DescribeTopicPartitions(r) => answer!(cluster::describe_topic_partitions(cx, r)),
        Request::Produce(r) => match produce::handle(cx, r).await {
            Some(resp) => reply(cx, resp),
            None => {
                request_time(cx); // acks=0: no answer, the connection is muted all the same
                Ok(None)
            }
        },
        Request::Fetch(r) => answer!(fetch::handle(cx, r).await),
        Request::ListOffsets(r) => answer!(list_offsets::handle(cx, r).await),
        Request::OffsetForLeaderEpoch(r) => answer!(list_offsets::offset_for_leader_epoch(cx, r).await),
        Request::CreateTopics(r) => answer!(topics::create_topics(cx, r).await),
        Request::DeleteTopics(r) => answer!(topics::delete_topics(cx, r).await),
        Request::CreatePartitions(r) => answer!(topics::create_partitions(cx, r).await),
        Request::ElectLeaders(r) => answer!(partitions::elect_leaders(cx, r).await),
        Request::AlterPartitionReassignments(r) => answer!(partitions::alter_reassignments(cx, r).await),
        Request::ListPartitionReassignments(r) => answer!(partitions::list_reassignments(cx, r)),
        Request::DescribeConfigs(r) => answer!(configs::describe_configs(cx, r)),
        Request::ListConfigResources(r) => answer!(configs::list_config_resources(cx, r).await),
        Request::UpdateFeatures(r) => answer!(features::update(cx, r).await),
        Request::DescribeQuorum(r) => answer!(quorum::describe(cx, r).await),
        Request::UnregisterBroker(r) => answer!(quorum::unregister_broker(cx, r).await),
        Request::AddRaftVoter(r) => answer!(quorum::add_raft_voter(cx, r).await),
        Request::RemoveRaftVoter(r) => answer!(quorum::remove_raft_voter(cx, r).await),
        Request::AlterConfigs(r) => answer!(configs::alter_configs(cx, r).await),
        Request::FindCoordinator(r) => answer!(groups::find_coordinator(cx, r).await),
        Request::JoinGroup(r) => answer!(groups::join(cx, r).await),
        Request::SyncGroup(r) => answer!(groups::sync(cx, r).await),
        Request::Heartbeat(r) => answer!(groups::heartbeat(cx, r).await),
        Request::LeaveGroup(r) => answer!(groups::leave(cx, r).await),
        Request::OffsetCommit(r) => answer!(groups::offset_commit(cx, r).await),
        Request::OffsetFetch(r) => answer!(groups::offset_fetch(cx, r).await),
        Request::DescribeGroups(r) => answer!(groups::describe_groups(cx, r).await),
        Request::ListGroups(r) => answer!(groups::list_groups(cx, r).await),
        Request::DeleteGroups(r) => answer!(groups::delete_groups(cx, r).await),
        Request::OffsetDelete(r) => answer!(groups::offset_delete(cx, r).await),
        Request::ConsumerGroupHeartbeat(r) => answer!(consumer_groups::heartbeat(cx, r).await),
        Request::ConsumerGroupDescribe(r) => answer!(consumer_groups::describe(cx, r).await),
        Request::InitProducerId(r) => answer!(producers::init_producer_id(cx, r).await),
        Request::DescribeProducers(r) => answer!(producers::describe_producers(cx, r).await),
        Request::DeleteRecords(r) => answer!(admin::delete_records(cx, r).await),
        Request::DescribeLogDirs(r) => answer!(admin::describe_log_dirs(cx, r).await),
        Request::SaslHandshake(r) => answer!(users::handshake(cx, r)),
        Request::SaslAuthenticate(r) => answer!(users::authenticate(cx, r).await),
        Request::DescribeUserScramCredentials(r) => answer!(users::describe(cx, r)),
        Request::AlterUserScramCredentials(r) => answer!(users::alter(cx, r).await),
        Request::DescribeAcls(r) => answer!(acls::describe(cx, r)),
        Request::CreateAcls(r) => answer!(acls::create(cx, r).await),
        Request::DeleteAcls(r) => answer!(acls::delete(cx, r).await),
        Request::DescribeClientQuotas(r) => answer!(quotas::describe(cx, r)),
        Request::AlterClientQuotas(r) => answer!(quotas::alter(cx, r).await),
        Request::AddPartitionsToTxn(r) => answer!(transactions::add_partitions(cx, r).await),
        Request::AddOffsetsToTxn(r) => answer!(transactions::add_offsets(cx, r).await),
        Request::EndTxn(r) => answer!(transactions::end(cx, r).await),
        Request::WriteTxnMarkers(r) => answer!(transactions::write_markers(cx, r).await),
        Request::TxnOffsetCommit(r) => answer!(transactions::txn_offset_commit(cx, r).await),
        Request::DescribeTransactions(r) => answer!(transactions::describe(cx, r).await),
        Request::ListTransactions(r) => answer!(transactions::list(cx, r).await),
    };
    let held = std::mem::take(&mut cx.held);
    out.map(|o| o.map(|bytes| (bytes, held)))
}
