"""h2load (Debian's `nghttp2-client`): the HTTP/2 lane's load generator, its command and the
parsing of its text report into the runner's `LoadResult`."""

from __future__ import annotations

import re

from .loadgen import LoadgenError, LoadResult

_UNITS_US = {"us": 1.0, "ms": 1000.0, "s": 1_000_000.0}


def command(
    url: str,
    *,
    connections: int,
    streams: int,
    duration: float,
    threads: int = 1,
    warm_up: float = 0.0,
    headers: dict[str, str] | None = None,
    tls13_ciphers: str | None = None,
    groups: str | None = None,
    requests: int | None = None,
) -> list[str]:
    """h2load with `connections` connections (`-c`), `streams` concurrent streams on each
    (`-m`), for `duration` seconds (`-D`), or for `requests` requests (`-n`) when given: the lab
    uses `-n`, since h2load 1.52 in timing mode was seen here never to exit after its run
    against some servers (node:http2, Peregrine). An https URL negotiates h2 by ALPN. h2load sets
    its own TLS 1.3 suites and groups (OpenSSL's configuration file does not reach them), so the
    lab's single offer is given with `tls13_ciphers` and `groups`."""
    cmd = ["h2load", "-c", str(connections), "-m", str(streams), "-t", str(max(1, threads))]
    if tls13_ciphers:
        cmd.append(f"--tls13-ciphers={tls13_ciphers}")
    if groups:
        cmd.append(f"--groups={groups}")
    if requests:
        cmd += ["-n", str(max(requests, connections))]
    else:
        cmd += ["-D", f"{max(1, round(duration))}"]
    if warm_up > 0 and not requests:
        cmd += ["--warm-up-time", f"{max(1, round(warm_up))}"]
    for k, v in (headers or {}).items():
        cmd += ["-H", f"{k}: {v}"]
    return cmd + [url]


def _duration_us(text: str) -> float | None:
    m = re.fullmatch(r"([\d.]+)(us|ms|s)", text.strip())
    return float(m.group(1)) * _UNITS_US[m.group(2)] if m else None


def parse_tls(stdout: str) -> dict[str, str | None]:
    """What h2load printed about the connection it negotiated: TLS version, cipher, key exchange
    and application protocol (None for a line it did not print)."""

    def grab(pattern):
        m = re.search(pattern, stdout, re.M)
        return m.group(1).strip() if m else None

    return {
        "protocol": grab(r"^TLS Protocol:\s*(.+)$"),
        "cipher": grab(r"^Cipher:\s*(.+)$"),
        "key_exchange": grab(r"^Server Temp Key:\s*(.+)$"),
        "alpn": grab(r"^Application protocol:\s*(.+)$"),
    }


def parse_output(stdout: str) -> LoadResult:
    """Read h2load's report: `finished in`, the `requests:` and `status codes:` lines, the bytes
    of `traffic:` and the mean time per request."""
    fin = re.search(r"^finished in ([\d.]+)(us|ms|s), ([\d.]+) req/s", stdout, re.M)
    req = re.search(
        r"^requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, "
        r"(\d+) errored, (\d+) timeout",
        stdout,
        re.M,
    )
    if not fin or not req:
        tail = "\n".join(stdout.strip().splitlines()[-5:])
        raise LoadgenError(f"h2load printed no report; its output ended with:\n{tail}")
    duration_s = float(fin.group(1)) * _UNITS_US[fin.group(2)] / 1e6
    _total, _started, done, ok, failed, errored, timeout = (int(x) for x in req.groups())
    codes = re.search(r"^status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", stdout, re.M)
    status_counts: dict[str, int] = {}
    if codes:
        for cls, n in zip(("2xx", "3xx", "4xx", "5xx"), codes.groups(), strict=True):
            if int(n):
                status_counts[cls] = int(n)
    traffic = re.search(r"^traffic: .*?\((\d+)\) total", stdout, re.M)
    mean = re.search(r"^time for request:\s+(\S+)\s+(\S+)\s+(\S+)", stdout, re.M)
    return LoadResult(
        requests=ok,
        duration_s=duration_s,
        bytes=int(traffic.group(1)) if traffic else 0,
        errors={
            "connect": 0,
            "read": 0,
            "write": 0,
            "timeout": timeout,
            "status": sum(v for k, v in status_counts.items() if k in ("4xx", "5xx")),
            # h2load's "failed" includes "errored" and "timeout"; its rest (failed - errored -
            # timeout) are streams that ended without a complete response.
            "other": errored + max(0, failed - errored - timeout) + max(0, done - ok - failed),
        },
        latency_us={"mean": _duration_us(mean.group(3)) if mean else None},
        status_counts=status_counts,
    )


def check_statuses(result: LoadResult) -> list[str]:
    """Problems that make an h2load run invalid: failed streams, answers other than 2xx, none."""
    problems = []
    for kind in ("timeout", "other"):
        if result.errors.get(kind):
            problems.append(f"{result.errors[kind]} {kind} error(s)")
    bad = {k: v for k, v in result.status_counts.items() if k != "2xx"}
    if bad:
        problems.append(f"unexpected status classes {bad} (expected 2xx)")
    if result.requests == 0:
        problems.append("no request completed")
    return problems
