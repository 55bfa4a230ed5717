//! libFuzzer's entry for the `recovery` check (fuzz/checks/recovery.rs: what it feeds and checks).
#![no_main]

#[path = "../checks/recovery.rs"]
mod check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| check::run(data));
