"""The soak's clients (asyncio, one event loop): a steady keep-alive load at a fixed rate,
connection churn, slow readers, clients that vanish mid-response, and long-lived WebSocket and
server-sent-event sessions against the scenarios app. Every client counts what it completed and
every error by kind into the current `Tally`, which the sampler swaps every interval.

The load is open loop per connection (each steady connection sends at its own fixed period,
whatever the previous latency), so a slow server shows as latency, not as a lower rate.
"""

from __future__ import annotations

import asyncio
import base64
import os
import socket
import struct
import time
from collections import Counter
from dataclasses import dataclass, field

# A request gets this long before it counts as a `timeout` error.
REQUEST_TIMEOUT = 5.0
# An SSE stream that sends nothing for this long (the app sends a comment every second) stalls.
SSE_STALL = 5.0


@dataclass
class Plan:
    """How much of each kind of client the soak runs."""

    steady_connections: int = 8
    steady_rate: float = 400.0  # requests per second over all steady connections
    churn_rate: float = 20.0  # new connections per second (one request each)
    slow_readers: int = 2
    slow_read_bytes: int = 2048  # bytes read per step
    slow_read_pause: float = 0.02  # seconds between steps
    vanishers: int = 2
    vanish_period: float = 0.2  # seconds between one vanishing client and the next (per loop)
    ws_sessions: int = 4
    ws_period: float = 1.0
    sse_sessions: int = 4


CI_PLAN = Plan(
    steady_connections=4,
    steady_rate=100.0,
    churn_rate=10.0,
    slow_readers=1,
    vanishers=1,
    vanish_period=0.5,
    ws_sessions=2,
    sse_sessions=2,
)


@dataclass
class Tally:
    """What the clients did during one sample interval."""

    latencies: list[float] = field(default_factory=list)  # steady requests, seconds
    ops: Counter = field(default_factory=Counter)  # completed operations by kind
    errors: Counter = field(default_factory=Counter)  # unexpected errors by kind


class ProtocolError(Exception):
    """The server answered something other than what the contract says."""

    def __init__(self, kind: str, detail: str = ""):
        super().__init__(f"{kind}: {detail}")
        self.kind = kind


def error_kind(e: BaseException) -> str:
    """The error-kind name a failure is counted under."""
    if isinstance(e, ProtocolError):
        return e.kind
    if isinstance(e, asyncio.TimeoutError | TimeoutError):
        return "timeout"
    if isinstance(e, ConnectionRefusedError):
        return "refused"
    if isinstance(e, ConnectionResetError | BrokenPipeError):
        return "reset"
    if isinstance(e, asyncio.IncompleteReadError):
        return "eof"
    if isinstance(e, OSError):
        return f"os_{e.errno}"
    return type(e).__name__


async def read_response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    """One HTTP/1.1 response: status, lower-cased headers, body (Content-Length or chunked)."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise ProtocolError("bad_status_line", lines[0][:80])
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    if "content-length" in headers:
        body = await reader.readexactly(int(headers["content-length"]))
    elif headers.get("transfer-encoding", "").lower() == "chunked":
        chunks = []
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            chunks.append(await reader.readexactly(size + 2))
            if size == 0:
                break
        body = b"".join(c[:-2] for c in chunks)
    else:
        body = b""
    return int(parts[1]), headers, body


def get(path: str, close: bool = False) -> bytes:
    extra = "Connection: close\r\n" if close else ""
    return f"GET {path} HTTP/1.1\r\nHost: soak\r\n{extra}\r\n".encode()


class Load:
    """Runs the clients of `plan` against host:port until `stop` is set."""

    def __init__(self, host: str, port: int, plan: Plan):
        self.host, self.port, self.plan = host, port, plan
        self.tally = Tally()
        self.stop = asyncio.Event()

    def swap(self) -> Tally:
        """The interval's tally; a fresh one starts."""
        done, self.tally = self.tally, Tally()
        return done

    def _error(self, e: BaseException) -> None:
        self.tally.errors[error_kind(e)] += 1

    async def _connect(self, rcvbuf: int | None = None):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        if rcvbuf:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        try:
            await asyncio.wait_for(
                asyncio.get_running_loop().sock_connect(sock, (self.host, self.port)),
                REQUEST_TIMEOUT,
            )
        except BaseException:
            sock.close()
            raise
        return await asyncio.open_connection(sock=sock)

    async def _pause(self, seconds: float) -> None:
        try:
            await asyncio.wait_for(self.stop.wait(), seconds)
        except TimeoutError:
            pass

    async def run(self) -> None:
        p = self.plan
        tasks = [self.steady(i) for i in range(p.steady_connections)]
        tasks += [self.churn()] if p.churn_rate > 0 else []
        tasks += [self.slow_reader() for _ in range(p.slow_readers)]
        tasks += [self.vanisher(i) for i in range(p.vanishers)]
        tasks += [self.ws_session(i) for i in range(p.ws_sessions)]
        tasks += [self.sse_session() for _ in range(p.sse_sessions)]
        await asyncio.gather(*tasks)

    async def steady(self, index: int) -> None:
        """A keep-alive connection sending GET /plaintext at a fixed period."""
        period = self.plan.steady_connections / self.plan.steady_rate
        # Spread the connections' sends over the period.
        next_at = time.monotonic() + period * index / self.plan.steady_connections
        while not self.stop.is_set():
            try:
                reader, writer = await self._connect()
            except Exception as e:
                self._error(e)
                await self._pause(0.5)
                continue
            try:
                while not self.stop.is_set():
                    await self._pause(max(0.0, next_at - time.monotonic()))
                    if self.stop.is_set():
                        break
                    next_at += period
                    start = time.monotonic()
                    writer.write(get("/plaintext"))
                    status, _, body = await asyncio.wait_for(read_response(reader), REQUEST_TIMEOUT)
                    if status != 200 or body != b"Hello, World!":
                        raise ProtocolError("bad_response", f"{status} {body[:40]!r}")
                    self.tally.latencies.append(time.monotonic() - start)
                    self.tally.ops["steady"] += 1
            except Exception as e:
                self._error(e)
                await self._pause(0.1)
            finally:
                writer.close()

    async def churn(self) -> None:
        """A new connection per request (`Connection: close`), at a fixed rate."""
        period = 1.0 / self.plan.churn_rate
        next_at = time.monotonic()
        inflight: set[asyncio.Task] = set()
        while not self.stop.is_set():
            await self._pause(max(0.0, next_at - time.monotonic()))
            next_at += period
            task = asyncio.create_task(self._one_churn())
            inflight.add(task)
            task.add_done_callback(inflight.discard)
        await asyncio.gather(*inflight)

    async def _one_churn(self) -> None:
        try:
            reader, writer = await self._connect()
        except Exception as e:
            self._error(e)
            return
        try:
            writer.write(get("/json", close=True))
            status, _, body = await asyncio.wait_for(read_response(reader), REQUEST_TIMEOUT)
            if status != 200 or b"Hello" not in body:
                raise ProtocolError("bad_response", f"{status} {body[:40]!r}")
            if await asyncio.wait_for(reader.read(1), REQUEST_TIMEOUT) != b"":
                raise ProtocolError("not_closed", "data after a Connection: close response")
            self.tally.ops["churn"] += 1
        except Exception as e:
            self._error(e)
        finally:
            writer.close()

    async def slow_reader(self) -> None:
        """GET /large read a little at a time through a small receive buffer."""
        p = self.plan
        while not self.stop.is_set():
            try:
                reader, writer = await self._connect(rcvbuf=4096)
            except Exception as e:
                self._error(e)
                await self._pause(0.5)
                continue
            try:
                writer.write(get("/large", close=True))
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), REQUEST_TIMEOUT)
                length = None
                for line in head.decode("latin-1").split("\r\n"):
                    if line.lower().startswith("content-length:"):
                        length = int(line.split(":", 1)[1])
                if not head.startswith(b"HTTP/1.1 200") or length is None:
                    raise ProtocolError("bad_response", head[:60].decode("latin-1"))
                got = 0
                while got < length:
                    chunk = await asyncio.wait_for(
                        reader.read(min(p.slow_read_bytes, length - got)), REQUEST_TIMEOUT
                    )
                    if not chunk:
                        raise ProtocolError("eof", f"{got} of {length} bytes")
                    got += len(chunk)
                    await asyncio.sleep(p.slow_read_pause)
                self.tally.ops["slow_read"] += 1
            except Exception as e:
                self._error(e)
            finally:
                writer.close()

    async def vanisher(self, index: int) -> None:
        """Clients that go mid-response: read the first bytes of /large or /events, then
        close (odd rounds) or reset (even rounds, SO_LINGER 0). Only a failure before the
        first byte is an error; the server must simply cope."""
        rounds = index
        while not self.stop.is_set():
            rounds += 1
            path = "/large" if rounds % 4 < 2 else "/events"
            try:
                reader, writer = await self._connect(rcvbuf=4096)
            except Exception as e:
                self._error(e)
                await self._pause(0.5)
                continue
            try:
                writer.write(get(path))
                first = await asyncio.wait_for(reader.read(512), REQUEST_TIMEOUT)
                if not first.startswith(b"HTTP/1.1 200"):
                    raise ProtocolError("bad_response", first[:60].decode("latin-1"))
                if rounds % 2 == 0:
                    sock = writer.get_extra_info("socket")
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    writer.transport.abort()
                    self.tally.ops["vanish_reset"] += 1
                else:
                    writer.close()
                    self.tally.ops["vanish_close"] += 1
            except Exception as e:
                self._error(e)
                writer.close()
            await self._pause(self.plan.vanish_period)

    async def ws_session(self, index: int) -> None:
        """A WebSocket on /ws for the whole soak: one text message per period, echoed."""
        while not self.stop.is_set():
            try:
                reader, writer = await self._connect()
            except Exception as e:
                self._error(e)
                await self._pause(1.0)
                continue
            try:
                await ws_handshake(reader, writer)
                n = 0
                while not self.stop.is_set():
                    n += 1
                    text = f"soak {index} message {n}".encode()
                    writer.write(ws_frame(0x1, text))
                    opcode, payload = await asyncio.wait_for(ws_read(reader), REQUEST_TIMEOUT)
                    if opcode != 0x1 or payload != text:
                        raise ProtocolError("ws_mismatch", f"{opcode} {payload[:40]!r}")
                    self.tally.ops["ws_echo"] += 1
                    await self._pause(self.plan.ws_period)
                writer.write(ws_frame(0x8, struct.pack("!H", 1000)))
            except Exception as e:
                self._error(e)
                await self._pause(1.0)
            finally:
                writer.close()

    async def sse_session(self) -> None:
        """An SSE stream on /events for the whole soak: its keep-alive comments keep coming."""
        while not self.stop.is_set():
            try:
                reader, writer = await self._connect()
            except Exception as e:
                self._error(e)
                await self._pause(1.0)
                continue
            try:
                writer.write(get("/events"))
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), REQUEST_TIMEOUT)
                if not head.startswith(b"HTTP/1.1 200") or b"text/event-stream" not in head:
                    raise ProtocolError("bad_response", head[:60].decode("latin-1"))
                while not self.stop.is_set():
                    stop = asyncio.create_task(self.stop.wait())
                    read = asyncio.create_task(reader.read(4096))
                    done, _ = await asyncio.wait(
                        {stop, read}, timeout=SSE_STALL, return_when=asyncio.FIRST_COMPLETED
                    )
                    stop.cancel()
                    if read not in done:
                        read.cancel()
                        if self.stop.is_set():
                            break
                        raise ProtocolError("sse_stall", f"nothing for {SSE_STALL} s")
                    if not read.result():
                        raise ProtocolError("eof", "the event stream ended")
                    self.tally.ops["sse_chunk"] += 1
            except Exception as e:
                self._error(e)
                await self._pause(1.0)
            finally:
                writer.close()


async def ws_handshake(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """The RFC 6455 opening handshake (HTTP/1.1 Upgrade)."""
    key = base64.b64encode(os.urandom(16)).decode()
    writer.write(
        (
            "GET /ws HTTP/1.1\r\nHost: soak\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        ).encode()
    )
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), REQUEST_TIMEOUT)
    if not head.startswith(b"HTTP/1.1 101"):
        raise ProtocolError("ws_handshake", head[:60].decode("latin-1"))


def ws_frame(opcode: int, payload: bytes, mask: bytes | None = None) -> bytes:
    """A final, masked client frame (clients must mask, RFC 6455 section 5.3)."""
    mask = mask if mask is not None else os.urandom(4)
    n = len(payload)
    if n < 126:
        head = struct.pack("!BB", 0x80 | opcode, 0x80 | n)
    elif n < 1 << 16:
        head = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, n)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, n)
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return head + mask + masked


async def ws_read(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """One unmasked server frame (no fragmentation: the echo sends whole messages)."""
    b0, b1 = await reader.readexactly(2)
    n = b1 & 0x7F
    if n == 126:
        (n,) = struct.unpack("!H", await reader.readexactly(2))
    elif n == 127:
        (n,) = struct.unpack("!Q", await reader.readexactly(8))
    if b1 & 0x80:
        raise ProtocolError("ws_masked", "a server frame is masked")
    return b0 & 0x0F, await reader.readexactly(n)
