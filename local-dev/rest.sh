#!/usr/bin/env bash
# Starts lakana-server (PyPI), an Iceberg REST catalog, for floe's REST catalog
# tests and prints its base URL as the only line on stdout. Idempotent: installs
# lakana-server into the venv only when missing and starts it only when nothing
# answers `/v1/config` on the port yet.
#
#   FLOE_REST_PORT  port on 127.0.0.1 (default 8181)
#   FLOE_VENV       the Python venv (default ~/.cache/floe-venv)
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
# - lakana writes table metadata itself (pyiceberg) under the environment's
#   root; moto's S3 works as that root, so the warehouse here is
#   s3://floe-lakana/<environment> on the moto of local-dev/aws.sh.
#
# - Installing it downgrades botocore (s3fs/aiobotocore pin it) below what the
#   venv's boto3 declares; moto and boto3 still work, `pip check` complains.
#
# The environment and the token this script sets up:
#   environment (REST prefix)  floe
#   token                      see FLOE_REST_TOKEN below (also in $state.token)
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
venv="${FLOE_VENV:-$HOME/.cache/floe-venv}"
port="${FLOE_REST_PORT:-8181}"
base="http://127.0.0.1:$port"
state="${TMPDIR:-/tmp}/floe-lakana-$port"
key_id="f10ef10ef10ef10e"
secret="floeRestCatalogTestSecret0123456789abcdefghij"
token="lakana_pat_${key_id}_${secret}"
environment="floe"
bucket="floe-lakana"

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
  "$venv/bin/python" - "$base" <<'PY' 2>/dev/null
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

if ! answers; then
  # Its metadata database, on the local Postgres of pg.sh.
  conninfo="$(bash "$here/pg.sh" 9>&-)"
  pg_port="$(sed -n 's/.*port=\([0-9]*\).*/\1/p' <<<"$conninfo")"
  psql="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)/psql"
  if ! "$psql" "$conninfo" -tAc "SELECT 1 FROM pg_database WHERE datname = 'lakana'" | grep -q 1; then
    "$psql" "$conninfo" -qc "CREATE DATABASE lakana" >&2
  fi

  export LAKANA_DATABASE__URL="postgresql+pg8000://postgres@127.0.0.1:$pg_port/lakana"
  export LAKANA_HOST=127.0.0.1 LAKANA_PORT="$port"
  export LAKANA_BOOTSTRAP_PAT_KEY_ID="$key_id" LAKANA_BOOTSTRAP_PAT_SECRET="$secret"
  export LAKANA_LOG__ACCESS=false
  "$venv/bin/lakana-server" migrate >&2
  echo "starting lakana-server on $base (log: $state.log)" >&2
  # setsid: the server outlives this script and the test that ran it; it must
  # not inherit the lock, or the next caller would wait for it forever.
  # From /: a server started from a test's temporary directory would lose its
  # working directory with it (pyiceberg inside lakana calls getcwd).
  (cd / && exec setsid "$venv/bin/lakana-server" >"$state.log" 2>&1 </dev/null 9>&-) &
  pid=$!
  echo "$pid" > "$state.pid"
  for _ in $(seq 1 300); do
    if answers || ! kill -0 "$pid" 2>/dev/null; then break; fi
    sleep 0.2
  done
  if ! answers; then
    echo "lakana-server did not start on $base; see $state.log" >&2
    tail -n 30 "$state.log" >&2 || true
    exit 1
  fi

  # The environment (REST prefix) on moto's S3; 409 when it exists already.
  "$venv/bin/python" - "$base" "$token" "$environment" "$bucket" "$moto" <<'PY' >&2
import json, sys, urllib.error, urllib.request
base, token, env, bucket, moto = sys.argv[1:]
body = {"name": env, "storage": {"scheme": "s3", "root": f"s3://{bucket}/{env}", "options": {
    "s3.endpoint": moto, "s3.region": "us-east-1",
    "s3.access-key-id": "testing", "s3.secret-access-key": "testing"}}}
req = urllib.request.Request(base + "/api/v1/environments", data=json.dumps(body).encode(),
    headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
try:
    urllib.request.urlopen(req, timeout=30)
except urllib.error.HTTPError as e:
    if e.code != 409:
        sys.exit(f"creating lakana environment {env}: {e.code} {e.read().decode()}")
PY
fi

echo "$token" > "$state.token"
echo "$base"
