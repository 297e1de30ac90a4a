"""report.md and a chart of an HTTP/3 run (h3_lane.py) from its results.json: the target
(Peregrine's CPU per request over HTTP/3 against the best HTTP/3 peer's), each lane's cells,
HTTP/3 beside HTTP/2 and HTTPS per server, negotiated TLS and parity, memory per idle
connection, and latency under loss and reordering (h3_impair.py). Table helpers are the
protocols report's."""

from __future__ import annotations

from pathlib import Path

from . import figures, h3_impair, stats, tls_lanes
from .h3_lane import MODE_PROTOCOL, RATES
from .tls_report import NA, _ci, _f, _kib, _quietness, _table, save_chart

REFERENCE = "peregrine-h3"
LANE_ORDER = ("h3-rate", "h3", "h2", "https")
PROTOCOLS = ("h3", "h2", "https")
"""Idle memory is per protocol: `h3-rate` is the `h3` protocol at another load."""
TARGET_MODES = ("h3-rate", "h3")
"""The target at equal load first (every server at the same offered rate), then closed loop."""
CLIENT_BOUND_SHARE = 0.95
"""Median busy share of the client CPUs from which a lane's req/s is the load generator's limit."""


def target(res: dict, mode: str = "h3-rate") -> dict:
    """The HTTP/3 target in lane `mode`: Peregrine's CPU per request over HTTP/3 over the best
    (lowest median) HTTP/3 peer's, with the ratio's t 95% interval (paired by round); met only
    when its upper bound is ≤ 1."""
    mine = tls_lanes.find_cell(res, REFERENCE, mode)
    peers = [
        c
        for c in res.get("cells", [])
        if c["mode"] == mode and c["status"] == "ok" and c["server"] != REFERENCE
    ]
    best = min(peers, key=lambda c: c["median"]["cpu_us_per_req"], default=None)
    row = {
        "mode": mode,
        "what": "HTTP/3 CPU per request ≤ the best HTTP/3 peer's",
        "against": best["server"] if best else None,
        "ratio": None,
        "ci": None,
        "met": None,
    }
    if mine is None:
        row["why_not"] = _why_not_measured(res, mode)
    elif best is not None:
        est = tls_lanes.cpu_ratio(mine, best)
        ci = est.ci if est else None
        row.update(
            ratio=est.ratio if est else None,
            ci=list(ci) if ci else None,
            method=est.method if est else None,
            met=stats.target_met(ci, 1.0),
            mine=mine["median"]["cpu_us_per_req"],
            theirs=best["median"]["cpu_us_per_req"],
        )
    return row


def verdict(t: dict) -> str:
    """A target row's verdict: met (the interval's upper bound ≤ 1), not met and decided (its
    lower bound > 1 too), not met with an interval that includes 1 (more rounds could decide
    it), or no interval."""
    if t.get("ci") is None:
        return "no interval"
    if t["met"]:
        return "met"
    return "not met" if t["ci"][0] > 1 else "not met (undecided: the interval includes 1)"


def _why_not_measured(res: dict, mode: str) -> str:
    """Why Peregrine has no HTTP/3 figure: not built (unavailable), parity, or its cell's end."""
    entry = next((s for s in res.get("servers", []) if s["name"] == REFERENCE), None)
    if entry is None:
        return "not in this run"
    if entry.get("status") != "ok":
        return entry.get("message") or entry.get("status")
    problems = ((entry.get("parity") or {}).get("h3") or {}).get("problems")
    if problems:
        return "HTTP/3 parity failed: " + "; ".join(problems)
    cell = next(
        (c for c in res.get("cells", []) if c["server"] == REFERENCE and c["mode"] == mode), {}
    )
    return f"{cell.get('status', 'no cell')}: {cell.get('message') or 'no message'}"


def _cell_rows(res: dict, mode: str, labels: dict) -> list[list[str]]:
    cells = [c for c in res.get("cells", []) if c["mode"] == mode]
    cells.sort(key=lambda c: (c["status"] != "ok", (c["median"] or {}).get("cpu_us_per_req") or 0))
    rows = []
    for c in cells:
        name = labels.get(c["server"], c["server"])
        if c["status"] != "ok":
            rows.append([name, c["status"], NA, NA, NA, (c.get("message") or "")[:120]])
            continue
        med = c["median"]
        rows.append(
            [
                name,
                f"{med['rps']:,.0f}",
                _f(med["cpu_us_per_req"]),
                _ci(c.get("cpu_ci")),
                _f(med.get("p99_us"), "{:.0f}"),
                f"{len(c['runs'])} runs",
            ]
        )
    return rows


def _by_server_rows(res: dict, labels: dict) -> list[list[str]]:
    """Per server: CPU µs/req and p99 of each lane it is in, then idle memory per protocol."""
    rows = []
    for s in res.get("servers", []):
        row = [labels.get(s["name"], s["name"])]
        for mode in LANE_ORDER:
            cell = tls_lanes.find_cell(res, s["name"], mode)
            if cell is None:
                offered = MODE_PROTOCOL[mode] in s.get("protocols", []) and s.get("status") == "ok"
                row.append(
                    "not measured"
                    if offered
                    else (NA if s.get("status") == "ok" else s.get("status"))
                )
            else:
                med = cell["median"]
                row.append(
                    f"{_f(med['cpu_us_per_req'])} µs, p99 {_f(med.get('p99_us'), '{:.0f}')} µs"
                )
        for proto in PROTOCOLS:
            idle = ((s.get("idle_memory") or {}).get(proto) or {}).get("per_connection_bytes")
            row.append(_kib(idle))
        rows.append(row)
    return rows


def render(res: dict) -> str:
    labels = {s["name"]: s.get("label", s["name"]) for s in res.get("servers", [])}
    st = res.get("settings", {})
    m = res.get("machine", {})
    git = res.get("git", {})
    lines = [
        "# Peregrine lab: HTTP/3 lane (`h3`)",
        "",
        f"Generated {res.get('generated_at')} by `{res.get('command')}` "
        f"(git {git.get('commit', '?')[:12]}{' + uncommitted changes' if git.get('dirty') else ''}"
        f"); {'complete' if res.get('complete') else 'INCOMPLETE'} run, "
        f"{_f(res.get('measure_seconds'), '{:.0f}')} s of measuring, "
        f"{_f(res.get('wall_seconds'), '{:.0f}')} s in all.",
        "",
        f"> {figures.staleness(res)}",
        "",
        _quietness(res),
        "",
        "## Method",
        "",
        f"- {res.get('profile_description')}.",
        f"- Server pinned to CPU(s) {st.get('server_cpus')} with WORKERS={st.get('workers')}, "
        f"load generators to CPU(s) {st.get('client_cpus')}; CPU time of the server's process "
        f"tree from `/proc/PID/task/*/schedstat`; {st.get('runs')} runs of {st.get('duration')} "
        f"s per cell in randomised interleaved rounds (seed {st.get('order_seed')}), medians and "
        "distribution-free 95% intervals (none below 6 runs).",
        "- Lanes: " + "; ".join(f"`{k}`: {v}" for k, v in st.get("modes", {}).items()) + ".",
        "- Parity before any timing: HTTP/3 with h3client (quic-go, lab/peers/h3), `/plaintext` "
        "twice, each answer must be HTTP/3 and match the contract; HTTP/2 and HTTPS as in the "
        "protocols lanes.",
        f"- Certificate: {res.get('certificate', {}).get('description')}, made for this run.",
        f"- Machine: {m.get('cpu_model', '?')}, {m.get('nproc', '?')} CPUs (load average at "
        f"start {m.get('loadavg_at_start')}), kernel {m.get('kernel', '?')}. Tools: "
        + ", ".join(f"{k} {v}" for k, v in res.get("tools", {}).items() if v)
        + ".",
        "",
        "## Target",
        "",
    ]
    lines += _target_lines(res, labels)
    for mode in LANE_ORDER:
        if mode not in st.get("modes", {}):
            continue
        lines += [f"## Lane `{mode}`: {st['modes'][mode]}", ""]
        busy = stats.median(
            [
                r.get("client_cpus_busy_share")
                for c in res.get("cells", [])
                if c["mode"] == mode
                for r in c.get("runs", [])
                if r.get("client_cpus_busy_share") is not None
            ]
        )
        if busy is not None:
            lines += [_client_note(mode, busy), ""]
        lines += _table(
            ["server", "req/s", "CPU µs/req (median)", "95% interval", "p99 µs", "runs"],
            _cell_rows(res, mode, labels),
        )
    lines += [
        "## HTTP/3 beside HTTP/2 and HTTPS, per server",
        "",
        f"CPU per request (median) and p99 of each lane; memory per idle connection: "
        f"{st.get('idle_connections')} connections each complete a handshake and one request, "
        "then stay open; RSS growth of the server tree ÷ the connections, a fresh process per "
        "protocol.",
        "",
    ]
    header = ["server", *LANE_ORDER, *(f"idle {p}" for p in PROTOCOLS)]
    lines += _table(header, _by_server_rows(res, labels))
    lines += ["## Servers: version, negotiated TLS, parity", ""]
    rows = []
    for s in res.get("servers", []):
        if s.get("status") != "ok":
            rows.append([labels.get(s["name"], s["name"]), s.get("version") or NA, s["status"],
                         NA, NA, s.get("message") or NA])  # fmt: skip
        for proto in s.get("protocols", []) if s.get("status") == "ok" else []:
            h = (s.get("handshake") or {}).get(proto) or {}
            p = (s.get("parity") or {}).get(proto) or {}
            rows.append(
                [
                    labels.get(s["name"], s["name"]),
                    s.get("version") or NA,
                    proto,
                    f"{h.get('protocol') or NA} {h.get('cipher') or ''}".strip(),
                    f"{h.get('key_exchange') or NA}, ALPN {h.get('alpn') or NA}",
                    "ok" if p.get("ok") else ("; ".join(p.get("problems") or []) or NA),
                ]
            )
    lines += _table(["server", "version", "protocol", "TLS", "key exchange", "parity"], rows)
    lines += h3_impair.render(res, labels)
    lines += ["Chart of CPU per request: `charts/cpu_per_request.svg`.", ""]
    return "\n".join(lines)


def _client_note(mode: str, busy: float) -> str:
    """How busy the load generator was in lane `mode` and what that means for its figures."""
    text = f"The load generator's CPUs were {busy * 100:.0f}% busy (median of the runs)"
    if busy < CLIENT_BOUND_SHARE:
        return text + "."
    if mode in RATES:
        return text + (
            ": the rate is offered, so req/s is the offered one, but the client's own queue is "
            "in the latency; CPU per request is the server's own."
        )
    return text + (
        ": req/s here is the client's ceiling, not the server's; CPU per request is the "
        "server's own."
    )


def _target_lines(res: dict, labels: dict) -> list[str]:
    """One row per lane of `TARGET_MODES` in this run: the paired ratio, its interval, the
    verdict; the first row (equal offered load) is the one the target is judged by."""
    rows, missing = [], []
    for mode in (m for m in TARGET_MODES if m in res.get("settings", {}).get("modes", {})):
        t = target(res, mode)
        if t.get("why_not"):
            missing.append(f"`{mode}`: {t['why_not']}")
            continue
        rows.append(
            [
                f"`{mode}`",
                labels.get(t["against"], t["against"] or NA),
                _f(t.get("mine")),
                _f(t.get("theirs")),
                _f(t["ratio"], "{:.3f}"),
                NA if not t["ci"] else f"[{t['ci'][0]:.3f}, {t['ci'][1]:.3f}]",
                t.get("method") or NA,
                f"**{verdict(t)}**",
            ]
        )
    lines = [
        "HTTP/3 CPU per request of Peregrine over the best HTTP/3 peer's (lowest median), the "
        "ratio's 95% interval from the runs paired by round; met when the interval's upper bound "
        "is ≤ 1. Judged at the fixed offered rate (`h3-rate`, equal load for every server); the "
        "closed loop (`h3`) is shown beside it.",
        "",
    ]
    if rows:
        header = ["lane", "against", "Peregrine CPU µs/req", "theirs", "ratio", "95% interval"]
        lines += _table(header + ["method", "verdict"], rows)
    lines += [f"Peregrine has no HTTP/3 figure in lane {m}." for m in missing]
    return lines + ([""] if missing else [])


def _ms(cell: dict | None) -> str:
    us = (cell or {}).get("p99_us")
    return NA if us is None else f"{us / 1000:.1f}"


def figure_lines(res: dict) -> list[str]:
    """The docs' figures of a run (figures.py, key `h3`): the target at equal load, and per
    server CPU per request in each lane, closed-loop req/s, idle memory over HTTP/3 and p99
    under the loss phase's settings."""
    labels = {s["name"]: s.get("label", s["name"]) for s in res.get("servers", [])}
    t = target(res)
    if t.get("why_not"):
        head = f"Peregrine has no HTTP/3 figure at the fixed rate: {t['why_not']}."
    else:
        ci = "no interval" if not t["ci"] else f"95% interval [{t['ci'][0]:.3f}, {t['ci'][1]:.3f}]"
        head = (
            f"Target, HTTP/3 CPU per request at equal offered load (`h3-rate`) ≤ the best HTTP/3 "
            f"peer's ({labels.get(t['against'], t['against'] or NA)}): Peregrine / theirs = "
            f"{_f(t['ratio'], '{:.3f}')}, {ci}: **{verdict(t)}**."
        )
    settings = [s["name"] for s in (res.get("impairment") or {}).get("settings", [])]
    rows = []
    for s in res.get("servers", []):
        cpu = [_f((tls_lanes.find_cell(res, s["name"], m) or {}).get("median", {}).get(
            "cpu_us_per_req")) for m in LANE_ORDER]  # fmt: skip
        closed = (tls_lanes.find_cell(res, s["name"], "h3") or {}).get("median") or {}
        idle = ((s.get("idle_memory") or {}).get("h3") or {}).get("per_connection_bytes")
        p99 = [_ms(h3_impair.cell(res["impairment"], s["name"], n)) for n in settings]
        rps = NA if closed.get("rps") is None else f"{closed['rps']:,.0f}"
        rows.append([labels.get(s["name"], s["name"]), *cpu, rps, _kib(idle), *p99])
    header = [f"{m} CPU µs/req" for m in LANE_ORDER] + ["h3 req/s (closed loop)", "idle h3"]
    header += [f"p99 ms, {n}" for n in settings]
    return [head, "", *_table(["server", *header], rows)][:-1]


def chart(res: dict, out_dir: Path) -> list[Path]:
    """CPU per request per server, one bar per protocol, the 95% interval as error bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.hashsalt"] = "peregrine-lab"
    plt.rcParams["svg.fonttype"] = "none"
    servers = [s for s in res.get("servers", []) if s.get("status") == "ok"]
    fig, ax = plt.subplots(figsize=(8, 0.7 * len(servers) + 1.5))
    width = 0.2
    for i, (mode, color) in enumerate(
        zip(LANE_ORDER, ("#8c1c13", "#c44e52", "#dd8452", "#4c72b0"), strict=True)
    ):
        ys, xs, lo, hi = [], [], [], []
        for j, s in enumerate(servers):
            cell = tls_lanes.find_cell(res, s["name"], mode)
            if cell is None:
                continue
            v = cell["median"]["cpu_us_per_req"]
            ci = cell.get("cpu_ci") or [v, v]
            ys.append(j + (i - 1.5) * width)
            xs.append(v)
            lo.append(v - ci[0])
            hi.append(ci[1] - v)
        ax.barh(ys, xs, xerr=[lo, hi], height=width, color=color, label=mode, capsize=2)
    ax.set_yticks(range(len(servers)), [s.get("label", s["name"]) for s in servers])
    ax.tick_params(axis="y", labelsize=8)
    ax.set_xlabel("server CPU µs per request (median, 95% interval)")
    ax.legend(fontsize=8)
    p = save_chart(plt, fig, out_dir / "charts", "cpu_per_request")
    loss = h3_impair.chart(res, out_dir, plt)
    return [p] + ([loss] if loss else [])


def write(res: dict, out_dir: Path) -> tuple[Path, list[Path]]:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "report.md"
    path.write_text(render(res))
    return path, chart(res, out_dir)
