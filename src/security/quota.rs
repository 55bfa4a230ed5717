//! Client quotas as Kafka keeps and enforces them (KIP-546 entities, KIP-219 throttling),
//! without I/O: quota values per entity (user, client-id, or both; a missing name is the
//! default entity), the most specific one that applies to a client (Kafka's 8 levels), what
//! each client uses counted in a token bucket, and the throttle time a violation earns.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use std::collections::{BTreeMap, HashMap};

/// An entity: its components, (type, name) sorted by type; a `None` name is the default.
pub type Entity = Vec<(String, Option<String>)>;

/// The quota keys tidemark enforces.
pub const PRODUCER_BYTE_RATE: &str = "producer_byte_rate";
pub const CONSUMER_BYTE_RATE: &str = "consumer_byte_rate";
pub const REQUEST_PERCENTAGE: &str = "request_percentage";
/// Keys Kafka has for user and client-id entities (all accepted; the first three enforced).
const KEYS: [&str; 4] = [PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE, "controller_mutation_rate"];

pub const USER: &str = "user";
pub const CLIENT_ID: &str = "client-id";

/// Every entity's quota values.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Quotas {
    pub entries: BTreeMap<Entity, BTreeMap<String, f64>>,
}

/// The quotas file in the data directory.
pub const QUOTAS_FILE: &str = "quotas";

/// One change: an entity and its operations (key, value or `None` to remove).
pub type Change = (Entity, Vec<(String, Option<f64>)>);

impl Quotas {
    /// Check a change as Kafka's controller does; the reason it is refused, if it is.
    pub fn invalid(change: &Change) -> Option<String> {
        let (entity, ops) = change;
        if entity.is_empty() {
            return Some("Invalid empty client quota entity".into());
        }
        for (i, (t, name)) in entity.iter().enumerate() {
            if entity[..i].iter().any(|(u, _)| u == t) {
                return Some(format!("Duplicate {t} entity type"));
            }
            if t != USER && t != CLIENT_ID {
                return Some(format!("Unhandled client quota entity type: {t}"));
            }
            if name.as_deref() == Some("") {
                return Some(format!("Empty {t} not supported"));
            }
        }
        for (i, (k, v)) in ops.iter().enumerate() {
            if !KEYS.contains(&k.as_str()) {
                return Some(format!("Invalid configuration key {k}"));
            }
            if ops[..i].iter().any(|(j, _)| j == k) {
                return Some(format!("Duplicate quota key {k}"));
            }
            if let Some(v) = v {
                if !v.is_finite() || *v <= 0.0 {
                    return Some(format!("Illegal value for {k}: {v}"));
                }
                if k.ends_with("_byte_rate") && v.fract() != 0.0 {
                    return Some(format!("{k} must be a whole number"));
                }
            }
        }
        None
    }

    /// Apply a checked change.
    pub fn apply(&mut self, (entity, ops): Change) {
        let mut entity = entity;
        entity.sort();
        let values = self.entries.entry(entity.clone()).or_default();
        for (k, v) in ops {
            match v {
                Some(v) => {
                    values.insert(k, v);
                }
                None => {
                    values.remove(&k);
                }
            }
        }
        if values.is_empty() {
            self.entries.remove(&entity);
        }
    }

    /// The quota of `key` for a client, by Kafka's precedence (user and client-id, user with
    /// the default client, user, default user with client, defaults, default user, client-id,
    /// default client-id), with the sensor it is counted in: the entity's names with the
    /// client's actual ones for default components (so each user of a default quota has its
    /// own rate).
    pub fn applicable(&self, key: &str, user: &str, client: &str) -> Option<(f64, (String, String))> {
        let e = |u: Option<Option<&str>>, c: Option<Option<&str>>| {
            let mut v: Entity = Vec::new();
            if let Some(c) = c {
                v.push((CLIENT_ID.to_string(), c.map(str::to_string)));
            }
            if let Some(u) = u {
                v.push((USER.to_string(), u.map(str::to_string)));
            }
            v
        };
        let levels = [
            e(Some(Some(user)), Some(Some(client))),
            e(Some(Some(user)), Some(None)),
            e(Some(Some(user)), None),
            e(Some(None), Some(Some(client))),
            e(Some(None), Some(None)),
            e(Some(None), None),
            e(None, Some(Some(client))),
            e(None, Some(None)),
        ];
        for level in levels {
            if let Some(v) = self.entries.get(&level).and_then(|vals| vals.get(key)) {
                let has = |t: &str| level.iter().any(|(x, _)| x == t);
                let tags = (
                    if has(USER) { user.to_string() } else { String::new() },
                    if has(CLIENT_ID) { client.to_string() } else { String::new() },
                );
                return Some((*v, tags));
            }
        }
        None
    }

    /// DescribeClientQuotas: the entries whose entity matches every component (type, match
    /// type 0 exact name, 1 default, 2 any name), with no other type when `strict`.
    pub fn describe(
        &self,
        components: &[(String, i8, Option<String>)],
        strict: bool,
    ) -> Vec<(Entity, Vec<(String, f64)>)> {
        self.entries
            .iter()
            .filter(|(entity, _)| {
                components.iter().all(|(t, m, name)| {
                    entity.iter().any(|(et, en)| {
                        et == t
                            && match m {
                                0 => en == name,
                                1 => en.is_none(),
                                _ => true,
                            }
                    })
                }) && (!strict || entity.iter().all(|(et, _)| components.iter().any(|(t, _, _)| t == et)))
            })
            .map(|(e, v)| (e.clone(), v.iter().map(|(k, x)| (k.clone(), *x)).collect()))
            .collect()
    }

    /// The file's text: `version=1`, then one line per entity and key: the key, its value, and
    /// the entity's components as `type=name` in base64 (`type=` for the default).
    pub fn encode(&self) -> String {
        let mut out = String::from("version=1\n");
        for (entity, values) in &self.entries {
            let e: Vec<String> = entity
                .iter()
                .map(|(t, n)| format!("{t}={}", n.as_ref().map(|n| B64.encode(n)).unwrap_or_default()))
                .collect();
            for (k, v) in values {
                out.push_str(&format!("{k} {v} {}\n", e.join(" ")));
            }
        }
        out
    }

    pub fn decode(text: &str) -> Result<Quotas, String> {
        let mut lines = text.lines();
        if lines.next() != Some("version=1") {
            return Err("the first line is not version=1".into());
        }
        let mut out = Quotas::default();
        for (i, line) in lines.enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            let bad = |what: &str| format!("line {}: {what}", i + 2);
            let mut f = line.split(' ');
            let key = f.next().ok_or_else(|| bad("no key"))?.to_string();
            let value: f64 = f.next().and_then(|v| v.parse().ok()).ok_or_else(|| bad("value"))?;
            let mut entity: Entity = Vec::new();
            for c in f {
                let (t, n) = c.split_once('=').ok_or_else(|| bad("component"))?;
                let name = if n.is_empty() {
                    None
                } else {
                    Some(B64.decode(n).ok().and_then(|b| String::from_utf8(b).ok()).ok_or_else(|| bad("name"))?)
                };
                entity.push((t.to_string(), name));
            }
            out.apply((entity, vec![(key, Some(value))]));
        }
        Ok(out)
    }

    pub fn load(data_dir: &std::path::Path) -> anyhow::Result<Quotas> {
        crate::io::load_text(&data_dir.join(QUOTAS_FILE), Quotas::decode)
    }
}

/// Kafka's `quota.window.num` × `quota.window.size.seconds`: how many seconds of its quota a
/// client that was idle may spend at once (Kafka's sampled rate lets an idle client burst
/// as much).
const BURST_SECONDS: f64 = 11.0;

/// A token bucket (as Kafka's KIP-599 controller mutation quota and Redpanda's quotas are):
/// it fills at the quota's rate up to [`BURST_SECONDS`] of it; what a client uses is taken
/// out, and a client in debt is throttled until the bucket is back to zero. Unlike Kafka's
/// rate over 11 sampled windows, which forgets a burst when its window expires and lets a
/// client run 10-30% over its quota in steady state (measured), a bucket holds it to the
/// quota over any period longer than the burst.
#[derive(Debug, Clone)]
pub struct Bucket {
    tokens: f64,
    at: i64,
    /// The quota at the last use.
    bound: f64,
}

impl Bucket {
    /// A full bucket at `now` (ms).
    pub fn new(bound: f64, now: i64) -> Bucket {
        Bucket { tokens: bound * BURST_SECONDS, at: now, bound }
    }

    /// Take `value` out at `now` for a quota of `bound` per second: the throttle time (ms)
    /// the client earns, until the bucket is back to zero. `keep` false puts back a value
    /// that leaves the bucket in debt (the client is throttled for it all the same).
    pub fn take(&mut self, bound: f64, value: f64, now: i64, keep: bool) -> i64 {
        let elapsed = (now - self.at).max(0) as f64 / 1000.0;
        self.at = self.at.max(now);
        self.bound = bound;
        self.tokens = (self.tokens + elapsed * bound).min(bound * BURST_SECONDS);
        let left = self.tokens - value;
        // A value larger than a full bucket (a fetch of more than 11 s of the quota) is let
        // through into debt, or it would be refused for ever (Kafka caps such a fetch instead).
        let full = self.tokens >= bound * BURST_SECONDS;
        if left >= 0.0 || (!keep && full) {
            self.tokens = left;
            return 0;
        }
        if keep {
            self.tokens = left;
        }
        (-left / bound * 1000.0).ceil().min(i64::MAX as f64) as i64
    }
}

impl Bucket {
    /// Whether the bucket is full at `now` at the quota it was last used with.
    fn full(&self, now: i64) -> bool {
        let elapsed = (now - self.at).max(0) as f64 / 1000.0;
        self.tokens + elapsed * self.bound >= self.bound * BURST_SECONDS
    }
}

/// Every client's buckets, by quota key and sensor.
#[derive(Debug, Default)]
pub struct Sensors {
    buckets: HashMap<(String, String, String), Bucket>,
    /// Records since the last sweep of full buckets.
    since_sweep: usize,
}

impl Sensors {
    /// Count `value` against the client's `key` quota, as [`Quotas::applicable`] found it
    /// (its bound and sensor), and the throttle time (ms) it earns: at most 11 s for a byte
    /// rate (the span of Kafka's quota windows), 1 s for `request_percentage` (Kafka's request
    /// quota cap); the debt beyond it throttles the requests after. `keep`: false does not
    /// count a value that violates (Kafka's fetch, whose throttled answer is empty).
    pub fn record(
        &mut self,
        key: &str,
        (bound, (u, c)): (f64, (String, String)),
        value: f64,
        now: i64,
        keep: bool,
    ) -> i64 {
        // A full bucket is a new one: forget those of clients gone quiet (every client id
        // ever seen would otherwise stay), now and then.
        self.since_sweep += 1;
        if self.since_sweep >= 4096 {
            self.since_sweep = 0;
            self.buckets.retain(|_, b| !b.full(now));
        }
        let bucket = self.buckets.entry((key.to_string(), u, c)).or_insert_with(|| Bucket::new(bound, now));
        let cap = if key == REQUEST_PERCENTAGE { 1000 } else { (BURST_SECONDS * 1000.0) as i64 };
        bucket.take(bound, value, now, keep).min(cap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entity(parts: &[(&str, Option<&str>)]) -> Entity {
        let mut e: Entity = parts.iter().map(|(t, n)| (t.to_string(), n.map(str::to_string))).collect();
        e.sort();
        e
    }

    /// Kafka's precedence: user+client over user over default user over client-id; a default
    /// quota's sensor is per actual user.
    #[test]
    fn precedence() {
        let mut q = Quotas::default();
        for (e, v) in [
            (entity(&[(USER, None)]), 100.0),
            (entity(&[(USER, Some("alice"))]), 200.0),
            (entity(&[(USER, Some("alice")), (CLIENT_ID, Some("app"))]), 300.0),
            (entity(&[(CLIENT_ID, Some("tool"))]), 400.0),
        ] {
            q.apply((e, vec![(PRODUCER_BYTE_RATE.into(), Some(v))]));
        }
        let get = |u, c| q.applicable(PRODUCER_BYTE_RATE, u, c);
        assert_eq!(get("alice", "app"), Some((300.0, ("alice".into(), "app".into()))));
        assert_eq!(get("alice", "other"), Some((200.0, ("alice".into(), String::new()))));
        assert_eq!(
            get("bob", "tool"),
            Some((100.0, ("bob".into(), String::new()))),
            "a default user beats a client-id"
        );
        assert_eq!(q.applicable(CONSUMER_BYTE_RATE, "bob", "tool"), None);
        assert_eq!(Quotas::decode(&q.encode()), Ok(q.clone()));
        assert_eq!(q.describe(&[(USER.into(), 0, Some("alice".into()))], false).len(), 2);
        assert_eq!(q.describe(&[(USER.into(), 0, Some("alice".into()))], true).len(), 1);
        assert_eq!(q.describe(&[(USER.into(), 1, None)], false).len(), 1);
    }

    /// A bucket starts full (11 s of its quota), fills at the quota's rate, throttles a
    /// client in debt until it is back to zero; over a long run it lets through the quota's
    /// rate (plus the first burst) exactly; a refused fetch is not counted.
    #[test]
    fn buckets_and_throttles() {
        let mut b = Bucket::new(1000.0, 0);
        assert_eq!(b.take(1000.0, 11_000.0, 0, true), 0, "an idle client's burst");
        assert_eq!(b.take(1000.0, 500.0, 0, true), 500, "500 in debt at 1000/s");
        assert_eq!(b.take(1000.0, 0.0, 500, true), 0, "back to zero after the throttle");
        // A client sending as fast as the throttles allow, 300 a time for 60 s.
        let (mut now, mut sent) = (500, 0.0);
        while now < 60_500 {
            now += b.take(1000.0, 300.0, now, true).max(1);
            sent += 300.0;
        }
        let rate = sent / 60.0;
        assert!((1000.0..1006.0).contains(&rate), "the quota's rate: {rate}");
        let mut q = Quotas::default();
        q.apply((entity(&[(USER, None)]), vec![(CONSUMER_BYTE_RATE.into(), Some(1000.0))]));
        let mut s = Sensors::default();
        let applies = |u: &str| q.applicable(CONSUMER_BYTE_RATE, u, "c").unwrap();
        assert_eq!(
            s.record(CONSUMER_BYTE_RATE, applies("u"), 50_000.0, 0, false),
            0,
            "a fetch larger than a full bucket goes through, into debt"
        );
        assert_eq!(s.record(CONSUMER_BYTE_RATE, applies("u"), 100.0, 0, false), 11_000, "then waits, 11 s at most");
        assert_eq!(
            s.record(CONSUMER_BYTE_RATE, applies("u"), 100.0, 39_100, false),
            0,
            "the debt (39,000) is repaid at 39 s: the refused fetch was not counted"
        );
        // Sweeps forget full buckets only: a client in debt stays in debt.
        assert!(s.record(CONSUMER_BYTE_RATE, applies("debtor"), 40_000.0, 0, true) > 0);
        for i in 0..5000 {
            s.record(CONSUMER_BYTE_RATE, applies(&format!("u{i}")), 1.0, 20_000 + i, true);
        }
        assert!(s.buckets.len() < 5000, "full buckets swept");
        assert!(s.record(CONSUMER_BYTE_RATE, applies("debtor"), 1.0, 25_000, true) > 0, "debt kept");
        let mut r = Quotas::default();
        r.apply((entity(&[(USER, None)]), vec![(REQUEST_PERCENTAGE.into(), Some(0.001))]));
        let tiny = r.applicable(REQUEST_PERCENTAGE, "u", "c").unwrap();
        assert_eq!(s.record(REQUEST_PERCENTAGE, tiny, 100.0, 0, true), 1000, "request throttles stop at 1 s");
    }

    /// Kafka's checks of a change.
    #[test]
    fn invalid_changes() {
        let ok = (entity(&[(USER, Some("a"))]), vec![(PRODUCER_BYTE_RATE.to_string(), Some(1024.0))]);
        assert_eq!(Quotas::invalid(&ok), None);
        let bad = [
            (vec![], vec![]),
            (entity(&[(USER, Some(""))]), vec![]),
            (entity(&[("ip", Some("1.2.3.4"))]), vec![]),
            (entity(&[(USER, None)]), vec![("bogus".to_string(), Some(1.0))]),
            (entity(&[(USER, None)]), vec![(PRODUCER_BYTE_RATE.to_string(), Some(-1.0))]),
            (entity(&[(USER, None)]), vec![(PRODUCER_BYTE_RATE.to_string(), Some(1.5))]),
        ];
        for change in bad {
            assert!(Quotas::invalid(&change).is_some(), "{change:?}");
        }
    }
}
