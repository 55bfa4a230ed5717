//! The active controller's view of which brokers are alive: when it last heard from each.

use std::cell::RefCell;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// When the active controller last heard from each broker (in memory only, as in KRaft: a new
/// active controller gives every broker a full session from its election).
#[derive(Default)]
pub struct Liveness {
    last_seen: RefCell<HashMap<i32, Instant>>,
}

impl Liveness {
    pub fn seen(&self, broker: i32) {
        self.last_seen.borrow_mut().insert(broker, Instant::now());
    }

    /// Every broker gets a full session from now (this node just became the leader).
    pub(super) fn restart(&self) {
        self.last_seen.borrow_mut().clear();
    }

    /// Whether `broker` has been silent longer than `timeout` (one never heard of is given a
    /// session from now).
    pub(super) fn expired(&self, broker: i32, timeout: Duration) -> bool {
        let now = Instant::now();
        let mut seen = self.last_seen.borrow_mut();
        now.duration_since(*seen.entry(broker).or_insert(now)) > timeout
    }
}
