"""`--server NAME=COMMAND`: parsing, the launcher, the ready= wait, and the lab measuring an
outside server end to end through the installed `peregrine-lab` command (tests/outside_server.py:
a plain asyncio server, and the same server with a wrong body, which parity must refuse)."""

import json
import os
import socket
import subprocess
import sys
import tomllib
import venv
from pathlib import Path

import pytest

from peregrine_lab import cli, database, outside, procs, schema
from peregrine_lab.launch import argv_and_env
from peregrine_lab.peers import RegistryError

LAB = Path(__file__).resolve().parents[1]
FIXTURES = LAB / "tests" / "fixtures"
SERVER = LAB / "tests" / "outside_server.py"
CONTRACT = ["plaintext", "json", "param"]


def test_parse_fields_and_a_command_with_semicolons():
    p = outside.parse("mine=cd /srv; ./run --port {port};scenarios=plaintext, json;ready=/up")
    assert p.name == "mine" and p.scenarios == ["plaintext", "json"]
    assert p.run[-1] == "cd /srv; ./run --port {port}"  # the shell's `;` stays in the command
    assert p.env == {procs.READY_ENV: "/up"} and p.build == []
    assert outside.parse("x=srv;label=My server").label == "My server"
    fixed = outside.parse("x=srv --listen :8080;port=8080;scenarios=json")
    assert fixed.extra["port"] == 8080 and fixed.run[-1] == "srv --listen :8080"
    assert "port" not in outside.parse("x=srv").extra  # no port=: the lab chooses it
    # A `;key=value` whose key is not a field is part of the command.
    assert outside.parse("x=a;b=c").run[-1] == "a;b=c"


@pytest.mark.parametrize(
    "spec, message",
    [
        ("mine", "expected NAME=COMMAND"),
        ("mine=", "expected NAME=COMMAND"),
        ("Mine Server=srv", "must be lower-case"),
        ("mine=;scenarios=plaintext", "no command"),
        ("mine=srv;ready=up", "must be a path starting with /"),
        ("mine=srv;ready=/a;ready=/b", "ready= given twice"),
        ("mine=srv;port=http", "port='http' must be a port number"),
        ("mine=srv;port=0", "port='0' must be a port number"),
        ("mine=srv;port=70000", "port='70000' must be a port number"),
        ("peregrine=srv", "a registered peer has that name"),
    ],
)
def test_parse_errors_say_what_is_wrong(spec, message):
    with pytest.raises(RegistryError, match=message):
        outside.parse(spec, known={"peregrine"})


def test_parse_all_defaults_to_the_contract_and_checks_names():
    a, b = outside.parse_all(["a=srv", "b=srv;scenarios=json"], set(), CONTRACT)
    assert a.scenarios == CONTRACT and b.scenarios == ["json"]
    with pytest.raises(RegistryError, match="unknown scenario.*nope"):
        outside.parse_all(["a=srv;scenarios=nope"], set(), CONTRACT)
    with pytest.raises(RegistryError, match="a registered peer has that name"):
        outside.parse_all(["a=srv", "a=srv2"], set(), CONTRACT)
    with pytest.raises(RegistryError, match="port=9000 is a's too"):
        outside.parse_all(["a=srv;port=9000", "b=srv;port=9000"], set(), CONTRACT)


def test_db_profile_keeps_a_named_server():
    (p,) = outside.parse_all(["a=srv;scenarios=db,fortunes"], set(), ["db", "fortunes", "queries"])
    assert [(x.name, x.scenarios) for x in database.db_peers([p])] == [("a", ["db", "fortunes"])]


def test_join_adds_the_named_servers_to_the_selection():
    mine = outside.parse("mine=srv")
    assert outside.join([], None, [mine]) == ([mine], None)
    assert outside.join([], ["peregrine"], [mine])[1] == ["peregrine", "mine"]
    assert outside.join([], ["mine"], [mine])[1] == ["mine"]  # --servers mine: it alone


def test_launcher_execs_simple_commands_and_uses_sh_otherwise():
    assert argv_and_env("FAULT=body srv 'a b' 8080", {}) == (
        ["srv", "a b", "8080"],
        {"FAULT": "body"},
    )
    assert argv_and_env("cd /x && srv", {})[0] == ["sh", "-c", "cd /x && srv"]
    assert argv_and_env("srv --port $PORT", {})[0] == ["sh", "-c", "srv --port $PORT"]


def test_launcher_gives_the_port_every_way_a_server_may_take_it():
    command = "echo $PORT {port} {addr}"
    p = subprocess.run(
        [sys.executable, str(outside.LAUNCHER), command],
        env={**os.environ, "ADDR": "127.0.0.1:28123"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert p.stdout.split() == ["28123", "28123", "127.0.0.1:28123"]


def test_ready_path_must_answer_2xx(tmp_path):
    port = _free_port()
    env = {**os.environ, "ADDR": f"127.0.0.1:{port}", "PORT": str(port)}
    for path, ok in (("/plaintext", True), ("/missing", False)):
        srv = procs.start_server(
            [sys.executable, str(SERVER)],
            LAB,
            {**env, procs.READY_ENV: path},
            None,
            tmp_path / "log",
        )
        try:
            if ok:
                procs.wait_for_port("127.0.0.1", port, srv.proc, timeout=10)
            else:
                with pytest.raises(procs.StartError, match="GET /missing did not answer 2xx"):
                    procs.wait_for_port("127.0.0.1", port, srv.proc, timeout=1.5)
        finally:
            srv.stop()
        assert procs.wait_port_free("127.0.0.1", port, 10)


def test_dry_run_prints_the_plan_and_measures_nothing(tmp_path, capsys):
    rc = cli.main(
        [
            "framework",
            "--peers",
            str(FIXTURES / "peers.toml"),
            "--servers",
            "peregrine",
            "--scenarios",
            "plaintext",
            "--runs",
            "3",
            "--seed",
            "7",
            "--out",
            str(tmp_path / "o"),
            "--dry-run",
            "--server",
            f"mine={sys.executable} {SERVER} 28999;port=28999;scenarios=plaintext",
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0 and not (tmp_path / "o").exists()
    assert "dry run of profile framework (seed 7)" in out
    assert "nothing to build; always on port 28999" in out
    # The versions the run would record, a tool not installed shown as such ("wrk ?").
    assert "\nversions: rustc " in out and "; wrk " in out and "; openssl " in out.lower()
    assert "mine" in out and "peregrine" in out and "estimated measuring time" in out
    assert "plaintext c=50 pipeline=0 keep-alive" in out


def test_a_fixed_port_that_is_busy_stops_the_run_before_anything_starts(tmp_path, capsys):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        args = ["framework", "--peers", str(FIXTURES / "peers.toml"), "--servers", "mine"]
        args += ["--server", f"mine=srv;port={port}", "--out", str(tmp_path / "o")]
        assert cli.main(args) == 1
    assert f"--server mine: its port 127.0.0.1:{port} (port={port}) is busy" in (
        capsys.readouterr().err
    )
    assert not (tmp_path / "o").exists()


def test_server_and_dry_run_refused_where_they_do_not_apply(capsys):
    assert cli.main(["list", "--server", "mine=srv"]) == 2
    assert "apply to a measuring profile" in capsys.readouterr().err
    assert cli.main(["quick", "--server", "bad name=srv", "--dry-run"]) == 2
    assert "must be lower-case" in capsys.readouterr().err


def test_pyproject_pins_what_setup_installs():
    """pyproject.toml (pip install -e lab) and requirements.txt + scripts/setup (CI) pin the same
    versions, so the lab a user installs is the one the tests ran."""
    project = tomllib.loads((LAB / "pyproject.toml").read_text())["project"]
    pins = project["dependencies"] + project["optional-dependencies"]["test"]
    assert pins and all("==" in p for p in pins)
    installed_by_setup = (LAB / "requirements.txt").read_text().split() + (
        LAB.parent / "scripts" / "setup"
    ).read_text().split()
    assert [p for p in pins if p not in installed_by_setup] == []


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """`pip install -e lab` into a fresh virtual environment that sees the machine's packages
    (no download: --no-index, --no-build-isolation): the `peregrine-lab` a user gets."""
    env_dir = tmp_path_factory.mktemp("venv")
    venv.EnvBuilder(system_site_packages=True, with_pip=False).create(env_dir)
    py = env_dir / "bin" / "python"
    subprocess.run(
        [
            py,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-index",
            "--no-build-isolation",
            "--no-deps",
            "-e",
            str(LAB),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return env_dir / "bin" / "peregrine-lab"


def test_version_names_the_lab_and_the_commit(installed):
    out = subprocess.run([installed, "--version"], capture_output=True, text=True, check=True)
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=LAB, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out.stdout.startswith("peregrine-lab 0.1.0 (git " + commit[:12])


def test_outside_server_measured_end_to_end(installed, tmp_path):
    """The whole path for a server the registry does not know, beside a registered one: build
    (nothing), parity, the Date check, the cells in blocked rounds, results.json, report. `mine`
    listens on a port of its own choosing (port=N), `broken` on the one the lab gives ($PORT)."""
    out = tmp_path / "run"
    lab_port = _free_port()
    fixed = next(p for p in iter(_free_port, None) if p not in range(lab_port, lab_port + 10))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    p = subprocess.run(
        [
            installed,
            "framework",
            "--peers",
            str(FIXTURES / "peers.toml"),
            "--servers",
            "peregrine",
            "--scenarios",
            "plaintext,json",
            "--concurrency",
            "4",
            "--pipeline",
            "0",
            "--runs",
            "2",
            "--duration",
            "1",
            "--port",
            str(lab_port),
            "--seed",
            "42",
            "--out",
            str(out),
            "--server",
            f"mine={sys.executable} {SERVER} {fixed};port={fixed};scenarios=plaintext,json;"
            "ready=/json",
            "--server",
            f"broken=FAULT=body {sys.executable} {SERVER};scenarios=plaintext",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "broken: parity MISMATCH on plaintext: body 'Hello, World?', expected" in p.stdout
    res = json.loads((out / "results.json").read_text())
    assert schema.problems(res) == []
    assert res["complete"] and res["settings"]["seed"] == 42 == res["settings"]["order_seed"]
    servers = {s["name"]: s for s in res["servers"]}
    assert list(servers) == ["peregrine", "mine", "broken"]
    assert servers["mine"]["status"] == "ok" and servers["mine"]["label"] == "mine (--server)"
    assert servers["mine"]["port"] == fixed == servers["mine"]["cells_port"]
    assert servers["broken"]["port"] != fixed  # not measured: parity failed
    assert all(v["ok"] for v in servers["mine"]["parity"].values())
    assert servers["mine"]["date_check"]["problems"] == []
    assert servers["broken"]["parity"]["plaintext"]["ok"] is False
    cells = {(c["server"], c["scenario"]): c for c in res["cells"]}
    for who in ("mine", "peregrine"):
        for scen in ("plaintext", "json"):
            cell = cells[(who, scen)]
            assert cell["status"] == "ok" and len(cell["runs"]) == 2, cell
            assert all(r["requests"] > 0 for r in cell["runs"])
    # One process, one thread: all its CPU time is in its schedstat (the contract server's
    # threads per connection may exit before the run's last reading).
    assert all(
        r["cpu_us_per_req"] > 0 for s in ("plaintext", "json") for r in cells[("mine", s)]["runs"]
    )
    broken = cells[("broken", "plaintext")]
    assert broken["status"] == "parity-failed" and broken["runs"] == []
    assert "body 'Hello, World?', expected 'Hello, World!'" in broken["message"]
    report = (out / "report.md").read_text()
    assert "| mine (--server) |" in report and "**broken (--server)** on `plaintext`" in report


def _free_port():
    from test_runner import _free_port as free

    return free()
