#!/usr/bin/env bash
# Starts s3s-fs (crates.io: an S3 server over a local directory), the second
# S3 implementation floe's local-stack test runs against besides moto, and
# prints its endpoint as the only line on stdout. Idempotent: installs the
# binary with `cargo install` only when missing, and starts the server only
# when the one it started before no longer runs.
#
#   FLOE_S3S_PORT  port on 127.0.0.1 (default 5003); the server's state
#                  (/tmp/floe-s3s-<FLOE_S3S_PORT>.*) is named by it
#   FLOE_S3S_ROOT  where the binary is installed (default ~/.cache/floe-s3s)
#
# A new server takes FLOE_S3S_PORT when that lies outside the kernel's
# ephemeral port range and is free, else another port (local-dev/ports.sh
# says why); the endpoint printed names the port.
#
# Credentials are the tests' (AWS_ACCESS_KEY_ID=testing,
# AWS_SECRET_ACCESS_KEY=testing), as for moto.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
tools="${FLOE_S3S_ROOT:-$HOME/.cache/floe-s3s}"
want="${FLOE_S3S_PORT:-5003}"
state="${TMPDIR:-/tmp}/floe-s3s-$want"
version="0.14.1"
# shellcheck source=local-dev/ports.sh
. "$here/ports.sh"

exec 9>"$state.lock"
flock 9

bin="$tools/bin/s3s-fs"
if [ ! -x "$bin" ] || [ "$(cat "$tools/.s3s-fs-version" 2>/dev/null)" != "$version" ]; then
  echo "installing s3s-fs $version into $tools (cargo install, a few minutes once)" >&2
  # Its own target directory, so it never waits on (or evicts) floe's build.
  CARGO_TARGET_DIR="$tools/target" cargo install "s3s-fs@$version" --locked \
    --features binary --root "$tools" >&2
  rm -rf "$tools/target"
  echo "$version" > "$tools/.s3s-fs-version"
fi

# The server this state names, if it still runs, on the port its start
# recorded (one an older s3s.sh started recorded none: FLOE_S3S_PORT).
# Something listening there counts (s3s-fs refuses unsigned requests).
port="$(cat "$state.port" 2>/dev/null || echo "$want")"
if server_alive "$state.pid" s3s-fs && port_listening "$port"; then
  echo "http://127.0.0.1:$port"
  exit 0
fi

mkdir -p "$state.data"
port="$(port_pick "$want")"
for attempt in 1 2 3 4 5; do
  echo "starting s3s-fs on http://127.0.0.1:$port over $state.data (log: $state.log)" >&2
  # setsid: the server outlives this script and the test that ran it; it
  # must not inherit the lock, nor the caller's directory (a checkout that
  # may be removed while the server runs, which then fails every request).
  (cd "$state.data" && exec setsid "$bin" --host 127.0.0.1 --port "$port" \
    --access-key testing --secret-key testing "$state.data" \
    >"$state.log" 2>&1 </dev/null 9>&-) &
  pid=$!
  echo "$pid" >"$state.pid"
  for _ in $(seq 1 100); do
    if port_listening "$port" || ! kill -0 "$pid" 2>/dev/null || port_clash "$state.log"; then break; fi
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null && port_listening "$port"; then
    echo "$port" >"$state.port"
    echo "http://127.0.0.1:$port"
    exit 0
  fi
  # Free when picked, taken before s3s-fs bound it: another one (the
  # server that met it may linger a moment, serving nothing).
  if [ "$attempt" -lt 5 ] && port_clash "$state.log"; then
    echo "s3s.sh: port $port was taken as s3s-fs started; trying another" >&2
    kill "$pid" 2>/dev/null || true
    ports_taken+=("$port")
    port="$(port_pick "$want")"
    continue
  fi
  echo "s3s-fs did not start on http://127.0.0.1:$port; see $state.log" >&2
  tail -n 20 "$state.log" >&2 || true
  exit 1
done
