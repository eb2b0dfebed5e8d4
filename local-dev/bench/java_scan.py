"""Times a full scan of an Iceberg table by Iceberg Java (Spark 3.5, one
core): every column of every live row read and dropped (Spark's `noop`
sink), three times in one session, the best printed in seconds, so the
JVM's start and warm-up are left out. Installed by local-dev/java.sh.

Usage: java_scan.py METADATA_LOCATION"""
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from read_java import session  # noqa: E402


def main():
    meta = sys.argv[1]
    # The JVM writes to fd 1 too: keep stdout for the number.
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    with tempfile.TemporaryDirectory(prefix="floe-spark-") as tmp:
        spark = session(tmp, None)
        best = None
        for _ in range(3):
            t = time.time()
            spark.read.format("iceberg").load(meta).write.format("noop").mode("overwrite").save()
            best = min(best or 1e9, time.time() - t)
        spark.stop()
    print("%.2f" % best, file=out)


if __name__ == "__main__":
    main()
