"""A minimal Confluent-compatible schema registry for floe's tests.

No Confluent Schema Registry (a JVM service backed by Kafka) or Karapace
(Python, but backed by Kafka too) runs on this machine, so the test starts
this instead: the two endpoints of Confluent's REST API a producer and a
deserializer use, with HTTP basic auth as Confluent Cloud requires.

  POST /subjects/{subject}/versions  {"schema": "...", "schemaType"?: "AVRO"}
       -> {"id": N}   (the same schema text under any subject keeps its id)
  GET  /schemas/ids/{id}
       -> {"schema": "..."} (plus "schemaType" when not AVRO)
       -> 404 {"error_code": 40403, "message": "Schema not found"}

usage: registry.py USER PASSWORD
Prints the port it listens on (127.0.0.1) as its first line, then serves
until killed.
"""
import base64
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

user, password = sys.argv[1], sys.argv[2]
expected = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
schemas = {}  # id -> {"schema": text, "schemaType": type}
ids = {}  # (type, text) -> id
lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    def reply(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def authorised(self):
        if self.headers.get("Authorization") == expected:
            return True
        self.reply(401, {"error_code": 40101, "message": "Unauthorized"})
        return False

    def do_GET(self):
        if not self.authorised():
            return
        parts = self.path.strip("/").split("/")
        if len(parts) == 3 and parts[:2] == ["schemas", "ids"] and parts[2].isdigit():
            found = schemas.get(int(parts[2]))
            if found is None:
                self.reply(404, {"error_code": 40403, "message": "Schema not found"})
                return
            body = {"schema": found["schema"]}
            if found["schemaType"] != "AVRO":
                body["schemaType"] = found["schemaType"]
            self.reply(200, body)
            return
        self.reply(404, {"error_code": 404, "message": "HTTP 404 Not Found"})

    def do_POST(self):
        if not self.authorised():
            return
        parts = self.path.strip("/").split("/")
        if len(parts) != 3 or parts[0] != "subjects" or parts[2] != "versions":
            self.reply(404, {"error_code": 404, "message": "HTTP 404 Not Found"})
            return
        length = int(self.headers.get("Content-Length", "0"))
        body = json.loads(self.rfile.read(length))
        kind = body.get("schemaType", "AVRO")
        with lock:
            key = (kind, body["schema"])
            if key not in ids:
                ids[key] = len(ids) + 1
                schemas[ids[key]] = {"schema": body["schema"], "schemaType": kind}
            self.reply(200, {"id": ids[key]})

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
