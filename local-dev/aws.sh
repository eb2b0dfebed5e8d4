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
#   FLOE_MOTO_PORT  port on 127.0.0.1 (default 5001); the server's state
#                   (/tmp/floe-moto-<FLOE_MOTO_PORT>.*) is named by it
#   FLOE_VENV       the Python venv (default ~/.cache/floe-venv)
#
# A new server takes FLOE_MOTO_PORT when that lies outside the kernel's
# ephemeral port range and is free, else another port (local-dev/ports.sh
# says why); the endpoint printed names the port.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
venv="${FLOE_VENV:-$HOME/.cache/floe-venv}"
want="${FLOE_MOTO_PORT:-5001}"
state="${TMPDIR:-/tmp}/floe-moto-$want"
# shellcheck source=local-dev/ports.sh
. "$here/ports.sh"

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

# Only the launcher answers its control path (plain moto, or anything else
# on the port, does not).
ours() {
  "$venv/bin/python" - "http://127.0.0.1:$1" <<'PY' 2>/dev/null
import json, sys, urllib.request
assert json.load(urllib.request.urlopen(sys.argv[1] + "/floe-glue/", timeout=2))["floe-glue"] == 1
PY
}

# The server this state names, if it still runs: on the port its start
# recorded (one an older aws.sh started recorded none: FLOE_MOTO_PORT).
port="$(cat "$state.port" 2>/dev/null || echo "$want")"
if server_alive "$state.pid" moto_glue.py && ours "$port"; then
  echo "http://127.0.0.1:$port"
  exit 0
fi

port="$(port_pick "$want")"
for attempt in 1 2 3 4 5; do
  echo "starting moto on http://127.0.0.1:$port (log: $state.log)" >&2
  # setsid: the server outlives this script and the test process that ran it;
  # it must not inherit the lock, or the next caller would wait for it forever.
  setsid "$venv/bin/python" "$here/moto_glue.py" -H 127.0.0.1 -p "$port" >"$state.log" 2>&1 </dev/null 9>&- &
  pid=$!
  echo "$pid" >"$state.pid"
  for _ in $(seq 1 150); do
    if ours "$port" || ! kill -0 "$pid" 2>/dev/null || port_clash "$state.log"; then break; fi
    sleep 0.2
  done
  if ours "$port"; then
    echo "$port" >"$state.port"
    echo "http://127.0.0.1:$port"
    exit 0
  fi
  # Free when picked, taken before moto bound it: another one (the
  # server that met it may linger a moment, serving nothing).
  if [ "$attempt" -lt 5 ] && port_clash "$state.log"; then
    echo "aws.sh: port $port was taken as moto started; trying another" >&2
    kill "$pid" 2>/dev/null || true
    ports_taken+=("$port")
    port="$(port_pick "$want")"
    continue
  fi
  echo "moto did not start on http://127.0.0.1:$port; see $state.log" >&2
  tail -n 20 "$state.log" >&2 || true
  exit 1
done
