//! libFuzzer's entry for the `request_decoder` check (fuzz/checks/request_decoder.rs: what it feeds and checks).
#![no_main]

#[path = "../checks/request_decoder.rs"]
mod check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| check::run(data));
