//! `--metrics-listen`: a minimal HTTP/1.1 endpoint on shard 0. `GET /metrics` gathers every
//! shard's histograms and counters over the mesh and answers Prometheus text; anything else is
//! a 404. One request per connection, a bounded request head, and nothing here touches data.

use crate::server::shard::{Shard, ShardOp, ShardReply};
use futures_lite::io::{AsyncReadExt, AsyncWriteExt};
use glommio::net::{TcpListener, TcpStream};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The largest request head read.
const MAX_HEAD: usize = 8192;

pub async fn serve(shard: Rc<Shard>, listener: TcpListener, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::Relaxed) {
        let accepted = futures_lite::future::or(async { Some(listener.accept().await) }, async {
            glommio::timer::sleep(Duration::from_millis(100)).await;
            None
        })
        .await;
        match accepted {
            Some(Ok(stream)) => {
                glommio::spawn_local(answer(shard.clone(), stream)).detach();
            }
            Some(Err(e)) => {
                tracing::warn!(error = %e, "metrics accept failed");
                glommio::timer::sleep(Duration::from_millis(100)).await;
            }
            None => {}
        }
    }
}

async fn answer(shard: Rc<Shard>, mut stream: TcpStream) {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_HEAD {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let line = String::from_utf8_lossy(&head);
    let (status, body) = if line.starts_with("GET /metrics ") || line.starts_with("GET /metrics?") {
        let mut all = Vec::new();
        for target in 0..shard.shards {
            if let ShardReply::Metrics(m) = shard.call(target, ShardOp::Metrics).await {
                all.push((target, *m));
            }
        }
        ("200 OK", crate::metrics::prometheus(&all))
    } else {
        ("404 Not Found", "only /metrics is served here\n".to_string())
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.close().await;
}
