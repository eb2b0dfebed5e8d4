#!/usr/bin/env bash
# floe beside its peers on the same 1M benchmark events, same machine, same run.
# Usage: local-dev/bench/compare.sh [RECORDS]   (peers: local-dev/bench/peers)
# Prints one markdown row per run: what, records/s, snapshots, ratio to pyiceberg.
# FLOE_BIN=path runs that floe binary instead of building this checkout's (an
# earlier build, for a before/after in the same window).
set -euo pipefail
cd "$(dirname "$0")/../.."
n="${1:-1000000}"
peers="${FLOE_PEERS:-local-dev/bench/peers}"
# The quick start's build (`cargo run --release --bin floe`, its target
# directory): no -p and no other target dir, so nothing compiles twice.
venv="${FLOE_VENV:-$HOME/.cache/floe-venv}"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -c "import pyiceberg, pyarrow" 2>/dev/null || "$venv/bin/pip" install -q -r local-dev/requirements-test.txt
py="$venv/bin/python"

floe="$(local-dev/bench/floe-bin.sh)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
events="$work/events.ndjson"
"$py" "$peers/gen_events.py" "$events" "$n"

floe_run() { # writers batch [taskset cpus]
  local wh="$work/wh-$1-$2-${3:-all}"
  "$floe" --warehouse "$wh" table create bench.events --schema local-dev/bench/events.schema.json >/dev/null
  local cmd=("$floe" --warehouse "$wh" ingest bench.events "$events" --writers "$1" --batch-size "$2" --json)
  [ -n "${3:-}" ] && cmd=(taskset -c "$3" "${cmd[@]}")
  "${cmd[@]}" | "$py" -c 'import json,sys; r=json.load(sys.stdin); print("%.0f %d %d" % (r["records_per_second"], r["commits"], r["records_per_commit"]))'
}

echo "| run | records/s | snapshots | records/commit |"
echo "|---|---:|---:|---:|"
read -r rps c rpc < <(floe_run 1 10000 0); echo "| floe ingest, 1 writer, 1 core (taskset), batches of 10k | $rps | $c | $rpc |"
read -r rps c rpc < <(floe_run 2 10000);   echo "| floe ingest, 2 writers, 2 cores, batches of 10k | $rps | $c | $rpc |"
read -r rps c rpc < <(floe_run 2 100000);  echo "| floe ingest, 2 writers, 2 cores, batches of 100k | $rps | $c | $rpc |"
pi10k=$("$py" "$peers/pyiceberg_append.py" "$events" 10000 | sed -E 's/.*rec\/s=([0-9,]+).*snapshots=([0-9]+).*/\1 \2/' | tr -d ,)
echo "| pyiceberg append, one commit per 10k batch | ${pi10k% *} | ${pi10k#* } | 10000 |"
pi1m=$("$py" "$peers/pyiceberg_append.py" "$events" "$n" | sed -E 's/.*rec\/s=([0-9,]+).*snapshots=([0-9]+).*/\1 \2/' | tr -d ,)
echo "| pyiceberg append, one commit | ${pi1m% *} | ${pi1m#* } | $n |"
pa1=$(taskset -c 0 "$py" "$peers/pyarrow_ceiling.py" "$events" | sed -E 's/.*rec\/s=([0-9,]+).*/\1/' | tr -d ,)
echo "| pyarrow C++ JSON→Parquet (zstd), no catalog, 1 core | $pa1 | - | - |"
pa2=$("$py" "$peers/pyarrow_ceiling.py" "$events" | sed -E 's/.*rec\/s=([0-9,]+).*/\1/' | tr -d ,)
echo "| pyarrow C++ JSON→Parquet (zstd), no catalog, 2 cores | $pa2 | - | - |"
