"""The report section of the db profile: per database scenario, requests/s, latency
p50/p99, server CPU µs per request and PostgreSQL CPU µs per request at each concurrency, and
its targets (Peregrine first among the Rust peers in requests/s and in server CPU per
request on db and fortunes, and ahead of every non-Rust peer)."""

from __future__ import annotations

from . import report_tables

TARGET_SCENARIOS = ("db", "fortunes")


def _cells(res: dict) -> dict:
    return {
        (c["server"], c["scenario"], c["concurrency"]): c
        for c in res.get("cells", [])
        if c.get("pipeline", 0) == 0
    }


def _med(cell, key):
    if not cell or cell.get("status") != "ok":
        return None
    return (cell.get("median") or {}).get(key)


def _fmt(v, spec):
    return "–" if v is None else format(v, spec)


def _label_lang(res):
    return {s["name"]: (s.get("label", s["name"]), s.get("language", "?")) for s in res["servers"]}


def targets(res: dict, reference: str = "peregrine") -> list[dict]:
    """One line per (scenario, concurrency, figure): is the reference first among the Rust
    servers, and ahead of every other one?"""
    cells = _cells(res)
    langs = _label_lang(res)
    concs = sorted({c for (_, _, c) in cells})
    out = []
    for scen in TARGET_SCENARIOS:
        for conc in concs:
            for key, higher, what in (
                ("rps", True, "requests/s"),
                ("cpu_us_per_req", False, "server CPU µs/request"),
            ):
                ref = _med(cells.get((reference, scen, conc)), key)
                others = {
                    s: _med(cells.get((s, scen, conc)), key)
                    for s in langs
                    if s != reference and _med(cells.get((s, scen, conc)), key) is not None
                }
                if ref is None or not others:
                    continue

                def beats(v, ref=ref, higher=higher):
                    return ref > v if higher else ref < v

                behind = sorted(s for s, v in others.items() if not beats(v))
                rust_behind = [s for s in behind if langs[s][1] == "Rust"]
                out.append(
                    {
                        "scenario": scen,
                        "concurrency": conc,
                        "figure": what,
                        "value": ref,
                        "first_among_rust": not rust_behind,
                        "ahead_of_all": not behind,
                        "not_beaten": behind,
                    }
                )
    return out


def versus_best(res: dict, references: tuple[str, ...] = ("peregrine", "peregrine-mimalloc")):
    """Per test of the run (scenario, concurrency, pipelining), each Peregrine build in
    `references` against the other server with the least server CPU per request: that server,
    the ratio Peregrine / it with its 95% interval (`report_tables.ratio_estimate`: paired by
    round when both ran in the same rounds), and both medians. Servers whose name starts with
    "peregrine" are Peregrine's own builds, never "the best other"."""
    cells = {
        (c["server"], c["scenario"], c["concurrency"], c.get("pipeline", 0)): c
        for c in res.get("cells", [])
        if c.get("mode", "keep-alive") == "keep-alive"
    }
    tests = list(dict.fromkeys((scen, conc, pipe) for _, scen, conc, pipe in cells))
    order = [s["name"] for s in res.get("scenarios", [])]
    tests.sort(key=lambda t: (order.index(t[0]) if t[0] in order else len(order), t[2], t[1]))
    out = []
    for scen, conc, pipe in tests:
        others = {
            s: _med(c, "cpu_us_per_req")
            for (s, sc, cc, pp), c in cells.items()
            if (sc, cc, pp) == (scen, conc, pipe) and not s.startswith("peregrine")
        }
        others = {s: v for s, v in others.items() if v is not None}
        if not others:
            continue
        best = min(others, key=others.get)
        for ref in references:
            ref_cell = cells.get((ref, scen, conc, pipe))
            mine = _med(ref_cell, "cpu_us_per_req")
            if mine is None:
                continue
            est = report_tables.ratio_estimate(
                ref_cell, cells[(best, scen, conc, pipe)], "cpu_us_per_req"
            )
            out.append(
                {
                    "scenario": scen,
                    "concurrency": conc,
                    "pipeline": pipe,
                    "reference": ref,
                    "best_other": best,
                    "value": mine,
                    "best_value": others[best],
                    "ratio": est.ratio if est else None,
                    "ci": est.ci if est else None,
                }
            )
    return out


def versus_best_lines(res: dict) -> list[str]:
    """The markdown table of `versus_best` ([] when no test has another server)."""
    rows = versus_best(res)
    if not rows:
        return []
    labels = {s: lab for s, (lab, _) in _label_lang(res).items()}
    L = [
        "### Peregrine against the best other server, per test",
        "",
        "Server CPU µs per request; the best other is the other server with the lowest median "
        "in that test. Ratio = Peregrine / that server, [a–b] its 95% interval; Peregrine is "
        "first where the interval's upper bound is below 1.",
        "",
        "| test | Peregrine build | µs/req | best other | its µs/req | ratio [95% interval] "
        "| first? |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        test = f"`{r['scenario']}` c={r['concurrency']}" + (
            f" × {r['pipeline']}" if r["pipeline"] else ""
        )
        ci = r["ci"]
        if r["ratio"] is None:
            ratio, first = "–", "–"
        else:
            ratio = f"{r['ratio']:.2f}" + (f" [{ci[0]:.2f}–{ci[1]:.2f}]" if ci else "")
            if ci and ci[1] < 1:
                first = "yes"
            elif ci and ci[0] > 1:
                first = "**no**"
            else:
                first = "not resolved"
        L.append(
            f"| {test} | {labels.get(r['reference'], r['reference'])} | {r['value']:.2f} | "
            f"{labels.get(r['best_other'], r['best_other'])} | {r['best_value']:.2f} | {ratio} "
            f"| {first} |"
        )
    L.append("")
    return L


def section(res: dict) -> list[str]:
    """Markdown lines of the database section; [] when the run had no database."""
    db = res.get("database")
    if not db:
        return []
    cells = _cells(res)
    labels = {s: lab for s, (lab, _) in _label_lang(res).items()}
    servers = [s["name"] for s in res["servers"]]
    scenarios = [s["name"] for s in res.get("scenarios", [])]
    concs = sorted({c for (_, _, c) in cells})
    L = [
        "## Database scenarios",
        "",
        f"PostgreSQL {db.get('version')} started by the lab (`lab/peregrine_lab/database.py`) on "
        f"127.0.0.1, pinned to CPU(s) {db.get('cpus')} (the load generator's: the servers' CPUs "
        f"are the ones measured), loaded with TechEmpower's World ({db.get('world_rows')} rows) "
        f"and Fortune ({db.get('fortunes')} rows) tables; settings "
        + ", ".join(f"`{k}={v}`" for k, v in (db.get("settings") or {}).items())
        + f". Every server gets `DB_POOL={db.get('pool_total')}` connections in total "
        "(split over its workers or processes), the most it may open: Peregrine opens at most 2 "
        "per worker and ntex 1 per worker, as its TechEmpower entry does (fewer connections carry "
        "more pipelined queries per system call). Parity checks validity "
        "(`lab/peregrine_lab/db_parity.py`), not bytes. **PG µs/req** is the CPU time of every "
        "PostgreSQL process (utime + stime from /proc) over the timed run ÷ responses: the "
        "database work a server's driver usage costs per request.",
        "",
    ]
    for scen in scenarios:
        L += [f"### `{scen}`", ""]
        head = ["server"]
        for c in concs:
            head += [
                f"req/s c={c}",
                f"p50 / p99 ms c={c}",
                f"server µs/req c={c}",
                f"PG µs/req c={c}",
            ]
        L += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for s in servers:
            row = [labels.get(s, s)]
            for c in concs:
                cell = cells.get((s, scen, c))
                if cell is None or cell.get("status") == "n/a":
                    row += ["n/a"] * 4
                    continue
                if cell.get("status") != "ok":
                    row += [cell.get("status", "?")] + [""] * 3
                    continue
                p50, p99 = _med(cell, "p50_us"), _med(cell, "p99_us")
                row += [
                    _fmt(_med(cell, "rps"), ",.0f"),
                    f"{_fmt(p50 and p50 / 1000, '.2f')} / {_fmt(p99 and p99 / 1000, '.2f')}",
                    _fmt(_med(cell, "cpu_us_per_req"), ".1f"),
                    _fmt(_med(cell, "db_cpu_us_per_req"), ".1f"),
                ]
            L.append("| " + " | ".join(row) + " |")
        L.append("")
    tl = targets(res)
    if tl:
        L += [
            "### Targets",
            "",
            "| scenario | c | figure | Peregrine | first among Rust | ahead of every peer "
            "| not beaten |",
            "|---|---|---|---|---|---|---|",
        ]
        for t in tl:
            L.append(
                f"| `{t['scenario']}` | {t['concurrency']} | {t['figure']} | {t['value']:,.1f} | "
                f"{'yes' if t['first_among_rust'] else '**no**'} | "
                f"{'yes' if t['ahead_of_all'] else '**no**'} | "
                f"{', '.join(labels.get(s, s) for s in t['not_beaten']) or '–'} |"
            )
        L.append("")
    return L + versus_best_lines(res)
