"""The measuring run: build, start each server pinned, check parity, measure idle memory, time
every cell N times, run the probe, stop the server; results saved after every server so an
interrupted run still leaves what it measured."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from . import build, compliance, config, loadgen, metrics, parity, procs, results, stats
from .database import db_hooks as database  # issue 15: the db profile's hooks, marked `# db`
from .peers import Peer, Scenario, load_contract, load_peers, select_peers

HOST = "127.0.0.1"
DEFAULT_PORT = 28080  # below the kernel's ephemeral range (32768-60999 by default)
CELL_KEYS = ("rps", "p50_us", "p99_us", "cpu_us_per_req", "peak_rss_bytes", "db_cpu_us_per_req")


class LabError(Exception):
    """A condition that stops the whole run (missing load generator, busy port...)."""


@dataclass
class Options:
    profile: config.Profile
    out_dir: Path
    split: config.CpuSplit
    loadgen: str = "wrk"
    port: int | None = None  # None: the first free port from DEFAULT_PORT
    auto_port: bool = False  # set by run() when port was None
    skip_build: bool = False
    reference: str = "peregrine"
    command: str = ""
    peers_file: Path = config.PEERS_TOML


def _fmt_secs(s: float) -> str:
    s = max(0, int(s))
    return f"{s // 60:d}:{s % 60:02d}"


class Progress:
    """Progress lines with elapsed time and an estimate of the time left."""

    def __init__(self, total_estimate: float, stream=sys.stdout):
        self.start = time.monotonic()
        self.remaining = total_estimate
        self.stream = stream

    def done(self, estimate: float) -> None:
        self.remaining = max(0.0, self.remaining - estimate)

    def line(self, server: str, what: str) -> None:
        elapsed = time.monotonic() - self.start
        print(
            f"[{_fmt_secs(elapsed)} elapsed, ~{_fmt_secs(self.remaining)} left] {server}: {what}",
            file=self.stream,
            flush=True,
        )


def plan_cells(profile: config.Profile, scenarios: list[Scenario]):
    """The (scenario, concurrency, pipeline) cells of a profile, in measuring order."""
    out = []
    for s in scenarios:
        sweep = profile.sweep_scenarios is None or s.name in profile.sweep_scenarios
        for c, p in profile.cells if sweep else profile.base_cells:
            out.append((s, c, p))
    return out


def cell_estimate(profile: config.Profile) -> float:
    return profile.warmup + profile.runs * (profile.duration + 0.35) + 0.3


def server_estimate(profile: config.Profile) -> float:
    if profile.probe is None:
        probe = 0.0
    elif "--quick" in profile.probe:
        probe = 6.0 if "--no-robustness" in profile.probe else 20.0
    else:
        probe = 90.0
    return 2.5 + profile.idle_connections / 1500 + probe


def _server_env(peer: Peer, port: int, workers: int) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("CARGO_TARGET_DIR", None)
    env.update(peer.env)
    env["ADDR"] = f"{HOST}:{port}"
    env["WORKERS"] = str(workers)
    env.update(database.server_env())  # db: DATABASE_URL, DB_POOL when the profile has one
    return env


def _cell_record(
    peer: Peer,
    scen: Scenario,
    c: int,
    p: int,
    status: str,
    message: str = "",
    runs=None,
    warmup=None,
) -> dict:
    runs = runs or []
    med, spread = stats.summarize(runs, CELL_KEYS)
    return {
        "server": peer.name,
        "scenario": scen.name,
        "concurrency": c,
        "pipeline": p,
        "status": status,
        "message": message,
        "warmup": warmup,
        "runs": runs,
        "median": med,
        "cv": spread,
    }


def measure_cell(
    opts: Options, server: procs.Server, scen: Scenario, c: int, p: int, body_file: Path | None
) -> dict:
    """Warm up, then `runs` timed passes, each with CPU and peak RSS of the server tree."""
    prof = opts.profile
    url = f"http://{HOST}:{opts.port}{scen.path}"
    expected = int(scen.expect.get("status", 200))
    common = dict(
        concurrency=c,
        pipeline=p,
        client_cpus=opts.split.client_list,
        threads=len(opts.split.client),
        body_file=body_file,
        timeout=prof.timeout,
    )
    warm = None
    if prof.warmup > 0:
        w = loadgen.run(opts.loadgen, url, scen, duration=prof.warmup, **common)
        warm = {"requests": w.requests, "rps": w.rps, "errors": w.errors}
        problems = loadgen.check_statuses(w, expected)
        if problems:
            return {
                "status": "failed",
                "message": "warm-up: " + "; ".join(problems),
                "warmup": warm,
                "runs": [],
            }
    runs = []
    for i in range(prof.runs):
        if not server.alive():
            return {
                "status": "failed",
                "message": f"server exited during run {i + 1}",
                "warmup": warm,
                "runs": runs,
            }
        pids = metrics.process_tree(server.pid)
        peak_reset = metrics.reset_peak_rss(pids)
        busy0, t0 = metrics.cpu_busy_seconds(opts.split.server), time.monotonic()
        before = metrics.Sample.take(server.pid)
        db_cpu0 = database.cpu_now()  # db
        res = loadgen.run(opts.loadgen, url, scen, duration=prof.duration, **common)
        after = metrics.Sample.take(server.pid)
        busy1, t1 = metrics.cpu_busy_seconds(opts.split.server), time.monotonic()
        cpu = after.cpu_since(before)
        # Share of the server CPUs' time spent on anything but the server during the run.
        other = max(0.0, (busy1 - busy0) - cpu) / ((t1 - t0) * len(opts.split.server))
        run = res.to_json()
        # With pipelining wrk times whole batches, and its coordinated-omission correction
        # (which assumes one request in flight per connection) corrupts the percentiles (p99 is
        # read as 0): pipelined cells keep wrk's raw figures in latency_us but report none.
        pipelined = p > 1
        run.update(
            {
                "p50_us": None if pipelined else res.latency_us.get("p50"),
                "p99_us": None if pipelined else res.latency_us.get("p99"),
                "server_cpu_s": cpu,
                "server_cpus_other_share": round(min(other, 1.0), 4),
                "cpu_us_per_req": cpu * 1e6 / res.requests if res.requests else None,
                "peak_rss_bytes": after.peak_rss if peak_reset else None,
                "rss_after_bytes": after.rss,
                "server_processes": len(after.pids),
                **database.run_figures(db_cpu0, res.requests),  # db
            }
        )
        problems = loadgen.check_statuses(res, expected)
        run["problems"] = problems
        runs.append(run)
        if problems:
            return {
                "status": "failed",
                "message": f"run {i + 1}: " + "; ".join(problems),
                "warmup": warm,
                "runs": runs,
            }
    return {"status": "ok", "message": "", "warmup": warm, "runs": runs}


def run(opts: Options) -> dict:
    prof = opts.profile
    procs.install_handlers()
    started = time.monotonic()
    if not loadgen.available(opts.loadgen):
        raise LabError(
            f"load generator {opts.loadgen!r} not found on PATH "
            "(./scripts/lab installs wrk with apt-get; oha: `cargo install oha`)"
        )
    if not loadgen.available("taskset"):
        raise LabError("taskset not found (Debian package util-linux)")
    opts.auto_port = opts.port is None
    if opts.auto_port:
        opts.port = _pick_port()
    elif not procs.wait_port_free(HOST, opts.port, 5.0):
        raise LabError(
            f"port {HOST}:{opts.port} is busy: something already listens there (or holds it); "
            "stop it or choose another with --port"
        )
    contract = load_contract(config.DB_SCENARIOS_JSON if prof.database else config.SCENARIOS_JSON)
    peers = select_peers(load_peers(opts.peers_file), list(prof.servers) if prof.servers else None)
    peers = database.db_peers(peers) if prof.database else peers  # db
    scenarios = contract.select(prof.scenarios)
    nofile = procs.raise_nofile_limit(max(4096, prof.idle_connections * 2 + 1024))
    cells = plan_cells(prof, scenarios)

    out = opts.out_dir
    out.mkdir(parents=True, exist_ok=True)
    logs = out / "logs"
    res = {
        "schema": results.SCHEMA,
        "generated_at": results.now_iso(),
        "command": opts.command,
        "profile": prof.name,
        "profile_description": prof.description,
        "overrides": _overrides(prof),
        "settings": {
            **prof.to_json(),
            "loadgen": opts.loadgen,
            "port": opts.port,
            "server_cpus": list(opts.split.server),
            "client_cpus": list(opts.split.client),
            "workers": opts.split.workers,
            "loadgen_threads": len(opts.split.client),
            "nofile_limit": nofile,
            "reference": opts.reference,
            "cpu_split_notes": opts.split.notes,
        },
        "machine": results.machine_info(),
        "tools": results.tool_versions(),
        "git": results.git_info(),
        "scenarios": [s.summary() for s in scenarios],
        "servers": [],
        "cells": [],
        "wall_seconds": None,
        "complete": False,
    }
    for note in opts.split.notes:
        print(f"note: {note}", flush=True)
    eph = procs.ephemeral_range()
    if eph and eph[0] <= opts.port <= eph[1]:
        print(
            f"note: port {opts.port} is inside the kernel's ephemeral range {eph[0]}-{eph[1]}: "
            "a client socket on this machine can take it and make a server fail to bind",
            flush=True,
        )
    print(
        f"profile {prof.name}: {len(peers)} server(s), {len(scenarios)} scenario(s), "
        f"up to {len(cells)} cell(s) per server; server CPUs {opts.split.server_list} "
        f"(WORKERS={opts.split.workers}), {opts.loadgen} on CPUs {opts.split.client_list}",
        flush=True,
    )

    # Build everything first so the measuring phase is not interleaved with compilers.
    builder = build.Builder(logs)
    build_start = time.monotonic()
    built: dict[str, build.BuildResult] = {}
    for i, peer in enumerate(peers, 1):
        if opts.skip_build:
            missing = build.missing_tools(peer)
            built[peer.name] = build.BuildResult(
                not missing,
                message=(f"skipped: needs {', '.join(missing)}" if missing else "build skipped"),
                missing=missing,
            )
            continue
        steps = " && ".join(" ".join(cmd) for cmd in peer.build) or "(nothing to build)"
        print(f"[build {i}/{len(peers)}] {peer.name}: {steps}", flush=True)
        b = builder.build(peer)
        built[peer.name] = b
        if not b.ok:
            print(f"[build {i}/{len(peers)}] {peer.name}: NOT BUILT: {b.message}", flush=True)

    res["build_seconds"] = round(time.monotonic() - build_start, 1)
    measured_peers = [p for p in peers if built[p.name].ok]
    estimate = sum(
        server_estimate(prof)
        + cell_estimate(prof) * sum(1 for s, _, _ in cells if s.name in p.scenarios)
        for p in measured_peers
    )
    progress = Progress(estimate)
    body_dir = Path(tempfile.mkdtemp(prefix="peregrine-lab-"))

    def body_file(s: Scenario) -> Path | None:
        if not s.body:
            return None
        f = body_dir / f"{s.name}.body"
        if not f.exists():
            f.write_bytes(s.body)
        return f

    try:
        if prof.database:  # db: PostgreSQL on the load generator's CPUs (the server's are measured)
            print(f"starting PostgreSQL on CPUs {opts.split.client_list}", flush=True)
            db = database.start_for_run(out, opts.split.client_list)
            res["database"] = database.summary(db)
        for peer in peers:
            b = built[peer.name]
            entry = {
                **peer.summary(),
                "build": b.to_json(),
                "version": None,
                "status": "ok" if b.ok else ("skipped" if b.missing else "build-failed"),
                "message": "" if b.ok else b.message,
                "startup_ms": None,
                "parity": {},
                "idle_memory": None,
                "compliance": None,
            }
            res["servers"].append(entry)
            if not b.ok:
                for s, c, p in cells:
                    st = "n/a" if s.name not in peer.scenarios else entry["status"]
                    res["cells"].append(
                        _cell_record(peer, s, c, p, st, b.message if st != "n/a" else "")
                    )
                continue
            entry["version"] = build.peer_version(peer)
            _measure_server(opts, peer, entry, res, cells, contract, progress, logs, body_file)
            res["wall_seconds"] = round(time.monotonic() - started, 1)
            results.save(res, out)
    finally:
        procs.kill_all()
        database.stop_active()  # db
        # Interrupted or failed: keep what was measured (marked incomplete) for the report.
        res["wall_seconds"] = round(time.monotonic() - started, 1)
        results.save(res, out)
        for f in body_dir.glob("*"):
            f.unlink()
        body_dir.rmdir()
    res["wall_seconds"] = round(time.monotonic() - started, 1)
    res["complete"] = True
    results.save(res, out)
    return res


def _measure_server(opts, peer, entry, res, cells, contract, progress, logs, body_file):
    prof = opts.profile
    mine = [(s, c, p) for s, c, p in cells if s.name in peer.scenarios]
    for s, c, p in cells:
        if s.name not in peer.scenarios:
            res["cells"].append(_cell_record(peer, s, c, p, "n/a"))
    progress.line(peer.name, f"starting on CPUs {opts.split.server_list}")
    if opts.auto_port and procs.port_in_use(HOST, opts.port):
        # Taken meanwhile (builds can take minutes): move to a free one.
        opts.port = _pick_port()
    entry["port"] = opts.port
    if not procs.wait_port_free(HOST, opts.port, 15.0):
        raise LabError(
            f"port {HOST}:{opts.port} is busy before starting {peer.name} "
            "(a previous server did not release it, or another program took it)"
        )
    server = None
    try:
        server = procs.start_server(
            peer.run,
            peer.dir,
            _server_env(peer, opts.port, opts.split.workers),
            opts.split.server_list,
            logs / f"server-{peer.name}.log",
        )
        procs.wait_for_port(HOST, opts.port, server.proc, timeout=30)
        # From just before the spawn (fork + exec included) to the first accepted connection.
        entry["startup_ms"] = round((time.monotonic() - server.started_at) * 1000, 1)
    except procs.StartError as e:
        tail = server.log_tail() if server else ""
        entry["status"] = "start-failed"
        entry["message"] = f"{e}" + (f"; end of its log:\n{tail}" if tail else "")
        progress.line(peer.name, f"DID NOT START: {entry['message']}")
        for s, c, p in mine:
            res["cells"].append(_cell_record(peer, s, c, p, "start-failed", str(e)))
        progress.done(server_estimate(prof) + cell_estimate(prof) * len(mine))
        if server:
            server.stop()
        return
    try:
        # Parity: every scenario the peer claims, before any timing.
        served = sorted({s.name for s, _, _ in mine}, key=lambda n: contract.names().index(n))
        ok_scenarios = []
        for name in served:
            scen = contract.by_name(name)
            if "check" in scen.expect:  # db: validity, not bytes
                pr = database.parity_check(
                    HOST, opts.port, scen, contract.required_headers, database.active()
                )
            else:
                pr = parity.check(
                    HOST, opts.port, scen, contract.required_headers, timeout=prof.timeout
                )
            entry["parity"][name] = pr.to_json()
            if pr.ok:
                ok_scenarios.append(name)
            else:
                progress.line(peer.name, f"parity MISMATCH on {name}: {'; '.join(pr.problems)}")
        progress.line(
            peer.name,
            f"started in {entry['startup_ms']} ms; parity ok on "
            f"{len(ok_scenarios)}/{len(served)} scenario(s)",
        )
        # Idle memory right after start, before load inflates the allocator's pools.
        if prof.idle_connections > 0:
            idle_scen = next(
                (contract.by_name(n) for n in ["plaintext"] + ok_scenarios if n in ok_scenarios),
                None,
            )
            if idle_scen is not None:
                progress.line(
                    peer.name,
                    f"idle memory with {prof.idle_connections} "
                    f"keep-alive connections ({idle_scen.name})",
                )
                im = metrics.idle_memory(
                    HOST,
                    opts.port,
                    server.pid,
                    idle_scen,
                    prof.idle_connections,
                    timeout=prof.timeout,
                )
                entry["idle_memory"] = {**im.to_json(), "scenario": idle_scen.name}
                if im.error:
                    progress.line(peer.name, f"idle memory: {im.error}")
                # Closing thousands of connections can keep a server busy for a while (a
                # thread per connection must wind down): wait until it answers again.
                if not _wait_answering(opts.port, idle_scen, prof.timeout, 30.0):
                    progress.line(peer.name, "not answering 30 s after the idle-memory test")
        progress.done(2.5 + prof.idle_connections / 1500)
        for s, c, p in mine:
            if not server.alive():
                res["cells"].append(_cell_record(peer, s, c, p, "failed", "server exited earlier"))
                progress.done(cell_estimate(prof))
                continue
            if p > 1 and opts.loadgen == "oha":
                res["cells"].append(
                    _cell_record(peer, s, c, p, "n/a", "oha does not pipeline; use wrk")
                )
                progress.done(cell_estimate(prof))
                continue
            if s.name not in ok_scenarios:
                res["cells"].append(
                    _cell_record(
                        peer,
                        s,
                        c,
                        p,
                        "parity-failed",
                        "; ".join(entry["parity"][s.name]["problems"]),
                    )
                )
                progress.done(cell_estimate(prof))
                continue
            progress.line(
                peer.name,
                f"{s.name} c={c} pipeline={p}: warm-up {prof.warmup:g} s "
                f"+ {prof.runs} x {prof.duration:g} s",
            )
            try:
                m = measure_cell(opts, server, s, c, p, body_file(s))
            except loadgen.LoadgenError as e:
                m = {"status": "failed", "message": str(e), "warmup": None, "runs": []}
            rec = _cell_record(peer, s, c, p, m["status"], m["message"], m["runs"], m["warmup"])
            res["cells"].append(rec)
            med = rec["median"]
            if rec["status"] == "ok":
                progress.done(cell_estimate(prof))
                progress.line(
                    peer.name,
                    f"{s.name} c={c} pipeline={p}: "
                    f"{med['rps']:,.0f} req/s, "
                    f"{_or_na(med['cpu_us_per_req'], '{:.2f}')} CPU us/req, "
                    f"p99 {_or_na(med['p99_us'], '{:.0f} us')}",
                )
            else:
                progress.done(cell_estimate(prof))
                progress.line(peer.name, f"{s.name} c={c} pipeline={p}: FAILED: {rec['message']}")
        if prof.probe is not None:
            if server.alive():
                progress.line(peer.name, f"compliance probe {' '.join(prof.probe)}".rstrip())
                entry["compliance"] = compliance.run_probe(
                    HOST,
                    opts.port,
                    opts.out_dir / "probe",
                    peer.name,
                    args=prof.probe,
                    timeout=180 if "--quick" in prof.probe else 900,
                    server_pid=server.pid,
                )
                c = entry["compliance"]
                if c.get("status") == "ok":
                    progress.line(
                        peer.name,
                        f"compliance score {c.get('score')}, "
                        f"{len(c.get('failed') or [])} case(s) failed",
                    )
                else:
                    progress.line(peer.name, f"compliance: {c.get('status')}: {c.get('message')}")
            else:
                entry["compliance"] = {"status": "error", "message": "server not running"}
        progress.done(server_estimate(prof) - 2.5 - prof.idle_connections / 1500)
        if not server.alive():
            entry["message"] = (
                entry["message"] + " " if entry["message"] else ""
            ) + f"server exited with status {server.proc.returncode} during the run"
    finally:
        server.stop()


def _pick_port() -> int:
    """Without --port: the first free port from DEFAULT_PORT up, so two lab runs on one machine
    do not stop each other (their figures still disturb each other: see the report's "other
    work on the server CPUs")."""
    for p in range(DEFAULT_PORT, DEFAULT_PORT + 100):
        if not procs.port_in_use(HOST, p):
            if p != DEFAULT_PORT:
                print(
                    f"note: port {DEFAULT_PORT} is busy (another lab run?); using {p}", flush=True
                )
            return p
    raise LabError(f"no free port in {DEFAULT_PORT}-{DEFAULT_PORT + 99}; use --port")


def _wait_answering(port: int, scen: Scenario, timeout: float, limit: float) -> bool:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            parity.exchange(HOST, port, scen, count=1, timeout=timeout)
            return True
        except (parity.ProtocolError, OSError):
            time.sleep(0.2)
    return False


def _overrides(prof: config.Profile) -> dict:
    """Settings given on the command line that differ from the named profile's defaults, so the
    report does not describe a reduced run as the full profile."""
    base = config.PROFILES.get(prof.name)
    if base is None:
        return {}
    mine, theirs = prof.to_json(), base.to_json()
    return {k: {"profile": theirs[k], "used": v} for k, v in mine.items() if theirs.get(k) != v}


def _or_na(v, fmt):
    return "n/a" if v is None else fmt.format(v)
