"""The probe against two controls: the lenient toy server (must be caught on exactly the right
cases) and a reject-everything server (must pass every plain reject case and fail every accept)."""

from __future__ import annotations

import asyncio
import http.server
import json
import os
import subprocess
import sys
import threading

from probelib import corpus, paths, robustness, runner, sweeps

PROBE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "probe.py")

# What the lenient server gets right: the valid requests it serves, and the truncated requests it
# does not answer because it sees EOF first. Everything else in the corpus is a failure for it.
LENIENT_PASSES = {
    "A-001", "A-002", "A-003", "A-057", "A-058", "A-059", "A-060", "A-062", "A-063", "A-064", "A-068", "A-069",
    "B-001", "B-041", "B-042", "B-043", "B-044", "B-045", "B-046", "B-047", "B-048", "B-051", "B-053", "B-058",
    "B-059", "B-064",
    "C-021", "C-022", "C-023", "C-024", "C-025", "C-026", "C-029", "C-030",
    "D-001", "D-010", "D-018", "D-019", "D-020", "D-022", "D-024", "D-034", "D-035", "D-036",
    "E-001", "E-002", "E-003", "E-004", "E-005", "E-006", "E-007", "E-008", "E-009", "E-010", "E-011", "E-034",
    "E-063", "E-064",
    "F-017",
    "G-007", "G-008", "G-009", "G-016", "G-017", "G-019", "G-020", "G-021", "G-022", "G-023", "G-026", "G-028",
    "G-029", "G-030",
}  # fmt: skip


def _run(cases, port, timeout=1.0):
    return {r["id"]: r for r in asyncio.run(runner.run_cases(cases, "127.0.0.1", port, timeout, 64))}


def test_lenient_server_fails_exactly_the_right_cases(lenient_port):
    cases = corpus.load()
    res = _run(cases, lenient_port)
    passed = {i for i, r in res.items() if r["passed"]}
    assert passed == LENIENT_PASSES, {
        "unexpected passes": sorted(passed - LENIENT_PASSES),
        "unexpected failures": sorted(LENIENT_PASSES - passed),
    }
    # The named smuggling classes are all caught.
    for cid in ("B-002", "B-007", "E-012", "E-013", "E-015", "E-016", "D-014", "E-037", "F-001", "A-004", "C-001"):
        assert not res[cid]["passed"], cid


def test_reject_all_server_is_the_mirror_image(reject_all_port):
    cases = corpus.load()
    res = _run(cases, reject_all_port)
    for c in cases:
        r = res[c.id]
        if c.expect == "accept" and not (isinstance(c.status, list) and 400 in c.status):
            assert not r["passed"], c.id
        plain_reject = c.expect == "reject" and 400 in c.statuses and c.responses == 0
        if plain_reject or (c.expect == "close" and c.responses == 0):
            assert r["passed"], (c.id, r["observed"])


def test_sweeps_quick(lenient_port, reject_all_port):
    bad = asyncio.run(sweeps.run_sweeps("127.0.0.1", lenient_port, quick=True, concurrency=64, timeout=1.0))
    good = asyncio.run(sweeps.run_sweeps("127.0.0.1", reject_all_port, quick=True, concurrency=64, timeout=1.0))
    assert bad["requests"] == good["requests"] > 2000
    for fam in bad["families"].values():
        assert fam["passed"] == 0 and fam["examples"]
    for name, fam in good["families"].items():
        assert fam["passed"] == fam["total"], (name, fam["outcomes"])


def test_sweep_scope_is_at_least_the_seed_scope():
    assert sum(len(v) for v in sweeps.families(False).values()) >= 124_000


def test_robustness_verdicts_on_the_lenient_server(lenient_port):
    o = robustness.Options(timeout=1.0, header_timeout=1.0, body_timeout=1.0, idle_connections=50, quick=True)

    async def go():
        return await asyncio.gather(
            robustness.slowloris("127.0.0.1", lenient_port, o),
            robustness.huge_header("127.0.0.1", lenient_port, o),
            robustness.half_close("127.0.0.1", lenient_port, o),
            robustness.one_byte_writes(
                "127.0.0.1", lenient_port, o, robustness.GET, "H-1", "GET", 200, b"Hello, World!"
            ),
            robustness.reset_mid_request("127.0.0.1", lenient_port, o),
            robustness.idle_connections("127.0.0.1", lenient_port, o),
            robustness.pipeline_no_read("127.0.0.1", lenient_port, o),
        )

    slow, huge, half, onebyte, reset, idle, pipe = asyncio.run(go())
    assert not slow["passed"]  # it never times out a trickling client
    assert not huge["passed"]  # it accepts a 1 MiB header line
    assert half["passed"] and onebyte["passed"] and reset["passed"] and idle["passed"]
    assert pipe["skipped"]  # no --server-pid


def test_trickle_verdicts_on_the_lenient_server(lenient_port):
    # The lenient server only has a per-read timeout (5 s): a byte every 0.1 s keeps it forever.
    o = robustness.Options(timeout=1.0, body_timeout=1.0, trickle_gap=0.1, slow_client_deadline=1.0)

    async def go():
        return await asyncio.gather(
            robustness.trickle_body("127.0.0.1", lenient_port, o),
            robustness.trickle_read("127.0.0.1", lenient_port, o),
        )

    body, read = asyncio.run(go())
    assert not body["passed"] and "still open" in body["observed"], body
    assert not read["passed"] and "still open" in read["observed"], read


def test_cli_report_and_require_must(lenient_port, tmp_path):
    out = tmp_path / "r.json"
    md = tmp_path / "r.md"
    base = [sys.executable, PROBE, "--target", f"127.0.0.1:{lenient_port}", "--json", str(out), "--markdown", str(md)]
    base += ["--quick", "--no-sweeps", "--no-robustness", "--categories", "C,G", "--timeout", "1"]
    p = subprocess.run(base, check=False, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    assert set(doc) >= {"target", "overall", "categories", "cases", "sweeps", "robustness"}
    assert set(doc["categories"]) == {"C", "G"}
    o = doc["overall"]
    assert o["must"]["total"] + o["should"]["total"] == len(doc["cases"])
    assert 0 < o["score"] < 100
    assert {"id", "category", "level", "passed", "expected", "observed"} <= set(doc["cases"][0])
    assert "C-001" in md.read_text()  # failed cases are listed
    p = subprocess.run(base + ["--require-must"], check=False, capture_output=True, text=True, timeout=120)
    assert p.returncode == 1 and "MUST-level failure" in p.stderr


class _SplitRouting(http.server.BaseHTTPRequestHandler):
    """A server with a routing bypass: it routes the raw path, so `/plaintext` is
    the canonical resource, while any other spelling reaches a different handler that answers
    200 with something else (the "private file")."""

    protocol_version = "HTTP/1.1"

    def do_GET(self):
        body = b"Hello, World!" if self.path == "/plaintext" else b"private file"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_path_spelling_scenarios(lenient_port, reject_all_port):
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _SplitRouting)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    o = robustness.Options(timeout=1.0)

    async def both(port):
        return await asyncio.gather(
            paths.equivalent_spellings("127.0.0.1", port, o), paths.ambiguous_spellings("127.0.0.1", port, o)
        )

    try:
        eq, amb = asyncio.run(both(srv.server_address[1]))
        assert not eq["passed"] and not amb["passed"]
        assert "/%70laintext: 200" in eq["observed"] and "/./plaintext: 200" in amb["observed"]
        assert len(eq["details"]["failures"]) == len(paths.EQUIVALENT)
        # Answering every spelling as /plaintext passes both.
        eq, amb = asyncio.run(both(lenient_port))
        assert eq["passed"] and amb["passed"]
        # Refusing is fine for ambiguous spellings, not for equivalent ones.
        eq, amb = asyncio.run(both(reject_all_port))
        assert not eq["passed"] and amb["passed"]
    finally:
        srv.shutdown()
        srv.server_close()


def test_cli_require_all_fails_on_should_cases_only(lenient_port, tmp_path):
    # Category A: the lenient server passes every MUST case and fails most SHOULD cases.
    out = tmp_path / "a.json"
    base = [sys.executable, PROBE, "--target", f"127.0.0.1:{lenient_port}", "--json", str(out)]
    base += ["--quick", "--no-sweeps", "--no-robustness", "--categories", "A", "--timeout", "1"]
    p = subprocess.run(base + ["--require-must"], check=False, capture_output=True, text=True, timeout=120)
    o = json.loads(out.read_text())["overall"]
    assert o["must"]["passed"] == o["must"]["total"] and o["should"]["passed"] < o["should"]["total"]
    assert p.returncode == 0, p.stderr
    p = subprocess.run(base + ["--require-all"], check=False, capture_output=True, text=True, timeout=120)
    assert p.returncode == 1
    assert "(SHOULD)" in p.stderr and "A-0" in p.stderr
