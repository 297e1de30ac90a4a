"""`./scripts/lab soak [--duration S]`: the scenarios app (TLS, HTTP/2, WebSocket, SSE, static
files, multipart uploads, PostgreSQL) under a mixed load for a long time (default 30 minutes):
first a short closed-loop calibration of the same mix measures the steady requests per second
the machine can do (the capacity), then the steady load runs open loop at a share of it
(`Plan.load_fraction`, 70%; `--load-fraction`), sampled every 10 s (every 2 s when the run is
shorter than 10 minutes): RSS, open descriptors, TCP connections by state and CPU of the server,
its live heap (`GET /debug/heap`, glibc's per-thread caches off), CPU per request, p50/p99/p99.9
of the steady load, every client error by kind. After warm-up, RSS, the live heap and
descriptors must stay flat (within 5%; no upward trend of the heap or the descriptors, nor of
RSS when the heap is not reported), the steady p99 stable within 20%, and no client may see an
unexpected error (budgets: `soak_stats`). Writes results.json, report.md and soak.svg under
lab/results/soak (or --out); exits 1 when a budget is missed.

The clients are in `soak_load`; the chart and report in `soak_report`.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from . import config, database, procs, soak_proto, soak_report, soak_stats, tls_checks
from .soak_load import BLOB_NAME, Load, Plan, blob_bytes
from .soak_proto import Target, connect, exchange, get

ROOT = config.LAB_DIR.parent
DEFAULT_DURATION = 1800.0
FEATURES = "tls,http2,ws,multipart"
# The server's allocator setting: no per-thread cache, so `GET /debug/heap` is the live heap.
HEAP_TUNABLES = "glibc.malloc.tcache_count=0"
# Seconds of the calibration not counted: connections opening, the database pools filling.
CALIBRATION_RAMP = 1.0


class SoakError(Exception):
    """The soak could not run (build failed, server did not start)."""


@dataclass
class Options:
    out_dir: Path
    duration: float = DEFAULT_DURATION
    port: int | None = None
    skip_build: bool = False
    cargo_profile: str = "release"
    server_cpus: str | None = None
    workers: int = 2
    plan: Plan = field(default_factory=Plan)
    tls: bool = True
    notes: list[str] = field(default_factory=list)
    command: str = "./scripts/lab soak"
    progress: object = print


def interval_for(duration: float) -> float:
    """Seconds between samples: 10, or 2 for a short run."""
    return 2.0 if duration < 600 else 10.0


def warmup_for(duration: float) -> float:
    """Seconds of warm-up the budgets ignore: 15% of the run, between 15 s and 2 minutes."""
    return min(120.0, max(15.0, 0.15 * duration))


def binary(cargo_profile: str) -> Path:
    folder = "release" if cargo_profile == "release" else "debug"
    return ROOT / "target" / folder / "examples" / "scenarios"


def build(cargo_profile: str) -> None:
    """The scenarios app with the peers' features (as `peers/peers.toml` builds it)."""
    cmd = ["cargo", "build", "--quiet", "-p", "peregrine", "--example", "scenarios"]
    cmd += ["--features", FEATURES] + (["--release"] if cargo_profile == "release" else [])
    env = dict(os.environ)
    env.pop("CARGO_TARGET_DIR", None)
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SoakError(f"{' '.join(cmd)} failed:\n{done.stderr[-3000:]}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def machine_load() -> dict:
    """The machine's CPU count and 1-minute load average now: a busy machine (other builds on a
    shared one) makes the latency figures noisy, and the reports say how busy it was."""
    return {"cpus": os.cpu_count(), "loadavg_1min": round(os.getloadavg()[0], 2)}


def _git_commit() -> str | None:
    done = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    return done.stdout.strip() or None


def _target(port: int, tls: bool) -> Target:
    if not tls:
        return Target("127.0.0.1", port)
    ctx = tls_checks.client_context
    return Target("127.0.0.1", port, ctx(["http/1.1"]), ctx(["h2"]))


async def read_heap_kib(target: Target) -> int | None:
    """The app's live heap (KiB) from `GET /debug/heap` (the scenarios app on glibc: bytes in
    allocated chunks); None when it has no such route (404)."""
    reader, writer = await connect(target)
    try:
        status, _, body = await exchange(reader, writer, get("/debug/heap", close=True))
    finally:
        writer.close()
    if status == 404:
        return None
    if status != 200:
        raise ValueError(f"GET /debug/heap answered {status}")
    return round(json.loads(body)["in_use"] / 1024)


def _sample(
    server: procs.Server,
    port: int,
    tally,
    t: float,
    cpu_pct: float | None,
    cpu_s: float | None,
    heap_kib: int | None,
) -> dict:
    """One sample: the server's figures now and what the clients did in the interval."""
    lat = tally.latencies
    p50, p99, p999 = (soak_stats.percentile(lat, q) for q in (50, 99, 99.9))
    requests = sum(n for kind, n in tally.ops.items() if kind != "sse_chunk")
    return {
        "t": round(t, 2),
        "rss_kib": soak_stats.read_rss_kib(server.pid),
        "heap_kib": heap_kib,
        "fds": soak_stats.read_fds(server.pid),
        "tcp_states": soak_stats.read_tcp_states(port),
        "cpu_pct": None if cpu_pct is None else round(cpu_pct, 2),
        "cpu_us_per_request": round(cpu_s * 1e6 / requests, 1)
        if cpu_s is not None and requests
        else None,
        "p50_ms": None if p50 is None else round(p50 * 1000, 3),
        "p99_ms": None if p99 is None else round(p99 * 1000, 3),
        "p999_ms": None if p999 is None else round(p999 * 1000, 3),
        "requests": requests,
        "ops": dict(tally.ops),
        "errors": dict(tally.errors),
    }


async def calibrate(target: Target, plan: Plan, blob: bytes, pid: int) -> dict:
    """The capacity: the whole mix of `plan` with its steady connections closed loop for
    `plan.calibrate_seconds` (after `CALIBRATION_RAMP`), the steady requests answered per
    second; with the server's CPU meanwhile (% of one core: near `workers` × 100 when the
    server was the limit, lower when the load generator was) and the steady rate the soak
    then runs at (`plan.load_fraction` of the capacity)."""
    load = Load(target, plan, blob)
    clients = asyncio.create_task(load.run(closed_loop=True))
    await asyncio.sleep(CALIBRATION_RAMP)
    errors = load.swap().errors
    cpu0, t0 = soak_stats.read_cpu_seconds(pid), time.monotonic()
    await asyncio.sleep(plan.calibrate_seconds)
    tally, elapsed = load.swap(), time.monotonic() - t0
    cpu1 = soak_stats.read_cpu_seconds(pid)
    load.stop.set()
    try:
        await asyncio.wait_for(clients, 15)
    except TimeoutError:
        errors["clients_did_not_stop"] += 1
    errors += tally.errors + load.swap().errors
    capacity = tally.ops["steady"] / elapsed
    if capacity == 0:
        raise SoakError(f"the calibration completed no steady request (errors {dict(errors)})")
    cpu = None if cpu0 is None or cpu1 is None else round(100 * (cpu1 - cpu0) / elapsed, 1)
    return {
        "seconds": round(elapsed, 2),
        "steady_connections": plan.steady_connections,
        "capacity_rps": round(capacity, 1),
        "server_cpu_pct": cpu,
        "load_fraction": plan.load_fraction,
        "steady_rate": round(plan.load_fraction * capacity, 1),
        "errors": dict(errors),
    }


async def _soak(
    server: procs.Server, port: int, opts: Options, blob: bytes
) -> tuple[list[dict], int | None, list[float], Plan, dict | None]:
    """Calibrates (unless the plan gives a steady rate), runs the load and samples the
    server until the duration is up or the server exits; also returns the steady latencies
    after warm-up (seconds), the plan run (its steady rate set) and the calibration."""
    target = _target(port, opts.tls)
    plan, calibration = opts.plan, None
    if plan.steady_rate is None:
        opts.progress(
            f"calibrating: {plan.steady_connections} steady connections closed loop with the "
            f"rest of the mix, {plan.calibrate_seconds:.0f} s"
        )
        calibration = await calibrate(target, plan, blob, server.pid)
        plan = replace(plan, steady_rate=calibration["steady_rate"])
        opts.progress(
            f"  capacity {calibration['capacity_rps']} steady req/s (server CPU "
            f"{calibration['server_cpu_pct']}% of one core); the soak runs at "
            f"{plan.load_fraction:.0%} of it: {plan.steady_rate} req/s"
        )
    load = Load(target, plan, blob)
    clients = asyncio.create_task(load.run())
    warmup = warmup_for(opts.duration)
    latencies: list[float] = []
    interval = interval_for(opts.duration)
    samples: list[dict] = []
    start = time.monotonic()
    prev_t, prev_cpu = start, soak_stats.read_cpu_seconds(server.pid)
    next_at = start + interval
    exit_status = None
    while True:
        await asyncio.sleep(max(0.0, next_at - time.monotonic()))
        next_at += interval
        now = time.monotonic()
        try:
            heap_kib, heap_error = await read_heap_kib(target), None
        except Exception as e:  # any failure to read it is a recorded client error
            heap_kib, heap_error = None, soak_proto.error_kind(e)
        tally = load.swap()
        if heap_error:
            tally.errors[f"heap_read_{heap_error}"] += 1
        if server.proc.poll() is not None:
            exit_status = server.proc.returncode
            samples.append({"t": round(now - start, 2), "errors": dict(tally.errors)})
            break
        cpu = soak_stats.read_cpu_seconds(server.pid)
        used = cpu - prev_cpu if cpu is not None and prev_cpu is not None else None
        pct = None if used is None else 100 * used / (now - prev_t)
        prev_t, prev_cpu = now, cpu
        sample = _sample(server, port, tally, now - start, pct, used, heap_kib)
        if sample["t"] >= warmup:
            latencies += tally.latencies
        samples.append(sample)
        opts.progress(
            f"  {sample['t']:7.1f} s  rss {sample['rss_kib']} KiB  heap {heap_kib} KiB  "
            f"fds {sample['fds']}  "
            f"tcp {sample['tcp_states']}  cpu {sample['cpu_pct']}% "
            f"({sample['cpu_us_per_request']} us/req)  p50/p99/p99.9 {sample['p50_ms']}/"
            f"{sample['p99_ms']}/{sample['p999_ms']} ms  errors {sample['errors'] or 0}"
        )
        if now - start >= opts.duration:
            break
    load.stop.set()
    try:
        await asyncio.wait_for(clients, 15)
    except TimeoutError:
        samples[-1].setdefault("errors", {})["clients_did_not_stop"] = 1
    # Errors of the clients' last moments (while they stop) count too.
    for kind, n in load.swap().errors.items():
        samples[-1].setdefault("errors", {})[kind] = samples[-1]["errors"].get(kind, 0) + n
    return samples, exit_status, latencies, plan, calibration


def _server_env(port: int, work: Path, opts: Options, blob: bytes) -> tuple[dict, list[str]]:
    """The server's environment and arguments: the static file, TLS, the database."""
    static = work / "static"
    static.mkdir()
    (static / BLOB_NAME).write_bytes(blob)
    env = dict(
        os.environ, ADDR=f"127.0.0.1:{port}", WORKERS=str(opts.workers), STATIC_DIR=str(static)
    )
    # glibc counts the chunks its per-thread caches hold as in use: up to 7 per size class and
    # thread, filled over minutes, which would read as a slow leak of the live heap.
    env["GLIBC_TUNABLES"] = HEAP_TUNABLES
    args = []
    if opts.tls:
        cert = tls_checks.make_certificate(work / "tls")
        env.update(TLS_CERT=str(cert.cert), TLS_KEY=str(cert.key))
        args.append("--tls")
    if opts.plan.db_rate > 0:
        database.start_for_run(work, opts.server_cpus)
        env.update(database.server_env())
    return env, args


def run(opts: Options) -> dict:
    """Builds (unless told not to), starts PostgreSQL and the server, soaks, checks the
    budgets, writes results.json, report.md and soak.svg into opts.out_dir; returns the
    results."""
    # The commit the binary is built from: HEAD may move during a long soak.
    commit = _git_commit()
    load_before = machine_load()
    if not opts.skip_build:
        opts.progress(f"building the scenarios app ({opts.cargo_profile}, features {FEATURES})")
        build(opts.cargo_profile)
    exe = binary(opts.cargo_profile)
    if not exe.exists():
        raise SoakError(f"{exe} is missing (run without --skip-build)")
    port = opts.port or free_port()
    if procs.port_in_use("127.0.0.1", port):
        raise SoakError(f"port {port} is busy")
    opts.out_dir.mkdir(parents=True, exist_ok=True)
    log_path = opts.out_dir / "server.log"
    blob = blob_bytes()
    started = datetime.now(UTC).isoformat(timespec="seconds")
    with tempfile.TemporaryDirectory(prefix="peregrine-soak-") as tmp:
        try:
            env, args = _server_env(port, Path(tmp), opts, blob)
            server = procs.start_server([str(exe), *args], ROOT, env, opts.server_cpus, log_path)
            try:
                procs.wait_for_port("127.0.0.1", port, server.proc, 30)
                opts.progress(
                    f"soaking {exe.name} (pid {server.pid}, port {port}) for "
                    f"{opts.duration:.0f} s, a sample every {interval_for(opts.duration):.0f} s"
                )
                samples, exit_status, latencies, plan, calibration = asyncio.run(
                    _soak(server, port, opts, blob)
                )
            except procs.StartError as e:
                raise SoakError(f"the server did not start: {e}\n{server.log_tail()}") from e
            finally:
                server.stop()
        except database.DatabaseError as e:
            raise SoakError(f"PostgreSQL did not start: {e}") from e
        finally:
            database.stop_active()
    warmup = warmup_for(opts.duration)
    budgets = soak_stats.check_budgets(samples, warmup, exit_status)
    log = log_path.read_text(errors="replace") if log_path.exists() else ""
    panics = log.count("panicked")
    if calibration and calibration["errors"]:
        budgets["failures"].append(f"client errors in the calibration: {calibration['errors']}")
        budgets["ok"] = False
    if panics:
        budgets["failures"].append(f"the server log holds {panics} panic(s)")
        budgets["ok"] = False
    per_req = [
        s["cpu_us_per_request"]
        for s in samples
        if s.get("cpu_us_per_request") is not None and s["t"] >= warmup
    ]

    def p(q: float) -> float | None:
        return soak_stats.percentile(latencies, q)

    totals: dict[str, int] = {}
    for s in samples:
        for kind, n in s.get("ops", {}).items():
            totals[kind] = totals.get(kind, 0) + n
    result = {
        "schema": 1,
        "profile": "soak",
        "command": opts.command,
        "started": started,
        "git_commit": commit,
        "duration_seconds": opts.duration,
        "interval_seconds": interval_for(opts.duration),
        "plan": asdict(plan),
        "calibration": calibration,
        # What the open-loop steady load achieved: below the plan's rate when the load
        # generator falls behind its schedule (late ticks are dropped, not sent in a burst).
        "steady_rps_achieved": round(totals.get("steady", 0) / opts.duration, 1),
        "server": {
            "binary": str(exe.relative_to(ROOT)),
            "cargo_profile": opts.cargo_profile,
            "features": FEATURES,
            "workers": opts.workers,
            "cpus": opts.server_cpus,
            "tls": opts.tls,
            "database": opts.plan.db_rate > 0,
        },
        "totals": totals,
        "latency_overall_ms": {
            name: None if v is None else round(v * 1000, 3)
            for name, v in (("p50", p(50)), ("p99", p(99)), ("p999", p(99.9)))
        },
        "cpu_us_per_request_median": statistics.median(per_req) if per_req else None,
        "notes": list(opts.notes),
        "machine": {"before": load_before, "after": machine_load()},
        "server_log_panics": panics,
        "budgets": budgets,
        "samples": samples,
    }
    (opts.out_dir / "results.json").write_text(json.dumps(result, indent=1) + "\n")
    (opts.out_dir / "report.md").write_text(soak_report.markdown(result))
    title = f"soak {opts.duration:.0f} s, {opts.workers} workers"
    soak_report.chart(samples, budgets, opts.out_dir / "soak.svg", title)
    return result


def main(args, command: str) -> int:
    """`./scripts/lab soak`, from the lab's parsed arguments."""
    procs.install_handlers()
    if args.client_cpus:
        os.sched_setaffinity(0, config.parse_cpu_list(args.client_cpus))
    opts = Options(
        out_dir=args.out or (config.LAB_DIR / "results" / "soak"),
        duration=args.duration or DEFAULT_DURATION,
        port=args.port,
        skip_build=args.skip_build,
        server_cpus=args.server_cpus,
        command=command,
    )
    if args.load_fraction is not None:
        if not 0 < args.load_fraction <= 1:
            print("error: --load-fraction must be in (0, 1]", file=sys.stderr)
            return 2
        opts.plan = replace(opts.plan, load_fraction=args.load_fraction)
    try:
        res = run(opts)
    except SoakError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        procs.kill_all()
        print("\ninterrupted: the server is stopped", file=sys.stderr)
        return 130
    b = res["budgets"]
    print(f"results: {opts.out_dir / 'results.json'}, chart: {opts.out_dir / 'soak.svg'}")
    print(
        f"rss {b['rss'].get('first_third_median')} -> {b['rss'].get('last_third_median')} KiB, "
        f"fds {b['fds'].get('first_third_median')} -> {b['fds'].get('last_third_median')}, "
        f"errors {b['errors'] or 'none'}, totals {res['totals']}"
    )
    if not b["ok"]:
        for f in b["failures"]:
            print(f"BUDGET MISSED: {f}", file=sys.stderr)
        return 1
    print("every budget met")
    return 0
