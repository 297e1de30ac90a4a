"""The engine profile (config), the "before" engine built from a git ref
(before.py: resolve, git archive, one shared CARGO_TARGET_DIR, reuse, cleanup) with a fake cargo
on a scratch repository, the runner end to end with it, and the before/after report."""

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from peregrine_lab import before, cli, config, report, rounds, runner
from peregrine_lab.peers import load_contract, load_peers

TESTS = Path(__file__).resolve().parent
FIXTURES = TESTS / "fixtures"

# A stand-in for cargo: checks it runs in the exported tree with the lab's arguments, records
# the call, and leaves an executable "hello" where cargo would (a shell script running the
# contract server, so the runner can start and measure it). FAKE_CARGO_FAIL makes it fail.
FAKE_CARGO = f"""#!/bin/sh
set -e
echo "$PWD $CARGO_TARGET_DIR $*" >> "$FAKE_CARGO_CALLS"
[ -z "$FAKE_CARGO_FAIL" ] || {{ echo "error: failing as asked"; exit 3; }}
[ -f Cargo.toml ] || {{ echo "no Cargo.toml in $PWD"; exit 4; }}
[ "$*" = "{" ".join(before.CARGO_ARGS)}" ] || {{ echo "unexpected arguments: $*"; exit 5; }}
mkdir -p "$CARGO_TARGET_DIR/release/examples"
out="$CARGO_TARGET_DIR/release/examples/hello"
printf '#!/bin/sh\\n# built from %s\\nexec {sys.executable} {TESTS / "contract_server.py"}\\n' \
    "$(cat marker)" > "$out"
chmod +x "$out"
"""


def _git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }
    p = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, env=env, check=True
    )
    return p.stdout.strip()


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    """A scratch repository with two commits, a build dir, and the fake cargo first on PATH."""
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "Cargo.toml").write_text("[workspace]\n")
    (repo / "marker").write_text("first")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "first commit")
    first = _git(repo, "rev-parse", "HEAD")
    (repo / "marker").write_text("second")
    _git(repo, "commit", "-q", "-am", "second commit")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    cargo = bin_dir / "cargo"
    cargo.write_text(FAKE_CARGO)
    cargo.chmod(cargo.stat().st_mode | stat.S_IEXEC)
    calls = tmp_path / "cargo-calls"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_CARGO_CALLS", str(calls))
    monkeypatch.delenv("FAKE_CARGO_FAIL", raising=False)
    build_dir = tmp_path / "build"
    monkeypatch.setattr(before, "REPO_DIR", repo)
    monkeypatch.setattr(before, "BUILD_DIR", build_dir)
    return {
        "repo": repo,
        "build": build_dir,
        "calls": calls,
        "first": first,
        "second": _git(repo, "rev-parse", "HEAD"),
    }


def _calls(scratch) -> list[str]:
    p = scratch["calls"]
    return p.read_text().splitlines() if p.exists() else []


def test_engine_profile_measures_the_four_lanes_with_the_before_engine():
    prof = config.PROFILES["engine"]
    assert prof.servers == ("peregrine-hello", before.NAME, "floor", "hyper-flush")
    assert set(prof.cells) == {(1, 0), (50, 0), (64, 16), (64, 256)}
    assert prof.scenarios == ("plaintext",) and prof.probe is None
    assert prof.runs >= 10 and prof.idle_connections > 0
    # The before peer is made by the lab (not in peers.toml) and planned like any other.
    assert before.NAME not in {p.name for p in load_peers()}
    rev = before.Revision("main~1", "ab" * 20, "2026-11-22T21:09:38+00:00", "subject")
    peers = load_peers()
    peers.insert(1, before.peer(rev))
    picked = [p for p in peers if p.name in prof.servers]
    contract = load_contract()
    planned, unserved = rounds.plan(prof, contract.select(prof.scenarios), picked)
    assert not unserved
    keys = {(p.peer.name, p.c, p.p) for p in planned}
    assert keys == {(s, c, p) for s in prof.servers for c, p in prof.cells}
    # The description's "about 25 minutes": the runner's own estimate of the measuring.
    assert "about 25 minutes" in prof.description
    minutes = runner.measuring_estimate(prof, picked, planned) / 60
    assert 22 <= minutes <= 28


def test_default_before_ref_is_the_last_commit_on_main_of_2026_11_22():
    # HEAD's first-parent line, not the branch `main`: CI's clone, a detached checkout or a
    # branch off main all have that line, while a local `main` may be missing or stale.
    shallow = _git(config.REPO_DIR, "rev-parse", "--is-shallow-repository")
    assert shallow == "false", "a shallow clone has no before engine: git fetch --unshallow"
    last = _git(config.REPO_DIR, "log", "--first-parent", "--until=2026-11-23", "-1",
                "--format=%H %cs", "HEAD")  # fmt: skip
    assert last == f"{before.DEFAULT_REF} 2026-11-22"
    assert cli.parser().parse_args(["engine"]).before_ref == before.DEFAULT_REF
    assert cli.parser().parse_args(["engine", "--before-ref", "main~2"]).before_ref == "main~2"


def test_resolve_names_the_commit_with_its_date_and_subject(scratch):
    rev = before.resolve("main~1")
    assert rev.ref == "main~1" and rev.commit == scratch["first"]
    assert rev.subject == "first commit" and rev.date[:2] == "20"
    assert before.resolve(scratch["second"][:9]).commit == scratch["second"]
    with pytest.raises(before.BeforeError, match="names no commit"):
        before.resolve("no-such-branch")


def test_build_exports_the_ref_builds_into_one_target_and_reuses(scratch, tmp_path):
    log_path = tmp_path / "build.log"
    with open(log_path, "w") as log:
        out = before.build(scratch["first"], log=log)
    assert (
        out
        == before.binary_path(scratch["first"])
        == scratch["build"] / ("hello-" + scratch["first"][:12])
    )
    assert os.access(out, os.X_OK) and "built from first" in out.read_text()
    # The scratch sources are gone; what is left is the binary and the one target directory.
    assert sorted(p.name for p in scratch["build"].iterdir()) == [out.name, "target"]
    (call,) = _calls(scratch)
    src, target, *args = call.split()
    assert Path(src).parent == scratch["build"] and Path(src).name.startswith("src-")
    assert target == str(scratch["build"] / "target")
    assert tuple(args) == before.CARGO_ARGS
    # Built already: reused, cargo not run again.
    with open(log_path, "a") as log:
        assert before.build(scratch["first"], log=log) == out
    assert len(_calls(scratch)) == 1 and "reused" in log_path.read_text()
    # Another ref: its own binary, the same target directory (one extra target, not one per ref).
    with open(log_path, "a") as log:
        second = before.build(scratch["second"], log=log)
    assert "built from second" in second.read_text() and "built from first" in out.read_text()
    assert {c.split()[1] for c in _calls(scratch)} == {str(scratch["build"] / "target")}
    assert sorted(p.name for p in scratch["build"].iterdir()) == sorted(
        [out.name, second.name, "target"]
    )


def test_failed_build_is_an_error_and_leaves_no_sources_or_binary(scratch, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_CARGO_FAIL", "1")
    with (
        open(tmp_path / "build.log", "w") as log,
        pytest.raises(before.BeforeError, match="exited with 3"),
    ):
        before.build(scratch["first"], log=log)
    assert "failing as asked" in (tmp_path / "build.log").read_text()
    assert not before.binary_path(scratch["first"]).exists()
    assert not any(p.name.startswith("src-") for p in scratch["build"].iterdir())


def test_build_command_line_reports_errors(scratch, capsys):
    assert before.main(["no-such-ref"]) == 1
    assert "names no commit" in capsys.readouterr().err


def test_the_before_peer_is_added_only_when_named(scratch):
    peers = load_peers()
    assert before.with_before(peers, None, "main") == (peers, None)
    assert before.with_before(peers, ["peregrine-hello"], "main") == (peers, None)
    out, rev = before.with_before(peers, ["peregrine-hello", before.NAME], "main~1")
    names = [p.name for p in out]
    assert names[names.index("peregrine-hello") + 1] == before.NAME
    made = out[names.index(before.NAME)]
    assert rev.commit == scratch["first"] and made.extra["commit"] == scratch["first"]
    assert made.run == [str(before.binary_path(scratch["first"]))]
    assert "--build-dir" in made.build[0] and str(scratch["build"]) in made.build[0]
    with pytest.raises(before.BeforeError):
        before.with_before(peers, [before.NAME], "no-such-ref")


@pytest.mark.skipif(shutil.which("wrk") is None, reason="wrk not installed")
def test_runner_builds_measures_and_records_the_before_engine(scratch, tmp_path):
    prof = config.Profile(
        name="test-engine",
        description="engine profile test",
        servers=("peregrine", before.NAME),
        scenarios=("plaintext",),
        cells=((2, 0),),
        runs=2,
        duration=1.0,
        warmup=0.0,
        idle_connections=10,
        probe=None,
    )
    out = tmp_path / "out"
    opts = runner.Options(
        profile=prof,
        out_dir=out,
        split=config.cpu_split(),
        command="test",
        peers_file=FIXTURES / "peers.toml",
        before_ref="main~1",
    )
    res = runner.run(opts)
    assert res["complete"]
    assert res["before"]["commit"] == scratch["first"] and res["before"]["ref"] == "main~1"
    assert res["before"]["subject"] == "first commit"
    servers = {s["name"]: s for s in res["servers"]}
    entry = servers[before.NAME]
    assert entry["status"] == "ok" and entry["build"]["ok"]
    assert entry["version"].startswith(f"peregrine-server {scratch['first'][:7]}")
    assert "git archive" in (out / "logs" / f"build-{before.NAME}.log").read_text()
    cells = {c["server"]: c for c in res["cells"]}
    assert cells[before.NAME]["status"] == "ok" and len(cells[before.NAME]["runs"]) == 2
    saved = json.loads((out / "results.json").read_text())
    assert saved["before"] == res["before"]
    md = report.render(res)
    assert f"`main~1` = commit `{scratch['first']}`" in md

    # --skip-build with a ref never built: a clear build failure, nothing started for it.
    opts2 = runner.Options(
        profile=config.Profile(
            name="test-engine",
            description="engine profile test",
            servers=(before.NAME,),
            scenarios=("plaintext",),
            cells=((2, 0),),
            runs=1,
            duration=1.0,
            warmup=0.0,
            idle_connections=0,
            probe=None,
        ),
        out_dir=tmp_path / "out2",
        split=config.cpu_split(),
        command="test",
        peers_file=FIXTURES / "peers.toml",
        skip_build=True,
        before_ref="main",
    )
    res2 = runner.run(opts2)
    entry2 = res2["servers"][0]
    assert entry2["status"] == "build-failed" and "--skip-build" in entry2["message"]
    assert res2["cells"][0]["status"] == "build-failed"


def _cell(server, c, p, cpus):
    runs = [{"cpu_us_per_req": v} for v in cpus]
    return {
        "server": server,
        "scenario": "plaintext",
        "concurrency": c,
        "pipeline": p,
        "mode": "keep-alive",
        "status": "ok",
        "runs": runs,
        "median": {"cpu_us_per_req": sorted(cpus)[len(cpus) // 2]},
    }


def _engine_results():
    floor = {(1, 0): 20.0, (50, 0): 8.0, (64, 16): 0.60, (64, 256): 0.050}
    now = {(1, 0): 20.4, (50, 0): 8.4, (64, 16): 0.63, (64, 256): 0.075}
    then = {(1, 0): 23.0, (50, 0): 8.4, (64, 16): 0.72, (64, 256): 0.100}
    cells = []
    for (c, p), f in floor.items():
        spread = (0.99, 1.0, 1.01, 1.0, 0.995, 1.005)
        cells.append(_cell("floor", c, p, [f * k for k in spread]))
        cells.append(_cell("peregrine-hello", c, p, [now[(c, p)] * k for k in spread]))
        cells.append(_cell(before.NAME, c, p, [then[(c, p)] * k for k in spread]))
        cells.append(_cell("hyper-percore", c, p, [f * 3 * k for k in spread]))
    return {
        "schema": 1,
        "profile": "engine",
        "settings": {"reference": "peregrine-hello"},
        "before": {"ref": "main~1", "commit": "c0ffee" * 6 + "beef", "date": "2026-11-22"},
        "servers": [
            {
                "name": "peregrine-hello",
                "idle_memory": {"per_connection_bytes": 900, "opened": 1000},
            },
            {"name": before.NAME, "idle_memory": {"per_connection_bytes": 1100, "opened": 1000}},
            {"name": "floor"},
            {"name": "hyper-percore"},
        ],
        "scenarios": [{"name": "plaintext", "title": "Hello text", "path": "/plaintext"}],
        "cells": cells,
    }


def test_before_after_ratios_intervals_and_issue_thresholds():
    rows = {(r["concurrency"], r["pipeline"]): r for r in report.before_after(_engine_results())}
    assert set(rows) == {(1, 0), (50, 0), (64, 16), (64, 256)}
    assert [rows[k]["limit"] for k in sorted(rows)] == [1.03, 1.03, 1.10, 1.40]
    c1 = rows[(1, 0)]
    assert c1["after"][0] == pytest.approx(1.02) and c1["after"][1][1] < 1.03
    assert c1["met"] is True
    assert c1["before"][0] == pytest.approx(1.15)
    assert c1["after_before"][0] == pytest.approx(20.4 / 23.0)
    assert c1["hyper"][0] == pytest.approx(3.0)
    # 1.05 at c=50: inside the old 1.05 but not the 1.03 that holds now.
    assert rows[(50, 0)]["met"] is False
    assert rows[(64, 16)]["met"] is True  # 1.05 <= 1.10
    assert rows[(64, 256)]["met"] is False  # 1.50: within the old 1.60, not the 1.40 now
    assert rows[(1, 0)]["runs"] == {"peregrine-hello": 6, before.NAME: 6, "floor": 6}


def test_targets_table_has_the_before_rows_and_the_idle_memory_target():
    res = _engine_results()
    t = {x["what"]: x for x in report.targets(res)}
    row = t[
        f"peregrine-hello / {before.NAME}, plaintext, c=64, 256 requests pipelined per connection"
    ]
    assert row["ratio"] == pytest.approx(0.75) and row["met"] is None and row["ci"]
    assert t[f"{before.NAME} / floor, plaintext, c=50, no pipelining"]["issue"] == "before"
    mem = t["peregrine-hello idle memory per keep-alive connection (1000 connections)"]
    assert mem["met"] is True and mem["value_text"] == "0.88 KiB"
    assert (
        t[f"{before.NAME} idle memory per keep-alive connection (1000 connections)"]["met"] is None
    )
    res["servers"][0]["idle_memory"]["per_connection_bytes"] = 1030
    mem = next(x for x in report.targets(res) if x["what"].startswith("peregrine-hello idle"))
    assert mem["met"] is False
    md = report.render(res)
    assert "## Before and after:" in md
    assert "| c=64 × 256 | 1.500 [" in md and "≤ 1.40 (engine, x256)" in md
    assert "< 1 KiB" in md and "1.01 KiB" in md
