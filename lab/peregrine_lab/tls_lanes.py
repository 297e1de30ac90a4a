"""`./scripts/lab protocols`: the HTTPS and HTTP/2 lanes.

The plaintext method of docs/measuring.md over TLS: one self-signed certificate per run, every
server pinned to the server CPUs, the load generators to the others; per server alone: the
negotiated handshake (openssl s_client), parity over HTTPS and HTTP/2, memory per idle TLS and
per idle HTTP/2 connection (each on a fresh process); then every server again, fresh, and the
cells in randomised interleaved rounds, server CPU per request from schedstat, 95% intervals
(stats.py). Lanes:

* `https`: keep-alive HTTP/1.1 over TLS, wrk (ALPN not offered: HTTP/1.1), 50 connections;
* `handshake`: a full TLS handshake per request: ab without `-k` (a new connection and a new
  OpenSSL session object per request, no resumption: ab never sets a session), 50 concurrent;
  wrk with `Connection: close` is not used, because it reuses its SSL object across reconnects
  (SSL_clear) and so resumes sessions on servers that issue tickets;
* `h2`: HTTP/2 over TLS (ALPN h2), h2load `-c 50 -m 10` (500 streams in flight).

Every client offers exactly TLS 1.3, TLS_AES_128_GCM_SHA256 and X25519 (an OpenSSL
configuration file given to wrk, ab, h2load, curl and s_client), so all servers negotiate the
same handshake; what each negotiated is recorded.
"""

from __future__ import annotations

import os
import random
import resource
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from . import (
    build,
    config,
    eta,
    h2load,
    loadgen,
    metrics,
    order,
    parity,
    procs,
    results,
    stats,
    tls_checks,
)
from .peers import Peer, Scenario, load_contract, load_peers, select_peers

HOST = "127.0.0.1"
DEFAULT_PORT = 28443
PROTOCOLS_TOML = config.PEERS_DIR / "protocols.toml"
KEYS = ("rps", "cpu_us_per_req", "p50_us", "p99_us", "mean_latency_us", "peak_rss_bytes")

MODES = {
    "https": "HTTP/1.1 over TLS, keep-alive: wrk -c 50 (ALPN not offered)",
    "handshake": "a full TLS handshake per request: ab -c 50 without -k (HTTP/1.0, no resumption)",
    "h2": "HTTP/2 over TLS (ALPN h2): h2load -c 50 -m 10 -n N (N: the warm-up's rate x duration)",
}
MODE_PROTOCOL = {"https": "https", "handshake": "https", "h2": "h2"}
CONNECTIONS = 50
H2_STREAMS = 10

PROFILE = config.Profile(
    name="protocols",
    description=(
        "the HTTPS and HTTP/2 lanes: HTTPS keep-alive (wrk, c=50), a full TLS handshake "
        "per request (ab -c 50, no keep-alive), HTTP/2 over TLS (h2load -c 50 -m 10) on "
        "/plaintext, 7 interleaved runs of 3 s per cell with 95% intervals; memory per "
        "idle TLS and per idle HTTP/2 connection with 500 connections; one self-signed ECDSA "
        "P-256 certificate per run (about 10 minutes on 2 CPUs)"
    ),
    scenarios=("plaintext",),
    runs=7,
    duration=3.0,
    warmup=1.0,
    idle_connections=500,
    probe=None,
    lanes=tuple(
        config.Lane(mode, MODES[mode], ("plaintext",), ((CONNECTIONS, 0),), mode=mode)
        for mode in MODES
    ),
)

TARGETS = (
    ("https", "nginx-tls", "HTTPS keep-alive CPU per request ≤ nginx's"),
    ("h2", "best-rust", "HTTP/2 CPU per request ≤ the best Rust peer's"),
)
RUST_PEERS = ("axum-tls", "actix-tls")
REFERENCE = "peregrine-tls"


class ProtocolsError(Exception):
    """A condition that stops the run (a missing tool, no free port)."""


H2_WARMUP_REQUESTS = 5000
"""Requests of an HTTP/2 cell's warm-up; its rate sets the request count of the cell's runs
(rate x duration), so an HTTP/2 run lasts about `duration` seconds."""


class H2loadHang(loadgen.LoadgenError):
    """h2load did not exit (stopped): the pass is retried once and the retry recorded."""


@dataclass
class Options:
    out_dir: Path
    split: config.CpuSplit
    runs: int = PROFILE.runs
    duration: float = PROFILE.duration
    servers: list[str] | None = None
    skip_build: bool = False
    port: int | None = None
    command: str = ""
    peers_file: Path = PROTOCOLS_TOML
    idle_connections: int = PROFILE.idle_connections
    suite: Suite | None = None  # None: this module's protocols lanes
    seed: int | None = None  # the rounds' order (and a suite's own draws); None: the clock's


@dataclass(frozen=True)
class Suite:
    """A set of TLS lanes `run` measures: its profile and modes, the tools it needs, and how a
    mode is loaded, how a protocol is checked and how its idle memory is read. The `h3` lane
    (h3_lane.py) is one; None in `Options.suite` is the protocols lanes of this module."""

    profile: config.Profile
    modes: dict[str, str]
    mode_protocol: dict[str, str]
    tools: tuple[str, ...]
    # (opts, mode, url, scen, duration, cert, requests) -> (LoadResult, negotiated TLS or None)
    load: Callable
    # (host, port, proto, scen, contract, cert, env) -> (handshake dict, parity.ParityResult)
    check: Callable
    # (host, port, pid, scen, n, proto, cert) -> metrics.IdleMemory
    idle: Callable
    # (host, port, peer, server) -> None once `server` serves every protocol of `peer`
    wait: Callable
    tool_versions: Callable
    # peer -> why it is not measured before any build (e.g. built without a feature), or None
    unavailable: Callable = lambda peer: None
    # (opts, peers, live, entries, res, scen, cert, seed) -> None: a phase of the suite's own on
    # the servers the cells ran on, after the cells and before the servers stop, or None
    after_cells: Callable | None = None


def _load_of(opts) -> Callable:
    suite = getattr(opts, "suite", None)
    return suite.load if suite else _load


def _mode_protocol(opts) -> dict[str, str]:
    suite = getattr(opts, "suite", None)
    return suite.mode_protocol if suite else MODE_PROTOCOL


def protocols_of(peer: Peer, known: tuple[str, ...] = ("https", "h2")) -> list[str]:
    """The lanes' protocols a server speaks (`protocols` in protocols.toml) among `known`."""
    return [p for p in peer.extra.get("protocols", []) if p in known]


def plan(peers: list[Peer], mode_protocol: dict[str, str] = MODE_PROTOCOL) -> list[tuple]:
    """(server, mode) cells: each lane for the servers speaking its protocol."""
    known = tuple(set(mode_protocol.values()))
    return [
        (p, mode)
        for mode in mode_protocol
        for p in peers
        if mode_protocol[mode] in protocols_of(p, known)
    ]


def _server_env(peer: Peer, port: int, workers: int, cert: tls_checks.Certificate) -> dict:
    env = dict(os.environ)
    env.pop("CARGO_TARGET_DIR", None)
    env.pop("OPENSSL_CONF", None)  # the clients' setting must not reach the servers
    env.update(peer.env)
    env.update(
        ADDR=f"{HOST}:{port}", WORKERS=str(workers), TLS_CERT=str(cert.cert), TLS_KEY=str(cert.key)
    )
    return env


def _start(opts, peer, port, cert, logs, tag) -> procs.Server:
    if not procs.wait_port_free(HOST, port, 15.0):
        raise procs.StartError(f"port {port} is busy")
    server = procs.start_server(
        peer.run,
        peer.dir,
        _server_env(peer, port, opts.split.workers, cert),
        opts.split.server_list,
        logs / f"server-{peer.name}{tag}.log",
    )
    try:
        if getattr(opts, "suite", None):
            opts.suite.wait(HOST, port, peer, server)
        else:
            procs.wait_for_port(HOST, port, server.proc, timeout=30)
    except procs.StartError:
        server.stop()
        raise
    return server


def _client_env(cert) -> dict:
    return tls_checks.client_env(cert, dict(os.environ))


def _load(
    opts, mode: str, url: str, scen: Scenario, duration: float, cert, requests: int | None = None
) -> tuple:
    """One load-generator pass of `mode`: (LoadResult, negotiated TLS of h2load or None). HTTP/2
    passes run `requests` requests (h2load -n; see h2load.command)."""
    if mode in ("https", "handshake"):
        scen_mode = (
            replace(scen, headers={**scen.headers, "Connection": "close"})
            if mode == "handshake"
            else scen
        )
        gen = "wrk" if mode == "https" else "ab"
        res = loadgen.run(
            gen,
            url,
            scen_mode,
            concurrency=CONNECTIONS,
            pipeline=0,
            duration=duration,
            client_cpus=opts.split.client_list,
            threads=len(opts.split.client),
            body_file=None,
            timeout=5.0,
        )
        return res, None
    cmd = h2load.command(
        url,
        connections=CONNECTIONS,
        streams=H2_STREAMS,
        duration=duration,
        threads=len(opts.split.client),
        tls13_ciphers=tls_checks.TLS13_SUITE,
        groups=tls_checks.GROUP,
        requests=requests or H2_WARMUP_REQUESTS,
    )
    cmd = ["taskset", "-c", opts.split.client_list] + cmd
    # A request count at the warm-up's rate: on a busy machine a run can take several times its
    # planned duration, which is not a hang.
    limit = duration * 6 + 30
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        # stdin closed: with the lab's stdin open, h2load 1.52 was seen here never to exit after
        # a timed run (-D).
        p = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            timeout=limit,
            env=_client_env(cert),
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as e:
        raise H2loadHang(f"h2load still running {limit:.0f} s after its start") from e
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise loadgen.LoadgenError(f"h2load exited with {p.returncode}: {p.stderr.strip()[-300:]}")
    res = h2load.parse_output(p.stdout)
    res.client_cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return res, h2load.parse_tls(p.stdout)


def one_run(opts, server, port, mode, scen, duration, cert, wire_bytes=None, requests=None) -> dict:
    """One timed pass with the server tree's CPU time (schedstat), peak RSS, and the busy share
    of the server CPUs that was not the server and of the client CPUs that was not the client."""
    url = f"https://{HOST}:{port}{scen.path}"
    pids = metrics.process_tree(server.pid)
    peak_reset = metrics.reset_peak_rss(pids)
    srv0, cli0 = metrics.cpu_times(opts.split.server), metrics.cpu_times(opts.split.client)
    t0 = time.monotonic()
    before = metrics.Sample.take(server.pid)
    res, negotiated = _load_of(opts)(opts, mode, url, scen, duration, cert, requests)
    after = metrics.Sample.take(server.pid)
    wall = time.monotonic() - t0
    srv = metrics.cpu_times(opts.split.server).since(srv0)
    cli = metrics.cpu_times(opts.split.client).since(cli0)
    cpu = after.cpu_since(before)
    client_cpu = res.client_cpu_s or 0.0
    run = res.to_json()
    lat = res.latency_us
    run.update(
        {
            "p50_us": lat.get("p50"),
            "p99_us": lat.get("p99"),
            "mean_latency_us": lat.get("mean"),
            "server_cpu_s": cpu,
            "cpu_us_per_req": cpu * 1e6 / res.requests if res.requests else None,
            "server_cpus_other_share": round(
                min(max(0.0, srv.busy - cpu) / (wall * len(opts.split.server)), 1.0), 4
            ),
            "client_cpus_busy_share": round(min(cli.busy / (wall * len(opts.split.client)), 1), 4),
            "client_cpus_other_share": round(
                min(max(0.0, cli.busy - client_cpu) / (wall * len(opts.split.client)), 1.0), 4
            ),
            "steal_share": round((srv.steal + cli.steal) / max(srv.total + cli.total, 1e-9), 4),
            "peak_rss_bytes": after.peak_rss if peak_reset else None,
            "negotiated": negotiated,
        }
    )
    if mode == "h2":
        problems = h2load.check_statuses(res)
        if negotiated and negotiated.get("alpn") != "h2":
            problems.append(f"h2load negotiated {negotiated.get('alpn')!r}, not h2")
    else:
        problems = loadgen.check_statuses(res, int(scen.expect.get("status", 200)))
        if mode == "https":
            bad = parity.bytes_per_response_problem(wire_bytes, res.bytes, res.requests)
            if bad:
                problems.append(bad)
    run["problems"] = problems
    return run


def cell_record(peer: Peer, mode: str, status: str, message: str = "", runs=None) -> dict:
    runs = runs or []
    med, spread = stats.summarize(runs, KEYS)
    return {
        "server": peer.name,
        "scenario": "plaintext",
        "mode": mode,
        "lane": mode,
        "concurrency": CONNECTIONS,
        "streams_per_connection": H2_STREAMS if mode == "h2" else 1,
        "status": status,
        "message": message,
        "runs": runs,
        "median": med,
        "cv": spread,
        "cpu_ci": stats.median_ci([r.get("cpu_us_per_req") for r in runs]),
    }


def _check_server(opts, peer, entry, scen, contract, cert, logs, port):
    """Alone: handshakes, parity over each protocol, idle memory per protocol (a fresh process
    for each idle step, so one step's allocations do not hide the other's)."""
    suite = getattr(opts, "suite", None)
    protos = protocols_of(peer, tuple(set(_mode_protocol(opts).values())))
    env = dict(os.environ)
    try:
        server = _start(opts, peer, port, cert, logs, "")
    except procs.StartError as e:
        entry["status"], entry["message"] = "start-failed", str(e)
        return
    try:
        entry["startup_ms"] = round((time.monotonic() - server.started_at) * 1000, 1)
        for proto in protos:
            check = suite.check if suite else check_protocol
            entry["handshake"][proto], pr = check(HOST, port, proto, scen, contract, cert, env)
            entry["parity"][proto] = pr.to_json()
            print(
                f"  {peer.name} {proto}: {entry['handshake'][proto].get('protocol')} "
                f"{entry['handshake'][proto].get('cipher')} "
                f"{entry['handshake'][proto].get('key_exchange')} "
                f"ALPN {entry['handshake'][proto].get('alpn')}; parity "
                + ("ok" if pr.ok else "MISMATCH: " + "; ".join(pr.problems)),
                flush=True,
            )
    finally:
        server.stop()
    for proto in protos:
        if opts.idle_connections <= 0:
            break
        try:
            server = _start(opts, peer, port, cert, logs, f"-idle-{proto}")
        except procs.StartError as e:
            entry["idle_memory"][proto] = {"error": str(e)}
            continue
        try:
            idle = suite.idle if suite else _idle
            im = idle(HOST, port, server.pid, scen, opts.idle_connections, proto, cert)
            entry["idle_memory"][proto] = im.to_json()
            per = im.per_connection
            print(
                f"  {peer.name} idle {proto}: "
                + (f"{per / 1024:.1f} KiB per connection" if per is not None else "n/a")
                + (f" ({im.error})" if im.error else ""),
                flush=True,
            )
        finally:
            server.stop()


def check_protocol(host, port, proto, scen, contract, cert, env) -> tuple[dict, object]:
    """The negotiated handshake (s_client) and parity over `proto` ("https" or "h2")."""
    alpn = "h2" if proto == "h2" else "http/1.1"
    info = tls_checks.handshake_info(host, port, cert, env, alpn)
    if proto == "https":
        pr = tls_checks.check_https(host, port, scen, contract.required_headers)
    else:
        pr = tls_checks.check_h2(host, port, scen, contract.required_headers, cert, env)
    return info, pr


def _idle(host, port, pid, scen, n, proto, cert) -> metrics.IdleMemory:
    return tls_checks.idle_memory(host, port, pid, scen, n, proto)


def _free_port(start: int) -> int:
    for p in range(start, start + 200):
        if not procs.port_in_use(HOST, p):
            return p
    raise ProtocolsError(f"no free port in {start}-{start + 199}")


def run(opts: Options) -> dict:
    """The whole protocols run; returns the results (also saved to out_dir/results.json)."""
    procs.install_handlers()
    started = time.monotonic()
    suite = opts.suite
    base = suite.profile if suite else PROFILE
    modes = suite.modes if suite else MODES
    tool_versions = suite.tool_versions if suite else _tools
    for tool in suite.tools if suite else ("wrk", "ab", "h2load", "openssl", "curl", "taskset"):
        if shutil.which(tool) is None:
            raise ProtocolsError(f"{tool} not found on PATH (./scripts/setup lab installs it)")
    contract = load_contract(config.SCENARIOS_JSON)
    scen = contract.by_name("plaintext")
    peers = select_peers(load_peers(opts.peers_file), opts.servers)
    cells = plan(peers, _mode_protocol(opts))
    procs.raise_nofile_limit(max(4096, opts.idle_connections * 2 + 1024))
    out = opts.out_dir
    out.mkdir(parents=True, exist_ok=True)
    logs = out / "logs"
    cert_dir = Path(tempfile.mkdtemp(prefix="peregrine-lab-tls-"))
    cert_dir.chmod(0o755)
    cert = tls_checks.make_certificate(cert_dir)
    # wrk and ab are run through loadgen.run with this process's environment: the clients' setting.
    saved_conf = os.environ.get("OPENSSL_CONF")
    os.environ["OPENSSL_CONF"] = str(cert.client_conf)
    seed = int(time.time()) if opts.seed is None else opts.seed
    prof = replace(base, runs=opts.runs, duration=opts.duration)
    port = opts.port or _free_port(DEFAULT_PORT)
    res = {
        "schema": results.SCHEMA,
        "generated_at": results.now_iso(),
        "command": opts.command,
        "profile": prof.name,
        "profile_description": prof.description,
        "settings": {
            **prof.to_json(),
            "modes": modes,
            "connections": CONNECTIONS,
            "h2_streams_per_connection": H2_STREAMS,
            "server_cpus": list(opts.split.server),
            "client_cpus": list(opts.split.client),
            "workers": opts.split.workers,
            "idle_connections": opts.idle_connections,
            "order": order.SCHEME,
            "order_seed": seed,
            "cpu_time": metrics.cpu_time_source(),
            "port": port,
        },
        "certificate": {**cert.to_json(), "cert": "(temporary)", "key": "(temporary)"},
        "machine": results.machine_info(),
        "tools": tool_versions(),
        "git": results.git_info(),
        "servers": [],
        "cells": [],
        "wall_seconds": None,
        "complete": False,
    }
    print(
        f"profile {prof.name}: {len(peers)} server(s), {len(cells)} cell(s); server CPUs "
        f"{opts.split.server_list} (WORKERS={opts.split.workers}), clients on CPUs "
        f"{opts.split.client_list}; certificate: {cert.description}",
        flush=True,
    )
    try:
        builder = build.Builder(logs)
        entries: dict[str, dict] = {}
        builds = eta.Countdown(len(peers))
        for i, peer in enumerate(peers):
            absent = suite.unavailable(peer) if suite else None
            if absent:
                b = build.BuildResult(False, message=absent)
            elif opts.skip_build:
                missing = build.missing_tools(peer)
                b = build.BuildResult(not missing, message="build skipped", missing=missing)
            else:
                print(f"[build {i + 1}/{len(peers)}, {builds.left(i)}] {peer.name}", flush=True)
                b = builder.build(peer)
            entry = {
                **peer.summary(),
                "protocols": protocols_of(peer, tuple(set(_mode_protocol(opts).values()))),
                "build": b.to_json(),
                "version": build.peer_version(peer) if b.ok else None,
                "status": "ok" if b.ok else ("unavailable" if absent else "build-failed"),
                "message": "" if b.ok else b.message,
                "startup_ms": None,
                "handshake": {},
                "parity": {},
                "idle_memory": {},
            }
            res["servers"].append(entry)
            entries[peer.name] = entry
        res["build_seconds"] = round(time.monotonic() - started, 1)
        # Again after the builds: the Node peers' node arrives with their `npm ci`.
        res["tools"] = tool_versions()
        measure_start = time.monotonic()
        alone = eta.Countdown(len(peers))
        for i, peer in enumerate(peers):
            if entries[peer.name]["status"] == "ok":
                print(f"[alone {i + 1}/{len(peers)}, {alone.left(i)}] {peer.name}", flush=True)
                _check_server(opts, peer, entries[peer.name], scen, contract, cert, logs, port)
            results.save(res, out)
        live = {}
        next_port = port
        for peer in peers:
            if entries[peer.name]["status"] != "ok":
                continue
            next_port = _free_port(next_port)
            try:
                live[peer.name] = (_start(opts, peer, next_port, cert, logs, "-cells"), next_port)
            except procs.StartError as e:
                entries[peer.name]["load_message"] = f"fresh start for the cells failed: {e}"
            next_port += 1
        _measure(opts, cells, live, entries, res, scen, cert, seed)
        if suite and suite.after_cells:
            suite.after_cells(opts, peers, live, entries, res, scen, cert, seed)
        for server, _ in live.values():
            server.stop()
        res["measure_seconds"] = round(time.monotonic() - measure_start, 1)
        results.fill_missing_versions(res["tools"])
        res["complete"] = True
    finally:
        procs.kill_all()
        if saved_conf is None:
            os.environ.pop("OPENSSL_CONF", None)
        else:
            os.environ["OPENSSL_CONF"] = saved_conf
        res["wall_seconds"] = round(time.monotonic() - started, 1)
        results.save(res, out)
        shutil.rmtree(cert_dir, ignore_errors=True)
    return res


def _measure(opts, cells, live, entries, res, scen, cert, seed) -> None:
    """Round r runs every cell once, in blocks (`order.blocked_round`): the servers of one mode
    back to back in a random order, the modes in a random order; the first round warms each cell
    up."""
    rng = random.Random(seed)
    records: dict[tuple[str, str], dict] = {}
    runs_of: dict[tuple[str, str], list] = {}
    failed: dict[tuple[str, str], str] = {}
    hangs: dict[tuple[str, str], list[str]] = {}
    count: dict[tuple[str, str], int] = {}  # requests per HTTP/2 run
    todo = []
    for peer, mode in cells:
        key = (peer.name, mode)
        parity_ok = (entries[peer.name]["parity"].get(_mode_protocol(opts)[mode]) or {}).get("ok")
        if entries[peer.name]["status"] != "ok":
            records[key] = cell_record(peer, mode, entries[peer.name]["status"])
        elif not parity_ok:
            records[key] = cell_record(peer, mode, "parity-failed")
        elif peer.name not in live:
            records[key] = cell_record(peer, mode, "failed", "did not start for the cells")
        else:
            todo.append((peer, mode))
            runs_of[key] = []
    rounds_left = eta.Countdown(opts.runs)
    for r in range(opts.runs):
        blocks = order.blocked_round(
            [c for c in todo if (c[0].name, c[1]) not in failed], lambda c: c[1], rng
        )
        print(
            f"[round {r + 1}/{opts.runs}, {rounds_left.left(r)}] {sum(map(len, blocks))} cell(s)",
            flush=True,
        )
        for peer, mode in (cell for block in blocks for cell in block):
            key = (peer.name, mode)
            server, port = live[peer.name]
            wire = (entries[peer.name]["parity"].get("https") or {}).get("wire_bytes")
            try:
                if not server.alive():
                    raise loadgen.LoadgenError("server exited")
                if r == 0:
                    url = f"https://{HOST}:{port}{scen.path}"
                    load = _load_of(opts)
                    try:
                        warm, _ = load(opts, mode, url, scen, 1.0, cert)
                    except H2loadHang as e:
                        hangs.setdefault(key, []).append(f"warm-up: {e}")
                        warm, _ = load(opts, mode, url, scen, 1.0, cert)
                    count[key] = max(H2_WARMUP_REQUESTS, round(warm.rps * opts.duration))
                n = count.get(key) if mode == "h2" else None
                try:
                    run = one_run(opts, server, port, mode, scen, opts.duration, cert, wire, n)
                except H2loadHang as e:
                    hangs.setdefault(key, []).append(f"run {r + 1}: {e}")
                    run = one_run(opts, server, port, mode, scen, opts.duration, cert, wire, n)
                run["round"] = r + 1
                runs_of[key].append(run)
                if run["problems"]:
                    failed[key] = f"run {r + 1}: " + "; ".join(run["problems"])
                print(
                    f"  {peer.name} {mode}: {run['rps']:,.0f} req/s, "
                    f"{run['cpu_us_per_req'] or 0:.2f} CPU us/req"
                    + (f" PROBLEMS: {run['problems']}" if run["problems"] else ""),
                    flush=True,
                )
            except loadgen.LoadgenError as e:
                failed[key] = str(e)
                print(f"  {peer.name} {mode}: FAILED: {e}", flush=True)
    for peer, mode in cells:
        key = (peer.name, mode)
        if key in runs_of:
            status = "failed" if key in failed else "ok"
            records[key] = cell_record(peer, mode, status, failed.get(key, ""), runs_of[key])
            records[key]["h2load_hangs_retried"] = hangs.get(key, [])
        res["cells"].append(records[key])


# ------------------------------------------------------------------ targets


def find_cell(res: dict, server: str, mode: str) -> dict | None:
    for c in res.get("cells", []):
        if c["server"] == server and c["mode"] == mode and c["status"] == "ok":
            return c
    return None


def _tools() -> dict[str, str | None]:
    """Every tool's version (`results.tool_versions`, OpenSSL among them) plus the TLS lanes'
    load generators."""
    return {
        **results.tool_versions(),
        "h2load": loadgen.version("h2load"),
        "ab": loadgen.version("ab"),
    }


def cpu_ratio(cell: dict, ref: dict) -> stats.RatioEstimate | None:
    """Server CPU per request of `cell` over `ref`'s with its t 95% interval, paired by
    round (the cells run in the same interleaved rounds) when both have enough rounds."""
    return stats.ratio_estimate(cell.get("runs") or [], ref.get("runs") or [], "cpu_us_per_req")


def targets(res: dict) -> list[dict]:
    """The protocols' targets: Peregrine's CPU per request over the peer's, with the t 95%
    interval of the ratio (`cpu_ratio`: paired by round when it can be); met only when the
    interval's upper bound is ≤ 1."""
    out = []
    for mode, against, what in TARGETS:
        mine = find_cell(res, REFERENCE, mode)
        if against == "best-rust":
            rust = [c for c in (find_cell(res, n, mode) for n in RUST_PEERS) if c]
            theirs = min(rust, key=lambda c: c["median"]["cpu_us_per_req"], default=None)
        else:
            theirs = find_cell(res, against, mode)
        row = {"lane": mode, "what": what, "against": theirs["server"] if theirs else against}
        if mine is None or theirs is None:
            row.update(ratio=None, ci=None, met=None)
        else:
            est = cpu_ratio(mine, theirs)
            ci = est.ci if est else None
            row.update(
                ratio=est.ratio if est else None,
                ci=list(ci) if ci else None,
                method=est.method if est else None,
                met=stats.target_met(ci, 1.0),
                mine=mine["median"]["cpu_us_per_req"],
                theirs=theirs["median"]["cpu_us_per_req"],
            )
        out.append(row)
    return out
