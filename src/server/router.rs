//! Typed calls between shards.
//!
//! A call is a value of its own type implementing [`ShardCall`], with its own reply type: the
//! caller gets exactly that reply or a [`CallError`], never a reply of another kind. The call
//! travels to the target shard over the glommio channel mesh (boxed, under an id); the target
//! runs it as a task of its own and sends the reply back over the mesh under the same id, to
//! the caller's pending entry. A call for the caller's own shard runs as a local task.
//!
//! Invariants:
//! - Every call has a deadline (the call's own, or the router's default,
//!   `tidemark.shard.call.timeout.ms`): past it the caller gets [`CallError::TimedOut`] and one
//!   log line a second at most. The work itself is not cancelled: an append half done finishes.
//! - A reply that can never come is an error, never success: [`CallError::Lost`] when the
//!   target's channel is closed or its task dropped the call. (A shard that dies does not
//!   always drop what it held: glommio leaves its pending tasks, and calls to it then end at
//!   their deadline; the supervisor in [`crate::server::run`] stops the broker meanwhile.)
//! - Work runs detached on the target: a caller that goes away (a closed connection) never
//!   cancels an append or a topic change half done.
//!
//! The router is generic over the shard type `S` so that it depends on nothing in the server
//! (and can be tested with a shard of its own).

use crate::deadline::within;
use crate::server::limits::LogEvery;
use futures_channel::oneshot;
use glommio::channels::channel_mesh::{Receivers, Senders};
use std::any::Any;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// The deadline of a call that names none (`tidemark.shard.call.timeout.ms`).
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// One operation a shard runs for another (or for itself), with its reply type.
pub trait ShardCall<S: 'static>: Send + Sized + 'static {
    /// What the caller gets back.
    type Reply: Send + 'static;
    /// The call's name in log lines.
    const NAME: &'static str;

    /// How long the caller waits; `None`: the router's default.
    fn deadline(&self) -> Option<Duration> {
        None
    }

    /// Run on the target shard.
    fn run(self, shard: Rc<S>) -> impl Future<Output = Self::Reply> + 'static;
}

/// Why a call has no reply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    #[error("{call} on shard {shard} did not finish within {ms} ms")]
    TimedOut { call: &'static str, shard: usize, ms: u64 },
    #[error("{call} on shard {shard} was lost: the shard stopped or dropped it")]
    Lost { call: &'static str, shard: usize },
}

/// What travels over the mesh: a call for the target to run, or the reply to one, sent back
/// to the caller's shard by id. Replies come back over the mesh, not by waking the caller's
/// task from the target's thread: a glommio task woken from another thread is a path this
/// code does not rely on (a version that did crashed under the kill -9 loop with a double
/// free inside the runtime).
pub enum Envelope<S> {
    /// `sent`: when the caller began sending it (the `hop_send` stage ends at its receipt).
    Call { from: usize, id: u64, call: Box<dyn Erased<S>>, sent: Instant },
    /// `sent`: when the answering shard began sending it (`hop_reply` ends at its receipt).
    Reply { id: u64, reply: Box<dyn Any + Send>, sent: Instant },
}

impl<S> std::fmt::Debug for Envelope<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Envelope::Call { from, id, call, .. } => write!(f, "Call({} #{id} from {from})", call.name()),
            Envelope::Reply { id, .. } => write!(f, "Reply(#{id})"),
        }
    }
}

/// A call with its type erased for the trip; its reply comes back as `Any`, and only the
/// caller that sent it (who knows its type) takes it back.
pub trait Erased<S>: Send {
    fn name(&self) -> &'static str;
    fn run(self: Box<Self>, shard: Rc<S>) -> Pin<Box<dyn Future<Output = Box<dyn Any + Send>>>>;
}

struct Sealed<C>(C);

impl<S: 'static, C: ShardCall<S>> Erased<S> for Sealed<C> {
    fn name(&self) -> &'static str {
        C::NAME
    }

    fn run(self: Box<Self>, shard: Rc<S>) -> Pin<Box<dyn Future<Output = Box<dyn Any + Send>>>> {
        let call = self.0;
        Box::pin(async move { Box::new(call.run(shard).await) as Box<dyn Any + Send> })
    }
}

/// A shard that has a router (so the mesh loops can reach the pending replies).
pub trait Routed: Sized + 'static {
    fn router(&self) -> &Router<Self>;
}

/// A shard's end of the mesh: where calls go out and come in.
pub struct Router<S: 'static> {
    id: usize,
    shards: usize,
    default_deadline: Duration,
    senders: RefCell<Option<Rc<Senders<Envelope<S>>>>>,
    /// Calls sent and not answered yet, by id: where each reply goes (on this thread).
    pending: RefCell<HashMap<u64, oneshot::Sender<Box<dyn Any + Send>>>>,
    next_id: Cell<u64>,
    timeouts_log: LogEvery,
}

impl<S: 'static> std::fmt::Debug for Router<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Router").field("id", &self.id).field("shards", &self.shards).finish()
    }
}

/// Removes a call's pending entry however the wait ends (reply, deadline, a caller that goes
/// away), so nothing is left behind.
struct PendingEntry<'a> {
    pending: &'a RefCell<HashMap<u64, oneshot::Sender<Box<dyn Any + Send>>>>,
    id: u64,
}

impl Drop for PendingEntry<'_> {
    fn drop(&mut self) {
        self.pending.borrow_mut().remove(&self.id);
    }
}

impl<S: Routed> Router<S> {
    pub fn new(id: usize, shards: usize, default_deadline: Duration) -> Self {
        Router {
            id,
            shards,
            default_deadline,
            senders: RefCell::new(None),
            pending: RefCell::new(HashMap::new()),
            next_id: Cell::new(1),
            timeouts_log: LogEvery::default(),
        }
    }

    pub fn id(&self) -> usize {
        self.id
    }

    pub fn shards(&self) -> usize {
        self.shards
    }

    /// Connect to the mesh: run every call that arrives, each as a task of its own, and send
    /// its reply back; hand every reply that arrives to the call waiting for it.
    pub fn attach(&self, shard: &Rc<S>, senders: Senders<Envelope<S>>, mut receivers: Receivers<Envelope<S>>) {
        let senders = Rc::new(senders);
        *self.senders.borrow_mut() = Some(senders.clone());
        for (_, rx) in receivers.streams() {
            let (shard, senders) = (shard.clone(), senders.clone());
            glommio::spawn_local(async move {
                while let Some(envelope) = rx.recv().await {
                    match envelope {
                        Envelope::Call { from, id, call, sent } => {
                            crate::metrics::since(crate::metrics::Stage::HopSend, sent);
                            let (shard, senders) = (shard.clone(), senders.clone());
                            glommio::spawn_local(async move {
                                let reply = call.run(shard).await;
                                // A caller whose shard is gone has nobody to answer.
                                let envelope = Envelope::Reply { id, reply, sent: Instant::now() };
                                let _ = senders.send_to(from, envelope).await;
                            })
                            .detach();
                        }
                        Envelope::Reply { id, reply, sent } => {
                            crate::metrics::since(crate::metrics::Stage::HopReply, sent);
                            // The caller may have given up (deadline, closed connection).
                            if let Some(tx) = shard.router().pending.borrow_mut().remove(&id) {
                                let _ = tx.send(reply);
                            }
                        }
                    }
                }
            })
            .detach();
        }
    }

    /// Run `call` on shard `target` and wait for its reply, at most its deadline.
    pub async fn call<C: ShardCall<S>>(&self, me: &Rc<S>, target: usize, call: C) -> Result<C::Reply, CallError> {
        let limit = call.deadline().unwrap_or(self.default_deadline);
        let lost = CallError::Lost { call: C::NAME, shard: target };
        if target == self.id {
            // A task of its own (a caller that goes away must not cancel the work), awaited.
            let task = glommio::spawn_local(call.run(me.clone())).detach();
            return match within(limit, task).await {
                Some(Some(reply)) => Ok(reply),
                Some(None) => Err(lost),
                None => Err(self.timed_out::<C>(target, limit)),
            };
        }
        let started = Instant::now();
        let senders = self.senders.borrow().clone();
        // Before the mesh is joined (startup) no call leaves the shard.
        let Some(senders) = senders else { return Err(lost) };
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        let (tx, rx) = oneshot::channel();
        self.pending.borrow_mut().insert(id, tx);
        let _entry = PendingEntry { pending: &self.pending, id };
        let envelope = Envelope::Call { from: self.id, id, call: Box::new(Sealed(call)), sent: Instant::now() };
        match within(limit, senders.send_to(target, envelope)).await {
            Some(Ok(())) => {}
            Some(Err(_)) => return Err(lost),
            None => return Err(self.timed_out::<C>(target, limit)),
        }
        let left = limit.saturating_sub(started.elapsed());
        let reply = match within(left, rx).await {
            Some(Ok(reply)) => reply,
            Some(Err(oneshot::Canceled)) => return Err(lost),
            None => return Err(self.timed_out::<C>(target, limit)),
        };
        crate::metrics::since(crate::metrics::Stage::Hop, started);
        // The id was this call's alone: its reply has its type.
        let reply = reply.downcast::<C::Reply>().expect("a reply has the type of the call sent under its id");
        Ok(*reply)
    }

    /// The same call on every shard, one after another (shard 0 first); the replies in shard
    /// order.
    pub async fn call_each<C: ShardCall<S> + Clone>(&self, me: &Rc<S>, call: C) -> Vec<Result<C::Reply, CallError>> {
        let mut out = Vec::with_capacity(self.shards);
        for target in 0..self.shards {
            out.push(self.call(me, target, call.clone()).await);
        }
        out
    }

    fn timed_out<C: ShardCall<S>>(&self, target: usize, limit: Duration) -> CallError {
        let e = CallError::TimedOut { call: C::NAME, shard: target, ms: limit.as_millis() as u64 };
        crate::metrics::count(crate::metrics::Counter::ShardCallTimeouts, 1);
        if let Some(skipped) = self.timeouts_log.ready() {
            tracing::warn!(from = self.id, error = %e, timed_out_since_last_line = skipped, "shard call timed out");
        }
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Stage;
    use glommio::channels::channel_mesh::MeshBuilder;
    use glommio::{LocalExecutorBuilder, Placement};

    /// A shard of the tests' own: a router and a name.
    struct Toy {
        router: Router<Toy>,
    }

    impl Routed for Toy {
        fn router(&self) -> &Router<Toy> {
            &self.router
        }
    }

    #[derive(Clone)]
    struct Echo(u32);
    impl ShardCall<Toy> for Echo {
        type Reply = (usize, u32);
        const NAME: &'static str = "echo";
        async fn run(self, shard: Rc<Toy>) -> (usize, u32) {
            (shard.router.id(), self.0)
        }
    }

    struct Slow(Duration);
    impl ShardCall<Toy> for Slow {
        type Reply = ();
        const NAME: &'static str = "slow";
        fn deadline(&self) -> Option<Duration> {
            Some(Duration::from_millis(100))
        }
        async fn run(self, _: Rc<Toy>) {
            glommio::timer::sleep(self.0).await;
        }
    }

    /// Calls between two executors: typed replies from the right shard, local and remote; a
    /// call past its deadline is TimedOut; a call to a shard that stopped ends in an error
    /// (Lost when its channel says so, else at its deadline), never in success or a hang. A
    /// call to another shard is timed whole (`hop`, caller) and in its two crossings:
    /// `hop_send` on the target, `hop_reply` on the caller; a call to its own shard crosses
    /// nothing.
    #[test]
    fn typed_calls_deadlines_and_lost_replies() {
        let mesh = MeshBuilder::<Envelope<Toy>, _>::full(2, 16);
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut handles = Vec::new();
        for id in 0..2 {
            let (mesh, stop) = (mesh.clone(), stop.clone());
            let h = LocalExecutorBuilder::new(Placement::Unbound)
                .spawn(move || async move {
                    let toy = Rc::new(Toy { router: Router::new(id, 2, Duration::from_secs(1)) });
                    let (tx, rx) = mesh.join().await.unwrap();
                    toy.router.attach(&toy, tx, rx);
                    if id == 1 {
                        // Serve until shard 0 is done with the first checks, then stop.
                        while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                            glommio::timer::sleep(Duration::from_millis(5)).await;
                        }
                        let m = crate::metrics::snapshot();
                        return vec![format!("target hop_send {}", m.stage_count(Stage::HopSend))];
                    }
                    let mut seen = Vec::new();
                    seen.push(format!("{:?}", toy.router.call(&toy, 1, Echo(7)).await));
                    let m = crate::metrics::snapshot();
                    let counts = [Stage::Hop, Stage::HopSend, Stage::HopReply].map(|s| m.stage_count(s));
                    assert_eq!(counts, [1, 0, 1], "one crossing each way; the send recorded on the target");
                    seen.push(format!("{:?}", toy.router.call(&toy, 0, Echo(8)).await));
                    assert_eq!(
                        crate::metrics::snapshot().stage_count(Stage::HopReply),
                        1,
                        "a call to itself crosses nothing"
                    );
                    seen.push(format!("{:?}", toy.router.call_each(&toy, Echo(9)).await));
                    let r = toy.router.call(&toy, 1, Slow(Duration::from_secs(2))).await;
                    seen.push(format!("{r:?}"));
                    stop.store(true, std::sync::atomic::Ordering::SeqCst);
                    // Shard 1 is gone (its executor ends, its receivers and tasks dropped).
                    glommio::timer::sleep(Duration::from_millis(200)).await;
                    let r = toy.router.call(&toy, 1, Echo(10)).await;
                    seen.push(format!("{r:?}"));
                    seen
                })
                .unwrap();
            handles.push(h);
        }
        let seen = handles.remove(0).join().unwrap();
        let target = handles.remove(0).join().unwrap();
        // Echo(7), Echo(9) and the slow call reached shard 1.
        assert_eq!(target, ["target hop_send 3"]);
        assert_eq!(seen[0], "Ok((1, 7))");
        assert_eq!(seen[1], "Ok((0, 8))");
        assert_eq!(seen[2], "[Ok((0, 9)), Ok((1, 9))]");
        assert_eq!(seen[3], r#"Err(TimedOut { call: "slow", shard: 1, ms: 100 })"#);
        assert!(seen[4].starts_with("Err(Lost") || seen[4].starts_with("Err(TimedOut"), "{}", seen[4]);
    }
}
