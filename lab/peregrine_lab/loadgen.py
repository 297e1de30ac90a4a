"""Load generators: wrk (default) through wrk_report.lua, which prints machine-readable figures
from `done()`, and the seeds' others as alternatives with one flag (`--loadgen oha|bombardier|ab`;
none of them pipelines). oha also drives the open-loop lane: a fixed request rate with
coordinated-omission correction (`-q RATE --latency-correction`).

Both return a LoadResult; `check_statuses` decides whether a run counted errors or statuses the
contract does not expect.

A scenario whose answer depends on the request (an id, a query, a body) is not measured with one
fixed request, which a server caching answers by URL would pass: the load spreads over
`request_set`, VARIED_REQUESTS requests drawn from the run's seed, every one checked by parity
first. wrk cycles through them (wrk_report.lua), oha picks among them (`--urls-from-file`, `-Z`);
bombardier and ab send one fixed request, and the run records `distinct_requests` either way.
"""

from __future__ import annotations

import json
import re
import resource
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from . import config, parity
from .peers import Scenario

MARKER = "PEREGRINE_LAB_JSON "
VARIED_REQUESTS = 64
"""Distinct requests the load spreads over for a scenario whose answer depends on the request."""


class LoadgenError(Exception):
    """The load generator failed or printed nothing the runner can read."""


@dataclass
class LoadResult:
    requests: int
    duration_s: float
    bytes: int
    errors: dict[str, int]
    latency_us: dict[str, float | None]
    status_counts: dict[str, int] = field(default_factory=dict)
    client_cpu_s: float | None = None  # the load generator's own CPU time (user + system)
    distinct_requests: int = 1  # how many different requests the load was spread over

    @property
    def rps(self) -> float:
        return self.requests / self.duration_s if self.duration_s > 0 else 0.0

    def to_json(self) -> dict:
        return {
            "requests": self.requests,
            "duration_s": self.duration_s,
            "bytes": self.bytes,
            "rps": self.rps,
            "errors": dict(self.errors),
            "latency_us": dict(self.latency_us),
            "status_counts": dict(self.status_counts),
            "client_cpu_s": self.client_cpu_s,
            "distinct_requests": self.distinct_requests,
        }


def parse_wrk_output(stdout: str) -> LoadResult:
    """Read the `PEREGRINE_LAB_JSON {...}` line wrk_report.lua prints from done()."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(MARKER):
            try:
                data = json.loads(line[len(MARKER) :])
            except json.JSONDecodeError as e:
                raise LoadgenError(f"unreadable wrk report line {line!r}: {e}") from e
            try:
                return LoadResult(
                    requests=int(data["requests"]),
                    duration_s=int(data["duration_us"]) / 1e6,
                    bytes=int(data.get("bytes", 0)),
                    errors={k: int(v) for k, v in data["errors"].items()},
                    latency_us={
                        k: (None if v is None else float(v)) for k, v in data["latency_us"].items()
                    },
                )
            except (KeyError, TypeError, ValueError) as e:
                raise LoadgenError(f"incomplete wrk report {data!r}: {e}") from e
    tail = "\n".join(stdout.strip().splitlines()[-5:])
    raise LoadgenError(f"wrk printed no {MARKER.strip()} line; its output ended with:\n{tail}")


def parse_oha_output(stdout: str) -> LoadResult:
    """Read oha's JSON output (`--output-format json` / `-j`). Latencies there are seconds."""
    try:
        data = json.loads(stdout)
    except json.JSONDecodeError as e:
        raise LoadgenError(f"oha printed no JSON: {e}") from e
    try:
        summary = data["summary"]
        statuses = {str(k): int(v) for k, v in data.get("statusCodeDistribution", {}).items()}
        # Requests still in flight when the -z deadline hits are counted by oha as "aborted due
        # to deadline": the end of the run, not a server error.
        errors_by_kind = {
            str(k): int(v)
            for k, v in data.get("errorDistribution", {}).items()
            if "aborted due to deadline" not in str(k)
        }
        total = sum(statuses.values())
        pct = data.get("latencyPercentiles", {})

        def us(v):
            return None if v is None else float(v) * 1e6

        duration = float(summary["total"])
        lat = {
            "min": us(summary.get("fastest")),
            "mean": us(summary.get("average")),
            "max": us(summary.get("slowest")),
            "p50": us(pct.get("p50")),
            "p90": us(pct.get("p90")),
            "p99": us(pct.get("p99")),
            "p999": us(pct.get("p99.9")),
        }
    except (KeyError, TypeError, ValueError) as e:
        raise LoadgenError(f"unexpected oha JSON layout: {e}") from e
    errors = {
        "connect": 0,
        "read": 0,
        "write": 0,
        "timeout": 0,
        "status": sum(v for k, v in statuses.items() if int(k) >= 400),
        "other": sum(errors_by_kind.values()),
    }
    return LoadResult(
        requests=total,
        duration_s=duration,
        bytes=int(summary.get("totalData", 0) or 0),
        errors=errors,
        latency_us=lat,
        status_counts=statuses,
    )


def parse_bombardier_output(stdout: str) -> LoadResult:
    """Read bombardier's JSON (`-o json -p result -l`); its latencies are microseconds."""
    try:
        data = json.loads(stdout[stdout.index("{") :])
        r = data["result"]
        pct = (r.get("latency") or {}).get("percentiles") or {}
        statuses = {
            k[3] + "xx": int(r.get(k, 0))
            for k in ("req1xx", "req2xx", "req3xx", "req4xx", "req5xx")
        }
        total = sum(statuses.values())
        lat = {
            "mean": float(r["latency"]["mean"]),
            "max": float(r["latency"]["max"]),
            **{f"p{k}": (float(pct[k]) if k in pct else None) for k in ("50", "90", "99")},
        }
    except (ValueError, KeyError, TypeError) as e:
        raise LoadgenError(f"unexpected bombardier output: {e}: {stdout[-300:]!r}") from e
    errors = {
        "connect": 0,
        "read": 0,
        "write": 0,
        "timeout": 0,
        "status": statuses["4xx"] + statuses["5xx"],
        "other": int(r.get("others", 0))
        + sum(int(e.get("count", 0)) for e in r.get("errors") or []),
    }
    return LoadResult(
        requests=total,
        duration_s=float(r["timeTakenSeconds"]),
        bytes=int(r.get("bytesRead", 0)),
        errors=errors,
        latency_us=lat,
    )


def parse_ab_output(stdout: str) -> LoadResult:
    """Read ApacheBench's text report (`ab -k -t S -n HUGE`): complete requests, time taken,
    failed and non-2xx counts, and the "Percentage of the requests served within" table (ms)."""

    def grab(pattern, cast=float, default=None):
        m = re.search(pattern, stdout, re.M)
        return cast(m.group(1)) if m else default

    done = grab(r"^Complete requests:\s+(\d+)", int)
    took = grab(r"^Time taken for tests:\s+([\d.]+) seconds")
    if done is None or took is None:
        raise LoadgenError(f"ab printed no report; its output ended with: {stdout[-300:]!r}")
    failed = grab(r"^Failed requests:\s+(\d+)", int, 0)
    non2xx = grab(r"^Non-2xx responses:\s+(\d+)", int, 0)
    pct = {int(k): float(v) * 1000 for k, v in re.findall(r"^\s+(\d+)%\s+(\d+)", stdout, re.M)}
    return LoadResult(
        requests=done,
        duration_s=took,
        bytes=grab(r"^Total transferred:\s+(\d+) bytes", int, 0),
        errors={
            "connect": 0,
            "read": 0,
            "write": 0,
            "timeout": 0,
            "status": non2xx,
            "other": failed,
        },
        latency_us={"p50": pct.get(50), "p90": pct.get(90), "p99": pct.get(99)},
    )


def request_set(scenario: Scenario, seed: int) -> list[Scenario]:
    """The requests a load run of `scenario` spreads over: the contract's and, when its answer
    depends on the request, VARIED_REQUESTS - 1 others (`parity.variants`, drawn from `seed`, so
    every server of a run gets the same set and parity checks each of them first)."""
    return [scenario, *parity.variants(scenario, VARIED_REQUESTS - 1, seed)]


def _write_requests(folder: Path, requests: list[Scenario]) -> Path:
    """wrk_report.lua's request file: one `METHOD<TAB>PATH<TAB>BODY` line per request."""
    lines = []
    for r in requests:
        body = r.body.decode()
        if any(ch in x for x in (r.method, r.path, body) for ch in "\t\r\n"):
            raise LoadgenError(f"request {r.method} {r.path} cannot be written one per line")
        lines.append(f"{r.method}\t{r.path}\t{body}")
    path = folder / "requests.tsv"
    path.write_text("\n".join(lines) + "\n")
    return path


def _write_oha_sets(folder: Path, base: str, requests: list[Scenario]) -> dict[str, Path]:
    """oha's equivalents: the URLs (`--urls-from-file`) and bodies (`-Z`, one per line) that
    differ between the requests; oha picks one of each per request."""
    out = {}
    paths = list(dict.fromkeys(r.path for r in requests))
    bodies = list(dict.fromkeys(r.body for r in requests))
    if len(paths) > 1:
        out["urls"] = folder / "urls.txt"
        out["urls"].write_text("".join(f"{base}{p}\n" for p in paths))
    if len(bodies) > 1:
        if any(b"\n" in b for b in bodies):
            raise LoadgenError("a request body holds a newline: oha -Z reads one body per line")
        out["bodies"] = folder / "bodies.txt"
        out["bodies"].write_bytes(b"".join(b + b"\n" for b in bodies))
    return out


def check_statuses(result: LoadResult, expected_status: int) -> list[str]:
    """Problems that make a run invalid: transport errors, or statuses other than expected.

    wrk counts every answer with status >= 400 in `errors.status`, so with an expected status
    below 400 that count must be 0, and with an expected 4xx/5xx it must equal the requests."""
    problems = []
    for kind in ("connect", "read", "write", "timeout", "other"):
        n = result.errors.get(kind, 0)
        if n:
            problems.append(f"{n} {kind} error(s)")
    bad = result.errors.get("status", 0)
    if expected_status < 400 and bad:
        problems.append(f"{bad} answer(s) with status >= 400 (expected {expected_status})")
    # `>` is allowed: ab counts the non-2xx answer of a request cut by its time limit, which
    # "Complete requests" leaves out.
    if expected_status >= 400 and bad < result.requests:
        problems.append(
            f"{result.requests - bad} answer(s) with status < 400 (expected {expected_status})"
        )
    if result.status_counts:
        other = {k: v for k, v in result.status_counts.items() if int(k) != expected_status}
        if other:
            problems.append(f"unexpected statuses {other} (expected {expected_status})")
    if result.requests == 0:
        problems.append("no request completed")
    return problems


def wrk_command(
    url: str,
    scenario: Scenario,
    *,
    concurrency: int,
    threads: int,
    duration: float,
    pipeline: int,
    body_file: Path | None,
    timeout: float = 5.0,
    requests_file: Path | None = None,
) -> list[str]:
    threads = max(1, min(threads, concurrency))
    args = [str(pipeline), scenario.method, str(body_file) if body_file else "-"]
    args.append(str(requests_file) if requests_file else "-")
    args += [f"{k}: {v}" for k, v in scenario.headers.items()]
    return [
        "wrk",
        "-t",
        str(threads),
        "-c",
        str(concurrency),
        # wrk reads whole seconds only ("1.5s" is an error).
        "-d",
        f"{max(1, round(duration))}s",
        "--timeout",
        f"{max(1, round(timeout))}s",
        "-s",
        str(config.WRK_SCRIPT),
        url,
        "--",
        *args,
    ]


def oha_command(
    url: str,
    scenario: Scenario,
    *,
    concurrency: int,
    threads: int,
    duration: float,
    body_file: Path | None,
    timeout: float = 5.0,
    rate: float | None = None,
    sets: dict[str, Path] | None = None,
) -> list[str]:
    sets = sets or {}
    cmd = [
        "oha",
        "--no-tui",
        "--output-format",
        "json",
        "-z",
        f"{duration}s",
        "-c",
        str(concurrency),
        "-t",
        f"{timeout}s",
        "-m",
        scenario.method,
    ]
    if rate:
        # Open loop: requests are due at fixed times; latency counts from when a request was
        # due, not from when a busy connection got round to sending it (coordinated omission).
        cmd += ["-q", f"{rate:g}", "--latency-correction"]
    for k, v in scenario.headers.items():
        cmd += ["-H", f"{k}: {v}"]
    if "bodies" in sets:
        cmd += ["-Z", str(sets["bodies"])]
    elif body_file:
        cmd += ["-D", str(body_file)]
    if "urls" in sets:
        return cmd + ["--urls-from-file", str(sets["urls"])]
    return cmd + [url]


def bombardier_command(
    url, scenario, *, concurrency, duration, body_file, timeout=5.0
) -> list[str]:
    cmd = ["bombardier", "-c", str(concurrency), "-d", f"{duration}s", "-l", "-p", "r"]
    cmd += ["-o", "json", "--timeout", f"{timeout}s", "-m", scenario.method]
    for k, v in scenario.headers.items():
        cmd += ["-H", f"{k}: {v}"]
    if body_file:
        cmd += ["-f", str(body_file)]
    return cmd + [url]


def ab_command(url, scenario, *, concurrency, duration, body_file, timeout=5.0) -> list[str]:
    # -t S stops after S seconds; -n must be large or ab stops at its default 50,000 requests.
    cmd = ["ab", "-q", "-k", "-c", str(concurrency), "-t", f"{max(1, round(duration))}"]
    cmd += ["-n", "100000000", "-s", f"{max(1, round(timeout))}", "-r"]
    for k, v in scenario.headers.items():
        if k.lower() == "connection" and v.lower() == "close":
            cmd.remove("-k")  # ab's keep-alive flag; without it every request is a connection
            continue
        if k.lower() == "content-type":
            continue
        cmd += ["-H", f"{k}: {v}"]
    if body_file:
        cmd += ["-p", str(body_file), "-T", scenario.headers.get("Content-Type", "text/plain")]
    if scenario.method not in ("GET", "POST"):
        cmd += ["-m", scenario.method]
    return cmd + [url]


LOADGENS = ("wrk", "oha", "bombardier", "ab")


def available(name: str) -> bool:
    return shutil.which(name) is not None


def run(
    loadgen: str,
    url: str,
    scenario: Scenario,
    *,
    concurrency: int,
    pipeline: int,
    duration: float,
    client_cpus: str | None,
    threads: int,
    body_file: Path | None,
    timeout: float = 5.0,
    rate: float | None = None,
    requests: list[Scenario] | None = None,
) -> LoadResult:
    """Run one load-generator pass, pinned to the client CPUs, and parse its figures. `rate`
    (oha only) makes it an open-loop run at that many requests per second; `requests` (from
    `request_set`) are the distinct requests wrk and oha spread the load over."""
    with tempfile.TemporaryDirectory(prefix="peregrine-lab-load-") as folder:
        return _run(
            loadgen,
            url,
            scenario,
            concurrency=concurrency,
            pipeline=pipeline,
            duration=duration,
            client_cpus=client_cpus,
            threads=threads,
            body_file=body_file,
            timeout=timeout,
            rate=rate,
            requests=requests if requests and len(requests) > 1 else None,
            folder=Path(folder),
        )


def _run(
    loadgen,
    url,
    scenario,
    *,
    concurrency,
    pipeline,
    duration,
    client_cpus,
    threads,
    body_file,
    timeout,
    rate,
    requests,
    folder,
) -> LoadResult:
    distinct = 1
    if rate and loadgen != "oha":
        raise LoadgenError("open-loop runs (a fixed rate) use oha")
    if pipeline > 1 and loadgen != "wrk":
        raise LoadgenError(f"{loadgen} cannot pipeline requests; use wrk for pipelined cells")
    common = dict(concurrency=concurrency, duration=duration, body_file=body_file, timeout=timeout)
    if loadgen == "wrk":
        reqs = _write_requests(folder, requests) if requests else None
        distinct = len(requests) if requests else 1
        cmd = wrk_command(
            url, scenario, threads=threads, pipeline=pipeline, requests_file=reqs, **common
        )
        parse = parse_wrk_output
    elif loadgen == "oha":
        base = url[: len(url) - len(scenario.path)] if url.endswith(scenario.path) else url
        sets = _write_oha_sets(folder, base, requests) if requests else {}
        distinct = len(requests) if sets else 1
        cmd = oha_command(url, scenario, threads=threads, rate=rate, sets=sets, **common)
        parse = parse_oha_output
    elif loadgen == "bombardier":
        cmd = bombardier_command(url, scenario, **common)
        parse = parse_bombardier_output
    elif loadgen == "ab":
        cmd = ab_command(url, scenario, **common)
        parse = parse_ab_output
    else:
        raise LoadgenError(f"unknown load generator {loadgen!r} ({', '.join(LOADGENS)})")
    if client_cpus:
        cmd = ["taskset", "-c", client_cpus] + cmd
    # A run that has not ended 15 s after its planned end is stopped and reported as such: wrk
    # 4.1 never returns when one connection gets over 10^6 responses a second (its latency
    # correction's interval, run time / responses per connection, rounds to 0 µs).
    limit = duration + timeout + 15
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired as e:
        raise LoadgenError(
            f"{loadgen} did not finish: still running {limit:.0f} s after a {duration:g} s run "
            f"(stopped); command: {' '.join(cmd)}"
        ) from e
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise LoadgenError(
            f"{loadgen} exited with {proc.returncode}: "
            f"{(proc.stderr or proc.stdout).strip()[-500:]}"
        )
    res = parse(proc.stdout)
    res.distinct_requests = distinct
    res.client_cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return res


def version(loadgen: str) -> str | None:
    if not available(loadgen):
        return None
    flag = {"wrk": "-v", "ab": "-V", "bombardier": "--version"}.get(loadgen, "--version")
    try:
        p = subprocess.run([loadgen, flag], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    out = (p.stdout or p.stderr).strip().splitlines()
    return out[0].strip() if out else None
