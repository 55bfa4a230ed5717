//! The data directory as a whole: the lock that gives it to one process, and its identity,
//! `meta.properties` as Kafka keeps it (the cluster id, the node id, the directory id):
//!
//! ```text
//! #tidemark: this data directory's identity; do not edit
//! cluster.id=<22 characters: a Kafka UUID>
//! directory.id=<22 characters>
//! node.id=<n>
//! version=1
//! ```
//!
//! Made at the first start (a random cluster id), or before it by `tidemark storage format`
//! ([`format`], as Kafka's `kafka-storage format`, with a dynamic quorum's initial voters beside
//! it, [`BOOTSTRAP_VOTERS`]); checked at every later start: a node refuses a directory written by another node id, or one
//! of another cluster ([`Identity::check_cluster`], once a cluster tells it its id), rather than
//! serve data that is not its own. Before the shards start, topics written before topic ids
//! get theirs ([`upgrade_topics`]).

use crate::types::Uuid;
use anyhow::{bail, Context};
use std::collections::BTreeMap;
use std::path::Path;

/// The file's name in the data directory (Kafka's).
pub const META_PROPERTIES: &str = "meta.properties";

/// Who a data directory belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub cluster_id: Uuid,
    pub node_id: i32,
    pub directory_id: Uuid,
}

impl Identity {
    /// Read `meta.properties` and check it belongs to `node_id`, or make it (durably) on a
    /// directory that has none.
    pub fn load_or_create(dir: &Path, node_id: i32) -> anyhow::Result<Identity> {
        let path = dir.join(META_PROPERTIES);
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                let id = Identity::parse(&text).with_context(|| format!("reading {}", path.display()))?;
                if id.node_id != node_id {
                    bail!(
                        "data dir {} belongs to node.id {}, but this broker is node.id {node_id}: \
                         use that node id, or another data directory",
                        dir.display(),
                        id.node_id
                    );
                }
                Ok(id)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let id = Identity { cluster_id: Uuid::random()?, node_id, directory_id: Uuid::random()? };
                write_durably(dir, &path, id.encode().as_bytes())
                    .with_context(|| format!("writing {}", path.display()))?;
                tracing::info!(cluster_id = %id.cluster_id, "new data directory: cluster id made");
                Ok(id)
            }
            Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
        }
    }

    /// Refuse a directory of another cluster (a node joining a cluster checks the cluster's
    /// id against its directory's).
    pub fn check_cluster(&self, cluster_id: Uuid) -> anyhow::Result<()> {
        if self.cluster_id != cluster_id {
            bail!(
                "this data directory belongs to cluster {}, not to cluster {cluster_id}: \
                 use an empty data directory to join this cluster",
                self.cluster_id
            );
        }
        Ok(())
    }

    fn encode(&self) -> String {
        format!(
            "#tidemark: this data directory's identity; do not edit\ncluster.id={}\ndirectory.id={}\nnode.id={}\nversion=1\n",
            self.cluster_id, self.directory_id, self.node_id
        )
    }

    /// Kafka's properties form: `key=value` lines, `#` comments (Kafka's own files parse too).
    fn parse(text: &str) -> anyhow::Result<Identity> {
        let mut props = BTreeMap::new();
        for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with('!'))
        {
            let (k, v) = line.split_once('=').with_context(|| format!("not a key=value line: {line:?}"))?;
            props.insert(k.trim(), v.trim());
        }
        let get = |k: &str| props.get(k).copied().with_context(|| format!("no {k}"));
        if get("version")? != "1" {
            bail!("version {} is not one this broker reads (1)", get("version")?);
        }
        let uuid = |k: &str| -> anyhow::Result<Uuid> {
            Uuid::parse(get(k)?).with_context(|| format!("{k} is not a Kafka UUID (22 characters of base64)"))
        };
        let node_id = get("node.id")?.parse().context("node.id is not a number")?;
        // Kafka's KRaft files may lack a directory id (older versions): make none up here.
        let directory_id = if props.contains_key("directory.id") { uuid("directory.id")? } else { Uuid::ZERO };
        Ok(Identity { cluster_id: uuid("cluster.id")?, node_id, directory_id })
    }
}

/// The dynamic quorum's initial voters, written by `tidemark storage format --standalone` or
/// `--initial-controllers` (Kafka's `kafka-storage format`): a controller that finds it in a
/// pristine data directory starts the quorum with exactly these voters.
pub const BOOTSTRAP_VOTERS: &str = "bootstrap.voters";

/// One initial voter: `id@host:port:directory-id`, as Kafka's `--initial-controllers` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitialVoter {
    pub id: u64,
    /// Its controller listener, `host:port`.
    pub addr: String,
    pub directory_id: Uuid,
}

impl std::fmt::Display for InitialVoter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{}:{}", self.id, self.addr, self.directory_id)
    }
}

/// `id@host:port:directory-id,...` (Kafka's `--initial-controllers`), ids unique.
pub fn parse_initial_voters(list: &str) -> anyhow::Result<Vec<InitialVoter>> {
    let mut out: Vec<InitialVoter> = Vec::new();
    for part in list.split([',', '\n']).map(str::trim).filter(|p| !p.is_empty() && !p.starts_with('#')) {
        let bad = || format!("{part}: expected id@host:port:directory-id");
        let (id, rest) = part.split_once('@').with_context(bad)?;
        let (addr, dir) = rest.rsplit_once(':').with_context(bad)?;
        let (host, port) = addr.rsplit_once(':').with_context(bad)?;
        let id: u64 = id.trim().parse().with_context(|| format!("{part}: bad node id"))?;
        port.parse::<u16>().ok().filter(|p| *p > 0).with_context(|| format!("{part}: bad port"))?;
        if host.is_empty() {
            bail!("{part}: no host");
        }
        let directory_id = Uuid::parse(dir)
            .filter(|u| *u != Uuid::ZERO)
            .with_context(|| format!("{part}: {dir} is not a directory id (a Kafka UUID, 22 characters of base64)"))?;
        if out.iter().any(|v| v.id == id) {
            bail!("node {id} appears twice");
        }
        out.push(InitialVoter { id, addr: addr.to_string(), directory_id });
    }
    if out.is_empty() {
        bail!("no voter given");
    }
    Ok(out)
}

/// The initial voters `tidemark storage format` left in `dir` (`None`: none).
pub fn initial_voters(dir: &Path) -> anyhow::Result<Option<Vec<InitialVoter>>> {
    let path = dir.join(BOOTSTRAP_VOTERS);
    match std::fs::read_to_string(&path) {
        Ok(text) => parse_initial_voters(&text).map(Some).with_context(|| format!("reading {}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

/// How `tidemark storage format` starts a dynamic quorum.
#[derive(Debug, Clone)]
pub enum Bootstrap {
    /// `--standalone`: this controller alone.
    Standalone,
    /// `--initial-controllers`: these voters, this node among them.
    Voters(Vec<InitialVoter>),
    /// `--no-initial-controllers`, or a node without the controller role: none (it joins).
    None,
}

/// Format a data directory as `kafka-storage format` does: write its identity
/// (`meta.properties`: the cluster id given or a new one, the node id, a new directory id, or
/// the one `--initial-controllers` gives this node) and the initial voters of a dynamic quorum.
/// A directory that has an identity is refused (`ignore_formatted`: left as it is, `Ok(None)`).
/// `--standalone` and `--initial-controllers` need a controller of a dynamic quorum.
pub fn format(
    config: &crate::server::BrokerConfig,
    cluster_id: Option<&str>,
    bootstrap: Bootstrap,
    ignore_formatted: bool,
) -> anyhow::Result<Option<Identity>> {
    let dir = &config.data_dir;
    let path = dir.join(META_PROPERTIES);
    if path.exists() {
        if ignore_formatted {
            return Ok(None);
        }
        bail!(
            "{} is already formatted ({} exists): --ignore-formatted leaves it as it is",
            dir.display(),
            path.display()
        );
    }
    let cluster_id = match cluster_id {
        Some(id) => Uuid::parse(id).filter(|u| *u != Uuid::ZERO).with_context(|| {
            format!("--cluster-id {id}: not a Kafka UUID (22 characters of base64; `tidemark storage random-uuid` makes one)")
        })?,
        None => Uuid::random()?,
    };
    let node = config.node_id;
    let controller = || -> anyhow::Result<&crate::cluster::settings::ClusterSettings> {
        let c =
            config.cluster.as_ref().filter(|c| c.roles.controller()).context(
                "--standalone and --initial-controllers format a controller (process.roles with controller)",
            )?;
        anyhow::ensure!(
            c.dynamic,
            "controller.quorum.voters names a static quorum, formed at first start without a format step; \
             --standalone and --initial-controllers start a dynamic one (controller.quorum.bootstrap.servers)"
        );
        Ok(c)
    };
    let (directory_id, voters) = match bootstrap {
        Bootstrap::Standalone => {
            controller()?;
            let listener = config.controller_listener.as_ref().context("no controller listener")?;
            let host = &listener.advertised_host;
            let host = if host.contains(':') { format!("[{host}]") } else { host.clone() };
            let me = InitialVoter {
                id: node as u64,
                addr: format!("{host}:{}", listener.advertised_port),
                directory_id: Uuid::random()?,
            };
            (me.directory_id, vec![me])
        }
        Bootstrap::Voters(voters) => {
            controller()?;
            let me = voters.iter().find(|v| v.id == node as u64).with_context(|| {
                format!("--initial-controllers does not name this node (node.id={node}): list every first controller")
            })?;
            (me.directory_id, voters)
        }
        Bootstrap::None => (Uuid::random()?, Vec::new()),
    };
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    if !voters.is_empty() {
        let mut text = String::from("#tidemark: the dynamic quorum's initial voters (tidemark storage format)\n");
        for v in &voters {
            text.push_str(&format!("{v}\n"));
        }
        let path = dir.join(BOOTSTRAP_VOTERS);
        write_durably(dir, &path, text.as_bytes()).with_context(|| format!("writing {}", path.display()))?;
    }
    let id = Identity { cluster_id, node_id: node, directory_id };
    write_durably(dir, &path, id.encode().as_bytes()).with_context(|| format!("writing {}", path.display()))?;
    Ok(Some(id))
}

/// Write a new file whole and durably: a temporary beside it, synced, renamed over, and the
/// directory synced.
fn write_durably(dir: &Path, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)?;
    std::fs::File::open(dir)?.sync_all()
}

/// Give topics written before topic ids (topic file version 1) their id, durably, before any
/// shard reads them (each shard reads the topic files; only one may choose ids). Opening the
/// topic store does it; this opens it once, alone, on an executor of its own.
pub fn upgrade_topics(dir: &Path) -> anyhow::Result<()> {
    let dir = dir.to_path_buf();
    glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
        .name("data-dir")
        .spawn(move || async move {
            let disk = crate::io::DmaDisk::open(&dir).await?;
            // Overrides are checked against the defaults by each shard; any defaults do here.
            let defaults = crate::config::LogConfig::default();
            crate::storage::topics::TopicStore::open(disk, &dir, defaults).await.map(|_| ())
        })
        .map_err(|e| anyhow::anyhow!("starting the data-dir executor: {e}"))?
        .join()
        .map_err(|e| anyhow::anyhow!("data-dir executor: {e:?}"))?
        .map_err(anyhow::Error::from)
}

/// Take the data directory for this process: an exclusive `flock` on `<data-dir>/.lock`
/// (holding our pid), held until the returned file drops. Fails fast, with a clear message,
/// when the directory cannot be written or another broker holds it. The kernel releases the
/// lock when a process dies, kill -9 included.
pub fn lock(dir: &std::path::Path) -> anyhow::Result<std::fs::File> {
    use std::io::{Read, Seek, Write};
    let path = dir.join(".lock");
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .with_context(|| format!("data dir {} is not writable (opening {})", dir.display(), path.display()))?;
    match f.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut pid = String::new();
            let _ = f.read_to_string(&mut pid);
            bail!("data dir {} is in use by another tidemark process (pid {})", dir.display(), pid.trim());
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(e).with_context(|| format!("locking {}", path.display())),
    }
    let written = f
        .set_len(0)
        .and_then(|_| f.rewind())
        .and_then(|_| write!(f, "{}", std::process::id()))
        .and_then(|_| f.sync_all());
    written.with_context(|| format!("data dir {} is not writable (writing {})", dir.display(), path.display()))?;
    Ok(f)
}

/// `tidemark user add`: set a user's SCRAM credential in a data directory the broker is not
/// running on (the first user, made before the first start; online, AlterUserScramCredentials
/// does it). The password is salted and hashed; it is not kept.
pub fn add_user(
    dir: &Path,
    user: &str,
    mechanism: crate::security::Mechanism,
    password: &str,
    iterations: i32,
) -> anyhow::Result<()> {
    use crate::security::{Credential, Credentials, CREDENTIALS_FILE, MAX_ITERATIONS, MIN_ITERATIONS};
    if user.is_empty() || password.is_empty() {
        bail!("the user name and the password must not be empty");
    }
    if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&iterations) {
        bail!("--iterations {iterations}: must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}");
    }
    std::fs::create_dir_all(dir).with_context(|| format!("creating data dir {}", dir.display()))?;
    let _lock =
        lock(dir).context("the broker runs on this data directory: change users online (AlterUserScramCredentials)")?;
    let mut credentials = Credentials::load(dir)?;
    credentials.set(user, mechanism, Some(Credential::from_password(mechanism, password.as_bytes(), iterations)));
    let path = dir.join(CREDENTIALS_FILE);
    write_durably(dir, &path, credentials.encode().as_bytes()).with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// meta.properties: made once with a random cluster id and kept (the same identity on
    /// every later start); a directory of another node id, or with a damaged or unknown file,
    /// is refused with a message naming the file; Kafka's own file form (comments, a missing
    /// directory id) reads; a directory of another cluster is refused by `check_cluster`.
    #[test]
    fn a_data_directory_keeps_its_identity() {
        let tmp = tempfile::tempdir().unwrap();
        let first = Identity::load_or_create(tmp.path(), 3).unwrap();
        assert_eq!(first.cluster_id.to_string().len(), 22);
        assert_eq!(Identity::load_or_create(tmp.path(), 3).unwrap(), first);
        let e = Identity::load_or_create(tmp.path(), 4).unwrap_err().to_string();
        assert!(e.contains("belongs to node.id 3"), "{e}");
        assert!(first.check_cluster(first.cluster_id).is_ok());
        let other = Uuid::random().unwrap();
        let e = first.check_cluster(other).unwrap_err().to_string();
        assert!(e.contains(&first.cluster_id.to_string()) && e.contains(&other.to_string()), "{e}");
        let path = tmp.path().join(META_PROPERTIES);
        std::fs::write(
            &path,
            "#\n#Thu Dec 03 09:00:00 UTC 2026\ncluster.id=MkU3OEVBNTcwNTJENDM2Qg\nnode.id=3\nversion=1\n",
        )
        .unwrap();
        let kafka = Identity::load_or_create(tmp.path(), 3).unwrap();
        assert_eq!(kafka.cluster_id.to_string(), "MkU3OEVBNTcwNTJENDM2Qg");
        for bad in [
            "cluster.id=x\nnode.id=3\nversion=1\n",
            "cluster.id=MkU3OEVBNTcwNTJENDM2Qg\nnode.id=3\nversion=0\n",
            "garbage",
        ] {
            std::fs::write(&path, bad).unwrap();
            let e = format!("{:#}", Identity::load_or_create(tmp.path(), 3).unwrap_err());
            assert!(e.contains("meta.properties"), "{e}");
        }
    }
}

/// A SCRAM user given to `storage format --add-scram`, in Kafka's syntax:
/// `SCRAM-SHA-256=[name=alice,password=alice-secret]`, optionally with `iterations=N`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScramUser {
    pub mechanism: crate::security::Mechanism,
    pub name: String,
    pub password: String,
    pub iterations: i32,
}

impl ScramUser {
    pub fn parse(text: &str) -> anyhow::Result<ScramUser> {
        let (mechanism, rest) = text.split_once('=').context("expected MECHANISM=[name=...,password=...]")?;
        let mechanism = crate::security::Mechanism::parse(mechanism)
            .with_context(|| format!("{mechanism}: SCRAM-SHA-256 or SCRAM-SHA-512"))?;
        let inner = rest.trim().strip_prefix('[').and_then(|r| r.strip_suffix(']')).context("expected [...]")?;
        let (mut name, mut password, mut iterations) = (None, None, 4096);
        for field in inner.split(',') {
            let (k, v) = field.split_once('=').with_context(|| format!("{field}: expected key=value"))?;
            let v = v.trim().trim_matches('"').to_string();
            match k.trim() {
                "name" => name = Some(v),
                "password" => password = Some(v),
                "iterations" => {
                    iterations = v
                        .parse()
                        .ok()
                        .filter(|i| (crate::security::MIN_ITERATIONS..=crate::security::MAX_ITERATIONS).contains(i))
                        .with_context(|| format!("iterations={v}: 4096 to 16384"))?
                }
                other => bail!("{other}: name, password or iterations (salt and saltedpassword are not taken)"),
            }
        }
        let name = name.filter(|n| !n.is_empty()).context("no name")?;
        let password = password.filter(|p| !p.is_empty()).context("no password")?;
        Ok(ScramUser { mechanism, name, password, iterations })
    }
}

#[cfg(test)]
mod scram_user_tests {
    use super::ScramUser;

    /// Kafka's `--add-scram` syntax: mechanism, bracketed fields, optional iterations; a
    /// password with `=` in it is kept whole; missing fields and bad bounds refused.
    #[test]
    fn add_scram_syntax() {
        let u = ScramUser::parse("SCRAM-SHA-512=[name=broker,password=a=b,iterations=8192]").unwrap();
        assert_eq!((u.name.as_str(), u.password.as_str(), u.iterations), ("broker", "a=b", 8192));
        assert_eq!(u.mechanism, crate::security::Mechanism::ScramSha512);
        let quoted = ScramUser::parse("SCRAM-SHA-256=[name=\"alice\",password=\"pw\"]").unwrap();
        assert_eq!((quoted.name.as_str(), quoted.iterations), ("alice", 4096));
        for bad in [
            "PLAIN=[name=a,password=b]",
            "SCRAM-SHA-256=name=a",
            "SCRAM-SHA-256=[name=a]",
            "SCRAM-SHA-256=[name=a,password=b,iterations=10]",
            "SCRAM-SHA-256=[name=a,password=b,salt=x]",
        ] {
            assert!(ScramUser::parse(bad).is_err(), "{bad}");
        }
    }
}
