"""The measuring run: build, start each server pinned, check parity, measure idle memory, time
every cell N times, run the probe, stop the server; results saved after every server so an
interrupted run still leaves what it measured."""

from __future__ import annotations

import os
import random
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from . import (
    before,
    build,
    compliance,
    config,
    eta,
    loadgen,
    metrics,
    order,
    outside,
    parity,
    procs,
    results,
    scaling,
    seeding,
    stats,
)
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
    before_ref: str = before.DEFAULT_REF
    """The git ref `peregrine-hello-before` is built from, when the run measures it."""
    seed: int | None = None  # None: drawn at the start (seeding.run_seed)
    dry_run: bool = False  # print the plan (dryrun.describe) and return None
    outside: list[Peer] = field(default_factory=list)  # --server (outside.py)


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
    # Calibrated on a quick run on 2 busy CPUs: about 17 s per server (start, parity with the
    # Date check's 1.1 s wait, 1000 idle connections in about 3 s, the quick probe 7-9 s).
    if profile.probe is None:
        probe = 0.0
    elif "--quick" in profile.probe:
        probe = 9.0 if "--no-robustness" in profile.probe else 25.0
    else:
        probe = 90.0
    return 4.0 + profile.idle_connections / 400 + probe


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
    mode: str = "keep-alive",
    lane: str = "main",
) -> dict:
    runs = runs or []
    med, spread = stats.summarize(runs, CELL_KEYS)
    return {
        "server": peer.name,
        "scenario": scen.name,
        "concurrency": c,
        "pipeline": p,
        "mode": mode,
        "lane": lane,
        "status": status,
        "message": message,
        "warmup": warmup,
        "runs": runs,
        "median": med,
        "cv": spread,
    }


@dataclass
class Planned:
    """One cell to measure: a server, a scenario, a shape, a mode, and how many runs of what."""

    peer: Peer
    scen: Scenario
    c: int
    p: int
    mode: str
    lane: str
    runs: int
    duration: float
    rates: tuple[int, ...] = ()
    record: dict | None = None


def plan(prof: config.Profile, scenarios: list[Scenario], peers: list[Peer]):
    """The cells of a profile for these peers: (planned cells, records of cells not served).

    Without lanes, every peer gets `plan_cells` (the profile's cells) with the profile's runs;
    with lanes, each lane's servers get its cells, a cell measured by an earlier lane once."""
    lanes = prof.lanes or (
        config.Lane("main", "", tuple(s.name for s in scenarios), prof.cells, None),
    )
    wanted = {s.name: s for s in scenarios}
    planned, unserved, seen = [], [], set()
    for lane in lanes:
        names = [n for n in wanted if n in lane.scenarios]
        for peer in peers:
            if lane.servers is not None and peer.name not in lane.servers:
                continue
            shapes = (
                [(s, c, p) for s, c, p in plan_cells(prof, scenarios)]
                if not prof.lanes
                else [(wanted[n], c, p) for n in names for c, p in lane.cells]
            )
            for s, c, p in shapes:
                key = (peer.name, s.name, c, p, lane.mode)
                if key in seen:
                    continue
                seen.add(key)
                if s.name not in peer.scenarios:
                    if lane.mode != "open":
                        unserved.append(
                            _cell_record(peer, s, c, p, "n/a", mode=lane.mode, lane=lane.name)
                        )
                    continue
                planned.append(
                    Planned(
                        peer,
                        s,
                        c,
                        p,
                        lane.mode,
                        lane.name,
                        lane.runs or prof.runs,
                        lane.duration or prof.duration,
                        tuple(lane.rates),
                    )
                )
    return planned, unserved


def _scenario_for_mode(scen: Scenario, mode: str) -> Scenario:
    if mode == "close":
        return replace(scen, headers={**scen.headers, "Connection": "close"})
    return scen


def one_run(
    opts: Options,
    server: procs.Server,
    port: int,
    scen: Scenario,
    c: int,
    p: int,
    duration: float,
    body: Path | None,
    *,
    mode: str = "keep-alive",
    rate: float | None = None,
    wire_bytes: int | None = None,
) -> dict:
    """One timed pass of the load generator with the server's CPU time (schedstat, ns), peak RSS,
    the busy, steal and frequency figures of both CPU sets, and the load generator's own CPU."""
    url = f"http://{HOST}:{port}{scen.path}"
    expected = int(scen.expect.get("status", 200))
    gen = "oha" if rate else opts.loadgen
    pids = metrics.process_tree(server.pid)
    peak_reset = metrics.reset_peak_rss(pids)
    srv0, cli0 = metrics.cpu_times(opts.split.server), metrics.cpu_times(opts.split.client)
    mhz0 = metrics.cpu_mhz(opts.split.server + opts.split.client)
    t0, started_at = time.monotonic(), time.time()
    before = metrics.Sample.take(server.pid)
    db_cpu0 = database.cpu_now()  # db
    res = loadgen.run(
        gen,
        url,
        _scenario_for_mode(scen, mode),
        concurrency=c,
        pipeline=p,
        duration=duration,
        client_cpus=opts.split.client_list,
        threads=len(opts.split.client),
        body_file=body,
        timeout=opts.profile.timeout,
        rate=rate,
    )
    after = metrics.Sample.take(server.pid)
    t1 = time.monotonic()
    srv = metrics.cpu_times(opts.split.server).since(srv0)
    cli = metrics.cpu_times(opts.split.client).since(cli0)
    mhz1 = metrics.cpu_mhz(opts.split.server + opts.split.client)
    cpu = after.cpu_since(before)
    wall = t1 - t0
    overlap = set(opts.split.server) & set(opts.split.client)
    # Share of each CPU set's time spent on anything but the server (resp. the load generator).
    other_srv = max(0.0, srv.busy - cpu) / (wall * len(opts.split.server))
    client_cpu = res.client_cpu_s or 0.0
    other_cli = max(0.0, cli.busy - client_cpu) / (wall * len(opts.split.client))
    run = res.to_json()
    # With pipelining wrk times whole batches, and its coordinated-omission correction
    # (which assumes one request in flight per connection) corrupts the percentiles (p99 is
    # read as 0): pipelined cells keep wrk's raw figures in latency_us but report none.
    pipelined = p > 1
    run.update(
        {
            "p50_us": None if pipelined else res.latency_us.get("p50"),
            "p99_us": None if pipelined else res.latency_us.get("p99"),
            "p999_us": None if pipelined else res.latency_us.get("p999"),
            "server_cpu_s": cpu,
            "server_cpus_other_share": round(min(other_srv, 1.0), 4),
            "client_cpus_busy_share": round(min(cli.busy / (wall * len(opts.split.client)), 1), 4),
            "client_cpus_other_share": None if overlap else round(min(other_cli, 1.0), 4),
            "steal_share": round((srv.steal + cli.steal) / max(srv.total + cli.total, 1e-9), 4),
            "cpu_mhz": [mhz0, mhz1],
            "cpu_us_per_req": cpu * 1e6 / res.requests if res.requests else None,
            "started_at": round(started_at, 3),  # Unix time: how far apart paired runs were
            "peak_rss_bytes": after.peak_rss if peak_reset else None,
            "rss_after_bytes": after.rss,
            "server_processes": len(after.pids),
            **database.run_figures(db_cpu0, res.requests),  # db
        }
    )
    if rate:
        run["offered_rps"] = rate
    problems = loadgen.check_statuses(res, expected)
    if gen == "wrk" and mode == "keep-alive":
        bad = parity.bytes_per_response_problem(wire_bytes, res.bytes, res.requests)
        if bad:
            problems.append(bad)
    run["problems"] = problems
    return run


def run(opts: Options) -> dict | None:
    prof = opts.profile
    procs.install_handlers()
    started = time.monotonic()
    if not loadgen.available(opts.loadgen):
        raise LabError(
            f"load generator {opts.loadgen!r} not found on PATH (./scripts/setup lab installs "
            "wrk and ab; `./scripts/setup lab oha` oha; `./scripts/setup lab bombardier` "
            "bombardier)"
        )
    open_note = ""
    if any(ln.mode == "open" for ln in prof.lanes) and not loadgen.available("oha"):
        print(
            "note: oha not found on PATH (`./scripts/setup lab oha`): the open-loop lane runs "
            "only if it is there when the closed-loop cells are done",
            flush=True,
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
    wanted = list(prof.servers) if prof.servers else None
    try:  # issue 16: the engine at another commit, when the profile or --servers names it
        registry, wanted = outside.join(load_peers(opts.peers_file), wanted, opts.outside)
        registry, before_rev = before.with_before(registry, wanted, opts.before_ref)
    except before.BeforeError as e:
        raise LabError(str(e)) from e
    peers = select_peers(registry, wanted)
    peers = database.db_peers(peers) if prof.database else peers  # db
    peers = [p for p in peers if p.name not in prof.skip_servers]
    scenarios = contract.select(prof.scenarios)
    max_conns = max(
        [c for c, _ in prof.cells] + [c for ln in prof.lanes for c, _ in ln.cells], default=50
    )
    nofile = procs.raise_nofile_limit(max(4096, prof.idle_connections * 2 + 1024, max_conns * 3))
    planned, unserved = plan(prof, scenarios, peers)
    seed = seeding.run_seed(opts.seed)
    if opts.dry_run:
        from . import dryrun

        est = measuring_estimate(prof, peers, planned)
        dryrun.describe(prof, peers, planned, est, seed, sys.stdout)
        return None

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
            "order": order.SCHEME,
            "order_seed": seed,
            "seed": seed,
            "cpu_time": metrics.cpu_time_source(),
        },
        "machine": results.machine_info(),
        "tools": results.tool_versions(),
        "git": results.git_info(),
        "scenarios": [s.summary() for s in scenarios],
        "servers": [],
        "cells": [],
        "open_loop": [],
        "open_loop_note": open_note,
        "wall_seconds": None,
        "complete": False,
    }
    if before_rev is not None:
        res["before"] = {**before_rev.to_json(), "server": before.NAME}
        print(
            f"{before.NAME}: {before_rev.ref} = {before_rev.commit} ({before_rev.date}, "
            f"{before_rev.subject})",
            flush=True,
        )
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
        f"{len(planned)} cell(s) in all; server CPUs {opts.split.server_list} "
        f"(WORKERS={opts.split.workers}), {opts.loadgen} on CPUs {opts.split.client_list}; "
        "cells in randomised rounds, the servers of each cell back to back (blocked order)",
        flush=True,
    )

    # Build everything first so the measuring phase is not interleaved with compilers.
    builder = build.Builder(logs)
    build_start = time.monotonic()
    built: dict[str, build.BuildResult] = {}
    build_progress = eta.Countdown(len(peers))
    for i, peer in enumerate(peers, 1):
        if opts.skip_build:
            missing = build.missing_tools(peer)
            binary = peer.extra.get("binary")
            if not missing and binary and not Path(binary).exists():
                built[peer.name] = build.BuildResult(
                    False, message=f"--skip-build, and {binary} is not built: run without it"
                )
                continue
            built[peer.name] = build.BuildResult(
                not missing,
                message=(f"skipped: needs {', '.join(missing)}" if missing else "build skipped"),
                missing=missing,
            )
            continue
        steps = " && ".join(" ".join(cmd) for cmd in peer.build) or "(nothing to build)"
        print(
            f"[build {i}/{len(peers)}, {build_progress.left(i - 1)}] {peer.name}: {steps}",
            flush=True,
        )
        b = builder.build(peer)
        built[peer.name] = b
        if not b.ok:
            print(f"[build {i}/{len(peers)}] {peer.name}: NOT BUILT: {b.message}", flush=True)

    res["build_seconds"] = round(time.monotonic() - build_start, 1)
    # Again after the builds: the Node peers' node and Bun arrive with their `npm ci`.
    res["tools"] = results.tool_versions()
    measured = [p for p in peers if built[p.name].ok]
    estimate = measuring_estimate(prof, measured, [pl for pl in planned if built[pl.peer.name].ok])
    res["planned_measuring_seconds"] = round(estimate)
    progress = Progress(estimate)
    body_dir = Path(tempfile.mkdtemp(prefix="peregrine-lab-"))

    def body_file(s: Scenario) -> Path | None:
        if not s.body:
            return None
        f = body_dir / f"{s.name}.body"
        if not f.exists():
            f.write_bytes(s.body)
        return f

    res["cells"].extend(unserved)
    entries: dict[str, dict] = {}
    try:
        if prof.database:  # db: PostgreSQL on the load generator's CPUs (the server's are measured)
            print(f"starting PostgreSQL on CPUs {opts.split.client_list}", flush=True)
            db = database.start_for_run(out, opts.split.client_list)
            res["database"] = database.summary(db)
        # 1. Each server alone: start, parity, idle memory, probe, stop.
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
                "date_check": None,
                "idle_memory": None,
                "compliance": None,
            }
            res["servers"].append(entry)
            entries[peer.name] = entry
            if b.ok:
                entry["version"] = build.peer_version(peer)
                _check_server(opts, peer, entry, planned, contract, progress, logs)
            res["wall_seconds"] = round(time.monotonic() - started, 1)
            results.save(res, out)
        # 2. The cells, on fresh server processes all started at once (idle ones cost nothing),
        # in randomised rounds so drift and other work on the machine spread evenly, the servers
        # of one cell back to back so the runs a per-round ratio pairs are seconds apart.
        todo = []
        for pl in planned:
            entry = entries[pl.peer.name]
            if entry["status"] != "ok":
                st = entry["status"]
                pl.record = _cell_record(
                    pl.peer,
                    pl.scen,
                    pl.c,
                    pl.p,
                    st,
                    entry["message"][:300],
                    mode=pl.mode,
                    lane=pl.lane,
                )
            elif not (entry["parity"].get(pl.scen.name) or {}).get("ok"):
                problems = (entry["parity"].get(pl.scen.name) or {}).get("problems") or []
                pl.record = _cell_record(
                    pl.peer,
                    pl.scen,
                    pl.c,
                    pl.p,
                    "parity-failed",
                    "; ".join(problems),
                    mode=pl.mode,
                    lane=pl.lane,
                )
            elif pl.p > 1 and opts.loadgen != "wrk":
                pl.record = _cell_record(
                    pl.peer,
                    pl.scen,
                    pl.c,
                    pl.p,
                    "n/a",
                    f"{opts.loadgen} does not pipeline",
                    mode=pl.mode,
                    lane=pl.lane,
                )
            else:
                todo.append(pl)
        live = _start_all(opts, {pl.peer.name: pl.peer for pl in todo}, entries, logs, progress)
        closed = [pl for pl in todo if pl.mode != "open"]
        for pl in todo:
            if pl.peer.name not in live:
                pl.record = _cell_record(
                    pl.peer,
                    pl.scen,
                    pl.c,
                    pl.p,
                    "start-failed",
                    entries[pl.peer.name].get("load_message", "did not start for the cells"),
                    mode=pl.mode,
                    lane=pl.lane,
                )
        _measure_rounds(opts, closed, live, entries, progress, body_file, seed)
        if any(pl.mode == "open" for pl in todo) and not loadgen.available("oha"):
            open_note = "oha not found on PATH (`./scripts/setup lab oha`): open-loop lane not run"
            res["open_loop_note"] = open_note
        _measure_open(
            opts,
            [pl for pl in todo if pl.mode == "open" and not open_note],
            live,
            res,
            progress,
            body_file,
            seed,
        )
        if prof.scaling:  # the scaling lane (scaling.py): 1 and 2 workers on fresh processes
            scaling.measure(opts, peers, entries, contract, res, progress, body_file, seed)
        for pl in planned:
            if pl.record is not None:
                res["cells"].append(pl.record)
        for name, (server, _port) in live.items():
            if not server.alive():
                e = entries[name]
                e["message"] = (e["message"] + " " if e["message"] else "") + (
                    f"server exited with status {server.proc.returncode} during the cells"
                )
    finally:
        procs.kill_all()
        database.stop_active()  # db
        # Interrupted or failed: keep what was measured (marked incomplete) for the report.
        done = {id(c) for c in res["cells"]}
        for pl in planned:
            if pl.record is not None and id(pl.record) not in done and pl.record.get("runs"):
                res["cells"].append(pl.record)
        res["wall_seconds"] = round(time.monotonic() - started, 1)
        res["measuring_seconds"] = round(res["wall_seconds"] - res["build_seconds"], 1)
        results.save(res, out)
        for f in body_dir.glob("*"):
            f.unlink()
        body_dir.rmdir()
    res["wall_seconds"] = round(time.monotonic() - started, 1)
    res["measuring_seconds"] = round(res["wall_seconds"] - res["build_seconds"], 1)
    # A tool whose version could not be read before measuring (e.g. a busy machine timing out
    # `oha --version`) gets a second chance rather than an empty entry.
    results.fill_missing_versions(res["tools"])
    res["complete"] = True
    results.save(res, out)
    return res


def measuring_estimate(prof: config.Profile, peers: list[Peer], planned: list[Planned]) -> float:
    """Planned measuring time (seconds, builds excluded) of these peers' checks and cells and the
    scaling lane: what the progress lines count down from and the 10-minute budget of quick."""
    return (
        len(peers) * server_estimate(prof)
        + sum(_planned_estimate(prof, pl) for pl in planned)
        + scaling.planned_seconds(prof, len(scaling.lane_servers(prof, peers)))
    )


def _planned_estimate(prof: config.Profile, pl: Planned) -> float:
    if pl.mode == "open":
        return len(pl.rates) * (pl.duration + 1.0) * 0.6
    return prof.warmup + pl.runs * (pl.duration + 0.4) + (pl.runs - 1) * prof.round_warmup


def _start(opts: Options, peer: Peer, port: int, logs: Path, tag: str):
    server = procs.start_server(
        peer.run,
        peer.dir,
        _server_env(peer, port, opts.split.workers),
        opts.split.server_list,
        logs / f"server-{peer.name}{tag}.log",
    )
    try:
        procs.wait_for_port(HOST, port, server.proc, timeout=30)
    except procs.StartError:
        server.stop()
        raise
    return server


def _check_server(opts, peer, entry, planned, contract, progress, logs):
    """The checks that need a server alone: startup time, parity (with varied requests and a
    Date that must move on), idle memory, the compliance probe. The server is stopped after."""
    prof = opts.profile
    mine = sorted(
        {pl.scen.name for pl in planned if pl.peer.name == peer.name},
        key=lambda n: contract.names().index(n),
    )
    progress.line(peer.name, f"starting on CPUs {opts.split.server_list}")
    if opts.auto_port and procs.port_in_use(HOST, opts.port):
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
        progress.done(server_estimate(prof))
        if server:
            server.stop()
        return
    try:
        first_date = time.monotonic()
        ok_scenarios = []
        dated = None
        for name in mine:
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
                dated = dated or scen
            else:
                progress.line(peer.name, f"parity MISMATCH on {name}: {'; '.join(pr.problems)}")
        if dated is not None:
            # Date: two answers more than a second apart must carry different, valid dates.
            try:
                a = parity.exchange(HOST, opts.port, dated, count=1, timeout=prof.timeout)[0]
                first_date = time.monotonic()
                time.sleep(1.1)
                b = parity.exchange(HOST, opts.port, dated, count=1, timeout=prof.timeout)[0]
                problems = parity.check_dates(a, b, time.monotonic() - first_date)
            except (parity.ProtocolError, OSError) as e:
                problems = [f"no answer for the Date check: {e}"]
            entry["date_check"] = {"scenario": dated.name, "problems": problems}
            if problems:
                progress.line(peer.name, f"Date check: {'; '.join(problems)}")
                for name in ok_scenarios:
                    entry["parity"][name]["ok"] = False
                    entry["parity"][name]["problems"] += problems
                ok_scenarios = []
        progress.line(
            peer.name,
            f"started in {entry['startup_ms']} ms; parity ok on "
            f"{len(ok_scenarios)}/{len(mine)} scenario(s)",
        )
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
                if not _wait_answering(opts.port, idle_scen, prof.timeout, 30.0):
                    progress.line(peer.name, "not answering 30 s after the idle-memory test")
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
                        f"compliance score {c.get('score')} (MUST only: {c.get('must_score')}), "
                        f"{len(c.get('failed') or [])} case(s) failed",
                    )
                else:
                    progress.line(peer.name, f"compliance: {c.get('status')}: {c.get('message')}")
            else:
                entry["compliance"] = {"status": "error", "message": "server not running"}
        if not server.alive():
            entry["message"] = (
                entry["message"] + " " if entry["message"] else ""
            ) + f"server exited with status {server.proc.returncode} during the checks"
        progress.done(server_estimate(prof))
    finally:
        server.stop()


def _start_all(opts, peers: dict[str, Peer], entries, logs, progress) -> dict:
    """Start a fresh process of each server for the cells, each on its own port; returns
    {name: (Server, port)}. The load cells never run on the process the idle-memory step and
    the probe used, so "peak RSS under load" is the load's own."""
    live = {}
    port = opts.port
    for name, peer in peers.items():
        while procs.port_in_use(HOST, port):
            port += 1
        try:
            server = _start(opts, peer, port, logs, "-cells")
        except procs.StartError as e:
            entries[name]["load_message"] = f"fresh start for the cells failed: {e}"
            progress.line(name, entries[name]["load_message"])
            continue
        entries[name]["cells_port"] = port
        live[name] = (server, port)
        port += 1
    if live:
        progress.line("all", f"{len(live)} fresh server process(es) up for the cells")
    return live


def _measure_rounds(opts, closed: list[Planned], live, entries, progress, body_file, seed):
    """Round r runs every cell that wants more than r runs once, in blocks (`order.blocked_round`):
    the servers of one (scenario, concurrency, pipeline, mode) back to back in a random order, the
    blocks in a random order, all from `seed`; the first round warms each cell up first."""
    prof = opts.profile
    rng = random.Random(seed)
    runs_of: dict[int, list] = {id(pl): [] for pl in closed}
    warm_of: dict[int, dict | None] = {id(pl): None for pl in closed}
    failed: dict[int, str] = {}
    for pl in closed:
        if pl.peer.name in live:
            pl.record = _cell_record(
                pl.peer,
                pl.scen,
                pl.c,
                pl.p,
                "failed",
                "not measured (interrupted)",
                mode=pl.mode,
                lane=pl.lane,
            )
    rounds = max((pl.runs for pl in closed), default=0)
    for r in range(rounds):
        blocks = order.blocked_round(
            [pl for pl in closed if pl.runs > r and pl.peer.name in live and id(pl) not in failed],
            _block_key,
            rng,
        )
        progress.line(
            "all",
            f"round {r + 1}/{rounds}: {sum(map(len, blocks))} cell(s) in {len(blocks)} block(s)",
        )
        for block in blocks:
            names = ", ".join(pl.peer.name for pl in block)
            progress.line("all", f"block {_what(block[0])}: {names}")
            for pl in block:
                server, port = live[pl.peer.name]
                wire = (entries[pl.peer.name]["parity"].get(pl.scen.name) or {}).get("wire_bytes")
                if not server.alive():
                    failed[id(pl)] = f"server exited before run {r + 1}"
                else:
                    try:
                        run = _warm_and_run(opts, pl, r, server, port, wire, body_file, warm_of)
                        runs_of[id(pl)].append(run)
                        if run["problems"]:
                            failed[id(pl)] = f"run {r + 1}: " + "; ".join(run["problems"])
                    except loadgen.LoadgenError as e:
                        failed[id(pl)] = str(e)
                runs = runs_of[id(pl)]
                status = "failed" if id(pl) in failed else "ok"
                pl.record = _cell_record(
                    pl.peer,
                    pl.scen,
                    pl.c,
                    pl.p,
                    status,
                    failed.get(id(pl), ""),
                    runs,
                    warm_of[id(pl)],
                    mode=pl.mode,
                    lane=pl.lane,
                )
                progress.done(_planned_estimate(prof, pl) / pl.runs)
                if status == "ok" and runs:
                    last = runs[-1]
                    progress.line(
                        pl.peer.name,
                        f"{_what(pl)} run {r + 1}/{pl.runs}: {last['rps']:,.0f} req/s, "
                        f"{_or_na(last['cpu_us_per_req'], '{:.3f}')} CPU us/req",
                    )
                else:
                    progress.line(pl.peer.name, f"{_what(pl)}: FAILED: {failed.get(id(pl))}")


def _block_key(pl: Planned) -> tuple:
    """The cell a run belongs to whatever the server: the servers of one block are compared."""
    return (pl.scen.name, pl.c, pl.p, pl.mode)


def _what(pl: Planned) -> str:
    return f"{pl.scen.name} c={pl.c} pipeline={pl.p}" + (
        f" {pl.mode}" if pl.mode != "keep-alive" else ""
    )


def _warm_and_run(opts, pl: Planned, r: int, server, port, wire, body_file, warm_of) -> dict:
    """Run r of a cell (its warm-up first: the profile's in round 0, `round_warmup` after)."""
    prof = opts.profile
    warm = prof.warmup if r == 0 else prof.round_warmup
    if r == 0 and warm > 0:
        # wrk opens every connection first: thousands take seconds to set up.
        warm = max(warm, pl.c / 2000)
    if warm > 0:
        w = loadgen.run(
            opts.loadgen,
            f"http://{HOST}:{port}{pl.scen.path}",
            _scenario_for_mode(pl.scen, pl.mode),
            concurrency=pl.c,
            pipeline=pl.p,
            duration=warm,
            client_cpus=opts.split.client_list,
            threads=len(opts.split.client),
            body_file=body_file(pl.scen),
            timeout=prof.timeout,
        )
        if r == 0:
            warm_of[id(pl)] = {"requests": w.requests, "rps": w.rps, "errors": w.errors}
        bad = loadgen.check_statuses(w, int(pl.scen.expect.get("status", 200)))
        if bad:
            raise loadgen.LoadgenError("warm-up: " + "; ".join(bad))
    run = one_run(
        opts,
        server,
        port,
        pl.scen,
        pl.c,
        pl.p,
        pl.duration,
        body_file(pl.scen),
        mode=pl.mode,
        wire_bytes=wire,
    )
    run["round"] = r + 1
    return run


def _measure_open(opts, items: list[Planned], live, res, progress, body_file, seed):
    """Open loop: each server at each offered rate (oha, fixed rate, latency from when each
    request was due), from the lowest rate up to the first it does not sustain (its knee)."""
    rng = random.Random(seed + 1)
    items = list(items)
    rng.shuffle(items)
    for pl in items:
        if pl.peer.name not in live:
            continue
        server, port = live[pl.peer.name]
        rec = {
            "server": pl.peer.name,
            "scenario": pl.scen.name,
            "connections": pl.c,
            "duration": pl.duration,
            "points": [],
            "knee_rps": None,
            "status": "ok",
            "message": "",
        }
        res["open_loop"].append(rec)
        for rate in pl.rates:
            if not server.alive():
                rec["status"], rec["message"] = "failed", "server exited"
                break
            try:
                run = one_run(
                    opts,
                    server,
                    port,
                    pl.scen,
                    pl.c,
                    0,
                    pl.duration,
                    body_file(pl.scen),
                    rate=rate,
                )
            except loadgen.LoadgenError as e:
                rec["status"], rec["message"] = "failed", f"at {rate} req/s: {e}"
                break
            lat = run.get("latency_us") or {}
            point = {
                "offered_rps": rate,
                "rps": run["rps"],
                "p50_us": lat.get("p50"),
                "p99_us": lat.get("p99"),
                "p999_us": lat.get("p999"),
                "cpu_us_per_req": run["cpu_us_per_req"],
                "problems": run["problems"],
                "run": run,
            }
            rec["points"].append(point)
            progress.line(
                pl.peer.name,
                f"open loop {rate:,} req/s offered: {run['rps']:,.0f} done, p99 "
                f"{_or_na(lat.get('p99'), '{:.0f} us')}, "
                f"{_or_na(run['cpu_us_per_req'], '{:.3f}')} CPU us/req",
            )
            if run["problems"] or run["rps"] < 0.9 * rate:
                rec["knee_rps"] = rate
                break
        progress.done(_planned_estimate(opts.profile, pl))


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
