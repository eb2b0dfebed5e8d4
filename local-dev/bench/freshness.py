"""Freshness driver: how long after floe accepts a record (its POST got 200)
the first Iceberg snapshot holding it is visible in the catalog.

Used by local-dev/bench/freshness.sh, which starts `floe serve` or
`floe local` and creates the table; this script only sends, watches and
measures, and prints one JSON summary line.

    freshness.py --url http://127.0.0.1:8080 --token T --table ns.t \
        --rate 10000 --duration 60 [--requests-per-s 20] \
        (--sqlite warehouse/catalog.db | --glue-endpoint URL --s3-endpoint URL)

The method:

- Open-loop sender: requests leave on a fixed schedule (rate / records per
  request), whatever earlier ones are doing, from a pool of threads with
  keep-alive connections, so a slow answer shows up as lateness instead of
  silently lowering the rate. Request k carries ids [k*n, (k+1)*n): every
  request is a contiguous id range, and the time of its 200 is the
  acceptance time of its n records.
- A poller reads the table's metadata pointer from the catalog (SQLite row,
  or Glue GetTable) every --poll-ms, and on each change reads that metadata
  file once and notes its current snapshot and the time it was first seen.
  That is when a reader could first see the snapshot.
- Afterwards every data file of the final snapshot is read from the
  manifests with the snapshot that added it and its `id` lower/upper bounds
  (Iceberg column metrics). A request's records are held by the snapshot
  that added the files covering its id range (the latest of them, should
  its range span several).
- freshness = first time that snapshot was seen - the request's 200.
  Resolution: the poll interval plus one catalog read. The snapshot's own
  timestamp-ms (set by the committer just before its catalog swap, same
  clock) gives a second figure, a lower bound without poll resolution.

`freshness.py table DIR` prints the summaries of a results directory as a
Markdown table.

The driver's own catalog and S3 reads are counted (`driver_calls`) so the
cost accounting can take them out of moto's request counts.
"""

import argparse
import bisect
import json
import os
import queue
import re
import sqlite3
import threading
import time
import http.client
import urllib.parse


def percentile(sorted_values, p):
    if not sorted_values:
        return None
    k = min(len(sorted_values) - 1, max(0, int(round(p / 100 * (len(sorted_values) - 1)))))
    return sorted_values[k]


def log_sizes(logs):
    return {k: os.path.getsize(v) for k, v in logs.items()}


def count_requests(logs, start, end):
    """Requests moto logged between two offsets, per service; S3 by price tier.

    moto logs each request as werkzeug does: `... "METHOD /path?query HTTP/1.1" status -`.
    S3's tiers: PUT, COPY, POST and LIST at one price, GET, HEAD and the rest
    at another, DELETE free.
    """
    counts = {}
    for svc, path in logs.items():
        with open(path, "rb") as f:
            f.seek(start[svc])
            chunk = f.read(end[svc] - start[svc]).decode(errors="replace")
        c = {}
        # werkzeug colours the request line of any status but 200 (206, 204, 404...).
        chunk = re.sub(r"\x1b\[[0-9;]*m", "", chunk)
        for line in chunk.splitlines():
            q = line.find('"')
            if q < 0 or '" ' not in line[q + 1:]:
                continue
            parts = line[q + 1:].split(" ")
            if len(parts) < 2 or parts[0] not in ("GET", "PUT", "POST", "HEAD", "DELETE"):
                continue
            method, target = parts[0], parts[1]
            if svc != "s3":
                kind = "requests"
            else:
                p, _, query = target.partition("?")
                if method == "DELETE" or "delete" in query.split("&"):
                    kind = "DELETE"
                elif method in ("PUT", "POST"):
                    kind = "PUT"
                elif method == "GET" and (p.strip("/").count("/") == 0 or "list-type" in query):
                    kind = "LIST"
                elif method == "HEAD":
                    kind = "HEAD"
                else:
                    kind = "GET"
            c[kind] = c.get(kind, 0) + 1
        c["log_offsets"] = [start[svc], end[svc]]
        counts[svc] = c
    return counts


def kinesis_counts(endpoint):
    """The Kinesis requests the moto launcher at `endpoint` has answered
    (local-dev/moto_glue.py), by operation, with the PUT payload units;
    None where it does not count them."""
    if not endpoint:
        return None
    import urllib.request

    try:
        with urllib.request.urlopen(endpoint.rstrip("/") + "/floe-glue/kinesis", timeout=5) as r:
            return json.load(r)
    except (OSError, ValueError):
        return None


def kinesis_between(before, after):
    """What was counted between two `kinesis_counts`: requests by operation,
    their sum, the PUT payload units and bytes, and the puts refused for a
    shard's write limit (their POSTs written directly)."""
    if before is None or after is None:
        return None
    ops = {op: n - before["requests"].get(op, 0) for op, n in after["requests"].items()}
    ops = {op: n for op, n in ops.items() if n}
    return {"by_operation": ops, "requests": sum(ops.values()),
            "put_payload_units": after["put_payload_units"] - before["put_payload_units"],
            "put_bytes": after["put_bytes"] - before["put_bytes"],
            "throttled": after.get("throttled", 0) - before.get("throttled", 0)}


def parse_logs(arg):
    return dict(kv.split("=", 1) for kv in arg.split(",")) if arg else {}


def maintain(argv):
    """`freshness.py maintain`: one `floe maintain` of a table, timed, with
    the requests it made (the hourly maintenance function's share of cost)."""
    import subprocess

    ap = argparse.ArgumentParser(prog="freshness.py maintain")
    ap.add_argument("--floe", required=True)
    ap.add_argument("--config", required=True)
    ap.add_argument("--table", required=True)
    ap.add_argument("--count-logs", default="")
    a = ap.parse_args(argv)
    logs = parse_logs(a.count_logs)
    time.sleep(1)  # let the last logged requests of the stack land first
    before = log_sizes(logs)
    started = time.time()
    p = subprocess.run([a.floe, "--config", a.config, "maintain", a.table, "--json"],
                       capture_output=True, text=True)
    took = time.time() - started
    time.sleep(1)
    report = {"table": a.table, "seconds": round(took, 3), "exit": p.returncode,
              "moto_requests": count_requests(logs, before, log_sizes(logs)),
              "report": [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")],
              "stderr": p.stderr[-2000:] if p.returncode else ""}
    print(json.dumps(report))


def table(argv):
    """`freshness.py table DIR`: the points' summaries as a Markdown table."""
    import glob

    rows = []
    for path in glob.glob(os.path.join(argv[0], "*.json")):
        if path.endswith(".maintain.json"):
            continue
        with open(path) as f:
            rows.append(json.load(f))
    rows.sort(key=lambda s: (s["target"] != "serve", s.get("commit_window_ms", 0),
                             s.get("batching_window_ms", 0), s["rate_target"], s["records_per_request"]))
    print("| target | window (ms) / batch | HTTP buffer window (ms) | records/s target | achieved | records/POST "
          "| POST 200 p50 / p99 (s) | freshness p50 | p95 | p99 | max | snapshot ts p99 | records/commit "
          "| files/min | load (1 min) before, after |")
    print("|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---|")
    load = lambda u: u.split("load average:")[1].split(",")[0].strip()
    for s in rows:
        f, t, a = s["freshness_visible_s"], s["freshness_snapshot_ts_s"], s["ack_latency_s"]
        window = (s["commit_window_ms"] if s["target"] == "serve"
                  else f"{s['batching_window_ms']} / {s['batch_size']:,}")
        buffer = s.get("http_buffer_window_ms")
        buffer = "off" if buffer is None else f"{buffer:,}"
        files = s.get("files_per_minute")
        keyed = ", keyed" if s.get("idempotency_keys") else ""
        print(f"| {s['target']} | {window} | {buffer} | {s['rate_target']:,.0f} | {s['rate_achieved']:,.0f} "
              f"| {s['records_per_request']:,}{keyed} | {a['p50']} / {a['p99']} | {f['p50']} | {f['p95']} "
              f"| **{f['p99']}** | {f['max']} | {t['p99']} | {s['records_per_commit']:,.0f} "
              f"| {'' if files is None else f'{files:,.1f}'} | {load(s['uptime_before'])}, {load(s['uptime_after'])} |")


def emf_totals(path):
    """Sums of the functions' EMF metrics (floe local --metrics FILE), per function."""
    totals = {}
    if not path or not os.path.exists(path):
        return totals
    with open(path) as f:
        for line in f:
            try:
                v = json.loads(line)
            except ValueError:
                continue
            fn = v.get("function", "?")
            t = totals.setdefault(fn, {"lines": 0})
            t["lines"] += 1
            for m in v.get("_aws", {}).get("CloudWatchMetrics", [{}])[0].get("Metrics", []):
                name = m["Name"]
                if isinstance(v.get(name), (int, float)):
                    t[name] = t.get(name, 0) + v[name]
    return totals


TYPES = ["click", "view", "purchase", "scroll", "hover"]


def body(first, n, now_iso):
    # The demo's event (docs/benchmarks.md), ~142 B of JSON; ts is the send time.
    return "".join(
        '{"id":%d,"user_id":%d,"event_type":"%s","value":%d,"info":"event info for record %d","ts":"%s"}\n'
        % (i, i % 10000 + 1, TYPES[i % 5], i % 1000, i, now_iso)
        for i in range(first, first + n)
    ).encode()


class Catalog:
    """The table's metadata pointer and metadata files, SQLite or Glue + S3."""

    def __init__(self, args):
        self.ns, self.name = args.table.split(".", 1)
        self.calls = {"catalog_reads": 0, "metadata_reads": 0}
        if args.sqlite:
            self.db = sqlite3.connect(args.sqlite, check_same_thread=False)
            self.glue = self.s3 = None
        else:
            import boto3

            kw = dict(region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing")
            self.glue = boto3.client("glue", endpoint_url=args.glue_endpoint, **kw)
            self.s3 = boto3.client("s3", endpoint_url=args.s3_endpoint, **kw)
            self.s3_endpoint = args.s3_endpoint

    def pointer(self):
        self.calls["catalog_reads"] += 1
        if self.glue is None:
            row = self.db.execute(
                "SELECT metadata_location FROM iceberg_tables WHERE table_namespace=? AND table_name=?",
                (self.ns, self.name),
            ).fetchone()
            return row and row[0]
        t = self.glue.get_table(DatabaseName=self.ns, Name=self.name)["Table"]
        return t.get("Parameters", {}).get("metadata_location")

    def metadata(self, location):
        self.calls["metadata_reads"] += 1
        u = urllib.parse.urlparse(location)
        if u.scheme == "s3":
            return json.load(self.s3.get_object(Bucket=u.netloc, Key=u.path.lstrip("/"))["Body"])
        with open(u.path if u.scheme == "file" else location) as f:
            return json.load(f)

    def io_properties(self):
        if self.s3 is None:
            return {}
        return {
            "s3.endpoint": self.s3_endpoint,
            "s3.access-key-id": "testing",
            "s3.secret-access-key": "testing",
            "s3.region": "us-east-1",
        }


def current(meta):
    """(snapshot id, total records) of a metadata file's main branch."""
    sid = meta.get("current-snapshot-id")
    if sid in (None, -1):
        return None, 0
    for s in meta.get("snapshots", []):
        if s["snapshot-id"] == sid:
            return sid, int(s.get("summary", {}).get("total-records", 0))
    return sid, 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--token", default="local")
    ap.add_argument("--table", required=True)
    ap.add_argument("--rate", type=float, required=True, help="records per second")
    ap.add_argument("--duration", type=float, default=60)
    ap.add_argument("--requests-per-s", type=float, default=20,
                    help="POSTs per second; records per POST = rate / this")
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--poll-ms", type=float, default=100)
    ap.add_argument("--drain-s", type=float, default=120, help="how long to wait for the last records")
    ap.add_argument("--sqlite")
    ap.add_argument("--glue-endpoint")
    ap.add_argument("--s3-endpoint")
    ap.add_argument("--out", help="per-request results (JSON lines)")
    ap.add_argument("--count-logs", default="",
                    help="svc=moto-log,...: count the requests each server logs while the run lasts")
    ap.add_argument("--idle-pollers", type=int, default=0,
                    help="source-queue pollers of floe local that this run does not feed: "
                         "their idle receives are measured first and taken out of the SQS count")
    ap.add_argument("--emf", help="floe local's --metrics file: the committer's run times")
    ap.add_argument("--kinesis-endpoint",
                    help="floe local's Kinesis (a moto launcher of its own): its requests by "
                         "operation and PUT payload units while the run lasts")
    ap.add_argument("--idempotency-keys", action="store_true",
                    help="send each POST with an Idempotency-Key of its own (such POSTs skip the "
                         "HTTP buffer: what a key costs)")
    ap.add_argument("--sqs-queue-url",
                    help="send to this SQS queue (floe local's source queue) instead of POSTing: "
                         "each request is one SendMessageBatch")
    ap.add_argument("--sqs-endpoint", help="the SQS endpoint of --sqs-queue-url")
    ap.add_argument("--records-per-message", type=int, default=1,
                    help="with --sqs-queue-url: records per message (NDJSON bodies); "
                         "a request's records must fit in 10 messages")
    args = ap.parse_args()
    logs = parse_logs(args.count_logs)

    cat = Catalog(args)
    per_request = max(1, int(round(args.rate / args.requests_per_s)))
    interval = per_request / args.rate
    total_requests = int(args.duration / interval)
    u = urllib.parse.urlparse(args.url)
    ns, name = args.table.split(".", 1)
    path = f"/v1/tables/{ns}/{name}/records"
    headers = {"Authorization": f"Bearer {args.token}", "Content-Type": "application/x-ndjson"}
    if args.sqs_queue_url:
        import boto3

        per_message = max(1, args.records_per_message)
        if -(-per_request // per_message) > 10:
            raise SystemExit(f"{per_request} records a request in messages of {per_message}: "
                             "over SendMessageBatch's 10; raise --requests-per-s")
        sqs = boto3.client("sqs", endpoint_url=args.sqs_endpoint, region_name="us-east-1",
                           aws_access_key_id="testing", aws_secret_access_key="testing")

    def send_sqs(data):
        """One SendMessageBatch of the request's records; its HTTP-like status."""
        lines = data.splitlines(keepends=True)
        entries = [{"Id": str(i), "MessageBody": b"".join(lines[j:j + per_message]).decode()}
                   for i, j in enumerate(range(0, len(lines), per_message))]
        out = sqs.send_message_batch(QueueUrl=args.sqs_queue_url, Entries=entries)
        return 200 if not out.get("Failed") else 500

    # --- the poller -----------------------------------------------------------
    seen = {}  # snapshot id -> (first seen, total records)
    visible_total = [0]
    stop_polling = threading.Event()
    poll_errors = [0]

    def poll():
        last = None
        while not stop_polling.is_set():
            started = time.time()
            try:
                loc = cat.pointer()
                if loc and loc != last:
                    sid, total = current(cat.metadata(loc))
                    if sid is not None and sid not in seen:
                        seen[sid] = (started, total)
                        visible_total[0] = max(visible_total[0], total)
                    last = loc
            except Exception:
                poll_errors[0] += 1
            time.sleep(max(0.0, args.poll_ms / 1000 - (time.time() - started)))

    # The SQS pollers' idle rate: ReceiveMessage calls with nothing to receive.
    idle_sqs_per_s = 0.0
    if "sqs" in logs and args.idle_pollers:
        a = log_sizes(logs)
        time.sleep(10)
        idle = count_requests({"sqs": logs["sqs"]}, a, log_sizes(logs))["sqs"].get("requests", 0)
        idle_sqs_per_s = idle / 10
    # What the table held before this run (a rerun on a used table).
    loc0 = cat.pointer()
    base_total = current(cat.metadata(loc0))[1] if loc0 else 0
    poller = threading.Thread(target=poll, daemon=True)
    poller.start()

    # --- the sender -----------------------------------------------------------
    results = [None] * total_requests
    work = queue.Queue()

    def worker():
        conn = None
        while True:
            k = work.get()
            if k is None:
                return
            due = t0 + k * interval
            first = base_id + k * per_request
            data = body(first, per_request, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(due)))
            sent = time.time()
            status, err, buffered = None, None, False
            for attempt in range(2):
                try:
                    if args.sqs_queue_url:
                        status = send_sqs(data)
                        break
                    if conn is None:
                        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
                    sent_headers = headers
                    if args.idempotency_keys:
                        sent_headers = dict(headers, **{"Idempotency-Key": f"fresh-{first}"})
                    conn.request("POST", path, body=data, headers=sent_headers)
                    resp = conn.getresponse()
                    answer = resp.read()
                    status = resp.status
                    buffered = b'"buffered":true' in answer
                    break
                except Exception as e:  # a dropped keep-alive connection: once more on a new one
                    err = repr(e)
                    conn = None
            acked = time.time()
            results[k] = {"k": k, "first": first, "n": per_request, "due": due, "sent": sent,
                          "acked": acked, "status": status, "bytes": len(data), "error": err,
                          "buffered": buffered}

    # Ids continue after whatever the table holds, so reruns stay contiguous.
    base_id = base_total
    threads = [threading.Thread(target=worker, daemon=True) for _ in range(args.threads)]
    for t in threads:
        t.start()
    t0 = time.time() + 0.5
    while time.time() < t0 - 0.05:
        time.sleep(0.01)
    sizes0, calls0 = log_sizes(logs), dict(cat.calls)
    kinesis0 = kinesis_counts(args.kinesis_endpoint)
    for k in range(total_requests):
        delay = t0 + k * interval - time.time()
        if delay > 0:
            time.sleep(delay)
        work.put(k)
    for _ in threads:
        work.put(None)
    for t in threads:
        t.join()
    send_end = time.time()

    ok = [r for r in results if r and r["status"] == 200]
    accepted = sum(r["n"] for r in ok)
    deadline = time.time() + args.drain_s
    while visible_total[0] < base_total + accepted and time.time() < deadline:
        time.sleep(0.05)
    drained = visible_total[0] >= base_total + accepted
    time.sleep(args.poll_ms / 1000 * 2)
    stop_polling.set()
    poller.join()
    window_end = time.time()
    time.sleep(0.5)  # moto logs a request after answering it
    requests = count_requests(logs, sizes0, log_sizes(logs))
    kinesis = kinesis_between(kinesis0, kinesis_counts(args.kinesis_endpoint))
    if kinesis is not None:
        requests["kinesis"] = kinesis
    driver_calls = {k: v - calls0.get(k, 0) for k, v in cat.calls.items()}
    # The driver's own reads are not the stack's.
    if "glue" in requests:
        requests["glue"]["requests"] = requests["glue"].get("requests", 0) - driver_calls["catalog_reads"]
    if "s3" in requests:
        requests["s3"]["GET"] = requests["s3"].get("GET", 0) - driver_calls["metadata_reads"]
    if "sqs" in requests:
        idle = (idle_sqs_per_s / (args.idle_pollers + 1)) * args.idle_pollers * (window_end - t0)
        requests["sqs"]["idle_source_polls_removed"] = round(idle)
        requests["sqs"]["requests"] = requests["sqs"].get("requests", 0) - round(idle)

    # --- attribution ----------------------------------------------------------
    from pyiceberg.table import StaticTable

    final_loc = cat.pointer()
    meta = cat.metadata(final_loc)
    snap_ts = {s["snapshot-id"]: s["timestamp-ms"] / 1000 for s in meta.get("snapshots", [])}
    table = StaticTable.from_metadata(final_loc, properties=cat.io_properties())
    id_field = table.schema().find_field("id").field_id
    files = []  # (lo, hi, snapshot id)
    snap = table.current_snapshot()
    for m in snap.manifests(table.io):
        for e in m.fetch_manifest_entry(table.io, discard_deleted=True):
            lo = e.data_file.lower_bounds.get(id_field)
            hi = e.data_file.upper_bounds.get(id_field)
            if lo is None or hi is None:
                continue
            files.append((int.from_bytes(lo, "little", signed=True), int.from_bytes(hi, "little", signed=True), e.snapshot_id))
    files.sort()
    los = [f[0] for f in files]
    overlapping = sum(1 for a, b in zip(files, files[1:]) if b[0] <= a[1])

    fresh_seen, fresh_ts, unattributed = [], [], 0
    in_window = set()
    # Snapshots of this run, in the order seen: for records/commit.
    for r in ok:
        lo, hi = r["first"], r["first"] + r["n"] - 1
        i = bisect.bisect_right(los, hi)
        covering = [f for f in files[max(0, i - 64):i] if f[1] >= lo]
        sids = {f[2] for f in covering}
        if not sids or any(s not in seen for s in sids):
            unattributed += 1
            continue
        sid = max(sids, key=lambda s: seen[s][0])
        in_window.add(sid)
        r["snapshot"] = sid
        r["visible"] = seen[sid][0]
        fresh_seen.append(seen[sid][0] - r["acked"])
        fresh_ts.append(snap_ts[sid] - r["acked"])

    fresh_seen.sort()
    fresh_ts.sort()
    # This run's data files: those its snapshots added (a rerun's table
    # holds the earlier runs' too).
    run_files = [f for f in files if f[2] in seen and seen[f[2]][0] >= t0]
    latencies = sorted(r["acked"] - r["sent"] for r in ok)
    lateness = sorted(r["sent"] - r["due"] for r in ok)
    span = (max(r["acked"] for r in ok) - t0) if ok else 1
    r3 = lambda x: None if x is None else round(x, 3)
    summary = {
        "table": args.table,
        "rate_target": args.rate,
        "records_per_request": per_request,
        "via": "sqs" if args.sqs_queue_url else "http",
        "idempotency_keys": args.idempotency_keys,
        "records_per_message": per_message if args.sqs_queue_url else None,
        "requests": total_requests,
        "requests_ok": len(ok),
        "requests_failed": total_requests - len(ok),
        "requests_buffered": sum(1 for r in ok if r["buffered"]),
        "errors": sorted({r["error"] or str(r["status"]) for r in results if r and r["status"] != 200})[:5],
        "records_accepted": accepted,
        "bytes_accepted": sum(r["bytes"] for r in ok),
        "rate_achieved": round(accepted / span, 1),
        "send_seconds": round(send_end - t0, 2),
        "window_seconds": round(window_end - t0, 2),
        "send_lateness_p99_s": r3(percentile(lateness, 99)),
        "ack_latency_s": {"p50": r3(percentile(latencies, 50)), "p99": r3(percentile(latencies, 99)),
                          "mean": r3(sum(latencies) / len(latencies) if latencies else None)},
        "ack_seconds_total": round(sum(latencies), 3),
        "snapshots": len(in_window),
        "data_files": len(run_files),
        "files_per_minute": round(len(run_files) / (send_end - t0) * 60, 2),
        "records_per_commit": round(accepted / len(in_window), 1) if in_window else None,
        "freshness_visible_s": {p: r3(percentile(fresh_seen, q)) for p, q in
                                (("p50", 50), ("p95", 95), ("p99", 99), ("max", 100))},
        "freshness_snapshot_ts_s": {p: r3(percentile(fresh_ts, q)) for p, q in
                                    (("p50", 50), ("p95", 95), ("p99", 99), ("max", 100))},
        "poll_ms": args.poll_ms,
        "poll_errors": poll_errors[0],
        "drained": drained,
        "unattributed_requests": unattributed,
        "overlapping_files": overlapping,
        "driver_calls": driver_calls,
        "moto_requests": requests,
        "emf": emf_totals(args.emf),
    }
    if args.out:
        with open(args.out, "w") as f:
            for r in ok:
                f.write(json.dumps(r) + "\n")
    print(json.dumps(summary))


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] == ["maintain"]:
        maintain(sys.argv[2:])
    elif sys.argv[1:2] == ["table"]:
        table(sys.argv[2:])
    else:
        main()
