"""report.md of `./scripts/lab seeds`: one table per seed in the seed's own layout, the seed's
published rows beside ours, the ratios between the systems present in both (a difference of
more than 20% flagged, with the measured checks under it), and our Peregrine rows placed against
the systems that were not re-run only through the row both tables share."""

from __future__ import annotations

import shlex
from pathlib import Path

from ..figures import staleness
from . import experiments, figures

FLAG = 0.20


def _num(v, digits=0) -> str:
    if v is None:
        return "–"
    if digits == 0:
        return f"{v:,.0f}".replace(",", " ")
    return f"{v:.{digits}f}"


def _ms(v) -> str:
    if v is None:
        return "–"
    return f"{v:.2f}" if v < 100 else f"{v:,.0f}".replace(",", " ")


def _label(row: str, seed: bool, not_rerun) -> str:
    if not seed:
        return f"{row} (here)"
    return f"{row} (seed{', not re-run' if row in not_rerun else ''})"


def _rows(exp, ours_t: dict, theirs_t: dict):
    """(label, figures by column) for the seed's rows, then ours, in the seed's row order."""
    not_rerun = exp.published.get("not_rerun", [])
    out = [(_label(r, True, not_rerun), by_c) for r, by_c in theirs_t.items()]
    out += [(_label(r, False, not_rerun), by_c) for r, by_c in ours_t.items()]
    return out


def _value(f: dict | None, key: str) -> str:
    if not f:
        return "–"
    v = f.get(key)
    if key == "rps":
        sd = f.get("sd")
        return _num(v) + (f" ± {_num(sd)}" if sd is not None else "")
    if key == "timeouts":
        return _num(v)
    return _ms(v)


def _grid(head: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return lines + ["| " + " | ".join(r) + " |" for r in rows]


def _metric_blocks(exp, table, ours, theirs, columns, metrics):
    """NURL's layout: a block of rows per metric, servers as rows, C as columns."""
    rows = []
    for title, key in metrics:
        rows.append([f"**{title}**"] + [""] * len(columns))
        for label, by_c in _rows(exp, ours.get(table, {}), theirs.get(table, {})):
            rows.append([label] + [_value(by_c.get(c), key) for c in columns])
    return _grid(["Server"] + [f"C = {c}" for c in columns], rows)


def _server_rows(exp, table, ours, theirs, column, fields):
    """Kourier's and NextRush's layout: one row per server, the figures as columns."""
    rows = [
        [label] + [_value(by_c.get(column), key) for _, key in fields]
        for label, by_c in _rows(exp, ours.get(table, {}), theirs.get(table, {}))
    ]
    return _grid(["Server"] + [t for t, _ in fields], rows)


def _concurrency_rows(exp, table, ours, theirs, columns, key="rps", latency=False):
    """rust-http's and NextRush's wrk layout: concurrency as rows, servers as columns."""
    pairs = _rows(exp, ours.get(table, {}), theirs.get(table, {}))

    def cell(f):
        text = _value(f, key)
        if latency and f:
            text += f" ({_ms(f.get('p50'))} / {_ms(f.get('p99'))} ms)"
        return text

    rows = [[str(c)] + [cell(by_c.get(c)) for _, by_c in pairs] for c in columns]
    return _grid(["Concurrency"] + [label for label, _ in pairs], rows)


def _ratios(exp, table, ours, theirs, mapping) -> list[str]:
    rows = figures.ratio_rows(
        ours.get(table, {}), theirs.get(table, {}), mapping, exp.reference, FLAG
    )
    if not rows:
        return []
    lines = [f"Ratios to {exp.reference} (req/s), systems present in both tables:", ""]
    lines += _grid(
        ["System", "Column", "seed", "here", "difference"],
        [
            [s, str(c), f"{a:.2f}", f"{b:.2f}", f"{d:+.0%}" + (" **⚠ > 20%**" if flag else "")]
            for s, c, a, b, d, flag in rows
        ],
    )
    if any(r[5] for r in rows):
        lines += ["", "Why (flagged):"] + [f"- {r}" for r in exp.reasons]
    return lines + [""]


def _placements(exp, table, ours, theirs, mapping) -> list[str]:
    est = figures.placements(
        ours.get(table, {}),
        theirs.get(table, {}),
        mapping,
        exp.reference,
        exp.published.get("not_rerun", []),
    )
    if not est:
        return []
    lines = [
        f"Placed against systems not re-run, through {exp.reference} (ours / {exp.reference} "
        f"here x {exp.reference} / theirs in the seed):",
        "",
    ]
    lines += _grid(
        ["Ours", "vs (not re-run)", "Column", "estimated ratio"],
        [[h, s, str(c), f"{r:.2f}"] for h, s, c, r in est],
    )
    return lines + [""]


def _checks(exp_results: dict, ours: dict) -> list[str]:
    """The measured checks: each check row against the same server in its default setting."""
    checks = figures.ours(exp_results, checks=True)
    lanes = {lane["row"]: lane for lane in exp_results.get("lanes", []) if lane.get("check")}
    default_row = {
        lane["peer"]: lane["row"] for lane in exp_results.get("lanes", []) if not lane.get("check")
    }
    rows = []
    for table, by_row in checks.items():
        for row, by_c in by_row.items():
            base_row = default_row.get(lanes[row]["peer"])
            for c, f in sorted(by_c.items()):
                base = ours.get(table, {}).get(base_row, {}).get(c)
                ratio = f"{f['rps'] / base['rps']:.2f}" if base and base["rps"] else "–"
                rows.append(
                    [
                        row,
                        lanes[row]["check"],
                        f"{table} c={c}",
                        _num(f["rps"]),
                        _num(base["rps"]) if base else "–",
                        ratio,
                    ]
                )
    if not rows:
        return []
    return (
        ["Measured checks (req/s; the check ÷ the same server as measured above):", ""]
        + _grid(["Check row", "what", "cell", "check", "default", "ratio"], rows)
        + [""]
    )


def _problems(exp_results: dict) -> list[str]:
    out = []
    for lane in exp_results.get("lanes", []):
        for p in lane.get("problems", []):
            out.append(f"- {lane['row']}: {p}")
        for cell in lane.get("cells", []):
            for p in cell.get("problems", []):
                out.append(f"- {lane['row']}, {cell['table']} c={cell['column']}: {p}")
    head = "Problems the tools reported (those runs stay in the figures, as the seeds kept theirs):"
    return [head, ""] + out + [""] if out else []


def _argv(exp_results: dict) -> list[str]:
    seen, out = set(), []
    for lane in exp_results.get("lanes", []):
        for cell in lane.get("cells", []):
            if cell["table"] not in seen:
                seen.add(cell["table"])
                cmd = shlex.join(cell["argv"]).replace(str(experiments.tools.SCRIPTS_DIR), "…")
                out.append(f"- `{cmd}`")
    return ["Commands (one per table; the port is the lab's):", ""] + out + [""]


def _section(exp, exp_results: dict) -> list[str]:
    ours = figures.ours(exp_results)
    theirs = figures.theirs(exp.name)
    mapping = figures.seed_rows(exp_results)
    lines = [f"## {exp.title}", "", exp.published["source"] + ".", ""]
    if exp.name == "nurl":
        tables = ["oha"]
        lines += _metric_blocks(
            exp,
            "oha",
            ours,
            theirs,
            [1, 10, 50, 200],
            [("req/s", "rps"), ("p50 (ms)", "p50"), ("p99 (ms)", "p99")],
        )
    elif exp.name == "rust-http":
        tables = ["ab", "wrk"]
        lines += ["`ab` (new connections), req/s:", ""]
        lines += _concurrency_rows(exp, "ab", ours, theirs, [1, 2, 3, 4, 8])
        lines += ["", "`wrk` (same connection), req/s:", ""]
        lines += _concurrency_rows(exp, "wrk", ours, theirs, [1, 2, 3, 8])
    elif exp.name == "kourier":
        tables = ["wrk"]
        lines += _server_rows(
            exp,
            "wrk",
            ours,
            theirs,
            512,
            [
                ("Requests/sec", "rps"),
                ("Latency avg (ms)", "avg"),
                ("p50 (ms)", "p50"),
                ("p99 (ms)", "p99"),
                ("timeouts", "timeouts"),
            ],
        )
    elif exp.name == "nextrush":
        tables = [f"autocannon:{s}" for s in experiments.NEXTRUSH_REQUESTS]
        for t in tables:
            lines += [f"autocannon, **{t.split(':')[1]}**:", ""]
            lines += _server_rows(
                exp,
                t,
                ours,
                theirs,
                100,
                [("RPS", "rps"), ("Latency p50 (ms)", "p50"), ("Latency p99 (ms)", "p99")],
            )
            lines.append("")
        lines += [
            "wrk profile (no pipelining), RPS mean ± sd (p50 / p99 ms). NextRush, the only "
            "server of the seed's profile, is in no registry: no system is in both tables, so "
            "nothing is placed through one; Fastify is run beside Peregrine as a reference:",
            "",
        ]
        for name in experiments.NEXTRUSH_WRK:
            lines += [f"wrk, **{name}**:", ""]
            lines += _concurrency_rows(
                exp,
                f"wrk:{name}",
                ours,
                theirs,
                list(experiments.NEXTRUSH_WRK_CONNECTIONS),
                latency=True,
            )
            lines.append("")
    else:
        tables = ["bombardier"]
        rows = [
            [label, _value(by_c.get(10), "rps"), _value(by_c.get(1000), "rps")]
            for label, by_c in _rows(exp, ours.get("bombardier", {}), theirs.get("bombardier", {}))
        ]
        lines += _grid(
            ["system", "requests/second (10 connections)", "requests/second (1000 connections)"],
            rows,
        )
    lines.append("")
    for t in tables:
        if len(tables) > 1:
            lines.append(f"*{t}*")
        lines += _ratios(exp, t, ours, theirs, mapping)
        lines += _placements(exp, t, ours, theirs, mapping)
    lines += _checks(exp_results, ours)
    lines += ["Notes:", ""] + [f"- {n}" for n in exp.notes] + [""]
    lines += _argv(exp_results) + _problems(exp_results)
    return lines


def _load(m: dict) -> str:
    return ", ".join(f"{x:.1f}" for x in m.get("loadavg_at_start") or [])


def busy_note(m: dict) -> str | None:
    """The warning for a run whose load average at the start exceeded its CPUs (the run's
    `machine`), None for a quiet one or one that recorded no load."""
    if (m.get("loadavg_at_start") or [0])[0] <= (m.get("nproc") or 1):
        return None
    return (
        f"**The machine was busy** (load average {_load(m)} on {m.get('nproc')} CPUs at the "
        "start): other work shared the CPUs, so these figures are noisy; re-run on a quiet "
        "machine before quoting them."
    )


def render(res: dict) -> str:
    m = res.get("machine", {})
    load = _load(m)
    lines = [
        "# The seeds' own experiments, re-run",
        "",
        f"`{res.get('command')}` at {res.get('started')} on {m.get('cpu_model')} "
        f"({m.get('nproc')} CPUs, load average at start {load}), commit "
        f"{(res.get('git') or {}).get('describe')}; builds {res.get('build_seconds', 0):.0f} s, "
        f"whole run {res.get('wall_seconds', 0):.0f} s.",
        "",
        f"> {staleness(res)}",
        "",
        "Each experiment uses its seed's tool, flags, paths and answers, and each server its "
        'seed\'s configuration; durations are scaled down (notes under each table). "(seed)" '
        'rows are the seed\'s published figures on its own machine, "(here)" rows ours on 2 '
        "CPUs: compare ratios, not absolute figures.",
        "",
        *([busy, ""] if (busy := busy_note(m)) else []),
        "Tools: " + ", ".join(f"{k} `{v}`" for k, v in (res.get("tools") or {}).items()),
        "",
        "Servers: " + ", ".join(f"{k} `{v}`" for k, v in (res.get("servers") or {}).items()),
        "",
    ]
    for name in experiments.ORDER:
        if name in res.get("experiments", {}):
            lines += _section(experiments.EXPERIMENTS[name], res["experiments"][name])
    return "\n".join(lines).rstrip() + "\n"


def write(res: dict, out: Path) -> Path:
    """Writes out/report.md from the results."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "report.md"
    path.write_text(render(res))
    return path
