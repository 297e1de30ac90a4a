"""The `tfb` profile: TechEmpower's six tests for Peregrine's framework, TechEmpower's Rust leaders
(lab/peers/rust-tfb) and hyper/axum/actix-web in their TechEmpower setups, in one run that loads
both contracts; and every other profile leaving the leaders' cargo project unbuilt."""

from peregrine_lab import config, database, rounds, runner
from peregrine_lab.peers import load_peers, select_peers

TFB = config.PROFILES["tfb"]
SIX = ["plaintext", "json", "db", "queries", "fortunes", "updates"]


def planned_peers(prof):
    """The peers a run of `prof` builds and measures, chosen as runner.run chooses them."""
    registry = load_peers()
    # The engine profile's peregrine-hello-before is added at run time (before.py), not registered.
    known = {p.name for p in registry}
    wanted = [n for n in prof.servers if n in known] if prof.servers else None
    peers = select_peers(registry, wanted)
    peers = database.db_peers(peers, prof) if prof.database else peers
    return [p for p in peers if p.name not in prof.skip_servers]


def test_tfb_runs_the_six_tests_as_techempower_does():
    contract = database.profile_contract(TFB)
    assert [s.name for s in contract.select(TFB.scenarios)] == SIX
    cells = {(s, c) for lane in TFB.lanes for s in lane.scenarios for c in lane.cells}
    assert cells == {("plaintext", (256, 16)), ("plaintext", (256, 0))} | {
        (s, (256, 0)) for s in SIX[1:]
    }
    # The database tests ask for 20 rows, as TechEmpower's headline queries and updates do.
    assert contract.by_name("queries").path == "/queries?q=20"
    assert contract.by_name("updates").path == "/updates?q=20"
    assert TFB.database  # PostgreSQL started, its CPU per request reported apart


def test_tfb_measures_the_framework_against_the_leaders_on_what_each_serves():
    served = {p.name: p.scenarios for p in planned_peers(TFB)}
    assert set(served) == set(config.TFB_SERVERS)
    assert served["peregrine"] == served["peregrine-mimalloc"] == SIX
    assert served["axum-flush"] == served["actix-tfb"] == served["ntex"] == SIX
    # may-minihttp's and xitca-web's entries use database drivers from git (lab/peers/README.md).
    for name in ("may-minihttp", "xitca-web", "hyper-flush"):
        assert served[name] == ["plaintext", "json"], name
    planned, _ = rounds.plan(
        TFB, database.profile_contract(TFB).select(TFB.scenarios), planned_peers(TFB)
    )
    assert runner.measuring_estimate(TFB, planned_peers(TFB), planned) < 30 * 60


def test_the_db_profile_is_unchanged_by_the_mixed_contract():
    db = config.PROFILES["db"]
    assert database.profile_contract(db).names() == ["db", "queries", "fortunes", "updates"]
    for peer in planned_peers(db):
        assert peer.scenarios == list(peer.extra["db_scenarios"]), peer.name


def test_no_other_profile_builds_the_leaders_project():
    leaders = {p.name for p in load_peers() if p.dir.name == "rust-tfb"}
    assert leaders == set(config.TFB_LEADERS)
    for name, prof in config.PROFILES.items():
        if name in ("tfb", "full"):  # full is every server on every scenario, by choice
            continue
        assert not leaders & {p.name for p in planned_peers(prof)}, name
        # Peregrine on mimalloc stands beside the leaders only: the other profiles keep one build.
        assert "peregrine-mimalloc" not in {p.name for p in planned_peers(prof)}, name
