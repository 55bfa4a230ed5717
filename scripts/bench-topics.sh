#!/usr/bin/env bash
# Topic changes in a three-node cluster on loopback: CHANGES/2 topic creations through one node
# (CreateTopics, factor 3), each timed until all three nodes list it in Metadata (asked
# directly), then as many deletions; prints p50/p99/max of the creations and the metadata log's
# files with their sizes. The three nodes share this machine's cores.
# Usage: scripts/bench-topics.sh [CHANGES]   (default 1000)
set -euo pipefail
cd "$(dirname "$0")/.."
changes=${1:-1000}
bin="$PWD/target/release/tidemark"
[ -x "$bin" ] || cargo build --release
export TMPDIR=${TMPDIR:-$PWD/target/tmp}
mkdir -p "$TMPDIR"
TIDEMARK_BIN="$bin" TIDEMARK_TOPIC_CHANGES="$changes" target/venv/bin/python -m pytest -q -s -p no:warnings \
  tests/clients/test_cluster_topics.py -k metadata_log_stays_small 2>&1 | grep -E "topic creation|metadata log|passed|failed|Error"
