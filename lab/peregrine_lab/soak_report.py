"""The soak's chart (SVG) and report.md, made from its results.json: every sampled series over
time with the warm-up shaded, and the budgets as a pass/fail table."""

from __future__ import annotations

from pathlib import Path

from . import charts, figures


def chart(samples: list[dict], budgets: dict, path: Path, title: str) -> None:
    """RSS, descriptors, connections by state, CPU and latency over time (SVG)."""
    plt = charts.plt
    ts = [s["t"] for s in samples]
    fig, axes = plt.subplots(5, 1, figsize=(9, 12.5), sharex=True)
    axes[0].plot(
        ts, [s["rss_kib"] / 1024 if s.get("rss_kib") else None for s in samples], marker=".", lw=1
    )
    if any(s.get("heap_kib") is not None for s in samples):
        axes[0].plot(
            ts,
            [s["heap_kib"] / 1024 if s.get("heap_kib") is not None else None for s in samples],
            marker=".",
            lw=1,
            label="live heap",
        )
        axes[0].legend(["RSS", "live heap"], loc="center right")
    axes[0].set_ylabel("memory (MiB)")
    axes[1].plot(ts, [s.get("fds") for s in samples], marker=".", lw=1)
    axes[1].set_ylabel("open descriptors")
    states = sorted({k for s in samples for k in s.get("tcp_states", {})} - {"listen"})
    for state in states:
        axes[2].plot(
            ts, [s.get("tcp_states", {}).get(state, 0) for s in samples], lw=1, label=state
        )
    axes[2].set_ylabel("server TCP sockets")
    if states:
        axes[2].legend(loc="upper right", fontsize="small", ncol=3)
    axes[3].plot(ts, [s.get("cpu_pct") for s in samples], lw=1, label="server")
    # C1 is the twin axis's µs/request.
    for key, label, color in (("cpu_pct_oha", "oha", "C2"), ("cpu_pct_machine", "machine", "C3")):
        if any(s.get(key) is not None for s in samples):
            values = [s.get(key) for s in samples]
            axes[3].plot(ts, values, lw=1, ls="--", color=color, label=label)
    axes[3].legend(loc="upper left", fontsize="small", ncol=3)
    twin = axes[3].twinx()
    twin.plot(
        ts, [s.get("cpu_us_per_request") for s in samples], lw=1, color="C1", label="µs/request"
    )
    axes[3].set_ylabel("CPU (% of one core)")
    twin.set_ylabel("CPU µs per request", color="C1")
    ax = axes[4]
    for key, label in (("p50_ms", "p50"), ("p99_ms", "p99"), ("p999_ms", "p99.9")):
        ax.plot(ts, [s.get(key) for s in samples], label=label, lw=1)
    if any("reference" in s for s in samples):
        twin_p99 = [(s.get("reference") or {}).get("p99_ms") for s in samples]
        ax.plot(ts, twin_p99, lw=1, ls="--", color="k", label="p99, fresh twin")
    errs = [sum(s.get("errors", {}).values()) for s in samples]
    if any(errs):
        hit = [t for t, e in zip(ts, errs, strict=True) if e]
        ax.scatter(hit, [0] * len(hit), color="red", marker="x", label="errors")
    ax.set_yscale("log")
    ax.set_ylabel("steady latency (ms)")
    ax.set_xlabel("seconds")
    ax.legend(loc="upper right")
    for ax in axes:
        ax.axvspan(0, budgets["warmup_seconds"], color="0.9", zorder=0)
        ax.grid(True, linewidth=0.3)
    verdict = "budgets met" if budgets["ok"] else "BUDGETS MISSED"
    fig.suptitle(f"{title}: {verdict}")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, metadata=charts.METADATA)
    plt.close(fig)


def _row(name: str, budget: str, series: dict) -> str:
    if "first_third_median" not in series:
        return f"| {name} | {budget} | – | – | **missed**: {'; '.join(series['failures'])} |"
    first, last = series["first_third_median"], series["last_third_median"]
    moved = f"{first:g} → {last:g} ({series['level_change']:+.1%})"
    low = series.get("slope_lower95_per_min")
    slope = (
        "–" if low is None else f"{series['slope_per_min']:+.3g}/min (95% lower bound {low:+.3g})"
    )
    return f"| {name} | {budget} | {moved} | {slope} | {_verdict(series['ok'])} |"


def _p99_rows(p99: dict) -> list[str]:
    """The p99 budget's row: on the ratio to the fresh twin's p99 when the run had reference
    intervals, with the two p99s' own thirds as a row of figures."""
    absolute = p99.get("absolute")
    if absolute is None:
        return [_row("steady p99 (ms)", "stable within 20%", p99)]
    rows = [_row("steady p99 / fresh twin's p99", "stable within 20%", p99)]
    soaked, twin = p99.get("soaked_ms"), p99.get("twin_ms")
    if soaked and twin:
        moved = ", ".join(
            f"{who} {v['first_third']:g} → {v['last_third']:g}"
            for who, v in (("soaked", soaked), ("twin", twin))
        )
        rows.append(f"| steady p99 (ms), each | a figure: the machine moves it | {moved} | – | – |")
    return rows


def _verdict(ok: bool, why: object = "") -> str:
    return "met" if ok else f"**missed**{': ' + str(why) if why else ''}"


def _cpu(cpu: dict | None) -> str:
    """Each party's CPU, % of one core."""
    if not cpu:
        return "not measured"
    names = (
        ("server", "the server"),
        ("oha", "oha"),
        ("python_clients", "the Python clients"),
        ("machine", "the whole machine"),
    )
    return ", ".join(f"{label} {cpu.get(key)}%" for key, label in names)


def _limit(cal: dict, workers: int, cpus: int | None) -> str:
    """What set the capacity the calibration measured."""
    cpu = cal.get("cpu_pct") or {}
    server, machine = cal.get("server_cpu_pct"), cpu.get("machine")
    if server is not None and server >= 90 * workers:
        return "the server, near its workers' full CPU, was the limit"
    if machine is not None and cpus and machine >= 90 * cpus:
        return (
            "the machine's CPUs were the limit, shared by the server, the load generators and "
            "whatever else ran"
        )
    return "the load generators were the limit, not the server nor the machine"


def _load_lines(res: dict) -> list[str]:
    """The steady load's rate, the calibration it came from (when one ran), and the CPU each
    party used in both phases."""
    rate = res["plan"].get("steady_rate")
    cal = res.get("calibration")
    if not cal:
        return [f"Steady load: {rate} requests/s, a fixed rate (no calibration).", ""]
    workers = res["server"]["workers"]
    cpus = (res.get("machine") or {}).get("before", {}).get("cpus")
    share = res.get("server_busy_share")
    trials = cal.get("trials") or []
    if trials:
        steps = "; ".join(
            f"{t['rate']} req/s: " + ", ".join(f"{w} CPUs {b:.0%}" for w, b in t["busy"].items())
            for t in trials
        )
        target = (
            f"{rate} requests/s**, the rate at which the busiest CPUs were about "
            f"{cal['load_fraction']:.0%} busy in open-loop trials ({steps}); the capacity "
            "measured first"
        )
    else:
        target = f"{rate} requests/s, {cal['load_fraction']:.0%} of the capacity** measured first"
    return [
        f"Steady load: **{target}: {cal['capacity_rps']} requests/s from "
        f"{cal.get('loadgen', 'the Python client')} closed loop on "
        f"{cal['steady_connections']} keep-alive connections, with the rest of the mix "
        f"running, for {cal['seconds']} s (`{cal.get('command', '')}`); CPU meanwhile, % of one "
        f"core: {_cpu(cal.get('cpu_pct'))}; {_limit(cal, workers, cpus)}. Client errors in "
        f"the calibration: {cal['errors'] or 'none'}. Achieved over the run: "
        f"{res.get('steady_rps_achieved')} requests/s, open loop with coordinated omission "
        "corrected (oha `-q --latency-correction`), in segments of one sample interval.",
        "",
        f"CPU in the steady phase (medians of the samples after warm-up, % of one core): "
        f"{_cpu(res.get('cpu_pct_steady'))}; the server's busy share, its CPU against what it "
        f"used at capacity: {'–' if share is None else f'{share:.0%}'}.",
        "",
    ]


def _twin_lines(twin: dict | None) -> list[str]:
    if not twin:
        return []
    return [
        "",
        f"In every interval {twin['share']:.0%} of the steady load (its rate and its "
        "connections) went to a twin of the server started fresh for that interval (same "
        f"binary, arguments and CPUs; {twin['warmup_seconds']:g} s of its load before its "
        "measured segment); the p99 budget is each interval's soaked p99 over the twin's, so "
        "that the machine's speed and stalls, which move both, are not read as the server's. "
        f"Panics in the twins' logs: {twin['log_panics']}.",
    ]


def markdown(res: dict) -> str:
    """report.md: the verdict, the budgets' figures, what the clients did, how it ran."""
    b = res["budgets"]
    heap = b.get("heap")
    # With the live heap measured, it judges the trend (allocator retention moves RSS).
    rss_budget = "flat within 5%" + (" (trend: see live heap)" if heap else ", no upward trend")
    lines = [
        f"# Soak: {res['duration_seconds']:.0f} s of mixed load on the scenarios app",
        "",
        f"**Verdict: {'every budget met' if b['ok'] else 'BUDGETS MISSED'}.** "
        f"Command `{res['command']}`, started {res['started']}, commit `{res.get('git_commit')}`; "
        f"a sample every {res['interval_seconds']:.0f} s, the first {b['warmup_seconds']:.0f} s "
        "are warm-up (shaded in the chart, outside the budgets).",
        "",
        f"> {figures.commit_staleness(res.get('git_commit'))}",
        "",
        "![soak](soak.svg)",
        "",
        "| series | budget | first third → last third (median) | slope | verdict |",
        "|---|---|---|---|---|",
        _row("RSS (KiB)", rss_budget, b["rss"]),
        *([_row("live heap (KiB)", "flat within 5%, no upward trend", heap)] if heap else []),
        _row("open descriptors", "flat within 5%, no upward trend", b["fds"]),
        *_p99_rows(b["p99"]),
        f"| unexpected client errors | 0 | – | – | {_verdict(not b['errors'], b['errors'])} |",
        f"| server panics in its log | 0 | – | – | {_verdict(not res['server_log_panics'])} |",
        "",
    ]
    if b["failures"]:
        lines += ["Budgets missed:", ""] + [f"* {f}" for f in b["failures"]] + [""]
    lines += _load_lines(res)
    lines += ["## What the clients did", "", "| operation | completed |", "|---|---|"]
    lines += [f"| {k} | {v:,} |" for k, v in sorted(res["totals"].items())]
    srv = res["server"]
    lat = res.get("latency_overall_ms", {})
    lines += [
        "",
        f"Steady-load latency after warm-up (oha's, the median of the samples' figures): p50 "
        f"{lat.get('p50')} ms, p99 {lat.get('p99')} ms, p99.9 {lat.get('p999')} ms. Server "
        "CPU per request "
        f"(median of the samples): {res.get('cpu_us_per_request_median')} µs.",
        *_twin_lines(res.get("twin")),
        "",
        "## How it ran",
        "",
        f"`{srv['binary']}` ({srv['cargo_profile']}, features `{srv['features']}`, "
        f"{srv['workers']} workers, TLS {'on' if srv.get('tls') else 'off'}, PostgreSQL "
        f"{'on' if srv.get('database') else 'off'}); the plan: `{res['plan']}`.",
    ]
    m = res.get("machine")
    if m:
        lines += [
            "",
            f"The machine: {m['before']['cpus']} CPUs, 1-minute load average "
            f"{m['before']['loadavg_1min']} at the start and {m['after']['loadavg_1min']} at "
            "the end (the server and its clients share it with whatever else runs).",
        ]
    lines += [f"* {n}" for n in res.get("notes", [])]
    return "\n".join(lines) + "\n"
