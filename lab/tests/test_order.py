"""The blocked order of a measuring round (order.py) and the runner's rounds with it: the servers
of one cell run back to back, every (server, cell) once per round, a fresh seeded order per round,
a failing server does not stop the others of its block. The load generator and the servers are
stand-ins here (one_run and loadgen.run replaced): no network, no processes."""

from __future__ import annotations

import io
import json
import random
from types import SimpleNamespace

import pytest

from peregrine_lab import config, loadgen, order, report, rounds, runner
from peregrine_lab.peers import load_contract

SERVERS = ("peregrine-hello", "peregrine-hello-before", "hyper-percore", "floor")
SHAPES = ((1, 0), (50, 0), (64, 16), (64, 256))


def _blocks_of(items, seed, rounds):
    rng = random.Random(seed)
    return [order.blocked_round(items, lambda it: it[1], rng) for _ in range(rounds)]


def test_blocked_round_keeps_each_block_together_and_every_item_once():
    items = [(s, shape) for s in SERVERS for shape in SHAPES]
    (blocks,) = _blocks_of(items, 7, 1)
    assert sorted(it for b in blocks for it in b) == sorted(items)
    assert sorted(b[0][1] for b in blocks) == sorted(SHAPES)
    for b in blocks:
        assert {it[1] for it in b} == {b[0][1]} and len(b) == len(SERVERS)


def test_blocked_round_is_reproducible_from_the_seed_and_differs_between_rounds():
    items = [(s, shape) for s in SERVERS for shape in SHAPES]
    a, b = _blocks_of(items, 1795506934, 10), _blocks_of(items, 1795506934, 10)
    assert a == b
    assert len({tuple(tuple(blk) for blk in r) for r in a}) > 1
    # Both the order of the blocks and the order of the servers inside a block change.
    assert len({tuple(blk[0][1] for blk in r) for r in a}) > 1
    assert len({tuple(it[0] for it in r[0]) for r in a}) > 1
    assert _blocks_of(items, 2, 10) != a


class _Server:
    def __init__(self, alive=True):
        self._alive = alive

    def alive(self):
        return self._alive


def _rounds(monkeypatch, *, seed=11, runs=4, warmup=0.0, dead=(), failing=()):
    """Run `_measure_rounds` over SERVERS x SHAPES with stand-ins; returns (calls, planned,
    progress text). calls: (round, server, c, p, what) in the order they ran; `dead` servers
    are not alive, `failing` (server, c, p) cells make the load generator fail."""
    scen = load_contract().by_name("plaintext")
    prof = config.Profile(
        name="t", description="t", runs=runs, duration=1.0, warmup=warmup, probe=None
    )
    peers = {name: SimpleNamespace(name=name) for name in SERVERS}
    closed = [
        rounds.Planned(peers[s], scen, c, p, "keep-alive", "main", runs, 1.0)
        for s in SERVERS
        for c, p in SHAPES
    ]
    port_of = {name: 30000 + i for i, name in enumerate(SERVERS)}
    name_of = {port: name for name, port in port_of.items()}
    live = {name: (_Server(name not in dead), port_of[name]) for name in SERVERS}
    entries = {name: {"parity": {"plaintext": {"ok": True, "wire_bytes": 130}}} for name in SERVERS}
    calls = []
    state = {"round": 0}

    def fake_one_run(opts, server, port, scen, c, p, duration, body, *, mode, wire_bytes):
        name = name_of[port]
        calls.append((state["round"], name, c, p, "run"))
        if (name, c, p) in failing:
            raise loadgen.LoadgenError("wrk did not finish")
        return {
            "rps": 1000.0,
            "cpu_us_per_req": 5.0,
            "p50_us": 10.0,
            "p99_us": 20.0,
            "peak_rss_bytes": 1,
            "db_cpu_us_per_req": None,
            "problems": [],
        }

    def fake_loadgen_run(gen, url, scen, *, concurrency, pipeline, duration, **kw):
        calls.append((state["round"], name_of[int(url.split(":")[2].split("/")[0])], concurrency,
                      pipeline, "warm-up"))  # fmt: skip
        return loadgen.LoadResult(1000, duration, 1, {}, {})

    class _Progress(runner.Progress):
        def line(self, server, what):
            if what.startswith("round "):
                state["round"] = int(what.split()[1].split("/")[0])
            super().line(server, what)

    monkeypatch.setattr(rounds, "one_run", fake_one_run)
    monkeypatch.setattr(runner.loadgen, "run", fake_loadgen_run)
    out = io.StringIO()
    opts = SimpleNamespace(
        profile=prof, loadgen="wrk", split=config.cpu_split(cpus=(0, 1)), seed=seed
    )
    rounds.measure_rounds(opts, closed, live, entries, _Progress(100.0, out), lambda s: None, seed)
    return calls, closed, out.getvalue()


def _runs_by_round(calls):
    by = {}
    for r, name, c, p, what in calls:
        if what == "run":
            by.setdefault(r, []).append((name, c, p))
    return by


def test_each_round_runs_the_servers_of_a_cell_back_to_back(monkeypatch):
    calls, closed, log = _rounds(monkeypatch)
    by = _runs_by_round(calls)
    assert sorted(by) == [1, 2, 3, 4]
    for seq in by.values():
        # Every (server, cell) exactly once per round...
        assert sorted(seq) == sorted((s, c, p) for s in SERVERS for c, p in SHAPES)
        # ...and a cell's servers consecutive: the cell changes only between blocks.
        cells = [(c, p) for _, c, p in seq]
        changes = sum(1 for a, b in zip(cells, cells[1:], strict=False) if a != b)
        assert changes == len(SHAPES) - 1
    assert all(len(pl.record["runs"]) == 4 and pl.record["status"] == "ok" for pl in closed)
    assert [run["round"] for run in closed[0].record["runs"]] == [1, 2, 3, 4]
    assert "round 1/4: 16 cell(s) in 4 block(s)" in log
    assert "block plaintext c=50 pipeline=0: " in log


def test_round_order_differs_between_rounds_and_is_reproducible_from_the_seed(monkeypatch):
    calls, _, _ = _rounds(monkeypatch, seed=5, runs=6)
    again, _, _ = _rounds(monkeypatch, seed=5, runs=6)
    other, _, _ = _rounds(monkeypatch, seed=6, runs=6)
    assert calls == again
    assert calls != other
    by = _runs_by_round(calls)
    assert len({tuple(seq) for seq in by.values()}) > 1
    # The server order within a block is drawn afresh per block, not once per run.
    firsts = {seq[0][0] for seq in by.values()} | {seq[-1][0] for seq in by.values()}
    assert len(firsts) > 1


def test_the_first_round_warms_each_cell_up_just_before_its_run(monkeypatch):
    calls, closed, _ = _rounds(monkeypatch, runs=2, warmup=1.0)
    first = [c for c in calls if c[0] == 1]
    assert len(first) == 2 * len(SERVERS) * len(SHAPES)
    for warm, run in zip(first[::2], first[1::2], strict=True):
        assert warm[4] == "warm-up" and run[4] == "run" and warm[1:4] == run[1:4]
    assert not [c for c in calls if c[0] == 2 and c[4] == "warm-up"]
    assert closed[0].record["warmup"]["requests"] == 1000


@pytest.mark.parametrize("how", ["dead", "failing"])
def test_a_failed_server_in_a_block_does_not_stop_the_others(monkeypatch, how):
    kw = {"dead": ("hyper-percore",)} if how == "dead" else {"failing": {("hyper-percore", 50, 0)}}
    calls, closed, log = _rounds(monkeypatch, **kw)
    by = _runs_by_round(calls)
    for pl in closed:
        name, shape = pl.peer.name, (pl.c, pl.p)
        if name == "hyper-percore" and (how == "dead" or shape == (50, 0)):
            assert pl.record["status"] == "failed" and pl.record["message"]
            assert "FAILED" in log
        else:
            assert pl.record["status"] == "ok" and len(pl.record["runs"]) == 4, (name, shape)
    # A failed cell leaves the later rounds; its block keeps the other servers.
    if how == "failing":
        assert ("hyper-percore", 50, 0) in by[1]
        assert all(("hyper-percore", 50, 0) not in by[r] for r in (2, 3, 4))
        assert all(sum(1 for _, c, p in by[r] if (c, p) == (50, 0)) == 3 for r in (2, 3, 4))


def test_report_order_row_says_which_scheme_and_old_results_still_render():
    # The engine run committed before the blocked order (lab/tests/fixtures, see test_pair_gap).
    old_run = config.LAB_DIR / "tests" / "fixtures" / "engine-interleaved-2026-11-24"
    res = json.loads((old_run / "results.json").read_text())
    assert res["settings"]["order"] == "interleaved"
    assert "cells run in a random order per round (seed 1795506934)" in report.render(res)
    res["settings"]["order"] = order.SCHEME
    md = report.render(res)
    assert "the servers of a cell back to back, in a fresh random order per block" in md
    assert "(seed 1795506934)" in md
    del res["settings"]["order"]
    assert "| order |" not in report.render(res)


def test_scaling_lane_runs_the_worker_counts_of_a_server_back_to_back(monkeypatch):
    from peregrine_lab import scaling

    scen = load_contract().by_name("plaintext")
    lane = config.ScalingLane(servers=("a", "b"), cells=((50, 0), (1, 0)), runs=3)
    cells = [
        {"server": s, "scenario": "plaintext", "concurrency": c, "pipeline": p, "workers": w,
         "status": "ok", "message": "", "runs": []}
        for s in ("a", "b") for w in (1, 2) for c, p in lane.cells
    ]  # fmt: skip
    port_of = {(s, w): 31000 + 10 * i + w for i, s in enumerate(("a", "b")) for w in (1, 2)}
    key_of = {port: key for key, port in port_of.items()}
    opts = SimpleNamespace(
        profile=config.Profile(name="t", description="t", warmup=0.0, probe=None),
        loadgen="wrk",
        split=config.cpu_split(cpus=(0, 1)),
    )
    live = {key: (_Server(), port, opts) for key, port in port_of.items()}
    seen = []

    def fake_one_run(cell_opts, server, port, scen, c, p, duration, body, wire_bytes=None):
        seen.append((*key_of[port], c))
        return {"rps": 1.0, "cpu_us_per_req": 1.0, "client_cpu_s": 0.1, "requests": 10,
                "problems": []}  # fmt: skip

    monkeypatch.setattr(rounds, "one_run", fake_one_run)
    out = io.StringIO()
    scaling._rounds(opts, lane, scen, cells, live, runner.Progress(9.0, out), lambda s: None, 4)
    assert len(seen) == 3 * 8
    for r in range(3):
        seq = seen[8 * r : 8 * (r + 1)]
        assert sorted(seq) == sorted((s, w, c) for s in "ab" for w in (1, 2) for c in (50, 1))
        for i in range(0, 8, 2):  # blocks of 2: one server, one shape, both worker counts
            (s1, w1, c1), (s2, w2, c2) = seq[i], seq[i + 1]
            assert (s1, c1) == (s2, c2) and {w1, w2} == {1, 2}
    assert all(len(cell["runs"]) == 3 for cell in cells)


def test_protocols_profile_runs_the_servers_of_a_mode_back_to_back(monkeypatch):
    from peregrine_lab import tls_lanes

    scen = load_contract().by_name("plaintext")
    modes = ("https", "handshake")
    peers = [SimpleNamespace(name=n) for n in ("peregrine", "nginx", "go")]
    entries = {
        p.name: {"status": "ok", "parity": {"https": {"ok": True, "wire_bytes": 1}}} for p in peers
    }
    live = {p.name: (_Server(), 32000 + i) for i, p in enumerate(peers)}
    name_of = {port: name for name, (_, port) in live.items()}
    seen = []

    def fake_one_run(opts, server, port, mode, scen, duration, cert, wire=None, n=None):
        seen.append((name_of[port], mode))
        return {"rps": 1.0, "cpu_us_per_req": 1.0, "problems": []}

    monkeypatch.setattr(tls_lanes, "one_run", fake_one_run)
    monkeypatch.setattr(tls_lanes, "_load", lambda *a, **k: (SimpleNamespace(rps=100.0), None))
    res = {"cells": []}
    opts = SimpleNamespace(runs=4, duration=1.0)
    cells = [(p, m) for p in peers for m in modes]
    tls_lanes._measure(opts, cells, live, entries, res, scen, None, 9)
    assert len(seen) == 4 * 6
    for r in range(4):
        seq = seen[6 * r : 6 * (r + 1)]
        assert sorted(seq) == sorted((p.name, m) for p in peers for m in modes)
        assert len({m for _, m in seq[:3]}) == 1 and len({m for _, m in seq[3:]}) == 1
    assert len({tuple(seen[6 * r : 6 * r + 6]) for r in range(4)}) > 1
    assert all(c["status"] == "ok" and len(c["runs"]) == 4 for c in res["cells"])
