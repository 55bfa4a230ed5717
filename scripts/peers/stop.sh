#!/usr/bin/env bash
# Stops a peer started by start-*.sh: SIGTERM, waits up to $PEER_STOP_TIMEOUT s (default 60:
# noida writes its whole state out first, which takes seconds per few hundred MB), then SIGKILL.
# Usage: scripts/peers/stop.sh PID
set -euo pipefail
pid=${1:?usage: stop.sh PID}
kill -TERM "$pid" 2>/dev/null || exit 0
for ((i = 0; i < ${PEER_STOP_TIMEOUT:-60} * 10; i++)); do
  kill -0 "$pid" 2>/dev/null || exit 0
  sleep 0.1
done
echo "stop.sh: $pid still running after SIGTERM; SIGKILL" >&2
kill -KILL "$pid" 2>/dev/null || true
