"""The cells of a run: which (server, scenario, concurrency, pipelining, mode) a profile measures
(`plan`), one timed pass of the load generator with the server's CPU time and the machine's
busy figures (`one_run`), and the rounds that run every cell in blocked order (`measure_rounds`)
and the open-loop rates (`measure_open`)."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from . import config, loadgen, metrics, order, parity, procs, stats
from .checks import HOST
from .database import db_hooks as database  # the db profile's hooks, marked `# db`
from .peers import Peer, Scenario

if TYPE_CHECKING:
    from .runner import Options

CELL_KEYS = (
    "rps",
    "p50_us",
    "p99_us",
    "cpu_us_per_req",
    "peak_rss_bytes",
    "db_cpu_us_per_req",
    "bytes_per_response",
    "server_busy_share",
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


def cell_record(
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
                            cell_record(peer, s, c, p, "n/a", mode=lane.mode, lane=lane.name)
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


def scenario_for_mode(scen: Scenario, mode: str) -> Scenario:
    if mode == "close":
        return replace(scen, headers={**scen.headers, "Connection": "close"})
    return scen


def load_requests(opts: Options, scen: Scenario, mode: str) -> list[Scenario]:
    """The requests a run of this cell spreads over: the run's seed, the same set parity
    checked (checks.check_server), with the mode's headers."""
    return loadgen.request_set(scenario_for_mode(scen, mode), opts.seed or 0)


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
    wire_bytes: float | None = None,
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
        scenario_for_mode(scen, mode),
        concurrency=c,
        pipeline=p,
        duration=duration,
        client_cpus=opts.split.client_list,
        threads=len(opts.split.client),
        body_file=body,
        timeout=opts.profile.timeout,
        rate=rate,
        requests=load_requests(opts, scen, mode),
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
            # How much of its CPUs the server used: a server below 100% was not the bottleneck.
            "server_busy_share": round(min(cpu / (wall * len(opts.split.server)), 1.0), 4),
            "bytes_per_response": res.bytes / res.requests if res.requests else None,
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


def planned_estimate(prof: config.Profile, pl: Planned) -> float:
    if pl.mode == "open":
        return len(pl.rates) * (pl.duration + 1.0) * 0.6
    return prof.warmup + pl.runs * (pl.duration + 0.4) + (pl.runs - 1) * prof.round_warmup


def measure_rounds(opts, closed: list[Planned], live, entries, progress, body_file, seed):
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
            pl.record = cell_record(
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
                pr = entries[pl.peer.name]["parity"].get(pl.scen.name) or {}
                wire = pr.get("load_wire_bytes") or pr.get("wire_bytes")
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
                pl.record = cell_record(
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
                progress.done(planned_estimate(prof, pl) / pl.runs)
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
            scenario_for_mode(pl.scen, pl.mode),
            concurrency=pl.c,
            pipeline=pl.p,
            duration=warm,
            client_cpus=opts.split.client_list,
            threads=len(opts.split.client),
            body_file=body_file(pl.scen),
            timeout=prof.timeout,
            requests=load_requests(opts, pl.scen, pl.mode),
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


def measure_open(opts, items: list[Planned], live, res, progress, body_file, seed):
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
            "lane": pl.lane,
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
        progress.done(planned_estimate(opts.profile, pl))


def _or_na(v, fmt):
    return "n/a" if v is None else fmt.format(v)
