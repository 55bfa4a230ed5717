//! The `tidemark` binary: `dump` on files the engine wrote, and `storage-load` end to end.

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
