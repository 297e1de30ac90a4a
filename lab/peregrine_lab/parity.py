"""Parity check: before any timing, every (server, scenario) is sent the contract's request and
its answer is compared with the contract. A cell whose server does not answer as the contract
says is reported with the reasons and not measured: a fast wrong answer is not a result.

The client is written on a raw socket rather than http.client so that the check sees the bytes as
sent: duplicate or conflicting framing headers, a Content-Length that disagrees with the body, or
a connection that is not kept alive (the load generator needs keep-alive) are all reported.
"""

from __future__ import annotations

import json
import socket
import time
from dataclasses import dataclass, field

from .peers import Scenario


class ProtocolError(Exception):
    """The bytes received are not a well-formed HTTP/1.1 response."""


@dataclass
class Response:
    version: str
    status: int
    reason: str
    headers: list[tuple[str, str]]
    body: bytes

    def values(self, name: str) -> list[str]:
        name = name.lower()
        return [v for n, v in self.headers if n.lower() == name]

    def first(self, name: str) -> str | None:
        vals = self.values(name)
        return vals[0] if vals else None


def build_request(scenario: Scenario, host: str, port: int) -> bytes:
    """The request of the contract, as the load generator will send it (plus Host)."""
    lines = [f"{scenario.method} {scenario.path} HTTP/1.1", f"Host: {host}:{port}"]
    for k, v in scenario.headers.items():
        lines.append(f"{k}: {v}")
    if scenario.body or scenario.method in ("POST", "PUT", "PATCH"):
        lines.append(f"Content-Length: {len(scenario.body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + scenario.body


class _Reader:
    def __init__(self, sock: socket.socket, deadline: float):
        self.sock = sock
        self.buf = b""
        self.deadline = deadline
        self.eof = False

    def _fill(self) -> bool:
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise ProtocolError("timed out waiting for the response")
        self.sock.settimeout(remaining)
        try:
            chunk = self.sock.recv(65536)
        except TimeoutError as e:
            raise ProtocolError("timed out waiting for the response") from e
        except ConnectionError as e:
            raise ProtocolError(f"connection error: {e}") from e
        if not chunk:
            self.eof = True
            return False
        self.buf += chunk
        return True

    def until(self, marker: bytes, limit: int = 65536) -> bytes:
        while True:
            i = self.buf.find(marker)
            if i >= 0:
                out, self.buf = self.buf[:i], self.buf[i + len(marker) :]
                return out
            if len(self.buf) > limit:
                raise ProtocolError(f"no {marker!r} within {limit} bytes")
            if not self._fill():
                raise ProtocolError(
                    f"connection closed before {marker!r} ({len(self.buf)} bytes pending)"
                )

    def exactly(self, n: int) -> bytes:
        while len(self.buf) < n:
            if not self._fill():
                raise ProtocolError(f"connection closed after {len(self.buf)} of {n} body bytes")
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def rest(self) -> bytes:
        while self._fill():
            pass
        out, self.buf = self.buf, b""
        return out


def _parse_head(head: bytes) -> tuple[str, int, str, list[tuple[str, str]]]:
    try:
        text = head.decode("latin-1")
    except UnicodeDecodeError as e:  # pragma: no cover - latin-1 decodes everything
        raise ProtocolError(str(e)) from e
    lines = text.split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/"):
        raise ProtocolError(f"bad status line {lines[0]!r}")
    try:
        status = int(parts[1])
    except ValueError as e:
        raise ProtocolError(f"bad status code in {lines[0]!r}") from e
    headers = []
    for line in lines[1:]:
        if ":" not in line:
            raise ProtocolError(f"bad header line {line!r}")
        name, value = line.split(":", 1)
        if name != name.strip() or not name:
            raise ProtocolError(f"bad header name in {line!r}")
        headers.append((name, value.strip(" \t")))
    return parts[0], status, parts[2] if len(parts) > 2 else "", headers


def read_response(reader: _Reader, method: str) -> Response:
    while True:
        head = reader.until(b"\r\n\r\n")
        version, status, reason, headers = _parse_head(head)
        if 100 <= status < 200 and status != 101:
            continue  # interim response: the final one follows
        break
    resp = Response(version, status, reason, headers, b"")
    te = [v.lower() for v in resp.values("transfer-encoding")]
    cl = resp.values("content-length")
    if te and cl:
        raise ProtocolError("both Transfer-Encoding and Content-Length in the response")
    if method == "HEAD" or status in (204, 304):
        return resp
    if te:
        if te[-1].split(",")[-1].strip() != "chunked":
            raise ProtocolError(f"unsupported Transfer-Encoding {te!r}")
        body = b""
        while True:
            size_line = reader.until(b"\r\n", limit=1024).split(b";", 1)[0].strip()
            try:
                size = int(size_line, 16)
            except ValueError as e:
                raise ProtocolError(f"bad chunk size {size_line!r}") from e
            if size == 0:
                while reader.until(b"\r\n", limit=8192):
                    pass  # trailer fields
                break
            body += reader.exactly(size)
            if reader.exactly(2) != b"\r\n":
                raise ProtocolError("chunk data not followed by CRLF")
        resp.body = body
        return resp
    if cl:
        if len(set(cl)) != 1 or len(cl) != 1:
            raise ProtocolError(f"several Content-Length values {cl!r}")
        if not cl[0].isdigit():
            raise ProtocolError(f"bad Content-Length {cl[0]!r}")
        resp.body = reader.exactly(int(cl[0]))
        return resp
    resp.body = reader.rest()
    return resp


def exchange(
    host: str, port: int, scenario: Scenario, count: int = 2, timeout: float = 5.0
) -> list[Response]:
    """Send the scenario's request `count` times on one connection, one after the other."""
    req = build_request(scenario, host, port)
    out = []
    with socket.create_connection((host, port), timeout=timeout) as sock:
        reader = _Reader(sock, time.monotonic() + timeout)
        for i in range(count):
            try:
                sock.sendall(req)
            except OSError as e:
                raise ProtocolError(f"request {i + 1}: cannot send: {e}") from e
            out.append(read_response(reader, scenario.method))
            reader.deadline = time.monotonic() + timeout
    return out


def _expected_json(scenario: Scenario):
    exp = scenario.expect
    if "json" in exp:
        return exp["json"]
    if "json_file" in exp:
        return json.loads((scenario.contract_dir / exp["json_file"]).read_text())
    return None


def _short(b: bytes, n: int = 120) -> str:
    s = b.decode("utf-8", errors="replace")
    return s if len(s) <= n else s[:n] + f"... ({len(b)} bytes)"


def check_response(scenario: Scenario, resp: Response, required_headers: list[str]) -> list[str]:
    """Every way `resp` differs from the contract of `scenario`, as readable sentences."""
    exp = scenario.expect
    problems = []
    if "status" in exp and resp.status != exp["status"]:
        problems.append(f"status {resp.status}, expected {exp['status']}")
    for name in list(required_headers) + [h.lower() for h in exp.get("headers", [])]:
        if not resp.values(name):
            problems.append(f"missing header {name}")
    for name in exp.get("absent_headers", []):
        if resp.values(name):
            problems.append(f"header {name} present ({resp.first(name)!r}), must be absent")
    for name, want in exp.get("header_values", {}).items():
        got = resp.values(name)
        if not got:
            problems.append(f"missing header {name} (expected {want!r})")
        elif got != [want]:
            problems.append(f"header {name} is {', '.join(got)!r}, expected {want!r}")
    prefix = exp.get("content_type_prefix")
    if prefix is not None:
        ct = resp.first("content-type")
        if ct is None:
            problems.append(f"missing Content-Type (expected {prefix}...)")
        elif not ct.lower().startswith(prefix.lower()):
            problems.append(f"Content-Type {ct!r}, expected {prefix}...")
    if "body" in exp:
        want = exp["body"].encode()
        if resp.body != want:
            problems.append(f"body {_short(resp.body)!r}, expected {_short(want)!r}")
    want_json = _expected_json(scenario)
    if want_json is not None:
        try:
            got = json.loads(resp.body)
        except ValueError:
            problems.append(f"body is not JSON: {_short(resp.body)!r}")
        else:
            if got != want_json:
                problems.append(
                    f"JSON body {_short(json.dumps(got).encode())} differs from "
                    f"the contract's {_short(json.dumps(want_json).encode())}"
                )
    return problems


@dataclass
class ParityResult:
    scenario: str
    ok: bool
    problems: list[str] = field(default_factory=list)
    status: int | None = None
    headers: list[tuple[str, str]] = field(default_factory=list)
    body_bytes: int | None = None

    def to_json(self) -> dict:
        return {
            "ok": self.ok,
            "problems": self.problems,
            "status": self.status,
            "headers": [list(h) for h in self.headers],
            "body_bytes": self.body_bytes,
        }


def check(
    host: str, port: int, scenario: Scenario, required_headers: list[str], timeout: float = 5.0
) -> ParityResult:
    """Send the request twice on one keep-alive connection and check both answers."""
    try:
        responses = exchange(host, port, scenario, count=2, timeout=timeout)
    except (ProtocolError, OSError) as e:
        # One more try with a single request, to tell "wrong" from "does not keep alive".
        try:
            single = exchange(host, port, scenario, count=1, timeout=timeout)
        except (ProtocolError, OSError) as e2:
            return ParityResult(scenario.name, False, [f"no valid response: {e2}"])
        problems = check_response(scenario, single[0], required_headers)
        problems.append(
            f"second request on the same connection failed ({e}): the load "
            "generator needs keep-alive"
        )
        r = single[0]
        return ParityResult(scenario.name, False, problems, r.status, r.headers, len(r.body))
    problems = []
    for i, r in enumerate(responses):
        for p in check_response(scenario, r, required_headers):
            tagged = p if i == 0 else f"second request: {p}"
            if p not in problems:
                problems.append(tagged)
    first = responses[0]
    conn = [v.lower() for v in first.values("connection")]
    if any("close" in v for v in conn):
        problems.append("answered with Connection: close: the load generator needs keep-alive")
    return ParityResult(
        scenario.name, not problems, problems, first.status, first.headers, len(first.body)
    )
