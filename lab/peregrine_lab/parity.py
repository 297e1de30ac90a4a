"""Parity check: before any timing, every (server, scenario) is sent the contract's request and
its answer is compared with the contract. A cell whose server does not answer as the contract
says is reported with the reasons and not measured: a fast wrong answer is not a result.

The client is written on a raw socket rather than http.client so that the check sees the bytes as
sent: duplicate or conflicting framing headers, a Content-Length that disagrees with the body, or
a connection that is not kept alive (the load generator needs keep-alive) are all reported.
"""

from __future__ import annotations

import email.utils
import json
import random
import socket
import time
from dataclasses import dataclass, field, replace

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
    wire_bytes: int | None = None  # the whole response as sent: head, framing and body

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
        self.received = 0  # bytes read from the socket so far (the wire length of responses)

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
        self.received += len(chunk)
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
    host: str, port: int, scenario: Scenario, count: int = 2, timeout: float = 5.0, scenarios=None
) -> list[Response]:
    """Send the scenario's request `count` times on one connection, one after the other (or,
    with `scenarios`, each of those requests in turn). Each response records its wire length."""
    todo = list(scenarios) if scenarios is not None else [scenario] * count
    out = []
    with socket.create_connection((host, port), timeout=timeout) as sock:
        reader = _Reader(sock, time.monotonic() + timeout)
        for i, scen in enumerate(todo):
            try:
                sock.sendall(build_request(scen, host, port))
            except OSError as e:
                raise ProtocolError(f"request {i + 1}: cannot send: {e}") from e
            start = reader.received - len(reader.buf)
            resp = read_response(reader, scen.method)
            resp.wire_bytes = reader.received - len(reader.buf) - start
            out.append(resp)
            reader.deadline = time.monotonic() + timeout
    return out


# ------------------------------------------------------------------ answers that must vary

_WORDS = ("peregrine", "falcon", "kestrel", "merlin", "hobby", "gyrfalcon", "lanner", "saker")


def variants(scenario: Scenario, rounds: int, seed: int = 0) -> list[Scenario]:
    """Requests of the scenario with other ids, query strings or bodies than the contract's, and
    the answers they must get: a server that answers a constant (the contract's answer, whatever
    was asked) fails them. Scenarios whose answer does not depend on the request have none."""
    rng = random.Random(f"{scenario.name}:{seed}")
    out = []
    for _ in range(rounds):
        exp = dict(scenario.expect)
        if scenario.name == "param":
            n = rng.randrange(1, 10**9)
            path, exp["json"] = f"/users/{n}", {"id": n, "name": f"user-{n}"}
            out.append(replace(scenario, path=path, expect=exp))
        elif scenario.name == "deep":
            a, b, c = (rng.randrange(0, 10**6) for _ in range(3))
            path = f"/api/v1/orgs/{a}/teams/{b}/members/{c}"
            exp["json"] = {"org": a, "team": b, "member": c}
            out.append(replace(scenario, path=path, expect=exp))
        elif scenario.name == "query":
            q = f"{rng.choice(_WORDS)} {rng.choice(_WORDS)}"
            limit = rng.randrange(1, 1000)
            path = f"/search?q={q.replace(' ', '%20')}&limit={limit}"
            exp["json"] = {"q": q, "limit": limit}
            out.append(replace(scenario, path=path, expect=exp))
        elif scenario.name == "post_json":
            user = {
                "name": f"{rng.choice(_WORDS).title()} {rng.choice(_WORDS).title()}",
                "email": f"{rng.choice(_WORDS)}{rng.randrange(1000)}@example.org",
                "age": rng.randrange(0, 120),
            }
            exp["json"] = user
            body = json.dumps(user, separators=(",", ":")).encode()
            out.append(replace(scenario, body=body, expect=exp))
    return out


def check_dates(first: Response, second: Response, seconds_apart: float) -> list[str]:
    """`Date` must parse as an IMF-fixdate (RFC 9110 §5.6.7), be near this machine's clock and
    move on between two answers taken more than a second apart: a Date rendered once at start
    (or a constant answer) fails."""
    problems = []
    stamps = []
    for which, r in (("first", first), ("second", second)):
        raw = r.first("date")
        if raw is None:
            problems.append(f"{which} answer has no Date")
            continue
        try:
            when = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError):
            problems.append(f"Date {raw!r} does not parse")
            continue
        if not raw.endswith(" GMT") or when.tzinfo is None:
            problems.append(f"Date {raw!r} is not in GMT (IMF-fixdate)")
            continue
        skew = abs(when.timestamp() - time.time())
        if skew > 5 + seconds_apart:
            problems.append(f"Date {raw!r} is {skew:.0f} s away from this machine's clock")
        stamps.append(when.timestamp())
    if len(stamps) == 2 and seconds_apart >= 1.05 and stamps[1] <= stamps[0]:
        problems.append(
            f"Date did not change in {seconds_apart:.1f} s ({first.first('date')!r}, then "
            f"{second.first('date')!r})"
        )
    return problems


def bytes_per_response_problem(
    wire_bytes: float | None, seen_bytes: int, responses: int, tolerance: float = 0.03
) -> str | None:
    """Compare the bytes per response the load generator received with the length of the
    answer the parity check saw: a server answering something else under load (a cached or
    constant answer, an error page) shows up here. A few bytes of slack for headers whose
    length may vary (a Date is fixed-length; an ETag or a counter may not be)."""
    if not wire_bytes or responses <= 0 or seen_bytes <= 0:
        return None
    per = seen_bytes / responses
    if abs(per - wire_bytes) > max(8.0, tolerance * wire_bytes):
        return (
            f"the load generator received {per:.1f} bytes per response; the parity answers "
            f"were {wire_bytes:g} bytes (mean over the requests the load spreads over)"
        )
    return None


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
    wire_bytes: int | None = None
    variants: int = 0
    load_wire_bytes: float | None = None  # mean wire length over the contract's and the variants

    def to_json(self) -> dict:
        return {
            "ok": self.ok,
            "problems": self.problems,
            "status": self.status,
            "headers": [list(h) for h in self.headers],
            "body_bytes": self.body_bytes,
            "wire_bytes": self.wire_bytes,
            "variants": self.variants,
            "load_wire_bytes": self.load_wire_bytes,
        }


def check(
    host: str,
    port: int,
    scenario: Scenario,
    required_headers: list[str],
    timeout: float = 5.0,
    rounds: int = 2,
    seed: int = 0,
) -> ParityResult:
    """Send the request twice on one keep-alive connection and check both answers; then, on the
    same connection, `rounds` requests with other ids / query strings / bodies (`variants`). The
    mean wire length over the contract's request and those is what a load run cycling through
    the same set (loadgen.request_set with this seed) must receive per response."""
    extra = variants(scenario, rounds, seed)
    try:
        responses = exchange(
            host, port, scenario, timeout=timeout, scenarios=[scenario, scenario, *extra]
        )
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
    for i, r in enumerate(responses[:2]):
        for p in check_response(scenario, r, required_headers):
            tagged = p if i == 0 else f"second request: {p}"
            if p not in problems:
                problems.append(tagged)
    for v, r in zip(extra, responses[2:], strict=True):
        for p in check_response(v, r, required_headers):
            problems.append(f"varied request {v.method} {v.path}: {p}")
    first = responses[0]
    load_set = responses[1:]
    conn = [v.lower() for v in first.values("connection")]
    if any("close" in v for v in conn):
        problems.append("answered with Connection: close: the load generator needs keep-alive")
    return ParityResult(
        scenario.name,
        not problems,
        problems,
        first.status,
        first.headers,
        len(first.body),
        first.wire_bytes,
        len(extra),
        round(sum(r.wire_bytes or 0 for r in load_set) / len(load_set), 2),
    )
