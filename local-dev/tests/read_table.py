"""Reads a floe table with pyiceberg (an independent Iceberg implementation)
and prints it as canonical JSON for the Rust tests to assert on.

Usage: read_table.py WAREHOUSE NS.TABLE [--sort COLUMN] [--filter COL=VALUE]
Values: decimals as strings, temporal values ISO-8601 (UTC for tz types),
bytes base64, UUIDs as strings, maps as [[key, value], ...]."""
import argparse, base64, datetime, decimal, json, math, uuid

from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import EqualTo


def canon(v):
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, (datetime.datetime, datetime.date, datetime.time)):
        return v.isoformat()
    if isinstance(v, (bytes, bytearray)):
        return base64.b64encode(bytes(v)).decode()
    if isinstance(v, uuid.UUID):
        return str(v)
    if isinstance(v, dict):
        return {k: canon(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [canon(x) for x in v]
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return str(v)
    return v


def main():
    p = argparse.ArgumentParser()
    p.add_argument("warehouse")
    p.add_argument("table")
    p.add_argument("--sort")
    p.add_argument("--filter")
    p.add_argument("--raw", action="store_true", help="also read the data files directly with pyarrow")
    a = p.parse_args()
    cat = SqlCatalog("floe", uri=f"sqlite:///{a.warehouse}/catalog.db", warehouse=f"file://{a.warehouse}")
    t = cat.load_table(a.table)
    scan = t.scan()
    if a.filter:
        col, val = a.filter.split("=", 1)
        scan = t.scan(row_filter=EqualTo(col, int(val) if val.lstrip("-").isdigit() else val))
    tbl = scan.to_arrow()
    rows = [canon(r) for r in tbl.to_pylist()]
    if a.sort:
        rows.sort(key=lambda r: (r[a.sort] is None, r[a.sort]))
    tasks = list(scan.plan_files())
    files = [task.file for task in tasks]
    snaps = t.metadata.snapshots
    raw = []
    if a.raw:
        import pyarrow.parquet as pq
        for f in files:
            raw.extend(canon(r) for r in pq.read_table(f.file_path.removeprefix("file://")).to_pylist())
        if a.sort:
            raw.sort(key=lambda r: (r[a.sort] is None, r[a.sort]))
    print(json.dumps({
        "raw_rows": raw,
        "count": tbl.num_rows,
        "rows": rows,
        "snapshots": len(snaps),
        "files": [f.file_path for f in files],
        "file_records": [f.record_count for f in files],
        "delete_files": sum(len(task.delete_files) for task in tasks),
        "summaries": [dict(s.summary.additional_properties, operation=s.summary.operation.value) for s in snaps],
    }))


if __name__ == "__main__":
    main()
