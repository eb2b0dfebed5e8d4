"""Peak RSS of every floe path, per record shape: what local-dev/bench/rss_paths.sh
runs (docs/benchmarks.md, "Writer memory: batches bounded by bytes").

Each path runs as its own process and its peak is that process's VmHWM
(/proc/<pid>/status), read after its work is answered and before it is
stopped. The Lambda functions are their release binaries, started with
AWS_LAMBDA_RUNTIME_API pointing at a stand-in of the Runtime API in this
script (one thread: it hands out the events and reads the answers), on a
deployment on moto (S3, SQS, Glue): real Parquet on moto's S3, commit
requests on its SQS queue, tables in its Glue.

The load is the worst case the Terraform module's defaults allow, not a toy:

- writer: one event of ~6 MB (Lambda's payload limit) of NDJSON, at most
  1,000 messages or records (the sources' default batch_size), as SQS
  message bodies and as base64 Kinesis and Kafka records (one shard or
  partition: one batch); a window of the HTTP buffer stream (~6 KB POSTs
  filling the 6 MB, one batch for their table); and an S3 notification
  naming one large NDJSON object (read in `envelope::s3::BATCH_BYTES`
  pieces);
- ingest-http: one POST of http.max_body_bytes (5 MiB) of NDJSON;
- floe serve: POSTs of 5 MiB from SERVE_CLIENTS concurrent clients;
- committer: thousands of commit requests of 5-record batches (`floe ingest
  --via-queue`, a Parquet file each), in events of at most 10,000 messages
  (committer_batch_size) and 6 MB;
- maintenance: a table of 100 small files holding the whole input file,
  compacted;
- CLI: `floe ingest` of one file, as local-dev/bench/rss.sh does.
"""

import argparse
import base64
import http.client
import json
import os
import queue
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import boto3

EVENT_LIMIT = 6 * 1024 * 1024  # Lambda's invocation payload limit
SOURCE_BATCH = 1000  # the module's batch_size of every writer source
BODY_LIMIT = 5 * 1024 * 1024  # http.max_body_bytes' default
COMMITTER_BATCH = 10000  # committer_batch_size on a standard queue
REGION = "us-east-1"


class RuntimeApi:
    """The part of Lambda's Runtime API a function's loop calls: next
    invocation, its answer or error. Events queued with `invoke` go out one
    at a time; `invoke` returns the function's answer."""

    def __init__(self):
        self.events = queue.Queue()
        self.answers = {}
        self.done = threading.Condition()
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                if not self.path.endswith("/runtime/invocation/next"):
                    self.send_error(404)
                    return
                rid, body = api.events.get()
                self.send_response(200)
                self.send_header("Lambda-Runtime-Aws-Request-Id", rid)
                deadline = int(time.time() * 1000) + 900_000
                self.send_header("Lambda-Runtime-Deadline-Ms", str(deadline))
                self.send_header(
                    "Lambda-Runtime-Invoked-Function-Arn",
                    "arn:aws:lambda:us-east-1:123456789012:function:floe-rss",
                )
                self.send_header("Lambda-Runtime-Trace-Id", "Root=1-0-0")
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                parts = self.path.split("/")
                self.send_response(202)
                self.send_header("Content-Length", "0")
                self.end_headers()
                if "invocation" in parts:
                    rid = parts[parts.index("invocation") + 1]
                    kind = parts[-1]
                else:
                    rid, kind = "init", "error"
                with api.done:
                    api.answers[rid] = (kind, body)
                    api.done.notify_all()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.address = f"127.0.0.1:{self.server.server_address[1]}"

    def invoke(self, event, timeout=900):
        rid = str(uuid.uuid4())
        self.events.put((rid, json.dumps(event).encode()))
        with self.done:
            ok = self.done.wait_for(
                lambda: rid in self.answers or "init" in self.answers, timeout
            )
        if not ok:
            raise RuntimeError("no answer from the function")
        kind, body = self.answers.get(rid) or self.answers["init"]
        return kind, json.loads(body or b"null")


def peak_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmHWM for {pid}")


def run_function(binary, env, events, log):
    """Starts `binary` on a fresh Runtime API stand-in, invokes it with each
    event in turn, and answers its peak RSS (KiB) and the answers."""
    api = RuntimeApi()
    full = dict(os.environ)
    full.update(env)
    full.update(
        {
            "AWS_LAMBDA_RUNTIME_API": api.address,
            "AWS_LAMBDA_FUNCTION_NAME": os.path.basename(binary),
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "1024",
            "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
        }
    )
    with open(log, "ab") as out:
        proc = subprocess.Popen([binary], env=full, stdout=out, stderr=out)
    try:
        answers = [api.invoke(e) for e in events]
        return peak_kib(proc.pid), answers
    finally:
        proc.kill()
        proc.wait()
        api.server.shutdown()


def chunks(lines, most):
    """Whole lines joined into pieces of at most `most` bytes."""
    piece, size = [], 0
    for line in lines:
        if piece and size + len(line) > most:
            yield b"".join(piece)
            piece, size = [], 0
        piece.append(line)
        size += len(line)
    if piece:
        yield b"".join(piece)


def fill(lines, make_record, wrap, per_record):
    """An event of at most SOURCE_BATCH records and EVENT_LIMIT bytes of
    JSON, each record `per_record` bytes of whole NDJSON lines; answers the
    event and the lines it holds."""
    records, size, taken = [], len(json.dumps(wrap([]))), 0
    for i, piece in enumerate(chunks(lines, per_record)):
        r = make_record(i, piece)
        n = len(json.dumps(r)) + 2
        if len(records) == SOURCE_BATCH or size + n > EVENT_LIMIT:
            break
        records.append(r)
        size += n
        taken += piece.count(b"\n")
    return wrap(records), taken, size


def sqs_event(lines, queue_arn):
    def make(i, piece):
        return {
            "messageId": str(uuid.uuid4()),
            "receiptHandle": f"rss-{i}",
            "body": piece.decode(),
            "attributes": {
                "ApproximateReceiveCount": "1",
                "SentTimestamp": str(int(time.time() * 1000)),
            },
            "messageAttributes": {},
            "md5OfBody": "",
            "eventSource": "aws:sqs",
            "eventSourceARN": queue_arn,
            "awsRegion": REGION,
        }

    # SQS messages are 256 KiB at most (the queue's default maximum size).
    return fill(lines, make, lambda r: {"Records": r}, 256 * 1024)


def kinesis_event(lines, stream, per_record=4400):
    base = 49590338271490256608559692538361571095921575989136588898 + int(
        time.time() * 1000
    ) * 10**6

    def make(i, piece):
        seq = str(base + i)
        return {
            "kinesis": {
                "kinesisSchemaVersion": "1.0",
                "partitionKey": f"pk-{i}",
                "sequenceNumber": seq,
                "data": base64.b64encode(piece).decode(),
                "approximateArrivalTimestamp": round(time.time(), 3),
            },
            "eventSource": "aws:kinesis",
            "eventVersion": "1.0",
            "eventID": f"shardId-000000000000:{seq}",
            "eventName": "aws:kinesis:record",
            "awsRegion": REGION,
            "eventSourceARN": f"arn:aws:kinesis:{REGION}:123456789012:stream/{stream}",
        }

    # 1,000 records share the 6 MB: each is as large as that lets it be.
    return fill(lines, make, lambda r: {"Records": r}, per_record)


def buffer_event(lines, stream, table):
    """A window of the HTTP buffer stream: each record a POST as the HTTP
    function appends it (a header line naming the table, then the body),
    ~6 KB each, as many as the 6 MB payload takes."""
    event, taken, size = kinesis_event(lines, stream, 6000)
    for i, r in enumerate(event["Records"]):
        header = json.dumps(
            {
                "floe.http": 1,
                "table": table,
                "post": uuid.uuid4().hex,
                "received_ms": int(time.time() * 1000),
                "order": str(int(time.time() * 1_000_000) + i),
            }
        ).encode()
        body = base64.b64decode(r["kinesis"]["data"])
        r["kinesis"]["data"] = base64.b64encode(header + b"\n" + body).decode()
    return event, taken, size


def kafka_event(lines, topic, partitions=1, offset0=0):
    def make(i, piece):
        return {
            "topic": topic,
            "partition": i % partitions,
            "offset": offset0 + i,
            "timestamp": int(time.time() * 1000),
            "timestampType": "CREATE_TIME",
            "key": None,
            "value": base64.b64encode(piece).decode(),
            "headers": [],
        }

    def wrap(records):
        by = {}
        for r in records:
            by.setdefault(f"{topic}-{r['partition']}", []).append(r)
        return {
            "eventSource": "aws:kafka",
            "eventSourceArn": f"arn:aws:kafka:{REGION}:123456789012:cluster/rss/x",
            "bootstrapServers": "b-1.rss:9092",
            "records": by,
        }

    return fill(lines, make, wrap, 4400)


def http_event(body, table, token):
    path = f"/v1/tables/{table.replace('.', '/')}/records"
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": "",
        "headers": {
            "content-type": "application/x-ndjson",
            "authorization": f"Bearer {token}",
            "host": "rss.lambda-url.us-east-1.on.aws",
        },
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "rss",
            "domainName": "rss.lambda-url.us-east-1.on.aws",
            "domainPrefix": "rss",
            "http": {
                "method": "POST",
                "path": path,
                "protocol": "HTTP/1.1",
                "sourceIp": "127.0.0.1",
                "userAgent": "rss_paths",
            },
            "requestId": str(uuid.uuid4()),
            "routeKey": "$default",
            "stage": "$default",
            "time": "07/Dec/2026:00:00:00 +0000",
            "timeEpoch": int(time.time() * 1000),
        },
        "isBase64Encoded": False,
        "body": body.decode(),
    }


def body_of(lines, limit):
    return next(chunks(lines, limit))


class SqsTap:
    """A pass-through in front of moto that keeps the bodies of the commit
    requests sent to SQS: moto's ReceiveMessage takes seconds a call on a
    queue of thousands, too slow to drain one back."""

    def __init__(self, endpoint):
        target = urllib.parse.urlsplit(endpoint)
        self.bodies = []
        tap = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def forward(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else None
                if self.headers.get("X-Amz-Target", "").startswith("AmazonSQS.SendMessage"):
                    sent = json.loads(body)
                    entries = sent.get("Entries") or [sent]
                    tap.bodies.extend(e["MessageBody"] for e in entries)
                conn = http.client.HTTPConnection(target.hostname, target.port, timeout=600)
                headers = {k: v for k, v in self.headers.items() if k.lower() != "expect"}
                conn.request(self.command, self.path, body=body, headers=headers)
                r = conn.getresponse()
                data = r.read()
                self.send_response(r.status)
                for k, v in r.getheaders():
                    if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
                conn.close()

            do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = forward

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"


class Bench:
    def __init__(self, args):
        self.args = args
        self.floe = args.floe
        self.bins = args.bin_dir
        self.dir = args.dir
        self.log = os.path.join(self.dir, "functions.log")
        self.name = f"rss{int(time.time())}{uuid.uuid4().hex[:6]}"
        self.bucket = self.name
        kw = dict(endpoint_url=args.endpoint, region_name=REGION)
        self.s3 = boto3.client("s3", **kw)
        self.sqs = boto3.client("sqs", **kw)
        self.glue = boto3.client("glue", **kw)
        self.s3.create_bucket(Bucket=self.bucket)
        self.queue = self.sqs.create_queue(QueueName=f"{self.name}-commits")["QueueUrl"]
        self.glue.create_database(DatabaseInput={"Name": self.name})
        self.config = self.write_config("floe.toml", args.endpoint)
        self.tap = SqsTap(args.endpoint)
        self.tapped = self.write_config("tapped.toml", self.tap.endpoint)
        self.rows = []
        self.build = "this"

    def write_config(self, name, endpoint):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(
                f'[warehouse]\nuri = "s3://{self.bucket}/warehouse"\n'
                f'[aws]\nregion = "{REGION}"\nendpoint = "{endpoint}"\npath_style = true\n'
                f'[catalog]\ntype = "glue"\n[queue]\nurl = "{self.queue}"\n'
                f'[routing]\nallow = ["{self.name}.*"]\n'
            )
        return path

    def env(self, table=None):
        e = {"FLOE_CONFIG": self.config, "FLOE_HTTP_TOKEN": "rss"}
        if table:
            e["FLOE_ROUTING_TABLE"] = table
        return e

    def cli(self, *argv, **kw):
        return subprocess.run(
            [self.floe, "--config", self.config, *argv],
            check=True,
            stdout=subprocess.PIPE,
            **kw,
        ).stdout

    def row(self, path, shape, load, kib, note=""):
        self.rows.append((self.build, path, shape, load, kib, note))
        print(f"  {self.build:<6} {path:<30} {shape:<7} {kib // 1024:>5} MiB  {load}", file=sys.stderr)

    def table(self, shape, suffix):
        name = f"{self.name}.{shape}_{suffix}_{self.build}"
        schema = os.path.join(self.dir, f"{shape}.schema.json")
        self.cli("table", "create", name, "--schema", schema)
        return name

    def writer(self, shape, lines):
        exe = os.path.join(self.bins, "floe-writer")
        for kind, make in [
            ("SQS", lambda: sqs_event(lines, f"arn:aws:sqs:{REGION}:123456789012:src")),
            ("Kinesis", lambda: kinesis_event(lines, "src")),
            ("Kafka", lambda: kafka_event(lines, "src")),
        ]:
            table = self.table(shape, f"w{kind.lower()}")
            event, taken, size = make()
            kib, answers = run_function(exe, self.env(table), [event], self.log)
            check(answers, f"writer {kind} {shape}")
            load = f"1 event, {size / 1e6:.1f} MB, {taken:,} records"
            self.row(f"writer: {kind}", shape, load, kib)
        # A window of the HTTP buffer stream: POSTs, one batch per table.
        table = self.table(shape, "wbuffer")
        event, taken, size = buffer_event(lines, "hbuf", table)
        env = dict(self.env(table), FLOE_HTTP_BUFFER_STREAM="hbuf")
        kib, answers = run_function(exe, env, [event], self.log)
        check(answers, f"writer HTTP buffer {shape}")
        load = f"1 event, {size / 1e6:.1f} MB, {taken:,} records"
        self.row("writer: HTTP buffer window", shape, load, kib)
        # An S3 notification naming one large object.
        table = self.table(shape, "ws3")
        key = f"incoming/{shape}.ndjson"
        # Three of the writer's 64 MiB pieces and a part of one.
        object_path = os.path.join(self.dir, f"{shape}.object.ndjson")
        records = 0
        with open(self.data[shape], "rb") as src, open(object_path, "wb") as dst:
            for line in src:
                if dst.tell() + len(line) > 200_000_000:
                    break
                dst.write(line)
                records += 1
        self.s3.upload_file(object_path, self.bucket, key)
        size = os.path.getsize(object_path)
        note = {
            "Records": [
                {
                    "eventVersion": "2.1",
                    "eventSource": "aws:s3",
                    "awsRegion": REGION,
                    "eventName": "ObjectCreated:Put",
                    "s3": {
                        "bucket": {"name": self.bucket},
                        "object": {"key": key, "size": size},
                    },
                }
            ]
        }
        event = {
            "Records": [
                {
                    "messageId": str(uuid.uuid4()),
                    "receiptHandle": "rss-s3",
                    "body": json.dumps(note),
                    "attributes": {"ApproximateReceiveCount": "1"},
                    "messageAttributes": {},
                    "eventSource": "aws:sqs",
                    "eventSourceARN": f"arn:aws:sqs:{REGION}:123456789012:notify",
                    "awsRegion": REGION,
                }
            ]
        }
        kib, answers = run_function(exe, self.env(table), [event], self.log)
        check(answers, f"writer S3 {shape}")
        self.row("writer: SQS, S3 notification", shape, f"1 object, {size / 1e6:.0f} MB, {records:,} records", kib)

    def requests(self, shape, lines):
        """Commit requests on the queue: `floe ingest --via-queue` in
        batches of a few records, each its own Parquet file and request, as
        writer functions on a busy source leave them."""
        table = self.table(shape, "c")
        per = 5
        path = os.path.join(self.dir, f"{shape}.requests.ndjson")
        with open(path, "wb") as f:
            f.writelines(lines[: per * self.args.requests])
        self.tap.bodies.clear()
        subprocess.run(
            [self.floe, "--config", self.tapped, "ingest", table, path, "--via-queue",
             "--batch-size", str(per)],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )

    def message(self, body):
        """An SQS event record of a commit request sent to the queue."""
        return {
            "messageId": str(uuid.uuid4()),
            "receiptHandle": str(uuid.uuid4()),
            "body": body,
            "attributes": {"ApproximateReceiveCount": "1"},
            "messageAttributes": {},
            "md5OfBody": "",
            "eventSource": "aws:sqs",
            "eventSourceARN": f"arn:aws:sqs:{REGION}:123456789012:{self.name}-commits",
            "awsRegion": REGION,
        }

    def committer(self, shape):
        messages = [self.message(b) for b in self.tap.bodies]
        events, current, size = [], [], 20
        for m in messages:
            n = len(json.dumps(m)) + 2
            if current and (len(current) == COMMITTER_BATCH or size + n > EVENT_LIMIT):
                events.append({"Records": current})
                current, size = [], 20
            current.append(m)
            size += n
        if current:
            events.append({"Records": current})
        exe = os.path.join(self.bins, "floe-committer")
        kib, answers = run_function(exe, self.env(), events, self.log)
        check(answers, f"committer {shape}")
        failed = sum(len((a[1] or {}).get("batchItemFailures", [])) for a in answers)
        biggest = max(len(e["Records"]) for e in events)
        each = sum(len(m["body"]) for m in messages) / max(1, len(messages))
        load = (
            f"{len(messages):,} requests of {each / 1e3:.1f} kB in {len(events)} events"
            f" (largest {biggest:,} messages)"
        )
        self.row("committer", shape, load, kib, f"{failed} failed" if failed else "")

    def maintenance(self, shape):
        table = self.table(shape, "m")
        n = self.count[shape]
        per = max(1, n // self.args.files)
        self.cli(
            "ingest", table, self.data[shape], "--batch-size", str(per), stderr=subprocess.DEVNULL
        )
        exe = os.path.join(self.bins, "floe-maintenance")
        env = self.env()
        env["FLOE_MAINTENANCE_TABLES"] = table
        kib, answers = run_function(exe, env, [{}], self.log)
        check(answers, f"maintenance {shape}")
        report = answers[0][1]["tables"][0]
        load = f"{report['data_files_before']} files of {n:,} records -> {report['data_files_after']}"
        self.row("maintenance", shape, load, kib)

    def http(self, shape, lines):
        table = self.table(shape, "h")
        body = body_of(lines, BODY_LIMIT)
        exe = os.path.join(self.bins, "floe-ingest-http")
        kib, answers = run_function(exe, self.env(), [http_event(body, table, "rss")], self.log)
        status = (answers[0][1] or {}).get("statusCode")
        if status != 200:
            raise RuntimeError(f"ingest-http {shape}: {answers[0]}")
        records = body.count(b"\n")
        load = f"1 POST, {len(body) / 1e6:.1f} MB, {records:,} records"
        self.row("ingest-http", shape, load, kib)

    def serve(self, shape, lines):
        wh = os.path.join(self.dir, f"serve-{shape}-{self.build}")
        env = dict(os.environ, FLOE_WAREHOUSE=wh, FLOE_HTTP_TOKEN="rss")
        subprocess.run(
            [self.floe, "table", "create", f"rss.{shape}", "--schema",
             os.path.join(self.dir, f"{shape}.schema.json")],
            env=env, check=True, stdout=subprocess.DEVNULL,
        )
        with open(self.log, "ab") as out:
            proc = subprocess.Popen(
                [self.floe, "serve", "--addr", "127.0.0.1:0"],
                env=env, stdout=subprocess.PIPE, stderr=out,
            )
        try:
            first = proc.stdout.readline().decode()
            addr = next(w for w in first.split() if w.startswith("http://"))
            body = body_of(lines, BODY_LIMIT)
            url = f"{addr.rstrip('/')}/v1/tables/rss/{shape}/records"

            def post(_):
                req = urllib.request.Request(
                    url, data=body, method="POST",
                    headers={"Authorization": "Bearer rss", "Content-Type": "application/x-ndjson"},
                )
                with urllib.request.urlopen(req, timeout=600) as r:
                    return r.status

            clients, posts = self.args.serve_clients, self.args.serve_posts
            with ThreadPoolExecutor(clients) as pool:
                codes = list(pool.map(post, range(posts)))
            if any(c != 200 for c in codes):
                raise RuntimeError(f"serve {shape}: {codes}")
            kib = peak_kib(proc.pid)
        finally:
            proc.kill()
            proc.wait()
        load = f"{posts} POSTs of {len(body) / 1e6:.1f} MB, {clients} at a time"
        self.row("floe serve", shape, load, kib)

    def ingest(self, shape):
        wh = os.path.join(self.dir, f"ingest-{shape}-{self.build}")
        env = dict(os.environ, FLOE_WAREHOUSE=wh)
        subprocess.run(
            [self.floe, "table", "create", f"rss.{shape}", "--schema",
             os.path.join(self.dir, f"{shape}.schema.json")],
            env=env, check=True, stdout=subprocess.DEVNULL,
        )
        timing = os.path.join(self.dir, "time")
        subprocess.run(
            ["/usr/bin/time", "-f", "%M", "-o", timing, self.floe, "ingest",
             f"rss.{shape}", self.data[shape]],
            env=env, check=True, stdout=subprocess.DEVNULL,
        )
        with open(timing) as f:
            kib = int(f.read().split()[-1])
        size = os.path.getsize(self.data[shape])
        self.row("CLI: floe ingest", shape, f"1 file, {size / 1e6:.0f} MB, {self.count[shape]:,} records", kib)

    def prepare(self, shapes):
        self.data, self.count, self.lines = {}, {}, {}
        for shape, n in shapes:
            path = os.path.join(self.dir, f"{shape}.ndjson")
            subprocess.run(
                [self.floe, "bench", "gen", "--shape", shape, "--records", str(n), "--out", path],
                check=True, stdout=subprocess.DEVNULL,
            )
            with open(os.path.join(self.dir, f"{shape}.schema.json"), "wb") as f:
                f.write(subprocess.run(
                    [self.floe, "bench", "schema", "--shape", shape],
                    check=True, stdout=subprocess.PIPE,
                ).stdout)
            self.data[shape], self.count[shape] = path, n
            with open(path, "rb") as f:
                # Enough lines for any one event or POST.
                self.lines[shape] = [line for _, line in zip(range(60000), f)]


def check(answers, what):
    for kind, body in answers:
        if kind != "response":
            raise RuntimeError(f"{what}: {kind}: {body}")
        failures = (body or {}).get("batchItemFailures") if isinstance(body, dict) else None
        if failures and not what.startswith("committer"):
            raise RuntimeError(f"{what}: failed {failures}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--floe", required=True)
    p.add_argument("--bin-dir", required=True)
    p.add_argument("--endpoint", required=True)
    p.add_argument("--dir", required=True)
    p.add_argument("--scale", type=float, default=1.0)
    p.add_argument("--requests", type=int, default=3000, help="commit requests queued per shape")
    p.add_argument("--files", type=int, default=100, help="small files maintenance compacts")
    p.add_argument("--serve-clients", type=int, default=8)
    p.add_argument("--serve-posts", type=int, default=32)
    p.add_argument("--paths", default="ingest,serve,writer,http,committer,maintenance")
    p.add_argument("--shapes", default="event,wide,github")
    p.add_argument("--before-bin-dir", help="an earlier build's function binaries, measured first")
    p.add_argument("--before-floe", help="an earlier build's floe binary [--floe]")
    args = p.parse_args()
    # The file the CLI ingests, the S3 notification names and maintenance
    # compacts: rss.sh's sizes (~260, 230 and 850 MB).
    sizes = {"event": 2_000_000, "wide": 200_000, "github": 1_000_000}
    shapes = [(s, int(sizes[s] * args.scale)) for s in args.shapes.split(",")]
    bench = Bench(args)
    bench.prepare(shapes)
    paths = args.paths.split(",")
    # An earlier build beside this one, each path by both in one run.
    builds = [("this", args.floe, args.bin_dir)]
    if args.before_bin_dir:
        builds.insert(0, ("before", args.before_floe or args.floe, args.before_bin_dir))
    for shape, _ in shapes:
        lines = bench.lines[shape]
        for build, floe, bins in builds:
            bench.build, bench.floe, bench.bins = build, floe, bins
            measure(bench, paths, shape, lines)
    compare = len(builds) > 1
    print("| path | shape | load |" + (" build |" if compare else "") + " peak RSS | |")
    print("|---|---|---|" + ("---|" if compare else "") + "---:|---|")
    for build, path, shape, load, kib, note in bench.rows:
        b = f" {build} |" if compare else ""
        print(f"| {path} | {shape} | {load} |{b} {kib // 1024} MiB | {note} |")


def measure(bench, paths, shape, lines):
    if "ingest" in paths:
        bench.ingest(shape)
    if "serve" in paths:
        bench.serve(shape, lines)
    if "writer" in paths:
        bench.writer(shape, lines)
    if "http" in paths:
        bench.http(shape, lines)
    if "committer" in paths:
        bench.requests(shape, lines)
        bench.committer(shape)
    if "maintenance" in paths:
        bench.maintenance(shape)


if __name__ == "__main__":
    main()
