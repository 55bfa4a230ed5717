//! openraft's [`AsyncRuntime`] on glommio: what the metadata quorum's Raft runs on, inside the
//! shard that hosts it.
//!
//! openraft is built with its `single-threaded` feature, so nothing here needs `Send`: tasks
//! are glommio local tasks of the executor that calls [`GlommioRuntime::spawn`].
//! - **Tasks.** A glommio task whose handle is dropped is cancelled, and openraft drops the
//!   handles of tasks it means to keep running; so every task is detached at once and its
//!   handle only observes it ([`Join`]). A task that ends without a value (it was cancelled)
//!   is a [`JoinError`]; a panic in a task unwinds through the executor, as everywhere in the
//!   broker.
//! - **Time.** `std::time::Instant`, the clock glommio's timers use; sleeps are glommio timers,
//!   and a timeout is a future raced against one ([`Timeout`]: glommio's own timeout wants the
//!   future to return a glommio result).
//! - **Channels and the mutex.** tokio's `sync` primitives, which need no tokio runtime: their
//!   wakers are plain wakers, and waking a glommio task from its own thread (or another) queues
//!   it on its executor.
//!
//! `openraft_rt::testing::Suite` checks it all (the test below).

use openraft_rt::{
    mpsc, watch, AsyncRuntime, Instant as RtInstant, Mpsc, MpscReceiver, MpscSender, MpscWeakSender, Mutex, Oneshot,
    OneshotSender, OptionalSend, OptionalSync, TryRecvError, Watch, WatchReceiver, WatchSender,
};
use std::future::Future;
use std::ops::{Add, AddAssign, Sub, SubAssign};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync as ts;

/// The runtime: an executor of its own only for [`AsyncRuntime::new`] and
/// [`AsyncRuntime::block_on`] (tests and tools); inside the broker openraft's tasks run on the
/// executor of the shard that spawns them.
pub struct GlommioRuntime {
    executor: glommio::LocalExecutor,
}

impl std::fmt::Debug for GlommioRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GlommioRuntime").finish()
    }
}

/// A task that ended without its value: cancelled, or it panicked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JoinError;

impl std::fmt::Display for JoinError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the task ended without a value (cancelled or panicked)")
    }
}

impl std::error::Error for JoinError {}

/// The handle of a detached task: its value once it ends.
pub struct Join<T>(glommio::task::JoinHandle<T>);

impl<T> Future for Join<T> {
    type Output = Result<T, JoinError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0).poll(cx).map(|v| v.ok_or(JoinError))
    }
}

/// A sleep: a glommio timer, without its output.
pub struct Sleep(glommio::timer::Timer);

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        Pin::new(&mut self.0).poll(cx).map(|_| ())
    }
}

/// The deadline of a [`Timeout`] passed first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Elapsed;

impl std::fmt::Display for Elapsed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("deadline elapsed")
    }
}

impl std::error::Error for Elapsed {}

/// A future raced against a timer; the future wins a tie (a value ready at the deadline is
/// returned, as tokio's timeout does).
pub struct Timeout<F> {
    future: Pin<Box<F>>,
    timer: Sleep,
}

impl<F: Future> Future for Timeout<F> {
    type Output = Result<F::Output, Elapsed>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if let Poll::Ready(v) = self.future.as_mut().poll(cx) {
            return Poll::Ready(Ok(v));
        }
        Pin::new(&mut self.timer).poll(cx).map(|()| Err(Elapsed))
    }
}

/// `std::time::Instant`, the clock of glommio's timers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Instant(std::time::Instant);

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        Instant(self.0 + d)
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, d: Duration) {
        self.0 += d;
    }
}

impl Sub<Duration> for Instant {
    type Output = Instant;
    fn sub(self, d: Duration) -> Instant {
        Instant(self.0 - d)
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    fn sub(self, other: Instant) -> Duration {
        self.0.saturating_duration_since(other.0)
    }
}

impl SubAssign<Duration> for Instant {
    fn sub_assign(&mut self, d: Duration) {
        self.0 -= d;
    }
}

impl RtInstant for Instant {
    fn now() -> Instant {
        Instant(std::time::Instant::now())
    }
}

/// The longest sleep: glommio adds a timer's duration to the clock and would overflow on
/// `Duration::MAX`, where tokio clamps to a far deadline; so does this (30 years).
const LONGEST_SLEEP: Duration = Duration::from_secs(30 * 365 * 86_400);

fn sleep_for(duration: Duration) -> Sleep {
    Sleep(glommio::timer::Timer::new(duration.min(LONGEST_SLEEP)))
}

fn sleep_until(deadline: Instant) -> Sleep {
    sleep_for(deadline.0.saturating_duration_since(std::time::Instant::now()))
}

impl AsyncRuntime for GlommioRuntime {
    type JoinError = JoinError;
    type JoinHandle<T: OptionalSend + 'static> = Join<T>;
    type Sleep = Sleep;
    type Instant = Instant;
    type TimeoutError = Elapsed;
    type Timeout<R, T: Future<Output = R> + OptionalSend> = Timeout<T>;
    type ThreadLocalRng = rand::rngs::ThreadRng;

    fn spawn<T>(future: T) -> Join<T::Output>
    where
        T: Future + OptionalSend + 'static,
        T::Output: OptionalSend + 'static,
    {
        Join(glommio::spawn_local(future).detach())
    }

    fn sleep(duration: Duration) -> Sleep {
        sleep_for(duration)
    }

    fn sleep_until(deadline: Instant) -> Sleep {
        sleep_until(deadline)
    }

    fn timeout<R, F: Future<Output = R> + OptionalSend>(duration: Duration, future: F) -> Timeout<F> {
        Timeout { future: Box::pin(future), timer: Self::sleep(duration) }
    }

    fn timeout_at<R, F: Future<Output = R> + OptionalSend>(deadline: Instant, future: F) -> Timeout<F> {
        Timeout { future: Box::pin(future), timer: sleep_until(deadline) }
    }

    fn is_panic(_: &JoinError) -> bool {
        // glommio does not say why a task ended without a value; a panic in a task unwinds
        // through the executor (docs/cluster-research.md), so one seen here was a cancel.
        false
    }

    fn thread_rng() -> rand::rngs::ThreadRng {
        rand::rng()
    }

    type Mpsc = TokioMpsc;
    type Watch = TokioWatch;
    type Oneshot = TokioOneshot;
    type Mutex<T: OptionalSend + 'static> = TokioMutex<T>;

    fn new(_threads: usize) -> Self {
        let executor = glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
            .make()
            .expect("a glommio executor for openraft's runtime");
        GlommioRuntime { executor }
    }

    fn block_on<F, T>(&mut self, future: F) -> T
    where
        F: Future<Output = T>,
    {
        self.executor.run(future)
    }
}

/// tokio's bounded mpsc channel.
pub struct TokioMpsc;

pub struct MpscTx<T>(ts::mpsc::Sender<T>);
pub struct MpscRx<T>(ts::mpsc::Receiver<T>);
pub struct MpscWeakTx<T>(ts::mpsc::WeakSender<T>);

impl<T> Clone for MpscTx<T> {
    fn clone(&self) -> Self {
        MpscTx(self.0.clone())
    }
}

impl<T> Clone for MpscWeakTx<T> {
    fn clone(&self) -> Self {
        MpscWeakTx(self.0.clone())
    }
}

impl Mpsc for TokioMpsc {
    type Sender<T: OptionalSend> = MpscTx<T>;
    type Receiver<T: OptionalSend> = MpscRx<T>;
    type WeakSender<T: OptionalSend> = MpscWeakTx<T>;

    fn channel<T: OptionalSend>(buffer: usize) -> (MpscTx<T>, MpscRx<T>) {
        let (tx, rx) = ts::mpsc::channel(buffer);
        (MpscTx(tx), MpscRx(rx))
    }
}

impl<T: OptionalSend> MpscSender<TokioMpsc, T> for MpscTx<T> {
    fn send(&self, msg: T) -> impl Future<Output = Result<(), mpsc::SendError<T>>> {
        let sent = self.0.send(msg);
        async move { sent.await.map_err(|e| mpsc::SendError(e.0)) }
    }

    fn downgrade(&self) -> MpscWeakTx<T> {
        MpscWeakTx(self.0.downgrade())
    }
}

impl<T: OptionalSend> MpscReceiver<T> for MpscRx<T> {
    fn recv(&mut self) -> impl Future<Output = Option<T>> {
        self.0.recv()
    }

    fn try_recv(&mut self) -> Result<T, TryRecvError> {
        self.0.try_recv().map_err(|e| match e {
            ts::mpsc::error::TryRecvError::Empty => TryRecvError::Empty,
            ts::mpsc::error::TryRecvError::Disconnected => TryRecvError::Disconnected,
        })
    }
}

impl<T: OptionalSend> MpscWeakSender<TokioMpsc, T> for MpscWeakTx<T> {
    fn upgrade(&self) -> Option<MpscTx<T>> {
        self.0.upgrade().map(MpscTx)
    }
}

/// tokio's watch channel.
pub struct TokioWatch;

pub struct WatchTx<T>(ts::watch::Sender<T>);
pub struct WatchRx<T>(ts::watch::Receiver<T>);

impl<T> Clone for WatchTx<T> {
    fn clone(&self) -> Self {
        WatchTx(self.0.clone())
    }
}

impl<T> Clone for WatchRx<T> {
    fn clone(&self) -> Self {
        WatchRx(self.0.clone())
    }
}

impl Watch for TokioWatch {
    type Sender<T: OptionalSend + OptionalSync> = WatchTx<T>;
    type Receiver<T: OptionalSend + OptionalSync> = WatchRx<T>;
    type Ref<'a, T: OptionalSend + 'a> = ts::watch::Ref<'a, T>;

    fn channel<T: OptionalSend + OptionalSync>(init: T) -> (WatchTx<T>, WatchRx<T>) {
        let (tx, rx) = ts::watch::channel(init);
        (WatchTx(tx), WatchRx(rx))
    }
}

impl<T: OptionalSend + OptionalSync> WatchSender<TokioWatch, T> for WatchTx<T> {
    fn send(&self, value: T) -> Result<(), watch::SendError<T>> {
        self.0.send(value).map_err(|e| watch::SendError(e.0))
    }

    fn send_if_modified<F>(&self, modify: F) -> bool
    where
        F: FnOnce(&mut T) -> bool,
    {
        self.0.send_if_modified(modify)
    }

    fn borrow_watched(&self) -> ts::watch::Ref<'_, T> {
        self.0.borrow()
    }

    fn subscribe(&self) -> WatchRx<T> {
        WatchRx(self.0.subscribe())
    }
}

impl<T: OptionalSend + OptionalSync> WatchReceiver<TokioWatch, T> for WatchRx<T> {
    async fn changed(&mut self) -> Result<(), watch::RecvError> {
        self.0.changed().await.map_err(|_| watch::RecvError(()))
    }

    fn borrow_watched(&self) -> ts::watch::Ref<'_, T> {
        self.0.borrow()
    }

    fn borrow_and_update(&mut self) -> ts::watch::Ref<'_, T> {
        self.0.borrow_and_update()
    }
}

/// tokio's oneshot channel.
pub struct TokioOneshot;

pub struct OneshotTx<T>(ts::oneshot::Sender<T>);

impl Oneshot for TokioOneshot {
    type Sender<T: OptionalSend> = OneshotTx<T>;
    type Receiver<T: OptionalSend> = ts::oneshot::Receiver<T>;
    type ReceiverError = ts::oneshot::error::RecvError;

    fn channel<T: OptionalSend>() -> (OneshotTx<T>, ts::oneshot::Receiver<T>) {
        let (tx, rx) = ts::oneshot::channel();
        (OneshotTx(tx), rx)
    }
}

impl<T: OptionalSend> OneshotSender<T> for OneshotTx<T> {
    fn send(self, t: T) -> Result<(), T> {
        self.0.send(t)
    }
}

/// tokio's async mutex.
pub struct TokioMutex<T>(ts::Mutex<T>);

impl<T: OptionalSend + 'static> Mutex<T> for TokioMutex<T> {
    type Guard<'a> = ts::MutexGuard<'a, T>;

    fn new(value: T) -> Self {
        TokioMutex(ts::Mutex::new(value))
    }

    fn lock(&self) -> impl Future<Output = ts::MutexGuard<'_, T>> {
        self.0.lock()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// openraft's own conformance suite for runtimes: spawn and join (a detached glommio task
    /// keeps running when its handle is dropped), sleeps and deadlines, timeouts, instants and
    /// their arithmetic, select, mpsc (backpressure, weak senders, close), watch, oneshot and
    /// the mutex, each on a fresh glommio executor.
    #[test]
    fn openraft_runtime_suite() {
        openraft_rt::testing::Suite::<GlommioRuntime>::test_all();
    }
}
