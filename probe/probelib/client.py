"""One exchange with the server over a fresh TCP connection.

"Closed" is decided robustly: the connection counts as closed by the server when a read returns
EOF or fails with ECONNRESET/EPIPE before the per-exchange deadline. A server that answers and
then keeps the connection open shows up as ``closed=False`` once the deadline passes.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from dataclasses import dataclass, field

from .wire import Garbage, Response, parse_responses


@dataclass
class Observation:
    """What the probe saw on one connection."""

    responses: list[Response] = field(default_factory=list)
    closed: bool = False  # server closed (EOF or reset) before the deadline
    close_kind: str = ""  # "eof", "reset" or "" (still open at the deadline)
    garbage: str = ""  # description if the bytes could not be framed as responses
    leftover: bytes = b""  # unparsed bytes at the end (incomplete response)
    error: str = ""  # connect failure etc.
    elapsed: float = 0.0

    @property
    def finals(self) -> list[Response]:
        return [r for r in self.responses if r.status >= 200]

    @property
    def interims(self) -> list[Response]:
        return [r for r in self.responses if r.status < 200]

    def summary(self) -> str:
        """Short human-readable description, used as ``observed`` in reports."""
        if self.error:
            return f"error: {self.error}"
        parts = [" ".join(str(r.status) for r in self.responses) or "no response"]
        if self.garbage:
            parts.append(f"garbage ({self.garbage})")
        elif self.leftover:
            parts.append(f"incomplete response ({len(self.leftover)} bytes)")
        if self.closed:
            parts.append("then closed" if self.close_kind == "eof" else "then reset")
        else:
            parts.append("connection left open")
        return ", ".join(parts)


def linger_zero(sock: socket.socket) -> None:
    """Make close() send RST: no TIME_WAIT on our side (sweeps open >100k connections)."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass


async def open_socket(host: str, port: int, timeout: float) -> socket.socket:
    """Connect a non-blocking socket with TCP_NODELAY (so split writes stay split)."""
    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setblocking(False)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        await asyncio.wait_for(loop.sock_connect(sock, (host, port)), timeout)
    except BaseException:
        sock.close()
        raise
    return sock


async def exchange(
    host: str,
    port: int,
    writes: list[bytes],
    *,
    timeout: float = 2.0,
    want_responses: int | None = None,
    half_close: bool = False,
    head_indices: frozenset[int] = frozenset(),
    write_gap: float = 0.0,
) -> Observation:
    """Send ``writes`` (one send per element) and collect responses until close or deadline.

    If ``want_responses`` is set, return as soon as that many final responses arrived (without
    waiting for a close); otherwise read until the server closes or ``timeout`` expires.
    Reading runs concurrently with writing, so a server that answers early (e.g. 431 for a huge
    header) and closes is observed correctly.
    """
    loop = asyncio.get_running_loop()
    obs = Observation()
    t0 = time.monotonic()
    deadline = t0 + timeout
    try:
        sock = await open_socket(host, port, timeout)
    except (TimeoutError, OSError) as e:
        obs.error = f"connect: {e!r}"
        return obs

    async def writer() -> None:
        try:
            for i, chunk in enumerate(writes):
                if i and write_gap:
                    await asyncio.sleep(write_gap)
                await loop.sock_sendall(sock, chunk)
            if half_close:
                sock.shutdown(socket.SHUT_WR)
        except OSError:
            # The server closed or reset while we were still sending; the reader sees it.
            pass

    wtask = asyncio.create_task(writer())
    buf = bytearray()
    eof = False
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                data = await asyncio.wait_for(loop.sock_recv(sock, 65536), remaining)
            except TimeoutError:
                break
            except ConnectionResetError:
                obs.closed, obs.close_kind = True, "reset"
                break
            except OSError as e:
                obs.closed, obs.close_kind = True, f"reset ({e.errno})"
                break
            if not data:
                obs.closed, obs.close_kind, eof = True, "eof", True
                break
            buf += data
            if want_responses is not None:
                try:
                    resps, _, _ = parse_responses(bytes(buf), False, head_indices)
                except Garbage:
                    continue
                if sum(1 for r in resps if r.status >= 200) >= want_responses:
                    break
    finally:
        wtask.cancel()
        # The writer was cancelled or hit a closed socket; both are expected here.
        await asyncio.gather(wtask, return_exceptions=True)
        linger_zero(sock)
        sock.close()
    obs.elapsed = time.monotonic() - t0
    try:
        resps, consumed, _pending = parse_responses(bytes(buf), eof or obs.closed, head_indices)
        obs.responses = resps
        obs.leftover = bytes(buf[consumed:])
    except Garbage as g:
        obs.garbage = str(g)
        obs.responses = g.responses
    return obs
