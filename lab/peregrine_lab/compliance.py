"""The compliance score of each server, from the probe (probe/probe.py) when it exists."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from . import config


def summarize_probe(data: dict) -> dict:
    """The part of the probe's JSON the results keep: overall figures and the failed case ids."""
    overall = data.get("overall", {})
    failed = [c.get("id") for c in data.get("cases", []) if not c.get("passed")]
    failed_must = [
        c.get("id")
        for c in data.get("cases", [])
        if not c.get("passed") and str(c.get("level", "")).lower() == "must"
    ]
    return {
        "must": overall.get("must"),
        "should": overall.get("should"),
        "score": overall.get("score"),
        "must_score": overall.get("must_score"),
        "sweeps": overall.get("sweeps"),
        "robustness": overall.get("robustness"),
        "cases": len(data.get("cases", [])),
        "failed": failed,
        "failed_must": failed_must,
        "categories": data.get("categories"),
    }


def run_probe(
    host: str,
    port: int,
    out_dir: Path,
    name: str,
    args: tuple[str, ...] = (),
    timeout: float = 120.0,
    probe: Path = config.PROBE_SCRIPT,
    server_pid: int | None = None,
) -> dict:
    """Run the probe against a live server; returns {"status": "ok"|"n/a"|"error", ...}."""
    if not probe.exists():
        return {"status": "n/a", "message": f"probe not found at {probe}"}
    out_dir.mkdir(parents=True, exist_ok=True)
    json_out = out_dir / f"probe-{name}.json"
    md_out = out_dir / f"probe-{name}.md"
    cmd = [
        sys.executable,
        str(probe),
        "--target",
        f"{host}:{port}",
        "--json",
        str(json_out),
        "--markdown",
        str(md_out),
    ]
    cmd += list(args)
    if server_pid is not None:
        cmd += ["--server-pid", str(server_pid)]
    start = time.monotonic()
    try:
        p = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, cwd=config.REPO_DIR
        )
    except subprocess.TimeoutExpired:
        return {"status": "error", "message": f"probe did not finish within {timeout:.0f} s"}
    seconds = round(time.monotonic() - start, 1)
    if not json_out.exists():
        tail = (p.stderr or p.stdout).strip()[-400:]
        return {
            "status": "error",
            "message": f"probe exited with {p.returncode} and wrote no JSON: {tail}",
        }
    try:
        data = json.loads(json_out.read_text())
    except json.JSONDecodeError as e:
        return {"status": "error", "message": f"probe JSON unreadable: {e}"}
    # The probe's exit code says whether the server passed every MUST; the JSON is what counts.
    return {
        "status": "ok",
        "args": list(args),
        "seconds": seconds,
        "report": str(md_out.name),
        **summarize_probe(data),
    }
