"""Each server alone, before its cells: start it pinned, check parity (with varied requests and a
Date that must move on), measure idle memory, run the compliance probe, stop it; and the fresh
processes the cells run on."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

from . import compliance, config, loadgen, metrics, parity, procs
from .database import db_hooks as database  # the db profile's hooks, marked `# db`
from .peers import Peer, Scenario

if TYPE_CHECKING:
    from .runner import Options


HOST = "127.0.0.1"
DEFAULT_PORT = 28080  # below the kernel's ephemeral range (32768-60999 by default)


class LabError(Exception):
    """A condition that stops the whole run (missing load generator, busy port...)."""


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


def server_env(peer: Peer, port: int, workers: int) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("CARGO_TARGET_DIR", None)
    env.update(peer.env)
    env["ADDR"] = f"{HOST}:{port}"
    env["WORKERS"] = str(workers)
    env.update(database.server_env())  # db: DATABASE_URL, DB_POOL when the profile has one
    return env


def start(opts: Options, peer: Peer, port: int, logs: Path, tag: str):
    server = procs.start_server(
        peer.run,
        peer.dir,
        server_env(peer, port, opts.split.workers),
        opts.split.server_list,
        logs / f"server-{peer.name}{tag}.log",
    )
    try:
        procs.wait_for_port(HOST, port, server.proc, timeout=30)
    except procs.StartError:
        server.stop()
        raise
    return server


def check_server(opts, peer, entry, planned, contract, progress, logs):
    """The checks that need a server alone: startup time, parity (with varied requests and a
    Date that must move on), idle memory, the compliance probe. The server is stopped after."""
    prof = opts.profile
    mine = sorted(
        {pl.scen.name for pl in planned if pl.peer.name == peer.name},
        key=lambda n: contract.names().index(n),
    )
    progress.line(peer.name, f"starting on CPUs {opts.split.server_list}")
    port = fixed_port(peer)
    if port is None:
        if opts.auto_port and procs.port_in_use(HOST, opts.port):
            opts.port = pick_port()
        port = opts.port
    entry["port"] = port
    if not procs.wait_port_free(HOST, port, 15.0):
        raise LabError(
            f"port {HOST}:{port} is busy before starting {peer.name} "
            "(a previous server did not release it, or another program took it)"
        )
    server = None
    try:
        server = procs.start_server(
            peer.run,
            peer.dir,
            server_env(peer, port, opts.split.workers),
            opts.split.server_list,
            logs / f"server-{peer.name}.log",
        )
        procs.wait_for_port(HOST, port, server.proc, timeout=30)
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
                    HOST, port, scen, contract.required_headers, database.active()
                )
            else:
                # Every request the load will send (loadgen.request_set): the same seed.
                pr = parity.check(
                    HOST,
                    port,
                    scen,
                    contract.required_headers,
                    timeout=prof.timeout,
                    rounds=loadgen.VARIED_REQUESTS - 1,
                    seed=opts.seed or 0,
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
                a = parity.exchange(HOST, port, dated, count=1, timeout=prof.timeout)[0]
                first_date = time.monotonic()
                time.sleep(1.1)
                b = parity.exchange(HOST, port, dated, count=1, timeout=prof.timeout)[0]
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
                    port,
                    server.pid,
                    idle_scen,
                    prof.idle_connections,
                    timeout=prof.timeout,
                )
                entry["idle_memory"] = {**im.to_json(), "scenario": idle_scen.name}
                if im.error:
                    progress.line(peer.name, f"idle memory: {im.error}")
                if not _wait_answering(port, idle_scen, prof.timeout, 30.0):
                    progress.line(peer.name, "not answering 30 s after the idle-memory test")
        if prof.probe is not None:
            if server.alive():
                progress.line(peer.name, f"compliance probe {' '.join(prof.probe)}".rstrip())
                entry["compliance"] = compliance.run_probe(
                    HOST,
                    port,
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


def start_all(opts, peers: dict[str, Peer], entries, logs, progress) -> dict:
    """Start a fresh process of each server for the cells, each on its own port; returns
    {name: (Server, port)}. The load cells never run on the process the idle-memory step and
    the probe used, so "peak RSS under load" is the load's own."""
    live = {}
    port = opts.port
    fixed = {p.name: fixed_port(p) for p in peers.values()}
    for name, peer in peers.items():
        mine = fixed[name]
        if mine is None:
            while port in fixed.values() or procs.port_in_use(HOST, port):
                port += 1
            mine = port
            port += 1
        try:
            if not procs.wait_port_free(HOST, mine, 15.0):
                raise procs.StartError(f"its port {mine} is busy")
            server = start(opts, peer, mine, logs, "-cells")
        except procs.StartError as e:
            entries[name]["load_message"] = f"fresh start for the cells failed: {e}"
            progress.line(name, entries[name]["load_message"])
            continue
        entries[name]["cells_port"] = mine
        live[name] = (server, mine)
    if live:
        progress.line("all", f"{len(live)} fresh server process(es) up for the cells")
    return live


def fixed_port(peer: Peer) -> int | None:
    """The one port a server can listen on (`--server '...;port=N'`), or None: the lab's choice."""
    return peer.extra.get("port")


def pick_port() -> int:
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
