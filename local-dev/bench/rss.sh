#!/usr/bin/env bash
# Writer memory by bytes: peak RSS and throughput of `floe ingest` (two
# writers, the defaults) for three record shapes, with batches bounded by
# records only (the earlier default: --batch-bytes far above any batch) and
# by bytes (the default, 16 MiB), in one run of one build. The table in
# docs/benchmarks.md, "Writer memory: batches bounded by bytes".
#
#   local-dev/bench/rss.sh                # event 2,000,000, wide 200,000, github 1,000,000 records
#   FLOE_BIN=path/to/floe local-dev/bench/rss.sh 0.1   # a tenth of each
set -euo pipefail
cd "$(dirname "$0")/../.."
floe="${FLOE_BIN:-${CARGO_TARGET_DIR:-target}/release/floe}"
scale="${1:-1}"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT

echo "| shape | records | bytes/record | batches bounded by | peak RSS | seconds | records/s |"
echo "|---|---|---|---|---|---|---|"
for spec in event:2000000 wide:200000 github:1000000; do
  shape="${spec%%:*}"
  n="$(python3 -c "print(int(${spec#*:} * $scale))")"
  "$floe" bench gen --shape "$shape" --records "$n" --out "$dir/$shape.ndjson" > /dev/null
  "$floe" bench schema --shape "$shape" > "$dir/$shape.schema.json"
  size="$(stat -c %s "$dir/$shape.ndjson")"
  for bound in records bytes; do
    export FLOE_WAREHOUSE="$dir/wh"
    rm -rf "$FLOE_WAREHOUSE"
    "$floe" table create "b.$shape" --schema "$dir/$shape.schema.json" > /dev/null
    extra=()
    if [ "$bound" = records ]; then extra=(--batch-bytes 1099511627776); fi
    /usr/bin/time -f "%M %e" -o "$dir/time" \
      "$floe" ingest "b.$shape" "$dir/$shape.ndjson" "${extra[@]}" > /dev/null
    read -r kib secs < "$dir/time"
    python3 -c "
n, size, kib, secs = $n, $size, $kib, $secs
print(f'| $shape | {n:,} | {size // n} | $bound | {kib // 1024} MiB | {secs:.1f} | {n / secs:,.0f} |')"
  done
done
