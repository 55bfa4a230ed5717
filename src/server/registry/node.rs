//! The node, its directories and listeners, topics, compaction, and Kafka's thread and socket
//! settings tidemark takes without effect.

use super::*;

/// The node and its directories.
pub const NODE: &[Setting] = &[
    Setting {
        take: |c, v| {
            c.node_id = v.int()? as i32;
            Ok(())
        },
        show: Some(|c, _| c.node_id.to_string()),
        ..Setting::int("node.id", 0, I32, "0", "The node id in Metadata, FindCoordinator and DescribeCluster answers.")
    },
    Setting {
        take: |c, v| {
            c.node_id = v.int()? as i32;
            Ok(())
        },
        show: Some(|c, _| c.node_id.to_string()),
        ..Setting::int("broker.id", 0, I32, "0", "The node id (Kafka's older name of node.id).")
    },
    Setting {
        valid: "directories, comma-separated (the first is used)",
        take: take_log_dirs,
        show: Some(|c, _| {
            std::path::absolute(&c.data_dir).unwrap_or_else(|_| c.data_dir.clone()).display().to_string()
        }),
        ..Setting::text(
            "log.dirs",
            "The data directory, as in Kafka (`log.dirs` wins over `log.dir`; `--data-dir` over both; \
             default ./data). tidemark keeps one per node: of several, the first is used and the others are named in a warning.",
        )
    },
    Setting {
        valid: "directories, comma-separated (the first is used)",
        take: take_log_dirs,
        show: Some(|c, _| {
            std::path::absolute(&c.data_dir).unwrap_or_else(|_| c.data_dir.clone()).display().to_string()
        }),
        ..Setting::text("log.dir", "The data directory when `log.dirs` is not set.")
    },
];

/// Listeners.
pub const LISTENERS: &[Setting] = &[
    Setting {
        valid: "`NAME://host:port,...` (host empty: every interface; IPv6 in brackets); names unique, ports distinct",
        take: |_, v| listeners::check(v.key, v.value),
        show: Some(|c, _| c.listeners.iter().map(|l| l.endpoint()).collect::<Vec<_>>().join(",")),
        ..Setting::text(
            "listeners",
            "Where the broker accepts connections; each listener is bound by every shard. Without it, `--listen` \
             is one PLAINTEXT listener.",
        )
    },
    Setting {
        valid: "`NAME://host:port,...`",
        take: |_, v| listeners::check(v.key, v.value),
        show: Some(|c, _| c.listeners.iter().map(|l| l.advertised_endpoint()).collect::<Vec<_>>().join(",")),
        ..Setting::text(
            "advertised.listeners",
            "The address Metadata, FindCoordinator and DescribeCluster give a client, per the listener it came in on.",
        )
    },
    Setting {
        show: Some(|c, _| c.listeners.first().map(|l| l.advertised_host.clone()).unwrap_or_default()),
        ..Setting::text(
            "advertised.host",
            "tidemark's shorthand: the host advertised by every listener `advertised.listeners` does not name.",
        )
    },
    Setting {
        valid: "`NAME:PROTOCOL,...`",
        take: |_, v| listeners::check(v.key, v.value),
        show: Some(show_protocol_map),
        ..Setting::text(
            "listener.security.protocol.map",
            "Each listener name's security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL are served).",
        )
    },
    Setting {
        valid: "one of the client listeners",
        take: |_, v| {
            if v.text().is_empty() {
                bail!("{}: no listener name given", v.key);
            }
            Ok(())
        },
        show: Some(|c, _| c.links.brokers.listener.clone()),
        ..Setting::text(
            "inter.broker.listener.name",
            "The listener brokers reach each other on (followers' fetches, transaction markers), at its \
             registered address, secured as its protocol says (docs/security.md, securing the cluster). \
             Default: the listener `security.inter.broker.protocol` names, else the first.",
        )
    },
    Setting {
        valid: "`PLAINTEXT`, `SSL`, `SASL_PLAINTEXT`, `SASL_SSL`",
        take: |_, v| match crate::server::listeners::SecurityProtocol::parse(v.text()) {
            Some(_) => Ok(()),
            None => bail!("{}={}: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", v.key, v.text()),
        },
        ..Setting::text(
            "security.inter.broker.protocol",
            "Instead of `inter.broker.listener.name`: brokers reach each other on the listener named as this \
             protocol (not both).",
        )
    },
    Setting {
        default: Some("3.9-IV0"),
        valid: "a Kafka version (0.10.0, 2.8, 3.0-IV1...)",
        inert: true,
        take: |_, v| Ok(crate::config::kafka_version(v.key, v.value).map(|_| ())?),
        ..Setting::text(
            "inter.broker.protocol.version",
            "Accepted in Kafka's forms for server.properties files; one protocol between tidemark nodes.",
        )
    },
];

/// Topics.
pub const TOPICS: &[Setting] = &[
    Setting {
        change: Change::Dynamic,
        take: |c, v| {
            c.auto_create_topics = v.flag()?;
            Ok(())
        },
        show: Some(|_, e| e.auto_create_topics.to_string()),
        ..Setting::flag("auto.create.topics.enable", "true", "Create unknown topics on Metadata (when the client allows it) and Produce.")
    },
    Setting {
        change: Change::Dynamic,
        take: |c, v| {
            c.num_partitions = v.int()? as u32;
            Ok(())
        },
        show: Some(|_, e| e.num_partitions.to_string()),
        ..Setting::int(
            "num.partitions",
            1,
            100_000,
            "1",
            "Partitions of auto-created topics and of CreateTopics asking for -1.",
        )
    },
    Setting {
        valid: "`true` only",
        take: |_, v| {
            if !Given::flag(v)? {
                bail!("{}=false: topics can always be deleted here", v.key);
            }
            Ok(())
        },
        ..Setting::flag("delete.topic.enable", "true", "Topics can always be deleted.")
    },
    Setting {
        take: |_, v| v.int().map(|_| ()),
        show: Some(|c, _| c.cluster.as_ref().map_or(1, |k| k.default_replication_factor).to_string()),
        ..Setting::int(
            "default.replication.factor",
            1,
            I16,
            "1",
            "A clustered node's replication factor for topics created without one (CreateTopics -1, auto-creation). Standalone: no effect, one replica.",
        )
    },
    Setting {
        take: |c, v| {
            c.retention_check_interval = v.ms()?;
            Ok(())
        },
        show: Some(|c, _| c.retention_check_interval.as_millis().to_string()),
        ..Setting::long(
            "log.retention.check.interval.ms",
            1,
            i64::MAX,
            "300000",
            "Period of each shard's upkeep pass (rolls by time, retention).",
        )
    },
];

/// Log compaction.
pub const COMPACTION: &[Setting] = &[
    Setting {
        take: |c, v| {
            c.cleaner.enable = v.flag()?;
            Ok(())
        },
        show: Some(|c, _| c.cleaner.enable.to_string()),
        ..Setting::flag("log.cleaner.enable", "true", "Whether compacted topics are cleaned (each shard's cleaner task).")
    },
    Setting {
        take: |c, v| {
            c.cleaner.threads = v.int()? as usize;
            Ok(())
        },
        show: Some(|c, _| c.cleaner.threads.to_string()),
        ..Setting::int("log.cleaner.threads", 1, 64, "1", "Compaction passes each shard runs at once (Kafka: cleaner threads per broker).")
    },
    Setting {
        default: Some("1.7976931348623157E308"),
        valid: "above 0 (Kafka's default, the largest double: unlimited)",
        take: |c, v| {
            // Kafka's type is a double; its default (Double.MAX_VALUE) means unlimited.
            let (key, value) = (v.key, v.value);
            let n: f64 = value.trim().parse().with_context(|| format!("{key}={value}: not a number"))?;
            if n.is_nan() || n <= 0.0 {
                bail!("{key}={value}: must be above 0");
            }
            c.cleaner.io_max_bytes_per_second = (n < u64::MAX as f64).then_some(n as u64);
            Ok(())
        },
        show: Some(|c, _| {
            // Kafka's way of writing its default, the largest double (unlimited).
            let unlimited = || "1.7976931348623157E308".to_string();
            c.cleaner.io_max_bytes_per_second.map_or_else(unlimited, |v| (v as f64).to_string())
        }),
        ..Setting::new(
            "log.cleaner.io.max.bytes.per.second",
            ConfigType::Double,
            "Each shard's compaction I/O, bytes read plus written per second, shared by its passes.",
        )
    },
    Setting {
        take: |c, v| {
            c.cleaner.dedupe_buffer_size = v.int()? as u64;
            Ok(())
        },
        show: Some(|c, _| c.cleaner.dedupe_buffer_size.to_string()),
        ..Setting::long(
            "log.cleaner.dedupe.buffer.size",
            1 << 20,
            i64::MAX,
            "134217728",
            "Memory of the offset maps for the whole broker: each pass gets it divided by shards and threads (a key costs its bytes plus 48). A pass maps batches while they fit (at least one) and ends where the map does; the next pass goes on from there.",
        )
    },
    Setting {
        take: |c, v| {
            c.cleaner.backoff = v.ms()?;
            Ok(())
        },
        show: Some(|c, _| c.cleaner.backoff.as_millis().to_string()),
        ..Setting::long(
            "log.cleaner.backoff.ms",
            0,
            i64::MAX,
            "15000",
            "How long a shard's cleaner sleeps when no partition is due (or after a failed pass).",
        )
    },
];

/// Kafka's threads and sockets: accepted, no effect.
pub const INERT: &[Setting] = &[
    Setting {
        inert: true,
        ..Setting::int(
            "num.network.threads",
            1,
            I32,
            "3",
            "Accepted, no effect: one shard per core (`--cores`) serves the network.",
        )
    },
    Setting {
        inert: true,
        ..Setting::int(
            "num.io.threads",
            1,
            I32,
            "8",
            "Accepted, no effect: one shard per core (`--cores`) does the I/O.",
        )
    },
    Setting {
        inert: true,
        ..Setting::int(
            "num.recovery.threads.per.data.dir",
            1,
            I32,
            "2",
            "Accepted, no effect: each shard recovers its partitions.",
        )
    },
    Setting {
        inert: true,
        ..Setting::int(
            "background.threads",
            1,
            I32,
            "10",
            "Accepted, no effect: each core's shard runs its own background work.",
        )
    },
    Setting {
        inert: true,
        ..Setting::int(
            "num.replica.fetchers",
            1,
            I32,
            "1",
            "Accepted, no effect: a shard runs one fetcher per leader node.",
        )
    },
    Setting {
        inert: true,
        ..Setting::int(
            "socket.send.buffer.bytes",
            -1,
            I32,
            "102400",
            "Accepted, no effect: the OS sizes socket buffers.",
        )
    },
    Setting {
        inert: true,
        ..Setting::int(
            "socket.receive.buffer.bytes",
            -1,
            I32,
            "102400",
            "Accepted, no effect: the OS sizes socket buffers.",
        )
    },
];

/// `log.dirs`, `log.dir`: the data directory (`log.dirs` wins): the first directory named; the
/// others are not used (one directory per node), and said so.
fn take_log_dirs(c: &mut BrokerConfig, v: &Given<'_>) -> anyhow::Result<()> {
    let dirs: Vec<&str> = v.value.split(',').map(str::trim).filter(|d| !d.is_empty()).collect();
    let Some((dir, others)) = dirs.split_first() else {
        bail!("{}={}: no directory named", v.key, v.value);
    };
    if !others.is_empty() {
        tracing::warn!(
            "{}: tidemark keeps one data directory per node: {dir} is used, {} not",
            v.key,
            others.join(", ")
        );
    }
    if v.key == "log.dirs" || !c.settings.contains_key("log.dirs") {
        c.data_dir = PathBuf::from(dir);
    }
    Ok(())
}

/// Each listener's protocol, then the protocols no listener is named after (Kafka's default
/// map: each protocol's name maps to itself).
fn show_protocol_map(c: &BrokerConfig, _: &Effective) -> String {
    let mut map: Vec<String> = c.listeners.iter().map(|l| format!("{}:{}", l.name, l.protocol.name())).collect();
    map.extend(
        listeners::SecurityProtocol::ALL
            .iter()
            .filter(|p| !c.listeners.iter().any(|l| l.name == p.name()))
            .map(|p| format!("{0}:{0}", p.name())),
    );
    map.join(",")
}
