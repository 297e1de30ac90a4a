"""`./scripts/lab seeds`: each experiment's tool and exact argv as its seed wrote it, each tool run
for about a second against a stand-in server and its real output parsed, the ratio flags and
placements, the report's tables, and the seeds' Node.js and Go servers' answers."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from peregrine_lab import config, procs, schema
from peregrine_lab.peers import load_peers
from peregrine_lab.seeds import experiments, figures, run, tables, tools

BASE = "http://h:1"


class _Handler(BaseHTTPRequestHandler):
    """Keep-alive HTTP/1.1: GET answers `Hello`, POST echoes its body with 201; counts requests."""

    protocol_version = "HTTP/1.1"
    count = 0
    lock = threading.Lock()

    def _answer(self, status: int, body: bytes) -> None:
        with _Handler.lock:
            _Handler.count += 1
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):  # noqa: N802 (http.server's naming)
        self._answer(200, b"Hello")

    def do_POST(self):  # noqa: N802
        self._answer(201, self.rfile.read(int(self.headers.get("Content-Length", 0))))

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def stand_in():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.daemon_threads = True
    t = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def _argvs(name: str, table: str) -> list[list[str]]:
    return [c.argv for c in experiments.EXPERIMENTS[name].cells(BASE) if c.table == table]


def test_nurl_is_oha_keep_alive_on_slash_at_the_seeds_concurrencies():
    cells = experiments.EXPERIMENTS["nurl"].cells(BASE)
    assert [c.argv for c in cells] == [
        [str(tools.OHA), "--no-tui", "-j", "-z", "3s", "-c", str(c), BASE + "/"]
        for c in (1, 10, 50, 200)
    ]
    assert {c.runs for c in cells} == {3}  # median of 3, as the seed
    assert tools.OHA.parts[-3] == "oha-1.8.0"


def test_rust_http_is_ab_n_10000_and_wrk_c_n_t_n():
    assert _argvs("rust-http", "ab") == [
        ["ab", "-n", "10000", "-c", str(c), BASE + "/"] for c in (1, 2, 3, 4, 8)
    ]
    assert _argvs("rust-http", "wrk") == [
        ["wrk", "-c", str(c), "-d", "3s", "-t", str(c), BASE + "/"] for c in (1, 2, 3, 8)
    ]


def test_kourier_is_wrk_512_6_threads_latency_pipeline_256_split_cores():
    exp = experiments.EXPERIMENTS["kourier"]
    assert _argvs("kourier", "wrk") == [
        ["wrk", "-c", "512", "-d", "5s", "-t", "6", "--latency", BASE + "/hello"]
        + ["-s", str(tools.PIPELINE_LUA), "--", "256"]
    ]
    assert exp.split and run.SERVER_CPU != run.TOOL_CPU


def test_nextrush_is_autocannon_100_pipelining_10_and_wrk_8_threads():
    exp = experiments.EXPERIMENTS["nextrush"]
    auto = [c for c in exp.cells(BASE) if c.tool == "autocannon"]
    assert [c.table for c in auto] == [
        "autocannon:hello",
        "autocannon:param",
        "autocannon:query",
        "autocannon:post",
        "autocannon:mixed",
    ]
    for c in auto:
        assert c.argv[:2] == ["node", str(tools.AUTOCANNON)]
        opts = json.loads(c.argv[2])
        assert (opts["url"], opts["connections"], opts["pipelining"]) == (BASE, 100, 10)
        assert opts["requests"] == experiments.NEXTRUSH_REQUESTS[c.table.split(":")[1]]
    wrk = {(c.table, c.column): c.argv for c in exp.cells(BASE) if c.tool == "wrk"}
    assert wrk[("wrk:hello", 1)] == [
        "wrk",
        "-c",
        "1",
        "-d",
        "2s",
        "-t",
        "1",
        "--latency",
        BASE + "/",
    ]
    assert wrk[("wrk:hello", 512)] == [
        "wrk",
        "-c",
        "512",
        "-d",
        "2s",
        "-t",
        "8",
        "--latency",
        BASE + "/",
    ]
    assert wrk[("wrk:middleware", 64)][-2:] == ["-H", "Authorization: Bearer seeds"]
    assert sorted({c for _, c in wrk}) == [1, 64, 256, 512]


def test_lemire_is_bombardier_c_10_and_1000_on_simple():
    assert _argvs("lemire", "bombardier") == [
        ["bombardier", "-c", str(c), "-d", "3s", "-l", "-p", "r", "-o", "json", BASE + "/simple"]
        for c in (10, 1000)
    ]


def test_every_tool_is_installed_in_the_seeds_versions():
    # oha 1.8.0 is installed by `./scripts/lab seeds` only; CI runs NURL's argv with the lab's oha.
    assert tools.missing(nurl_oha=False) == []
    assert tools.versions()["autocannon"] == "autocannon 8.0.0"


def _run(tool, argv, percentiles=("p50", "p99")):
    res = tools.run(tool, argv, cpus=None, limit=30)
    assert res.requests > 0 and res.rps > 0
    assert not any(res.errors.values()), res.errors
    assert all(res.latency_us[p] is not None for p in percentiles), res.latency_us
    return res


def test_oha_ab_bombardier_run_and_parse(stand_in):
    # NURL's argv with the lab's oha 1.16 in place of 1.8.0 (see missing()): the same JSON, which
    # 1.16 asks for with `--output-format json` where 1.8 took `-j`.
    argv = tools.oha_argv(stand_in + "/", connections=2, seconds=1)
    lab_oha = shutil.which("oha")
    assert lab_oha, "oha: scripts/setup oha installs it"
    flags = [f for a in argv[1:] for f in (["--output-format", "json"] if a == "-j" else [a])]
    r = _run("oha", [lab_oha, *flags])
    assert r.status_counts == {"200": r.requests}
    r = _run("ab", tools.ab_argv(stand_in + "/", requests=200, concurrency=2))
    assert r.requests == 200
    _run("bombardier", tools.bombardier_argv(stand_in + "/simple", connections=2, seconds=1))


def test_wrk_pipelined_with_kourier_script_counts_every_answer(stand_in):
    before = _Handler.count
    argv = tools.wrk_argv(
        stand_in + "/hello",
        connections=2,
        threads=1,
        seconds=1,
        latency=True,
        script=tools.PIPELINE_LUA,
        script_args=("16",),
    )
    # Pipelined, wrk may print a percentile as 0.00us (its histogram overflowed, as in Kourier's
    # published run): the parser keeps that as unknown, so only the mean is required here.
    r = _run("wrk", argv, percentiles=("mean",))
    served = _Handler.count - before
    # wrk counts answers it read; at most the last round (2 x 16) can be in flight at the end.
    assert served - 2 * 16 <= r.requests <= served


def test_autocannon_runs_nextrush_mixed_requests_and_parses(stand_in):
    argv = tools.autocannon_argv(
        stand_in,
        connections=2,
        pipelining=1,
        seconds=1,
        requests=experiments.NEXTRUSH_REQUESTS["mixed"],
    )
    r = _run("autocannon", argv)
    assert r.duration_s >= 0.9


def test_ratio_flags_and_placement_through_the_shared_row():
    ours_t = {
        "hyper": {50: {"rps": 300.0}},
        "node": {50: {"rps": 100.0}},
        "P": {50: {"rps": 400.0}},
    }
    theirs_t = {
        "Rust": {50: {"rps": 600.0}},
        "Node": {50: {"rps": 100.0}},
        "X": {50: {"rps": 50.0}},
    }
    mapping = {"hyper": "Rust", "node": "Node"}
    [(row, col, seed, here, diff, flag)] = figures.ratio_rows(ours_t, theirs_t, mapping, "Node")
    assert (row, col, seed, here, flag) == ("Rust", 50, 6.0, 3.0, True)
    assert diff == pytest.approx(-0.5)
    theirs_t["Rust"][50]["rps"] = 330.0  # 3.3 vs 3.0: within 20%
    assert not figures.ratio_rows(ours_t, theirs_t, mapping, "Node")[0][5]
    # P is 4x Node here; X was half of Node in the seed: P ~ 8x X.
    assert figures.placements(ours_t, theirs_t, mapping, "Node", ["X"]) == [("P", "X", 50, 8.0)]


def test_report_has_the_seed_layout_published_rows_ratios_and_checks():
    run_ = {"rps": 30000.0, "latency_us": {"p50": 100.0, "p99": 900.0}, "errors": {}}
    lane = lambda row, seed_row, rps, check="": {  # noqa: E731
        "peer": "hyper" if "hyper" in row else row,
        "row": row,
        "seed_row": seed_row,
        "check": check,
        "cells": [{"table": "oha", "column": 200, "argv": ["oha"], "runs": [run_ | {"rps": rps}]}],
    }
    res = {
        "command": "./scripts/lab seeds --only nurl",
        "experiments": {
            "nurl": {
                "lanes": [
                    lane("hyper", "Rust", 60000.0),
                    lane("node", "Node", 15000.0),
                    lane("peregrine", None, 90000.0),
                    lane("hyper 1", None, 30000.0, check="one worker"),
                ]
            }
        },
    }
    text = tables.render(res)
    assert "| Server | C = 1 | C = 10 | C = 50 | C = 200 |" in text
    assert "| NURL (seed, not re-run) | 14 451 | 68 960 | 60 897 | 59 044 |" in text
    assert "| peregrine (here) | – | – | – | 90 000 |" in text
    # Rust/Node: 7.37 in the seed, 4.00 here: flagged, with the reason under it.
    assert "| Rust | 200 | 7.37 | 4.00 | -46% **⚠ > 20%** |" in text
    assert "core count" in text
    assert "| hyper 1 | one worker | oha c=200 | 30 000 | 60 000 | 0.50 |" in text
    # 6 x Node here, Node/NURL 15 555 / 59 044 there: 1.58 x NURL.
    assert "| peregrine | NURL | 200 | 1.58 |" in text


SERVED = [
    ("node-http", "nurl"),
    ("node-http", "rust-http"),
    ("fastify", "nextrush"),
    ("fastify", "lemire"),
    ("express", "nextrush"),
    ("hono", "nextrush"),
    ("koa", "nextrush"),
    ("bun", "lemire"),
    ("bun-fastify", "lemire"),
    ("go", "rust-http"),
    ("go", "kourier"),
    ("go", "lemire"),
]


@pytest.fixture(scope="module")
def seed_peers(tmp_path_factory):
    """The seeds' peers; the Go one built into a temporary folder (the Node ones use the lab's
    Node peers' packages, which ./scripts/test builds)."""
    peers = {p.name: p for p in load_peers(run.PEERS_TOML)}
    out = tmp_path_factory.mktemp("go") / "seeds"
    go = peers["go"]
    cmd = [a if a != "bin/seeds" else str(out) for a in go.build[0]]
    subprocess.run(cmd, cwd=go.dir, check=True, timeout=600)
    return peers, out


@pytest.mark.parametrize(("name", "seed"), SERVED)
def test_seed_servers_answer_their_seeds_paths(seed_peers, tmp_path, name, seed):
    peers, go_bin = seed_peers
    peer = peers[name]
    port = run._port()
    cmd = [str(go_bin)] if name == "go" else list(peer.run)
    env = dict(os.environ) | peer.env | {"ADDR": f"127.0.0.1:{port}", "SEED": seed}
    srv = procs.start_server(cmd, peer.dir, env, None, tmp_path / "log")
    try:
        procs.wait_for_port("127.0.0.1", port, srv.proc, 30)
        checks = list(run.EXPECT[seed])
        if (name, seed) == ("fastify", "nextrush"):
            checks.append(run.EXPECT_MIDDLEWARE)
        assert run.answers(f"http://127.0.0.1:{port}", checks) == []
        # The paths of another seed are not served (Lemire's Bun code answers them with 200).
        other = ("GET", "/nowhere", None, 200 if name == "bun" else 404, "")
        assert run.answers(f"http://127.0.0.1:{port}", [other]) == []
    finally:
        srv.stop()


def test_an_unknown_seed_stops_a_server_with_a_clear_message(seed_peers, tmp_path):
    peers, _ = seed_peers
    peer = peers["fastify"]
    env = dict(os.environ) | {"ADDR": "127.0.0.1:1", "SEED": "kourier"}
    p = subprocess.run(
        list(peer.run), cwd=peer.dir, env=env, capture_output=True, text=True, timeout=30
    )
    assert p.returncode != 0 and 'SEED="kourier": this server serves nextrush, lemire' in p.stderr


def test_unknown_experiment_is_an_error_listing_the_known_ones(tmp_path):
    with pytest.raises(run.SeedsError, match="known: nurl, rust-http, kourier, nextrush, lemire"):
        run.run(["nope"], tmp_path, True, "test")


def test_committed_seeds_results_follow_their_schema_and_a_broken_one_does_not():
    path = config.LAB_DIR / "results" / "seeds" / "results.json"
    res = json.loads(path.read_text())
    assert schema.schema_name(res) == "seeds-v1.json"
    assert schema.problems(res) == []
    res["experiments"]["nurl"]["lanes"][0]["cells"][0]["runs"][0]["rps"] = -1.0
    res["experiments"]["elsewhere"] = {"lanes": []}
    found = schema.problems(res)
    assert any("-1.0 is less than the minimum" in p for p in found), found
    assert any("elsewhere" in p for p in found), found
