"""pyiceberg beside floe, as a user of both would work: refs (a tag and a
write-audit-publish branch with rows of its own) on a floe table, and a table
pyiceberg creates and writes itself. Prints JSON for the Rust tests.

Usage: refs.py WAREHOUSE NS.TABLE mark|mark_short|read|foreign|read_foreign
  mark     tag `audit-2024` at main's snapshot, branch `wap` there, append ids 100, 101 to `wap`
  mark_short  tag main's snapshot `short-lived` (max-ref-age-ms 1) and `kept`
  read     the refs, and the ids of main, of `wap` and of the tag's snapshot, with their data files
  foreign  create NS.TABLE (one long column `id`) and append to it three times
  read_foreign  its snapshot count, ids and data files
"""
import json, sys

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField


def scan(t, snapshot_id):
    s = t.scan(snapshot_id=snapshot_id)
    ids = sorted(r["id"] for r in s.select("id").to_arrow().to_pylist())
    return {"ids": ids, "files": sorted(task.file.file_path for task in s.plan_files())}


def main():
    warehouse, name, mode = sys.argv[1:4]
    cat = SqlCatalog("floe", uri=f"sqlite:///{warehouse}/catalog.db", warehouse=f"file://{warehouse}")
    if mode == "foreign":
        ns = name.split(".")[0]
        cat.create_namespace_if_not_exists(ns)
        t = cat.create_table(name, Schema(NestedField(1, "id", LongType(), required=False)))
        for i in range(3):
            t.append(pa.table({"id": pa.array([i], pa.int64())}))
        t = cat.load_table(name)
        print(json.dumps({"snapshots": len(t.metadata.snapshots), **scan(t, None)}))
        return
    t = cat.load_table(name)
    if mode == "read_foreign":
        print(json.dumps({"snapshots": len(t.metadata.snapshots), **scan(t, None)}))
        return
    if mode == "mark_short":
        head = t.metadata.current_snapshot_id
        t.manage_snapshots().create_tag(head, "short-lived", max_ref_age_ms=1).create_tag(head, "kept").commit()
        print(json.dumps({"tag": head}))
        return
    if mode == "mark":
        head = t.metadata.current_snapshot_id
        t.manage_snapshots().create_tag(head, "audit-2024").create_branch(head, "wap").commit()
        t = cat.load_table(name)
        rows = [{"id": 100}, {"id": 101}]
        t.append(pa.Table.from_pylist(rows, schema=t.schema().as_arrow()), branch="wap")
        t = cat.load_table(name)
        print(json.dumps({"tag": head, "wap": t.metadata.refs["wap"].snapshot_id}))
        return
    refs = {n: {"snapshot": r.snapshot_id, "type": r.snapshot_ref_type.value} for n, r in t.metadata.refs.items()}
    print(json.dumps({
        "refs": refs,
        "snapshots": len(t.metadata.snapshots),
        "main": scan(t, refs["main"]["snapshot"]),
        "wap": scan(t, refs["wap"]["snapshot"]) if "wap" in refs else None,
        "tag": scan(t, refs["audit-2024"]["snapshot"]) if "audit-2024" in refs else None,
    }))


if __name__ == "__main__":
    main()
