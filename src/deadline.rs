//! Waiting with a deadline, the one way the broker bounds a wait: connections' reads and
//! writes, calls between shards, the metadata quorum's requests, our client's calls.

use std::future::Future;
use std::time::Duration;

/// `fut`, or `None` once `limit` passes. The timer is armed only when `fut` is not ready at
/// once (a read of a request already in the socket, a write the socket takes whole, a send
/// into a channel with room): no timer for what does not wait.
pub async fn within<T>(limit: Duration, fut: impl Future<Output = T>) -> Option<T> {
    let mut fut = std::pin::pin!(fut);
    if let Some(v) = futures_lite::future::poll_once(fut.as_mut()).await {
        return Some(v);
    }
    futures_lite::future::or(async { Some(fut.await) }, async {
        glommio::timer::sleep(limit).await;
        None
    })
    .await
}
