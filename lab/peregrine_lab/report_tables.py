"""The report's tables of figures: servers as rows, concurrency levels as columns, the best of
each column in bold, each figure's ratio to the reference server with its 95% interval, and a
cell that was not measured saying why (n/a: not served; parity: its answer differs from the
contract)."""

from __future__ import annotations

from collections import OrderedDict

from . import stats

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
    # Neither better nor worse (None): what was compared. Bytes per response as the load
    # generator received them (the answers differ in size between servers: headers, framing);
    # the server's busy share of its CPUs (below 100%: the load generator was the ceiling).
    ("bytes_per_response", "Bytes per response", "as received", None, lambda v: f"{v:,.0f}"),
    ("server_busy_share", "Server CPU busy", "share of its CPUs", None, lambda v: f"{v:.0%}"),
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


def derive_medians(res: dict) -> dict:
    """Fills in place each cell's median bytes per response and server busy share from its runs
    where results made before those were recorded lack them; returns `res`."""
    ncpu = len((res.get("settings") or {}).get("server_cpus") or []) or 1
    derive = {
        "bytes_per_response": lambda r: r["bytes"] / r["requests"] if r.get("requests") else None,
        "server_busy_share": lambda r: (
            min(r["server_cpu_s"] / (r["duration_s"] * ncpu), 1.0)
            if r.get("server_cpu_s") is not None and r.get("duration_s")
            else None
        ),
    }
    for cell in res.get("cells", []):
        med = cell.get("median")
        runs = cell.get("runs") or []
        if med is None or not runs:
            continue
        for key, f in derive.items():
            if med.get(key) is None:
                med[key] = stats.median(
                    [r.get(key) if r.get(key) is not None else f(r) for r in runs if "bytes" in r]
                )
    return res


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
    lines += _flush_note(pipe, present)
    if len(concs) == 1:
        # One concurrency level: one table with the metrics as columns.
        c = concs[0]
        header = ["server"] + [
            title if hi is None else f"{title} ({'↑' if hi else '↓'})"
            for _, title, _, hi, _ in metrics
        ]
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


FLUSHED = {"hyper": "hyper-flush", "hyper-percore": "hyper-flush", "axum": "axum-flush",
           "axum-percore": "axum-flush"}  # fmt: skip
"""hyper and axum rows, and their rows with pipeline_flush(true), which TechEmpower's use."""


def _flush_note(pipe: int, present: list[str]) -> list[str]:
    """Beside a pipelined figure of hyper or axum with pipeline_flush off, where their
    pipeline_flush(true) rows are (in this table, or not in this run)."""
    shown = [s for s in present if s in FLUSHED]
    if pipe <= 1 or not shown:
        return []
    missing = sorted({FLUSHED[s] for s in shown} - set(present))
    text = (
        "hyper and axum pipeline with `pipeline_flush` off by default (one write per response); "
        "with `pipeline_flush(true)`, as TechEmpower runs them, they are the "
        "`hyper-flush` / `axum-flush` rows"
    )
    if missing:
        text += f" (not in this run: {', '.join(missing)}; the standard profile measures them)"
    return [text + ".", ""]


def _metric_cell(cells, present, ref, server, conc, key, hi, fmt) -> str:
    """One table cell: `server`'s figure for metric `key` at concurrency `conc`, bold when it is
    the best among `present` (the ranked servers), with its ratio to the reference's figure."""
    # A server left out of `present` (not ranked) is never bold, even when it ties the best;
    # a figure neither better nor worse (hi None) has no best and no ratio.
    best = None if hi is None else _best([_value(cells.get((x, conc)), key) for x in present], hi)
    best = best if server in present else None
    refv = _value(cells.get((ref, conc)), key) if ref and server != ref and hi is not None else None
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
