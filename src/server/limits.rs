//! Limits on what clients may make the broker hold: connections (per broker and per client
//! address), requests in flight per connection, and memory for requests read but not yet
//! answered and for fetched records not yet written back. Past a connection limit the new
//! connection is closed with one log line (at most one a second, with a count of the others);
//! past a memory budget the reader waits (TCP backpressure), so memory stays bounded whatever
//! the clients send. docs/operations.md lists every limit.
//!
//! Who uses it: the accept loops (connection table, shared by every shard) and the connection
//! tasks (the budgets, one pair per shard).

use crate::security::quota::{Quotas, Sensors};
use std::cell::Cell;
use std::collections::HashMap;
use std::net::IpAddr;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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

/// A shard's memory budget of `capacity` bytes, handed out first come, first served: a
/// reservation waits behind every earlier one, so a large one (a reservation larger than the
/// whole budget is clamped to it and runs alone) is not starved by a stream of others. Small
/// reservations (at most [`SMALL_BYPASS`] bytes, or a sixteenth of the budget) that fit in
/// what is free go ahead of waiting ones: metadata, heartbeats, commits and other short
/// requests are never held behind large produce requests waiting for a slow disk. A waiting
/// reservation that is dropped (its caller gave up) leaves the queue.
#[derive(Debug)]
pub struct Budget {
    inner: Rc<BudgetInner>,
}

/// Reservations up to this size may pass waiting ones when they fit (see [`Budget`]).
pub const SMALL_BYPASS: u64 = 64 << 10;

#[derive(Debug)]
struct BudgetInner {
    capacity: u64,
    /// Reservations this small may pass waiting ones when they fit.
    bypass: u64,
    available: Cell<u64>,
    /// Reservations waiting, oldest first: (bytes, where to send the grant).
    waiters: std::cell::RefCell<std::collections::VecDeque<(u64, futures_channel::oneshot::Sender<()>)>>,
    /// The most held at once since the start (a gauge: the bound at work).
    peak: Cell<u64>,
}

impl BudgetInner {
    fn take(&self, units: u64) {
        self.available.set(self.available.get() - units);
        self.peak.set(self.peak.get().max(self.capacity - self.available.get()));
    }

    /// Give `units` back and grant the waiters at the head of the queue that now fit.
    fn give(&self, units: u64) {
        self.available.set(self.available.get() + units);
        self.grant();
    }

    /// Grant waiting reservations in order while the first one fits; abandoned ones leave.
    fn grant(&self) {
        loop {
            let mut waiters = self.waiters.borrow_mut();
            let Some((units, tx)) = waiters.front() else { return };
            if tx.is_canceled() {
                waiters.pop_front();
                continue;
            }
            if *units > self.available.get() {
                return;
            }
            let (units, tx) = waiters.pop_front().expect("front exists");
            drop(waiters);
            self.take(units);
            if tx.send(()).is_err() {
                // Given up between the check and now: the bytes go back.
                self.available.set(self.available.get() + units);
            }
        }
    }

    fn queue_is_empty(&self) -> bool {
        self.grant();
        self.waiters.borrow().is_empty()
    }
}

impl Budget {
    pub fn new(capacity: u64) -> Budget {
        let capacity = capacity.max(1);
        Budget {
            inner: Rc::new(BudgetInner {
                capacity,
                bypass: SMALL_BYPASS.min(capacity / 16),
                available: Cell::new(capacity),
                waiters: Default::default(),
                peak: Cell::new(0),
            }),
        }
    }

    /// Wait until `bytes` (clamped to the capacity) are free, after every earlier reservation,
    /// and hold them. Dropping the future before it is ready gives up the place in the queue.
    pub async fn reserve(&self, bytes: u64) -> Held {
        let units = bytes.min(self.inner.capacity);
        if let Some(h) = self.try_reserve(units) {
            return h;
        }
        let (tx, rx) = futures_channel::oneshot::channel();
        self.inner.waiters.borrow_mut().push_back((units, tx));
        // A dropped future drops `rx`: the grant (if it raced in) is given back by `grant`.
        let mut guard = GiveBackIfGranted { inner: Some(self.inner.clone()), units, rx: Some(rx) };
        let granted = guard.rx.as_mut().expect("set above").await.is_ok();
        guard.inner = None; // from here the Held owns the units
        if granted {
            Held { budget: Some(self.inner.clone()), units }
        } else {
            Held::default() // the sender went away: never (the budget lives as long as the shard)
        }
    }

    /// Hold `bytes` (clamped) if they are free now and nobody waits before (or they are
    /// small).
    pub fn try_reserve(&self, bytes: u64) -> Option<Held> {
        let units = bytes.min(self.inner.capacity);
        if units > self.inner.available.get() || (units > self.inner.bypass && !self.inner.queue_is_empty()) {
            return None;
        }
        self.inner.take(units);
        Some(Held { budget: Some(self.inner.clone()), units })
    }

    /// The most held at once so far.
    pub fn peak(&self) -> u64 {
        self.inner.peak.get()
    }

    /// Bytes held now.
    pub fn in_use(&self) -> u64 {
        self.inner.capacity - self.inner.available.get()
    }

    pub fn capacity(&self) -> u64 {
        self.inner.capacity
    }
}

/// While a reservation waits: if its future is dropped after the grant was sent but before it
/// was seen, the granted bytes go back.
struct GiveBackIfGranted {
    inner: Option<Rc<BudgetInner>>,
    units: u64,
    rx: Option<futures_channel::oneshot::Receiver<()>>,
}

impl Drop for GiveBackIfGranted {
    fn drop(&mut self) {
        if let (Some(inner), Some(mut rx)) = (self.inner.take(), self.rx.take()) {
            if let Ok(Some(())) = rx.try_recv() {
                inner.give(self.units);
            } else {
                drop(rx);
                inner.grant(); // skip the abandoned entry, let the next ones in
            }
        }
    }
}

/// Bytes held from a [`Budget`], given back when dropped.
#[derive(Debug, Default)]
pub struct Held {
    budget: Option<Rc<BudgetInner>>,
    units: u64,
}

impl Held {
    /// Keep at most `bytes`, giving back the rest now.
    pub fn shrink(&mut self, bytes: u64) {
        if bytes < self.units {
            if let Some(b) = &self.budget {
                b.give(self.units - bytes);
            }
            self.units = bytes;
        }
    }

    /// Take over what `other` holds (both must come from the same budget, or `self` empty).
    pub fn absorb(&mut self, mut other: Held) {
        if other.units == 0 {
            return;
        }
        match (&self.budget, &other.budget) {
            (None, _) => self.budget = other.budget.take(),
            (Some(mine), Some(theirs)) => debug_assert!(Rc::ptr_eq(mine, theirs), "held from two budgets"),
            (Some(_), None) => {}
        }
        self.units += std::mem::take(&mut other.units);
    }

    pub fn units(&self) -> u64 {
        self.units
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if let (Some(b), true) = (&self.budget, self.units > 0) {
            b.give(self.units);
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

    // A budget never hands out more than its capacity; shrinking and dropping give bytes
    // back; an oversized reservation is clamped to the whole budget.
    #[test]
    fn budget_bounds_what_is_held() {
        glommio::LocalExecutor::default().run(async {
            let b = Budget::new(100);
            let mut h1 = b.reserve(60).await;
            assert!(b.try_reserve(50).is_none());
            h1.shrink(10);
            let h2 = b.try_reserve(50).expect("50 free after the shrink");
            assert_eq!(b.in_use(), 60);
            let mut all = Held::default();
            all.absorb(h1);
            all.absorb(h2);
            assert_eq!(all.units(), 60);
            drop(all);
            assert_eq!(b.in_use(), 0);
            assert_eq!(b.peak(), 60);
            let big = b.reserve(1_000).await;
            assert_eq!(big.units(), 100);
            assert_eq!(b.peak(), 100);
            assert!(b.try_reserve(1).is_none());
        });
    }

    // First come, first served: a large reservation waiting for the whole budget is not
    // overtaken by later small ones (neither waiting nor trying), and gets it once the
    // earlier holders are done; then the small ones follow in order.
    #[test]
    fn budget_serves_in_order_without_starving_large_reservations() {
        glommio::LocalExecutor::default().run(async {
            let b = Rc::new(Budget::new(100));
            let small = b.reserve(30).await;
            let order = Rc::new(std::cell::RefCell::new(Vec::new()));
            let spawn = |units: u64, tag: &'static str| {
                let (b, order) = (b.clone(), order.clone());
                glommio::spawn_local(async move {
                    let h = b.reserve(units).await;
                    order.borrow_mut().push(tag);
                    h
                })
            };
            let large = spawn(100, "large");
            glommio::executor().yield_task_queue_now().await;
            let later = spawn(10, "later");
            glommio::executor().yield_task_queue_now().await;
            assert!(b.try_reserve(10).is_none(), "a try jumped the queue");
            // A small one (at most a sixteenth of the budget here) passes when it fits.
            drop(b.try_reserve(6).expect("a small reservation waits behind a large one"));
            assert!(order.borrow().is_empty(), "70 bytes free, but the large one waits first");
            drop(small);
            let large = large.await;
            assert_eq!(*order.borrow(), vec!["large"]);
            drop(large);
            let _later = later.await;
            assert_eq!(*order.borrow(), vec!["large", "later"]);
            assert_eq!(b.in_use(), 10);
        });
    }

    // A reservation that gives up (its future dropped, as when a fetch's wait ends) leaves the
    // queue and holds nothing; the ones behind it go ahead.
    #[test]
    fn abandoned_reservations_leave_the_queue() {
        glommio::LocalExecutor::default().run(async {
            let b = Budget::new(100);
            let held = b.reserve(90).await;
            let gave_up = futures_lite::future::or(async { Some(b.reserve(50).await) }, async {
                glommio::timer::sleep(std::time::Duration::from_millis(20)).await;
                None
            })
            .await;
            assert!(gave_up.is_none());
            assert!(b.try_reserve(10).is_some(), "the abandoned reservation still blocks the queue");
            drop(held);
            assert_eq!(b.in_use(), 0);
            assert_eq!(b.reserve(100).await.units(), 100);
        });
    }
}
