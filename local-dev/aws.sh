#!/usr/bin/env bash
# Starts moto's server (S3, SQS and Glue on one port) for floe's AWS tests and
# prints its endpoint as the only line on stdout. Idempotent: installs moto
# into the venv only when missing, and starts the server only when nothing
# answers on the port yet, so every test run (and every developer) can call it.
#
#   FLOE_MOTO_PORT  port on 127.0.0.1 (default 5001)
#   FLOE_VENV       the Python venv (default ~/.cache/floe-venv)
set -euo pipefail

venv="${FLOE_VENV:-$HOME/.cache/floe-venv}"
port="${FLOE_MOTO_PORT:-5001}"
endpoint="http://127.0.0.1:$port"
state="${TMPDIR:-/tmp}/floe-moto-$port"

# Concurrent callers (parallel test binaries) start one server between them.
exec 9>"$state.lock"
flock 9

if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv" >&2
fi
if ! "$venv/bin/python" -c 'import moto.server' 2>/dev/null; then
  echo "installing moto[server] into $venv" >&2
  "$venv/bin/pip" install --quiet --disable-pip-version-check 'moto[server]' >&2
fi

# moto's dashboard answers 200; anything else on the port is not moto.
answers() {
  "$venv/bin/python" - "$endpoint" <<'PY' 2>/dev/null
import sys, urllib.request
urllib.request.urlopen(sys.argv[1] + "/moto-api/", timeout=2)
PY
}

if ! answers; then
  echo "starting moto on $endpoint (log: $state.log)" >&2
  # setsid: the server outlives this script and the test process that ran it;
  # it must not inherit the lock, or the next caller would wait for it forever.
  setsid "$venv/bin/moto_server" -H 127.0.0.1 -p "$port" >"$state.log" 2>&1 </dev/null 9>&- &
  pid=$!
  echo "$pid" > "$state.pid"
  for _ in $(seq 1 150); do
    if answers || ! kill -0 "$pid" 2>/dev/null; then break; fi
    sleep 0.2
  done
  if ! answers; then
    echo "moto did not start on $endpoint; see $state.log" >&2
    tail -n 20 "$state.log" >&2 || true
    exit 1
  fi
fi

echo "$endpoint"
