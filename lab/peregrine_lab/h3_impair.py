"""The HTTP/3 lane's loss and reordering phase: latency at a fixed offered rate through a
userspace UDP impairment relay (`h3client relay`, lab/peers/h3/cmd/h3client/relay.go), for every
HTTP/3 server at each `SETTINGS` entry, and its section and chart in the report.

Not `tc netem`: this kernel has no sch_netem (h3_lane.netem_check says so in each run), and a
network namespace would need it too. The relay runs on the client's CPUs, so the server's CPU
per request never includes it; its own added latency is the difference between the `0%` setting
(through the relay, nothing dropped) and `direct` (the same load without the relay).
"""

from __future__ import annotations

import json
import random
import select
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

from . import loadgen, stats, tls_lanes, tls_report

RUNS = 3
"""Runs per (server, setting), capped by the run's --runs; the chart shows their medians (no
interval is drawn from them: the lane's verdicts are the cells')."""
MODE = "h3-loss"
"""The load of every run of the phase: `h3client rate` at `RATE` (h3_lane.load_command)."""
RATE = 2000
"""Requests a second over the lane's 50 connections. Lower than the `h3-rate` lane's: at 5000
the client and the relay together took 94% of the client's one CPU here (relay 0.97 CPU s,
client 1.85 CPU s for 3 s), and a saturated client would put its own queue in the latency."""


@dataclass(frozen=True)
class Setting:
    """One impairment: `loss` and `reorder` are percentages of the datagrams of each direction,
    a reordered datagram held back `hold_ms` (later ones overtake it)."""

    name: str
    relay: bool = True
    loss: float = 0.0
    reorder: float = 0.0
    hold_ms: float = 0.0
    delay_ms: float = 0.0

    def flags(self) -> list[str]:
        out = ["-loss", f"{self.loss:g}", "-delay-ms", f"{self.delay_ms:g}"]
        if self.reorder:
            out += ["-reorder", f"{self.reorder:g}", "-hold-ms", f"{self.hold_ms:g}"]
        return out


SETTINGS = (
    Setting("direct", relay=False),
    Setting("0%"),
    Setting("1%", loss=1),
    Setting("3%", loss=3),
    Setting("reorder", reorder=3, hold_ms=2),
)
"""The chart's x axis: no relay, the relay with nothing dropped (the difference is its own
cost), 1% and 3% loss each way, and 3% of datagrams held back 2 ms (far beyond loopback's round
trip, so QUIC sees them late)."""


class RelayError(loadgen.LoadgenError):
    """The relay did not start or did not report."""


class Relay:
    """`h3client relay` to 127.0.0.1:`port` with `setting` and `seed`, on the client CPUs."""

    def __init__(self, client: Path, port: int, setting: Setting, seed: int, cpus: str):
        cmd = ["taskset", "-c", cpus, str(client), "relay", f"{tls_lanes.HOST}:{port}"]
        cmd += setting.flags() + ["-seed", str(seed)]
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        ready, _, _ = select.select([self.proc.stdout], [], [], 10.0)
        line = self.proc.stdout.readline() if ready else ""
        if not line.startswith("relay "):
            self.proc.kill()
            err = self.proc.stderr.read().strip()[-300:]
            raise RelayError(f"the relay did not start: {err or 'no relay line in 10 s'}")
        self.port = int(line.split()[1].rsplit(":", 1)[1])

    def stop(self) -> dict:
        """Stops the relay; its counts (flows, forwarded, dropped, held)."""
        try:
            out, err = self.proc.communicate("", timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise RelayError("the relay did not stop within 10 s") from None
        try:
            return json.loads(out.splitlines()[-1])
        except (IndexError, json.JSONDecodeError):
            raise RelayError(f"the relay printed no counts: {err.strip()[-300:]}") from None


def servers(peers, live, entries) -> list:
    """The HTTP/3 servers the phase measures: running, and HTTP/3 parity passed."""
    return [
        p
        for p in peers
        if p.name in live and ((entries[p.name].get("parity") or {}).get("h3") or {}).get("ok")
    ]


def phase(client: Path, opts, peers, live, entries, res, scen, cert, seed) -> None:
    """Rounds of every (server, setting) in a random order, each run through a fresh relay
    seeded with the run's seed and the round (every server meets the same drops in a round);
    results in res["impairment"]."""
    chosen = servers(peers, live, entries)
    runs = min(opts.runs, RUNS)
    rng = random.Random(seed + 1)
    out = {
        "method": "userspace UDP relay (h3client relay), not tc netem",
        "mode": MODE,
        "rate": RATE,
        "settings": [asdict(s) for s in SETTINGS],
        "runs": runs,
        "duration": opts.duration,
        "cells": [],
    }
    tally = {(p.name, s.name): [] for p in chosen for s in SETTINGS}
    for r in range(runs):
        order = list(tally)
        rng.shuffle(order)
        print(f"[loss round {r + 1}/{runs}] {len(order)} run(s)", flush=True)
        for name, setting_name in order:
            setting = next(s for s in SETTINGS if s.name == setting_name)
            server, port = live[name]
            run = {"round": r + 1, "seed": seed + r}
            try:
                run.update(_one(client, opts, server, port, setting, seed + r, scen, cert))
            except loadgen.LoadgenError as e:
                run["problems"] = [str(e)]
            tally[(name, setting_name)].append(run)
            p99 = run.get("p99_us")
            print(
                f"  {name} {setting_name}: p99 "
                + (f"{p99:.0f} us" if p99 is not None else "n/a")
                + (f" PROBLEMS: {run['problems']}" if run.get("problems") else ""),
                flush=True,
            )
    for (name, setting_name), cell_runs in tally.items():
        ok = [r for r in cell_runs if not r.get("problems")]
        out["cells"].append(
            {
                "server": name,
                "setting": setting_name,
                "runs": cell_runs,
                "ok_runs": len(ok),
                "p50_us": stats.median(r.get("p50_us") for r in ok),
                "p99_us": stats.median(r.get("p99_us") for r in ok),
                "cpu_us_per_req": stats.median(r.get("cpu_us_per_req") for r in ok),
            }
        )
    res["impairment"] = out


def _one(client, opts, server, port, setting: Setting, seed: int, scen, cert) -> dict:
    """One timed run of `setting`: through a fresh relay, or direct; the relay's counts."""
    if not setting.relay:
        return {
            **tls_lanes.one_run(opts, server, port, MODE, scen, opts.duration, cert),
            "relay": None,
        }
    relay = Relay(client, port, setting, seed, opts.split.client_list)
    try:
        got = tls_lanes.one_run(opts, server, relay.port, MODE, scen, opts.duration, cert)
    finally:
        counts = relay.stop()
    return {**got, "relay": counts}


def cell(imp: dict, server: str, setting: str) -> dict | None:
    """The phase's cell of `server` at `setting`, or None."""
    return next(
        (c for c in imp.get("cells", []) if c["server"] == server and c["setting"] == setting),
        None,
    )


def _share(imp: dict) -> str:
    busy = stats.median(
        r.get("client_cpus_busy_share") for c in imp.get("cells", []) for r in c["runs"]
    )
    return "n/a" if busy is None else f"{busy * 100:.0f}%"


def _us(v) -> str:
    return "n/a" if v is None else f"{v:,.0f}"


def render(res: dict, labels: dict) -> list[str]:
    """The report's section: method, why not netem, and per server p50 / p99 at each setting,
    the client's busy share, and the server's CPU per request at 3% loss."""
    imp = res.get("impairment")
    netem = res.get("netem") or {}
    why = netem.get("reason") or "not checked in this run"
    lines = ["## Loss and reordering (userspace relay, not tc netem)", ""]
    if not imp:
        return lines + [f"Not measured in this run (tc netem: {why}).", ""]
    names = [s["name"] for s in imp["settings"]]
    described = "; ".join(
        f"`{s['name']}`: "
        + (
            f"{s['loss']:g}% dropped, {s['reorder']:g}% held back {s['hold_ms']:g} ms, "
            f"{s['delay_ms']:g} ms delay"
            if s["relay"]
            else "no relay"
        )
        for s in imp["settings"]
    )
    lines += [
        f"tc netem is not available here ({why}), so loss and reordering come from a userspace "
        "UDP relay between the load client and each server (`h3client relay`, lab/peers/h3): "
        "each direction of each client connection has its own random source seeded with the "
        "run's seed and round (flows numbered by their first datagram), so the same seed gives "
        "each flow the same drops and every server meets the same drops in a round. "
        "The relay runs on the client's CPUs: the server CPU per request below "
        "excludes it, and the `0%` column (through the relay, nothing dropped) against "
        "`direct` (the same load without the relay) is its own added latency. Unlike netem "
        "it adds its own scheduling delay and drops only what the client "
        "and server send, never the kernel's loopback queue.",
        "",
        f"- Load: h3client rate, {imp['rate']} requests/s over "
        f"{res.get('settings', {}).get('connections')} connections (open loop, latency from "
        f"each request's scheduled start); {imp['runs']} run(s) of {imp['duration']:g} s per "
        f"server and setting, in random order per round; medians. The load generator's CPUs "
        f"were {_share(imp)} busy (median of the runs, relay included). Settings: {described}.",
        "",
        "| server | " + " | ".join(f"{n} p50 / p99 µs" for n in names) + " | CPU µs/req at 3% |",
        "|---|" + "---|" * (len(names) + 1),
    ]
    for name in dict.fromkeys(c["server"] for c in imp["cells"]):
        row = [labels.get(name, name)]
        for n in names:
            c = cell(imp, name, n) or {}
            fig = f"{_us(c.get('p50_us'))} / {_us(c.get('p99_us'))}"
            if c.get("ok_runs", 0) < len(c.get("runs", [])):
                fig += f" ({len(c['runs']) - c['ok_runs']} run(s) with problems)"
            row.append(fig)
        cpu = (cell(imp, name, "3%") or {}).get("cpu_us_per_req")
        row.append("n/a" if cpu is None else f"{cpu:.2f}")
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", "Chart: `charts/latency_under_loss.svg`.", ""]
    return lines


def chart(res: dict, out_dir: Path, plt) -> Path | None:
    """p99 (solid) and p50 (dotted) latency against the setting, a line per server."""
    imp = res.get("impairment")
    if not imp or not imp.get("cells"):
        return None
    names = [s["name"] for s in imp["settings"]]
    labels = {s["name"]: s.get("label", s["name"]) for s in res.get("servers", [])}
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for i, name in enumerate(dict.fromkeys(c["server"] for c in imp["cells"])):
        color = f"C{i}"
        for key, style in (("p99_us", "-"), ("p50_us", ":")):
            pts = [(x, (cell(imp, name, n) or {}).get(key)) for x, n in enumerate(names)]
            pts = [(x, y / 1000) for x, y in pts if y is not None]
            if pts:
                ax.plot(*zip(*pts, strict=True), style, marker="o", color=color,
                        label=f"{labels.get(name, name)} {key[:3]}")  # fmt: skip
    ax.set_title(f"HTTP/3 at {imp['rate']} requests/s: latency under loss and reordering")
    ax.set_xticks(range(len(names)), names)
    ax.set_yscale("log")
    ax.set_xlabel("impairment (each direction; userspace relay)")
    ax.set_ylabel("latency ms (median of runs; log)")
    ax.legend(fontsize=7)
    return tls_report.save_chart(plt, fig, out_dir / "charts", "latency_under_loss")
