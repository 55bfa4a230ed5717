//! `--metrics-listen`: a minimal HTTP/1.1 endpoint on shard 0. `GET /metrics` gathers every
//! shard's histograms and counters over the mesh and answers Prometheus text. With
//! `--fault-injection` (tests only) it also takes disk faults: `POST /faults?op=..&fault=..`
//! installs a rule (see [`crate::io::faults::parse_rule`]), `GET /faults` lists them,
//! `DELETE /faults` removes them all, and `POST /faults/panic?shard=N` makes shard N panic (to
//! test that a shard dying after startup stops the broker cleanly). Anything else is a 404. One request per connection, a
//! bounded request head, and nothing here touches data.

use crate::io::faults;
use crate::server::limits::METRICS_MAX_HEAD;
use crate::server::router::ShardCall;
use crate::server::shard::{Metrics, Shard};
use futures_lite::io::{AsyncReadExt, AsyncWriteExt};
use glommio::net::{TcpListener, TcpStream};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

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
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < METRICS_MAX_HEAD {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let text = String::from_utf8_lossy(&head);
    let mut words = text.split_whitespace();
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let (status, body) = match (method, path) {
        ("GET", "/metrics") => {
            let mut all = Vec::new();
            for (target, r) in shard.call_each(Metrics).await.into_iter().enumerate() {
                match r {
                    Ok(m) => all.push((target, *m)),
                    Err(e) => tracing::warn!(shard = target, error = %e, "no metrics from a shard"),
                }
            }
            let mut body = crate::metrics::prometheus(&all);
            body.push_str(&crate::server::control::quorum::prometheus(&shard));
            ("200 OK", body)
        }
        (_, "/faults") if shard.config().fault_injection => faults(method, query),
        ("POST", "/faults/panic") if shard.config().fault_injection => panic_shard(&shard, query),
        _ => ("404 Not Found", "only /metrics is served here\n".to_string()),
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.close().await;
}

/// A shard that panics (`--fault-injection` only): as a bug in any task of a shard would.
#[derive(Debug)]
struct Panic;

impl ShardCall<Shard> for Panic {
    type Reply = ();
    const NAME: &'static str = "panic";

    async fn run(self, shard: Rc<Shard>) {
        panic!("fault injection: shard {} told to panic", shard.id());
    }
}

/// `POST /faults/panic?shard=N`: shard N panics (its reply never comes).
fn panic_shard(shard: &Rc<Shard>, query: &str) -> (&'static str, String) {
    let target = query.strip_prefix("shard=").and_then(|n| n.parse::<usize>().ok());
    match target {
        Some(n) if n < shard.shards() => {
            tracing::warn!(shard = n, "fault injection: shard told to panic");
            let shard = shard.clone();
            glommio::spawn_local(async move {
                let _ = shard.call(n, Panic).await;
            })
            .detach();
            ("200 OK", format!("shard {n} told to panic\n"))
        }
        _ => ("400 Bad Request", format!("shard=N with N below {}\n", shard.shards())),
    }
}

/// The `/faults` endpoint (`--fault-injection` only).
fn faults(method: &str, query: &str) -> (&'static str, String) {
    let list = || faults::installed().iter().map(|r| format!("{r:?}\n")).collect::<String>();
    match method {
        "GET" => ("200 OK", list()),
        "DELETE" => {
            faults::clear();
            tracing::warn!("fault injection: every rule removed");
            ("200 OK", String::new())
        }
        "POST" => {
            let pairs = query.split('&').filter(|p| !p.is_empty()).map(|p| p.split_once('=').unwrap_or((p, "")));
            match faults::parse_rule(pairs) {
                Ok(rule) => {
                    tracing::warn!(?rule, "fault injection: rule installed");
                    faults::install(rule);
                    ("200 OK", list())
                }
                Err(e) => ("400 Bad Request", format!("{e}\n")),
            }
        }
        _ => ("405 Method Not Allowed", "GET, POST or DELETE\n".to_string()),
    }
}
