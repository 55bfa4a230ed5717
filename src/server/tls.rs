//! TLS for SSL and SASL_SSL listeners: rustls (TLS 1.2 and 1.3) over glommio's streams, keys
//! and certificates in PEM with Kafka's KIP-651 names, and the principal of a client
//! certificate as Kafka's `ssl.principal.mapping.rules` give it (by DEFAULT the subject in
//! Java's RFC 2253 form: `User:CN=alice,OU=Eng,O=Acme`).
//!
//! Each setting is read for a listener as Kafka reads it: `listener.name.<name>.<setting>`
//! (the name in lower case) first, then `<setting>`:
//!
//! | setting | meaning |
//! |---|---|
//! | `ssl.keystore.type` | `PEM` (the only type; Kafka's default JKS is refused with a message) |
//! | `ssl.keystore.location` | a PEM file holding the private key and the certificate chain |
//! | `ssl.keystore.key`, `ssl.keystore.certificate.chain` | the same, inline |
//! | `ssl.truststore.type`, `ssl.truststore.location`, `ssl.truststore.certificates` | CA certificates for client certificates (PEM) |
//! | `ssl.client.auth` | `none` (default), `requested`, `required` |
//! | `ssl.enabled.protocols` | `TLSv1.2,TLSv1.3` (default), or either |
//! | `ssl.principal.mapping.rules` | `DEFAULT`, `RULE:pattern/replacement/[LU]`, ... (KIP-371; [`Rules`]) |

use crate::security::mapping::Rules;
use anyhow::{bail, Context};
use futures_rustls::TlsAcceptor;
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A TLS listener's acceptor, shared by every shard (new connections take the current one),
/// and its `ssl.principal.mapping.rules`.
#[derive(Clone)]
pub struct Tls {
    acceptor: Arc<std::sync::RwLock<TlsAcceptor>>,
    rules: Arc<Rules>,
}

impl Tls {
    pub fn new(acceptor: TlsAcceptor, rules: Rules) -> Tls {
        Tls { acceptor: Arc::new(std::sync::RwLock::new(acceptor)), rules: Arc::new(rules) }
    }

    /// The acceptor for a new connection.
    pub fn acceptor(&self) -> TlsAcceptor {
        self.acceptor.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// New connections from now on use `acceptor` (on every shard); open ones keep theirs.
    pub fn replace(&self, acceptor: TlsAcceptor) {
        *self.acceptor.write().unwrap_or_else(|e| e.into_inner()) = acceptor;
    }

    /// A TLS connection's principal: `User:` and its client certificate's subject (Java's RFC
    /// 2253 form) through the mapping rules, or `User:ANONYMOUS` without a certificate. `Err`:
    /// no rule applies (the connection is refused, as in Kafka).
    pub fn principal(&self, conn: &rustls::ServerConnection) -> Result<String, String> {
        let Some(cert) = conn.peer_certificates().and_then(|c| c.first()) else { return Ok(ANONYMOUS.to_string()) };
        match x509_parser::parse_x509_certificate(cert.as_ref()) {
            Ok((_, c)) => Ok(format!("User:{}", self.rules.apply(&rfc2253(c.subject()))?)),
            Err(_) => Ok(ANONYMOUS.to_string()),
        }
    }
}

/// A listener's `ssl.principal.mapping.rules`.
pub fn mapping_rules(settings: &BTreeMap<String, String>, listener: &str) -> anyhow::Result<Rules> {
    let text = listener_setting(settings, listener, "ssl.principal.mapping.rules").unwrap_or("DEFAULT");
    Rules::parse(text).map_err(|e| anyhow::anyhow!("listener {listener}: ssl.principal.mapping.rules: {e}"))
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tls")
    }
}

impl PartialEq for Tls {
    fn eq(&self, other: &Tls) -> bool {
        Arc::ptr_eq(&self.acceptor, &other.acceptor)
    }
}

/// The principal of a connection without a client certificate (and of PLAINTEXT ones).
pub const ANONYMOUS: &str = "User:ANONYMOUS";

/// A listener's value of `key`: `listener.name.<listener>.<key>`, else `<key>`.
pub fn listener_setting<'a>(settings: &'a BTreeMap<String, String>, listener: &str, key: &str) -> Option<&'a str> {
    let prefixed = format!("listener.name.{}.{key}", listener.to_ascii_lowercase());
    settings.get(&prefixed).or_else(|| settings.get(key)).map(|v| v.trim()).filter(|v| !v.is_empty())
}

/// Check one TLS setting's value as it is set (`key` without a listener prefix).
pub fn check(key: &str, value: &str) -> anyhow::Result<()> {
    let v = value.trim();
    match key {
        "ssl.keystore.type" | "ssl.truststore.type" if !v.eq_ignore_ascii_case("PEM") => {
            bail!("{key}={v}: only PEM stores are supported (KIP-651: a PEM file, or PEM inline)")
        }
        "ssl.client.auth" if !matches!(v, "none" | "requested" | "required") => {
            bail!("{key}={v}: must be none, requested or required")
        }
        "ssl.enabled.protocols" => {
            protocols(v)?;
        }
        "ssl.principal.mapping.rules" => {
            Rules::parse(v).map_err(|e| anyhow::anyhow!("{key}: {e}"))?;
        }
        _ => {}
    }
    Ok(())
}

pub(crate) fn protocols(v: &str) -> anyhow::Result<Vec<&'static rustls::SupportedProtocolVersion>> {
    let mut out = Vec::new();
    for p in v.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        out.push(match p {
            "TLSv1.2" => &rustls::version::TLS12,
            "TLSv1.3" => &rustls::version::TLS13,
            _ => bail!("ssl.enabled.protocols: {p}: only TLSv1.2 and TLSv1.3 are offered"),
        });
    }
    if out.is_empty() {
        bail!("ssl.enabled.protocols: no protocol");
    }
    Ok(out)
}

/// PEM text from a file setting or an inline one.
pub(crate) fn pem(
    settings: &BTreeMap<String, String>,
    listener: &str,
    file: &str,
    inline: &[&str],
) -> anyhow::Result<Option<String>> {
    let parts: Vec<&str> = inline.iter().filter_map(|k| listener_setting(settings, listener, k)).collect();
    if let Some(path) = listener_setting(settings, listener, file) {
        if !parts.is_empty() {
            // Kafka refuses the pair too: which one is meant cannot be told.
            bail!("listener {listener}: both {file} and {} are set; give one", inline.join(" / "));
        }
        let text = std::fs::read_to_string(path).with_context(|| format!("{file}={path}"))?;
        return Ok(Some(text));
    }
    Ok((!parts.is_empty()).then(|| parts.join("\n")))
}

/// The acceptor of TLS listener `listener`, from its settings. Every problem (no key, a key
/// that does not match, an unreadable file, an encrypted key) is an error naming the setting.
pub fn acceptor(settings: &BTreeMap<String, String>, listener: &str) -> anyhow::Result<TlsAcceptor> {
    for key in ["ssl.keystore.type", "ssl.truststore.type", "ssl.client.auth", "ssl.principal.mapping.rules"] {
        if let Some(v) = listener_setting(settings, listener, key) {
            check(key, v).with_context(|| format!("listener {listener}"))?;
        }
    }
    let keystore =
        pem(settings, listener, "ssl.keystore.location", &["ssl.keystore.key", "ssl.keystore.certificate.chain"])?
            .with_context(|| {
                format!(
            "listener {listener} uses TLS: set ssl.keystore.location (a PEM file with the key and certificate chain) \
                 or ssl.keystore.key and ssl.keystore.certificate.chain"
        )
            })?;
    if keystore.contains("ENCRYPTED PRIVATE KEY") {
        bail!("listener {listener}: the keystore's private key is encrypted; give it unencrypted (ssl.key.password is not supported)");
    }
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(keystore.as_bytes())
        .collect::<Result<_, _>>()
        .with_context(|| format!("listener {listener}: the keystore's certificates"))?;
    if chain.is_empty() {
        bail!("listener {listener}: the keystore holds no certificate");
    }
    let key = PrivateKeyDer::from_pem_slice(keystore.as_bytes())
        .map_err(|e| anyhow::anyhow!("{e:?}"))
        .with_context(|| format!("listener {listener}: the keystore holds no private key"))?;
    let versions =
        protocols(listener_setting(settings, listener, "ssl.enabled.protocols").unwrap_or("TLSv1.2,TLSv1.3"))?;
    let builder = rustls::ServerConfig::builder_with_protocol_versions(&versions);
    let auth = listener_setting(settings, listener, "ssl.client.auth").unwrap_or("none");
    let builder = if auth == "none" {
        builder.with_no_client_auth()
    } else {
        let trusted = pem(settings, listener, "ssl.truststore.location", &["ssl.truststore.certificates"])?
            .with_context(|| format!("listener {listener}: ssl.client.auth={auth} needs ssl.truststore.location"))?;
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(trusted.as_bytes()) {
            let cert = cert.with_context(|| format!("listener {listener}: the truststore"))?;
            roots.add(cert).with_context(|| format!("listener {listener}: a truststore certificate"))?;
        }
        let verifier = WebPkiClientVerifier::builder(Arc::new(roots));
        let verifier = if auth == "requested" { verifier.allow_unauthenticated() } else { verifier };
        builder.with_client_cert_verifier(
            verifier.build().with_context(|| format!("listener {listener}: the truststore"))?,
        )
    };
    let config = builder
        .with_single_cert(chain, key)
        .with_context(|| format!("listener {listener}: the keystore's key and certificate"))?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// A distinguished name as Java's `X500Principal.getName()` writes it (RFC 2253): the most
/// specific RDN first, `,` between RDNs, `+` within one, the usual keywords, other
/// attributes as `OID=#<DER hex>`, special characters escaped.
pub fn rfc2253(name: &x509_parser::x509::X509Name<'_>) -> String {
    use x509_parser::der_parser::asn1_rs::ToDer;
    let keyword = |oid: &str| {
        Some(match oid {
            "2.5.4.3" => "CN",
            "2.5.4.6" => "C",
            "2.5.4.7" => "L",
            "2.5.4.8" => "ST",
            "2.5.4.9" => "STREET",
            "2.5.4.10" => "O",
            "2.5.4.11" => "OU",
            "0.9.2342.19200300.100.1.25" => "DC",
            "0.9.2342.19200300.100.1.1" => "UID",
            _ => return None,
        })
    };
    let rdns: Vec<String> = name
        .iter_rdn()
        .map(|rdn| {
            let avas: Vec<String> = rdn
                .iter()
                .map(|ava| {
                    let oid = ava.attr_type().to_id_string();
                    match (keyword(&oid), ava.as_str()) {
                        (Some(k), Ok(v)) => format!("{k}={}", escape(v)),
                        (k, _) => {
                            let der = ava.attr_value().to_der_vec().unwrap_or_default();
                            let hex: String = der.iter().map(|b| format!("{b:02x}")).collect();
                            format!("{}=#{hex}", k.map_or(oid.clone(), str::to_string))
                        }
                    }
                })
                .collect();
            avas.join("+")
        })
        .collect();
    rdns.into_iter().rev().collect::<Vec<_>>().join(",")
}

/// Java's escaping of an RFC 2253 value: `\` before `, = + < > # ; " \` anywhere, before
/// leading and trailing spaces; NUL as `\00`.
fn escape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    let last = v.chars().count().saturating_sub(1);
    for (i, c) in v.chars().enumerate() {
        match c {
            ',' | '=' | '+' | '<' | '>' | '#' | ';' | '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            ' ' if i == 0 || i == last => out.push_str("\\ "),
            '\0' => out.push_str("\\00"),
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kafka's escaping of subject values (Java's RFC 2253 output).
    #[test]
    fn escaping() {
        assert_eq!(escape("Acme, Inc"), "Acme\\, Inc");
        assert_eq!(escape(" a=b+c "), "\\ a\\=b\\+c\\ ");
        assert_eq!(escape("x#y;\"z\\"), "x\\#y\\;\\\"z\\\\");
    }

    /// A certificate subject as Kafka's DEFAULT mapping names it (Java's RFC 2253 form): most
    /// specific RDN first, keywords for CN/OU/O/C/UID, a multi-valued RDN joined by `+`, the
    /// e-mail attribute as its OID and DER hex, `,` in a value escaped.
    #[test]
    fn subject_as_kafka_principal() {
        let pem = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/client-subject.pem")).unwrap();
        let der = CertificateDer::from_pem_slice(&pem).unwrap();
        let (_, cert) = x509_parser::parse_x509_certificate(der.as_ref()).unwrap();
        assert_eq!(
            rfc2253(cert.subject()),
            "CN=alice,1.2.840.113549.1.9.1=#1603614062,OU=Eng+UID=u1,O=Acme\\, Inc,C=US"
        );
    }

    /// The listener's own setting wins over the broker-wide one; the name is lower case.
    #[test]
    fn listener_settings_override() {
        let settings: BTreeMap<String, String> = [
            ("ssl.client.auth".to_string(), "none".to_string()),
            ("listener.name.internal.ssl.client.auth".to_string(), "required".to_string()),
        ]
        .into();
        assert_eq!(listener_setting(&settings, "INTERNAL", "ssl.client.auth"), Some("required"));
        assert_eq!(listener_setting(&settings, "SSL", "ssl.client.auth"), Some("none"));
        assert_eq!(listener_setting(&settings, "SSL", "ssl.keystore.location"), None);
    }

    /// Settings refused with their name: a JKS store, an unknown client-auth mode, a protocol
    /// rustls does not offer, a mapping rule that does not parse; a TLS listener without a
    /// keystore, with a keystore file that does not exist, or with both a file and an inline
    /// key (a rotation to an inline key over a static file would otherwise do nothing).
    #[test]
    fn bad_settings() {
        assert!(check("ssl.keystore.type", "JKS").unwrap_err().to_string().contains("only PEM"));
        assert!(check("ssl.client.auth", "maybe").is_err());
        assert!(check("ssl.enabled.protocols", "TLSv1.1").is_err());
        assert!(check("ssl.principal.mapping.rules", "RULE:x(/y/").is_err());
        assert!(check("ssl.principal.mapping.rules", "RULE:^CN=(.*?),.*$/$1/L,DEFAULT").is_ok());
        assert!(check("ssl.enabled.protocols", "TLSv1.3").is_ok());
        let empty = BTreeMap::new();
        let error = |s: &BTreeMap<String, String>| format!("{:#}", acceptor(s, "SSL").err().expect("refused"));
        assert!(error(&empty).contains("ssl.keystore.location"));
        let missing: BTreeMap<String, String> =
            [("ssl.keystore.location".to_string(), "/nonexistent.pem".to_string())].into();
        assert!(error(&missing).contains("/nonexistent.pem"));
        let both: BTreeMap<String, String> = [
            ("ssl.keystore.location".to_string(), "/k.pem".to_string()),
            ("listener.name.ssl.ssl.keystore.key".to_string(), "-----BEGIN PRIVATE KEY-----".to_string()),
        ]
        .into();
        assert!(error(&both).contains("both ssl.keystore.location and"), "Kafka refuses the pair: {}", error(&both));
    }
}
