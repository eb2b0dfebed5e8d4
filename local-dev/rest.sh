#!/usr/bin/env bash
# Starts lakana-server (PyPI), an Iceberg REST catalog, for floe's REST catalog
# tests and prints two lines on stdout: its base URL, then the bearer token.
# Idempotent: installs lakana-server into the venv only when missing and starts
# it only when the one it started before no longer answers `/v1/config`.
#
#   FLOE_REST_PORT  port on 127.0.0.1 (default 8181); the server's state
#                   (/tmp/floe-lakana-<FLOE_REST_PORT>.*) is named by it
#   FLOE_VENV       the Python venv (default ~/.cache/floe-venv)
#
# A new server takes FLOE_REST_PORT when that lies outside the kernel's
# ephemeral port range and is free, else another port (local-dev/ports.sh
# says why); the base URL printed names the port.
#
# What lakana 0.20 is, read from its package (lakana_server/, lakana_core/):
# - Entry point `lakana-server` (uvicorn); `lakana-server migrate` applies the
#   schema to the metadata database. Settings are pydantic env vars with the
#   prefix LAKANA_ and `__` for nesting: LAKANA_DATABASE__URL (SQLAlchemy URL;
#   the pg8000 driver is what it installs), LAKANA_HOST, LAKANA_PORT.
# - Auth is a bearer token only, no OAuth2 token endpoint: a personal access
#   token `lakana_pat_<key_id>_<secret>`. The first start creates an admin and
#   mints its PAT; LAKANA_BOOTSTRAP_PAT_KEY_ID / _SECRET fix that credential
#   (meant for tests), so the token below is known in advance. A bad token is
#   answered 401 in the Iceberg error shape.
# - The REST `{prefix}` is a lakana *environment*. `/v1/config` answers empty
#   defaults/overrides and no prefix, so clients must be told the prefix
#   (pyiceberg: `prefix=`; floe: RestConfig::prefix). Environments are made with
#   the platform API `POST /api/v1/environments {name, storage:{scheme, root,
#   options}}`; options use pyiceberg's keys (`s3.endpoint`, `s3.region`,
#   `s3.access-key-id`, `s3.secret-access-key`). Creating one creates the
#   namespaces bronze, silver and gold; other top-level namespaces are refused.
#   `PATCH /api/v1/environments/<name>/storage {options}` replaces the options.
# - lakana writes table metadata itself (pyiceberg) under the environment's
#   root; moto's S3 works as that root, so the warehouse here is
#   s3://floe-lakana/<environment> on the moto of local-dev/aws.sh.
#
# - Installing it downgrades botocore (s3fs/aiobotocore pin it) below what the
#   venv's boto3 declares; moto and boto3 still work, `pip check` complains.
#
# The environment and the token this script sets up:
#   environment (REST prefix)  floe
#   token                      `token` below (printed, and in $state.token)
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
venv="${FLOE_VENV:-$HOME/.cache/floe-venv}"
want="${FLOE_REST_PORT:-8181}"
state="${TMPDIR:-/tmp}/floe-lakana-$want"
key_id="f10ef10ef10ef10e"
secret="floeRestCatalogTestSecret0123456789abcdefghij"
token="lakana_pat_${key_id}_${secret}"
environment="floe"
bucket="floe-lakana"
# shellcheck source=local-dev/ports.sh
. "$here/ports.sh"

exec 9>"$state.lock"
flock 9

if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv" >&2
fi
if [ ! -x "$venv/bin/lakana-server" ]; then
  echo "installing lakana-server into $venv" >&2
  "$venv/bin/pip" install --quiet --disable-pip-version-check lakana-server >&2
fi

answers() {
  "$venv/bin/python" - "http://127.0.0.1:$1" <<'PY' 2>/dev/null
import json, sys, urllib.request
body = json.load(urllib.request.urlopen(sys.argv[1] + "/v1/config", timeout=2))
assert "defaults" in body
PY
}

moto="$(bash "$here/aws.sh" 9>&-)"
# The warehouse bucket on moto, ensured on every call: a moto restarted
# under a running lakana would otherwise leave it writing to a lost bucket.
"$venv/bin/python" - "$moto" "$bucket" <<'PY' >&2
import sys, boto3
s3 = boto3.client("s3", endpoint_url=sys.argv[1], region_name="us-east-1",
                aws_access_key_id="testing", aws_secret_access_key="testing")
try:
  s3.create_bucket(Bucket=sys.argv[2])
except s3.exceptions.BucketAlreadyOwnedByYou:
  pass
PY

# The server this state names, if it still runs: on the port its start
# recorded (one an older rest.sh started recorded none: FLOE_REST_PORT).
port="$(cat "$state.port" 2>/dev/null || echo "$want")"
if ! { server_alive "$state.pid" lakana-server && answers "$port"; }; then
  # Its metadata database, on the local Postgres of pg.sh: one per state, so
  # a second lakana (another FLOE_REST_PORT) never repoints the first one's
  # environment at its own moto.
  db="lakana_$want"
  conninfo="$(bash "$here/pg.sh" 9>&-)"
  pg_port="$(sed -n 's/.*port=\([0-9]*\).*/\1/p' <<<"$conninfo")"
  psql="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)/psql"
  if ! "$psql" "$conninfo" -tAc "SELECT 1 FROM pg_database WHERE datname = '$db'" | grep -q 1; then
    "$psql" "$conninfo" -qc "CREATE DATABASE $db" >&2
  fi

  export LAKANA_DATABASE__URL="postgresql+pg8000://postgres@127.0.0.1:$pg_port/$db"
  export LAKANA_BOOTSTRAP_PAT_KEY_ID="$key_id" LAKANA_BOOTSTRAP_PAT_SECRET="$secret"
  export LAKANA_LOG__ACCESS=false
  "$venv/bin/lakana-server" migrate >&2
  port="$(port_pick "$want")"
  for attempt in 1 2 3 4 5; do
    echo "starting lakana-server on http://127.0.0.1:$port (log: $state.log)" >&2
    # setsid: the server outlives this script and the test that ran it; it must
    # not inherit the lock, or the next caller would wait for it forever.
    # From /: a server started from a test's temporary directory would lose its
    # working directory with it (pyiceberg inside lakana calls getcwd).
    (cd / && LAKANA_HOST=127.0.0.1 LAKANA_PORT="$port" exec setsid "$venv/bin/lakana-server" >"$state.log" 2>&1 </dev/null 9>&-) &
    pid=$!
    echo "$pid" >"$state.pid"
    for _ in $(seq 1 300); do
      if answers "$port" || ! kill -0 "$pid" 2>/dev/null || port_clash "$state.log"; then break; fi
      sleep 0.2
    done
    if answers "$port"; then
      echo "$port" >"$state.port"
      break
    fi
    # Free when picked, taken before lakana bound it: another one (the
    # server that met it may linger a moment, serving nothing).
    if [ "$attempt" -lt 5 ] && port_clash "$state.log"; then
      echo "rest.sh: port $port was taken as lakana-server started; trying another" >&2
      kill "$pid" 2>/dev/null || true
      ports_taken+=("$port")
      port="$(port_pick "$want")"
      continue
    fi
    echo "lakana-server did not start on http://127.0.0.1:$port; see $state.log" >&2
    tail -n 30 "$state.log" >&2 || true
    exit 1
  done

  rm -f "$state.moto"
fi

# The environment (REST prefix) on moto's S3, on the moto running now: made on
# the first start, and kept in lakana's database from then on (409), so its
# storage options are replaced whenever moto's endpoint is not the one they
# name (a new lakana, or a moto restarted on another port).
if [ "$(cat "$state.moto" 2>/dev/null)" != "$moto" ]; then
  "$venv/bin/python" - "http://127.0.0.1:$port" "$token" "$environment" "$bucket" "$moto" <<'PY' >&2
import json, sys, urllib.error, urllib.request
base, token, env, bucket, moto = sys.argv[1:]
options = {"s3.endpoint": moto, "s3.region": "us-east-1",
           "s3.access-key-id": "testing", "s3.secret-access-key": "testing"}
def call(method, path, body):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(), method=method,
        headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=30)
try:
    try:
        call("POST", "/api/v1/environments",
             {"name": env, "storage": {"scheme": "s3", "root": f"s3://{bucket}/{env}", "options": options}})
    except urllib.error.HTTPError as e:
        if e.code != 409:
            raise
        call("PATCH", f"/api/v1/environments/{env}/storage", {"options": options})
except urllib.error.HTTPError as e:
    sys.exit(f"setting up lakana environment {env}: {e.code} {e.read().decode()}")
PY
  echo "$moto" >"$state.moto"
fi

echo "$token" >"$state.token"
echo "http://127.0.0.1:$port"
echo "$token"
