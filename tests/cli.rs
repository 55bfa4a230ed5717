//! The `tidemark` binary: `dump` on files the engine wrote, `storage-load` end to end, and
//! `serve` failing fast, with a clear message, when it cannot start.

use std::process::Command;

fn tidemark() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tidemark"))
}

/// `storage-load` appends, reads back and verifies; `dump` then shows every batch with a valid
/// CRC and the index entries, and flags a corrupted batch.
#[test]
fn storage_load_then_dump() {
    let tmp = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let data = tmp.path().join("data");
    let out = tidemark()
        .args([
            "storage-load",
            "--cores",
            "1",
            "--partitions",
            "1",
            "--duration",
            "1",
            "--json",
            "--set",
            "segment.bytes=1048576",
        ])
        .arg("--data-dir")
        .arg(&data)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let summary = String::from_utf8_lossy(&out.stdout);
    assert!(summary.contains("\"records\":") && summary.contains("\"p99\":"), "{summary}");
    let dir = data.join("load-0-0");
    let log = dir.join(format!("{:020}.log", 0));
    let out = tidemark().arg("dump").arg(&log).arg(log.with_extension("index")).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("baseOffset: 0 lastOffset: 15 count: 16 position: 0"), "{text}");
    assert!(!text.contains("INVALID"), "{text}");
    assert!(text.contains("offset: ") && text.contains("position: "));
    // Flip a byte inside the first batch's records: dump reports it.
    let mut bytes = std::fs::read(&log).unwrap();
    bytes[100] ^= 0xff;
    std::fs::write(&log, bytes).unwrap();
    let text = String::from_utf8_lossy(&tidemark().arg("dump").arg(&log).output().unwrap().stdout).into_owned();
    assert!(text.lines().nth(1).unwrap().contains("isValid: INVALID"), "{text}");
}

/// A bad setting is refused with the key and the reason, before anything starts.
#[test]
fn bad_setting_is_refused() {
    let out = tidemark()
        .args(["storage-load", "--set", "segment.bytes=12", "--data-dir", "/nonexistent/x"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("segment.bytes") && err.contains("between"), "{err}");
}

/// tuning/tune on a fake /proc and /sys (TUNE_ROOT): the dry run reports every setting that
/// differs and changes nothing; --apply sets them all (governor, IRQs off the shard cores, the
/// disk's scheduler and merges, fs.aio-max-nr, THP, swappiness); the next dry run is clean.
#[test]
fn tune_checks_then_applies() {
    let root = tempfile::tempdir().unwrap();
    let w = |rel: &str, v: &str| {
        let p = root.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, v).unwrap();
    };
    w("sys/devices/system/cpu/online", "0-3\n");
    for c in 0..4 {
        w(&format!("sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor"), "powersave\n");
    }
    w("proc/irq/24/smp_affinity_list", "0-3\n");
    w("proc/irq/25/smp_affinity_list", "3\n");
    w("sys/block/vdz/queue/scheduler", "[mq-deadline] none\n");
    w("sys/block/vdz/queue/nomerges", "0\n");
    w("proc/sys/fs/aio-max-nr", "65536\n");
    w("sys/kernel/mm/transparent_hugepage/enabled", "[always] madvise never\n");
    w("proc/sys/vm/swappiness", "60\n");
    w("proc/self/status", "CapEff:\t0000000000004000\n");
    let tune = |args: &[&str]| {
        Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tuning/tune"))
            .args(args)
            .args(["--shard-cores", "0-2"])
            .env("TUNE_ROOT", root.path())
            .env("TUNE_DISK", "vdz")
            .output()
            .unwrap()
    };
    let read = |rel: &str| std::fs::read_to_string(root.path().join(rel)).unwrap();
    let dry = tune(&[]);
    let text = String::from_utf8_lossy(&dry.stdout);
    assert_eq!(dry.status.code(), Some(1), "{text}");
    for want in [
        "cpu0: powersave -> performance",
        "irq 24: 0-3 -> 3",
        "ok    irq 25 on 3",
        "vdz scheduler mq-deadline -> none",
        "vdz nomerges 0 -> 2",
        "fs.aio-max-nr 65536 -> 1048576",
        "thp always -> madvise",
        "vm.swappiness 60 -> 1",
        "CAP_IPC_LOCK held",
    ] {
        assert!(text.contains(want), "missing {want:?} in\n{text}");
    }
    assert_eq!(read("proc/sys/vm/swappiness"), "60\n", "a dry run changes nothing");
    let applied = tune(&["--apply"]);
    assert_eq!(applied.status.code(), Some(0), "{}", String::from_utf8_lossy(&applied.stdout));
    assert_eq!(read("sys/devices/system/cpu/cpu3/cpufreq/scaling_governor"), "performance\n");
    assert_eq!(read("proc/irq/24/smp_affinity_list"), "3\n");
    assert_eq!(read("sys/block/vdz/queue/scheduler"), "none\n");
    assert_eq!(read("proc/sys/fs/aio-max-nr"), "1048576\n");
    // The fake files now hold the plain values; a real sysfs shows "[none]" and the like.
    w("sys/block/vdz/queue/scheduler", "mq-deadline [none]\n");
    w("sys/kernel/mm/transparent_hugepage/enabled", "always [madvise] never\n");
    let again = tune(&[]);
    assert_eq!(again.status.code(), Some(0), "{}", String::from_utf8_lossy(&again.stdout));
}

/// Run `tidemark serve ARGS` on loopback port `port`; it must fail within 20 s (it is killed
/// otherwise) with every one of `needles` in its stderr. Returns the stderr.
fn serve_fails(data_dir: &std::path::Path, listen: &str, extra: &[&str], needles: &[&str]) -> String {
    use std::time::{Duration, Instant};
    let mut child = tidemark()
        .arg("serve")
        .arg("--data-dir")
        .arg(data_dir)
        .args(["--listen", listen])
        .args(extra)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!("serve still running after 20 s: {}", String::from_utf8_lossy(&out.stderr));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "serve exited successfully: {err}");
    for n in needles {
        assert!(err.contains(n), "stderr lacks {n:?}: {err}");
    }
    err
}

/// A loopback address with a port nothing listens on.
fn free_listen() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
}

/// A data directory that cannot be created (its parent is a regular file): serve fails at
/// once, naming the directory.
#[test]
fn serve_fails_fast_when_the_data_dir_cannot_be_created() {
    let tmp = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    std::fs::write(tmp.path().join("file"), b"x").unwrap();
    let data = tmp.path().join("file").join("data");
    serve_fails(&data, &free_listen(), &[], &["creating data dir", &data.display().to_string()]);
}

/// A data directory the broker may not write to (immutable for root, read-only otherwise):
/// serve fails at once saying it is not writable; nothing is left behind.
#[test]
fn serve_fails_fast_when_the_data_dir_is_not_writable() {
    let tmp = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let data = tmp.path().join("data");
    std::fs::create_dir(&data).unwrap();
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    struct Restore(std::path::PathBuf, bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            if self.1 {
                let _ = Command::new("chattr").arg("-i").arg(&self.0).status();
            } else {
                use std::os::unix::fs::PermissionsExt;
                let _ = std::fs::set_permissions(&self.0, std::fs::Permissions::from_mode(0o755));
            }
        }
    }
    let _restore = Restore(data.clone(), root);
    if root {
        // Root ignores permissions; the immutable attribute stops it (ext4, xfs).
        let ok = Command::new("chattr").arg("+i").arg(&data).status().is_ok_and(|s| s.success());
        if !ok {
            eprintln!("skipped: chattr +i is not available on this filesystem");
            return;
        }
    } else {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o555)).unwrap();
    }
    serve_fails(&data, &free_listen(), &[], &["is not writable", &data.display().to_string()]);
    assert_eq!(std::fs::read_dir(&data).unwrap().count(), 0, "serve wrote into the unwritable dir");
}

/// A data directory held by another broker (its `.lock` locked): the second serve fails at
/// once, naming the directory, without touching the data.
#[test]
fn serve_fails_fast_when_another_broker_holds_the_data_dir() {
    let tmp = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let data = tmp.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let lock = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(data.join(".lock")).unwrap();
    lock.try_lock().unwrap();
    serve_fails(&data, &free_listen(), &[], &["is in use by another tidemark process"]);
    assert_eq!(std::fs::read_dir(&data).unwrap().count(), 1, "only the lock file is there");
}

/// The listen address is served by another process: serve fails within seconds, naming the
/// address. A bad `--set` and a missing `--config` file are refused before anything starts.
#[test]
fn serve_fails_fast_on_a_taken_port_or_bad_settings() {
    let tmp = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let data = tmp.path().join("data");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    serve_fails(&data, &addr, &[], &["cannot listen on", &addr, "another process"]);
    serve_fails(&data, &free_listen(), &["--set", "num.partitions=0"], &["num.partitions"]);
    serve_fails(&data, &free_listen(), &["--set", "max.connections=-5"], &["max.connections"]);
    serve_fails(
        &data,
        &free_listen(),
        &["--config", "/nonexistent/tidemark.properties"],
        &["/nonexistent/tidemark.properties"],
    );
}
