"""The resource attacks' measurement and verdicts, on two stand-in servers run as child processes
(their own PIDs are measured): one that keeps 1 MiB per connection and never lets go (must fail the
budget), one that cuts every connection after a second (must pass), and the hand-written HTTP/2
frames against the RFC's own HPACK integer examples and the frame layout."""

from __future__ import annotations

import socket
import struct
import subprocess
import sys
import textwrap
import time

import pytest

from probelib import attacks

# A server that holds 1 MiB per connection for as long as the client stays, and never closes.
HOARDER = textwrap.dedent(
    """
    import socket, sys, threading
    srv = socket.create_server(("127.0.0.1", 0), backlog=512)
    print(srv.getsockname()[1], flush=True)
    held = []
    def serve(c):
        try:
            c.recv(65536)
            held.append(bytearray(b"x" * (1 << 20)))  # touched, so it counts in RSS
            if c.recv(65536) == b"":
                return
        except OSError:
            return
    while True:
        c, _ = srv.accept()
        threading.Thread(target=serve, args=(c,), daemon=True).start()
    """
)

# A server that answers /plaintext, and cuts any other connection after one second.
CUTTER = textwrap.dedent(
    """
    import socket, threading, time
    srv = socket.create_server(("127.0.0.1", 0), backlog=512)
    print(srv.getsockname()[1], flush=True)
    def serve(c):
        data = c.recv(65536)
        if data.startswith(b"GET /plaintext"):
            c.sendall(b"HTTP/1.1 200 OK\\r\\nContent-Length: 2\\r\\n\\r\\nok")
        time.sleep(1.0)
        c.close()
    while True:
        c, _ = srv.accept()
        threading.Thread(target=serve, args=(c,), daemon=True).start()
    """
)


@pytest.fixture
def server(request):
    proc = subprocess.Popen([sys.executable, "-c", request.param], stdout=subprocess.PIPE, text=True)
    port = int(proc.stdout.readline())
    time.sleep(0.2)
    yield proc.pid, port
    proc.kill()
    proc.wait()


def _options(pid: int, port: int) -> attacks.AttackOptions:
    return attacks.AttackOptions(
        port=port, server_pid=pid, large_path="/big", write_timeout=1.0, body_timeout=1.0, connections=60
    )


@pytest.mark.parametrize("server", [HOARDER], indirect=True)
def test_a_server_that_hoards_memory_fails_the_budget(server):
    pid, port = server
    r = attacks.slow_read_large(_options(pid, port))
    assert not r["passed"], r
    assert r["details"]["peak_growth_kib"] > 32 * 1024, r["details"]
    assert "RSS grew" in r["observed"]
    assert r["details"]["cut"] == 0  # it never closes a connection


@pytest.mark.parametrize("server", [CUTTER], indirect=True)
def test_a_server_that_cuts_attackers_passes(server):
    pid, port = server
    r = attacks.stalled_upload(_options(pid, port))
    assert r["passed"], r
    d = r["details"]
    assert d["cut"] == d["attackers"] == 60
    assert d["served"] is True
    assert d["peak_growth_kib"] < 32 * 1024
    assert d["samples"] > 3


def test_measure_reads_this_process():
    s = attacks.measure(__import__("os").getpid())
    assert s is not None and s.rss_kib > 1000 and s.fds > 2 and s.cpu_s > 0


def test_hpack_integers_follow_rfc_7541_examples():
    # RFC 7541 C.1.1-C.1.3: 10 in a 5-bit prefix, 1337 in a 5-bit prefix, 42 in 8 bits.
    assert attacks._hpack_int(10, 5, 0) == bytes([0b01010])
    assert attacks._hpack_int(1337, 5, 0) == bytes([31, 154, 10])
    assert attacks._hpack_int(42, 8, 0) == bytes([42])


def test_h2_frames_are_well_formed():
    f = attacks.h2_get(3, "/files/x")
    length = int.from_bytes(f[:3], "big")
    assert len(f) == 9 + length
    assert f[3] == 0x1 and f[4] == 0x5  # HEADERS, END_STREAM | END_HEADERS
    assert struct.unpack(">I", f[5:9])[0] == 3
    block = f[9:]
    # :method GET and :scheme http from the static table, then :path as a literal (index 4).
    assert block[:2] == b"\x82\x86"
    assert block[2] == 0x04 and block[3] == len("/files/x") and block[4:12] == b"/files/x"


def test_served_sees_a_200(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", CUTTER], stdout=subprocess.PIPE, text=True)
    try:
        port = int(proc.stdout.readline())
        assert attacks.served(attacks.AttackOptions(port=port))
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            free = s.getsockname()[1]
        assert not attacks.served(attacks.AttackOptions(port=free), timeout=0.5)
    finally:
        proc.kill()
        proc.wait()
