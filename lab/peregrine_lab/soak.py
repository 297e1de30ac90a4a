"""`./scripts/lab soak [--duration S]`: the scenarios app (TLS, HTTP/2, WebSocket, SSE, static
files, multipart uploads, PostgreSQL) under a mixed load for a long time (default 30 minutes).
The steady keep-alive load (GET /plaintext over TLS) is oha's (`soak_oha`): first oha closed
loop on many connections, with the rest of the mix running, measures the server's capacity on
this machine; then oha runs open loop at a share of it (`Plan.load_fraction`, 70%;
`--load-fraction`) with coordinated omission corrected, in back-to-back segments of one sample
interval. The rest of the mix is the Python clients' (`soak_load`). Sampled at the end of each
segment, every 10 s (every 2 s when the run is shorter than 10 minutes): RSS, open
descriptors, TCP connections by state, the CPU of the server, of oha, of the Python clients
and of the whole machine, the server's live heap (`GET /debug/heap`, glibc's per-thread caches
off), CPU per request, oha's p50/p99/p99.9 of the steady load, every client error by kind
(oha's too). After warm-up, RSS, the live heap and descriptors must stay flat (within 5%; no
upward trend of the heap or the descriptors, nor of RSS when the heap is not reported), the
steady p99 stable within 20% against a freshly started twin of the server that takes a share
of the steady load beside it in every interval (`Twin`), and no client may see an unexpected
error (budgets: `soak_stats`). Writes results.json, report.md and soak.svg under
lab/results/soak (or --out); exits 1 when a budget is missed.

The chart and report are `soak_report`'s.
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

from . import (
    config,
    database,
    metrics,
    procs,
    soak_oha,
    soak_proto,
    soak_report,
    soak_stats,
    tls_checks,
)
from .soak_load import BLOB_NAME, Load, Plan, blob_bytes, multipart
from .soak_proto import Target, connect, exchange, get, request
from .soak_thread import ClientsThread

ROOT = config.LAB_DIR.parent
DEFAULT_DURATION = 1800.0
FEATURES = "tls,http2,ws,multipart"
# The server's allocator setting: no per-thread cache, so `GET /debug/heap` is the live heap.
HEAP_TUNABLES = "glibc.malloc.tcache_count=0"
# Seconds of the calibration not counted: connections opening, the database pools filling.
CALIBRATION_RAMP = 1.0
# Open-loop trials that bring the busiest CPU set to the load fraction, and how far above it
# a trial may read and stand (each is half the calibration's length).
TRIALS = 3
TRIAL_TOLERANCE = 0.03
# The share of the steady load (its rate and its connections) that goes, in every interval, to
# a twin of the server started fresh for that interval (`Twin`): the p99 budget is the soaked
# server's p99 over the twin's in the same seconds, so that the VM's own speed (it drifted by
# 10% during 30-minute runs) and its hiccups land in both and are not read as the server's. A
# twin measured one interval in six instead gave ten p99s per third, a median too noisy for a
# 20% budget (docs/operations.md, "Soak").
TWIN_SHARE = 0.25
# Seconds of steady load a fresh twin gets before its measured segment: a new process's
# first requests fault in its pages and fill its pools, which is not the machine's speed.
TWIN_WARMUP = 1.0


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
    # A fresh twin beside the soaked server (`TWIN_SHARE`); the p99 budget needs it.
    twin: bool = True
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


async def preflight(target: Target) -> None:
    """Fails at once, with the cause, when the binary lacks a feature the mix needs: a
    `--skip-build` soak takes `target/release/examples/scenarios` as it finds it, and a lab run
    builds that binary with the peers' features, without `multipart` (every upload would then
    be a 404, counted as client errors for the whole run)."""
    body, ctype = multipart([b"preflight"])
    raw = request("POST", "/upload", body, {"Content-Type": ctype}, close=True)
    reader, writer = await connect(target)
    try:
        status, _, _ = await exchange(reader, writer, raw)
    finally:
        writer.close()
    if status == 404:
        raise SoakError(
            "the scenarios binary answers 404 on POST /upload: it was built without the "
            f"`multipart` feature (the soak needs {FEATURES}); run without --skip-build"
        )


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


class CpuMeter:
    """CPU used between two readings, in % of one core (200% is both CPUs of a 2-CPU
    machine): the server's, oha's (from what `soak_oha.run` measured), these Python clients'
    and the whole machine's (everything that ran, other users included)."""

    def __init__(self, pid: int):
        self.pid = pid
        self.last = self._read()

    def _read(self) -> tuple[float, float | None, float, float | None]:
        machine = soak_stats.read_machine_cpu()
        return (
            time.monotonic(),
            soak_stats.read_cpu_seconds(self.pid),
            time.process_time(),
            None if machine is None else machine[0],
        )

    def lap(self, oha_cpu_seconds: float) -> dict:
        """Since the last lap: each party's CPU (%), and the server's CPU seconds."""
        now = self._read()
        (t0, server0, own0, machine0), (t1, server1, own1, machine1) = self.last, now
        self.last = now
        elapsed = t1 - t0

        def pct(a: float | None, b: float | None) -> float | None:
            return (
                None
                if a is None or b is None or elapsed <= 0
                else round(100 * (a - b) / elapsed, 1)
            )

        return {
            "server": pct(server1, server0),
            "oha": pct(oha_cpu_seconds, 0.0),
            "python_clients": pct(own1, own0),
            "machine": pct(machine1, machine0),
            "server_seconds": None if server0 is None or server1 is None else server1 - server0,
        }


@dataclass
class Twin:
    """How to start a fresh copy of the soaked server: the same binary, arguments, CPUs and
    environment, its own port, no database (the steady route does not use it). Every interval
    starts one, warms it up, measures it and stops it, beside the soaked server's segment."""

    cmd: list[str]
    env: dict[str, str]
    cpus: str | None
    log_path: Path
    tls: bool
    panics: int = 0  # "panicked" lines in the twins' logs, summed over the run

    def _start(self, port: int) -> procs.Server:
        env = dict(self.env, ADDR=f"127.0.0.1:{port}")
        server = procs.start_server(self.cmd, ROOT, env, self.cpus, self.log_path)
        try:
            procs.wait_for_port("127.0.0.1", port, server.proc, 30)
        except procs.StartError:
            server.stop()
            raise
        return server

    def _stop(self, server: procs.Server) -> None:
        server.stop()
        if self.log_path.exists():
            self.panics += self.log_path.read_text(errors="replace").count("panicked")

    async def segment(self, seconds: float, rate: float, conns: int) -> soak_oha.Segment:
        """oha open loop at `rate` on `conns` connections on a fresh twin for `seconds` in all:
        start, `TWIN_WARMUP`, then the measured segment (the warm-up's errors and oha CPU
        count in it)."""
        began, port = time.monotonic(), free_port()
        server = await asyncio.to_thread(self._start, port)
        try:
            url = steady_url(port, self.tls)
            warm = await soak_oha.run(soak_oha.command(url, TWIN_WARMUP, conns, rate))
            left = max(seconds / 2, round(seconds - (time.monotonic() - began), 2))
            measured = await soak_oha.run(soak_oha.command(url, left, conns, rate))
        finally:
            await asyncio.to_thread(self._stop, server)
        measured.errors += warm.errors
        measured.cpu_seconds += warm.cpu_seconds
        return measured


def split(rate: float, conns: int, twin: bool) -> tuple[tuple[float, int], tuple[float, int]]:
    """The steady load's (rate, connections) for the soaked server and for the twin: the twin
    takes `TWIN_SHARE` of both (so each connection carries the same rate), none without one."""
    if not twin:
        return (rate, conns), (0.0, 0)
    twin_conns = max(1, round(conns * TWIN_SHARE))
    return (rate * (1 - TWIN_SHARE), conns - twin_conns), (rate * TWIN_SHARE, twin_conns)


async def _segments(
    url: str, seconds: float, rate: float, conns: int, twin: Twin | None
) -> tuple[soak_oha.Segment, soak_oha.Segment | None]:
    """The steady load for `seconds`: oha on the soaked server and, with a `twin`, its share on
    a fresh twin at the same time."""
    (rate_s, conns_s), (rate_t, conns_t) = split(rate, conns, twin is not None)
    soaked = soak_oha.run(soak_oha.command(url, seconds, conns_s, rate_s))
    if twin is None:
        return await soaked, None
    done = await asyncio.gather(soaked, twin.segment(seconds, rate_t, conns_t))
    return done[0], done[1]


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 3)


def _server_state(pid: int, port: int, heap_kib: int | None) -> dict:
    """The server's RSS, live heap, descriptors and TCP sockets by state, now."""
    return {
        "rss_kib": soak_stats.read_rss_kib(pid),
        "heap_kib": heap_kib,
        "fds": soak_stats.read_fds(pid),
        "tcp_states": soak_stats.read_tcp_states(port),
    }


def _latency(segment: soak_oha.Segment) -> dict:
    return {"p50_ms": _ms(segment.p50), "p99_ms": _ms(segment.p99), "p999_ms": _ms(segment.p999)}


def _sample(
    state: dict,
    tally,
    steady: soak_oha.Segment,
    t: float,
    cpu: dict,
    reference: soak_oha.Segment | None = None,
) -> dict:
    """One sample: the server's state (`_server_state`), what oha's steady segment and the
    Python clients did in the interval, and the CPU each used; with the twin's segment
    (`reference`), its latencies and rate as the sample's `reference`, its answers as
    `reference` operations (not the soaked server's requests) and its errors with the
    others."""
    ops = dict(tally.ops, steady=steady.ok)
    errors = tally.errors + steady.errors
    if reference is not None:
        ops["reference"] = reference.ok
        errors += reference.errors
    requests = sum(n for kind, n in ops.items() if kind not in ("sse_chunk", "reference"))
    cpu_s = cpu["server_seconds"]
    sample = {
        "t": round(t, 2),
        **state,
        "cpu_pct": cpu["server"],
        "cpu_pct_oha": cpu["oha"],
        "cpu_pct_python_clients": cpu["python_clients"],
        "cpu_pct_machine": cpu["machine"],
        "cpu_us_per_request": round(cpu_s * 1e6 / requests, 1)
        if cpu_s is not None and requests
        else None,
        # The steady load's latencies: oha's, coordinated omission corrected.
        **_latency(steady),
        "steady": {
            "rps": round(steady.requests / steady.seconds, 1) if steady.seconds else 0.0,
            "oha_seconds": round(steady.seconds, 3),
            # What the segment boundary cost: oha's start and exit around its own measured
            # run (its new connections are in `dialup_*`).
            "boundary_ms": round(1000 * (steady.wall_seconds - steady.seconds), 1),
            "dialup_avg_ms": _ms(steady.dialup_avg),
            "dialup_max_ms": _ms(steady.dialup_max),
        },
        "requests": requests,
        "ops": ops,
        "errors": dict(errors),
    }
    if reference is not None:
        rps = reference.requests / reference.seconds if reference.seconds else 0.0
        sample["reference"] = dict(_latency(reference), rps=round(rps, 1))
    return sample


def steady_url(port: int, tls: bool) -> str:
    return f"{'https' if tls else 'http'}://127.0.0.1:{port}{soak_oha.STEADY_PATH}"


async def _trial(
    url: str, plan: Plan, rate: float, cpus: dict[str, tuple[int, ...]], twin: Twin | None
) -> dict:
    """The steady load at `rate` (the twin's share on a fresh twin, as the soak will run it)
    for half the calibration's length: how busy each CPU set was."""
    before = {who: metrics.cpu_times(c) for who, c in cpus.items()}
    seconds = plan.calibrate_seconds / 2
    segment, reference = await _segments(url, seconds, rate, plan.steady_connections, twin)
    if reference is not None:
        segment.errors += reference.errors
    busy = {
        who: round(metrics.cpu_times(c).since(before[who]).busy_share(), 3)
        for who, c in cpus.items()
    }
    return {
        "rate": round(rate, 1),
        "busy": busy,
        "p99_ms": _ms(segment.p99),
        "errors": segment.errors,
    }


async def calibrate(
    target: Target,
    plan: Plan,
    blob: bytes,
    pid: int,
    url: str,
    server_cpus: tuple[int, ...],
    twin: Twin | None = None,
) -> dict:
    """The steady rate, from the capacity: oha closed loop on `soak_oha.CAPACITY_CONNECTIONS`
    connections for `plan.calibrate_seconds` with the rest of the mix running (after
    `CALIBRATION_RAMP`), the steady requests answered per second; with the CPU each party used
    meanwhile (the server near its workers' full CPU when it was the limit).

    "`load_fraction` of capacity" is a utilisation: the busiest party at that share of its
    CPUs. `load_fraction` of the closed-loop throughput is not that when a load generator is
    the limit: open loop costs oha more per request, and 70% of its closed-loop rate kept its
    CPU 89% busy, so the soak's p99 measured oha's own queue. So the rate then goes through up
    to `TRIALS` short open-loop trials: each measures how busy the client's and the server's
    CPUs are and scales the rate to put the busier at `load_fraction`; with a `twin`, the
    trials give it its share, as the soak will, so the rate found is the two servers' in all."""
    # At normal priority here: under SCHED_IDLE, oha's closed loop would leave them about 1%
    # of the client CPU, and the capacity would be measured without the mix.
    clients = ClientsThread(Load(target, plan, blob), low_priority=False).start()
    await asyncio.sleep(CALIBRATION_RAMP)
    errors = clients.swap().errors
    meter = CpuMeter(pid)
    cmd = soak_oha.command(url, plan.calibrate_seconds, soak_oha.CAPACITY_CONNECTIONS)
    trials: list[dict] = []
    try:
        segment = await soak_oha.run(cmd)
        cpu = meter.lap(segment.cpu_seconds)
        capacity = segment.ok / segment.seconds if segment.seconds else 0.0
        rate = plan.load_fraction * capacity
        cpus = {"client": tuple(sorted(os.sched_getaffinity(0))), "server": server_cpus}
        for _ in range(TRIALS if capacity else 0):
            trial = await _trial(url, plan, rate, cpus, twin)
            errors += trial.pop("errors")
            trials.append(trial)
            busiest = max(trial["busy"].values())
            if busiest <= plan.load_fraction + TRIAL_TOLERANCE or busiest <= 0:
                break
            rate *= plan.load_fraction / busiest
    finally:
        clients.stop()
    if not await clients.join(15):
        errors["clients_did_not_stop"] += 1
    errors += clients.swap().errors + segment.errors
    if capacity == 0:
        raise SoakError(f"the calibration completed no steady request (errors {dict(errors)})")
    cpu.pop("server_seconds")
    return {
        "seconds": round(segment.seconds, 2),
        "loadgen": "oha",
        "command": " ".join(cmd),
        "steady_connections": soak_oha.CAPACITY_CONNECTIONS,
        "capacity_rps": round(capacity, 1),
        "latency_ms": {"p50": _ms(segment.p50), "p99": _ms(segment.p99)},
        "server_cpu_pct": cpu["server"],
        "cpu_pct": cpu,
        "load_fraction": plan.load_fraction,
        "cpus": {who: list(c) for who, c in cpus.items()},
        "trials": trials,
        "steady_rate": round(rate, 1),
        "errors": dict(errors),
    }


async def _soak(
    server: procs.Server, port: int, opts: Options, blob: bytes, twin: Twin | None = None
) -> tuple[list[dict], int | None, Plan, dict | None]:
    """Calibrates (unless the plan gives a steady rate), runs the load and takes a sample at
    the end of each of oha's steady segments (the server's state read halfway through it)
    until the duration is up or the server exits; with a `twin`, it takes its share of the
    steady load in every interval. Also returns the plan run (its steady rate set, the two
    servers' in all) and the calibration."""
    target = _target(port, opts.tls)
    url = steady_url(port, opts.tls)
    plan, calibration = opts.plan, None
    await preflight(target)
    if plan.steady_rate is None:
        opts.progress(
            f"calibrating: oha closed loop on {soak_oha.CAPACITY_CONNECTIONS} connections with "
            f"the rest of the mix, {plan.calibrate_seconds:.0f} s"
        )
        server_cpus = (
            config.parse_cpu_list(opts.server_cpus)
            if opts.server_cpus
            else tuple(sorted(os.sched_getaffinity(0)))
        )
        calibration = await calibrate(target, plan, blob, server.pid, url, server_cpus, twin)
        plan = replace(plan, steady_rate=calibration["steady_rate"])
        opts.progress(
            f"  capacity {calibration['capacity_rps']} steady req/s (CPU, % of one core: "
            f"{calibration['cpu_pct']}); open-loop trials (rate, busy share of the CPU sets): "
            f"{[(t['rate'], t['busy']) for t in calibration['trials']]}; the soak runs at "
            f"{plan.steady_rate} req/s, the busiest CPUs about {plan.load_fraction:.0%} busy"
        )
    load = ClientsThread(Load(target, plan, blob)).start()
    opts.notes.append(
        f"The Python clients ran on a thread of their own under {load.priority} (oha under the "
        "normal policy): oha preempts them on the client CPU, so their CPU bursts do not count "
        "as the steady load's latency."
    )
    interval = interval_for(opts.duration)
    samples: list[dict] = []
    start = time.monotonic()
    meter = CpuMeter(server.pid)
    exit_status = None
    next_at = start + interval
    try:
        while True:
            # Each segment ends on the sampling grid: it is shortened by the time the last
            # boundary and the last sample took.
            seconds = max(interval / 2, round(next_at - time.monotonic(), 2))
            next_at += interval
            segment = asyncio.create_task(
                _segments(url, seconds, plan.steady_rate, plan.steady_connections, twin)
            )
            # The server's state is read halfway through the segment, under the steady load
            # (at its end oha's connections are closing).
            await asyncio.sleep(seconds / 2)
            try:
                heap_kib, heap_error = await read_heap_kib(target), None
            except Exception as e:  # any failure to read it is a recorded client error
                heap_kib, heap_error = None, soak_proto.error_kind(e)
            state = _server_state(server.pid, port, heap_kib)
            steady, reference = await segment
            now = time.monotonic()
            tally = load.swap()
            if heap_error:
                tally.errors[f"heap_read_{heap_error}"] += 1
            if server.proc.poll() is not None:
                exit_status = server.proc.returncode
                errors = tally.errors + steady.errors
                if reference is not None:
                    errors += reference.errors
                samples.append({"t": round(now - start, 2), "errors": dict(errors)})
                break
            oha_cpu = steady.cpu_seconds + (reference.cpu_seconds if reference else 0.0)
            cpu = meter.lap(oha_cpu)
            sample = _sample(state, tally, steady, now - start, cpu, reference)
            samples.append(sample)
            sample_p99 = f"p50/p99/p99.9 {sample['p50_ms']}/{sample['p99_ms']}/"
            sample_p99 += f"{sample['p999_ms']} ms"
            if reference is not None:
                sample_p99 += f" (twin p99 {sample['reference']['p99_ms']} ms)"
            opts.progress(
                f"  {sample['t']:7.1f} s  rss {sample['rss_kib']} KiB  heap {heap_kib} KiB  "
                f"fds {sample['fds']}  tcp {sample['tcp_states']}  cpu server "
                f"{sample['cpu_pct']}% oha {sample['cpu_pct_oha']}% python "
                f"{sample['cpu_pct_python_clients']}% machine {sample['cpu_pct_machine']}% "
                f"({sample['cpu_us_per_request']} us/req)  steady {sample['steady']['rps']} "
                f"req/s {sample_p99}  errors {sample['errors'] or 0}"
            )
            if now - start >= opts.duration - interval / 2:
                break
    finally:
        load.stop()
    if not await load.join(15):
        samples[-1].setdefault("errors", {})["clients_did_not_stop"] = 1
    # Errors of the clients' last moments (while they stop) count too.
    for kind, n in load.swap().errors.items():
        samples[-1].setdefault("errors", {})[kind] = samples[-1]["errors"].get(kind, 0) + n
    return samples, exit_status, plan, calibration


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
            twin_env = {k: v for k, v in env.items() if k not in database.server_env()}
            twin_log = opts.out_dir / "twin.log"
            twin = Twin([str(exe), *args], twin_env, opts.server_cpus, twin_log, opts.tls)
            try:
                procs.wait_for_port("127.0.0.1", port, server.proc, 30)
                opts.progress(
                    f"soaking {exe.name} (pid {server.pid}, port {port}) for "
                    f"{opts.duration:.0f} s, a sample every {interval_for(opts.duration):.0f} s"
                )
                samples, exit_status, plan, calibration = asyncio.run(
                    _soak(server, port, opts, blob, twin if opts.twin else None)
                )
            except procs.StartError as e:
                raise SoakError(f"the server did not start: {e}\n{server.log_tail()}") from e
            except soak_oha.OhaError as e:
                raise SoakError(f"the steady load generator failed: {e}") from e
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
    if twin.panics:
        budgets["failures"].append(f"the twins' logs hold {twin.panics} panic(s)")
        budgets["ok"] = False
    steady = [s for s in samples if s["t"] >= warmup and "steady" in s]
    soaked_seconds = sum(s["steady"]["oha_seconds"] for s in samples if "steady" in s)

    def median(key: str) -> float | None:
        values = [s[key] for s in steady if s.get(key) is not None]
        return statistics.median(values) if values else None

    cpu_steady = {
        party: median(key)
        for party, key in (
            ("server", "cpu_pct"),
            ("oha", "cpu_pct_oha"),
            ("python_clients", "cpu_pct_python_clients"),
            ("machine", "cpu_pct_machine"),
        )
    }
    cal_cpu = calibration and calibration["server_cpu_pct"]
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
        # What the open-loop steady load achieved on the soaked server, over oha's own time in
        # its segments: below the plan's rate when the load generator falls behind its
        # schedule (late ticks are dropped, not sent in a burst).
        "steady_rps_achieved": round(totals.get("steady", 0) / soaked_seconds, 1)
        if soaked_seconds
        else 0.0,
        # The fresh twin the p99 budget compares with, beside the soaked server: its share
        # of the steady rate (the plan's `steady_rate` is the two servers' in all).
        "twin": {
            "share": TWIN_SHARE,
            "warmup_seconds": TWIN_WARMUP,
            "log_panics": twin.panics,
        }
        if opts.twin
        else None,
        # Medians of the samples after warm-up, % of one core; the server's share of what it
        # used when it was the limit (the calibration): ~the load fraction when the server,
        # not a load generator, set the capacity.
        "cpu_pct_steady": cpu_steady,
        "server_busy_share": round(cpu_steady["server"] / cal_cpu, 3)
        if cal_cpu and cpu_steady["server"] is not None
        else None,
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
        # The median over the samples after warm-up of each interval's figure (oha reports
        # percentiles per segment, not its latencies).
        "latency_overall_ms": {
            "p50": median("p50_ms"),
            "p99": median("p99_ms"),
            "p999": median("p999_ms"),
        },
        "cpu_us_per_request_median": median("cpu_us_per_request"),
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
    if args.server_cpus:
        # One worker per CPU the server may use: two workers on one pinned core would take
        # turns on it, and their time slices would show up as the soak's tail latency.
        opts.workers = len(config.parse_cpu_list(args.server_cpus))
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
