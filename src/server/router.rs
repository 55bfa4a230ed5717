//! Typed calls between shards.
//!
//! A call is a value of its own type implementing [`ShardCall`], with its own reply type: the
//! caller gets exactly that reply or a [`CallError`], never a reply of another kind. The call
//! travels to the target shard over the glommio channel mesh (boxed, with a one-shot reply
//! channel); the target runs it as a task of its own and sends the reply straight back. A call
//! for the caller's own shard runs as a local task, through the same code.
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

use crate::server::deadline::within;
use crate::server::limits::LogEvery;
use futures_channel::oneshot;
use glommio::channels::channel_mesh::{Receivers, Senders};
use std::cell::RefCell;
use std::future::Future;
use std::marker::PhantomData;
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

/// A call in transit, its reply channel inside.
pub struct Envelope<S>(Box<dyn Erased<S>>);

impl<S> std::fmt::Debug for Envelope<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Envelope({})", self.0.name())
    }
}

trait Erased<S>: Send {
    fn name(&self) -> &'static str;
    fn run(self: Box<Self>, shard: Rc<S>) -> Pin<Box<dyn Future<Output = ()>>>;
}

struct Sealed<S, C: ShardCall<S>>
where
    S: 'static,
{
    call: C,
    reply: oneshot::Sender<C::Reply>,
    _shard: PhantomData<fn(S)>,
}

impl<S: 'static, C: ShardCall<S>> Erased<S> for Sealed<S, C> {
    fn name(&self) -> &'static str {
        C::NAME
    }

    fn run(self: Box<Self>, shard: Rc<S>) -> Pin<Box<dyn Future<Output = ()>>> {
        let Sealed { call, reply, .. } = *self;
        Box::pin(async move {
            let out = call.run(shard).await;
            // The caller may have given up (deadline, closed connection): nothing to do.
            let _ = reply.send(out);
        })
    }
}

/// A shard's end of the mesh: where calls go out and come in.
pub struct Router<S: 'static> {
    id: usize,
    shards: usize,
    default_deadline: Duration,
    senders: RefCell<Option<Rc<Senders<Envelope<S>>>>>,
    timeouts_log: LogEvery,
}

impl<S: 'static> std::fmt::Debug for Router<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Router").field("id", &self.id).field("shards", &self.shards).finish()
    }
}

impl<S: 'static> Router<S> {
    pub fn new(id: usize, shards: usize, default_deadline: Duration) -> Self {
        Router { id, shards, default_deadline, senders: RefCell::new(None), timeouts_log: LogEvery::default() }
    }

    pub fn id(&self) -> usize {
        self.id
    }

    pub fn shards(&self) -> usize {
        self.shards
    }

    /// Connect to the mesh and run every call that arrives, each as a task of its own.
    pub fn attach(&self, shard: &Rc<S>, senders: Senders<Envelope<S>>, mut receivers: Receivers<Envelope<S>>) {
        *self.senders.borrow_mut() = Some(Rc::new(senders));
        for (_, rx) in receivers.streams() {
            let shard = shard.clone();
            glommio::spawn_local(async move {
                while let Some(Envelope(call)) = rx.recv().await {
                    glommio::spawn_local(call.run(shard.clone())).detach();
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
        let (tx, rx) = oneshot::channel();
        let sealed = Box::new(Sealed { call, reply: tx, _shard: PhantomData });
        let senders = self.senders.borrow().clone();
        // Before the mesh is joined (startup) no call leaves the shard.
        let Some(senders) = senders else { return Err(lost) };
        match within(limit, senders.send_to(target, Envelope(sealed))).await {
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
        Ok(reply)
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
    use glommio::channels::channel_mesh::MeshBuilder;
    use glommio::{LocalExecutorBuilder, Placement};

    /// A shard of the tests' own: a router and a name.
    struct Toy {
        router: Router<Toy>,
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
    /// (Lost when its channel says so, else at its deadline), never in success or a hang.
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
                        return Vec::new();
                    }
                    let mut seen = Vec::new();
                    seen.push(format!("{:?}", toy.router.call(&toy, 1, Echo(7)).await));
                    seen.push(format!("{:?}", toy.router.call(&toy, 0, Echo(8)).await));
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
        handles.remove(0).join().unwrap();
        assert_eq!(seen[0], "Ok((1, 7))");
        assert_eq!(seen[1], "Ok((0, 8))");
        assert_eq!(seen[2], "[Ok((0, 9)), Ok((1, 9))]");
        assert_eq!(seen[3], r#"Err(TimedOut { call: "slow", shard: 1, ms: 100 })"#);
        assert!(seen[4].starts_with("Err(Lost") || seen[4].starts_with("Err(TimedOut"), "{}", seen[4]);
    }
}
