//! libFuzzer's entry for the `batch_parser` check (fuzz/checks/batch_parser.rs: what it feeds and checks).
#![no_main]

#[path = "../checks/batch_parser.rs"]
mod check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| check::run(data));
