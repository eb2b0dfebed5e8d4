"""What a format v3 table holds beyond its rows, for the Rust tests to
assert on: row lineage (each snapshot's first-row-id and added-rows, each
live data file's first row id by the spec's inheritance rule, which pyiceberg
does not apply) and its delete files (deletion vectors with the data file each
names); with the rows pyiceberg and DuckDB (offline extension wheels) read.

Usage: v3_facts.py WAREHOUSE NS.TABLE COLUMN...   (the columns to read, the first sorts)
"""
import json
import pathlib
import sys

import duckdb
import pyarrow.parquet as pq
from pyiceberg.catalog.sql import SqlCatalog


def extension(name):
    module = __import__(f"duckdb_extension_{name}")
    found = list(pathlib.Path(module.__path__[0]).glob(f"extensions/*/{name}.duckdb_extension"))
    if not found:
        sys.exit(f"duckdb_extension_{name} holds no {name}.duckdb_extension")
    return str(found[0])


def local(uri):
    return uri.removeprefix("file://")


def lineage_and_deletes(con, table):
    """Read with DuckDB's Avro reader: pyiceberg 0.12 reads manifest lists
    with the v2 schema, without `first_row_id`."""
    data, deletes = [], []
    snapshot = table.current_snapshot()
    if snapshot is None:
        return data, deletes
    # A v2 manifest list has no first_row_id column.
    cur = con.execute(f"SELECT * FROM read_avro('{local(snapshot.manifest_list)}')")
    names = [d[0] for d in cur.description]
    for m in (dict(zip(names, r)) for r in cur.fetchall()):
        path, content, first_row_id = m["manifest_path"], m["content"], m.get("first_row_id")
        # Inheritance counts live entries without an id of their own, in order.
        next_id = first_row_id
        for status, f in con.execute(f"SELECT status, data_file FROM read_avro('{local(path)}')").fetchall():
            alive = status != 2
            if content == 0:
                own = f.get("first_row_id")
                if own is None and alive and next_id is not None:
                    own, next_id = next_id, next_id + f["record_count"]
                if alive:
                    data.append({"path": f["file_path"], "records": f["record_count"], "first_row_id": own})
            elif alive:
                deletes.append({
                    "path": f["file_path"],
                    "format": f["file_format"].lower(),
                    "content": "position" if f["content"] == 1 else "equality",
                    "referenced_data_file": f.get("referenced_data_file"),
                    "content_offset": f.get("content_offset"),
                    "content_size_in_bytes": f.get("content_size_in_bytes"),
                    "records": f["record_count"],
                })
    return data, deletes


def fixed_columns(paths):
    """{file: {column path: logical type}} of the FIXED_LEN_BYTE_ARRAY columns."""
    out = {}
    for path in paths:
        schema = pq.ParquetFile(local(path)).schema
        out[path] = {
            c.path: str(c.logical_type)
            for c in (schema.column(i) for i in range(len(schema)))
            if c.physical_type == "FIXED_LEN_BYTE_ARRAY"
        }
    return out


def main():
    warehouse, name, *columns = sys.argv[1:]
    cat = SqlCatalog("floe", uri=f"sqlite:///{warehouse}/catalog.db", warehouse=f"file://{warehouse}")
    table = cat.load_table(name)
    meta = table.metadata
    con = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
    for ext in ("avro", "iceberg"):
        con.execute(f"LOAD '{extension(ext)}'")
    data, deletes = lineage_and_deletes(con, table)
    key = columns[0]
    try:
        rows = sorted(table.scan(selected_fields=tuple(columns)).to_arrow().to_pylist(), key=lambda r: r[key])
    except Exception as e:  # pyiceberg 0.12 refuses equality deletes
        rows = {"error": str(e)}
    select = ", ".join(columns)
    duck = con.execute(
        f"SELECT {select} FROM iceberg_scan('{table.metadata_location}') ORDER BY {key}"
    ).fetchall()
    print(json.dumps({
        "metadata_location": table.metadata_location,
        "format_version": meta.format_version,
        "next_row_id": getattr(meta, "next_row_id", None),
        "snapshots": [
            {"id": s.snapshot_id, "first_row_id": s.first_row_id, "added_rows": s.added_rows}
            for s in meta.snapshots
        ],
        "data_files": data,
        "deletes": deletes,
        "fixed_columns": fixed_columns(
            [d["path"] for d in data] + [d["path"] for d in deletes if d["format"] == "parquet"]),
        "pyiceberg": rows,
        "duckdb": [dict(zip(columns, r)) for r in duck],
    }, default=str))


if __name__ == "__main__":
    main()
