"""Figures quoted in README.md and docs/*.md are generated from committed results (figures.py):
every block matches its source, a changed figure fails the check, a bad block gets a clear
answer, and the staleness line counts the commits in crates/ and lab/peers/ since the run."""

from __future__ import annotations

import subprocess

import pytest

from peregrine_lab import figures


def test_every_quoted_figure_in_the_docs_matches_its_source():
    docs = figures.documents()
    blocks = [m for d in docs for m in figures.BLOCK.finditer(d.read_text())]
    # The README's headline table and engine targets, and docs/performance.md's targets.
    assert len(blocks) >= 3
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
