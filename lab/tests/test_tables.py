"""`compare A B`, `export --csv`, the intervals the charts draw as error bars, the schema every
committed results.json follows, and the builds' time left."""

import copy
import csv
import json
from pathlib import Path

import pytest

from peregrine_lab import charts, cli, eta, schema, tables

LAB = Path(__file__).resolve().parents[1]
FIXTURE = LAB / "tests" / "fixtures" / "results.json"


def _run(tmp_path, name, scale_rps):
    """The fixture's run with every run's requests/s scaled, saved as NAME/results.json."""
    res = json.loads(FIXTURE.read_text())
    for cell in res["cells"]:
        for r in cell["runs"]:
            r["rps"] *= scale_rps
    d = tmp_path / name
    d.mkdir()
    (d / "results.json").write_text(json.dumps(res))
    return d, res


def test_compare_flags_what_moved_beyond_its_interval(tmp_path):
    a_dir, a = _run(tmp_path, "a", 1.0)
    same = tables.compare_rows(a, copy.deepcopy(a))
    assert same and all(r["rps"]["ratio"] == pytest.approx(1.0) for r in same)
    assert not any(r[m]["changed"] for r in same for m, _ in tables.METRICS)
    b_dir, b = _run(tmp_path, "b", 2.0)
    rows = tables.compare_rows(a, b)
    several = [r for r in rows if min(r["runs"]) >= 2]
    assert several, "the fixture has cells with 2+ runs"
    for r in several:
        assert r["rps"]["ratio"] == pytest.approx(2.0)
        assert r["rps"]["changed"] is True  # every run doubled: the interval lies above 1
        cpu = r["cpu_us_per_req"]
        assert cpu["changed"] is (None if cpu["ci"] is None else False)  # the same CPU runs
    md = tmp_path / "cmp.md"
    assert cli.main(["compare", str(a_dir), str(b_dir), "--md", str(md)]) == 0
    text = md.read_text()
    assert "**2.000 [1.637–2.443]**" in text and "| server | scenario |" in text
    assert f"Changed beyond the interval: {len(several)} of {len(rows) * 2}." in text


def test_compare_lists_cells_one_side_lacks(tmp_path):
    _, a = _run(tmp_path, "a", 1.0)
    b = copy.deepcopy(a)
    gone = next(c for c in b["cells"] if c["status"] == "ok")
    b["cells"].remove(gone)
    text = tables.compare_markdown(a, b, "a", "b")
    assert f"Measured only in `a`: {'/'.join(map(str, tables.cell_key(gone)))}" in text


def test_compare_and_export_usage_errors(tmp_path, capsys):
    assert cli.main(["compare", str(tmp_path)]) == 2
    assert "usage: peregrine-lab compare A B" in capsys.readouterr().err
    assert cli.main(["export", str(tmp_path)]) == 2  # no --csv
    assert cli.main(["compare", str(tmp_path), str(tmp_path)]) == 1
    assert "cannot read results" in capsys.readouterr().err


def test_export_writes_one_row_per_run_and_per_cell(tmp_path):
    res = json.loads(FIXTURE.read_text())
    assert cli.main(["export", str(FIXTURE.parent), "--csv", str(tmp_path)]) == 0
    runs = list(csv.DictReader((tmp_path / "runs.csv").open()))
    cells = list(csv.DictReader((tmp_path / "cells.csv").open()))
    assert len(runs) == sum(len(c["runs"]) for c in res["cells"])
    assert len(cells) == len(res["cells"])
    first = next(c for c in res["cells"] if c["runs"])
    row = next(r for r in runs if r["server"] == first["server"])
    assert float(row["rps"]) == first["runs"][0]["rps"]
    summary = next(
        r
        for r in cells
        if (r["server"], r["scenario"], int(r["concurrency"]), int(r["pipeline"]))
        == (first["server"], first["scenario"], first["concurrency"], first["pipeline"])
    )
    assert float(summary["rps_median"]) == first["median"]["rps"]
    lo, hi = tables.run_interval(r["rps"] for r in first["runs"])
    assert (float(summary["rps_ci_low"]), float(summary["rps_ci_high"])) == (lo, hi)


def test_run_interval_is_the_medians_interval_or_the_range():
    assert tables.run_interval([1.0]) is None
    assert tables.run_interval([2.0, None, 1.0, 3.0]) == (1.0, 3.0)
    # 9 runs: the distribution-free 95% interval drops the extreme order statistic on each side.
    assert tables.run_interval([1, 2, 3, 4, 5, 6, 7, 8, 100]) == (2.0, 8.0)


def test_error_bars_reach_from_the_median_to_the_interval():
    cells = [
        {"status": "ok", "median": {"rps": 10.0}, "runs": [{"rps": v} for v in (8, 10, 13)]},
        {"status": "ok", "median": {"rps": 5.0}, "runs": [{"rps": 5.0}]},
    ]
    assert charts._err(cells, "rps", 2.0) == [[4.0, 0.0], [6.0, 0.0]]


def test_every_bar_chart_draws_error_bars(tmp_path):
    res = json.loads(FIXTURE.read_text())
    made = charts.write_all(res, tmp_path)
    bars = [p for p in made if p.stem in ("throughput", "cpu", "latency", "memory")]
    assert len(bars) == 4
    for p in bars:
        # matplotlib writes each error bar as a LineCollection: an SVG group of paths.
        assert 'id="LineCollection_1"' in p.read_text(), p.name


@pytest.mark.parametrize(
    "path", sorted((LAB / "results").rglob("results.json")), ids=lambda p: p.parent.name
)
def test_committed_results_follow_their_schema(path):
    assert schema.check_file(path) == []


def test_schema_catches_a_broken_results_json():
    res = json.loads(FIXTURE.read_text())
    assert schema.problems(res) == []
    res["schema"] = 2
    assert schema.schema_name(res) == "results-v2.json"
    with pytest.raises(ValueError, match="no schema results-v2.json"):
        schema.problems(res)
    res["schema"] = 1
    res["cells"][0]["runs"].append({"requests": -1, "rps": 1.0, "cpu_us_per_req": None})
    del res["servers"][0]["status"]
    found = schema.problems(res)
    assert any(p.startswith("cells/0/runs/") and "-1 is less than the minimum" in p for p in found)
    assert any(p == "servers/0: 'status' is a required property" for p in found)


def test_countdown_estimates_from_the_steps_done():
    t = [100.0]
    c = eta.Countdown(4, now=lambda: t[0])
    assert c.left(0) == "0:00 elapsed, time left not known yet"
    t[0] = 130.0
    assert c.left(1) == "0:30 elapsed, ~1:30 left"
    assert eta.clock(3725) == "1:02:05"
