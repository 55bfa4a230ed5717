//! The `tidemark` command line: parse, load settings, start shards. No logic lives here.

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use tidemark::config::LogConfig;
use tidemark::storage_load::{self, LoadOptions};

#[derive(Parser, Debug)]
#[command(name = "tidemark", version, about = "A Kafka-compatible log storage broker node")]
struct Cli {
    /// Log format: text or json.
    #[arg(long, global = true, default_value = "text")]
    log_format: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the broker (Kafka protocol) on one shard per core. With no flags: data in ./data,
    /// listening on 127.0.0.1:9092, every online CPU.
    Serve(ServeArgs),
    /// Print the batches of a segment (.log) or the entries of an index (.index, .timeindex).
    Dump(DumpArgs),
    /// Load-test a Kafka-compatible broker (this one or any other) through the Kafka protocol,
    /// with HdrHistogram latency percentiles.
    Load(LoadCmdArgs),
    /// Drive the storage engine directly: durable appends on every core, then a verified
    /// read-back, with latency percentiles. Runs on the embedded defaults (./data).
    StorageLoad(StorageLoadArgs),
    /// Manage SASL/SCRAM users of a data directory the broker is not running on (online:
    /// AlterUserScramCredentials, e.g. kafka-configs.sh --alter --entity-type users).
    #[command(subcommand)]
    User(UserCommand),
    /// Prepare a data directory before its first start, as Kafka's kafka-storage does.
    #[command(subcommand)]
    Storage(StorageCommand),
}

#[derive(Subcommand, Debug)]
enum StorageCommand {
    /// Write the data directory's identity (meta.properties: cluster id, node id, a new
    /// directory id) and a dynamic quorum's initial voters. Optional for a standalone node or a
    /// static quorum (the first start does it); a dynamic quorum of several first controllers
    /// needs it. Example, on each of three controllers:
    /// `tidemark storage format controller.properties -t CLUSTER_ID --initial-controllers
    /// 1@ctl1:9093:DIR1,2@ctl2:9093:DIR2,3@ctl3:9093:DIR3`
    Format(FormatArgs),
    /// Print a new random Kafka UUID (a cluster id, or a directory id for --initial-controllers).
    RandomUuid,
}

#[derive(Args, Debug)]
struct FormatArgs {
    /// The node's properties file (as `serve` takes it).
    #[arg(value_name = "CONFIG", conflicts_with = "config")]
    config_file: Option<PathBuf>,
    #[arg(long, short = 'c')]
    config: Option<PathBuf>,
    /// Settings over the file's, as key=value.
    #[arg(long = "set", visible_alias = "override", value_name = "KEY=VALUE")]
    settings: Vec<String>,
    /// The data directory (default: `log.dirs` or `log.dir` of the settings, else ./data).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// The cluster id (a Kafka UUID); default: a new one.
    #[arg(long, short = 't')]
    cluster_id: Option<String>,
    /// This controller is a new dynamic quorum's one voter.
    #[arg(long, short = 's', conflicts_with_all = ["initial_controllers", "no_initial_controllers"])]
    standalone: bool,
    /// A new dynamic quorum's voters, `id@host:port:directory-id,...`, this node among them.
    #[arg(long, short = 'I', conflicts_with = "no_initial_controllers")]
    initial_controllers: Option<String>,
    /// This node joins a quorum that exists (a controller waits to be added with AddRaftVoter).
    #[arg(long, short = 'N')]
    no_initial_controllers: bool,
    /// A directory already formatted is left as it is, without an error.
    #[arg(long, short = 'g')]
    ignore_formatted: bool,
    /// A SCRAM user the node knows from its first start, as Kafka's format takes it:
    /// `SCRAM-SHA-512=[name=broker,password=broker-secret]` (optionally `iterations=8192`).
    /// The cluster's own logins (brokers, controllers) need theirs before the metadata quorum
    /// runs: give the same users to every node. Repeatable.
    #[arg(long = "add-scram", short = 'S', value_name = "MECHANISM=[name=...,password=...]")]
    add_scram: Vec<String>,
}

#[derive(Subcommand, Debug)]
enum UserCommand {
    /// Add a user, or set its password for a mechanism (stored salted and hashed).
    Add(UserAddArgs),
}

#[derive(Args, Debug)]
struct UserAddArgs {
    /// The user name (clients' `sasl.username`).
    name: String,
    #[arg(long, default_value = "./data")]
    data_dir: PathBuf,
    /// SCRAM-SHA-256 or SCRAM-SHA-512 (PLAIN logins are checked against either).
    #[arg(long, default_value = "SCRAM-SHA-256")]
    mechanism: String,
    /// The password (visible to other local users in the process list: prefer --password-file).
    #[arg(long, conflicts_with = "password_file", required_unless_present = "password_file")]
    password: Option<String>,
    /// A file whose first line is the password.
    #[arg(long)]
    password_file: Option<PathBuf>,
    /// SCRAM iterations (4096 to 16384).
    #[arg(long, default_value_t = 4096)]
    iterations: i32,
}

#[derive(Args, Debug)]
struct ServeArgs {
    /// The data directory (default: `log.dirs` or `log.dir` of the settings, else ./data).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    #[arg(long, default_value = "127.0.0.1:9092")]
    listen: String,
    /// Shards (one per core); default: every online CPU.
    #[arg(long)]
    cores: Option<usize>,
    /// A properties file of broker and topic-default settings, as Kafka's server.properties
    /// (flags override it). Also taken as the first argument, as kafka-server-start.sh takes it.
    #[arg(long, conflicts_with = "config_file")]
    config: Option<PathBuf>,
    #[arg(value_name = "CONFIG", hide = true)]
    config_file: Option<PathBuf>,
    /// Broker or topic-default settings, as key=value (`--override`, as kafka-server-start.sh).
    #[arg(long = "set", visible_alias = "override", value_name = "KEY=VALUE")]
    settings: Vec<String>,
    /// Refuse a setting tidemark does not use (one of Kafka's, or an unknown name) instead of
    /// logging and ignoring it.
    #[arg(long)]
    strict_config: bool,
    /// Serve per-stage latency histograms and counters as Prometheus text at
    /// http://HOST:PORT/metrics.
    #[arg(long, value_name = "HOST:PORT")]
    metrics_listen: Option<String>,
    /// For tests: the metrics endpoint also installs disk faults (EIO, ENOSPC, short
    /// writes, slow I/O) at /faults. Never on a production broker.
    #[arg(long, requires = "metrics_listen")]
    fault_injection: bool,
    /// For tests: a fault rule in force from the start, in /faults' query form
    /// (`op=write&path=t-0&fault=slow&ms=30000`); repeatable.
    #[arg(long = "fault", value_name = "RULE", requires = "fault_injection")]
    faults: Vec<String>,
}

#[derive(Args, Debug)]
struct DumpArgs {
    /// Files to dump.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
}

#[derive(Args, Debug)]
struct LoadCmdArgs {
    /// produce, consume or e2e (produce and consume together: send-to-arrival latency).
    #[arg(value_parser = ["produce", "consume", "e2e"])]
    mode: String,
    #[arg(long, default_value = "127.0.0.1:9092")]
    bootstrap: String,
    #[arg(long, default_value = "tidemark-load")]
    topic: String,
    /// Partitions of the topic if it has to be created.
    #[arg(long, default_value_t = 1)]
    partitions: i32,
    /// Bytes per record value.
    #[arg(long, default_value_t = 1024)]
    record_size: usize,
    /// Give records keys, cycling over this many distinct ones (a compacted topic needs keys;
    /// overwrites make the dirty log the cleaner works on). Default: no keys.
    #[arg(long)]
    keys: Option<u64>,
    /// Largest batch (one partition per produce request); as a producer's batch.size.
    #[arg(long, default_value_t = 262144)]
    batch_bytes: usize,
    /// Open loop: how long the first record of a batch may wait for more.
    #[arg(long, default_value_t = 5)]
    linger_ms: u64,
    /// 0, 1 or all.
    #[arg(long, default_value = "all")]
    acks: String,
    /// none, gzip, snappy, lz4 or zstd.
    #[arg(long, default_value = "none")]
    compression: String,
    /// Records per second (open loop, latency from the intended send time), or max.
    #[arg(long, default_value = "max")]
    rate: String,
    /// Seconds to run (default 10 unless --records is given).
    #[arg(long)]
    duration: Option<f64>,
    /// Records to produce (or consume) in all, then stop.
    #[arg(long)]
    records: Option<u64>,
    /// Connections (each owns a share of the partitions).
    #[arg(long, default_value_t = 1)]
    connections: usize,
    /// Executors (threads) the connections are spread over.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Produce requests outstanding per connection.
    #[arg(long, default_value_t = 5)]
    in_flight: usize,
    /// An idempotent producer (a producer id, sequences per partition).
    #[arg(long)]
    idempotent: bool,
    /// A transactional producer: transactions of --txn-records records, each committed
    /// (closed loop); the commit latency is reported apart.
    #[arg(long)]
    transactional: bool,
    /// Records per transaction with --transactional.
    #[arg(long, default_value_t = 10000)]
    txn_records: u64,
    /// Kafka's transaction version with --transactional: 2 (KIP-890 part 2, what a Kafka 4
    /// client uses on a cluster at transaction.version 2: partitions join at their first
    /// write, the epoch is bumped at every commit) or 0 (AddPartitionsToTxn first).
    #[arg(long, default_value_t = 2)]
    transaction_version: i16,
    /// Print the summary as one JSON object (the last line).
    #[arg(long)]
    json: bool,
    /// Write the latency histograms (one per second) as an HdrHistogram interval log.
    #[arg(long)]
    hdr_out: Option<PathBuf>,
    /// Write a self-contained HTML report with charts.
    #[arg(long)]
    report: Option<PathBuf>,
}

#[derive(Args, Debug)]
struct StorageLoadArgs {
    /// Data directory (created if missing).
    #[arg(long, default_value = "./data")]
    data_dir: PathBuf,
    /// Shards (executors, one per core); default: every online CPU.
    #[arg(long)]
    cores: Option<usize>,
    /// Partitions per shard.
    #[arg(long, default_value_t = 4)]
    partitions: usize,
    /// Bytes per record value.
    #[arg(long, default_value_t = 1024)]
    record_size: usize,
    /// Records per batch.
    #[arg(long, default_value_t = 16)]
    batch_records: usize,
    /// Appends in flight per partition.
    #[arg(long, default_value_t = 4)]
    inflight: usize,
    /// Seconds to run.
    #[arg(long, default_value_t = 10)]
    duration: u64,
    /// Topic settings, as key=value (e.g. segment.bytes=134217728, flush.messages=1000).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    settings: Vec<String>,
    /// Each shard's registered DMA buffer pool, bytes (the broker's
    /// `tidemark.shard.io.memory.bytes`).
    #[arg(long, default_value_t = tidemark::io::DEFAULT_SHARD_IO_MEMORY)]
    io_memory: usize,
    /// Print the summary as one JSON object.
    #[arg(long)]
    json: bool,
}

fn mode_name(m: tidemark::load::Mode) -> &'static str {
    match m {
        tidemark::load::Mode::Produce => "produce",
        tidemark::load::Mode::Consume => "consume",
        tidemark::load::Mode::E2e => "e2e",
    }
}

fn init_logging(format: &str) {
    // openraft logs every vote and election step at info: its warnings and errors only, unless
    // RUST_LOG asks for more.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info,openraft=warn".into());
    let b = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    if format == "json" {
        b.json().init();
    } else {
        b.init();
    }
}

/// Keep the C allocator from handing DMA buffers back to the kernel. Write-tail chunks (up to
/// `tidemark.write.chunk.bytes`, 1 MiB) are allocated and freed at the rate data is written;
/// with glibc's defaults each large one is a fresh mmap (or a trimmed heap top), so every
/// chunk costs page faults and zeroing of all its pages, which took about half the CPU of a
/// storage-load run at 750 MB/s. Allocations up to 32 MiB (glibc's maximum) come from the
/// heap, and a free heap top is kept up to 512 MiB per arena. (The library forbids `unsafe`;
/// this is its one use, at process start before any thread exists.)
/// The cost: up to 512 MiB of freed heap per arena (about one per shard) stays resident, which
/// counts against a container's memory limit (docs/operations.md).
fn keep_buffers_resident() {
    // SAFETY: mallopt only sets allocator parameters; called before other threads exist.
    #[cfg(target_env = "gnu")]
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 512 << 20);
    }
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    keep_buffers_resident();
    init_logging(&cli.log_format);
    match cli.command {
        Command::Serve(args) => serve(args),
        Command::Load(args) => load(args),
        Command::Dump(args) => dump(args),
        Command::StorageLoad(args) => storage_load(args),
        Command::User(UserCommand::Add(args)) => user_add(args),
        Command::Storage(StorageCommand::Format(args)) => storage_format(args),
        Command::Storage(StorageCommand::RandomUuid) => {
            println!("{}", tidemark::types::Uuid::random()?);
            Ok(())
        }
    }
}

fn storage_format(a: FormatArgs) -> Result<()> {
    use tidemark::server::data_dir::{self, Bootstrap};
    let mut broker = tidemark::server::BrokerConfig::new(PathBuf::from("./data"), "127.0.0.1:9092", 1)?;
    if let Some(path) = a.config.or(a.config_file) {
        broker.load_file(&path)?;
    }
    for s in &a.settings {
        let (k, v) = s.split_once('=').with_context(|| format!("--set {s}: expected KEY=VALUE"))?;
        broker.set(k, v)?;
    }
    if let Some(dir) = a.data_dir {
        broker.data_dir = dir;
    }
    broker.resolve_listeners(&Default::default())?;
    let bootstrap = match (a.standalone, a.initial_controllers) {
        (true, _) => Bootstrap::Standalone,
        (false, Some(list)) => Bootstrap::Voters(
            data_dir::parse_initial_voters(&list).with_context(|| format!("--initial-controllers {list}"))?,
        ),
        (false, None) => Bootstrap::None,
    };
    let users: Vec<data_dir::ScramUser> = a
        .add_scram
        .iter()
        .map(|s| data_dir::ScramUser::parse(s).with_context(|| format!("--add-scram {s}")))
        .collect::<Result<_>>()?;
    match data_dir::format(&broker, a.cluster_id.as_deref(), bootstrap, a.ignore_formatted)? {
        Some(id) => {
            for u in &users {
                data_dir::add_user(&broker.data_dir, &u.name, u.mechanism, &u.password, u.iterations)?;
            }
            println!(
                "formatted {}: cluster.id={} node.id={} directory.id={}{}",
                broker.data_dir.display(),
                id.cluster_id,
                id.node_id,
                id.directory_id,
                if users.is_empty() { String::new() } else { format!(" ({} SCRAM users)", users.len()) }
            )
        }
        None => println!("{} is already formatted; left as it is", broker.data_dir.display()),
    }
    Ok(())
}

fn user_add(a: UserAddArgs) -> Result<()> {
    let mechanism = tidemark::security::Mechanism::parse(&a.mechanism)
        .with_context(|| format!("--mechanism {}: SCRAM-SHA-256 or SCRAM-SHA-512", a.mechanism))?;
    let password = match (a.password, a.password_file) {
        (Some(p), _) => p,
        (None, Some(f)) => {
            let text = std::fs::read_to_string(&f).with_context(|| format!("--password-file {}", f.display()))?;
            text.lines().next().unwrap_or_default().to_string()
        }
        (None, None) => anyhow::bail!("give --password or --password-file"),
    };
    tidemark::server::data_dir::add_user(&a.data_dir, &a.name, mechanism, &password, a.iterations)?;
    println!("user {} set for {} in {}", a.name, mechanism.name(), a.data_dir.display());
    Ok(())
}

fn serve(
    ServeArgs {
        data_dir,
        listen,
        cores,
        config,
        config_file,
        settings,
        strict_config,
        metrics_listen,
        fault_injection,
        faults,
    }: ServeArgs,
) -> Result<()> {
    let online = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let shards = cores.unwrap_or(online);
    anyhow::ensure!((1..=online).contains(&shards), "--cores {shards}: this machine has {online} online CPUs");
    let mut broker = tidemark::server::BrokerConfig::new(PathBuf::from("./data"), &listen, shards)?;
    broker.strict_config = strict_config;
    if let Some(path) = config.or(config_file) {
        broker.load_file(&path)?;
    }
    for s in &settings {
        let (k, v) = s.split_once('=').with_context(|| format!("--set {s}: expected KEY=VALUE"))?;
        broker.set(k, v)?;
    }
    if let Some(dir) = data_dir {
        broker.data_dir = dir;
    }
    if let Some(m) = metrics_listen {
        use std::net::ToSocketAddrs;
        let addr = m.to_socket_addrs().ok().and_then(|mut a| a.next());
        broker.metrics_listen = Some(addr.with_context(|| format!("--metrics-listen {m}: not a host:port"))?);
    }
    broker.fault_injection = fault_injection;
    if fault_injection {
        tracing::warn!("fault injection enabled: /faults on the metrics endpoint can fail disk operations");
    }
    for rule in &faults {
        let pairs = rule.split('&').filter(|p| !p.is_empty()).map(|p| p.split_once('=').unwrap_or((p, "")));
        let rule = tidemark::io::faults::parse_rule(pairs).map_err(|e| anyhow::anyhow!("--fault {rule}: {e}"))?;
        tracing::warn!(?rule, "fault injection: rule installed");
        tidemark::io::faults::install(rule);
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, stop.clone()).context("installing signal handlers")?;
    }
    tidemark::server::run(broker, stop)?;
    Ok(())
}

fn load(
    LoadCmdArgs {
        mode,
        bootstrap,
        topic,
        partitions,
        record_size,
        keys,
        batch_bytes,
        linger_ms,
        acks,
        compression,
        rate,
        duration,
        records,
        connections,
        threads,
        in_flight,
        idempotent,
        transactional,
        txn_records,
        transaction_version,
        json,
        hdr_out,
        report,
    }: LoadCmdArgs,
) -> Result<()> {
    use tidemark::load::{self, LoadArgs, Mode};
    let mode = match mode.as_str() {
        "produce" => Mode::Produce,
        "consume" => Mode::Consume,
        _ => Mode::E2e,
    };
    let mut args = LoadArgs::new(mode, &bootstrap, &topic)?;
    args.partitions = partitions;
    args.record_size = record_size;
    args.keys = keys;
    args.batch_bytes = batch_bytes;
    args.linger = std::time::Duration::from_millis(linger_ms);
    args.acks = match acks.as_str() {
        "all" | "-1" => -1,
        a => a.parse().with_context(|| format!("--acks {a}: expected 0, 1 or all"))?,
    };
    args.compression = load::compression(&compression)?;
    args.rate = match rate.as_str() {
        "max" => None,
        r => Some(r.parse().with_context(|| format!("--rate {r}: expected records per second or max"))?),
    };
    args.records = records;
    args.duration = match (duration, records) {
        (Some(d), _) => Some(std::time::Duration::from_secs_f64(d)),
        (None, Some(_)) => None,
        (None, None) => Some(std::time::Duration::from_secs(10)),
    };
    args.connections = connections;
    args.threads = threads;
    args.in_flight = in_flight;
    args.producing = match (idempotent, transactional) {
        (_, true) => load::Producing::Transactional { records_per_txn: txn_records, version: transaction_version },
        (true, false) => load::Producing::Idempotent,
        (false, false) => load::Producing::Plain,
    };
    let summary = load::run(&args, |line| eprintln!("{line}"))?;
    if let Some(path) = hdr_out {
        load::write_hdr_log(&summary, &path)?;
    }
    if let Some(path) = report {
        let title = format!("tidemark load {} against {}", mode_name(mode), bootstrap);
        std::fs::write(&path, load::report::html(&summary, &title))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if json {
        eprintln!("{}", summary.to_text());
        println!("{}", summary.to_json());
    } else {
        println!("{}", summary.to_text());
    }
    Ok(())
}

fn dump(DumpArgs { paths }: DumpArgs) -> Result<()> {
    for p in paths {
        let out = tidemark::dump::dump(&p).with_context(|| format!("reading {}", p.display()))?;
        print!("{out}");
    }
    Ok(())
}

fn storage_load(
    StorageLoadArgs {
        data_dir,
        cores,
        partitions,
        record_size,
        batch_records,
        inflight,
        duration,
        settings,
        io_memory,
        json,
    }: StorageLoadArgs,
) -> Result<()> {
    let mut config = LogConfig::default();
    for s in &settings {
        let (k, v) = s.split_once('=').with_context(|| format!("--set {s}: expected KEY=VALUE"))?;
        config.set(k, v)?;
    }
    let online = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let opts = LoadOptions {
        data_dir,
        shards: cores.unwrap_or(online).clamp(1, online),
        partitions_per_shard: partitions.max(1),
        record_size,
        batch_records: batch_records.max(1),
        inflight: inflight.max(1),
        duration: std::time::Duration::from_secs(duration),
        config,
        io_memory: io_memory.max(64 << 10),
    };
    let summary = storage_load::run(&opts)?;
    if json {
        println!("{}", summary.to_json());
    } else {
        println!("{}", summary.to_text());
    }
    Ok(())
}
