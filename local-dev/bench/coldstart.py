"""Cold start of floe's Lambda binaries: time from exec to the first
`GET /2018-06-01/runtime/invocation/next`, the moment a function has finished
its init phase (config, SDK clients, catalog) and asks for work. A stub of
Lambda's Runtime API on loopback answers nothing; the process is killed once
it asks. Prints one markdown row per binary: zip and binary size, median and
p90 init time over RUNS starts.

usage: coldstart.py ARTIFACTS_DIR [RUNS]
  ARTIFACTS_DIR holds cargo-lambda's <bin>/bootstrap(.zip).
"""
import http.server
import os
import pathlib
import socketserver
import statistics
import subprocess
import sys
import threading
import time
import zipfile

BINS = ["floe-writer", "floe-committer", "floe-ingest-http", "floe-maintenance"]

artifacts = pathlib.Path(sys.argv[1])
runs = int(sys.argv[2]) if len(sys.argv) > 2 else 20

asked = threading.Event()
asked_at = [0.0]


class Runtime(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path.endswith("/runtime/invocation/next") and not asked.is_set():
            asked_at[0] = time.perf_counter()
            asked.set()
        # Hold the request open: the process is killed before it gets an event.
        time.sleep(5)

    def log_message(self, *args):
        pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


server = Server(("127.0.0.1", 0), Runtime)
threading.Thread(target=server.serve_forever, daemon=True).start()
port = server.server_address[1]

# What the module sets, with a Glue catalog: init builds the SDK clients and
# the catalog but calls no AWS API, as on Lambda.
env = {
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    "AWS_LAMBDA_RUNTIME_API": f"127.0.0.1:{port}",
    "AWS_LAMBDA_FUNCTION_NAME": "floe",
    "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "1024",
    "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
    "AWS_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_EC2_METADATA_DISABLED": "true",
    "FLOE_WAREHOUSE_URI": "s3://floe-bench/warehouse",
    "FLOE_CATALOG_TYPE": "glue",
    "FLOE_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/floe-commits",
    "FLOE_ROUTING_TABLE": "bronze.events",
    "FLOE_HTTP_TOKEN": "bench",
    "RUST_LOG": "warn",
}

print("| binary | zip | binary | init median | init p90 |")
print("|---|---:|---:|---:|---:|")
for name in BINS:
    zipped = artifacts / name / "bootstrap.zip"
    binary = artifacts / name / "bootstrap"
    if not binary.exists() and zipped.exists():
        with zipfile.ZipFile(zipped) as z:
            z.extract("bootstrap", artifacts / name)
        binary.chmod(0o755)
    if not binary.exists():
        sys.exit(f"{binary}: build the functions first (cargo lambda build --release)")
    times = []
    for _ in range(runs):
        asked.clear()
        start = time.perf_counter()
        proc = subprocess.Popen([str(binary)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if not asked.wait(10):
            proc.kill()
            err = proc.stderr.read().decode(errors="replace")
            sys.exit(f"{name} never asked for an event: {err[-2000:]}")
        times.append((asked_at[0] - start) * 1000)
        proc.kill()
        proc.wait()
    times.sort()
    p90 = times[min(len(times) - 1, int(round(0.9 * (len(times) - 1))))]
    zsize = zipped.stat().st_size / 1e6 if zipped.exists() else float("nan")
    print(
        f"| {name} | {zsize:.1f} MB | {binary.stat().st_size / 1e6:.1f} MB "
        f"| {statistics.median(times):.1f} ms | {p90:.1f} ms |"
    )
