"""`./scripts/lab seeds [--only NAME,...]`: build the seeds' servers, then run each experiment
with its own tool and flags, one server at a time, and write lab/results/seeds (results.json,
report.md). Results are saved after every server, so an interrupted run keeps what it measured."""

from __future__ import annotations

import os
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from .. import build, config, eta, loadgen, procs, results
from ..peers import RegistryError, load_peers
from . import experiments, tables, tools

PEERS_TOML = config.LAB_DIR / "peers" / "seeds" / "peers.toml"
HOST = "127.0.0.1"
FIRST_PORT = 29080
SERVER_CPU, TOOL_CPU = "1", "0"
"""The core split of the seeds that halved their cores (Kourier): one CPU each."""

# What each seed's server must answer before it is measured: (method, path, body, status, text).
EXPECT = {
    "nurl": [("GET", "/", None, 200, "Hello, World!\n")],
    "rust-http": [("GET", "/", None, 200, "<h1>It works!</h1>")],
    "kourier": [("GET", "/hello", None, 200, "Hello World!")],
    "nextrush": [
        ("GET", "/", None, 200, '"message":"Hello World"'),
        ("GET", "/text", None, 200, "Hello World"),
        ("GET", "/users/123", None, 200, '"id":"123"'),
        ("GET", "/search?q=test", None, 200, '"q":"test"'),
        ("POST", "/users", experiments.NEXTRUSH_BODY, 201, '"name":"John Doe"'),
    ],
    "lemire": [("GET", "/simple", None, 200, "")],
}
# Only the servers that serve the middleware scenario answer it.
EXPECT_MIDDLEWARE = ("GET", "/middleware", None, 200, '"ok":true')


class SeedsError(Exception):
    """The seeds run cannot go on (a tool or a server is missing)."""


def _port() -> int:
    for p in range(FIRST_PORT, FIRST_PORT + 100):
        if not procs.port_in_use(HOST, p):
            return p
    raise SeedsError(f"no free port in {FIRST_PORT}-{FIRST_PORT + 99}")


def answers(base: str, checks) -> list[str]:
    """Problems with a server's answers to `checks`; empty when each gives its status and text."""
    problems = []
    for method, path, body, status, text in checks:
        headers = {"Authorization": "Bearer seeds"}
        if body:
            headers["Content-Type"] = "application/json"
        req = urllib.request.Request(
            base + path, data=body.encode() if body else None, method=method, headers=headers
        )
        try:
            with urllib.request.urlopen(req, timeout=5) as r:
                got, data = r.status, r.read().decode(errors="replace")
        except urllib.error.HTTPError as e:
            got, data = e.code, e.read().decode(errors="replace")
        except OSError as e:
            problems.append(f"{method} {path}: {e}")
            continue
        if got != status or text not in data:
            problems.append(
                f"{method} {path}: {got} {data[:80]!r}, expected {status} with {text!r}"
            )
    return problems


def _lane_cells(exp, lane, base: str):
    cells = exp.cells(base)
    if lane.only is not None:
        cells = [c for c in cells if (c.table, c.column) in lane.only]
    return cells


def _measure_lane(exp, index: int, peer, port: int, log_dir: Path, say) -> dict:
    lane = exp.lanes[index]
    base = f"http://{HOST}:{port}"
    split = exp.split if lane.split is None else lane.split
    env = dict(os.environ) | peer.env | {"ADDR": f"{HOST}:{port}", "SEED": exp.seed} | lane.env
    rec = {
        "peer": peer.name,
        "row": lane.row,
        "seed_row": lane.seed_row,
        "check": lane.check,
        "env": lane.env,
        "split": split,
        "cells": [],
        "problems": [],
    }
    if not procs.wait_port_free(HOST, port, 30):
        rec["problems"].append(f"port {port} still busy")
        return rec
    log = log_dir / f"{exp.name}-{index}-{peer.name}.log"
    srv = procs.start_server(list(peer.run), peer.dir, env, SERVER_CPU if split else None, log)
    try:
        procs.wait_for_port(HOST, port, srv.proc, 60)
        cells = _lane_cells(exp, lane, base)
        checks = list(EXPECT[exp.seed])
        if any(c.table == "wrk:middleware" for c in cells):
            checks.append(EXPECT_MIDDLEWARE)
        bad = answers(base, checks)
        if bad:
            rec["problems"] += bad
            say(f"  {lane.row}: wrong answers, not measured: {'; '.join(bad)}")
            return rec
        # A second of load first, so JIT runtimes are warm when the first cell counts.
        tools.run(
            "wrk",
            tools.wrk_argv(base + checks[0][1], connections=10, threads=1, seconds=1),
            cpus=TOOL_CPU if split else None,
            limit=30,
        )
        for cell in cells:
            runs, problems = [], []
            for _ in range(cell.runs):
                try:
                    r = tools.run(
                        cell.tool,
                        cell.argv,
                        cpus=TOOL_CPU if split else None,
                        limit=cell.seconds + 90,
                    )
                except loadgen.LoadgenError as e:
                    problems.append(str(e))
                    continue
                problems += loadgen.check_statuses(r, 200)
                runs.append(r.to_json())
            rps = [r["rps"] for r in runs]
            say(
                f"  {lane.row:46} {cell.table:18} c={cell.column:<4} "
                f"{' '.join(f'{x:,.0f}' for x in rps)} req/s{' PROBLEMS' if problems else ''}"
            )
            rec["cells"].append(
                {
                    "table": cell.table,
                    "column": cell.column,
                    "tool": cell.tool,
                    "argv": cell.argv,
                    "runs": runs,
                    "problems": problems,
                }
            )
    except (procs.StartError, loadgen.LoadgenError) as e:
        rec["problems"].append(f"{e}; log: {srv.log_tail(5)}")
        say(f"  {lane.row}: {e}")
    finally:
        srv.stop()
    return rec


def _say(line: str) -> None:
    print(line, flush=True)  # at once, so a log shows which server is being measured


def run(names: list[str], out: Path, skip_build: bool, command: str, say=_say) -> dict:
    """Runs the named experiments (all when empty) and returns the results it saved in `out`."""
    names = names or list(experiments.ORDER)
    unknown = [n for n in names if n not in experiments.EXPERIMENTS]
    if unknown:
        raise SeedsError(
            f"unknown experiment(s) {', '.join(unknown)}; known: {', '.join(experiments.ORDER)}"
        )
    lacking = tools.missing()
    if lacking:
        raise SeedsError(f"missing {', '.join(lacking)}: run ./scripts/setup lab bombardier seeds")
    exps = [experiments.EXPERIMENTS[n] for n in experiments.ORDER if n in names]
    wanted = {lane.peer for e in exps for lane in e.lanes}
    peers = {p.name: p for p in load_peers(PEERS_TOML) if p.name in wanted}
    started = time.monotonic()
    built = {} if skip_build else build.build_all(list(peers.values()), out / "logs")
    broken = [n for n, b in built.items() if not b.ok]
    if broken:
        raise SeedsError(f"not built: {', '.join(broken)}; logs in {out / 'logs'}")
    procs.install_handlers()
    procs.raise_nofile_limit(65536)
    port = _port()
    res = {
        "schema": results.SCHEMA,
        "profile": "seeds",
        "command": command,
        "started": results.now_iso(),
        "machine": results.machine_info(),
        "git": results.git_info(),
        "tools": tools.versions(),
        "servers": {n: build.peer_version(p) for n, p in peers.items()},
        "build_seconds": round(sum(b.seconds for b in built.values()), 1),
        "experiments": {},
    }
    countdown = eta.Countdown(sum(len(e.lanes) for e in exps))
    done = 0
    for exp in exps:
        say(f"== {exp.title} ({countdown.left(done)})")
        lanes = res["experiments"].setdefault(exp.name, {"lanes": []})["lanes"]
        for i, lane in enumerate(exp.lanes):
            lanes.append(_measure_lane(exp, i, peers[lane.peer], port, out / "logs", say))
            done += 1
            res["wall_seconds"] = round(time.monotonic() - started, 1)
            results.save(res, out)
    return res


def main(args, command: str) -> int:
    """The CLI entry (`./scripts/lab seeds`)."""
    out = args.out or config.LAB_DIR / "results" / "seeds"
    try:
        res = run(args.only or [], out, args.skip_build, command)
    except (SeedsError, RegistryError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        procs.kill_all()
        print("\ninterrupted: every server stopped", file=sys.stderr)
        return 130
    path = tables.write(res, out)
    print(f"done in {res.get('wall_seconds', 0):.0f} s: {out / 'results.json'}, {path}")
    return 0
