//! Connections to the other brokers of a cluster for short inter-broker requests, one per
//! node and purpose, opened on first use and kept; one that fails or times out is dropped and
//! the next request opens another.

use super::Conn;
use crate::protocol::messages::Message;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::future::Future;
use std::rc::Rc;
use std::time::Duration;

/// What a connection to a peer carries: one connection each, so that markers waiting for
/// their in-sync replicas (answers come back in request order) never hold a verification up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Purpose {
    Markers,
    Verification,
}

/// How long opening a connection to a peer may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// One executor's connections to its peers.
#[derive(Default)]
pub struct Peers {
    open: RefCell<BTreeMap<(i32, Purpose), Rc<Conn>>>,
}

impl Peers {
    /// One request to node `id` and its answer, within `limit`; `connect` opens a connection
    /// to it when none is open.
    pub async fn call<Q: Message, A: Message>(
        &self,
        (id, purpose): (i32, Purpose),
        connect: impl Future<Output = anyhow::Result<Rc<Conn>>>,
        (api, version): (i16, i16),
        req: &mut Q,
        limit: Duration,
    ) -> anyhow::Result<A> {
        let c = self.conn(id, purpose, connect).await?;
        let answer = crate::deadline::within(limit, c.call_at(api, version, req)).await;
        let answer = answer.unwrap_or_else(|| Err(anyhow::anyhow!("node {id} did not answer within {limit:?}")));
        if answer.is_err() {
            // Only this connection (another request may have opened a new one meanwhile).
            let mut open = self.open.borrow_mut();
            if open.get(&(id, purpose)).is_some_and(|o| Rc::ptr_eq(o, &c)) {
                open.remove(&(id, purpose));
            }
        }
        answer
    }

    async fn conn(
        &self,
        id: i32,
        purpose: Purpose,
        connect: impl Future<Output = anyhow::Result<Rc<Conn>>>,
    ) -> anyhow::Result<Rc<Conn>> {
        let open = self.open.borrow().get(&(id, purpose)).filter(|c| !c.is_closed()).cloned();
        if let Some(c) = open {
            return Ok(c);
        }
        let connecting = crate::deadline::within(CONNECT_TIMEOUT, connect).await;
        let c = connecting.unwrap_or_else(|| Err(anyhow::anyhow!("connecting to node {id} timed out")))?;
        self.open.borrow_mut().insert((id, purpose), c.clone());
        Ok(c)
    }
}
