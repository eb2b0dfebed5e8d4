#!/usr/bin/env bash
# docs/benchmarks.md, "One Puffin file per deletion vector": what
# `floe.write.vector-per-puffin = true` costs a keyed v3 table. FILES data
# files of 2,000 rows, then COMMITS commits each updating one row in each of
# K files (K = 1, 8, 64), with the commit's vectors in one Puffin file (the
# default) and in one file each. Per commit: Puffin files and objects
# written (each one PUT on S3), and the `floe ingest` wall time (a process
# start, one data file, the vectors, the catalog commit) on a local
# warehouse; on S3 each extra PUT adds its latency, 16 at a time.
#
# Usage: local-dev/bench/vectors.sh [FILES] [COMMITS]   (default 64 20)
set -euo pipefail
cd "$(dirname "$0")/../.."
files="${1:-64}"
commits="${2:-20}"
floe="$(local-dev/bench/floe-bin.sh)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo '{"type":"struct","fields":[{"id":1,"name":"id","required":true,"type":"long"},{"id":2,"name":"v","required":false,"type":"string"}]}' >"$work/schema.json"

echo "| files touched per commit | vectors | Puffin files per commit | objects per commit | commit ms (mean) | commit ms (max) |"
echo "|---|---|---|---|---|---|"
for k in 1 8 64; do
  for split in false true; do
    export FLOE_WAREHOUSE="$work/wh-$k-$split"
    "$floe" table create t.kv --schema "$work/schema.json" --key id \
      --property floe.write.vector-per-puffin=$split >/dev/null
    "$floe" table alter t.kv --format-version 3 >/dev/null
    for f in $(seq 0 $((files - 1))); do
      seq $((f * 2000)) $((f * 2000 + 1999)) | awk '{printf "{\"id\":%d,\"v\":\"a\"}\n",$1}' >"$work/in.ndjson"
      "$floe" ingest t.kv "$work/in.ndjson" >/dev/null
    done
    objects() { find "$FLOE_WAREHOUSE" -type f | wc -l; }
    puffins() { find "$FLOE_WAREHOUSE" -name '*.puffin' | wc -l; }
    o0=$(objects) p0=$(puffins) total=0 most=0
    for c in $(seq 1 "$commits"); do
      for f in $(seq 0 $((k - 1))); do
        echo "{\"id\":$((f * 2000 + c)),\"v\":\"u$c\"}"
      done >"$work/up.ndjson"
      t0=$(date +%s%N)
      "$floe" ingest t.kv "$work/up.ndjson" >/dev/null
      ms=$((($(date +%s%N) - t0) / 1000000))
      total=$((total + ms))
      [ "$ms" -gt "$most" ] && most=$ms
    done
    label=$([ "$split" = true ] && echo "one file each" || echo "one file per commit")
    echo "| $k | $label | $(((($(puffins) - p0)) / commits)) | $(awk -v a="$(objects)" -v b="$o0" -v c="$commits" 'BEGIN{printf "%.1f", (a-b)/c}') | $((total / commits)) | $most |"
  done
done
