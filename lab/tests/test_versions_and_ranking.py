"""What a report says about the servers and tools it measured: every tool's version as actually
run (the peers' node and Bun, not the system node; the Go the peers are built with), the TLS
library beside every TLS comparison, and the rows that do not represent their server shown but
never ranked."""

from __future__ import annotations

import copy
import shutil
import subprocess

import pytest
from test_report import FIXTURE, _section
from test_tls_lanes import _cell, _results

from peregrine_lab import config, peers, report, results, tls_report

# ------------------------------------------------------------------ tool versions


def test_every_installed_tool_has_a_recorded_version():
    tools = results.tool_versions()
    for name, cmd in results.TOOLS.items():
        if shutil.which(results._program(cmd)) is None:
            assert tools[name] is None, name
            continue
        if cmd[0] == "env" and name == "go":
            continue  # may need to fetch the toolchain: checked on its own below
        assert tools[name], f"{name} is installed but its version was recorded empty"
    for tool in ("wrk", "oha", "h2load", "ab", "bombardier", "nginx", "h2o", "openssl", "python"):
        if shutil.which(tool):
            assert tools[tool], tool


def test_node_and_bun_are_the_peers_own_binaries():
    node = results.NODE_PEERS / "node"
    if not node.exists():
        pytest.skip("the Node peers are not installed (npm ci in lab/peers/node)")
    tools = results.tool_versions()
    ran = subprocess.run([str(node), "--version"], capture_output=True, text=True).stdout.strip()
    assert tools["node"] == ran
    openssl = subprocess.run(
        [str(node), "-p", "process.versions.openssl"], capture_output=True, text=True
    ).stdout.strip()
    assert tools["node_openssl"] == openssl and openssl
    if shutil.which("node"):
        system = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout
        assert tools["node_system"] == system.strip()
    if (results.NODE_PEERS / "bun").exists():
        assert tools["bun"] and tools["bun"][0].isdigit()
    line = results.toolchain_line(tools)
    assert f"node (the peers') {ran}" in line


def test_go_is_recorded_as_the_release_the_peers_are_built_with():
    if shutil.which("go") is None:
        pytest.skip("go not installed")
    version = results._first_line(results.TOOLS["go"])
    if version is None:
        pytest.skip(f"{config.GO_TOOLCHAIN} could not be fetched (no module proxy here)")
    assert f"{config.GO_TOOLCHAIN} " in version + " "
    for peer in peers.load_peers():
        if peer.dir.name == "go":
            assert f"GOTOOLCHAIN={config.GO_TOOLCHAIN}" in peer.build[0], peer.name


def test_a_failed_env_command_records_no_version():
    # `env GOTOOLCHAIN=... go version` that cannot fetch its toolchain prints an error on
    # stderr; that error must not be recorded as the version.
    assert (
        results._first_line(["env", "PEREGRINE_LAB_X=1", "sh", "-c", "echo oops >&2; exit 1"])
        is None
    )
    assert results._first_line(["env", "PEREGRINE_LAB_X=1", "sh", "-c", "echo 1.2.3"]) == "1.2.3"
    assert results._program(["env", "A=1", "B=2", "go", "version"]) == "go"


def test_report_toolchain_line_shows_every_tool_and_marks_the_unrecorded():
    res = results.load(FIXTURE)
    res = {**res, "tools": {**res["tools"], "node": "v24.21.0", "node_system": "v20.20.2"}}
    md = report.render(res)
    row = next(ln for ln in md.splitlines() if ln.startswith("| toolchains |"))
    assert "node (the peers') v24.21.0" in row and "system node (runs npm only) v20.20.2" in row
    assert "bun ?" in row and "h2o ?" in row and "openssl ?" in row
    assert "oha 1.16.0" in row and "wrk debian" in row


# ------------------------------------------------------------------ TLS library beside TLS figures


def test_protocols_report_names_the_tls_library_of_every_server():
    res = _results(
        [
            _cell("peregrine-tls", "https", [10, 10.2, 9.9, 10.1, 10.0]),
            _cell("nginx-tls", "https", [12, 12.1, 11.9, 12.2, 12.0]),
            _cell("node-https", "https", [20, 20.1, 19.9, 20.2, 20.0]),
        ]
    )
    res["tools"] = {
        "openssl": "OpenSSL 3.0.19 27 Jan 2026 (Library: OpenSSL 3.0.19 27 Jan 2026)",
        "node_openssl": "3.5.8",
    }
    text = tls_report.render(res)
    targets = _section(text, "## Targets")
    row = next(ln for ln in targets.splitlines() if "HTTPS keep-alive" in ln)
    assert "nginx-tls [OpenSSL 3.0.19 27 Jan 2026]" in row
    lane = _section(text, "## Lane `https`")
    assert "node-https [OpenSSL 3.5.8 (bundled with Node)]" in lane
    assert "peregrine-tls [rustls 0.23, ring]" in lane
    # Results from before the version was recorded still say which library, and that it is unknown.
    del res["tools"]
    assert "nginx-tls [OpenSSL (version not recorded)]" in tls_report.render(res)


# ------------------------------------------------------------------ ranking


def test_a_not_ranked_row_is_shown_but_never_the_best_of_a_column():
    res = copy.deepcopy(results.load(FIXTURE))
    # The floor stand-in has the best figures of the plaintext tables; make it a row that does
    # not represent its server.
    for s in res["servers"]:
        if s["name"] == "floor":
            s["ranked"], s["not_ranked"] = False, "an old distribution build"
    before = _section(report.render(results.load(FIXTURE)), "## Hello text: `GET /plaintext`")
    md = report.render(res)
    sec = _section(md, "## Hello text: `GET /plaintext`, no pipelining")
    floor_before = [ln for ln in before.splitlines() if ln.startswith("| floor stand-in")]
    assert any("**" in ln for ln in floor_before), "the fixture's floor is a column's best"
    floor_rows = [ln for ln in sec.splitlines() if ln.startswith("| floor stand-in † ‡")]
    assert floor_rows and not any("**" in ln for ln in floor_rows), floor_rows
    # Each column still has its best among the ranked servers.
    table = sec.split("**Requests per second**")[1].split("**Server CPU")[0]
    assert table.count("**") >= 2
    assert (
        "‡ not ranked (figures shown, never the best of a column): floor stand-in † ‡: an "
        "old distribution build." in md
    )
    overview = _section(md, "## Overview")
    assert not any("**" in ln for ln in overview.splitlines() if ln.startswith("| floor"))


def test_registry_flags_reach_the_results_summary():
    by = {p.name: p.summary() for p in peers.load_peers()}
    assert by["h2o"]["ranked"] is False and "2.2.5" in by["h2o"]["not_ranked"]
    assert by["nim"]["ranked"] is False and by["nim"]["not_ranked"]
    assert all(s["ranked"] for n, s in by.items() if n not in ("h2o", "nim"))


def test_versions_missing_at_the_start_are_asked_again_at_the_end():
    tools = {name: None for name in results.TOOLS}
    tools["wrk"] = "recorded before"
    results.fill_missing_versions(tools)
    assert tools["wrk"] == "recorded before"
    assert tools == {**results.tool_versions(), "wrk": "recorded before"}
