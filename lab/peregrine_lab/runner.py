"""The measuring run: build, start each server pinned, check parity, measure idle memory, time
every cell N times, run the probe, stop the server; results saved after every server so an
interrupted run still leaves what it measured."""

from __future__ import annotations

import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import (
    before,
    build,
    checks,
    config,
    eta,
    loadgen,
    metrics,
    order,
    outside,
    procs,
    results,
    rounds,
    scaling,
    seeding,
)
from .checks import LabError
from .database import db_hooks as database  # the db profile's hooks, marked `# db`
from .peers import Peer, Scenario, load_peers, select_peers

__all__ = ["LabError", "Options", "Progress", "run", "measuring_estimate"]


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
    seed: int | None = None
    """The run's seed (the order of the rounds, the requests the load spreads over); None: the
    time at the start of the run. Recorded as settings["seed"] so a run can be repeated."""
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
        opts.port = checks.pick_port()
    elif not procs.wait_port_free(checks.HOST, opts.port, 5.0):
        raise LabError(
            f"port {checks.HOST}:{opts.port} is busy: something already listens there (or "
            "holds it); stop it or choose another with --port"
        )
    contract = database.profile_contract(prof)  # db: and tfb's plaintext and json
    wanted = list(prof.servers) if prof.servers else None
    try:  # the engine at another commit, when the profile or --servers names it
        registry, wanted = outside.join(load_peers(opts.peers_file), wanted, opts.outside)
        registry, before_rev = before.with_before(registry, wanted, opts.before_ref)
    except before.BeforeError as e:
        raise LabError(str(e)) from e
    peers = select_peers(registry, wanted)
    peers = database.db_peers(peers, prof) if prof.database else peers  # db
    peers = [p for p in peers if p.name not in prof.skip_servers]
    scenarios = contract.select(prof.scenarios)
    max_conns = max(
        [c for c, _ in prof.cells] + [c for ln in prof.lanes for c, _ in ln.cells], default=50
    )
    nofile = procs.raise_nofile_limit(max(4096, prof.idle_connections * 2 + 1024, max_conns * 3))
    planned, unserved = rounds.plan(prof, scenarios, peers)
    seed = opts.seed = seeding.run_seed(opts.seed)
    if opts.dry_run:
        from . import dryrun

        est = measuring_estimate(prof, peers, planned)
        dryrun.describe(prof, peers, planned, est, seed, sys.stdout, results.tool_versions())
        return None

    for peer in opts.outside:
        fixed = checks.fixed_port(peer)
        if fixed is not None and not procs.wait_port_free(checks.HOST, fixed, 5.0):
            raise LabError(
                f"--server {peer.name}: its port {checks.HOST}:{fixed} (port={fixed}) is busy: "
                "something already listens there; stop it first"
            )
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
            "distinct_requests": loadgen.VARIED_REQUESTS,
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
            binary = built_program(peer)
            if not missing and binary and not binary.exists():
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
                checks.check_server(opts, peer, entry, planned, contract, progress, logs)
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
                pl.record = rounds.cell_record(
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
                pl.record = rounds.cell_record(
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
                pl.record = rounds.cell_record(
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
        live = checks.start_all(
            opts, {pl.peer.name: pl.peer for pl in todo}, entries, logs, progress
        )
        closed = [pl for pl in todo if pl.mode != "open"]
        for pl in todo:
            if pl.peer.name not in live:
                pl.record = rounds.cell_record(
                    pl.peer,
                    pl.scen,
                    pl.c,
                    pl.p,
                    "start-failed",
                    entries[pl.peer.name].get("load_message", "did not start for the cells"),
                    mode=pl.mode,
                    lane=pl.lane,
                )
        rounds.measure_rounds(opts, closed, live, entries, progress, body_file, seed)
        if any(pl.mode == "open" for pl in todo) and not loadgen.available("oha"):
            open_note = "oha not found on PATH (`./scripts/setup lab oha`): open-loop lane not run"
            res["open_loop_note"] = open_note
        rounds.measure_open(
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


def built_program(peer: Peer) -> Path | None:
    """The program a peer's build makes and its run starts (`binary`, or its run command's path
    inside the peer's folder), which --skip-build needs; None for a peer that builds nothing or
    runs an installed program."""
    if peer.extra.get("binary"):
        return Path(peer.extra["binary"])
    if peer.build and "/" in peer.run[0]:
        return peer.dir / peer.run[0]
    return None


def measuring_estimate(
    prof: config.Profile, peers: list[Peer], planned: list[rounds.Planned]
) -> float:
    """Planned measuring time (seconds, builds excluded) of these peers' checks and cells and the
    scaling lane: what the progress lines count down from and the 10-minute budget of quick."""
    return (
        len(peers) * checks.server_estimate(prof)
        + sum(rounds.planned_estimate(prof, pl) for pl in planned)
        + scaling.planned_seconds(prof, len(scaling.lane_servers(prof, peers)))
    )


def _overrides(prof: config.Profile) -> dict:
    """Settings given on the command line that differ from the named profile's defaults, so the
    report does not describe a reduced run as the full profile."""
    base = config.PROFILES.get(prof.name)
    if base is None:
        return {}
    mine, theirs = prof.to_json(), base.to_json()
    return {k: {"profile": theirs[k], "used": v} for k, v in mine.items() if theirs.get(k) != v}
