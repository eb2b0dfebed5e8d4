"""Reads a table's nanosecond timestamp columns as integers (nanoseconds
since the epoch), by pyiceberg and by DuckDB, so a test can see whether
every digit survived; Python's datetime holds microseconds only. A reader
that cannot give nanoseconds reports its error, or its type, instead.

Usage: read_nanos.py WAREHOUSE NS.TABLE KEY COLUMN...
Prints {"pyiceberg": [[key, ns, ...], ...] | {"error": ...}, "duckdb": ...}."""
import json
import sys

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.catalog.sql import SqlCatalog

from v3_facts import extension


def by_pyiceberg(table, key, columns):
    t = table.scan(selected_fields=(key, *columns)).to_arrow().sort_by(key)
    out = []
    for c in columns:
        ty = t.schema.field(c).type
        if not (pa.types.is_timestamp(ty) and ty.unit == "ns"):
            return {"error": f"{c} reads as {ty}"}
    cols = [t.column(key).to_pylist()] + [pc.cast(t.column(c), pa.int64()).to_pylist() for c in columns]
    return [list(r) for r in zip(*cols)]


def by_duckdb(location, key, columns):
    con = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
    for ext in ("avro", "iceberg"):
        con.execute(f"LOAD '{extension(ext)}'")
    scan = f"iceberg_scan('{location}')"
    types = dict(con.execute(f"SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM {scan})").fetchall())
    for c in columns:
        if types[c] != "TIMESTAMP_NS":
            return {"error": f"{c} reads as {types[c]}"}
    select = ", ".join([key] + [f"epoch_ns({c})" for c in columns])
    return [list(r) for r in con.execute(f"SELECT {select} FROM {scan} ORDER BY {key}").fetchall()]


def main():
    warehouse, name, key, *columns = sys.argv[1:]
    cat = SqlCatalog("floe", uri=f"sqlite:///{warehouse}/catalog.db", warehouse=f"file://{warehouse}")
    table = cat.load_table(name)
    out = {}
    for reader, read in [
        ("pyiceberg", lambda: by_pyiceberg(table, key, columns)),
        ("duckdb", lambda: by_duckdb(table.metadata_location, key, columns)),
    ]:
        try:
            out[reader] = read()
        except Exception as e:
            out[reader] = {"error": str(e).strip().splitlines()[0]}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
