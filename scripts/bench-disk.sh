#!/usr/bin/env bash
# Side by side on one disk, in one run: fio at the write shape tidemark produces, then
# `tidemark storage-load` doing the same work through the storage engine; prints the ratios.
#   1. durable appends, one at a time: 16 x 1 KiB batches (~16.6 KB), fdatasync after each
#      (fio: 16 KiB O_DIRECT writes, fdatasync=1, queue depth 1);
#   2. throughput: 1 MiB aligned chunks, 8 writes in flight, fsync at the end
#      (tidemark with flush.messages high so the flusher writes whole chunks);
#   3. through the Kafka protocol: `tidemark serve` on its defaults (every acknowledged record
#      fdatasynced) driven by `tidemark load produce` (acks=all, 1 KiB records, 8 partitions,
#      8 connections, 2 threads) on the same cores, against fio's sequential write of (2);
#      with the broker's CPU time (user + system, /proc) per GB produced.
# Usage: scripts/bench-disk.sh [DIR] [SECONDS]   (needs fio; DIR on the disk to measure)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-./target/bench-disk}
secs=${2:-10}
command -v fio >/dev/null || { echo "bench-disk: fio not found (apt-get install fio)" >&2; exit 1; }
mkdir -p "$dir"
cargo build --release --quiet
bin=./target/release/tidemark

fio_mbps() { # name, extra args...: prints MB/s (10^6 B)
  local name=$1; shift
  fio --name="$name" --filename="$dir/fio.$name" --size=1G --direct=1 --ioengine=io_uring \
      --rw=write --time_based --runtime="$secs" --output-format=json "$@" 2>/dev/null \
    | python3 -c 'import json,sys; j=json.load(sys.stdin); print("%.1f" % (j["jobs"][0]["write"]["bw_bytes"]/1e6))'
  rm -f "$dir/fio.$name"
}
tm_mbps() { # args...: prints MB/s from tidemark storage-load --json
  rm -rf "$dir/tm"
  $bin storage-load --data-dir "$dir/tm" --duration "$secs" --json "$@" 2>/dev/null | tail -n 1 \
    | python3 -c 'import json,sys; print("%.1f" % json.load(sys.stdin)["mb_per_sec"])'
  rm -rf "$dir/tm"
}

f1=$(fio_mbps sync16k --bs=16k --iodepth=1 --fdatasync=1)
t1=$(tm_mbps --cores 1 --partitions 1 --inflight 1 --batch-records 16 --record-size 1024)
f2=$(fio_mbps seq1m --bs=1M --iodepth=8 --end_fsync=1)
t2=$(tm_mbps --cores 1 --partitions 1 --inflight 64 --batch-records 64 --record-size 1024 \
       --set flush.messages=1000000000 --set segment.bytes=1073741824)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
rm -rf "$dir/serve"
$bin serve --data-dir "$dir/serve" --listen "127.0.0.1:$port" >"$dir/serve.log" 2>&1 &
serve_pid=$!
trap 'kill $serve_pid 2>/dev/null || true' EXIT
sleep 1
cpu_s() { awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$1/stat"; }
c0=$(cpu_s $serve_pid)
t3=$($bin load produce --bootstrap "127.0.0.1:$port" --topic bench --partitions 8 --connections 8 --threads 2 \
       --in-flight 10 --acks all --record-size 1024 --duration "$secs" --json 2>/dev/null | tail -n 1 \
     | python3 -c 'import json,sys; print("%.1f" % json.load(sys.stdin)["mb_per_sec"])')
c1=$(cpu_s $serve_pid)
kill $serve_pid; wait $serve_pid 2>/dev/null || true
rm -rf "$dir/serve"
echo "durable 16 KiB appends, qd1 + fdatasync: fio ${f1} MB/s, tidemark ${t1} MB/s, ratio $(python3 -c "print('%.2f' % ($t1/$f1))")"
echo "throughput, 1 MiB writes x8 in flight:    fio ${f2} MB/s, tidemark ${t2} MB/s, ratio $(python3 -c "print('%.2f' % ($t2/$f2))")"
echo "Kafka protocol, acks=all, load on the same cores: tidemark ${t3} MB/s vs fio ${f2} MB/s sequential, ratio $(python3 -c "print('%.2f' % ($t3/$f2))")"
echo "  broker CPU: $(python3 -c "print('%.2f' % (($c1 - $c0) / ($t3 * $secs / 1000)))") CPU-seconds per GB produced ($(python3 -c "print('%.1f' % ($c1 - $c0))") s over ${secs} s)"
