#!/usr/bin/env bash
# The initial copy of a Postgres table by `floe pg sync`, beside Postgres's
# own `COPY … TO STDOUT (FORMAT binary)` of the same table to /dev/null (the
# floor: what Postgres takes to send it), timed in the same run. Two tables:
# `orders`, ROWS rows of the CDC benchmark's table (`id bigint` key,
# user_id, numeric(10,2) amount, status, timestamptz), and `wide`,
# WIDE_ROWS rows of 50 columns of mixed types (bigint, int, numeric, text,
# timestamptz, date, double, bool). Each is copied into a fresh warehouse
# until the slot is drained. Each build given runs RUNS times, alternating,
# so that builds compared share the machine's moods; prints one markdown
# row per run: wall and CPU seconds of floe (Postgres's own CPU not
# included), rows/s of wall time, peak resident memory, and floe's wall
# time over COPY's.
#
# Usage: local-dev/bench/pg_copy.sh [ROWS] [RUNS] [FLOE_BIN...]
#        (defaults 1000000 3 and this checkout's release build)
#   WIDE_ROWS  rows of the wide table (default ROWS / 5); 0 skips it
#   SHAPES     which tables (default "orders wide")
#   CHUNK_ROWS passed to `floe pg sync --chunk-rows` when set
#   MODES      "columns" (the default), "text" (`--snapshot-text`: the
#              simple-protocol path of builds before binary COPY) or both
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

wide_rows="${WIDE_ROWS:-$(( rows / 5 ))}"
shapes="${SHAPES:-orders wide}"

# The wide table's 49 columns after its key, and the values of row g.
wide_columns() {
  local i cols="" vals=""
  for i in $(seq 1 49); do
    case $(( i % 8 )) in
      0) cols+=", b$i bigint"; vals+=", g * $i" ;;
      1) cols+=", n$i numeric(12,2)"; vals+=", (g % 100000) / 100.0 + $i" ;;
      2) cols+=", t$i text"; vals+=", 'text ' || g || ' col $i'" ;;
      3) cols+=", ts$i timestamptz"; vals+=", now() - g * interval '1 second'" ;;
      4) cols+=", i$i integer"; vals+=", (g % 1000000)::int + $i" ;;
      5) cols+=", d$i date"; vals+=", date '2020-01-01' + (g % 2000)::int" ;;
      6) cols+=", f$i double precision"; vals+=", g / 7.0" ;;
      7) cols+=", k$i boolean"; vals+=", g % 2 = 0" ;;
    esac
  done
  case "$1" in cols) echo "$cols" ;; vals) echo "$vals" ;; esac
}

# Creates table $1 of $2 rows.
create_table() {
  psql -c "DROP TABLE IF EXISTS $1" >/dev/null
  case "$1" in
    copy_orders) psql <<SQL
CREATE TABLE copy_orders (id bigint PRIMARY KEY, user_id bigint, amount numeric(10,2),
  status text, updated_at timestamptz DEFAULT now());
INSERT INTO copy_orders SELECT g, g % 10007, (g % 100000) / 100.0, 'new', now()
  FROM generate_series(1, $2) g;
VACUUM ANALYZE copy_orders;
SQL
    ;;
    copy_wide) psql <<SQL
CREATE TABLE copy_wide (id bigint PRIMARY KEY $(wide_columns cols));
INSERT INTO copy_wide SELECT g $(wide_columns vals) FROM generate_series(1, $2) g;
VACUUM ANALYZE copy_wide;
SQL
    ;;
  esac
}

echo "| table | build | run | wall (s) | floe CPU (s) | rows/s (wall) | peak RSS (MiB) | rows in Iceberg | x COPY |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|"
for shape in $shapes; do
  table="copy_$shape"
  n="$rows"
  [ "$shape" = wide ] && n="$wide_rows"
  [ "$n" = 0 ] && continue
  psql -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = 'floe_copy'" >/dev/null
  psql -c "DROP PUBLICATION IF EXISTS floe_copy" >/dev/null
  create_table "$table" "$n"
  for run in $(seq 1 "$runs"); do
    # Postgres's own: the whole table through binary COPY to /dev/null.
    /usr/bin/time -f "%e" -o "$work/copy_time" \
      "$pgbin/psql" -X -q -h 127.0.0.1 -p "$port" -U postgres -d postgres \
      -c "COPY $table TO STDOUT (FORMAT binary)" >/dev/null
    copy_wall="$(cat "$work/copy_time")"
    awk -v t="$table" -v r="$run" -v w="$copy_wall" -v n="$n" \
      'BEGIN { printf "| %s | COPY binary > /dev/null | %d | %.2f | | %.0f | | | 1.0 |\n", t, r, w, n / w }'
    for bin in "${bins[@]}"; do
      for mode in ${MODES:-columns}; do
        mode_args=()
        [ "$mode" = text ] && mode_args=(--snapshot-text)
        wh="$work/warehouse"
        rm -rf "$wh"
        psql -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = 'floe_copy'" >/dev/null
        psql -c "DROP PUBLICATION IF EXISTS floe_copy" >/dev/null
        "$bin" --warehouse "$wh" pg setup --conninfo "$conninfo" --table "public.$table" \
          --slot floe_copy --publication floe_copy >/dev/null
        /usr/bin/time -f "%e %U %S %M" -o "$work/time" "$bin" --warehouse "$wh" pg sync \
          --conninfo "$conninfo" --table "public.$table" --slot floe_copy \
          --publication floe_copy --namespace raw ${CHUNK_ROWS:+--chunk-rows "$CHUNK_ROWS"} "${mode_args[@]}" \
          >"$work/sync.log" 2>&1
        read -r wall user sys peak <"$work/time"
        held="$("${FLOE_PYTHON:-$HOME/.cache/floe-venv/bin/python}" - "$wh" "$table" <<'PY'
import glob, json, sys
meta = sorted(glob.glob(sys.argv[1] + "/raw/" + sys.argv[2] + "/metadata/*.metadata.json"))[-1]
m = json.load(open(meta))
snap = next(s for s in m["snapshots"] if s["snapshot-id"] == m["current-snapshot-id"])
print(int(snap["summary"]["total-records"]) - int(snap["summary"].get("total-position-deletes", 0)))
PY
)"
        label="$(basename "$bin")"
        [ -n "${MODES:-}" ] && label="$label ($mode)"
        awk -v t="$table" -v b="$label" -v r="$run" -v w="$wall" -v u="$user" -v s="$sys" \
          -v p="$peak" -v n="$n" -v h="$held" -v c="$copy_wall" \
          'BEGIN { printf "| %s | %s | %d | %.2f | %.2f | %.0f | %.0f | %s | %.1f |\n", t, b, r, w, u + s, n / w, p / 1024, h, w / c }'
      done
    done
  done
  psql -c "DROP TABLE IF EXISTS $table" >/dev/null
done
