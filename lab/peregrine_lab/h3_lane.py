"""`./scripts/lab h3`: the HTTP/3 lane, run by the protocols lanes' machinery (tls_lanes.run with
the `SUITE` below).

HTTP/3 against HTTP/2 and HTTP/1.1 over TLS on the same app where a server offers them, with the
method of the protocols lanes: one self-signed certificate per run; per server alone, parity over
each protocol (HTTP/3 with h3client, the lab's quic-go client in lab/peers/h3) and memory per
idle connection per protocol on a fresh process; then every server fresh and the cells in
randomised interleaved rounds, server CPU per request from schedstat, 95% intervals. Lanes:

* `h3`: HTTP/3 over QUIC, `h3client load` (the lab's quic-go load client), 50 connections with
  10 requests in flight on each, as the `h2` lane's h2load `-m 10`. Not oha: its `http3` build
  (1.16.0, quinn) stalls against quic-go's servers (quic-go, Caddy) and answers quinn's only;
* `h3-rate`: HTTP/3 at a fixed offered rate (`h3client rate`, open loop, `OFFERED_RPS` over 50
  connections), below every server's capacity: the CPU-per-request target is judged here, at
  equal load for all servers (the closed loop saturates the one client CPU of a 2-CPU machine,
  so its req/s is the client's);
* `h2` and `https`: as in the protocols lanes (h2load -c 50 -m 10; wrk -c 50).

After the cells, the loss and reordering phase (h3_impair.py) on the same processes.

A server whose crate lacks a feature it needs (`needs_feature` in lab/peers/h3.toml: Peregrine
without `http3`) is recorded as unavailable, never measured over another protocol instead.
"""

from __future__ import annotations

import functools
import json
import os
import resource
import select
import subprocess
import sys
import time
import tomllib
from dataclasses import replace
from pathlib import Path

from . import config, h3_impair, loadgen, metrics, parity, procs, results, tls_checks, tls_lanes
from .peers import Peer

H3_TOML = config.PEERS_DIR / "h3.toml"
H3_DIR = config.PEERS_DIR / "h3"
H3CLIENT = H3_DIR / "bin" / "h3client"

CONNECTIONS = tls_lanes.CONNECTIONS
STREAMS = tls_lanes.H2_STREAMS
"""Requests in flight per QUIC connection: HTTP/2's (h2load -m), so both carry 500 streams."""
OFFERED_RPS = 5000
"""The `h3-rate` lane's offered load: a quarter of the slowest HTTP/3 peer's capacity on one
CPU in the smoke run (Caddy, 49 CPU µs/request), and a third of the client's one CPU (h3client
took 1.0 CPU s for 3 s at this rate against quic-go's server)."""
MODES = {
    "h3": (
        f"HTTP/3 over QUIC: h3client load (quic-go), {CONNECTIONS} connections x {STREAMS} "
        "requests in flight (500 streams, as h2), closed loop"
    ),
    "h3-rate": (
        f"HTTP/3 at a fixed offered rate: h3client rate (quic-go), {OFFERED_RPS} requests/s "
        f"over {CONNECTIONS} connections, open loop, latency from each request's scheduled "
        "start"
    ),
    "h2": tls_lanes.MODES["h2"],
    "https": tls_lanes.MODES["https"],
}
MODE_PROTOCOL = {"h3": "h3", "h3-rate": "h3", "h2": "h2", "https": "https"}
RATES = {"h3-rate": OFFERED_RPS, h3_impair.MODE: h3_impair.RATE}
"""The open-loop loads: the `h3-rate` lane's and the loss phase's (not a lane of the plan)."""

PROFILE = replace(
    tls_lanes.PROFILE,
    name="h3",
    description=(
        "the HTTP/3 lane: HTTP/3 closed loop (h3client load, quic-go, c=50 x 10 streams) "
        f"and at a fixed {OFFERED_RPS} req/s (h3client rate, c=50) against HTTP/2 over TLS "
        "(h2load -c 50 -m 10) and HTTPS keep-alive (wrk, c=50) on the same app where a server "
        "offers them, /plaintext, 7 interleaved runs of 2 s per cell with 95% intervals; memory "
        "per idle connection per protocol with 500 connections; latency at the fixed rate "
        "through a userspace loss/reordering relay (0%, 1%, 3% loss, reordering; 3 runs each); "
        "one self-signed ECDSA P-256 certificate per run"
    ),
    duration=2.0,
    lanes=tuple(
        config.Lane(mode, MODES[mode], ("plaintext",), ((CONNECTIONS, 0),), mode=mode)
        for mode in MODES
    ),
)


class H3Error(tls_lanes.ProtocolsError):
    """A condition that stops the HTTP/3 run (a missing client)."""


# ------------------------------------------------------------------ HTTP/3 client steps


def _client_env(cert) -> dict:
    return {**os.environ, "H3_CA": str(cert.cert)}


def h3_get(host: str, port: int, path: str, cert, timeout: float = 15.0) -> dict:
    """One GET over HTTP/3 with h3client: its JSON (status, proto, headers, body, tls)."""
    url = f"https://{host}:{port}{path}"  # the certificate names 127.0.0.1 too
    try:
        p = subprocess.run(
            [str(H3CLIENT), "get", url],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=_client_env(cert),
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise parity.ProtocolError(f"h3client: {e}") from e
    if p.returncode != 0:
        raise parity.ProtocolError(p.stderr.strip()[-300:] or f"h3client exited {p.returncode}")
    try:
        return json.loads(p.stdout)
    except json.JSONDecodeError as e:
        raise parity.ProtocolError(f"h3client printed no JSON: {p.stdout[:120]!r}") from e


def as_response(answer: dict) -> parity.Response:
    """h3client's JSON as the parity checker's response."""
    headers = [(str(k), str(v)) for k, v in (answer.get("headers") or {}).items()]
    body = str(answer.get("body", "")).encode()
    status = int(answer.get("status", 0))
    return parity.Response(str(answer.get("proto")), status, "", headers, body)


def check_h3(host, port, scen, contract, cert) -> tuple[dict, parity.ParityResult]:
    """The scenario over HTTP/3, twice (two connections), each answer against the contract; the
    answer must really be HTTP/3. Returns the negotiated TLS of the first and the result."""
    problems: list[str] = []
    first, negotiated = None, {}
    for i in range(2):
        try:
            answer = h3_get(host, port, scen.path, cert)
        except parity.ProtocolError as e:
            return negotiated, parity.ParityResult(
                scen.name, False, [f"no valid HTTP/3 response: {e}"]
            )
        resp = as_response(answer)
        if resp.version != "HTTP/3.0":
            problems.append(f"answered over {resp.version}, not HTTP/3")
        for prob in parity.check_response(scen, resp, contract.required_headers):
            tagged = prob if i == 0 else f"second request: {prob}"
            if tagged not in problems:
                problems.append(tagged)
        if first is None:
            first, negotiated = resp, answer.get("tls") or {}
    return negotiated, parity.ParityResult(
        scen.name, not problems, problems, first.status, first.headers, len(first.body)
    )


def check(host, port, proto, scen, contract, cert, env) -> tuple[dict, parity.ParityResult]:
    """`tls_lanes.Suite.check`: HTTP/3 here, the TCP protocols as the protocols lanes do."""
    if proto != "h3":
        return tls_lanes.check_protocol(host, port, proto, scen, contract, cert, env)
    return check_h3(host, port, scen, contract, cert)


def idle(host, port, pid, scen, n, proto, cert, timeout: float = 120.0) -> metrics.IdleMemory:
    """`tls_lanes.Suite.idle`: for HTTP/3, `n` QUIC connections from one h3client, each with one
    request answered, held idle while the server tree's RSS growth is read."""
    if proto != "h3":
        return tls_checks.idle_memory(host, port, pid, scen, n, proto)
    pids = metrics.process_tree(pid)
    time.sleep(0.5)
    before = metrics.rss_bytes(pids)
    start = time.monotonic()
    url = f"https://{host}:{port}{scen.path}"
    client = subprocess.Popen(
        [str(H3CLIENT), "idle", url, str(n)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_client_env(cert),
    )
    error, opened = None, 0
    try:
        ready, _, _ = select.select([client.stdout], [], [], timeout)
        line = client.stdout.readline() if ready else ""
        if line.startswith("ready "):
            opened = int(line.split()[1])
            time.sleep(0.5)
            pids = sorted(set(pids) | set(metrics.process_tree(pid)))
            after = metrics.rss_bytes(pids)
        else:
            after = before
            client.kill()
            err = client.stderr.read().strip()[-300:]
            error = err or f"h3client printed no 'ready' line within {timeout:.0f} s"
    finally:
        if client.poll() is None:
            client.stdin.close()
            try:
                client.wait(timeout=10)
            except subprocess.TimeoutExpired:
                client.kill()
    return metrics.IdleMemory(n, opened, before, after, time.monotonic() - start, error)


# ------------------------------------------------------------------ readiness, availability


def udp_bound(port: int) -> bool:
    """True when a UDP socket is bound to `port` (any address): /proc/net/udp and udp6."""
    for table in ("/proc/net/udp", "/proc/net/udp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            local = line.split()[1]
            if int(local.rsplit(":", 1)[1], 16) == port:
                return True
    return False


def wait(host: str, port: int, peer: Peer, server: procs.Server, timeout: float = 30.0) -> None:
    """`tls_lanes.Suite.wait`: the TCP port answers (when the server offers a TCP protocol) and
    the UDP port is bound (when it offers HTTP/3)."""
    protos = tls_lanes.protocols_of(peer, tuple(MODE_PROTOCOL.values()))
    start = time.monotonic()
    if set(protos) & {"h2", "https"}:
        procs.wait_for_port(host, port, server.proc, timeout=timeout)
    if "h3" in protos:
        while not udp_bound(port):
            if server.proc.poll() is not None:
                raise procs.StartError(f"exited with status {server.proc.returncode}")
            if time.monotonic() - start > timeout:
                raise procs.StartError(f"UDP port {port} not bound within {timeout:.0f} s")
            time.sleep(0.05)


def unavailable(peer: Peer) -> str | None:
    """Why `peer` is not measured before any build: its crate lacks a feature it needs."""
    need = peer.extra.get("needs_feature")
    if not need:
        return None
    manifest, feature = peer.dir / need[0], need[1]
    try:
        features = tomllib.loads(manifest.read_text()).get("features", {})
    except (OSError, tomllib.TOMLDecodeError) as e:
        return f"not built with {feature}: {manifest} unreadable ({e})"
    if feature not in features:
        return f"not built with {feature}: {need[0]} has no `{feature}` feature"
    return None


# ------------------------------------------------------------------ load


def load_command(url: str, duration: float, mode: str = "h3") -> list[str]:
    """h3client's load for `duration` seconds (whole seconds, at least 1): `h3`, closed loop,
    CONNECTIONS QUIC connections with STREAMS requests in flight on each; `h3-rate` and the loss
    phase's `h3-loss`, open loop, their RATES requests a second over CONNECTIONS connections."""
    secs = str(max(1, round(duration)))
    if mode in RATES:
        return [str(H3CLIENT), "rate", url, str(CONNECTIONS), str(RATES[mode]), secs]
    return [str(H3CLIENT), "load", url, str(CONNECTIONS), str(STREAMS), secs]


def load(opts, mode, url, scen, duration, cert, requests=None) -> tuple:
    """`tls_lanes.Suite.load`: h3client over HTTP/3 for `h3` and `RATES`' modes, the protocols
    lanes' clients otherwise. Its JSON has oha's layout, read by oha's parser. A fixed-rate run
    that could not send every request it offered (a connection already had 100 in flight) is
    an error: its load was not the offered one."""
    if mode != "h3" and mode not in RATES:
        return tls_lanes._load(opts, mode, url, scen, duration, cert, requests)
    cmd = ["taskset", "-c", opts.split.client_list] + load_command(url, duration, mode)
    limit = duration + 30
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        p = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            timeout=limit,
            stdin=subprocess.DEVNULL,
            env=_client_env(cert),
        )
    except subprocess.TimeoutExpired as e:
        raise loadgen.LoadgenError(f"h3client load still running {limit:.0f} s after start") from e
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise loadgen.LoadgenError(f"h3client load exited with {p.returncode}: {p.stderr[-300:]}")
    res = loadgen.parse_oha_output(p.stdout)
    if res.requests == 0:
        raise loadgen.LoadgenError(f"h3client load got no answer: {p.stdout[-300:]}")
    behind = unsent(p.stdout)
    if behind:
        raise loadgen.LoadgenError(behind)
    res.client_cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return res, {"alpn": "h3"}


def unsent(stdout: str) -> str | None:
    """Why an `h3client rate` run was not at its offered load (requests due while their
    connection already had 100 in flight were not sent), or None."""
    data = json.loads(stdout)
    if not data.get("skipped"):
        return None
    return (
        f"h3client rate: {data['skipped']} request(s) not sent, the server was behind the "
        f"offered {data.get('offered_rps')} req/s"
    )


def tool_versions() -> dict[str, str | None]:
    """The protocols lanes' tools plus the quic-go of h3client (the HTTP/3 client)."""
    return {**tls_lanes._tools(), "h3client": quic_go_version()}


def quic_go_version(gomod: str | None = None) -> str | None:
    """The quic-go that h3client (the load client and the loss phase's relay) is built with:
    its `require` line in lab/peers/h3/go.mod, inside a block or on its own."""
    text = (H3_DIR / "go.mod").read_text() if gomod is None else gomod
    for line in text.splitlines():
        words = line.split()
        if "github.com/quic-go/quic-go" in words:
            i = words.index("github.com/quic-go/quic-go")
            if i + 1 < len(words):
                return f"quic-go {words[i + 1]}"
    return None


SUITE = tls_lanes.Suite(
    profile=PROFILE,
    modes=MODES,
    mode_protocol=MODE_PROTOCOL,
    tools=("wrk", "h2load", "openssl", "curl", "taskset"),
    load=load,
    check=check,
    idle=idle,
    wait=wait,
    tool_versions=tool_versions,
    unavailable=unavailable,
    after_cells=functools.partial(h3_impair.phase, H3CLIENT),
)


def build_client() -> None:
    """h3client from lab/peers/h3 (quic-go from the Go module proxy; a no-op when built)."""
    try:
        p = subprocess.run(
            ["go", "build", "-trimpath", "-o", "bin/", "./cmd/h3client"],
            cwd=H3_DIR,
            capture_output=True,
            text=True,
        )
    except OSError as e:
        raise H3Error(f"building h3client needs Go: {e}") from e
    if p.returncode != 0:
        raise H3Error(f"building h3client failed: {p.stderr.strip()[-500:]}")


def netem_check(namespace: str = "peregrine-lab-netem") -> dict:
    """Whether loss and reordering can be put on loopback: a network namespace of its own with
    `tc qdisc ... netem` on its lo. {"available": bool, "reason": why not}; the namespace is
    removed again."""
    steps = [
        ["ip", "netns", "add", namespace],
        ["ip", "netns", "exec", namespace, "ip", "link", "set", "lo", "up"],
        ["ip", "netns", "exec", namespace, "tc", "qdisc", "add", "dev", "lo", "root", "netem"]
        + ["loss", "1%", "reorder", "25%", "50%", "delay", "1ms"],
    ]
    reason = None
    try:
        for cmd in steps:
            try:
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
            except (OSError, subprocess.TimeoutExpired) as e:
                reason = f"`{' '.join(cmd[:3])}`: {e}"
                break
            if p.returncode != 0:
                reason = f"`{' '.join(cmd)}` failed: {p.stderr.strip()[:200]}"
                break
    finally:
        subprocess.run(["ip", "netns", "del", namespace], capture_output=True, timeout=10)
    return {"available": reason is None, "reason": reason}


ALONE_S = 2.0
"""Seconds of a server's start and stop (the alone step, each idle step, the cells' start)."""
PER_PROTOCOL_S = 8.5
"""Seconds per protocol of the alone step: parity, then the idle connections on a fresh process
(500 handshakes and the settling pauses)."""
PER_RUN_S = 0.5
"""Seconds a timed pass of a cell costs beyond its duration: the client's start, connection
set-up, the samples."""
RELAY_RUN_S = 1.5
"""The same for a run of the loss phase, which also starts and stops the relay. These three are
from `--servers quic-go --runs 1 --duration 2` on a busy machine: alone 35 s for 3 protocols,
4 cells (warm-up and run) in 13 s, 5 loss runs in 17 s."""


def estimate(peers: list[Peer], runs: int, duration: float) -> dict[str, float]:
    """Seconds of each part of a run of `peers` (builds excluded): the alone steps, the cells
    (a warm-up of 1 s, then `runs` runs each), the loss phase."""
    cells = tls_lanes.plan(peers, MODE_PROTOCOL)
    run_s = max(1, round(duration)) + PER_RUN_S
    h3 = [p for p in peers if "h3" in tls_lanes.protocols_of(p, tuple(MODE_PROTOCOL.values()))]
    protos = sum(len(tls_lanes.protocols_of(p, tuple(MODE_PROTOCOL.values()))) for p in peers)
    return {
        "alone": len(peers) * 2 * ALONE_S + protos * (PER_PROTOCOL_S + ALONE_S),
        "cells": len(cells) * ((1 + PER_RUN_S) + runs * run_s),
        "loss": len(h3)
        * len(h3_impair.SETTINGS)
        * min(runs, h3_impair.RUNS)
        * (max(1, round(duration)) + RELAY_RUN_S),
    }


def describe(opts: tls_lanes.Options, stream=None) -> float:
    """`--dry-run`: the servers, cells, runs and the estimated time of the run `opts` would
    make, printed; nothing is built, started or measured. Returns the estimated seconds."""
    from .peers import load_peers, select_peers

    stream = stream or sys.stdout
    peers = select_peers(load_peers(opts.peers_file), opts.servers)
    measured = [p for p in peers if unavailable(p) is None]
    cells = tls_lanes.plan(measured, MODE_PROTOCOL)
    seed = "drawn at the start" if opts.seed is None else opts.seed
    print(
        f"dry run of profile h3 (seed {seed}): nothing is built or measured ({opts.peers_file})",
        file=stream,
    )
    for p in peers:
        why = unavailable(p)
        modes = [m for q, m in cells if q.name == p.name]
        print(
            f"  {p.name:14} " + (f"unavailable: {why}" if why else f"lanes {', '.join(modes)}"),
            file=stream,
        )
    parts = estimate(measured, opts.runs, opts.duration)
    loss_runs = min(opts.runs, h3_impair.RUNS)
    print(
        f"{len(cells)} cell(s) x {opts.runs} run(s) of {opts.duration:g} s in interleaved rounds; "
        f"loss phase: {len(h3_impair.SETTINGS)} setting(s) x {loss_runs} run(s) per HTTP/3 "
        f"server; idle memory with {opts.idle_connections} connections per protocol",
        file=stream,
    )
    total = sum(parts.values())
    print(
        f"estimated time {total / 60:.1f} min ({total:.0f} s: "
        + ", ".join(f"{k} {v:.0f} s" for k, v in parts.items())
        + "), plus the builds of anything not yet built",
        file=stream,
    )
    return total


def run(opts: tls_lanes.Options) -> dict:
    """The whole HTTP/3 run (tls_lanes.run with `SUITE`, the loss phase included); results in
    out_dir/results.json, with whether tc netem works on this machine (the report says why the
    relay stands in for it)."""
    build_client()
    netem = netem_check()
    if "qdisc kind is unknown" in (netem["reason"] or ""):
        netem["reason"] += " (this kernel has no sch_netem)"
    res = tls_lanes.run(replace(opts, suite=SUITE))
    res["netem"] = netem
    results.save(res, opts.out_dir)
    return res
