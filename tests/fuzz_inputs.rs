//! The fuzz targets' checks (fuzz/checks) on a fixed, reproducible set of inputs, in the
//! ordinary test build: every committed seed (fuzz/seeds/<target>, valid inputs written by
//! tidemark's own encoders) and, from each, mutants made by a seeded generator (bit flips,
//! interesting bytes, cuts, inserted and removed runs, splices with another seed), as
//! libFuzzer's mutators make them but without its coverage guidance. Each check panics on
//! what it proves wrong (never a panic on untrusted bytes, and the properties its doc lists).
//!
//! Coverage-guided exploration, which finds what these miss, is `scripts/fuzz.sh SECONDS`
//! (cargo-fuzz, its own instrumented build); a failure it finds becomes a seed here.

#[allow(dead_code)]
#[path = "../fuzz/checks/batch_parser.rs"]
mod batch_parser;
#[allow(dead_code)]
#[path = "../fuzz/checks/recovery.rs"]
mod recovery;
#[allow(dead_code)]
#[path = "../fuzz/checks/request_decoder.rs"]
mod request_decoder;
#[allow(dead_code)]
#[path = "../fuzz/checks/sasl_exchange.rs"]
mod sasl_exchange;

use std::path::Path;

/// xorshift64*: a fixed sequence from a fixed seed, so a failure replays.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// The committed seeds of `target`, sorted by name.
fn seeds(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds").join(target);
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| {
            let path = e.expect("a directory entry").path();
            let name = path.file_name().expect("a file name").to_string_lossy().into_owned();
            (name, std::fs::read(&path).expect("a readable seed"))
        })
        .collect();
    out.sort();
    assert!(!out.is_empty(), "{}: no seeds", dir.display());
    out
}

/// One mutant of `input` (`other`: another seed to splice with): one to four of libFuzzer's
/// kinds of change.
fn mutate(rng: &mut Rng, input: &[u8], other: &[u8]) -> Vec<u8> {
    const INTERESTING: [u8; 8] = [0x00, 0x01, 0x7f, 0x80, 0xfe, 0xff, 0x40, 0x20];
    let mut m = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(m.len() + 1);
        match rng.below(8) {
            0 if !m.is_empty() => {
                let i = rng.below(m.len());
                m[i] ^= 1 << rng.below(8);
            }
            1 if !m.is_empty() => {
                let i = rng.below(m.len());
                m[i] = INTERESTING[rng.below(INTERESTING.len())];
            }
            2 => m.truncate(at),
            3 => {
                let n = 1 + rng.below(16);
                let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                m.splice(at..at, bytes);
            }
            4 => {
                let end = (at + 1 + rng.below(32)).min(m.len());
                m.drain(at.min(end)..end);
            }
            5 if !m.is_empty() => {
                // A big-endian length or count field set to an extreme.
                let i = rng.below(m.len());
                let value: u32 = [0, 1, 0x7fff_ffff, 0xffff_ffff, 0x8000_0000][rng.below(5)];
                for (k, b) in value.to_be_bytes().iter().enumerate() {
                    if let Some(slot) = m.get_mut(i + k) {
                        *slot = *b;
                    }
                }
            }
            6 if !other.is_empty() => {
                let from = rng.below(other.len());
                let n = 1 + rng.below(other.len() - from);
                m.splice(at..at, other[from..from + n].iter().copied());
            }
            _ => {
                // A run repeated: duplicated fields and records.
                if !m.is_empty() {
                    let from = rng.below(m.len());
                    let n = 1 + rng.below((m.len() - from).min(64));
                    let run = m[from..from + n].to_vec();
                    m.splice(at..at, run);
                }
            }
        }
    }
    m
}

/// Every seed of `target`, then `mutants` mutants of each (seeded by the target's name), through
/// `check`. A panic names the input that caused it.
fn replay(target: &str, mutants: usize, check: fn(&[u8])) {
    let seeds = seeds(target);
    let mut rng = Rng(target.bytes().fold(0x9e37_79b9_7f4a_7c15, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3)));
    let mut ran = 0usize;
    for (i, (name, seed)) in seeds.iter().enumerate() {
        check(seed);
        let other = &seeds[(i + 1) % seeds.len()].1;
        for k in 0..mutants {
            let input = mutate(&mut rng, seed, other);
            let outcome = std::panic::catch_unwind(|| check(&input));
            if let Err(panic) = outcome {
                let path = std::env::temp_dir().join(format!("{target}-{name}-mutant-{k}"));
                let _ = std::fs::write(&path, &input);
                std::panic::resume_unwind(Box::new(format!(
                    "{target}: mutant {k} of seed {name} failed (input saved to {}; replay with \
                     RUSTC_BOOTSTRAP=1 cargo fuzz run {target} <that file>): {:?}",
                    path.display(),
                    panic.downcast_ref::<String>().map(String::as_str).or(panic.downcast_ref::<&str>().copied())
                )));
            }
            ran += 1;
        }
    }
    eprintln!("{target}: {} seeds and {ran} mutants checked", seeds.len());
}

/// Requests of every API and version, and mutants: decoded without a panic; what decodes
/// re-encodes to the same request.
#[test]
fn request_decoder_seeds_and_mutants() {
    replay("request_decoder", 4000, request_decoder::run);
}

/// Batches of every magic and codec, and mutants: the produce, stored and compaction checks
/// never panic and keep their properties.
#[test]
fn batch_parser_seeds_and_mutants() {
    replay("batch_parser", 8000, batch_parser::run);
}

/// Logs on disk, and mutants of their files: an open never panics and what it opens is
/// consistent (spec: T8).
#[test]
fn recovery_seeds_and_mutants() {
    replay("recovery", 5000, recovery::run);
}

/// SASL exchanges, and mutants: never a panic, never authenticated without the password.
#[test]
fn sasl_exchange_seeds_and_mutants() {
    replay("sasl_exchange", 20000, sasl_exchange::run);
}
