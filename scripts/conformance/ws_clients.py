"""WebSocket conformance against a running echo endpoint, with a client no one here wrote
(Python `websockets`): fragmentation, control frames, close handshake, invalid UTF-8 -> 1007,
oversize -> 1009. Usage: ws_clients.py ws://127.0.0.1:PORT/path MAX_MESSAGE_BYTES

The Autobahn suite (`autobahntestsuite` on PyPI) cannot run here: its newest release (25.10.1)
is Python 2 source (`print "..."` statements) and Debian 12 has no Python 2 interpreter.
"""

import asyncio
import ssl
import sys

from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosedError

RESULTS: list[tuple[str, bool, str]] = []


def connect(url: str, **kwargs):
    """A client connection; over wss:// the test server's self-signed certificate is accepted."""
    if url.startswith("wss://"):
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        kwargs["ssl"] = ctx
    return ws_connect(url, **kwargs)


def check(name: str, ok: bool, detail: str = "") -> None:
    RESULTS.append((name, ok, detail))
    print(f"{'PASS' if ok else 'FAIL'} {name} {detail}".rstrip())


async def echo_text_and_binary(url: str) -> None:
    async with connect(url) as ws:
        await ws.send("hello, ünïcödé ✓")
        check("text echo", await ws.recv() == "hello, ünïcödé ✓")
        await ws.send(bytes(range(256)))
        check("binary echo", await ws.recv() == bytes(range(256)))


async def fragmented(url: str) -> None:
    async with connect(url) as ws:
        # An iterable is sent as one message in several frames (RFC 6455 §5.4).
        await ws.send(["frag", "men", "ted ✓"])
        check("fragmented text reassembled", await ws.recv() == "fragmented ✓")
        await ws.send([b"\x00\x01", b"\x02"])
        check("fragmented binary reassembled", await ws.recv() == b"\x00\x01\x02")


async def ping_pong(url: str) -> None:
    async with connect(url) as ws:
        waiter = await ws.ping(b"are you there")
        latency = await asyncio.wait_for(waiter, 5)
        check("ping answered with pong", latency >= 0)


async def close_handshake(url: str) -> None:
    ws = await connect(url)
    await ws.close(code=1000, reason="bye")
    check("close handshake echoes 1000", ws.close_code == 1000, f"got {ws.close_code}")


async def expect_close_code(url: str, name: str, code: int, send) -> None:
    async with connect(url, max_size=None) as ws:
        await send(ws)
        try:
            await asyncio.wait_for(ws.recv(), 5)
            check(name, False, "the server answered instead of closing")
        except ConnectionClosedError as e:
            got = e.rcvd.code if e.rcvd else None
            check(name, got == code, f"close code {got}")


async def main(url: str, max_size: int) -> int:
    await echo_text_and_binary(url)
    await fragmented(url)
    await ping_pong(url)
    await close_handshake(url)
    await expect_close_code(
        url,
        "invalid UTF-8 closes 1007",
        1007,
        lambda ws: ws.send(b"bad \xff\xfe", text=True),
    )
    await expect_close_code(
        url,
        "invalid UTF-8 across fragments closes 1007",
        1007,
        lambda ws: ws.send([b"ok \xc3", b"\x28"], text=True),
    )
    await expect_close_code(
        url,
        "oversize message closes 1009",
        1009,
        lambda ws: ws.send(b"x" * (max_size + 1)),
    )
    failed = sum(1 for _, ok, _ in RESULTS if not ok)
    print(f"websockets: {len(RESULTS) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1], int(sys.argv[2]))))
