"""A server from outside the lab's registry, as a user would bring one: plain asyncio, its port
from the command line, serving the contract's `plaintext` and `json`. With FAULT=body its
plaintext answer is wrong (tests/test_outside.py: the lab must refuse to measure it)."""

import asyncio
import json
import os
import sys
from email.utils import formatdate

BODIES = {
    b"/plaintext": (b"text/plain", b"Hello, World!"),
    b"/json": (b"application/json", json.dumps({"message": "Hello, World!"}).encode()),
}
if os.environ.get("FAULT") == "body":
    BODIES[b"/plaintext"] = (b"text/plain", b"Hello, World?")


async def serve(reader, writer):
    try:
        while head := await reader.readuntil(b"\r\n\r\n"):
            path = head.split(b" ", 2)[1]
            ctype, body = BODIES.get(path, (b"text/plain", b"not found"))
            status = b"200 OK" if path in BODIES else b"404 Not Found"
            date = formatdate(usegmt=True).encode()
            writer.write(
                b"HTTP/1.1 %s\r\nServer: outside\r\nDate: %s\r\nContent-Type: %s\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (status, date, ctype, len(body), body)
            )
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def main(port: int):
    server = await asyncio.start_server(serve, "127.0.0.1", port, backlog=1024)
    await server.serve_forever()


asyncio.run(main(int(sys.argv[1] if len(sys.argv) > 1 else os.environ["PORT"])))
