"""Escape syntax used in the corpus ``raw`` strings.

Corpus files store raw bytes in TOML *literal* strings (single quotes), so TOML does not interpret
backslashes; the probe decodes them itself with this small, explicit syntax:

====================  =============================================
``\\r``  ``\\n``       CR (0x0D), LF (0x0A)
``\\t``                HTAB (0x09)
``\\0``                NUL (0x00)
``\\\\``                one backslash
``\\xHH``              the byte 0xHH (exactly two hex digits)
``\\{N*TEXT}``          TEXT (itself decoded) repeated N times; TEXT may nest repetitions
                       but may not contain a literal ``}`` (write ``\\x7d``)
====================  =============================================

Every other character stands for its UTF-8 encoding (so ``é`` is two bytes). Any other backslash
sequence is an error, so a typo in the corpus is caught at load time instead of silently sent.

>>> decode(r"GET / HTTP/1.1\\r\\nX: \\x00\\{3*ab}\\r\\n")
b'GET / HTTP/1.1\\r\\nX: \\x00ababab\\r\\n'
"""

from __future__ import annotations

_SIMPLE = {"r": b"\r", "n": b"\n", "t": b"\t", "0": b"\x00", "\\": b"\\"}
_HEX = set("0123456789abcdefABCDEF")


class EscapeError(ValueError):
    """A malformed escape sequence in a corpus string."""


def decode(text: str) -> bytes:
    """Decode a corpus string with the escape syntax above into the bytes to send."""
    out = bytearray()
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c != "\\":
            out += c.encode("utf-8")
            i += 1
            continue
        if i + 1 >= n:
            raise EscapeError(f"dangling backslash at offset {i}")
        e = text[i + 1]
        if e in _SIMPLE:
            out += _SIMPLE[e]
            i += 2
        elif e == "x":
            hh = text[i + 2 : i + 4]
            if len(hh) != 2 or not set(hh) <= _HEX:
                raise EscapeError(f"bad \\x escape at offset {i}: {text[i : i + 4]!r}")
            out.append(int(hh, 16))
            i += 4
        elif e == "{":
            end = _closing_brace(text, i + 2)
            star = text.find("*", i + 2)
            if end < 0 or star < 0 or star > end:
                raise EscapeError(f"bad repetition at offset {i}: expected \\{{N*TEXT}}")
            count = text[i + 2 : star]
            if not count.isdigit():
                raise EscapeError(f"bad repetition count {count!r} at offset {i}")
            out += decode(text[star + 1 : end]) * int(count)
            i = end + 1
        else:
            raise EscapeError(f"unknown escape \\{e} at offset {i}")
    return bytes(out)


def _closing_brace(text: str, start: int) -> int:
    """Index of the ``}`` closing a repetition whose body starts at ``start`` (nesting-aware)."""
    depth = 1
    i = start
    while i < len(text):
        if text[i] == "\\":
            if text[i + 1 : i + 2] == "{":
                depth += 1
            i += 2
            continue
        if text[i] == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def show(data: bytes, limit: int = 160) -> str:
    """Render bytes in the same escape syntax, for reports (truncated to ``limit`` characters)."""
    parts = []
    for b in data:
        if b == 0x0D:
            parts.append("\\r")
        elif b == 0x0A:
            parts.append("\\n")
        elif b == 0x09:
            parts.append("\\t")
        elif b == 0x5C:
            parts.append("\\\\")
        elif 0x20 <= b < 0x7F:
            parts.append(chr(b))
        else:
            parts.append(f"\\x{b:02x}")
    s = "".join(parts)
    if len(s) > limit:
        s = s[: limit - 20] + f"...({len(data)} bytes)"
    return s
