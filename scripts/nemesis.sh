#!/usr/bin/env bash
# The replication fault test (tests/clients/test_nemesis.py) for ROUNDS rounds (default 40):
# three nodes in network namespaces, idempotent acks=all producers and a consumer, a nemesis
# that kills, pauses and cuts off nodes; the checker proves nothing acknowledged is lost.
# Runs the three layouts (three combined nodes; three brokers and three controllers; the
# latter secured end to end). Prints the
# rounds, records and faults. Needs root and iproute2. SEED repeats a run.
# Usage: scripts/nemesis.sh [ROUNDS] [SEED]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-40}
bin="${TIDEMARK_BIN:-$PWD/target/release/tidemark}"
[ -x "$bin" ] || cargo build --release
export TMPDIR=${TMPDIR:-$PWD/target/tmp}
mkdir -p "$TMPDIR"
TIDEMARK_BIN="$bin" TIDEMARK_NEMESIS_LAYOUTS=combined,isolated,secured TIDEMARK_NEMESIS_ROUNDS="$rounds" TIDEMARK_NEMESIS_SEED="${2:-$RANDOM}" \
  target/venv/bin/python -m pytest -q -s -p no:warnings tests/clients/test_nemesis.py 2>&1 \
  | grep -E "^nemesis|^[0-9]+ (passed|failed)|^E +[A-Za-z]*Error"
