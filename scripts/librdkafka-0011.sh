#!/usr/bin/env bash
# librdkafka's own test 0011-produce_batch against tidemark: it produces batches to auto-created
# and 4-partition topics, checks delivery order and per-partition counts, and (its
# record_fail sub-tests) makes a topic compacted with IncrementalAlterConfigs APPEND, then
# produces records of which every tenth has no key: those must fail with INVALID_RECORD and,
# in a batch, the others with _INVALID_DIFFERENT_RECORD (KIP-467's per-record errors).
#
# librdkafka and its test harness are built from the sources the crates.io rdkafka-sys crate
# carries (fetched by cargo: no other network), into target/librdkafka (about 3 minutes on 2
# cores, once). The broker is started on its own port with a throw-away data directory.
#
#   scripts/librdkafka-0011.sh                # start target/release/tidemark, full 0011
#   RUN_ARGS=-Q scripts/librdkafka-0011.sh    # quick mode (100 messages instead of 100000)
#   RUN_ARGS=-P scripts/librdkafka-0011.sh    # every producer idempotent
#   START_BROKER=0 BROKER=127.0.0.1:9092 scripts/librdkafka-0011.sh   # a broker already running
#   SUBTESTS=record_fail scripts/librdkafka-0011.sh                  # only the keyless sub-tests
#   DEBUG=msg,protocol ...                    # librdkafka debug output
#   BUILD_ONLY=1 scripts/librdkafka-0011.sh   # only build (also examples/rdkafka_performance,
#                                             # which scripts/bench-peer.sh drives)
set -euo pipefail
cd "$(dirname "$0")/.."

WORK=${WORK:-$PWD/target/librdkafka}
VER=${RDKAFKA_SYS_VERSION:-4.10.0+2.12.1}          # librdkafka 2.12.1
# A free loopback port unless a broker is named.
BROKER=${BROKER:-127.0.0.1:$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')}
START_BROKER=${START_BROKER:-1}
TIDEMARK=${TIDEMARK_BIN:-$PWD/target/release/tidemark}
JOBS=${JOBS:-$(nproc)}
SRC=$WORK/rdkafka-sys-$VER/librdkafka

mkdir -p "$WORK"

# 1. Toolchain (gcc, g++, make, zlib headers, python3 for lds-gen.py)
if ! command -v g++ >/dev/null || ! command -v make >/dev/null || [ ! -e /usr/include/zlib.h ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq build-essential zlib1g-dev python3
fi

# 2. Download the .crate through cargo (crates.io registry; static.crates.io is not reachable by curl here)
if [ ! -f "$SRC/tests/0011-produce_batch.c" ]; then
    rm -rf "$WORK/fetchproj"
    mkdir -p "$WORK/fetchproj/src"
    cat > "$WORK/fetchproj/Cargo.toml" <<EOF
[package]
name = "fetchproj"
version = "0.0.0"
edition = "2021"
[dependencies]
rdkafka-sys = { version = "=$VER", default-features = false }
[workspace]
EOF
    echo 'fn main() {}' > "$WORK/fetchproj/src/main.rs"
    (cd "$WORK/fetchproj" && cargo fetch -q)
    CRATE=$(find "${CARGO_HOME:-$HOME/.cargo}/registry/cache" -name "rdkafka-sys-$VER.crate" | head -1)
    [ -n "$CRATE" ] || { echo "rdkafka-sys-$VER.crate not found in cargo cache" >&2; exit 1; }
    tar xzf "$CRATE" -C "$WORK"
fi

# 3. Build librdkafka (no SSL/SASL/zstd/curl needed) and tests/test-runner  (~3 min on 2 cores)
if [ ! -x "$SRC/tests/test-runner" ]; then
    (cd "$SRC" && ./configure --no-download --disable-ssl --disable-gssapi \
        --disable-zstd --disable-lz4-ext --disable-curl >"$WORK/configure.log" 2>&1)
    make -C "$SRC" -j"$JOBS" libs >"$WORK/build.log" 2>&1
    make -C "$SRC/tests" -j"$JOBS" test-runner >>"$WORK/build.log" 2>&1
fi
if [ "${BUILD_ONLY:-0}" = 1 ]; then
    [ -x "$SRC/examples/rdkafka_performance" ] || make -C "$SRC/examples" rdkafka_performance >>"$WORK/build.log" 2>&1
    echo "$SRC/examples/rdkafka_performance"
    exit 0
fi

# 4. Optionally start our broker on its own port with a throw-away data dir
BROKER_PID=
DATA=
cleanup() {
    if [ -n "$BROKER_PID" ]; then kill "$BROKER_PID" 2>/dev/null || true; wait "$BROKER_PID" 2>/dev/null || true; fi
    if [ -n "$DATA" ]; then rm -rf "$DATA"; fi
}
trap cleanup EXIT
if [ "$START_BROKER" = 1 ]; then
    [ -x "$TIDEMARK" ] || { echo "no broker binary at $TIDEMARK (cargo build --release)" >&2; exit 1; }
    DATA=$(mktemp -d "$WORK/data.XXXXXX")
    "$TIDEMARK" serve --data-dir "$DATA" --listen "$BROKER" >"$WORK/broker.log" 2>&1 &
    BROKER_PID=$!
fi
host=${BROKER%:*}; port=${BROKER##*:}
for _ in $(seq 1 100); do
    (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null && break
    sleep 0.1
done

# 5. Run only test 0011
{
    echo "bootstrap.servers=$BROKER"
    echo "test.topic.random=true"
    [ -n "${DEBUG:-}" ] && echo "debug=$DEBUG"
} > "$WORK/test.conf"
cd "$SRC/tests"
set +e
TESTS=0011 SUBTESTS="${SUBTESTS:-}" TEST_KAFKA_VERSION="${TEST_KAFKA_VERSION:-3.9.0}" \
RDKAFKA_TEST_CONF="$WORK/test.conf" LD_LIBRARY_PATH=../src:../src-cpp \
    timeout 600 ./test-runner ${RUN_ARGS:-} 2>&1 | tee "$WORK/run-0011.log"
rc=${PIPESTATUS[0]}
set -e
echo "test-runner exit code: $rc (0 = 0011 passed)"
exit "$rc"
