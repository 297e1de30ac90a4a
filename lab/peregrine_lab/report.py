"""The Markdown report, made from results.json alone (so `./scripts/lab report DIR` can redo it).

Tables follow the seeds' layout: servers as rows, concurrency levels as columns, the best value of
each column in bold, and each figure's ratio to Peregrine. A cell that was not measured says why
(n/a: the server does not serve that scenario; parity: its answer differs from the contract)."""

from __future__ import annotations

from pathlib import Path

from . import db_report, figures, report_verdicts, resilience, results, scaling_report, stats
from .report_tables import (
    CONSTANT_ANSWERS,
    NA,
    _group_tables,
    _kib,
    _labels,
    _mib,
    _overview,
    _pipe_text,
    _ratio_method_row,
    _scenario_titles,
    _server_order,
    _table,
    _unranked_note,
    _value,
    derive_medians,
    groups,
    methods_used,
    ratio_estimate,
    reference_server,
)
from .report_verdicts import BEFORE, _before_after_lines, before_after, targets

__all__ = [
    "BEFORE",
    "_before_after_lines",
    "_labels",
    "_value",
    "before_after",
    "groups",
    "methods_used",
    "ratio_estimate",
    "reference_server",
    "render",
    "targets",
    "version_text",
    "write",
]

# The scenario the probe sends its accepted requests with bodies to (probe/README.md).
PROBE_BODY_SCENARIO = "post_json"


def render(res: dict) -> str:
    derive_medians(res)
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
        f"> {figures.staleness(res)}",
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
    L += report_verdicts.targets_lines(res)
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
    L += report_verdicts.setup_lines(res)
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
            if knee:
                row.append(f"{knee // 1000}k")
            elif r["status"] != "ok":
                row.append(r["status"])
            else:
                # One rate offered (the fixed-rate lane) is no sweep: no knee to speak of.
                row.append("> swept" if len(r["points"]) > 1 else "one rate")
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
