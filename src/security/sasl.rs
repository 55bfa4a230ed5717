//! The server side of a SASL exchange: SCRAM-SHA-256/512 (RFC 5802: client-first,
//! server-first, client-final, server-final), PLAIN (`authzid NUL authcid NUL password`) and
//! OAUTHBEARER (RFC 7628 with an OIDC token, [`super::oauth`]), each a state machine fed the
//! client's messages and answering the next message, or the authenticated user at the end,
//! or the failure message to send.

use super::{constant_time_eq, random_token, Credential, Credentials, Mechanism, MIN_ITERATIONS};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;

/// The SASL mechanisms tidemark serves.
pub const MECHANISMS: [&str; 4] = ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN", "OAUTHBEARER"];

/// What a step of the exchange gives.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Send these bytes; the client answers.
    Continue(Vec<u8>),
    /// Authenticated as `user`; send `reply` (possibly empty).
    Done { user: String, reply: Vec<u8> },
}

/// A failed exchange: the message the client is told.
#[derive(Debug, Clone, PartialEq)]
pub struct Failed(pub String);

/// One exchange.
#[derive(Debug)]
pub enum Exchange {
    Plain,
    Scram(Mechanism, Scram),
    OAuthBearer,
}

/// Where a SCRAM exchange is.
#[derive(Debug)]
pub enum Scram {
    First,
    Final {
        user: String,
        credential: Credential,
        /// No such user: the exchange goes on with a made-up credential and fails at the end.
        unknown: bool,
        client_first_bare: String,
        server_first: String,
        nonce: String,
    },
    Done,
}

impl Exchange {
    /// An exchange of `mechanism` (its name as the client sent it), if it is one of ours.
    pub fn start(mechanism: &str) -> Option<Exchange> {
        match mechanism {
            "PLAIN" => Some(Exchange::Plain),
            "OAUTHBEARER" => Some(Exchange::OAuthBearer),
            m => Mechanism::parse(m).filter(|x| x.name() == m).map(|x| Exchange::Scram(x, Scram::First)),
        }
    }

    pub fn mechanism(&self) -> &'static str {
        match self {
            Exchange::Plain => "PLAIN",
            Exchange::Scram(m, _) => m.name(),
            Exchange::OAuthBearer => "OAUTHBEARER",
        }
    }

    /// Feed the client's next message.
    /// The next step, its costly part (PLAIN's password hashing) off the shard's thread, on
    /// glommio's blocking pool: a PLAIN login with 16384 iterations does not stall the
    /// partitions of its shard.
    /// OAUTHBEARER's token is checked against `oauth` (none: the listener has no validator,
    /// and every token is refused).
    pub async fn step_off_thread(
        &mut self,
        message: &[u8],
        credentials: &Credentials,
        oauth: Option<&super::oauth::Validator>,
    ) -> Result<Step, Failed> {
        match self {
            Exchange::Plain => {
                let check = PlainCheck::parse(message, credentials)?;
                glommio::executor().spawn_blocking(move || check.verify()).await
            }
            Exchange::OAuthBearer => oauth_bearer(message, oauth),
            _ => self.step(message, credentials),
        }
    }

    pub fn step(&mut self, message: &[u8], credentials: &Credentials) -> Result<Step, Failed> {
        match self {
            Exchange::Plain => plain(message, credentials),
            Exchange::OAuthBearer => oauth_bearer(message, None),
            Exchange::Scram(m, state) => {
                let m = *m;
                let generic = || {
                    Failed(format!(
                        "Authentication failed during authentication due to invalid credentials with SASL mechanism {}",
                        m.name()
                    ))
                };
                let text = std::str::from_utf8(message).map_err(|_| generic())?;
                match std::mem::replace(state, Scram::Done) {
                    Scram::First => {
                        let (next, reply) =
                            client_first(m, text, credentials).map_err(|e| e.unwrap_or_else(generic))?;
                        *state = next;
                        Ok(Step::Continue(reply.into_bytes()))
                    }
                    Scram::Final { user, credential, unknown, client_first_bare, server_first, nonce } => {
                        let ok = client_final(m, text, &credential, &client_first_bare, &server_first, &nonce);
                        match ok {
                            Some(signature) if !unknown => Ok(Step::Done { user, reply: signature.into_bytes() }),
                            _ => Err(generic()),
                        }
                    }
                    Scram::Done => Err(generic()),
                }
            }
        }
    }
}

/// A SASL name: `=2C` is `,`, `=3D` is `=`, no other `=`.
fn sasl_name(s: &str) -> Option<String> {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find('=') {
        out.push_str(&rest[..i]);
        let esc = rest.get(i..i + 3)?;
        out.push(match esc {
            "=2C" => ',',
            "=3D" => '=',
            _ => return None,
        });
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    (!out.is_empty()).then_some(out)
}

/// A stable salt for a name nobody has: HMAC of the name under a secret of this process.
fn fake_salt(m: Mechanism, user: &str) -> Vec<u8> {
    static SECRET: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let secret = SECRET.get_or_init(|| random_token(32));
    let mac = m.mac(secret.as_bytes(), user.as_bytes());
    B64.encode(&mac[..18]).into_bytes()
}

/// client-first: `n,[a=authzid],n=user,r=nonce[,ext=value...]`. `Err(None)`: the generic
/// failure; `Err(Some(_))`: a failure Kafka names.
fn client_first(m: Mechanism, text: &str, credentials: &Credentials) -> Result<(Scram, String), Option<Failed>> {
    let rest = text.strip_prefix("n,").ok_or(None)?;
    let (authzid, bare) = rest.split_once(',').ok_or(None)?;
    let mut fields = bare.split(',');
    let user = sasl_name(fields.next().and_then(|f| f.strip_prefix("n=")).ok_or(None)?).ok_or(None)?;
    let client_nonce = fields.next().and_then(|f| f.strip_prefix("r=")).ok_or(None)?;
    if client_nonce.is_empty() || !client_nonce.bytes().all(|b| (0x21..=0x7e).contains(&b)) {
        return Err(None);
    }
    for ext in fields {
        let (k, v) = ext.split_once('=').ok_or(None)?;
        // Delegation tokens are not served.
        if k == "tokenauth" && v == "true" {
            return Err(None);
        }
    }
    if !authzid.is_empty() {
        let a = authzid.strip_prefix("a=").and_then(sasl_name).ok_or(None)?;
        if a != user {
            let message = "Authentication failed: Client requested an authorization id that is different from username";
            return Err(Some(Failed(message.to_string())));
        }
    }
    let (credential, unknown) = match credentials.get(&user, m) {
        Some(c) => (c.clone(), false),
        None => {
            // RFC 5802 §9: a made-up salt that is the same on every attempt for this name, so
            // two exchanges do not tell an unknown user from a known one.
            let salt = fake_salt(m, &user);
            (Credential::from_salted(m, &salt, &random_token(32).into_bytes(), MIN_ITERATIONS), true)
        }
    };
    let nonce = format!("{client_nonce}{}", random_token(24));
    let server_first = format!("r={nonce},s={},i={}", B64.encode(&credential.salt), credential.iterations);
    let state = Scram::Final {
        user,
        credential,
        unknown,
        client_first_bare: bare.to_string(),
        server_first: server_first.clone(),
        nonce,
    };
    Ok((state, server_first))
}

/// client-final: `c=...,r=nonce[,...],p=proof`. The server-final message (`v=signature`) if
/// the proof is the credential's.
fn client_final(
    m: Mechanism,
    text: &str,
    credential: &Credential,
    client_first_bare: &str,
    server_first: &str,
    nonce: &str,
) -> Option<String> {
    let at = text.rfind(",p=")?;
    let (without_proof, proof) = (&text[..at], &text[at + 3..]);
    let mut fields = without_proof.split(',');
    fields.next()?.strip_prefix("c=")?;
    // The nonce must end with the one the server sent, as Kafka checks it: librdkafka before
    // 2.6.1 (Debian's kcat) repeats its own nonce in front of it. The proof below covers
    // this message, nonce included, so the check is no weaker for it.
    if !fields.next()?.strip_prefix("r=")?.ends_with(nonce) {
        return None;
    }
    let proof = B64.decode(proof).ok()?;
    let auth_message = format!("{client_first_bare},{server_first},{without_proof}");
    let client_signature = m.mac(&credential.stored_key, auth_message.as_bytes());
    if proof.len() != client_signature.len() {
        return None;
    }
    let client_key: Vec<u8> = proof.iter().zip(&client_signature).map(|(a, b)| a ^ b).collect();
    if !constant_time_eq(&m.hash(&client_key), &credential.stored_key) {
        return None;
    }
    Some(format!("v={}", B64.encode(m.mac(&credential.server_key, auth_message.as_bytes()))))
}

/// OAUTHBEARER: the client's one message, its token validated (the reason goes to the log and
/// to the client, as the token is the client's own).
fn oauth_bearer(message: &[u8], oauth: Option<&super::oauth::Validator>) -> Result<Step, Failed> {
    let refused = |why: String| Failed(format!("Authentication failed: invalid_token: {why}"));
    let token = super::oauth::bearer_token(message).map_err(refused)?;
    let oauth = oauth.ok_or_else(|| refused("no token validator on this listener".into()))?;
    let now_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
    let v = super::oauth::validate(token, &oauth.jwks, &oauth.expect, now_ms).map_err(refused)?;
    Ok(Step::Done { user: v.subject, reply: Vec::new() })
}

/// PLAIN: `authzid NUL authcid NUL password`, checked against the user's SCRAM credentials.
fn plain(message: &[u8], credentials: &Credentials) -> Result<Step, Failed> {
    PlainCheck::parse(message, credentials)?.verify()
}

/// A PLAIN message read and its user's stored credentials found: what is left is the costly
/// part (hashing the password once per SCRAM credential), which owns everything it needs so
/// that it can run off the shard's thread.
pub struct PlainCheck {
    user: String,
    password: Vec<u8>,
    credentials: Vec<(Mechanism, Credential)>,
}

impl PlainCheck {
    /// Read `authzid NUL user NUL password`; Kafka's messages for a malformed one.
    pub fn parse(message: &[u8], credentials: &Credentials) -> Result<PlainCheck, Failed> {
        let tokens: Vec<&[u8]> = message.split(|b| *b == 0).collect();
        if tokens.len() != 3 {
            return Err(Failed(format!("Invalid SASL/PLAIN response: expected 3 tokens, got {}", tokens.len())));
        }
        let (authzid, user, password) = (tokens[0], tokens[1], tokens[2]);
        let user = std::str::from_utf8(user)
            .map_err(|_| Failed("Authentication failed: Invalid username or password".into()))?;
        if user.is_empty() {
            return Err(Failed("Authentication failed: username not specified".into()));
        }
        if password.is_empty() {
            return Err(Failed("Authentication failed: password not specified".into()));
        }
        if !authzid.is_empty() && authzid != user.as_bytes() {
            let message = "Authentication failed: Client requested an authorization id that is different from username";
            return Err(Failed(message.into()));
        }
        let found = Mechanism::ALL.iter().filter_map(|m| credentials.get(user, *m).map(|c| (*m, c.clone())));
        Ok(PlainCheck { user: user.to_string(), password: password.to_vec(), credentials: found.collect() })
    }

    /// Check the password against every stored credential of the user (no early exit; an
    /// unknown user costs one hash too, so the answer's timing does not tell whether the user
    /// exists).
    pub fn verify(self) -> Result<Step, Failed> {
        let mut ok = false;
        for (m, c) in &self.credentials {
            ok |= c.matches(*m, &self.password);
        }
        if self.credentials.is_empty() {
            let _ = Mechanism::ScramSha256.salted_password(&self.password, b"no such user", MIN_ITERATIONS);
        }
        if !ok {
            return Err(Failed("Authentication failed: Invalid username or password".into()));
        }
        Ok(Step::Done { user: self.user, reply: Vec::new() })
    }
}
