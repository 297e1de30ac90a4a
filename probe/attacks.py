#!/usr/bin/env python3
"""Resource attacks against a running server, measured on the server process: slow readers of a
large body, never-reading pipeliners, stalled uploads, HTTP/2 zero windows and WINDOW_UPDATE
floods, WebSocket clients that never read. Each has a budget (see probelib/attacks.py).

    python3 probe/attacks.py --target 127.0.0.1:8080 --server-pid PID --json out.json \\
        --large-path /files/large.bin --write-timeout 3 --body-timeout 3 [--no-h2c] [--no-ws]

Exit status 1 when any attack is over its budget and --require is given.
"""

from __future__ import annotations

import argparse
import json
import sys

from probelib.attacks import AttackOptions, run_all


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--target", required=True, help="host:port")
    p.add_argument("--server-pid", type=int, required=True, help="the server's PID (its process tree is measured)")
    p.add_argument("--json", required=True, help="where to write the results")
    p.add_argument("--large-path", default="/files/large.bin", help="a path with a large (MiB) response")
    p.add_argument("--write-timeout", type=float, default=3.0, help="the server's write timeout, s")
    p.add_argument("--body-timeout", type=float, default=3.0, help="the server's body timeout, s")
    p.add_argument("--connections", type=int, default=100, help="attacking connections (streams for h2)")
    p.add_argument("--peak-budget-mib", type=int, default=32, help="RSS growth allowed during an attack")
    p.add_argument("--after-budget-mib", type=int, default=8, help="RSS growth allowed after it")
    p.add_argument("--no-h2c", action="store_true", help="the server does not speak h2c")
    p.add_argument("--ws-path", default="/ws", help="WebSocket echo path ('' if none)")
    p.add_argument("--require", action="store_true", help="exit 1 if any attack is over budget")
    a = p.parse_args()
    host, port = a.target.rsplit(":", 1)
    o = AttackOptions(
        host=host,
        port=int(port),
        server_pid=a.server_pid,
        large_path=a.large_path,
        write_timeout=a.write_timeout,
        body_timeout=a.body_timeout,
        connections=a.connections,
        peak_budget_kib=a.peak_budget_mib * 1024,
        after_budget_kib=a.after_budget_mib * 1024,
        h2c=not a.no_h2c,
        websocket_path=a.ws_path or None,
    )
    results = run_all(o)
    with open(a.json, "w") as f:
        json.dump({"target": a.target, "attacks": results}, f, indent=2)
    for r in results:
        d = r["details"]
        print(
            f"{'PASS' if r['passed'] else 'FAIL'} {r['id']}: {r['observed']} "
            f"(rss {d.get('baseline_rss_kib', 0) // 1024}->{d.get('peak_rss_kib', 0) // 1024}"
            f"->{d.get('after_rss_kib', 0) // 1024} MiB, fds {d.get('baseline_fds')}->{d.get('peak_fds')}"
            f"->{d.get('after_fds')}, cpu {d.get('cpu_share')}, {d.get('seconds')} s)"
        )
    failed = sum(not r["passed"] for r in results)
    print(f"attacks: {len(results) - failed} passed, {failed} failed")
    return 1 if failed and a.require else 0


if __name__ == "__main__":
    sys.exit(main())
