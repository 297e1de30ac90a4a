"""The scaling lane (peregrine_lab/scaling.py): its configuration, the CPUs of each worker count,
the model, the ratio's statistics, its report section, and the lane end to end on stand-in
servers (short runs)."""

import shutil
import statistics
from dataclasses import replace
from pathlib import Path

import pytest

from peregrine_lab import config, procs, report, rounds, runner, scaling, scaling_report

FIXTURES = Path(__file__).resolve().parent / "fixtures"


# ---------------------------------------------------------------- configuration


def test_scaling_profile_measures_only_the_lane_at_one_and_two_workers():
    prof = config.PROFILES["scaling"]
    assert prof.scaling is not None and prof.scaling.workers == (1, 2)
    assert prof.scaling.scenario == "plaintext" and prof.scaling.runs >= 5
    # No ordinary cells: every measurement of this profile is the lane's.
    assert prof.cells == () and prof.lanes == ()
    assert prof.probe is None and prof.idle_connections == 0
    assert set(prof.servers) == set(prof.scaling.servers)
    assert "SHARING" in prof.description  # the label is in the profile's own words


def test_standard_has_the_lane_and_quick_does_not():
    assert config.PROFILES["standard"].scaling == config.SCALING_LANE
    assert "scaling lane" in config.PROFILES["standard"].description
    assert config.PROFILES["quick"].scaling is None


def test_every_lane_server_has_a_worker_model_and_a_registry_entry():
    from peregrine_lab.peers import load_peers

    names = {p.name for p in load_peers(config.PEERS_TOML)}
    for server in config.SCALING_SERVERS:
        assert server in names
        assert "WORKERS" in scaling.SCALES_BY[server] or "GOMAXPROCS" in scaling.SCALES_BY[server]
    # Every server of the registry says how it scales (none is left out for lack of a setting).
    assert names <= set(scaling.SCALES_BY)


def test_runs_and_duration_overrides_reach_the_lane():
    prof = config.with_overrides(config.PROFILES["scaling"], runs=2, duration=1.0)
    assert prof.scaling.runs == 2 and prof.scaling.duration == 1.0
    quick = config.with_overrides(config.PROFILES["quick"], runs=2)
    assert quick.scaling is None


def test_the_scaling_profile_plans_no_ordinary_cells():
    from peregrine_lab.peers import load_contract, load_peers

    prof = config.PROFILES["scaling"]
    peers = [p for p in load_peers(config.PEERS_TOML) if p.name in prof.servers]
    planned, unserved = rounds.plan(prof, load_contract().select(prof.scenarios), peers)
    assert planned == [] and unserved == []


def test_planned_seconds_counts_every_worker_count_and_run():
    prof = config.PROFILES["scaling"]
    lane = prof.scaling
    per_server = 2 * (2.0 + prof.warmup + lane.runs * (lane.duration + 0.4))
    assert scaling.planned_seconds(prof, 3) == pytest.approx(3 * per_server)
    assert scaling.planned_seconds(config.PROFILES["quick"], 3) == 0.0


# ---------------------------------------------------------------- CPUs per worker count


def test_two_workers_share_both_cpus_with_the_load_generator_on_two_cpus():
    split = config.cpu_split(cpus=(0, 1))
    one = scaling.split_for(1, split)
    assert one.server == (1,) and one.client == (0,) and not one.notes
    two = scaling.split_for(2, split)
    assert two.server == (0, 1) and two.client == (0, 1) and two.workers == 2
    assert "share" in two.notes[0]
    assert scaling.split_for(3, split) is None


def test_two_workers_keep_their_own_cpus_on_four():
    split = config.cpu_split(cpus=(0, 1, 2, 3))
    two = scaling.split_for(2, split)
    assert two.server == (2, 3) and two.client == (0, 1) and not two.notes
    assert scaling.split_for(1, split).server == (2,)


# ---------------------------------------------------------------- the model


ONE = {"workers": 1, "server_cpus": [1], "client_cpus": [0]}
TWO_SHARED = {"workers": 2, "server_cpus": [0, 1], "client_cpus": [0, 1]}


def test_model_sharing_two_cpus_gives_twice_the_costlier_side_over_both():
    # Server as costly as the load generator: one CPU each does 10^6/10 = 100k/s; two shared
    # CPUs do 2 * 10^6 / 20 = 100k/s: no gain.
    assert scaling.predicted_ratio(10.0, 10.0, ONE, TWO_SHARED) == pytest.approx(1.0)
    # A server 3x as costly: 33.3k/s against 2e6 / 40 = 50k/s.
    assert scaling.predicted_ratio(30.0, 10.0, ONE, TWO_SHARED) == pytest.approx(1.5)
    # A load generator 3x as costly as the server: the same 1.5 (it was the 1-worker limit).
    assert scaling.predicted_ratio(10.0, 30.0, ONE, TWO_SHARED) == pytest.approx(1.5)
    # A nearly free load generator: close to 2x, never above.
    assert scaling.predicted_ratio(30.0, 0.01, ONE, TWO_SHARED) == pytest.approx(2.0, rel=1e-3)
    assert scaling.predicted_ratio(30.0, 0.01, ONE, TWO_SHARED) < 2.0


def test_model_with_the_load_generator_on_cpus_of_its_own():
    one = {"workers": 1, "server_cpus": [2], "client_cpus": [0, 1]}
    two = {"workers": 2, "server_cpus": [2, 3], "client_cpus": [0, 1]}
    # Two client CPUs at 10 µs per request send 200k/s: 2 workers at 20 µs are not capped.
    assert scaling.predicted_ratio(20.0, 10.0, one, two) == pytest.approx(2.0)
    # One client CPU at 10 µs caps at 100k/s: 1 worker at 15 µs does 66.7k/s, 2 workers 100k/s.
    one_c = {**one, "client_cpus": [0]}
    two_c = {**two, "client_cpus": [0]}
    assert scaling.predicted_ratio(15.0, 10.0, one_c, two_c) == pytest.approx(1.5)


def test_capacity_of_each_arrangement():
    assert scaling.capacity(10.0, 10.0, 1, [1], [0]) == pytest.approx(100_000)
    assert scaling.capacity(10.0, 10.0, 2, [0, 1], [0, 1]) == pytest.approx(100_000)
    assert scaling.capacity(10.0, 5.0, 4, [4, 5, 6, 7], [0, 1]) == pytest.approx(400_000)


def test_model_needs_every_figure():
    assert scaling.predicted_ratio(None, 10.0, ONE, TWO_SHARED) is None
    assert scaling.predicted_ratio(10.0, None, ONE, TWO_SHARED) is None
    assert scaling.predicted_ratio(10.0, 0.0, ONE, TWO_SHARED) is None


def test_client_cost_per_request():
    assert scaling.client_us_per_req({"client_cpu_s": 0.5, "requests": 50_000}) == 10.0
    assert scaling.client_us_per_req({"client_cpu_s": None, "requests": 10}) is None
    assert scaling.client_us_per_req({"client_cpu_s": 1.0, "requests": 0}) is None


# ---------------------------------------------------------------- the ratio's statistics


def _cell(server, workers, rps, cpu, status="ok", client=10.0):
    runs = [
        {"rps": r, "cpu_us_per_req": c, "client_us_per_req": client, "server_cpus_other_share": 0.8}
        for r, c in zip(rps, cpu, strict=True)
    ]
    median = {
        "rps": sorted(rps)[len(rps) // 2],
        "cpu_us_per_req": sorted(cpu)[len(cpu) // 2],
        "client_us_per_req": client,
    }
    cpus = [1] if workers == 1 else [0, 1]
    return {
        "server": server,
        "scenario": "plaintext",
        "concurrency": 50,
        "pipeline": 0,
        "workers": workers,
        "server_cpus": cpus,
        "client_cpus": [0] if workers == 1 else [0, 1],
        "status": status,
        "runs": runs,
        "median": median,
    }


def test_ratio_is_the_geometric_mean_ratio_with_an_interval_around_it():
    cells = [
        _cell("a", 1, [100, 102, 98, 101, 99], [10.0, 10.1, 9.9, 10.0, 10.2]),
        _cell("a", 2, [150, 149, 152, 151, 148], [10.5, 10.4, 10.6, 10.5, 10.3]),
    ]
    (r,) = scaling.ratios(cells)
    assert r["server"] == "a" and r["workers"] == 2 and r["base_workers"] == 1
    assert r["rps_ratio"] == pytest.approx(150 / 100, rel=1e-3)
    lo, hi = r["rps_ci"]
    assert lo <= r["rps_ratio"] <= hi and hi - lo < 0.1
    cpu_1, cpu_2 = [10.0, 10.1, 9.9, 10.0, 10.2], [10.5, 10.4, 10.6, 10.5, 10.3]
    per_round = [b / a for a, b in zip(cpu_1, cpu_2, strict=True)]
    assert r["cpu_ratio"] == pytest.approx(statistics.geometric_mean(per_round))
    assert r["cpu_ci"][0] <= r["cpu_ratio"] <= r["cpu_ci"][1]
    # Model: s = 10 µs and g = 10 µs: 2 * 10^6 / 20 against 10^6 / 10, no gain from sharing.
    assert r["predicted_ratio"] == pytest.approx(1.0)


def test_a_wider_spread_gives_a_wider_interval():
    steady = scaling.ratios(
        [_cell("a", 1, [100] * 3 + [101, 99], [10] * 5), _cell("a", 2, [150] * 5, [10] * 5)]
    )[0]
    noisy = scaling.ratios(
        [_cell("a", 1, [60, 140, 100, 80, 120], [10] * 5), _cell("a", 2, [150] * 5, [10] * 5)]
    )[0]
    width = lambda r: r["rps_ci"][1] - r["rps_ci"][0]  # noqa: E731
    assert width(noisy) > width(steady)


def test_a_failed_side_gives_no_ratio():
    cells = [_cell("a", 1, [100, 101], [10, 10]), _cell("a", 2, [150, 151], [10, 10], "failed")]
    (r,) = scaling.ratios(cells)
    assert r["rps_ratio"] is None and r["rps_ci"] is None and r["predicted_ratio"] is None


def test_one_run_gives_a_ratio_without_an_interval():
    (r,) = scaling.ratios([_cell("a", 1, [100], [10]), _cell("a", 2, [180], [10])])
    assert r["rps_ratio"] == pytest.approx(1.8) and r["rps_ci"] is None


# ---------------------------------------------------------------- the report section


def _res():
    cells = [
        _cell("peregrine", 1, [100, 102, 98], [10.0, 10.1, 9.9]),
        _cell("peregrine", 2, [110, 111, 109], [10.5, 10.4, 10.6]),
    ]
    return {
        "scaling": {
            "lane": {"scenario": "plaintext", "runs": 3, "duration": 3.0},
            "label": "load generator sharing the machine",
            "splits": {
                "1": {"server_cpus": [1], "client_cpus": [0], "notes": []},
                "2": {"server_cpus": [0, 1], "client_cpus": [0, 1], "notes": ["share"]},
            },
            "scales_by": {"peregrine": scaling.SCALES_BY["peregrine"]},
            "not_in_lane": ["koa"],
            "cells": cells,
            "ratios": scaling.ratios(cells),
        }
    }


def test_report_section_is_labelled_and_shows_ratio_interval_and_model():
    text = "\n".join(scaling_report.section(_res(), {"peregrine": "Peregrine"}))
    assert "load generator sharing the machine" in text
    assert "shares both CPUs" in text
    row = next(line for line in text.splitlines() if line.startswith("| Peregrine"))
    assert "1.100 [" in row  # median 110 / median 100, then its interval
    assert "| 1.00 |" in row  # the model: 2 max(s, g) / (s + g) with s = g = 10 µs
    assert "SO_REUSEPORT" in text and "koa" in text
    assert "other work took a median 80%" in text and "intervals are wide" in text


def test_report_section_is_empty_without_the_lane():
    assert scaling_report.section({}) == []


# ---------------------------------------------------------------- end to end


def _registry(tmp_path: Path) -> Path:
    # A copy of the stand-ins' registry (its relative dirs made absolute) plus one faulty peer.
    text = (FIXTURES / "peers.toml").read_text().replace('dir = ".."', f'dir = "{FIXTURES.parent}"')
    text += (
        '\n[[peer]]\nname = "wrongbody"\nlabel = "stand-in with a wrong plaintext body"\n'
        'language = "Python"\nkind = "server"\ndir = "' + str(FIXTURES.parent) + '"\n'
        'requires = ["python3"]\nbuild = []\nrun = ["python3", "contract_server.py"]\n'
        'env = { FAULTS = "body" }\nversion = ["python3", "--version"]\n'
        'scenarios = ["plaintext"]\n'
    )
    path = tmp_path / "peers.toml"
    path.write_text(text)
    return path


@pytest.mark.skipif(shutil.which("wrk") is None, reason="wrk not installed")
def test_lane_end_to_end_on_stand_in_servers(tmp_path):
    from test_runner import _free_port

    lane = config.ScalingLane(
        servers=("peregrine", "wrongbody"), cells=((4, 0),), runs=2, duration=1.0
    )
    prof = replace(
        config.PROFILES["scaling"],
        name="test",
        servers=("peregrine", "wrongbody"),
        warmup=0.0,
        scaling=lane,
    )
    opts = runner.Options(
        profile=prof,
        out_dir=tmp_path / "out",
        split=config.cpu_split(),
        port=_free_port(),
        command="test",
        peers_file=_registry(tmp_path),
    )
    res = runner.run(opts)
    assert res["complete"] and res["cells"] == []
    assert res["measuring_seconds"] > 0 and res["planned_measuring_seconds"] > 0
    sc = res["scaling"]
    cells = {(c["server"], c["workers"]): c for c in sc["cells"]}
    one = cells[("peregrine", 1)]
    assert one["status"] == "ok" and len(one["runs"]) == 2
    assert one["server_cpus"] == list(opts.split.server)
    for run in one["runs"]:
        assert run["requests"] > 0 and run["cpu_us_per_req"] > 0
        assert run["client_us_per_req"] > 0
    two = cells[("peregrine", 2)]
    if len(config.available_cpus()) >= 2:
        assert two["status"] == "ok" and len(two["server_cpus"]) == 2
        assert set(two["server_cpus"]) <= set(two["client_cpus"])
        assert sc["label"] == "load generator sharing the machine"
        (r,) = [x for x in sc["ratios"] if x["server"] == "peregrine"]
        assert r["rps_ratio"] > 0 and r["rps_ci"] is not None and r["predicted_ratio"] > 0
    else:
        assert two["status"] == "n/a"
    # The faulty stand-in is caught by the lane's own parity check on each worker count.
    assert cells[("wrongbody", 1)]["status"] == "failed"
    assert "parity" in cells[("wrongbody", 1)]["message"]
    assert cells[("wrongbody", 1)]["runs"] == []
    # Nothing is left running, and the report has the section.
    assert not procs._live
    for c in sc["cells"]:
        if c.get("port"):
            assert not procs.port_in_use("127.0.0.1", c["port"])
    text = report.render(res)
    assert "## Scaling: 1 and 2 workers" in text
    assert "measuring: " in text and ", planned " in text  # the measuring time, and its plan
    assert "## Charts" not in text  # no ordinary cells, so no charts to link


def test_worker_counts_measured_in_the_same_rounds_are_paired():
    # Every (server, workers) cell runs once per round: a load swing shared by both worker
    # counts cancels in the per-round ratio (1.5 in every round).
    load = [1.0, 0.5, 1.5, 0.8, 1.2]
    one = _cell("a", 1, [100 * x for x in load], [10.0] * 5)
    two = _cell("a", 2, [150 * x for x in load], [10.0] * 5)
    for cell in (one, two):
        for k, run in enumerate(cell["runs"]):
            run["round"] = k + 1
    (r,) = scaling.ratios([one, two])
    assert r["rps_method"] == "paired" and r["rps_ratio"] == pytest.approx(1.5)
    assert r["rps_ci"] == pytest.approx([1.5, 1.5])
    text = "\n".join(
        scaling_report.section({"scaling": {**_res()["scaling"], "cells": [one, two]}})
    )
    assert "geometric means of the per-round ratios" in text
    # Without round numbers: the runs' geometric means and a Welch interval, much wider.
    for cell in (one, two):
        for run in cell["runs"]:
            del run["round"]
    (r,) = scaling.ratios([one, two])
    assert r["rps_method"] == "independent" and r["rps_ci"][1] - r["rps_ci"][0] > 0.5
