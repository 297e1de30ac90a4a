"""The results JSON, the source of truth of a run: machine, tools, commit, settings, and every raw
figure. The report and charts are made from it alone."""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path

from . import config

SCHEMA = 1

NODE_PEERS = config.PEERS_DIR / "node" / "node_modules" / ".bin"
"""Where the Node.js peers' own runtimes are: the npm `node` package's binary and Bun's."""

TOOLS = {
    "wrk": ["wrk", "-v"],
    "oha": ["oha", "--version"],
    # The other load generators a run may use: h2load (protocols), ab and bombardier (--loadgen).
    "h2load": ["h2load", "--version"],
    "ab": ["ab", "-V"],
    "bombardier": ["bombardier", "--version"],
    "rustc": ["rustc", "--version"],
    "cargo": ["cargo", "--version"],
    # The Go the peers are built with (peers.toml's GOTOOLCHAIN), and the machine's own.
    "go": ["env", f"GOTOOLCHAIN={config.GO_TOOLCHAIN}", "go", "version"],
    "go_system": ["env", "GOTOOLCHAIN=local", "go", "version"],
    # The Node the peers run (peers.toml: node_modules/.bin/node), not the system one below.
    "node": [str(NODE_PEERS / "node"), "--version"],
    "node_system": ["node", "--version"],
    # The OpenSSL inside that node: node:https and node:http2 use it, not the system's.
    "node_openssl": [str(NODE_PEERS / "node"), "-p", "process.versions.openssl"],
    "npm": ["npm", "--version"],
    "bun": [str(NODE_PEERS / "bun"), "--version"],
    "nginx": ["nginx", "-v"],
    "h2o": ["h2o", "--version"],
    "nim": ["nim", "--version"],
    "openssl": ["openssl", "version"],
    "gcc": ["gcc", "-dumpfullversion"],
    "python": ["python3", "--version"],
}
"""The tools and runtimes a run may use, each with the command printing its version. node and bun
are the binaries the peers run (installed by the Node peers' `npm ci`), so `tool_versions` is taken
again after the builds; the system node only runs npm."""


def _program(cmd: list[str]) -> str:
    """The program a command runs: past `env` and its NAME=value settings."""
    if cmd[0] != "env":
        return cmd[0]
    return next((a for a in cmd[1:] if "=" not in a), cmd[0])


def _first_line(cmd: list[str]) -> str | None:
    if shutil.which(_program(cmd)) is None:
        return None
    try:
        # Generous: a loaded machine has been seen to take seconds to start a binary.
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    # Several tools (nginx -v, wrk -v) print their version on stderr, some with a non-zero exit;
    # but a failed `env ... go` (a toolchain it could not fetch) printed an error, not a version.
    if cmd[0] == "env" and p.returncode != 0:
        return None
    for text in (p.stdout, p.stderr):
        for line in text.splitlines():
            if line.strip():
                # wrk appends its copyright to the version line.
                return line.strip().split(" Copyright")[0]
    return None


def tool_versions() -> dict[str, str | None]:
    """The first line each tool of `TOOLS` prints about its version; None for a tool that is not
    installed (or printed nothing)."""
    return {name: _first_line(cmd) for name, cmd in TOOLS.items()}


def fill_missing_versions(tools: dict[str, str | None]) -> dict[str, str | None]:
    """Asks again, in place, every tool of `TOOLS` whose version `tools` lacks; returns `tools`."""
    for name, cmd in TOOLS.items():
        if not tools.get(name):
            tools[name] = _first_line(cmd)
    return tools


TOOLCHAIN_LINE = (
    ("rustc", "rustc"),
    ("go", "go (the peers')"),
    ("go_system", "system go"),
    ("node", "node (the peers')"),
    ("node_system", "system node (runs npm only)"),
    ("bun", "bun"),
    ("wrk", "wrk"),
    ("oha", "oha"),
    ("nginx", "nginx"),
    ("h2o", "h2o"),
    ("nim", "nim"),
    ("openssl", "openssl"),
    ("gcc", "gcc"),
    ("python", "python"),
)
"""The report's toolchain line: which recorded versions it shows, in order, and their names."""


def toolchain_line(tools: dict) -> str:
    """The versions of `tool_versions` as one line; a tool whose version was not recorded says
    so rather than vanishing. Results older than the node/bun fix (2026-11-27) recorded the
    system node under "node" and no node_system.

    >>> toolchain_line({"go": "go version go1.27.4 linux/amd64", "bun": "1.4.5"}).split("; ")[:2]
    ['rustc ?', "go (the peers'): go version go1.27.4 linux/amd64"]
    """
    out = []
    for key, name in TOOLCHAIN_LINE:
        v = tools.get(key)
        if v is None and key in ("node_system", "go_system"):
            continue  # older results: one node and one go, shown as recorded
        if not v:
            out.append(f"{name} ?")
        elif key.split("_")[0] in v.lower():
            out.append(v if name == key else f"{name}: {v}")
        else:
            out.append(f"{name} {v}")
    return "; ".join(out)


def machine_info() -> dict:
    cpu_model = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem = int(line.split()[1]) * 1024
    except OSError:
        pass
    os_name = None
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                os_name = line.split("=", 1)[1].strip('"')
    except OSError:
        pass
    return {
        "cpu_model": cpu_model,
        "nproc": os.cpu_count(),
        "available_cpus": list(config.available_cpus()),
        "kernel": platform.release(),
        "os": os_name,
        "arch": platform.machine(),
        "memory_bytes": mem,
        "clk_tck": os.sysconf("SC_CLK_TCK"),
        "loadavg_at_start": list(os.getloadavg()),
    }


def git_info(repo: Path = config.REPO_DIR) -> dict:
    def run(*args):
        try:
            p = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, timeout=20)
            return p.stdout.strip() if p.returncode == 0 else None
        except (OSError, subprocess.TimeoutExpired):
            return None

    # Dirty means changed code: results that other runs left uncommitted (lab/results/) are not.
    status = run("status", "--porcelain", "--untracked-files=no", "--", ".", ":!lab/results")
    describe = run("describe", "--always")
    dirty = bool(status) if status is not None else None
    return {
        "commit": run("rev-parse", "HEAD"),
        "describe": f"{describe}-dirty" if describe and dirty else describe,
        "dirty": dirty,
    }


def now_iso() -> str:
    return datetime.now(UTC).replace(microsecond=0).isoformat()


def save(results: dict, out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "results.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(results, indent=1, sort_keys=False) + "\n")
    tmp.replace(path)
    return path


def load(path: Path) -> dict:
    path = Path(path)
    if path.is_dir():
        path = path / "results.json"
    data = json.loads(path.read_text())
    if data.get("schema") != SCHEMA:
        raise ValueError(f"{path}: schema {data.get('schema')!r}, this lab reads {SCHEMA}")
    return data
