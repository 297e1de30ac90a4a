"""The soak's Python clients (asyncio, one event loop) against the scenarios app: connection
churn, slow readers, clients that vanish mid-response, long-lived WebSocket, server-sent-event
and HTTP/2 sessions, static files read by range, multipart uploads (some sent slowly) and the
PostgreSQL routes. The steady keep-alive load beside them is oha's (`soak_oha`). Every client
counts what it completed and every error by kind into the current `Tally`, which the sampler
swaps every interval. The wire helpers are in `soak_proto`.

Each paced client is open loop (it sends at its own fixed period, whatever the previous
latency), so a slow server shows as latency, not as a lower rate.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from .soak_proto import (
    REQUEST_TIMEOUT,
    H2Client,
    ProtocolError,
    Target,
    connect,
    error_kind,
    exchange,
    get,
    read_response,
    request,
    reset,
    ws_frame,
    ws_handshake,
    ws_read,
)

# An SSE stream that sends nothing for this long (the app sends a comment every second) stalls.
SSE_STALL = 5.0
# The static file the range readers read (`STATIC_DIR/BLOB_NAME`), made by `blob_bytes`.
BLOB_NAME = "blob.bin"
BLOB_SIZE = 1 << 20
# The database routes, taken in turn (lab/contract/db.json).
DB_PATHS = ("/db", "/queries?queries=5", "/fortunes", "/updates?queries=2")


def blob_bytes() -> bytes:
    """The static file's content: deterministic, so a range can be checked byte for byte."""
    return bytes(random.Random(30).getrandbits(8) for _ in range(BLOB_SIZE))


@dataclass
class Plan:
    """How much of each kind of client the soak runs (rates per second, periods in seconds)."""

    # oha's keep-alive connections for the steady load (open loop: they share its rate). As
    # many as the calibration's: an open-loop rate needs rate × latency connections busy at
    # once, or oha falls behind its schedule (8 sent 66% of the CI rate on a busy machine).
    steady_connections: int = 64
    # Steady requests per second (oha, GET /plaintext); None: `load_fraction` of the capacity
    # the calibration measures (oha closed loop beside the rest of the mix,
    # `calibrate_seconds` long).
    steady_rate: float | None = None
    load_fraction: float = 0.7
    calibrate_seconds: float = 10.0
    churn_rate: float = 20.0  # new connections per second (one request each)
    slow_readers: int = 2
    slow_read_bytes: int = 2048  # bytes read per step
    slow_read_pause: float = 0.02  # seconds between steps
    vanishers: int = 2
    vanish_period: float = 0.2  # between one vanishing client and the next (per loop)
    ws_sessions: int = 4
    ws_period: float = 1.0
    sse_sessions: int = 4
    h2_sessions: int = 2
    h2_period: float = 0.1  # between batches of concurrent streams (per session)
    h2_streams: int = 4  # streams per batch
    range_rate: float = 20.0  # static-file range requests per second (one keep-alive conn)
    upload_rate: float = 5.0  # multipart uploads per second (one keep-alive conn)
    upload_bytes: int = 64 * 1024
    slow_uploads: int = 1
    slow_upload_step: int = 8 * 1024  # bytes sent per step
    slow_upload_pause: float = 0.25
    db_rate: float = 20.0  # database requests per second (0: no database)


CI_PLAN = Plan(
    calibrate_seconds=3.0,
    churn_rate=10.0,
    slow_readers=1,
    vanishers=1,
    vanish_period=0.5,
    ws_sessions=2,
    sse_sessions=2,
    h2_sessions=1,
    h2_period=0.2,
    range_rate=10.0,
    upload_rate=2.0,
    db_rate=10.0,
)


@dataclass
class Tally:
    """What the clients did during one sample interval."""

    ops: Counter = field(default_factory=Counter)  # completed operations by kind
    errors: Counter = field(default_factory=Counter)  # unexpected errors by kind


def multipart(parts: list[bytes], boundary: str = "soakboundary") -> tuple[bytes, str]:
    """A multipart/form-data body of file parts, and its Content-Type."""
    out = bytearray()
    for i, data in enumerate(parts):
        out += (
            f'--{boundary}\r\nContent-Disposition: form-data; name="f{i}"; '
            f'filename="f{i}.bin"\r\nContent-Type: application/octet-stream\r\n\r\n'
        ).encode()
        out += data + b"\r\n"
    out += f"--{boundary}--\r\n".encode()
    return bytes(out), f"multipart/form-data; boundary={boundary}"


def expect(ok: bool, kind: str, detail: str = "") -> None:
    if not ok:
        raise ProtocolError(kind, detail)


Session = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class Clients:
    """What every client loop shares: the stop event, the interval's tally, pauses that end
    early at stop, a fixed-rate schedule and connections run one after another."""

    def __init__(self, target: Target):
        self.target = target
        self.tally = Tally()
        self.stop = asyncio.Event()

    def swap(self) -> Tally:
        """The interval's tally; a fresh one starts."""
        done, self.tally = self.tally, Tally()
        return done

    def _error(self, e: BaseException) -> None:
        self.tally.errors[error_kind(e)] += 1

    async def _pause(self, seconds: float) -> None:
        try:
            await asyncio.wait_for(self.stop.wait(), seconds)
        except TimeoutError:
            pass

    async def _ticks(self, rate: float, offset: float = 0.0):
        """Yields at a fixed period of 1/rate until stop (open loop: a late tick does not move
        the schedule, but one more than a period late is dropped, not sent in a burst), the
        first after `offset` periods."""
        period = 1.0 / rate
        next_at = time.monotonic() + period * offset
        while True:
            await self._pause(max(0.0, next_at - time.monotonic()))
            if self.stop.is_set():
                return
            next_at = max(next_at + period, time.monotonic() - period)
            yield

    async def _once(self, session: Session, rcvbuf: int | None = None, h2: bool = False) -> bool:
        """One connection running `session`; a failure anywhere is counted. True on success."""
        try:
            reader, writer = await connect(self.target, rcvbuf, h2)
        except Exception as e:
            self._error(e)
            return False
        try:
            await session(reader, writer)
            return True
        except Exception as e:
            self._error(e)
            return False
        finally:
            writer.close()

    async def _loop(self, session: Session, rcvbuf: int | None = None, h2: bool = False) -> None:
        """`session` on one connection after another until the soak stops, a pause after a
        failure (so a refusing server is not hammered)."""
        while not self.stop.is_set():
            if not await self._once(session, rcvbuf, h2):
                await self._pause(1.0)


class Load(Clients):
    """Runs the clients of `plan` against `target` until `stop` is set."""

    def __init__(self, target: Target, plan: Plan, blob: bytes | None = None):
        super().__init__(target)
        self.plan = plan
        self.blob = blob if blob is not None else blob_bytes()

    async def _paced(self, rate: float, offset: float, send: Session) -> None:
        """A keep-alive connection on which `send` runs at a fixed rate (`_ticks`)."""
        ticks = self._ticks(rate, offset)

        async def session(reader, writer):
            async for _ in ticks:
                await send(reader, writer)

        await self._loop(session)

    async def run(self) -> None:
        """Every Python client of the plan until `stop` (the steady load is oha's)."""
        p = self.plan
        tasks = [self.churn()] if p.churn_rate > 0 else []
        tasks += [self._loop(self.slow_read, rcvbuf=4096) for _ in range(p.slow_readers)]
        tasks += [self.vanisher(i) for i in range(p.vanishers)]
        tasks += [self._loop(self.ws_session) for _ in range(p.ws_sessions)]
        tasks += [self._loop(self.sse_session) for _ in range(p.sse_sessions)]
        tasks += [self._loop(self.h2_session, h2=True) for _ in range(p.h2_sessions)]
        tasks += [self._paced(p.range_rate, 0, self.range_read)] if p.range_rate > 0 else []
        tasks += [self._paced(p.upload_rate, 0, self.upload)] if p.upload_rate > 0 else []
        tasks += [self._loop(self.slow_upload) for _ in range(p.slow_uploads)]
        tasks += [self._paced(p.db_rate, 0, self.db)] if p.db_rate > 0 else []
        await asyncio.gather(*tasks)

    async def churn(self) -> None:
        """A new connection per request (`Connection: close`), at a fixed rate."""
        inflight: set[asyncio.Task] = set()
        async for _ in self._ticks(self.plan.churn_rate):
            task = asyncio.create_task(self._once(self._churn_one))
            inflight.add(task)
            task.add_done_callback(inflight.discard)
        await asyncio.gather(*inflight)

    async def _churn_one(self, reader, writer) -> None:
        status, _, body = await exchange(reader, writer, get("/json", close=True))
        expect(status == 200 and b"Hello" in body, "bad_response", f"{status} {body[:40]!r}")
        after = await asyncio.wait_for(reader.read(1), REQUEST_TIMEOUT)
        expect(after == b"", "not_closed", "data after a Connection: close response")
        self.tally.ops["churn"] += 1

    async def slow_read(self, reader, writer) -> None:
        """GET /large read a little at a time through a small receive buffer."""
        p = self.plan
        writer.write(get("/large", close=True))
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), REQUEST_TIMEOUT)
        length = None
        for line in head.decode("latin-1").split("\r\n"):
            if line.lower().startswith("content-length:"):
                length = int(line.split(":", 1)[1])
        expect(
            head.startswith(b"HTTP/1.1 200") and length is not None,
            "bad_response",
            head[:60].decode("latin-1"),
        )
        got = 0
        while got < length:
            chunk = await asyncio.wait_for(
                reader.read(min(p.slow_read_bytes, length - got)), REQUEST_TIMEOUT
            )
            expect(bool(chunk), "eof", f"{got} of {length} bytes")
            got += len(chunk)
            await asyncio.sleep(p.slow_read_pause)
        self.tally.ops["slow_read"] += 1

    async def vanisher(self, index: int) -> None:
        """Clients that go mid-response: read the first bytes of /large or /events, then
        close (odd rounds) or reset (even rounds, SO_LINGER 0). Only a failure before the
        first byte is an error; the server must simply cope."""
        rounds = index

        async def vanish(reader, writer):
            path = "/large" if rounds % 4 < 2 else "/events"
            writer.write(get(path))
            first = await asyncio.wait_for(reader.read(512), REQUEST_TIMEOUT)
            expect(first.startswith(b"HTTP/1.1 200"), "bad_response", first[:60].decode("latin-1"))
            if rounds % 2 == 0:
                reset(writer)
                self.tally.ops["vanish_reset"] += 1
            else:
                self.tally.ops["vanish_close"] += 1

        while not self.stop.is_set():
            rounds += 1
            await self._once(vanish, rcvbuf=4096)
            await self._pause(self.plan.vanish_period)

    async def ws_session(self, reader, writer) -> None:
        """A WebSocket on /ws for the whole soak: one text message per period, echoed."""
        await ws_handshake(reader, writer)
        n = 0
        while not self.stop.is_set():
            n += 1
            text = f"soak message {n}".encode()
            writer.write(ws_frame(0x1, text))
            opcode, payload = await asyncio.wait_for(ws_read(reader), REQUEST_TIMEOUT)
            expect(opcode == 0x1 and payload == text, "ws_mismatch", f"{opcode} {payload[:40]!r}")
            self.tally.ops["ws_echo"] += 1
            await self._pause(self.plan.ws_period)
        writer.write(ws_frame(0x8, (1000).to_bytes(2, "big")))

    async def sse_session(self, reader, writer) -> None:
        """An SSE stream on /events for the whole soak: its keep-alive comments keep coming."""
        writer.write(get("/events"))
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), REQUEST_TIMEOUT)
        ok = head.startswith(b"HTTP/1.1 200") and b"text/event-stream" in head
        expect(ok, "bad_response", head[:60].decode("latin-1"))
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
                    return
                raise ProtocolError("sse_stall", f"nothing for {SSE_STALL} s")
            expect(bool(read.result()), "eof", "the event stream ended")
            self.tally.ops["sse_chunk"] += 1

    async def h2_session(self, reader, writer) -> None:
        """An HTTP/2 connection for the whole soak: batches of concurrent streams (/json,
        /plaintext, a static-file range, a JSON POST), each answer checked."""
        client = H2Client(reader, writer)
        await client.start()
        try:
            while not self.stop.is_set():
                batch = [self._h2_one(client, i) for i in range(self.plan.h2_streams)]
                await asyncio.gather(*batch)
                await self._pause(self.plan.h2_period)
        finally:
            await client.close()

    async def _h2_one(self, client: H2Client, i: int) -> None:
        kind = i % 4
        if kind == 0:
            status, _, body = await client.request("GET", "/json")
            expect(status == 200 and b"Hello" in body, "h2_bad_response", f"{status} {body[:40]!r}")
        elif kind == 1:
            status, _, body = await client.request("GET", "/plaintext")
            expect(status == 200 and body == b"Hello, World!", "h2_bad_response", f"{status}")
        elif kind == 2:
            lo, hi = self._range()
            status, _, body = await client.request(
                "GET", f"/files/{BLOB_NAME}", headers={"range": f"bytes={lo}-{hi}"}
            )
            expect(
                status == 206 and body == self.blob[lo : hi + 1],
                "h2_bad_range",
                f"{status} {len(body)} bytes",
            )
        else:
            user = {"name": "soak", "email": "soak@example.com", "age": 30}
            status, _, body = await client.request(
                "POST", "/users", json.dumps(user).encode(), {"content-type": "application/json"}
            )
            expect(status == 201 and json.loads(body) == user, "h2_bad_response", f"{status}")
        self.tally.ops["h2_stream"] += 1

    def _range(self) -> tuple[int, int]:
        lo = random.randrange(BLOB_SIZE - 1)
        return lo, min(BLOB_SIZE - 1, lo + random.randrange(1, 64 * 1024))

    async def range_read(self, reader, writer) -> None:
        """GET /files/blob.bin with a random `Range`: 206 and exactly those bytes."""
        lo, hi = self._range()
        raw = request("GET", f"/files/{BLOB_NAME}", headers={"Range": f"bytes={lo}-{hi}"})
        status, headers, body = await exchange(reader, writer, raw)
        ok = status == 206 and body == self.blob[lo : hi + 1]
        expect(ok, "bad_range", f"{status} {headers.get('content-range')} {len(body)} bytes")
        self.tally.ops["range"] += 1

    def _upload_request(self, close: bool) -> tuple[bytes, bytes, int]:
        """A multipart upload of three parts: the request head, the body, the part bytes."""
        n = self.plan.upload_bytes
        parts = [random.randbytes(n // 2), random.randbytes(n // 4), random.randbytes(n // 4)]
        body, ctype = multipart(parts)
        head = request(
            "POST", "/upload", headers={"Content-Type": ctype}, close=close, length=len(body)
        )
        return head, body, sum(len(p) for p in parts)

    async def _upload_answer(self, reader, parts_bytes: int, kind: str) -> None:
        status, _, answer = await asyncio.wait_for(read_response(reader), REQUEST_TIMEOUT)
        got = json.loads(answer) if status == 200 else None
        expect(got == {"parts": 3, "bytes": parts_bytes}, "bad_upload", f"{status} {answer[:60]!r}")
        self.tally.ops[kind] += 1

    async def upload(self, reader, writer) -> None:
        """A multipart upload sent at once; the app's part and byte counts checked."""
        head, body, n = self._upload_request(close=False)
        writer.write(head + body)
        await self._upload_answer(reader, n, "upload")

    async def slow_upload(self, reader, writer) -> None:
        """A multipart upload dribbled in small steps (a slow client's upload), then the
        answer checked as for a fast one."""
        head, body, n = self._upload_request(close=True)
        writer.write(head)
        step = self.plan.slow_upload_step
        for at in range(0, len(body), step):
            writer.write(body[at : at + step])
            await writer.drain()
            await asyncio.sleep(self.plan.slow_upload_pause)
        await self._upload_answer(reader, n, "slow_upload")

    async def db(self, reader, writer) -> None:
        """The PostgreSQL routes in turn: 200 with a body."""
        path = DB_PATHS[self.tally.ops["db"] % len(DB_PATHS)]
        status, _, body = await exchange(reader, writer, get(path))
        expect(status == 200 and len(body) > 0, "db_bad_response", f"{path} {status} {body[:60]!r}")
        self.tally.ops["db"] += 1
