"""Reads local Iceberg tables whole, row by row with every nested field, by
two readers that share no code with floe or each other: DuckDB's iceberg
extension (offline, from the `duckdb-extension-*` wheels; applies equality
and position deletes) and pyiceberg's StaticTable where the table has no
equality deletes (pyiceberg 0.12 refuses them). Prints, per metadata file,
each reader's rows as JSON objects (maps as objects).

usage: read_rows.py LIST.json   (a JSON array of metadata file paths)
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


def plain(v):
    """pyarrow's reading as JSON: a map (a list of key-value tuples) as an object."""
    if isinstance(v, list):
        if v and all(isinstance(e, tuple) and len(e) == 2 for e in v):
            return {k: plain(x) for k, x in v}
        return [plain(e) for e in v]
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    return v


con = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
for name in ("avro", "iceberg"):
    con.execute(f"LOAD '{extension(name)}'")

out = {}
for metadata in json.loads(pathlib.Path(sys.argv[1]).read_text()):
    duck = [json.loads(r[0]) for r in con.execute(f"SELECT to_json(t) FROM iceberg_scan('{metadata}') AS t").fetchall()]
    try:
        py = [plain(r) for r in StaticTable.from_metadata(metadata).scan().to_arrow().to_pylist()]
    except ValueError as e:
        if "equality deletes" not in str(e):
            raise
        py = None
    out[metadata] = {"duckdb": duck, "pyiceberg": py}
print(json.dumps(out, default=str))
