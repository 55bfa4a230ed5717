#!/usr/bin/env bash
# Transactional against idempotent produce, and Kafka's two transaction versions against each
# other, side by side in one run: each round starts a fresh broker on its embedded defaults and
# drives it with `tidemark load produce` at the same batch size (acks=all, 1 KiB records, 64 KiB
# batches, 4 partitions, 2 connections, 5 in flight), once idempotent, once transactional at
# transaction version 0 (AddPartitionsToTxn first, EndTxn v4) and once at version 2 (KIP-890
# part 2: Produce v12 adds each partition at its first write, EndTxn v5 bumps the epoch)
# (`--transactional --txn-records N`: each connection commits every N records, closed loop),
# the order rotating from round to round; prints each round, the medians of records/s and p99,
# the ratios, and the medians of the commit (EndTxn) latency p50 and p99.
#
#   scripts/bench-txn.sh [ROUNDS] [SECONDS] [TXN_RECORDS] [DIR]   (defaults 5, 5, 1000, ./target/bench-txn)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${TIDEMARK_BIN:-target/release/tidemark}
rounds=${1:-5}
secs=${2:-5}
per_txn=${3:-1000}
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

idem() { run idempotent --idempotent; }
tv0() { run txn-v0 --transactional --txn-records "$per_txn" --transaction-version 0; }
tv2() { run txn-v2 --transactional --txn-records "$per_txn" --transaction-version 2; }
for r in $(seq "$rounds"); do
  case $((r % 3)) in
    1) idem; tv0; tv2 ;;
    2) tv0; tv2; idem ;;
    0) tv2; idem; tv0 ;;
  esac
done
rm -rf "$dir/data"
python3 - "$results" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
def med(label, col):
    return statistics.median(float(r[col]) for r in rows if r[0] == label)
for k in ("idempotent", "txn-v0", "txn-v2"):
    print("%s: median %.0f records/s, p99 %.2f ms" % (k, med(k, 1), med(k, 2)))
for k in ("txn-v0", "txn-v2"):
    print("%s/idempotent records/s: %.3f" % (k, med(k, 1) / med("idempotent", 1)))
    print("%s commit (EndTxn) latency: median p50 %.3f ms, median p99 %.3f ms" % (k, med(k, 4), med(k, 5)))
print("txn-v2/txn-v0 records/s: %.3f" % (med("txn-v2", 1) / med("txn-v0", 1)))
PY
