#!/usr/bin/env bash
# docs/benchmarks.md, "Spark writers beside floe": Iceberg Java's DELETEs on
# a file floe keeps adding deletion vectors to, while `floe serve` commits
# every 200 ms and every 1,000 ms (its commit window), with nothing set,
# with `floe.commit.min-interval-ms` = INTERVAL, and with the Spark job
# pausing floe (`floe.commit.paused-until`) around each statement. One JSON
# line per run (local-dev/bench/java_writers.py says what it holds).
#
# Usage: local-dev/bench/java_writers.sh [DELETES] [INTERVAL_MS]   (default 10 5000)
# Needs Iceberg Java: local-dev/java.sh (the test suite installs it).
set -euo pipefail
cd "$(dirname "$0")/../.."
deletes="${1:-10}"
interval="${2:-5000}"
py="${FLOE_VENV:-$HOME/.cache/floe-venv}/bin/python"
[ -f "$HOME/.cache/floe-java/.installed" ] || local-dev/java.sh
floe="$(local-dev/bench/floe-bin.sh)"
work="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
echo '{"type":"struct","fields":[{"id":1,"name":"id","required":true,"type":"long"},{"id":2,"name":"v","required":false,"type":"string"}]}' >"$work/schema.json"
seq 0 9999 | awk '{printf "{\"id\":%d,\"v\":\"a\"}\n",$1}' >"$work/rows.ndjson"

for window in 200 1000; do
  for mode in none interval pause; do
    wh="$work/wh-$window-$mode"
    export FLOE_WAREHOUSE="$wh"
    # Spark's DELETE as merge-on-read, so it writes deletion vectors as
    # floe does (its default, copy-on-write, conflicts the same way).
    props=(--property write.delete.mode=merge-on-read)
    [ "$mode" = interval ] && props+=(--property "floe.commit.min-interval-ms=$interval")
    "$floe" table create silver.kv --schema "$work/schema.json" --key id "${props[@]}" >/dev/null
    "$floe" table alter silver.kv --format-version 3 >/dev/null
    "$floe" ingest silver.kv "$work/rows.ndjson" >/dev/null
    "$floe" serve --addr 127.0.0.1:0 --token t --commit-window-ms "$window" >"$work/serve.out" 2>"$work/serve.log" &
    serve=$!
    for _ in $(seq 100); do grep -q . "$work/serve.out" 2>/dev/null && break; sleep 0.1; done
    addr="$(grep -o '127.0.0.1:[0-9]*' "$work/serve.out" | head -n 1)"
    line="$("$py" local-dev/bench/java_writers.py --warehouse "$wh" --url "http://$addr" --token t \
      --mode "$([ "$mode" = pause ] && echo pause || echo none)" --deletes "$deletes")"
    kill "$serve" && wait "$serve" 2>/dev/null || true
    echo "{\"commit_window_ms\": $window, \"setting\": \"$mode\", ${line#\{}"
  done
done
