"""Tests of the peers folder: the registry the runner reads, the floor program's behaviour, the
nginx wrapper, check.py itself, and (when they are built) every peer against the contract.

Run: python3 -m pytest lab/peers/tests -q
The floor and check.py tests need only gcc; nginx tests need nginx; the per-peer contract tests run
for the peers whose build output exists (`./scripts/lab build`; scripts/test builds them and fails
on any skip) and are skipped otherwise.
No timing assertions: these tests check answers, not speed.
"""
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import tomllib
from pathlib import Path

import pytest

PEERS = Path(__file__).resolve().parent.parent
CONTRACT = PEERS.parent / "contract"
REGISTRY = tomllib.loads((PEERS / "peers.toml").read_text())["peer"]
SCENARIOS = {s["name"]: s for s in json.loads((CONTRACT / "scenarios.json").read_text())["scenarios"]}

_spec = importlib.util.spec_from_file_location("peer_check", PEERS / "check.py")
peer_check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(peer_check)


def by_name(name):
    return next(p for p in REGISTRY if p["name"] == name)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port, proc, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited with {proc.returncode} before listening")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"nothing listens on {port} after {timeout} s")


class Server:
    """A peer started like the runner starts it: in its dir, own session, ADDR and WORKERS set."""

    def __init__(self, cmd, cwd, workers=1, env=None):
        self.port = free_port()
        full_env = dict(os.environ, ADDR=f"127.0.0.1:{self.port}", WORKERS=str(workers), **(env or {}))
        self.proc = subprocess.Popen(cmd, cwd=cwd, env=full_env, start_new_session=True,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            wait_listening(self.port, self.proc)
        except AssertionError:
            self.stop()
            raise

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()

    def group_alive(self):
        """Whether any process of the server's process group is still alive."""
        try:
            os.killpg(self.proc.pid, 0)
            return True
        except ProcessLookupError:
            return False


def contract_problems(port, names):
    return peer_check.problems("127.0.0.1", port, names)


# ------------------------------------------------------------------------------ the registry


def test_registry_names_unique_and_kinds_known():
    names = [p["name"] for p in REGISTRY]
    assert len(names) == len(set(names))
    assert {p["kind"] for p in REGISTRY} <= {"server", "floor"}
    assert [p["name"] for p in REGISTRY if p["kind"] == "floor"] == ["floor"]


@pytest.mark.parametrize("peer", REGISTRY, ids=lambda p: p["name"])
def test_registry_entry_is_complete(peer):
    for key in ("label", "language", "dir", "requires", "build", "run", "env", "scenarios"):
        assert key in peer, key
    unknown = set(peer["scenarios"]) - set(SCENARIOS)
    assert not unknown, f"scenarios not in the contract: {unknown}"
    assert len(peer["scenarios"]) == len(set(peer["scenarios"]))
    assert (PEERS / peer["dir"]).is_dir()
    assert all(isinstance(cmd, list) and cmd for cmd in peer["build"])
    assert peer["requires"], "every peer names the commands it needs"


def test_peregrine_entries_follow_the_brief():
    full = by_name("peregrine")
    assert full["dir"] == "../.." and set(full["scenarios"]) == set(SCENARIOS)
    assert full["run"] == ["target/release/examples/scenarios"]
    hello = by_name("peregrine-hello")
    assert hello["scenarios"] == ["plaintext"] and hello["run"] == ["target/release/examples/hello"]


def test_sources_behind_run_commands_exist():
    bins = {
        d: {b["name"] for b in tomllib.loads((PEERS / d / "Cargo.toml").read_text())["bin"]}
        for d in ("rust", "rust-tfb")
    }
    for peer in REGISTRY:
        d, run = PEERS / peer["dir"], peer["run"]
        if peer["dir"] in bins:
            assert Path(run[0]).name in bins[peer["dir"]]
        elif peer["dir"] == "go":
            assert (d / "cmd" / Path(run[0]).name / "main.go").is_file()
        elif peer["dir"] == "node":
            assert (d / run[-1]).is_file()
        elif peer["dir"] in ("nginx",):
            assert os.access(d / run[0], os.X_OK)


@pytest.mark.skipif(shutil.which("node") is None, reason="node not installed")
def test_node_peer_sources_parse():
    # Without npm ci the peers' own tests skip, so a syntax error (an `await` left in the
    # synchronous node:http router by a merge) would only show when the lab starts the peer.
    for src in sorted((PEERS / "node").glob("*.js")):
        done = subprocess.run(["node", "--check", str(src)], capture_output=True, text=True)
        assert done.returncode == 0, f"{src.name}: {done.stderr}"


# ------------------------------------------------------------------------------ the floor

needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")


@pytest.fixture(scope="module")
def floor_binary(tmp_path_factory):
    out = tmp_path_factory.mktemp("floor") / "floor"
    subprocess.run(["gcc", "-O2", "-pthread", "-Wall", "-Wextra", "-Werror", "-o", str(out),
                    str(PEERS / "floor" / "floor.c")], check=True)
    return out


@pytest.fixture
def floor(floor_binary):
    server = Server([str(floor_binary)], PEERS / "floor", workers=2)
    yield server
    server.stop()


def read_responses(sock, n, timeout=10.0):
    """Reads until `n` complete floor responses arrived; returns the raw bytes."""
    sock.settimeout(timeout)
    data = b""
    while data.count(b"Hello, World!") < n:
        chunk = sock.recv(1 << 20)
        if not chunk:
            break
        data += chunk
    return data


@needs_gcc
def test_floor_passes_the_plaintext_contract(floor):
    assert contract_problems(floor.port, ["plaintext"]) == {"plaintext": []}


@needs_gcc
def test_check_py_flags_a_wrong_answer(floor):
    # The floor answers text to everything, so the json scenario must be reported as a mismatch.
    problems = contract_problems(floor.port, ["json", "empty"])
    assert problems["json"] and problems["empty"]


@needs_gcc
def test_floor_counts_terminators_split_across_reads(floor):
    req = b"GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n"
    stream = req * 40
    with socket.create_connection(("127.0.0.1", floor.port)) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # Cut the stream at every offset inside one request so a terminator is split every way.
        cuts = sorted(set(range(len(req) * 2, len(stream), len(req) + 1)))
        start = 0
        for cut in cuts + [len(stream)]:
            s.sendall(stream[start:cut])
            start = cut
            time.sleep(0.002)
        data = read_responses(s, 40)
    assert data.count(b"HTTP/1.1 200 OK\r\n") == 40
    assert data.count(b"Hello, World!") == 40


@needs_gcc
def test_floor_counts_pipelined_batches_cut_at_every_offset(floor):
    # The default scan: three pipelined requests per batch, each batch cut in two at every offset
    # (so the cut falls inside a terminator, between requests and inside a request line), and a
    # lone CR before a terminator, which must not hide it.
    req = b"GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n"
    batch = req + b"GET /x HTTP/1.1\r\nA: \r\r\n\r\n" + req
    with socket.create_connection(("127.0.0.1", floor.port)) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for cut in range(1, len(batch)):
            s.sendall(batch[:cut])
            time.sleep(0.002)
            s.sendall(batch[cut:])
            data = read_responses(s, 3)
            assert data.count(b"Hello, World!") == 3, f"cut at {cut}"


@needs_gcc
def test_floor_answers_nothing_before_the_terminator(floor):
    with socket.create_connection(("127.0.0.1", floor.port)) as s:
        s.sendall(b"GET /plaintext HTTP/1.1\r\nHost: x\r\n\r")
        s.settimeout(0.3)
        with pytest.raises(socket.timeout):
            s.recv(100)
        s.sendall(b"\n")
        assert read_responses(s, 1).count(b"Hello, World!") == 1


@needs_gcc
def test_floor_survives_a_burst_larger_than_the_socket_buffers(floor):
    # 50,000 pipelined requests while the client does not read: the floor's writes hit EAGAIN and
    # it must keep what it owes and finish once the client reads.
    n = 50_000
    with socket.create_connection(("127.0.0.1", floor.port)) as s:
        s.sendall(b"GET / HTTP/1.1\r\n\r\n" * n)
        data = read_responses(s, n, timeout=30)
    assert data.count(b"Hello, World!") == n


# ------------------------------------------------------------------------------ nginx


@pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx not installed")
def test_nginx_serves_its_scenarios_and_stops_with_its_workers():
    peer = by_name("nginx")
    server = Server(peer["run"], PEERS / peer["dir"], workers=2)
    try:
        problems = contract_problems(server.port, peer["scenarios"])
        assert problems == {n: [] for n in peer["scenarios"]}
        # the process started is the nginx master itself (run.sh execs it)
        assert Path(f"/proc/{server.proc.pid}/comm").read_text().strip() == "nginx"
    finally:
        os.kill(server.proc.pid, signal.SIGTERM)  # to the master only, as a plain kill would
        server.proc.wait(10)
        deadline = time.monotonic() + 5
        while server.group_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        alive = server.group_alive()
        server.stop()
    assert not alive, "nginx workers outlived the master"


# ------------------------------------------------------------------------------ built peers


def built(peer):
    d = PEERS / peer["dir"]
    if peer["dir"] == "node":
        exe = d / "node_modules" / ".bin" / "bun" if peer["name"] == "bun" else d / "node_modules"
        return exe.exists() and shutil.which("node") is not None
    if peer["dir"] in ("rust", "rust-tfb", "go"):
        return (d / peer["run"][0]).is_file()
    return False


BUILT_PEERS = [p for p in REGISTRY if p["dir"] in ("rust", "rust-tfb", "go", "node")]


@pytest.mark.parametrize("peer", BUILT_PEERS, ids=lambda p: p["name"])
def test_built_peer_answers_the_contract(peer):
    if not built(peer):
        pytest.skip(f"{peer['name']} is not built: ./scripts/lab build --servers {peer['name']} "
                    "(scripts/test builds every peer these tests start)")
    server = Server(peer["run"], PEERS / peer["dir"], workers=1, env=peer.get("env"))
    try:
        problems = contract_problems(server.port, peer["scenarios"])
    finally:
        server.stop()
    assert problems == {n: [] for n in peer["scenarios"]}


@pytest.mark.parametrize("peer", BUILT_PEERS, ids=lambda p: p["name"])
def test_built_peer_with_two_workers_serves_and_stops_whole(peer):
    """WORKERS=2 (cluster workers, reuseport processes or threads) answers the contract, and a
    SIGTERM to the process the runner started takes every process of the peer down with it."""
    if not built(peer):
        pytest.skip(f"{peer['name']} is not built: ./scripts/lab build --servers {peer['name']} "
                    "(scripts/test builds every peer these tests start)")
    server = Server(peer["run"], PEERS / peer["dir"], workers=2, env=peer.get("env"))
    try:
        # Several connections, so that more than one worker is likely to answer.
        for _ in range(4):
            assert contract_problems(server.port, peer["scenarios"]) == {n: [] for n in peer["scenarios"]}
        os.kill(server.proc.pid, signal.SIGTERM)
        server.proc.wait(15)
        deadline = time.monotonic() + 10
        while server.group_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        alive = server.group_alive()
    finally:
        server.stop()
    assert not alive, "processes of the peer outlived the one the runner started"
