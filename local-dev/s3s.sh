#!/usr/bin/env bash
# Starts s3s-fs (crates.io: an S3 server over a local directory), the second
# S3 implementation floe's local-stack test runs against besides moto, and
# prints its endpoint as the only line on stdout. Idempotent: installs the
# binary with `cargo install` only when missing, and starts the server only
# when nothing answers on the port yet.
#
#   FLOE_S3S_PORT  port on 127.0.0.1 (default 5003)
#   FLOE_S3S_ROOT  where the binary is installed (default ~/.cache/floe-s3s)
#
# Credentials are the tests' (AWS_ACCESS_KEY_ID=testing,
# AWS_SECRET_ACCESS_KEY=testing), as for moto.
set -euo pipefail

tools="${FLOE_S3S_ROOT:-$HOME/.cache/floe-s3s}"
port="${FLOE_S3S_PORT:-5003}"
endpoint="http://127.0.0.1:$port"
state="${TMPDIR:-/tmp}/floe-s3s-$port"
version="0.14.1"

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

# Something listening on the port counts (s3s-fs refuses unsigned requests).
answers() {
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null
}

if ! answers; then
  mkdir -p "$state.data"
  echo "starting s3s-fs on $endpoint over $state.data (log: $state.log)" >&2
  # setsid: the server outlives this script and the test that ran it; it
  # must not inherit the lock, nor the caller's directory (a checkout that
  # may be removed while the server runs, which then fails every request).
  (cd "$state.data" && exec setsid "$bin" --host 127.0.0.1 --port "$port" \
    --access-key testing --secret-key testing "$state.data" \
    >"$state.log" 2>&1 </dev/null 9>&-) &
  pid=$!
  echo "$pid" > "$state.pid"
  for _ in $(seq 1 100); do
    if answers || ! kill -0 "$pid" 2>/dev/null; then break; fi
    sleep 0.1
  done
  if ! answers; then
    echo "s3s-fs did not start on $endpoint; see $state.log" >&2
    tail -n 20 "$state.log" >&2 || true
    exit 1
  fi
fi

echo "$endpoint"
