"""How the spread of per-round ratios grows with the time between the two runs they pair.

A per-round ratio A_k / B_k cancels the machine's drift only as far as A_k and B_k shared it. In
the interleaved order (every (server, cell) of a round shuffled together) the two runs can be a
minute apart; in the blocked order (order.py) the servers of a cell run back to back, 1 to
(servers - 1) runs apart. This reads a results.json, finds when each run started (its
`started_at`, or for interleaved runs without it the round's order replayed from `order_seed`
and a timeline rebuilt from the runs' durations), and compares the spread of the per-round
ratios (their log's deviation from the median of their lane and pair) by how far apart the paired
runs were.

    PYTHONPATH=lab python3 -m peregrine_lab.pair_gap lab/results/engine/results.json
"""

from __future__ import annotations

import itertools
import json
import math
import random
import statistics
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

KEY = "cpu_us_per_req"
RUN_OVERHEAD_S = 0.35
"""Seconds between two runs besides their load, when results.json has no `measuring_seconds` to
derive it from: the runner's own estimate (`rounds.cell_estimate`)."""


def cell_key(cell: dict) -> tuple:
    return (cell["scenario"], cell["concurrency"], cell["pipeline"], cell.get("mode", "keep-alive"))


@dataclass(frozen=True)
class Slot:
    start_s: float
    """Seconds from the first run's start (estimated when `estimated`)."""
    position: int
    """Index of the run in the whole measuring sequence."""


def _replayed_interleaved(res: dict) -> dict[tuple, Slot]:
    """Start of each (server, cell, round) of an interleaved run, replaying runner's shuffle of
    that order (every closed-loop cell of a round in one `rng.shuffle`, cells in results order,
    a cell out of the rounds after the one it failed in)."""
    st = res["settings"]
    rng = random.Random(st["order_seed"])
    cells = [c for c in res["cells"] if c["status"] in ("ok", "failed") and "runs" in c]
    last_round = {
        id(c): len(c["runs"]) + (1 if c["status"] == "failed" else 0) for c in cells
    }  # a failed cell was in the round it failed in, without a run
    runs_by_round = [{run["round"]: run for run in c["runs"]} for c in cells]
    rounds = max(last_round.values(), default=0)
    overhead = _overhead(res, cells, rounds)
    out, t, pos = {}, 0.0, 0
    for r in range(rounds):
        order = [(c, runs) for c, runs in zip(cells, runs_by_round, strict=True)]
        order = [(c, runs) for c, runs in order if last_round[id(c)] > r]
        rng.shuffle(order)
        for c, runs in order:
            t += _warmup(st, r, c["concurrency"])
            run = runs.get(r + 1)
            if run is not None:
                out[(c["server"], cell_key(c), r + 1)] = Slot(t, pos)
            t += (run or {}).get("duration_s") or st.get("duration", 0.0)
            t += overhead
            pos += 1
    return out


def _warmup(st: dict, r: int, c: int) -> float:
    warm = st.get("warmup", 0.0) if r == 0 else st.get("round_warmup", 0.0)
    return max(warm, c / 2000) if r == 0 and warm > 0 else warm


def _overhead(res: dict, cells: list[dict], rounds: int) -> float:
    """Seconds per run besides its warm-up and load: the measuring time left over, spread evenly
    (an upper bound: it includes the servers' checks before the rounds)."""
    st = res["settings"]
    items = sum(min(rounds, len(c["runs"]) + (c["status"] == "failed")) for c in cells)
    busy = sum(run.get("duration_s") or 0.0 for c in cells for run in c["runs"])
    busy += sum(_warmup(st, 0, c["concurrency"]) for c in cells)
    if not res.get("measuring_seconds") or not items:
        return RUN_OVERHEAD_S
    return max(0.0, (res["measuring_seconds"] - busy) / items)


def run_slots(res: dict) -> tuple[dict[tuple, Slot], bool]:
    """{(server, cell key, round): Slot} and whether the times are estimated (replayed)."""
    stamped = [
        (run["started_at"], c["server"], cell_key(c), run["round"])
        for c in res["cells"]
        for run in c.get("runs") or []
        if run.get("started_at") is not None and run.get("round") is not None
    ]
    if stamped:
        stamped.sort()
        t0 = stamped[0][0]
        return {(s, k, r): Slot(t - t0, i) for i, (t, s, k, r) in enumerate(stamped)}, False
    if res.get("settings", {}).get("order") == "interleaved":
        return _replayed_interleaved(res), True
    raise ValueError("runs carry no started_at and the order is not a replayable interleaved one")


@dataclass(frozen=True)
class Pair:
    cell: tuple
    a: str
    b: str
    round: int
    log_ratio: float
    gap_s: float
    apart: int
    """How many runs apart in the sequence (1 = back to back)."""


def pairs(res: dict, slots: dict[tuple, Slot], servers: Iterable[str] | None = None) -> list[Pair]:
    """Every per-round ratio between two servers of a cell (ok cells), with its gap."""
    wanted = set(servers) if servers else None
    by_cell: dict[tuple, list[dict]] = {}
    for c in res["cells"]:
        if c["status"] == "ok" and (wanted is None or c["server"] in wanted):
            by_cell.setdefault(cell_key(c), []).append(c)
    out = []
    for key, cells in by_cell.items():
        for ca, cb in itertools.combinations(sorted(cells, key=lambda c: c["server"]), 2):
            rb = {run["round"]: run for run in cb["runs"]}
            for run in ca["runs"]:
                other = rb.get(run["round"])
                sa = slots.get((ca["server"], key, run["round"]))
                sb = slots.get((cb["server"], key, run["round"]))
                if other is None or sa is None or sb is None:
                    continue
                if not run.get(KEY) or not other.get(KEY):
                    continue
                out.append(
                    Pair(
                        key,
                        ca["server"],
                        cb["server"],
                        run["round"],
                        math.log(run[KEY] / other[KEY]),
                        abs(sa.start_s - sb.start_s),
                        abs(sa.position - sb.position),
                    )
                )
    return out


def deviations(ps: list[Pair]) -> list[tuple[Pair, float]]:
    """Each pair's log ratio minus the median of its (cell, a, b): the drift it carries."""
    med = {}
    for k, group in itertools.groupby(
        sorted(ps, key=lambda p: (p.cell, p.a, p.b)), key=lambda p: (p.cell, p.a, p.b)
    ):
        med[k] = statistics.median(p.log_ratio for p in group)
    return [(p, p.log_ratio - med[(p.cell, p.a, p.b)]) for p in ps]


def robust_sd(xs: list[float]) -> float | None:
    """1.4826 x the median absolute deviation from 0 (the deviations are already centred): the
    standard deviation for normal data, not moved by the odd outlier run."""
    return 1.4826 * statistics.median(abs(x) for x in xs) if xs else None


def spearman(xs: list[float], ys: list[float]) -> float | None:
    if len(xs) < 3:
        return None

    def ranks(v):
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for k in range(i, j + 1):
                r[order[k]] = (i + j) / 2
            i = j + 1
        return r

    rx, ry = ranks(xs), ranks(ys)
    mx, my = statistics.fmean(rx), statistics.fmean(ry)
    num = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    den = math.sqrt(sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry))
    return num / den if den else None


def by_apart(devs: list[tuple[Pair, float]], near: int) -> dict:
    """Spread of the deviations of pairs at most `near` runs apart (what the blocked order
    gives with near + 1 servers per cell) against those further apart, and all of them."""
    close = [d for p, d in devs if p.apart <= near]
    far = [d for p, d in devs if p.apart > near]
    alld = [d for _, d in devs]
    return {
        "near": near,
        "n_near": len(close),
        "n_far": len(far),
        "sd_near": robust_sd(close),
        "sd_far": robust_sd(far),
        "sd_all": robust_sd(alld),
        "median_gap_near_s": statistics.median(p.gap_s for p, _ in devs if p.apart <= near)
        if close
        else None,
        "median_gap_far_s": statistics.median(p.gap_s for p, _ in devs if p.apart > near)
        if far
        else None,
        "spearman_gap_absdev": spearman([p.gap_s for p, _ in devs], [abs(d) for _, d in devs]),
    }


def far_near_ratio(devs: list[tuple[Pair, float]], near: int) -> float | None:
    s = by_apart(devs, near)
    return s["sd_far"] / s["sd_near"] if s["sd_near"] and s["sd_far"] else None


def permutation_p(devs: list[tuple[Pair, float]], near: int, n: int = 2000, seed: int = 1):
    """Share of `n` random reassignments of the pairs' distances (same counts near and far)
    whose far/near SD ratio is at least the observed one: how often chance alone gives it.
    Pairs of one round share runs, so they are not independent: read it as a rough guide."""
    observed = far_near_ratio(devs, near)
    if observed is None:
        return None
    rng = random.Random(seed)
    aparts = [p.apart for p, _ in devs]
    hits = 0
    for _ in range(n):
        rng.shuffle(aparts)
        close = [d for a, (_, d) in zip(aparts, devs, strict=True) if a <= near]
        far = [d for a, (_, d) in zip(aparts, devs, strict=True) if a > near]
        if robust_sd(far) / robust_sd(close) >= observed:
            hits += 1
    return hits / n


def _p(p: float | None, n: int) -> str:
    if p is None:
        return "n/a"
    return f"< {1 / n:.4f} (none of {n})" if p == 0 else f"= {p:.4f}"


def _f2(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.2f}%"


def _s(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1f} s"


def _row(label: str, s: dict) -> str:
    rho = s["spearman_gap_absdev"]
    ratio = s["sd_far"] / s["sd_near"] if s["sd_near"] and s["sd_far"] else None
    return (
        f"| {label} | {s['n_near']} | {_s(s['median_gap_near_s'])} | {_pct(s['sd_near'])} | "
        f"{s['n_far']} | {_s(s['median_gap_far_s'])} | {_pct(s['sd_far'])} | "
        f"{'n/a' if ratio is None else f'{ratio:.2f}'} | {_pct(s['sd_all'])} | "
        f"{'n/a' if rho is None else f'{rho:+.2f}'} |"
    )


def report(res: dict, focus: tuple[str, str] = ("floor", "peregrine-hello")) -> str:
    """A markdown table: per lane, the `focus` pair and all pairs of servers, then every lane."""
    slots, estimated = run_slots(res)
    servers = sorted({c["server"] for c in res["cells"] if c["status"] == "ok"})
    near = max(1, len(servers) - 1)
    every = pairs(res, slots)
    devs = deviations(every)
    lanes = sorted({p.cell for p in every}, key=lambda k: (k[0], k[1], k[2], k[3]))
    lines = [
        f"Per-round ratios of {KEY} (log, minus the median of their lane and pair): robust SD "
        f"(1.4826 x MAD) for pairs at most {near} run(s) apart (what the blocked order gives "
        f"with {len(servers)} servers) and further apart; start times "
        + (
            "estimated (the round order replayed from order_seed; each run's duration, the "
            "first round's warm-ups, and the measuring time left over spread evenly over the runs)"
            if estimated
            else "from the runs' started_at"
        )
        + "; rho = Spearman correlation of the gap with |deviation|.",
        "",
        f"| lane, pair | n ≤{near} apart | median gap | SD | n further | median gap | SD | "
        "SD ratio far/near | SD all | rho |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for lane in lanes:
        name = f"c={lane[1]}" + (f" x{lane[2]}" if lane[2] else "")
        mine = [(p, d) for p, d in devs if p.cell == lane]
        fp = [(p, d) for p, d in mine if {p.a, p.b} == set(focus)]
        if fp:
            lines.append(_row(f"{name}, {focus[1]} / {focus[0]}", by_apart(fp, near)))
        lines.append(_row(f"{name}, all {len(servers)} servers' pairs", by_apart(mine, near)))
    lines.append(_row("every lane, every pair", by_apart(devs, near)))
    lines += [
        "",
        f"Every lane, every pair: far/near SD ratio {_f2(far_near_ratio(devs, near))}, "
        f"permutation p {_p(permutation_p(devs, near), 2000)} (2000 random reassignments of "
        "the distances; pairs of one round share runs, so a rough guide).",
    ]
    if estimated:
        # A wrong replay puts runs at random places: the effect should vanish.
        wrong = []
        for d in (1, 2, 3):
            other = {**res, "settings": {**res["settings"]}}
            other["settings"]["order_seed"] = res["settings"]["order_seed"] + d
            wrong.append(far_near_ratio(deviations(pairs(other, run_slots(other)[0])), near))
        lines.append(
            "Control, the order replayed from order_seed + 1, + 2, + 3 (a wrong order): "
            f"far/near SD ratio {', '.join(_f2(w) for w in wrong)}."
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python3 -m peregrine_lab.pair_gap RESULTS.json|DIR", file=sys.stderr)
        return 2
    path = Path(args[0])
    path = path / "results.json" if path.is_dir() else path
    print(report(json.loads(path.read_text())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
