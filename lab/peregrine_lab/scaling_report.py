"""The report's section for the scaling lane (scaling.py): requests/s and CPU per request at each
worker count, the ratio to 1 worker with its interval, the model's prediction beside it."""

from __future__ import annotations

from . import scaling, stats

NA = "n/a"


def _cpus(lst) -> str:
    return ",".join(map(str, lst or [])) or NA


def _ci(ci) -> str:
    return f" [{ci[0]:.3f}–{ci[1]:.3f}]" if ci else ""


def _num(v, fmt) -> str:
    return NA if v is None else fmt.format(v)


def section(res: dict, labels: dict | None = None) -> list[str]:
    """Markdown lines for res["scaling"] ([] when the run had no scaling lane)."""
    sc = res.get("scaling")
    if not sc:
        return []
    labels = labels or {}
    lane = sc.get("lane") or {}
    splits = sc.get("splits") or {}
    where = "; ".join(
        f"WORKERS={w}: server on CPU(s) {_cpus(s['server_cpus'])}, load generator on CPU(s) "
        f"{_cpus(s['client_cpus'])}"
        if s
        else f"WORKERS={w}: not measured (too few CPUs)"
        for w, s in splits.items()
    )
    # Recomputed from the runs, so a regenerated report uses the current model.
    base_w = min((c["workers"] for c in sc.get("cells", [])), default=1)
    ratios = {
        (r["server"], r["concurrency"], r["pipeline"], r["workers"]): r
        for r in scaling.ratios(sc.get("cells", []), base=base_w)
    }
    L = [
        f"## Scaling: 1 and 2 workers ({sc.get('label')})",
        "",
        f"`{lane.get('scenario')}`, {lane.get('runs')} interleaved runs of "
        f"{lane.get('duration'):g} s per worker count on fresh processes; {where}. "
        "**With 2 workers on this 2-CPU machine the load generator shares both CPUs with the "
        "server**, so the 2-worker figures measure the server and the load generator together. "
        "The model column is what the 1-worker CPU figures predict for the ratio: with one CPU "
        "each the slower side limits, 10⁶ ÷ max(s, g) requests/s (s: server, g: load "
        "generator, CPU µs per request); two shared CPUs do both sides' work, 2 × 10⁶ ÷ (s + g); "
        "the ratio 2 max(s, g) ÷ (s + g) is about 1 when the server costs what the load "
        "generator does and nears 2 for a server much costlier than it. It assumes a request "
        "costs the same CPU at 2 workers as at 1 and other work on the machine takes the same "
        "share in both. The CPU ratio is the part that carries over to a machine with cores to "
        "spare: 1.0 means a second worker added no cost per request. "
        + _ratio_method_text(ratios)
        + _other_work(sc),
        "",
    ]
    cells = {
        (c["server"], c["concurrency"], c["pipeline"], c["workers"]): c for c in sc.get("cells", [])
    }
    workers = sorted({c["workers"] for c in sc.get("cells", [])})
    base = workers[0] if workers else 1
    header = ["server", "c", "pipeline"]
    for w in workers:
        header += [f"req/s, {w}w", f"CPU µs/req, {w}w"]
    header += ["load generator µs/req, 1w"]
    for w in workers[1:]:
        header += [f"req/s {w}w/{base}w", "model", f"CPU/req {w}w/{base}w"]
    rows = []
    shapes = sorted({k[:3] for k in cells}, key=lambda k: (_order(sc, k[0]), k[1], k[2]))
    for srv, c, p in shapes:
        row = [labels.get(srv, srv), str(c), str(p)]
        for w in workers:
            cell = cells.get((srv, c, p, w)) or {}
            if cell.get("status") != "ok":
                row += [cell.get("status", NA), ""]
                continue
            med = cell.get("median") or {}
            row += [
                _num(med.get("rps"), "{:,.0f}"),
                _num(med.get("cpu_us_per_req"), "{:.2f}"),
            ]
        one = (cells.get((srv, c, p, base)) or {}).get("median") or {}
        row.append(_num(one.get("client_us_per_req"), "{:.2f}"))
        for w in workers[1:]:
            r = ratios.get((srv, c, p, w)) or {}
            row += [
                _num(r.get("rps_ratio"), "{:.3f}") + _ci(r.get("rps_ci")),
                _num(r.get("predicted_ratio"), "{:.2f}"),
                _num(r.get("cpu_ratio"), "{:.3f}") + _ci(r.get("cpu_ci")),
            ]
        rows.append(row)
    L += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    L += ["| " + " | ".join(r) + " |" for r in rows]
    L.append("")
    L += ["How each server scales (its ordinary worker setting, given WORKERS):", ""]
    for srv, how in (sc.get("scales_by") or {}).items():
        L.append(f"- **{labels.get(srv, srv)}**: {how}")
    L += [
        "",
        "Every server in the registry has a worker setting, so none is left out for lack of "
        "one; the lane measures one server of each worker model to stay short"
        + (
            f" (not in the lane: {', '.join(sc['not_in_lane'])})." if sc.get("not_in_lane") else "."
        ),
        "",
    ]
    fails = [c for c in sc.get("cells", []) if c.get("status") not in ("ok", None)]
    for c in fails:
        L.append(
            f"- {labels.get(c['server'], c['server'])} WORKERS={c['workers']}: "
            f"{c['status']}: {c.get('message', '')[:300]}"
        )
    if fails:
        L.append("")
    return L


def _ratio_method_text(ratios: dict) -> str:
    """The method sentence for the lane's ratios: paired by round, or the fallback."""
    used = {r.get(f"{n}_method") for r in ratios.values() for n in ("rps", "cpu")} - {None}
    paired = (
        "Ratios are geometric means of the per-round ratios (every worker count runs once in "
        "each interleaved round, so round k of both shared the machine's load) with the paired "
        "t 95% interval on their logs"
    )
    independent = "geometric means / geometric means with Welch t 95% intervals on the logs"
    if used == {stats.PAIRED}:
        return paired + "."
    if stats.PAIRED in used:
        return (
            f"{paired}; where two cells share fewer than {stats.MIN_PAIRED_ROUNDS} rounds, "
            f"{independent}."
        )
    return f"Ratios are {independent}."


def _other_work(sc: dict) -> str:
    """The 1-worker runs' share of the server CPU taken by other work (at 2 workers the load
    generator shares the CPUs, so that share is not separable there)."""
    shares = [
        r.get("server_cpus_other_share")
        for c in sc.get("cells", [])
        if c["workers"] == 1
        for r in c.get("runs", [])
    ]
    med = stats.median(shares)
    if med is None:
        return ""
    text = (
        f" During the 1-worker runs other work took a median {med * 100:.0f}% of the server "
        "CPU's time"
    )
    if med > 0.2:
        text += (
            ": on a machine that busy the measured rates sit far below the capacities the "
            "model compares, and the intervals are wide"
        )
    return text + "."


def _order(sc: dict, server: str) -> int:
    names = list(sc.get("scales_by") or {})
    return names.index(server) if server in names else len(names)
