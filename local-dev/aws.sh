#!/usr/bin/env bash
# Starts moto's server (S3, SQS and Glue on one port) for floe's AWS tests and
# prints its endpoint as the only line on stdout. Idempotent: installs moto
# into the venv only when missing, and starts the server only when nothing
# answers on the port yet, so every test run (and every developer) can call it.
#
# The server is moto_glue.py beside this script: moto with a Glue that refuses
# a stale UpdateTable (VersionId) as AWS's does, and Glue faults tests inject
# over HTTP (see its docstring). moto is pinned: the launcher wraps its Glue.
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
moto_version="5.2.5"
if ! "$venv/bin/python" -c "import moto.server, sys; sys.exit(moto.__version__ != '$moto_version')" 2>/dev/null; then
  echo "installing moto[server]==$moto_version into $venv" >&2
  "$venv/bin/pip" install --quiet --disable-pip-version-check "moto[server]==$moto_version" >&2
fi

# moto's dashboard answers 200; anything else on the port is not moto.
answers() {
  "$venv/bin/python" - "$endpoint" <<'PY' 2>/dev/null
import sys, urllib.request
urllib.request.urlopen(sys.argv[1] + "/moto-api/", timeout=2)
PY
}
# Only the launcher answers its control path.
ours() {
  "$venv/bin/python" - "$endpoint" <<'PY' 2>/dev/null
import json, sys, urllib.request
assert json.load(urllib.request.urlopen(sys.argv[1] + "/floe-glue/", timeout=2))["floe-glue"] == 1
PY
}

if answers && ! ours; then
  echo "a moto without floe's Glue stand-in (local-dev/moto_glue.py) answers on $endpoint;" >&2
  echo "stop it (its pid may be in $state.pid) or set FLOE_MOTO_PORT to another port" >&2
  exit 1
fi

if ! answers; then
  echo "starting moto on $endpoint (log: $state.log)" >&2
  # setsid: the server outlives this script and the test process that ran it;
  # it must not inherit the lock, or the next caller would wait for it forever.
  here="$(cd "$(dirname "$0")" && pwd)"
  setsid "$venv/bin/python" "$here/moto_glue.py" -H 127.0.0.1 -p "$port" >"$state.log" 2>&1 </dev/null 9>&- &
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
