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

TOOLS = {
    "wrk": ["wrk", "-v"],
    "oha": ["oha", "--version"],
    "rustc": ["rustc", "--version"],
    "cargo": ["cargo", "--version"],
    "go": ["go", "version"],
    "node": ["node", "--version"],
    "npm": ["npm", "--version"],
    "bun": ["bun", "--version"],
    "nginx": ["nginx", "-v"],
    "gcc": ["gcc", "-dumpfullversion"],
    "python": ["python3", "--version"],
}


def _first_line(cmd: list[str]) -> str | None:
    if shutil.which(cmd[0]) is None:
        return None
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    # Several tools (nginx -v, wrk -v) print their version on stderr, some with a non-zero exit.
    for text in (p.stdout, p.stderr):
        for line in text.splitlines():
            if line.strip():
                # wrk appends its copyright to the version line.
                return line.strip().split(" Copyright")[0]
    return None


def tool_versions() -> dict[str, str | None]:
    return {name: _first_line(cmd) for name, cmd in TOOLS.items()}


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

    status = run("status", "--porcelain", "--untracked-files=no")
    return {
        "commit": run("rev-parse", "HEAD"),
        "describe": run("describe", "--always", "--dirty"),
        "dirty": bool(status) if status is not None else None,
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
