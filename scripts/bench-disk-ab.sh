#!/usr/bin/env bash
# Two builds side by side on one disk, in one run, rounds alternating, with fio in each round
# (the 1 MiB rows against fio on fresh space, as scripts/bench-disk.sh says): the rows of
# scripts/bench-disk.sh (durable 16 KiB qd1; 1 MiB writes x8 in flight; the Kafka
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

. scripts/bench-lib.sh
row() { # label, fio MB/s, A MB/s, B MB/s
  python3 -c "import sys; l,f,a,b=sys.argv[1],*map(float,sys.argv[2:]); print('%-34s fio %7.1f  A %7.1f (%.2f)  B %7.1f (%.2f)' % (l,f,a,a/f,b,b/f))" "$@"
}
for r in $(seq 1 "$rounds"); do
  echo "round $r"
  f1=$(fio_mbps sync16k 4G --bs=16k --iodepth=1 --fdatasync=1)
  a1=$(storage_mbps "$a" "${QD1_ARGS[@]}"); b1=$(storage_mbps "$b" "${QD1_ARGS[@]}")
  row "durable 16 KiB qd1 MB/s (ratio):" "$f1" "$a1" "$b1"
  f2=$(fio_fresh_mbps seq1m "$FRESH_SIZE" --bs=1M --iodepth=8 --end_fsync=1)
  f2w=$(fio_mbps seq1m 4G --bs=1M --iodepth=8 --end_fsync=1)
  a2=$(storage_mbps "$a" "${THROUGHPUT_ARGS[@]}"); b2=$(storage_mbps "$b" "${THROUGHPUT_ARGS[@]}")
  row "1 MiB x8 in flight MB/s (ratio):" "$f2" "$a2" "$b2"
  echo "  (fio over written blocks, a 4 GiB file wrapped for ${secs} s: $f2w MB/s)"
  read -r a3 ap ac ag <<<"$(protocol_run "$a")"
  read -r b3 bp bc bg <<<"$(protocol_run "$b")"
  row "protocol acks=all MB/s (ratio):" "$f2" "$a3" "$b3"
  echo "  protocol p99 ms: A $ap  B $bp; broker CPU-s per GB: A $ac  B $bc; generator CPU-s per GB: A $ag  B $bg"
done
