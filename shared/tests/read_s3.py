"""Reads one Iceberg table on an S3 endpoint (moto) from its metadata file,
with two readers that share no code with floe or each other: pyiceberg's
StaticTable (pyarrow) and DuckDB's iceberg extension (C++), loaded from the
`duckdb-extension-*` wheels so no download is needed. Prints both row lists,
sorted by the first column, as JSON; the test compares them with its model.

usage: read_s3.py ENDPOINT METADATA_LOCATION [--duckdb-only]
  --duckdb-only: pyiceberg 0.12 refuses tables with equality deletes (keyed
  merge-on-read tables); DuckDB applies them.
"""
import json
import pathlib
import sys

import duckdb
from pyiceberg.table import StaticTable

endpoint, metadata = sys.argv[1], sys.argv[2]
duckdb_only = "--duckdb-only" in sys.argv[3:]


def sort(rows, first):
    return sorted(rows, key=lambda r: r[first])


table = None if duckdb_only else StaticTable.from_metadata(
    metadata,
    properties={
        "s3.endpoint": endpoint,
        "s3.region": "us-east-1",
        "s3.access-key-id": "testing",
        "s3.secret-access-key": "testing",
    },
)
py_rows = None
if table is not None:
    py_rows = sort(table.scan().to_arrow().to_pylist(), table.schema().fields[0].name)


def extension(name):
    module = __import__(f"duckdb_extension_{name}")
    found = list(pathlib.Path(module.__path__[0]).glob(f"extensions/*/{name}.duckdb_extension"))
    if not found:
        sys.exit(f"duckdb_extension_{name} holds no {name}.duckdb_extension")
    return str(found[0])


con = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
for name in ("httpfs", "avro", "iceberg"):
    con.execute(f"LOAD '{extension(name)}'")
host = endpoint.split("://", 1)[-1].rstrip("/")
con.execute(
    f"""CREATE SECRET moto (TYPE s3, KEY_ID 'testing', SECRET 'testing', REGION 'us-east-1',
        ENDPOINT '{host}', URL_STYLE 'path', USE_SSL false)"""
)
cur = con.execute(f"SELECT * FROM iceberg_scan('{metadata}')")
cols = [d[0] for d in cur.description]
duck_rows = sort([dict(zip(cols, r)) for r in cur.fetchall()], cols[0])

print(json.dumps({"pyiceberg": py_rows, "duckdb": duck_rows}, default=str))
