"""score_peers.py --server: a server the registry does not know, started by a command with the
lab's syntax, probed and tabled like a peer (the lenient toy server: it must score as lenient)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SCORE = os.path.join(os.path.dirname(HERE), "score_peers.py")
LENIENT = os.path.join(HERE, "lenient_server.py")


def _score(tmp_path, *servers):
    args = [sys.executable, SCORE, "--out", str(tmp_path), "--probe-args", "--categories A --no-sweeps"]
    for s in servers:
        args += ["--server", s]
    return subprocess.run(args, check=False, capture_output=True, text=True, timeout=120)


def test_outside_server_is_probed_and_tabled(tmp_path):
    p = _score(tmp_path, f"lenient={sys.executable} {LENIENT} {{port}};ready=/plaintext;label=toy")
    assert p.returncode == 0, p.stderr
    doc = json.loads((tmp_path / "lenient.json").read_text())
    assert doc["meta"]["server_header"] == "lenient"
    assert {c["id"][0] for c in doc["cases"]} == {"A"}  # --probe-args reached probe.py
    # The lenient server accepts what category A's SHOULD cases reject.
    assert doc["overall"]["should"]["passed"] < doc["overall"]["should"]["total"]
    table = (tmp_path / "README.md").read_text()
    assert "| toy | " in table
    assert table.count("\n| ") == 2  # the header and the one server named: no registered peer


def test_a_server_on_a_port_of_its_own_is_probed_there(tmp_path):
    """port=N: the server is told nothing (its port is in its command) and still probed."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = _score(tmp_path, f"fixed={sys.executable} {LENIENT} {port};port={port};ready=/plaintext")
    assert p.returncode == 0, p.stderr
    assert json.loads((tmp_path / "fixed.json").read_text())["target"] == f"127.0.0.1:{port}"


def test_bad_server_spec_and_a_server_that_does_not_start(tmp_path):
    p = _score(tmp_path, "Bad Name=x")
    assert p.returncode == 2 and "must be lower-case" in p.stderr
    p = _score(tmp_path, f"exits={sys.executable} -c 'raise SystemExit(3)'")
    assert p.returncode == 0
    assert "| exits | – | – | – | – | – | did not start (see server log) |" in (tmp_path / "README.md").read_text()
