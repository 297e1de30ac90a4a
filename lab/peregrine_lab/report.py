"""The Markdown report, made from results.json alone (so `./scripts/lab report DIR` can redo it).

Tables follow the seeds' layout: servers as rows, concurrency levels as columns, the best value of
each column in bold, and each figure's ratio to Peregrine. A cell that was not measured says why
(n/a: the server does not serve that scenario; parity: its answer differs from the contract)."""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

from . import db_report, stats

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
        "Peak RSS under load (MiB)",
        "lower is better",
        False,
        lambda v: f"{v / 2**20:.1f}",
    ),
]

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
        out[s["name"]] = label
    return out


def groups(res: dict) -> OrderedDict[tuple[str, int], dict]:
    """Cells grouped by (scenario, pipeline) → {(server, concurrency): cell}, in scenario order."""
    order = [s["name"] for s in res.get("scenarios", [])]
    out: OrderedDict = OrderedDict()
    cells = sorted(
        res.get("cells", []),
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


def _cell_text(cell, key, fmt, best, ref_value, show_cv=True) -> str:
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
        text += f" ({r:.2f}×)" if r >= 0.1 else f" ({r:.3f}×)"
    return text


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
    # A metric nobody has in this group (latency of pipelined cells) gets no column/table.
    metrics = [
        m
        for m in METRICS
        if m[0] in ("rps", "cpu_us_per_req")
        or any(_value(cell, m[0]) is not None for cell in cells.values())
    ]
    lines = []
    if len(concs) == 1:
        # One concurrency level: one table with the metrics as columns.
        c = concs[0]
        header = ["server"] + [f"{title} ({'↑' if hi else '↓'})" for _, title, _, hi, _ in metrics]
        rows = []
        for s in present:
            row = [labels.get(s, s)]
            for key, _, _, hi, fmt in metrics:
                row.append(_metric_cell(cells, present, ref, s, c, key, hi, fmt))
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
                row.append(_metric_cell(cells, present, ref, s, c, key, hi, fmt))
            rows.append(row)
        lines.append(f"**{title}** ({note})")
        lines.append("")
        lines += _table(header, rows)
        lines.append("")
    return lines


def _metric_cell(cells, present, ref, server, conc, key, hi, fmt) -> str:
    """One table cell: `server`'s figure for metric `key` at concurrency `conc`, bold when it is
    the best among `present`, with its ratio to the reference server's figure."""
    best = _best([_value(cells.get((x, conc)), key) for x in present], hi)
    refv = _value(cells.get((ref, conc)), key) if ref and server != ref else None
    return _cell_text(
        cells.get((server, conc)),
        key,
        fmt,
        best,
        refv,
        show_cv=key in ("rps", "cpu_us_per_req"),
    )


def _mib(v):
    return NA if v is None else f"{v / 2**20:.1f}"


def _kib(v):
    return NA if v is None else f"{v / 1024:.1f}"


def _overview(res, grouped, servers, labels, ref) -> list[str]:
    """CPU per request of every server on every scenario at the first cell shape: the one-table
    answer to "what does each server cost per request"."""
    shapes = [tuple(x) for x in res.get("settings", {}).get("cells", [])]
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
            best = _best([_value(cells.get((x, c0)), "cpu_us_per_req") for x in servers], False)
            refv = _value(cells.get((ref, c0)), "cpu_us_per_req") if ref and srv != ref else None
            row.append(
                _cell_text(
                    cells.get((srv, c0)),
                    "cpu_us_per_req",
                    lambda v: f"{v:.2f}",
                    best,
                    refv,
                    show_cv=False,
                )
            )
        rows.append(row)
    return lines + _table(header, rows) + [""]


def _find(res, server, scenario, c, p):
    for cell in res.get("cells", []):
        if (cell["server"], cell["scenario"], cell["concurrency"], cell["pipeline"]) == (
            server,
            scenario,
            c,
            p,
        ):
            return cell
    return None


def targets(res: dict) -> list[dict]:
    """The issue targets that the results can decide: engine (issue 3) CPU per request within 5%
    of the floor without pipelining and within 20% with; framework (issue 4) param and json within
    10% of plaintext CPU."""
    out = []
    shapes = [tuple(x) for x in res.get("settings", {}).get("cells", [])]
    for c, p in shapes:
        limit = 1.05 if p <= 1 else 1.20
        eng = _value(_find(res, "peregrine-hello", "plaintext", c, p), "cpu_us_per_req")
        for other, lim in (("floor", limit), ("hyper", None)):
            ov = _value(_find(res, other, "plaintext", c, p), "cpu_us_per_req")
            r = stats.ratio(eng, ov)
            if r is not None:
                out.append(
                    {
                        "what": f"peregrine-hello / {other}, plaintext, c={c}, {_pipe_text(p)}",
                        "ratio": r,
                        "limit": lim,
                        "met": (r <= lim) if lim else None,
                    }
                )
        base = _value(_find(res, "peregrine", "plaintext", c, p), "cpu_us_per_req")
        for scen in ("param", "json"):
            v = _value(_find(res, "peregrine", scen, c, p), "cpu_us_per_req")
            r = stats.ratio(v, base)
            if r is not None:
                out.append(
                    {
                        "what": f"peregrine {scen} / plaintext, c={c}, {_pipe_text(p)}",
                        "ratio": r,
                        "limit": 1.10,
                        "met": r <= 1.10,
                    }
                )
    return out


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
            f"{_dur(res['wall_seconds'] - res['build_seconds'])})."
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
        f"{st.get('duration')} s; figures are medians, ±x% is the coefficient of variation |",
        f"| load generator | {tools.get(st.get('loadgen', 'wrk')) or '?'} |",
        f"| toolchains | {_tools_line(tools)} |",
        f"| load average at start | {loadavg} |",
        *_interference_row(res),
        "",
        f"Ratios in parentheses are to **{labels.get(ref, ref)}** (same cell, same run)."
        if ref
        else "No Peregrine server in this run: no ratios.",
        "Latency is not reported for pipelined cells: wrk times whole batches there and its "
        "coordinated-omission correction corrupts the percentiles. "
        "Server CPU µs per request = user + system CPU time of the server's whole process tree "
        "during the run ÷ responses the load generator counted. "
        "† the floor is a C program that counts request terminators and writes a fixed "
        "answer: not an HTTP server, the cost of the system calls and the loopback TCP stack.",
        "",
    ]
    for note in st.get("cpu_split_notes", []) or []:
        L += [f"> Note: {note}", ""]

    L += _overview(res, grouped, servers, labels, ref)

    for (scen, pipe), cells in grouped.items():
        t = titles.get(scen, {"title": scen})
        L.append(
            f"## {t.get('title', scen)}: `{t.get('method', 'GET')} {t.get('path', '')}`, "
            f"{_pipe_text(pipe)}"
        )
        L.append("")
        L += _group_tables(res, scen, pipe, cells, servers, labels, ref)

    tg = targets(res)
    if tg:
        L += ["## Targets from the engine and framework issues (server CPU µs per request)", ""]
        rows = [
            [
                t["what"],
                f"{t['ratio']:.3f}",
                f"≤ {t['limit']:.2f}" if t["limit"] else "(for comparison)",
                "" if t["met"] is None else ("met" if t["met"] else "**not met**"),
            ]
            for t in tg
        ]
        L += _table(["comparison", "ratio", "target", ""], rows) + [""]

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
            comp_text = (
                f"{comp.get('score')}% (MUST {must.get('passed')}/{must.get('total')}, "
                f"SHOULD {should.get('passed')}/{should.get('total')})"
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
            "peak RSS under load (MiB)",
            "compliance",
        ],
        rows,
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
    L += db_report.section(res)  # issue 15: the db profile's section ([] otherwise)
    L += ["## Charts", ""]
    for name, title in (
        ("throughput", "Requests per second"),
        ("cpu", "Server CPU per request"),
        ("latency", "Latency p50 and p99"),
        ("memory", "Memory"),
    ):
        L.append(f"![{title}](charts/{name}.svg)")
    L += [
        "",
        "Every raw figure (each run, warm-up, errors, versions) is in `results.json`; "
        "`./scripts/lab report DIR` regenerates this page and the charts from it.",
        "",
    ]
    return "\n".join(L)


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
    return [text]


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


def _tools_line(tools: dict) -> str:
    keep = ["rustc", "go", "node", "bun", "nginx", "gcc", "python"]
    out = []
    for k in keep:
        v = tools.get(k)
        if v:
            out.append(v if k in v.lower() else f"{k} {v}")
    return "; ".join(out)


def write(res: dict, out_dir: Path) -> Path:
    path = Path(out_dir) / "report.md"
    path.write_text(render(res))
    return path
