//! Listeners, configured as Kafka's are: `listeners` (where the broker accepts connections,
//! each under a name), `listener.security.protocol.map` (each name's security protocol) and
//! `advertised.listeners` (the address each listener's clients are told to connect to, in
//! Metadata and FindCoordinator). Without `listeners`, `--listen` is one PLAINTEXT listener.
//!
//! ```text
//! listeners=PLAINTEXT://127.0.0.1:9092,CLIENT://0.0.0.0:9094
//! listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CLIENT:SASL_SSL
//! advertised.listeners=CLIENT://broker1.example.com:9094
//! ```
//!
//! Pure: parsing and validation only; the shards bind and accept ([`crate::server`]).

use anyhow::{bail, Context};
use std::collections::BTreeMap;
use std::net::{SocketAddr, ToSocketAddrs};

/// Kafka's security protocols.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    pub const ALL: [SecurityProtocol; 4] = [
        SecurityProtocol::Plaintext,
        SecurityProtocol::Ssl,
        SecurityProtocol::SaslPlaintext,
        SecurityProtocol::SaslSsl,
    ];

    pub fn parse(s: &str) -> Option<SecurityProtocol> {
        SecurityProtocol::ALL.into_iter().find(|p| p.name().eq_ignore_ascii_case(s.trim()))
    }

    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }

    /// Whether connections are encrypted (TLS).
    pub fn tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    /// Whether clients authenticate with SASL.
    pub fn sasl(self) -> bool {
        matches!(self, SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl)
    }
}

/// One listener.
#[derive(Debug, Clone, PartialEq)]
pub struct Listener {
    /// Its name, upper case (Kafka's listener names are case-insensitive).
    pub name: String,
    pub protocol: SecurityProtocol,
    /// Where it accepts connections.
    pub addr: SocketAddr,
    /// Where its clients are told to connect.
    pub advertised_host: String,
    pub advertised_port: i32,
    /// SSL and SASL_SSL: its TLS acceptor (made from its settings at startup).
    pub tls: Option<crate::server::tls::Tls>,
    /// SASL_PLAINTEXT and SASL_SSL: the mechanisms it offers (`sasl.enabled.mechanisms`).
    pub sasl_mechanisms: Vec<String>,
}

impl Listener {
    /// `NAME://host:port` as Kafka writes an endpoint.
    pub fn endpoint(&self) -> String {
        format!("{}://{}", self.name, self.addr)
    }

    pub fn advertised_endpoint(&self) -> String {
        format!("{}://{}:{}", self.name, self.advertised_host, self.advertised_port)
    }
}

/// One `NAME://host:port` (host empty: every interface; IPv6 in brackets).
fn endpoint(s: &str) -> anyhow::Result<(String, String, u16)> {
    let s = s.trim();
    let (name, rest) = s.split_once("://").with_context(|| format!("{s}: expected NAME://host:port"))?;
    let (host, port) = rest.rsplit_once(':').with_context(|| format!("{s}: expected NAME://host:port"))?;
    let name = name.trim().to_ascii_uppercase();
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        bail!("{s}: a listener name is letters, digits, '_' and '-'");
    }
    let port: u16 = port.parse().ok().filter(|p| *p > 0).with_context(|| format!("{s}: port must be 1 to 65535"))?;
    let host = host.trim_start_matches('[').trim_end_matches(']').to_string();
    Ok((name, host, port))
}

/// A comma-separated list of endpoints (`listeners`, `advertised.listeners`), names unique.
fn endpoints(key: &str, s: &str) -> anyhow::Result<Vec<(String, String, u16)>> {
    let mut out: Vec<(String, String, u16)> = Vec::new();
    for part in s.split(',').filter(|p| !p.trim().is_empty()) {
        let e = endpoint(part).with_context(|| key.to_string())?;
        if out.iter().any(|(n, _, _)| *n == e.0) {
            bail!("{key}: listener {} appears twice", e.0);
        }
        out.push(e);
    }
    Ok(out)
}

/// The listener names of a list of endpoints (upper case; malformed entries left out).
pub fn names(list: &str) -> Vec<String> {
    list.split(',').filter_map(|e| endpoint(e).ok()).map(|(name, _, _)| name).collect()
}

/// `listener.security.protocol.map`: `NAME:PROTOCOL,...`. Kafka's default maps each protocol's
/// name to itself.
pub fn protocol_map(s: Option<&str>) -> anyhow::Result<BTreeMap<String, SecurityProtocol>> {
    let key = "listener.security.protocol.map";
    let Some(s) = s else {
        return Ok(SecurityProtocol::ALL.into_iter().map(|p| (p.name().to_string(), p)).collect());
    };
    let mut map = BTreeMap::new();
    for part in s.split(',').filter(|p| !p.trim().is_empty()) {
        let (name, protocol) =
            part.split_once(':').with_context(|| format!("{key}: {part}: expected NAME:PROTOCOL"))?;
        let protocol = SecurityProtocol::parse(protocol).with_context(|| {
            format!("{key}: {part}: the protocol must be PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL")
        })?;
        if map.insert(name.trim().to_ascii_uppercase(), protocol).is_some() {
            bail!("{key}: {} appears twice", name.trim());
        }
    }
    Ok(map)
}

/// The protocol map in force (Kafka's `effectiveListenerSecurityProtocolMap`): the one given,
/// or when none is, each protocol's name mapped to itself plus the controller listeners
/// (`controller.listener.names`) mapped to PLAINTEXT, unless a listener or a controller
/// listener is named SSL or SASL_* (then the controller listeners must be mapped explicitly).
pub fn effective_protocol_map(
    given: Option<&str>,
    listeners: Option<&str>,
    controller_names: Option<&str>,
) -> anyhow::Result<Option<String>> {
    let (None, Some(controllers)) = (given, controller_names) else { return Ok(given.map(str::to_string)) };
    let controllers: Vec<String> =
        controllers.split(',').map(|n| n.trim().to_ascii_uppercase()).filter(|n| !n.is_empty()).collect();
    let listed = match listeners {
        Some(l) => endpoints("listeners", l)?.into_iter().map(|(name, _, _)| name).collect(),
        None => Vec::new(),
    };
    let secured = |n: &String| matches!(n.as_str(), "SSL" | "SASL_PLAINTEXT" | "SASL_SSL");
    if controllers.iter().chain(&listed).any(secured) {
        return Ok(None);
    }
    let mut map: Vec<String> = SecurityProtocol::ALL.iter().map(|p| format!("{0}:{0}", p.name())).collect();
    map.extend(controllers.iter().filter(|n| *n != "PLAINTEXT").map(|n| format!("{n}:PLAINTEXT")));
    Ok(Some(map.join(",")))
}

/// Check a listener setting's syntax as it is set (names are resolved against the protocol
/// map at startup, when every setting is known).
pub fn check(key: &str, value: &str) -> anyhow::Result<()> {
    match key {
        "listener.security.protocol.map" => protocol_map(Some(value)).map(|_| ()),
        _ => endpoints(key, value).map(|_| ()),
    }
}

/// The listeners: `listeners` (or `default`, the `--listen` address, as PLAINTEXT), each
/// with its protocol from the map and its advertised address (`advertised.listeners`, else
/// its own; a wildcard host advertises `host_name`).
pub fn resolve(
    listeners: Option<&str>,
    advertised: Option<&str>,
    map: Option<&str>,
    default: SocketAddr,
    host_name: &str,
) -> anyhow::Result<Vec<Listener>> {
    let map = protocol_map(map)?;
    let given = match listeners {
        Some(l) => endpoints("listeners", l)?,
        None => vec![("PLAINTEXT".to_string(), default.ip().to_string(), default.port())],
    };
    if given.is_empty() {
        bail!("listeners: no listener given");
    }
    let advertised = advertised.map(|a| endpoints("advertised.listeners", a)).transpose()?.unwrap_or_default();
    for (name, host, _) in &advertised {
        if !given.iter().any(|(n, _, _)| n == name) {
            bail!("advertised.listeners: {name} is not one of the listeners");
        }
        let unspecified = host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_unspecified());
        if host.is_empty() || unspecified {
            bail!("advertised.listeners: {name} advertises no address a client can reach ({host:?})");
        }
    }
    let mut out: Vec<Listener> = Vec::new();
    for (name, host, port) in given {
        let protocol = *map.get(&name).with_context(|| {
            format!("listeners: {name} is not in listener.security.protocol.map (nor a security protocol's name)")
        })?;
        let bind = if host.is_empty() { "0.0.0.0".to_string() } else { host.clone() };
        let addr = (bind.as_str(), port)
            .to_socket_addrs()
            .with_context(|| format!("listeners: {name}: cannot resolve {bind}"))?
            .next()
            .with_context(|| format!("listeners: {name}: {bind} resolves to no address"))?;
        if let Some(other) = out.iter().find(|l| l.addr.port() == port) {
            bail!("listeners: {name} and {} share port {port}", other.name);
        }
        let (advertised_host, advertised_port) = match advertised.iter().find(|(n, _, _)| *n == name) {
            Some((_, h, p)) => (h.clone(), *p),
            None if addr.ip().is_unspecified() => (host_name.to_string(), port),
            None => (addr.ip().to_string(), port),
        };
        out.push(Listener {
            name,
            protocol,
            addr,
            advertised_host,
            advertised_port: advertised_port as i32,
            tls: None,
            sasl_mechanisms: Vec::new(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn default() -> SocketAddr {
        "127.0.0.1:9092".parse().unwrap()
    }

    /// Without `listeners`, `--listen` is one PLAINTEXT listener advertising its own address.
    #[test]
    fn the_default_is_one_plaintext_listener() {
        let l = resolve(None, None, None, default(), "h").unwrap();
        assert_eq!(l.len(), 1);
        assert_eq!(
            (l[0].name.as_str(), l[0].protocol, l[0].addr),
            ("PLAINTEXT", SecurityProtocol::Plaintext, default())
        );
        assert_eq!((l[0].advertised_host.as_str(), l[0].advertised_port), ("127.0.0.1", 9092));
    }

    /// Kafka's forms: names mapped to protocols (the default map names the protocols
    /// themselves), an empty host binding every interface and advertising the host name,
    /// advertised addresses per listener, IPv6 in brackets, names case-insensitive.
    #[test]
    fn kafka_forms() {
        let l = resolve(
            Some("PLAINTEXT://127.0.0.1:9092, client://:9094,SSL://[::1]:9095"),
            Some("CLIENT://broker1.example.com:19094"),
            Some("PLAINTEXT:PLAINTEXT,CLIENT:SASL_SSL,SSL:SSL"),
            default(),
            "myhost",
        )
        .unwrap();
        let view: Vec<(&str, SecurityProtocol, String, String)> =
            l.iter().map(|l| (l.name.as_str(), l.protocol, l.addr.to_string(), l.advertised_endpoint())).collect();
        assert_eq!(
            view,
            vec![
                (
                    "PLAINTEXT",
                    SecurityProtocol::Plaintext,
                    "127.0.0.1:9092".into(),
                    "PLAINTEXT://127.0.0.1:9092".into()
                ),
                (
                    "CLIENT",
                    SecurityProtocol::SaslSsl,
                    "0.0.0.0:9094".into(),
                    "CLIENT://broker1.example.com:19094".into()
                ),
                ("SSL", SecurityProtocol::Ssl, "[::1]:9095".into(), "SSL://::1:9095".into()),
            ]
        );
        let plain = resolve(Some("SASL_PLAINTEXT://127.0.0.1:9093"), None, None, default(), "h").unwrap();
        assert_eq!(plain[0].protocol, SecurityProtocol::SaslPlaintext);
    }

    /// Bad settings are refused with the setting named: an unknown name, a name twice, two
    /// listeners on one port, a bad port, an advertised listener that does not exist or
    /// advertises a wildcard, a protocol map entry that is not a protocol.
    #[test]
    fn bad_settings_are_refused() {
        let bad = [
            (Some("CLIENT://:9094"), None, None, "not in listener.security.protocol.map"),
            (Some("PLAINTEXT://:9092,plaintext://:9093"), None, None, "appears twice"),
            (Some("PLAINTEXT://:9092,SSL://127.0.0.1:9092"), None, None, "share port 9092"),
            (Some("PLAINTEXT://:0"), None, None, "port must be"),
            (Some("PLAINTEXT://:http"), None, None, "port must be"),
            (Some("127.0.0.1:9092"), None, None, "NAME://host:port"),
            (Some("PLAINTEXT://:9092"), Some("SSL://h:1"), None, "not one of the listeners"),
            (Some("PLAINTEXT://:9092"), Some("PLAINTEXT://0.0.0.0:9092"), None, "no address a client can reach"),
            (Some("A://:9092"), None, Some("A:TLS"), "must be PLAINTEXT, SSL"),
            (Some(""), None, None, "no listener"),
        ];
        for (listeners, advertised, map, want) in bad {
            let e = format!("{:#}", resolve(listeners, advertised, map, default(), "h").unwrap_err());
            assert!(e.contains(want), "{listeners:?} {advertised:?} {map:?}: {e}");
        }
        assert!(check("listeners", "PLAINTEXT://:9092").is_ok());
        assert!(check("listener.security.protocol.map", "X:Y").is_err());
    }
}
