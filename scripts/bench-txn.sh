#!/usr/bin/env bash
# Transactional against idempotent produce, side by side in one run: each round starts a fresh
# broker on its embedded defaults and drives it with
# `tidemark load produce` at the same batch size (acks=all, 1 KiB records, 64 KiB batches,
# 4 partitions, 2 connections, 5 in flight), once idempotent and once transactional
# (`--transactional --txn-records N`: each connection commits every N records, closed loop),
# alternating which goes first; prints each round, the medians of records/s and p99, the ratio,
# and the medians of the commit (EndTxn) latency p50 and p99.
#
#   scripts/bench-txn.sh [ROUNDS] [SECONDS] [TXN_RECORDS] [DIR]   (defaults 5, 5, 10000, ./target/bench-txn)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${TIDEMARK_BIN:-target/release/tidemark}
rounds=${1:-5}
secs=${2:-5}
per_txn=${3:-10000}
dir=${4:-./target/bench-txn}
mkdir -p "$dir"
results=$dir/results.txt
: >"$results"

run() { # label, producer flags: one measurement appended to $results
  local label=$1 port pid
  shift
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  rm -rf "$dir/data"
  "$bin" serve --data-dir "$dir/data" --listen "127.0.0.1:$port" >"$dir/serve-$label.log" 2>&1 &
  pid=$!
  for _ in $(seq 100); do
    python3 -c "import socket,sys; socket.create_connection(('127.0.0.1',$port),0.2).close()" 2>/dev/null && break
    sleep 0.05
  done
  "$bin" load produce --bootstrap "127.0.0.1:$port" --topic txn --partitions 4 --connections 2 \
      --in-flight 5 --acks all --record-size 1024 --batch-bytes 65536 --duration "$secs" --json "$@" 2>/dev/null \
    | tail -n 1 \
    | python3 -c "import json,sys; j=json.load(sys.stdin); c=j.get('commit_ms', {}); print('$label', round(j['records_per_sec']), j['latency_ms']['p99'], j['errors'], c.get('p50', '-'), c.get('p99', '-'), j.get('transactions', '-'))" \
    | tee -a "$results"
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  sync
  sleep 1
}

for r in $(seq "$rounds"); do
  if [ $((r % 2)) -eq 1 ]; then
    run idempotent --idempotent; run transactional --transactional --txn-records "$per_txn"
  else
    run transactional --transactional --txn-records "$per_txn"; run idempotent --idempotent
  fi
done
rm -rf "$dir/data"
python3 - "$results" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
def med(label, col):
    return statistics.median(float(r[col]) for r in rows if r[0] == label)
for k in ("idempotent", "transactional"):
    print("%s: median %.0f records/s, p99 %.2f ms" % (k, med(k, 1), med(k, 2)))
print("transactional/idempotent records/s: %.3f" % (med("transactional", 1) / med("idempotent", 1)))
print("commit (EndTxn) latency: median p50 %.3f ms, median p99 %.3f ms" % (med("transactional", 4), med("transactional", 5)))
PY
