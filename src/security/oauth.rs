//! SASL/OAUTHBEARER's server side with OIDC tokens (KIP-768): the client's message (RFC 7628:
//! `n,,` then `auth=Bearer <token>` between 0x01 separators) and the token, a JWT signed
//! by a key of the identity provider's JWKS, checked as Kafka's
//! `OAuthBearerValidatorCallbackHandler` checks it:
//!
//! - the signature, by the key the token's header names (`kid`), with the algorithm the
//!   header names among RS256/384/512, PS256/384/512, ES256/384 (never `none`, and never an
//!   algorithm the key is not for);
//! - `exp` required and in the future, `iat` and `nbf` (when present) not in the future, each
//!   allowing `sasl.oauthbearer.clock.skew.seconds`;
//! - the audience (`aud`, one value or a list) among `sasl.oauthbearer.expected.audience` when
//!   that is set, the issuer (`iss`) equal to `sasl.oauthbearer.expected.issuer` when set;
//! - the subject claim (`sasl.oauthbearer.sub.claim.name`, `sub` by default) present: it is the
//!   principal, `User:<subject>`.
//!
//! Pure: the keys come in as a parsed [`Jwks`]; fetching and refreshing them is the server's.

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64URL;
use base64::Engine;
use ring::signature;
use serde_json::Value;

/// The settings a token is checked against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expectations {
    /// `sasl.oauthbearer.expected.audience` (empty: any).
    pub audience: Vec<String>,
    /// `sasl.oauthbearer.expected.issuer` (none: any).
    pub issuer: Option<String>,
    /// `sasl.oauthbearer.clock.skew.seconds`.
    pub clock_skew_s: i64,
    /// `sasl.oauthbearer.sub.claim.name`.
    pub subject_claim: String,
}

impl Default for Expectations {
    fn default() -> Self {
        Expectations { audience: Vec::new(), issuer: None, clock_skew_s: 30, subject_claim: "sub".into() }
    }
}

/// What a listener checks OAUTHBEARER tokens with: the identity provider's keys and the
/// settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Validator {
    pub jwks: Jwks,
    pub expect: Expectations,
}

/// One verification key of a JWKS document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key {
    pub kid: Option<String>,
    pub kind: KeyKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyKind {
    /// RSA: modulus and exponent, big-endian.
    Rsa { n: Vec<u8>, e: Vec<u8> },
    /// An EC point, uncompressed (`04 || x || y`), on P-256 or P-384.
    Ec { curve: Curve, point: Vec<u8> },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Curve {
    P256,
    P384,
}

/// A JWKS document's verification keys (keys of other types or uses are left out).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Jwks {
    pub keys: Vec<Key>,
}

impl Jwks {
    /// Parse a JWKS document (RFC 7517): `{"keys": [...]}`.
    pub fn parse(text: &str) -> Result<Jwks, String> {
        let doc: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        let keys = doc.get("keys").and_then(Value::as_array).ok_or("no \"keys\" array")?;
        let mut out = Vec::new();
        for k in keys {
            let text = |name: &str| k.get(name).and_then(Value::as_str);
            if text("use").is_some_and(|u| u != "sig") {
                continue;
            }
            let bytes = |name: &str| -> Result<Vec<u8>, String> {
                let v = text(name).ok_or_else(|| format!("a key without {name}"))?;
                B64URL.decode(v.trim_end_matches('=')).map_err(|_| format!("{name} is not base64url"))
            };
            let kind = match text("kty") {
                Some("RSA") => KeyKind::Rsa { n: bytes("n")?, e: bytes("e")? },
                Some("EC") => {
                    let curve = match text("crv") {
                        Some("P-256") => Curve::P256,
                        Some("P-384") => Curve::P384,
                        _ => continue,
                    };
                    let mut point = vec![4u8];
                    point.extend(bytes("x")?);
                    point.extend(bytes("y")?);
                    KeyKind::Ec { curve, point }
                }
                _ => continue,
            };
            out.push(Key { kid: text("kid").map(str::to_string), kind });
        }
        Ok(Jwks { keys: out })
    }
}

/// A token checked: its principal's name and when it expires (ms since the epoch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Validated {
    pub subject: String,
    pub expires_ms: i64,
}

/// The bearer token of an OAUTHBEARER client-first message (RFC 7628 §3.1):
/// `n,[a=authzid],` 0x01 `auth=Bearer <token>` 0x01 (other key=value pairs, Kafka's SASL
/// extensions, allowed) 0x01.
pub fn bearer_token(message: &[u8]) -> Result<&str, String> {
    let text = std::str::from_utf8(message).map_err(|_| "the message is not UTF-8")?;
    let rest = text.strip_prefix("n,").ok_or("no GS2 header (n,)")?;
    let (_authzid, pairs) = rest.split_once(',').ok_or("no GS2 header (n,,)")?;
    let pairs = pairs.strip_prefix('\x01').ok_or("no key/value pairs")?;
    for pair in pairs.split('\x01').filter(|p| !p.is_empty()) {
        if let Some(value) = pair.strip_prefix("auth=") {
            let token = value
                .strip_prefix("Bearer ")
                .or_else(|| value.strip_prefix("bearer "))
                .ok_or("auth is not a Bearer token")?;
            return Ok(token.trim());
        }
    }
    Err("no auth=Bearer token".into())
}

/// Check `token` (a compact JWS) at `now_ms` against `keys` and `expect`; why not, in words.
pub fn validate(token: &str, keys: &Jwks, expect: &Expectations, now_ms: i64) -> Result<Validated, String> {
    let mut parts = token.split('.');
    let (Some(h), Some(p), Some(s), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
        return Err("not a signed JWT (three base64url parts)".into());
    };
    let decode = |part: &str, what: &str| B64URL.decode(part).map_err(|_| format!("the {what} is not base64url"));
    let json = |bytes: Vec<u8>, what: &str| -> Result<Value, String> {
        serde_json::from_slice(&bytes).map_err(|_| format!("the {what} is not JSON"))
    };
    let header = json(decode(h, "header")?, "header")?;
    let claims = json(decode(p, "payload")?, "payload")?;
    let sig = decode(s, "signature")?;
    let alg = header.get("alg").and_then(Value::as_str).ok_or("the header names no alg")?;
    let kid = header.get("kid").and_then(Value::as_str);
    let candidates: Vec<&Key> = keys.keys.iter().filter(|k| kid.is_none() || k.kid.as_deref() == kid).collect();
    if candidates.is_empty() {
        return Err(format!("no key with kid {} in the JWKS", kid.unwrap_or("(none)")));
    }
    let signed = &token.as_bytes()[..h.len() + 1 + p.len()];
    if !candidates.iter().any(|k| verify(alg, &k.kind, signed, &sig)) {
        return Err(format!("the signature does not verify ({alg})"));
    }
    let skew_ms = expect.clock_skew_s.max(0) * 1000;
    let time = |name: &str| claims.get(name).and_then(Value::as_f64).map(|s| (s * 1000.0) as i64);
    let expires_ms = time("exp").ok_or("no exp claim")?;
    if expires_ms + skew_ms <= now_ms {
        return Err("the token has expired".into());
    }
    for name in ["iat", "nbf"] {
        if time(name).is_some_and(|t| t - skew_ms > now_ms) {
            return Err(format!("the {name} claim is in the future"));
        }
    }
    if !expect.audience.is_empty() {
        let aud: Vec<&str> = match claims.get("aud") {
            Some(Value::String(a)) => vec![a.as_str()],
            Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !aud.iter().any(|a| expect.audience.iter().any(|e| e == a)) {
            return Err(format!("the audience {aud:?} is not among the expected {:?}", expect.audience));
        }
    }
    if let Some(issuer) = &expect.issuer {
        if claims.get("iss").and_then(Value::as_str) != Some(issuer.as_str()) {
            return Err(format!("the issuer is not {issuer}"));
        }
    }
    let subject = claims.get(&expect.subject_claim).and_then(Value::as_str).filter(|s| !s.trim().is_empty());
    let subject = subject.ok_or_else(|| format!("no {} claim", expect.subject_claim))?;
    Ok(Validated { subject: subject.to_string(), expires_ms })
}

/// Whether `sig` signs `signed` with key `key` by algorithm `alg`.
fn verify(alg: &str, key: &KeyKind, signed: &[u8], sig: &[u8]) -> bool {
    match key {
        KeyKind::Rsa { n, e } => {
            let params: &signature::RsaParameters = match alg {
                "RS256" => &signature::RSA_PKCS1_2048_8192_SHA256,
                "RS384" => &signature::RSA_PKCS1_2048_8192_SHA384,
                "RS512" => &signature::RSA_PKCS1_2048_8192_SHA512,
                "PS256" => &signature::RSA_PSS_2048_8192_SHA256,
                "PS384" => &signature::RSA_PSS_2048_8192_SHA384,
                "PS512" => &signature::RSA_PSS_2048_8192_SHA512,
                _ => return false,
            };
            signature::RsaPublicKeyComponents { n: n.as_slice(), e: e.as_slice() }.verify(params, signed, sig).is_ok()
        }
        KeyKind::Ec { curve, point } => {
            let algorithm: &dyn signature::VerificationAlgorithm = match (alg, curve) {
                ("ES256", Curve::P256) => &signature::ECDSA_P256_SHA256_FIXED,
                ("ES384", Curve::P384) => &signature::ECDSA_P384_SHA384_FIXED,
                _ => return false,
            };
            signature::UnparsedPublicKey::new(algorithm, point).verify(signed, sig).is_ok()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::rand::SystemRandom;
    use ring::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};

    struct Issuer {
        pair: EcdsaKeyPair,
        rng: SystemRandom,
    }

    impl Issuer {
        fn new() -> Issuer {
            let rng = SystemRandom::new();
            let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
            let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng).unwrap();
            Issuer { pair, rng }
        }

        fn jwks(&self, kid: &str) -> String {
            let point = self.pair.public_key().as_ref();
            format!(
                r#"{{"keys":[{{"kty":"RSA","kid":"other","n":"AQAB","e":"AQAB"}},{{"kty":"EC","crv":"P-256","kid":"{kid}","use":"sig","x":"{}","y":"{}"}}]}}"#,
                B64URL.encode(&point[1..33]),
                B64URL.encode(&point[33..65])
            )
        }

        fn token(&self, header: &str, claims: &str) -> String {
            let signed = format!("{}.{}", B64URL.encode(header), B64URL.encode(claims));
            let sig = self.pair.sign(&self.rng, signed.as_bytes()).unwrap();
            format!("{signed}.{}", B64URL.encode(sig.as_ref()))
        }
    }

    const NOW_MS: i64 = 1_800_000_000_000;

    /// Kafka's checks of an OIDC token: a good ES256 token names its subject; a tampered
    /// payload, another key, `alg: none`, an unknown kid, an expired token (past the skew), a
    /// future iat, a wrong audience or issuer, and a missing subject are each refused with
    /// the reason.
    #[test]
    fn tokens_checked_as_kafka_checks_them() {
        let idp = Issuer::new();
        let jwks = Jwks::parse(&idp.jwks("k1")).unwrap();
        assert_eq!(jwks.keys.len(), 2);
        let expect = Expectations {
            audience: vec!["kafka".into()],
            issuer: Some("https://idp.example".into()),
            ..Default::default()
        };
        let header = r#"{"alg":"ES256","kid":"k1","typ":"JWT"}"#;
        let claims = |exp: i64, extra: &str| {
            format!(
                r#"{{"sub":"alice","aud":["x","kafka"],"iss":"https://idp.example","iat":1799999990,"exp":{exp}{extra}}}"#
            )
        };
        let good = idp.token(header, &claims(1_800_000_600, ""));
        let v = validate(&good, &jwks, &expect, NOW_MS).unwrap();
        assert_eq!((v.subject.as_str(), v.expires_ms), ("alice", 1_800_000_600_000));

        let refused = |token: &str, why: &str| {
            let e = validate(token, &jwks, &expect, NOW_MS).unwrap_err();
            assert!(e.contains(why), "{e} (expected: {why})");
        };
        let mut parts: Vec<String> = good.split('.').map(str::to_string).collect();
        parts[1] = B64URL.encode(claims(1_900_000_000, ""));
        refused(&parts.join("."), "signature");
        refused(&Issuer::new().token(header, &claims(1_800_000_600, "")), "signature");
        let none =
            format!("{}.{}.", B64URL.encode(r#"{"alg":"none","kid":"k1"}"#), B64URL.encode(claims(1_800_000_600, "")));
        refused(&none, "signature");
        refused(&idp.token(r#"{"alg":"ES256","kid":"k9"}"#, &claims(1_800_000_600, "")), "no key with kid k9");
        refused(&idp.token(header, &claims(1_799_999_960, "")), "expired");
        assert!(
            validate(&idp.token(header, &claims(1_799_999_980, "")), &jwks, &expect, NOW_MS).is_ok(),
            "within the skew"
        );
        refused(&idp.token(header, &claims(1_800_000_600, r#","nbf":1800000100"#)), "nbf");
        let other_aud = Expectations { audience: vec!["billing".into()], ..expect.clone() };
        assert!(validate(&good, &jwks, &other_aud, NOW_MS).unwrap_err().contains("audience"));
        let other_iss = Expectations { issuer: Some("https://evil".into()), ..expect.clone() };
        assert!(validate(&good, &jwks, &other_iss, NOW_MS).unwrap_err().contains("issuer"));
        let by_email = Expectations { subject_claim: "email".into(), ..expect.clone() };
        assert!(validate(&good, &jwks, &by_email, NOW_MS).unwrap_err().contains("no email claim"));
        refused("a.b", "three");
    }

    /// RFC 7628's client-first message: the token after `auth=Bearer `, extensions allowed;
    /// a message without the GS2 header or the auth pair refused.
    #[test]
    fn client_first_message() {
        assert_eq!(bearer_token(b"n,,\x01auth=Bearer abc.def.ghi\x01\x01").unwrap(), "abc.def.ghi");
        assert_eq!(bearer_token(b"n,a=alice,\x01traceId=7\x01auth=Bearer t\x01\x01").unwrap(), "t");
        assert!(bearer_token(b"\x01auth=Bearer t\x01\x01").is_err());
        assert!(bearer_token(b"n,,\x01host=x\x01\x01").is_err());
        assert!(bearer_token(b"n,,\x01auth=Basic dXNlcg==\x01\x01").is_err());
    }
}
