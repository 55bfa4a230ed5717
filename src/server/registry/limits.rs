//! The limits tidemark keeps that are not settings: each declared once where it applies, and
//! listed here (with `docs/configuration.md`'s table of them) so an operator finds every bound
//! in one place.

use crate::groups::group::{MAX_CLIENT_ID_IN_MEMBER_ID, MAX_PROTOCOLS};
use crate::security::{MAX_ITERATIONS, MIN_ITERATIONS};
use crate::server::limits::{MAX_FETCH_WAIT, METRICS_MAX_HEAD};
use crate::storage::cache::MAX_ENTRY_SHARE;
use crate::storage::producers::{MAX_CACHED, MAX_PRODUCERS};

/// A fixed limit: what it bounds, its value, and what happens past it.
pub struct Limit {
    pub what: &'static str,
    pub value: u64,
    pub unit: &'static str,
    pub doc: &'static str,
}

/// Every fixed limit, in the docs' order.
pub const LIMITS: &[Limit] = &[
    Limit {
        what: "Longest a fetch waits",
        value: MAX_FETCH_WAIT.as_secs(),
        unit: "s",
        doc: "A Fetch asking a longer `max_wait_ms` waits this long.",
    },
    Limit {
        what: "Request head read by `/metrics`",
        value: METRICS_MAX_HEAD as u64,
        unit: "bytes",
        doc: "Reading stops there; the request is read from what came.",
    },
    Limit {
        what: "Producers remembered per partition",
        value: MAX_PRODUCERS as u64,
        unit: "producers",
        doc: "Beyond, the producer idle longest is forgotten (its next batch must start a new sequence).",
    },
    Limit {
        what: "Batches remembered per producer",
        value: MAX_CACHED as u64,
        unit: "batches",
        doc: "Kafka's in-flight limit for idempotence: a retry of an older batch is OUT_OF_ORDER_SEQUENCE_NUMBER.",
    },
    Limit {
        what: "Share of the batch cache one entry may take",
        value: MAX_ENTRY_SHARE,
        unit: "(1 / value)",
        doc: "A larger read is not cached (it would empty the cache for one read).",
    },
    Limit {
        what: "Protocols a group member may offer",
        value: MAX_PROTOCOLS as u64,
        unit: "protocols",
        doc: "More is INCONSISTENT_GROUP_PROTOCOL (clients send one to three).",
    },
    Limit {
        what: "Client id bytes in a member id",
        value: MAX_CLIENT_ID_IN_MEMBER_ID as u64,
        unit: "bytes",
        doc: "A longer client id is cut (member ids travel in int16 strings).",
    },
    Limit {
        what: "SCRAM iterations",
        value: MAX_ITERATIONS as u64,
        unit: "iterations",
        doc: "Kafka's bounds: from 4096 to this; other counts are refused by AlterUserScramCredentials.",
    },
    Limit {
        what: "Largest metadata quorum frame",
        value: (crate::cluster::net::MAX_FRAME >> 20) as u64,
        unit: "MiB",
        doc: "A larger frame between controllers closes the link (a snapshot of a large cluster fits).",
    },
    Limit {
        what: "Largest metadata log entry",
        value: (crate::cluster::log_store::MAX_ENTRY_BYTES >> 20) as u64,
        unit: "MiB",
        doc: "A larger command is refused when appended (the metadata log's `max.message.bytes`), and no larger entry decodes.",
    },
    Limit {
        what: "Largest response tidemark's client reads",
        value: (crate::client::MAX_RESPONSE >> 20) as u64,
        unit: "MiB",
        doc: "Replication, transaction markers and the load generator; a larger frame closes the connection.",
    },
];

/// The fixed limits as a Markdown table.
pub fn markdown() -> String {
    let mut out = String::from("| Limit | Value | Past it |\n|---|---|---|\n");
    for l in LIMITS {
        out.push_str(&format!("| {} | {} {} | {} |\n", l.what, l.value, l.unit, l.doc));
    }
    out
}

const _: () = assert!(MIN_ITERATIONS == 4096, "the docs name Kafka's lower bound");
