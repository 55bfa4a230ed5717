#!/usr/bin/env bash
# Log compaction's figures, in one run on one broker with one shard
# (--cores 1: the cleaner, the producers and the disk share the core):
#
# 1. Cleaning throughput: a compacted topic's backlog of FILL_MB of 1 KiB records over KEYS keys
#    (written with cleanup.policy=delete, then switched to compact), cleaned by one pass with an
#    unthrottled cleaner: MB/s of log the pass walked (dirty log) over the pass's time (its
#    offset map included), from the broker's /metrics.
# 2. Produce latency on the same shard with and without the cleaner running, alternated ROUNDS
#    times: an open-loop producer (acks=all, 1 KiB, LAT_RATE records/s) on another topic while a
#    keyed producer keeps overwriting the compacted topic at OVERWRITE_RATE records/s; in the
#    "cleaner" phase the topic is compacted (min.cleanable.dirty.ratio 0.05, segments of 8 MiB,
#    the cleaner checking every 200 ms), in the "idle" phase its policy is delete (the cleaner has
#    nothing to do). Medians of p50, p99, p99.9 and max.
#
#   scripts/bench-compaction.sh [ROUNDS] [SECONDS] [FILL_MB] [DIR]   (defaults 3, 10, 400, ./target/bench-compaction)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${TIDEMARK_BIN:-target/release/tidemark}
py=${PYTHON:-target/venv/bin/python}
rounds=${1:-3}
secs=${2:-10}
fill_mb=${3:-400}
dir=${4:-./target/bench-compaction}
keys=${KEYS:-20000}
lat_rate=${LAT_RATE:-2000}
overwrite_rate=${OVERWRITE_RATE:-20000}
mkdir -p "$dir"
rm -rf "$dir/data"
port=$("$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mport=$("$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$bin" serve --data-dir "$dir/data" --listen "127.0.0.1:$port" --cores 1 --metrics-listen "127.0.0.1:$mport" \
  --set log.cleaner.backoff.ms=200 >"$dir/serve.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do
  "$py" -c "import socket; socket.create_connection(('127.0.0.1',$port),0.2).close()" 2>/dev/null && break
  sleep 0.05
done

admin() { # topic key=value...: create the topic if needed, then set its configs
  "$py" - "127.0.0.1:$port" "$@" <<'PY'
import sys
from confluent_kafka.admin import AdminClient, NewTopic, ConfigResource
bs, topic, pairs = sys.argv[1], sys.argv[2], dict(a.split("=", 1) for a in sys.argv[3:])
a = AdminClient({"bootstrap.servers": bs, "log_level": 2})
fs = a.create_topics([NewTopic(topic, 1, 1, config=pairs)])
try:
    fs[topic].result()
except Exception as e:
    if "TOPIC_ALREADY_EXISTS" not in str(e):
        raise
    r = ConfigResource("topic", topic, set_config=pairs)
    for f in a.alter_configs([r]).values():
        f.result()
PY
}
metric() { # the sum over shards of a /metrics counter
  curl -s "127.0.0.1:$mport/metrics" | awk -v m="tidemark_$1" '$1 ~ "^"m"[{]" {s += $2} END {printf "%.0f\n", s}'
}
load() { "$bin" load produce --bootstrap "127.0.0.1:$port" --record-size 1024 --acks all --json "$@" 2>/dev/null | tail -n 1; }

# 1. Throughput of one pass over a backlog.
admin cmp cleanup.policy=delete segment.bytes=16777216 retention.ms=-1
records=$((fill_mb * 1024))
echo "filling cmp: $records records of 1 KiB over $keys keys"
load --topic cmp --keys "$keys" --records "$records" >/dev/null
size_before=$(du -sb "$dir/data/cmp-0" | cut -f1)
p0=$(metric cleaner_passes_total)
admin cmp cleanup.policy=compact min.cleanable.dirty.ratio=0.5
for _ in $(seq 600); do
  [ "$(metric cleaner_passes_total)" -gt "$p0" ] && break
  sleep 0.1
done
read_b=$(metric cleaner_bytes_read_total); written_b=$(metric cleaner_bytes_written_total); ms=$(metric cleaner_time_ms_total)
size_after=$(du -sb "$dir/data/cmp-0" | cut -f1)
"$py" - "$read_b" "$written_b" "$ms" "$size_before" "$size_after" <<'PY' | tee "$dir/throughput.txt"
import sys
r, w, ms, before, after = map(float, sys.argv[1:])
print("one pass: %.0f MB walked, %.1f MB written, %.0f ms: %.0f MB/s of dirty log; partition dir %.0f MB -> %.1f MB"
      % (r / 1e6, w / 1e6, ms, r / 1e6 / (ms / 1000), before / 1e6, after / 1e6))
PY

# 2. Produce latency with and without the cleaner on the same shard.
admin lat segment.bytes=67108864
results=$dir/latency.txt
: >"$results"
phase() { # label, policy
  local label=$1 policy=$2 p0 b0 t0 out
  admin cmp cleanup.policy="$policy" segment.bytes=8388608 min.cleanable.dirty.ratio=0.05 retention.ms=-1
  sleep 1
  p0=$(metric cleaner_passes_total); b0=$(metric cleaner_bytes_read_total); t0=$(metric cleaner_time_ms_total)
  load --topic cmp --keys "$keys" --rate "$overwrite_rate" --duration $((secs + 2)) >/dev/null &
  local bg=$!
  sleep 1
  out=$(load --topic lat --rate "$lat_rate" --duration "$secs")
  wait $bg
  echo "$label $(echo "$out" | "$py" -c "import json,sys; j=json.load(sys.stdin); l=j['latency_ms']; print(l['p50'], l['p99'], l.get('p99.9', l.get('p999', '-')), l['max'], j['errors'])") \
$(( $(metric cleaner_passes_total) - p0 )) $(( $(metric cleaner_bytes_read_total) - b0 )) $(( $(metric cleaner_time_ms_total) - t0 ))" | tee -a "$results"
}
echo "label p50_ms p99_ms p99.9_ms max_ms errors passes bytes_walked cleaner_ms"
for r in $(seq "$rounds"); do
  if [ $((r % 2)) -eq 1 ]; then phase idle delete; phase cleaner compact; else phase cleaner compact; phase idle delete; fi
done
"$py" - "$results" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
def med(label, col):
    return statistics.median(float(r[col]) for r in rows if r[0] == label)
for k in ("idle", "cleaner"):
    print("%s: median p50 %.2f ms, p99 %.2f ms, p99.9 %.2f ms, max %.2f ms" % (k, med(k, 1), med(k, 2), med(k, 3), med(k, 4)))
c = [r for r in rows if r[0] == "cleaner"]
walked, ms = sum(float(r[7]) for r in c), sum(float(r[8]) for r in c)
print("cleaner phases: %d passes, %.0f MB walked in %.1f s of passes (%.0f MB/s while running)"
      % (sum(int(r[6]) for r in c), walked / 1e6, ms / 1000, walked / 1e6 / max(ms / 1000, 1e-9)))
print("p99 cleaner/idle: %.2f" % (med("cleaner", 2) / med("idle", 2)))
PY
