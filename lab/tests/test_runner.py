"""The runner end to end on Python stand-in servers (lab/tests/fixtures/peers.toml): build, start,
parity, idle memory, cells, failures and skips, results JSON, report and charts. Short runs."""

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from peregrine_lab import checks, cli, config, metrics, procs, runner
from peregrine_lab.peers import RegistryError

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def _free_port():
    """A free port below the ephemeral range, where no client socket can take it meanwhile."""
    for port in random.sample(range(20000, 32000), 200):
        if not procs.port_in_use("127.0.0.1", port):
            return port
    raise RuntimeError("no free port")


@pytest.mark.skipif(shutil.which("wrk") is None, reason="wrk not installed")
def test_runner_end_to_end(tmp_path):
    prof = config.Profile(
        name="test",
        description="runner test",
        scenarios=("plaintext", "param"),
        servers=("peregrine", "faulty", "nostart", "notool"),
        cells=((4, 0), (4, 4)),
        sweep_scenarios=("plaintext",),
        base_cells=((4, 0),),
        runs=2,
        duration=1.0,
        warmup=0.0,
        idle_connections=20,
        probe=None,
    )
    opts = runner.Options(
        profile=prof,
        out_dir=tmp_path,
        split=config.cpu_split(),
        port=_free_port(),
        command="test",
        peers_file=FIXTURES / "peers.toml",
    )
    res = runner.run(opts)
    assert res["complete"] and res["schema"] == 1

    servers = {s["name"]: s for s in res["servers"]}
    assert servers["peregrine"]["status"] == "ok"
    assert servers["peregrine"]["startup_ms"] > 0
    assert servers["peregrine"]["idle_memory"]["opened"] == 20
    assert servers["notool"]["status"] == "skipped"
    assert "no-such-toolchain-for-tests" in servers["notool"]["message"]
    assert servers["nostart"]["status"] == "start-failed"
    assert "cannot bind" in servers["nostart"]["message"]  # the tail of its log is shown
    assert servers["faulty"]["parity"]["param"]["ok"] is False

    cells = {(c["server"], c["scenario"], c["concurrency"], c["pipeline"]): c for c in res["cells"]}
    ok = cells[("peregrine", "plaintext", 4, 0)]
    assert ok["status"] == "ok" and len(ok["runs"]) == 2
    for run in ok["runs"]:
        assert run["requests"] > 0 and run["problems"] == []
        assert run["cpu_us_per_req"] > 0 and run["peak_rss_bytes"] > 0
    assert ok["median"]["rps"] > 0 and ok["cv"]["rps"] is not None
    assert cells[("peregrine", "plaintext", 4, 4)]["status"] == "ok"
    # Pipelining only where the profile asks for it.
    assert ("peregrine", "param", 4, 4) not in cells
    assert cells[("faulty", "param", 4, 0)]["status"] == "parity-failed"
    assert cells[("faulty", "plaintext", 4, 0)]["status"] == "ok"
    assert cells[("nostart", "param", 4, 0)]["status"] == "n/a"
    assert cells[("notool", "plaintext", 4, 0)]["status"] == "skipped"
    assert cells[("nostart", "plaintext", 4, 0)]["status"] == "start-failed"

    # Nothing left running, and the saved JSON is what run() returned.
    assert not procs.port_in_use("127.0.0.1", opts.port)
    assert not procs._live
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["cells"] == res["cells"]
    assert cli.main(["report", str(tmp_path)]) == 0
    assert "parity ✗" in (tmp_path / "report.md").read_text()


def test_busy_port_is_a_clear_error(tmp_path):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    try:
        opts = runner.Options(
            profile=config.PROFILES["quick"],
            out_dir=tmp_path,
            split=config.cpu_split(),
            port=s.getsockname()[1],
            peers_file=FIXTURES / "peers.toml",
        )
        with pytest.raises(runner.LabError, match="is busy"):
            runner.run(opts)
    finally:
        s.close()


def test_unknown_server_name_lists_known_ones(tmp_path, capsys):
    rc = cli.main(
        [
            "quick",
            "--servers",
            "nope",
            "--peers",
            str(FIXTURES / "peers.toml"),
            "--out",
            str(tmp_path),
            "--port",
            str(_free_port()),
        ]
    )
    assert rc == 1
    err = capsys.readouterr().err
    assert "unknown server(s) nope" in err and "peregrine" in err


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # A zombie is gone for our purpose (it no longer runs); check its state.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_stops_every_server_and_keeps_partial_results(tmp_path, sig):
    port = _free_port()
    env = dict(os.environ, PYTHONPATH=str(FIXTURES.parents[1]))
    lab = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "peregrine_lab",
            "quick",
            "--peers",
            str(FIXTURES / "peers.toml"),
            "--servers",
            "peregrine",
            "--out",
            str(tmp_path),
            "--port",
            str(port),
            "--skip-build",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    servers = []
    try:
        for line in lab.stdout:
            if "round 1/" in line:  # the servers are up and being measured
                servers = [p for p in metrics.process_tree(lab.pid) if p != lab.pid]
                break
        assert servers, "the lab never reached a measuring step"
        lab.send_signal(sig)
        rest = lab.communicate(timeout=60)[0]
    finally:
        if lab.poll() is None:
            lab.kill()
    assert lab.returncode == 130, rest
    assert "every server stopped" in rest
    assert all(_gone(p) for p in servers)
    assert not procs.port_in_use("127.0.0.1", port)
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["complete"] is False
    assert "**Incomplete run**" in (tmp_path / "report.md").read_text()


def test_default_port_skips_a_busy_one(tmp_path, monkeypatch):
    base = _free_port()
    while procs.port_in_use("127.0.0.1", base + 1):
        base = _free_port()
    monkeypatch.setattr(checks, "DEFAULT_PORT", base)
    s = socket.socket()
    s.bind(("127.0.0.1", base))
    s.listen(1)
    try:
        opts = runner.Options(
            profile=config.PROFILES["quick"],
            out_dir=tmp_path,
            split=config.cpu_split(),
            peers_file=tmp_path / "missing.toml",
        )
        with pytest.raises(RegistryError):
            runner.run(opts)  # fails on the registry, after choosing the port
    finally:
        s.close()
    assert opts.port == base + 1


def test_skip_build_knows_the_program_a_build_makes(tmp_path):
    """--skip-build on a peer whose build never ran says so, not "exited with status 127"."""
    from peregrine_lab.peers import Peer

    def peer(run, build=(("make",),), **extra):
        return Peer("p", "p", "?", "server", tmp_path, [], list(build), run, {}, [], [], extra)

    assert runner.built_program(peer(["bin/fasthttp"])) == tmp_path / "bin" / "fasthttp"
    assert runner.built_program(peer(["./run.sh"], build=())) is None  # nothing to build
    assert runner.built_program(peer(["nginx", "-c", "x"])) is None  # an installed program
    assert runner.built_program(peer(["x"], binary="/b/hello")) == Path("/b/hello")
