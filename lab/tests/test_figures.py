"""Figures quoted in README.md and docs/*.md are generated from committed results (figures.py):
every block matches its source, a changed figure fails the check, a bad block gets a clear
answer, and the staleness line counts the commits in crates/ and lab/peers/ since the run."""

from __future__ import annotations

import json
import subprocess

import pytest

from peregrine_lab import figures


def test_every_quoted_figure_in_the_docs_matches_its_source():
    docs = figures.documents()
    blocks = [m for d in docs for m in figures.BLOCK.finditer(d.read_text())]
    # The README's headline table, seeds and engine targets, docs/performance.md's targets and
    # lab/README.md's database runs.
    assert len(blocks) >= 4
    keys = [figures._attrs(m["attrs"])["key"] for m in blocks]
    assert {"seeds", "db-targets"} <= set(keys)
    assert [p for d in docs for p in figures.check(d)] == []


def _doc(tmp_path, key="headline", source="lab/results/quick"):
    doc = tmp_path / "doc.md"
    empty = f"intro\n<!-- lab:figures source={source} key={key} -->\n<!-- /lab:figures -->\nend\n"
    doc.write_text(figures.rewrite(empty, doc))
    return doc


def test_a_figure_that_differs_from_its_source_fails_and_the_staleness_line_does_not(tmp_path):
    doc = _doc(tmp_path)
    text = doc.read_text()
    assert text.startswith("intro\n") and text.endswith("<!-- /lab:figures -->\nend\n")
    assert figures.check(doc) == []
    # The staleness line depends on HEAD, not on the results: changing it is not a mismatch.
    stale = next(ln for ln in text.splitlines() if ln.startswith(figures.STALE_PREFIX))
    doc.write_text(text.replace(stale, figures.STALE_PREFIX + "`0000`, 9 commits behind."))
    assert figures.check(doc) == []
    row = next(ln for ln in text.splitlines() if ln.startswith("| **Peregrine**"))
    cells = row.split(" | ")
    cells[1] = "0.01"
    doc.write_text(text.replace(row, " | ".join(cells)))
    (problem,) = figures.check(doc)
    assert "differs from its source" in problem and "./scripts/lab figures" in problem


@pytest.mark.parametrize(
    "attrs,message",
    [
        ("source=lab/results/quick key=nope", "unknown key 'nope'"),
        ("source=lab/results/none key=headline", "cannot read lab/results/none/results.json"),
        ("key=headline", "without source="),
        ("source=lab/results/quick key", "bad attribute 'key'"),
        ("source=lab/results/quick key=engine-targets", "no before/after cells"),
        ("source=lab/results/quick key=seeds", "no seed experiments"),
        ("source=lab/results/quick key=db-targets", "no `db` or `fortunes` cells"),
    ],
)
def test_a_bad_block_gets_a_clear_answer(tmp_path, attrs, message):
    doc = tmp_path / "doc.md"
    doc.write_text(f"<!-- lab:figures {attrs} -->\nold\n<!-- /lab:figures -->\n")
    with pytest.raises(figures.FiguresError, match=message):
        figures.rewrite(doc.read_text(), doc)
    (problem,) = figures.check(doc)
    assert message.split("'")[0] in problem


def _git(root, *args):
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


def test_staleness_counts_the_commits_in_crates_and_peers_since_the_run(tmp_path):
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "config", "user.email", "lab@example.org")
    _git(tmp_path, "config", "user.name", "lab")

    def commit(path):
        f = tmp_path / path
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(f.read_text() + "x" if f.exists() else "x")
        _git(tmp_path, "add", "-A")
        _git(tmp_path, "commit", "-qm", path)
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True)
        return out.stdout.decode().strip()

    made = commit("crates/a.rs")
    res = {"git": {"commit": made, "dirty": False}}
    assert ", 0 commits behind HEAD" in figures.staleness(res, tmp_path)
    commit("docs/x.md")  # not code the figures depend on
    commit("crates/a.rs")
    commit("lab/peers/p.js")
    text = figures.staleness(res, tmp_path)
    assert text.startswith(f"{figures.STALE_PREFIX}`{made[:12]}`, 2 commits behind HEAD")
    assert f"git log {made[:12]}..HEAD -- crates lab/peers" in text
    gone = {"git": {"commit": "f" * 40}}
    assert "not in this clone's history" in figures.staleness(gone, tmp_path)
    assert "unrecorded commit" in figures.staleness({}, tmp_path)


def test_the_report_says_how_old_its_code_is():
    from peregrine_lab import report

    res = {"git": {"commit": "f" * 40}, "servers": [], "cells": []}
    assert f"> {figures.STALE_PREFIX}`ffffffffffff`" in report.render(res)


def test_the_protocols_report_says_how_old_its_code_is_too():
    from peregrine_lab import tls_report

    res = {"git": {"commit": "e" * 40}, "servers": [], "cells": [], "settings": {}}
    assert f"> {figures.STALE_PREFIX}`eeeeeeeeeeee`" in tls_report.render(res)


def test_the_seeds_report_says_how_old_its_code_is_too():
    from peregrine_lab.seeds import tables

    res = {"git": {"commit": "d" * 40}, "machine": {}, "experiments": {}}
    assert f"> {figures.STALE_PREFIX}`dddddddddddd`" in tables.render(res)


def _lane(peer, row, seed_row, cells, check=""):
    def run(rps):
        return {"rps": rps, "latency_us": {"p50": 100.0, "p99": 900.0}, "errors": {}}

    return {
        "peer": peer,
        "row": row,
        "seed_row": seed_row,
        "check": check,
        "cells": [
            {"table": t, "column": c, "argv": ["x"], "runs": [run(rps)]} for t, c, rps in cells
        ],
    }


def _seeds_source(tmp_path, load):
    """A synthetic seeds run: NURL and NextRush with figures chosen against the seeds' published
    rows, and a Lemire without Peregrine."""
    nurl = [
        # A check lane of Peregrine first: the sentence must take the default lane's figures.
        _lane("peregrine", "P, one worker", None, [("oha", 1, 1.0)], check="one worker"),
        _lane("hyper", "hyper", "Rust", [("oha", 1, 7225.5), ("oha", 200, 29522.0)]),
        _lane("node-http", "node", "Node", [("oha", 1, 8708.0), ("oha", 200, 15555.0)]),
        _lane("peregrine", "P", None, [("oha", 1, 14451.0), ("oha", 200, 59044.0)]),
    ]
    nextrush = [
        _lane(
            "fastify",
            "Fastify",
            "Fastify",
            [
                ("autocannon:hello", 100, 10000.0),
                ("autocannon:param", 100, 10000.0),
                ("wrk:text", 1, 1000.0),
                ("wrk:text", 64, 2000.0),
            ],
        ),
        _lane(
            "peregrine",
            "P",
            None,
            [
                ("autocannon:hello", 100, 20000.0),
                ("autocannon:param", 100, 30000.0),
                ("wrk:text", 1, 1500.0),
                ("wrk:text", 64, 5000.0),
            ],
        ),
    ]
    lemire = [_lane("go", "Go", "Go 1.19", [("bombardier", 10, 1000.0)])]
    res = {
        "command": "./scripts/lab seeds",
        "started": "2026-01-02T03:04:05+00:00",
        "machine": {"cpu_model": "Test CPU", "nproc": 2, "loadavg_at_start": [load, 1.0, 1.0]},
        "experiments": {
            "lemire": {"lanes": lemire},
            "nextrush": {"lanes": nextrush},
            "nurl": {"lanes": nurl},
        },
    }
    src = tmp_path / "lab" / "results" / "s"
    src.mkdir(parents=True)
    (src / "results.json").write_text(json.dumps(res))
    doc = tmp_path / "doc.md"
    empty = "<!-- lab:figures source=lab/results/s key=seeds -->\n<!-- /lab:figures -->\n"
    doc.write_text(figures.rewrite(empty, doc, tmp_path))
    return doc


def test_the_seeds_sentences_come_from_the_run_and_the_seeds_placements(tmp_path):
    doc = _seeds_source(tmp_path, load=5.0)
    lines = doc.read_text().splitlines()
    assert lines[1] == (
        "From [`lab/results/s`](lab/results/s/report.md) (`./scripts/lab seeds`, 2026-01-02, "
        "Test CPU, 2 CPUs)."
    )
    assert "**The machine was busy** (load average 5.0, 1.0, 1.0 on 2 CPUs at the start)" in (
        doc.read_text()
    )
    bullets = [ln for ln in lines if ln.startswith("- ")]
    # In the seeds' order. P is 2x hyper and 14 451 / 8 708 = 1.66x Node here, and through Node
    # (8 708 and 15 555 here as in the seed) exactly NURL's published 14 451 and 59 044: 1.00.
    assert bullets == [
        "- **NURL (000)**: `oha` c = 1 / 200: 14 451 / 59 044 req/s, 2.00 / 2.00× hyper, "
        "1.66 / 3.80× node, placed through Node: 1.00 / 1.00× the seed's NURL.",
        # 2x Fastify on hello, where Fastify / NextRush was 48 045 / 43 268 in the seed: 2.22;
        # no system is in both wrk tables, so nothing is placed there.
        "- **NextRush (003)**: `autocannon` c = 100, hello / param: 20 000 / 30 000 req/s, "
        "2.00 / 3.00× Fastify, placed through Fastify: 2.22 / 3.53× the seed's NextRush v3; "
        "`wrk` text c = 1 / 64: 1 500 / 5 000 req/s, 1.50 / 2.50× Fastify.",
        "- **Lemire (004)**: Peregrine has no figures in this run.",
    ]
    assert figures.check(doc, tmp_path) == []
    doc.write_text(doc.read_text().replace("2.22 / 3.53×", "2.2 / 3.5×"))
    (problem,) = figures.check(doc, tmp_path)
    assert "differs from its source" in problem


def test_a_quiet_seeds_run_has_no_busy_note(tmp_path):
    text = _seeds_source(tmp_path, load=1.5).read_text()
    assert "**The machine was busy**" not in text and "- **NURL (000)**" in text


def test_the_db_targets_say_who_is_ahead_of_peregrine_in_each_cell():
    def cell(server, scenario, conc, rps, cpu):
        median = {"rps": rps, "cpu_us_per_req": cpu}
        return {
            "server": server,
            "scenario": scenario,
            "concurrency": conc,
            "pipeline": 0,
            "status": "ok",
            "median": median,
        }

    res = {
        "servers": [
            {"name": "peregrine", "label": "Peregrine", "language": "Rust"},
            {"name": "axum", "label": "axum", "language": "Rust"},
            {"name": "bun", "label": "Bun", "language": "JavaScript"},
        ],
        "cells": [
            cell("peregrine", "db", 50, 9000.0, 20.0),
            cell("axum", "db", 50, 8000.0, 30.0),
            cell("bun", "db", 50, 9500.0, 25.0),
            cell("peregrine", "fortunes", 50, 5000.0, 40.0),
            cell("axum", "fortunes", 50, 6000.0, 35.0),
            cell("bun", "fortunes", 50, 4000.0, 45.0),
            cell("peregrine", "plaintext", 50, 1.0, 1.0),  # not a target
        ],
    }
    assert figures.db_targets(res)[2:] == [
        "| cell | server CPU µs/request | requests/s |",
        "|---|---|---|",
        "| `db` c=50 | 20.0, ahead of every peer | 9,000, first among the Rust peers, behind Bun |",
        "| `fortunes` c=50 | 40.0, behind axum | 5,000, behind axum |",
        "",
        "Ahead of every peer in 1 of 2 cells on server CPU µs/request and 0 of 2 cells on "
        "requests/s.",
    ]


def test_the_headline_says_where_hyper_and_axum_pipeline_with_flush():
    """A pipelined hyper or axum figure is never quoted without its pipeline_flush(true) row."""

    def cell(server, p):
        return {"server": server, "scenario": "plaintext", "concurrency": 50, "pipeline": p,
                "status": "ok", "median": {"cpu_us_per_req": 1.0}, "runs": []}  # fmt: skip

    res = {
        "scenarios": [{"name": "plaintext", "main": True}],
        "servers": [{"name": n} for n in ("peregrine", "hyper")],
        "cells": [cell("peregrine", 0), cell("peregrine", 16), cell("hyper", 0), cell("hyper", 16)],
    }
    res["cells"][0]["median"]["bytes_per_response"] = 130.0
    text = "\n".join(figures.headline(res))
    assert "not in this run: hyper-flush; the standard profile measures them" in text
    # What was compared stands beside the figures: the size of each server's answer.
    assert "| busy | bytes/resp |" in text and "| peregrine | 1.00 | 1.00 | n/a | 130 |" in text
    res["cells"] = res["cells"][:3]  # hyper not pipelined: nothing to say
    assert "pipeline_flush" not in "\n".join(figures.headline(res))


def test_the_engine_block_names_its_hyper_and_drops_a_before_engine_that_was_not_built():
    def cell(server, c, p, cpu, status="ok"):
        runs = [{"cpu_us_per_req": cpu * k, "round": i} for i, k in enumerate((0.99, 1, 1.01))]
        return {"server": server, "scenario": "plaintext", "concurrency": c, "pipeline": p,
                "mode": "keep-alive", "status": status, "runs": runs if status == "ok" else [],
                "median": {"cpu_us_per_req": cpu} if status == "ok" else {}}  # fmt: skip

    lanes = ((1, 0, 20.0), (64, 256, 0.05))
    res = {"servers": [{"name": "peregrine-hello"}], "cells": []}
    for c, p, floor in lanes:
        res["cells"] += [
            cell("peregrine-hello", c, p, floor * 1.02),
            cell("floor", c, p, floor),
            cell("hyper-flush", c, p, floor * 3),
            cell("peregrine-hello-before", c, p, 0, status="build-failed"),
        ]
    text = "\n".join(figures.engine_targets(res))
    assert "| lane | hello / floor | target | hyper-flush / floor |" in text
    assert "before" not in text and "medians (hello, floor, hyper-flush): c=1 20.40, 20.00" in text
    # With the before engine measured, its two columns and its median come back.
    for i, (c, p, floor) in enumerate(lanes):
        res["cells"][4 * i + 3] = cell("peregrine-hello-before", c, p, floor * 1.1)
    text = "\n".join(figures.engine_targets(res))
    assert "| target | before / floor | hello / before | hyper-flush / floor |" in text
    assert "medians (hello, before, floor, hyper-flush): c=1 20.40, 22.00, 20.00, 60.00" in text
