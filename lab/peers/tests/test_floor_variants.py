"""Tests of the floor's variants (floor/floor.c: FLOOR_SCAN, FLOOR_WRITE, FLOOR_READ_KIB): every
variant must be a correct floor, i.e. one response per "\\r\\n\\r\\n" whatever the reads' cuts, the
contract's plaintext parity, and a bad setting refused with a message, not served.

Run: python3 -m pytest lab/peers/tests/test_floor_variants.py -q   (needs gcc; no timing assertions)
"""

import random
import re
import socket
import subprocess
import time
import tomllib
from pathlib import Path

import pytest
from test_peers import PEERS, Server, contract_problems, free_port, needs_gcc, read_responses

SCANS = ("bytes", "memchr", "memmem", "sse2", "avx2")
WRITES = ("copy", "block", "writev")
# Three requests: a plain one, one whose header holds a lone CR just before the terminator (it
# must not hide it), and one without headers.
BURST = (
    b"GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n"
    b"GET /x HTTP/1.1\r\nA: \r\r\n\r\n"
    b"GET / HTTP/1.1\r\n\r\n"
)


def has_avx2():
    cpuinfo = Path("/proc/cpuinfo").read_text()
    return re.search(r"^flags\s*:.*\bavx2\b", cpuinfo, re.M) is not None


@pytest.fixture(scope="module")
def floor_binary(tmp_path_factory):
    out = tmp_path_factory.mktemp("floor-variants") / "floor"
    subprocess.run(["gcc", "-O2", "-pthread", "-Wall", "-Wextra", "-Werror", "-o", str(out),
                    str(PEERS / "floor" / "floor.c")], check=True)
    return out


def start(binary, **env):
    return Server([str(binary)], PEERS / "floor", workers=1, env=env)


# The scans this CPU runs: avx2 is refused where the CPU lacks it (tested below).
RUNNABLE = [s for s in SCANS if s != "avx2" or has_avx2()]
VARIANTS = [(s, w) for s in RUNNABLE for w in WRITES]


def assert_no_more(sock):
    """Nothing beyond what was read arrives: the floor answered no request twice."""
    sock.settimeout(0.2)
    with pytest.raises(socket.timeout):
        extra = sock.recv(1 << 16)
        assert not extra, f"unexpected bytes after the answers: {extra[:80]!r}"


@needs_gcc
@pytest.mark.parametrize(("scan", "write"), VARIANTS, ids=[f"{s}-{w}" for s, w in VARIANTS])
def test_each_variant_answers_a_burst_split_at_every_byte_with_three_responses(
    floor_binary, scan, write
):
    server = start(floor_binary, FLOOR_SCAN=scan, FLOOR_WRITE=write)
    try:
        with socket.create_connection(("127.0.0.1", server.port)) as s:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for cut in range(1, len(BURST)):
                s.sendall(BURST[:cut])
                time.sleep(0.002)  # so that the two parts arrive in separate reads
                s.sendall(BURST[cut:])
                data = read_responses(s, 3)
                assert data.count(b"HTTP/1.1 200 OK\r\n") == 3, f"cut at {cut}"
                assert data.count(b"Hello, World!") == 3, f"cut at {cut}"
            assert_no_more(s)
    finally:
        server.stop()


@needs_gcc
@pytest.mark.parametrize("scan", RUNNABLE)
def test_each_scan_counts_what_python_counts_in_a_random_stream(floor_binary, scan):
    # CR/LF-dense noise sent in random pieces: runs like "\r\n\r\n\r\n" (one terminator, not two:
    # they do not overlap) fall across the vector steps, their tails and the reads' ends.
    rng = random.Random(29)
    stream = bytes(rng.choice(b"\r\n\r\nab") for _ in range(60_000))
    want = stream.count(b"\r\n\r\n")  # non-overlapping, leftmost first, as the floor counts
    server = start(floor_binary, FLOOR_SCAN=scan, FLOOR_READ_KIB="4")
    try:
        with socket.create_connection(("127.0.0.1", server.port)) as s:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            at = 0
            while at < len(stream):
                step = rng.choice((1, 2, 3, 5, 17, 33, 64, 700, 9000))
                s.sendall(stream[at:at + step])
                at += step
            data = read_responses(s, want, timeout=30)
            assert data.count(b"Hello, World!") == want
            assert_no_more(s)
    finally:
        server.stop()


@needs_gcc
@pytest.mark.parametrize("write", WRITES)
def test_each_write_survives_a_burst_larger_than_the_socket_buffers(floor_binary, write):
    # Short writes leave part of a response sent: the rest must follow from the right byte.
    n = 50_000
    server = start(floor_binary, FLOOR_WRITE=write)
    try:
        with socket.create_connection(("127.0.0.1", server.port)) as s:
            s.sendall(b"GET / HTTP/1.1\r\n\r\n" * n)
            data = read_responses(s, n, timeout=30)
        data = re.sub(rb"Date: [^\r]*\r\n", b"Date: -\r\n", data)
        one = data[: data.index(b"Hello, World!") + 13]
        assert data == one * n  # whole responses, none cut or repeated
    finally:
        server.stop()


@needs_gcc
@pytest.mark.parametrize(("scan", "write"), VARIANTS, ids=[f"{s}-{w}" for s, w in VARIANTS])
def test_each_variant_passes_the_plaintext_contract(floor_binary, scan, write):
    server = start(floor_binary, FLOOR_SCAN=scan, FLOOR_WRITE=write, FLOOR_READ_KIB="256")
    try:
        assert contract_problems(server.port, ["plaintext"]) == {"plaintext": []}
    finally:
        server.stop()


@needs_gcc
def test_the_block_of_responses_takes_each_new_date(floor_binary):
    # The block variant builds its responses once a second: a later answer has a later Date.
    server = start(floor_binary, FLOOR_WRITE="block")
    try:
        with socket.create_connection(("127.0.0.1", server.port)) as s:
            dates = []
            for _ in range(2):
                s.sendall(b"GET / HTTP/1.1\r\n\r\n" * 3)
                data = read_responses(s, 3)
                dates.append(set(re.findall(rb"Date: ([^\r]*)\r\n", data)))
                time.sleep(1.05)
        assert len(dates[0]) == 1 and len(dates[1]) == 1 and dates[0] != dates[1]
    finally:
        server.stop()


@needs_gcc
def test_the_floor_says_which_variants_it_runs(floor_binary):
    server = start(floor_binary, FLOOR_SCAN="memchr", FLOOR_WRITE="writev", FLOOR_READ_KIB="256")
    server.stop()
    said = server.proc.stderr.read().decode()
    assert "floor: FLOOR_SCAN=memchr FLOOR_WRITE=writev FLOOR_READ_KIB=256\n" in said


@needs_gcc
@pytest.mark.parametrize(
    ("var", "value"),
    [("FLOOR_SCAN", "simd"), ("FLOOR_WRITE", "sendfile"), ("FLOOR_READ_KIB", "3"),
     ("FLOOR_READ_KIB", "64k")],
)
def test_a_bad_setting_is_refused_with_the_good_ones(floor_binary, var, value):
    env = {"ADDR": f"127.0.0.1:{free_port()}", var: value}
    done = subprocess.run([str(floor_binary)], env=env, capture_output=True, text=True, timeout=10)
    assert done.returncode == 2
    assert f"{var}={value}" in done.stderr


@needs_gcc
def test_avx2_is_refused_where_the_cpu_lacks_it(floor_binary):
    env = {"ADDR": f"127.0.0.1:{free_port()}", "FLOOR_SCAN": "avx2"}
    if has_avx2():  # it starts, listens and says so (its answers are tested above)
        server = start(floor_binary, FLOOR_SCAN="avx2")
        server.stop()
        assert "FLOOR_SCAN=avx2 " in server.proc.stderr.read().decode()
        return
    done = subprocess.run([str(floor_binary)], env=env, capture_output=True, text=True, timeout=10)
    assert done.returncode == 2 and "cannot run it" in done.stderr


@needs_gcc
def test_auto_takes_the_widest_scan_this_cpu_runs(floor_binary):
    server = start(floor_binary)  # FLOOR_SCAN unset is auto
    server.stop()
    want = "avx2" if has_avx2() else "sse2"
    assert f"floor: FLOOR_SCAN={want} FLOOR_WRITE=block " in server.proc.stderr.read().decode()


def test_the_registry_runs_the_floor_with_its_chosen_variants():
    # auto, not avx2: the lab's floor must start on any x86-64 (auto falls back to sse2).
    floor = next(p for p in tomllib.loads((PEERS / "peers.toml").read_text())["peer"]
                 if p["name"] == "floor")
    assert floor["env"] == {"FLOOR_SCAN": "auto", "FLOOR_WRITE": "block"}
