//! The SASL mechanisms on arbitrary client messages: never a panic, and never authenticated
//! without the password. Each input is split at 0xFF bytes into messages; its first byte picks
//! the mechanism (SCRAM-SHA-256, SCRAM-SHA-512, PLAIN, OAUTHBEARER). The one user's password is
//! not reachable from an input (it is 32 random-looking bytes the fuzzer would have to guess),
//! so an exchange that completes is a bug. OAUTHBEARER's messages are also checked as tokens
//! against a JWKS of an EC and an RSA key whose private halves exist nowhere: none validates.

use std::sync::OnceLock;
use tidemark::security::sasl::{Exchange, Step, MECHANISMS};
use tidemark::security::{Credential, Credentials, Mechanism};

const PASSWORD: &[u8] = b"q8V2nX0rT5wL1mZ7cB4kP9sD3fH6jG0a";

fn credentials() -> &'static Credentials {
    static C: OnceLock<Credentials> = OnceLock::new();
    C.get_or_init(|| {
        let mut c = Credentials::default();
        for m in Mechanism::ALL {
            c.set("user", m, Some(Credential::from_password(m, PASSWORD, 4096)));
        }
        c
    })
}

/// Public keys only (made once with Python's `cryptography`, the private keys thrown away).
const JWKS: &str = r#"{"keys": [{"kty": "EC", "crv": "P-256", "kid": "e", "x": "qwKcyQ-1UC9EfyBIHMh4RKki30nt8p2PKi6D4VlrxJs", "y": "qfBGupPk70rsmjjfnzeB-SfXFGEGueKbsfduoaDXt0Q"}, {"kty": "RSA", "kid": "r", "n": "vA3WZegZJRcLKvGINpI5pCzzADvOVR0URSR8P8WxxMPNIHCHemd4WFrxhLHA4iD0rJMcs_POuC8mPT3CAIinyoP1LT9x-50kF8rv4EMuCM65yHWAbcPa4msT8tsTqQ7wxhVq6jFdN6eaoz00dZToJJLgAu9URM0ie-eYIjmUIfcXHCLfj-oIKnnYsxmyGQXiZgY-klCu3nGRzWz1Se2aYu_YRPplGvZU4_JZGZeDSgoY8-ISErGTMPCa-PTd7pIjlzPc2tF_UTV5rG6dwwOEkRJ8pF9FffD3d8CArZEyKOmJXcLCKI44K3XpNEmxMsAaU0vUC6oTpW1XI5VUe4lHmw", "e": "AQAB"}]}"#;

/// One input: what the fuzz target and the seed-replay test both run.
pub fn run(data: &[u8]) {
    use tidemark::security::oauth;
    let Some((first, rest)) = data.split_first() else { return };
    let mechanism = MECHANISMS[*first as usize % MECHANISMS.len()];
    if mechanism == "OAUTHBEARER" {
        static KEYS: OnceLock<oauth::Jwks> = OnceLock::new();
        let keys = KEYS.get_or_init(|| oauth::Jwks::parse(JWKS).expect("the JWKS parses"));
        let token = oauth::bearer_token(rest).unwrap_or_else(|_| std::str::from_utf8(rest).unwrap_or(""));
        let checked = oauth::validate(token, keys, &oauth::Expectations::default(), 1_800_000_000_000);
        assert!(checked.is_err(), "a token validated without the private key");
    }
    let mut x = Exchange::start(mechanism).expect("a served mechanism");
    for message in rest.split(|b| *b == 0xff).take(4) {
        match x.step(message, credentials()) {
            Ok(Step::Done { .. }) => panic!("authenticated without the password"),
            Ok(Step::Continue(_)) => {}
            Err(_) => return,
        }
    }
}
