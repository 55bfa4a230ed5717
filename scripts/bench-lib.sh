# Shared by scripts/bench-disk.sh and scripts/bench-disk-ab.sh (source it; it runs nothing).
# Uses the caller's $dir (scratch directory on the disk to measure) and $secs (seconds per run).

# fio_fresh_mbps NAME SIZE ARGS...: fio's sequential O_DIRECT write bandwidth on fresh space, as
# a log writes it: SIZE bytes of a new file, fallocated (fio's default) and written once, never
# over written blocks. MB/s (10^6 B).
fio_fresh_mbps() {
  local name=$1 size=$2; shift 2
  rm -f "$dir/fio.$name"
  fio --name="$name" --filename="$dir/fio.$name" --size="$size" --direct=1 --ioengine=io_uring \
      --rw=write --output-format=json "$@" 2>/dev/null \
    | python3 -c 'import json,sys; j=json.load(sys.stdin); print("%.1f" % (j["jobs"][0]["write"]["bw_bytes"]/1e6))'
  rm -f "$dir/fio.$name"
}

# fio_mbps NAME SIZE ARGS...: the same on a SIZE file for $secs seconds. A fast disk wraps around
# the file and then writes over blocks it wrote already, which ext4 and xfs do without converting
# extents: use fio_fresh_mbps for the 1 MiB row.
fio_mbps() {
  local name=$1 size=$2; shift 2
  fio_fresh_mbps "$name" "$size" --time_based --runtime="$secs" "$@"
}

# FRESH_SIZE: what fio_fresh_mbps writes for the 1 MiB x 8 row (a few seconds on this disk; the
# run needs that much free space).
FRESH_SIZE=${FRESH_SIZE:-16G}

# storage_mbps BIN ARGS...: `BIN storage-load` on a fresh directory, MB/s.
storage_mbps() {
  local bin=$1; shift
  rm -rf "$dir/tm"
  $bin storage-load --data-dir "$dir/tm" --duration "$secs" --json "$@" 2>/dev/null | tail -n 1 \
    | python3 -c 'import json,sys; print("%.1f" % json.load(sys.stdin)["mb_per_sec"])'
  rm -rf "$dir/tm"
}

# The storage-load arguments of the two storage rows: durable 16 KiB appends one at a time, and
# 1 MiB chunks with 8 writes in flight (flush.messages high so the flusher writes whole chunks).
QD1_ARGS=(--cores 1 --partitions 1 --inflight 1 --batch-records 16 --record-size 1024)
THROUGHPUT_ARGS=(--cores 1 --partitions 1 --inflight 64 --batch-records 64 --record-size 1024
  --set flush.messages=1000000000 --set segment.bytes=1073741824)

# protocol_run BIN: a fresh `BIN serve` on its defaults (every acknowledged record fdatasynced)
# driven by `BIN load produce` (acks=all, 1 KiB records, 8 partitions, 8 connections, 2 threads,
# 10 in flight) on the same cores; prints "MB/s p99_ms broker_CPU_seconds_per_GB
# generator_CPU_seconds_per_GB" (the generator shares the cores: what it spends, the broker lacks).
protocol_run() {
  local bin=$1 port serve_pid c0 c1 out gen
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  rm -rf "$dir/serve"
  $bin serve --data-dir "$dir/serve" --listen "127.0.0.1:$port" >"$dir/serve.log" 2>&1 &
  serve_pid=$!
  sleep 1
  c0=$(awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$serve_pid/stat")
  # The generator's CPU seconds (user + system, all threads) from its rusage, on stderr.
  out=$(python3 -c 'import resource, subprocess, sys
subprocess.run(sys.argv[1:], stderr=subprocess.DEVNULL)
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(r.ru_utime + r.ru_stime, file=sys.stderr)' \
    $bin load produce --bootstrap "127.0.0.1:$port" --topic bench --partitions 8 --connections 8 --threads 2 \
         --in-flight 10 --acks all --record-size 1024 --duration "$secs" --json 2>"$dir/gen.cpu" | tail -n 1)
  gen=$(cat "$dir/gen.cpu")
  c1=$(awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$serve_pid/stat")
  kill $serve_pid; wait $serve_pid 2>/dev/null || true
  rm -rf "$dir/serve"
  echo "$out" | python3 -c "import json,sys; j=json.load(sys.stdin); mb=j['mb_per_sec']; gb=mb*$secs/1000; print('%.1f %.2f %.2f %.2f' % (mb, j['latency_ms']['p99'], ($c1-$c0)/gb, $gen/gb))"
}
