#!/usr/bin/env bash
# DuckDB 1.5.5's iceberg extension applies the wrong deletion vector when one
# Puffin file holds several (the layout floe writes by default: one Puffin
# file per commit). It reads a vector through DuckDB's external file cache,
# which may serve it from a cached range that starts at an earlier vector of
# the same file, and parses from the range's start, so an earlier blob (with
# a valid checksum) is applied to a later data file. It takes an earlier
# vector at least as long as what follows it in the file (the later vectors
# and the footer), so small vectors read right. Fixed upstream by
# duckdb-iceberg PR #1182 (after the 1.5.5 build).
#
# Compares DuckDB (its file cache on, then off) with pyiceberg and the
# expected ids on floe-written v3 keyed tables: three files of 10,000 rows
# with one commit deleting 2,000 rows of one and a row of each other, by
# default and with `floe.write.vector-per-puffin = true`; and two files of
# 2,000 rows with 100 and with 400 rows deleted (the rule's two sides).
#
# Usage: local-dev/repro/duckdb_vectors.sh   (FLOE_BIN=path for a built CLI)
set -euo pipefail
cd "$(dirname "$0")/../.."
py="${FLOE_VENV:-$HOME/.cache/floe-venv}/bin/python"
[ -x "$py" ] || { echo "run ./local-dev/test.sh once: it makes the venv" >&2; exit 1; }
if [ -n "${FLOE_BIN:-}" ]; then
  floe="$FLOE_BIN"
else
  cargo build --locked --bin floe >/dev/null
  floe="${CARGO_TARGET_DIR:-target}/debug/floe"
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export FLOE_WAREHOUSE="$work/wh"
echo '{"type":"struct","fields":[{"id":1,"name":"id","required":true,"type":"long"},{"id":2,"name":"v","required":false,"type":"string"}]}' >"$work/schema.json"

# table NAME [PROPERTY=VALUE]: a keyed v3 table.
table() {
  "$floe" table create "t.$1" --schema "$work/schema.json" --key id ${2:+--property "$2"} >/dev/null
  "$floe" table alter "t.$1" --format-version 3 >/dev/null
}
# rows NAME FIRST LAST: one commit (one data file) of ids FIRST..=LAST.
rows() {
  seq "$2" "$3" | awk '{printf "{\"id\":%d,\"v\":\"v%d\"}\n",$1,$1}' >"$work/in.ndjson"
  "$floe" ingest "t.$1" "$work/in.ndjson" >/dev/null
}
# gone NAME ID...: one commit deleting those ids.
gone() {
  local t=$1
  shift
  printf '%s\n' "$@" | awk '{printf "{\"id\":%d,\"_op\":\"d\"}\n",$1}' >"$work/del.ndjson"
  "$floe" ingest "t.$t" "$work/del.ndjson" >/dev/null
}

table shared
table split floe.write.vector-per-puffin=true
for t in shared split; do
  rows $t 0 9999; rows $t 10000 19999; rows $t 20000 29999
  gone $t $(seq 20000 2 23998) 5000 15000
done
for n in 100 400; do
  table edge$n
  rows edge$n 0 1999; rows edge$n 2000 3999
  gone edge$n $(seq 2000 2 $((2000 + 2 * n - 2))) 1000
done

"$py" - "$work/wh" <<'PY'
import pathlib, sqlite3, sys
import duckdb
from pyiceberg.table import StaticTable

wh = pathlib.Path(sys.argv[1])
def extension(name):
    m = __import__(f"duckdb_extension_{name}")
    return str(next(pathlib.Path(m.__path__[0]).glob(f"extensions/*/{name}.duckdb_extension")))
def duck(cache):
    con = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
    for n in ("avro", "iceberg"):
        con.execute(f"LOAD '{extension(n)}'")
    con.execute(f"SET enable_external_file_cache = {cache}")
    return con
deleted = {
    "shared": set(range(20000, 24000, 2)) | {5000, 15000},
    "split": set(range(20000, 24000, 2)) | {5000, 15000},
    "edge100": set(range(2000, 2200, 2)) | {1000},
    "edge400": set(range(2000, 2800, 2)) | {1000},
}
total = {"shared": 30000, "split": 30000, "edge100": 4000, "edge400": 4000}
catalog = sqlite3.connect(wh / "catalog.db")
version = duck("true").execute(
    "select extension_version from duckdb_extensions() where extension_name = 'iceberg'").fetchone()[0]
print(f"duckdb {duckdb.__version__}, iceberg extension {version}")
print("| table | Puffin files | vectors | expected rows | pyiceberg | DuckDB | DuckDB, file cache off |")
print("|---|---|---|---|---|---|---|")
for t, gone in deleted.items():
    md = catalog.execute("select metadata_location from iceberg_tables where table_name = ?",
                         (t,)).fetchone()[0].removeprefix("file://")
    want = set(range(total[t])) - gone
    scan = StaticTable.from_metadata(md).scan()
    vectors = [path for (path,) in duck("true").execute(
        f"select file_path from iceberg_metadata('{md}') where file_format = 'PUFFIN' and status <> 'DELETED'"
    ).fetchall()]
    def verdict(ids):
        got = set(ids)
        if len(ids) == len(got) and got == want:
            return f"{len(ids)} (right)"
        return f"{len(ids)}: {len(want - got)} missing, {len(got - want)} still there"
    readers = [
        scan.to_arrow().column("id").to_pylist(),
        [r[0] for r in duck("true").execute(f"select id from iceberg_scan('{md}')").fetchall()],
        [r[0] for r in duck("false").execute(f"select id from iceberg_scan('{md}')").fetchall()],
    ]
    print(f"| {t} | {len(set(vectors))} | {len(vectors)} | {len(want)} | "
          + " | ".join(verdict(ids) for ids in readers) + " |")
PY
