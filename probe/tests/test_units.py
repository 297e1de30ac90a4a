"""Unit tests of the pure parts: escapes, response parsing, corpus loading, verdicts."""

from __future__ import annotations

import pytest

from probelib import corpus, escapes
from probelib.client import Observation
from probelib.corpus import Case
from probelib.verdict import evaluate
from probelib.wire import Garbage, Response, parse_responses


def test_escape_decoding():
    assert escapes.decode(r"a\r\n\t\0\\\x7f") == b"a\r\n\t\x00\\\x7f"
    assert escapes.decode(r"\{3*ab}") == b"ababab"
    assert escapes.decode(r"\{2*x\{2*y}}") == b"xyyxyy"
    assert escapes.decode("é") == b"\xc3\xa9"


@pytest.mark.parametrize("bad", [r"\q", "\\", r"\x4", r"\xzz", r"\{3ab}", r"\{x*a}", r"\{3*a"])
def test_escape_errors(bad):
    with pytest.raises(escapes.EscapeError):
        escapes.decode(bad)


def test_show_roundtrip():
    raw = bytes(range(256))
    assert escapes.decode(escapes.show(raw, 10_000)) == raw


def test_parse_content_length_and_chunked():
    buf = (
        b"HTTP/1.1 100 Continue\r\n\r\n"
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"
        b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
    )
    resps, used, pending = parse_responses(buf, False)
    assert [r.status for r in resps] == [100, 200, 201]
    assert resps[1].body == b"hello" and resps[2].body == b"abc"
    assert used == len(buf) and not pending


def test_parse_head_has_no_body_and_detects_a_body_sent_anyway():
    head = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"
    resps, _, _ = parse_responses(head + head + b"hello", False, frozenset({0}))
    assert [r.body for r in resps] == [b"", b"hello"]
    # A server that sends a body after a HEAD response desynchronises the stream.
    with pytest.raises(Garbage) as e:
        parse_responses(head + b"hello" + head + b"hello", False, frozenset({0}))
    assert [r.status for r in e.value.responses] == [200]


def test_parse_incomplete_and_close_delimited():
    resps, used, pending = parse_responses(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc", False)
    assert resps == [] and used == 0 and pending
    resps, _, _ = parse_responses(b"HTTP/1.0 200 OK\r\n\r\nuntil close", True)
    assert resps[0].body == b"until close"


def test_parse_garbage():
    with pytest.raises(Garbage):
        parse_responses(b"Hello, World!", True)


def _case(expect, **kw) -> Case:
    base = {"id": "T-1", "category": "A", "description": "t", "writes": [b"x"], "expect": expect, "level": "MUST"}
    base["ref"] = "-"
    base.update(kw)
    return Case(**base)


def _obs(*statuses, closed=True, headers=None, garbage="") -> Observation:
    return Observation(
        responses=[Response("HTTP/1.1", s, "", list(headers or [])) for s in statuses],
        closed=closed,
        close_kind="eof" if closed else "",
        garbage=garbage,
    )


def test_verdict_reject():
    c = _case("reject")
    assert evaluate(c, _obs(400))[0]
    assert not evaluate(c, _obs(400, closed=False))[0]  # must close
    assert not evaluate(c, _obs(200))[0]
    assert not evaluate(c, _obs(404))[0]
    assert not evaluate(c, _obs())[0]  # silent close is not a 400
    assert not evaluate(c, _obs(400, 200))[0]  # answered after the error
    assert evaluate(_case("reject", statuses=[431, 400]), _obs(431))[0]
    assert not evaluate(c, _obs(400, garbage="x"))[0]


def test_verdict_reject_after_valid_requests():
    c = _case("reject", responses=1)
    assert evaluate(c, _obs(200, 400))[0]
    assert not evaluate(c, _obs(400))[0]
    assert not evaluate(c, _obs(200, 200, 400))[0]


def test_verdict_accept():
    c = _case("accept", responses=2)
    assert evaluate(c, _obs(200, 200, closed=False))[0]
    assert not evaluate(c, _obs(200, closed=False))[0]
    assert not evaluate(c, _obs(200, 400))[0]
    assert evaluate(_case("accept", status=[201, 400], responses=1), _obs(400))[0]
    closed = _case("accept", checks=["closed"], responses=1)
    assert evaluate(closed, _obs(201))[0]
    assert not evaluate(closed, _obs(201, closed=False))[0]
    assert not evaluate(closed, _obs(201, 200))[0]  # something smuggled got answered


def test_verdict_close():
    c = _case("close", responses=1)
    assert evaluate(c, _obs(200))[0]
    assert evaluate(c, _obs(200, 400))[0]
    assert not evaluate(c, _obs(200, 200))[0]
    assert not evaluate(c, _obs(200, closed=False))[0]
    assert evaluate(_case("close"), _obs())[0]
    assert not evaluate(_case("close"), _obs(201))[0]


def test_verdict_checks():
    c = _case("accept", checks=["date", "keep_alive_header"])
    ok = _obs(200, headers=[("Date", "x"), ("Connection", "Keep-Alive")], closed=False)
    assert evaluate(c, ok)[0]
    assert not evaluate(c, _obs(200, headers=[("Connection", "keep-alive")], closed=False))[0]
    both = _obs(200, headers=[("Content-Length", "1"), ("Transfer-Encoding", "chunked")], closed=False)
    assert not evaluate(_case("accept"), both)[0]


def test_corpus_shape():
    cases = corpus.load()
    assert len(cases) >= 250
    assert {c.category for c in cases} == set("ABCDEFG")
    assert len({c.id for c in cases}) == len(cases)
    for c in cases:
        assert c.id.startswith(c.category + "-")
        assert c.raw, c.id
    raw = b"\n".join(c.raw for c in cases)
    # The smuggling classes the issue names are all represented.
    for needle in (
        b"Transfer-Encoding: xchunked",
        b"Content-Length : ",
        b"0x22\r\n",
        b"\r\n Transfer-Encoding",
        b"\x00",
    ):
        assert needle in raw, needle


def test_a_scenario_that_raises_fails_alone():
    """A robustness scenario that raises (e.g. a server too slow to accept) is recorded as a
    failure with the error, instead of aborting the other scenarios."""
    import asyncio

    from probelib.robustness import _guarded

    async def raises():
        raise TimeoutError("connect took too long")

    async def fine():
        return {"id": "H-x", "passed": True}

    failed = asyncio.run(_guarded("H-pipeline-no-read", raises()))
    assert failed["id"] == "H-pipeline-no-read"
    assert failed["passed"] is False and failed["skipped"] is False
    assert "TimeoutError: connect took too long" in failed["observed"]
    assert asyncio.run(_guarded("H-x", fine())) == {"id": "H-x", "passed": True}


def _doc(robustness_results, cases):
    from probelib import report

    return report.summarise("t", cases, {"families": {}}, robustness_results, {"duration_s": 0})


def _rob(sid, passed, skipped=False):
    return {"id": sid, "passed": passed, "skipped": skipped, "observed": "skipped: x" if skipped else "ok"}


def _case_result(cid, level, passed):
    return {"id": cid, "category": "A", "level": level, "passed": passed, "observed": "o", "expected": "e"}


def test_skipped_robustness_counts_as_not_passed():
    from probelib import report

    doc = _doc([_rob("H-a", True), _rob("H-b", False, skipped=True)], [_case_result("A-1", "MUST", True)])
    assert doc["overall"]["robustness"] == {"passed": 1, "total": 2, "skipped": 1}
    assert report.must_failures(doc) == ["robustness H-b: skipped: x"]
    assert report.require_failures(doc, False) == ["robustness H-b: skipped: x"]


def test_require_all_adds_should_cases():
    from probelib import report

    doc = _doc([_rob("H-a", True)], [_case_result("A-1", "MUST", True), _case_result("A-2", "SHOULD", False)])
    assert report.require_failures(doc, False) == []
    assert report.require_failures(doc, True) == ["case A-2 (SHOULD): o"]
