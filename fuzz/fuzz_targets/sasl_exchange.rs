//! libFuzzer's entry for the `sasl_exchange` check (fuzz/checks/sasl_exchange.rs: what it feeds and checks).
#![no_main]

#[path = "../checks/sasl_exchange.rs"]
mod check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| check::run(data));
