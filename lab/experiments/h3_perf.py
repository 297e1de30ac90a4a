"""Profile one HTTP/3 server at the `h3-rate` lane's load, pinned as the lane pins it.

The server on CPU 1 with WORKERS=1 (TLS_CERT/TLS_KEY: a fresh self-signed certificate, ADDR),
the lab's `h3client rate` on CPU 0 (50 QUIC connections, 5,000 requests/s, open loop, 12 s),
`perf record` of the server for 8 s from second 3, sampling by CPU clock (`-e cpu-clock`: the
lab's VMs have no hardware counters). Prints the client's summary and the profile summed by
shared object and by the crate of each symbol (quinn, rustls/ring, h3, tokio, the server's own,
the kernel).

    python3 lab/experiments/h3_perf.py NAME CMD...
    python3 lab/experiments/h3_perf.py peregrine target/release/examples/scenarios --tls
    python3 lab/experiments/h3_perf.py h3-rust lab/peers/h3/rust/target/release/h3-peer
    perf report -i /tmp/perf-h3-peregrine.data --no-children --sort sym

Build first: `./scripts/lab build --peers lab/peers/h3.toml` (the servers and h3client).
"""

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from peregrine_lab import h3_lane, tls_checks  # noqa: E402

PORT = 18643
RATE = 5000
CONNECTIONS = 50
SECONDS = 12

# A symbol's crate, by the first path segment its demangled name starts with.
CRATES = {
    "quinn": "quinn",
    "quinn_proto": "quinn",
    "quinn_udp": "quinn",
    "h3": "h3",
    "h3_quinn": "h3",
    "rustls": "rustls/ring",
    "ring": "rustls/ring",
    "tokio": "tokio",
    "peregrine": "peregrine",
    "peregrine_server": "peregrine",
    "peregrine_codec": "peregrine",
    "bytes": "bytes",
    "http": "http",
    "hashbrown": "std/alloc",
    "alloc": "std/alloc",
    "core": "std/alloc",
    "std": "std/alloc",
}


def crate_of(dso: str, sym: str) -> str:
    """The group a sample's symbol belongs to."""
    if dso.startswith("[kernel"):
        return "kernel"
    if "libc" in dso:
        return "libc (malloc, memcpy)"
    # Rust symbols demangle as `crate::path::fn` or `<crate::Type as crate::Trait>::fn`.
    m = re.match(r"<?&?(?:mut )?([a-z_][a-z0-9_]*)::", sym)
    if m:
        return CRATES.get(m.group(1), "other: " + m.group(1))
    return "other"


def summarise(data: str) -> dict:
    """Share of the samples by group and the top symbols, from `perf report`."""
    out = subprocess.run(
        ["perf", "report", "-i", data, "--no-children", "--sort", "dso,sym", "--stdio", "-q"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    groups: Counter[str] = Counter()
    top = []
    for line in out.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+(\S+)\s+\[[.k]\]\s+(.*)$", line)
        if not m:
            continue
        share, dso, sym = float(m.group(1)), m.group(2), m.group(3).strip()
        groups[crate_of(dso, sym)] += share
        if len(top) < 25:
            top.append((share, dso, sym[:110]))
    return {"groups": dict(groups.most_common()), "top": top}


def main() -> None:
    name, cmd = sys.argv[1], sys.argv[2:]
    work = Path(tempfile.mkdtemp(prefix="h3-perf-"))
    cert = tls_checks.make_certificate(work)
    env = dict(
        os.environ,
        ADDR=f"127.0.0.1:{PORT}",
        WORKERS="1",
        TLS_CERT=str(cert.cert),
        TLS_KEY=str(cert.key),
    )
    p = subprocess.Popen(["taskset", "-c", "1", *cmd], env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while not h3_lane.udp_bound(PORT):
            if p.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"{name}: UDP port {PORT} not bound")
            time.sleep(0.05)
        url = f"https://localhost:{PORT}/plaintext"
        client_env = dict(os.environ, H3_CA=str(cert.cert))
        client = subprocess.Popen(
            ["taskset", "-c", "0", str(h3_lane.H3CLIENT), "rate", url, str(CONNECTIONS)]
            + [str(RATE), str(SECONDS)],
            stdout=subprocess.PIPE,
            env=client_env,
            text=True,
        )
        time.sleep(3)
        data = f"/tmp/perf-h3-{name}.data"
        perf = ["perf", "record", "-q", "-e", "cpu-clock", "-F", "2000", "-o", data]
        subprocess.run([*perf, "-p", str(p.pid), "--", "sleep", "8"], check=False)
        report = json.loads(client.communicate()[0])
        answered = sum(report.get("statusCodeDistribution", {}).values())
        seconds = report.get("summary", {}).get("total") or 1
        p99 = (report.get("latencyPercentiles", {}).get("p99") or 0) * 1000
        print(f"{name}: {answered / seconds:.0f} req/s answered, p99 {p99:.2f} ms")
        result = summarise(data)
        print("share of the server's samples by group:")
        for group, share in result["groups"].items():
            print(f"  {share:6.2f}%  {group}")
        print("top symbols:")
        for share, dso, sym in result["top"]:
            print(f"  {share:6.2f}%  {dso:28.28}  {sym}")
        print(f"profile: {data}")
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()


if __name__ == "__main__":
    main()
