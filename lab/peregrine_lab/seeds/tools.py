"""The seeds' own load generators, each with the seed's flags: the argv the harness runs and the
parsing of each tool's real output into a loadgen.LoadResult.

oha 1.8.0 (NURL), ab and wrk (rust-http), wrk with Kourier's pipeline.lua (Kourier), autocannon v8
and wrk (NextRush), bombardier (Lemire). Only durations differ from the seeds (scaled so the
whole `./scripts/lab seeds` fits in about 30 minutes on 2 cores), and wrk's threads where it needs
a connection per thread; output flags (JSON) do not change the load."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

from .. import config, loadgen
from ..loadgen import LoadgenError, LoadResult

TOOLS_DIR = config.LAB_DIR / ".build" / "tools"
OHA_VERSION = "1.8.0"
OHA = TOOLS_DIR / f"oha-{OHA_VERSION}" / "bin" / "oha"
"""NURL's oha, installed by `scripts/setup seeds` (cargo install --root)."""
SCRIPTS_DIR = config.LAB_DIR / "peers" / "seeds" / "tools"
"""autocannon's package (npm) and runner, and the wrk scripts of the seeds."""
AUTOCANNON = SCRIPTS_DIR / "autocannon.js"
"""Runs autocannon v8 (npm, pinned by that folder's package-lock.json) with the programmatic
options NextRush's suite passes, and prints its result as JSON."""
PIPELINE_LUA = config.LAB_DIR.parent / "crates" / "peregrine" / "bench" / "pipeline.lua"
"""Kourier's (and TechEmpower's) pipeline.lua, the same script the framework's benches use:
`depth` copies of the request in one write."""


def oha_argv(url: str, *, connections: int, seconds: float) -> list[str]:
    """NURL: oha, HTTP/1.1 keep-alive (its default), C connections for a fixed time."""
    return [str(OHA), "--no-tui", "-j", "-z", f"{seconds:g}s", "-c", str(connections), url]


def ab_argv(url: str, *, requests: int, concurrency: int) -> list[str]:
    """rust-http: `ab -n 10000 -c N URL`, a new connection per request (no -k)."""
    return ["ab", "-n", str(requests), "-c", str(concurrency), url]


def wrk_argv(
    url: str,
    *,
    connections: int,
    threads: int,
    seconds: int,
    latency: bool = False,
    script: Path | None = None,
    script_args: tuple[str, ...] = (),
) -> list[str]:
    """wrk as the seeds wrote it: rust-http `--connections N --duration 10s --threads N`, Kourier
    `-c 512 -d 15 -t 6 --latency ... -s pipeline.lua -- 256`, NextRush `-c N -t 8 --latency`."""
    argv = ["wrk", "-c", str(connections), "-d", f"{seconds}s", "-t", str(threads)]
    if latency:
        argv.append("--latency")
    argv.append(url)
    if script:
        argv += ["-s", str(script)]
        if script_args:
            argv += ["--", *script_args]
    return argv


def autocannon_argv(
    url: str, *, connections: int, pipelining: int, seconds: int, requests: list[dict]
) -> list[str]:
    """NextRush: autocannon v8, 100 connections, pipelining 10, `requests` in turn."""
    opts = {
        "url": url,
        "connections": connections,
        "pipelining": pipelining,
        "duration": seconds,
        "requests": requests,
    }
    return ["node", str(AUTOCANNON), json.dumps(opts, separators=(",", ":"))]


def bombardier_argv(url: str, *, connections: int, seconds: float) -> list[str]:
    """Lemire: `bombardier -c N URL` (its default 10 s scaled), JSON result with percentiles."""
    return ["bombardier", "-c", str(connections), "-d", f"{seconds:g}s", "-l", "-p", "r"] + [
        "-o",
        "json",
        url,
    ]


_UNITS_US = {"us": 1.0, "ms": 1e3, "s": 1e6, "m": 60e6}


def _us(text: str) -> float:
    m = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text.strip())
    if not m:
        raise LoadgenError(f"unreadable wrk time {text!r}")
    return float(m.group(1)) * _UNITS_US[m.group(2)]


def parse_wrk_text(stdout: str) -> LoadResult:
    """wrk's own report: `N requests in Ts`, the Latency row (avg, max), the `--latency`
    distribution, socket errors and non-2xx/3xx answers. A percentile wrk prints as 0.00us (its
    histogram overflowed, as in Kourier's published run) is kept as None."""
    m = re.search(r"^\s*(\d+) requests in ([\d.]+)(us|ms|s|m), ([\d.]+)(\w+) read", stdout, re.M)
    if not m:
        raise LoadgenError(f"wrk printed no summary; its output ended with: {stdout[-300:]!r}")
    requests = int(m.group(1))
    duration = _us(m.group(2) + m.group(3)) / 1e6
    lat = {}
    row = re.search(r"^\s*Latency\s+(\S+)\s+\S+\s+(\S+)", stdout, re.M)
    if row:
        lat["mean"], lat["max"] = _us(row.group(1)), _us(row.group(2))
    for pct, val in re.findall(r"^\s+(50|75|90|99)%\s+(\S+)", stdout, re.M):
        v = _us(val)
        lat[f"p{pct}"] = v if v > 0 else None
    errors = {"connect": 0, "read": 0, "write": 0, "timeout": 0, "status": 0, "other": 0}
    sock = re.search(
        r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", stdout
    )
    if sock:
        for k, v in zip(("connect", "read", "write", "timeout"), sock.groups(), strict=True):
            errors[k] = int(v)
    non = re.search(r"Non-2xx or 3xx responses: (\d+)", stdout)
    if non:
        errors["status"] = int(non.group(1))
    return LoadResult(requests, duration, 0, errors, lat)


def parse_autocannon_json(stdout: str) -> LoadResult:
    """autocannon's result object (latencies in ms): requests, duration, p50/p90/p99, errors,
    timeouts and non-2xx answers."""
    try:
        data = json.loads(stdout[stdout.index("{") :])
        lat = data["latency"]
        res = LoadResult(
            requests=int(data["requests"]["total"]),
            duration_s=float(data["duration"]),
            bytes=int(data["throughput"]["total"]),
            errors={
                "connect": 0,
                "read": 0,
                "write": 0,
                "timeout": int(data.get("timeouts", 0)),
                "status": int(data.get("non2xx", 0)),
                "other": int(data.get("errors", 0)),
            },
            latency_us={
                k: float(lat[src]) * 1e3
                for k, src in (("mean", "average"), ("p50", "p50"), ("p90", "p90"), ("p99", "p99"))
            },
        )
    except (ValueError, KeyError, TypeError) as e:
        raise LoadgenError(f"unexpected autocannon output: {e}: {stdout[-300:]!r}") from e
    return res


def parse_ab(stdout: str) -> LoadResult:
    """ab's text report (loadgen.parse_ab_output)."""
    return loadgen.parse_ab_output(stdout)


def parse_oha(stdout: str) -> LoadResult:
    """oha's JSON (loadgen.parse_oha_output: the same layout in 1.8 and 1.16)."""
    return loadgen.parse_oha_output(stdout)


def parse_bombardier(stdout: str) -> LoadResult:
    """bombardier's JSON (loadgen.parse_bombardier_output)."""
    return loadgen.parse_bombardier_output(stdout)


PARSERS = {
    "oha": parse_oha,
    "ab": parse_ab,
    "wrk": parse_wrk_text,
    "autocannon": parse_autocannon_json,
    "bombardier": parse_bombardier,
}


def missing(*, nurl_oha: bool = True) -> list[str]:
    """The seeds' tools that are not installed (`scripts/setup seeds` installs them).
    `nurl_oha=False` leaves out oha 1.8.0, which only the real run needs: the tests drive the
    lab's own oha through the same argv (`scripts/setup autocannon`, to spare CI a second build)."""
    need = {
        f"oha {OHA_VERSION} ({OHA})": OHA.exists() or not nurl_oha,
        "ab": shutil.which("ab") is not None,
        "wrk": shutil.which("wrk") is not None,
        "bombardier": shutil.which("bombardier") is not None,
        "node": shutil.which("node") is not None,
        f"autocannon ({SCRIPTS_DIR}/node_modules)": (
            SCRIPTS_DIR / "node_modules" / "autocannon"
        ).is_dir(),
    }
    return [k for k, ok in need.items() if not ok]


def run(tool: str, argv: list[str], *, cpus: str | None, limit: float) -> LoadResult:
    """Runs one tool pass (pinned to `cpus` with taskset when given), parses its output."""
    cmd = (["taskset", "-c", cpus] if cpus else []) + argv
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired as e:
        raise LoadgenError(f"{tool} still running after {limit:.0f} s: {' '.join(cmd)}") from e
    except OSError as e:
        raise LoadgenError(f"cannot run {' '.join(cmd)}: {e}") from e
    if p.returncode != 0:
        raise LoadgenError(f"{tool} exited with {p.returncode}: {(p.stderr or p.stdout)[-400:]}")
    return PARSERS[tool](p.stdout)


def versions() -> dict[str, str | None]:
    """First line of each tool's version output."""

    def first(cmd):
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            return None
        out = (p.stdout or p.stderr).strip().splitlines()
        return out[0].strip() if out else None

    return {
        "oha": first([str(OHA), "--version"]),
        "ab": first(["ab", "-V"]),
        "wrk": first(["wrk", "-v"]),
        "bombardier": first(["bombardier", "--version"]),
        "autocannon": first(["node", str(AUTOCANNON), "--version"]),
    }
