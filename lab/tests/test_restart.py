"""The rolling-restart measurement: its verdict on made-up records (a duplicate, a lost POST, a
GOAWAY with an error, a cut stream each fail it), its ledger reading and report, and a short
real run (the CI variant, about 45 s) of the scenarios app restarted three times under load,
the listener handed from process to process."""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from pathlib import Path

import pytest

from peregrine_lab import restart, restart_log, restart_report, schema

# Seconds of the CI run (PEREGRINE_RESTART_CI_SECONDS overrides it).
CI_SECONDS = float(os.environ.get("PEREGRINE_RESTART_CI_SECONDS", "30"))


def _clean_record() -> restart.Record:
    rec = restart.Record()
    rec.sent.update(h1_get=10, h1_post=3)
    rec.ok.update(h1_get=10, h1_post=3)
    rec.acked.update({"a", "b", "c"})
    rec.h2_ends["goaway 0, then eof"] += 2
    rec.ws_closes["1001"] += 2
    rec.sse_ends["clean"] += 2
    return rec


RESTARTS = [{"old_pid": 1, "new_pid": 2, "old_exit": 0, "drain_seconds": 0.2, "at": 5.0}]


def test_a_clean_run_meets_every_budget():
    v = restart.verdict(_clean_record(), Counter(a=1, b=1, c=1), RESTARTS)
    assert v["ok"], v["failures"]
    assert set(v["checks"].values()) == {0}


def test_each_way_a_restart_can_go_wrong_misses_a_budget():
    rec = _clean_record()
    rec.failed["h1_get:reset"] += 1
    rec.h2_ends["goaway 2, then eof"] += 1
    rec.h2_ends["goaway none, then eof"] += 1
    rec.ws_closes["none"] += 1
    rec.sse_ends["cut"] += 1
    rec.half_heads["no answer: eof"] += 1  # the drain closed it unanswered
    rec.half_heads["408"] += 1
    executed = Counter(a=2, b=1)  # a ran twice, c (acknowledged) never
    crashed = [dict(RESTARTS[0], old_exit=-9)]
    v = restart.verdict(rec, executed, crashed)
    assert v["checks"] == {
        "failed_requests": 1,
        "duplicated_executions": 1,
        "acknowledged_not_executed": 1,
        "h2_not_goaway_no_error": 2,
        "ws_not_going_away": 1,
        "sse_cut": 1,
        "old_process_not_exit_0": 1,
        "half_head_not_408": 1,
    }
    assert v["duplicated_ids"] == ["a"] and v["missing_ids"] == ["c"]
    assert not restart.verdict(_clean_record(), Counter(a=1, b=1, c=1), [])["ok"]


def test_the_ledger_counts_each_id(tmp_path):
    ledger = tmp_path / "ledger"
    ledger.write_text("x\ny\nx\n\n")
    assert restart.ledger_counts(ledger) == Counter(x=2, y=1)
    assert restart.ledger_counts(tmp_path / "missing") == Counter()


def _access_line(rid: str | None, status: int, path: str = "/json", peer: str = "") -> str:
    target = restart_log.tagged(path, rid) if rid else None
    source = "app" if rid else "engine"
    return json.dumps({"source": source, "target": target, "status": status, "peer": peer})


def test_a_head_answered_before_its_target_was_parsed_is_counted_by_the_clients_address(
    tmp_path,
):
    """The engine's 408 for a half head has no target: its line is matched by the client's
    address; missing, twice or with another status, it misses the budgets as any attempt."""
    half = restart_log.by_peer("127.0.0.1", 40001)
    assert half == "peer 127.0.0.1:40001"
    att = restart_log.Attempts(answered={"a-0": 200, half: 408})
    log = tmp_path / "access-1.log"
    engine_408 = _access_line(None, 408, peer="127.0.0.1:40001")
    other = _access_line(None, 408, peer="127.0.0.1:40002")
    log.write_text("\n".join([_access_line("a-0", 200), engine_408, other]) + "\n")
    ok = restart_log.count(att, {"server-1": log})
    assert ok["ok"], ok
    assert ok["lines_without_id"] == {"engine 408": 1}  # the other client's line only
    log.write_text("\n".join([_access_line("a-0", 200), engine_408, engine_408]) + "\n")
    assert restart_log.count(att, {"server-1": log})["checks"]["lines_twice"] == 1
    log.write_text(_access_line("a-0", 200) + "\n")
    assert restart_log.count(att, {"server-1": log})["missing_ids"] == [half]
    wrong = _access_line(None, 400, peer="127.0.0.1:40001")
    log.write_text("\n".join([_access_line("a-0", 200), wrong]) + "\n")
    assert restart_log.count(att, {"server-1": log})["checks"]["line_status_not_the_answer"] == 1


def test_the_access_log_count_finds_each_way_a_line_goes_wrong(tmp_path):
    """Lines of two processes against the clients' attempts: a clean pair of logs meets every
    budget; a missing line, a line twice, a wrong status, a status line for an attempt the
    client never got an answer for, a cut line and an unknown id each miss one."""
    att = restart_log.Attempts(answered={"a-0": 200, "b-0": 201, "c-1": 101}, unanswered={"c-0"})
    old, new = tmp_path / "access-1.log", tmp_path / "access-2.log"
    old.write_text(_access_line("a-0", 200) + "\n" + _access_line("c-0", 0, "/ws") + "\n")
    new.write_text(
        _access_line("b-0", 201, "/ledger?x=1")
        + "\n"
        + _access_line("c-1", 101, "/ws")
        + "\n"
        + _access_line(None, 408)
        + "\n"
    )
    clean = restart_log.count(att, {"server-1": old, "server-2": new})
    assert clean["ok"] and set(clean["checks"].values()) == {0}, clean
    assert clean["lines_per_process"] == {"server-1": 2, "server-2": 3}
    assert clean["lines_of_unanswered_attempts"] == {"0": 1}
    assert clean["lines_without_id"] == {"engine 408": 1}

    new.write_text(
        "\n".join(
            [
                _access_line("b-0", 200, "/ledger"),  # the client got 201
                _access_line("b-0", 201, "/ledger"),  # twice
                _access_line("z-0", 200),  # no client sent z
                '{"source":"app","tar',  # cut by a full disk
            ]
        )
        + "\n"
    )
    old.write_text(_access_line("c-0", 503, "/ws") + "\n")  # a's line missing
    bad = restart_log.count(att, {"server-1": old, "server-2": new})
    assert bad["checks"] == {
        "answered_without_line": 2,  # a-0 and c-1
        "lines_twice": 1,
        "line_status_not_the_answer": 0,  # b-0's last line says 201
        "unanswered_with_a_status_line": 1,
        "lines_cut": 1,
        "lines_of_unknown_ids": 1,
    }
    assert bad["missing_ids"] == ["a-0", "c-1"] and bad["duplicated_ids"] == ["b-0"]
    new.write_text(_access_line("b-0", 500, "/ledger") + "\n")
    wrong = restart_log.count(att, {"server-2": new})
    assert wrong["checks"]["line_status_not_the_answer"] == 1 and not wrong["ok"]


def test_attempt_ids_ride_in_the_query():
    assert restart_log.tagged("/json", "x-0") == "/json?rid=x-0"
    assert restart_log.tagged("/q?n=1", "x-1") == "/q?n=1&rid=x-1"
    assert restart_log.rid_of("/q?n=1&rid=x-1") == "x-1"
    assert restart_log.rid_of("/json") is None and restart_log.rid_of(None) is None


def _run(tmp_path: Path) -> dict:
    lines: list[str] = []
    opts = restart.Options(
        out_dir=tmp_path,
        duration=CI_SECONDS,
        cargo_profile="debug",
        plan=restart.CI_PLAN,
        progress=lines.append,
    )
    return restart.run(opts)


@pytest.fixture(scope="module")
def ci_run(tmp_path_factory) -> tuple[dict, Path]:
    out = tmp_path_factory.mktemp("restart")
    return _run(out), out


@pytest.mark.skipif(shutil.which("cargo") is None, reason="needs cargo to build the app")
def test_ci_restarts_lose_and_repeat_nothing(ci_run):
    """The CI variant: restarts every 5 s under HTTP/1.1 GETs and POSTs, HTTP/2 streams,
    WebSocket and SSE sessions: no failed request, no POST executed twice or lost, HTTP/2
    ended by GOAWAY NO_ERROR, SSE streams ended cleanly, every old process exited 0."""
    res, out = ci_run
    checks = res["budgets"]["checks"]
    assert len(res["restarts"]) >= 3, res["restarts"]
    for name in (
        "failed_requests",
        "duplicated_executions",
        "acknowledged_not_executed",
        "h2_not_goaway_no_error",
        "sse_cut",
        "old_process_not_exit_0",
    ):
        assert checks[name] == 0, (name, res["requests"], res["h2_ends"], res["sse_ends"])
    # Each restart's client halfway through a head got the drain's 408 (its line is counted
    # by test_ci_restarts_log_every_answered_request_once).
    assert res["half_heads"] == {"408": len(res["restarts"])}, res["half_heads"]
    assert checks["half_head_not_408"] == 0
    r = res["requests"]
    for kind in ("h1_get", "h1_post", "h2_get", "h2_post"):
        assert r["ok"].get(kind, 0) > 0, (kind, r)
    assert r["executions_in_ledger"] == r["posts_acknowledged"] > 0
    assert sum(res["h2_ends"].values()) >= 3 and res["sse_ends"].get("clean", 0) >= 3
    written = json.loads((out / "results.json").read_text())
    assert written["requests"] == r and schema.problems(written) == []
    assert (
        "| POST ids executed more than once (the app's ledger) | 0 |"
        in (out / "report.md").read_text()
    )


@pytest.mark.skipif(shutil.which("cargo") is None, reason="needs cargo to build the app")
def test_ci_restarts_log_every_answered_request_once(ci_run):
    """Every process's access log, counted against each attempt the clients made: exactly one
    line per answered attempt (its status the answer's), across every hand-over, the old
    processes' last lines included; a line in the log of every process."""
    res, _ = ci_run
    a = res["access_log"]
    assert a["ok"], a
    assert a["attempts_answered"] > 1000 and a["lines"] >= a["attempts_answered"], a
    assert len(a["lines_per_process"]) == len(res["restarts"]) + 1, a
    assert all(n > 0 for n in a["lines_per_process"].values()), a
    for name, n in a["checks"].items():
        assert res["budgets"]["checks"][f"access_log_{name}"] == n == 0


@pytest.mark.skipif(shutil.which("cargo") is None, reason="needs cargo to build the app")
def test_ci_restarts_drain_without_waiting(ci_run):
    """Each old process exits soon after SIGTERM: its WebSocket clients answer the 1001 Close
    at once (as browsers do), so nothing waits out the server's one-second wait for a reply;
    the clients used to read only after their next message (up to 0.5 s later)."""
    res, _ = ci_run
    drains = sorted(r["drain_seconds"] for r in res["restarts"])
    assert drains[len(drains) // 2] < 0.3, drains


@pytest.mark.skipif(shutil.which("cargo") is None, reason="needs cargo to build the app")
def test_ci_restarts_close_websockets_with_going_away(ci_run):
    res, _ = ci_run
    assert sum(res["ws_close_codes"].values()) >= 3
    assert res["budgets"]["checks"]["ws_not_going_away"] == 0, res["ws_close_codes"]


def test_the_report_lists_every_budget_and_restart(tmp_path, head_commit):
    rec = _clean_record()
    rec.attempts.answered["a-0"] = 201
    (tmp_path / "access-1.log").write_text(_access_line("a-0", 201, "/ledger") + "\n")
    access = restart_log.count(rec.attempts, {"server-1": tmp_path / "access-1.log"})
    v = restart.verdict(rec, Counter(a=1, b=1, c=1), RESTARTS, access)
    res = {
        "duration_seconds": 20.0,
        "command": "./scripts/lab restart",
        "started": "2026-01-01T00:00:00+00:00",
        "budgets": v,
        "requests": {
            "sent": {"h1_get": 10},
            "ok": {"h1_get": 10},
            "failed": {},
            "retried": {"h1_get:closed": 2},
            "posts_acknowledged": 3,
            "posts_failed": 0,
            "executions_in_ledger": 3,
            "distinct_ids_in_ledger": 3,
        },
        "h2_ends": {"goaway 0, then eof": 2},
        "ws_close_codes": {"1001": 2},
        "sse_ends": {"clean": 2},
        "access_log": access,
        "restarts": RESTARTS,
        "server": {
            "binary": "b",
            "cargo_profile": "debug",
            "features": "f",
            "workers": 2,
            "shutdown_timeout_seconds": 5,
        },
        "plan": {},
    }
    text = restart_report.markdown(res)
    assert "**Verdict: every budget met.**" in text
    assert "> Made at an unrecorded commit" in text
    behind = f"> Made at commit `{head_commit[:12]}`, 0 commits behind HEAD"
    assert behind in restart_report.markdown({**res, "git_commit": head_commit})
    for words in restart_report.BUDGETS.values():
        assert f"| {words} | 0 |" in text
    assert "1 lines for 1 answered attempts" in text and "server-1 1" in text
    assert "| 5.0 | 1 | 2 | 0 | 0.2 |" in text
    assert "retried under the rules (kind:why): h1_get:closed 2" in text
