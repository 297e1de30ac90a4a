"""The resilience section: the probe's resource attacks per server, rendered from results.json."""

from __future__ import annotations

from peregrine_lab import report, resilience


def _attack(aid: str, peak_kib: int, after_kib: int, cut: int, served: bool = True) -> dict:
    return {
        "id": aid,
        "details": {
            "peak_growth_kib": peak_kib,
            "after_growth_kib": after_kib,
            "cut": cut,
            "attackers": 100,
            "served": served,
        },
    }


DATA = {
    "commit": "abc1234",
    "date": "2026-11-27 13:00 UTC",
    "connections": 100,
    "peers": [
        {
            "peer": "peregrine",
            "label": "Peregrine",
            "attacks": [
                _attack("R-pipeline-no-read", 2048, 512, 100),
                _attack("R-stalled-upload", 1024, -100, 100),
            ],
        },
        {
            "peer": "node-http",
            "label": "node:http",
            "attacks": [_attack("R-pipeline-no-read", 300 * 1024, 0, 0, False)],
        },
        {"peer": "hyper", "error": "not built"},
    ],
}


def test_each_server_has_a_row_with_its_figures():
    rows = resilience.rows(DATA)
    assert rows[0] == (
        "| Peregrine | +2.0 MiB peak, +0.5 after, cut 100/100 "
        "| +1.0 MiB peak, +0.0 after, cut 100/100 |"
    )
    # An attack a server was not given is n/a; a server that took memory and starved others says so.
    assert (
        rows[1]
        == "| node:http | +300.0 MiB peak, +0.0 after, cut 0/100, **others not served** | n/a |"
    )
    assert rows[2] == "| hyper | not built | |"


def test_the_report_has_the_section_only_when_the_run_has_resilience_results():
    assert resilience.section({}) == []
    lines = resilience.section({"resilience": DATA})
    assert lines[0] == "## Resilience: the servers under resource attacks"
    assert "`abc1234`" in lines[2] and "pipeline-no-read" in lines[2]
    # abc1234 is in no clone's history: the section says its age cannot be told.
    assert lines[4].startswith("> Made at commit `abc1234`") and "cannot be told" in lines[4]
    assert lines[6] == "| server | pipeline-no-read | stalled-upload |"
    md = report.render({"profile": "standard", "servers": [], "cells": [], "resilience": DATA})
    assert "## Resilience: the servers under resource attacks" in md
    assert "| Peregrine | +2.0 MiB peak" in md
