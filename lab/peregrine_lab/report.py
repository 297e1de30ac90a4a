"""The Markdown report, made from results.json alone (so `./scripts/lab report DIR` can redo it).

Tables follow the seeds' layout: servers as rows, concurrency levels as columns, the best value of
each column in bold, and each figure's ratio to Peregrine. A cell that was not measured says why
(n/a: the server does not serve that scenario; parity: its answer differs from the contract)."""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

from . import db_report, resilience, results, scaling_report, stats

NA = "n/a"

# The scenario the probe sends its accepted requests with bodies to (probe/README.md).
PROBE_BODY_SCENARIO = "post_json"

# metric key in cell["median"], title, unit note, higher-is-better, formatter
METRICS = [
    ("rps", "Requests per second", "higher is better", True, lambda v: f"{v:,.0f}"),
    ("cpu_us_per_req", "Server CPU µs per request", "lower is better", False, lambda v: f"{v:.2f}"),
    ("p50_us", "Latency p50 (ms)", "lower is better", False, lambda v: f"{v / 1000:.2f}"),
    ("p99_us", "Latency p99 (ms)", "lower is better", False, lambda v: f"{v / 1000:.2f}"),
    (
        "peak_rss_bytes",
        "Peak RSS under load (MiB, fresh process)",
        "lower is better",
        False,
        lambda v: f"{v / 2**20:.1f}",
    ),
]

# Cells whose answer is a constant the server was given (a string in its config or a static
# file), not an answer built per request: flagged wherever they appear.
CONSTANT_ANSWERS = {
    ("nginx", "json"): "a constant string in nginx.conf, not JSON serialised per request",
    ("nginx", "large_json"): "a static file (sendfile), not JSON serialised per request",
    ("h2o", "json"): "a static file, not JSON serialised per request",
    ("h2o", "large_json"): "a static file, not JSON serialised per request",
    ("h2o", "plaintext"): "a static file",
}
CONST_MARK = " §"

# issue targets: (numerator, denominator, shape test, limit, issue); the first that matches a
# shape applies. Issue 16 tightened issue 3's c=50 and x16 targets; issue 18 added c=1 and x256.
ENGINE_TARGETS = [
    ("peregrine-hello", "floor", lambda c, p: c == 1 and p <= 1, 1.05, "issue 18, c=1"),
    ("peregrine-hello", "floor", lambda c, p: c == 50 and p <= 1, 1.03, "issue 16, c=50"),
    ("peregrine-hello", "floor", lambda c, p: p <= 1 and c > 1, 1.05, "issue 3"),
    ("peregrine-hello", "floor", lambda c, p: 1 < p <= 16, 1.10, "issue 16, x16"),
    ("peregrine-hello", "floor", lambda c, p: p >= 256, 1.60, "issue 18, x256"),
]
BEFORE = "peregrine-hello-before"
"""The engine built from another commit (before.py): the "before" of issue 16's before/after."""
IDLE_LIMIT_BYTES = 1024
"""Issue 16: idle memory per keep-alive connection of the engine stays under 1 KiB."""

STATUS_TEXT = {
    "n/a": NA,
    "parity-failed": "parity ✗",
    "failed": "failed",
    "start-failed": "no start",
    "build-failed": "no build",
    "skipped": "skipped",
}


def reference_server(res: dict) -> str | None:
    """The server ratios are taken to: the configured one if present, else the first whose name
    starts with "peregrine"."""
    names = [s["name"] for s in res.get("servers", [])]
    ref = res.get("settings", {}).get("reference", "peregrine")
    if ref in names:
        return ref
    return next((n for n in names if n.startswith("peregrine")), None)


def _server_order(res: dict) -> list[str]:
    return [s["name"] for s in res.get("servers", [])]


def _labels(res: dict) -> dict[str, str]:
    out = {}
    for s in res.get("servers", []):
        label = s.get("label") or s["name"]
        if s.get("kind") == "floor":
            label += " †"
        if s.get("ranked") is False:
            label += " ‡"
        out[s["name"]] = label
    return out


def unranked(res: dict) -> dict[str, str]:
    """Servers whose row does not represent their server (peers.toml `not_ranked`), with why:
    their figures are shown but never bold as the best of a column."""
    return {
        s["name"]: s.get("not_ranked") or "not ranked"
        for s in res.get("servers", [])
        if s.get("ranked") is False
    }


def _unranked_note(res: dict, labels: dict) -> list[str]:
    out = unranked(res)
    if not out:
        return []
    reasons = "; ".join(f"{labels.get(n, n)}: {why}" for n, why in out.items())
    return [f"‡ not ranked (figures shown, never the best of a column): {reasons}.", ""]


def groups(res: dict, mode: str = "keep-alive") -> OrderedDict[tuple[str, int], dict]:
    """Cells of one mode (keep-alive, or close: a connection per request) grouped by (scenario,
    pipeline) → {(server, concurrency): cell}, in scenario order."""
    order = [s["name"] for s in res.get("scenarios", [])]
    out: OrderedDict = OrderedDict()
    cells = sorted(
        (c for c in res.get("cells", []) if c.get("mode", "keep-alive") == mode),
        key=lambda c: (order.index(c["scenario"]) if c["scenario"] in order else 99, c["pipeline"]),
    )
    for c in cells:
        out.setdefault((c["scenario"], c["pipeline"]), {})[(c["server"], c["concurrency"])] = c
    return out


def _value(cell: dict | None, key: str):
    if not cell or cell.get("status") != "ok":
        return None
    return (cell.get("median") or {}).get(key)


def _best(values: list, higher: bool):
    vals = [v for v in values if v is not None]
    if not vals:
        return None
    return max(vals) if higher else min(vals)


def ratio_estimate(cell: dict | None, ref_cell: dict | None, key: str):
    """cell / reference cell for `key` with its 95% interval (`stats.ratio_estimate`: the
    geometric mean of the per-round ratios with a paired t interval on their logs when both were
    measured in the same interleaved rounds, geometric means with a Welch t interval otherwise);
    None when either cell is missing or failed."""
    if not cell or not ref_cell or cell.get("status") != "ok" or ref_cell.get("status") != "ok":
        return None
    est = stats.ratio_estimate(cell.get("runs") or [], ref_cell.get("runs") or [], key)
    if est is None:
        # Cells recorded without their runs: the ratio of their medians, no interval.
        r = stats.ratio(_value(cell, key), _value(ref_cell, key))
        est = None if r is None else stats.RatioEstimate(r, None, stats.INDEPENDENT)
    return est


def ratio_ci(cell: dict | None, ref_cell: dict | None, key: str):
    """The 95% interval of `ratio_estimate` (None when there is none)."""
    est = ratio_estimate(cell, ref_cell, key)
    return est.ci if est else None


def methods_used(res: dict, ref: str | None) -> set[str]:
    """Which ratio methods (`stats.PAIRED`, `stats.INDEPENDENT`) the report's ratios of server
    CPU per request to `ref` (same cell shape, keep-alive and close) use, for the method row."""
    out = set()
    for mode in ("keep-alive", "close"):
        for cells in groups(res, mode).values():
            for (server, conc), cell in cells.items():
                ref_cell = cells.get((ref, conc))
                if server == ref or not ref_cell:
                    continue
                if cell.get("status") != "ok" or ref_cell.get("status") != "ok":
                    continue
                runs = (cell.get("runs") or [], ref_cell.get("runs") or [])
                out.add(stats.ratio_method(*runs, "cpu_us_per_req"))
    return out


RATIO_METHOD_TEXT = {
    stats.PAIRED: "a ratio between two servers is the geometric mean of its per-round ratios "
    "(round k of both ran in the same interleaved round, so the ratio cancels the load drift "
    "both shared between rounds), [a–b] the paired Student t 95% interval on the logs of those "
    "ratios (n − 1 degrees of freedom; simulated coverage ≥ 93% from 2 rounds, "
    "docs/measuring.md)",
    stats.INDEPENDENT: "a ratio is geometric mean / geometric mean, [a–b] the Welch t 95% "
    "interval on the difference of the two servers' mean log figures",
}


def _ratio_method_row(res: dict, ref: str | None) -> list[str]:
    used = methods_used(res, ref)
    if not used:
        return []
    if used == {stats.INDEPENDENT}:
        return [f"| ratios | {RATIO_METHOD_TEXT[stats.INDEPENDENT]} |"]
    text = RATIO_METHOD_TEXT[stats.PAIRED]
    fallback = (
        f"; where two cells share fewer than {stats.MIN_PAIRED_ROUNDS} rounds or their runs "
        f"carry no round number, {RATIO_METHOD_TEXT[stats.INDEPENDENT]}"
    )
    note = " (used by some ratios here)" if stats.INDEPENDENT in used else ""
    return [f"| ratios | {text}{fallback}{note} |"]


def _fmt_ratio(r: float) -> str:
    return f"{r:.2f}" if r >= 0.1 else f"{r:.3f}"


def _cell_text(cell, key, fmt, best, ref_value, show_cv=True, ref_cell=None) -> str:
    if cell is None:
        return NA
    if cell.get("status") != "ok":
        return STATUS_TEXT.get(cell.get("status"), cell.get("status", "?"))
    v = _value(cell, key)
    if v is None:
        return NA
    text = fmt(v)
    if best is not None and v == best:
        text = f"**{text}**"
    cv = (cell.get("cv") or {}).get(key)
    if show_cv and cv is not None:
        text += f" ±{cv * 100:.0f}%"
    r = stats.ratio(v, ref_value)
    if r is not None:
        est = ratio_estimate(cell, ref_cell, key) if ref_cell is not None else None
        # The ratio of geometric means goes with its interval, not the ratio of the two
        # medians shown beside it.
        ci = est.ci if est else None
        if est is not None:
            r = est.ratio
        interval = f" [{_fmt_ratio(ci[0])}–{_fmt_ratio(ci[1])}]" if ci else ""
        text += f" ({_fmt_ratio(r)}×{interval})"
    if (cell.get("server"), cell.get("scenario")) in CONSTANT_ANSWERS:
        text += CONST_MARK
    return text


def _runs_note(cells: dict) -> str:
    """How many runs of what length the cells of a table had (lanes may differ)."""
    shapes: dict[tuple, set] = {}
    for (server, _c), cell in cells.items():
        runs = cell.get("runs") or []
        if cell.get("status") == "ok" and runs:
            shapes.setdefault((len(runs), round(runs[0].get("duration_s") or 0)), set()).add(server)
    if not shapes:
        return ""
    parts = [f"{n} runs of {d} s" for (n, d) in sorted(shapes, reverse=True)]
    return "Runs per cell: " + " or ".join(parts) + " (interleaved with the other servers')."


def _pipe_text(p: int) -> str:
    return "no pipelining" if p <= 1 else f"{p} requests pipelined per connection"


def _scenario_titles(res: dict) -> dict[str, dict]:
    return {s["name"]: s for s in res.get("scenarios", [])}


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return lines


def _group_tables(res, scen, pipe, cells, servers, labels, ref) -> list[str]:
    concs = sorted({c for (_, c) in cells})
    present = [s for s in servers if any((s, c) in cells for c in concs)]
    ranked = [s for s in present if s not in unranked(res)]
    # A metric nobody has in this group (latency of pipelined cells) gets no column/table.
    metrics = [
        m
        for m in METRICS
        if m[0] in ("rps", "cpu_us_per_req")
        or any(_value(cell, m[0]) is not None for cell in cells.values())
    ]
    lines = []
    note = _runs_note(cells)
    if note:
        lines += [note, ""]
    if len(concs) == 1:
        # One concurrency level: one table with the metrics as columns.
        c = concs[0]
        header = ["server"] + [f"{title} ({'↑' if hi else '↓'})" for _, title, _, hi, _ in metrics]
        rows = []
        for s in present:
            row = [labels.get(s, s)]
            for key, _, _, hi, fmt in metrics:
                row.append(_metric_cell(cells, ranked, ref, s, c, key, hi, fmt))
            rows.append(row)
        lines.append(f"{len(present)} servers at {c} connections.")
        lines.append("")
        lines += _table(header, rows)
        lines.append("")
        return lines
    for key, title, note, hi, fmt in metrics:
        header = ["server"] + [f"c = {c}" for c in concs]
        rows = []
        for s in present:
            row = [labels.get(s, s)]
            for c in concs:
                row.append(_metric_cell(cells, ranked, ref, s, c, key, hi, fmt))
            rows.append(row)
        lines.append(f"**{title}** ({note})")
        lines.append("")
        lines += _table(header, rows)
        lines.append("")
    return lines


def _metric_cell(cells, present, ref, server, conc, key, hi, fmt) -> str:
    """One table cell: `server`'s figure for metric `key` at concurrency `conc`, bold when it is
    the best among `present` (the ranked servers), with its ratio to the reference's figure."""
    # A server left out of `present` (not ranked) is never bold, even when it ties the best.
    best = _best([_value(cells.get((x, conc)), key) for x in present], hi)
    best = best if server in present else None
    refv = _value(cells.get((ref, conc)), key) if ref and server != ref else None
    return _cell_text(
        cells.get((server, conc)),
        key,
        fmt,
        best,
        refv,
        show_cv=key in ("rps", "cpu_us_per_req"),
        ref_cell=cells.get((ref, conc)) if key in ("rps", "cpu_us_per_req") else None,
    )


def _mib(v):
    return NA if v is None else f"{v / 2**20:.1f}"


def _kib(v):
    return NA if v is None else f"{v / 1024:.1f}"


def _overview(res, grouped, servers, labels, ref) -> list[str]:
    """CPU per request of every server on every scenario at the first cell shape: the one-table
    answer to "what does each server cost per request"."""
    shapes = sorted({(c["concurrency"], c["pipeline"]) for c in res.get("cells", [])})
    if not shapes:
        return []
    # The seeds' usual operating point (50 connections, no pipelining) when measured, else the
    # highest concurrency without pipelining, else the first shape.
    unpiped = sorted(c for c, p in shapes if p <= 1)
    if (50, 0) in shapes:
        c0, p0 = 50, 0
    elif unpiped:
        c0, p0 = unpiped[-1], 0
    else:
        c0, p0 = shapes[0]
    scen_names = [s for (s, p) in grouped if p == p0]
    if not scen_names:
        return []
    lines = [
        f"## Overview: server CPU µs per request at {c0} connections, {_pipe_text(p0)}",
        "",
        "Lower is better; best per column in bold"
        + (f"; ratio to {labels.get(ref, ref)} in parentheses." if ref else "."),
        "",
    ]
    header = ["server"] + [f"`{s}`" for s in scen_names]
    rows = []
    for srv in servers:
        if not any((srv, c0) in grouped[(s, p0)] for s in scen_names):
            continue
        row = [labels.get(srv, srv)]
        for s in scen_names:
            cells = grouped[(s, p0)]
            ranked = [x for x in servers if x not in unranked(res)]
            best = _best([_value(cells.get((x, c0)), "cpu_us_per_req") for x in ranked], False)
            best = best if srv in ranked else None
            refv = _value(cells.get((ref, c0)), "cpu_us_per_req") if ref and srv != ref else None
            row.append(
                _cell_text(
                    cells.get((srv, c0)),
                    "cpu_us_per_req",
                    lambda v: f"{v:.2f}",
                    best,
                    refv,
                    show_cv=False,
                    ref_cell=cells.get((ref, c0)),
                )
            )
        rows.append(row)
    return lines + _table(header, rows) + [""]


def _find(res, server, scenario, c, p, mode="keep-alive"):
    for cell in res.get("cells", []):
        if (cell["server"], cell["scenario"], cell["concurrency"], cell["pipeline"]) == (
            server,
            scenario,
            c,
            p,
        ) and cell.get("mode", "keep-alive") == mode:
            return cell
    return None


def targets(res: dict) -> list[dict]:
    """The issue targets that the results can decide, each with its ratio (`ratio_estimate`:
    paired by round when it can be) and the t 95% interval of that ratio; a target is
    met only when the interval's upper bound is within it (with a single run there is no
    interval, and the median decides, marked so).
    Engine (issues 3 and 18): CPU per request of peregrine-hello within 5% of the floor without
    pipelining, 20% with 16 pipelined, 5% at c=1, 60% with 256 pipelined; framework (issue 4):
    param and json within 10% of plaintext CPU."""
    out = []
    shapes = sorted(
        {(c["concurrency"], c["pipeline"]) for c in res.get("cells", []) if c["status"] == "ok"}
    )
    key = "cpu_us_per_req"

    def add(what, cell, ref_cell, limit, issue=""):
        est = ratio_estimate(cell, ref_cell, key)
        if est is None:
            return
        r, ci = est.ratio, est.ci
        if limit is None:
            met = None
        elif ci is not None:
            met = stats.target_met(ci, limit)
        else:
            met = r <= limit
        out.append(
            {
                "what": what,
                "ratio": r,
                "ci": ci,
                "method": est.method,
                "limit": limit,
                "met": met,
                "issue": issue,
                "runs": len(cell.get("runs") or []),
            }
        )

    for c, p in shapes:
        eng = _find(res, "peregrine-hello", "plaintext", c, p)
        limits = [(lim, iss) for _n, _d, test, lim, iss in ENGINE_TARGETS if test(c, p)]
        for other in ("floor", BEFORE, "hyper", "hyper-percore", "hyper-flush"):
            lim, iss = limits[0] if (other == "floor" and limits) else (None, "")
            add(
                f"peregrine-hello / {other}, plaintext, c={c}, {_pipe_text(p)}",
                eng,
                _find(res, other, "plaintext", c, p),
                lim,
                iss or ("after / before" if other == BEFORE else ""),
            )
        add(
            f"{BEFORE} / floor, plaintext, c={c}, {_pipe_text(p)}",
            _find(res, BEFORE, "plaintext", c, p),
            _find(res, "floor", "plaintext", c, p),
            None,
            "before",
        )
        base = _find(res, "peregrine", "plaintext", c, p)
        for scen in ("param", "json"):
            add(
                f"peregrine {scen} / plaintext, c={c}, {_pipe_text(p)}",
                _find(res, "peregrine", scen, c, p),
                base,
                1.10,
                "issue 4",
            )
    out += idle_memory_targets(res)
    return out


def idle_memory_targets(res: dict) -> list[dict]:
    """Issue 16's "idle memory per connection stays under 1 KiB" for the engine (one
    measurement: the value decides), and the before engine's figure beside it."""
    out = []
    for s in res.get("servers", []):
        if s["name"] not in ("peregrine-hello", BEFORE):
            continue
        im = s.get("idle_memory") or {}
        v = im.get("per_connection_bytes")
        if v is None:
            continue
        mine = s["name"] == "peregrine-hello"
        out.append(
            {
                "what": f"{s['name']} idle memory per keep-alive connection "
                f"({im.get('opened')} connections)",
                "ratio": None,
                "value_text": f"{v / 1024:.2f} KiB",
                "ci": None,
                "limit": IDLE_LIMIT_BYTES if mine else None,
                "limit_text": "< 1 KiB (issue 16)" if mine else "(before)",
                "met": (v < IDLE_LIMIT_BYTES) if mine else None,
                "issue": "issue 16" if mine else "before",
                "runs": 1,
            }
        )
    return out


def before_after(res: dict) -> list[dict]:
    """Issue 16's before/after per engine lane: the engine's CPU per request to the floor's now
    (after) and at --before-ref (before), after / before, and hyper-percore's, each a ratio of
    medians (`ratio_estimate`: paired by round when it can be) with its t 95% interval;
    the lane's target applies to after / floor."""
    if not any(c["server"] == BEFORE for c in res.get("cells", [])):
        return []
    key = "cpu_us_per_req"
    shapes = sorted(
        {(c["concurrency"], c["pipeline"]) for c in res.get("cells", []) if c["server"] == BEFORE}
    )
    out = []
    for c, p in shapes:
        cell = {n: _find(res, n, "plaintext", c, p) for n in ("peregrine-hello", BEFORE, "floor")}
        hyper = _find(res, "hyper-percore", "plaintext", c, p)

        def pair(a, b):
            est = ratio_estimate(a, b, key)
            return None if est is None else (est.ratio, est.ci)

        limits = [(lim, iss) for _n, _d, test, lim, iss in ENGINE_TARGETS if test(c, p)]
        after = pair(cell["peregrine-hello"], cell["floor"])
        limit, issue = limits[0] if limits else (None, "")
        met = None
        if after and limit is not None:
            met = stats.target_met(after[1], limit) if after[1] else after[0] <= limit
        out.append(
            {
                "concurrency": c,
                "pipeline": p,
                "limit": limit,
                "issue": issue,
                "before": pair(cell[BEFORE], cell["floor"]),
                "after": after,
                "after_before": pair(cell["peregrine-hello"], cell[BEFORE]),
                "hyper": pair(hyper, cell["floor"]),
                "met": met,
                "runs": {n: len((x or {}).get("runs") or []) for n, x in cell.items()},
            }
        )
    return out


def _before_after_lines(res: dict) -> list[str]:
    rows = before_after(res)
    if not rows:
        return []
    b = res.get("before") or {}
    commit = (b.get("commit") or "?")[:12]

    def fmt(x):
        if x is None:
            return NA
        r, ci = x
        return f"{r:.3f} [{ci[0]:.3f}–{ci[1]:.3f}]" if ci else f"{r:.3f} (one run)"

    table = []
    for r in rows:
        lane = f"c={r['concurrency']}" + (f" × {r['pipeline']}" if r["pipeline"] > 1 else "")
        target = f"≤ {r['limit']:.2f} ({r['issue']})" if r["limit"] is not None else NA
        met = "" if r["met"] is None else ("met" if r["met"] else "**not met**")
        table.append(
            [
                lane,
                fmt(r["after"]),
                target,
                met,
                fmt(r["before"]),
                fmt(r["after_before"]),
                fmt(r["hyper"]),
            ]
        )
    L = [
        "## Before and after (issue 16): server CPU µs per request, ratios with 95% intervals",
        "",
        f"After: peregrine-hello at this run's commit; before: {BEFORE}, the same example built "
        f"from `{b.get('ref')}` = `{commit}` ({(b.get('date') or '?')[:10]}: "
        f"{b.get('subject') or '?'}). Each ratio is the geometric mean of the per-round ratios "
        "over the interleaved rounds, [a–b] the paired t 95% interval on their logs (geometric "
        "means with a Welch t interval where the cells share fewer than "
        f"{stats.MIN_PAIRED_ROUNDS} rounds); a target is met only when the interval's upper bound "
        "is within it. After / before below 1 is a gain.",
        "",
    ]
    L += _table(
        [
            "lane",
            "after / floor",
            "target",
            "",
            "before / floor",
            "after / before",
            "hyper-percore / floor",
        ],
        table,
    )
    mem = [t for t in idle_memory_targets(res) if t["limit"] is not None]
    for t in mem:
        verdict = "met" if t["met"] else "**not met**"
        L += [
            "",
            f"Idle memory: {t['what']}: {t['value_text']}, target {t['limit_text']}: {verdict}.",
        ]
    return L + [""]


def render(res: dict) -> str:
    servers = _server_order(res)
    labels = _labels(res)
    ref = reference_server(res)
    st = res.get("settings", {})
    m = res.get("machine", {})
    tools = res.get("tools", {})
    git = res.get("git", {})
    titles = _scenario_titles(res)
    grouped = groups(res)
    dirty = " (with uncommitted changes)" if git.get("dirty") else ""
    loadavg = ", ".join(f"{x:.2f}" for x in m.get("loadavg_at_start", []))

    L = [f"# Peregrine lab report: profile `{res.get('profile')}`", ""]
    if not res.get("complete", True):
        L += [
            "> **Incomplete run**: the run stopped before every server was measured; what "
            "follows is what it measured.",
            "",
        ]
    L += [
        f"Generated {res.get('generated_at')} by `{res.get('command') or '?'}` at commit "
        f"`{(git.get('commit') or '?')[:12]}`{dirty}; "
        f"wall time {_dur(res.get('wall_seconds'))}"
        + (
            f" (building: {_dur(res['build_seconds'])}; measuring: "
            f"{_dur(res['wall_seconds'] - res['build_seconds'])}"
            + (
                f", planned {_dur(res['planned_measuring_seconds'])}"
                if res.get("planned_measuring_seconds") is not None
                else ""
            )
            + ")."
            if res.get("build_seconds") is not None and res.get("wall_seconds") is not None
            else "."
        ),
        "",
        f"**What this profile measured**: {res.get('profile_description', '')}.",
        "",
        *_overrides_lines(res),
        "| | |",
        "|---|---|",
        f"| machine | {m.get('cpu_model')}, {m.get('nproc')} CPUs, "
        f"{_gib(m.get('memory_bytes'))} GiB, {m.get('os') or ''} kernel {m.get('kernel')} |",
        f"| CPU split | servers pinned to CPU(s) {_cpus(st.get('server_cpus'))} with "
        f"WORKERS={st.get('workers')}; {st.get('loadgen')} pinned to CPU(s) "
        f"{_cpus(st.get('client_cpus'))} with {st.get('loadgen_threads')} thread(s) |",
        f"| per cell | warm-up {st.get('warmup')} s, then {st.get('runs')} run(s) of "
        f"{st.get('duration')} s (lanes may set their own: see each table); figures are medians, "
        "±x% is the coefficient of variation, [a–b] the t 95% interval of a ratio |",
        *_method_rows(res),
        *_ratio_method_row(res, ref),
        f"| load generator | {tools.get(st.get('loadgen', 'wrk')) or '?'} |",
        f"| toolchains | {results.toolchain_line(tools)} (? = not recorded) |",
        f"| load average at start | {loadavg} |",
        *_interference_row(res),
        "",
        f"Ratios in parentheses are to **{labels.get(ref, ref)}** (same cell, same run)."
        if ref
        else "No Peregrine server in this run: no ratios.",
        "Latency is not reported for pipelined cells: wrk times whole batches there and its "
        "coordinated-omission correction corrupts the percentiles. "
        "Server CPU µs per request = time on CPU of every thread of the server's whole process "
        "tree during the run (schedstat, nanoseconds; 10 ms ticks in older results) ÷ responses "
        "the load generator counted. A ratio's target is met only when the upper bound of its "
        "95% interval meets it. "
        "† the floor is a C program that counts request terminators and writes a fixed "
        "answer: not an HTTP server, the cost of the system calls and the loopback TCP stack.",
        "",
        *_unranked_note(res, labels),
    ]
    for note in st.get("cpu_split_notes", []) or []:
        L += [f"> Note: {note}", ""]
    for note in res.get("notes", []) or []:
        L += [f"> **Note**: {note}", ""]

    L += _overview(res, grouped, servers, labels, ref)

    for (scen, pipe), cells in grouped.items():
        t = titles.get(scen, {"title": scen})
        L.append(
            f"## {t.get('title', scen)}: `{t.get('method', 'GET')} {t.get('path', '')}`, "
            f"{_pipe_text(pipe)}"
        )
        L.append("")
        L += _group_tables(res, scen, pipe, cells, servers, labels, ref)

    L += _before_after_lines(res)
    tg = targets(res)
    if tg:
        L += [
            "## Targets from the engine and framework issues (server CPU µs per request)",
            "",
            "Met only when the upper bound of the ratio's 95% interval is within the "
            "target. The method column says how the ratio and its interval were computed: "
            "`paired`, the geometric mean of the per-round ratios with the paired t interval "
            "on their logs; `independent` (runs without shared rounds), geometric mean / "
            "geometric mean with the Welch t interval on the logs (docs/measuring.md).",
            "",
        ]
        rows = [
            [
                t["what"],
                t.get("value_text") or f"{t['ratio']:.3f}",
                f"{t['ci'][0]:.3f}–{t['ci'][1]:.3f}"
                if t.get("ci")
                else ("(one measurement)" if t.get("value_text") else "(one run)"),
                str(t.get("runs", "")),
                t.get("method") or "",
                t.get("limit_text")
                or (
                    f"≤ {t['limit']:.2f} ({t.get('issue', '')})"
                    if t["limit"]
                    else f"({t.get('issue') or 'comparison'})"
                ),
                "" if t["met"] is None else ("met" if t["met"] else "**not met**"),
            ]
            for t in tg
        ]
        header = ["comparison", "ratio", "95% interval", "runs", "method", "target", ""]
        L += _table(header, rows) + [""]

    close = groups(res, "close")
    for (scen, pipe), cells in close.items():
        t = titles.get(scen, {"title": scen})
        L += [
            f"## A new connection per request: {t.get('title', scen)} "
            f"(`Connection: close` on every request)",
            "",
            "Each request opens a connection, sends one request and is answered with the "
            "connection closed (the rust-http seed's `ab` test, clients without keep-alive): "
            "accept + request + close per request.",
            "",
        ]
        L += _group_tables(res, scen, pipe, cells, servers, labels, ref)
    L += _open_loop_lines(res, labels, ref)
    L += _scaling_lines(res, grouped, labels)
    L += scaling_report.section(res, labels)  # the scaling lane ([] without one)

    L += ["## Servers, memory and compliance", ""]
    rows = []
    partial_probe = False
    for s in res.get("servers", []):
        im = s.get("idle_memory") or {}
        peaks = [
            (_value(c, "peak_rss_bytes")) for c in res.get("cells", []) if c["server"] == s["name"]
        ]
        peaks = [p for p in peaks if p is not None]
        comp = s.get("compliance") or {}
        if comp.get("status") == "ok":
            must = comp.get("must") or {}
            should = comp.get("should") or {}
            must_pct = comp.get("must_score")
            if must_pct is None and must.get("total"):
                must_pct = round(100 * must["passed"] / must["total"], 1)
            comp_text = (
                f"MUST only {must_pct}% ({must.get('passed')}/{must.get('total')}); "
                f"total {comp.get('score')}% (+ SHOULD, project policy: "
                f"{should.get('passed')}/{should.get('total')})"
            )
        else:
            comp_text = NA if not comp else f"{NA} ({comp.get('status')})"
        if comp.get("status") == "ok" and PROBE_BODY_SCENARIO not in (s.get("scenarios") or []):
            comp_text += " ‡"
            partial_probe = True
        idle = NA
        if im.get("per_connection_bytes") is not None:
            idle = f"{_kib(im['per_connection_bytes'])} ({im.get('opened')} conns)"
        rows.append(
            [
                labels.get(s["name"], s["name"]),
                s.get("language", ""),
                version_text(s.get("version")),
                _status_text(s),
                NA if s.get("startup_ms") is None else f"{s['startup_ms']:.0f}",
                idle,
                _mib(max(peaks)) if peaks else NA,
                comp_text,
            ]
        )
    L += _table(
        [
            "server",
            "language",
            "version",
            "status",
            "startup (ms)",
            "idle KiB / keep-alive conn",
            "peak RSS under load (MiB, fresh process)",
            "compliance: MUST only; total with SHOULD",
        ],
        rows,
    )
    L += [
        "",
        "Peak RSS under load: the highest VmHWM of the server's process tree over its load "
        "cells, on a process started fresh for the cells (not the one that held the "
        "idle connections or met the probe). Compliance: the probe's MUST cases are the RFCs' "
        "requirements; its SHOULD cases are this project's own stricter policy (Peregrine "
        "passes them by construction), so compare servers on the MUST-only figure.",
    ]
    consts = sorted(
        {
            (srv, scen)
            for c in res.get("cells", [])
            for srv, scen in [(c["server"], c["scenario"])]
            if (srv, scen) in CONSTANT_ANSWERS and c.get("status") == "ok"
        }
    )
    if consts:
        L.append(
            "§ a constant answer: "
            + "; ".join(
                f"{labels.get(a, a)} `{b}` is {CONSTANT_ANSWERS[(a, b)]}" for a, b in consts
            )
            + "."
        )
    L.append("")
    if partial_probe:
        L += [
            f"‡ does not serve `{PROBE_BODY_SCENARIO}` (`POST /users`), which the probe's cases "
            "with a request body expect to be accepted: those cases fail for that reason alone, "
            "so this score is not comparable with the others.",
            "",
        ]

    failed_cases = [
        (s["name"], s["compliance"])
        for s in res.get("servers", [])
        if (s.get("compliance") or {}).get("status") == "ok" and s["compliance"].get("failed")
    ]
    if failed_cases:
        L += ["### Compliance cases failed", ""]
        for name, comp in failed_cases:
            must = comp.get("failed_must") or []
            others = [f for f in comp["failed"] if f not in must]
            parts = []
            if must:
                parts.append(f"{len(must)} MUST: " + _ids(must))
            if others:
                parts.append(f"{len(others)} other: " + _ids(others))
            where = f" (details: `probe/{comp['report']}`)" if comp.get("report") else ""
            L.append(f"- **{labels.get(name, name)}**: " + "; ".join(parts) + where)
        L.append("")

    problems = []
    for s in res.get("servers", []):
        for scen, pr in (s.get("parity") or {}).items():
            if not pr.get("ok"):
                problems.append(
                    f"- **{labels.get(s['name'], s['name'])}** on `{scen}`: "
                    + "; ".join(pr.get("problems", []))
                )
    if problems:
        L += ["## Parity mismatches (these cells were not measured)", ""] + problems + [""]
    failures = [c for c in res.get("cells", []) if c["status"] == "failed"]
    not_run = [s for s in res.get("servers", []) if s.get("status") != "ok" or s.get("message")]
    if failures or not_run:
        L += ["## Failures", ""]
        for s in not_run:
            msg = _one_line(s.get("message", ""))
            prefix = "" if msg.startswith(s.get("status", "")) else f"{s.get('status')}: "
            L.append(f"- **{labels.get(s['name'], s['name'])}**: {prefix}{msg}")
        for c in failures:
            L.append(
                f"- {labels.get(c['server'], c['server'])}, `{c['scenario']}` c={c['concurrency']} "
                f"pipeline={c['pipeline']}: {_one_line(c.get('message', ''))}"
            )
        L.append("")
    L += db_report.section(res)  # the db profile's section ([] otherwise)
    L += resilience.section(res)  # resource attacks, when probe/attack_peers.py added them
    # A run with only the scaling lane has no cells to chart.
    L += ["## Charts", ""] if res.get("cells") else []
    for name, title in (
        ("throughput", "Requests per second"),
        ("cpu", "Server CPU per request"),
        ("latency", "Latency p50 and p99"),
        ("memory", "Memory"),
        ("open_loop", "Open loop: latency against throughput"),
    ):
        if res.get("cells") and (name != "open_loop" or res.get("open_loop")):
            L.append(f"![{title}](charts/{name}.svg)")
    L += [
        "",
        "Every raw figure (each run, warm-up, errors, versions) is in `results.json`; "
        "`./scripts/lab report DIR` regenerates this page and the charts from it.",
        "",
    ]
    return "\n".join(L)


def _method_rows(res: dict) -> list[str]:
    st = res.get("settings", {})
    rows = []
    ct = st.get("cpu_time") or {}
    if ct:
        irq = ct.get("irq_time_accounting")
        irq_text = {
            True: "on (interrupt time is not charged to the interrupted thread)",
            False: "off (softirq work of the loopback stack done while a server thread runs "
            "counts as that thread's time, for every server alike)",
            None: "unknown",
        }[irq]
        rows.append(f"| server CPU time | {ct.get('source')}; IRQ time accounting {irq_text} |")
    b = res.get("before")
    if b:
        rows.append(
            f"| before | `{b.get('server', BEFORE)}`: the hello example built from "
            f"`{b.get('ref')}` = commit `{b.get('commit')}` ({b.get('date')}: "
            f"{b.get('subject')}) |"
        )
    text = ORDER_TEXT.get(st.get("order"))
    if text:
        rows.append(f"| order | {text.format(seed=st.get('order_seed'))} |")
    return rows


ORDER_TEXT = {
    "interleaved": "every server up at once (a fresh process each), cells run in a random "
    "order per round (seed {seed}), one run per cell per round",
    "blocked": "every server up at once (a fresh process each), one run per cell per round in "
    "blocks: each round runs the (scenario, concurrency, pipelining, mode) cells in a random "
    "order and the servers of a cell back to back, in a fresh random order per block (seed "
    "{seed}), so the two runs a per-round ratio pairs are seconds apart",
}
"""The method table's `order` row per results.json settings["order"] (older runs have
"interleaved", none before that)."""


def _open_loop_lines(res: dict, labels: dict, ref: str | None) -> list[str]:
    recs = res.get("open_loop") or []
    if not recs:
        note = res.get("open_loop_note")
        return ["## Open loop", "", f"Not measured: {note}.", ""] if note else []
    L = [
        "## Open loop: latency at a fixed offered rate",
        "",
        "oha sends requests at a fixed rate (`-q RATE --latency-correction`): a request's "
        "latency counts from when it was due, so a server that stalls is charged for the "
        "requests that queued behind the stall (no coordinated omission). Each server is "
        "swept from the lowest rate up to the first it does not sustain (achieved < 90% of "
        "offered, or errors): its knee. The load generator has one CPU, so a knee at the "
        "same rate for several servers is oha's ceiling, not theirs.",
        "",
    ]
    rates = sorted({pt["offered_rps"] for r in recs for pt in r["points"]})
    header = ["server"] + [f"{r // 1000}k/s" for r in rates] + ["knee"]
    for what, key, fmt in (
        ("p99 latency (ms)", "p99_us", lambda v: f"{v / 1000:.2f}"),
        ("p99.9 latency (ms)", "p999_us", lambda v: f"{v / 1000:.2f}"),
        ("p50 latency (ms)", "p50_us", lambda v: f"{v / 1000:.3f}"),
        ("server CPU µs per request at equal offered load", "cpu_us_per_req", lambda v: f"{v:.2f}"),
    ):
        rows = []
        for r in recs:
            pts = {pt["offered_rps"]: pt for pt in r["points"]}
            row = [labels.get(r["server"], r["server"])]
            for rate in rates:
                pt = pts.get(rate)
                v = None if pt is None else pt.get(key)
                cell = NA if v is None else fmt(v)
                if pt is not None and pt["rps"] < 0.9 * rate:
                    cell += f" (did {pt['rps'] / 1000:.0f}k)"
                row.append(cell)
            knee = r.get("knee_rps")
            row.append(
                f"{knee // 1000}k" if knee else ("> swept" if r["status"] == "ok" else r["status"])
            )
            rows.append(row)
        L += [f"**{what}** ({r['scenario'] if recs else ''})", ""] + _table(header, rows) + [""]
    fails = [r for r in recs if r["status"] != "ok"]
    for r in fails:
        L.append(f"- {labels.get(r['server'], r['server'])}: {_one_line(r['message'])}")
    if fails:
        L.append("")
    return L


def _scaling_lines(res: dict, grouped, labels: dict) -> list[str]:
    """What the one-worker figures predict for more cores, from CPU per request."""
    cells = grouped.get(("plaintext", 0)) or {}
    rows = []
    for (srv, c), cell in cells.items():
        v = _value(cell, "cpu_us_per_req")
        if c == 50 and v:
            rows.append((v, srv))
    if not rows:
        return []
    rows.sort()
    st = res.get("settings", {})
    L = [
        "## Scaling: what these figures predict for more cores",
        "",
        f"Measured with WORKERS={st.get('workers')} on CPU(s) {_cpus(st.get('server_cpus'))}, "
        f"the load generator on CPU(s) {_cpus(st.get('client_cpus'))}. A server that keeps "
        "one worker per core with nothing shared between workers (Peregrine, the floor, the "
        "per-core Rust variants, nginx, h2o) can answer at most 10⁶ ÷ (CPU µs per "
        "request) requests per second per core, and N cores multiply that while the load "
        "generator, the loopback stack and the memory bandwidth keep up; a server with one "
        "accept loop or a shared runtime (hyper/axum multi-thread, actix's acceptor thread, "
        "Go, Node cluster) adds cross-core hand-offs, so its per-core figure is an upper "
        "bound. On this 2-CPU machine WORKERS=2 shares both CPUs with the load generator: "
        "the scaling lane (`./scripts/lab scaling`, and in `standard`) measures it, labelled "
        "so, with what these figures predict for it.",
        "",
    ]
    table = [
        [labels.get(srv, srv), f"{v:.2f}", f"{1e6 / v:,.0f}", f"{4e6 / v:,.0f}"] for v, srv in rows
    ]
    L += _table(
        ["server", "CPU µs/request (plaintext, c=50)", "req/s per core", "4 cores (model)"],
        table,
    )
    return L + [""]


def _interference_row(res: dict) -> list[str]:
    shares = [
        r["server_cpus_other_share"]
        for c in res.get("cells", [])
        for r in c.get("runs", [])
        if r.get("server_cpus_other_share") is not None
    ]
    if not shares:
        return []
    shares.sort()
    med = stats.median(shares)
    text = (
        f"| other work on the server CPUs | median {med * 100:.1f}% of their time during the "
        f"runs, max {shares[-1] * 100:.1f}% (other processes and interrupts; high values mean "
        "a busy machine and noisier figures) |"
    )
    out = [text]
    runs = [r for c in res.get("cells", []) for r in c.get("runs", [])]
    cli = sorted(
        r["client_cpus_other_share"] for r in runs if r.get("client_cpus_other_share") is not None
    )
    if cli:
        busy = sorted(
            r["client_cpus_busy_share"] for r in runs if r.get("client_cpus_busy_share") is not None
        )
        out.append(
            f"| other work on the load generator's CPUs | median {stats.median(cli) * 100:.1f}%, "
            f"max {cli[-1] * 100:.1f}% (their busy share: median "
            f"{stats.median(busy) * 100:.0f}%: near 100% means the load generator is the ceiling) |"
        )
    steal = [r["steal_share"] for r in runs if r.get("steal_share") is not None]
    mhz = [m for r in runs for m in (r.get("cpu_mhz") or []) if m]
    if steal or mhz:
        parts = []
        if steal:
            parts.append(f"steal time max {max(steal) * 100:.2f}% of the CPUs' time")
        if mhz:
            parts.append(f"CPU frequency {min(mhz):,.0f}–{max(mhz):,.0f} MHz over the runs")
        out.append(f"| virtualisation and clock | {'; '.join(parts)} |")
    return out


def _overrides_lines(res: dict) -> list[str]:
    ov = res.get("overrides") or {}
    if not ov:
        return []
    parts = [
        f"{k} {_short_val(v['used'])} (profile: {_short_val(v['profile'])})" for k, v in ov.items()
    ]
    return ["**Changed on the command line**: " + "; ".join(parts) + ".", ""]


def _short_val(v) -> str:
    if v is None:
        return "all"
    if isinstance(v, list):
        return (
            " ".join(_short_val(x) if isinstance(x, list) else str(x) for x in v)
            if not all(isinstance(x, list) for x in v)
            else ", ".join(f"c={x[0]}/p={x[1]}" for x in v)
        )
    return str(v)


def _ids(ids: list[str], n: int = 15) -> str:
    shown = ", ".join(f"`{x}`" for x in ids[:n])
    return shown + (f" and {len(ids) - n} more" if len(ids) > n else "")


def version_text(v: str | None) -> str:
    """Readable form of a version line; `cargo pkgid` prints
    `registry+https://...#hyper@1.12.0` or `path+file:///.../crates/peregrine#0.1.0`."""
    if not v:
        return "?"
    if "#" in v and "+" in v.split("#", 1)[0]:
        url, tail = v.split("#", 1)
        if "@" in tail:
            name, ver = tail.split("@", 1)
            return f"{name} {ver}"
        return f"{url.rstrip('/').rsplit('/', 1)[-1]} {tail}"
    return v


def _status_text(s):
    st = s.get("status", "?")
    if st == "ok" and s.get("message"):
        return "ok (see failures)"
    return st


def _one_line(text: str, n: int = 300) -> str:
    t = " ".join(str(text).split())
    return t if len(t) <= n else t[:n] + "…"


def _dur(s):
    if s is None:
        return "?"
    return f"{int(s) // 60} min {int(s) % 60} s"


def _gib(b):
    return "?" if not b else f"{b / 2**30:.1f}"


def _cpus(lst):
    return ",".join(map(str, lst or [])) or "?"


def write(res: dict, out_dir: Path) -> Path:
    path = Path(out_dir) / "report.md"
    path.write_text(render(res))
    return path
