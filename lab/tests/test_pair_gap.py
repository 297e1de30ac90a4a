"""pair_gap: when each run started (stamped or replayed from the seed), how far apart the runs a
per-round ratio pairs were, and the spread of the ratios by that distance."""

from __future__ import annotations

import json
import math
import random

from peregrine_lab import config, pair_gap

SHAPE = {"scenario": "plaintext", "pipeline": 0, "mode": "keep-alive"}


def _run(rnd, cpu, started_at=None, duration=3.0):
    run = {"round": rnd, "cpu_us_per_req": cpu, "duration_s": duration}
    if started_at is not None:
        run["started_at"] = started_at
    return run


def _cell(server, c, runs, status="ok"):
    return {"server": server, "concurrency": c, "status": status, "runs": runs, **SHAPE}


def test_stamped_runs_give_gaps_and_distances_in_runs():
    # Round 1: a, b, c back to back; round 2: c, x (another cell), a, b.
    res = {
        "settings": {"order": "blocked"},
        "cells": [
            _cell("a", 50, [_run(1, 10.0, 100.0), _run(2, 10.0, 120.0)]),
            _cell("b", 50, [_run(1, 11.0, 103.0), _run(2, 12.0, 123.0)]),
            _cell("c", 50, [_run(1, 9.0, 106.0), _run(2, 9.0, 111.0)]),
            _cell("x", 1, [_run(1, 5.0, 109.0), _run(2, 5.0, 115.0)]),
        ],
    }
    slots, estimated = pair_gap.run_slots(res)
    assert not estimated
    assert slots[("a", ("plaintext", 50, 0, "keep-alive"), 1)] == pair_gap.Slot(0.0, 0)
    ps = {(p.a, p.b, p.round): p for p in pair_gap.pairs(res, slots)}
    assert len(ps) == 6  # 3 pairs of servers x 2 rounds; x has no partner in its cell
    ab1 = ps[("a", "b", 1)]
    assert ab1.apart == 1 and math.isclose(ab1.gap_s, 3.0)
    assert math.isclose(ab1.log_ratio, math.log(10.0 / 11.0))
    ac2 = ps[("a", "c", 2)]
    assert ac2.apart == 2 and math.isclose(ac2.gap_s, 9.0)  # x ran between them


def test_an_interleaved_run_is_replayed_from_its_seed():
    seed, rounds = 42, 3
    names = [("a", 1), ("b", 1), ("a", 50), ("b", 50)]
    cells = [_cell(s, c, [_run(r + 1, 10.0) for r in range(rounds)]) for s, c in names]
    res = {
        "settings": {"order": "interleaved", "order_seed": seed, "warmup": 1.0, "duration": 3.0},
        "measuring_seconds": rounds * 4 * 3.5 + 4 * 1.0,  # 0.5 s per run besides its load
        "cells": cells,
    }
    # The runner's interleaved order: every cell of a round in one shuffle, results order.
    rng, expected = random.Random(seed), []
    for rnd in range(1, rounds + 1):
        order = list(range(len(cells)))
        rng.shuffle(order)
        expected += [(names[i], rnd) for i in order]
    slots, estimated = pair_gap.run_slots(res)
    assert estimated
    got = sorted(slots.items(), key=lambda kv: kv[1].position)
    assert [((k[0], k[1][1]), k[2]) for k, _ in got] == expected
    # Round 1: a 1 s warm-up before each run; then 3 s of load and 0.5 s besides per run.
    assert [round(s.start_s, 6) for _, s in got[:3]] == [1.0, 5.5, 10.0]
    assert math.isclose(got[4][1].start_s, 4 * 4.5)


def test_spread_grows_with_distance_when_the_machine_drifts():
    # Both servers cost the same; a slow drift of the machine multiplies every run's cost.
    rng = random.Random(3)
    cells = {s: [] for s in ("a", "b", "c", "d")}
    t = 0.0
    for rnd in range(1, 41):
        order = list(cells)
        rng.shuffle(order)
        for s in order:
            cost = 10.0 * (1 + 0.2 * math.sin(t / 20)) * (1 + rng.gauss(0, 0.005))
            cells[s].append(_run(rnd, cost, t))
            t += 10.0
    res = {"settings": {}, "cells": [_cell(s, 50, runs) for s, runs in cells.items()]}
    devs = pair_gap.deviations(pair_gap.pairs(res, pair_gap.run_slots(res)[0]))
    s = pair_gap.by_apart(devs, 1)
    assert s["n_near"] + s["n_far"] == 6 * 40
    assert s["sd_far"] > 2 * s["sd_near"]
    assert s["spearman_gap_absdev"] > 0.3
    assert pair_gap.permutation_p(devs, 1, n=200) < 0.05


# The engine profile's run of 2026-11-24 07:55 UTC (20 rounds, interleaved order), as committed
# in lab/results/engine until the blocked order's first run replaced it.
OLD_ENGINE_RUN = config.LAB_DIR / "tests" / "fixtures" / "engine-interleaved-2026-11-24"


def test_committed_engine_run_is_replayed_and_the_table_renders():
    path = OLD_ENGINE_RUN / "results.json"
    res = json.loads(path.read_text())
    slots, estimated = pair_gap.run_slots(res)
    assert estimated and len(slots) == 16 * 20
    assert sorted(s.position for s in slots.values()) == list(range(320))
    text = pair_gap.report(res)
    assert "| c=50, peregrine-hello / floor |" in text
    assert "Control, the order replayed from order_seed + 1" in text
    assert pair_gap.main([str(path.parent)]) == 0


def test_two_servers_back_to_back_have_no_distant_pairs_and_the_table_says_n_a():
    res = {
        "settings": {"order": "blocked"},
        "cells": [
            _cell("a", 50, [_run(1, 10.0, 0.0), _run(2, 10.0, 7.0)]),
            _cell("b", 50, [_run(1, 11.0, 3.0), _run(2, 12.0, 4.0)]),
        ],
    }
    text = pair_gap.report(res)
    assert "| c=50, all 2 servers' pairs | 2 | 3.0 s |" in text
    assert "far/near SD ratio n/a" in text
