"""Figures quoted in the docs, generated from committed results.

A quoted figure lives in a marked block of README.md, docs/*.md or lab/README.md:

    <!-- lab:figures source=lab/results/quick key=headline -->
    (generated)
    <!-- /lab:figures -->

`python3 -m peregrine_lab.figures` (`./scripts/lab figures`) rewrites every block from its
source's results.json; `--check` rewrites nothing and exits 1 when a block's figures differ from
what its source gives (lab/tests/test_figures.py runs the same check). Each block says which
commit, day and machine made its figures and how far that commit is behind HEAD in crates/ and
lab/peers/; that last line depends on HEAD, not on the results, so the check leaves it out.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from . import config, stats
from .report_tables import (
    CONSTANT_ANSWERS,
    NA,
    _flush_note,
    _labels,
    _value,
    derive_medians,
    unranked,
)
from .report_verdicts import _find, before_after, engine_hyper

BLOCK = re.compile(
    r"(?P<open><!-- lab:figures (?P<attrs>[^>]*?) -->\n)(?P<body>.*?)"
    r"(?P<close><!-- /lab:figures -->)",
    re.S,
)
STALE_PREFIX = "Made at commit "
"""The first words of a block's staleness line: HEAD-dependent, so left out of the check."""
STALE_PATHS = ("crates", "lab/peers")
"""What a report's figures depend on: the code measured (the crates and the peers)."""


class FiguresError(Exception):
    """A block that cannot be generated: unknown key, missing source, bad attributes."""


def _git(root: Path, *args: str) -> str | None:
    try:
        p = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return p.stdout.strip() if p.returncode == 0 else None


def staleness(res: dict, root: Path = config.REPO_DIR) -> str:
    """How far the commit that made `res` (its `git` record) is behind HEAD in crates/ and
    lab/peers/: `commit_staleness`."""
    git = res.get("git") or {}
    return commit_staleness(git.get("commit"), bool(git.get("dirty")), root)


def commit_staleness(commit: str | None, dirty: bool = False, root: Path = config.REPO_DIR) -> str:
    """How far `commit` is behind HEAD in crates/ and lab/peers/, from git now:
    `git log COMMIT..HEAD -- crates lab/peers` counted (for runs that record only a commit)."""
    if not commit:
        return "Made at an unrecorded commit: how old its code is cannot be told."
    short = commit[:12]
    changed = " with uncommitted changes" if dirty else ""
    paths = " and ".join(f"{p}/" for p in STALE_PATHS)
    if _git(root, "cat-file", "-e", f"{commit}^{{commit}}") is None:
        return (
            f"{STALE_PREFIX}`{short}`{changed}, which is not in this clone's history: how far it "
            f"is behind HEAD in {paths} cannot be told."
        )
    out = _git(root, "log", "--format=%h", f"{commit}..HEAD", "--", *STALE_PATHS)
    n = len(out.splitlines()) if out else 0
    what = "commit" if n == 1 else "commits"
    return (
        f"{STALE_PREFIX}`{short}`{changed}, {n} {what} behind HEAD in {paths} "
        f"(`git log {short}..HEAD -- {' '.join(STALE_PATHS)}`)."
    )


def _made(res: dict, source: str, link: str) -> str:
    m = res.get("machine") or {}
    # The seeds profile records when it started rather than when it finished.
    when = (res.get("generated_at") or res.get("started") or "?")[:10]
    other = stats.median(
        [
            r.get("server_cpus_other_share")
            for c in res.get("cells", [])
            for r in c.get("runs") or []
        ]
    )
    # A busy machine makes every figure of the block noisier: the reader sees how busy.
    busy = "" if other is None else f"; other work took a median {other:.0%} of the server CPU"
    return (
        f"From [`{source}`]({link}) (`{res.get('command') or '?'}`, {when}, "
        f"{m.get('cpu_model') or '?'}, {m.get('nproc') or '?'} CPUs{busy})."
    )


def _cpu(cell: dict | None) -> str:
    if cell is None:
        return NA
    if cell.get("status") != "ok":
        return {"n/a": NA, "parity-failed": "parity ✗"}.get(cell["status"], cell["status"])
    v = _value(cell, "cpu_us_per_req")
    text = NA if v is None else f"{v:.2f}"
    if (cell["server"], cell["scenario"]) in CONSTANT_ANSWERS:
        text += " §"
    return text


def headline(res: dict) -> list[str]:
    """Server CPU µs per request of every server on the main scenarios at 50 connections and on
    plaintext with 16 pipelined, the server's busy share on plaintext (below 100%: the load
    generator was its ceiling) and the bytes of its plaintext answer (what was compared), idle
    memory and the probe's MUST-only score."""
    derive_medians(res)
    labels = _labels(res)
    scen = [s["name"] for s in res.get("scenarios", []) if s.get("main")]
    shapes = [(s, 50, 0) for s in scen] + [("plaintext", 50, 16)]
    titles = [f"`{s}`" if p <= 1 else f"`{s}` × {p} pipelined" for s, _c, p in shapes]
    header = ["server", *titles, "busy", "bytes/resp", "idle KiB/conn"]
    header.append("compliance: MUST only (total)")
    rows = []
    for s in res.get("servers", []):
        name = s["name"]
        cells = [_find(res, name, sc, c, p) for sc, c, p in shapes]
        if all(c is None for c in cells):
            continue
        im = (s.get("idle_memory") or {}).get("per_connection_bytes")
        comp = s.get("compliance") or {}
        score = NA
        if comp.get("status") == "ok":
            score = f"{comp.get('must_score')}% ({comp.get('score')}%)"
        label = f"**{labels[name]}**" if name == res.get("settings", {}).get("reference") else None
        idle = NA if im is None else f"{im / 1024:.1f}"
        busy = _value(cells[0], "server_busy_share")
        busy = NA if busy is None else f"{busy:.0%}"
        size = _value(cells[0], "bytes_per_response")
        size = NA if size is None else f"{size:,.0f}"
        rows.append([label or labels[name], *map(_cpu, cells), busy, size, idle, score])
    st = res.get("settings") or {}
    cpus = ",".join(map(str, st.get("server_cpus") or [])) or "?"
    out = [
        "Server CPU µs per request (lower is better), the median of each cell's runs, "
        f"WORKERS={st.get('workers')} on CPU {cpus}, {st.get('loadgen')} on the others, 50 "
        "connections; busy: the share of its CPU the server used in the first column, "
        "bytes/resp: the size of its answers there as wrk received them:",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        *("| " + " | ".join(r) + " |" for r in rows),
    ]
    notes = []
    consts = sorted(
        {(c["server"], c["scenario"]) for c in res.get("cells", [])} & CONSTANT_ANSWERS.keys()
    )
    if consts:
        notes.append(
            "§ "
            + "; ".join(f"{labels.get(a, a)} `{b}`: {CONSTANT_ANSWERS[(a, b)]}" for a, b in consts)
            + "."
        )
    piped = [s["name"] for s in res.get("servers", []) if _find(res, s["name"], *shapes[-1])]
    notes += _flush_note(shapes[-1][2], piped)[:1]
    skipped = unranked(res)
    if skipped:
        notes.append(
            "‡ not ranked: "
            + "; ".join(f"{labels.get(n, n)}: {w}" for n, w in skipped.items())
            + "."
        )
    return out + ([""] + notes if notes else [])


def engine_targets(res: dict) -> list[str]:
    """The engine's four lanes against the floor, before and hyper (`engine_hyper`): ratios of
    server CPU per request with their t 95% intervals (report_verdicts.before_after), and the
    medians."""
    rows = before_after(res)
    if not rows:
        raise FiguresError("no before/after cells in this source (an `engine` profile run)")

    def fmt(x):
        if x is None:
            return NA
        r, ci = x
        return f"{r:.3f} [{ci[0]:.3f}–{ci[1]:.3f}]" if ci else f"{r:.3f} (no interval)"

    hyper = engine_hyper(res)
    # A run whose before engine was not built has no before columns rather than empty ones.
    before = any(r["before"] for r in rows)
    # (server, its short name in the medians line)
    servers = [("peregrine-hello", "hello")]
    servers += [("peregrine-hello-before", "before")] if before else []
    servers += [("floor", "floor"), (hyper, hyper)]
    head = ["lane", "hello / floor", "target"]
    head += ["before / floor", "hello / before"] if before else []
    out = ["| " + " | ".join(head + [f"{hyper} / floor"]) + " |", "|---" * (len(head) + 1) + "|"]
    medians = []
    for r in rows:
        c, p = r["concurrency"], r["pipeline"]
        lane = f"c={c}" if p <= 1 else f"{c} × {p}"
        target = NA if r["limit"] is None else f"≤ {r['limit']:.2f}"
        if r["met"] is not None:
            target += ", **met**" if r["met"] else ", **not met**"
        row = [lane, fmt(r["after"]), target]
        row += [fmt(r["before"]), fmt(r["after_before"])] if before else []
        out.append("| " + " | ".join(row + [fmt(r["hyper"])]) + " |")
        figs = [_value(_find(res, n, "plaintext", c, p), "cpu_us_per_req") for n, _ in servers]
        medians.append(f"{lane} " + ", ".join(NA if v is None else f"{v:.2f}" for v in figs))
    idle = next(
        (
            s.get("idle_memory") or {}
            for s in res.get("servers", [])
            if s["name"] == "peregrine-hello"
        ),
        {},
    )
    out += [
        "",
        f"Server CPU µs per request, medians ({', '.join(short for _, short in servers)}): "
        + "; ".join(medians)
        + "."
        + (
            f" Idle memory: {idle['per_connection_bytes'] / 1024:.2f} KiB per keep-alive "
            f"connection ({idle.get('opened')} connections)."
            if idle.get("per_connection_bytes") is not None
            else ""
        ),
    ]
    return out


def protocols(res: dict) -> list[str]:
    """`./scripts/lab protocols`: server CPU µs per request over HTTPS keep-alive, a handshake per
    request and HTTP/2, idle memory per TLS and HTTP/2 connection, and each server's TLS library
    beside its figures (the comparison is of the TLS stacks too)."""
    from . import tls_lanes, tls_report  # the protocols profile's modules, only for this key

    if not any(c.get("mode") in tls_lanes.MODES for c in res.get("cells", [])):
        raise FiguresError("no HTTPS / HTTP/2 cells in this source (a `protocols` run)")
    labels = _labels(res)
    out = [
        "| server | TLS library | HTTPS keep-alive | handshake per request | HTTP/2 "
        "| idle KiB per TLS conn | idle KiB per HTTP/2 conn |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in res.get("servers", []):
        figs = []
        for mode in ("https", "handshake", "h2"):
            cell = tls_lanes.find_cell(res, s["name"], mode)
            v = _value(cell, "cpu_us_per_req")
            figs.append(NA if v is None else f"{v:.2f}")
        idle = s.get("idle_memory") or {}
        kib = [
            NA
            if (idle.get(m) or {}).get("per_connection_bytes") is None
            else f"{idle[m]['per_connection_bytes'] / 1024:.1f}"
            for m in ("https", "h2")
        ]
        lib = tls_report.tls_library(s["name"], res.get("tools") or {}) or "?"
        out.append(
            f"| {labels.get(s['name'], s['name'])} | {lib} | " + " | ".join(figs + kib) + " |"
        )
    return ["Server CPU µs per request (medians), one worker:", "", *out]


def h3(res: dict) -> list[str]:
    """`./scripts/lab h3`: HTTP/3 CPU per request at equal load against the best HTTP/3 peer (the
    target and its interval), each lane's CPU per request, idle memory, p99 under loss."""
    from . import h3_report  # the HTTP/3 lane's module, only for this key

    if not any(c.get("mode") == "h3-rate" for c in res.get("cells", [])):
        raise FiguresError("no `h3-rate` cells in this source (an `./scripts/lab h3` run)")
    return h3_report.figure_lines(res)


def db_targets(res: dict) -> list[str]:
    """`./scripts/lab db`: per `db` and `fortunes` cell, Peregrine's server CPU µs per request
    and requests/s (medians) and whether it leads, or which peers are ahead of it
    (db_report.targets, the report's own judgement)."""
    from .db_report import targets

    rows = targets(res)
    if not rows:
        raise FiguresError("no `db` or `fortunes` cells in this source (a `db` run)")
    labels = _labels(res)
    kinds = (("server CPU µs/request", ".1f"), ("requests/s", ",.0f"))
    by_cell: dict[tuple, dict] = {}
    for r in rows:
        by_cell.setdefault((r["scenario"], r["concurrency"]), {})[r["figure"]] = r

    def judged(r: dict | None, spec: str) -> str:
        if r is None:
            return NA
        if r["ahead_of_all"]:
            return f"{r['value']:{spec}}, ahead of every peer"
        first = "first among the Rust peers, " if r["first_among_rust"] else ""
        behind = ", ".join(labels.get(s, s) for s in r["not_beaten"])
        return f"{r['value']:{spec}}, {first}behind {behind}"

    out = [
        "Peregrine's medians against every peer (targets: first among the Rust peers and "
        "ahead of every other one):",
        "",
        "| cell | " + " | ".join(k for k, _ in kinds) + " |",
        "|---|" + "---|" * len(kinds),
    ]
    for (scen, conc), figs in by_cell.items():
        cols = [judged(figs.get(k), spec) for k, spec in kinds]
        out.append(f"| `{scen}` c={conc} | " + " | ".join(cols) + " |")
    met = [
        f"{sum(1 for f in by_cell.values() if (f.get(k) or {}).get('ahead_of_all'))} of "
        f"{sum(1 for f in by_cell.values() if k in f)} cells on {k}"
        for k, _ in kinds
    ]
    return out + ["", "Ahead of every peer in " + " and ".join(met) + "."]


SEEDS_PEER = "peregrine"
"""The seeds' lane that is Peregrine (the framework; the engine's lane is in their report)."""


def _slash(values, fmt) -> str:
    return " / ".join(NA if v is None else fmt(v) for v in values)


def _seed_groups(tables: list[str], ours_t: dict, row: str) -> list[tuple[str, list]]:
    """Peregrine's tables as sentence clauses: (label, [(table, column)]). Scenario tables of one
    tool measured at one same column (`autocannon:hello`, `autocannon:param` at c = 100) make
    one clause with the scenarios side by side; every other table is a clause of its columns."""
    groups: list[tuple[str, str, list, bool]] = []  # tool, scenario, cells, scenarios merged
    merged: dict[tuple[str, int], list] = {}
    for t in tables:
        cols = sorted(ours_t[t][row])
        tool, _, scen = t.partition(":")
        if scen and len(cols) == 1:
            if (tool, cols[0]) not in merged:
                merged[(tool, cols[0])] = []
                groups.append((tool, "", merged[(tool, cols[0])], True))
            merged[(tool, cols[0])].append((t, cols[0]))
        else:
            groups.append((tool, scen, [(t, c) for c in cols], False))
    out = []
    for tool, scen, cells, scenarios in groups:
        cols = list(dict.fromkeys(c for _, c in cells))
        label = f"`{tool}` " + (f"{scen} " if scen else "") + f"c = {_slash(cols, str)}"
        if scenarios:
            label += ", " + _slash([t.partition(":")[2] for t, _ in cells], str)
        out.append((label, cells))
    return out


def _lands(exp, exp_res: dict) -> str:
    """One seed's sentence: where Peregrine lands in each of its tables."""
    from .seeds import figures as seed_figures
    from .seeds.tables import _num

    head = f"**{exp.title.partition(':')[0]}**"
    lanes = exp_res.get("lanes") or []
    row = next((ln["row"] for ln in lanes if ln["peer"] == SEEDS_PEER and not ln.get("check")), "")
    ours_t = seed_figures.ours(exp_res)
    tables = [t for t, by_row in ours_t.items() if row in by_row]
    if not tables:
        return f"{head}: Peregrine has no figures in this run."
    theirs_t = seed_figures.theirs(exp.name)
    mapping = seed_figures.seed_rows(exp_res)
    not_rerun = exp.published.get("not_rerun", [])

    def rps(here, t, c):
        return ((ours_t[t].get(here) or {}).get(c) or {}).get("rps")

    def times(values) -> str:
        return _slash(values, "{:.2f}".format) + "×"

    clauses = []
    for label, cells in _seed_groups(tables, ours_t, row):
        text = f"{label}: {_slash([rps(row, t, c) for t, c in cells], _num)} req/s"
        for here in mapping:
            ratios = [stats.ratio(rps(row, t, c), rps(here, t, c)) for t, c in cells]
            if any(r is not None for r in ratios):
                text += f", {times(ratios)} {here}"
        est: dict[str, dict] = {}
        for t in dict.fromkeys(t for t, _ in cells):
            for who, seed_row, col, r in seed_figures.placements(
                ours_t[t], theirs_t.get(t, {}), mapping, exp.reference, not_rerun
            ):
                if who == row:
                    est.setdefault(seed_row, {})[(t, col)] = r
        if est:
            text += f", placed through {exp.reference}: " + ", ".join(
                f"{times([by.get(cell) for cell in cells])} the seed's {seed_row}"
                for seed_row, by in est.items()
            )
        clauses.append(text)
    return f"{head}: " + "; ".join(clauses) + "."


def seeds(res: dict) -> list[str]:
    """`./scripts/lab seeds`: the run's load note, then per seed where Peregrine lands: its req/s
    per column, its ratio to each system re-run in the same table, and its placement against
    the seed's rows that were not re-run through the row both tables share (the seeds report's
    own placements)."""
    from .seeds import experiments
    from .seeds.tables import busy_note

    runs = res.get("experiments") or {}
    names = [n for n in experiments.ORDER if n in runs]
    if not names:
        raise FiguresError("no seed experiments in this source (a `./scripts/lab seeds` run)")
    busy = busy_note(res.get("machine") or {})
    return [
        "The seed benchmarks this project started from, each re-run with its own tool, flags, "
        "paths and servers' configurations, Peregrine added to its table beside the seed's "
        "published figures (those are from the seed's own machine: compare ratios, not "
        "absolute figures).",
        *(["", busy] if busy else []),
        "",
        "Where Peregrine (the framework) lands in that run: its req/s per column; N× a system: "
        "Peregrine's req/s over that system's, both measured here; placed through R: "
        "(Peregrine / R here) × (R / the system in the seed's table), for the seed's systems "
        "that were not re-run (the engine's rows are in the report):",
        "",
        *(f"- {_lands(experiments.EXPERIMENTS[n], runs[n])}" for n in names),
    ]


KEYS: dict[str, Callable[[dict], list[str]]] = {
    "headline": headline,
    "engine-targets": engine_targets,
    "protocols": protocols,
    "seeds": seeds,
    "db-targets": db_targets,
    "h3": h3,
}
"""What a block can show, by its `key`."""


def _attrs(text: str) -> dict[str, str]:
    out = {}
    for part in text.split():
        k, sep, v = part.partition("=")
        if not sep or not v:
            raise FiguresError(f"bad attribute {part!r} (expected name=value)")
        out[k] = v
    for need in ("source", "key"):
        if need not in out:
            raise FiguresError(f"a lab:figures block without {need}= ({text!r})")
    if out["key"] not in KEYS:
        raise FiguresError(f"unknown key {out['key']!r} (known: {', '.join(KEYS)})")
    return out


def block(attrs: dict[str, str], doc: Path, root: Path = config.REPO_DIR) -> str:
    """The generated body of one block of `doc`: where its figures come from, the figures, and
    the staleness line."""
    source = attrs["source"]
    path = root / source / "results.json"
    try:
        res = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise FiguresError(f"{doc.name}: cannot read {source}/results.json: {e}") from e
    link = os.path.relpath(root / source / "report.md", doc.parent)
    lines = [_made(res, source, link), "", *KEYS[attrs["key"]](res), "", staleness(res, root)]
    return "\n".join(lines) + "\n"


def rewrite(text: str, doc: Path, root: Path = config.REPO_DIR) -> str:
    """`text` with every block regenerated."""
    return BLOCK.sub(lambda m: m["open"] + block(_attrs(m["attrs"]), doc, root) + m["close"], text)


def _figures_only(text: str) -> str:
    return "\n".join(ln for ln in text.splitlines() if not ln.startswith(STALE_PREFIX))


def check(doc: Path, root: Path = config.REPO_DIR) -> list[str]:
    """Every block of `doc` whose figures differ from what its source gives now."""
    problems = []
    for m in BLOCK.finditer(doc.read_text()):
        try:
            want = block(_attrs(m["attrs"]), doc, root)
        except FiguresError as e:
            problems.append(f"{doc}: {e}")
            continue
        if _figures_only(m["body"]) != _figures_only(want):
            problems.append(
                f"{doc}: the block `{m['attrs']}` differs from its source: run "
                "`./scripts/lab figures`"
            )
    return problems


def documents(root: Path = config.REPO_DIR) -> list[Path]:
    """README.md, docs/*.md and lab/README.md."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md")), root / "lab" / "README.md"]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv not in ([], ["--check"]):
        print("usage: python3 -m peregrine_lab.figures [--check]", file=sys.stderr)
        return 2
    problems = []
    for doc in documents():
        if argv:
            problems += check(doc)
            continue
        text = doc.read_text()
        try:
            new = rewrite(text, doc)
        except FiguresError as e:
            problems.append(f"{doc}: {e}")
            continue
        if new != text:
            doc.write_text(new)
            print(f"rewrote the figures of {doc.relative_to(config.REPO_DIR)}")
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
