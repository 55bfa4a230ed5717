//! How our client reaches a Kafka listener: TCP, then TLS when the listener's protocol has it,
//! then SASL when it has that, as Kafka's own clients do. The broker uses it for its links to
//! the rest of its cluster (a follower's fetches, transaction markers, the controller quorum);
//! the tools use it for any broker.
//!
//! - TLS is rustls. The server's certificate must chain to the trust store. By default its name
//!   must also match the host dialled (Kafka's `ssl.endpoint.identification.algorithm=https`);
//!   with that setting empty, only the chain is checked. A client certificate is presented
//!   when one is configured.
//! - SASL is SaslHandshake v1 then SaslAuthenticate v2, with SCRAM-SHA-256/512 (RFC 5802: the
//!   server's signature is checked too, so a server that does not know the password cannot
//!   pass for the broker) or PLAIN.
//! - The login comes from Kafka's JAAS text (`sasl.jaas.config`): [`Login::from_jaas`].
//!
//! Every failure is an `io::Error` whose text names the peer and what failed ("SASL
//! authentication to 10.0.0.2:9093 failed: ..."), for the caller's log line.

use crate::protocol::errors as code;
use crate::protocol::security::{
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use crate::protocol::{self, RequestHeader};
use crate::security::{constant_time_eq, random_token, Mechanism};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use futures_lite::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use glommio::net::TcpStream;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

/// The largest SASL answer read (a SCRAM server-first message is well under 1 KiB).
const MAX_SASL_FRAME: usize = 64 << 10;

/// How a connection is secured: TLS (a client configuration) and a SASL login, either or both
/// or neither (PLAINTEXT). Cheap to clone.
#[derive(Clone, Default)]
pub struct Security {
    pub tls: Option<Arc<rustls::ClientConfig>>,
    pub login: Option<Login>,
}

impl std::fmt::Debug for Security {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Security").field("tls", &self.tls.is_some()).field("login", &self.login).finish()
    }
}

/// A [`Security`] that can be replaced while connections are made with it (a rotated key
/// store or login, KIP-226): each new connection takes the current one; open ones keep theirs.
/// Shared by every shard.
#[derive(Clone, Default, Debug)]
pub struct Shared(Arc<std::sync::RwLock<Security>>);

impl Shared {
    pub fn new(security: Security) -> Shared {
        Shared(Arc::new(std::sync::RwLock::new(security)))
    }

    /// How a new connection is secured.
    pub fn current(&self) -> Security {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Connections opened from now on are secured with `security`.
    pub fn replace(&self, security: Security) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = security;
    }
}

/// A SASL login.
#[derive(Clone, PartialEq, Eq)]
pub struct Login {
    pub mechanism: LoginMechanism,
    pub username: String,
    pub password: String,
}

/// Never the password in a log line.
impl std::fmt::Debug for Login {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Login {{ {}, {} }}", self.mechanism.name(), self.username)
    }
}

/// The SASL mechanisms our client logs in with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoginMechanism {
    Plain,
    Scram(Mechanism),
}

impl LoginMechanism {
    pub fn parse(name: &str) -> Option<LoginMechanism> {
        match name.trim().to_ascii_uppercase().as_str() {
            "PLAIN" => Some(LoginMechanism::Plain),
            m => Mechanism::parse(m).map(LoginMechanism::Scram),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            LoginMechanism::Plain => "PLAIN",
            LoginMechanism::Scram(m) => m.name(),
        }
    }
}

impl Login {
    /// A login from Kafka's JAAS text for `mechanism`: one login module entry,
    /// `<class> <flag> key="value" ... ;`, with `username` and `password` options (Kafka's
    /// `ScramLoginModule` and `PlainLoginModule`). The module must be the mechanism's.
    pub fn from_jaas(mechanism: LoginMechanism, text: &str) -> Result<Login, String> {
        let entry = Jaas::parse(text)?;
        let expected = match mechanism {
            LoginMechanism::Plain => "org.apache.kafka.common.security.plain.PlainLoginModule",
            LoginMechanism::Scram(_) => "org.apache.kafka.common.security.scram.ScramLoginModule",
        };
        if entry.module != expected {
            return Err(format!("{} logs in with {expected}, not {}", mechanism.name(), entry.module));
        }
        let option = |k: &str| entry.options.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        let username = option("username").filter(|u| !u.is_empty()).ok_or("no username option")?;
        let password = option("password").filter(|p| !p.is_empty()).ok_or("no password option")?;
        Ok(Login { mechanism, username, password })
    }
}

/// One JAAS login module entry: `<class> <required|requisite|sufficient|optional> key=value ... ;`
/// (values quoted, with `\` escapes, or bare words).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Jaas {
    pub module: String,
    pub flag: String,
    pub options: Vec<(String, String)>,
}

impl Jaas {
    pub fn parse(text: &str) -> Result<Jaas, String> {
        let mut tokens = JaasTokens { rest: text.trim() };
        let module = tokens.word().ok_or("no login module class")?;
        let flag = tokens.word().ok_or("no control flag after the login module")?;
        if !matches!(flag.as_str(), "required" | "requisite" | "sufficient" | "optional") {
            return Err(format!("{flag}: the control flag is required, requisite, sufficient or optional"));
        }
        let mut options = Vec::new();
        loop {
            tokens.skip_space();
            if tokens.rest.starts_with(';') {
                tokens.rest = &tokens.rest[1..];
                break;
            }
            let key = tokens.word().ok_or("an entry must end with ;")?;
            tokens.skip_space();
            tokens.rest = tokens.rest.strip_prefix('=').ok_or_else(|| format!("{key}: = expected"))?;
            tokens.skip_space();
            let value = tokens.value().ok_or_else(|| format!("{key}: no value"))?;
            options.push((key, value));
        }
        if !tokens.rest.trim().is_empty() {
            return Err("one login module entry is expected (text follows its ;)".into());
        }
        Ok(Jaas { module, flag, options })
    }
}

struct JaasTokens<'a> {
    rest: &'a str,
}

impl JaasTokens<'_> {
    fn skip_space(&mut self) {
        self.rest = self.rest.trim_start();
    }

    fn word(&mut self) -> Option<String> {
        self.skip_space();
        let end =
            self.rest.find(|c: char| c.is_whitespace() || c == '=' || c == ';' || c == '"').unwrap_or(self.rest.len());
        if end == 0 {
            return None;
        }
        let w = self.rest[..end].to_string();
        self.rest = &self.rest[end..];
        Some(w)
    }

    fn value(&mut self) -> Option<String> {
        let Some(quoted) = self.rest.strip_prefix('"') else { return self.word() };
        let mut out = String::new();
        let mut chars = quoted.char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '"' => {
                    self.rest = &quoted[i + 1..];
                    return Some(out);
                }
                '\\' => out.push(chars.next()?.1),
                c => out.push(c),
            }
        }
        None
    }
}

/// A connection made by [`Security::connect`].
pub enum Stream {
    Plain(TcpStream),
    Tls(Box<futures_rustls::client::TlsStream<TcpStream>>),
}

impl AsyncRead for Stream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_close(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_close(cx),
        }
    }
}

impl Security {
    /// PLAINTEXT: neither TLS nor SASL.
    pub fn plaintext() -> Security {
        Security::default()
    }

    /// The protocol this amounts to, in Kafka's names.
    pub fn protocol(&self) -> &'static str {
        match (self.tls.is_some(), self.login.is_some()) {
            (false, false) => "PLAINTEXT",
            (true, false) => "SSL",
            (false, true) => "SASL_PLAINTEXT",
            (true, true) => "SASL_SSL",
        }
    }

    /// Connect to `addr` (the host `host`, whose name a TLS server's certificate must carry),
    /// then secure the connection; the whole within `limit`.
    pub async fn connect(&self, host: &str, addr: SocketAddr, limit: Duration) -> io::Result<Stream> {
        let work = async {
            let tcp = TcpStream::connect(addr).await.map_err(io::Error::from)?;
            let _ = tcp.set_nodelay(true);
            self.secure(host, addr, tcp).await
        };
        match crate::deadline::within(limit, work).await {
            Some(r) => r,
            None => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("connecting to {addr} ({}) took over {limit:?}", self.protocol()),
            )),
        }
    }

    /// TLS and SASL over an open TCP connection to `host` at `addr`.
    pub async fn secure(&self, host: &str, addr: SocketAddr, tcp: TcpStream) -> io::Result<Stream> {
        let mut stream = match &self.tls {
            None => Stream::Plain(tcp),
            Some(config) => {
                let name = rustls_pki_types::ServerName::try_from(host.to_string()).map_err(|e| {
                    io::Error::new(io::ErrorKind::InvalidInput, format!("{host}: not a TLS server name: {e}"))
                })?;
                let tls = futures_rustls::TlsConnector::from(config.clone())
                    .connect(name, tcp)
                    .await
                    .map_err(|e| io::Error::new(e.kind(), format!("TLS handshake with {addr} ({host}) failed: {e}")))?;
                Stream::Tls(Box::new(tls))
            }
        };
        if let Some(login) = &self.login {
            sasl(&mut stream, login).await.map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("SASL {} authentication to {addr} failed: {e}", login.mechanism.name()),
                )
            })?;
        }
        Ok(stream)
    }
}

/// One request on a connection not yet pipelined (SASL comes before any other request), and
/// its answer.
async fn round_trip<S, Q, A>(stream: &mut S, api: i16, version: i16, correlation_id: i32, req: &mut Q) -> io::Result<A>
where
    S: AsyncRead + AsyncWrite + Unpin,
    Q: protocol::messages::Message,
    A: protocol::messages::Message,
{
    let header = RequestHeader {
        api_key: api,
        api_version: version,
        correlation_id,
        client_id: Some("tidemark".into()),
        ..Default::default()
    };
    let frame = protocol::encode_request(&header, req).map_err(io::Error::other)?;
    stream.write_all(&frame).await?;
    stream.flush().await?;
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).await?;
    let n = i32::from_be_bytes(len);
    if n < 4 || n as usize > MAX_SASL_FRAME {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("an answer of {n} bytes")));
    }
    let mut body = vec![0u8; n as usize];
    stream.read_exact(&mut body).await?;
    let (_, answer) = protocol::decode_response(&header, bytes::Bytes::from(body))
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    Ok(answer)
}

/// The SASL exchange: SaslHandshake v1, then SaslAuthenticate v2 until done.
async fn sasl<S: AsyncRead + AsyncWrite + Unpin>(stream: &mut S, login: &Login) -> io::Result<()> {
    let refused = |m: String| io::Error::new(io::ErrorKind::PermissionDenied, m);
    let mut hello = SaslHandshakeRequest { mechanism: login.mechanism.name().to_string(), ..Default::default() };
    let answer: SaslHandshakeResponse = round_trip(stream, protocol::SASL_HANDSHAKE, 1, 1, &mut hello).await?;
    if answer.error_code != code::NONE {
        return Err(refused(format!(
            "the listener does not offer {} (it offers {})",
            login.mechanism.name(),
            answer.mechanisms.join(", ")
        )));
    }
    let mut authenticate = async |bytes: Vec<u8>, id: i32| -> io::Result<Vec<u8>> {
        let mut req = SaslAuthenticateRequest { auth_bytes: bytes.into(), ..Default::default() };
        let a: SaslAuthenticateResponse = round_trip(stream, protocol::SASL_AUTHENTICATE, 2, id, &mut req).await?;
        if a.error_code != code::NONE {
            return Err(refused(a.error_message.unwrap_or_else(|| format!("error {}", a.error_code))));
        }
        Ok(a.auth_bytes.to_vec())
    };
    match login.mechanism {
        LoginMechanism::Plain => {
            let token = format!("\0{}\0{}", login.username, login.password);
            authenticate(token.into_bytes(), 2).await?;
        }
        LoginMechanism::Scram(m) => {
            let mut scram = ScramClient::new(m, &login.username, &login.password);
            let server_first = authenticate(scram.first().into_bytes(), 2).await?;
            let client_final = scram.respond(&server_first).map_err(refused)?;
            let server_final = authenticate(client_final.into_bytes(), 3).await?;
            scram.verify(&server_final).map_err(refused)?;
        }
    }
    Ok(())
}

/// The client side of SCRAM (RFC 5802): client-first, then client-final from the server's
/// first message, then the server's signature checked.
pub struct ScramClient {
    m: Mechanism,
    password: String,
    client_first_bare: String,
    nonce: String,
    /// The server signature expected, once client-final is made.
    expected: Option<Vec<u8>>,
}

impl ScramClient {
    pub fn new(m: Mechanism, username: &str, password: &str) -> ScramClient {
        let nonce = random_token(24);
        let name = username.replace('=', "=3D").replace(',', "=2C");
        ScramClient {
            m,
            password: password.to_string(),
            client_first_bare: format!("n={name},r={nonce}"),
            nonce,
            expected: None,
        }
    }

    /// client-first: no channel binding, no authorization id.
    pub fn first(&self) -> String {
        format!("n,,{}", self.client_first_bare)
    }

    /// client-final for the server's `r=nonce,s=salt,i=iterations`.
    pub fn respond(&mut self, server_first: &[u8]) -> Result<String, String> {
        let text = std::str::from_utf8(server_first).map_err(|_| "server-first is not UTF-8")?;
        let field = |k: &str| text.split(',').find_map(|f| f.strip_prefix(k));
        let nonce = field("r=").ok_or("server-first has no nonce")?;
        if !nonce.starts_with(&self.nonce) || nonce.len() == self.nonce.len() {
            return Err("server-first's nonce does not extend ours".into());
        }
        let salt = B64.decode(field("s=").ok_or("server-first has no salt")?).map_err(|_| "the salt is not base64")?;
        let iterations: i32 = field("i=").and_then(|i| i.parse().ok()).ok_or("server-first has no iteration count")?;
        if !(crate::security::MIN_ITERATIONS..=crate::security::MAX_ITERATIONS).contains(&iterations) {
            return Err(format!("{iterations} iterations is out of bounds"));
        }
        let m = self.m;
        let salted = m.salted_password(self.password.as_bytes(), &salt, iterations);
        let client_key = m.mac(&salted, b"Client Key");
        let stored_key = m.hash(&client_key);
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{text},{without_proof}", self.client_first_bare);
        let signature = m.mac(&stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key.iter().zip(&signature).map(|(a, b)| a ^ b).collect();
        let server_key = m.mac(&salted, b"Server Key");
        self.expected = Some(m.mac(&server_key, auth_message.as_bytes()));
        Ok(format!("{without_proof},p={}", B64.encode(proof)))
    }

    /// Check server-final (`v=signature`): the server knew the password's keys.
    pub fn verify(&self, server_final: &[u8]) -> Result<(), String> {
        let text = std::str::from_utf8(server_final).map_err(|_| "server-final is not UTF-8")?;
        if let Some(e) = text.strip_prefix("e=") {
            return Err(format!("the server refused: {e}"));
        }
        let v = text.strip_prefix("v=").ok_or("server-final has no signature")?;
        let v = B64.decode(v).map_err(|_| "the server's signature is not base64")?;
        match &self.expected {
            Some(expected) if constant_time_eq(expected, &v) => Ok(()),
            _ => Err("the server's signature is wrong: it does not know this user's credential".into()),
        }
    }
}

/// A certificate verifier that checks the chain but not the name (Kafka's
/// `ssl.endpoint.identification.algorithm=` empty).
#[derive(Debug)]
pub struct ChainOnly(pub Arc<rustls::client::WebPkiServerVerifier>);

impl rustls::client::danger::ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &rustls_pki_types::CertificateDer<'_>,
        intermediates: &[rustls_pki_types::CertificateDer<'_>],
        server_name: &rustls_pki_types::ServerName<'_>,
        ocsp_response: &[u8],
        now: rustls_pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        use rustls::{CertificateError, Error};
        match self.0.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(Error::InvalidCertificate(CertificateError::NotValidForName))
            | Err(Error::InvalidCertificate(CertificateError::NotValidForNameContext { .. })) => {
                Ok(rustls::client::danger::ServerCertVerified::assertion())
            }
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls_pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls_pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::sasl::{Exchange, Step};
    use crate::security::{Credential, Credentials};

    /// Kafka's JAAS text as operators write it: class, flag, quoted options, a closing `;`;
    /// escapes inside quotes; bare values; a missing `;`, a bad flag or a second entry refused.
    #[test]
    fn jaas_entries() {
        let text = r#"org.apache.kafka.common.security.scram.ScramLoginModule required
            username="broker" password="s3cr\"et;x";"#;
        let login = Login::from_jaas(LoginMechanism::Scram(Mechanism::ScramSha512), text).unwrap();
        assert_eq!((login.username.as_str(), login.password.as_str()), ("broker", "s3cr\"et;x"));
        let plain = "org.apache.kafka.common.security.plain.PlainLoginModule required username=admin password=pw user_admin=\"pw\";";
        let entry = Jaas::parse(plain).unwrap();
        assert_eq!(entry.options.len(), 3);
        assert_eq!(Login::from_jaas(LoginMechanism::Plain, plain).unwrap().password, "pw");
        assert!(Login::from_jaas(LoginMechanism::Plain, text).unwrap_err().contains("PlainLoginModule"));
        assert!(Jaas::parse("a.B required username=\"x\"").is_err(), "no ;");
        assert!(Jaas::parse("a.B always username=\"x\";").is_err(), "bad flag");
        assert!(Jaas::parse("a.B required; c.D required;").is_err(), "two entries");
        assert!(Login::from_jaas(LoginMechanism::Plain, "x.PlainLoginModule required;").is_err());
    }

    /// Our SCRAM client against our SCRAM server (RFC 5802): a right password authenticates
    /// both ways; a wrong one is refused by the server; a server with another credential for
    /// the user is refused by the client (its signature does not verify). A user name with `,`
    /// and `=` is escaped.
    #[test]
    fn scram_client_and_server() {
        for m in Mechanism::ALL {
            let mut credentials = Credentials::default();
            credentials.set("bro,k=er", m, Some(Credential::from_password(m, b"right", 4096)));
            let run = |password: &str, credentials: &Credentials| -> Result<(), String> {
                let mut client = ScramClient::new(m, "bro,k=er", password);
                let mut server = Exchange::start(m.name()).unwrap();
                let Step::Continue(first) = server.step(client.first().as_bytes(), credentials).map_err(|f| f.0)?
                else {
                    panic!("server-first")
                };
                let last = client.respond(&first)?;
                match server.step(last.as_bytes(), credentials).map_err(|f| f.0)? {
                    Step::Done { user, reply } => {
                        assert_eq!(user, "bro,k=er");
                        client.verify(&reply)
                    }
                    Step::Continue(_) => panic!("SCRAM ends after client-final"),
                }
            };
            run("right", &credentials).unwrap();
            assert!(run("wrong", &credentials).unwrap_err().contains("invalid credentials"));
            // A server that does not know the password: the client's check of its signature.
            let mut client = ScramClient::new(m, "u", "right");
            let stranger = Credential::from_password(m, b"other", 4096);
            let first = format!("r={}xyz,s={},i=4096", client.nonce, B64.encode(&stranger.salt));
            client.respond(first.as_bytes()).unwrap();
            let forged = format!("v={}", B64.encode(vec![7u8; m.hash(b"").len()]));
            assert!(client.verify(forged.as_bytes()).unwrap_err().contains("signature is wrong"));
            assert!(client.respond(b"r=other,s=AAAA,i=4096").is_err(), "a nonce not extending ours");
        }
    }
}
