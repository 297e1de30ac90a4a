#!/usr/bin/env python3
"""Score the lab's peers with the probe: start each peer from lab/peers/peers.toml, probe it, stop it.

Usage:
    python3 probe/score_peers.py [--peers hyper,axum,...] [--quick] [--build] [--out probe/results]
        [--server 'NAME=COMMAND[;port=N][;ready=/path]' ...] [--probe-args "--categories A ..."]

Writes ``<out>/<peer>.json`` and ``<out>/<peer>.md`` per peer and ``<out>/README.md`` with one
table of scores and, per peer, the MUST cases it fails. Peers are started as the lab runner starts
them (``run`` in ``dir`` with ``ADDR`` and ``WORKERS=1`` plus the peer's ``env``), each in its own
process group, which is killed afterwards. Only ``kind = "server"`` peers that serve
``post_json`` are scored (the corpus needs POST /users). Without ``--build`` a peer whose build
output is missing is reported as not built. ``--server`` scores a server the registry does not
know, started by COMMAND with the lab's syntax (lab/README.md, "Your own server": ``{port}``,
``$PORT`` and ``$ADDR`` give it its port, or ``port=N`` names the one it always listens on); with
it, only the servers named by ``--server`` and ``--peers`` are scored.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
import tomllib
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PEERS_DIR = os.path.join(ROOT, "lab", "peers")
READY_ENV = "PEREGRINE_LAB_READY"  # as lab/peregrine_lab/procs.py: a path that must answer 2xx


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(port: int, proc: subprocess.Popen, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if proc.poll() is not None:
            return False
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return True
        except OSError:
            time.sleep(0.2)
    return False


def wait_ready(port: int, path: str | None, proc: subprocess.Popen, seconds: float) -> bool:
    """True once GET `path` answers 2xx (at once without a path)."""
    end = time.monotonic() + seconds
    while path and time.monotonic() < end and proc.poll() is None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2):
                return True
        except (OSError, urllib.error.URLError):
            time.sleep(0.2)
    return not path


def outside_peers(specs: list[str], registry: list[dict]) -> list[dict]:
    """The --server values as peers of the registry's shape (the lab's parser, lab/peregrine_lab/outside.py)."""
    sys.path.insert(0, os.path.join(ROOT, "lab"))
    from peregrine_lab.outside import parse
    from peregrine_lab.peers import RegistryError

    known = {p["name"] for p in registry}
    out = []
    for spec in specs:
        try:
            p = parse(spec, known | {o["name"] for o in out})
        except RegistryError as e:
            raise ValueError(str(e)) from e
        out.append({"name": p.name, "label": p.label, "run": p.run, "dir": str(p.dir), "env": p.env,
                    "port": p.extra.get("port")})  # fmt: skip
    return out


def score(peer: dict, args, out: str) -> dict:
    name = peer["name"]
    cwd = os.path.normpath(os.path.join(PEERS_DIR, peer["dir"]))
    if args.build:
        for cmd in peer.get("build", []):
            subprocess.run(cmd, cwd=cwd, check=True)
    run = list(peer["run"])
    in_workspace = os.path.samefile(cwd, ROOT)
    if in_workspace and run[0].startswith("target/") and os.environ.get("CARGO_TARGET_DIR"):
        # Peregrine's own peers live in the workspace target dir; honour a relocated one.
        run[0] = os.path.join(os.environ["CARGO_TARGET_DIR"], run[0][len("target/") :])
    peer = dict(peer, run=run)
    exe = run[0]
    if "/" in exe and not os.path.exists(os.path.join(cwd, exe)):
        return {"peer": name, "error": f"not built ({exe} missing; use --build)"}
    port = peer.get("port") or free_port()  # a --server's port=N: the one it listens on
    env = dict(os.environ, ADDR=f"127.0.0.1:{port}", WORKERS="1", **peer.get("env", {}))
    with open(os.path.join(out, f"{name}.server.log"), "w") as log:
        return _probe_running(peer, args, out, name, cwd, env, port, log)


def _probe_running(peer, args, out, name, cwd, env, port, log) -> dict:
    proc = subprocess.Popen(peer["run"], cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        if not wait_port(port, proc, 60) or not wait_ready(port, env.get(READY_ENV), proc, 60):
            return {"peer": name, "error": "did not start (see server log)"}
        cmd = [sys.executable, os.path.join(HERE, "probe.py"), "--target", f"127.0.0.1:{port}",
               "--json", os.path.join(out, f"{name}.json"), "--markdown", os.path.join(out, f"{name}.md"),
               "--server-pid", str(proc.pid)]  # fmt: skip
        if args.quick:
            cmd.append("--quick")
        cmd += shlex.split(args.probe_args)
        t0 = time.monotonic()
        p = subprocess.run(cmd, check=False, capture_output=True, text=True)
        print(p.stdout.strip() or p.stderr.strip(), flush=True)
        if p.returncode != 0:
            return {"peer": name, "error": f"probe failed: {p.stderr.strip()[-300:]}"}
        with open(os.path.join(out, f"{name}.json")) as f:
            doc = json.load(f)
        return {"peer": name, "label": peer.get("label", name), "doc": doc, "seconds": round(time.monotonic() - t0)}
    finally:
        stop(proc)


def stop(proc: subprocess.Popen) -> None:
    """Ends a peer started in a session of its own: its whole process group (forked workers
    too), SIGTERM first, SIGKILL after 10 s."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(10)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def summary(results: list[dict], quick: bool) -> str:
    lines = [
        "# Compliance probe: scores of the lab's peers",
        "",
        (
            f"Generated {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by `python3 probe/score_peers.py"
            f"{' --quick' if quick else ''}`; rows not probed in that run keep their earlier result (last column). "
            "Each peer runs with WORKERS=1 and its own default timeouts; the probe uses its defaults: 2 s per "
            "case, and the rules' 10 s header/body timeouts, so a server whose defaults are longer fails the "
            "slowloris and slow-body scenarios by that standard. `full` = 131,778 generated sweep requests, "
            "`quick` = 2,610. Per-peer details: `<peer>.md`."
        ),
        "",
        "| peer | MUST | SHOULD | score % | sweeps passed | robustness | server | mode, run |",
        "|---|---:|---:|---:|---:|---:|---|---|",
    ]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['peer']} | – | – | – | – | – | {r['error']} | |")
            continue
        o = r["doc"]["overall"]
        rob = o["robustness"]
        skipped = f" ({rob['skipped']} skipped)" if rob["skipped"] else ""
        lines.append(
            f"| {r['label']} | {o['must']['passed']}/{o['must']['total']} | {o['should']['passed']}/{o['should']['total']} "
            f"| {o['score']} | {o['sweeps']['passed']}/{o['sweeps']['total']} | {rob['passed']}/{rob['total']}"
            f"{skipped} | {r['doc']['meta'].get('server_header', '')} | {r['doc']['meta'].get('mode', '')}, "
            f"{r['doc']['meta'].get('started', '')} |"
        )
    lines += ["", "## Failed MUST cases and robustness scenarios per peer", ""]
    for r in results:
        if "error" in r:
            continue
        doc = r["doc"]
        fails = [c for c in doc["cases"] if c["level"] == "MUST" and not c["passed"]]
        rob = [x for x in doc["robustness"] if not x["passed"] and not x.get("skipped")]
        lines.append(f"### {r['label']} ({len(fails)} MUST cases, {len(rob)} robustness)")
        lines.append("")
        if not fails and not rob:
            lines.append("None.")
        for c in fails:
            lines.append(f"- `{c['id']}` {c['description']}: expected {c['expected']}; got {c['observed']}")
        for x in rob:
            lines.append(f"- `{x['id']}`: expected {x['expected']}; got {x['observed']}")
        lines.append("")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--peers", help="comma-separated peer names (default: every eligible peer)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--build", action="store_true", help="run each peer's build commands first")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument(
        "--server",
        action="append",
        default=[],
        metavar="'NAME=COMMAND[;port=N][;ready=/path]'",
        help="also score this server, started by COMMAND ({port}, $PORT, $ADDR, or its own port=N); repeatable",
    )
    ap.add_argument("--probe-args", default="", help='more probe.py options, e.g. "--categories A --no-sweeps"')
    args = ap.parse_args(argv)
    with open(os.path.join(PEERS_DIR, "peers.toml"), "rb") as f:
        peers = tomllib.load(f)["peer"]
    eligible = [p for p in peers if p.get("kind") == "server" and "post_json" in p.get("scenarios", [])]
    try:
        mine = outside_peers(args.server, peers)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    eligible += mine
    wanted = args.peers.split(",") if args.peers else ([] if mine else [p["name"] for p in eligible])
    wanted += [p["name"] for p in mine]
    os.makedirs(args.out, exist_ok=True)
    results = []
    for p in eligible:
        if p["name"] in wanted:
            results.append(score(p, args, args.out))
            continue
        # Not probed this time: keep an earlier result in the summary if there is one.
        path = os.path.join(args.out, f"{p['name']}.json")
        if os.path.exists(path):
            with open(path) as f:
                results.append({"peer": p["name"], "label": p.get("label", p["name"]), "doc": json.load(f)})
    with open(os.path.join(args.out, "README.md"), "w") as f:
        f.write(summary(results, args.quick))
    return 0


if __name__ == "__main__":
    sys.exit(main())
