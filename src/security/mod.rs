//! Authentication as Kafka does it, without I/O: SCRAM credentials (salted and hashed, never
//! the password: RFC 5802's StoredKey and ServerKey), the file they are kept in, and the server
//! side of the SASL mechanisms SCRAM-SHA-256, SCRAM-SHA-512 (RFC 5802, 7677) and PLAIN (checked
//! against the same SCRAM credentials). Hashing is ring's (already tidemark's TLS provider).
//!
//! Failure messages are Kafka's: a SCRAM exchange that fails for any reason (unknown user, wrong
//! password, a malformed message) gets one fixed message, so a client cannot tell whether a
//! user exists; an unknown user goes through the whole exchange with a made-up salt, failing
//! where a wrong password does.

pub mod acl;
pub mod mapping;
pub mod oauth;
pub mod quota;
pub mod sasl;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use ring::{digest, hmac, pbkdf2};
use std::collections::BTreeMap;
use std::num::NonZeroU32;

/// Kafka's bounds on SCRAM iterations.
pub const MIN_ITERATIONS: i32 = 4096;
pub const MAX_ITERATIONS: i32 = 16384;

/// A SCRAM mechanism (KIP-554 codes: 1 and 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mechanism {
    ScramSha256,
    ScramSha512,
}

impl Mechanism {
    pub const ALL: [Mechanism; 2] = [Mechanism::ScramSha256, Mechanism::ScramSha512];

    pub fn name(self) -> &'static str {
        match self {
            Mechanism::ScramSha256 => "SCRAM-SHA-256",
            Mechanism::ScramSha512 => "SCRAM-SHA-512",
        }
    }

    pub fn parse(name: &str) -> Option<Mechanism> {
        Mechanism::ALL.into_iter().find(|m| m.name().eq_ignore_ascii_case(name.trim()))
    }

    pub fn code(self) -> i8 {
        match self {
            Mechanism::ScramSha256 => 1,
            Mechanism::ScramSha512 => 2,
        }
    }

    pub fn from_code(code: i8) -> Option<Mechanism> {
        Mechanism::ALL.into_iter().find(|m| m.code() == code)
    }

    fn hmac(self) -> hmac::Algorithm {
        match self {
            Mechanism::ScramSha256 => hmac::HMAC_SHA256,
            Mechanism::ScramSha512 => hmac::HMAC_SHA512,
        }
    }

    fn digest(self) -> &'static digest::Algorithm {
        match self {
            Mechanism::ScramSha256 => &digest::SHA256,
            Mechanism::ScramSha512 => &digest::SHA512,
        }
    }

    fn pbkdf2(self) -> pbkdf2::Algorithm {
        match self {
            Mechanism::ScramSha256 => pbkdf2::PBKDF2_HMAC_SHA256,
            Mechanism::ScramSha512 => pbkdf2::PBKDF2_HMAC_SHA512,
        }
    }

    fn len(self) -> usize {
        self.digest().output_len()
    }

    pub(crate) fn mac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        hmac::sign(&hmac::Key::new(self.hmac(), key), data).as_ref().to_vec()
    }

    pub(crate) fn hash(self, data: &[u8]) -> Vec<u8> {
        digest::digest(self.digest(), data).as_ref().to_vec()
    }

    /// SaltedPassword = Hi(password, salt, iterations) (PBKDF2 with the mechanism's HMAC).
    pub fn salted_password(self, password: &[u8], salt: &[u8], iterations: i32) -> Vec<u8> {
        let mut out = vec![0u8; self.len()];
        let n = NonZeroU32::new(iterations.max(1) as u32).expect("at least 1");
        pbkdf2::derive(self.pbkdf2(), n, salt, password, &mut out);
        out
    }
}

/// A user's SCRAM credential for one mechanism: what the server keeps (RFC 5802 §3).
#[derive(Clone, PartialEq, Eq)]
pub struct Credential {
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
    pub iterations: i32,
}

/// Never the keys in a log line.
impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Credential {{ iterations: {} }}", self.iterations)
    }
}

impl Credential {
    /// From a salted password (what AlterUserScramCredentials carries).
    pub fn from_salted(m: Mechanism, salt: &[u8], salted_password: &[u8], iterations: i32) -> Credential {
        let client_key = m.mac(salted_password, b"Client Key");
        Credential {
            salt: salt.to_vec(),
            stored_key: m.hash(&client_key),
            server_key: m.mac(salted_password, b"Server Key"),
            iterations,
        }
    }

    /// From a password, with a fresh random salt.
    pub fn from_password(m: Mechanism, password: &[u8], iterations: i32) -> Credential {
        let salt = random_token(24).into_bytes();
        Credential::from_salted(m, &salt, &m.salted_password(password, &salt, iterations), iterations)
    }

    /// Whether `password` is this credential's (PLAIN against the stored SCRAM keys).
    pub fn matches(&self, m: Mechanism, password: &[u8]) -> bool {
        let salted = m.salted_password(password, &self.salt, self.iterations);
        constant_time_eq(&m.hash(&m.mac(&salted, b"Client Key")), &self.stored_key)
    }
}

/// Equal bytes, compared without an early exit.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Printable random characters (nonces, salts), from the OS.
pub fn random_token(n: usize) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let mut bytes = vec![0u8; n];
    if getrandom::fill(&mut bytes).is_err() {
        // No OS randomness at all: the process cannot run safely; refuse loudly.
        panic!("no random bytes from the operating system");
    }
    bytes.iter().map(|b| ALPHABET[*b as usize % ALPHABET.len()] as char).collect()
}

/// Every user's SCRAM credentials, by user and mechanism.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Credentials {
    pub users: BTreeMap<String, BTreeMap<Mechanism, Credential>>,
}

/// The credentials file in the data directory.
pub const CREDENTIALS_FILE: &str = "credentials";

impl Credentials {
    pub fn get(&self, user: &str, m: Mechanism) -> Option<&Credential> {
        self.users.get(user)?.get(&m)
    }

    /// Set (`Some`) or delete (`None`) a user's credential for a mechanism.
    pub fn set(&mut self, user: &str, m: Mechanism, c: Option<Credential>) {
        match c {
            Some(c) => {
                self.users.entry(user.to_string()).or_default().insert(m, c);
            }
            None => {
                if let Some(u) = self.users.get_mut(user) {
                    u.remove(&m);
                    if u.is_empty() {
                        self.users.remove(user);
                    }
                }
            }
        }
    }

    /// The file's text: a version line, then one line per credential: mechanism, iterations,
    /// salt, stored key, server key and user name, the last four in base64.
    pub fn encode(&self) -> String {
        let mut out = String::from("version=1\n");
        for (user, by) in &self.users {
            for (m, c) in by {
                out.push_str(&format!(
                    "{} {} {} {} {} {}\n",
                    m.name(),
                    c.iterations,
                    B64.encode(&c.salt),
                    B64.encode(&c.stored_key),
                    B64.encode(&c.server_key),
                    B64.encode(user.as_bytes())
                ));
            }
        }
        out
    }

    pub fn decode(text: &str) -> Result<Credentials, String> {
        let mut lines = text.lines();
        if lines.next() != Some("version=1") {
            return Err("the first line is not version=1".into());
        }
        let mut out = Credentials::default();
        for (i, line) in lines.enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            let bad = |what: &str| format!("line {}: {what}", i + 2);
            let f: Vec<&str> = line.split(' ').collect();
            if f.len() != 6 {
                return Err(bad("expected 6 fields"));
            }
            let m = Mechanism::parse(f[0]).ok_or_else(|| bad("unknown mechanism"))?;
            let iterations = f[1].parse().map_err(|_| bad("iterations"))?;
            let b = |s: &str| B64.decode(s).map_err(|_| bad("not base64"));
            let user = String::from_utf8(b(f[5])?).map_err(|_| bad("user name not UTF-8"))?;
            let c = Credential { salt: b(f[2])?, stored_key: b(f[3])?, server_key: b(f[4])?, iterations };
            out.set(&user, m, Some(c));
        }
        Ok(out)
    }

    /// Read the data directory's credentials (none when the file does not exist).
    pub fn load(data_dir: &std::path::Path) -> anyhow::Result<Credentials> {
        crate::io::load_text(&data_dir.join(CREDENTIALS_FILE), Credentials::decode)
    }
}

#[cfg(test)]
mod tests;
