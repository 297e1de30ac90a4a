#!/usr/bin/env bash
# Memory per idle TLS connection (HTTP/1.1 by ALPN) and per idle HTTP/2-over-TLS connection of
# one or more servers, by the lab's own method (`./scripts/lab protocols`, idle step:
# lab/peregrine_lab/tls_checks.py `idle_memory`): for each server and protocol a fresh process
# (WORKERS=1, on CPU 1), N connections opened one after the other, each a TLS 1.3 handshake, one
# GET /plaintext and its answer read, then left idle; the RSS growth of the server ÷ N.
# Each measurement is repeated REPEAT times (a fresh process each time) and every figure printed.
#
# usage: bench/tls_idle_memory.sh BINARY...
#   each: a server taking ADDR, WORKERS, TLS_CERT, TLS_KEY, answering GET /plaintext over TLS
#   with ALPN h2 and http/1.1 (the hello_tls example:
#   cargo build --release -p peregrine-server --example hello_tls --features tls,http2)
# env: N (default 500, the lab's), REPEAT (default 3), PORT (default 18470)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
PYTHONPATH="$root/lab" python3 - "$work" "${N:-500}" "${REPEAT:-3}" "${PORT:-18470}" "$@" <<'PY'
import os, subprocess, sys, time
from pathlib import Path
from peregrine_lab import procs, tls_checks
from peregrine_lab.peers import load_contract

work, n, repeat, port = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
binaries = sys.argv[5:]
cert = tls_checks.make_certificate(work / "cert")
scen = next(s for s in load_contract().scenarios if s.name == "plaintext")
for binary in binaries:
    for proto in ("https", "h2"):
        figures = []
        for _ in range(repeat):
            env = dict(os.environ, ADDR=f"127.0.0.1:{port}", WORKERS="1",
                       TLS_CERT=str(cert.cert), TLS_KEY=str(cert.key))
            env.pop("OPENSSL_CONF", None)
            proc = subprocess.Popen(["taskset", "-c", "1", binary], env=env,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                procs.wait_for_port("127.0.0.1", port, proc, timeout=30)
                im = tls_checks.idle_memory("127.0.0.1", port, proc.pid, scen, n, proto)
                if im.error:
                    print(f"  error: {im.error}")
                figures.append(im.per_connection)
            finally:
                proc.terminate()
                proc.wait()
            procs.wait_port_free("127.0.0.1", port, 15.0)
        shown = ", ".join(f"{f / 1024:.2f}" for f in figures if f is not None)
        print(f"{binary} {proto}: KiB per idle connection (N={n}): {shown}", flush=True)
PY
