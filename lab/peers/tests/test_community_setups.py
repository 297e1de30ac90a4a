"""The peers set up as their communities benchmark them (TechEmpower's entries), checked over real
sockets against the built peers: Express without ETag, actix-web without its per-request head
timer, nginx with TechEmpower's settings; and the registry's labels, ranking flags, toolchains
and version commands.

Run: python3 -m pytest lab/peers/tests -q (peers that are not built are skipped, as in
test_peers.py; the contract itself is checked for every built peer there).
"""
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from test_peers import PEERS, REGISTRY, Server, built, by_name, contract_problems

CONFIG_PY = PEERS.parent / "peregrine_lab" / "config.py"


def get(port, path):
    """One HTTP/1.1 GET on a fresh connection: (status line, {header: value}, body)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: lab\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return lines[0], headers, body


def start(name, workers=1):
    peer = by_name(name)
    if not built(peer):
        pytest.skip(f"{name} is not built (./scripts/lab builds it)")
    return Server(peer["run"], PEERS / peer["dir"], workers=workers, env=peer.get("env"))


# ------------------------------------------------------------------------------ the registry


def test_variants_run_their_communitys_setup():
    axum, flush = by_name("axum"), by_name("axum-flush")
    assert flush["run"] == axum["run"] and flush["build"] == axum["build"]
    assert flush["env"] == {"RUNTIME": "per-core", "PIPELINE_FLUSH": "1"}
    assert by_name("hyper-flush")["env"] == flush["env"]
    assert by_name("actix-tfb")["run"] == ["target/release/actix-tfb-peer"]
    assert by_name("express-tfb")["run"][-1] == "express-tfb.js"
    # Both Express rows say which is which.
    assert "idiomatic" in by_name("express")["label"]
    assert "TechEmpower" in by_name("express-tfb")["label"]


def test_hyper_and_axum_rows_say_whether_pipeline_flush_is_on():
    # A pipelined figure quoted from any of these rows names the setting it ran with.
    rows = [p for p in REGISTRY if p["dir"] == "rust" and p["name"].startswith(("hyper", "axum"))]
    assert {p["name"] for p in rows} >= {"hyper", "axum", "hyper-flush", "axum-flush"}
    for peer in rows:
        on = peer["env"].get("PIPELINE_FLUSH") == "1"
        assert ("pipeline_flush on" if on else "pipeline_flush off") in peer["label"], peer


def test_rows_that_do_not_represent_their_server_are_labelled_and_not_ranked():
    assert by_name("h2o")["label"].startswith("h2o 2.2.5 static files")
    assert by_name("nim")["label"].startswith("Nim 1.6 stdlib")
    for name in ("h2o", "nim"):
        assert len(by_name(name).get("not_ranked", "")) > 20, name
    ranked_out = {p["name"] for p in REGISTRY if p.get("not_ranked")}
    assert ranked_out == {"h2o", "nim"}


def test_go_peers_build_and_report_with_the_labs_go_release():
    release = re.search(r'^GO_TOOLCHAIN = "(go[0-9.]+)"', CONFIG_PY.read_text(), re.M).group(1)
    go_peers = [p for p in REGISTRY if p["dir"] == "go"]
    assert go_peers
    for peer in go_peers:
        for cmd in [*peer["build"], peer["version"]]:
            assert cmd[:2] == ["env", f"GOTOOLCHAIN={release}"], (peer["name"], cmd)


def test_node_peers_run_the_npm_node_package_on_an_lts_line():
    lock = (PEERS / "node" / "package-lock.json").read_text()
    node = re.search(r'"node_modules/node": \{\s*"version": "(\d+)\.', lock).group(1)
    assert int(node) % 2 == 0, "odd Node majors never become LTS"
    for peer in REGISTRY:
        if peer["dir"] == "node" and peer["run"][0].endswith("node"):
            assert peer["run"][0] == "node_modules/.bin/node", peer["name"]


@pytest.mark.parametrize("peer", [p for p in REGISTRY if p["dir"] in ("rust", "go", "node")],
                         ids=lambda p: p["name"])
def test_built_peer_reports_a_version(peer):
    if not built(peer):
        pytest.skip(f"{peer['name']} is not built (./scripts/lab builds it)")
    p = subprocess.run(peer["version"], cwd=PEERS / peer["dir"], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip(), "the report would show an empty version"


# ------------------------------------------------------------------------------ pipeline_flush


def _response_writes(server, batch=16):
    """System calls the server made to answer `batch` pipelined requests sent in one write
    (traced with strace attached to the running server), and the responses received."""
    log = Path(f"/tmp/peregrine-lab-strace-{server.port}.log")
    tracer = subprocess.Popen(
        ["strace", "-f", "-p", str(server.proc.pid), "-o", str(log),
         "-e", "trace=write,writev,sendto,sendmsg"],
        stderr=subprocess.PIPE, text=True)
    try:
        # strace says "Process N attached" for every thread before tracing them.
        assert "attached" in tracer.stderr.readline()
        time.sleep(0.3)
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
            s.sendall(b"GET /plaintext HTTP/1.1\r\nHost: lab\r\n\r\n" * batch)
            got = b""
            while got.count(b"HTTP/1.1 200") < batch:
                chunk = s.recv(1 << 20)
                assert chunk, "connection closed before every answer"
                got += chunk
        time.sleep(0.3)
    finally:
        tracer.send_signal(signal.SIGINT)  # detaches; the server goes on
        tracer.wait(10)
    text = log.read_text()
    log.unlink()
    return len(re.findall(r"(?:write|writev|sendto|sendmsg)\(\d+, .*HTTP/1\.1 200", text)), got


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace not installed")
def test_axum_flush_answers_a_pipelined_batch_in_one_write():
    # pipeline_flush(true) is what TechEmpower's axum entry sets: the answers to requests that
    # arrived together leave in one write; axum::serve (axum-percore) writes one per answer.
    plain, flush = start("axum-percore"), start("axum-flush")
    try:
        plain_writes, _ = _response_writes(plain)
        flush_writes, got = _response_writes(flush)
    finally:
        plain.stop()
        flush.stop()
    assert got.count(b"Hello, World!") == 16
    assert plain_writes >= 8, plain_writes
    assert flush_writes <= 2, flush_writes


# ------------------------------------------------------------------------------ Express


@pytest.mark.skipif(shutil.which("node") is None, reason="node not installed")
def test_express_tfb_sends_no_etag_where_idiomatic_express_does():
    idiomatic, tfb = start("express"), start("express-tfb")
    try:
        for path in ("/plaintext", "/json"):
            status, headers, _ = get(idiomatic.port, path)
            assert status.endswith("200 OK") and "etag" in headers, (path, headers)
            status, headers, body = get(tfb.port, path)
            assert status.endswith("200 OK") and "etag" not in headers, (path, headers)
            assert "x-powered-by" not in headers and headers["server"] == "Express"
            assert headers["content-length"] == str(len(body))
        assert contract_problems(tfb.port, ["plaintext", "json"]) == {"plaintext": [], "json": []}
    finally:
        idiomatic.stop()
        tfb.stop()


# ------------------------------------------------------------------------------ actix-web


def test_actix_tfb_arms_no_timer_on_a_slow_request_head():
    # actix-web's default client_request_timeout (5 s) answers a head still incomplete after it
    # with 408 and closes; TechEmpower's setup (0) turns the timer off, so the request completes.
    idiomatic, tfb = start("actix"), start("actix-tfb")
    try:
        conns = {}
        for name, server in (("actix", idiomatic), ("actix-tfb", tfb)):
            s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
            s.sendall(b"GET /plaintext HTTP/1.1\r\nHost: lab\r\n")
            conns[name] = s
        time.sleep(6.5)
        conns["actix"].settimeout(5)
        answer = conns["actix"].recv(4096)
        assert answer == b"" or answer.startswith(b"HTTP/1.1 408"), answer
        s = conns["actix-tfb"]
        s.sendall(b"\r\n")
        answer = s.recv(4096)
        assert answer.startswith(b"HTTP/1.1 200 OK"), answer
        assert answer.endswith(b"Hello, World!")
        for c in conns.values():
            c.close()
    finally:
        idiomatic.stop()
        tfb.stop()


# ------------------------------------------------------------------------------ nginx


def _listeners(port):
    """How many listening TCP sockets are bound to `port` (one per worker with reuseport)."""
    hexport = f":{port:04X}"
    n = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if os.path.exists(table):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                n += fields[1].endswith(hexport) and fields[3] == "0A"  # 0A: LISTEN
    return n


@pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx not installed")
def test_nginx_runs_techempowers_settings():
    server = Server(by_name("nginx")["run"], PEERS / "nginx", workers=2)
    try:
        _, headers, _ = get(server.port, "/plaintext")
        # server_tokens off: the Server header without the version.
        assert headers["server"] == "nginx"
        # listen ... reuseport: a listening socket per worker.
        assert _listeners(server.port) == 2
    finally:
        server.stop()


def test_techempower_leaders_ship_their_entries_allocator_and_say_so():
    # Each leader's entry ships mimalloc as its global allocator; the binary does and the label
    # says so, so a figure quoted from its row names the allocator it ran with.
    for name in ("may-minihttp", "xitca-web", "ntex"):
        peer = by_name(name)
        assert peer["dir"] == "rust-tfb" and "--locked" in peer["build"][0], name
        assert "TechEmpower's setup" in peer["label"] and "mimalloc" in peer["label"], name
        source = PEERS / "rust-tfb" / "src" / "bin" / f"{peer['run'][0].rsplit('/', 1)[1]}.rs"
        assert "static GLOBAL: mimalloc::MiMalloc" in source.read_text(), name
