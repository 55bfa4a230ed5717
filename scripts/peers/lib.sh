# Shared by start-*.sh (sourced). Needs $port and $log set by the caller.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
venv=${PEERS_VENV:-$root/target/peers-venv}
timeout_s=${PEER_START_TIMEOUT:-20}
probe=$(dirname "${BASH_SOURCE[0]}")/kafka-probe.py

die() { echo "$(basename "$0"): $*" >&2; exit 1; }

[ -x "$venv/bin/python" ] || die "no venv at $venv (run scripts/peers/install.sh)"
[[ "$port" =~ ^[0-9]+$ ]] && [ "$port" -gt 0 ] && [ "$port" -lt 65536 ] || die "bad PORT '$port'"
if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then die "127.0.0.1:$port is already in use"; fi

pkg_file() { # module relative-path: the file inside an installed package
  "$venv/bin/python" -c 'import os,sys,importlib; m=importlib.import_module(sys.argv[1]); print(os.path.join(os.path.dirname(m.__file__), sys.argv[2]))' "$1" "$2"
}

alive() { # PID: running and not a zombie (a child that died stays a zombie until reaped)
  local st
  st=$(sed 's/.*) //; s/ .*//' "/proc/$1/stat" 2>/dev/null) || return 1
  [ "$st" != Z ] && [ "$st" != X ]
}

# wait_ready PID: until 127.0.0.1:$port answers ApiVersions, or the process dies, or timeout.
wait_ready() {
  local pid=$1 deadline=$((SECONDS + timeout_s))
  while ((SECONDS < deadline)); do
    if ! alive "$pid"; then
      tail -n 20 "$log" >&2 || true
      die "broker exited before answering on port $port (log: $log)"
    fi
    if "$venv/bin/python" "$probe" "127.0.0.1:$port" 2>/dev/null; then echo "$pid"; return 0; fi
    sleep 0.1
  done
  tail -n 20 "$log" >&2 || true
  kill -TERM "$pid" 2>/dev/null || true
  die "no Kafka ApiVersions answer on 127.0.0.1:$port within ${timeout_s}s (log: $log); stopped it"
}
