#!/usr/bin/env python3
"""HTTP/1.1 compliance and robustness probe for any server on host:port.

Usage:
    python3 probe/probe.py --target 127.0.0.1:PORT --json OUT.json [--markdown OUT.md] [--quick]
        [--categories A,B,...] [--no-sweeps] [--no-robustness] [--server-pid PID]
        [--concurrency N] [--timeout S] [--require-must] [--require-all]
        [--header-timeout S] [--body-timeout S] [--idle-connections N]

The target must implement the lab contract (GET /plaintext -> 200 "Hello, World!",
POST /users echoes JSON -> 201). Exit status is 0 even when cases fail, unless --require-must is
given: then 1 if any MUST case, any generated sweep request or any robustness scenario failed
(--require-all: any case at all).
Standard library only (Python >= 3.11).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from probelib import corpus, report, robustness, runner, sweeps
from probelib.client import exchange


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--target", required=True, help="host:port of the server under test")
    p.add_argument("--json", required=True, help="where to write the JSON report")
    p.add_argument("--markdown", help="where to write the Markdown report")
    p.add_argument("--quick", action="store_true", help="corpus + reduced sweep (well under a minute)")
    p.add_argument("--categories", help="comma-separated category letters (A..H); H = robustness")
    p.add_argument("--no-sweeps", action="store_true")
    p.add_argument("--no-robustness", action="store_true")
    p.add_argument("--server-pid", type=int, help="server PID, for memory-bound checks (VmRSS)")
    p.add_argument("--concurrency", type=int, default=64, help="parallel connections (default 64)")
    p.add_argument("--timeout", type=float, default=2.0, help="per-case deadline in seconds (default 2)")
    p.add_argument("--header-timeout", type=float, default=10.0, help="server's header timeout, s (default 10)")
    p.add_argument("--body-timeout", type=float, default=10.0, help="server's body timeout, s (default 10)")
    p.add_argument("--idle-connections", type=int, default=5000, help="idle connections to open (default 5000)")
    p.add_argument("--require-must", action="store_true", help="exit 1 if any MUST case/sweep/robustness fails")
    p.add_argument("--require-all", action="store_true", help="like --require-must, and SHOULD cases must pass too")
    p.add_argument("--corpus", help="corpus directory (default: probe/corpus)")
    return p.parse_args(argv)


async def server_header(host: str, port: int, timeout: float) -> str:
    """The Server header of a plain GET /plaintext, for the report; also checks reachability."""
    obs = await exchange(
        host, port, [b"GET /plaintext HTTP/1.1\r\nHost: probe\r\n\r\n"], timeout=timeout, want_responses=1
    )
    if obs.error or not obs.finals:
        raise SystemExit(f"probe: target {host}:{port} does not answer GET /plaintext: {obs.summary()}")
    return obs.finals[0].header("server") or ""


async def main_async(args: argparse.Namespace) -> dict:
    host, _, port_s = args.target.rpartition(":")
    port = int(port_s)
    cats = set(args.categories.split(",")) if args.categories else None
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    t0 = time.monotonic()
    server = await server_header(host, port, args.timeout)
    cases = corpus.load(args.corpus, cats)
    results = await runner.run_cases(cases, host, port, args.timeout, args.concurrency)
    sweep_doc: dict = {}
    if not args.no_sweeps and (cats is None or cats - {"H"}):
        sweep_doc = await sweeps.run_sweeps(
            host, port, quick=args.quick, concurrency=max(args.concurrency, 128), timeout=args.timeout
        )
    rob: list[dict] = []
    if not args.no_robustness and (cats is None or "H" in cats):
        rob = await robustness.run_all(
            host,
            port,
            robustness.Options(
                timeout=args.timeout,
                header_timeout=args.header_timeout,
                body_timeout=args.body_timeout,
                server_pid=args.server_pid,
                idle_connections=args.idle_connections,
                quick=args.quick,
            ),
        )
    meta = {
        "started": started,
        "duration_s": round(time.monotonic() - t0, 1),
        "mode": "quick" if args.quick else "full",
        "server_header": server,
        "cases_run": len(cases),
        "timeout_s": args.timeout,
        "concurrency": args.concurrency,
    }
    return report.summarise(args.target, results, sweep_doc, rob, meta)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    doc = asyncio.run(main_async(args))
    for path in (args.json, args.markdown):
        if path and os.path.dirname(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(doc, f, indent=1)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(report.markdown(doc))
    o = doc["overall"]
    print(
        f"probe {doc['target']}: MUST {o['must']['passed']}/{o['must']['total']}, "
        f"SHOULD {o['should']['passed']}/{o['should']['total']}, score {o['score']}%, "
        f"sweeps {o['sweeps']['passed']}/{o['sweeps']['total']}, "
        f"robustness {o['robustness']['passed']}/{o['robustness']['total']} "
        f"(skipped {o['robustness']['skipped']}) in {doc['meta']['duration_s']} s"
    )
    if args.require_must or args.require_all:
        fails = report.require_failures(doc, args.require_all)
        if fails:
            print(f"probe: {len(fails)} MUST-level failure(s):", file=sys.stderr)
            for line in fails[:50]:
                print("  " + line, file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
