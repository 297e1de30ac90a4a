"""A small HTTP/1.1 server answering the database scenarios (lab/contract/db.json) from a real
PostgreSQL (through the lab's Database.query, i.e. psql: slow, but these tests send a handful of
requests), for the lab's own tests.

With faults it breaks TechEmpower's rules in one chosen way each, so the tests can show that the
database parity check catches it:
  unsorted      fortunes in id order instead of sorted by message
  unescaped     fortune messages written into the HTML as they are
  no_added      the fortune added at request time is missing
  no_charset    fortunes served as plain `text/html`
  no_clamp      q used as given: q=0 gives no row, q=501 gives 501 rows
  nonnumeric    a non-numeric q gives no row (instead of 1)
  wrong_number  /db and /queries answer randomNumber + 1 (not what the row holds)
  out_of_range  /db answers id 10001
  not_written   /updates answers new numbers without writing them
"""

from __future__ import annotations

import html
import json
import random
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from peregrine_lab.database import ADDITIONAL_FORTUNE, WORLD_ROWS


def _clamp(raw: str | None, faults: set[str]) -> int:
    try:
        n = int(raw or "")
    except ValueError:
        return 0 if "nonnumeric" in faults else 1
    return n if "no_clamp" in faults else max(1, min(500, n))


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "db-contract-test"
    sys_version = ""

    def log_message(self, fmt, *args):
        pass

    @property
    def faults(self) -> set[str]:
        return self.server.faults

    def _send(self, ctype: str, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _json(self, obj) -> None:
        self._send("application/json", json.dumps(obj, separators=(",", ":")).encode())

    def _rows(self, ids: list[int]) -> list[dict]:
        if not ids:
            return []
        got = {
            int(i): int(r)
            for i, r in self.server.db.rows(
                f"SELECT id, randomnumber FROM world WHERE id IN ({','.join(map(str, ids))})"
            )
        }
        bump = 1 if "wrong_number" in self.faults else 0
        return [{"id": i, "randomNumber": got[i] + bump} for i in ids]

    def do_GET(self):
        url = urlsplit(self.path)
        q = parse_qs(url.query, keep_blank_values=True).get("q", [None])[0]
        if url.path == "/db":
            (row,) = self._rows([random.randint(1, WORLD_ROWS)])
            if "out_of_range" in self.faults:
                row["id"] = WORLD_ROWS + 1
            self._json(row)
        elif url.path == "/queries":
            n = _clamp(q, self.faults)
            self._json(self._rows([random.randint(1, WORLD_ROWS) for _ in range(n)]))
        elif url.path == "/updates":
            n = _clamp(q, self.faults)
            rows = self._rows(sorted({random.randint(1, WORLD_ROWS) for _ in range(n)}))
            while len(rows) < n:  # keep N rows even if an id was drawn twice
                rows.append(dict(rows[-1]))
            for r in rows:
                r["randomNumber"] = random.randint(1, WORLD_ROWS)
            if rows and "not_written" not in self.faults:
                latest = {r["id"]: r["randomNumber"] for r in rows}
                values = ",".join(f"({i},{v})" for i, v in latest.items())
                self.server.db.query(
                    "UPDATE world SET randomnumber = v.r FROM (VALUES "
                    f"{values}) AS v(id, r) WHERE world.id = v.id"
                )
                for r in rows:
                    r["randomNumber"] = latest[r["id"]]
            self._json(rows)
        elif url.path == "/fortunes":
            rows = [(int(i), m) for i, m in self.server.db.rows("SELECT id, message FROM fortune")]
            if "no_added" not in self.faults:
                rows.append((0, ADDITIONAL_FORTUNE))
            rows.sort(key=lambda r: r[0] if "unsorted" in self.faults else r[1])
            esc = (lambda s: s) if "unescaped" in self.faults else html.escape
            body = (
                "<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table>"
                "<tr><th>id</th><th>message</th></tr>"
                + "".join(f"<tr><td>{i}</td><td>{esc(m)}</td></tr>" for i, m in rows)
                + "</table></body></html>"
            )
            ctype = "text/html" if "no_charset" in self.faults else "text/html; charset=utf-8"
            self._send(ctype, body.encode())
        else:
            self.send_error(404)


def serve(db, faults=()) -> ThreadingHTTPServer:
    """Bind 127.0.0.1 on a free port; call serve_forever() to answer."""
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    srv.faults = set(faults)
    srv.db = db
    return srv


if __name__ == "__main__":
    # As a lab peer (tests/fixtures/db_peers.toml): ADDR, DATABASE_URL and FAULTS from the env.
    import os

    from peregrine_lab.database import Database

    host, port = os.environ.get("ADDR", "127.0.0.1:8080").rsplit(":", 1)
    srv = ThreadingHTTPServer((host, int(port)), Handler)
    srv.daemon_threads = True
    srv.faults = {f for f in os.environ.get("FAULTS", "").split(",") if f}
    srv.db = Database.client(os.environ["DATABASE_URL"])
    srv.serve_forever()
