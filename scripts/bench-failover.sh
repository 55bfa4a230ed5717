#!/usr/bin/env bash
# Controller failover of a three-node cluster on loopback, repeated: SIGKILL of the active
# controller's process, until the two others agree on a new one (their Metadata answers, asked
# directly), then the killed node restarted and rejoined; ROUNDS times (default 20). Prints each
# time and p50/p99/max. The three nodes share this machine's cores.
# Usage: scripts/bench-failover.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-20}
bin="$PWD/target/release/tidemark"
[ -x "$bin" ] || cargo build --release
export TMPDIR=${TMPDIR:-$PWD/target/tmp}
mkdir -p "$TMPDIR"
TIDEMARK_BIN="$bin" TIDEMARK_FAILOVER_ROUNDS="$rounds" target/venv/bin/python -m pytest -q -s -p no:warnings \
  tests/clients/test_cluster.py -k fail_over 2>&1 | grep -E "failover|passed|failed|Error"
