"""The soak's steady keep-alive load, made by oha (a Rust load generator, `scripts/setup`
installs it) beside the Python clients of the rest of the mix: the Python client tops out far
below what the server can do, so the capacity it measured was its own.

* Calibration: oha closed loop (`-c CAPACITY_CONNECTIONS`, each connection sends its next
  request when the last is answered) for a few seconds; the requests answered per second are
  the capacity of the server for the steady route on this machine, with the load generator on
  it too.
* Steady load: oha open loop at a share of it (`-q RATE --latency-correction`: each latency
  counts from when its request was due, so a stall shows as latency, not as fewer requests),
  run as back-to-back segments of one sample interval each (`-z`, waiting for the requests in
  flight at the end: `-w`). Each segment's JSON gives the interval's p50/p99/p99.9 and its
  errors by kind. oha keeps every result in memory until it exits (about 100 bytes a
  request): one oha for 30 minutes at tens of thousands of requests a second would need
  gigabytes, segments need a few megabytes.

What a segment boundary costs: the next oha starts (the gap, measured per segment) and opens
its connections again, TLS handshakes included (oha's DNS+dialup time, recorded per segment);
those first requests' latencies include the handshake, as a real client's first request does.
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import re
import subprocess
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field

from .soak_proto import REQUEST_TIMEOUT

# Connections of the closed-loop calibration: enough to keep both of the server's workers
# busy while oha waits on each answer.
CAPACITY_CONNECTIONS = 64
# oha's own deadline-abort message: the end of a `-z` run without `-w`, not a server fault.
ABORTED = "aborted due to deadline"
STEADY_PATH = "/plaintext"
# What every answer to STEADY_PATH holds (the scenarios app's plaintext body).
STEADY_BODY = b"Hello, World!"


class OhaError(Exception):
    """oha did not run or printed nothing readable."""


@dataclass
class Segment:
    """One oha run: what it did and what it used."""

    seconds: float  # oha's own measured duration
    wall_seconds: float  # from starting the process to its exit
    requests: int  # answered (any status)
    ok: int  # answered 200
    p50: float | None  # seconds, latency-corrected in an open-loop run
    p99: float | None
    p999: float | None
    errors: Counter = field(default_factory=Counter)  # by kind
    dialup_avg: float | None = None  # seconds: DNS + connect + TLS handshake, per connection
    dialup_max: float | None = None
    cpu_seconds: float = 0.0  # oha's user + system CPU


def error_kind(message: str) -> str:
    """The kind an oha error message is counted under: the errno's name when the message
    carries one (`Connection refused (os error 111)` is `oha_ECONNREFUSED`), a timeout, or the
    message itself made into a name."""
    os_error = re.search(r"os error (\d+)", message)
    if os_error:
        code = int(os_error.group(1))
        return f"oha_{errno.errorcode.get(code, f'errno{code}')}"
    if "timeout" in message.lower() or "timed out" in message.lower():
        return "oha_timeout"
    slug = re.sub(r"[^a-z0-9]+", "_", message.lower()).strip("_")[:60]
    return f"oha_{slug or 'error'}"


def parse(
    stdout: str, wall_seconds: float = 0.0, cpu_seconds: float = 0.0, body: bytes = STEADY_BODY
) -> Segment:
    """A segment from oha's JSON output (`--output-format json`, latencies in seconds); every
    answer but a 200 counts as an error (`oha_status_NNN`), every oha error by kind, and, when
    every answer was a 200, body bytes other than `body`'s length for each as one
    `oha_wrong_body_bytes` (oha reports their total only, not the bodies)."""
    try:
        data = json.loads(stdout)
        summary = data["summary"]
        pct = data.get("latencyPercentiles", {})
        statuses = {int(k): int(v) for k, v in data.get("statusCodeDistribution", {}).items()}
        oha_errors = {str(k): int(v) for k, v in data.get("errorDistribution", {}).items()}
        dialup = data.get("details", {}).get("DNSDialup", {})
        seconds = float(summary["total"])
        body_bytes = int(summary.get("totalData") or 0)
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise OhaError(f"unreadable oha output ({e}): {stdout[:300]!r}") from e
    errors: Counter = Counter()
    for message, n in oha_errors.items():
        errors[error_kind(message)] += n
    for status, n in statuses.items():
        if status != 200:
            errors[f"oha_status_{status}"] += n
    if not errors and body_bytes != len(body) * statuses.get(200, 0):
        errors["oha_wrong_body_bytes"] += 1

    def secs(v) -> float | None:
        return None if v is None else float(v)

    return Segment(
        seconds=seconds,
        wall_seconds=wall_seconds,
        requests=sum(statuses.values()),
        ok=statuses.get(200, 0),
        p50=secs(pct.get("p50")),
        p99=secs(pct.get("p99")),
        p999=secs(pct.get("p99.9")),
        errors=errors,
        dialup_avg=secs(dialup.get("average")),
        dialup_max=secs(dialup.get("slowest")),
        cpu_seconds=cpu_seconds,
    )


def command(
    url: str,
    seconds: float,
    connections: int,
    rate: float | None = None,
) -> list[str]:
    """oha's argv: closed loop without `rate`, else open loop at `rate` requests a second with
    coordinated omission corrected; waits for the requests in flight at the deadline (`-w`),
    each given `REQUEST_TIMEOUT`. An https `url` is not verified: the soak's certificate is a
    fresh self-signed one, which rustls refuses as an end entity (CaUsedAsEndEntity), and the
    Python clients do not verify it either."""
    cmd = ["oha", "--no-tui", "--output-format", "json", "-z", f"{seconds:g}s"]
    cmd += ["-c", str(connections), "-t", f"{REQUEST_TIMEOUT:g}s", "-w"]
    if rate is not None:
        cmd += ["-q", f"{rate:g}", "--latency-correction"]
    if url.startswith("https:"):
        cmd.append("--insecure")
    return cmd + [url]


async def run(cmd: list[str]) -> Segment:
    """Runs one oha to its end; its CPU is its own, from the rusage `wait4` returns for it. (The
    children's total, `RUSAGE_CHILDREN`, would also count every other child reaped meanwhile:
    the twin's oha, which runs at the same time, and the twin servers, stopped each interval.)
    oha's output goes to files, so nothing waits on a pipe while `wait4` waits on oha."""
    start = time.monotonic()
    seconds = float(cmd[cmd.index("-z") + 1].rstrip("s"))
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=dict(os.environ, NO_COLOR="1"))
        except OSError as e:
            raise OhaError(f"oha did not start: {e}") from e
        waiter = asyncio.ensure_future(asyncio.to_thread(os.wait4, proc.pid, 0))
        try:
            _, status, usage = await asyncio.wait_for(
                asyncio.shield(waiter), seconds + REQUEST_TIMEOUT + 30
            )
        except TimeoutError as e:
            proc.kill()
            await waiter
            proc.returncode = -9
            raise OhaError(f"oha did not end: {' '.join(cmd)}") from e
        # Reaped here: Popen must not wait for it again.
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.monotonic() - start
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if proc.returncode != 0:
        raise OhaError(f"oha exited {proc.returncode}: {stderr.decode(errors='replace')[-500:]}")
    cpu = usage.ru_utime + usage.ru_stime
    return parse(stdout.decode(errors="replace"), wall, cpu)
