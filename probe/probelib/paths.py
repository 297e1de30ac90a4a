"""Path-spelling scenarios (the routing bypass): the same resource spelled otherwise.

A bypass happens when one layer (a router, an auth check, a proxy) and another (the file or
handler lookup) disagree about which resource a spelling names. From outside, the probe sees the
symptom: a spelling answered with something other than the canonical resource or a refusal.

* ``H-path-equivalent-spellings``: RFC 3986 §6.2.2 makes ``/%70laintext`` and ``/plaintext`` the
  same URI (percent-encoded unreserved characters, hex case). The answer must be the canonical
  one (200 ``Hello, World!``) or a redirect to it.
* ``H-path-ambiguous-spellings``: spellings that a server may resolve (merge ``//``, remove dot
  segments) or refuse (encoded ``/``, ``\\``, NUL, dot segments). The answer must be the canonical
  one, a redirect, or a 4xx refusal; never another 2xx body, a 5xx or no answer.
"""

from __future__ import annotations

from .client import exchange
from .robustness import Options, _result

CANONICAL = b"Hello, World!"

EQUIVALENT = [
    "/%70laintext",
    "/plain%74ext",
    "/plain%74%65xt",
    "/%70%6c%61%69%6e%74%65%78%74",
    "/%70%6C%61%69%6E%74%65%78%74",
]

AMBIGUOUS = [
    "//plaintext",
    "/./plaintext",
    "/x/../plaintext",
    "/%2e/plaintext",
    "/x/%2e%2e/plaintext",
    "/x/%2E%2E/plaintext",
    "/plaintext/.",
    "/plaintext%2f",
    "/x%2f..%2fplaintext",
    "/x%5c..%5cplaintext",
    "/plaintext%00",
    "/plaintext/%2e%2e/plaintext",
]


def _verdict(path: str, obs, allow_refusal: bool) -> str | None:
    """None if the answer to ``path`` is acceptable, else what was wrong."""
    if not obs.finals:
        return f"{path}: {obs.summary()}"
    r = obs.finals[0]
    if r.status == 200 and CANONICAL in r.body:
        return None
    if r.status in (301, 302, 307, 308) and (r.header("location") or "").split("?")[0].endswith("/plaintext"):
        return None
    if allow_refusal and 400 <= r.status < 500:
        return None
    return f"{path}: {r.status}" + (f" {r.body[:40]!r}" if r.body else "")


async def _spellings(host: str, port: int, o: Options, paths: list[str], allow_refusal: bool) -> list[str]:
    bad = []
    for path in paths:
        req = f"GET {path} HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n".encode()
        obs = await exchange(host, port, [req], timeout=o.timeout, want_responses=1)
        why = _verdict(path, obs, allow_refusal)
        if why:
            bad.append(why)
    return bad


async def equivalent_spellings(host: str, port: int, o: Options) -> dict:
    sid = "H-path-equivalent-spellings"
    desc = "GET /plaintext with unreserved characters percent-encoded (RFC 3986 §6.2.2)"
    expected = "200 Hello, World! (or a redirect to /plaintext) for every spelling"
    bad = await _spellings(host, port, o, EQUIVALENT, allow_refusal=False)
    observed = "; ".join(bad) if bad else f"all {len(EQUIVALENT)} spellings answered as /plaintext"
    return _result(sid, desc, expected, not bad, observed, failures=bad)


async def ambiguous_spellings(host: str, port: int, o: Options) -> dict:
    sid = "H-path-ambiguous-spellings"
    desc = "GET /plaintext spelled with //, dot segments, encoded / \\ and NUL"
    expected = "200 Hello, World!, a redirect to /plaintext, or a 4xx refusal; never another answer"
    bad = await _spellings(host, port, o, AMBIGUOUS, allow_refusal=True)
    observed = "; ".join(bad) if bad else f"all {len(AMBIGUOUS)} spellings answered as /plaintext or refused"
    return _result(sid, desc, expected, not bad, observed, failures=bad)
