//! The order of a producer's transactional writes to a partition while the first of a
//! transaction waits for its coordinator (`server::transactions::verify_txn_write`), and what
//! a connection's producer has already added to its transaction. Shard-local state, no I/O.

use crate::txn::TopicPartition;
use futures_channel::oneshot;
use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;

/// The partitions a connection's version 2 producer has added to its open transaction through
/// `server::transactions::enrol_partitions`, so that its next requests to them are not
/// enrolled again (a new transaction has a new epoch).
#[derive(Debug, Default)]
pub struct Enrolled {
    pub id: String,
    pub pid: i64,
    pub epoch: i16,
    pub partitions: std::collections::BTreeSet<TopicPartition>,
}

/// One producer's transactional first writes to a partition, in the order they arrived: a write
/// that must ask the coordinator holds the turn until it is appended, and hands it to the next
/// waiting write, first come first served.
#[derive(Default)]
pub struct FirstWrites {
    turns: Turns,
}

/// Per producer and partition: the writes waiting for the turn, oldest first (an entry exists
/// while one holds it).
type Turns = Rc<RefCell<HashMap<(TopicPartition, i64), VecDeque<oneshot::Sender<()>>>>>;

impl std::fmt::Debug for FirstWrites {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FirstWrites({} held)", self.turns.borrow().len())
    }
}

impl FirstWrites {
    /// Whether a write of producer `pid` on `tp` holds the turn.
    pub fn busy(&self, tp: &TopicPartition, pid: i64) -> bool {
        self.turns.borrow().contains_key(&(tp.clone(), pid))
    }

    /// Wait for the turn of producer `pid` on `tp`.
    pub async fn turn(&self, tp: &TopicPartition, pid: i64) -> WriteTurn {
        let key = (tp.clone(), pid);
        let waiting = {
            let mut turns = self.turns.borrow_mut();
            match turns.get_mut(&key) {
                None => {
                    turns.insert(key.clone(), VecDeque::new());
                    None
                }
                Some(queue) => {
                    let (tx, rx) = oneshot::channel();
                    queue.push_back(tx);
                    Some(rx)
                }
            }
        };
        // Made before the wait, so that a write dropped while it waits (its request cancelled)
        // still passes the turn on if it was handed over meanwhile.
        let mut turn = Turn { turns: self.turns.clone(), key, waiting };
        if let Some(rx) = turn.waiting.as_mut() {
            // Handed over by the write before (dropped unsent only when it is itself dropped:
            // `Turn::drop` hands it on then).
            let _ = rx.await;
            turn.waiting = None;
        }
        WriteTurn { _held: Some(turn) }
    }
}

/// The turn a transactional first write holds until it is appended (none for a write into a
/// transaction already open on the partition).
#[derive(Debug)]
pub struct WriteTurn {
    _held: Option<Turn>,
}

impl WriteTurn {
    /// No turn: not a transactional write, or one into a transaction already open on the
    /// partition.
    pub fn none() -> WriteTurn {
        WriteTurn { _held: None }
    }

    /// Whether this write holds its producer's turn (and must give it up once appended).
    pub fn is_held(&self) -> bool {
        self._held.is_some()
    }
}

struct Turn {
    turns: Turns,
    key: (TopicPartition, i64),
    /// Still waiting to be handed the turn.
    waiting: Option<oneshot::Receiver<()>>,
}

impl std::fmt::Debug for Turn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Turn({:?})", self.key)
    }
}

impl Drop for Turn {
    /// The turn goes to the oldest write still waiting (one whose request was dropped is
    /// skipped); with none, the entry goes.
    fn drop(&mut self) {
        if let Some(mut rx) = self.waiting.take() {
            // Dropped while waiting: if the turn came meanwhile, it is passed on below; if not,
            // the holder skips this write (its receiver is gone).
            if !matches!(rx.try_recv(), Ok(Some(()))) {
                return;
            }
        }
        let mut turns = self.turns.borrow_mut();
        let Some(queue) = turns.get_mut(&self.key) else { return };
        while let Some(next) = queue.pop_front() {
            if next.send(()).is_ok() {
                return;
            }
        }
        turns.remove(&self.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// First come, first served per producer and partition: three writes ask for the turn, the
    /// second and third wait, and get it in that order as each before them drops it; another
    /// producer or partition never waits; a waiting write dropped before its turn is skipped,
    /// one dropped after being handed the turn passes it on; with nobody left, the entry goes.
    #[test]
    fn turns_are_handed_over_in_arrival_order() {
        glommio::LocalExecutor::default().run(async {
            let writes = Rc::new(FirstWrites::default());
            let tp = ("t".to_string(), 0);
            let order = Rc::new(RefCell::new(Vec::new()));
            let first = writes.turn(&tp, 7).await;
            assert!(writes.busy(&tp, 7) && !writes.busy(&tp, 8));
            let _other = writes.turn(&tp, 8).await; // another producer: at once
            let _elsewhere = writes.turn(&("t".to_string(), 1), 7).await; // another partition
            let mut waiters = Vec::new();
            for n in 2..=3 {
                let (writes, tp, order) = (writes.clone(), tp.clone(), order.clone());
                waiters.push(glommio::spawn_local(async move {
                    let turn = writes.turn(&tp, 7).await;
                    order.borrow_mut().push(n);
                    glommio::timer::sleep(std::time::Duration::from_millis(5)).await;
                    drop(turn);
                }));
                glommio::timer::sleep(std::time::Duration::from_millis(1)).await;
            }
            assert!(order.borrow().is_empty(), "both wait for the first");
            drop(first);
            for w in waiters {
                w.await;
            }
            assert_eq!(*order.borrow(), [2, 3]);
            assert!(!writes.busy(&tp, 7), "nobody left: the entry went");

            // Dropped while waiting: skipped; dropped after being handed the turn: passed on.
            let holder = writes.turn(&tp, 7).await;
            let skipped = glommio::spawn_local({
                let (writes, tp) = (writes.clone(), tp.clone());
                async move { writes.turn(&tp, 7).await }
            });
            glommio::timer::sleep(std::time::Duration::from_millis(1)).await;
            let last = glommio::spawn_local({
                let (writes, tp) = (writes.clone(), tp.clone());
                async move { writes.turn(&tp, 7).await }
            });
            glommio::timer::sleep(std::time::Duration::from_millis(1)).await;
            drop(holder); // handed to `skipped`, which is cancelled before it runs
            drop(skipped);
            let got = last.await;
            assert!(writes.busy(&tp, 7));
            drop(got);
            assert!(!writes.busy(&tp, 7));
        });
    }
}
