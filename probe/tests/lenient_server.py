"""A deliberately lenient HTTP/1.1 toy server, the probe's negative control.

It makes the classic mistakes that request smuggling feeds on, on purpose:

* bare LF accepted as a line ending; runs of whitespace or TABs in the request line; any version
* obs-fold lines joined to the previous field; whitespace before the colon stripped
* no Host required, duplicate Host accepted
* Content-Length parsed with ``int()`` (so ``+5``, `` 5``, ``1_0`` pass) and preferred over
  Transfer-Encoding when both are present (CL.TE desync)
* Transfer-Encoding counts as chunked when it merely *contains* ``chunked``; chunk sizes parsed
  with ``int(x, 16)`` (so ``0x1``, ``+1`` pass)
* NUL, CTLs and bytes >= 0x80 accepted everywhere
* after an error it answers 400 but keeps the connection open; ``Connection: close`` ignored

Routes follow the lab contract: GET/HEAD anything -> 200 ``Hello, World!``, POST /users -> 201
echoing the body. Run standalone with ``python3 lenient_server.py PORT``.
"""

from __future__ import annotations

import socketserver
import sys
import threading


class _Bad(Exception):
    pass


class Handler(socketserver.BaseRequestHandler):
    def setup(self) -> None:
        self.buf = b""
        self.request.settimeout(5)

    def _fill(self) -> bool:
        data = self.request.recv(65536)
        if not data:
            return False
        self.buf += data
        return True

    def _read_until(self, sep: bytes) -> bytes | None:
        while sep not in self.buf:
            if not self._fill():
                return None
        i = self.buf.index(sep)
        out, self.buf = self.buf[:i], self.buf[i + len(sep) :]
        return out

    def _read_line(self) -> bytes | None:
        line = self._read_until(b"\n")
        return None if line is None else line.rstrip(b"\r")

    def _read_n(self, n: int) -> bytes | None:
        while len(self.buf) < n:
            if not self._fill():
                return None
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def _request(self) -> bool:
        line = self._read_line()
        while line == b"":
            line = self._read_line()
        if line is None:
            return False
        parts = line.split()
        if len(parts) < 2:
            raise _Bad()
        method = parts[0]
        path = parts[1]
        headers: list[list[bytes]] = []
        while True:
            h = self._read_line()
            if h is None:
                return False
            if h == b"":
                break
            if h[:1] in (b" ", b"\t") and headers:
                headers[-1][1] += b" " + h.strip()
                continue
            if b":" not in h:
                continue
            k, v = h.split(b":", 1)
            headers.append([k.strip().lower(), v.strip()])
        hd = {k: v for k, v in headers}
        body = b""
        if b"content-length" in hd:
            try:
                n = int(hd[b"content-length"].split(b",")[0])
            except ValueError:
                raise _Bad() from None
            body = self._read_n(max(n, 0))
            if body is None:
                return False
        elif b"chunked" in hd.get(b"transfer-encoding", b"").lower():
            while True:
                size_line = self._read_line()
                if size_line is None:
                    return False
                try:
                    size = int(size_line.split(b";")[0].strip(), 16)
                except ValueError:
                    raise _Bad() from None
                if size <= 0:
                    while self._read_line() not in (b"", None):
                        pass
                    break
                chunk = self._read_n(size)
                if chunk is None:
                    return False
                body += chunk
                self._read_line()
        if method == b"POST" and path.startswith(b"/users"):
            self._send(201, b"application/json", body)
        elif method == b"HEAD":
            self._send(200, b"text/plain", b"Hello, World!", head=True)
        else:
            self._send(200, b"text/plain", b"Hello, World!")
        return True

    def _send(self, status: int, ctype: bytes, body: bytes, head: bool = False) -> None:
        reason = {200: b"OK", 201: b"Created", 400: b"Bad Request"}[status]
        msg = b"HTTP/1.1 %d %s\r\nServer: lenient\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n" % (
            status,
            reason,
            ctype,
            len(body),
        )
        self.request.sendall(msg + (b"" if head else body))

    def handle(self) -> None:
        try:
            while True:
                try:
                    if not self._request():
                        return
                except _Bad:
                    self._send(400, b"text/plain", b"bad")
                    self.buf = b""
        except (TimeoutError, OSError):
            return


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024


def start(port: int = 0) -> tuple[Server, int]:
    """Start in a background thread; returns the server and its port."""
    srv = Server(("127.0.0.1", port), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, srv.server_address[1]


if __name__ == "__main__":
    srv = Server(("127.0.0.1", int(sys.argv[1]) if len(sys.argv) > 1 else 8099), Handler)
    srv.serve_forever()
