#!/usr/bin/env bash
# Side by side in one run: the same produce workloads against tidemark and a peer broker on
# this machine, printing each figure and the ratio tidemark / peer.
#   1. tidemark load, closed loop: 1 KiB records, acks=all, 4 partitions, 4 connections;
#   2. tidemark load, open loop at half of each broker's own maximum from (1): p99 latency;
#   3. an external client: confluent-kafka (librdkafka) from Python, 1,000,000 x 1 KiB, acks=all,
#      linger.ms=5, batch.size=262144 (scripts/peers/py-produce.py);
#   4. librdkafka's own C perf tool, rdkafka_performance (built from the sources the rdkafka-sys
#      crate carries: scripts/librdkafka-0011.sh BUILD_ONLY=1), RDKAFKA_RECORDS (4,000,000) x 1 KiB,
#      acks=all, linger.ms=5, to a topic of 2 partitions, in RDKAFKA_ROUNDS (5) rounds, each run
#      on a freshly started broker alone on the machine (the page cache synced and quiet first),
#      tidemark and the peer alternating which goes first: every round's ratio.
# Usage: scripts/bench-peer.sh PEER [SECONDS]      (ONLY_RDKAFKA=1: measurement 4 alone)
#   PEER: tansu or noida (started here from scripts/peers, installed by scripts/peers/install.sh
#   if missing), or HOST:PORT of a Kafka-compatible broker already running.
# tidemark runs with its defaults (every acknowledged record fdatasynced first) on a fresh data
# directory under target/; the peers here keep data in memory (see docs/benchmarks.md).
set -euo pipefail
cd "$(dirname "$0")/.."
peer=${1:?usage: scripts/bench-peer.sh tansu|noida|HOST:PORT [SECONDS]}
secs=${2:-10}
cargo build --release --quiet
bin=./target/release/tidemark
venv=${PEERS_VENV:-target/peers-venv}
[ -x "$venv/bin/python" ] || scripts/peers/install.sh >&2
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Each measurement runs on freshly started brokers (a peer that keeps everything in memory
# slows down as data accumulates, so reusing one would be unfair to it).
pids=()
cleanup() { for p in "${pids[@]}"; do scripts/peers/stop.sh "$p" >/dev/null 2>&1 || true; done; pids=(); }
trap cleanup EXIT

start_both() { # [tidemark|peer]: only that one; sets tm_addr and peer_addr
  cleanup
  # What the last run left in the page cache (noida writes its whole state out when stopped)
  # must not be written back under the next run's fdatasyncs.
  rm -rf target/bench-peer
  sync
  sleep "${BENCH_SETTLE:-3}"
  local tm_port tm_dir p_port p_dir
  if [ "${1:-}" = peer ]; then
    tm_addr=
  else
    tm_port=$(free_port)
    tm_dir=target/bench-peer/tidemark
    rm -rf "$tm_dir" && mkdir -p "$tm_dir"
    "$bin" serve --data-dir "$tm_dir" --listen "127.0.0.1:$tm_port" >"$tm_dir/../tidemark.log" 2>&1 &
    pids+=($!)
    for _ in $(seq 100); do "$venv/bin/python" scripts/peers/kafka-probe.py "127.0.0.1:$tm_port" 2>/dev/null && break; sleep 0.1; done
    tm_addr=127.0.0.1:$tm_port
  fi
  if [ "${1:-}" = tidemark ]; then return; fi
  case "$peer" in
    tansu | noida)
      p_port=$(free_port)
      p_dir=target/bench-peer/$peer
      rm -rf "$p_dir" && mkdir -p "$p_dir"
      pids+=("$(scripts/peers/start-"$peer".sh "$p_port" "$p_dir")")
      peer_addr=127.0.0.1:$p_port
      ;;
    *) peer_addr=$peer ;;
  esac
}

json_field() { python3 -c "import json,sys; d=json.loads(sys.stdin.read().strip().splitlines()[-1]); print($1)"; }
closed() { # addr topic: "records_per_sec p99"
  "$bin" load produce --bootstrap "$1" --topic "$2" --partitions 4 --connections 4 --acks all \
    --record-size 1024 --batch-bytes 262144 --duration "$secs" --json 2>/dev/null | json_field 'd["records_per_sec"], d["latency_ms"]["p99"]' | tr -d '(),'
}
open_loop() { # addr topic rate: "records_per_sec p99" (progress lines in target/bench-peer-open-*.log)
  "$bin" load produce --bootstrap "$1" --topic "$2" --partitions 4 --connections 4 --acks all \
    --record-size 1024 --batch-bytes 262144 --duration "$secs" --rate "$3" --json 2>"target/bench-peer-open-$1.log" \
    | json_field 'd["records_per_sec"], d["latency_ms"]["p99"]' | tr -d '(),'
}
external() { # addr topic: records_per_sec
  "$venv/bin/python" scripts/peers/py-produce.py "$1" "$2" 1000000 1024 --partitions 4 | json_field 'd["records_per_sec"]'
}
ratio() { python3 -c "print('%.2f' % ($1 / $2))"; }
rdkperf_bin=$(BUILD_ONLY=1 scripts/librdkafka-0011.sh | tail -n 1)
rdkperf() { # addr topic: MB/s of rdkafka_performance producing RDKAFKA_RECORDS x 1 KiB to a 2-partition topic
  "$venv/bin/python" - "$1" "$2" <<'PY'
import sys
from confluent_kafka.admin import AdminClient, NewTopic
a = AdminClient({"bootstrap.servers": sys.argv[1]})
for f in a.create_topics([NewTopic(sys.argv[2], num_partitions=2, replication_factor=1)]).values():
    f.result()
PY
  "$rdkperf_bin" -P -t "$2" -b "$1" -s 1024 -c "${RDKAFKA_RECORDS:-4000000}" -a -1 -X linger.ms=5 2>&1 \
    | grep 'messages produced' | tail -n 1 | sed -E 's/.* ([0-9.]+) MB\/s.*/\1/'
}

if [ "${ONLY_RDKAFKA:-0}" != 1 ]; then
  start_both
  read -r t_max t_p99 < <(closed "$tm_addr" bench-max)
  read -r p_max p_p99 < <(closed "$peer_addr" bench-max)
  start_both
  read -r t_half t_half_p99 < <(open_loop "$tm_addr" bench-half "$(python3 -c "print(int($t_max/2))")")
  read -r p_half p_half_p99 < <(open_loop "$peer_addr" bench-half "$(python3 -c "print(int($p_max/2))")")
  start_both
  t_ext=$(external "$tm_addr" bench-ext)
  p_ext=$(external "$peer_addr" bench-ext)

  printf 'peer: %s (%s), %s s per run, acks=all, 1 KiB records, 4 partitions\n' "$peer" "$peer_addr" "$secs"
  printf 'tidemark load, max rate:      tidemark %8.0f records/s (p99 %s ms), peer %8.0f records/s (p99 %s ms), ratio %s\n' \
    "$t_max" "$t_p99" "$p_max" "$p_p99" "$(ratio "$t_max" "$p_max")"
  printf 'tidemark load, half max rate: tidemark p99 %s ms at %.0f records/s, peer p99 %s ms at %.0f records/s, ratio (peer/tidemark) %s\n' \
    "$t_half_p99" "$t_half" "$p_half_p99" "$p_half" "$(ratio "$p_half_p99" "$t_half_p99")"
  printf 'confluent-kafka (external):   tidemark %8.0f records/s, peer %8.0f records/s, ratio %s\n' \
    "$t_ext" "$p_ext" "$(ratio "$t_ext" "$p_ext")"
fi
rounds=${RDKAFKA_ROUNDS:-5}
# Each run has the machine to itself: a peer that holds gigabytes in memory writes a snapshot
# in the background after a run, which slowed the fdatasyncs of a tidemark run right after it
# (tidemark 801-889 MB/s when it went second, 1,036-1,191 when first).
for r in $(seq 1 "$rounds"); do
  if [ $((r % 2)) = 1 ]; then
    start_both tidemark; t_rk=$(rdkperf "$tm_addr" bench-rk)
    start_both peer; p_rk=$(rdkperf "$peer_addr" bench-rk)
  else
    start_both peer; p_rk=$(rdkperf "$peer_addr" bench-rk)
    start_both tidemark; t_rk=$(rdkperf "$tm_addr" bench-rk)
  fi
  printf 'rdkafka_performance round %s: tidemark %8.1f MB/s, peer %8.1f MB/s, ratio %s\n' "$r" "$t_rk" "$p_rk" "$(ratio "$t_rk" "$p_rk")"
done
