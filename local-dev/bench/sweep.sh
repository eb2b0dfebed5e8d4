#!/usr/bin/env bash
# The tables of docs/benchmarks.md beyond compare.sh: write path by batch size,
# cores, codec, payload entropy and shape (with peak RSS), the commit regime
# under a slow catalog, and copy-on-write amplification. Markdown on stdout.
# Usage: local-dev/bench/sweep.sh [RECORDS]   (default 1,000,000; wide shape uses a fifth)
set -euo pipefail
cd "$(dirname "$0")/../.."
n="${1:-1000000}"
# The quick start's build (`cargo run --release --bin floe`, its target
# directory): no -p and no other target dir, so nothing compiles twice.
cargo build --release --locked --bin floe >/dev/null
floe="${CARGO_TARGET_DIR:-target}/release/floe"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

"$floe" bench gen --shape event --records "$n" --out "$work/event.ndjson"
"$floe" bench gen --shape event --high-entropy --records "$n" --out "$work/event-he.ndjson"
"$floe" bench gen --shape wide --records "$((n / 5))" --out "$work/wide.ndjson"
"$floe" bench gen --shape wide --high-entropy --records "$((n / 5))" --out "$work/wide-he.ndjson"
"$floe" bench schema --shape event > "$work/event.schema.json"
"$floe" bench schema --shape wide > "$work/wide.schema.json"

run=0
# write SHAPE FILE WRITERS BATCH CODEC CPUS -> "rec/s MB/s B/record peakMB"
write() {
  # Runs in a process substitution: a fresh directory each, not a counter.
  local wh
  wh="$(mktemp -d -p "$work" wh.XXXXXX)"
  "$floe" --warehouse "$wh" table create bench.t --schema "$work/$1.schema.json" \
    --property "write.parquet.compression-codec=$5" >/dev/null
  local out
  out=$(/usr/bin/time -f "RSS %M" taskset -c "$6" "$floe" --warehouse "$wh" ingest bench.t "$2" \
    --writers "$3" --batch-size "$4" --json 2>&1)
  local rss json
  rss=$(grep '^RSS' <<<"$out" | awk '{print $2}')
  json=$(grep '^{' <<<"$out")
  local bytes input
  bytes=$(du -sb "$wh/bench/t/data" | cut -f1)
  input=$(stat -c %s "$2")
  python3 -c '
import json, sys
r = json.loads(sys.argv[1]); b, i, rss = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
n, s = r["records_committed"], r["seconds"]
print("%.0f %.1f %.1f %.0f" % (n / s, i / s / 1e6, b / n, rss / 1024))' "$json" "$bytes" "$input" "$rss"
  rm -rf "$wh"
}

echo "### Write path: 6-field event, zstd, by batch size and cores"
echo
echo "| batch | cores | records/s | MB/s (JSON) | B/record on disk | peak RSS MB |"
echo "|---:|---:|---:|---:|---:|---:|"
for batch in 1000 5000 10000 100000; do
  read -r rps mbs bpr rss < <(write event "$work/event.ndjson" 1 "$batch" zstd 0)
  echo "| $batch | 1 | $rps | $mbs | $bpr | $rss |"
  read -r rps mbs bpr rss < <(write event "$work/event.ndjson" 2 "$batch" zstd 0,1)
  echo "| $batch | 2 | $rps | $mbs | $bpr | $rss |"
done
echo
echo "### Write path: codecs and payload entropy, batches of 100k, 1 core"
echo
echo "| shape | payload | codec | records/s | MB/s (JSON) | B/record on disk |"
echo "|---|---|---|---:|---:|---:|"
for shape in event wide; do
  for payload in regular high-entropy; do
    file="$work/$shape.ndjson"; [ "$payload" = high-entropy ] && file="$work/$shape-he.ndjson"
    for codec in uncompressed snappy zstd; do
      read -r rps mbs bpr rss < <(write "$shape" "$file" 1 100000 "$codec" 0)
      echo "| $shape | $payload | $codec | $rps | $mbs | $bpr |"
    done
  done
done
echo
echo "### Write path: 50 columns, zstd, batches of 10k"
echo
echo "| cores | records/s | MB/s (JSON) | B/record on disk | peak RSS MB |"
echo "|---:|---:|---:|---:|---:|"
read -r rps mbs bpr rss < <(write wide "$work/wide.ndjson" 1 10000 zstd 0); echo "| 1 | $rps | $mbs | $bpr | $rss |"
read -r rps mbs bpr rss < <(write wide "$work/wide.ndjson" 2 10000 zstd 0,1); echo "| 2 | $rps | $mbs | $bpr | $rss |"
echo
echo "### Commit regime: catalog commit latency x concurrent writers (200k events, 1k per request)"
echo
echo "| catalog latency | writers | records/s | commits | requests/commit | records/commit |"
echo "|---:|---:|---:|---:|---:|---:|"
for latency in 50 200 500 5000; do
  for writers in 1 4 16 64; do
    run=$((run + 1))
    "$floe" --warehouse "$work/c$run" bench commit --latency-ms "$latency" --writers "$writers" \
      --records 200000 --batch 1000 | python3 -c '
import json, sys
r = json.load(sys.stdin)
print("| %d ms | %d | %.0f | %d | %.1f | %.0f |" % (r["latency_ms"], r["writers"], r["records_per_second"], r["commits"], r["requests_per_commit"], r["records_per_commit"]))'
    rm -rf "$work/c$run"
  done
done
echo
echo "### Copy-on-write amplification: 1M rows in 10 files, K keys updated in one batch"
echo
echo "| keys touched | files rewritten | table rewritten | rows rewritten per row changed | update commit s |"
echo "|---:|---:|---:|---:|---:|"
for keys in 1 10 100 1000 10000; do
  run=$((run + 1))
  "$floe" --warehouse "$work/w$run" bench cow --rows 1000000 --files 10 --keys "$keys" | python3 -c '
import json, sys
r = json.load(sys.stdin)
print("| %d | %d | %.1f %% | %.0fx | %.2f |" % (r["keys"], r["files_rewritten"], r["table_rewritten_pct"], r["rows_per_changed_row"], r["update_seconds"]))'
  rm -rf "$work/w$run"
done
