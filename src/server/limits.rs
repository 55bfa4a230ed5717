//! Limits on what clients may make the broker hold: connections (per broker and per client
//! address), requests in flight per connection, and memory for requests read but not yet
//! answered and for fetched records not yet written back. Past a connection limit the new
//! connection is closed with one log line (at most one a second, with a count of the others);
//! past a memory budget the reader waits (TCP backpressure), so memory stays bounded whatever
//! the clients send. docs/operations.md lists every limit.
//!
//! Who uses it: the accept loops (connection table, shared by every shard) and the connection
//! tasks (the budgets, one pair per shard: `crate::budget`).

use crate::security::quota::{Quotas, Sensors};
use std::cell::Cell;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The longest a fetch waits, whatever it asks.
pub const MAX_FETCH_WAIT: Duration = Duration::from_secs(60);

/// The longest request head `/metrics` reads.
pub const METRICS_MAX_HEAD: usize = 8192;

/// The limits, with Kafka's names where Kafka has the setting.
#[derive(Debug, Clone)]
pub struct Limits {
    /// `max.connections`: client connections the broker keeps at once.
    pub max_connections: usize,
    /// `max.connections.per.ip`: connections from one client address.
    pub max_connections_per_ip: usize,
    /// `tidemark.max.inflight.requests.per.connection`: requests of one connection handled at
    /// once (their responses still leave in request order).
    pub max_inflight_per_connection: usize,
    /// `queued.max.request.bytes`: bytes of requests read and not yet answered, per broker
    /// (each shard gets an equal share).
    pub queued_max_request_bytes: u64,
    /// `tidemark.fetch.max.memory.bytes`: bytes of fetched records held for responses not yet
    /// written, per broker (each shard gets an equal share).
    pub fetch_max_memory_bytes: u64,
    /// `fetch.max.bytes`: the most one fetch response carries (a request asking more gets this).
    pub fetch_max_bytes: usize,
    /// `connections.max.idle.ms`: a connection that sends nothing for this long is closed; also
    /// the longest a started request may take to arrive.
    pub connections_max_idle: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 10_000,
            max_connections_per_ip: 1_000,
            max_inflight_per_connection: 16,
            queued_max_request_bytes: 512 << 20,
            fetch_max_memory_bytes: 512 << 20,
            fetch_max_bytes: 55 << 20,
            connections_max_idle: Duration::from_secs(600),
        }
    }
}

/// Why a connection was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    Broker(usize),
    Ip(usize),
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::Broker(n) => write!(f, "max.connections={n} reached"),
            Refused::Ip(n) => write!(f, "max.connections.per.ip={n} reached for this address"),
        }
    }
}

/// Open client connections, counted across every shard.
#[derive(Debug)]
pub struct ConnectionTable {
    /// (open connections, per address), and the limits (dynamic broker settings).
    open: Mutex<Open>,
    /// Client quotas and every client's rates, shared by the shards: a quota is the broker's,
    /// whichever shards a client's connections land on (as Kafka's are per broker).
    quotas: std::sync::RwLock<Arc<Quotas>>,
    sensors: Mutex<Sensors>,
    /// Whether any quota is set: without one, Produce and Fetch touch neither lock.
    any_quota: std::sync::atomic::AtomicBool,
}

#[derive(Debug)]
struct Open {
    total: usize,
    per_ip: HashMap<IpAddr, usize>,
    max: usize,
    max_per_ip: usize,
}

impl ConnectionTable {
    pub fn new(max: usize, max_per_ip: usize) -> Arc<Self> {
        Arc::new(ConnectionTable {
            open: Mutex::new(Open { total: 0, per_ip: HashMap::new(), max, max_per_ip }),
            quotas: Default::default(),
            sensors: Default::default(),
            any_quota: Default::default(),
        })
    }

    /// Whether any client quota is set.
    pub fn any_quota(&self) -> bool {
        self.any_quota.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The client quotas in force.
    pub fn quotas(&self) -> Arc<Quotas> {
        self.quotas.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn set_quotas(&self, quotas: Quotas) {
        self.any_quota.store(!quotas.entries.is_empty(), std::sync::atomic::Ordering::Relaxed);
        *self.quotas.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(quotas);
    }

    /// Count `value` against a client's `key` quota (`who`: user, client id): the throttle
    /// time (ms) it earns, 0 if none or no quota applies; `keep` false forgets a value that
    /// violates (a throttled fetch returns nothing).
    pub fn record(&self, key: &str, who: (&str, &str), value: f64, now: i64, keep: bool) -> i64 {
        if !self.any_quota.load(std::sync::atomic::Ordering::Relaxed) {
            return 0;
        }
        // Which quota applies is found before the lock shared by the shards is taken.
        let Some(applies) = self.quotas().applicable(key, who.0, who.1) else { return 0 };
        self.sensors.lock().unwrap_or_else(|e| e.into_inner()).record(key, applies, value, now, keep)
    }

    /// New limits (`max.connections`, `max.connections.per.ip` changed at runtime): they apply
    /// to new connections; open ones stay.
    pub fn set_limits(&self, max: usize, max_per_ip: usize) {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        (open.max, open.max_per_ip) = (max, max_per_ip);
    }

    /// Count a new connection from `ip`, or refuse it. The connection is counted until the
    /// returned guard drops.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<Admitted, Refused> {
        let mut guard = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let open = &mut *guard;
        if open.total >= open.max {
            return Err(Refused::Broker(open.max));
        }
        let n = open.per_ip.entry(ip).or_insert(0);
        if *n >= open.max_per_ip {
            return Err(Refused::Ip(open.max_per_ip));
        }
        *n += 1;
        open.total += 1;
        Ok(Admitted { table: self.clone(), ip })
    }

    /// Connections open now.
    pub fn open_count(&self) -> usize {
        self.open.lock().unwrap_or_else(|e| e.into_inner()).total
    }
}

/// A shard-local limit on a repeated log line (a refused connection, a failing read): at most
/// one a second, saying how many were left out since the last.
#[derive(Debug, Default)]
pub struct LogEvery {
    last: Cell<Option<Instant>>,
    skipped: Cell<u64>,
}

impl LogEvery {
    /// `Some(lines left out since the last one)` when a line may be written now.
    pub fn ready(&self) -> Option<u64> {
        let now = Instant::now();
        if self.last.get().is_some_and(|t| now.duration_since(t) < Duration::from_secs(1)) {
            self.skipped.set(self.skipped.get() + 1);
            return None;
        }
        self.last.set(Some(now));
        Some(self.skipped.replace(0))
    }
}

/// A counted connection; dropping it frees its place.
#[derive(Debug)]
pub struct Admitted {
    table: Arc<ConnectionTable>,
    ip: IpAddr,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut open = self.table.open.lock().unwrap_or_else(|e| e.into_inner());
        open.total -= 1;
        if let Some(n) = open.per_ip.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                open.per_ip.remove(&self.ip);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Connection counts per broker and per address are enforced and freed on drop.
    #[test]
    fn connection_table_counts_and_frees() {
        let t = ConnectionTable::new(3, 2);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let a1 = t.admit(a).unwrap();
        let _a2 = t.admit(a).unwrap();
        assert_eq!(t.admit(a).unwrap_err(), Refused::Ip(2));
        let _b1 = t.admit(b).unwrap();
        assert_eq!(t.admit(b).unwrap_err(), Refused::Broker(3));
        drop(a1);
        assert_eq!(t.open_count(), 2);
        let _b2 = t.admit(b).unwrap();
        assert_eq!(t.admit(b).unwrap_err(), Refused::Broker(3));
        // Raised at runtime: new connections are taken.
        t.set_limits(4, 3);
        let _b3 = t.admit(b).unwrap();
        assert_eq!(t.admit(a).unwrap_err(), Refused::Broker(4));
    }

    // A repeated line is written once a second at most, with the count of those left out.
    #[test]
    fn log_every_limits_and_counts() {
        let l = LogEvery::default();
        assert_eq!(l.ready(), Some(0));
        assert_eq!(l.ready(), None);
        assert_eq!(l.ready(), None);
        l.last.set(Some(Instant::now() - Duration::from_millis(1_001)));
        assert_eq!(l.ready(), Some(2));
    }
}
