//! A shard's requests to the other brokers of its cluster (transaction markers, KIP-890
//! verification) over [`crate::client::Peers`], and where each broker is reached: its
//! `inter.broker.listener.name` listener (else its first), as its registration names it.

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
    let connect = async { Conn::connect(broker_address(shard, id).await?).await };
    peers.call((id, purpose), connect, (api, version), req, limit).await
}

/// Where to reach broker `id` from this one: its `inter.broker.listener.name` listener (else
/// its first), as its registration names it.
pub async fn broker_address(shard: &Rc<Shard>, id: i32) -> anyhow::Result<SocketAddr> {
    let view = shard.call(0, crate::server::control::quorum::QuorumStatus).await?;
    let Some(view) = view else { anyhow::bail!("the metadata quorum is not up") };
    let Some(b) = view.brokers.iter().find(|b| b.registration.id == id) else {
        anyhow::bail!("broker {id} is not registered and unfenced")
    };
    let wanted = shard.config().settings.get("inter.broker.listener.name").map(|n| n.trim().to_ascii_uppercase());
    let listeners = &b.registration.listeners;
    let Some(e) = wanted.and_then(|w| listeners.iter().find(|e| e.name == w)).or(listeners.first()) else {
        anyhow::bail!("broker {id} registered no listener")
    };
    (e.host.as_str(), e.port)
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| anyhow::anyhow!("{}:{} resolves to no address", e.host, e.port))
}
