"""Generated sweeps: every invalid byte in path, query, field name and field value, and every
invalid percent-encoding pair in path and query.

Each generated request is invalid by the grammar (RFC 9112 §3, §5; RFC 9110 §5.5; RFC 3986), so
it passes when the server answers 400 and closes the connection. The full run sends about
131,000 requests (the scope of the seed's published compliance test is about 124,000), over
many parallel connections in one or more worker processes.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import time
from collections import Counter

from .client import linger_zero
from .escapes import show

HEX = set(b"0123456789abcdefABCDEF")
UNRESERVED = set(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
SUB_DELIMS = set(b"!$&'()*+,;=")
PCHAR = UNRESERVED | SUB_DELIMS | set(b":@")
TCHAR = UNRESERVED | set(b"!#$%&'*+-.^_`|~")
# Bytes that make a request-target invalid wherever they appear in the path ('%' has its own
# family; '?' starts the query and is valid).
PATH_INVALID = [b for b in range(256) if b not in PCHAR and b not in b"/%?"]
QUERY_INVALID = [b for b in range(256) if b not in PCHAR and b not in b"/?%"]
# A ':' ends a field name, so it is not an invalid name byte.
NAME_INVALID = [b for b in range(256) if b not in TCHAR and b != ord(":")]
# Field values: CTLs other than HTAB, and DEL (NUL, CR and LF included).
VALUE_INVALID = [b for b in range(256) if (b < 0x20 and b != 0x09) or b == 0x7F]

_TAIL = b" HTTP/1.1\r\nHost: h\r\n\r\n"
_HEAD = b"GET /plaintext HTTP/1.1\r\nHost: h\r\n"


def _path_req(target: bytes) -> bytes:
    return b"GET " + target + _TAIL


def _field_req(line: bytes) -> bytes:
    return _HEAD + line + b"\r\n\r\n"


def families(quick: bool) -> dict[str, list[bytes]]:
    """The generated requests, by family. ``quick`` keeps every byte family and samples the
    percent-encoding pairs (first byte any, second '0'; first '4', second any)."""
    fam: dict[str, list[bytes]] = {}
    fam["path_byte"] = [
        _path_req(t)
        for b in PATH_INVALID
        for t in (b"/" + bytes([b]) + b"plaintext", b"/plain" + bytes([b]) + b"text", b"/plaintext" + bytes([b]))
    ]
    fam["query_byte"] = [
        _path_req(t)
        for b in QUERY_INVALID
        for t in (
            b"/plaintext?" + bytes([b]) + b"a=1",
            b"/plaintext?a=" + bytes([b]) + b"1",
            b"/plaintext?a=1" + bytes([b]),
        )
    ]
    fam["field_name_byte"] = [
        _field_req(line)
        for b in NAME_INVALID
        for line in (bytes([b]) + b"X-A: v", b"X-" + bytes([b]) + b"A: v", b"X-A" + bytes([b]) + b": v")
    ]
    fam["field_value_byte"] = [
        _field_req(line)
        for b in VALUE_INVALID
        for line in (b"X-A: " + bytes([b]) + b"v", b"X-A: v" + bytes([b]) + b"w", b"X-A: v" + bytes([b]))
    ]
    if quick:
        pairs = [(a, ord("0")) for a in range(256) if a not in HEX] + [
            (ord("4"), b) for b in range(256) if b not in HEX
        ]
    else:
        pairs = [(a, b) for a in range(256) for b in range(256) if not (a in HEX and b in HEX)]
    fam["pct_path"] = [_path_req(b"/plain%" + bytes([a, b]) + b"text") for a, b in pairs]
    fam["pct_query"] = [_path_req(b"/plaintext?a=%" + bytes([a, b]) + b"&b=1") for a, b in pairs]
    return fam


class _Conn(asyncio.Protocol):
    """One sweep request: send, collect, note EOF/reset. Lean on purpose (>100k of these)."""

    __slots__ = ("buf", "closed", "done", "head", "req", "transport")

    def __init__(self, req: bytes, done: asyncio.Future):
        self.req = req
        self.buf = bytearray()
        self.done = done
        self.head = done.get_loop().create_future()  # set once a response head is complete
        self.transport = None
        self.closed = ""

    def connection_made(self, transport) -> None:
        self.transport = transport
        transport.write(self.req)

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if not self.head.done() and b"\r\n\r\n" in self.buf:
            self.head.set_result(None)

    def eof_received(self):
        self.closed = "eof"
        if not self.done.done():
            self.done.set_result(None)
        return False

    def connection_lost(self, exc) -> None:
        if not self.closed:
            self.closed = "reset" if exc else "eof"
        if not self.done.done():
            self.done.set_result(None)


def _outcome(buf: bytes, closed: str) -> str:
    """Classify a sweep result: 'ok' or a short failure label."""
    status = "none"
    if buf.startswith(b"HTTP/1.") and len(buf) >= 12:
        status = buf[9:12].decode("latin-1", "replace")
    elif buf:
        status = "garbage"
    if status == "400" and closed:
        return "ok"
    if status == "none":
        return "closed without response" if closed else "no response (timeout)"
    return f"{status}, {'closed' if closed else 'left open'}"


async def _run_slice(host: str, port: int, items: list[tuple[str, bytes]], concurrency: int, timeout: float):
    loop = asyncio.get_running_loop()
    counts: dict[str, Counter] = {}
    examples: dict[str, list[dict]] = {}
    close_wait = min(timeout, 0.3)

    async def one(fam: str, req: bytes) -> None:
        done = loop.create_future()
        outcome = ""
        try:
            transport, proto = await asyncio.wait_for(
                loop.create_connection(lambda: _Conn(req, done), host, port), timeout
            )
        except (TimeoutError, OSError) as e:
            outcome = f"connect error {type(e).__name__}"
        else:
            try:
                # Wait for the close; once a response head is in, only a short grace period
                # (a server that keeps the connection open after a 400 must not stall the sweep).
                await asyncio.wait((done, proto.head), timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
                if not done.done() and proto.head.done():
                    await asyncio.wait((done,), timeout=close_wait)
                outcome = _outcome(bytes(proto.buf), proto.closed)
            finally:
                sock = transport.get_extra_info("socket")
                if sock is not None:
                    linger_zero(sock)
                transport.abort()
        c = counts.setdefault(fam, Counter())
        c[outcome] += 1
        if outcome != "ok":
            ex = examples.setdefault(fam, [])
            if len(ex) < 10:
                ex.append({"request": show(req, 120), "observed": outcome})

    it = iter(items)

    async def worker() -> None:
        # A fixed pool of workers pulling from one iterator: bounded memory for >100k requests.
        for fam, req in it:
            await one(fam, req)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return counts, examples


def _worker(args) -> tuple[dict, dict]:
    host, port, items, concurrency, timeout = args
    return asyncio.run(_run_slice(host, port, items, concurrency, timeout))


async def run_sweeps(
    host: str, port: int, *, quick: bool, concurrency: int, timeout: float, processes: int = 0
) -> dict:
    """Run every family; returns the ``sweeps`` section of the report."""
    fams = families(quick)
    items = [(name, req) for name, reqs in fams.items() for req in reqs]
    t0 = time.monotonic()
    nproc = processes or (1 if quick else min(2, os.cpu_count() or 1))
    if nproc <= 1:
        results = [await _run_slice(host, port, items, concurrency, timeout)]
    else:
        slices = [items[i::nproc] for i in range(nproc)]
        loop = asyncio.get_running_loop()
        ctx = multiprocessing.get_context("fork")
        with ctx.Pool(nproc) as pool:
            results = await loop.run_in_executor(
                None, pool.map, _worker, [(host, port, s, concurrency, timeout) for s in slices]
            )
    duration = time.monotonic() - t0
    out: dict[str, dict] = {}
    for name, reqs in fams.items():
        counter: Counter = Counter()
        ex: list[dict] = []
        for counts, examples in results:
            counter.update(counts.get(name, {}))
            ex += examples.get(name, [])
        out[name] = {
            "total": len(reqs),
            "passed": counter.get("ok", 0),
            "outcomes": dict(counter.most_common()),
            "examples": ex[:10],
        }
    return {
        "mode": "quick" if quick else "full",
        "requests": len(items),
        "duration_s": round(duration, 1),
        "rate": round(len(items) / duration) if duration > 0 else None,
        "expectation": "400 then close",
        "families": out,
    }
