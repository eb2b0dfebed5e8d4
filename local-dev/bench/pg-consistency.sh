#!/usr/bin/env bash
# The seed's Postgres scenario as a benchmark (docs/benchmarks.md): a
# 2,000,000-row `orders` table (bigint key, user_id, numeric(10,2) amount,
# status, two timestamptz, a text note TOASTed on every 100th row) copied into
# Iceberg while a pgbench client inserts and updates orders throughout;
# `floe pg sync` is SIGKILLed twice during the snapshot and once while
# streaming, and restarted each time. Reports the time from the first start
# until the Iceberg table holds everything Postgres committed (the slot has
# confirmed the last write, then checked: count and MD5 of every row in key
# order, Postgres against DuckDB reading the Iceberg table as streamed and
# once `floe maintain` compacted it), rows/s of the
# snapshot, and changes/s of a streaming burst.
#
#   local-dev/bench/pg-consistency.sh            # 2,000,000 rows
#   ROWS=200000 local-dev/bench/pg-consistency.sh
#
# Needs the full release build (cargo build --release --bin floe --features full) and the test venv
# (local-dev/test.sh makes it). Environment: ROWS, RATE (client tx/s, 300),
# FLOE (the binary), FLOE_PYTHON, CARGO_TARGET_DIR.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
rows="${ROWS:-2000000}"
rate="${RATE:-300}"
floe="${FLOE_BIN:-${CARGO_TARGET_DIR:-$repo/target}/release/floe}"
python="${FLOE_PYTHON:-$HOME/.cache/floe-venv/bin/python}"
[ -x "$floe" ] || { echo "no release floe at $floe: cargo build --release --bin floe --features full" >&2; exit 2; }

base="$("$repo/local-dev/pg.sh" | tail -n 1)"
db=floe_bench
conninfo="${base/dbname=postgres/dbname=$db}"
work="$(mktemp -d)"
warehouse="$work/warehouse"
sync_log="$work/sync.log"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  if [ -n "${KEEP:-}" ]; then echo "kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
now() { date +%s.%N; }
since() { echo "$(now) - $1" | bc; }
psql_q() { psql "$1" -v ON_ERROR_STOP=1 -qAt -c "$2"; }
source_args=(--conninfo "$conninfo" --slot "$db" --publication "$db" --table public.orders)

echo "== preparing $rows rows" >&2
psql_q "$base" "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '$db'" >/dev/null
psql_q "$base" "DROP DATABASE IF EXISTS $db WITH (FORCE)"
psql_q "$base" "CREATE DATABASE $db"
psql "$conninfo" -v ON_ERROR_STOP=1 -q -v rows="$rows" -f "$here/orders.sql"
psql_q "$conninfo" "CREATE SEQUENCE orders_new_id START $((rows + 1))"
"$floe" --warehouse "$warehouse" pg setup "${source_args[@]}" >&2

start_sync() {
  FLOE_LOG=info "$floe" --warehouse "$warehouse" pg sync "${source_args[@]}" --follow-ms 200 \
    >>"$sync_log" 2>&1 &
  sync_pid=$!
}
snapshot_done() {
  if grep -a 'snapshot chunk' "$sync_log" | sed 's/\x1b\[[0-9;]*m//g' | grep -q 'done=true'; then
    echo True
  else
    echo False
  fi
}
copied() {
  # The last key a chunk read, from the sync's log (status would be a second
  # reader of the slot, and slower than the copy on a busy machine).
  local key
  key="$(grep -a 'snapshot chunk' "$sync_log" | sed 's/\x1b\[[0-9;]*m//g' \
    | sed -n 's/.*last_key="\{0,1\}\([0-9][0-9]*\).*/\1/p' | tail -n 1)"
  echo "${key:-0}"
}

echo "== client at $rate tx/s; sync starts" >&2
pgbench "$conninfo" -n -c 2 -j 1 -R "$rate" -T 3600 -D rows="$rows" -f "$here/orders.pgbench" >"$work/pgbench.log" 2>&1 &
client_pid=$!
pids+=("$client_pid")
t0="$(now)"
start_sync
# Two kills during the snapshot: at a third and at two thirds of the rows.
for at in $((rows / 3)) $((rows * 2 / 3)); do
  until [ "$(copied)" -ge "$at" ]; do sleep 0.2; done
  kill -9 "$sync_pid"; wait "$sync_pid" 2>/dev/null || true
  echo "   SIGKILL at $(since "$t0") s (copied up to key $(copied)); restarting" >&2
  start_sync
done
until [ "$(snapshot_done)" = True ]; do sleep 0.5; done
t_snapshot="$(since "$t0")"
echo "   snapshot done at $t_snapshot s" >&2
sleep 5
kill -9 "$sync_pid"; wait "$sync_pid" 2>/dev/null || true
echo "   SIGKILL while streaming at $(since "$t0") s; 10 s down, then restarting" >&2
sleep 10
start_sync
pids+=("$sync_pid")
sleep 10
# Background jobs of a script ignore SIGINT: TERM it.
kill -TERM "$client_pid"; wait "$client_pid" 2>/dev/null || true
# The last change is a marker whose commit ends past the position read inside
# it: once the slot is confirmed past that, floe holds every change.
target="$(psql "$conninfo" -v ON_ERROR_STOP=1 -qAt -c "BEGIN" \
  -c "UPDATE orders SET updated_at = updated_at WHERE id = 1" \
  -c "SELECT pg_current_wal_lsn() - '0/0'::pg_lsn" -c "COMMIT")"
t_client_stop="$(since "$t0")"
until [ "$(psql_q "$conninfo" "SELECT (confirmed_flush_lsn - '0/0'::pg_lsn) > $target FROM pg_replication_slots WHERE slot_name = '$db'")" = t ]; do
  sleep 0.2
done
t_consistent="$(since "$t0")"
kill "$sync_pid"; wait "$sync_pid" 2>/dev/null || true
echo "   caught up with the last write at $t_consistent s; checking" >&2

pg_sum="$(psql_q "$conninfo" "SELECT count(*) || ' ' || md5(string_agg(concat_ws('|', id, user_id, amount, status,
    (extract(epoch FROM created_at) * 1000000)::bigint, (extract(epoch FROM updated_at) * 1000000)::bigint,
    coalesce(md5(note), '\\N')), E'\n' ORDER BY id)) FROM orders")"
# The table as streamed (position deletes, read by DuckDB as they are),
# then compacted by floe maintain: both must equal Postgres.
read_start="$(now)"
ice_streamed="$("$python" "$here/pg_md5.py" "$warehouse" raw.orders)"
echo "   read as streamed in $(since "$read_start") s" >&2
maintain_start="$(now)"
"$floe" --warehouse "$warehouse" maintain raw.orders >&2
echo "   compacted in $(since "$maintain_start") s" >&2
ice_sum="$("$python" "$here/pg_md5.py" "$warehouse" raw.orders)"
echo "   postgres:           $pg_sum" >&2
echo "   iceberg (streamed): $ice_streamed" >&2
echo "   iceberg (compacted): $ice_sum" >&2
[ "$pg_sum" = "$ice_streamed" ] || { echo "MISMATCH: the streamed Iceberg table differs from Postgres" >&2; exit 1; }
[ "$pg_sum" = "$ice_sum" ] || { echo "MISMATCH: the compacted Iceberg table differs from Postgres" >&2; exit 1; }
# Row changes the client made (the statistics count the initial load too;
# the client's sessions report theirs as they end).
sleep 2
client_tx="$(psql_q "$conninfo" "SELECT pg_stat_force_next_flush(); SELECT n_tup_ins - $rows + n_tup_upd FROM pg_stat_user_tables WHERE relname = 'orders'" | tail -n 1)"

echo "== streaming burst: 200 transactions x 1,000 updates, sync stopped" >&2
psql "$conninfo" -v ON_ERROR_STOP=1 -q -f "$here/orders_burst.sql"
burst_start="$(now)"
burst="$("$floe" --warehouse "$warehouse" pg sync "${source_args[@]}" --json)"
burst_wall="$(since "$burst_start")"

"$python" - "$rows" "$t_snapshot" "$t_client_stop" "$t_consistent" "$client_tx" "$burst_wall" "$burst" "$pg_sum" <<'PY'
import json, sys
rows, snap, stop, consistent, tx, burst_wall = sys.argv[1:7]
burst, pg = json.loads(sys.argv[7]), sys.argv[8]
rows, snap, stop, consistent, burst_wall = int(rows), float(snap), float(stop), float(consistent), float(burst_wall)
changes = burst["lines"]
print(json.dumps({
    "rows": rows,
    "client_row_changes": tx,
    "kills": 3,
    "snapshot_done_s": round(snap, 1),
    "snapshot_rows_per_s_wall": round(rows / snap),
    "client_stopped_s": round(stop, 1),
    "consistent_s": round(consistent, 1),
    "consistent_after_client_stop_s": round(consistent - stop, 1),
    "count_and_md5": pg,
    "burst_changes": changes,
    "burst_changes_per_s_wall": round(changes / burst_wall),
    "burst_changes_per_s_in_batches": round(burst["stream_changes_per_second"]),
}, indent=2))
PY
