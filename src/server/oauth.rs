//! SASL/OAUTHBEARER's token validator for the listeners that offer it (KIP-768's settings):
//! the identity provider's keys from `sasl.oauthbearer.jwks.endpoint.url` (an `http://` or
//! `https://` URL, or a `file://` path), fetched at startup (a failure stops the start, naming
//! the URL) and again every `sasl.oauthbearer.jwks.endpoint.refresh.ms` on shard 0 (a failed
//! refresh keeps the keys in force and is logged); the checks
//! ([`crate::security::oauth`]) from `sasl.oauthbearer.expected.audience`,
//! `sasl.oauthbearer.expected.issuer`, `sasl.oauthbearer.clock.skew.seconds` and
//! `sasl.oauthbearer.sub.claim.name`. One validator serves every shard.

use crate::security::oauth::{Expectations, Jwks, Validator};
use anyhow::{bail, Context};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// The validator in force and where its keys come from.
#[derive(Debug, Clone)]
pub struct OAuth {
    validator: Arc<RwLock<Validator>>,
    pub url: String,
    pub refresh: Duration,
}

impl OAuth {
    /// The validator for a login now.
    pub fn current(&self) -> Validator {
        self.validator.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// From the settings, the keys fetched now; `None` when no listener offers OAUTHBEARER
    /// (`offered`: the first listener that does; its own settings,
    /// `listener.name.<l>.oauthbearer.<setting>` or `listener.name.<l>.<setting>`, win).
    pub fn from_settings(settings: &BTreeMap<String, String>, offered: Option<&str>) -> anyhow::Result<Option<OAuth>> {
        let l = offered.unwrap_or_default().to_ascii_lowercase();
        let get = |k: &str| {
            let own = [format!("listener.name.{l}.oauthbearer.{k}"), format!("listener.name.{l}.{k}")];
            let found = own.iter().find_map(|o| settings.get(o)).or_else(|| settings.get(k));
            found.map(|v| v.trim()).filter(|v| !v.is_empty())
        };
        let offered = offered.is_some();
        let Some(url) = get("sasl.oauthbearer.jwks.endpoint.url") else {
            if offered {
                bail!(
                    "OAUTHBEARER is offered: set sasl.oauthbearer.jwks.endpoint.url (the identity provider's JWKS: \
                     https://..., http://... or file://...)"
                );
            }
            return Ok(None);
        };
        if !offered {
            return Ok(None);
        }
        let number = |k: &str, default: i64| -> anyhow::Result<i64> {
            get(k).map_or(Ok(default), |v| v.parse().with_context(|| format!("{k}={v}: a number")))
        };
        let expect = Expectations {
            audience: get("sasl.oauthbearer.expected.audience")
                .map(|a| a.split(',').map(|x| x.trim().to_string()).filter(|x| !x.is_empty()).collect())
                .unwrap_or_default(),
            issuer: get("sasl.oauthbearer.expected.issuer").map(str::to_string),
            clock_skew_s: number("sasl.oauthbearer.clock.skew.seconds", 30)?,
            subject_claim: get("sasl.oauthbearer.sub.claim.name").unwrap_or("sub").to_string(),
        };
        let refresh =
            Duration::from_millis(number("sasl.oauthbearer.jwks.endpoint.refresh.ms", 3_600_000)?.max(1000) as u64);
        let jwks = fetch_jwks(url).with_context(|| format!("sasl.oauthbearer.jwks.endpoint.url={url}"))?;
        if jwks.keys.is_empty() {
            bail!("sasl.oauthbearer.jwks.endpoint.url={url}: the JWKS holds no signing key tidemark can use");
        }
        let validator = Arc::new(RwLock::new(Validator { jwks, expect }));
        Ok(Some(OAuth { validator, url: url.to_string(), refresh }))
    }

    /// Fetch the keys again every `refresh` until `stop` (on shard 0; the fetch runs on
    /// glommio's blocking pool, so the shard keeps serving).
    pub async fn keep_fresh(self, stop: Arc<std::sync::atomic::AtomicBool>) {
        use std::sync::atomic::Ordering;
        let mut waited = Duration::ZERO;
        while !stop.load(Ordering::Relaxed) {
            // Short sleeps: a stopping node does not wait out a refresh period.
            glommio::timer::sleep(Duration::from_millis(500)).await;
            waited += Duration::from_millis(500);
            if waited < self.refresh {
                continue;
            }
            waited = Duration::ZERO;
            let url = self.url.clone();
            match glommio::executor().spawn_blocking(move || fetch_jwks(&url)).await {
                Ok(jwks) if !jwks.keys.is_empty() => {
                    let keys = jwks.keys.len();
                    self.validator.write().unwrap_or_else(|e| e.into_inner()).jwks = jwks;
                    tracing::debug!(url = self.url, keys, "OAUTHBEARER keys refreshed");
                }
                Ok(_) => tracing::warn!(url = self.url, "the JWKS holds no usable key now; the keys in force are kept"),
                Err(e) => {
                    tracing::warn!(url = self.url, error = %format!("{e:#}"), "cannot refresh the OAUTHBEARER keys; the keys in force are kept")
                }
            }
        }
    }
}

/// How long fetching the JWKS may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest JWKS document read.
const MAX_JWKS: usize = 1 << 20;

/// Read a JWKS document from `url` (blocking: startup, or glommio's blocking pool).
pub fn fetch_jwks(url: &str) -> anyhow::Result<Jwks> {
    let text = if let Some(path) = url.strip_prefix("file://") {
        std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?
    } else if let Some(rest) = url.strip_prefix("http://") {
        http_get(rest, false)?
    } else if let Some(rest) = url.strip_prefix("https://") {
        http_get(rest, true)?
    } else {
        bail!("not an http://, https:// or file:// URL");
    };
    Jwks::parse(&text).map_err(|e| anyhow::anyhow!("the JWKS: {e}"))
}

/// A GET of `host[:port]/path` over HTTP/1.1 (with TLS: the system's CA certificates check
/// the server), its body when the status is 200.
fn http_get(rest: &str, tls: bool) -> anyhow::Result<String> {
    let (authority, path) = rest.split_once('/').map_or((rest, "/".to_string()), |(a, p)| (a, format!("/{p}")));
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || authority.starts_with('[') => {
            (h.trim_matches(['[', ']']), p.parse::<u16>().context("the port")?)
        }
        _ => (authority.trim_matches(['[', ']']), if tls { 443 } else { 80 }),
    };
    use std::net::ToSocketAddrs;
    let addr = (host, port).to_socket_addrs()?.next().context("the host resolves to no address")?;
    let tcp = std::net::TcpStream::connect_timeout(&addr, FETCH_TIMEOUT)?;
    tcp.set_read_timeout(Some(FETCH_TIMEOUT))?;
    tcp.set_write_timeout(Some(FETCH_TIMEOUT))?;
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: {authority}\r\nAccept: application/json\r\nConnection: close\r\n\r\n");
    let mut raw = Vec::new();
    if tls {
        let roots =
            std::fs::read_to_string("/etc/ssl/certs/ca-certificates.crt").context("the system's CA certificates")?;
        let mut store = rustls::RootCertStore::empty();
        use rustls_pki_types::pem::PemObject;
        for cert in rustls_pki_types::CertificateDer::pem_slice_iter(roots.as_bytes()).flatten() {
            let _ = store.add(cert);
        }
        let config = rustls::ClientConfig::builder().with_root_certificates(store).with_no_client_auth();
        let name = rustls_pki_types::ServerName::try_from(host.to_string()).context("the host name")?;
        let conn = rustls::ClientConnection::new(Arc::new(config), name)?;
        let mut stream = rustls::StreamOwned::new(conn, tcp);
        stream.write_all(request.as_bytes())?;
        read_bounded(&mut stream, &mut raw)?;
    } else {
        let mut tcp = tcp;
        tcp.write_all(request.as_bytes())?;
        read_bounded(&mut tcp, &mut raw)?;
    }
    let text = String::from_utf8(raw).context("the answer is not UTF-8")?;
    let (head, body) = text.split_once("\r\n\r\n").context("no end of headers")?;
    let status = head.lines().next().unwrap_or_default();
    if status.split_whitespace().nth(1) != Some("200") {
        bail!("the server answered {status}");
    }
    let chunked = head.lines().any(|l| {
        l.to_ascii_lowercase().starts_with("transfer-encoding:") && l.to_ascii_lowercase().contains("chunked")
    });
    if !chunked {
        return Ok(body.to_string());
    }
    // Chunked: size line (hex), chunk, CRLF; a zero size ends it.
    let (mut out, mut rest) = (String::new(), body);
    loop {
        let (size, after) = rest.split_once("\r\n").context("a chunk without its size")?;
        let n = usize::from_str_radix(size.split(';').next().unwrap_or("").trim(), 16).context("a chunk size")?;
        if n == 0 {
            return Ok(out);
        }
        out.push_str(after.get(..n).context("a chunk cut short")?);
        rest = after.get(n..).and_then(|r| r.strip_prefix("\r\n")).context("a chunk without its end")?;
    }
}

fn read_bounded(r: &mut impl Read, out: &mut Vec<u8>) -> anyhow::Result<()> {
    let mut buf = [0u8; 16 << 10];
    loop {
        match r.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => {
                out.extend_from_slice(&buf[..n]);
                if out.len() > MAX_JWKS {
                    bail!("the JWKS is over {MAX_JWKS} bytes");
                }
            }
            // A TLS server closing without close_notify after the body: what was read stands.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !out.is_empty() => return Ok(()),
            Err(e) => return Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The JWKS from a file URL and from a local HTTP server (plain and chunked answers); a
    /// server's error status and a URL of another scheme refused with the reason.
    #[test]
    fn jwks_from_file_and_http() {
        let jwks = r#"{"keys":[{"kty":"EC","crv":"P-256","kid":"k","x":"AAAA","y":"AAAA"}]}"#;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jwks.json");
        std::fs::write(&path, jwks).unwrap();
        assert_eq!(fetch_jwks(&format!("file://{}", path.display())).unwrap().keys.len(), 1);
        let serve = |answer: String| {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let port = listener.local_addr().unwrap().port();
            std::thread::spawn(move || {
                let (mut s, _) = listener.accept().unwrap();
                let mut buf = [0u8; 1024];
                let _ = s.read(&mut buf);
                s.write_all(answer.as_bytes()).unwrap();
            });
            format!("http://127.0.0.1:{port}/keys")
        };
        let plain = serve(format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{jwks}", jwks.len()));
        assert_eq!(fetch_jwks(&plain).unwrap().keys.len(), 1);
        let (a, b) = jwks.split_at(10);
        let chunked = serve(format!(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{a}\r\n{:x}\r\n{b}\r\n0\r\n\r\n",
            a.len(),
            b.len()
        ));
        assert_eq!(fetch_jwks(&chunked).unwrap().keys.len(), 1);
        let missing = serve("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n".into());
        assert!(format!("{:#}", fetch_jwks(&missing).unwrap_err()).contains("404"));
        assert!(fetch_jwks("ftp://x/keys").is_err());
    }
}
