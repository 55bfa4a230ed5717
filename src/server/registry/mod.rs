//! Every broker setting, declared once: its name (Kafka's where Kafka has one), type, default,
//! bounds, whether it changes at runtime, whether a listener may have its own value, whether it
//! is secret, its documentation, what taking a value does, and the value in force. Parsing
//! (`BrokerConfig::set`), DescribeConfigs, (Incremental)AlterConfigs' checks and the broker
//! table of `docs/configuration.md` all come from [`GROUPS`]; a test fails when the docs and the
//! table differ (`TIDEMARK_WRITE_DOCS=1` writes them).
//!
//! Topic settings and the broker names that give their defaults (`log.retention.ms` for
//! `retention.ms`...) are [`crate::config::TOPIC_KEYS`]'s.

use crate::config::ConfigType;
use crate::server::broker_config::Effective;
use crate::server::broker_config::{
    sasl_mechanisms, BrokerConfig, AUTHORIZER, DEFAULT_SASL_MECHANISMS, LEGACY_AUTHORIZER,
};
use crate::server::{listeners, tls};
use anyhow::{bail, Context};
use std::path::PathBuf;
use std::time::Duration;

mod clients;
mod cluster;
pub mod limits;
mod node;
mod read;
mod security;

/// When a setting can change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// At start only (the configuration file, `--set`).
    Static,
    /// At runtime too, for the cluster (default) or one broker ((Incremental)AlterConfigs).
    Dynamic,
    /// At runtime for one broker only (a TLS listener's stores: they belong to one broker).
    PerBroker,
}

/// One value being taken: the setting's name as given (a listener's prefix included), its text,
/// and the bounds it must keep.
pub struct Given<'a> {
    pub key: &'a str,
    pub value: &'a str,
    range: Option<(i64, i64)>,
}

impl Given<'_> {
    /// The value, trimmed.
    pub fn text(&self) -> &str {
        self.value.trim()
    }

    /// An integer within the setting's bounds.
    pub fn int(&self) -> anyhow::Result<i64> {
        let (key, v) = (self.key, self.value);
        let n: i64 = v.trim().parse().with_context(|| format!("{key}={v}: not an integer"))?;
        if let Some((lo, hi)) = self.range {
            if !(lo..=hi).contains(&n) {
                bail!("{key}={n}: must be between {lo} and {hi}");
            }
        }
        Ok(n)
    }

    /// A duration in milliseconds within the setting's bounds.
    pub fn ms(&self) -> anyhow::Result<Duration> {
        Ok(Duration::from_millis(self.int()?.max(0) as u64))
    }

    pub fn flag(&self) -> anyhow::Result<bool> {
        match self.value.trim() {
            "true" => Ok(true),
            "false" => Ok(false),
            v => bail!("{}={v}: expected true or false", self.key),
        }
    }
}

type Take = fn(&mut BrokerConfig, &Given<'_>) -> anyhow::Result<()>;
type Show = fn(&BrokerConfig, &Effective) -> String;

/// A broker setting.
pub struct Setting {
    pub name: &'static str,
    pub kind: ConfigType,
    pub change: Change,
    /// Bounds of an integer, inclusive.
    pub range: Option<(i64, i64)>,
    /// The value in force when none is given, as DescribeConfigs shows it (`None`: worked out
    /// at startup from other settings, or none).
    pub default: Option<&'static str>,
    /// What values are valid, in words, where the type and bounds do not say it all.
    pub valid: &'static str,
    /// `listener.name.<listener>.<name>` sets it for one listener.
    pub per_listener: bool,
    /// Its value is never shown (DescribeConfigs gives none).
    pub sensitive: bool,
    /// Taken and checked, but it changes nothing here (Kafka's, kept so its files start).
    pub inert: bool,
    pub doc: &'static str,
    take: Take,
    show: Option<Show>,
}

/// Check the value only: the type and bounds.
fn check(_: &mut BrokerConfig, v: &Given<'_>) -> anyhow::Result<()> {
    match v.range {
        Some(_) => v.int().map(|_| ()),
        None => Ok(()),
    }
}

impl Setting {
    const fn new(name: &'static str, kind: ConfigType, doc: &'static str) -> Setting {
        Setting {
            name,
            kind,
            change: Change::Static,
            range: None,
            default: None,
            valid: "",
            per_listener: false,
            sensitive: false,
            inert: false,
            doc,
            take: check,
            show: None,
        }
    }

    const fn int(name: &'static str, lo: i64, hi: i64, default: &'static str, doc: &'static str) -> Setting {
        Setting { range: Some((lo, hi)), default: Some(default), ..Setting::new(name, ConfigType::Int, doc) }
    }

    const fn long(name: &'static str, lo: i64, hi: i64, default: &'static str, doc: &'static str) -> Setting {
        Setting { kind: ConfigType::Long, ..Setting::int(name, lo, hi, default, doc) }
    }

    const fn flag(name: &'static str, default: &'static str, doc: &'static str) -> Setting {
        Setting { default: Some(default), valid: "`true`, `false`", ..Setting::new(name, ConfigType::Boolean, doc) }
    }

    const fn text(name: &'static str, doc: &'static str) -> Setting {
        Setting::new(name, ConfigType::String, doc)
    }

    /// A TLS setting (per listener).
    const fn tls(name: &'static str, doc: &'static str) -> Setting {
        Setting { per_listener: true, take: take_tls, ..Setting::text(name, doc) }
    }

    /// Take `value` for this setting (`key`: as given, with a listener's prefix if any).
    pub fn take(&self, config: &mut BrokerConfig, key: &str, value: &str) -> anyhow::Result<()> {
        (self.take)(config, &Given { key, value, range: self.range })
    }

    /// The value in force: worked out from the settings, or the value given, or the default.
    pub fn value(&self, config: &BrokerConfig, effective: &Effective) -> Option<String> {
        match self.show {
            Some(show) => Some(show(config, effective)),
            None => config.settings.get(self.name).map(|v| v.trim().to_string()).or(self.default.map(str::to_string)),
        }
    }

    pub fn dynamic(&self) -> bool {
        self.change != Change::Static
    }

    /// What values are valid, in words (for the docs).
    pub fn valid_values(&self) -> String {
        let bound = |n: i64| match n {
            n if n == i32::MAX as i64 => "I32_MAX".to_string(),
            n if n == i64::MAX => "I64_MAX".to_string(),
            n if n == i16::MAX as i64 => "I16_MAX".to_string(),
            n => n.to_string(),
        };
        match (self.range, self.valid) {
            (Some((lo, hi)), "") => format!("{} to {}", bound(lo), bound(hi)),
            (Some((lo, hi)), valid) => format!("{} to {}; {valid}", bound(lo), bound(hi)),
            (None, valid) => valid.to_string(),
        }
    }
}

fn take_tls(_: &mut BrokerConfig, v: &Given<'_>) -> anyhow::Result<()> {
    let setting = listener_key(v.key).map_or(v.key, |(_, s)| s);
    tls::check(setting, v.value)
}

fn take_cluster(_: &mut BrokerConfig, v: &Given<'_>) -> anyhow::Result<()> {
    crate::cluster::settings::check(v.key, v.value)
}

/// A `listener.name.<listener>.<setting>` key: the listener and the setting.
pub fn listener_key(name: &str) -> Option<(&str, &str)> {
    name.strip_prefix("listener.name.")?.split_once('.')
}

/// Whether a setting changes at runtime for one broker only (a TLS listener's stores, a
/// listener's own SASL login).
pub fn dynamic_tls(name: &str) -> bool {
    broker(name).is_some_and(|s| s.change == Change::PerBroker)
}

/// Settings whose values DescribeConfigs does not show (Kafka's sensitive ones; SASL's JAAS
/// settings and any password too).
pub fn sensitive(name: &str) -> bool {
    let setting = listener_key(name).map_or(name, |(_, s)| s);
    broker(name).is_some_and(|s| s.sensitive) || setting.ends_with(".password") || setting.ends_with(".jaas.config")
}

/// The broker setting `name` (with or without a listener's prefix, where it may have one).
pub fn broker(name: &str) -> Option<&'static Setting> {
    if let Some((_, setting)) = listener_key(name) {
        // SASL's settings may also be per mechanism: `listener.name.<l>.<mechanism>.<setting>`.
        let per_mechanism = setting
            .split_once('.')
            .filter(|(m, _)| crate::security::sasl::MECHANISMS.iter().any(|x| x.eq_ignore_ascii_case(m)))
            .map(|(_, s)| s);
        return all().find(|s| s.per_listener && (s.name == setting || Some(s.name) == per_mechanism));
    }
    all().find(|s| s.name == name)
}

const I32: i64 = i32::MAX as i64;
const I16: i64 = i16::MAX as i64;

/// Every broker setting that is not a topic default, in groups (the docs' order).
pub const GROUPS: &[(&str, &[Setting])] = &[
    ("The node and its directories", node::NODE),
    ("Listeners", node::LISTENERS),
    ("Topics", node::TOPICS),
    ("Log compaction", node::COMPACTION),
    ("Replication", cluster::REPLICATION),
    ("The metadata quorum", cluster::QUORUM),
    ("Kafka's threads and sockets: accepted, no effect", node::INERT),
    ("Requests, connections and memory", clients::REQUESTS),
    ("Consumer groups and committed offsets", clients::GROUPS),
    ("Transactions", clients::TRANSACTIONS),
    ("Authentication and authorization", security::AUTH),
    ("TLS, per listener (`listener.name.<l>.<setting>`) or for every TLS listener", security::TLS),
];

/// Every broker setting, in the docs' order.
pub fn all() -> impl Iterator<Item = &'static Setting> {
    GROUPS.iter().flat_map(|(_, settings)| settings.iter())
}

/// The broker settings as Markdown: one table per group (the docs' broker section).
pub fn markdown() -> String {
    let mut out = String::new();
    for (group, settings) in GROUPS {
        out.push_str(&format!("\n#### {group}\n\n"));
        out.push_str("| Key | Type | Default | Valid | Changes | Meaning |\n|---|---|---|---|---|---|\n");
        for s in settings.iter() {
            out.push_str(&row(s));
        }
    }
    out.push('\n');
    out
}

/// One setting's row of the docs' table.
fn row(s: &Setting) -> String {
    let name = if s.per_listener { format!("`{}` (per listener)", s.name) } else { format!("`{}`", s.name) };
    let default = match s.default {
        Some("") => "empty".to_string(),
        Some(d) => format!("`{d}`"),
        None => "—".to_string(),
    };
    let change = match s.change {
        Change::Static => "at start",
        Change::Dynamic => "at runtime",
        Change::PerBroker => "at runtime, per broker",
    };
    let kind = format!("{:?}", s.kind).to_lowercase();
    let mut meaning = s.doc.to_string();
    if s.sensitive {
        meaning.push_str(" Never shown.");
    }
    format!("| {name} | {kind} | {default} | {} | {change} | {meaning} |\n", s.valid_values())
}

/// Every topic setting as Markdown ([`crate::config::TOPIC_KEYS`]): its type, default, the
/// broker settings that give its default (first wins), and what it does here.
pub fn topic_markdown() -> String {
    use crate::config::{Effect, TOPIC_KEYS};
    let mut out = String::from("| Key | Type | Default | Values | Broker default from | In tidemark | Meaning |\n");
    out.push_str("|---|---|---|---|---|---|---|\n");
    for k in TOPIC_KEYS {
        let kind = format!("{:?}", k.kind).to_lowercase();
        let default = if k.default.is_empty() { "(empty)".to_string() } else { format!("`{}`", k.default) };
        let synonyms: Vec<String> = k.synonyms.iter().map(|s| format!("`{}`", s.name)).collect();
        let from = if synonyms.is_empty() { "—".to_string() } else { synonyms.join(", ") };
        let effect = match k.effect {
            Effect::Applied => "applied".to_string(),
            Effect::Inert => "taken, no effect".to_string(),
            Effect::Only(v) => format!("`{v}` only"),
        };
        let values = k.rule.describe();
        out.push_str(&format!("| `{}` | {kind} | {default} | {values} | {from} | {effect} | {} |\n", k.name, k.doc));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::configs::DynamicConfigs;

    fn fresh() -> BrokerConfig {
        BrokerConfig::new(PathBuf::from("/tmp/x"), "127.0.0.1:9092", 1).unwrap()
    }

    /// Each setting is declared once: no name twice.
    #[test]
    fn names_are_unique() {
        let mut names: Vec<&str> = all().map(|s| s.name).collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(before, names.len(), "a setting is declared twice");
    }

    /// The declared default is the value in force when nothing is set, and taking it changes
    /// nothing (so the table's defaults and the code's agree).
    #[test]
    fn declared_defaults_are_the_defaults_in_force() {
        let c = fresh();
        let e = Effective::compute(&c, &DynamicConfigs::default()).unwrap();
        // Standalone, `__consumer_offsets` has one replica whatever is set.
        let standalone_differs = ["offsets.topic.replication.factor"];
        for s in all().filter(|s| s.show.is_some() && !standalone_differs.contains(&s.name)) {
            if let Some(default) = s.default {
                assert_eq!(s.value(&c, &e).as_deref(), Some(default), "{}", s.name);
                let mut taken = fresh();
                s.take(&mut taken, s.name, default).unwrap();
                assert_eq!(format!("{taken:?}"), format!("{c:?}"), "{}: its default changes the config", s.name);
            }
        }
    }

    /// A setting taken without effect says so in its documentation (DescribeConfigs shows it).
    #[test]
    fn inert_settings_say_so() {
        for s in all().filter(|s| s.inert) {
            assert!(s.doc.starts_with("Accepted"), "{}: {}", s.name, s.doc);
        }
        assert!(all().filter(|s| s.inert).count() >= 10);
    }

    /// Bounds are checked from the table: one below the lower bound is refused with it.
    #[test]
    fn bounds_come_from_the_table() {
        for s in all() {
            let Some((lo, _)) = s.range else { continue };
            let below = (lo - 1).to_string();
            let e = s.take(&mut fresh(), s.name, &below).unwrap_err().to_string();
            assert!(e.contains(&format!("must be between {lo}")), "{}: {e}", s.name);
        }
    }

    /// `docs/configuration.md`'s broker tables are this table and the fixed limits
    /// (`TIDEMARK_WRITE_DOCS=1` rewrites them).
    #[test]
    fn docs_list_every_broker_setting() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/configuration.md");
        let mut docs = std::fs::read_to_string(&path).unwrap();
        let write = std::env::var_os("TIDEMARK_WRITE_DOCS").is_some();
        let tables = [
            ("topic settings", topic_markdown()),
            ("broker settings", markdown()),
            ("fixed limits", limits::markdown()),
        ];
        for (name, table) in tables {
            let (start, end) = (format!("<!-- {name}: generated -->\n"), format!("<!-- end of {name} -->\n"));
            let (a, b) = (docs.find(&start).expect("start marker"), docs.find(&end).expect("end marker"));
            if write {
                docs = format!("{}{start}{table}{}", &docs[..a], &docs[b..]);
                continue;
            }
            assert!(
                docs[a + start.len()..b] == table,
                "docs/configuration.md's {name} differ from the code: run TIDEMARK_WRITE_DOCS=1 cargo test \
                 docs_list_every_broker_setting"
            );
        }
        if write {
            std::fs::write(&path, docs).unwrap();
        }
    }
}
