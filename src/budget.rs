//! A shard's memory budgets: bytes handed out first come, first served, and given back when
//! their holder drops. The request and fetch budgets of `server::limits` are budgets; so is the
//! batch cache's share of the fetch budget (`storage::cache`), which gives its bytes back when
//! fetches need them. Shard-local (`Rc`, `Cell`): never shared across threads.

use std::cell::Cell;
use std::rc::Rc;

/// A shard's memory budget of `capacity` bytes, handed out first come, first served: a
/// reservation waits behind every earlier one, so a large one (a reservation larger than the
/// whole budget is clamped to it and runs alone) is not starved by a stream of others. Small
/// reservations (at most [`SMALL_BYPASS`] bytes, or a sixteenth of the budget) that fit in
/// what is free go ahead of waiting ones: metadata, heartbeats, commits and other short
/// requests are never held behind large produce requests waiting for a slow disk. A waiting
/// reservation that is dropped (its caller gave up) leaves the queue. A clone is another handle
/// to the same budget.
#[derive(Debug, Clone)]
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

    /// True when a reservation is waiting for memory.
    pub fn has_waiters(&self) -> bool {
        !self.inner.queue_is_empty()
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
            (Some(mine), Some(theirs)) => crate::invariant!(Rc::ptr_eq(mine, theirs), "held from two budgets"),
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
