#!/usr/bin/env bash
# kill -9 loop: acknowledged records survive a crash at any moment.
#
#   scripts/kill9-loop.sh [ROUNDS] [SECONDS]     (defaults 5 and 3)
#
# Starts `tidemark serve` on a fresh data dir (target/kill9-loop/data) and a random free port;
# then, each round: two confluent-kafka producers (acks=all; one with enable.idempotence=false
# and retries=0, one with enable.idempotence=true), each on its own 3-partition topic, record
# every acknowledged (partition, offset, value) (tests/clients/kill9_producer.py); once both
# have acknowledged something the broker is killed with SIGKILL at a random moment within
# SECONDS, the producers are stopped, the broker restarted, and every record acknowledged so far
# (all rounds) must be in the log exactly once, at its offset, in produce order. Exits non-zero
# with the problems listed on any loss, duplicate, misplacement or reordering, or when the broker
# does not come back. Every wait is bounded.
#
# Environment: TIDEMARK_BIN (default target/release/tidemark), PYTHON (default target/venv/bin/python,
# which needs confluent-kafka: scripts/test sets it up), K9_RATE (records/s per producer, 20000).
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${1:-5}
MAX_SECONDS=${2:-3}
BIN=${TIDEMARK_BIN:-target/release/tidemark}
PYTHON=${PYTHON:-target/venv/bin/python}
HELPER=tests/clients/kill9_producer.py
DIR=target/kill9-loop
PARTITIONS=3
TOPICS=(k9-plain k9-idem)
IDEMPOTENT=(0 1)

die() { echo "kill9-loop: $*" >&2; exit 1; }
[[ "$ROUNDS" =~ ^[0-9]+$ && "$ROUNDS" -ge 1 ]] || die "ROUNDS must be a positive integer, not '$ROUNDS'"
[[ "$MAX_SECONDS" =~ ^[0-9]+([.][0-9]+)?$ ]] || die "SECONDS must be a number, not '$MAX_SECONDS'"
[ -x "$BIN" ] || die "no broker binary at $BIN (cargo build --release, or set TIDEMARK_BIN)"
"$PYTHON" -c "import confluent_kafka" 2>/dev/null || die "$PYTHON cannot import confluent_kafka (run scripts/test once, or set PYTHON)"

rm -rf "$DIR"
mkdir -p "$DIR/data"
PORT=$("$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
BOOTSTRAP=127.0.0.1:$PORT
LOG=$DIR/broker.log
BROKER=
PRODUCERS=()

cleanup() {
  for pid in "${PRODUCERS[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  if [ -n "$BROKER" ]; then kill -9 "$BROKER" 2>/dev/null || true; fi
}
trap cleanup EXIT

port_open() { "$PYTHON" - "$PORT" <<'EOF'
import socket, sys
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=0.2).close()
except OSError:
    sys.exit(1)
EOF
}

start_broker() {
  "$BIN" serve --data-dir "$DIR/data" --listen "$BOOTSTRAP" >>"$LOG" 2>&1 &
  BROKER=$!
  local deadline=$((SECONDS + 20))
  until port_open; do
    kill -0 "$BROKER" 2>/dev/null || { tail -20 "$LOG" >&2; die "the broker exited while starting"; }
    [ $SECONDS -lt $deadline ] || { tail -20 "$LOG" >&2; die "the broker did not listen within 20 s"; }
    sleep 0.05
  done
}

# A killed broker's io_uring listener outlives it briefly and still completes handshakes: wait
# until the port refuses, so that the next start is not mistaken for up.
wait_port_refused() {
  local deadline=$((SECONDS + 10))
  while port_open; do
    [ $SECONDS -lt $deadline ] || die "port $PORT still accepts 10 s after the broker was killed"
    sleep 0.05
  done
}

# Wait (at most $2 s) for a child to exit; returns 1 if it did not, else sets EXIT_STATUS.
EXIT_STATUS=
wait_exit() {
  local pid=$1 deadline=$((SECONDS + $2))
  while kill -0 "$pid" 2>/dev/null; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.05
  done
  EXIT_STATUS=0
  wait "$pid" 2>/dev/null || EXIT_STATUS=$?
}

verify_all() {
  local ok=0 i
  for i in "${!TOPICS[@]}"; do
    local t=${TOPICS[$i]}
    # shellcheck disable=SC2046
    timeout 120 "$PYTHON" "$HELPER" verify "$BOOTSTRAP" "$t" "$PARTITIONS" $(ls "$DIR"/acks-"$t"-r*.txt) || ok=1
  done
  return $ok
}

echo "kill9-loop: $ROUNDS rounds, kill within ${MAX_SECONDS}s, broker $BIN on $BOOTSTRAP, data in $DIR/data"
start_broker
for t in "${TOPICS[@]}"; do
  timeout 60 "$PYTHON" "$HELPER" create "$BOOTSTRAP" "$t" "$PARTITIONS" || die "cannot create topic $t"
done

started_all=$SECONDS
for round in $(seq 1 "$ROUNDS"); do
  PRODUCERS=()
  for i in "${!TOPICS[@]}"; do
    t=${TOPICS[$i]}
    acks=$DIR/acks-$t-r$round.txt
    : >"$acks"
    # librdkafka's connection-failure lines go to a file; the summary line to stdout.
    "$PYTHON" "$HELPER" produce "$BOOTSTRAP" "$t" "$PARTITIONS" "${IDEMPOTENT[$i]}" "$round" "$acks" 120 \
      2>>"$DIR/producer-$t.log" &
    PRODUCERS+=($!)
  done
  # Both producers under way (an acknowledgement each), at most 20 s.
  deadline=$((SECONDS + 20))
  for t in "${TOPICS[@]}"; do
    until [ -s "$DIR/acks-$t-r$round.txt" ]; do
      [ $SECONDS -lt $deadline ] || die "round $round: no acknowledgement for $t within 20 s"
      sleep 0.02
    done
  done
  delay=$(awk -v max="$MAX_SECONDS" -v seed="$RANDOM$round" 'BEGIN { srand(seed); printf "%.3f", rand() * max }')
  sleep "$delay"
  kill -9 "$BROKER"
  wait "$BROKER" 2>/dev/null || true
  BROKER=
  for pid in "${PRODUCERS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PRODUCERS[@]}"; do
    wait_exit "$pid" 15 || { kill -9 "$pid" 2>/dev/null || true; die "round $round: a producer did not stop within 15 s of SIGTERM"; }
  done
  PRODUCERS=()
  wait_port_refused
  echo "round $round: broker killed ${delay}s after both producers were acknowledged; restarting"
  t0=$SECONDS
  start_broker
  if ! verify_all; then
    echo "kill9-loop: FAILED in round $round (acks in $DIR/acks-*.txt, broker log $LOG)" >&2
    exit 1
  fi
  echo "round $round: ok (restart and verify $((SECONDS - t0))s)"
done

kill -TERM "$BROKER"
wait_exit "$BROKER" 30 || die "the broker did not stop within 30 s of SIGTERM"
BROKER=
[ "$EXIT_STATUS" = 0 ] || { tail -20 "$LOG" >&2; die "the broker exited with status $EXIT_STATUS after SIGTERM"; }
echo "kill9-loop: all $ROUNDS rounds passed in $((SECONDS - started_all))s: every acknowledged record present once, at its offset, in order"
