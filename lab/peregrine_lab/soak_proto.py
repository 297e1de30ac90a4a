"""The wire side of the soak and restart clients (asyncio streams): connecting (TCP or TLS with
ALPN), one HTTP/1.1 request and its response, WebSocket frames, and a small HTTP/2 client on
the `h2` package that runs concurrent streams and reports the server's GOAWAY. Failures are
exceptions; `error_kind` names each for the tallies.
"""

from __future__ import annotations

import asyncio
import base64
import os
import socket
import ssl
import struct
from dataclasses import dataclass, field

import h2.config
import h2.connection
import h2.events
import h2.exceptions

# A request gets this long before it counts as a `timeout` error.
REQUEST_TIMEOUT = 5.0


class ProtocolError(Exception):
    """The server answered something other than what the contract says."""

    def __init__(self, kind: str, detail: str = ""):
        super().__init__(f"{kind}: {detail}")
        self.kind = kind


class NotProcessed(Exception):
    """The request certainly did not reach the application: its connection closed before any
    byte of the response (HTTP/1.1), or its stream is above the GOAWAY's last stream id
    (HTTP/2). A client following the retry rules retries it on a new connection."""

    def __init__(self, why: str):
        super().__init__(why)
        self.why = why


def error_kind(e: BaseException) -> str:
    """The error-kind name a failure is counted under."""
    if isinstance(e, ProtocolError):
        return e.kind
    if isinstance(e, NotProcessed):
        return f"not_processed_{e.why}"
    if isinstance(e, asyncio.TimeoutError | TimeoutError):
        return "timeout"
    if isinstance(e, ConnectionRefusedError):
        return "refused"
    if isinstance(e, ConnectionResetError | BrokenPipeError):
        return "reset"
    if isinstance(e, asyncio.IncompleteReadError):
        return "eof"
    if isinstance(e, ssl.SSLError):
        return f"tls_{e.reason or 'error'}".lower()
    if isinstance(e, OSError):
        return f"os_{e.errno}"
    return type(e).__name__


@dataclass(frozen=True)
class Target:
    """Where the clients connect: host, port, and the TLS client contexts offering
    `http/1.1` (`tls`) and `h2` (`h2_tls`) by ALPN; without `tls` the clients speak cleartext."""

    host: str
    port: int
    tls: ssl.SSLContext | None = None
    h2_tls: ssl.SSLContext | None = None


async def connect(target: Target, rcvbuf: int | None = None, alpn_h2: bool = False):
    """A connection (reader, writer): TLS when the target has a context (ALPN `h2` with
    `alpn_h2`, else `http/1.1`); `rcvbuf` shrinks the receive buffer (slow readers)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setblocking(False)
    if rcvbuf:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    try:
        await asyncio.wait_for(
            asyncio.get_running_loop().sock_connect(sock, (target.host, target.port)),
            REQUEST_TIMEOUT,
        )
    except BaseException:
        sock.close()
        raise
    ctx = (target.h2_tls if alpn_h2 else target.tls) if target.tls else None
    if ctx is None:
        return await asyncio.open_connection(sock=sock)
    return await asyncio.wait_for(
        asyncio.open_connection(sock=sock, ssl=ctx, server_hostname="localhost"),
        REQUEST_TIMEOUT,
    )


def reset(writer: asyncio.StreamWriter) -> None:
    """Closes with a TCP RST (SO_LINGER 0): a client that vanishes."""
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


def request(
    method: str,
    path: str,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
    close: bool = False,
    length: int | None = None,
) -> bytes:
    """An HTTP/1.1 request: its head and `body`. Content-Length is `length` when given (a head
    whose body is sent later), else the body's length (set for a body, a POST or a PUT)."""
    lines = [f"{method} {path} HTTP/1.1", "Host: soak"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    if length is not None or body or method in ("POST", "PUT"):
        lines.append(f"Content-Length: {len(body) if length is None else length}")
    if close:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def get(path: str, close: bool = False) -> bytes:
    return request("GET", path, close=close)


async def read_response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    """One HTTP/1.1 response: status, lower-cased headers, body (Content-Length or chunked).
    A connection that ends before the first byte raises `NotProcessed("closed")`."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as e:
        if not e.partial:
            raise NotProcessed("closed") from e
        raise
    except ConnectionResetError as e:
        raise NotProcessed("reset") from e
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


async def exchange(reader, writer, raw: bytes) -> tuple[int, dict[str, str], bytes]:
    """Sends one request and reads its response within REQUEST_TIMEOUT. A write to a connection
    the server already closed counts as not processed (the request never left)."""
    try:
        writer.write(raw)
        await writer.drain()
    except (ConnectionResetError, BrokenPipeError) as e:
        raise NotProcessed("reset") from e
    return await asyncio.wait_for(read_response(reader), REQUEST_TIMEOUT)


async def ws_handshake(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, path: str = "/ws"
) -> None:
    """The RFC 6455 opening handshake (HTTP/1.1 Upgrade) on `path`."""
    key = base64.b64encode(os.urandom(16)).decode()
    writer.write(
        (
            f"GET {path} HTTP/1.1\r\nHost: soak\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
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


def ws_close_code(payload: bytes) -> int | None:
    """The status code of a close frame's payload (None: a close without a code)."""
    return struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else None


@dataclass
class _Stream:
    done: asyncio.Future
    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    body: bytearray = field(default_factory=bytearray)


class H2Client:
    """One HTTP/2 connection (prior knowledge or ALPN `h2`) running concurrent requests. The
    server's GOAWAY is kept in `goaway` (error code, last stream id); streams above its last
    stream id fail with `NotProcessed("goaway")`, the others run to their end."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, scheme: str = "https"
    ):
        self.reader, self.writer, self.scheme = reader, writer, scheme
        self.conn = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=True, header_encoding="utf-8")
        )
        # The `h2` package closes a connection as soon as it receives a GOAWAY, and then refuses
        # every later frame, the answers of the streams the GOAWAY lets finish included (RFC
        # 9113 section 6.8: they "might still complete successfully"). Here a GOAWAY leaves the
        # connection open; `request` opens no stream after one.
        machine = self.conn.state_machine
        open_ = h2.connection.ConnectionState.CLIENT_OPEN
        machine._transitions = {
            **machine._transitions,
            (open_, h2.connection.ConnectionInputs.RECV_GOAWAY): (None, open_),
        }
        self.streams: dict[int, _Stream] = {}
        self.goaway: tuple[int, int] | None = None
        self.closed = False
        # Why the read side ended: "eof", or the error that ended it.
        self.ended: str | None = None
        self._reader_task: asyncio.Task | None = None

    async def start(self) -> None:
        self.conn.initiate_connection()
        self.writer.write(self.conn.data_to_send())
        await self.writer.drain()
        self._reader_task = asyncio.create_task(self._read_loop())

    async def request(
        self, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        """One request on a new stream: status, headers, body."""
        if self.closed or self.goaway is not None:
            raise NotProcessed("goaway" if self.goaway else "closed")
        sid = self.conn.get_next_available_stream_id()
        hdrs = [(":method", method), (":path", path), (":scheme", self.scheme)]
        hdrs += [(":authority", "soak")] + list((headers or {}).items())
        if body:
            hdrs.append(("content-length", str(len(body))))
        stream = _Stream(asyncio.get_running_loop().create_future())
        self.streams[sid] = stream
        self.conn.send_headers(sid, hdrs, end_stream=not body)
        if body:
            self.conn.send_data(sid, body, end_stream=True)
        self.writer.write(self.conn.data_to_send())
        await asyncio.wait_for(asyncio.shield(stream.done), REQUEST_TIMEOUT)
        return stream.status or 0, stream.headers, bytes(stream.body)

    def _fail(self, sid: int, e: BaseException) -> None:
        stream = self.streams.pop(sid, None)
        if stream is not None and not stream.done.done():
            stream.done.set_exception(e)

    async def _read_loop(self) -> None:
        try:
            while True:
                data = await self.reader.read(65536)
                if not data:
                    self.ended = "eof"
                    break
                for ev in self.conn.receive_data(data):
                    self._event(ev)
                self.writer.write(self.conn.data_to_send())
        except (OSError, asyncio.IncompleteReadError, h2.exceptions.ProtocolError) as e:
            self.ended = (
                error_kind(e) if not isinstance(e, h2.exceptions.ProtocolError) else f"h2_{e}"
            )
        finally:
            self.closed = True
            for sid in list(self.streams):
                self._fail(sid, ProtocolError("h2_closed", f"stream {sid} never ended"))

    def _event(self, ev) -> None:
        if isinstance(ev, h2.events.ResponseReceived):
            stream = self.streams.get(ev.stream_id)
            if stream is not None:
                stream.headers = dict(ev.headers)
                stream.status = int(stream.headers.get(":status", 0))
        elif isinstance(ev, h2.events.DataReceived):
            self.conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            if ev.stream_id in self.streams:
                self.streams[ev.stream_id].body += ev.data
        elif isinstance(ev, h2.events.StreamEnded):
            stream = self.streams.pop(ev.stream_id, None)
            if stream is not None and not stream.done.done():
                stream.done.set_result(None)
        elif isinstance(ev, h2.events.StreamReset):
            self._fail(ev.stream_id, ProtocolError("h2_stream_reset", str(ev.error_code)))
        elif isinstance(ev, h2.events.ConnectionTerminated):
            self.goaway = (int(ev.error_code), ev.last_stream_id)
            for sid in [s for s in self.streams if s > ev.last_stream_id]:
                self._fail(sid, NotProcessed("goaway"))

    async def close(self) -> None:
        """Ends the connection (GOAWAY from the client, then close)."""
        if not self.closed:
            try:
                self.conn.close_connection()
                self.writer.write(self.conn.data_to_send())
            except (OSError, h2.exceptions.ProtocolError):
                pass
        self.writer.close()
        if self._reader_task is not None:
            self._reader_task.cancel()
