"""Reads a table with a row filter, by pyiceberg and by DuckDB, both of
which skip data files by the bounds in their manifest entries: the rows each
returns, and how many files pyiceberg planned, so a test can see that files
were skipped and no row with them.

Usage: read_where.py WAREHOUSE NS.TABLE KEY COLUMN FILTERS
FILTERS is a JSON list of [op, value] (op: "=", ">=", "<"). Prints a JSON
list, one {"pyiceberg": [keys], "planned": n, "duckdb": [keys]} per filter."""
import json
import sys

import duckdb
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import EqualTo, GreaterThanOrEqual, LessThan

from v3_facts import extension

OPS = {"=": EqualTo, ">=": GreaterThanOrEqual, "<": LessThan}


def main():
    warehouse, name, key, column, filters = sys.argv[1:]
    cat = SqlCatalog("floe", uri=f"sqlite:///{warehouse}/catalog.db", warehouse=f"file://{warehouse}")
    table = cat.load_table(name)
    con = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
    for ext in ("avro", "iceberg"):
        con.execute(f"LOAD '{extension(ext)}'")
    out = []
    for op, value in json.loads(filters):
        scan = table.scan(row_filter=OPS[op](column, value), selected_fields=(key,))
        rows = sorted(r[key] for r in scan.to_arrow().to_pylist())
        duck = con.execute(
            f"SELECT {key} FROM iceberg_scan('{table.metadata_location}') WHERE {column} {op} ? ORDER BY {key}",
            [value],
        ).fetchall()
        out.append({"pyiceberg": rows, "planned": len(list(scan.plan_files())), "duckdb": [r[0] for r in duck]})
    print(json.dumps(out))


if __name__ == "__main__":
    main()
