"""Load generators: wrk (default) through wrk_report.lua, which prints machine-readable figures
from `done()`, and oha as an alternative (`--loadgen oha`, no pipelining).

Both return a LoadResult; `check_statuses` decides whether a run counted errors or statuses the
contract does not expect.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from . import config
from .peers import Scenario

MARKER = "PEREGRINE_LAB_JSON "


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
    if expected_status >= 400 and bad != result.requests:
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
) -> list[str]:
    threads = max(1, min(threads, concurrency))
    args = [str(pipeline), scenario.method, str(body_file) if body_file else "-"]
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
) -> list[str]:
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
    for k, v in scenario.headers.items():
        cmd += ["-H", f"{k}: {v}"]
    if body_file:
        cmd += ["-D", str(body_file)]
    return cmd + [url]


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
) -> LoadResult:
    """Run one load-generator pass, pinned to the client CPUs, and parse its figures."""
    if loadgen == "wrk":
        cmd = wrk_command(
            url,
            scenario,
            concurrency=concurrency,
            threads=threads,
            duration=duration,
            pipeline=pipeline,
            body_file=body_file,
            timeout=timeout,
        )
        parse = parse_wrk_output
    elif loadgen == "oha":
        if pipeline > 1:
            raise LoadgenError("oha cannot pipeline requests; use wrk for pipelined cells")
        cmd = oha_command(
            url,
            scenario,
            concurrency=concurrency,
            threads=threads,
            duration=duration,
            body_file=body_file,
            timeout=timeout,
        )
        parse = parse_oha_output
    else:
        raise LoadgenError(f"unknown load generator {loadgen!r} (wrk or oha)")
    if client_cpus:
        cmd = ["taskset", "-c", client_cpus] + cmd
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=duration + timeout + 30)
    except subprocess.TimeoutExpired as e:
        raise LoadgenError(f"{loadgen} did not finish: {' '.join(cmd)}") from e
    if proc.returncode != 0:
        raise LoadgenError(
            f"{loadgen} exited with {proc.returncode}: "
            f"{(proc.stderr or proc.stdout).strip()[-500:]}"
        )
    return parse(proc.stdout)


def version(loadgen: str) -> str | None:
    if not available(loadgen):
        return None
    flag = "-v" if loadgen == "wrk" else "--version"
    try:
        p = subprocess.run([loadgen, flag], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    out = (p.stdout or p.stderr).strip().splitlines()
    return out[0].strip() if out else None
