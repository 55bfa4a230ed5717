//! Who is on the other end of a connection: what the connection knows of its client and the
//! API handlers read (principal, listener, host as ACLs name it, SASL session, quota mute).

use crate::server::authenticate::SaslSession;
use crate::server::listeners::Listener;
use std::rc::Rc;

/// Who is on the other end of a connection, and where it came in.
#[derive(Debug)]
pub struct Session {
    /// The client's address (`host:port`).
    pub peer: String,
    /// Kafka's principal: `User:ANONYMOUS`, or a client certificate's subject.
    pub principal: String,
    pub listener: Rc<Listener>,
    /// Whether it came in on the CONTROLLER listener (only the controller's APIs are served).
    pub on_controller_listener: bool,
    /// The client's address as Kafka's ACLs name hosts (an IPv4 client on a dual-stack
    /// listener as IPv4; IPv6 uncompressed, as Java's `getHostAddress`).
    pub host: String,
    /// A quota violation mutes the connection (no request read) until then (KIP-219).
    pub muted_until: std::cell::Cell<Option<std::time::Instant>>,
    /// The SASL session (KIP-368: its end, a re-authentication under way).
    pub sasl: std::cell::RefCell<SaslSession>,
    /// Set by a handler whose answer is the last (a failed re-authentication): the
    /// connection closes once it is written.
    pub closing: std::cell::Cell<bool>,
    /// Transactions version 2: what this connection's producer added to its open transaction.
    pub enrolled: std::cell::RefCell<crate::server::txn_writes::Enrolled>,
}

impl Session {
    /// Wait out a quota violation's mute, if one is in force.
    pub async fn unmuted(&self) {
        while let Some(until) = self.muted_until.get() {
            let left = until.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                self.muted_until.set(None);
                return;
            }
            glommio::timer::sleep(left).await;
        }
    }
}
