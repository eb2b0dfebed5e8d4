#!/usr/bin/env bash
# Where a streaming burst's time goes (#45): a fresh ROWS-row `orders`
# table (the consistency scenario's shape) copied by `floe pg sync`, then
# BURSTS times 200 transactions of 1,000 updates made while no sync runs,
# each drained by one `floe pg sync` (wall, CPU, peak RSS, changes/s), and
# Postgres's own `pg_logical_slot_peek_binary_changes` of the next burst
# timed at 50,000 and at all its changes: what Postgres spends decoding
# for one batch of the default size, and for all of them at once.
# `PERF=1` records the last drain with `perf record --call-graph dwarf`
# into pg_burst.perf (`PERF_FREQ` samples a second, default 299).
#
# Usage: local-dev/bench/pg_burst.sh [ROWS] [BURSTS]   (1000000 3)
#   MAX_CHANGES  passed to `floe pg sync --max-changes` (default 50000)
#   MODES        how changes are read, burst by burst in turn: `binary`
#                (pgoutput's binary mode, the default) or `text`
#                (`--changes-text`); "text binary" alternates, to compare
#                the two in one run
#   READ         `stream` (a replication session, the default) or `peek` (`--peek`)
#   FLOE_BIN     the binary (default this checkout's release build)
set -euo pipefail
cd "$(dirname "$0")/../.."
rows="${1:-1000000}"
bursts="${2:-3}"
db=floe_burst
# shellcheck source=local-dev/bench/orders_db.sh
source local-dev/bench/orders_db.sh
source_args+=(--max-changes "${MAX_CHANGES:-50000}")

burst() {
  psql "$conninfo" -v ON_ERROR_STOP=1 -q -f local-dev/bench/orders_burst.sql
}

peek_ms() {
  psql "$conninfo" -v ON_ERROR_STOP=1 -qAt -c '\timing on' -c "SELECT count(*) FROM
    pg_logical_slot_peek_binary_changes('$db', NULL, $1, 'proto_version', '1',
    'publication_names', '$db', 'messages', 'true', 'binary', '$2')" | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p'
}

read -r -a modes <<<"${MODES:-binary}"
echo "| burst | changes as | changes | batches | wall (s) | floe CPU (s) | peak RSS (MiB) | changes/s (wall) | Postgres peek of 50,000 (ms) | of all (ms) |"
echo "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for n in $(seq 1 "$bursts"); do
  mode="${modes[$(((n - 1) % ${#modes[@]}))]}"
  case "$mode" in
    binary) as_text=() ; binary=true ;;
    text) as_text=(--changes-text) ; binary=false ;;
    *) echo "MODES: binary or text, not $mode" >&2; exit 2 ;;
  esac
  burst
  p50k="$(peek_ms 50000 "$binary")"
  pall="$(peek_ms 100000000 "$binary")"
  run=(/usr/bin/time -f "%e %U %S %M" -o "$work/time" "$floe" --warehouse "$warehouse" pg sync "${source_args[@]}" "${read_args[@]}" "${as_text[@]}" --json)
  if [ "${PERF:-0}" = 1 ] && [ "$n" = "$bursts" ]; then
    run=(perf record -F "${PERF_FREQ:-299}" --call-graph dwarf,16384 -o pg_burst.perf -- "${run[@]}")
  fi
  "${run[@]}" >"$work/report.json"
  python3 - "$n" "$work/time" "$work/report.json" "$p50k" "$pall" "$mode" <<'PY'
import json, sys
n, time_path, report_path, p50k, pall, mode = sys.argv[1:7]
wall, user, sys_s, rss_kb = (float(x) for x in open(time_path).read().split()[-4:])
r = json.load(open(report_path))
print(f"| {n} | {mode} | {r['lines']:,} | {r['batches']} | {wall:.2f} | {user + sys_s:.2f} | {rss_kb / 1024:.0f} "
      f"| {r['lines'] / wall:,.0f} | {float(p50k):.0f} | {float(pall):.0f} |")
PY
done
