"""A small HTTP/1.1 server that answers the scenario contract, used by the lab's own tests.

With FAULTS (env, comma-separated) it breaks the contract in specific ways, one per fault name,
so the tests can check that the parity check catches each one. Listens on env ADDR (host:port),
like every peer; WORKERS is accepted and ignored (one thread per connection).

Faults: status, body, content_type, json, missing_date, missing_server, close, cl_204,
middleware, large, chunked_no_cl, error_status, constant (the contract's own answer to
param/query/deep/post_json whatever was asked), frozen_date (Date rendered once at start).
"""

from __future__ import annotations

import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

CONTRACT_DIR = Path(__file__).resolve().parents[1] / "contract"
LARGE = json.loads((CONTRACT_DIR / "large.json").read_text())
FAULTS = {f.strip() for f in os.environ.get("FAULTS", "").split(",") if f.strip()}
STARTED_AT = None  # the frozen_date fault's one Date


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "contract-test"
    sys_version = ""

    @property
    def faults(self) -> set[str]:
        return getattr(self.server, "faults", FAULTS)

    def log_message(self, fmt, *args):  # keep test output quiet
        pass

    def send_header(self, keyword, value):
        if keyword.lower() == "date" and "missing_date" in self.faults:
            return
        if keyword.lower() == "date" and "frozen_date" in self.faults:
            global STARTED_AT
            STARTED_AT = STARTED_AT or value
            value = STARTED_AT
        if keyword.lower() == "server" and "missing_server" in self.faults:
            return
        super().send_header(keyword, value)

    def _send(self, status, ctype, body: bytes, extra=None):
        self.send_response(status)
        if ctype is not None:
            self.send_header("Content-Type", ctype)
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        if "chunked_no_cl" in self.faults and status != 204:
            self.send_header("Transfer-Encoding", "chunked")
            if "close" in self.faults:
                self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body) if body else b"0\r\n\r\n")
            return
        if status != 204 or "cl_204" in self.faults:
            self.send_header("Content-Length", str(len(body)))
        if "close" in self.faults:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        if status != 204:
            self.wfile.write(body)

    def _json(self, status, obj, ctype="application/json"):
        self._send(status, ctype, json.dumps(obj, separators=(",", ":")).encode())

    def do_GET(self):
        url = urlsplit(self.path)
        parts = url.path.strip("/").split("/")
        if url.path == "/plaintext":
            body = b"Hello World" if "body" in self.faults else b"Hello, World!"
            self._send(201 if "status" in self.faults else 200, "text/plain", body)
        elif url.path == "/json":
            ctype = "text/plain" if "content_type" in self.faults else "application/json"
            self._json(200, {"message": "Hello, World!"}, ctype)
        elif "constant" in self.faults and url.path.startswith(("/users/", "/search", "/api/")):
            # The contract's answers, whatever was asked: what a benchmark-only server could do.
            if url.path.startswith("/users/"):
                self._json(200, {"id": 42, "name": "user-42"})
            elif url.path.startswith("/search"):
                self._json(200, {"q": "peregrine falcon", "limit": 10})
            else:
                self._json(200, {"org": 7, "team": 3, "member": 12})
        elif len(parts) == 2 and parts[0] == "users" and parts[1].isdigit():
            i = int(parts[1])
            self._json(200, {"id": i, "name": f"user-{i + 1 if 'json' in self.faults else i}"})
        elif url.path == "/search":
            q = parse_qs(url.query)
            self._json(200, {"q": q["q"][0], "limit": int(q["limit"][0])})
        elif len(parts) == 8 and parts[:3] == ["api", "v1", "orgs"]:
            self._json(200, {"org": int(parts[3]), "team": int(parts[5]), "member": int(parts[7])})
        elif url.path == "/middleware":
            headers = {
                f"x-mw-{i}": "1"
                for i in range(1, 6)
                if not (i == 3 and "middleware" in self.faults)
            }
            self._send(200, "text/plain", b"OK", headers)
        elif url.path == "/error":
            status = 200 if "error_status" in self.faults else 500
            self._json(
                status,
                {"type": "about:blank", "title": "Internal Server Error", "status": 500},
                "application/problem+json",
            )
        elif url.path == "/large":
            data = json.loads(json.dumps(LARGE))
            if "large" in self.faults:
                data["items"][5]["score"] += 1
            self._json(200, data)
        elif url.path == "/empty":
            self._send(204, None, b"")
        else:
            self._send(404, "text/plain", b"not found")

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(n)
        if self.path == "/users" and "constant" in self.faults:
            self._json(201, {"name": "Ada Lovelace", "email": "ada@example.com", "age": 36})
        elif self.path == "/users":
            obj = json.loads(body)
            self._json(201, {"name": obj["name"], "email": obj["email"], "age": obj["age"]})
        else:
            self._send(404, "text/plain", b"not found")


def serve(addr: str, faults: set[str] | None = None) -> ThreadingHTTPServer:
    """Bind (port 0 picks a free one); call serve_forever() to answer."""
    host, port = addr.rsplit(":", 1)
    srv = ThreadingHTTPServer((host, int(port)), Handler)
    srv.daemon_threads = True
    srv.faults = set(FAULTS if faults is None else faults)
    return srv


if __name__ == "__main__":
    srv = serve(os.environ.get("ADDR", "127.0.0.1:8080"))
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        sys.exit(0)
