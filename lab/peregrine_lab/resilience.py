"""The resilience section of a report: how each server's memory and connections fared under the
probe's resource attacks (`probe/attack_peers.py`, which stores its results under the
`resilience` key of a report's results.json and in `lab/results/resilience/`)."""

from __future__ import annotations

from . import figures

ATTACKS = (("R-pipeline-no-read", "pipeline-no-read"), ("R-stalled-upload", "stalled-upload"))


def cell(result: dict | None) -> str:
    """One attack's outcome: RSS growth at the peak and after, attackers the server cut."""
    if result is None:
        return "n/a"
    d = result.get("details", {})
    if "error" in d:
        return f"error: {d['error']}"
    cut = f"cut {d.get('cut', 0)}/{d.get('attackers', 0)}"
    served = "" if d.get("served", True) else ", **others not served**"
    peak = d.get("peak_growth_kib", 0) / 1024
    after = max(0, d.get("after_growth_kib", 0)) / 1024
    return f"+{peak:.1f} MiB peak, +{after:.1f} after, {cut}{served}"


def rows(data: dict) -> list[str]:
    """The table's rows, one per server, in the order they were attacked."""
    out = []
    for row in data.get("peers", []):
        if "error" in row:
            out.append(f"| {row['peer']} | {row['error']} | |")
            continue
        by_id = {r["id"]: r for r in row.get("attacks", [])}
        cells = " | ".join(cell(by_id.get(aid)) for aid, _ in ATTACKS)
        out.append(f"| {row.get('label', row['peer'])} | {cells} |")
    return out


def section(res: dict) -> list[str]:
    """The report's resilience section ([] when the run has no resilience results)."""
    data = res.get("resilience")
    if not data:
        return []
    n = data.get("connections", 100)
    return [
        "## Resilience: the servers under resource attacks",
        "",
        (
            f"Made at `{data.get('commit', '?')}` ({data.get('date', '?')}) by "
            f"`python3 probe/attack_peers.py`, each server with WORKERS=1 and its own default "
            f"timeouts{data.get('build_note', '')}. *pipeline-no-read*: {n} connections each "
            f"pipeline 64 `GET /large` (~10 KiB answers) and never read; *stalled-upload*: {n} "
            "connections "
            "announce a 1 MiB `POST /users` body, send 100 bytes and stop. RSS of the server's "
            "process tree at the peak of the attack and 0.5 s after it; *cut*: attackers the "
            "server closed by itself within 35 s. The budget Peregrine's CI holds itself to is "
            "+32 MiB at the peak and every attacker cut (`probe/README.md`)."
        ),
        "",
        f"> {figures.commit_staleness(data.get('commit'))}",
        "",
        "| server | " + " | ".join(name for _, name in ATTACKS) + " |",
        "|---|" + "---|" * len(ATTACKS),
        *rows(data),
        "",
    ]
