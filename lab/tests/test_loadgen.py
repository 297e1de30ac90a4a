"""The load generator layer: parsing wrk's Lua report and oha's JSON, deciding when a run is
invalid, and (when wrk is installed) short real runs through wrk_report.lua."""

import json
import shutil
import socket
import threading

import pytest

from peregrine_lab import config, loadgen
from peregrine_lab.peers import load_contract

CONTRACT = load_contract()

WRK_STDOUT = """Running 1s test @ http://127.0.0.1:8080/plaintext
  1 threads and 50 connections
PEREGRINE_LAB_JSON {"requests":118234,"duration_us":1002345,"bytes":16435000,\
"errors":{"connect":0,"read":0,"write":0,"status":0,"timeout":0},\
"latency_us":{"min":41.000,"mean":420.500,"stdev":80.125,"max":9000.000,"p50":410.000,\
"p90":480.000,"p99":1200.000,"p999":4000.000}}
"""


def test_parse_wrk_report_line():
    r = loadgen.parse_wrk_output(WRK_STDOUT)
    assert r.requests == 118234
    assert r.duration_s == pytest.approx(1.002345)
    assert r.rps == pytest.approx(118234 / 1.002345)
    assert r.latency_us["p50"] == 410.0 and r.latency_us["p99"] == 1200.0
    assert r.errors == {"connect": 0, "read": 0, "write": 0, "status": 0, "timeout": 0}
    assert loadgen.check_statuses(r, 200) == []


def test_parse_wrk_without_report_line_fails_clearly():
    with pytest.raises(loadgen.LoadgenError, match="no PEREGRINE_LAB_JSON"):
        loadgen.parse_wrk_output("unable to connect to 127.0.0.1:8080 Connection refused\n")
    with pytest.raises(loadgen.LoadgenError, match="unreadable"):
        loadgen.parse_wrk_output("PEREGRINE_LAB_JSON {not json\n")
    with pytest.raises(loadgen.LoadgenError, match="incomplete"):
        loadgen.parse_wrk_output('PEREGRINE_LAB_JSON {"requests": 3}\n')


def _result(requests=1000, **errors):
    base = {"connect": 0, "read": 0, "write": 0, "status": 0, "timeout": 0}
    base.update(errors)
    return loadgen.LoadResult(requests, 1.0, 0, base, {"p50": 1.0, "p99": 2.0})


def test_check_statuses():
    assert loadgen.check_statuses(_result(), 200) == []
    assert "3 read error(s)" in loadgen.check_statuses(_result(read=3), 200)
    assert any("status >= 400" in p for p in loadgen.check_statuses(_result(status=5), 200))
    # An expected 500: every answer must be counted as a status error by wrk.
    assert loadgen.check_statuses(_result(status=1000), 500) == []
    assert any("status < 400" in p for p in loadgen.check_statuses(_result(status=990), 500))
    assert "no request completed" in loadgen.check_statuses(_result(requests=0), 200)


def test_parse_oha_json():
    out = json.dumps(
        {
            "summary": {
                "successRate": 1.0,
                "total": 2.0,
                "slowest": 0.01,
                "fastest": 0.0001,
                "average": 0.0005,
                "requestsPerSec": 5000.0,
                "totalData": 130000,
            },
            "latencyPercentiles": {"p50": 0.0004, "p90": 0.0008, "p99": 0.002, "p99.9": 0.005},
            "statusCodeDistribution": {"200": 9990, "404": 10},
            "errorDistribution": {"connection closed": 2},
        }
    )
    r = loadgen.parse_oha_output(out)
    assert r.requests == 10000 and r.rps == 5000.0
    assert r.latency_us["p50"] == pytest.approx(400.0)
    problems = loadgen.check_statuses(r, 200)
    assert any("2 other error(s)" in p for p in problems)
    assert any("unexpected statuses {'404': 10}" in p for p in problems)
    with pytest.raises(loadgen.LoadgenError):
        loadgen.parse_oha_output("not json")


def test_wrk_command_passes_method_body_and_headers(tmp_path):
    post = CONTRACT.by_name("post_json")
    body = tmp_path / "b"
    cmd = loadgen.wrk_command(
        "http://127.0.0.1:1/users",
        post,
        concurrency=64,
        threads=1,
        duration=1.4,
        pipeline=16,
        body_file=body,
    )
    assert cmd[:7] == ["wrk", "-t", "1", "-c", "64", "-d", "1s"]
    assert str(config.WRK_SCRIPT) in cmd
    tail = cmd[cmd.index("--") + 1 :]
    assert tail == ["16", "POST", str(body), "-", "Content-Type: application/json"]
    # Never more threads than connections (wrk refuses that).
    cmd1 = loadgen.wrk_command(
        "http://x/", post, concurrency=1, threads=4, duration=1, pipeline=0, body_file=None
    )
    assert cmd1[1:5] == ["-t", "1", "-c", "1"]


needs_wrk = pytest.mark.skipif(shutil.which("wrk") is None, reason="wrk not installed")
needs_oha = pytest.mark.skipif(shutil.which("oha") is None, reason="oha not installed")


def _run(srv, name, pipeline=0, concurrency=4, tmp_path=None):
    scen = CONTRACT.by_name(name)
    body = None
    if scen.body:
        body = tmp_path / f"{name}.body"
        body.write_bytes(scen.body)
    return loadgen.run(
        "wrk",
        f"http://{srv.host}:{srv.port}{scen.path}",
        scen,
        concurrency=concurrency,
        pipeline=pipeline,
        duration=1,
        client_cpus=None,
        threads=1,
        body_file=body,
        timeout=3,
    )


@needs_wrk
def test_real_wrk_get_post_and_expected_500(contract_srv, tmp_path):
    for name in ("plaintext", "post_json"):
        r = _run(contract_srv, name, tmp_path=tmp_path)
        assert r.requests > 0, name
        assert loadgen.check_statuses(r, 200 if name == "plaintext" else 201) == [], name
    err = _run(contract_srv, "error", tmp_path=tmp_path)
    assert err.requests > 0 and err.errors["status"] == err.requests
    assert loadgen.check_statuses(err, 500) == []


@needs_wrk
def test_real_wrk_flags_a_wrong_status(make_server, tmp_path):
    srv = make_server("error_status")  # /error answers 200 instead of 500
    r = _run(srv, "error", tmp_path=tmp_path)
    assert any("status < 400" in p for p in loadgen.check_statuses(r, 500))


@needs_wrk
def test_real_wrk_pipelines_the_requested_depth(tmp_path):
    """A raw server records the first packet wrk writes on a connection: with depth 8 it holds
    8 complete requests."""
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(16)
    first = []

    def serve():
        # wrk may open a connection and close it without writing (a connect check): keep
        # accepting until a connection carries data.
        ls.settimeout(3)
        while not first:
            try:
                c, _ = ls.accept()
            except OSError:
                return
            data = b""
            c.settimeout(2)
            while data.count(b"\r\n\r\n") < 8:
                try:
                    chunk = c.recv(65536)
                except OSError:
                    break
                if not chunk:
                    break
                data += chunk
            if data:
                first.append(data)
                resp = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
                c.sendall(resp * data.count(b"\r\n\r\n"))
            c.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    scen = CONTRACT.by_name("plaintext")
    try:
        loadgen.run(
            "wrk",
            f"http://127.0.0.1:{ls.getsockname()[1]}/plaintext",
            scen,
            concurrency=1,
            pipeline=8,
            duration=1,
            client_cpus=None,
            threads=1,
            body_file=None,
            timeout=1,
        )
    except loadgen.LoadgenError:
        pass  # the raw server closes after one batch; only what wrk sent matters here
    t.join(5)
    ls.close()
    assert first and first[0].count(b"GET /plaintext HTTP/1.1\r\n") == 8


def test_oha_deadline_aborts_are_not_errors():
    out = json.dumps(
        {
            "summary": {"total": 1.0, "slowest": 0.01, "fastest": 0.001, "average": 0.002},
            "latencyPercentiles": {"p50": 0.002, "p99": 0.009},
            "statusCodeDistribution": {"201": 90},
            "errorDistribution": {"aborted due to deadline": 4},
        }
    )
    r = loadgen.parse_oha_output(out)
    assert r.requests == 90 and loadgen.check_statuses(r, 201) == []


@pytest.mark.skipif(shutil.which("oha") is None, reason="oha not installed")
def test_real_oha_post_and_expected_500(contract_srv, tmp_path):
    for name, status in (("post_json", 201), ("error", 500)):
        scen = CONTRACT.by_name(name)
        body = None
        if scen.body:
            body = tmp_path / "body"
            body.write_bytes(scen.body)
        r = loadgen.run(
            "oha",
            f"http://{contract_srv.host}:{contract_srv.port}{scen.path}",
            scen,
            concurrency=4,
            pipeline=0,
            duration=1,
            client_cpus=None,
            threads=1,
            body_file=body,
            timeout=3,
        )
        assert r.requests > 0 and set(r.status_counts) == {str(status)}, name
        assert loadgen.check_statuses(r, status) == [], name
    with pytest.raises(loadgen.LoadgenError, match="cannot pipeline"):
        loadgen.run(
            "oha",
            "http://127.0.0.1:1/",
            CONTRACT.by_name("plaintext"),
            concurrency=1,
            pipeline=16,
            duration=1,
            client_cpus=None,
            threads=1,
            body_file=None,
        )


@pytest.mark.parametrize("gen", ["ab", "bombardier"])
def test_real_ab_and_bombardier_post_and_expected_500(contract_srv, tmp_path, gen):
    if shutil.which(gen) is None:
        pytest.skip(f"{gen} not installed")
    # ab speaks HTTP/1.0: its keep-alive needs a server that answers 1.0 requests with
    # `Connection: keep-alive`, which this test server does not; ab runs a connection per request.
    cases = (("post_json", 201), ("error", 500), ("plaintext", 200))
    for name, status in cases if gen == "bombardier" else (("plaintext", 200), ("error", 500)):
        scen = CONTRACT.by_name(name)
        if gen == "ab":
            scen = type(scen)(**{**scen.__dict__, "headers": {"Connection": "close"}})
        body = None
        if scen.body:
            body = tmp_path / "body"
            body.write_bytes(scen.body)
        r = loadgen.run(
            gen,
            f"http://{contract_srv.host}:{contract_srv.port}{scen.path}",
            scen,
            concurrency=4,
            pipeline=0,
            duration=1,
            client_cpus=None,
            threads=1,
            body_file=body,
            timeout=3,
        )
        assert r.requests > 0, (gen, name)
        assert loadgen.check_statuses(r, status) == [], (gen, name)
        assert r.client_cpu_s is not None and r.client_cpu_s >= 0


def test_ab_report_parsing_and_connection_close_drops_keep_alive():
    out = """Complete requests:      1200
Failed requests:        3
Non-2xx responses:      1200
Total transferred:      180000 bytes
Time taken for tests:   1.000 seconds
Percentage of the requests served within a certain time (ms)
  50%      2
  90%      4
  99%      9
 100%     12 (longest request)
"""
    r = loadgen.parse_ab_output(out)
    assert (r.requests, r.errors["status"], r.errors["other"]) == (1200, 1200, 3)
    assert r.latency_us["p99"] == 9000.0
    scen = CONTRACT.by_name("plaintext")
    keep = loadgen.ab_command("http://h/", scen, concurrency=2, duration=1, body_file=None)
    close = loadgen.ab_command(
        "http://h/",
        type(scen)(**{**scen.__dict__, "headers": {"Connection": "close"}}),
        concurrency=2,
        duration=1,
        body_file=None,
    )
    assert "-k" in keep and "-k" not in close


def test_open_loop_rate_is_oha_only_and_sets_latency_correction():
    scen = CONTRACT.by_name("plaintext")
    cmd = loadgen.oha_command(
        "http://h/", scen, concurrency=50, threads=1, duration=2, body_file=None, rate=20000
    )
    assert cmd[cmd.index("-q") + 1] == "20000" and "--latency-correction" in cmd
    with pytest.raises(loadgen.LoadgenError, match="open-loop"):
        loadgen.run(
            "wrk",
            "http://127.0.0.1:1/",
            scen,
            concurrency=1,
            pipeline=0,
            duration=1,
            client_cpus=None,
            threads=1,
            body_file=None,
            rate=1000,
        )


def test_request_set_is_drawn_from_the_seed_and_varies_what_the_answer_depends_on():
    param = CONTRACT.by_name("param")
    a, again, other = (loadgen.request_set(param, s) for s in (7, 7, 8))
    assert a[0] == param and len(a) == loadgen.VARIED_REQUESTS
    assert len({r.path for r in a}) == loadgen.VARIED_REQUESTS
    assert [r.path for r in a] == [r.path for r in again] != [r.path for r in other]
    posts = loadgen.request_set(CONTRACT.by_name("post_json"), 7)
    assert len({r.body for r in posts}) == loadgen.VARIED_REQUESTS
    # An answer that does not depend on the request: one fixed request, wrk stays static.
    assert loadgen.request_set(CONTRACT.by_name("plaintext"), 7) == [CONTRACT.by_name("plaintext")]


class _RecordingServer:
    """A raw HTTP/1.1 server answering `ok` to every request head it reads (GET only), keeping
    each request's target: what the load generator really sent."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.targets = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c):
        data = b""
        with c:
            while True:
                try:
                    chunk = c.recv(65536)
                except OSError:
                    return
                if not chunk:
                    return
                data += chunk
                heads = data.split(b"\r\n\r\n")
                data = heads.pop()
                for head in heads:
                    self.targets.append(head.split(b" ", 2)[1].decode())
                try:
                    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok" * len(heads))
                except OSError:
                    return


@pytest.mark.parametrize(
    "gen,pipeline",
    [
        pytest.param("wrk", 0, marks=needs_wrk),
        pytest.param("wrk", 8, marks=needs_wrk),
        pytest.param("oha", 0, marks=needs_oha),
    ],
)
def test_real_load_spreads_over_the_request_set(gen, pipeline):
    srv = _RecordingServer()
    param = CONTRACT.by_name("param")
    reqs = loadgen.request_set(param, 3)
    try:
        res = loadgen.run(
            gen,
            f"http://127.0.0.1:{srv.port}{param.path}",
            param,
            concurrency=4,
            pipeline=pipeline,
            duration=1,
            client_cpus=None,
            threads=2,
            body_file=None,
            timeout=3,
            requests=reqs,
        )
    finally:
        srv.sock.close()
    assert res.distinct_requests == len(reqs) and res.requests > len(reqs)
    sent = set(srv.targets)
    assert sent <= {r.path for r in reqs}
    # wrk cycles through the set, oha draws from it: either way (nearly) every one is sent.
    assert len(sent) >= 0.9 * len(reqs), sorted(sent)


@needs_wrk
def test_real_wrk_varied_load_matches_the_parity_answers_byte_for_byte(contract_srv):
    """The load's bytes per response equal the mean parity answer over the same set; a server
    answering the contract's answer whatever it is asked is caught by both."""
    from peregrine_lab import parity

    for name in ("param", "post_json", "query"):
        scen = CONTRACT.by_name(name)
        pr = parity.check(
            contract_srv.host, contract_srv.port, scen, CONTRACT.required_headers, rounds=63, seed=5
        )
        assert pr.ok, pr.problems
        body = None
        res = loadgen.run(
            "wrk",
            f"http://{contract_srv.host}:{contract_srv.port}{scen.path}",
            scen,
            concurrency=2,
            pipeline=0,
            duration=1,
            client_cpus=None,
            threads=1,
            body_file=body,
            timeout=3,
            requests=loadgen.request_set(scen, 5),
        )
        assert loadgen.check_statuses(res, int(scen.expect["status"])) == [], name
        assert (
            parity.bytes_per_response_problem(pr.load_wire_bytes, res.bytes, res.requests) is None
        )
