"""The HTTP/3 lane (h3_lane.py, h3_report.py, lab/peers/h3.toml): registry and plan, the
`needs_feature` check that keeps Peregrine out until it has `http3`, UDP readiness, parity and
idle memory over HTTP/3 with h3client against quic-go's real server (and a wrong answer caught),
h3client's HTTP/3 load, the whole lane for one server, and the report."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from peregrine_lab import (
    cli,
    config,
    figures,
    h3_impair,
    h3_lane,
    h3_report,
    procs,
    schema,
    tls_checks,
    tls_lanes,
)
from peregrine_lab.peers import Peer, load_contract, load_peers

CONTRACT = load_contract()
PLAINTEXT = CONTRACT.by_name("plaintext")
QUICGO = h3_lane.H3_DIR / "bin" / "quicgo-h3"


def _peers() -> dict[str, Peer]:
    return {p.name: p for p in load_peers(h3_lane.H3_TOML)}


# ------------------------------------------------------------------ registry, plan, availability


def test_registry_lists_the_http3_servers_with_their_protocols():
    peers = _peers()
    assert set(peers) == {"peregrine-h3", "quic-go", "caddy", "h3-rust"}
    known = tuple(h3_lane.MODE_PROTOCOL.values())
    for p in peers.values():
        assert "plaintext" in p.scenarios and p.dir.is_dir(), p.name
        assert "h3" in tls_lanes.protocols_of(p, known), p.name
    assert tls_lanes.protocols_of(peers["h3-rust"], known) == ["h3"]
    # Peregrine's entry is the protocols lane's framework binary plus the feature, same flag.
    framework = {p.name: p for p in load_peers(tls_lanes.PROTOCOLS_TOML)}["peregrine-framework-tls"]
    assert peers["peregrine-h3"].run == framework.run
    assert "tls,http2,ws,http3" in " ".join(peers["peregrine-h3"].build[0])
    assert (h3_lane.H3_DIR / "caddy.sh").stat().st_mode & 0o111


def test_plan_puts_an_h3_only_server_in_the_h3_lane_only():
    cells = {(p.name, m) for p, m in tls_lanes.plan(list(_peers().values()), h3_lane.MODE_PROTOCOL)}
    assert ("h3-rust", "h3") in cells
    assert ("h3-rust", "h2") not in cells and ("h3-rust", "https") not in cells
    assert {("quic-go", m) for m in ("h3", "h2", "https")} <= cells
    # The protocols lanes' plan is unchanged by the new protocol.
    assert all(m in tls_lanes.MODES for _, m in tls_lanes.plan(list(_peers().values())))


def _peer_with_manifest(tmp_path: Path, manifest: str) -> Peer:
    (tmp_path / "Cargo.toml").write_text(manifest)
    peer = _peers()["peregrine-h3"]
    return replace(
        peer, dir=tmp_path, extra={**peer.extra, "needs_feature": ["Cargo.toml", "http3"]}
    )


def test_a_crate_without_the_feature_is_unavailable_with_the_reason(tmp_path):
    head = '[package]\nname = "x"\n\n[features]\n'
    why = h3_lane.unavailable(_peer_with_manifest(tmp_path, head + 'tls = []\nhttp2 = ["tls"]'))
    assert why == "not built with http3: Cargo.toml has no `http3` feature"
    assert h3_lane.unavailable(_peer_with_manifest(tmp_path, head + "http3 = []\ntls = []")) is None
    assert h3_lane.unavailable(_peers()["quic-go"]) is None
    assert "unreadable" in h3_lane.unavailable(_peer_with_manifest(tmp_path, "[features\n"))


def test_udp_bound_sees_a_bound_udp_port_and_not_a_closed_one():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    assert h3_lane.udp_bound(port)
    s.close()
    assert not h3_lane.udp_bound(port)


def test_cli_accepts_the_h3_lane():
    args = cli.parser().parse_args(["h3", "--runs", "2"])
    assert args.what == "h3" and args.runs == 2


def test_load_command_runs_the_h2_lanes_streams_over_http3():
    cmd = h3_lane.load_command("https://127.0.0.1:1/plaintext", 2.4)
    assert cmd == [str(h3_lane.H3CLIENT), "load", "https://127.0.0.1:1/plaintext", "50", "10", "2"]
    assert h3_lane.STREAMS == tls_lanes.H2_STREAMS  # the same streams in flight as h2load -m
    rate = h3_lane.load_command("https://127.0.0.1:1/plaintext", 2.0, "h3-rate")
    assert rate[1:] == ["rate", "https://127.0.0.1:1/plaintext", "50", "5000", "2"]


def test_the_quiet_profile_fits_its_slot_with_checked_run_counts():
    # The lead's quiet run has 12 minutes; the verdicts' t intervals are checked by simulation
    # at these run counts only (test_stats_coverage.RUN_COUNTS).
    peers = list(_peers().values())
    parts = h3_lane.estimate(peers, h3_lane.PROFILE.runs, h3_lane.PROFILE.duration)
    assert sum(parts.values()) <= 12 * 60 and set(parts) == {"alone", "cells", "loss"}
    assert h3_lane.PROFILE.runs in (7, 10, 20, 40) and h3_impair.RUNS in (3, 5, 7)
    # Each part grows with what it runs.
    more = h3_lane.estimate(peers, h3_lane.PROFILE.runs + 3, h3_lane.PROFILE.duration)
    assert more["cells"] > parts["cells"] and more["alone"] == parts["alone"]
    fewer = h3_lane.estimate(peers[:1], 1, 1.0)
    assert fewer["loss"] == len(h3_impair.SETTINGS) * (1 + h3_lane.RELAY_RUN_S)


def test_dry_run_prints_the_plan_and_its_time_and_measures_nothing(capsys, tmp_path):
    assert cli.main(["h3", "--dry-run", "--seed", "7", "--out", str(tmp_path / "never")]) == 0
    out = capsys.readouterr().out
    assert "dry run of profile h3 (seed 7): nothing is built or measured" in out
    assert "h3-rust        lanes h3, h3-rate" in out
    assert "14 cell(s) x 7 run(s) of 2 s" in out and "5 setting(s) x 3 run(s)" in out
    assert "estimated time " in out and " min (" in out
    assert not (tmp_path / "never").exists()
    assert cli.main(["protocols", "--dry-run"]) == 2  # other lanes have no plan to print


def test_netem_check_answers_and_leaves_no_namespace():
    got = h3_lane.netem_check("peregrine-lab-netem-test")
    assert isinstance(got["available"], bool)
    assert got["available"] or got["reason"]
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert "peregrine-lab-netem-test" not in names


# ------------------------------------------------------------------ against quic-go's server


@pytest.fixture(scope="module")
def cert(tmp_path_factory):
    return tls_checks.make_certificate(tmp_path_factory.mktemp("h3cert"))


@pytest.fixture(scope="module")
def quicgo(cert, tmp_path_factory):
    """quic-go's server (lab/peers/h3, built by `./scripts/lab build --peers lab/peers/h3.toml`)
    and the lab's h3client beside it."""
    assert QUICGO.exists() and h3_lane.H3CLIENT.exists(), "./scripts/lab build --peers ... h3.toml"
    port = tls_lanes._free_port(29443)
    env = {**os.environ, "ADDR": f"127.0.0.1:{port}", "WORKERS": "1"}
    env.update(TLS_CERT=str(cert.cert), TLS_KEY=str(cert.key))
    log = tmp_path_factory.mktemp("h3log") / "quicgo.log"
    server = procs.start_server([str(QUICGO)], h3_lane.H3_DIR, env, None, log)
    peer = _peers()["quic-go"]
    h3_lane.wait("127.0.0.1", port, peer, server)
    yield server, port
    server.stop()


def test_parity_over_http3_passes_for_a_correct_server(quicgo, cert):
    _, port = quicgo
    negotiated, pr = h3_lane.check("127.0.0.1", port, "h3", PLAINTEXT, CONTRACT, cert, {})
    assert pr.ok, pr.problems
    assert negotiated["alpn"] == "h3" and negotiated["protocol"] == "TLS 1.3"
    assert negotiated["key_exchange"] == "X25519"  # the TCP lanes' group (tls_checks.GROUP)
    assert ("Server", "quic-go") in pr.headers


def test_parity_over_http3_catches_a_wrong_answer(quicgo, cert):
    _, port = quicgo
    wrong = replace(PLAINTEXT, path="/nothing-here")
    _, pr = h3_lane.check_h3("127.0.0.1", port, wrong, CONTRACT, cert)
    assert not pr.ok
    assert any("status 404" in p for p in pr.problems)
    assert any(p.startswith("second request:") for p in pr.problems)


def test_parity_over_http3_says_when_nothing_answers(cert):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))  # bound, never answers: the client gives up
        port = s.getsockname()[1]
        _, pr = h3_lane.check_h3("127.0.0.1", port, PLAINTEXT, CONTRACT, cert)
    assert not pr.ok and pr.problems[0].startswith("no valid HTTP/3 response")


def test_idle_memory_over_http3_holds_every_connection(quicgo, cert):
    server, port = quicgo
    im = h3_lane.idle("127.0.0.1", port, server.pid, PLAINTEXT, 40, "h3", cert)
    assert im.error is None and im.opened == 40
    assert im.rss_after >= im.rss_before > 0


def test_h3client_loads_over_http3(quicgo, cert):
    _, port = quicgo
    opts = tls_lanes.Options(out_dir=Path("."), split=config.cpu_split(None, None))
    url = f"https://127.0.0.1:{port}/plaintext"
    res, negotiated = h3_lane.load(opts, "h3", url, PLAINTEXT, 1.0, cert)
    assert res.requests > 0 and res.status_counts == {"200": res.requests}
    assert res.bytes == 13 * res.requests and res.errors["other"] == 0
    lat = res.latency_us
    assert 0 < lat["min"] <= lat["p50"] <= lat["p99"] <= lat["max"] and negotiated == {"alpn": "h3"}
    assert res.client_cpu_s > 0
    # A wrong path is counted as 404s (the lane's status check refuses the run), not hidden.
    res404, _ = h3_lane.load(opts, "h3", url + "-not", PLAINTEXT, 1.0, cert)
    assert set(res404.status_counts) == {"404"} and res404.errors["status"] == res404.requests


def _ci_rates(monkeypatch) -> None:
    """Lower offered rates than the quiet profile's, so a CI machine busy with other steps keeps
    up (a run that falls behind fails by design: h3_lane.unsent)."""
    monkeypatch.setitem(h3_lane.RATES, "h3-rate", 1000)
    monkeypatch.setitem(h3_lane.RATES, h3_impair.MODE, 500)
    monkeypatch.setattr(h3_impair, "RATE", 500)


def test_the_offered_rates_are_the_documented_ones():
    assert h3_lane.RATES == {"h3-rate": 5000, "h3-loss": 2000}
    assert h3_lane.OFFERED_RPS == 5000 and h3_impair.RATE == 2000


def test_h3client_offers_a_fixed_rate_and_every_request_is_sent_and_answered(
    quicgo, cert, monkeypatch
):
    _ci_rates(monkeypatch)
    _, port = quicgo
    opts = tls_lanes.Options(out_dir=Path("."), split=config.cpu_split(None, None))
    url = f"https://127.0.0.1:{port}/plaintext"
    res, _ = h3_lane.load(opts, "h3-rate", url, PLAINTEXT, 1.0, cert)
    # 50 connections x 20 scheduled requests in the second: all sent, all answered.
    assert res.requests == 1000 and res.status_counts == {"200": res.requests}
    assert res.rps == 1000 and 0 < res.latency_us["p50"] <= res.latency_us["p99"]


def test_a_rate_the_server_cannot_follow_is_not_passed_off_as_the_offered_load(quicgo, cert):
    # 400 ms of round trip through the relay: one connection at 1000 requests/s has its 100
    # streams open after 0.1 s, so the later requests of the second cannot be sent.
    _, port = quicgo
    slow = h3_impair.Setting("slow", delay_ms=200)
    relay = h3_impair.Relay(h3_lane.H3CLIENT, port, slow, 1, f"0-{os.cpu_count() - 1}")
    try:
        url = f"https://127.0.0.1:{relay.port}/plaintext"
        p = subprocess.run(
            [str(h3_lane.H3CLIENT), "rate", url, "1", "1000", "1"],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "H3_CA": str(cert.cert)},
            stdin=subprocess.DEVNULL,
        )
    finally:
        relay.stop()
    assert p.returncode == 0, p.stderr
    skipped = json.loads(p.stdout)["skipped"]
    assert 0 < skipped < 1000
    assert h3_lane.unsent(p.stdout) == (
        f"h3client rate: {skipped} request(s) not sent, the server was behind the offered "
        "1000 req/s"
    )
    assert h3_lane.unsent('{"skipped": 0, "offered_rps": 5000}') is None


def test_the_lane_measures_quic_go_over_three_protocols_and_reports(tmp_path, monkeypatch):
    _ci_rates(monkeypatch)
    # The real quic-go entry, and one whose crate lacks the feature it needs (as Peregrine's
    # before `http3`): that one is recorded as unavailable, never built, started or measured.
    registry = tmp_path / "h3.toml"
    entries = h3_lane.H3_TOML.read_text().split("[[peer]]")
    quicgo_entry = next(e for e in entries if 'name = "quic-go"' in e)
    registry.write_text(
        "[[peer]]" + quicgo_entry.replace('dir = "h3"', f'dir = "{h3_lane.H3_DIR}"') + "\n"
        "[[peer]]\n"
        'name = "no-http3"\nlabel = "x"\nlanguage = "Rust"\nkind = "server"\n'
        f'dir = "{h3_lane.H3_DIR / "rust"}"\nrequires = []\nbuild = [["false"]]\n'
        'run = ["false"]\nenv = { }\nversion = ["false"]\nscenarios = ["plaintext"]\n'
        'protocols = ["h3"]\nneeds_feature = ["Cargo.toml", "http3"]\n'
    )
    opts = tls_lanes.Options(
        out_dir=tmp_path / "out",
        split=config.cpu_split(None, None),
        runs=1,
        duration=1.0,
        skip_build=True,
        peers_file=registry,
        idle_connections=20,
        seed=4242,
    )
    res = h3_lane.run(opts)
    assert res["profile"] == "h3" and res["complete"]
    saved = json.loads((tmp_path / "out" / "results.json").read_text())
    # What the lead commits must pass the committed results' schema check (test_tables), the
    # unavailable server and the loss phase included.
    assert schema.check_file(tmp_path / "out" / "results.json") == []
    assert saved["netem"] == res["netem"]
    entry = next(s for s in res["servers"] if s["name"] == "quic-go")
    assert all(entry["parity"][p]["ok"] for p in ("h3", "h2", "https")), entry["parity"]
    assert entry["idle_memory"]["h3"]["opened"] == 20
    cells = {c["mode"]: c for c in res["cells"] if c["server"] == "quic-go"}
    assert set(cells) == {"h3", "h3-rate", "h2", "https"}
    assert all(c["status"] == "ok" and c["median"]["cpu_us_per_req"] > 0 for c in cells.values())
    absent = next(s for s in res["servers"] if s["name"] == "no-http3")
    assert absent["status"] == "unavailable"
    assert absent["message"] == "not built with http3: Cargo.toml has no `http3` feature"
    assert [c["status"] for c in res["cells"] if c["server"] == "no-http3"] == ["unavailable"] * 2
    # The loss phase: every setting through the relay, on the cells' process, after them.
    imp = res["impairment"]
    assert [c["setting"] for c in imp["cells"]] == ["direct", "0%", "1%", "3%", "reorder"]
    assert {c["server"] for c in imp["cells"]} == {"quic-go"} and imp["runs"] == 1
    by = {c["setting"]: c["runs"][0] for c in imp["cells"]}
    assert all(not r["problems"] and r["requests"] == 500 for r in by.values())
    assert imp["rate"] == 500 and cells["h3-rate"]["median"]["rps"] == 1000
    assert by["direct"]["relay"] is None
    assert by["0%"]["relay"]["dropped"] == 0 and by["3%"]["relay"]["dropped"] > 0
    assert by["reorder"]["relay"]["held"] > 0 and by["3%"]["relay"]["flows"] == 50
    # The relay's draws come from the run's seed (given here, as `--seed` does), round 1.
    assert res["settings"]["order_seed"] == 4242 and {r["seed"] for r in by.values()} == {4242}
    path, made = h3_report.write(res, tmp_path / "out")
    text = path.read_text()
    assert "## Lane `h3`" in text and "## Lane `h3-rate`" in text and "quic-go" in text
    assert [m.name for m in made] == ["cpu_per_request.svg", "latency_under_loss.svg"]
    assert all(m.exists() for m in made)
    assert "## Loss and reordering (userspace relay, not tc netem)" in text
    block = figures.KEYS["h3"](res)
    assert block[0] == (
        "Peregrine has no HTTP/3 figure at the fixed rate: not in this run."
    )  # fmt: skip
    assert "p99 ms, direct | p99 ms, 0% | p99 ms, 1% | p99 ms, 3% | p99 ms, reorder |" in block[2]
    (row,) = [ln for ln in block if ln.startswith("| Go quic-go")]
    assert len(row.split(" | ")) == 1 + 4 + 2 + 5 and " n/a " not in row
    # A lane whose client CPUs were saturated says its req/s is the client's ceiling.
    for c in res["cells"]:
        for r in c["runs"]:
            r["client_cpus_busy_share"] = 1.0 if c["mode"] == "h3" else 0.5
    text = h3_report.render(res)
    assert text.count("req/s here is the client's ceiling") == 1
    assert text.count("% busy (median of the runs).") == 3  # every other lane says it too


# ------------------------------------------------------------------ report


def _cell(server: str, mode: str, cpus: list[float]) -> dict:
    runs = [{"cpu_us_per_req": c, "rps": 1000.0, "p99_us": 900.0, "round": i + 1}
            for i, c in enumerate(cpus)]  # fmt: skip
    return tls_lanes.cell_record(replace(_peers()[server]), mode, "ok", runs=runs)


def test_target_compares_peregrine_with_the_best_http3_peer():
    res = {
        "servers": [],
        "cells": [
            _cell("peregrine-h3", "h3", [10.0, 10.2, 9.9, 10.1, 10.0, 10.1, 9.8]),
            _cell("quic-go", "h3", [20.0, 20.5, 19.8, 20.1, 20.2, 19.9, 20.0]),
            _cell("h3-rust", "h3", [12.0, 12.3, 11.9, 12.1, 12.2, 11.8, 12.0]),
            _cell("quic-go", "h2", [1.0] * 7),  # another lane: not a rival for the target
        ],
    }
    t = h3_report.target(res, "h3")
    assert t["against"] == "h3-rust" and t["met"] is True and t["ratio"] < 1
    assert t["method"] == "paired"
    res["cells"][0] = _cell("peregrine-h3", "h3", [15.0, 15.2, 14.9, 15.1, 15.0, 15.1, 14.8])
    assert h3_report.target(res, "h3")["met"] is False
    # At the fixed rate (the lane the target is judged in) it is another comparison.
    res["cells"] += [
        _cell("peregrine-h3", "h3-rate", [11.0, 11.1, 10.9, 11.0, 11.2, 10.8, 11.0]),
        _cell("quic-go", "h3-rate", [25.0, 25.2, 24.9, 25.1, 25.0, 25.1, 24.8]),
    ]
    t = h3_report.target(res)
    assert t["mode"] == "h3-rate" and t["against"] == "quic-go" and t["met"] is True
    res["settings"] = {"modes": h3_lane.MODES}
    rows = [ln for ln in h3_report.render(res).splitlines() if ln.startswith("| `h3")]
    assert [r.split(" | ")[0] for r in rows] == ["| `h3-rate`", "| `h3`"]
    assert rows[0].endswith("| paired | **met** |") and rows[1].endswith("| **not met** |")
    assert h3_report.verdict({"ci": [0.95, 1.1], "met": False}).endswith("includes 1)")
    assert h3_report.verdict({"ci": None, "met": None}) == "no interval"
    # The docs' figures block (key h3) says the same verdict.
    head = figures.KEYS["h3"](res)[0]
    assert head.startswith("Target, HTTP/3 CPU per request at equal offered load (`h3-rate`)")
    assert "(quic-go): Peregrine / theirs = 0.4" in head and head.endswith(": **met**.")
    with pytest.raises(figures.FiguresError, match="no `h3-rate` cells"):
        figures.KEYS["h3"]({"cells": [_cell("quic-go", "h2", [1.0] * 7)]})


def test_report_says_why_peregrine_is_not_in_the_run():
    res = {
        "servers": [
            {
                "name": "peregrine-h3",
                "status": "unavailable",
                "protocols": ["h3"],
                "message": "not built with http3: Cargo.toml has no `http3` feature",
            },
        ],  # fmt: skip
        "cells": [],
        "settings": {"modes": h3_lane.MODES},
        "netem": {"available": False, "reason": "tc: Specified qdisc kind is unknown"},
    }
    text = h3_report.render(res)
    assert "Peregrine has no HTTP/3 figure in lane `h3-rate`: not built with http3" in text
    # Built, but it does not answer over HTTP/3: parity says why.
    res["servers"][0].update(
        status="ok", message="", parity={"h3": {"ok": False, "problems": ["no valid HTTP/3"]}}
    )
    assert h3_report.target(res)["why_not"] == "HTTP/3 parity failed: no valid HTTP/3"
    assert "Not measured in this run (tc netem: tc: Specified qdisc kind is unknown)." in text


def test_the_client_note_says_what_a_busy_client_means_in_each_lane():
    assert h3_report._client_note("h3", 0.99).endswith("req/s here is the client's ceiling, "
                                                       "not the server's; CPU per request is "
                                                       "the server's own.")  # fmt: skip
    offered = h3_report._client_note("h3-rate", 0.99)
    assert "the rate is offered" in offered and "ceiling" not in offered
    assert h3_report._client_note("h3-rate", 0.5) == (
        "The load generator's CPUs were 50% busy (median of the runs)."
    )


def test_the_tools_name_the_quic_go_h3client_is_built_with():
    assert (
        h3_lane.quic_go_version("require github.com/quic-go/quic-go v0.1.0\n") == "quic-go v0.1.0"
    )
    block = "require (\n\tgithub.com/quic-go/qpack v0.6.0\n\tgithub.com/quic-go/quic-go v0.2.0\n)"
    assert h3_lane.quic_go_version(block) == "quic-go v0.2.0"
    assert h3_lane.quic_go_version("module x\n") is None
    assert h3_lane.tool_versions()["h3client"].startswith("quic-go v0.")
