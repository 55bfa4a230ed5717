#!/usr/bin/env bash
# Fuzz tidemark with cargo-fuzz (libFuzzer): build every target in fuzz/ once, then run each
# for SECONDS (default 20), starting from the committed seeds (fuzz/seeds/<target>) and the
# local corpus (fuzz/corpus/<target>, which keeps what the runs found). Fails, naming the
# reproducer, if any target panics, crashes, leaks past the memory limit or hangs.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]    targets: request_decoder batch_parser recovery
#
# Works on a stable toolchain: RUSTC_BOOTSTRAP=1 lets stable rustc take the nightly flags
# cargo-fuzz passes (sancov, -Zsanitizer=address). FUZZ_SANITIZER=none builds without ASan
# (faster, finds only panics). Builds go to fuzz/target, apart from ./target.
# Longer runs and reproducing a crash: see fuzz/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-20}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(request_decoder batch_parser recovery)
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
  echo "scripts/fuzz.sh: $t for ${seconds}s"
  # -timeout: one input running that long is a hang; -rss_limit_mb: libFuzzer's default,
  # stated. Runs are bounded by -max_total_time (plus loading the corpus).
  if ! fuzz run "$t" "fuzz/corpus/$t" "fuzz/seeds/$t" -- \
      -max_total_time="$seconds" -timeout=25 -rss_limit_mb=2048 -print_final_stats=1 \
      >"fuzz/artifacts/$t.log" 2>&1; then
    failed+=("$t")
    tail -n 60 "fuzz/artifacts/$t.log" >&2
    for a in $(comm -13 <(echo "$before") <(ls "fuzz/artifacts/$t")); do
      echo "scripts/fuzz.sh: $t failed; reproducer: fuzz/artifacts/$t/$a" >&2
      echo "  replay: RUSTC_BOOTSTRAP=1 cargo fuzz run $t fuzz/artifacts/$t/$a" >&2
    done
  fi
  grep -E '^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)|^Done' "fuzz/artifacts/$t.log" |
    sed "s/^/  $t: /" || true
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "scripts/fuzz.sh: FAILED: ${failed[*]} (logs: fuzz/artifacts/<target>.log)" >&2
  exit 1
fi
echo "scripts/fuzz.sh: every target ran ${seconds}s without a failure"
