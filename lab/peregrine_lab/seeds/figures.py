"""The figures the tables compare, in one shape for both sides: `table -> row -> column ->
{"rps", "sd", "p50", "p99", "avg", "timeouts"}` (req/s; latencies in ms), from a run's
results.json (ours: medians of the runs, or mean ± standard deviation where the seed reported
that) and from the seeds' published figures (theirs)."""

from __future__ import annotations

import statistics

from .. import stats
from . import published

MEAN_SD_TABLES = ("bombardier",)
"""Tables whose seed printed mean ± deviation (Lemire); the others print medians or one run."""


def _ms(v):
    return None if v is None else v / 1000


def cell_figures(table: str, runs: list[dict]) -> dict | None:
    """One cell's figures over its runs; None when no run counted."""
    if not runs:
        return None
    rps = [r["rps"] for r in runs]
    lat = [r["latency_us"] for r in runs]
    mean_sd = table in MEAN_SD_TABLES or table.startswith("wrk:")
    return {
        "rps": statistics.fmean(rps) if mean_sd else stats.median(rps),
        # Only where the seed printed a deviation (its layout); the others print medians.
        "sd": statistics.stdev(rps) if mean_sd and len(rps) > 1 else None,
        "p50": _ms(stats.median(x.get("p50") for x in lat)),
        "p99": _ms(stats.median(x.get("p99") for x in lat)),
        "avg": _ms(stats.median(x.get("mean") for x in lat)),
        "timeouts": sum(r["errors"].get("timeout", 0) for r in runs),
        "runs": len(runs),
    }


def ours(exp_results: dict, checks: bool = False) -> dict:
    """Our figures by table, row label (lanes that are checks only when `checks`), column."""
    out: dict = {}
    for lane in exp_results.get("lanes", []):
        if bool(lane.get("check")) != checks:
            continue
        for cell in lane["cells"]:
            f = cell_figures(cell["table"], cell["runs"])
            if f is not None:
                out.setdefault(cell["table"], {}).setdefault(lane["row"], {})[cell["column"]] = f
    return out


def seed_rows(exp_results: dict) -> dict[str, str]:
    """Our row label -> the seed row it re-runs."""
    return {
        lane["row"]: lane["seed_row"]
        for lane in exp_results.get("lanes", [])
        if lane.get("seed_row") and not lane.get("check")
    }


def _f(rps, p50=None, p99=None, **more) -> dict:
    return {"rps": rps, "p50": p50, "p99": p99, **more}


def theirs(name: str) -> dict:
    """The seed's published figures in the same shape."""
    out: dict = {}
    if name == "nurl":
        d = published.NURL
        for row, m in d["rows"].items():
            for i, c in enumerate(d["concurrency"]):
                out.setdefault("oha", {}).setdefault(row, {})[c] = _f(
                    m["rps"][i], m["p50_ms"][i], m["p99_ms"][i]
                )
    elif name == "rust-http":
        for table in ("ab", "wrk"):
            d = published.RUST_HTTP[table]
            for row in ("Node", "Go", "Rust"):
                for i, c in enumerate(d["concurrency"]):
                    out.setdefault(table, {}).setdefault(row, {})[c] = _f(d[row][i])
    elif name == "kourier":
        for row, m in published.KOURIER["rows"].items():
            out.setdefault("wrk", {})[row] = {
                512: _f(m["rps"], m["p50_ms"], m["p99_ms"], avg=m["avg_ms"], timeouts=m["timeouts"])
            }
    elif name == "nextrush":
        for scen, rows in published.NEXTRUSH["autocannon"].items():
            for row, (rps, p50, p99) in rows.items():
                out.setdefault(f"autocannon:{scen}", {})[row] = {100: _f(rps, p50, p99)}
        for scen, by_c in published.NEXTRUSH["wrk"].items():
            for c, (rps, sd, p50, p99) in by_c.items():
                out.setdefault(f"wrk:{scen}", {}).setdefault("NextRush v3", {})[c] = _f(
                    rps, p50, p99, sd=sd
                )
    elif name == "lemire":
        for row, (m10, sd10, m1000, sd1000) in published.LEMIRE["rows"].items():
            out.setdefault("bombardier", {})[row] = {
                10: _f(m10, sd=sd10),
                1000: _f(m1000, sd=sd1000),
            }
    return out


def ratio_rows(ours_t: dict, theirs_t: dict, mapping: dict, reference: str, limit=0.20):
    """Ratios to `reference` of every system present in both tables, per column: (seed row,
    column, ratio in the seed, ratio here, relative difference, flagged)."""
    ref_here = next((r for r, s in mapping.items() if s == reference), None)
    rows = []
    if ref_here is None or ref_here not in ours_t or reference not in theirs_t:
        return rows
    for here, seed_row in mapping.items():
        if seed_row == reference or here not in ours_t or seed_row not in theirs_t:
            continue
        for col, f in sorted(ours_t[here].items()):
            ref_f = ours_t[ref_here].get(col)
            t, t_ref = theirs_t[seed_row].get(col), theirs_t[reference].get(col)
            if not (ref_f and t and t_ref):
                continue
            r_here = stats.ratio(f["rps"], ref_f["rps"])
            r_seed = stats.ratio(t["rps"], t_ref["rps"])
            diff = stats.ratio(r_here, r_seed)
            if diff is None:
                continue
            rows.append((seed_row, col, r_seed, r_here, diff - 1, abs(diff - 1) > limit))
    return rows


def placements(ours_t: dict, theirs_t: dict, mapping: dict, reference: str, not_rerun):
    """Our rows without a seed row (Peregrine) against the seed's rows that were not re-run,
    only through the reference both tables share: (ours / ref here) x (ref / theirs in the
    seed). Yields (our row, seed row, column, estimated ratio)."""
    ref_here = next((r for r, s in mapping.items() if s == reference), None)
    out = []
    if ref_here is None or ref_here not in ours_t or reference not in theirs_t:
        return out
    for here, by_col in ours_t.items():
        if here in mapping:
            continue
        for seed_row in not_rerun:
            for col, f in sorted(by_col.items()):
                ref_f = ours_t[ref_here].get(col)
                t = theirs_t.get(seed_row, {}).get(col)
                t_ref = theirs_t[reference].get(col)
                if ref_f and t and t_ref:
                    est = stats.ratio(f["rps"], ref_f["rps"]) * stats.ratio(t_ref["rps"], t["rps"])
                    out.append((here, seed_row, col, est))
    return out
