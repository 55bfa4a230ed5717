#!/usr/bin/env bash
# Replication figures on three nodes on loopback (tests/clients/test_replication.py, the
# figures test, run longer): acks=all produce throughput and p99 at replication factor 1 and 3
# (the load generator against the leader, LOAD seconds per run, alternated ROUNDS/5 times);
# failover time from a leader's SIGKILL to an acks=all producer's next success, ROUNDS rounds;
# the catch-up rate of a follower down for DOWN seconds while the load runs. The three nodes
# share this machine's cores.
# Usage: scripts/bench-replication.sh [ROUNDS] [DOWN] [LOAD]   (defaults 20, 60, 10)
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${TIDEMARK_BIN:-$PWD/target/release/tidemark}"
[ -x "$bin" ] || cargo build --release
export TMPDIR=${TMPDIR:-$PWD/target/tmp}
mkdir -p "$TMPDIR"
TIDEMARK_BIN="$bin" TIDEMARK_REPL_ROUNDS="${1:-20}" TIDEMARK_REPL_DOWN_S="${2:-60}" TIDEMARK_REPL_LOAD_S="${3:-10}" \
  target/venv/bin/python -m pytest -q -s -p no:warnings tests/clients/test_replication.py -k figures 2>&1 \
  | grep -E "^produce|^failover|^catch-up|^[0-9]+ (passed|failed)|^E +[A-Za-z]*Error"
