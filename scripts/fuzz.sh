#!/usr/bin/env bash
# Fuzz tidemark with cargo-fuzz (libFuzzer): build every target in fuzz/ once, then run each
# for SECONDS (default 20), starting from the committed seeds (fuzz/seeds/<target>) and the
# local corpus (fuzz/corpus/<target>, which keeps what the runs found). Fails, naming the
# reproducer, if any target panics, crashes, leaks past the memory limit or hangs.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]    targets: request_decoder batch_parser recovery sasl_exchange
#   scripts/fuzz.sh --ci                      reproducible: fixed inputs (below)
#
# --ci: a fixed number of inputs per target (about 20 s each here), a fixed random seed, the
# committed seeds only (no local corpus): nearly the same inputs on every machine (the
# targets' own hash maps still vary a little), so the test command's outcome depends far less
# on luck than a timed run; a failure found there is a real bug, replayable.
# Time-limited runs (the default) explore further and are how new failures are found.
#
# Works on a stable toolchain: RUSTC_BOOTSTRAP=1 lets stable rustc take the nightly flags
# cargo-fuzz passes (sancov, -Zsanitizer=address). FUZZ_SANITIZER=none builds without ASan
# (faster, finds only panics). Builds go to fuzz/target, apart from ./target.
# Longer runs and reproducing a crash: see fuzz/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."

ci=0
if [ "${1:-}" = "--ci" ]; then
  ci=1
  shift
fi
seconds="${1:-20}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(request_decoder batch_parser recovery sasl_exchange)
sanitizer="${FUZZ_SANITIZER:-address}"
cargo_fuzz_version=0.13.2

if ! command -v cargo >/dev/null 2>&1; then
  echo "scripts/fuzz.sh: cargo not found; install Rust (https://rustup.rs) first" >&2
  exit 1
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  cargo install --locked --quiet cargo-fuzz --version "$cargo_fuzz_version"
fi

export RUSTC_BOOTSTRAP=1
fuzz() { cargo fuzz "$1" --sanitizer "$sanitizer" "${@:2}"; }
# One build of tidemark for all targets (the runs below find them built).
fuzz build

failed=()
for t in "${targets[@]}"; do
  mkdir -p "fuzz/corpus/$t" "fuzz/artifacts/$t"
  before="$(ls "fuzz/artifacts/$t")"
  if [ "$ci" = 1 ]; then echo "scripts/fuzz.sh: $t on its fixed inputs"; else echo "scripts/fuzz.sh: $t for ${seconds}s"; fi
  # -timeout: one input running that long is a hang; -rss_limit_mb: libFuzzer's default,
  # stated. Runs are bounded by -max_total_time (plus loading the corpus).
  if [ "$ci" = 1 ]; then
    case $t in
      request_decoder) runs=400000 ;;
      batch_parser) runs=50000 ;;
      sasl_exchange) runs=30000 ;;
      *) runs=15000 ;;
    esac
    # A scratch corpus (the seeds are only read), so every run starts from the same inputs.
    corpus=$(mktemp -d)
    limits=(-seed=1 -runs="$runs")
  else
    corpus=fuzz/corpus/$t
    limits=(-max_total_time="$seconds")
  fi
  if ! fuzz run "$t" "$corpus" "fuzz/seeds/$t" -- \
      "${limits[@]}" -timeout=25 -rss_limit_mb=2048 -print_final_stats=1 \
      >"fuzz/artifacts/$t.log" 2>&1; then
    failed+=("$t")
    tail -n 60 "fuzz/artifacts/$t.log" >&2
    for a in $(comm -13 <(echo "$before") <(ls "fuzz/artifacts/$t")); do
      echo "scripts/fuzz.sh: $t failed; reproducer: fuzz/artifacts/$t/$a" >&2
      echo "  replay: RUSTC_BOOTSTRAP=1 cargo fuzz run $t fuzz/artifacts/$t/$a" >&2
    done
  fi
  if [ "$ci" = 1 ]; then rm -rf "$corpus"; fi
  grep -E '^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)|^Done' "fuzz/artifacts/$t.log" |
    sed "s/^/  $t: /" || true
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "scripts/fuzz.sh: FAILED: ${failed[*]} (logs: fuzz/artifacts/<target>.log)" >&2
  exit 1
fi
if [ "$ci" = 1 ]; then
  echo "scripts/fuzz.sh: every target ran its fixed inputs (seed 1) without a failure"
else
  echo "scripts/fuzz.sh: every target ran ${seconds}s without a failure"
fi
