#!/bin/bash
# Issue 19, target 3: open-loop produce latency for two builds, alternated, beside fio's
# fdatasync latency on the same disk in each round: one file at queue depth 1, and eight files
# syncing at once (what the broker's eight partitions do).
#
# Usage: scripts/bench-tail.sh BIN_A BIN_B [ROUNDS] [RATE] [LINGER_MS] [SECONDS] [DIR] [IN_FLIGHT]
#   defaults: 2 rounds, 500000 records/s (about half the maximum on the 2-core machine),
#   linger 5 ms, 8 s, ./target/bench-tail, 10 in flight. Each run: a fresh `BIN serve` on its
#   defaults, then `BIN load produce` (acks=all, 1 KiB, 8 partitions, 8 connections, 2 threads;
#   latency counted from each record's intended send time; beside it each request's round
#   trip, and the broker's own request_produce p99, the largest of its shards). The broker's
#   /metrics after each run are kept in DIR/metrics.NAME.ROUND (request_produce, commit_wait,
#   write_synced, fdatasync stages). For a producer that sends as soon as it may: LINGER_MS 0,
#   IN_FLIGHT 1. Each run's p99s are also printed as multiples of that round's fio 8-file
#   fdatasync p99 (target 3: at most 3).
# Environment: SERVE_CORES=N runs the broker on N shards (pinned to CPUs 0..N-1); LOAD_CPUS=LIST
#   pins the generator (taskset -c LIST), e.g. SERVE_CORES=2 LOAD_CPUS=2-3 on a 4-core machine,
#   so that the generator does not share the broker's CPUs.
set -u
[ $# -ge 2 ] || { sed -n 2,18p "$0"; exit 2; }
command -v fio >/dev/null || { echo "bench-tail: fio not found (apt-get install fio)" >&2; exit 1; }
A=$1 B=$2 rounds=${3:-2} rate=${4:-500000} linger=${5:-5} secs=${6:-8} dir=${7:-./target/bench-tail} inflight=${8:-10}
mkdir -p "$dir"
serve_cores=() load_pin=()
[ -n "${SERVE_CORES:-}" ] && serve_cores=(--cores "$SERVE_CORES")
[ -n "${LOAD_CPUS:-}" ] && load_pin=(taskset -c "$LOAD_CPUS")
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
for r in $(seq "$rounds"); do
  rm -f "$dir/fio.f"
  fio --name=s --filename="$dir/fio.f" --size=1G --direct=1 --ioengine=io_uring --rw=write --bs=16k \
      --iodepth=1 --fdatasync=1 --time_based --runtime=4 --output-format=json 2>/dev/null | python3 -c "
import json,sys; s=json.load(sys.stdin)['jobs'][0]['sync']['lat_ns']['percentile']
print('round $r: fio fdatasync p50 / p99 / p99.9: %d / %d / %d us' % (s['50.000000']//1000, s['99.000000']//1000, s['99.900000']//1000))"
  rm -f "$dir/fio.f"
  # What the broker's syncs do: eight files (one per partition) each written and fdatasynced at
  # once, 64 KiB at a time.
  rm -rf "$dir/fio8" "$dir/fio8.p99"; mkdir -p "$dir/fio8"
  fio --name=s8 --directory="$dir/fio8" --size=256M --numjobs=8 --group_reporting --direct=1 \
      --ioengine=io_uring --rw=write --bs=64k --iodepth=1 --fdatasync=1 --time_based --runtime=4 \
      --output-format=json 2>/dev/null | python3 -c "
import json,sys; s=json.load(sys.stdin)['jobs'][0]['sync']['lat_ns']['percentile']
print('round $r: fio fdatasync, 8 files at once, p50 / p99 / p99.9: %d / %d / %d us' % (s['50.000000']//1000, s['99.000000']//1000, s['99.900000']//1000))
open('$dir/fio8.p99', 'w').write(str(s['99.000000'] / 1e6))"
  rm -rf "$dir/fio8"
  for bin in "$A" "$B"; do
    port=$(free_port); mport=$(free_port)
    rm -rf "$dir/serve"
    "$bin" serve --data-dir "$dir/serve" --listen "127.0.0.1:$port" --metrics-listen "127.0.0.1:$mport" "${serve_cores[@]}" >"$dir/serve.log" 2>&1 &
    pid=$!
    sleep 1
    "${load_pin[@]}" "$bin" load produce --bootstrap "127.0.0.1:$port" --topic t --partitions 8 --connections 8 --threads 2 \
        --in-flight "$inflight" --acks all --record-size 1024 --rate "$rate" --linger-ms "$linger" --duration "$secs" \
        --json 2>/dev/null | tail -n 1 >"$dir/load.json"
    curl -s "127.0.0.1:$mport/metrics" >"$dir/metrics.$(basename "$bin").$r"
    python3 - "$dir/load.json" "$dir/metrics.$(basename "$bin").$r" "$(basename "$bin")" "$dir/fio8.p99" <<'PY'
import json, re, sys
j = json.load(open(sys.argv[1])); l = j['latency_ms']; q = j.get('request_ms', {})
broker = max([float(v) * 1000 for v in re.findall(r'stage="request_produce",quantile="0.99"\} ([0-9.e-]+)', open(sys.argv[2]).read())] or [0])
print('  %-24s %8.0f records/s  p50 %.2f  p99 %.2f  p99.9 %.2f  max %.2f ms;  requests p50 %.2f  p99 %.2f;  broker request_produce p99 %.2f ms'
      % (sys.argv[3], j['records_per_sec'], l['p50'], l['p99'], l['p999'], l['max'], q.get('p50', 0), q.get('p99', 0), broker))
try:
    fio8 = float(open(sys.argv[4]).read())
except (OSError, ValueError):
    fio8 = 0
if fio8 > 0:
    print('  %-24s p99 / fio 8-file p99 (target 3: <= 3): records %.1f  requests %.1f  broker %.1f'
          % ('', l['p99'] / fio8, q.get('p99', 0) / fio8, broker / fio8))
PY
    kill $pid; wait $pid 2>/dev/null
  done
done
rm -rf "$dir/serve"
