#!/usr/bin/env bash
# The initial copy of a Postgres table by `floe pg sync`: ROWS rows of the
# CDC benchmark's table (`id bigint` key, user_id, numeric(10,2) amount,
# status, timestamptz) copied into a fresh warehouse in 10,000-row chunks,
# one snapshot each, until the slot is drained. Each build given runs RUNS
# times, alternating, so that builds compared share the machine's moods;
# prints one markdown row per run: wall and CPU seconds of floe (Postgres's
# own CPU not included), rows/s of wall time, peak resident memory.
#
# Usage: local-dev/bench/pg_copy.sh [ROWS] [RUNS] [FLOE_BIN...]
#        (defaults 1000000 3 and this checkout's release build)
set -euo pipefail
cd "$(dirname "$0")/../.."
rows="${1:-1000000}"
runs="${2:-3}"
shift $(( $# < 2 ? $# : 2 ))
bins=("$@")
if [ "${#bins[@]}" = 0 ]; then
  cargo build --release --locked --bin floe --features full >/dev/null
  bins=("${CARGO_TARGET_DIR:-target}/release/floe")
fi
port="${FLOE_BENCH_PG_PORT:-15439}"
export FLOE_PG_PORT="$port" FLOE_PG_DATA="$HOME/.cache/floe-pg-bench/$port"
conninfo="$(local-dev/pg.sh)"
# pg.sh may have taken another port (in use, or in the ephemeral range).
port="$(sed -n 's/.*port=\([0-9]*\).*/\1/p' <<<"$conninfo")"
pgbin="$(dirname "$(find /usr/lib/postgresql -name psql | sort -V | tail -n 1)")"
psql() { "$pgbin/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U postgres -d postgres "$@"; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

psql -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = 'floe_copy'" >/dev/null
psql -c "DROP TABLE IF EXISTS copy_orders; DROP PUBLICATION IF EXISTS floe_copy" >/dev/null
psql <<SQL
CREATE TABLE copy_orders (id bigint PRIMARY KEY, user_id bigint, amount numeric(10,2),
  status text, updated_at timestamptz DEFAULT now());
INSERT INTO copy_orders SELECT g, g % 10007, (g % 100000) / 100.0, 'new', now()
  FROM generate_series(1, $rows) g;
VACUUM ANALYZE copy_orders;
SQL

echo "| build | run | wall (s) | floe CPU (s) | rows/s (wall) | peak RSS (MiB) | rows in Iceberg |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for run in $(seq 1 "$runs"); do
  for bin in "${bins[@]}"; do
    wh="$work/warehouse"
    rm -rf "$wh"
    psql -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = 'floe_copy'" >/dev/null
    psql -c "DROP PUBLICATION IF EXISTS floe_copy" >/dev/null
    "$bin" --warehouse "$wh" pg setup --conninfo "$conninfo" --table public.copy_orders \
      --slot floe_copy --publication floe_copy >/dev/null
    /usr/bin/time -f "%e %U %S %M" -o "$work/time" "$bin" --warehouse "$wh" pg sync \
      --conninfo "$conninfo" --table public.copy_orders --slot floe_copy \
      --publication floe_copy --namespace raw >"$work/sync.log" 2>&1
    read -r wall user sys peak <"$work/time"
    held="$("${FLOE_PYTHON:-$HOME/.cache/floe-venv/bin/python}" - "$wh" <<'PY'
import glob, json, sys
meta = sorted(glob.glob(sys.argv[1] + "/raw/copy_orders/metadata/*.metadata.json"))[-1]
m = json.load(open(meta))
snap = next(s for s in m["snapshots"] if s["snapshot-id"] == m["current-snapshot-id"])
print(int(snap["summary"]["total-records"]) - int(snap["summary"].get("total-position-deletes", 0)))
PY
)"
    awk -v b="$(basename "$bin")" -v r="$run" -v w="$wall" -v u="$user" -v s="$sys" \
      -v p="$peak" -v n="$rows" -v h="$held" \
      'BEGIN { printf "| %s | %d | %.2f | %.2f | %.0f | %.0f | %s |\n", b, r, w, u + s, n / w, p / 1024, h }'
  done
done
