"""The scaling lane: each server at 1 and at 2 workers (WORKERS, each server's ordinary setting),
on fresh processes, in interleaved rounds; requests/s and server CPU per request at each worker
count, the 2-worker/1-worker ratio with its t 95% interval, and what the 1-worker figures
predict for that ratio.

On a 2-CPU machine, 2 workers cannot have CPUs of their own: the server and the load generator
share both CPUs, so the lane is labelled "load generator sharing the machine" everywhere. The
model (`predicted_ratio`) says what sharing allows: the two CPUs do the server's and the load
generator's work per request, so 2 workers reach at most 2 / (server + load-generator CPU per
request), against 1 / max(server, load generator) with one CPU each: 2 max(s, g) / (s + g),
not twice the 1-worker rate.
"""

from __future__ import annotations

import random
from dataclasses import asdict, replace

from . import checks, config, loadgen, order, parity, procs, rounds, stats

HOST = "127.0.0.1"

# Every Peregrine build (the engine's hello, the scenarios app, its mimalloc build) scales so.
_PEREGRINE = "WORKERS threads, each with its own SO_REUSEPORT listener and event loop"

SCALES_BY = {
    "peregrine-hello": _PEREGRINE,
    "peregrine": _PEREGRINE,
    "peregrine-mimalloc": _PEREGRINE,
    "floor": "WORKERS threads, each with its own SO_REUSEPORT listener and epoll loop",
    "hyper-percore": "WORKERS threads, each a current-thread tokio runtime with its own "
    "SO_REUSEPORT listener",
    "hyper-flush": "WORKERS threads, each a current-thread tokio runtime with its own "
    "SO_REUSEPORT listener",
    "axum-percore": "WORKERS threads, each a current-thread tokio runtime with its own "
    "SO_REUSEPORT listener",
    "axum-flush": "WORKERS threads, each a current-thread tokio runtime with its own "
    "SO_REUSEPORT listener",
    "hyper": "one multi-thread tokio runtime with WORKERS workers, one accept loop",
    "axum": "one multi-thread tokio runtime with WORKERS workers, one accept loop",
    "actix": "actix-web's workers(WORKERS): an acceptor thread hands connections to the workers",
    "actix-tfb": "actix-web's workers(WORKERS): an acceptor thread hands connections to the "
    "workers",
    "go-nethttp": "GOMAXPROCS=WORKERS: Go's scheduler over one listener",
    "go-fasthttp": "GOMAXPROCS=WORKERS: Go's scheduler over one listener",
    "node-http": "node:cluster, WORKERS processes; the primary accepts and hands connections out",
    "fastify": "node:cluster, WORKERS processes; the primary accepts and hands connections out",
    "express": "node:cluster, WORKERS processes; the primary accepts and hands connections out",
    "express-tfb": "node:cluster, WORKERS processes; the primary accepts and hands connections out",
    "hono": "node:cluster, WORKERS processes; the primary accepts and hands connections out",
    "koa": "node:cluster, WORKERS processes; the primary accepts and hands connections out",
    "bun": "WORKERS Bun processes sharing the port with reusePort (SO_REUSEPORT)",
    "bun-fastify": "node:cluster as Bun implements it, WORKERS processes",
    "nginx": "worker_processes WORKERS, each with its own SO_REUSEPORT listening socket",
    "h2o": "num-threads: WORKERS",
    "nim": "WORKERS forked processes with SO_REUSEPORT (asynchttpserver itself is single-threaded)",
    "may-minihttp": "may's scheduler with WORKERS worker threads (set_workers), coroutines on them",
    "xitca-web": "xitca-server's worker_threads(WORKERS), one runtime per worker thread",
    "ntex": "ntex's workers(WORKERS): an acceptor thread hands connections to the workers",
}
"""How each server of the registry uses WORKERS (its ordinary setting); every one has one, so no
server is left out of the lane for lack of a worker setting."""


def split_for(workers: int, split: config.CpuSplit) -> config.CpuSplit | None:
    """The CPUs for `workers` workers: the run's own split while the server has that many CPUs
    of its own (its first `workers`), else the last `workers` CPUs of the machine with the load
    generator spread over all of them (sharing, noted). None when the machine is too small."""
    if workers <= len(split.server):
        return config.CpuSplit(server=split.server[:workers], client=split.client)
    cpus = tuple(sorted(set(split.server) | set(split.client)))
    if workers > len(cpus):
        return None
    return config.CpuSplit(
        server=cpus[-workers:],
        client=cpus,
        notes=[
            f"{workers} workers on CPUs {cpus[-workers:]} share them with the load generator "
            f"(CPUs {cpus})"
        ],
    )


def capacity(server_us: float, client_us: float, workers: int, server_cpus, client_cpus) -> float:
    """Requests/s the CPUs allow when a request costs the server `server_us` and the load
    generator `client_us` CPU µs: the workers do at most workers / server_us; sharing their CPUs
    with the load generator, those CPUs do both sides' work (CPUs / (server + load generator));
    on CPUs of its own the load generator sends at most its CPUs / client_us."""
    srv, cli = set(server_cpus), set(client_cpus)
    own = workers * 1e6 / server_us
    if srv & cli:
        return min(own, len(srv | cli) * 1e6 / (server_us + client_us))
    return min(own, len(cli) * 1e6 / client_us)


def predicted_ratio(server_us1, client_us1, base: dict, other: dict) -> float | None:
    """What the base (1-worker) cell's CPU per request predicts for throughput(other) /
    throughput(base): the ratio of the two capacities. Assumes a request costs what it cost at
    1 worker (nothing shared between workers) and that other work on the machine takes the same
    share in both (the measured rates on a busy machine sit below both capacities; the ratio
    holds). `base`/`other` are cells with `workers`, `server_cpus` and `client_cpus`."""
    if not server_us1 or not client_us1:
        return None
    one = capacity(
        server_us1, client_us1, base["workers"], base["server_cpus"], base["client_cpus"]
    )
    w = capacity(
        server_us1, client_us1, other["workers"], other["server_cpus"], other["client_cpus"]
    )
    return w / one


def client_us_per_req(run: dict) -> float | None:
    """The load generator's CPU µs per request of one run (None when unknown)."""
    cpu, n = run.get("client_cpu_s"), run.get("requests")
    return cpu * 1e6 / n if cpu is not None and n else None


def ratios(cells: list[dict], base: int = 1) -> list[dict]:
    """For each (server, scenario, c, p): every other worker count against `base` workers —
    requests/s and server CPU per request, the ratio and its t 95% interval
    (`stats.ratio_estimate`: the geometric mean of per-round ratios when the runs share rounds,
    of the runs otherwise) and the method used, and the model's prediction from the base cell's
    medians."""
    by = {}
    for cell in cells:
        key = (cell["server"], cell["scenario"], cell["concurrency"], cell["pipeline"])
        by.setdefault(key, {})[cell["workers"]] = cell
    out = []
    for key, per in by.items():
        one = per.get(base)
        for w, cell in sorted(per.items()):
            if w == base:
                continue
            rec = {
                "server": key[0],
                "scenario": key[1],
                "concurrency": key[2],
                "pipeline": key[3],
                "workers": w,
                "base_workers": base,
            }
            ok = one is not None and one["status"] == "ok" and cell["status"] == "ok"
            for name, k in (("rps", "rps"), ("cpu", "cpu_us_per_req")):
                # Every (server, workers) cell runs once per round in the same interleaved
                # rounds, so round k of both worker counts shared the machine's load: paired.
                est = stats.ratio_estimate(cell["runs"], one["runs"], k) if ok else None
                rec[f"{name}_ratio"] = est.ratio if est else None
                rec[f"{name}_ci"] = list(est.ci) if est and est.ci else None
                rec[f"{name}_method"] = est.method if est else None
            rec["predicted_ratio"] = (
                predicted_ratio(
                    one["median"].get("cpu_us_per_req"),
                    one["median"].get("client_us_per_req"),
                    one,
                    cell,
                )
                if ok
                else None
            )
            out.append(rec)
    return out


def planned_seconds(prof: config.Profile, servers: int) -> float:
    """Planned measuring time of the lane for `servers` servers (start, warm-up, runs)."""
    lane = prof.scaling
    if lane is None:
        return 0.0
    per_cell = prof.warmup + lane.runs * (lane.duration + 0.4)
    return servers * len(lane.workers) * (2.0 + len(lane.cells) * per_cell)


def lane_servers(prof: config.Profile, peers) -> list:
    lane = prof.scaling
    if lane is None:
        return []
    return [p for p in peers if p.name in lane.servers]


def measure(opts, peers, entries, contract, res, progress, body_file, seed) -> None:
    """Run the lane: start a fresh process per (server, worker count) pinned to its CPUs, check
    its answers, then every cell once per round, the worker counts of a (server, shape) back to
    back (blocked order); results in res["scaling"]."""

    prof = opts.profile
    lane = prof.scaling
    scen = contract.by_name(lane.scenario)
    splits = {w: split_for(w, opts.split) for w in lane.workers}
    mine = [p for p in lane_servers(prof, peers) if entries.get(p.name, {}).get("status") == "ok"]
    mine = [p for p in mine if lane.scenario in p.scenarios]
    out = {
        "lane": asdict(lane),
        "label": "load generator sharing the machine"
        if any(s is not None and set(s.server) & set(s.client) for s in splits.values())
        else "load generator on CPUs of its own",
        "splits": {
            str(w): None
            if s is None
            else {"server_cpus": list(s.server), "client_cpus": list(s.client), "notes": s.notes}
            for w, s in splits.items()
        },
        "scales_by": {p.name: SCALES_BY.get(p.name, "WORKERS") for p in mine},
        "not_in_lane": [p.name for p in peers if p.name not in lane.servers],
        "cells": [],
        "ratios": [],
        "order": order.SCHEME,
    }
    res["scaling"] = out
    logs = opts.out_dir / "logs"
    live = {}
    cells = []
    try:
        port = opts.port + 200
        for peer in mine:
            for w, split in splits.items():
                cell_opts = replace(opts, split=split) if split else None
                for c, p in lane.cells:
                    cell = {
                        "server": peer.name,
                        "scenario": scen.name,
                        "concurrency": c,
                        "pipeline": p,
                        "workers": w,
                        "server_cpus": list(split.server) if split else [],
                        "client_cpus": list(split.client) if split else [],
                        "status": "ok",
                        "message": "",
                        "runs": [],
                        "median": {},
                    }
                    cells.append(cell)
                    if split is None:
                        cell["status"], cell["message"] = "n/a", f"fewer than {w} CPUs"
                if split is None:
                    continue
                while procs.port_in_use(HOST, port):
                    port += 1
                try:
                    server = checks.start(cell_opts, peer, port, logs, f"-scaling-w{w}")
                except procs.StartError as e:
                    _fail(cells, peer.name, w, f"did not start: {e}")
                    continue
                live[(peer.name, w)] = (server, port, cell_opts)
                pr = parity.check(HOST, port, scen, contract.required_headers, prof.timeout)
                for cell in cells:
                    if cell["server"] == peer.name and cell["workers"] == w:
                        cell["wire_bytes"], cell["port"] = pr.wire_bytes, port
                port += 1
                if not pr.ok:
                    _fail(cells, peer.name, w, "parity: " + "; ".join(pr.problems))
        progress.done(2.0 * len(live))
        progress.line("scaling", f"{len(live)} server process(es) up ({out['label']})")
        _rounds(opts, lane, scen, cells, live, progress, body_file, seed)
    finally:
        for server, _port, _o in live.values():
            server.stop()
    for cell in cells:
        med, cv = stats.summarize(cell["runs"], ("rps", "cpu_us_per_req", "client_us_per_req"))
        cell["median"], cell["cv"] = med, cv
    out["cells"] = cells
    out["ratios"] = ratios(cells, base=min(lane.workers))


def _fail(cells, server, workers, message):
    for cell in cells:
        if cell["server"] == server and cell["workers"] == workers and cell["status"] == "ok":
            cell["status"], cell["message"] = "failed", message


def _rounds(opts, lane, scen, cells, live, progress, body_file, seed):

    rng = random.Random(seed + 2)
    for r in range(lane.runs):
        # Blocked (order.py): the worker counts of one (server, shape) back to back, since the
        # lane's ratios pair them.
        blocks = order.blocked_round(
            [c for c in cells if c["status"] == "ok"],
            lambda c: (c["server"], c["scenario"], c["concurrency"], c["pipeline"]),
            rng,
        )
        progress.line("scaling", f"round {r + 1}/{lane.runs}: {sum(map(len, blocks))} cell(s)")
        for cell in (cell for block in blocks for cell in block):
            server, port, cell_opts = live[(cell["server"], cell["workers"])]
            what = f"WORKERS={cell['workers']} c={cell['concurrency']} pipeline={cell['pipeline']}"
            if not server.alive():
                cell["status"], cell["message"] = "failed", f"server exited before run {r + 1}"
                continue
            split = cell_opts.split
            progress.done(lane.duration + 0.4 + (opts.profile.warmup if r == 0 else 0.0))
            try:
                if r == 0 and opts.profile.warmup > 0:
                    loadgen.run(
                        opts.loadgen,
                        f"http://{HOST}:{port}{scen.path}",
                        scen,
                        concurrency=cell["concurrency"],
                        pipeline=cell["pipeline"],
                        duration=opts.profile.warmup,
                        client_cpus=split.client_list,
                        threads=len(split.client),
                        body_file=body_file(scen),
                        timeout=opts.profile.timeout,
                    )
                run = rounds.one_run(
                    cell_opts,
                    server,
                    port,
                    scen,
                    cell["concurrency"],
                    cell["pipeline"],
                    lane.duration,
                    body_file(scen),
                    wire_bytes=cell.get("wire_bytes"),
                )
            except loadgen.LoadgenError as e:
                cell["status"], cell["message"] = "failed", str(e)
                progress.line(cell["server"], f"scaling {what}: FAILED: {e}")
                continue
            run["round"] = r + 1
            run["client_us_per_req"] = client_us_per_req(run)
            cell["runs"].append(run)
            if run["problems"]:
                cell["status"] = "failed"
                cell["message"] = f"run {r + 1}: " + "; ".join(run["problems"])
            cpu = run.get("cpu_us_per_req")
            progress.line(
                cell["server"],
                f"scaling {what} run {r + 1}/{lane.runs}: {run['rps']:,.0f} req/s, "
                f"{'n/a' if cpu is None else f'{cpu:.3f}'} CPU us/req",
            )
