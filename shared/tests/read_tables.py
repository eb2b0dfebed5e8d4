"""Reads many local Iceberg tables from their metadata files with two readers
that share no code with floe or each other: DuckDB's iceberg extension (C++,
loaded from the `duckdb-extension-*` wheels, offline), which applies equality
and position deletes, and pyiceberg's StaticTable, where the table has no
equality deletes (pyiceberg 0.12 refuses them). Prints, per metadata file,
the `id` and `v` columns of each reader as JSON.

usage: read_tables.py LIST.json   (a JSON array of metadata file paths)
"""
import json
import pathlib
import sys

import duckdb
from pyiceberg.table import StaticTable


def extension(name):
    module = __import__(f"duckdb_extension_{name}")
    found = list(pathlib.Path(module.__path__[0]).glob(f"extensions/*/{name}.duckdb_extension"))
    if not found:
        sys.exit(f"duckdb_extension_{name} holds no {name}.duckdb_extension")
    return str(found[0])


con = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
for name in ("avro", "iceberg"):
    con.execute(f"LOAD '{extension(name)}'")

out = {}
for metadata in json.loads(pathlib.Path(sys.argv[1]).read_text()):
    cols = [d[0] for d in con.execute(f"SELECT * FROM iceberg_scan('{metadata}') LIMIT 0").description]
    v = "v" if "v" in cols else "NULL"
    duck = [list(r) for r in con.execute(f"SELECT id, {v} FROM iceberg_scan('{metadata}')").fetchall()]
    table = StaticTable.from_metadata(metadata)
    picked = ["id", "v"] if "v" in cols else ["id"]
    try:
        py = [[r["id"], r.get("v")] for r in table.scan().select(*picked).to_arrow().to_pylist()]
    except ValueError as e:
        if "equality deletes" not in str(e):
            raise
        py = None
    out[metadata] = {"duckdb": duck, "pyiceberg": py}
print(json.dumps(out))
