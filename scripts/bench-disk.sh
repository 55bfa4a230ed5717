#!/usr/bin/env bash
# Side by side on one disk, in one run: fio at the write shape tidemark produces, then
# `tidemark storage-load` doing the same work through the storage engine; prints the ratios.
#   1. durable appends, one at a time: 16 x 1 KiB batches (~16.6 KB), fdatasync after each
#      (fio: 16 KiB O_DIRECT writes, fdatasync=1, queue depth 1);
#   2. throughput: 1 MiB aligned chunks, 8 writes in flight, fsync at the end
#      (tidemark with flush.messages high so the flusher writes whole chunks), against fio on
#      fresh space as a log writes it: $FRESH_SIZE (16G) of a new fallocated file written once.
#      fio over blocks it wrote already (a file wrapped around for the run's seconds: no extent
#      conversion for the file system) is printed beside it; it ran 1.5x faster on this disk;
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

. scripts/bench-lib.sh

f1=$(fio_mbps sync16k 1G --bs=16k --iodepth=1 --fdatasync=1)
t1=$(storage_mbps "$bin" "${QD1_ARGS[@]}")
f2=$(fio_fresh_mbps seq1m "$FRESH_SIZE" --bs=1M --iodepth=8 --end_fsync=1)
f2w=$(fio_mbps seq1m 4G --bs=1M --iodepth=8 --end_fsync=1)
t2=$(storage_mbps "$bin" "${THROUGHPUT_ARGS[@]}")
read -r t3 _ cpu_per_gb gen_per_gb <<<"$(protocol_run "$bin")"
echo "durable 16 KiB appends, qd1 + fdatasync: fio ${f1} MB/s, tidemark ${t1} MB/s, ratio $(python3 -c "print('%.2f' % ($t1/$f1))")"
echo "throughput, 1 MiB writes x8 in flight:    fio ${f2} MB/s (fresh space), tidemark ${t2} MB/s, ratio $(python3 -c "print('%.2f' % ($t2/$f2))")"
echo "  (fio over written blocks, a 4 GiB file wrapped for ${secs} s: ${f2w} MB/s)"
echo "Kafka protocol, acks=all, load on the same cores: tidemark ${t3} MB/s vs fio ${f2} MB/s sequential, ratio $(python3 -c "print('%.2f' % ($t3/$f2))")"
echo "  broker CPU: ${cpu_per_gb} CPU-seconds per GB produced; the generator beside it: ${gen_per_gb}"
