"""Building the peers: check the toolchain each needs, run its build commands in its folder, and
ask it for its version. Identical build steps shared by several peers (one `npm ci` for all
Node.js peers) run once."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import eta
from .peers import Peer


@dataclass
class BuildResult:
    ok: bool
    seconds: float = 0.0
    message: str = ""
    missing: list[str] = field(default_factory=list)
    log: str | None = None

    def to_json(self) -> dict:
        return {
            "ok": self.ok,
            "seconds": round(self.seconds, 2),
            "message": self.message,
            "missing": self.missing,
            "log": self.log,
        }


def build_env() -> dict[str, str]:
    """The environment for build commands: ours without CARGO_TARGET_DIR, so each cargo project
    builds into its own target/ where its `run` command expects the binary."""
    env = dict(os.environ)
    env.pop("CARGO_TARGET_DIR", None)
    return env


def missing_tools(peer: Peer) -> list[str]:
    return [t for t in peer.requires if shutil.which(t) is None]


class Builder:
    def __init__(self, log_dir: Path, progress=print):
        self.log_dir = log_dir
        self.progress = progress
        self._done: dict[tuple[str, tuple[str, ...]], tuple[bool, str]] = {}

    def build(self, peer: Peer) -> BuildResult:
        missing = missing_tools(peer)
        if missing:
            return BuildResult(
                False,
                message=f"skipped: needs {', '.join(missing)} (not found on PATH)",
                missing=missing,
            )
        if not peer.dir.is_dir():
            return BuildResult(False, message=f"folder {peer.dir} does not exist")
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.log_dir / f"build-{peer.name}.log"
        start = time.monotonic()
        with open(log_path, "w") as log:
            for cmd in peer.build:
                key = (str(peer.dir), tuple(cmd))
                if key in self._done:
                    ok, msg = self._done[key]
                    log.write(
                        f"$ {' '.join(cmd)}  (already run for another peer: "
                        f"{'ok' if ok else 'failed'})\n"
                    )
                    if not ok:
                        return BuildResult(False, time.monotonic() - start, msg, log=str(log_path))
                    continue
                log.write(f"$ {' '.join(cmd)}\n")
                log.flush()
                try:
                    p = subprocess.run(
                        cmd,
                        cwd=peer.dir,
                        env=build_env(),
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        stdin=subprocess.DEVNULL,
                        timeout=1800,
                    )
                    ok = p.returncode == 0
                    msg = "" if ok else f"`{' '.join(cmd)}` exited with {p.returncode}"
                except (OSError, subprocess.TimeoutExpired) as e:
                    ok, msg = False, f"`{' '.join(cmd)}` failed: {e}"
                self._done[key] = (ok, msg)
                if not ok:
                    log.flush()
                    tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-12:])
                    return BuildResult(
                        False,
                        time.monotonic() - start,
                        f"{msg}; end of {log_path}:\n{tail}",
                        log=str(log_path),
                    )
        return BuildResult(True, time.monotonic() - start, log=str(log_path))


def _say(line: str) -> None:
    print(line, flush=True)  # at once, so a CI log shows which build is running


def build_all(peers: list[Peer], log_dir: Path, progress=_say) -> dict[str, BuildResult]:
    """Builds `peers` in order with one Builder (a step shared by several, such as the Node.js
    peers' one `npm ci`, runs once), a line before and after each; by name."""
    builder = Builder(log_dir, progress)
    done: dict[str, BuildResult] = {}
    countdown = eta.Countdown(len(peers))
    for i, peer in enumerate(peers, 1):
        steps = " && ".join(" ".join(cmd) for cmd in peer.build) or "(nothing to build)"
        progress(f"[build {i}/{len(peers)}] {peer.name}: {steps}")
        b = builder.build(peer)
        done[peer.name] = b
        verdict = "built" if b.ok else f"NOT BUILT: {b.message}"
        progress(
            f"[build {i}/{len(peers)}] {peer.name}: {verdict} ({b.seconds:.1f} s; "
            f"{countdown.left(i)})"
        )
    return done


def peer_version(peer: Peer) -> str | None:
    """First line printed by the peer's `version` command, or None."""
    if not peer.version or not peer.dir.is_dir():
        return None
    try:
        p = subprocess.run(
            peer.version, cwd=peer.dir, env=build_env(), capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    out = (p.stdout.strip() or p.stderr.strip()).splitlines()
    if p.returncode != 0 or not out:
        return None
    return out[0].strip()
