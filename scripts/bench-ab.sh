#!/usr/bin/env bash
# A/B: two tidemark builds under the same load, alternated, side by side in one run (STYLE rule
# 11: a hot-path change shows its figure before and after). Each round starts a fresh broker of
# each build on its embedded defaults (every acknowledged record fdatasynced) and drives it with
# `tidemark load produce` (build A's generator for both: acks=all, 1 KiB records, 8 partitions,
# 8 connections, 2 threads, 10 in flight) for SECONDS; prints each round and the medians of
# records/s and p99, and the ratio B/A.
#
#   scripts/bench-ab.sh BIN_A BIN_B [ROUNDS] [SECONDS] [DIR]     (defaults 5, 5, ./target/bench-ab)
#
# Build an older commit apart, e.g.:
#   git worktree add /tmp/old <commit> && (cd /tmp/old && CARGO_TARGET_DIR=/tmp/old-target cargo build --release)
#   scripts/bench-ab.sh /tmp/old-target/release/tidemark target/release/tidemark
set -euo pipefail
cd "$(dirname "$0")/.."
a=${1:?BIN_A}
b=${2:?BIN_B}
rounds=${3:-5}
secs=${4:-5}
dir=${5:-./target/bench-ab}
mkdir -p "$dir"
results=$dir/results.txt
: >"$results"

run() { # label, binary: one measurement, appended to $results as "label records_per_sec p99_ms"
  local label=$1 bin=$2 port pid
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  rm -rf "$dir/data"
  "$bin" serve --data-dir "$dir/data" --listen "127.0.0.1:$port" >"$dir/serve-$label.log" 2>&1 &
  pid=$!
  for _ in $(seq 100); do
    python3 -c "import socket,sys; socket.create_connection(('127.0.0.1',$port),0.2).close()" 2>/dev/null && break
    sleep 0.05
  done
  "$a" load produce --bootstrap "127.0.0.1:$port" --topic ab --partitions 8 --connections 8 --threads 2 \
      --in-flight 10 --acks all --record-size 1024 --duration "$secs" --json 2>/dev/null | tail -n 1 \
    | python3 -c "import json,sys; j=json.load(sys.stdin); print('$label', round(j['records_per_sec']), j['latency_ms']['p99'])" \
    | tee -a "$results"
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  sync
  sleep 1
}

for r in $(seq "$rounds"); do
  if [ $((r % 2)) -eq 1 ]; then run A "$a"; run B "$b"; else run B "$b"; run A "$a"; fi
done
rm -rf "$dir/data"
python3 - "$results" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
med = {k: (statistics.median(float(r[1]) for r in rows if r[0] == k),
           statistics.median(float(r[2]) for r in rows if r[0] == k)) for k in ("A", "B")}
for k in ("A", "B"):
    print("%s: median %.0f records/s, p99 %.2f ms" % (k, *med[k]))
print("B/A: records/s %.3f, p99 %.3f" % (med["B"][0] / med["A"][0], med["B"][1] / med["A"][1]))
EOF
