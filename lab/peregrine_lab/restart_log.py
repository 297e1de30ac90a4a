"""The rolling restart's access-log count: every attempt the clients make carries a unique id
in its target (`?rid=ID`), each server process writes its own access log (`ACCESS_LOG`, one
JSON line per request: `peregrine::access_log`), and the lines of all the processes are
counted against the clients' own record of what they sent and what answered each attempt.

Budgets: every answered attempt has exactly one line (none missing, none twice) and the line's
status is the one the client got. Attempts the client got no answer for (their connection
closed before any byte of a response: not processed, retried) may have a line only with status
0 (dropped unanswered); one with a status would be an answer the client never received. An
attempt the engine answered before its request line was parsed (a 408 for a head the server
stopped waiting for) has no target in its line: the client records it by its own address
(`by_peer`), which the line's `peer` names.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, urlsplit


@dataclass
class Attempts:
    """What the clients sent, by attempt id."""

    answered: dict[str, int] = field(default_factory=dict)  # id → the status the client got
    unanswered: set[str] = field(default_factory=set)  # ids of attempts that got no answer


def tagged(path: str, rid: str) -> str:
    """`path` with the attempt id as its `rid` query parameter."""
    return f"{path}{'&' if '?' in path else '?'}rid={rid}"


def by_peer(host: str, port: int) -> str:
    """The id of an attempt whose line can carry none: the client's address, as the line's
    `peer` field writes it."""
    return f"peer {host}:{port}"


def rid_of(target: str | None) -> str | None:
    """The attempt id in a logged target, if it has one."""
    if not target:
        return None
    ids = parse_qs(urlsplit(target).query).get("rid")
    return ids[0] if ids else None


def read_log(path: Path) -> tuple[list[dict], int]:
    """The JSON lines of one access log, and how many lines were not JSON objects (cut)."""
    lines, bad = [], 0
    text = path.read_text(errors="replace") if path.exists() else ""
    for raw in text.splitlines():
        try:
            line = json.loads(raw)
        except ValueError:
            bad += 1
            continue
        if isinstance(line, dict):
            lines.append(line)
        else:
            bad += 1
    return lines, bad


def count(attempts: Attempts, logs: dict[str, Path]) -> dict:
    """The access logs (name → file) counted against `attempts`: the figures and whether each
    budget of the module doc holds."""
    seen: Counter = Counter()
    status_of: dict[str, int] = {}
    per_process: dict[str, int] = {}
    without_id: Counter = Counter()  # lines of requests the clients did not tag, by status
    cut = 0
    for name, path in logs.items():
        lines, bad = read_log(path)
        per_process[name] = len(lines)
        cut += bad
        for line in lines:
            rid = rid_of(line.get("target"))
            if rid is None and f"peer {line.get('peer')}" in attempts.answered:
                rid = f"peer {line.get('peer')}"
            if rid is None:
                without_id[f"{line.get('source')} {line.get('status')}"] += 1
                continue
            seen[rid] += 1
            status_of[rid] = line.get("status")
    answered = attempts.answered
    missing = sorted(r for r in answered if r not in seen)
    duplicated = sorted(r for r, n in seen.items() if n > 1)
    wrong_status = sorted(r for r, s in answered.items() if r in status_of and status_of[r] != s)
    unanswered_lines = Counter(str(status_of[r]) for r in attempts.unanswered if r in status_of)
    checks = {
        "answered_without_line": len(missing),
        "lines_twice": len(duplicated),
        "line_status_not_the_answer": len(wrong_status),
        "unanswered_with_a_status_line": sum(n for s, n in unanswered_lines.items() if s != "0"),
        "lines_cut": cut,
        "lines_of_unknown_ids": sum(
            1 for r in seen if r not in answered and r not in attempts.unanswered
        ),
    }
    return {
        "ok": not any(checks.values()),
        "checks": checks,
        "attempts_answered": len(answered),
        "attempts_unanswered": len(attempts.unanswered),
        "lines": sum(per_process.values()),
        "lines_per_process": per_process,
        "lines_of_unanswered_attempts": dict(unanswered_lines),
        "lines_without_id": dict(without_id),
        "missing_ids": missing[:20],
        "duplicated_ids": duplicated[:20],
    }
