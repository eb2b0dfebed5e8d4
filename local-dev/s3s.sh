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
# setsid: the server outlives this script and the test that ran it; it
# must not inherit the lock, nor the caller's directory (a checkout that
# may be removed while the server runs, which then fails every request).
launch() {
  (cd "$state.data" && exec setsid "$bin" --host 127.0.0.1 --port "$1" \
    --access-key testing --secret-key testing "$state.data" \
    >"$state.log" 2>&1 </dev/null 9>&-) &
}
port="$(port_start s3s-fs "$state" "$want" launch)"
echo "http://127.0.0.1:$port"
