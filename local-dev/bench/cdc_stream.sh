#!/usr/bin/env bash
# CDC at streaming rates: a Postgres table of ROWS rows replicated by
# `floe pg sync --follow-ms` while pgbench writes TPS transactions a second
# (updates, inserts, deletes, upserts) for SECONDS, `floe maintain` every
# MAINTAIN seconds. Every minute it samples snapshots and files, the slot's
# lag, and a full scan of the table by DuckDB and by pyiceberg; at the end it
# compacts the table once more (time and peak memory) and compares it with
# Postgres by count and an order-independent content hash.
#
# Usage: local-dev/bench/cdc_stream.sh [ROWS] [TPS] [SECONDS] [MAINTAIN]
#        (defaults 1000000 1000 600 180; prints markdown tables)
set -euo pipefail
cd "$(dirname "$0")/../.."
rows="${1:-1000000}"
tps="${2:-1000}"
seconds="${3:-600}"
every="${4:-180}"
venv="${FLOE_VENV:-$HOME/.cache/floe-venv}"
py="$venv/bin/python"
[ -x "$py" ] || { echo "run ./local-dev/test.sh once: it makes $venv" >&2; exit 1; }

# FLOE_BIN=path runs that build (e.g. an earlier one) instead of this checkout's.
floe="$(local-dev/bench/floe-bin.sh --features full)"
port="${FLOE_BENCH_PG_PORT:-15439}"
export FLOE_PG_PORT="$port" FLOE_PG_DATA="$HOME/.cache/floe-pg-bench/$port"
conninfo="$(local-dev/pg.sh)"
# pg.sh may have taken another port (in use, or in the ephemeral range).
port="$(sed -n 's/.*port=\([0-9]*\).*/\1/p' <<<"$conninfo")"
pgbin="$(dirname "$(find /usr/lib/postgresql -name pgbench | sort -V | tail -n 1)")"
psql() { "$pgbin/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U postgres -d postgres "$@"; }
work="$(mktemp -d)"
wh="$work/warehouse"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
# FLOE_BENCH_MERGE=copy-on-write (or equality-deletes) measures that merge
# strategy instead of position deletes; FLOE_BENCH_FORMAT=3 a format v3
# table (deletion vectors instead of position-delete files).
cfg=()
if [ -n "${FLOE_BENCH_MERGE:-}${FLOE_BENCH_FORMAT:-}" ]; then
  {
    echo '[defaults]'
    [ -z "${FLOE_BENCH_MERGE:-}" ] || echo "merge_strategy = \"$FLOE_BENCH_MERGE\""
    [ -z "${FLOE_BENCH_FORMAT:-}" ] || echo "format_version = $FLOE_BENCH_FORMAT"
  } >"$work/floe.toml"
  cfg=(--config "$work/floe.toml")
fi
# Iceberg Java's scan too (before and after the last compaction), when
# local-dev/java.sh has installed it.
java_scan() {
  if [ -f "$HOME/.cache/floe-java/.installed" ]; then
    "$py" local-dev/bench/java_scan.py "$(ls -t "$wh"/raw/bench_orders/metadata/*.metadata.json | head -n 1)" 2>/dev/null || echo "fails"
  else
    echo "-"
  fi
}

psql -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = 'floe_bench'" >/dev/null
psql -c "DROP TABLE IF EXISTS bench_orders; DROP PUBLICATION IF EXISTS floe_bench" >/dev/null
psql <<SQL
CREATE TABLE bench_orders (id bigint PRIMARY KEY, user_id bigint, amount numeric(10,2),
  status text, updated_at timestamptz DEFAULT now());
INSERT INTO bench_orders SELECT g, g % 10007, (g % 100000) / 100.0, 'new', now()
  FROM generate_series(1, $rows) g;
SQL
"$floe" "${cfg[@]}" --warehouse "$wh" pg setup --conninfo "$conninfo" --table public.bench_orders \
  --slot floe_bench --publication floe_bench >/dev/null

# The client: per transaction one of an update, an insert of a new key, a
# delete, or an upsert of an existing key.
cat >"$work/client.sql" <<SQL
\set id random(1, $rows)
\set kind random(1, 10)
BEGIN;
UPDATE bench_orders SET amount = amount + 1, status = 'paid', updated_at = now() WHERE id = :id AND :kind <= 6;
INSERT INTO bench_orders (id, user_id, amount, status) SELECT $rows + :id * 10 + :kind, :id, 1.00, 'new' WHERE :kind = 7
  ON CONFLICT (id) DO UPDATE SET amount = bench_orders.amount + 0.01;
DELETE FROM bench_orders WHERE id = :id AND :kind = 8;
INSERT INTO bench_orders (id, user_id, amount, status) SELECT :id, :id, 2.00, 'upserted' WHERE :kind >= 9
  ON CONFLICT (id) DO UPDATE SET status = 'upserted', amount = excluded.amount;
END;
SQL

start=$(date +%s)
"$floe" "${cfg[@]}" --warehouse "$wh" pg sync --conninfo "$conninfo" --table public.bench_orders \
  --slot floe_bench --publication floe_bench --namespace raw --follow-ms 1000 \
  >"$work/sync.log" 2>&1 &
sync_pid=$!
# The initial copy first, then the client.
until "$floe" "${cfg[@]}" --warehouse "$wh" table show raw.bench_orders --json 2>/dev/null \
  | "$py" -c 'import json,sys; s=json.load(sys.stdin); sys.exit(0 if int((s.get("snapshots") or [{}])[-1].get("summary",{}).get("total-records",0)) >= '"$rows"' else 1)' 2>/dev/null; do
  sleep 2
done
copied=$(( $(date +%s) - start ))
"$pgbin/pgbench" -n -h 127.0.0.1 -p "$port" -U postgres -c 4 -j 2 -R "$tps" -T "$seconds" \
  -f "$work/client.sql" postgres >"$work/pgbench.log" 2>&1 &
client_pid=$!

scan() { # prints: duckdb_seconds pyiceberg_seconds rows
  "$py" - "$wh" <<'PY'
import glob, os, pathlib, sys, time
import duckdb
from pyiceberg.table import StaticTable
wh = sys.argv[1]
meta = sorted(glob.glob(f"{wh}/raw/bench_orders/metadata/*.metadata.json"), key=os.path.getmtime)[-1]
def ext(n):
    m = __import__(f"duckdb_extension_{n}")
    return str(next(pathlib.Path(m.__path__[0]).glob(f"extensions/*/{n}.duckdb_extension")))
con = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
for n in ("avro", "iceberg"):
    con.execute(f"LOAD '{ext(n)}'")
# A full scan: every column of every live row, materialised as Arrow.
t = time.time()
n = con.execute(f"SELECT * FROM iceberg_scan('{meta}')").to_arrow_table().num_rows
d = time.time() - t
t = time.time()
try:
    StaticTable.from_metadata(meta).scan().to_arrow()
    p = "%.2f" % (time.time() - t)
except ValueError:
    p = "refuses"
print("%.2f %s %d" % (d, p, n))
PY
}
files() { # prints: snapshots data_files delete_files
  "$floe" "${cfg[@]}" --warehouse "$wh" table show raw.bench_orders --json | "$py" -c '
import json, sys
s = json.load(sys.stdin)
snap = (s.get("snapshots") or [{}])[-1].get("summary", {})
print(len(s.get("snapshots") or []), snap.get("total-data-files", 0), snap.get("total-delete-files", 0))'
}
lag() {
  psql -At -c "SELECT pg_current_wal_lsn() - confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 'floe_bench'"
}

echo "rows $rows, client $tps tx/s for $seconds s, maintenance every $every s; initial copy took $copied s"
echo
echo "| minute | snapshots (in metadata) | data files | delete files | slot lag (bytes) | DuckDB full scan (s) | pyiceberg full scan (s) | rows |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|"
last_maint=$(date +%s)
minute=0
while kill -0 "$client_pid" 2>/dev/null; do
  sleep 60
  minute=$((minute + 1))
  # Sampled before a due maintenance run, so the table is at its most
  # fragmented when scanned.
  read -r snaps dfiles delfiles < <(files)
  read -r duck pyi n < <(scan)
  echo "| $minute | $snaps | $dfiles | $delfiles | $(lag) | $duck | $pyi | $n |"
  if [ $(( $(date +%s) - last_maint )) -ge "$every" ]; then
    "$floe" "${cfg[@]}" --warehouse "$wh" maintain raw.bench_orders --max-seconds 120 >/dev/null 2>&1 || true
    last_maint=$(date +%s)
  fi
done
wait "$client_pid" || true
grep -E "tps|latency" "$work/pgbench.log" | sed 's/^/    /'
# Let the sync catch up, then stop it.
for _ in $(seq 1 60); do
  [ "$(lag)" -lt 65536 ] && break
  sleep 2
done
kill "$sync_pid" 2>/dev/null || true
wait "$sync_pid" 2>/dev/null || true
read -r snaps dfiles delfiles < <(files)
read -r duck pyi n < <(scan)
echo
echo "| after the run | snapshots | data files | delete files | DuckDB scan (s) | pyiceberg scan (s) | Iceberg Java scan (s) |"
echo "|---|---:|---:|---:|---:|---:|---:|"
echo "| before compaction | $snaps | $dfiles | $delfiles | $duck | $pyi | $(java_scan) |"
/usr/bin/time -v "$floe" "${cfg[@]}" --warehouse "$wh" maintain raw.bench_orders --max-snapshot-age-ms 0 \
  >/dev/null 2>"$work/maintain.time"
secs=$(grep "Elapsed (wall" "$work/maintain.time" | awk '{print $NF}')
rss=$(grep "Maximum resident" "$work/maintain.time" | awk '{print int($NF/1024)}')
read -r snaps dfiles delfiles < <(files)
read -r duck pyi n < <(scan)
echo "| after compaction ($secs, peak $rss MiB) | $snaps | $dfiles | $delfiles | $duck | $pyi | $(java_scan) |"

# Equal to Postgres: count and the MD5 of every row, in key order.
pg=$(psql -At -F ' ' -c "SELECT count(*), md5(string_agg(id || '|' || amount || '|' || status, ',' ORDER BY id)) FROM bench_orders")
ice=$("$py" - "$wh" <<'PY'
import glob, hashlib, os, pathlib, sys
import duckdb
wh = sys.argv[1]
meta = sorted(glob.glob(f"{wh}/raw/bench_orders/metadata/*.metadata.json"), key=os.path.getmtime)[-1]
def ext(n):
    m = __import__(f"duckdb_extension_{n}")
    return str(next(pathlib.Path(m.__path__[0]).glob(f"extensions/*/{n}.duckdb_extension")))
con = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
for n in ("avro", "iceberg"):
    con.execute(f"LOAD '{ext(n)}'")
rows = con.execute(f"SELECT id, amount, status FROM iceberg_scan('{meta}') ORDER BY id").fetchall()
text = ",".join(f"{i}|{a}|{s}" for i, a, s in rows)
print(len(rows), hashlib.md5(text.encode()).hexdigest())
PY
)
echo
echo "Postgres: $pg; Iceberg: $ice; $([ "$pg" = "$ice" ] && echo equal || echo DIFFERENT)"
