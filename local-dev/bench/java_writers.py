"""Iceberg Java writing beside a busy floe: docs/benchmarks.md, "Spark
writers beside floe". `floe serve` applies keyed updates to rows of one data
file (each commit adds a deletion vector to it) from THREADS clients posting
one update each with `?wait=commit`, so a POST's latency is the update's
freshness; meanwhile Spark runs DELETES statements, each deleting one other
row of that same file, one after another. Iceberg Java refuses a DELETE
whose file got a new vector from floe while the statement ran ("Found
concurrently added DV"), with no retry.

    java_writers.py --warehouse W --url http://127.0.0.1:P --token T \
        --mode none|pause [--deletes 10] [--threads 4]

`pause`: the job sets `floe.commit.paused-until` (now + 30 s) before each
DELETE and unsets it after, as a Spark job sharing a table with floe can.
Prints one JSON line: deletes landed/tried, Java's statement times, floe's
update count and freshness p50/p99 during the run.
"""
import argparse, json, os, random, sys, tempfile, threading, time, urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from read_java import session  # noqa: E402


def post_updates(url, token, stop, out, worker, threads):
    key = worker
    while not stop.is_set():
        body = json.dumps({"id": key, "v": f"u{time.time()}"}).encode()
        req = urllib.request.Request(f"{url}/v1/tables/silver/kv/records?wait=commit", data=body,
                                     headers={"Authorization": f"Bearer {token}",
                                              "Content-Type": "application/x-ndjson"})
        t0 = time.monotonic()
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                r.read()
                if r.status == 200:
                    out.append(time.monotonic() - t0)
        except Exception as e:  # a refused POST is counted, not retried
            out.append(None)
            print(f"post: {e}", file=sys.stderr)
        # Keys below 5,000 only: Spark deletes from the rest.
        key = (key + threads) % 5000


def pct(xs, p):
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(p / 100 * len(xs)))], 3) if xs else None


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--warehouse", required=True)
    a.add_argument("--url", required=True)
    a.add_argument("--token", required=True)
    a.add_argument("--mode", choices=["none", "pause"], default="none")
    a.add_argument("--deletes", type=int, default=10)
    a.add_argument("--threads", type=int, default=4)
    a.add_argument("--no-table-cache", action="store_true",
                   help="Spark's catalog loads the table afresh for every statement")
    args = a.parse_args()
    tmp = tempfile.mkdtemp()
    spark = session(tmp, args.warehouse)
    if args.no_table_cache:
        spark.conf.set("spark.sql.catalog.floe.cache-enabled", "false")
    spark.sql("SELECT count(*) FROM floe.silver.kv").collect()  # warm up
    stop, latencies = threading.Event(), []
    workers = [threading.Thread(target=post_updates, daemon=True,
                                args=(args.url, args.token, stop, latencies, w, args.threads))
               for w in range(args.threads)]
    for w in workers:
        w.start()
    time.sleep(3)  # floe at its cadence before Java starts
    landed, times, errors = 0, [], []
    keys = random.Random(7).sample(range(5000, 10000), args.deletes)
    start = len(latencies)
    for k in keys:
        t0 = time.monotonic()
        try:
            if args.mode == "pause":
                until = int(time.time() * 1000) + 30_000
                spark.sql(f"ALTER TABLE floe.silver.kv SET TBLPROPERTIES ('floe.commit.paused-until' = '{until}')")
            try:
                spark.sql(f"DELETE FROM floe.silver.kv WHERE id = {k}")
                landed += 1
            finally:
                if args.mode == "pause":
                    spark.sql("ALTER TABLE floe.silver.kv UNSET TBLPROPERTIES ('floe.commit.paused-until')")
        except Exception as e:
            lines = str(e).splitlines()
            cause = [l for l in lines if "Exception:" in l] or lines
            errors.append(cause[0].strip()[:200])
        times.append(time.monotonic() - t0)
    stop.set()
    for w in workers:
        w.join(timeout=130)
    during = [x for x in latencies[start:] if x is not None]
    left = spark.sql(f"SELECT count(*) FROM floe.silver.kv WHERE id IN ({','.join(map(str, keys))})").collect()[0][0]
    print(json.dumps({
        "mode": args.mode,
        "java_deletes_landed": landed,
        "java_deletes_tried": len(keys),
        "deleted_rows_gone": len(keys) - left,
        "java_statement_s_p50": pct(times, 50),
        "java_statement_s_max": round(max(times), 3),
        "floe_updates_committed": len(during),
        "floe_updates_refused": sum(1 for x in latencies[start:] if x is None),
        "floe_freshness_s_p50": pct(during, 50),
        "floe_freshness_s_p99": pct(during, 99),
        "java_errors": sorted(set(errors)),
    }))


main()
