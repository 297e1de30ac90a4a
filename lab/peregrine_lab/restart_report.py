"""report.md of the rolling-restart measurement (`./scripts/lab restart`), from its results."""

from __future__ import annotations

from . import figures

# The budgets of `restart.verdict`, in the report's words.
BUDGETS = {
    "failed_requests": "failed requests (after the documented retries)",
    "duplicated_executions": "POST ids executed more than once (the app's ledger)",
    "acknowledged_not_executed": "POSTs answered 201 but missing from the ledger",
    "h2_not_goaway_no_error": "HTTP/2 connections ended without GOAWAY NO_ERROR",
    "ws_not_going_away": "WebSockets not closed with 1001 Going Away",
    "sse_cut": "SSE streams cut (no last chunk)",
    "old_process_not_exit_0": "old processes that did not exit with status 0",
    "half_head_not_408": "clients halfway through a head at SIGTERM not answered 408",
    "access_log_answered_without_line": "answered attempts with no access-log line",
    "access_log_lines_twice": "attempts with more than one access-log line",
    "access_log_line_status_not_the_answer": "access-log lines whose status is not the answer",
    "access_log_unanswered_with_a_status_line": (
        "attempts the client got no answer for, logged with a status"
    ),
    "access_log_lines_cut": "access-log lines that are not whole JSON",
    "access_log_lines_of_unknown_ids": "access-log lines of ids no client sent",
}


def _counts(d: dict) -> str:
    return ", ".join(f"{k} {v:,}" for k, v in sorted(d.items())) or "none"


def markdown(res: dict) -> str:
    """The verdict, each budget's figure, what was sent, and each restart."""
    b, r = res["budgets"], res["requests"]
    lines = [
        f"# Rolling restart under load: {len(res['restarts'])} restarts in "
        f"{res['duration_seconds']:.0f} s",
        "",
        f"**Verdict: {'every budget met' if b['ok'] else 'BUDGETS MISSED'}.** Command "
        f"`{res['command']}`, started {res['started']}, commit `{res.get('git_commit')}`. The "
        "listening socket is handed from each server process to the next (`LISTEN_FDS`); each "
        "old process is sent SIGTERM once its successor serves. Clients retry only what the "
        "rules say was not processed (`lab/peregrine_lab/restart.py`, docs/operations.md).",
        "",
        f"> {figures.commit_staleness(res.get('git_commit'))}",
        "",
        "| budget (expected 0) | figure |",
        "|---|---|",
    ]
    lines += [f"| {BUDGETS[k]} | {v:,} |" for k, v in b["checks"].items()]
    if b["failures"]:
        lines += ["", "Budgets missed:", ""] + [f"* {f}" for f in b["failures"]]
    lines += [
        "",
        "## What the clients saw",
        "",
        f"* requests sent (logical, by kind): {_counts(r['sent'])}",
        f"* answered right: {_counts(r['ok'])}",
        f"* failed: {_counts(r['failed'])}",
        f"* retried under the rules (kind:why): {_counts(r['retried'])}",
        f"* POSTs acknowledged {r['posts_acknowledged']:,}, failed {r['posts_failed']:,}; "
        f"ledger: {r['executions_in_ledger']:,} executions of {r['distinct_ids_in_ledger']:,} ids",
        f"* HTTP/2 connection ends: {_counts(res['h2_ends'])}; WebSocket close codes: "
        f"{_counts(res['ws_close_codes'])}; SSE stream ends: {_counts(res['sse_ends'])}; "
        f"clients halfway through a head at SIGTERM: {_counts(res.get('half_heads', {}))}",
    ]
    a = res.get("access_log")
    if a:
        lines.append(
            f"* access log (every process's, each attempt by its own id): {a['lines']:,} lines "
            f"for {a['attempts_answered']:,} answered attempts "
            f"({a['attempts_unanswered']:,} unanswered, their lines by status: "
            f"{_counts(a['lines_of_unanswered_attempts'])}; lines without an id: "
            f"{_counts(a['lines_without_id'])}); lines per process: "
            f"{_counts(a['lines_per_process'])}"
        )
    lines += [
        "",
        "## Restarts",
        "",
        "| at (s) | old pid | new pid | old exit | SIGTERM to exit (s) |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {x['at']} | {x['old_pid']} | {x['new_pid']} | {x['old_exit']} | {x['drain_seconds']} |"
        for x in res["restarts"]
    ]
    srv = res["server"]
    lines += [
        "",
        f"`{srv['binary']}` ({srv['cargo_profile']}, features `{srv['features']}`, "
        f"{srv['workers']} workers, SHUTDOWN_TIMEOUT {srv['shutdown_timeout_seconds']} s); "
        f"the plan: `{res['plan']}`.",
    ]
    m = res.get("machine")
    if m:
        lines.append(
            f"The machine: {m['before']['cpus']} CPUs, 1-minute load average "
            f"{m['before']['loadavg_1min']} at the start, {m['after']['loadavg_1min']} at the end."
        )
    return "\n".join(lines) + "\n"
