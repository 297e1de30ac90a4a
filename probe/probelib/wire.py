"""Parsing of HTTP/1.x *responses* from the bytes a server sent.

The probe is strict about what it sends and tolerant about what it receives only where a
misparse cannot hide a failure: a response it cannot frame is reported as garbage, which fails
the case (a server that, say, sends a body after a HEAD response desynchronises the stream, and
that is exactly what must be caught).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Response:
    """One parsed response."""

    version: str
    status: int
    reason: str
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""

    def header(self, name: str) -> str | None:
        """First value of ``name`` (case-insensitive), or None."""
        name = name.lower()
        for k, v in self.headers:
            if k.lower() == name:
                return v
        return None

    def header_all(self, name: str) -> list[str]:
        name = name.lower()
        return [v for k, v in self.headers if k.lower() == name]

    def has_token(self, name: str, token: str) -> bool:
        """Whether a comma-separated header (e.g. Connection) lists ``token``."""
        token = token.lower()
        for v in self.header_all(name):
            if token in (t.strip().lower() for t in v.split(",")):
                return True
        return False

    def short(self) -> str:
        return f"{self.status}"


class Garbage(Exception):
    """The server sent bytes that are not a well-framed HTTP/1.x response.

    ``responses`` holds the responses that parsed before the framing error.
    """

    def __init__(self, msg: str, responses: list | None = None):
        super().__init__(msg)
        self.responses = responses or []


def _parse_head(buf: bytes) -> tuple[Response, int] | None:
    """Parse a status line and header section; None if incomplete."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        if len(buf) > 1 << 20:
            raise Garbage("response header section over 1 MiB")
        if buf and not b"HTTP/"[: len(buf)].startswith(buf[:5]):
            raise Garbage(f"not a status line: {buf[:40]!r}")
        return None
    head = buf[:end].decode("latin-1")
    lines = head.split("\r\n")
    status_line = lines[0]
    parts = status_line.split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or len(parts[1]) != 3 or not parts[1].isdigit():
        raise Garbage(f"bad status line: {status_line[:80]!r}")
    resp = Response(parts[0], int(parts[1]), parts[2] if len(parts) > 2 else "")
    for line in lines[1:]:
        if ":" not in line:
            raise Garbage(f"bad response header line: {line[:80]!r}")
        k, v = line.split(":", 1)
        resp.headers.append((k, v.strip(" \t")))
    return resp, end + 4


def _parse_chunked(buf: bytes, pos: int) -> tuple[bytes, int] | None:
    """Decode a chunked body starting at ``pos``; None if incomplete."""
    body = bytearray()
    while True:
        eol = buf.find(b"\r\n", pos)
        if eol < 0:
            return None
        size_txt = buf[pos:eol].split(b";", 1)[0].strip()
        try:
            size = int(size_txt, 16)
        except ValueError:
            raise Garbage(f"bad chunk size in response: {size_txt[:20]!r}") from None
        pos = eol + 2
        if size == 0:
            # trailers until an empty line
            while True:
                eol = buf.find(b"\r\n", pos)
                if eol < 0:
                    return None
                line = buf[pos:eol]
                pos = eol + 2
                if not line:
                    return bytes(body), pos
        if len(buf) < pos + size + 2:
            return None
        body += buf[pos : pos + size]
        if buf[pos + size : pos + size + 2] != b"\r\n":
            raise Garbage("chunk data not followed by CRLF in response")
        pos += size + 2


def parse_responses(buf: bytes, eof: bool, head_indices: frozenset[int] = frozenset()):
    """Split ``buf`` into complete responses.

    ``head_indices`` are the indices (counting final, non-1xx responses) of responses to HEAD
    requests, which carry no body. Returns ``(responses, consumed, pending)`` where ``pending`` is
    True when a response has started but is incomplete. Raises :class:`Garbage`.
    A close-delimited body is complete only at ``eof``.
    """
    out: list[Response] = []
    try:
        return _parse_all(buf, eof, head_indices, out)
    except Garbage as g:
        g.responses = out
        raise


def _parse_all(buf: bytes, eof: bool, head_indices: frozenset[int], out: list[Response]):
    pos = 0
    final_index = 0
    while pos < len(buf):
        parsed = _parse_head(buf[pos:])
        if parsed is None:
            return out, pos, True
        resp, hlen = parsed
        start = pos + hlen
        if 100 <= resp.status < 200:
            out.append(resp)
            pos = start
            continue
        is_head = final_index in head_indices
        te = resp.header("transfer-encoding")
        cl = resp.header("content-length")
        if is_head or resp.status in (204, 304):
            end = start
        elif te is not None and "chunked" in te.lower():
            got = _parse_chunked(buf, start)
            if got is None:
                return out, pos, True
            resp.body, end = got
        elif cl is not None:
            try:
                n = int(cl)
            except ValueError:
                raise Garbage(f"bad Content-Length in response: {cl!r}") from None
            if len(buf) < start + n:
                return out, pos, True
            resp.body = buf[start : start + n]
            end = start + n
        else:
            if not eof:
                return out, pos, True
            resp.body = buf[start:]
            end = len(buf)
        out.append(resp)
        final_index += 1
        pos = end
    return out, pos, False
