"""Dollars per terabyte from freshness.sh's `floe local` points, beside
Firehose and MSK Connect at the same volume. docs/cost.md explains every
line; the prices below are AWS list prices for us-east-1 as of early 2025
as this project knows them (no network here): check them and pass yours.

    cost.py RESULTS_DIR [--tag TAG] [--price name=value ...] [--arch arm64]
            [--memory function=MB ...]

Per point it reads local-<rate><tag>.json (the stack's requests while the
point ran, from moto's logs and the Kinesis server's counts; the HTTP
function's, writer's and committer's times) and local-<rate><tag>.maintain.json
(one maintenance run over what the point wrote), divides by the gigabytes of
NDJSON accepted, and prices the result. A point whose POSTs went through the
HTTP buffer stream also pays the stream's shards by the hour, spread over
the gigabytes an hour brings at the point's rate, and its PutRecords by PUT
payload unit; its GetRecords are free (within the shard-hours), the writer's
invocations are not.
"""

import argparse
import glob
import json
import math
import os
import re

# USD, us-east-1, list prices (early 2025, from memory; see docs/cost.md).
PRICES = {
    "lambda_gb_s_x86": 0.0000166667,   # per GB-second
    "lambda_gb_s_arm": 0.0000133334,
    "lambda_request": 0.20 / 1e6,      # per invocation
    "s3_put": 0.005 / 1000,            # PUT, COPY, POST, LIST
    "s3_get": 0.0004 / 1000,           # GET, HEAD and the rest; DELETE is free
    "sqs_request": 0.40 / 1e6,         # standard queue, per 64 KB chunk
    "glue_request": 1.00 / 1e6,        # Data Catalog requests (first million a month free)
    "kinesis_shard_hour": 0.015,       # provisioned data stream, per shard-hour
    "kinesis_put_unit": 0.014 / 1e6,   # per PUT payload unit (each started 25 KB of a record)
    "firehose_gb": 0.029,              # Direct PUT ingestion, first 500 TB/month
    "firehose_record_round_kb": 5,     # each record billed as at least 5 KB
    "mcu_hour": 0.11,                  # MSK Connect, per MCU-hour (1 vCPU, 4 GiB)
    "msk_broker_hour": 0.21,           # kafka.m5.large
    "msk_brokers": 3,                  # one per AZ
    "msk_storage_gb_month": 0.10,
}
MEMORY_MB = {"ingest": 1024, "committer": 1024, "maintenance": 3008, "writer": 2048}  # the module's defaults
MB_PER_S_PER_MCU = 5.0     # assumed Kafka Connect Iceberg sink throughput per MCU (docs/cost.md)
MIN_MCU = 1                # one worker of one MCU
MSK_RETENTION_DAYS = 1     # a short topic retention, replicated 3 times


def load(path):
    with open(path) as f:
        return json.load(f)


def floe_point(p, m, prices, arch):
    """Counts and dollars per GB of one `floe local` point."""
    gb = p["bytes_accepted"] / 1e9
    req = p["moto_requests"]
    mreq = m["moto_requests"] if m else {}
    s3 = lambda d, k: d.get("s3", {}).get(k, 0)
    emf = p.get("emf", {}).get("committer", {})
    writer = p.get("emf", {}).get("writer", {})
    http = p.get("via", "http") == "http"
    gb_s = {
        # The HTTP function runs as long as its request: the client's wait for the 200.
        "ingest": (p["ack_seconds_total"] if http else 0) * MEMORY_MB["ingest"] / 1024,
        # The writer function (the SQS path): its own timing of each batch
        # (EMF write_latency), one batch per invocation here.
        "writer": writer.get("write_latency", 0) / 1000 * MEMORY_MB["writer"] / 1024,
        # The committer's own timing of each run (EMF commit_latency).
        "committer": emf.get("commit_latency", 0) / 1000 * MEMORY_MB["committer"] / 1024,
        "maintenance": (m["seconds"] if m else 0) * MEMORY_MB["maintenance"] / 1024,
    }
    invocations = ((p["requests_ok"] if http else 0) + writer.get("lines", 0)
                   + emf.get("lines", 0) + (1 if m else 0))
    # The buffer stream's shards run whether POSTs come or not: at this
    # point's rate, an hour of them carries this many GB.
    gb_per_hour = p["rate_achieved"] * p["bytes_accepted"] / p["records_accepted"] * 3600 / 1e9
    kinesis = req.get("kinesis", {})
    counts = {
        "s3_put": s3(req, "PUT") + s3(req, "LIST") + s3(mreq, "PUT") + s3(mreq, "LIST"),
        "s3_get": s3(req, "GET") + s3(req, "HEAD") + s3(mreq, "GET") + s3(mreq, "HEAD"),
        "sqs": req.get("sqs", {}).get("requests", 0) + mreq.get("sqs", {}).get("requests", 0),
        "glue": req.get("glue", {}).get("requests", 0) + mreq.get("glue", {}).get("requests", 0),
        "lambda_invocations": invocations,
        "kinesis_put_units": kinesis.get("put_payload_units", 0),
        "kinesis_requests": kinesis.get("requests", 0),
        # Per GB once divided below, as the other counts.
        "kinesis_shard_hours": p.get("http_buffer_shards", 0) / gb_per_hour * gb,
    }
    gbs_price = prices["lambda_gb_s_arm" if arch == "arm64" else "lambda_gb_s_x86"]
    dollars = {
        "lambda_gb_s": sum(gb_s.values()) * gbs_price,
        "lambda_requests": invocations * prices["lambda_request"],
        "s3_put": counts["s3_put"] * prices["s3_put"],
        "s3_get": counts["s3_get"] * prices["s3_get"],
        "sqs": counts["sqs"] * prices["sqs_request"],
        "glue": counts["glue"] * prices["glue_request"],
        "kinesis_shards": counts["kinesis_shard_hours"] * prices["kinesis_shard_hour"],
        "kinesis_puts": counts["kinesis_put_units"] * prices["kinesis_put_unit"],
    }
    per_gb = lambda d: {k: v / gb for k, v in d.items()}
    return gb, per_gb(gb_s), per_gb(counts), per_gb(dollars)


def firehose_per_gb(bytes_per_record, prices):
    """Direct PUT ingestion: each record billed as max(its size, 5 KB)."""
    billed = max(bytes_per_record, prices["firehose_record_round_kb"] * 1024)
    return prices["firehose_gb"] * billed / bytes_per_record, prices["firehose_gb"]


def msk_connect_per_gb(mb_per_s, prices):
    """MCU-hours plus broker-hours and storage, spread over an hour's gigabytes."""
    gb_per_h = mb_per_s * 3600 / 1000
    mcu = max(MIN_MCU, math.ceil(mb_per_s / MB_PER_S_PER_MCU))
    connect = mcu * prices["mcu_hour"]
    brokers = prices["msk_brokers"] * prices["msk_broker_hour"]
    storage = gb_per_h * 24 * MSK_RETENTION_DAYS * 3 * prices["msk_storage_gb_month"] / 730
    return connect / gb_per_h, (brokers + storage) / gb_per_h, mcu


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--tag", default="")
    ap.add_argument("--price", action="append", default=[], help="name=value (USD), see PRICES")
    ap.add_argument("--arch", default="x86_64")
    ap.add_argument("--memory", action="append", default=[],
                    help="function=MB: price a function at another memory size, its measured "
                         "time unchanged (see MEMORY_MB)")
    a = ap.parse_args()
    prices = dict(PRICES)
    for kv in a.price:
        k, v = kv.split("=", 1)
        prices[k] = float(v)
    for kv in a.memory:
        k, v = kv.split("=", 1)
        if k not in MEMORY_MB:
            ap.error(f"--memory {kv}: the functions are {', '.join(MEMORY_MB)}")
        MEMORY_MB[k] = int(v)

    rows = []
    point = re.compile(r"local-\d+" + re.escape(a.tag) + r"\.json$")
    paths = [p for p in glob.glob(os.path.join(a.results, "local-*.json")) if point.search(os.path.basename(p))]
    for path in sorted(paths, key=lambda p: load(p)["rate_target"]):
        p = load(path)
        mpath = path[: -len(".json")] + ".maintain.json"
        m = load(mpath) if os.path.exists(mpath) else None
        rows.append((p, m) + floe_point(p, m, prices, a.arch))

    print("| records/s (achieved) | records/POST (or /message) | HTTP buffer window (ms) | GB "
          "| Lambda GB-s/GB: HTTP function | writer | committer | maintenance | S3 PUT+LIST/GB | S3 GET+HEAD/GB "
          "| SQS/GB | Glue/GB | Kinesis PUT units/GB | Kinesis shard-hours/GB | invocations/GB |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for p, m, gb, gbs, counts, _ in rows:
        unit = p.get("records_per_message") or p["records_per_request"]
        window = p.get("http_buffer_window_ms")
        kind = " (SQS)" if p.get("via") == "sqs" else ", keyed" if p.get("idempotency_keys") else ""
        print(f"| {p['rate_achieved']:,.0f} | {unit:,}{kind} "
              f"| {'off' if window is None else f'{window:,}'} | {gb:.3f} "
              f"| {gbs['ingest']:,.0f} | {gbs['writer']:,.1f} | {gbs['committer']:,.1f} | {gbs['maintenance']:,.1f} "
              f"| {counts['s3_put']:,.0f} | {counts['s3_get']:,.0f} | {counts['sqs']:,.0f} "
              f"| {counts['glue']:,.0f} | {counts['kinesis_put_units']:,.0f} | {counts['kinesis_shard_hours']:,.3f} "
              f"| {counts['lambda_invocations']:,.0f} |")
    print()
    print("| records/s | B/record | floe $/TB: Lambda GB-s | Lambda requests | S3 PUT | S3 GET | SQS | Glue "
          "| Kinesis shard-hours | Kinesis PUT units "
          "| **floe total** | Firehose, 5 KB rounding | Firehose, per GB as sent "
          "| MSK Connect (MCUs) | + MSK brokers, storage | **Kafka Connect total** |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for p, m, gb, gbs, counts, d in rows:
        bpr = p["bytes_accepted"] / p["records_accepted"]
        mb_s = p["rate_achieved"] * bpr / 1e6
        fh_rounded, fh_plain = firehose_per_gb(bpr, prices)
        mc, brokers, mcu = msk_connect_per_gb(mb_s, prices)
        tb = lambda x: f"{x * 1000:,.2f}"
        print(f"| {p['rate_achieved']:,.0f} | {bpr:.0f} | {tb(d['lambda_gb_s'])} | {tb(d['lambda_requests'])} "
              f"| {tb(d['s3_put'])} | {tb(d['s3_get'])} | {tb(d['sqs'])} | {tb(d['glue'])} "
              f"| {tb(d['kinesis_shards'])} | {tb(d['kinesis_puts'])} "
              f"| **{tb(sum(d.values()))}** | {tb(fh_rounded)} | {tb(fh_plain)} "
              f"| {tb(mc)} ({mcu}) | {tb(brokers)} | **{tb(mc + brokers)}** |")


if __name__ == "__main__":
    main()
