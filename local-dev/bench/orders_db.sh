# Sourced by the Postgres stream benchmarks (pg_burst.sh, pg_stream.sh),
# from the repository root, with `db` (the database, slot and publication
# name) and `rows` set: builds floe (or takes FLOE_BIN), starts the local
# cluster, makes a fresh database `db` holding a `rows`-row `orders` table
# (orders.sql), sets up its slot and copies it into a warehouse in a
# temporary directory removed on exit. Leaves `floe`, `base`, `conninfo`,
# `work`, `warehouse`, `source_args` (the sync's source flags), `read_args`
# (the measured syncs' `READ` flag) and `psql_q`.
floe="$(local-dev/bench/floe-bin.sh --features full)"
base="$(local-dev/pg.sh | tail -n 1)"
conninfo="${base/dbname=postgres/dbname=$db}"
work="$(mktemp -d)"
psql_q() { psql "$1" -v ON_ERROR_STOP=1 -qAt -c "$2"; }
# The slot and its database go on exit too: a slot left behind keeps every
# WAL file written after it (a 10M-row run writes gigabytes).
drop_db() {
  psql_q "$base" "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '$db'" >/dev/null
  psql_q "$base" "DROP DATABASE IF EXISTS $db WITH (FORCE)"
}
trap 'drop_db || true; rm -rf "$work"' EXIT
warehouse="$work/warehouse"
source_args=(--conninfo "$conninfo" --slot "$db" --publication "$db" --table public.orders)
# READ=peek: the measured syncs peek each batch (`--peek`) instead of
# streaming over a replication session; builds before that session always
# peek, and have no such flag.
read_args=()
if [ "${READ:-stream}" = peek ]; then read_args=(--peek); fi

drop_db
psql_q "$base" "CREATE DATABASE $db"
psql "$conninfo" -v ON_ERROR_STOP=1 -q -v rows="$rows" -f local-dev/bench/orders.sql
"$floe" --warehouse "$warehouse" pg setup "${source_args[@]}" >&2
"$floe" --warehouse "$warehouse" pg sync "${source_args[@]}" --json >/dev/null
