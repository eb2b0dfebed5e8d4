"""Reads floe tables with Iceberg Java (through PySpark) and prints each as
canonical JSON for the Rust tests to assert on: the reference implementation
as a reader besides pyiceberg (read_table.py) and DuckDB. Installed by
local-dev/java.sh.

Usage: read_java.py [--warehouse W] [NS.TABLE ...] [--metadata LOCATION ...]
                    [--sort COLUMN] [--spark-sql SQL ...] [--lineage]

NS.TABLE is loaded from W/catalog.db through Iceberg's JdbcCatalog, the
catalog `floe` in Spark SQL; LOCATION is a metadata.json, read without any
catalog. Starting Spark takes 10-20 s, so one run reads every table given.
--spark-sql runs statements first (e.g. an INSERT INTO floe.ns.t); one that
fails ends the run (exit status 1, nothing printed).

One line per table, in the order given:
  {"table", "count", "rows", "snapshots", "format_version", "data_files", "delete_files"}
with --lineage also "lineage": [[sort column, _row_id, _last_updated_sequence_number], ...]
for each NS.TABLE, as Java reads a v3 table's row lineage (sorted by --sort).
or {"table", "error"} when Java cannot read it (the exit status is then 1).
Rows are those of read_table.py (same value formats), sorted by --sort or
else by their JSON."""
import argparse, fcntl, glob, json, os, sys, tempfile

from read_table import canon

ROOT = os.environ.get("FLOE_JAVA_ROOT", os.path.expanduser("~/.cache/floe-java"))

# Errors only: Spark's INFO and WARN lines would bury a failing test's output.
LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = java: %p %c{1}: %m%n
"""


def session(tmp, warehouse):
    from pyspark.sql import SparkSession

    jars = sorted(glob.glob(f"{ROOT}/jars/*.jar"))
    with open(f"{tmp}/log4j2.properties", "w") as f:
        f.write(LOG4J)
    b = (SparkSession.builder.master("local[1]")
         # Driver settings, read when this first getOrCreate starts the JVM.
         .config("spark.driver.extraClassPath", ":".join(jars))
         .config("spark.driver.extraJavaOptions",
                 f"-Dlog4j2.configurationFile={tmp}/log4j2.properties "
                 f"-Dorg.sqlite.lib.path={ROOT}/lib -Dorg.sqlite.lib.name=libsqlitejdbc.so")
         .config("spark.driver.memory", "512m")
         .config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", "1")
         .config("spark.sql.session.timeZone", "UTC")
         .config("spark.local.dir", tmp)
         .config("spark.sql.warehouse.dir", f"{tmp}/spark-warehouse")
         .config("spark.sql.catalogImplementation", "in-memory")
         .config("spark.sql.extensions", "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"))
    if warehouse:
        cat = "spark.sql.catalog.floe"
        b = (b.config(cat, "org.apache.iceberg.spark.SparkCatalog")
             .config(f"{cat}.catalog-impl", "org.apache.iceberg.jdbc.JdbcCatalog")
             .config(f"{cat}.uri", f"jdbc:sqlite:{warehouse}/catalog.db")
             .config(f"{cat}.warehouse", f"file://{warehouse}")
             # floe's catalog.db: JdbcCatalog's tables, schema V1, made by floe.
             .config(f"{cat}.jdbc.schema-version", "V1")
             .config(f"{cat}.jdbc.init-catalog-tables", "false"))
    return b.getOrCreate()


def read(spark, ref, by_path, sort, lineage=False):
    if by_path:
        load = lambda meta="": spark.read.format("iceberg").load(ref + (f"#{meta}" if meta else ""))
        table = spark._jvm.org.apache.iceberg.hadoop.HadoopTables(spark._jsc.hadoopConfiguration()).load(ref)
    else:
        load = lambda meta="": spark.table(f"floe.{ref}" + (f".{meta}" if meta else ""))
        table = spark._jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, f"floe.{ref}")
    # Through Arrow, as pyiceberg hands its rows out, so both readers'
    # values go through the same canon(): PySpark's own rows would lose map
    # order and time zones on the way.
    rows = [canon(r) for batch in load()._collect_as_arrow() for r in batch.to_pylist()]
    if sort:
        rows.sort(key=lambda r: (r[sort] is None, r[sort]))
    else:
        rows.sort(key=lambda r: json.dumps(r, sort_keys=True))
    # content: 0 data, 1 position deletes (or deletion vectors), 2 equality deletes.
    files = dict(load("files").groupBy("content").count().collect())
    out = {}
    if lineage and not by_path:
        out["lineage"] = sorted(
            [list(r) for r in spark.sql(
                f"SELECT {sort}, _row_id, _last_updated_sequence_number FROM floe.{ref}").collect()],
            key=lambda r: (r[0] is None, r[0]))
    return out | {
        "table": ref,
        "count": len(rows),
        "rows": rows,
        "snapshots": load("snapshots").count(),
        "format_version": spark._jvm.org.apache.iceberg.TableUtil.formatVersion(table),
        "data_files": files.get(0, 0),
        "delete_files": sum(n for content, n in files.items() if content != 0),
    }


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--warehouse")
    p.add_argument("tables", nargs="*", metavar="NS.TABLE")
    p.add_argument("--metadata", action="append", default=[], metavar="LOCATION")
    p.add_argument("--sort")
    p.add_argument("--spark-sql", action="append", default=[], metavar="SQL")
    p.add_argument("--lineage", action="store_true")
    a = p.parse_args()
    if a.tables and not a.warehouse:
        p.error("NS.TABLE needs --warehouse")

    # The JVM inherits fd 1: point it at stderr, keep the real stdout for JSON.
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)

    if not os.path.exists(f"{ROOT}/.installed"):
        sys.exit(f"read_java.py: Iceberg Java is not installed in {ROOT}: run local-dev/java.sh")
    # One Spark at a time (java.sh takes the same lock to install): each takes
    # ~0.5 GB and both cores for 15-20 s, and the tests run in parallel.
    lock = open(f"{ROOT}.lock", "a")
    fcntl.flock(lock, fcntl.LOCK_EX)

    failed = False
    with tempfile.TemporaryDirectory(prefix="floe-spark-") as tmp:
        spark = session(tmp, a.warehouse and os.path.abspath(a.warehouse))
        try:
            for sql in a.spark_sql:
                spark.sql(sql).collect()
            for ref, by_path in [(t, False) for t in a.tables] + [(m, True) for m in a.metadata]:
                try:
                    result = read(spark, ref, by_path, a.sort, a.lineage)
                except Exception as e:  # one unreadable table must not hide the others
                    failed = True
                    result = {"table": ref, "error": str(e).strip().splitlines()[0]}
                print(json.dumps(result), file=out, flush=True)
        finally:
            spark.stop()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
