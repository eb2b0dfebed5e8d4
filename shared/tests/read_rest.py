"""Reads a floe table through pyiceberg's RestCatalog and prints its rows as
JSON, sorted by the first column: an independent check that the tables floe
commits through a REST catalog are what other engines read.

usage: read_rest.py CATALOG_URI PREFIX TOKEN S3_ENDPOINT NAMESPACE.TABLE
"""
import json
import sys

from pyiceberg.catalog.rest import RestCatalog

uri, prefix, token, s3, table = sys.argv[1:6]
catalog = RestCatalog(
    "floe",
    **{
        "uri": uri,
        "prefix": prefix,
        "token": token,
        "s3.endpoint": s3,
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
