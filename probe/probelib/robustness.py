"""Robustness scenarios (category H of the rules): each bounded in time, each with a verdict.

Every scenario returns a dict ``{"id", "description", "expected", "observed", "passed",
"skipped", "level", "details"}``. Scenarios that need the server's memory figures read
``/proc/PID/status`` (VmRSS, summed over forked children) and are skipped without ``--server-pid``.
"""

from __future__ import annotations

import asyncio
import os
import resource
import socket
import time
from dataclasses import dataclass

from .attacks import process_tree
from .client import exchange, linger_zero, open_socket
from .wire import Garbage, parse_responses

GET = b"GET /plaintext HTTP/1.1\r\nHost: h\r\n\r\n"
JSON = b'{"name":"A","email":"a@b","age":1}'
POST = (
    b"POST /users HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(JSON)
    + JSON
)


@dataclass
class Options:
    timeout: float = 2.0
    header_timeout: float = 10.0
    body_timeout: float = 10.0
    server_pid: int | None = None
    idle_connections: int = 5000
    quick: bool = False
    # Trickle scenarios (H-trickle-body, H-trickle-read): one byte every `trickle_gap` seconds
    # (default: a quarter of the body timeout, at most 0.5 s, so no single wait reaches the
    # server's per-read timeout), and the time by which the server must have cut the slow client
    # (a minimum data rate or a total deadline; the engine's defaults cut it after about 10 s).
    trickle_gap: float | None = None
    slow_client_deadline: float = 15.0

    def gap(self) -> float:
        return self.trickle_gap if self.trickle_gap is not None else min(0.5, self.body_timeout / 4)


def rss_kib(pid: int) -> int | None:
    """VmRSS of ``pid`` plus its descendants (threads share the process's figure), in KiB."""
    total = 0
    for p in process_tree(pid):
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
                        break
        except OSError:
            if p == pid:
                return None
    return total


def _result(sid: str, description: str, expected: str, passed: bool, observed: str, **details) -> dict:
    return {
        "id": sid,
        "category": "H",
        "level": "MUST",
        "description": description,
        "expected": expected,
        "observed": observed,
        "passed": passed,
        "skipped": False,
        "details": details,
    }


def _skipped(sid: str, description: str, expected: str, why: str) -> dict:
    r = _result(sid, description, expected, False, f"skipped: {why}")
    r["skipped"] = True
    return r


async def served(host: str, port: int, timeout: float) -> tuple[bool, float, str]:
    """Whether a fresh client gets 200 for GET /plaintext within ``timeout``."""
    t0 = time.monotonic()
    obs = await exchange(host, port, [GET], timeout=timeout, want_responses=1)
    ok = bool(obs.finals) and obs.finals[0].status == 200
    return ok, time.monotonic() - t0, obs.summary()


async def _read_until_close(loop, sock: socket.socket, deadline: float) -> tuple[bytes, str, float]:
    """Read until EOF/reset or the deadline; returns (data, how, time of close)."""
    buf = bytearray()
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return bytes(buf), "", 0.0
        try:
            data = await asyncio.wait_for(loop.sock_recv(sock, 65536), left)
        except TimeoutError:
            return bytes(buf), "", 0.0
        except OSError:
            return bytes(buf), "reset", time.monotonic()
        if not data:
            return bytes(buf), "eof", time.monotonic()
        buf += data


def _statuses(data: bytes) -> list[int]:
    try:
        resps, _, _ = parse_responses(data, True)
    except Garbage as g:
        resps = g.responses
    return [r.status for r in resps]


async def slowloris(host: str, port: int, o: Options) -> dict:
    """Header section trickled forever: the server must answer 408 or close within its header
    timeout (plus a margin), however often bytes arrive."""
    sid, desc = "H-slowloris-headers", "header lines trickled every 0.5 s, never finishing the section"
    margin = max(2.0, 0.5 * o.header_timeout)
    expected = f"408 or close within the header timeout ({o.header_timeout:g} s) + {margin:g} s"
    loop = asyncio.get_running_loop()
    sock = await open_socket(host, port, o.timeout)
    t0 = time.monotonic()
    deadline = t0 + o.header_timeout + margin

    async def trickle() -> None:
        try:
            await loop.sock_sendall(sock, b"GET /plaintext HTTP/1.1\r\nHost: h\r\n")
            i = 0
            while True:
                await asyncio.sleep(0.5)
                await loop.sock_sendall(sock, b"X-%d: a\r\n" % i)
                i += 1
        except OSError:
            return

    t = asyncio.create_task(trickle())
    try:
        data, how, t_close = await _read_until_close(loop, sock, deadline)
    finally:
        t.cancel()
        linger_zero(sock)
        sock.close()
    return _timeout_verdict(sid, desc, expected, data, how, t_close - t0, deadline - t0)


async def slow_body(host: str, port: int, o: Options) -> dict:
    """Headers complete, body stalls after 10 bytes: 408 or close within the body timeout."""
    sid, desc = "H-slow-body", "POST with Content-Length 34, 10 body bytes, then silence"
    margin = max(2.0, 0.5 * o.body_timeout)
    expected = f"408 or close within the body timeout ({o.body_timeout:g} s) + {margin:g} s; handler never answers 2xx"
    loop = asyncio.get_running_loop()
    sock = await open_socket(host, port, o.timeout)
    t0 = time.monotonic()
    try:
        await loop.sock_sendall(sock, POST[: len(POST) - len(JSON) + 10])
        data, how, t_close = await _read_until_close(loop, sock, t0 + o.body_timeout + margin)
    finally:
        linger_zero(sock)
        sock.close()
    return _timeout_verdict(sid, desc, expected, data, how, t_close - t0, o.body_timeout + margin)


async def trickle_body(host: str, port: int, o: Options) -> dict:
    """A body trickled one byte at a time, each byte well within the body timeout: only a minimum
    body rate or a total body deadline (nginx's per-read `client_body_timeout` alone never fires)
    stops it. The server must answer 408 or close within `slow_client_deadline`."""
    gap, limit = o.gap(), o.slow_client_deadline
    sid = "H-trickle-body"
    desc = f"POST with Content-Length 1000, body trickled one byte every {gap:g} s"
    margin = 2.0
    expected = (
        f"408 (or a refusal, never 2xx) and close within {limit:g} s + {margin:g} s"
        " (minimum body rate or total body deadline)"
    )
    loop = asyncio.get_running_loop()
    sock = await open_socket(host, port, o.timeout)
    head = b"POST /users HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
    t0 = time.monotonic()

    async def trickle() -> None:
        try:
            await loop.sock_sendall(sock, head)
            for _ in range(1000):
                await asyncio.sleep(gap)
                await loop.sock_sendall(sock, b" ")
        except OSError:
            return

    t = asyncio.create_task(trickle())
    try:
        data, how, t_close = await _read_until_close(loop, sock, t0 + limit + margin)
    finally:
        t.cancel()
        linger_zero(sock)
        sock.close()
    st = _statuses(data)
    if not how:
        return _result(sid, desc, expected, False, f"still open after {limit + margin:.1f} s; responses {st}")
    # 408, or any refusal before the body was read (a route that does not read bodies); never 2xx.
    return _result(
        sid,
        desc,
        expected,
        not any(200 <= s < 300 for s in st),
        f"{'/'.join(map(str, st)) or 'no response'}, then {how} after {t_close - t0:.1f} s",
        seconds=round(t_close - t0, 2),
    )


# Linux TCP states (include/net/tcp_states.h), from the first byte of TCP_INFO.
_TCP_ESTABLISHED, _TCP_CLOSE = 1, 7


def _peer_ended(sock: socket.socket) -> str:
    """How the peer ended the connection, seen from the kernel's state (a reset or FIN is not
    visible to a reader that still has buffered bytes to read): "" while established."""
    state = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0]
    if state == _TCP_ESTABLISHED:
        return ""
    return "reset" if state == _TCP_CLOSE else "closed (FIN)"


async def trickle_read(host: str, port: int, o: Options) -> dict:
    """Responses read one byte at a time: the client pipelines GETs whose answers fill the socket
    buffers (small receive buffer), then reads one byte every `trickle_gap` seconds. The server
    must cut it (minimum send rate or write timeout) within `slow_client_deadline`, instead of
    holding the connection and its output for as long as the client keeps reading a little."""
    gap, limit = o.gap(), o.slow_client_deadline
    sid = "H-trickle-read"
    desc = f"60000 pipelined GET /plaintext (MBs of responses, more than socket buffers hold), read one byte every {gap:g} s (4 KiB receive buffer)"
    margin = 2.0
    expected = f"server closes or resets within {limit:g} s + {margin:g} s"
    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    await asyncio.wait_for(loop.sock_connect(sock, (host, port)), o.timeout)
    t0 = time.monotonic()

    async def send() -> None:
        try:
            await loop.sock_sendall(sock, GET * 60000)
        except OSError:
            return

    sender = asyncio.create_task(send())
    got, how, took = 0, "", 0.0
    deadline = t0 + limit + margin
    try:
        while time.monotonic() < deadline:
            how = _peer_ended(sock)
            if how:
                took = time.monotonic() - t0
                break
            try:
                data = await asyncio.wait_for(loop.sock_recv(sock, 1), max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                break
            except OSError:
                how, took = "reset", time.monotonic() - t0
                break
            if not data:
                how, took = "eof", time.monotonic() - t0
                break
            got += len(data)
            await asyncio.sleep(gap)
    finally:
        sender.cancel()
        linger_zero(sock)
        sock.close()
    if not how:
        return _result(sid, desc, expected, False, f"still open after {limit + margin:.1f} s; {got} bytes read")
    return _result(
        sid, desc, expected, True, f"server {how} after {took:.1f} s; {got} bytes read", seconds=round(took, 2)
    )


def _timeout_verdict(
    sid: str, description: str, expected: str, data: bytes, how: str, took: float, waited: float
) -> dict:
    """Verdict of a slow-client scenario: the server must have closed (`how` says how) before the
    probe stopped waiting, and every response it sent before closing must be 408."""
    st = _statuses(data)
    if not how:
        return _result(sid, description, expected, False, f"still open after {waited:.1f} s; responses {st}")
    return _result(
        sid,
        description,
        expected,
        all(s == 408 for s in st),
        f"{'/'.join(map(str, st)) or 'no response'}, then {how} after {took:.1f} s",
        seconds=round(took, 2),
    )


def _raise_nofile(need: int) -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < need:
        new = need if hard == resource.RLIM_INFINITY else min(need, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
        except (ValueError, OSError):
            pass
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


async def idle_connections(host: str, port: int, o: Options) -> dict:
    """N keep-alive connections that each made one request and then stay idle; a new client
    must still be served promptly. Reports server memory per idle connection with a PID."""
    n = o.idle_connections
    sid, desc = "H-idle-connections", f"{n} idle keep-alive connections (one request each), then a new client"
    expected = f"the new client is answered within {o.timeout:g} s"
    limit = _raise_nofile(n + 256)
    if limit < n + 64:
        return _skipped(sid, desc, expected, f"RLIMIT_NOFILE is {limit}")
    loop = asyncio.get_running_loop()
    rss0 = rss_kib(o.server_pid) if o.server_pid else None
    socks: list[socket.socket] = []
    answered = 0
    sem = asyncio.Semaphore(256)

    async def one() -> None:
        nonlocal answered
        async with sem:
            try:
                s = await open_socket(host, port, 10.0)
            except (TimeoutError, OSError):
                return
            socks.append(s)
            try:
                await loop.sock_sendall(s, GET)
                buf = b""
                end = time.monotonic() + 10.0
                while b"Hello, World!" not in buf and time.monotonic() < end:
                    d = await asyncio.wait_for(loop.sock_recv(s, 4096), end - time.monotonic())
                    if not d:
                        return
                    buf += d
                if b"Hello, World!" in buf:
                    answered += 1
            except (TimeoutError, OSError):
                return

    t0 = time.monotonic()
    try:
        await asyncio.gather(*(one() for _ in range(n)))
        opened = time.monotonic() - t0
        await asyncio.sleep(0.5)
        rss1 = rss_kib(o.server_pid) if o.server_pid else None
        ok, took, summary = await served(host, port, o.timeout)
        still_open = 0
        for s in socks:
            try:
                d = s.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
                still_open += 1 if d else 0
            except BlockingIOError:
                still_open += 1
            except OSError:
                pass
    finally:
        for s in socks:
            linger_zero(s)
            s.close()
    details = {"opened": len(socks), "answered": answered, "still_open": still_open, "open_seconds": round(opened, 2)}
    mem = ""
    if rss0 is not None and rss1 is not None:
        details.update(rss_before_kib=rss0, rss_after_kib=rss1)
        if rss1 >= rss0:
            per = (rss1 - rss0) * 1024 / max(answered, 1)
            details["bytes_per_idle_connection"] = round(per)
            mem = f"; server RSS +{rss1 - rss0} KiB = {per / 1024:.1f} KiB per connection"
        else:
            # The server freed more than the connections cost (GC, allocator): no figure.
            mem = f"; server RSS fell by {rss0 - rss1} KiB (no per-connection figure)"
    passed = ok and answered == n
    observed = (
        f"{answered}/{n} idle connections answered in {opened:.1f} s, {still_open} still open; "
        f"new client {'answered' if ok else 'NOT answered'} in {took:.2f} s ({summary}){mem}"
    )
    return _result(sid, desc, expected + f"; all {n} idle connections answered", passed, observed, **details)


async def huge_header(host: str, port: int, o: Options) -> dict:
    sid, desc = "H-huge-header-line", "one 1 MiB header line"
    expected = "431 (or 400), then close"
    req = b"GET /plaintext HTTP/1.1\r\nHost: h\r\nX-Big: " + b"a" * (1 << 20) + b"\r\n\r\n"
    obs = await exchange(
        host, port, [req[i : i + 65536] for i in range(0, len(req), 65536)], timeout=max(o.timeout, 5.0)
    )
    st = [r.status for r in obs.finals]
    ok = len(st) == 1 and st[0] in (431, 400) and obs.closed and not obs.garbage
    return _result(sid, desc, expected, ok, obs.summary())


async def pipeline_no_read(host: str, port: int, o: Options) -> dict:
    """Pipelined requests without ever reading the responses: server memory must stay bounded."""
    sid, desc = "H-pipeline-no-read", "client pipelines GET /plaintext for seconds without reading"
    expected = "server RSS grows by < 64 MiB; a new client is still served"
    if not o.server_pid:
        return _skipped(sid, desc, expected, "needs --server-pid")
    duration = 5.0 if o.quick else 10.0
    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    # Small receive buffer so the server's output backs up quickly instead of filling our kernel.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    await asyncio.wait_for(loop.sock_connect(sock, (host, port)), o.timeout)
    rss0 = rss_kib(o.server_pid) or 0
    peak = rss0
    sent = 0
    blocked = False
    closed = ""
    chunk = GET * 512
    t0 = time.monotonic()
    try:
        while time.monotonic() - t0 < duration:
            try:
                await asyncio.wait_for(loop.sock_sendall(sock, chunk), 1.0)
                sent += len(chunk)
            except TimeoutError:
                blocked = True  # the server stopped reading: back-pressure works
            except OSError as e:
                closed = f"server closed/reset ({e.errno})"
                break
            r = rss_kib(o.server_pid)
            if r:
                peak = max(peak, r)
        ok_served, took, summary = await served(host, port, o.timeout)
    finally:
        linger_zero(sock)
        sock.close()
    growth = peak - rss0
    passed = growth < 64 * 1024 and ok_served
    observed = (
        f"sent {sent // len(GET)} requests ({sent >> 20} MiB) in {duration:g} s"
        f"{', server stopped reading' if blocked else ''}{', ' + closed if closed else ''}; "
        f"RSS {rss0} -> peak {peak} KiB (+{growth} KiB); new client {'served' if ok_served else 'NOT served: ' + summary} in {took:.2f} s"
    )
    return _result(
        sid, desc, expected, passed, observed, rss_before_kib=rss0, rss_peak_kib=peak, requests_sent=sent // len(GET)
    )


async def half_close(host: str, port: int, o: Options) -> dict:
    sid, desc = "H-half-close", "complete request, then shutdown(SHUT_WR)"
    expected = "200 response delivered"
    obs = await exchange(host, port, [GET], timeout=o.timeout, half_close=True, want_responses=1)
    ok = bool(obs.finals) and obs.finals[0].status == 200
    return _result(sid, desc, expected, ok, obs.summary())


async def reset_mid_request(host: str, port: int, o: Options) -> dict:
    sid, desc = "H-reset-mid-request", "100 connections reset (RST) in the middle of a request (headers or body)"
    expected = "server keeps serving new clients"
    loop = asyncio.get_running_loop()
    partials = [GET[:20], GET[:-2], POST[: len(POST) - 10]]
    for i in range(100):
        try:
            s = await open_socket(host, port, o.timeout)
        except (TimeoutError, OSError) as e:
            return _result(sid, desc, expected, False, f"connect {i} failed: {e!r}")
        try:
            await loop.sock_sendall(s, partials[i % len(partials)])
            await asyncio.sleep(0.005)
        except OSError:
            pass
        linger_zero(s)
        s.close()
    await asyncio.sleep(0.2)
    ok, took, summary = await served(host, port, o.timeout)
    return _result(
        sid, desc, expected, ok, f"new client {'served' if ok else 'NOT served'} in {took:.2f} s ({summary})"
    )


async def reset_mid_response(host: str, port: int, o: Options) -> dict:
    sid, desc = "H-reset-mid-response", "20 connections pipeline 2000 requests, read 100 bytes, then reset"
    expected = "server keeps serving new clients (and its process stays alive)"
    loop = asyncio.get_running_loop()
    for i in range(20):
        try:
            s = await open_socket(host, port, o.timeout)
        except (TimeoutError, OSError) as e:
            return _result(sid, desc, expected, False, f"connect {i} failed: {e!r}")
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            await asyncio.wait_for(loop.sock_sendall(s, GET * 2000), o.timeout)
            await asyncio.wait_for(loop.sock_recv(s, 100), o.timeout)
        except (TimeoutError, OSError):
            pass
        linger_zero(s)
        s.close()
    await asyncio.sleep(0.2)
    alive = True
    if o.server_pid:
        try:
            os.kill(o.server_pid, 0)
        except OSError:
            alive = False
    ok, took, summary = await served(host, port, o.timeout)
    return _result(
        sid,
        desc,
        expected,
        ok and alive,
        f"new client {'served' if ok else 'NOT served'} in {took:.2f} s ({summary}){'' if alive else '; server process gone'}",
    )


async def one_byte_writes(
    host: str, port: int, o: Options, req: bytes, sid: str, what: str, status: int, needle: bytes
) -> dict:
    desc = f"{what} sent one byte per write (TCP_NODELAY, 2 ms apart)"
    expected = f"{status} with the same body as when sent whole"
    obs = await exchange(
        host,
        port,
        [req[i : i + 1] for i in range(len(req))],
        timeout=o.timeout + 0.002 * len(req) * 3,
        want_responses=1,
        write_gap=0.002,
    )
    ok = bool(obs.finals) and obs.finals[0].status == status and needle in obs.finals[0].body
    return _result(sid, desc, expected, ok, obs.summary())


async def _guarded(sid: str, coro) -> dict:
    """Run one scenario; if it raises (a server too slow even to accept, a socket error the
    scenario did not plan for), it fails with the error as its observation instead of aborting
    every other scenario of the run."""
    try:
        return await coro
    except (OSError, TimeoutError) as e:
        return _result(
            sid, sid, "the scenario completes", False, f"probe could not complete it: {type(e).__name__}: {e}"
        )


async def run_all(host: str, port: int, o: Options) -> list[dict]:
    """Run every scenario. Slow ones (waiting for server timeouts) run concurrently with the rest;
    the connection-heavy ones run alone so they do not disturb each other. A scenario that raises
    fails on its own (see `_guarded`)."""
    slow = asyncio.gather(
        _guarded("H-slowloris-headers", slowloris(host, port, o)),
        _guarded("H-slow-body", slow_body(host, port, o)),
        _guarded("H-trickle-body", trickle_body(host, port, o)),
        _guarded("H-trickle-read", trickle_read(host, port, o)),
    )
    out = []
    out.append(
        await _guarded(
            "H-one-byte-per-write",
            one_byte_writes(host, port, o, GET, "H-one-byte-per-write", "GET /plaintext", 200, b"Hello, World!"),
        )
    )
    out.append(
        await _guarded(
            "H-one-byte-per-write-post",
            one_byte_writes(
                host, port, o, POST, "H-one-byte-per-write-post", "POST /users with a JSON body", 201, b"a@b"
            ),
        )
    )
    out.append(await _guarded("H-half-close", half_close(host, port, o)))
    # Idle connections before the memory-heavy scenarios, so its per-connection RSS figure is not
    # disturbed by memory another scenario made the server allocate (or free).
    out.append(await _guarded("H-idle-connections", idle_connections(host, port, o)))
    out.append(await _guarded("H-huge-header-line", huge_header(host, port, o)))
    out.append(await _guarded("H-reset-mid-request", reset_mid_request(host, port, o)))
    out.append(await _guarded("H-reset-mid-response", reset_mid_response(host, port, o)))
    out.append(await _guarded("H-pipeline-no-read", pipeline_no_read(host, port, o)))
    from . import paths  # imports this module: load it late

    out.append(await _guarded("H-path-equivalent-spellings", paths.equivalent_spellings(host, port, o)))
    out.append(await _guarded("H-path-ambiguous-spellings", paths.ambiguous_spellings(host, port, o)))
    out = list(await slow) + out
    return out
