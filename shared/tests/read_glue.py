"""Reads a floe table through pyiceberg's GlueCatalog (moto endpoint) and
prints its rows as JSON, sorted by the first column: an independent check
that floe's Glue tables follow the convention other engines read.

usage: read_glue.py ENDPOINT DATABASE.TABLE
"""
import json
import sys

from pyiceberg.catalog.glue import GlueCatalog

endpoint, table = sys.argv[1], sys.argv[2]
catalog = GlueCatalog(
    "floe",
    **{
        "glue.endpoint": endpoint,
        "glue.region": "us-east-1",
        "s3.endpoint": endpoint,
        "s3.region": "us-east-1",
        "s3.access-key-id": "testing",
        "s3.secret-access-key": "testing",
    },
)
t = catalog.load_table(table)
rows = t.scan().to_arrow().to_pylist()
first = t.schema().fields[0].name
rows.sort(key=lambda r: r[first])
print(json.dumps({"metadata_location": t.metadata_location, "rows": rows}))
