#!/usr/bin/env bash
# Freshness and cost per GB: records POSTed at a sustained rate, the time
# from each POST's 200 to the first snapshot holding its records (p50, p95,
# p99), records per commit, data files a minute, and on `floe local` every
# S3, SQS, Glue and Kinesis request the stack made. Method:
# local-dev/bench/freshness.py's docstring; results and how to read them:
# docs/benchmarks.md ("Freshness") and docs/cost.md.
#
# On `floe local` the HTTP function buffers POSTs as the Terraform module
# deploys it (http_buffer, one shard, the writer's mapping at 10,000 records
# and a 60 s window): records reach their table about a window plus the
# committer's after their 200. FRESH_HTTP_BUFFER=0 writes each POST as its
# own file, as before the buffer (the module's http_buffer = false). Each
# point of each run has a stack of its own (named by the point and the run's
# start), so its buffer stream holds only its own POSTs: a stack started
# again reads its stream from the start, and moto keeps streams between runs.
#
#   local-dev/bench/freshness.sh [serve|local|local-sqs|all]   # default all (serve, local)
#
# `local-sqs` sends the records to the stack's source queue instead of
# POSTing them (SendMessageBatch, FRESH_RECORDS_PER_MESSAGE records of NDJSON
# to a message), drained by the writer function at the module's source
# mapping defaults; its points are named local-<rate>-sqs<records per
# message><tag>.
#
# Environment (defaults in brackets):
#   FLOE_BIN                  the floe binary [cargo build --release --features full]
#   FRESH_RATES               records/s, one point each ["1000 10000 100000"]
#   FRESH_SECONDS             seconds of sending per point [60]
#   FRESH_REQUESTS_PER_S      POSTs per second; records per POST = rate / this [20]
#   FRESH_COMMIT_WINDOW_MS    serve: --commit-window-ms [500, floe serve's default]
#   FRESH_BATCHING_WINDOW_MS  local: committer batching window [5000, the module's
#                             committer_batching_window_seconds]
#   FRESH_BATCH_SIZE          local: committer batch size [10000, the module's]
#   FRESH_HTTP_BUFFER         local: 1 to buffer POSTs in the stack's Kinesis stream, 0 to
#                             write each as its own file [1, the module's http_buffer]
#   FRESH_HTTP_BUFFER_WINDOW_MS  local: the buffer mapping's batching window [60000, the
#                             module's http_buffer_window_seconds]
#   FRESH_HTTP_BUFFER_SHARDS  the buffer stream's shards [1, the module's
#                             http_buffer_shards]; moto is given Kinesis's
#                             write limit per shard, so POSTs past it are
#                             written directly, as on AWS
#   FRESH_HTTP_BUFFER_BATCH_SIZE local: the buffer mapping's batch size, POSTs [10000, the
#                             module's]
#   FRESH_IDEMPOTENCY_KEYS    local: 1 to send each POST with an Idempotency-Key of its own
#                             (keyed POSTs skip the buffer and write their key records) [0]
#   FRESH_MAX_LOAD            wait (60 s at a time, FRESH_LOAD_WAIT_S at most) while the
#                             1-min load average is above this; "" to not wait [1.0]
#   FRESH_LOAD_WAIT_S         [1800]
#   FRESH_OUT                 results directory [./freshness-results]
#   FRESH_TAG                 suffix of this run's table names and result files [""]
#   FRESH_RECORDS_PER_MESSAGE local-sqs: records per SQS message [50]
#   FRESH_SOURCE_BATCH_SIZE   local-sqs: the source mapping's batch size [1000, the
#                             module's sqs_sources default]
#   FRESH_SOURCE_WINDOW_MS    local-sqs: its batching window [10000, the module's]
#   FRESH_SOURCE_POLLERS      local-sqs: concurrent writer invocations on the source
#                             queue [5, the pollers Lambda starts an SQS mapping with]
set -euo pipefail
cd "$(dirname "$0")/../.."
repo="$PWD"

what="${1:-all}"
rates="${FRESH_RATES:-1000 10000 100000}"
seconds="${FRESH_SECONDS:-60}"
rps="${FRESH_REQUESTS_PER_S:-20}"
commit_window="${FRESH_COMMIT_WINDOW_MS:-500}"
batching_window="${FRESH_BATCHING_WINDOW_MS:-5000}"
batch_size="${FRESH_BATCH_SIZE:-10000}"
http_buffer="${FRESH_HTTP_BUFFER:-1}"
buffer_window="${FRESH_HTTP_BUFFER_WINDOW_MS:-60000}"
buffer_batch="${FRESH_HTTP_BUFFER_BATCH_SIZE:-10000}"
buffer_shards="${FRESH_HTTP_BUFFER_SHARDS:-1}"
max_load="${FRESH_MAX_LOAD-1.0}"
load_wait="${FRESH_LOAD_WAIT_S:-1800}"
out="$(mkdir -p "${FRESH_OUT:-freshness-results}" && cd "${FRESH_OUT:-freshness-results}" && pwd)"
tag="${FRESH_TAG:-}"
venv="${FLOE_VENV:-$HOME/.cache/floe-venv}"
py="$venv/bin/python"
driver="$repo/local-dev/bench/freshness.py"
schema="$repo/local-dev/bench/events.schema.json"

if [ -z "${FLOE_BIN:-}" ]; then
  cargo build --release --locked --bin floe --features full
  FLOE_BIN="${CARGO_TARGET_DIR:-target}/release/floe"
fi
FLOE_BIN="$(cd "$(dirname "$FLOE_BIN")" && pwd)/$(basename "$FLOE_BIN")"
if ! "$py" -c "import pyiceberg, boto3" 2>/dev/null; then
  "$venv/bin/pip" install --quiet -r local-dev/requirements-test.txt
fi

# The machine is shared: a point measured while others compile says more
# about them than about floe, so wait for a quiet moment (and record the load).
quiet() {
  [ -n "$max_load" ] || return 0
  local waited=0
  while awk -v m="$max_load" '{exit !($1 > m)}' /proc/loadavg; do
    if [ "$waited" -ge "$load_wait" ]; then
      echo "freshness.sh: load still $(cut -d' ' -f1 /proc/loadavg) after ${waited}s; measuring anyway" >&2
      return 0
    fi
    echo "freshness.sh: load $(cut -d' ' -f1 /proc/loadavg) > $max_load; waiting 60 s" >&2
    sleep 60
    waited=$((waited + 60))
  done
}

# The server of the point running, stopped on any exit so none outlives us.
server=""
trap '[ -z "$server" ] || stop "$server"' EXIT
trap 'exit 143' TERM INT

wait_port() {  # port pid
  for _ in $(seq 1 100); do
    if ! kill -0 "$2" 2>/dev/null; then
      echo "the server exited; its log is in $out" >&2
      return 1
    fi
    if "$py" -c "import socket,sys; socket.create_connection(('127.0.0.1', int(sys.argv[1])), 1)" "$1" 2>/dev/null; then
      return 0
    fi
    sleep 0.2
  done
  echo "nothing listens on port $1" >&2
  return 1
}

# Stops the server we started (SIGTERM: it commits what it acknowledged) and
# waits for it.
stop() {
  kill -TERM "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}

point() {  # target rate table buffer-window-ms ("" when not buffered) -- driver args...
  local target="$1" rate="$2" table="$3" buffered="$4"
  shift 5
  local name="$target-$rate$tag"
  local before after
  before="$(uptime)"
  echo "== $name: $rate records/s for $seconds s ($before)" >&2
  "$py" "$driver" --table "$table" --rate "$rate" --duration "$seconds" --requests-per-s "$rps" \
    --out "$out/$name.requests.jsonl" "$@" > "$out/$name.json.tmp"
  after="$(uptime)"
  # One summary per point: the driver's, with the load around it and the settings.
  "$py" - "$out/$name.json.tmp" "$before" "$after" "$target" "$commit_window" "$batching_window" "$batch_size" \
    "$buffered" "$buffer_batch" "$buffer_shards" > "$out/$name.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
s.update(target=sys.argv[4], uptime_before=sys.argv[2].strip(), uptime_after=sys.argv[3].strip())
if s["target"] == "serve":
    s["commit_window_ms"] = int(sys.argv[5])
else:
    s["batching_window_ms"], s["batch_size"] = int(sys.argv[6]), int(sys.argv[7])
    # The HTTP buffer stream: one shard, as the module creates it, unless
    # FRESH_HTTP_BUFFER_SHARDS says otherwise.
    buffered = sys.argv[8] != ""
    s["http_buffer_window_ms"] = int(sys.argv[8]) if buffered else None
    s["http_buffer_batch_size"] = int(sys.argv[9]) if buffered else None
    s["http_buffer_shards"] = int(sys.argv[10]) if buffered else 0
print(json.dumps(s))
PY
  rm -f "$out/$name.json.tmp"
  cat "$out/$name.json"
}

run_serve() {
  local wh="$out/serve-warehouse$tag"
  rm -rf "$wh"
  for rate in $rates; do
    local table="bench.r${rate}${tag//-/_}"
    "$FLOE_BIN" --warehouse "$wh" table create "$table" --schema "$schema" >&2
    quiet
    "$FLOE_BIN" --warehouse "$wh" serve --addr 127.0.0.1:18080 --token bench \
      --commit-window-ms "$commit_window" > "$out/serve-$rate$tag.log" 2>&1 &
    server=$!
    wait_port 18080 "$server"
    point serve "$rate" "$table" "" -- --url http://127.0.0.1:18080 --token bench \
      --sqlite "$wh/catalog.db" --poll-ms 50
    stop "$server"
    server=""
  done
}

# floe local on four moto servers, one per service, so each server's request
# log counts one service's requests (moto logs S3 requests by method and key,
# but SQS and Glue requests are all `POST /`); the Kinesis server counts its
# requests by operation itself (local-dev/moto_glue.py), since a put is
# billed and a read is not.
run_local() {  # [sqs]: feed the source queue instead of the HTTP function
  local via="${1:-http}" s3 sqs glue kinesis session
  session="$(date +%s)"
  s3="$(FLOE_MOTO_PORT=5111 bash local-dev/aws.sh)"
  sqs="$(FLOE_MOTO_PORT=5112 bash local-dev/aws.sh)"
  glue="$(FLOE_MOTO_PORT=5113 bash local-dev/aws.sh)"
  kinesis="$(FLOE_MOTO_PORT=5114 bash local-dev/aws.sh)"
  local logs="s3=${TMPDIR:-/tmp}/floe-moto-5111.log,sqs=${TMPDIR:-/tmp}/floe-moto-5112.log,glue=${TMPDIR:-/tmp}/floe-moto-5113.log"
  export AWS_ENDPOINT_URL_S3="$s3" AWS_ENDPOINT_URL_SQS="$sqs" AWS_ENDPOINT_URL_GLUE="$glue"
  export AWS_ENDPOINT_URL_KINESIS="$kinesis"
  export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_EC2_METADATA_DISABLED=true
  local state="$out/local-state"
  local per_message="${FRESH_RECORDS_PER_MESSAGE:-50}"
  local name_tag="$tag" source_args=(--writers 1) feed=(--url http://127.0.0.1:18081 --token bench --idle-pollers 1)
  local buffered="" buffer_args=(--no-http-buffer)
  if [ "${FRESH_IDEMPOTENCY_KEYS:-0}" = 1 ]; then
    feed+=(--idempotency-keys)
  fi
  if [ "$via" = sqs ]; then
    name_tag="-sqs$per_message$tag"
    source_args=(--writers "${FRESH_SOURCE_POLLERS:-5}" --source-batch-size "${FRESH_SOURCE_BATCH_SIZE:-1000}"
      --source-batching-window-ms "${FRESH_SOURCE_WINDOW_MS:-10000}")
  elif [ "$http_buffer" = 1 ]; then
    buffered="$buffer_window"
    buffer_args=(--http-buffer-window-ms "$buffer_window" --http-buffer-batch-size "$buffer_batch"
      --http-buffer-shards "$buffer_shards")
  fi
  for rate in $rates; do
    local table="local.r${rate}${name_tag//-/_}"
    # A stack of the point's own: a buffer stream an earlier point filled
    # would be read again from its start.
    local stack
    stack="ff-$session-$(echo "$rate$name_tag" | tr 'A-Z_' 'a-z-' | tr -cd 'a-z0-9-')"
    if [ "$via" = sqs ]; then
      feed=(--url http://127.0.0.1:18081 --sqs-endpoint "$sqs" --records-per-message "$per_message"
        --sqs-queue-url "$sqs/123456789012/$stack-source")
    fi
    local emf="$out/local-$rate$name_tag.emf"
    rm -f "$emf"
    quiet
    # The Terraform module's defaults where floe local has the knob: the
    # committer's batch size and window, its timeout (300 s) and the commit
    # queue's visibility (6 x 300 + 30 s) and receive count; hourly
    # maintenance. One source poller: the HTTP path does not use the source
    # queue, and its idle polls are taken out of the SQS count (the SQS
    # path's polls are its cost). The stack routes the source queue to the
    # point's table.
    printf '[routing]\ntable = "%s"\n' "$table" > "$out/local-routing.toml"
    "$FLOE_BIN" --config "$out/local-routing.toml" local --name "$stack" --state-dir "$state" \
      --http 127.0.0.1:18081 --token bench \
      --batch-size "$batch_size" --batching-window-ms "$batching_window" \
      --function-timeout-s 300 --visibility-timeout-s 1830 --max-receive-count 5 \
      "${source_args[@]}" "${buffer_args[@]}" --maintenance-every-s 3600 --metrics "$emf" \
      > "$out/local-$rate$name_tag.log" 2>&1 &
    server=$!
    wait_port 18081 "$server"
    if [ -n "$buffered" ]; then
      # Kinesis's write limit per shard, which moto lacks: past it a POST
      # is written directly, as on AWS.
      curl -sf -X POST "$kinesis/floe-glue/kinesis" \
        -d "{\"stream\": \"$stack-http-buffer\", \"limits\": true}" >/dev/null
    fi
    "$FLOE_BIN" --config "$state/floe.toml" table create "$table" --schema "$schema" >&2
    # The last POSTs wait up to a buffer window, then the committer's.
    tag="$name_tag" point local "$rate" "$table" "$buffered" -- "${feed[@]}" \
      --glue-endpoint "$glue" --s3-endpoint "$s3" --kinesis-endpoint "$kinesis" --poll-ms 200 \
      --count-logs "$logs" --emf "$emf" --drain-s $(( ${buffered:-0} / 1000 + 120 ))
    # Maintenance as the hourly function runs it, on what this point wrote:
    # its time and requests, for the cost per GB.
    "$py" "$driver" maintain --floe "$FLOE_BIN" --config "$state/floe.toml" --table "$table" \
      --count-logs "$logs" > "$out/local-$rate$name_tag.maintain.json"
    cat "$out/local-$rate$name_tag.maintain.json"
    stop "$server"
    server=""
  done
}

case "$what" in
  serve) run_serve ;;
  local) run_local ;;
  local-sqs) run_local sqs ;;
  all) run_serve; run_local ;;
  *) echo "usage: $0 [serve|local|local-sqs|all]" >&2; exit 2 ;;
esac
echo "freshness.sh: results in $out" >&2
