#!/usr/bin/env bash
# Two builds side by side on one disk, in one run, rounds alternating, with fio in each round:
# the rows of scripts/bench-disk.sh (durable 16 KiB qd1; 1 MiB writes x8 in flight; the Kafka
# protocol, acks=all) for build A and build B. For before/after figures of a change:
#   git stash; cargo build --release; cp target/release/tidemark target/tidemark-old
#   git stash pop; cargo build --release
#   scripts/bench-disk-ab.sh target/tidemark-old target/release/tidemark ./target/bench-ab 8 3
# Usage: scripts/bench-disk-ab.sh BIN_A BIN_B [DIR] [SECONDS] [ROUNDS]   (needs fio)
set -euo pipefail
cd "$(dirname "$0")/.."
a=$1 b=$2
dir=${3:-./target/bench-disk-ab}
secs=${4:-8}
rounds=${5:-3}
command -v fio >/dev/null || { echo "bench-disk-ab: fio not found (apt-get install fio)" >&2; exit 1; }
mkdir -p "$dir"

fio_mbps() { # name, extra args...: prints MB/s (10^6 B)
  local name=$1; shift
  fio --name="$name" --filename="$dir/fio.$name" --size=4G --direct=1 --ioengine=io_uring \
      --rw=write --time_based --runtime="$secs" --output-format=json "$@" 2>/dev/null \
    | python3 -c 'import json,sys; j=json.load(sys.stdin); print("%.1f" % (j["jobs"][0]["write"]["bw_bytes"]/1e6))'
  rm -f "$dir/fio.$name"
}
storage() { # bin, args...: prints MB/s from storage-load --json
  local bin=$1; shift
  rm -rf "$dir/tm"
  $bin storage-load --data-dir "$dir/tm" --duration "$secs" --json "$@" 2>/dev/null | tail -n 1 \
    | python3 -c 'import json,sys; print("%.1f" % json.load(sys.stdin)["mb_per_sec"])'
  rm -rf "$dir/tm"
}
protocol() { # bin: prints "MB/s p99_ms cpu_s_per_gb"
  local bin=$1 port serve_pid c0 c1 out
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  rm -rf "$dir/serve"
  $bin serve --data-dir "$dir/serve" --listen "127.0.0.1:$port" >"$dir/serve.log" 2>&1 &
  serve_pid=$!
  sleep 1
  c0=$(awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$serve_pid/stat")
  out=$($bin load produce --bootstrap "127.0.0.1:$port" --topic bench --partitions 8 --connections 8 --threads 2 \
         --in-flight 10 --acks all --record-size 1024 --duration "$secs" --json 2>/dev/null | tail -n 1)
  c1=$(awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$serve_pid/stat")
  kill $serve_pid; wait $serve_pid 2>/dev/null || true
  rm -rf "$dir/serve"
  echo "$out" | python3 -c "import json,sys; j=json.load(sys.stdin); mb=j['mb_per_sec']; print('%.1f %.2f %.2f' % (mb, j['latency_ms']['p99'], ($c1-$c0)/(mb*$secs/1000)))"
}
row() { # label, fio MB/s, A MB/s, B MB/s
  python3 -c "import sys; l,f,a,b=sys.argv[1],*map(float,sys.argv[2:]); print('%-34s fio %7.1f  A %7.1f (%.2f)  B %7.1f (%.2f)' % (l,f,a,a/f,b,b/f))" "$@"
}
for r in $(seq 1 "$rounds"); do
  echo "round $r"
  f1=$(fio_mbps sync16k --bs=16k --iodepth=1 --fdatasync=1)
  set -- --cores 1 --partitions 1 --inflight 1 --batch-records 16 --record-size 1024
  a1=$(storage "$a" "$@"); b1=$(storage "$b" "$@")
  row "durable 16 KiB qd1 MB/s (ratio):" "$f1" "$a1" "$b1"
  f2=$(fio_mbps seq1m --bs=1M --iodepth=8 --end_fsync=1)
  set -- --cores 1 --partitions 1 --inflight 64 --batch-records 64 --record-size 1024 \
    --set flush.messages=1000000000 --set segment.bytes=1073741824
  a2=$(storage "$a" "$@"); b2=$(storage "$b" "$@")
  row "1 MiB x8 in flight MB/s (ratio):" "$f2" "$a2" "$b2"
  read -r a3 ap ac <<<"$(protocol "$a")"
  read -r b3 bp bc <<<"$(protocol "$b")"
  row "protocol acks=all MB/s (ratio):" "$f2" "$a3" "$b3"
  echo "  protocol p99 ms: A $ap  B $bp; broker CPU-s per GB: A $ac  B $bc"
done
