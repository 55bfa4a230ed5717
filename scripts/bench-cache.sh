#!/usr/bin/env bash
# The batch cache, on and off, side by side in one run: a fresh broker on its embedded defaults
# (every acknowledged record fdatasynced) driven by `tidemark load e2e` (producers and tailing
# consumers together: acks=all, 1 KiB records, 8 partitions, 8 connections, 2 threads, 10 in
# flight, open loop at RATE records/s) for SECONDS, alternating `tidemark.batch.cache.enable`
# true and false for ROUNDS rounds. Prints, per run: end-to-end p99 and p99.9 (send to arrival at
# the consumer), the producer's p99 beside it, the bytes the brokers' reads took from the cache
# and from disk (/metrics, every shard), and broker CPU-seconds per GB produced.
#
#   scripts/bench-cache.sh [BIN] [SECONDS] [ROUNDS] [RATE] [DIR]
#       (defaults target/release/tidemark, 8, 3, 300000, ./target/bench-cache)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/release/tidemark}
secs=${2:-8}
rounds=${3:-3}
rate=${4:-300000}
dir=${5:-./target/bench-cache}
mkdir -p "$dir"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

run() { # cache: true or false
  local cache=$1 port mport pid c0 c1 out metrics
  port=$(free_port)
  mport=$(free_port)
  rm -rf "$dir/data"
  "$bin" serve --data-dir "$dir/data" --listen "127.0.0.1:$port" --metrics-listen "127.0.0.1:$mport" \
    --set "tidemark.batch.cache.enable=$cache" >"$dir/serve-$cache.log" 2>&1 &
  pid=$!
  sleep 1
  c0=$(awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$pid/stat")
  out=$("$bin" load e2e --bootstrap "127.0.0.1:$port" --topic e2e --partitions 8 --connections 8 --threads 2 \
    --in-flight 10 --acks all --record-size 1024 --rate "$rate" --duration "$secs" --json 2>/dev/null | tail -n 1)
  c1=$(awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$pid/stat")
  metrics=$(curl -s "127.0.0.1:$mport/metrics")
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  rm -rf "$dir/data"
  OUT="$out" METRICS="$metrics" CPU="$(awk "BEGIN{print $c1 - $c0}")" CACHE="$cache" SECS="$secs" python3 - <<'EOF'
import json, os, re
j = json.loads(os.environ["OUT"])
def total(name):
    return sum(float(v) for v in re.findall(r'^tidemark_%s\{[^}]*\} (\S+)$' % name, os.environ["METRICS"], re.M))
hit, miss = total("batch_cache_hit_bytes_total"), total("log_disk_read_bytes_total")
gb = j["mb_per_sec"] * float(os.environ["SECS"]) / 1000
print("cache %-5s  %7.1f MB/s  e2e p99 %6.2f ms  p99.9 %6.2f ms  produce p99 %6.2f ms  read from cache %7.1f MB  from disk %7.1f MB  CPU-s/GB %.2f"
      % (os.environ["CACHE"], j["mb_per_sec"], j["latency_ms"]["p99"], j["latency_ms"]["p999"],
         j.get("produce_ms", {}).get("p99", float("nan")), hit / 1e6, miss / 1e6, float(os.environ["CPU"]) / gb))
EOF
}

for r in $(seq 1 "$rounds"); do
  echo "round $r"
  run true
  run false
done
