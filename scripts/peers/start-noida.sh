#!/usr/bin/env bash
# Starts noida-db's Kafka service alone on 127.0.0.1:PORT in the background, data in DIR,
# waits until it answers ApiVersions and prints its PID.
# noida keeps everything in memory and rewrites DIR/kafka.json (whole state, no fsync) a few
# seconds after changes and on SIGTERM: acks=all is answered before anything reaches disk.
# Usage: scripts/peers/start-noida.sh PORT [DIR]   (default /tmp/noida-PORT; reused if present)
# Stop: scripts/peers/stop.sh PID   (SIGTERM: it saves the snapshot, then exits 0)
# Env: PEERS_VENV (default target/peers-venv), PEER_START_TIMEOUT (s, default 20).
set -euo pipefail
port=${1:?usage: start-noida.sh PORT [DIR]}
dir=${2:-${TMPDIR:-/tmp}/noida-$port}
log=$dir/noida-stdout.log
source "$(dirname "$0")/lib.sh"
bin=$(pkg_file noida_db noida-db)
[ -x "$bin" ] || die "no noida-db binary at $bin (run scripts/peers/install.sh)"
mkdir -p "$dir"
# The binary itself, not the venv's bin/noida-db wrapper (a Python parent): its PID is the broker.
# It warns "weak version GLIBC_2.39 not found" on bookworm's glibc 2.36 and runs anyway.
setsid nohup "$bin" start --only kafka --host 127.0.0.1 --kafka-port "$port" --data-dir "$dir" \
  >"$log" 2>&1 </dev/null &
wait_ready $!
