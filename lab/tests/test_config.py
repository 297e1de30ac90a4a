import pytest

from peregrine_lab import config, runner
from peregrine_lab.peers import load_contract


def test_parse_cpu_list():
    assert config.parse_cpu_list("1") == (1,)
    assert config.parse_cpu_list("0,2") == (0, 2)
    assert config.parse_cpu_list("2-4,0") == (0, 2, 3, 4)
    with pytest.raises(ValueError):
        config.parse_cpu_list("3-1")
    with pytest.raises(ValueError):
        config.parse_cpu_list("")


def test_default_split_gives_server_the_second_half():
    s = config.cpu_split(cpus=(0, 1))
    assert s.server == (1,) and s.client == (0,) and s.workers == 1 and not s.notes
    s4 = config.cpu_split(cpus=(0, 1, 2, 3))
    assert s4.server == (2, 3) and s4.client == (0, 1) and s4.server_list == "2,3"


def test_explicit_split_and_overlap_note():
    s = config.cpu_split("2-3", None, cpus=(0, 1, 2, 3))
    assert s.server == (2, 3) and s.client == (0, 1)
    single = config.cpu_split(cpus=(0,))
    assert single.server == (0,) and single.client == (0,)
    assert single.notes and "overlap" in single.notes[0]


def test_overrides_make_a_product_of_dimensions():
    quick = config.PROFILES["quick"]
    p = config.with_overrides(quick, concurrency=[1, 10], pipeline=[0, 16])
    assert set(p.cells) == {(1, 0), (10, 0), (1, 16), (10, 16)}
    assert p.sweep_scenarios is None
    # Only concurrency given: the profile's pipelining depths are kept.
    p2 = config.with_overrides(quick, concurrency=[200])
    assert set(p2.cells) == {(200, 0), (200, 16)}
    p3 = config.with_overrides(quick, runs=5, duration=2, servers=["floor"], scenarios=["json"])
    assert (p3.runs, p3.duration, p3.servers, p3.scenarios) == (5, 2, ("floor",), ("json",))


def test_quick_plan_pipelines_only_plaintext_on_main_scenarios():
    contract = load_contract()
    quick = config.PROFILES["quick"]
    scenarios = contract.select(quick.scenarios)
    assert [s.name for s in scenarios] == [s.name for s in contract.scenarios if s.main]
    cells = runner.plan_cells(quick, scenarios)
    pipelined = [(s.name, c, p) for s, c, p in cells if p > 0]
    assert pipelined == [("plaintext", 50, 16)]
    assert len(cells) == len(scenarios) + 1


def test_every_profile_names_known_scenarios():
    contract = load_contract()
    for prof in config.PROFILES.values():
        assert contract.select(prof.scenarios)
        assert prof.runs >= 1 and prof.cells


def test_standard_sweeps_headline_scenarios_and_measures_others_once():
    contract = load_contract()
    std = config.PROFILES["standard"]
    cells = runner.plan_cells(std, contract.select(std.scenarios))
    per = {}
    for s, c, p in cells:
        per.setdefault(s.name, []).append((c, p))
    assert set(per["plaintext"]) == set(std.cells) and set(per["json"]) == set(std.cells)
    assert per["param"] == [(50, 0)] and per["empty"] == [(50, 0)]
    assert set(per) == set(contract.names())
