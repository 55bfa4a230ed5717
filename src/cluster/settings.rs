//! A clustered node's settings, with KRaft's names so a combined-mode `server.properties` works:
//!
//! ```text
//! process.roles=broker,controller
//! node.id=1
//! listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093
//! listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
//! controller.listener.names=CONTROLLER
//! controller.quorum.voters=1@127.0.0.1:9093,2@127.0.0.1:9193,3@127.0.0.1:9293
//! ```
//!
//! `process.roles` also takes `controller` alone (a node of the metadata quorum only: no
//! partitions, only controller listeners) and `broker` alone (partitions and clients; it
//! follows the quorum as an observer, finding the controllers by `controller.quorum.voters` or
//! `controller.quorum.bootstrap.servers`). Without `process.roles` the node is standalone,
//! exactly as before. Each value is checked as it is set ([`check`]); the whole is resolved at
//! startup with the listeners ([`resolve`]).

use anyhow::{bail, Context};
use std::collections::BTreeMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

/// `process.roles`: what a clustered node does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Roles {
    /// `broker,controller`: a voter of the quorum that also hosts partitions.
    Combined,
    /// `controller`: a voter only.
    Controller,
    /// `broker`: partitions and clients, following the quorum as an observer.
    Broker,
}

impl Roles {
    pub fn broker(self) -> bool {
        self != Roles::Controller
    }

    pub fn controller(self) -> bool {
        self != Roles::Broker
    }
}

/// The settings of a node in a cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterSettings {
    pub node_id: u64,
    pub roles: Roles,
    /// `controller.quorum.voters`: node id → `host:port` (on a broker-only node given only
    /// `controller.quorum.bootstrap.servers`, empty: the quorum's membership says).
    pub voters: BTreeMap<u64, String>,
    /// Where a broker-only node finds the controllers: the voters' addresses, or
    /// `controller.quorum.bootstrap.servers`.
    pub controller_servers: Vec<String>,
    /// The CONTROLLER listener (the first of `controller.listener.names`): its name and, on a
    /// controller, where it binds; it serves the quorum (and Kafka's clients of a controller).
    pub controller_listener: String,
    pub controller_addr: Option<SocketAddr>,
    /// A dynamic quorum (KIP-853: `controller.quorum.bootstrap.servers`, no
    /// `controller.quorum.voters`): voters carry directory ids and are added and removed while
    /// it serves. `voters` then holds this node alone when it starts the quorum, else nothing.
    pub dynamic: bool,
    /// `controller.quorum.election.timeout.ms`.
    pub election_timeout: Duration,
    /// `broker.heartbeat.interval.ms`: how often the broker tells the active controller it is
    /// alive.
    pub broker_heartbeat: Duration,
    /// `broker.session.timeout.ms`: a broker silent this long is fenced.
    pub broker_session_timeout: Duration,
    /// `default.replication.factor` (Kafka's default 1): for topics created without one.
    pub default_replication_factor: i16,
    /// `offsets.topic.replication.factor` (3): `__consumer_offsets` waits for that many brokers.
    pub offsets_replication_factor: i16,
    /// `transaction.state.log.replication.factor` (3): as above, `__transaction_state`.
    pub txn_replication_factor: i16,
}

/// `process.roles` (`None`: empty, a standalone node).
fn roles(value: &str) -> anyhow::Result<Option<Roles>> {
    let mut roles: Vec<&str> = value.split(',').map(str::trim).filter(|r| !r.is_empty()).collect();
    roles.sort_unstable();
    roles.dedup();
    match roles.as_slice() {
        [] => Ok(None),
        ["broker", "controller"] => Ok(Some(Roles::Combined)),
        ["broker"] => Ok(Some(Roles::Broker)),
        ["controller"] => Ok(Some(Roles::Controller)),
        _ => bail!("process.roles={value}: the roles are broker and controller"),
    }
}

/// `controller.quorum.voters`: `id@host:port,...`, ids unique and non-negative.
pub fn voters(value: &str) -> anyhow::Result<BTreeMap<u64, String>> {
    let mut out = BTreeMap::new();
    for part in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (id, addr) =
            part.split_once('@').with_context(|| format!("controller.quorum.voters: {part}: expected id@host:port"))?;
        let id: u64 = id.trim().parse().with_context(|| format!("controller.quorum.voters: {part}: bad node id"))?;
        let (host, port) = addr
            .rsplit_once(':')
            .with_context(|| format!("controller.quorum.voters: {part}: expected id@host:port"))?;
        let port: u16 = port
            .parse()
            .ok()
            .filter(|p| *p > 0)
            .with_context(|| format!("controller.quorum.voters: {part}: bad port"))?;
        if host.is_empty() {
            bail!("controller.quorum.voters: {part}: no host");
        }
        if out.insert(id, format!("{host}:{port}")).is_some() {
            bail!("controller.quorum.voters: node {id} appears twice");
        }
    }
    if out.is_empty() {
        bail!("controller.quorum.voters: no voter given");
    }
    Ok(out)
}

/// `controller.quorum.bootstrap.servers`: `host:port,...`.
fn bootstrap_servers(value: &str) -> anyhow::Result<Vec<(String, u16)>> {
    let key = "controller.quorum.bootstrap.servers";
    let servers: Vec<(String, u16)> = value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            let (host, port) = s.rsplit_once(':').with_context(|| format!("{key}: {s}: expected host:port"))?;
            let port = port.parse().ok().filter(|p| *p > 0).with_context(|| format!("{key}: {s}: bad port"))?;
            anyhow::ensure!(!host.is_empty(), "{key}: {s}: no host");
            Ok((host.trim_matches(|c| c == '[' || c == ']').to_string(), port))
        })
        .collect::<anyhow::Result<_>>()?;
    anyhow::ensure!(!servers.is_empty(), "{key}: no server given");
    Ok(servers)
}

/// A dynamic quorum's first controller (KIP-853): this node as the one voter when
/// `controller.quorum.bootstrap.servers` names only this node's controller listener (its port,
/// at an address of this host), as Kafka's shipped single-node files do. One voter cannot split
/// from another, so no format step is needed. `None`: the servers name other controllers, a
/// quorum this node joins once added (AddRaftVoter).
fn standalone_voter(node: u64, servers: &str, controller: SocketAddr) -> anyhow::Result<Option<BTreeMap<u64, String>>> {
    let listed = bootstrap_servers(servers)?;
    let own = |(host, port): &(String, u16)| {
        *port == controller.port()
            && (host.as_str(), *port).to_socket_addrs().is_ok_and(|mut addrs| {
                addrs.any(|a| {
                    a.ip() == controller.ip()
                        || (controller.ip().is_unspecified() && std::net::UdpSocket::bind((a.ip(), 0)).is_ok())
                })
            })
    };
    Ok(match listed.as_slice() {
        [one] if own(one) => Some(BTreeMap::from([(node, format!("{}:{}", one.0, one.1))])),
        _ => None,
    })
}

/// Check one value as it is set (the numbers' bounds are the settings registry's,
/// `server::registry`).
pub fn check(key: &str, value: &str) -> anyhow::Result<()> {
    match key {
        "process.roles" => roles(value).map(|_| ()),
        "controller.quorum.voters" => voters(value).map(|_| ()),
        "controller.listener.names" => {
            if value.split(',').all(|n| n.trim().is_empty()) {
                bail!("controller.listener.names: no listener name given");
            }
            Ok(())
        }
        "controller.quorum.bootstrap.servers" => bootstrap_servers(value).map(|_| ()),
        _ => bail!("{key}: not a cluster setting"),
    }
}

/// The cluster settings from every setting given (`None`: standalone). `listeners` are the
/// resolved listeners as (name, bind address). A controller's controller listener must be one
/// of them (a controller-only node has no other); a broker-only node's must not (it reaches the
/// controllers' listeners), as Kafka requires.
pub fn resolve(
    get: impl Fn(&str) -> Option<String>,
    node_id: i32,
    listeners: &[(String, SocketAddr)],
) -> anyhow::Result<Option<ClusterSettings>> {
    let roles = match get("process.roles") {
        Some(r) => roles(&r)?,
        None => None,
    };
    let Some(roles) = roles else {
        for key in ["controller.quorum.voters", "controller.listener.names"] {
            if get(key).is_some() {
                bail!("{key} is set but process.roles is not: set process.roles=broker,controller for a cluster");
            }
        }
        return Ok(None);
    };
    if node_id < 0 {
        bail!("node.id={node_id}: a clustered node needs a node id of 0 or more");
    }
    let node = node_id as u64;
    let names =
        get("controller.listener.names").context("process.roles is set: controller.listener.names is required")?;
    let controller_names: Vec<String> =
        names.split(',').map(|n| n.trim().to_ascii_uppercase()).filter(|n| !n.is_empty()).collect();
    let name = controller_names.first().cloned().expect("checked");
    let bound = listeners.iter().find(|(n, _)| *n == name).map(|(_, a)| *a);
    let controller_addr = match roles {
        Roles::Broker => {
            if let Some((n, _)) = listeners.iter().find(|(n, _)| controller_names.contains(n)) {
                bail!(
                    "listeners: {n} is a controller listener (controller.listener.names), which a broker-only node \
                     (process.roles=broker) does not serve: it reaches the controllers' listeners"
                );
            }
            if listeners.is_empty() {
                bail!("listeners: a broker needs a listener for clients");
            }
            None
        }
        Roles::Controller => {
            let addr =
                bound.with_context(|| format!("controller.listener.names: {name} is not one of the listeners"))?;
            if let Some((n, _)) = listeners.iter().find(|(n, _)| !controller_names.contains(n)) {
                bail!(
                    "listeners: {n} is not a controller listener; a controller-only node (process.roles=controller) \
                     serves only controller.listener.names ({names})"
                );
            }
            Some(addr)
        }
        Roles::Combined => {
            let addr =
                bound.with_context(|| format!("controller.listener.names: {name} is not one of the listeners"))?;
            if listeners.iter().all(|(n, _)| controller_names.contains(n)) {
                bail!("listeners: a node with the broker role needs a listener for clients besides {name}");
            }
            Some(addr)
        }
    };
    let given_voters = get("controller.quorum.voters").map(|v| voters(&v)).transpose()?;
    let servers = get("controller.quorum.bootstrap.servers");
    let voters = match (&given_voters, &servers, controller_addr) {
        (Some(v), _, _) => v.clone(),
        (None, Some(servers), Some(addr)) => standalone_voter(node, servers, addr)?.unwrap_or_default(),
        (None, Some(_), None) => BTreeMap::new(),
        (None, None, _) => {
            bail!("process.roles is set: controller.quorum.voters (or controller.quorum.bootstrap.servers) is required")
        }
    };
    let dynamic = given_voters.is_none();
    let controller_servers = if dynamic {
        bootstrap_servers(servers.as_deref().expect("given"))?
            .into_iter()
            .map(|(host, port)| if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") })
            .collect()
    } else {
        voters.values().cloned().collect()
    };
    if roles.controller() && !dynamic && !voters.contains_key(&node) {
        bail!(
            "node.id={node} is not among controller.quorum.voters ({})",
            voters.keys().map(u64::to_string).collect::<Vec<_>>().join(",")
        );
    }
    if roles == Roles::Broker && voters.contains_key(&node) {
        bail!(
            "node.id={node} is among controller.quorum.voters, but process.roles=broker: a broker-only node needs an \
             id of its own (Kafka requires the same)"
        );
    }
    let ms = |key: &str| -> anyhow::Result<u64> {
        get(key).with_context(|| format!("{key}: no value"))?.trim().parse().with_context(|| key.to_string())
    };
    let election_ms = ms("controller.quorum.election.timeout.ms")?;
    let heartbeat_ms = ms("broker.heartbeat.interval.ms")?;
    let session_ms = ms("broker.session.timeout.ms")?;
    if session_ms <= heartbeat_ms {
        bail!("broker.session.timeout.ms={session_ms} must be above broker.heartbeat.interval.ms={heartbeat_ms}");
    }
    let factor = |key: &str| -> anyhow::Result<i16> {
        let v = get(key).with_context(|| format!("{key}: no value"))?;
        v.trim().parse().ok().filter(|f| *f >= 1).with_context(|| format!("{key}={v}: must be 1 or more"))
    };
    Ok(Some(ClusterSettings {
        default_replication_factor: factor("default.replication.factor")?,
        offsets_replication_factor: factor("offsets.topic.replication.factor")?,
        txn_replication_factor: factor("transaction.state.log.replication.factor")?,
        node_id: node,
        roles,
        voters,
        controller_servers,
        controller_listener: name,
        controller_addr,
        dynamic,
        election_timeout: Duration::from_millis(election_ms),
        broker_heartbeat: Duration::from_millis(heartbeat_ms),
        broker_session_timeout: Duration::from_millis(session_ms),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listeners() -> Vec<(String, SocketAddr)> {
        vec![
            ("PLAINTEXT".into(), "127.0.0.1:9092".parse().unwrap()),
            ("CONTROLLER".into(), "127.0.0.1:9093".parse().unwrap()),
        ]
    }

    /// The settings given, over the defaults the broker passes in (the settings registry's).
    fn settings(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let defaults = [
            ("controller.quorum.election.timeout.ms", "1000"),
            ("broker.heartbeat.interval.ms", "2000"),
            ("broker.session.timeout.ms", "9000"),
            ("default.replication.factor", "1"),
            ("offsets.topic.replication.factor", "3"),
            ("transaction.state.log.replication.factor", "3"),
        ];
        let m: BTreeMap<String, String> =
            defaults.iter().chain(pairs).map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k| m.get(k).cloned()
    }

    /// A combined-mode server.properties resolves; without process.roles the node is standalone;
    /// each missing or contradictory setting is an error naming it.
    #[test]
    fn kraft_combined_mode_settings() {
        let ok = settings(&[
            ("process.roles", "broker,controller"),
            ("controller.quorum.voters", "1@127.0.0.1:9093,2@h2:9093,3@h3:9093"),
            ("controller.listener.names", "CONTROLLER"),
        ]);
        let c = resolve(&ok, 1, &listeners()).unwrap().expect("clustered");
        assert_eq!(c.voters.len(), 3);
        assert_eq!(c.voters[&2], "h2:9093");
        assert_eq!((c.controller_listener.as_str(), c.controller_addr.unwrap().port()), ("CONTROLLER", 9093));
        assert_eq!(c.election_timeout, Duration::from_millis(1000));
        assert_eq!(resolve(settings(&[]), 0, &listeners()).unwrap(), None);

        let err =
            |pairs: &[(&str, &str)], node: i32| resolve(settings(pairs), node, &listeners()).unwrap_err().to_string();
        assert!(err(&[("process.roles", "broker,controller")], 1).contains("controller.listener.names"));
        let no_voters = [("process.roles", "broker,controller"), ("controller.listener.names", "CONTROLLER")];
        assert!(err(&no_voters, 1).contains("controller.quorum.voters"));
        assert!(err(
            &[
                ("process.roles", "controller,broker"),
                ("controller.quorum.voters", "1@a:1"),
                ("controller.listener.names", "CONTROLLER")
            ],
            4
        )
        .contains("not among"));
        assert!(err(&[("controller.quorum.voters", "1@a:1")], 1).contains("process.roles"));
        assert!(err(
            &[
                ("process.roles", "broker,controller"),
                ("controller.quorum.voters", "1@a:1"),
                ("controller.listener.names", "CTL")
            ],
            1
        )
        .contains("not one of the listeners"));
        assert!(check("process.roles", "broker").is_ok());
        assert!(check("process.roles", "broker,observer").unwrap_err().to_string().contains("broker and controller"));
        assert!(check("controller.quorum.voters", "1@a:1,1@b:2").is_err());
        assert!(check("controller.quorum.voters", "x@a:1").is_err());
        assert!(check("controller.quorum.voters", "1@a").is_err());
        assert!(check("controller.quorum.bootstrap.servers", "a").is_err());
        assert!(check("controller.quorum.bootstrap.servers", "a:1,b:2").is_ok());
        // KIP-853's bootstrap servers naming this node's controller listener alone: one voter.
        let alone = |servers: &str| {
            let given = settings(&[
                ("process.roles", "broker,controller"),
                ("controller.quorum.bootstrap.servers", servers),
                ("controller.listener.names", "CONTROLLER"),
            ]);
            resolve(given, 1, &listeners())
        };
        let c = alone("localhost:9093").unwrap().expect("clustered");
        assert_eq!(c.voters, BTreeMap::from([(1, "localhost:9093".to_string())]));
        assert!(c.dynamic);
        // Other controllers: a quorum to join once added (no voter yet, the servers to ask).
        let join = alone("127.0.0.1:9094").unwrap().expect("clustered");
        assert!(join.voters.is_empty() && join.dynamic);
        assert_eq!(join.controller_servers, ["127.0.0.1:9094"]);
        assert!(alone("127.0.0.1:9093,127.0.0.2:9093").unwrap().expect("clustered").voters.is_empty());
    }

    /// Kafka's isolated roles, as its shipped controller.properties and broker.properties set
    /// them: a controller-only node serves only controller listeners and is a voter; a
    /// broker-only node names no controller listener among its own, finds the controllers by
    /// the bootstrap servers (or the voters) and is not a voter itself.
    #[test]
    fn isolated_roles() {
        let only_controller = vec![("CONTROLLER".to_string(), "127.0.0.1:9093".parse().unwrap())];
        let controller = settings(&[
            ("process.roles", "controller"),
            ("controller.quorum.bootstrap.servers", "localhost:9093"),
            ("controller.listener.names", "CONTROLLER"),
        ]);
        let c = resolve(&controller, 1, &only_controller).unwrap().expect("clustered");
        assert_eq!(c.roles, Roles::Controller);
        assert!(!c.roles.broker() && c.roles.controller());
        assert_eq!(c.voters, BTreeMap::from([(1, "localhost:9093".to_string())]));
        assert_eq!(c.controller_addr.map(|a| a.port()), Some(9093));
        // A controller-only node with a client listener: refused, as Kafka refuses it.
        assert!(resolve(&controller, 1, &listeners()).unwrap_err().to_string().contains("not a controller listener"));

        let only_client = vec![("PLAINTEXT".to_string(), "127.0.0.1:9092".parse().unwrap())];
        let broker = settings(&[
            ("process.roles", "broker"),
            ("controller.quorum.bootstrap.servers", "localhost:9093, [::1]:9193"),
            ("controller.listener.names", "CONTROLLER"),
        ]);
        let b = resolve(&broker, 2, &only_client).unwrap().expect("clustered");
        assert_eq!((b.roles, b.controller_addr), (Roles::Broker, None));
        assert!(b.voters.is_empty(), "the quorum's membership names the voters");
        assert_eq!(b.controller_servers, ["localhost:9093", "[::1]:9193"]);
        // Serving the controller listener itself: refused.
        assert!(resolve(&broker, 2, &listeners()).unwrap_err().to_string().contains("controller listener"));
        // With static voters: their addresses; a broker-only node's id among them is refused.
        let static_voters = settings(&[
            ("process.roles", "broker"),
            ("controller.quorum.voters", "1@h1:9093,3@h3:9093"),
            ("controller.listener.names", "CONTROLLER"),
        ]);
        let b = resolve(&static_voters, 2, &only_client).unwrap().expect("clustered");
        assert_eq!(b.controller_servers, ["h1:9093", "h3:9093"]);
        assert!(resolve(&static_voters, 3, &only_client).unwrap_err().to_string().contains("id of its own"));
    }
}
