#!/usr/bin/env bash
# Freshness of a steady stream of Postgres changes (#45): a fresh ROWS-row
# `orders` table (orders.sql) copied, then pgbench commits RATE updates a
# second, in transactions of 100 rows, for SECONDS while one `floe pg sync
# --follow-ms` runs beside it. Each committed batch logs its commit time
# and its first and last transaction's commit time in Postgres; the rate
# being steady, a batch's changes are taken as spread evenly between those
# two, so a change's freshness (its commit in Postgres to the Iceberg
# snapshot holding it) is the batch's commit time minus its own. Prints
# changes/s applied, freshness p50/p99/max, floe CPU and peak RSS, and the
# server's CPU over the stream (every postgres process: pgbench's share
# included, so compare it between runs of one rate).
#
# Usage: local-dev/bench/pg_stream.sh [RATE] [SECONDS] [ROWS]   (20000 60 1000000)
#   COMMIT_INTERVAL_MS  `--commit-interval-ms` (default 1000)
#   CHANGES             `binary` (default) or `text` (`--changes-text`)
#   READ                `stream` (a replication session, the default) or `peek` (`--peek`)
#   FLOE_BIN            the binary (default this checkout's release build)
set -euo pipefail
cd "$(dirname "$0")/../.."
rate="${1:-20000}"
seconds="${2:-60}"
rows="${3:-1000000}"
case "${CHANGES:-binary}" in
  binary) as_text=() ;;
  text) as_text=(--changes-text) ;;
  *) echo "CHANGES: binary or text" >&2; exit 2 ;;
esac
db=floe_stream
# shellcheck source=local-dev/bench/orders_db.sh
source local-dev/bench/orders_db.sh
cat >"$work/update.sql" <<SQL
\set s random(0, $((rows / 100 - 1))) * 100
UPDATE orders SET amount = amount + 0.01, updated_at = now() WHERE id > :s AND id <= :s + 100;
SQL
FLOE_LOG=floe_postgres=info /usr/bin/time -f "%e %U %S %M" -o "$work/time" \
  "$floe" --warehouse "$warehouse" pg sync "${source_args[@]}" "${read_args[@]}" "${as_text[@]}" \
  --follow-ms 100 --commit-interval-ms "${COMMIT_INTERVAL_MS:-1000}" \
  --max-seconds "$((seconds + 10))" --json >"$work/report.json" 2>"$work/log" &
sync_pid=$!
# The server's CPU (every postgres process, in clock ticks) from the
# stream's second second to its last: pgbench's share is the same whichever
# way floe reads, so the difference is decoding.
pg_ticks() {
  cat /proc/[0-9]*/stat 2>/dev/null | awk '$2 == "(postgres)" { t += $14 + $15 } END { print t + 0 }'
}
(sleep 1; pg_ticks >"$work/pg0"; sleep "$((seconds - 2))"; pg_ticks >"$work/pg1") &
pgbench -n -c 2 -j 2 -f "$work/update.sql" -R "$((rate / 100))" -T "$seconds" \
  "$conninfo" >"$work/pgbench" 2>&1
wait "$sync_pid"
wait
pg_cpu="$(echo "($(cat "$work/pg1") - $(cat "$work/pg0")) / $(getconf CLK_TCK)" | bc -l)"
python3 - "$work/log" "$work/time" "$seconds" "$rate" "${CHANGES:-binary}" "$pg_cpu" "${READ:-stream}" <<'PY'
import re, sys
log_path, time_path, seconds, rate, mode, pg_cpu, read = sys.argv[1:8]
line = re.compile(r"changes=(\d+) .*committed_ms=(\d+) first_source_ms=(\d+) last_source_ms=(\d+)")
fresh, changes, span = [], 0, []
for m in map(line.search, open(log_path)):
    if not m:
        continue
    n, done, first, last = (int(x) for x in m.groups())
    changes += n
    span += [first, last]
    fresh += [done - (first + (last - first) * (i + 0.5) / n) for i in range(n)]
fresh.sort()
# A build that does not log its batches' source times gives no freshness.
q = lambda p: fresh[min(len(fresh) - 1, int(p * len(fresh)))] / 1000 if fresh else float("nan")
wall, user, sys_s, rss_kb = (float(x) for x in open(time_path).read().split()[-4:])
print("| read | changes as | offered/s | changes | applied/s | freshness p50 / p99 / max (s) | floe CPU (s) | peak RSS (MiB) | Postgres CPU (s) |")
print("|---|---|---:|---:|---:|---|---:|---:|---:|")
applied = changes / ((max(span) - min(span)) / 1000) if span else 0
print(f"| {read} | {mode} | {int(rate):,} | {changes:,} | {applied:,.0f} | {q(0.5):.1f} / {q(0.99):.1f} / {q(1):.1f} "
      f"| {user + sys_s:.1f} | {rss_kb / 1024:.0f} | {float(pg_cpu):.1f} |")
PY
