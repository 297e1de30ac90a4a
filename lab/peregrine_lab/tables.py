"""Result folders as tables: `compare A B` (each cell's B/A ratios with their 95% intervals, and
the cells that changed beyond them) and `export DIR --csv OUT` (runs.csv: one row per cell and
run; cells.csv: one row per cell with medians and intervals)."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

from . import results, stats

METRICS = (("rps", "req/s"), ("cpu_us_per_req", "CPU µs/req"))
"""The figures `compare` sets side by side: throughput and server CPU per request."""

RUN_FIELDS = (
    "round",
    "started_at",
    "requests",
    "duration_s",
    "rps",
    "cpu_us_per_req",
    "p50_us",
    "p99_us",
    "p999_us",
    "peak_rss_bytes",
    "server_cpus_other_share",
    "client_cpus_other_share",
    "steal_share",
)
"""The per-run figures runs.csv keeps (a run recorded before a field existed leaves it empty)."""

CELL_FIELDS = ("server", "scenario", "concurrency", "pipeline", "mode", "lane", "status")


def cell_key(cell: dict) -> tuple:
    """What identifies a cell across runs of the lab (results before lanes had one mode)."""
    return (
        cell["server"],
        cell["scenario"],
        cell["concurrency"],
        cell.get("pipeline", 0),  # the protocols profile's cells have none
        cell.get("mode", "keep-alive"),
    )


def _measured(res: dict) -> dict[tuple, dict]:
    return {cell_key(c): c for c in res.get("cells", []) if c.get("status") == "ok" and c["runs"]}


def run_interval(values) -> tuple[float, float] | None:
    """The interval a chart's error bar and cells.csv give a cell's median: its distribution-free
    95% interval (`stats.median_ci`, 6 runs or more), else the range of the runs (2 to 5: too few
    for a 95% interval of the median), None with fewer than 2 runs.

    >>> run_interval([3.0, 1.0, 2.0]), run_interval([5, 1, 4, 2, 3, 6]), run_interval([1.0])
    ((1.0, 3.0), (1.0, 6.0), None)"""
    vals = [float(v) for v in values if v is not None]
    if len(vals) < 2:
        return None
    return stats.median_ci(vals) or (min(vals), max(vals))


def compare_rows(a: dict, b: dict) -> list[dict]:
    """Per cell both runs measured: each metric's B/A ratio (geometric means) with the Welch t
    95% interval on the logs (the runs of two lab runs share no rounds, so nothing pairs them),
    and whether the interval lies wholly above or below 1."""
    ma, mb = _measured(a), _measured(b)
    rows = []
    for key in sorted(ma.keys() & mb.keys(), key=lambda k: tuple(map(str, k))):
        row = {"cell": key, "runs": (len(ma[key]["runs"]), len(mb[key]["runs"]))}
        for metric, _ in METRICS:
            found = stats.independent_log_ratio(
                [r.get(metric) for r in mb[key]["runs"]], [r.get(metric) for r in ma[key]["runs"]]
            )
            ratio, ci = found if found else (None, None)
            changed = None if ci is None else (ci[0] > 1 or ci[1] < 1)
            row[metric] = {"ratio": ratio, "ci": ci, "changed": changed}
        rows.append(row)
    return rows


def _ratio_text(f: dict) -> str:
    if f["ratio"] is None:
        return "n/a"
    if f["ci"] is None:
        return f"{f['ratio']:.3f} (no interval)"
    text = f"{f['ratio']:.3f} [{f['ci'][0]:.3f}–{f['ci'][1]:.3f}]"
    return f"**{text}**" if f["changed"] else text


def compare_markdown(a: dict, b: dict, name_a: str, name_b: str) -> str:
    """The comparison as Markdown: one row per cell both measured, bold where the interval
    excludes 1, then the cells that changed and those only one side measured."""
    rows = compare_rows(a, b)
    lines = [
        f"# {name_b} / {name_a}",
        "",
        f"A = `{name_a}` ({a.get('generated_at')}, {a.get('git', {}).get('describe')}), "
        f"B = `{name_b}` ({b.get('generated_at')}, {b.get('git', {}).get('describe')}). "
        "Ratios B/A of the geometric means with Welch t 95% intervals on the logs; bold: the "
        "interval excludes 1 (changed beyond its interval).",
        "",
        "| server | scenario | c | pipeline | mode | runs A, B | "
        + " | ".join(f"{label} B/A" for _, label in METRICS)
        + " |",
        "|---|---|---:|---:|---|---|" + "---|" * len(METRICS),
    ]
    for row in rows:
        server, scen, c, p, mode = row["cell"]
        ratios = " | ".join(_ratio_text(row[m]) for m, _ in METRICS)
        lines.append(
            f"| {server} | {scen} | {c} | {p} | {mode} | {row['runs'][0]}, {row['runs'][1]} | "
            f"{ratios} |"
        )
    changed = [
        f"{'/'.join(map(str, row['cell']))}: {label} {_ratio_text(row[m]).strip('*')}"
        for row in rows
        for m, label in METRICS
        if row[m]["changed"]
    ]
    lines += ["", f"Changed beyond the interval: {len(changed)} of {len(rows) * len(METRICS)}."]
    lines += [f"- {c}" for c in changed]
    ma, mb = _measured(a), _measured(b)
    for only, side in ((ma.keys() - mb.keys(), name_a), (mb.keys() - ma.keys(), name_b)):
        if only:
            cells = ", ".join("/".join(map(str, k)) for k in sorted(only, key=str))
            lines += ["", f"Measured only in `{side}`: {cells}."]
    return "\n".join(lines) + "\n"


def export_csv(res: dict, out: Path) -> tuple[Path, Path]:
    """runs.csv (one row per cell and run) and cells.csv (one row per cell: medians, CVs and the
    medians' intervals, `run_interval`) in `out`."""
    out.mkdir(parents=True, exist_ok=True)
    runs_path, cells_path = out / "runs.csv", out / "cells.csv"
    with runs_path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(CELL_FIELDS + RUN_FIELDS)
        for cell in res.get("cells", []):
            head = [_field(cell, k) for k in CELL_FIELDS]
            for run in cell.get("runs") or []:
                w.writerow(head + [run.get(k) for k in RUN_FIELDS])
    with cells_path.open("w", newline="") as f:
        w = csv.writer(f)
        summary = [f"{m}_{s}" for m, _ in METRICS for s in ("median", "cv", "ci_low", "ci_high")]
        w.writerow(CELL_FIELDS + ("runs", "message", *summary))
        for cell in res.get("cells", []):
            runs = cell.get("runs") or []
            row = [_field(cell, k) for k in CELL_FIELDS] + [len(runs), cell.get("message", "")]
            for m, _ in METRICS:
                ci = run_interval([r.get(m) for r in runs]) or (None, None)
                row += [(cell.get("median") or {}).get(m), (cell.get("cv") or {}).get(m), *ci]
            w.writerow(row)
    return runs_path, cells_path


def _field(cell: dict, key: str):
    return cell.get(key, {"mode": "keep-alive", "lane": "main"}.get(key))


def _load(folder: str) -> dict:
    return results.load(Path(folder))


def main(args) -> int:
    """`compare A B [--md FILE]` and `export DIR --csv OUT` from the command line."""
    want = 2 if args.what == "compare" else 1
    if len(args.dir) != want or (args.what == "export" and not args.csv):
        usage = "compare A B [--md FILE]" if want == 2 else "export DIR --csv OUT"
        print(f"usage: peregrine-lab {usage}", file=sys.stderr)
        return 2
    try:
        loaded = [_load(d) for d in args.dir]
    except (OSError, ValueError) as e:
        print(f"cannot read results: {e}", file=sys.stderr)
        return 1
    if args.what == "export":
        paths = export_csv(loaded[0], args.csv)
        print(f"wrote {paths[0]} and {paths[1]}")
        return 0
    text = compare_markdown(loaded[0], loaded[1], args.dir[0], args.dir[1])
    sys.stdout.write(text)
    if args.md:
        args.md.write_text(text)
    return 0
