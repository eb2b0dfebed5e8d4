"""Count and MD5 of every row of an Iceberg table in key order, read by
DuckDB's iceberg extension (which applies equality and position deletes), in
the same text form as pg-consistency.sh computes them in Postgres:

  id|user_id|amount|status|created_us|updated_us|md5(note)   (\\N for NULL)

usage: pg_md5.py WAREHOUSE NAMESPACE.TABLE   prints: COUNT MD5
"""
import pathlib
import sqlite3
import sys

import duckdb

warehouse, table = sys.argv[1], sys.argv[2]
namespace, name = table.rsplit(".", 1)
db = sqlite3.connect(f"{warehouse}/catalog.db")
(metadata,) = db.execute(
    "SELECT metadata_location FROM iceberg_tables WHERE table_namespace = ? AND table_name = ?",
    (namespace, name),
).fetchone()


def extension(ext):
    module = __import__(f"duckdb_extension_{ext}")
    found = list(pathlib.Path(module.__path__[0]).glob(f"extensions/*/{ext}.duckdb_extension"))
    return str(found[0])


con = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
for ext in ("avro", "iceberg"):
    con.execute(f"LOAD '{extension(ext)}'")
row = con.execute(
    f"""SELECT count(*), md5(string_agg(concat_ws('|', id, coalesce(user_id::VARCHAR, '\\N'),
               coalesce(amount::VARCHAR, '\\N'), coalesce(status, '\\N'),
               coalesce(epoch_us(created_at)::VARCHAR, '\\N'), coalesce(epoch_us(updated_at)::VARCHAR, '\\N'),
               coalesce(md5(note), '\\N')), chr(10) ORDER BY id))
          FROM iceberg_scan('{metadata.removeprefix("file://")}')"""
).fetchone()
print(row[0], row[1])
