//! Our own Kafka client on glommio, for everything of ours that talks to a broker: the load
//! generator, a follower's fetches from its leader, a transaction coordinator's calls to a
//! partition's leader, and the operator's tools. It speaks the wire protocol through
//! [`crate::protocol`] only, so it works against any Kafka-compatible broker.

mod conn;
mod peers;
pub mod security;

pub use conn::{Conn, MAX_RESPONSE};
pub use peers::{Peers, Purpose};
pub use security::{Login, LoginMechanism, Security};
