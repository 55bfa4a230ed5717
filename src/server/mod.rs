//! The broker: one shard (glommio executor) per core, each accepting connections on the same
//! port (SO_REUSEPORT) and owning the partitions that hash to it; work for a partition owned
//! elsewhere is a typed call over the channel mesh ([`router`]). SIGTERM/SIGINT stop accepting,
//! let requests finish, close every partition cleanly (close entries, clean markers) and exit.
//! A shard that stops on its own after startup (a panic, an error) stops the broker the same
//! clean way, with a log line naming it, and the process exits with an error: never a
//! half-alive broker.
//!
//! The modules, bottom up (imports point down this list, never up):
//! - [`router`], [`limits`], [`errors`]: typed calls between shards, memory and connection
//!   limits, the code of a call without a reply.
//! - [`broker_config`], [`listeners`], [`configs`]: the settings as given (the listeners among
//!   them), and the dynamic layers over them;
//!   [`data_dir`]: the data directory's lock and identity (cluster id, node id).
//! - [`producer_ids`], [`peers`]: shard 0's producer ids; requests to other brokers.
//! - [`txn_writes`]: the order of a producer's transactional first writes to a partition.
//! - [`shard`]: one shard's state, private, behind methods, and the services below `server`
//!   ([`crate::replica`], [`crate::coordinator`]) wired to it.
//! - [`transactions`]: KIP-890's verification and the calls that carry transaction markers.
//! - [`control`]: shard 0's control plane (topics, dynamic settings, producer ids).
//! - [`api`]: one module per API family and the dispatch table.
//! - [`tls`], [`authenticate`], [`connection`], [`metrics_http`]: TLS for a listener, the SASL
//!   exchange, a client connection; the metrics endpoint.

pub mod api;
pub mod authenticate;
pub mod broker_config;
pub mod configs;
pub mod connection;
pub mod control;
pub mod data_dir;
pub mod errors;
pub mod limits;
pub mod links;
pub mod listeners;
pub mod metrics_http;
pub mod oauth;
pub mod peers;
pub mod producer_ids;
pub mod publish;
pub mod registry;
pub mod replication;
pub mod router;
pub mod session;
pub mod shard;
pub mod tls;
pub mod transactions;
pub mod txn_writes;
pub mod view;

/// The broker's own topics (`__consumer_offsets`, `__transaction_state`): created by the
/// broker, never deleted, grown, reconfigured, trimmed or written by clients.
pub fn is_internal_topic(name: &str) -> bool {
    name == crate::coordinator::group::OFFSETS_TOPIC || name == crate::coordinator::txn::TXN_TOPIC
}

pub use broker_config::BrokerConfig;

use anyhow::{bail, Context};
use glommio::channels::channel_mesh::MeshBuilder;
use glommio::{LocalExecutorBuilder, Placement};
use listeners::Listener;
use router::Envelope;
use shard::Shard;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

/// How a shard's thread ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Exit {
    Clean,
    Failed,
    Panicked,
}

/// Reports its shard's end to the supervisor when its thread ends. It lives in a thread-local,
/// whose destructor runs at thread exit after a panic too: glommio propagates a task's panic out
/// of the executor but leaks the tasks, the shard's main one included, so nothing inside them is
/// ever dropped. A shard that returns says how (`exit`); one that ends without saying panicked.
struct ExitReport {
    id: usize,
    exit: Option<Exit>,
    tx: mpsc::Sender<(usize, Exit)>,
}

impl Drop for ExitReport {
    fn drop(&mut self) {
        let _ = self.tx.send((self.id, self.exit.unwrap_or(Exit::Panicked)));
    }
}

thread_local! {
    static EXIT_REPORT: std::cell::RefCell<Option<ExitReport>> = const { std::cell::RefCell::new(None) };
}

/// Fail fast, with a clear message, when another process serves the port. (Not a test bind:
/// after a kill -9, connections of the old process linger and a plain bind fails, while the
/// shards' SO_REUSEPORT listeners bind fine.)
fn check_port_free(listen: SocketAddr) -> anyhow::Result<()> {
    let probe = match listen {
        SocketAddr::V4(a) if a.ip().is_unspecified() => SocketAddr::from(([127, 0, 0, 1], a.port())),
        SocketAddr::V6(a) if a.ip().is_unspecified() => SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, a.port())),
        a => a,
    };
    // A process killed with -9 can leave its listener accepting for a moment (its io_uring
    // ring, holding a pending accept, is torn down asynchronously): a server that is really
    // there stays, a dying one goes. Wait up to 3 s before calling the port taken.
    for _ in 0..30 {
        match std::net::TcpStream::connect_timeout(&probe, Duration::from_millis(200)) {
            // With nothing listening, a connect to a free port in the ephemeral range can be
            // given that very port as its source (TCP simultaneous open): not a server.
            Ok(s) if s.local_addr().ok() != s.peer_addr().ok() => std::thread::sleep(Duration::from_millis(100)),
            _ => return Ok(()),
        }
    }
    bail!("cannot listen on {listen}: another process accepts connections there")
}

/// Run the broker until `stop` is set (by SIGTERM/SIGINT in the binary), or until a shard
/// stops on its own: then every other shard stops cleanly and the error names the shard.
pub fn run(mut config: BrokerConfig, stop: Arc<AtomicBool>) -> anyhow::Result<()> {
    std::fs::create_dir_all(&config.data_dir)
        .with_context(|| format!("creating data dir {}", config.data_dir.display()))?;
    let _lock = data_dir::lock(&config.data_dir)?;
    // Dynamic broker settings, over the static ones: a bad file stops startup, naming it.
    let dynamic = configs::DynamicConfigs::load(&config.data_dir)?;
    // The listeners, with their TLS stores as last changed at runtime.
    config.resolve_listeners(&dynamic.node)?;
    // OAUTHBEARER's validator, its keys fetched now, when a listener offers it.
    let mut all = config.listeners.iter().chain(config.controller_listener.iter());
    let offered = all.find(|l| l.sasl_mechanisms.iter().any(|m| m == "OAUTHBEARER")).map(|l| l.name.clone());
    config.oauth = oauth::OAuth::from_settings(&config.settings, offered.as_deref())?;
    for l in &config.listeners {
        check_port_free(l.addr)?;
    }
    if let Some(addr) = config.cluster.as_ref().and_then(|c| c.controller_addr) {
        check_port_free(addr)?;
    }
    // The directory's identity (its cluster and node), and topic ids for topics that had none,
    // before any shard reads it.
    let identity = data_dir::Identity::load_or_create(&config.data_dir, config.node_id)?;
    data_dir::upgrade_topics(&config.data_dir)?;
    let effective = configs::Effective::compute(&config, &dynamic)
        .with_context(|| format!("applying {}", config.data_dir.join(configs::BROKER_CONFIGS_FILE).display()))?;
    let config = Arc::new(config);
    let mesh = MeshBuilder::<Envelope<Shard>, _>::full(config.shards, 1024);
    let connections = limits::ConnectionTable::new(effective.max_connections, effective.max_connections_per_ip);
    connections.set_quotas(crate::security::quota::Quotas::load(&config.data_dir)?);
    let (exits, exited) = mpsc::channel();
    let mut handles = Vec::new();
    for id in 0..config.shards {
        let (config, mesh, stop, connections) = (config.clone(), mesh.clone(), stop.clone(), connections.clone());
        let (dynamic, tx, identity) = (dynamic.clone(), exits.clone(), identity.clone());
        let h = LocalExecutorBuilder::new(Placement::Fixed(id))
            .name(&format!("shard-{id}"))
            .io_memory(config.shard_io_memory)
            .spawn(move || async move {
                EXIT_REPORT.with(|r| *r.borrow_mut() = Some(ExitReport { id, exit: None, tx }));
                let r = run_shard(id, config, dynamic, identity, mesh, stop, connections).await;
                let exit = if r.is_ok() { Exit::Clean } else { Exit::Failed };
                EXIT_REPORT.with(|report| report.borrow_mut().as_mut().map(|report| report.exit = Some(exit)));
                r
            })
            .map_err(|e| anyhow::anyhow!("starting shard {id}: {e}"))?;
        handles.push(h);
    }
    drop(exits);
    let listening: Vec<String> = config.listeners.iter().map(Listener::endpoint).collect();
    tracing::info!(listeners = listening.join(","), shards = config.shards, data_dir = %config.data_dir.display(), "tidemark serving");
    let unexpected = supervise(config.shards, &exited, &stop);
    // Join every shard, then report the first error.
    let mut first_err = None;
    for (id, h) in handles.into_iter().enumerate() {
        let r = h
            .join()
            .map_err(|e| anyhow::anyhow!("shard {id} failed: {e:?}"))
            .and_then(|r| r.with_context(|| format!("shard {id}")));
        if let Err(e) = r {
            first_err.get_or_insert(e);
        }
    }
    if let Some((id, exit)) = unexpected {
        let why = if exit == Exit::Panicked { "panicked" } else { "failed" };
        let e = anyhow::anyhow!("shard {id} {why} after startup; the broker stopped (the log above says why)");
        return Err(first_err.map_or(e, |first| first.context(format!("shard {id} {why} after startup"))));
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    tracing::info!("tidemark stopped cleanly");
    Ok(())
}

/// Wait for every shard's end. The first that ends while `stop` is not set (a panic, an error
/// after startup) sets it, so the others close their partitions and stop; it is returned.
fn supervise(shards: usize, exited: &mpsc::Receiver<(usize, Exit)>, stop: &AtomicBool) -> Option<(usize, Exit)> {
    let mut unexpected = None;
    for _ in 0..shards {
        let Ok((id, exit)) = exited.recv() else { break };
        if !stop.swap(true, Ordering::SeqCst) && unexpected.is_none() {
            tracing::error!(shard = id, ?exit, "a shard stopped on its own; stopping the broker cleanly");
            unexpected = Some((id, exit));
        }
    }
    unexpected
}

async fn run_shard(
    id: usize,
    config: Arc<BrokerConfig>,
    dynamic: configs::DynamicConfigs,
    identity: data_dir::Identity,
    mesh: MeshBuilder<Envelope<Shard>, glommio::channels::channel_mesh::Full>,
    stop: Arc<AtomicBool>,
    connections: Arc<limits::ConnectionTable>,
) -> anyhow::Result<()> {
    let shard = match Shard::open(id, config.shards, config.clone(), dynamic, connections.clone(), identity).await {
        Ok(s) => s,
        Err(e) => {
            // The other shards wait for this one at the mesh: release them.
            stop.store(true, Ordering::Relaxed);
            return Err(e);
        }
    };
    // Joining the mesh is the startup barrier: every shard has opened its partitions (unless
    // one failed and set `stop`).
    let joined = futures_lite::future::or(async { Some(mesh.join().await) }, async {
        while !stop.load(Ordering::Relaxed) {
            glommio::timer::sleep(Duration::from_millis(50)).await;
        }
        None
    })
    .await;
    let Some(joined) = joined else {
        shard.manager().close_all().await?;
        bail!("shard {id}: startup stopped (another shard failed or a signal arrived)");
    };
    let (senders, receivers) = joined.map_err(|_| anyhow::anyhow!("joining the shard mesh"))?;
    shard.attach(senders, receivers);
    shard.coordinator().spawn_ticker();
    shard.txn().spawn_ticker(&shard);
    if config.cluster.as_ref().is_some_and(|c| c.roles.broker()) {
        crate::replica::spawn_isr_keeper(&shard);
    }
    for id in shard.txn().prepared() {
        // Prepared before a stop: its markers were not all written. (Standalone only: a
        // clustered node loads and resumes them when it leads their partition.)
        shard.txn().spawn_markers(&shard, id);
    }
    if let (0, Some(addr)) = (id, config.metrics_listen) {
        let listener = glommio::net::TcpListener::bind(addr)
            .map_err(std::io::Error::from)
            .with_context(|| format!("--metrics-listen {addr}"))?;
        glommio::spawn_local(metrics_http::serve(shard.clone(), listener, stop.clone())).detach();
        tracing::info!(%addr, "metrics at http://{addr}/metrics");
    }
    if let (0, Some(oauth)) = (id, config.oauth.clone()) {
        glommio::spawn_local(oauth.keep_fresh(stop.clone())).detach();
    }
    if id == 0 {
        match control::quorum::start(&shard, stop.clone()).await {
            Ok(controller) => *shard.control().expect("shard 0").quorum.borrow_mut() = controller,
            Err(e) => {
                stop.store(true, Ordering::SeqCst);
                shard.manager().close_all().await?;
                return Err(e);
            }
        }
    }
    if id == 0 && config.cluster.as_ref().is_none_or(|c| c.roles.broker()) {
        // Committed offsets need their topic before the first group request (FindCoordinator
        // answers COORDINATOR_NOT_AVAILABLE until it exists).
        // A clustered node tries until they exist (the quorum may have no leader yet, or too
        // few brokers for their replication factor).
        let (s, stop) = (shard.clone(), stop.clone());
        glommio::spawn_local(async move {
            loop {
                let offsets = control::ensure_offsets_topic(&s).await;
                let txn = control::ensure_txn_topic(&s).await;
                let ready = offsets && txn;
                if ready || s.config().cluster.is_none() || stop.load(Ordering::Relaxed) {
                    break;
                }
                glommio::timer::sleep(Duration::from_secs(1)).await;
            }
        })
        .detach();
    }
    let mut accepting = Vec::new();
    for l in &config.listeners {
        let bound = glommio::net::TcpListener::bind(l.addr)
            .map_err(std::io::Error::from)
            .with_context(|| format!("listener {}", l.endpoint()))?;
        let (shard, stop, l) = (shard.clone(), stop.clone(), Rc::new(l.clone()));
        accepting.push(glommio::spawn_local(async move { accept_until_stopped(&shard, bound, l, &stop).await }));
    }
    if accepting.is_empty() {
        // A controller-only node: no client listener; its quorum serves until the stop.
        while !stop.load(Ordering::Relaxed) {
            glommio::timer::sleep(Duration::from_millis(50)).await;
        }
    }
    for a in accepting {
        a.await;
    }
    // Let in-flight requests finish, then close every partition cleanly.
    glommio::timer::sleep(Duration::from_millis(200)).await;
    let member = shard.control().and_then(|c| c.quorum.borrow_mut().take());
    if let Some(member) = member {
        member.shutdown().await?;
    }
    shard.manager().close_all().await?;
    tracing::info!(shard = id, "latency: {}", crate::metrics::summary(&crate::metrics::snapshot()));
    Ok(())
}

/// Accept connections (within the connection limits) until `stop` is set.
async fn accept_until_stopped(
    shard: &Rc<Shard>,
    listener: glommio::net::TcpListener,
    l: Rc<Listener>,
    stop: &AtomicBool,
) {
    let stopped = || async {
        while !stop.load(Ordering::Relaxed) {
            glommio::timer::sleep(Duration::from_millis(50)).await;
        }
        None
    };
    loop {
        let accepted = futures_lite::future::or(async { Some(listener.accept().await) }, stopped()).await;
        match accepted {
            None => break,
            Some(Ok(stream)) => {
                let peer = stream.peer_addr().ok();
                let ip = peer.map_or(std::net::IpAddr::from([0, 0, 0, 0]), |a| a.ip());
                match shard.connections().admit(ip) {
                    Ok(admitted) => {
                        glommio::spawn_local(connection::serve(shard.clone(), stream, l.clone(), admitted)).detach();
                    }
                    Err(why) => {
                        crate::metrics::count(crate::metrics::Counter::ConnectionsRefused, 1);
                        if let Some(skipped) = shard.refusals_log().ready() {
                            let peer = peer.map(|a| a.to_string()).unwrap_or_default();
                            tracing::warn!(peer, reason = %why, refused_since_last_line = skipped, "connection refused; closing it");
                        }
                        drop(stream);
                    }
                }
            }
            Some(Err(e)) => {
                // Out of descriptors and the like: back off instead of spinning.
                tracing::warn!(error = %e, "accept failed");
                glommio::timer::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}
