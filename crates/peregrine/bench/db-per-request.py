"""Per-request cost of a database route, for servers given on the command line, against a real
PostgreSQL started by the lab (`lab/peregrine_lab/database.py`, TechEmpower's schema):

* `instructions`: user-space instructions per request under `valgrind --tool=cachegrind`, the
  difference of two fresh processes answering N1 and N2 requests on one keep-alive connection
  (start-up cancels out; deterministic on a busy machine);
* `syscalls`: system calls per request under `strace -c -f` (by call, those at 0.05 or more per
  request), while CONNS connections send REQUESTS requests each, one at a time per connection.

Every server gets ADDR, WORKERS=1, DATABASE_URL and DB_POOL=8, plus any `--env K=V`.

usage (from the repository's root; builds are the caller's, e.g. `./scripts/lab build`):
    PYTHONPATH=lab python3 crates/peregrine/bench/db-per-request.py syscalls \\
        --server peregrine=target/release/examples/scenarios \\
        --server ntex=lab/peers/rust-tfb/target/release/ntex-peer [--env DB_POOL_PER_WORKER=2] \\
        [--path '/queries?q=20']
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from peregrine_lab.database import Database

PORT = 18390


def client(path: str, n: int) -> None:
    """`n` keep-alive GETs of `path` on one connection, each answer read whole; 200 expected."""
    s = socket.create_connection(("127.0.0.1", PORT))
    req = f"GET {path} HTTP/1.1\r\nHost: bench\r\n\r\n".encode()
    buf = b""
    for _ in range(n):
        s.sendall(req)
        while b"\r\n\r\n" not in buf:
            buf += s.recv(65536)
        head, buf = buf.split(b"\r\n\r\n", 1)
        if not head.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(f"{path}: {head[:60]!r}")
        fields = [x.split(b":", 1) for x in head.split(b"\r\n")[1:]]
        length = int(next(v for k, v in fields if k.lower() == b"content-length"))
        while len(buf) < length:
            buf += s.recv(65536)
        buf = buf[length:]
    s.close()


def wait_ready() -> None:
    for _ in range(600):
        try:
            client("/db", 1)
            return
        except (OSError, RuntimeError):
            time.sleep(0.1)
    raise RuntimeError("the server did not answer /db")


def stop(proc: subprocess.Popen, traced: bool) -> None:
    """SIGTERM to the server (under strace: to strace's child, so strace writes its table)."""
    pids = [proc.pid]
    if traced:
        out = subprocess.run(
            ["pgrep", "-P", str(proc.pid)], check=False, capture_output=True, text=True
        )
        pids = [int(p) for p in out.stdout.split()]
    for pid in pids:
        os.kill(pid, signal.SIGTERM)
    proc.wait(60)


def instructions(binary: str, env: dict, path: str, n: int) -> int:
    out = tempfile.mktemp(prefix="cg.")
    cmd = [
        "valgrind",
        "--tool=cachegrind",
        "--cache-sim=no",
        f"--cachegrind-out-file={out}",
    ]
    proc = subprocess.Popen(
        cmd + [binary], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    wait_ready()
    client(path, n)
    stop(proc, traced=False)
    with open(out) as f:
        total = next(int(x.split()[1]) for x in f if x.startswith("summary:"))
    os.unlink(out)
    return total


def syscalls(
    binary: str, env: dict, path: str, conns: int, per: int
) -> tuple[int, list]:
    out = tempfile.mktemp(prefix="strace.")
    proc = subprocess.Popen(
        ["strace", "-c", "-f", "-o", out, binary],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_ready()
    threads = [threading.Thread(target=client, args=(path, per)) for _ in range(conns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop(proc, traced=True)
    rows = []
    with open(out) as f:
        lines = f.read().splitlines()
    for line in lines:
        parts = line.split()
        if len(parts) >= 5 and parts[3].isdigit():
            rows.append((parts[-1], int(parts[3])))
        elif len(parts) >= 4 and parts[-1] == "total":
            rows.append(("total", int(parts[2])))
    os.unlink(out)
    return conns * per + 1, rows  # + the readiness request


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=("instructions", "syscalls"))
    ap.add_argument("--server", action="append", required=True, help="NAME=BINARY")
    ap.add_argument("--env", action="append", default=[], help="K=V for every server")
    ap.add_argument("--path", default="/queries?q=20")
    ap.add_argument("--n1", type=int, default=100)
    ap.add_argument("--n2", type=int, default=600)
    ap.add_argument("--conns", type=int, default=32)
    ap.add_argument(
        "--requests", type=int, default=50, help="per connection (syscalls)"
    )
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="db-bench."))
    db = Database(tmp, cpus=None, log_path=tmp / "postgres.log")
    db.start()
    try:
        env = dict(os.environ, ADDR=f"127.0.0.1:{PORT}", WORKERS="1")
        env.update(DATABASE_URL=db.url, DB_POOL="8")
        env.update(dict(kv.split("=", 1) for kv in args.env))
        for spec in args.server:
            name, binary = spec.split("=", 1)
            if args.what == "instructions":
                a = instructions(binary, env, args.path, args.n1)
                b = instructions(binary, env, args.path, args.n2)
                per = (b - a) / (args.n2 - args.n1)
                print(
                    f"{name} {args.path}: {per:,.0f} instructions per request",
                    flush=True,
                )
                continue
            n, rows = syscalls(binary, env, args.path, args.conns, args.requests)
            print(
                f"{name} {args.path}: {n} requests on {args.conns} connections",
                flush=True,
            )
            for call, count in rows:
                if call == "total" or count / n >= 0.05:
                    print(f"  {call:14s} {count / n:6.2f} per request", flush=True)
    finally:
        db.stop()


if __name__ == "__main__":
    main()
