"""Process management: servers run in their own process group, pinned with taskset, and are all
killed when the runner exits, fails or receives SIGINT/SIGTERM, so no server is left running."""

from __future__ import annotations

import atexit
import http.client
import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

READY_ENV = "PEREGRINE_LAB_READY"
"""A server's env variable naming a path to GET once its port accepts: `wait_for_port` returns
only when that answers 2xx (a server may listen before it can serve, e.g. while it warms up)."""

_live: dict[int, subprocess.Popen] = {}
_ready: dict[int, str] = {}  # pid -> the READY_ENV path its start waits for
_lock = threading.Lock()
_handlers_installed = False


class StartError(Exception):
    """A server did not start: it exited, or its port never answered."""


class PortBusyError(StartError):
    """Something already listens on the port the lab wants to use."""


def _kill_group(proc: subprocess.Popen, grace: float = 3.0) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
    # The group may still hold children (e.g. nginx workers, node cluster workers) even after
    # the leader exited; SIGKILL whatever is left in it.
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        pass


def kill_all() -> None:
    """Kill every process group this module started and has not stopped yet."""
    with _lock:
        procs = list(_live.values())
        _live.clear()
    for p in procs:
        _kill_group(p)


def _on_signal(signum, frame):
    kill_all()
    # Unwind like Ctrl-C, so the caller writes the partial report and exits with 130.
    raise KeyboardInterrupt


def install_handlers() -> None:
    global _handlers_installed
    if _handlers_installed:
        return
    atexit.register(kill_all)
    # SIGINT too: a shell starting the lab in the background sets SIGINT to "ignore", and
    # Python then keeps it ignored; the lab must still stop its servers on it.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _on_signal)
    _handlers_installed = True


def port_in_use(host: str, port: int) -> bool:
    """True if a server could not bind host:port now: something listens there, or a connected
    socket holds it as its local port (a client's ephemeral port can land on it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        if s.connect_ex((host, port)) == 0:
            return True
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        # As servers do: SO_REUSEADDR lets a bind pass over TIME_WAIT leftovers only.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def wait_port_free(host: str, port: int, timeout: float) -> bool:
    """Wait until the port can be bound (a client socket holding it may go away)."""
    deadline = time.monotonic() + timeout
    while port_in_use(host, port):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def ephemeral_range() -> tuple[int, int] | None:
    """The kernel's range of ports for outgoing connections (a server port inside it can be
    taken by any client socket on the machine)."""
    try:
        lo, hi = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(lo), int(hi)
    except (OSError, ValueError):
        return None


def wait_for_port(host: str, port: int, proc: subprocess.Popen, timeout: float) -> float:
    """Poll until a TCP connect succeeds; return seconds waited. Fails fast if the process exits."""
    start = time.monotonic()
    deadline = start + timeout
    while True:
        if proc.poll() is not None:
            raise StartError(f"exited with status {proc.returncode} before listening")
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.settimeout(0.2)
            accepted = s.connect_ex((host, port)) == 0
        path = _ready.get(proc.pid)
        if accepted and (not path or _answers_2xx(host, port, path)):
            return time.monotonic() - start
        if time.monotonic() > deadline:
            what = f"GET {path} did not answer 2xx" if accepted else "did not answer"
            raise StartError(f"port {host}:{port} {what} within {timeout:.0f} s")
        time.sleep(0.005 if not accepted else 0.1)


def _answers_2xx(host: str, port: int, path: str) -> bool:
    conn = http.client.HTTPConnection(host, port, timeout=2)
    try:
        conn.request("GET", path)
        return 200 <= conn.getresponse().status < 300
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()


class Server:
    """A running server: its Popen (leader of its own process group) and log file."""

    def __init__(self, proc: subprocess.Popen, log_path: Path, started_at: float):
        self.proc = proc
        self.pid = proc.pid
        self.log_path = log_path
        self.started_at = started_at

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        with _lock:
            _live.pop(self.pid, None)
            _ready.pop(self.pid, None)
        _kill_group(self.proc)


def start_server(
    cmd: list[str],
    cwd: Path,
    env: dict[str, str],
    cpus: str | None,
    log_path: Path,
    pass_fds: tuple[int, ...] = (),
) -> Server:
    """Spawn `cmd` in `cwd`, pinned to `cpus` with taskset, in a new session (own process group),
    stdout/stderr to `log_path`, with the descriptors `pass_fds` left open in it (a handed-over
    listener). Raising RLIMIT_NOFILE is inherited from this process."""
    full = (["taskset", "-c", cpus] if cpus else []) + list(cmd)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log = open(log_path, "wb")
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            full,
            cwd=cwd,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            pass_fds=pass_fds,
        )
    except OSError as e:
        log.close()
        raise StartError(f"cannot run {' '.join(full)}: {e}") from e
    # The child holds its own descriptor; ours is no longer needed.
    log.close()
    with _lock:
        _live[proc.pid] = proc
        if env.get(READY_ENV):
            _ready[proc.pid] = env[READY_ENV]
    return Server(proc, log_path, started)


def raise_nofile_limit(wanted: int) -> int:
    """Raise the soft RLIMIT_NOFILE towards `wanted` (capped by the hard limit); return it."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if target > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    return soft
