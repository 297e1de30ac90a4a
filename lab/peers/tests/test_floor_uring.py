"""Tests of the io_uring floor (floor/floor_uring.c) beside the epoll floor (floor/floor.c): both
must give the same answers, including to a pipelined batch split at every offset.

Run: python3 -m pytest lab/peers/tests/test_floor_uring.py -q
Needs gcc and liburing-dev (scripts/setup installs it). The io_uring floor's tests are skipped, with
the reason, only when io_uring itself is unavailable here (kernel.io_uring_disabled, or the program
exits with status 3 because the kernel refuses a ring). No timing assertions.
"""

import re
import socket
import subprocess
import time
from pathlib import Path

import pytest
from test_peers import Server, free_port, needs_gcc, read_responses

FLOOR_DIR = Path(__file__).resolve().parent.parent / "floor"
REQUEST = b"GET /plaintext HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n"
BATCH = REQUEST * 3


def io_uring_unavailable():
    """Why io_uring cannot be used here, or None."""
    sysctl = Path("/proc/sys/kernel/io_uring_disabled")
    if sysctl.is_file() and sysctl.read_text().strip() == "2":
        return "kernel.io_uring_disabled=2: io_uring is disabled on this machine"
    return None


@pytest.fixture(scope="module")
def binaries(tmp_path_factory):
    out = tmp_path_factory.mktemp("floors")
    flags = ["gcc", "-O2", "-pthread", "-Wall", "-Wextra", "-Werror"]
    subprocess.run([*flags, "-o", str(out / "floor"), str(FLOOR_DIR / "floor.c")], check=True)
    subprocess.run(
        [*flags, "-o", str(out / "floor_uring"), str(FLOOR_DIR / "floor_uring.c"), "-luring"],
        check=True,
    )
    return out


@pytest.fixture(scope="module")
def uring_skip_reason(binaries):
    """Why the io_uring floor cannot run here (the sysctl, or its exit status 3), or None."""
    if why := io_uring_unavailable():
        return why
    env = {"ADDR": f"127.0.0.1:{free_port()}"}
    probe = subprocess.Popen([str(binaries / "floor_uring")], env=env, stderr=subprocess.PIPE)
    try:
        probe.wait(1)
    except subprocess.TimeoutExpired:
        probe.kill()  # it runs: io_uring is available
        probe.wait()
        return None
    if probe.returncode == 3:
        return probe.stderr.read().decode().strip()
    return None  # another failure: let the tests fail on it


@pytest.fixture(params=["floor", "floor_uring"])
def floor(request, binaries, uring_skip_reason):
    if request.param == "floor_uring" and uring_skip_reason:
        pytest.skip(uring_skip_reason)
    server = Server([str(binaries / request.param)], FLOOR_DIR, workers=1)
    yield server
    server.stop()


def without_date(data):
    return re.sub(rb"Date: [^\r]*\r\n", b"Date: -\r\n", data)


@needs_gcc
def test_floor_answers_a_pipelined_batch_split_at_every_offset(floor):
    n = BATCH.count(b"\r\n\r\n")
    with socket.create_connection(("127.0.0.1", floor.port)) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for cut in range(1, len(BATCH)):
            s.sendall(BATCH[:cut])
            time.sleep(0.002)  # so that the two parts arrive in separate reads
            s.sendall(BATCH[cut:])
            data = read_responses(s, n)
            assert data.count(b"HTTP/1.1 200 OK\r\n") == n, f"cut at {cut}"
            assert data.count(b"Hello, World!") == n, f"cut at {cut}"


@needs_gcc
def test_both_floors_send_the_same_bytes(binaries, uring_skip_reason):
    if uring_skip_reason:
        pytest.skip(uring_skip_reason)
    answers = []
    for name in ("floor", "floor_uring"):
        server = Server([str(binaries / name)], FLOOR_DIR, workers=1)
        try:
            with socket.create_connection(("127.0.0.1", server.port)) as s:
                s.sendall(BATCH)
                answers.append(without_date(read_responses(s, 3)))
        finally:
            server.stop()
    assert answers[0] == answers[1]
    assert answers[0].startswith(b"HTTP/1.1 200 OK\r\nServer: floor\r\nDate: -\r\n")


@needs_gcc
def test_floor_answers_nothing_before_the_terminator(floor):
    with socket.create_connection(("127.0.0.1", floor.port)) as s:
        s.sendall(REQUEST[:-1])
        s.settimeout(0.3)
        with pytest.raises(socket.timeout):
            s.recv(100)
        s.sendall(REQUEST[-1:])
        assert read_responses(s, 1).count(b"Hello, World!") == 1


@needs_gcc
def test_floor_survives_a_burst_larger_than_the_socket_buffers(floor):
    # The io_uring floor keeps receiving while its sends are short: what it owes must all arrive.
    n = 50_000
    with socket.create_connection(("127.0.0.1", floor.port)) as s:
        s.sendall(b"GET / HTTP/1.1\r\n\r\n" * n)
        data = read_responses(s, n, timeout=30)
    assert data.count(b"Hello, World!") == n


@needs_gcc
def test_floor_serves_many_connections_at_once(floor):
    # More connections than one turn's completions, each with a pipelined batch.
    conns = [socket.create_connection(("127.0.0.1", floor.port)) for _ in range(200)]
    try:
        for s in conns:
            s.sendall(BATCH)
        for s in conns:
            assert read_responses(s, 3).count(b"Hello, World!") == 3
    finally:
        for s in conns:
            s.close()
