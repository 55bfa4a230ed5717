//! How this node secures its own links to the rest of its cluster, from Kafka's settings:
//!
//! - **to other brokers** (a follower's fetches, transaction markers, KIP-890 verification):
//!   the listener `inter.broker.listener.name`, else the one named as the protocol
//!   `security.inter.broker.protocol` (PLAINTEXT by default), else the first listener. Its
//!   protocol says TLS and SASL; SASL logs in with `sasl.mechanism.inter.broker.protocol`.
//! - **to the controllers** (the quorum's own RPCs, a broker-only node's metadata fetches,
//!   heartbeats and forwarded writes): the first of `controller.listener.names`, its protocol
//!   from `listener.security.protocol.map`, SASL with `sasl.mechanism.controller.protocol`.
//!
//! TLS uses the listener's own stores in client mode, as Kafka does: its trust store
//! (`ssl.truststore.*`) checks the other node's certificate, its key store (`ssl.keystore.*`),
//! when set, is presented as this node's certificate, and `ssl.endpoint.identification.algorithm`
//! (`https` by default; empty: the chain only) says whether the certificate must name the host.
//! The login is the listener's JAAS text for the mechanism: `listener.name.<l>.<mechanism>.sasl.jaas.config`,
//! else `listener.name.<l>.sasl.jaas.config`, else `sasl.jaas.config`.
//!
//! Each link is kept behind a lock so that a new key store or login (KIP-226) reaches the
//! connections opened after it, on every shard; open connections keep theirs.

use super::listeners::SecurityProtocol;
use super::tls::listener_setting;
use crate::client::security::Shared;
use crate::client::{Login, LoginMechanism, Security};
use anyhow::{bail, Context};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::collections::BTreeMap;
use std::sync::Arc;

/// One link's listener and how it is secured now.
#[derive(Debug, Clone)]
pub struct Link {
    /// The listener connected to, upper case.
    pub listener: String,
    pub protocol: SecurityProtocol,
    pub security: Shared,
}

impl Link {
    fn new(listener: String, protocol: SecurityProtocol, security: Security) -> Link {
        Link { listener, protocol, security: Shared::new(security) }
    }

    /// How a new connection is secured.
    pub fn security(&self) -> Security {
        self.security.current()
    }

    /// New connections on this link are secured with `security`, on every shard.
    pub fn replace(&self, security: Security) {
        self.security.replace(security);
    }
}

/// This node's links: to brokers, and to controllers when it is part of a cluster.
#[derive(Debug, Clone)]
pub struct ClusterLinks {
    pub brokers: Link,
    pub controllers: Option<Link>,
}

impl Default for ClusterLinks {
    fn default() -> Self {
        ClusterLinks {
            brokers: Link::new("PLAINTEXT".into(), SecurityProtocol::Plaintext, Security::plaintext()),
            controllers: None,
        }
    }
}

impl ClusterLinks {
    /// Each link with its security made again from `settings` (a rotated key store, trust
    /// store or login), all checked before any is put in force ([`Link::replace`]).
    pub fn remade(&self, settings: &BTreeMap<String, String>) -> anyhow::Result<Vec<(Link, Security)>> {
        let mut out = Vec::new();
        let keys = [(Some(&self.brokers), "sasl.mechanism.inter.broker.protocol")];
        let all = keys.into_iter().chain([(self.controllers.as_ref(), "sasl.mechanism.controller.protocol")]);
        for (link, key) in all {
            let Some(link) = link else { continue };
            if link.protocol == SecurityProtocol::Plaintext {
                continue;
            }
            let security = security(settings, &link.listener, link.protocol, key)
                .with_context(|| format!("the cluster's link on listener {}", link.listener))?;
            out.push((link.clone(), security));
        }
        Ok(out)
    }
}

/// The listener other brokers are reached on: `inter.broker.listener.name`, else the listener
/// named as `security.inter.broker.protocol` (Kafka's rule), else the first (`listeners`: names
/// and protocols, in order).
pub fn inter_broker_listener(
    settings: &BTreeMap<String, String>,
    listeners: &[(String, SecurityProtocol)],
) -> anyhow::Result<(String, SecurityProtocol)> {
    let named = settings.get("inter.broker.listener.name").map(|n| n.trim().to_ascii_uppercase());
    let by_protocol = settings.get("security.inter.broker.protocol").map(|p| p.trim().to_ascii_uppercase());
    if named.is_some() && by_protocol.is_some() {
        bail!(
            "inter.broker.listener.name and security.inter.broker.protocol are both set; give one (as Kafka requires)"
        );
    }
    let find = |name: &str| listeners.iter().find(|(n, _)| n == name).cloned();
    if let Some(name) = named {
        return find(&name).with_context(|| format!("inter.broker.listener.name={name}: not one of the listeners"));
    }
    if let Some(p) = by_protocol {
        SecurityProtocol::parse(&p).with_context(|| format!("security.inter.broker.protocol={p}: not a protocol"))?;
        return find(&p).with_context(|| {
            format!("security.inter.broker.protocol={p}: no listener is named {p} (or set inter.broker.listener.name)")
        });
    }
    let first = listeners.first().cloned().context("no listener")?;
    Ok(find("PLAINTEXT").unwrap_or(first))
}

/// The links' security from the settings (`node`: this node's dynamic settings, over them):
/// to brokers on `brokers`, to controllers on `controllers` when clustered.
pub fn resolve(
    settings: &BTreeMap<String, String>,
    brokers: (String, SecurityProtocol),
    controllers: Option<(String, SecurityProtocol)>,
) -> anyhow::Result<ClusterLinks> {
    let link = |(listener, protocol): (String, SecurityProtocol), mechanism_key: &str| -> anyhow::Result<Link> {
        let security = security(settings, &listener, protocol, mechanism_key)
            .with_context(|| format!("the cluster's link on listener {listener} ({})", protocol.name()))?;
        Ok(Link::new(listener, protocol, security))
    };
    Ok(ClusterLinks {
        brokers: link(brokers, "sasl.mechanism.inter.broker.protocol")?,
        controllers: controllers.map(|c| link(c, "sasl.mechanism.controller.protocol")).transpose()?,
    })
}

/// How to connect to `listener` of another node.
pub fn security(
    settings: &BTreeMap<String, String>,
    listener: &str,
    protocol: SecurityProtocol,
    mechanism_key: &str,
) -> anyhow::Result<Security> {
    let tls = protocol.tls().then(|| connector(settings, listener)).transpose()?;
    let login = if protocol.sasl() { Some(login(settings, listener, mechanism_key)?) } else { None };
    Ok(Security { tls, login })
}

/// This node's login on a SASL `listener`: the mechanism `mechanism_key` names and the JAAS text.
fn login(settings: &BTreeMap<String, String>, listener: &str, mechanism_key: &str) -> anyhow::Result<Login> {
    let name = settings.get(mechanism_key).map(|m| m.trim()).filter(|m| !m.is_empty()).with_context(|| {
        format!("set {mechanism_key} (SCRAM-SHA-256, SCRAM-SHA-512 or PLAIN: Kafka's default, GSSAPI, is not served)")
    })?;
    let mechanism = LoginMechanism::parse(name)
        .with_context(|| format!("{mechanism_key}={name}: SCRAM-SHA-256, SCRAM-SHA-512 or PLAIN"))?;
    let l = listener.to_ascii_lowercase();
    let own = format!("listener.name.{l}.{}.sasl.jaas.config", mechanism.name().to_ascii_lowercase());
    let keys = [own.clone(), format!("listener.name.{l}.sasl.jaas.config"), "sasl.jaas.config".to_string()];
    let Some((key, text)) = keys.iter().find_map(|k| settings.get(k).map(|v| (k, v))) else {
        bail!("this node's own {} login: set {own}=... required username=\"...\" password=\"...\";", mechanism.name())
    };
    Login::from_jaas(mechanism, text).map_err(|e| anyhow::anyhow!("{key}: {e}"))
}

/// A TLS client configuration for `listener`: its trust store checks the server, its key
/// store (if any) is this node's certificate.
pub fn connector(settings: &BTreeMap<String, String>, listener: &str) -> anyhow::Result<Arc<rustls::ClientConfig>> {
    let pem = |file: &str, inline: &[&str]| super::tls::pem(settings, listener, file, inline);
    let trusted = match pem("ssl.truststore.location", &["ssl.truststore.certificates"])? {
        Some(text) => text,
        None => std::fs::read_to_string(SYSTEM_CAS).with_context(|| {
            format!(
                "listener {listener}: set ssl.truststore.location (the CA that signed the other nodes' certificates)"
            )
        })?,
    };
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(trusted.as_bytes()) {
        let cert = cert.with_context(|| format!("listener {listener}: the truststore"))?;
        roots.add(cert).with_context(|| format!("listener {listener}: a truststore certificate"))?;
    }
    if roots.is_empty() {
        bail!("listener {listener}: the truststore holds no certificate");
    }
    let versions = super::tls::protocols(
        listener_setting(settings, listener, "ssl.enabled.protocols").unwrap_or("TLSv1.2,TLSv1.3"),
    )?;
    let builder = rustls::ClientConfig::builder_with_protocol_versions(&versions);
    let check_name = match listener_setting(settings, listener, "ssl.endpoint.identification.algorithm") {
        None => true,
        Some(a) if a.eq_ignore_ascii_case("https") => true,
        Some(a) => bail!("ssl.endpoint.identification.algorithm={a}: https or empty"),
    };
    // An empty value is a value: "" turns the name check off (listener_setting drops it).
    let check_name = check_name && !explicitly_empty(settings, listener, "ssl.endpoint.identification.algorithm");
    let roots = Arc::new(roots);
    let builder = if check_name {
        builder.with_root_certificates(roots)
    } else {
        let verifier = rustls::client::WebPkiServerVerifier::builder(roots)
            .build()
            .with_context(|| format!("listener {listener}: the truststore"))?;
        builder.dangerous().with_custom_certificate_verifier(Arc::new(crate::client::security::ChainOnly(verifier)))
    };
    let keystore = pem("ssl.keystore.location", &["ssl.keystore.key", "ssl.keystore.certificate.chain"])?;
    let config = match keystore {
        None => builder.with_no_client_auth(),
        Some(text) => {
            let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(text.as_bytes())
                .collect::<Result<_, _>>()
                .with_context(|| format!("listener {listener}: the keystore's certificates"))?;
            let key = PrivateKeyDer::from_pem_slice(text.as_bytes())
                .map_err(|e| anyhow::anyhow!("{e:?}"))
                .with_context(|| format!("listener {listener}: the keystore holds no private key"))?;
            builder
                .with_client_auth_cert(chain, key)
                .with_context(|| format!("listener {listener}: the keystore's key and certificate"))?
        }
    };
    Ok(Arc::new(config))
}

/// Where Debian and its kin keep the system's CA certificates: the trust store when a listener
/// names none (Kafka's JVM would use its own `cacerts`).
const SYSTEM_CAS: &str = "/etc/ssl/certs/ca-certificates.crt";

/// Whether `key` is set to an empty value for `listener` (its own setting first).
fn explicitly_empty(settings: &BTreeMap<String, String>, listener: &str, key: &str) -> bool {
    let own = format!("listener.name.{}.{key}", listener.to_ascii_lowercase());
    settings.get(&own).or_else(|| settings.get(key)).is_some_and(|v| v.trim().is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    const LISTENERS: [(&str, SecurityProtocol); 2] =
        [("CLIENT", SecurityProtocol::SaslSsl), ("INTERNAL", SecurityProtocol::SaslPlaintext)];

    fn listeners() -> Vec<(String, SecurityProtocol)> {
        LISTENERS.iter().map(|(n, p)| (n.to_string(), *p)).collect()
    }

    /// Kafka's choice of the inter-broker listener: the name given; else the listener named as
    /// the protocol given; both given is refused, as Kafka refuses it; a name that is not a
    /// listener is refused; neither: PLAINTEXT if there is one, else the first.
    #[test]
    fn inter_broker_listener_choice() {
        let l = listeners();
        let pick = |pairs: &[(&str, &str)]| inter_broker_listener(&settings(pairs), &l);
        assert_eq!(pick(&[("inter.broker.listener.name", "internal")]).unwrap().0, "INTERNAL");
        assert!(pick(&[("inter.broker.listener.name", "nope")]).is_err());
        assert!(pick(&[("security.inter.broker.protocol", "SASL_SSL")]).is_err(), "no listener named SASL_SSL");
        assert!(pick(&[("inter.broker.listener.name", "CLIENT"), ("security.inter.broker.protocol", "SSL")]).is_err());
        assert_eq!(pick(&[]).unwrap().0, "CLIENT");
        let with_plain =
            vec![("X".to_string(), SecurityProtocol::Ssl), ("PLAINTEXT".to_string(), SecurityProtocol::Plaintext)];
        assert_eq!(inter_broker_listener(&settings(&[]), &with_plain).unwrap().0, "PLAINTEXT");
    }

    /// The broker's login on a SASL link: the mechanism setting is required (Kafka's GSSAPI
    /// default is not served) and named in the error; the listener's per-mechanism JAAS text
    /// wins over the listener's and the broker-wide one; a missing login names the setting.
    #[test]
    fn sasl_login_for_a_link() {
        let key = "sasl.mechanism.inter.broker.protocol";
        let none = security(&settings(&[]), "INTERNAL", SecurityProtocol::SaslPlaintext, key).unwrap_err();
        assert!(format!("{none:#}").contains(key));
        let jaas = |u: &str| {
            format!("org.apache.kafka.common.security.scram.ScramLoginModule required username=\"{u}\" password=\"p\";")
        };
        let s = settings(&[
            (key, "SCRAM-SHA-512"),
            ("sasl.jaas.config", &jaas("wide")),
            ("listener.name.internal.scram-sha-512.sasl.jaas.config", &jaas("own")),
        ]);
        let login = security(&s, "INTERNAL", SecurityProtocol::SaslPlaintext, key).unwrap().login.unwrap();
        assert_eq!(login.username, "own");
        let login = security(&s, "OTHER", SecurityProtocol::SaslPlaintext, key).unwrap().login.unwrap();
        assert_eq!(login.username, "wide");
        let missing = security(&settings(&[(key, "PLAIN")]), "INTERNAL", SecurityProtocol::SaslPlaintext, key);
        assert!(format!("{:#}", missing.unwrap_err()).contains("listener.name.internal.plain.sasl.jaas.config"));
        let plain = security(&settings(&[]), "INTERNAL", SecurityProtocol::Plaintext, key).unwrap();
        assert!(plain.login.is_none() && plain.tls.is_none());
    }
}
