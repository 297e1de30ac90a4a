#!/usr/bin/env python3
"""The resource attacks against the lab's peers: each peer from lab/peers/peers.toml is started
with its own default timeouts (WORKERS=1), attacked, measured and stopped; the results form the
**resilience** table (lab/results/resilience/README.md and results.json).

Usage:
    python3 probe/attack_peers.py [--peers peregrine,nginx,...] [--connections 100] [--out DIR]

The attacks every peer can take: 100 never-reading pipeliners asking for the contract's `/large`
(64 requests each: ~640 KiB of answers per connection the server may hold), and 100 stalled
uploads to `POST /users` (peers that serve it). Each row says how much the server's RSS grew at
the peak and after, whether its own timeouts cut the attackers (within 3 × 10 s + 5 s), and
whether a fresh client was served during the attack. No budget fails a peer here: the table
shows what each server does by default.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import tomllib
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from probelib import attacks
from score_peers import PEERS_DIR, ROOT, free_port, stop, wait_port

sys.path.insert(0, os.path.join(ROOT, "lab"))
from peregrine_lab import report, resilience, results

DEFAULT_PEERS = "peregrine,nginx,go-nethttp,node-http,hyper,actix,axum,fastify"


def attack_peer(peer: dict, connections: int) -> dict:
    name = peer["name"]
    cwd = os.path.normpath(os.path.join(PEERS_DIR, peer["dir"]))
    run = list(peer["run"])
    if "/" in run[0] and not os.path.exists(os.path.join(cwd, run[0])):
        return {"peer": name, "error": f"not built ({run[0]} missing: ./scripts/lab builds it)"}
    port = free_port()
    env = dict(os.environ, ADDR=f"127.0.0.1:{port}", WORKERS="1", **peer.get("env", {}))
    proc = subprocess.Popen(
        run, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        if not wait_port(port, proc, 60):
            return {"peer": name, "error": "did not start"}
        o = attacks.AttackOptions(
            port=port,
            server_pid=proc.pid,
            large_path="/large",
            # The servers' own defaults decide; the probe waits long enough for a 10 s timeout.
            write_timeout=10.0,
            body_timeout=10.0,
            connections=connections,
            h2c=False,
            websocket_path=None,
        )
        results = [attacks.pipeline_no_read(o)]
        if "post_json" in peer.get("scenarios", []):
            results.append(attacks.stalled_upload(o))
        return {"peer": name, "label": peer.get("label", name), "attacks": results}
    finally:
        stop(proc)


def table(data: dict) -> str:
    """The resilience table alone (lab/results/resilience/README.md)."""
    lines = resilience.section({"resilience": data})
    lines[0] = "# Resilience: the lab's peers under resource attacks"
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--peers", default=DEFAULT_PEERS, help=f"comma-separated (default {DEFAULT_PEERS})")
    ap.add_argument("--connections", type=int, default=100)
    ap.add_argument("--out", default=os.path.join(ROOT, "lab", "results", "resilience"))
    ap.add_argument(
        "--into-report",
        default=os.path.join(ROOT, "lab", "results", "standard"),
        help="a report folder whose results.json gets the table and whose report.md is rewritten ('' for none)",
    )
    ap.add_argument("--build-note", default="", help="how the peers were built, if not as the lab builds them")
    args = ap.parse_args()
    with open(os.path.join(PEERS_DIR, "peers.toml"), "rb") as f:
        peers = {p["name"]: p for p in tomllib.load(f)["peer"]}
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout.strip()
    rows = []
    for name in args.peers.split(","):
        if name not in peers:
            rows.append({"peer": name, "error": "not in peers.toml"})
            continue
        row = attack_peer(peers[name], args.connections)
        print(f"{name}: {resilience.rows({'peers': [row]})[0]}", flush=True)
        rows.append(row)
    data = {
        "commit": commit,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "connections": args.connections,
        "build_note": args.build_note,
        "peers": rows,
    }
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(data, f, indent=2)
    with open(os.path.join(args.out, "README.md"), "w") as f:
        f.write(table(data))
    if args.into_report:
        # The report's other figures are its own run's; only the resilience section is new.
        res = results.load(Path(args.into_report))
        res["resilience"] = data
        results.save(res, Path(args.into_report))
        report.write(res, Path(args.into_report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
