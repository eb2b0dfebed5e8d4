"""moto's server (S3, SQS, Glue, ... on one port) with a Glue that refuses a
stale UpdateTable as AWS's does, faults tests can inject over HTTP, and a
count of the Kinesis requests it answered.

moto numbers a Glue table's versions and returns the current one as
`VersionId` from GetTable, but its UpdateTable ignores the `VersionId` it is
sent, so two committers planned on one version would both land. Here
UpdateTable checks the supplied `VersionId` against the table's current
version under a lock and answers `ConcurrentModificationException` when it is
stale (no `VersionId`: no check, as on AWS).

Faults are scoped to one table (`database.table`), so tests running in
parallel on one server do not see each other's:

  POST /floe-glue/faults   {"table": "db.t", "update": [RULE, ...], "get_latency_ms": N}
      Replaces the table's faults. Each UpdateTable of the table takes the
      next RULE (then none: answered as moto answers). A RULE's keys:
        "hold": true        wait until POST /floe-glue/release (at most 120 s)
        "before_ms": N      wait N ms before doing anything
        "apply": false      refuse without applying: answer `status` / `code`
                            (default 500 InternalServiceException)
        "then": WHAT        after applying: "drop" (close the connection
                            without an answer), "500" (InternalServiceException),
                            "conflict" (ConcurrentModificationException),
                            "throttle" (ThrottlingException)
        "after_ms": N       wait N ms before answering (an answer arriving late)
        "hold_after": true  after applying, wait until POST /floe-glue/release
                            before answering (at most 120 s)
      `get_latency_ms` delays the answer of every GetTable of the table: it
      arrives that late and describes the table as it was when read.
  POST /floe-glue/release  {"table": "db.t"}: lets held UpdateTables go on.
  GET  /floe-glue/faults?table=db.t
      What happened: {"applied", "stale", "refused", "held", "rules_left", "gets",
      "archived"} (`held`: UpdateTables waiting now; `archived`: applied
      UpdateTables that did not set `SkipArchive`, each of which keeps a
      table version on AWS).
  GET  /floe-glue/kinesis  Kinesis requests this server answered, by operation
      ({"requests": {"PutRecord": N, "GetRecords": N, ...}}), and the PUT
      payload units the PutRecord(s) records came to ("put_payload_units":
      each record, data and partition key, is one unit per started 25 KiB,
      as Kinesis bills them; "put_bytes"). moto logs every Kinesis call as
      `POST /`, so the request log alone cannot tell a billed put from a
      free read: the freshness benchmark reads these counts instead.
      "throttled": PutRecord(s) refused for a shard's write limit.
  POST /floe-glue/kinesis  {"stream": "s", "limits": true, "window_ms": N,
                            "bytes": N, "drop_puts": N}
      Stream `s` keeps Kinesis's write limit per shard (1 MiB and 1,000
      records a second, data and partition key counted; "window_ms" allows
      that much per longer window instead and "bytes" fewer bytes, so a
      test fills a shard at its own pace): a put past it is answered
      ProvisionedThroughputExceededException and not stored (a PutRecords
      holding such a record is refused whole, where Kinesis fails that
      record alone). moto has no such limit. The next "drop_puts"
      PutRecords to `s` are stored, then the connection is closed without
      an answer.
  GET  /floe-glue/         {"floe-glue": 1}: this launcher, not plain moto.

usage: moto_glue.py [-H HOST] [-p PORT]   (moto_server's options)
"""

import base64
import collections
import io
import json
import socket
import sys
import threading
import time
import urllib.parse

import moto.server
from moto.core.exceptions import JsonRESTError
from moto.glue import responses as glue_responses
from moto.kinesis import models as kinesis_models

MAX_HOLD_S = 120


class Table:
    """One table's faults and what its requests met."""

    def __init__(self):
        self.rules = []
        self.get_latency_ms = 0
        self.applied = 0
        self.stale = 0
        self.refused = 0
        self.held = 0
        self.gets = 0
        self.archived = 0
        self.release = threading.Event()


TABLES = {}
TABLES_LOCK = threading.RLock()

# Kinesis bills a put per started 25 KiB of each record (PUT payload unit).
PAYLOAD_UNIT = 25 * 1024
KINESIS = {"requests": {}, "put_payload_units": 0, "put_bytes": 0, "throttled": 0}
# Kinesis's write limit per shard and second.
SHARD_BYTES = 1024 * 1024
SHARD_RECORDS = 1000
KINESIS_LOCK = threading.Lock()
KINESIS_CALL_LOCK = threading.Lock()
# Glue's version check and the update it guards are one step.
UPDATE_LOCK = threading.Lock()


def table(key):
    with TABLES_LOCK:
        return TABLES.setdefault(key, Table())


class Limits:
    """A stream's write limit per shard, and the puts it counts against it."""

    def __init__(self, window_ms, bytes_):
        self.window_s = window_ms / 1000
        self.bytes = bytes_
        self.puts = collections.defaultdict(collections.deque)
        self.drop_puts = 0


STREAMS = {}


class Throttled(JsonRESTError):
    code = 400

    def __init__(self, shard):
        super().__init__(
            "ProvisionedThroughputExceededException",
            f"Rate exceeded for shard {shard}: floe's stand-in keeps Kinesis's write limit",
        )


def over_limit(stream, partition_key, explicit_hash_key, data):
    """Whether a put takes its shard past the write limit; counts it if not."""
    with KINESIS_LOCK:
        limits = STREAMS.get(stream.stream_name)
        if limits is None or limits.window_s == 0:
            return False
        shard = stream.get_shard_for_key(partition_key, explicit_hash_key)
        puts = limits.puts[shard.shard_id]
        now = time.monotonic()
        while puts and puts[0][0] <= now - limits.window_s:
            puts.popleft()
        size = len(base64.b64decode(data)) + len(partition_key.encode())
        if len(puts) + 1 > SHARD_RECORDS or sum(n for _, n in puts) + size > limits.bytes:
            KINESIS["throttled"] += 1
            return True
        puts.append((now, size))
        return False


_stream_put_record = kinesis_models.Stream.put_record


def stream_put_record(self, partition_key, explicit_hash_key, data):
    if over_limit(self, partition_key, explicit_hash_key, data):
        raise Throttled(self.get_shard_for_key(partition_key, explicit_hash_key).shard_id)
    return _stream_put_record(self, partition_key, explicit_hash_key, data)


kinesis_models.Stream.put_record = stream_put_record


class ConcurrentModification(JsonRESTError):
    code = 400

    def __init__(self, message):
        super().__init__("ConcurrentModificationException", message)


_update_table = glue_responses.GlueResponse.update_table


def update_table(self):
    params = self.parameters
    db = params.get("DatabaseName")
    name = (params.get("TableInput") or {}).get("Name")
    wanted = params.get("VersionId")
    with UPDATE_LOCK:
        if wanted is not None:
            current = self.glue_backend.get_table(db, name)._current_version
            if str(current) != str(wanted):
                t = table(f"{db}.{name}")
                with TABLES_LOCK:
                    t.stale += 1
                raise ConcurrentModification(
                    f"Table {db}.{name}: VersionId {wanted} is not the current version {current}"
                )
        result = _update_table(self)
        with TABLES_LOCK:
            t = table(f"{db}.{name}")
            t.applied += 1
            if not params.get("SkipArchive"):
                t.archived += 1
        return result


glue_responses.GlueResponse.update_table = update_table


def answer(start_response, status, code, message):
    body = json.dumps({"__type": code, "message": message}).encode()
    reason = {400: "Bad Request", 500: "Internal Server Error"}.get(status, "Error")
    start_response(
        f"{status} {reason}",
        [
            ("Content-Type", "application/x-amz-json-1.1"),
            ("x-amzn-ErrorType", code),
            ("Content-Length", str(len(body))),
        ],
    )
    return [body]


def json_answer(start_response, value, status="200 OK"):
    body = json.dumps(value).encode()
    start_response(
        status,
        [("Content-Type", "application/json"), ("Content-Length", str(len(body)))],
    )
    return [body]


class Faulty:
    """The WSGI app: control calls, Glue faults, then moto."""

    def __init__(self, inner):
        self.inner = inner

    def __call__(self, environ, start_response):
        path = environ.get("PATH_INFO", "")
        if path.startswith("/floe-glue"):
            return self.control(environ, start_response, path)
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        if target.startswith("Kinesis_20131202."):
            op = target.split(".", 1)[1]
            stream = count_kinesis(environ, op)
            # moto's GetRecords walks a shard's records while a PutRecord on
            # another thread may add one ("OrderedDict mutated during
            # iteration", a 500 AWS never gives): one call at a time.
            with KINESIS_CALL_LOCK:
                if op == "PutRecord" and take_drop(stream):
                    self.capture(environ)
                    drop(environ)
                return self.inner(environ, start_response)
        if target not in ("AWSGlue.UpdateTable", "AWSGlue.GetTable"):
            return self.inner(environ, start_response)
        body = read_body(environ)
        environ["wsgi.input"] = io.BytesIO(body)
        try:
            params = json.loads(body or b"{}")
        except ValueError:
            return self.inner(environ, start_response)
        if target == "AWSGlue.GetTable":
            t = table(f"{params.get('DatabaseName')}.{params.get('Name')}")
            with TABLES_LOCK:
                t.gets += 1
                latency = t.get_latency_ms
            if not latency:
                return self.inner(environ, start_response)
            # The answer describes the table as it was when it was read: a
            # caller acts on a state other writers may have moved past.
            status, headers, answer_body = self.capture(environ)
            time.sleep(latency / 1000)
            start_response(status, headers)
            return [answer_body]
        name = (params.get("TableInput") or {}).get("Name")
        t = table(f"{params.get('DatabaseName')}.{name}")
        with TABLES_LOCK:
            rule = t.rules.pop(0) if t.rules else None
        if rule is None:
            return self.inner(environ, start_response)
        return self.update(environ, start_response, t, rule)

    def update(self, environ, start_response, t, rule):
        if rule.get("hold"):
            self.hold(t)
        if rule.get("before_ms"):
            time.sleep(rule["before_ms"] / 1000)
        if rule.get("apply") is False:
            with TABLES_LOCK:
                t.refused += 1
            return answer(
                start_response,
                int(rule.get("status", 500)),
                rule.get("code", "InternalServiceException"),
                "refused by floe's Glue stand-in (not applied)",
            )
        status, headers, body = self.capture(environ)
        applied = status.startswith("200")
        then = rule.get("then") if applied else None
        if rule.get("hold_after"):
            self.hold(t)
        if rule.get("after_ms"):
            time.sleep(rule["after_ms"] / 1000)
        if then == "drop":
            drop(environ)
        if then == "500":
            return answer(start_response, 500, "InternalServiceException", "applied, then failed")
        if then == "conflict":
            return answer(
                start_response, 400, "ConcurrentModificationException", "applied, then refused"
            )
        if then == "throttle":
            return answer(start_response, 400, "ThrottlingException", "applied, then throttled")
        start_response(status, headers)
        return [body]

    def capture(self, environ):
        """moto's answer to the request: status, headers, body."""
        captured = {}

        def start(status, headers, exc_info=None):
            captured["status"] = status
            captured["headers"] = headers
            return lambda _data: None

        chunks = self.inner(environ, start)
        try:
            body = b"".join(chunks)
        finally:
            if hasattr(chunks, "close"):
                chunks.close()
        return captured.get("status", "500 Internal Server Error"), captured.get("headers", []), body

    def hold(self, t):
        with TABLES_LOCK:
            t.held += 1
        t.release.wait(MAX_HOLD_S)
        with TABLES_LOCK:
            t.held -= 1

    def control(self, environ, start_response, path):
        method = environ.get("REQUEST_METHOD", "GET")
        if path in ("/floe-glue", "/floe-glue/"):
            return json_answer(start_response, {"floe-glue": 1})
        if path == "/floe-glue/kinesis" and method == "GET":
            with KINESIS_LOCK:
                return json_answer(start_response, json.loads(json.dumps(KINESIS)))
        if path == "/floe-glue/kinesis" and method == "POST":
            params = json.loads(read_body(environ) or b"{}")
            window_ms = int(params.get("window_ms", 1000)) if params.get("limits") else 0
            limits = Limits(window_ms, int(params.get("bytes", SHARD_BYTES)))
            limits.drop_puts = int(params.get("drop_puts", 0))
            with KINESIS_LOCK:
                STREAMS[params.get("stream", "")] = limits
            return json_answer(start_response, {"ok": True})
        if path == "/floe-glue/faults" and method == "GET":
            query = urllib.parse.parse_qs(environ.get("QUERY_STRING", ""))
            t = table(query.get("table", [""])[0])
            with TABLES_LOCK:
                seen = {
                    "applied": t.applied,
                    "stale": t.stale,
                    "refused": t.refused,
                    "held": t.held,
                    "rules_left": len(t.rules),
                    "gets": t.gets,
                    "archived": t.archived,
                }
            return json_answer(start_response, seen)
        try:
            params = json.loads(read_body(environ) or b"{}")
        except ValueError as e:
            return json_answer(start_response, {"error": str(e)}, "400 Bad Request")
        t = table(params.get("table", ""))
        if path == "/floe-glue/faults" and method == "POST":
            with TABLES_LOCK:
                t.rules = list(params.get("update", []))
                t.get_latency_ms = int(params.get("get_latency_ms", 0))
                t.release.clear()
            return json_answer(start_response, {"ok": True})
        if path == "/floe-glue/release" and method == "POST":
            t.release.set()
            return json_answer(start_response, {"ok": True})
        return json_answer(start_response, {"error": f"no {method} {path}"}, "404 Not Found")


def drop(environ):
    """Closes the request's connection without an answer."""
    sock = environ.get("werkzeug.socket")
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
    # werkzeug treats this as a client that went away: no answer, no log noise.
    raise ConnectionResetError("floe's stand-in dropped the connection")


def take_drop(stream):
    """Whether this put to `stream` is one to store and leave unanswered."""
    with KINESIS_LOCK:
        limits = STREAMS.get(stream)
        if limits is None or limits.drop_puts == 0:
            return False
        limits.drop_puts -= 1
        return True


def count_kinesis(environ, op):
    """Counts a Kinesis request, and for a put its records' payload units;
    the stream it names."""
    sizes = []
    params = {}
    if op in ("PutRecord", "PutRecords"):
        body = read_body(environ)
        environ["wsgi.input"] = io.BytesIO(body)
        try:
            params = json.loads(body or b"{}")
        except ValueError:
            params = {}
        records = params.get("Records", []) if op == "PutRecords" else [params]
        # Data is base64: its decoded length, without decoding it.
        for r in records:
            data = r.get("Data", "")
            size = len(data) * 3 // 4 - data[-2:].count("=")
            sizes.append(size + len(r.get("PartitionKey", "").encode()))
    with KINESIS_LOCK:
        KINESIS["requests"][op] = KINESIS["requests"].get(op, 0) + 1
        KINESIS["put_payload_units"] += sum(-(-n // PAYLOAD_UNIT) for n in sizes)
        KINESIS["put_bytes"] += sum(sizes)
    return params.get("StreamName") or (params.get("StreamARN") or "").rsplit("/", 1)[-1]


def read_body(environ):
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    return environ["wsgi.input"].read(length) if length else b""


def main():
    # moto.server.main builds its dispatcher and hands it to run_simple; wrap
    # the dispatcher on its way there.
    run_simple = moto.server.run_simple

    def wrapped(host, port, app, **kwargs):
        return run_simple(host, port, Faulty(app), **kwargs)

    moto.server.run_simple = wrapped
    moto.server.main(sys.argv[1:])


if __name__ == "__main__":
    main()
