"""Summaries and the JSON/Markdown reports."""

from __future__ import annotations

from .corpus import CATEGORY_TITLES


def _count(results: list[dict], level: str) -> dict:
    sel = [r for r in results if r["level"] == level]
    return {"passed": sum(1 for r in sel if r["passed"]), "total": len(sel)}


def _pct(passed: int, total: int) -> float:
    return round(100.0 * passed / total, 1) if total else 100.0


def summarise(target: str, cases: list[dict], sweeps: dict, robustness: list[dict], meta: dict) -> dict:
    """Build the report document (the JSON interface the lab runner reads)."""
    categories = {}
    for cat in sorted({r["category"] for r in cases}):
        sel = [r for r in cases if r["category"] == cat]
        must, should = _count(sel, "MUST"), _count(sel, "SHOULD")
        categories[cat] = {
            "title": CATEGORY_TITLES.get(cat, cat),
            "must": must,
            "should": should,
            "score": _pct(must["passed"] + should["passed"], must["total"] + should["total"]),
        }
    must, should = _count(cases, "MUST"), _count(cases, "SHOULD")
    sweep_passed = sum(s["passed"] for s in sweeps.get("families", {}).values())
    sweep_total = sum(s["total"] for s in sweeps.get("families", {}).values())
    # A skipped scenario is not a passed one: it counts in the total and fails --require-must.
    rob_skipped = [r for r in robustness if r.get("skipped")]
    overall = {
        "must": must,
        "should": should,
        "score": _pct(must["passed"] + should["passed"], must["total"] + should["total"]),
        "must_score": _pct(must["passed"], must["total"]),
        "sweeps": {"passed": sweep_passed, "total": sweep_total, "score": _pct(sweep_passed, sweep_total)},
        "robustness": {
            "passed": sum(1 for r in robustness if r["passed"] and not r.get("skipped")),
            "total": len(robustness),
            "skipped": len(rob_skipped),
        },
    }
    return {
        "target": target,
        "overall": overall,
        "categories": categories,
        "cases": cases,
        "sweeps": sweeps,
        "robustness": robustness,
        "meta": meta,
    }


def must_failures(doc: dict) -> list[str]:
    """Everything that makes ``--require-must`` fail: MUST cases, sweep requests, robustness."""
    out = [f"case {r['id']}: {r['observed']}" for r in doc["cases"] if r["level"] == "MUST" and not r["passed"]]
    for name, fam in doc["sweeps"].get("families", {}).items():
        if fam["passed"] != fam["total"]:
            out.append(f"sweep {name}: {fam['total'] - fam['passed']} of {fam['total']} failed")
    out += [f"robustness {r['id']}: {r['observed']}" for r in doc["robustness"] if r.get("skipped") or not r["passed"]]
    return out


def require_failures(doc: dict, require_all: bool) -> list[str]:
    """What makes ``--require-must`` (or, with ``require_all``, ``--require-all``) exit 1."""
    fails = must_failures(doc)
    if require_all:
        fails += [
            f"case {r['id']} (SHOULD): {r['observed']}"
            for r in doc["cases"]
            if r["level"] == "SHOULD" and not r["passed"]
        ]
    return fails


def _md_escape(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def markdown(doc: dict) -> str:
    o = doc["overall"]
    lines = [
        f"# HTTP/1.1 compliance probe: `{doc['target']}`",
        "",
        (
            f"Server: {doc['meta'].get('server_header') or 'unknown'} · probe run {doc['meta'].get('started', '')}"
            f" · mode {doc['meta'].get('mode', '')} · {doc['meta'].get('duration_s', '?')} s"
        ),
        "",
        "| | passed | total | % |",
        "|---|---:|---:|---:|",
        f"| MUST cases | {o['must']['passed']} | {o['must']['total']} | {o['must_score']} |",
        (
            f"| SHOULD cases | {o['should']['passed']} | {o['should']['total']} | "
            f"{_pct(o['should']['passed'], o['should']['total'])} |"
        ),
        (
            f"| all cases (score) | {o['must']['passed'] + o['should']['passed']} | "
            f"{o['must']['total'] + o['should']['total']} | **{o['score']}** |"
        ),
        f"| generated sweep requests | {o['sweeps']['passed']} | {o['sweeps']['total']} | {o['sweeps']['score']} |",
        (
            f"| robustness scenarios | {o['robustness']['passed']} | {o['robustness']['total']} | "
            f"{_pct(o['robustness']['passed'], o['robustness']['total'])} |"
        ),
        "",
        "## Categories",
        "",
        "| category | MUST | SHOULD | % |",
        "|---|---:|---:|---:|",
    ]
    for cat, c in doc["categories"].items():
        lines.append(
            f"| {cat} {c['title']} | {c['must']['passed']}/{c['must']['total']} | "
            f"{c['should']['passed']}/{c['should']['total']} | {c['score']} |"
        )
    failed = [r for r in doc["cases"] if not r["passed"]]
    lines += ["", f"## Failed cases ({len(failed)})", ""]
    if failed:
        lines += ["| id | level | description | expected | observed |", "|---|---|---|---|---|"]
        for r in sorted(failed, key=lambda r: (r["level"] != "MUST", r["id"])):
            lines.append(
                f"| {r['id']} | {r['level']} | {_md_escape(r['description'])} | {_md_escape(r['expected'])} | "
                f"{_md_escape(r['observed'])} |"
            )
    else:
        lines.append("None.")
    fams = doc["sweeps"].get("families", {})
    if fams:
        lines += [
            "",
            "## Generated sweeps",
            "",
            (
                f"{doc['sweeps'].get('requests', 0)} requests in {doc['sweeps'].get('duration_s', '?')} s "
                f"({doc['sweeps'].get('rate', '?')} req/s). A request passes when answered 400 and closed."
            ),
            "",
            "| family | passed | total | failing examples |",
            "|---|---:|---:|---|",
        ]
        for name, fam in fams.items():
            ex = "; ".join(f"`{_md_escape(e['request'])}` → {_md_escape(e['observed'])}" for e in fam["examples"][:3])
            lines.append(f"| {name} | {fam['passed']} | {fam['total']} | {ex} |")
    if doc["robustness"]:
        lines += ["", "## Robustness", "", "| scenario | verdict | expected | observed |", "|---|---|---|---|"]
        for r in doc["robustness"]:
            v = "skipped" if r.get("skipped") else ("pass" if r["passed"] else "**FAIL**")
            lines.append(f"| {r['id']} | {v} | {_md_escape(r['expected'])} | {_md_escape(r['observed'])} |")
    return "\n".join(lines) + "\n"
