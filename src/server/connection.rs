//! One client connection. A reader task reads size-prefixed frames and starts a handler task
//! per request (at most [`MAX_IN_FLIGHT`] at once: requests are pipelined); a writer sends the
//! responses in request order. Bad input is a Kafka error where one can be encoded, otherwise
//! the connection closes with one log line; the broker keeps serving everyone else.

use crate::metrics::{self, Counter, Stage};
use crate::protocol::decode_request;
use crate::server::handlers::{error_response, handle, Dispatched};
use crate::server::shard::Shard;
use bytes::Bytes;
use futures_channel::oneshot;
use futures_lite::io::{AsyncReadExt, AsyncWriteExt};
use glommio::channels::local_channel;
use glommio::net::TcpStream;
use std::rc::Rc;

/// Requests of one connection handled at once (their responses still leave in order).
pub const MAX_IN_FLIGHT: usize = 16;

/// What a handler task yields: bytes to write, nothing (acks=0), or "close the connection".
type Outcome = Result<Option<Bytes>, ()>;

pub async fn serve(shard: Rc<Shard>, stream: TcpStream) {
    let peer = stream.peer_addr().map(|a| a.to_string()).unwrap_or_default();
    metrics::count(Counter::Connections, 1);
    let _ = stream.set_nodelay(true);
    let (mut reader, mut writer) = futures_lite::io::split(stream);
    let (tx, rx) = local_channel::new_bounded::<glommio::Task<Outcome>>(MAX_IN_FLIGHT);
    let max = shard.config.max_request_bytes;
    let read_peer = peer.clone();
    let reading = glommio::spawn_local(async move {
        // Each request waits for the one before it to have issued its side effects.
        let mut turn: Option<oneshot::Receiver<()>> = None;
        loop {
            let mut len = [0u8; 4];
            if reader.read_exact(&mut len).await.is_err() {
                return; // closed by the client
            }
            let n = i32::from_be_bytes(len);
            if n < 8 || n as usize > max {
                tracing::warn!(peer = read_peer, size = n, max, "request size out of bounds; closing the connection");
                let _ = tx.send(glommio::spawn_local(async { Err(()) })).await;
                return;
            }
            let started = std::time::Instant::now();
            let mut buf = vec![0u8; n as usize];
            if reader.read_exact(&mut buf).await.is_err() {
                return;
            }
            metrics::since(Stage::NetworkRead, started);
            metrics::count(Counter::BytesIn, n as u64 + 4);
            metrics::count(Counter::Requests, 1);
            let (shard, peer) = (shard.clone(), read_peer.clone());
            let (done_tx, done_rx) = oneshot::channel();
            let wait = turn.replace(done_rx);
            let task = glommio::spawn_local(async move {
                if let Some(w) = wait {
                    let _ = w.await; // a dropped sender (error, closed) also ends the wait
                }
                answer(&shard, &peer, Bytes::from(buf), Dispatched::new(done_tx)).await
            });
            if tx.send(task).await.is_err() {
                return; // the writer closed the connection
            }
        }
    });
    while let Some(task) = rx.recv().await {
        match task.await {
            Ok(Some(bytes)) => {
                let started = std::time::Instant::now();
                if writer.write_all(&bytes).await.is_err() {
                    break;
                }
                metrics::since(Stage::ResponseWrite, started);
                metrics::count(Counter::BytesOut, bytes.len() as u64);
            }
            Ok(None) => {}
            Err(()) => break,
        }
    }
    drop(rx);
    reading.cancel().await;
    let _ = writer.close().await;
}

async fn answer(shard: &Rc<Shard>, peer: &str, frame: Bytes, dispatched: Dispatched) -> Outcome {
    match decode_request(frame) {
        Ok((header, request)) => {
            let started = std::time::Instant::now();
            let stage = match header.api_key {
                crate::protocol::PRODUCE => Stage::RequestProduce,
                crate::protocol::FETCH => Stage::RequestFetch,
                _ => Stage::RequestOther,
            };
            let answer = handle(shard, peer, &header, request, dispatched).await;
            metrics::since(stage, started);
            answer.map_err(|e| {
                tracing::warn!(peer, api = header.api_key, version = header.api_version, error = %e, "cannot encode response; closing");
            })
        }
        Err(failure) => match failure.header.as_ref().and_then(|h| error_response(h, &failure.error)) {
            Some(answer) => Ok(Some(answer)),
            None => {
                tracing::warn!(peer, error = %failure.error, api = failure.header.as_ref().map(|h| h.api_key), "undecodable request; closing");
                Err(())
            }
        },
    }
}
