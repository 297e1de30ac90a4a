"""SVG charts (matplotlib, Agg backend) made from results.json: throughput, CPU per request,
latency p50/p99 and memory. One panel per (scenario, pipelining depth); in each panel one group
of horizontal bars per server, one bar per concurrency level. Every bar of a median carries its
interval as an error bar (`tables.run_interval`)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from . import report  # noqa: E402
from .tables import run_interval  # noqa: E402

# Stable SVG output (no random ids / dates) so regenerated charts diff cleanly.
plt.rcParams["svg.hashsalt"] = "peregrine-lab"
plt.rcParams["svg.fonttype"] = "none"
METADATA = {"Date": None}
BAR_COLOR = "#4c72b0"
REF_COLOR = "#dd8452"
ERROR_BARS = "error bars: 95% interval of the median (6+ runs), else the runs' range"
ERR_STYLE = {"ecolor": "#333333", "elinewidth": 0.7, "capsize": 1.5}


def _err(cells: list, key: str, scale: float) -> list[list[float]]:
    """matplotlib's xerr for bars at the medians of `cells`: the distance from each median down
    and up to its interval (0 where a cell has none)."""
    lo, hi = [], []
    for cell in cells:
        med = report._value(cell, key) * scale
        iv = run_interval(r.get(key) for r in cell.get("runs") or [])
        lo.append(0.0 if iv is None else max(0.0, med - iv[0] * scale))
        hi.append(0.0 if iv is None else max(0.0, iv[1] * scale - med))
    return [lo, hi]


def _panels(res):
    grouped = report.groups(res)
    titles = {s["name"]: s.get("title", s["name"]) for s in res.get("scenarios", [])}
    return [
        ((scen, pipe), cells, titles.get(scen, scen)) for (scen, pipe), cells in grouped.items()
    ]


def _servers_in(cells, order):
    return [
        s for s in order if any(k[0] == s and c.get("status") == "ok" for k, c in cells.items())
    ]


def _panel_grid(panels, order):
    """A figure with one horizontal-bar panel per (scenario, pipelining) in two columns, tall
    enough for the panel with the most servers; unused grid cells hidden."""
    ncols = 2 if len(panels) > 1 else 1
    nrows = (len(panels) + ncols - 1) // ncols
    heights = [len(_servers_in(p[1], order)) for p in panels]
    fig_h = max(3.0, 0.32 * max(heights) + 1.2) * nrows
    fig, axes = plt.subplots(nrows, ncols, figsize=(7.5 * ncols, fig_h), squeeze=False)
    for ax in axes.flat[len(panels) :]:
        ax.set_visible(False)
    return fig, axes


def _bar_chart(res, key, xlabel, scale, path: Path) -> Path | None:
    panels = _panels(res)
    order = [s["name"] for s in res.get("servers", [])]
    labels = report._labels(res)
    ref = report.reference_server(res)
    panels = [p for p in panels if _servers_in(p[1], order)]
    if not panels:
        return None
    fig, axes = _panel_grid(panels, order)
    for ax, ((_scen, pipe), cells, title) in zip(axes.flat, panels, strict=False):
        servers = _servers_in(cells, order)
        concs = sorted({c for (_, c) in cells})
        n = len(concs)
        height = 0.8 / n
        for j, c in enumerate(concs):
            ys, vals, shown = [], [], []
            for i, s in enumerate(servers):
                v = report._value(cells.get((s, c)), key)
                if v is not None:
                    ys.append(i + (j - (n - 1) / 2) * height)
                    vals.append(v * scale)
                    shown.append(cells[(s, c)])
            colors = None
            if n == 1:
                # One concurrency level: colour the reference server's bar apart.
                colors = [
                    REF_COLOR if s == ref else BAR_COLOR
                    for s in servers
                    if report._value(cells.get((s, c)), key) is not None
                ]
            bars = ax.barh(
                ys,
                vals,
                height=height * 0.95,
                label=f"c={c}",
                color=colors,
                xerr=_err(shown, key, scale),
                error_kw=ERR_STYLE,
            )
            ax.bar_label(bars, labels=[_num(v) for v in vals], fontsize=6, padding=2)
        ax.set_yticks(range(len(servers)))
        ax.set_yticklabels([labels.get(s, s) for s in servers], fontsize=8)
        _mark_reference(ax, servers, ref)
        ax.invert_yaxis()
        ax.set_title(
            f"{title} ({'no pipelining' if pipe <= 1 else f'pipelined {pipe}'})", fontsize=10
        )
        ax.set_xlabel(xlabel, fontsize=8)
        ax.tick_params(axis="x", labelsize=8)
        ax.margins(x=0.12)  # room for the value labels
        ax.grid(axis="x", alpha=0.3)
        if n > 1:
            ax.legend(fontsize=7)
    _finish(fig, res)
    fig.savefig(path, format="svg", metadata=METADATA)
    plt.close(fig)
    return path


def _latency_chart(res, path: Path) -> Path | None:
    panels = _panels(res)
    order = [s["name"] for s in res.get("servers", [])]
    labels = report._labels(res)
    ref = report.reference_server(res)
    # Pipelined cells carry no latency (see runner): their panels are left out.
    panels = [
        p
        for p in panels
        if _servers_in(p[1], order)
        and any(report._value(cell, "p50_us") is not None for cell in p[1].values())
    ]
    if not panels:
        return None
    fig, axes = _panel_grid(panels, order)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, ((_scen, pipe), cells, title) in zip(axes.flat, panels, strict=False):
        servers = _servers_in(cells, order)
        concs = sorted({c for (_, c) in cells})
        n = len(concs)
        height = 0.8 / n
        for j, c in enumerate(concs):
            color = colors[j % len(colors)]
            for key, alpha, lab in (("p99_us", 0.35, "p99"), ("p50_us", 1.0, "p50")):
                ys, vals, shown = [], [], []
                for i, s in enumerate(servers):
                    v = report._value(cells.get((s, c)), key)
                    if v is not None:
                        ys.append(i + (j - (n - 1) / 2) * height)
                        vals.append(v / 1000)
                        shown.append(cells[(s, c)])
                bars = ax.barh(
                    ys,
                    vals,
                    height=height * 0.95,
                    color=color,
                    alpha=alpha,
                    label=f"{lab} c={c}",
                    xerr=_err(shown, key, 1 / 1000),
                    error_kw=ERR_STYLE,
                )
                if key == "p99_us":
                    ax.bar_label(bars, labels=[_num(v) for v in vals], fontsize=6, padding=2)
        ax.set_yticks(range(len(servers)))
        ax.set_yticklabels([labels.get(s, s) for s in servers], fontsize=8)
        _mark_reference(ax, servers, ref)
        ax.invert_yaxis()
        ax.set_title(
            f"{title} ({'no pipelining' if pipe <= 1 else f'pipelined {pipe}'})", fontsize=10
        )
        ax.set_xlabel("latency, ms (dark: p50, light: p99; lower is better)", fontsize=8)
        ax.tick_params(axis="x", labelsize=8)
        ax.grid(axis="x", alpha=0.3)
        ax.margins(x=0.12)
        ax.legend(fontsize=7)
    _finish(fig, res)
    fig.savefig(path, format="svg", metadata=METADATA)
    plt.close(fig)
    return path


def _memory_chart(res, path: Path) -> Path | None:
    labels = report._labels(res)
    ref = report.reference_server(res)
    rows = []
    names_kept: list[str] = []
    for s in res.get("servers", []):
        im = s.get("idle_memory") or {}
        idle = im.get("per_connection_bytes")
        peaks = [
            c
            for c in res.get("cells", [])
            if c["server"] == s["name"] and report._value(c, "peak_rss_bytes") is not None
        ]
        peak = max(peaks, key=lambda c: report._value(c, "peak_rss_bytes"), default=None)
        if idle is not None or peak:
            names_kept.append(s["name"])
            # One measurement of RSS, which counts whole (4 KiB) pages, before and after: the
            # figure is known to within two pages spread over the connections.
            page_err = (
                2 * 4096 / im["opened"] / 1024 if idle is not None and im.get("opened") else 0
            )
            rows.append(
                (
                    labels.get(s["name"], s["name"]),
                    None if idle is None else idle / 1024,
                    None if peak is None else report._value(peak, "peak_rss_bytes") / 2**20,
                    [[page_err], [page_err]],
                    [[0.0], [0.0]] if peak is None else _err([peak], "peak_rss_bytes", 2**-20),
                )
            )
    if not rows:
        return None
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(13, max(3.0, 0.32 * len(rows) + 1.4)))
    names = [r[0] for r in rows]
    for ax, idx, xlabel, title in (
        (
            a1,
            1,
            "KiB per idle keep-alive connection (one measurement)",
            "Idle memory per connection (error bars: ± 2 RSS pages)",
        ),
        (
            a2,
            2,
            "MiB (VmHWM summed over the process tree, highest cell)",
            "Peak RSS under load",
        ),
    ):
        vals = [r[idx] if r[idx] is not None else 0 for r in rows]
        err = [[r[idx + 2][k][0] for r in rows] for k in (0, 1)]
        bars = ax.barh(
            range(len(rows)),
            vals,
            color="#4c72b0" if idx == 1 else "#dd8452",
            xerr=err,
            error_kw=ERR_STYLE,
        )
        ax.bar_label(
            bars,
            labels=["" if r[idx] is None else _num(r[idx]) for r in rows],
            fontsize=6,
            padding=2,
        )
        ax.margins(x=0.12)
        ax.set_yticks(range(len(rows)))
        ax.set_yticklabels(names, fontsize=8)
        _mark_reference(ax, names_kept, ref)
        ax.invert_yaxis()
        ax.set_xlabel(xlabel, fontsize=8)
        ax.set_title(title, fontsize=10)
        ax.grid(axis="x", alpha=0.3)
        for i, r in enumerate(rows):
            if r[idx] is None:
                ax.text(0, i, " n/a", va="center", fontsize=7)
    _finish(fig, res)
    fig.savefig(path, format="svg", metadata=METADATA)
    plt.close(fig)
    return path


def _open_loop_chart(res, path: Path) -> Path | None:
    """Latency against achieved throughput from the open-loop sweep: one panel per scenario, one
    colour per server, p50 solid, p99 dashed, p99.9 dotted (log scale)."""
    recs = [r for r in res.get("open_loop") or [] if r.get("points")]
    if not recs:
        return None
    labels = report._labels(res)
    scens = sorted({r["scenario"] for r in recs})
    fig, axes = plt.subplots(1, len(scens), figsize=(9 * len(scens), 6), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, scen in zip(axes.flat, scens, strict=False):
        for i, r in enumerate(x for x in recs if x["scenario"] == scen):
            color = colors[i % len(colors)]
            pts = [p for p in r["points"] if p.get("p50_us")]
            xs = [p["rps"] / 1000 for p in pts]
            for key, style, _lab in (
                ("p50_us", "-", "p50"),
                ("p99_us", "--", "p99"),
                ("p999_us", ":", "p99.9"),
            ):
                ys = [(p.get(key) or float("nan")) / 1000 for p in pts]
                ax.plot(
                    xs,
                    ys,
                    style,
                    color=color,
                    marker="o" if key == "p50_us" else None,
                    markersize=3,
                    label=f"{labels.get(r['server'], r['server'])}" if key == "p50_us" else None,
                )
        ax.set_yscale("log")
        ax.set_xlabel("achieved requests per second (thousands)", fontsize=9)
        ax.set_ylabel("latency, ms (solid p50, dashed p99, dotted p99.9)", fontsize=9)
        ax.set_title(f"{scen}: open loop, latency against throughput", fontsize=10)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
    _finish(fig, res)
    fig.savefig(path, format="svg", metadata=METADATA)
    plt.close(fig)
    return path


def _finish(fig, res) -> None:
    """Title over the panels, with room kept for it (tight_layout alone lets it overlap)."""
    fig.suptitle(_suptitle(res), fontsize=9)
    height = fig.get_size_inches()[1]
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.35 / height))


def _mark_reference(ax, servers, ref) -> None:
    """Bold tick label for the server the report's ratios are taken to."""
    for label, name in zip(ax.get_yticklabels(), servers, strict=False):
        if name == ref:
            label.set_fontweight("bold")


def _num(v: float) -> str:
    """Compact bar label: 3 significant digits, thousands grouped."""
    if v >= 1000:
        return f"{v:,.0f}"
    if v >= 100:
        return f"{v:.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def _suptitle(res) -> str:
    st = res.get("settings", {})
    m = res.get("machine", {})
    return (
        f"Peregrine lab, profile {res.get('profile')}: {m.get('cpu_model')}, server on CPU "
        f"{','.join(map(str, st.get('server_cpus', [])))}, {st.get('loadgen')} on CPU "
        f"{','.join(map(str, st.get('client_cpus', [])))}; medians of up to {st.get('runs')} runs"
        f"; {ERROR_BARS}"
    )


def write_all(res: dict, out_dir: Path) -> list[Path]:
    d = Path(out_dir) / "charts"
    d.mkdir(parents=True, exist_ok=True)
    made = [
        _bar_chart(res, "rps", "requests per second (higher is better)", 1.0, d / "throughput.svg"),
        _bar_chart(
            res, "cpu_us_per_req", "server CPU µs per request (lower is better)", 1.0, d / "cpu.svg"
        ),
        _latency_chart(res, d / "latency.svg"),
        _memory_chart(res, d / "memory.svg"),
        _open_loop_chart(res, d / "open_loop.svg"),
    ]
    return [p for p in made if p is not None]
