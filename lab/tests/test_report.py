"""Report and charts from a stored results.json (a real run of the lab against the Python stand-in
servers of fixtures/peers.toml, with 2 concurrency levels, pipelining and the probe)."""

import copy
import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from peregrine_lab import charts, cli, config, report, report_tables, report_verdicts, results

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "results.json"


@pytest.fixture(scope="module")
def res():
    return results.load(FIXTURE)


def _section(md: str, title_start: str) -> str:
    start = md.index(title_start)
    end = md.find("\n## ", start + 1)
    return md[start : end if end > 0 else None]


def test_tables_have_servers_as_rows_and_concurrency_as_columns(res):
    md = report.render(res)
    sec = _section(md, "## Hello text: `GET /plaintext`, no pipelining")
    assert "**Requests per second** (higher is better)" in sec
    assert "| server | c = 1 | c = 8 |" in sec
    rows = [line for line in sec.splitlines() if line.startswith("| contract server")]
    assert rows, sec


def test_best_per_column_is_bold_and_unique_per_column(res):
    md = report.render(res)
    sec = _section(md, "## Hello text: `GET /plaintext`, no pipelining")
    table = sec.split("**Requests per second**")[1].split("**Server CPU")[0]
    lines = [ln for ln in table.splitlines() if ln.startswith("| ") and "server |" not in ln]
    cols = list(
        zip(*[[c.strip() for c in ln.strip("|").split("|")][1:] for ln in lines], strict=True)
    )
    for col in cols:
        assert sum(1 for c in col if c.startswith("**")) == 1, col


def test_best_value_is_the_maximum_rps(res):
    cells = [
        c
        for c in res["cells"]
        if c["scenario"] == "plaintext"
        and c["pipeline"] == 0
        and c["concurrency"] == 8
        and c["status"] == "ok"
    ]
    best = max(c["median"]["rps"] for c in cells)
    md = report.render(res)
    assert f"**{best:,.0f}**" in md


def test_ratios_to_peregrine_and_status_words(res):
    md = report.render(res)
    assert (
        "Ratios in parentheses are to **contract server (Python, stands in for Peregrine)**" in md
    )
    assert "×)" in md  # ratios present for the other servers
    faulty_param = [
        ln
        for ln in _section(md, "## Route parameter").splitlines()
        if ln.startswith("| faulty server")
    ]
    assert faulty_param and "parity ✗" in faulty_param[0]
    assert "no start" in md and "skipped" in md
    # A scenario the floor stand-in does not serve shows n/a, never a number.
    json_floor = [
        ln
        for ln in _section(md, "## JSON message").splitlines()
        if ln.startswith("| floor stand-in")
    ]
    assert json_floor and set(c.strip() for c in json_floor[0].strip("|").split("|")[1:]) == {"n/a"}


def test_parity_failures_and_compliance_sections(res):
    md = report.render(res)
    par = _section(md, "## Parity mismatches")
    assert "faulty server" in par and "`param`" in par and "user-43" in par
    servers = _section(md, "## Servers, memory and compliance")
    assert "idle KiB / keep-alive conn" in servers
    comp = [s for s in res["servers"] if (s.get("compliance") or {}).get("status") == "ok"]
    assert comp, "the fixture holds probe results"
    assert f"{comp[0]['compliance']['score']}%" in servers
    fails = _section(md, "## Failures")
    assert "server that exits at once" in fails and "peer whose toolchain is missing" in fails


def test_report_marks_incomplete_runs(res):
    partial = copy.deepcopy(res)
    partial["complete"] = False
    assert "**Incomplete run**" in report.render(partial)


def test_targets_compute_engine_and_framework_ratios():
    def cell(server, scenario, c, p, cpu):
        return {
            "server": server,
            "scenario": scenario,
            "concurrency": c,
            "pipeline": p,
            "status": "ok",
            "median": {"cpu_us_per_req": cpu},
        }

    res = {
        "settings": {"cells": [[50, 0], [64, 16]]},
        "cells": [
            cell("peregrine-hello", "plaintext", 50, 0, 8.2),
            cell("floor", "plaintext", 50, 0, 8.0),
            cell("peregrine-hello", "plaintext", 64, 16, 0.9),
            cell("floor", "plaintext", 64, 16, 0.6),
            cell("hyper", "plaintext", 64, 16, 1.2),
            cell("peregrine", "plaintext", 50, 0, 10.0),
            cell("peregrine", "param", 50, 0, 10.5),
            cell("peregrine", "json", 50, 0, 11.5),
        ],
    }
    t = {x["what"]: x for x in report.targets(res)}
    piped = t["peregrine-hello / floor, plaintext, c=64, 16 requests pipelined per connection"]
    assert piped["ratio"] == pytest.approx(1.5)
    assert t["peregrine param / plaintext, c=50, no pipelining"]["ratio"] == pytest.approx(1.05)
    # The framework against the bare engine on the same answer, with its own limits.
    fw = t["peregrine / peregrine-hello, plaintext, c=50, no pipelining"]
    assert fw["ratio"] == pytest.approx(10.0 / 8.2) and fw["limit"] == 1.05
    assert fw["issue"] == "framework / engine, c=50"
    # Cells without their runs have no interval: the ratios are shown, no target is decided
    # (below 2 runs the intervals' coverage is not established: test_stats_coverage.py).
    assert {x["met"] for x in t.values()} == {None}
    rows = [ln for ln in report_verdicts.targets_lines(res) if ln.startswith("| peregrine")]
    assert rows and all("(none: no verdict)" in r and r.endswith("|  |") for r in rows)


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory):
    """`./scripts/lab report DIR` on a copy of the stored results (charts are the slow part:
    made once for the tests below)."""
    d = tmp_path_factory.mktemp("report")
    shutil.copy(FIXTURE, d / "results.json")
    assert cli.main(["report", str(d)]) == 0
    return d


def test_report_command_regenerates_from_json(regenerated):
    md = (regenerated / "report.md").read_text()
    assert md == report.render(json.loads(FIXTURE.read_text()))


def test_report_command_fails_clearly_without_results(tmp_path, capsys):
    assert cli.main(["report", str(tmp_path / "missing")]) == 1
    assert "cannot read results" in capsys.readouterr().err


def test_charts_are_valid_svg_with_server_labels(res, regenerated, tmp_path):
    made = sorted((regenerated / "charts").glob("*.svg"))
    assert [p.name for p in made] == ["cpu.svg", "latency.svg", "memory.svg", "throughput.svg"]
    for p in made:
        root = ET.parse(p).getroot()
        assert root.tag.endswith("svg")
        assert "contract server" in p.read_text()  # labels kept as text (svg.fonttype none)
    # Deterministic output: the same results give the same bytes.
    again = sorted(charts.write_all(res, tmp_path))
    for a, b in zip(made, again, strict=True):
        assert a.read_bytes() == b.read_bytes(), a.name


def test_version_text_shortens_cargo_pkgids():
    assert (
        report.version_text("registry+https://github.com/rust-lang/crates.io-index#hyper@1.12.0")
        == "hyper 1.12.0"
    )
    assert report.version_text("path+file:///work/main/crates/peregrine#0.1.0") == "peregrine 0.1.0"
    assert report.version_text("v20.20.2") == "v20.20.2"
    assert report.version_text(None) == "?"


def test_header_states_quietness_overrides_and_time_split(res):
    md = report.render(res)
    assert "| other work on the server CPUs | median " in md
    assert "**Changed on the command line**: scenarios plaintext json param error empty" in md
    assert "(building: " in md and "measuring: " in md
    assert "Latency is not reported for pipelined cells" in md
    # Pipelined groups have no latency columns at all.
    sec = _section(md, "## Hello text: `GET /plaintext`, 4 requests pipelined per connection")
    assert "Latency" not in sec and "Requests per second" in sec


def test_probe_scores_of_servers_without_the_body_scenario_are_marked(res):
    """The probe's accepted-body cases need POST /users: a server that does not serve it gets its
    score marked as not comparable, and only such servers do."""
    servers = _section(report.render(res), "## Servers, memory and compliance")
    lines = [line for line in servers.splitlines() if line.startswith("| ")]
    rows = {line.split("|")[1].strip(): line for line in lines}
    labels = {s["name"]: s.get("label", s["name"]) for s in res["servers"]}
    for s in res["servers"]:
        if (s.get("compliance") or {}).get("status") != "ok":
            continue
        row = next(v for k, v in rows.items() if k.startswith(labels[s["name"]]))
        assert ("‡" in row) == (report.PROBE_BODY_SCENARIO not in s["scenarios"]), s["name"]
    assert "does not serve `post_json`" in servers


def _with_rounds(res: dict, server: str, values: list[float]) -> None:
    """Give every cell of `server` runs numbered by round with CPU figures `values`."""
    for cell in res["cells"]:
        if cell["server"] == server and cell["status"] == "ok":
            cell["runs"] = [
                {"round": i + 1, "cpu_us_per_req": v, "rps": 1000.0} for i, v in enumerate(values)
            ]
            cell["median"]["cpu_us_per_req"] = sorted(values)[len(values) // 2]


def test_report_pairs_ratios_by_round_and_says_so(res):
    # The fixture's runs carry no round numbers: every ratio falls back to independent.
    md = report.render(res)
    assert report.methods_used(res, "peregrine") == {"independent"}
    assert "| ratios | a ratio is geometric mean / geometric mean" in md
    # Round-tagged runs with a drift both servers shared: the ratio shown is the geometric mean
    # of the per-round ratios (1.5 in every round), not median / median, its interval 0 wide.
    paired = copy.deepcopy(res)
    _with_rounds(paired, "peregrine", [100.0, 200.0, 400.0])
    _with_rounds(paired, "floor", [150.0, 300.0, 600.0])
    for c in paired["cells"]:
        if c["server"] not in ("peregrine", "floor"):
            c["runs"] = [{k: v for k, v in r.items() if k != "round"} for r in c["runs"]]
    md = report.render(paired)
    assert report.methods_used(paired, "peregrine") == {"paired", "independent"}
    row = next(ln for ln in md.splitlines() if ln.startswith("| ratios |"))
    assert "geometric mean of its per-round ratios" in row and "fewer than 2 rounds" in row
    assert "(used by some ratios here)" in row
    sec = _section(md, "## Hello text: `GET /plaintext`, no pipelining")
    floor = [ln for ln in sec.split("**Server CPU")[1].splitlines() if "floor stand-in" in ln]
    assert floor and "(1.50× [1.50–1.50])" in floor[0], floor
    ref = {"status": "ok", "runs": [{"round": 1, "cpu_us_per_req": 2.0}]}
    est = report.ratio_estimate(ref, ref, "cpu_us_per_req")
    assert est.method == "independent" and est.ci is None  # one shared round cannot pair


def test_targets_and_before_after_use_the_paired_ratio():
    def cell(server, cpus):
        return {
            "server": server,
            "scenario": "plaintext",
            "concurrency": 50,
            "pipeline": 0,
            "status": "ok",
            "median": {"cpu_us_per_req": sorted(cpus)[len(cpus) // 2]},
            "runs": [{"round": i + 1, "cpu_us_per_req": v} for i, v in enumerate(cpus)],
        }

    # The load doubled from round to round; the engine cost 1.02× the floor in every round.
    # Independently resampled, the interval would span 0.25–4; paired, it is 1.02–1.02.
    floor = [8.0, 16.0, 32.0, 64.0, 128.0]
    res = {
        "cells": [
            cell("peregrine-hello", [v * 1.02 for v in floor]),
            cell("floor", floor),
            cell(report.BEFORE, [v * 1.10 for v in floor]),
        ],
        "before": {"ref": "main~3", "commit": "0" * 40},
    }
    t = {x["what"]: x for x in report.targets(res)}
    eng = t["peregrine-hello / floor, plaintext, c=50, no pipelining"]
    assert eng["method"] == "paired" and eng["ratio"] == pytest.approx(1.02)
    assert eng["ci"] == pytest.approx((1.02, 1.02)) and eng["met"] is True
    rows = report.before_after(res)
    after_ratio, after_ci = rows[0]["after"]
    assert after_ratio == pytest.approx(1.02) and after_ci == pytest.approx((1.02, 1.02))
    assert rows[0]["after_before"][0] == pytest.approx(1.02 / 1.10)
    md = "\n".join(report._before_after_lines(res))
    assert "geometric mean of the per-round ratios" in md
    # Without round numbers the same runs give the independent interval, far wider.
    for c in res["cells"]:
        for r in c["runs"]:
            del r["round"]
    wide = {x["what"]: x for x in report.targets(res)}
    eng = wide["peregrine-hello / floor, plaintext, c=50, no pipelining"]
    assert eng["method"] == "independent" and eng["ci"][1] - eng["ci"][0] > 1.0
    assert eng["met"] is False


def test_every_table_shows_bytes_per_response_and_server_busy_share():
    run = {"requests": 1000, "bytes": 150_000, "server_cpu_s": 0.9, "duration_s": 1.0, "rps": 1e3}
    cell = {
        "server": "peregrine",
        "scenario": "plaintext",
        "concurrency": 50,
        "pipeline": 0,
        "status": "ok",
        "runs": [run, {**run, "bytes": 152_000, "server_cpu_s": 0.7}],
        "median": {"rps": 1e3, "cpu_us_per_req": 4.0},
    }
    res = {
        "settings": {"server_cpus": [1]},
        "servers": [{"name": "peregrine"}],
        "scenarios": [{"name": "plaintext", "title": "Hello"}],
        "cells": [cell, {**cell, "concurrency": 10}],
    }
    # Results made before the two were recorded per run: taken from each run's figures.
    med = report_tables.derive_medians(res)["cells"][0]["median"]
    assert med["bytes_per_response"] == pytest.approx(151.0)
    assert med["server_busy_share"] == pytest.approx(0.8)
    md = report.render(res)
    # One table per metric at several concurrency levels: both are tables of their own.
    assert "**Bytes per response** (as received)" in md
    assert "**Server CPU busy** (share of its CPUs)" in md
    assert "| peregrine | 151 | 151 |" in md and "| peregrine | 80% | 80% |" in md


def test_open_loop_table_tells_a_sweep_from_the_fixed_rate_lane():
    def rec(server, rates, lane):
        pts = [{"offered_rps": r, "rps": r, "p99_us": 900.0, "cpu_us_per_req": 5.0} for r in rates]
        return {"server": server, "scenario": "plaintext", "lane": lane, "points": pts,
                "knee_rps": None, "status": "ok", "message": ""}  # fmt: skip

    res = {
        "servers": [{"name": "peregrine"}, {"name": "koa"}],
        "cells": [],
        "open_loop": [rec("peregrine", (5000, 10000), "open"), rec("koa", (5000,), "fixed-rate")],
    }
    md = report.render(res)
    assert "| peregrine | 5.00 | 5.00 | > swept |" in md
    assert "| koa | 5.00 | n/a | one rate |" in md


def test_pipelined_hyper_and_axum_figures_say_where_pipeline_flush_is():
    from peregrine_lab.report_tables import _flush_note

    assert _flush_note(0, ["hyper"]) == [] and _flush_note(16, ["peregrine"]) == []
    (text, _) = _flush_note(16, ["peregrine", "hyper", "axum", "hyper-flush"])
    assert "`pipeline_flush(true)`" in text and "not in this run: axum-flush;" in text
    (both, _) = _flush_note(16, ["hyper", "hyper-flush"])
    assert "not in this run" not in both


def test_closing_note_sets_each_peer_beside_its_benchmark_setup():
    def cell(server, p, cpus, status="ok"):
        return {
            "server": server,
            "scenario": "plaintext",
            "concurrency": 50,
            "pipeline": p,
            "status": status,
            "median": {"cpu_us_per_req": sorted(cpus)[len(cpus) // 2]},
            "runs": [{"round": i + 1, "cpu_us_per_req": v} for i, v in enumerate(cpus)],
        }

    res = {
        "servers": [{"name": "express", "label": "Express"}, {"name": "node-http"}],
        "cells": [
            cell("express", 0, [20.0, 40.0, 80.0]),
            cell("node-http", 0, [10.0, 20.0, 40.0]),
            cell("express-tfb", 0, [12.0, 24.0]),  # fewer rounds: paired on the two shared
            cell("peregrine", 16, [1.0, 1.0, 1.0]),
            cell("hyper-flush", 16, [1.5, 1.6, 1.4], status="failed"),
            cell("axum-flush", 0, [1.5, 1.6, 1.4]),  # not pipelined: not the note's shape
        ],
    }
    rows = [ln for ln in report_verdicts.setup_lines(res) if ln.startswith("| ")][1:]
    assert rows == [
        "| Express / node-http, no pipelining | 2.00× | 2.00–2.00 | 3 | paired | "
        "idiomatic Express over the node:http it runs on |",
        "| express-tfb / node-http, no pipelining | 1.20× | 1.20–1.20 | 2 | paired | "
        "TechEmpower's Express over node:http |",
        "| Express / express-tfb, no pipelining | 1.67× | 1.67–1.67 | 3 | paired | "
        "what Express's idioms (ETag, res.send) cost |",
    ]
    assert "## Closing note: each peer beside its benchmark setup" in report.render(res)
    assert report_verdicts.setup_lines({"cells": res["cells"][3:]}) == []


@pytest.mark.parametrize("kind", ["soak", "restart"])
def test_report_command_rewrites_the_soak_and_restart_reports(tmp_path, kind):
    committed = config.LAB_DIR / "results" / kind
    shutil.copy(committed / "results.json", tmp_path / "results.json")
    assert cli.main(["report", str(tmp_path)]) == 0
    md = (tmp_path / "report.md").read_text()
    title = "# Soak: " if kind == "soak" else "# Rolling restart under load: "
    assert md.startswith(title) and "> Made at commit `" in md and "behind HEAD" in md
