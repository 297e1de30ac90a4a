import pytest

from peregrine_lab import config, database, rounds, runner
from peregrine_lab.peers import load_contract, load_peers


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
    cells = rounds.plan_cells(quick, scenarios)
    pipelined = [(s.name, c, p) for s, c, p in cells if p > 0]
    assert pipelined == [("plaintext", 50, 16)]
    assert len(cells) == len(scenarios) + 1


def test_every_profile_names_known_scenarios():
    for prof in config.PROFILES.values():
        assert database.profile_contract(prof).select(prof.scenarios)
        # The scaling profile measures through its lane only (scaling.py).
        assert prof.runs >= 1 and (prof.cells or prof.scaling)


def test_standard_lanes_meet_the_method_and_measure_each_cell_once():
    contract = load_contract()
    std = config.PROFILES["standard"]
    peers = load_peers()
    planned, unserved = rounds.plan(std, contract.select(std.scenarios), peers)
    keys = [(p.peer.name, p.scen.name, p.c, p.p, p.mode) for p in planned]
    assert len(keys) == len(set(keys))
    by = {k: p for k, p in zip(keys, planned, strict=True)}
    # The headline: every server that serves plaintext, >= 10 runs of >= 5 s.
    head = [p for p in planned if p.lane == "headline"]
    assert {p.peer.name for p in head} == {x.name for x in peers if "plaintext" in x.scenarios}
    assert all(p.runs >= 10 and p.duration >= 5 for p in head)
    # The seeds' c=1, Kourier's shape, the concurrency sweep to 10,000, the other modes.
    for shape in ((1, 0), (512, 256), (10000, 0)):
        assert ("peregrine-hello", "plaintext", *shape, "keep-alive") in by
    assert ("peregrine-hello", "plaintext", 50, 0, "close") in by
    assert any(p.mode == "open" and p.rates for p in planned)
    # Every server has a CPU per request at one equal offered load: the sweep's first rate.
    first = {
        p.peer.name for p in planned if p.mode == "open" and p.rates[0] == config.OPEN_RATES[0]
    }
    assert first == {x.name for x in peers if "plaintext" in x.scenarios}
    # Peregrine's framework targets get the headline method too.
    assert by[("peregrine", "param", 50, 0, "keep-alive")].runs >= 10
    assert all(c["status"] == "n/a" for c in unserved)


def test_quick_leaves_out_the_standard_profiles_variants_unless_named():
    quick = config.PROFILES["quick"]
    assert "actix-tfb" in quick.skip_servers and "hyper" not in quick.skip_servers
    # The headline's pipelined column has hyper and axum as TechEmpower runs them too.
    assert not {"hyper-flush", "axum-flush"} & set(quick.skip_servers)
    named = config.with_overrides(quick, servers=["actix-tfb"])
    assert named.skip_servers == () and named.servers == ("actix-tfb",)


def test_quick_plans_under_ten_minutes_of_measuring():
    # The runner's estimate, calibrated on a quick run on 2 busy CPUs (632.7 s measured with
    # 3 runs and Express, Hono and Koa; 10.5 min, over budget, so quick dropped them).
    quick = config.PROFILES["quick"]
    peers = [p for p in load_peers() if p.name not in quick.skip_servers]
    planned, _ = rounds.plan(quick, load_contract().select(quick.scenarios), peers)
    assert runner.measuring_estimate(quick, peers, planned) < 540
    assert quick.runs >= 2  # a spread (CV) needs two runs
