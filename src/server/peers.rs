//! A shard's requests to the other brokers of its cluster (transaction markers, KIP-890
//! verification) over [`crate::client::Peers`], and where each broker is reached: its
//! inter-broker listener (else its first), as its registration names it, secured as
//! [`crate::server::links`] says.

use crate::client::{Conn, Peers, Purpose};
use crate::protocol::messages::Message;
use crate::server::shard::Shard;
use std::net::{SocketAddr, ToSocketAddrs};
use std::rc::Rc;
use std::time::Duration;

/// One request to node `id` and its answer, within `limit`, on this shard's connection to it
/// for `purpose`.
pub async fn call_peer<Q: Message, A: Message>(
    shard: &Rc<Shard>,
    (id, purpose): (i32, Purpose),
    api: i16,
    version: i16,
    req: &mut Q,
    limit: Duration,
) -> anyhow::Result<A> {
    let peers: &Peers = shard.peers();
    peers.call((id, purpose), connect_to(shard, id), (api, version), req, limit).await
}

/// A connection to broker `id`, at its inter-broker listener, secured as this node's link to
/// brokers says (TLS, SASL).
pub async fn connect_to(shard: &Rc<Shard>, id: i32) -> anyhow::Result<Rc<Conn>> {
    let (host, addr) = broker_address(shard, id).await?;
    let link = &shard.config().links.brokers;
    Conn::connect_with(&host, addr, &link.security(), CONNECT_TIMEOUT).await
}

/// How long connecting to another broker (TLS and SASL included) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// Where to reach broker `id` from this one: its inter-broker listener (else its first), as
/// its registration names it: the host (which a TLS certificate must name) and its address.
pub async fn broker_address(shard: &Rc<Shard>, id: i32) -> anyhow::Result<(String, SocketAddr)> {
    let view = shard.call(0, crate::server::control::quorum::QuorumStatus).await?;
    let Some(view) = view else { anyhow::bail!("the metadata quorum is not up") };
    let Some(b) = view.brokers.iter().find(|b| b.registration.id == id) else {
        anyhow::bail!("broker {id} is not registered and unfenced")
    };
    let wanted = &shard.config().links.brokers.listener;
    let listeners = &b.registration.listeners;
    let Some(e) = listeners.iter().find(|e| e.name == *wanted).or(listeners.first()) else {
        anyhow::bail!("broker {id} registered no listener")
    };
    let addr = (e.host.as_str(), e.port)
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| anyhow::anyhow!("{}:{} resolves to no address", e.host, e.port))?;
    Ok((e.host.clone(), addr))
}
