"""The protocols lanes (tls_lanes.py, tls_checks.py, tls_report.py): registry and plan, the run's
certificate and client setting, parity over TLS against a correct and a faulty stand-in, idle
memory over TLS, the HTTP/2 request bytes, s_client / curl parsing, targets and the report."""

from __future__ import annotations

import os
import ssl
import threading

import pytest

import contract_server
from peregrine_lab import cli, config, parity, tls_checks, tls_lanes, tls_report
from peregrine_lab.peers import load_contract, load_peers

CONTRACT = load_contract()
PLAINTEXT = CONTRACT.by_name("plaintext")


# ------------------------------------------------------------------ registry, plan, settings


def test_registry_lists_every_community_server_with_its_protocols():
    peers = {p.name: p for p in load_peers(tls_lanes.PROTOCOLS_TOML)}
    assert set(peers) == {
        "peregrine-tls",
        "peregrine-framework-tls",
        "nginx-tls",
        "axum-tls",
        "actix-tls",
        "go-nethttp-tls",
        "node-https",
        "node-http2",
    }
    for p in peers.values():
        assert "plaintext" in p.scenarios
        assert tls_lanes.protocols_of(p), p.name
        assert p.dir.is_dir(), p.dir
    assert tls_lanes.protocols_of(peers["node-https"]) == ["https"]
    assert tls_lanes.protocols_of(peers["node-http2"]) == ["h2"]
    assert peers["nginx-tls"].env["NGINX_CONF"] == "nginx-tls.conf.in"
    assert (config.PEERS_DIR / "nginx" / "nginx-tls.conf.in").is_file()
    assert "tls,http2" in " ".join(peers["peregrine-tls"].build[0])
    # The framework's entry is the plaintext `peregrine` peer's binary, built the same way; TLS
    # is its explicit `--tls` (the variables every server gets are ignored without it).
    plain = {p.name: p for p in load_peers(config.PEERS_DIR / "peers.toml")}["peregrine"]
    framework = peers["peregrine-framework-tls"]
    assert framework.build == plain.build and framework.run == plain.run + ["--tls"]
    assert "--tls" not in plain.run
    assert "tls,http2,ws" in " ".join(framework.build[0])


def test_plan_puts_each_server_in_the_lanes_of_its_protocols():
    peers = load_peers(tls_lanes.PROTOCOLS_TOML)
    cells = {(p.name, mode) for p, mode in tls_lanes.plan(peers)}
    assert ("node-https", "https") in cells and ("node-https", "handshake") in cells
    assert ("node-https", "h2") not in cells
    assert ("node-http2", "h2") in cells and ("node-http2", "https") not in cells
    full = ("peregrine-tls", "peregrine-framework-tls", "nginx-tls", "axum-tls", "actix-tls")
    for name in full + ("go-nethttp-tls",):
        assert {(name, m) for m in tls_lanes.MODES} <= cells
    assert len(cells) == 6 * 3 + 2 + 1


def test_profile_is_listed_and_parsed_by_the_cli():
    args = cli.parser().parse_args(["protocols", "--servers", "nginx-tls", "--runs", "2"])
    assert args.what == "protocols" and args.runs == 2
    assert "protocols:" in cli.parser().format_help()
    p = tls_lanes.PROFILE
    assert [ln.mode for ln in p.lanes] == ["https", "handshake", "h2"]
    # ~10-15 min of measuring: cells x runs x (duration + overhead) stays well under that.
    cells = len(tls_lanes.plan(load_peers(tls_lanes.PROTOCOLS_TOML)))
    assert cells * p.runs * (p.duration + 0.6) < 12 * 60


def test_server_env_has_the_certificate_and_not_the_clients_setting(tmp_path, monkeypatch):
    cert = tls_checks.make_certificate(tmp_path)
    monkeypatch.setenv("OPENSSL_CONF", str(cert.client_conf))
    peer = next(p for p in load_peers(tls_lanes.PROTOCOLS_TOML) if p.name == "nginx-tls")
    env = tls_lanes._server_env(peer, 1234, 1, cert)
    assert "OPENSSL_CONF" not in env
    assert env["TLS_CERT"] == str(cert.cert) and env["TLS_KEY"] == str(cert.key)
    assert env["ADDR"] == "127.0.0.1:1234" and env["WORKERS"] == "1"
    assert tls_checks.client_env(cert, {})["OPENSSL_CONF"] == str(cert.client_conf)


def test_certificate_is_ecdsa_p256_and_the_client_setting_offers_one_of_each(tmp_path):
    cert = tls_checks.make_certificate(tmp_path)
    assert "prime256v1" in cert.description and "ecdsa-with-SHA256" in cert.description
    conf = cert.client_conf.read_text()
    assert "Ciphersuites = TLS_AES_128_GCM_SHA256" in conf
    assert "Groups = X25519" in conf and "MinProtocol = TLSv1.3" in conf


# ------------------------------------------------------------------ parity and memory over TLS


@pytest.fixture
def tls_server(tmp_path):
    """The lab's contract stand-in behind TLS (this run's kind of certificate); faults as asked."""
    cert = tls_checks.make_certificate(tmp_path)
    made = []

    def make(*faults):
        httpd = contract_server.serve("127.0.0.1:0", set(faults))
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert.cert, cert.key)
        ctx.set_alpn_protocols(["http/1.1"])
        httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
        t = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05})
        t.daemon = True
        t.start()
        made.append(httpd)
        return httpd.server_address[1]

    yield make
    for h in made:
        h.shutdown()
        h.server_close()


def test_https_parity_passes_a_correct_server(tls_server):
    port = tls_server()
    res = tls_checks.check_https("127.0.0.1", port, PLAINTEXT, CONTRACT.required_headers)
    assert res.ok, res.problems
    assert res.wire_bytes and res.wire_bytes > len(b"Hello, World!")


@pytest.mark.parametrize(
    "fault,needle",
    [
        ("body", "body"),
        ("status", "status 201"),
        ("missing_server", "missing header server"),
        ("close", "Connection: close"),
    ],
)
def test_https_parity_catches_a_faulty_server(tls_server, fault, needle):
    port = tls_server(fault)
    res = tls_checks.check_https("127.0.0.1", port, PLAINTEXT, CONTRACT.required_headers)
    assert not res.ok
    assert any(needle in p for p in res.problems), res.problems


def test_https_parity_reports_a_server_without_tls(contract_srv):
    res = tls_checks.check_https(
        "127.0.0.1", contract_srv.port, PLAINTEXT, CONTRACT.required_headers, timeout=2
    )
    assert not res.ok and "over TLS" in res.problems[0]


def test_idle_memory_over_tls_holds_every_connection(tls_server):
    port = tls_server()
    im = tls_checks.idle_memory("127.0.0.1", port, os.getpid(), PLAINTEXT, 20, "https")
    assert im.error is None and im.opened == 20


def test_h2_idle_memory_refuses_a_server_without_h2(tls_server):
    port = tls_server()
    im = tls_checks.idle_memory("127.0.0.1", port, os.getpid(), PLAINTEXT, 3, "h2")
    assert im.error and "not h2" in im.error


def test_h2_request_is_preface_settings_and_one_headers_frame():
    data = tls_checks.h2_request("/plaintext", "localhost:8443")
    assert data.startswith(tls_checks.H2_PREFACE)
    rest = data[len(tls_checks.H2_PREFACE) :]
    assert rest[:9] == b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"  # empty SETTINGS
    head, block = rest[9:18], rest[18:]
    assert int.from_bytes(head[:3], "big") == len(block)
    assert head[3] == 0x1 and head[4] == 0x5 and int.from_bytes(head[5:9], "big") == 1
    assert block[:2] == b"\x82\x87" and b"/plaintext" in block and b"localhost:8443" in block


# ------------------------------------------------------------------ parsing of the tools


def test_s_client_output_is_read():
    text = (
        "CONNECTED(00000003)\n---\nPeer signature type: ECDSA\nServer Temp Key: X25519, 253 bits\n"
        "---\nNew, TLSv1.3, Cipher is TLS_AES_128_GCM_SHA256\nALPN protocol: h2\n"
    )
    assert tls_checks.parse_s_client(text) == {
        "protocol": "TLSv1.3",
        "cipher": "TLS_AES_128_GCM_SHA256",
        "key_exchange": "X25519, 253 bits",
        "signature": "ECDSA",
        "alpn": "h2",
    }


def test_curl_output_is_read_and_an_http1_answer_is_told_apart():
    out = (
        b"HTTP/2 200 \r\nserver: x\r\ncontent-type: text/plain\r\ncontent-length: 13\r\n\r\n"
        b"Hello, World!\n2"
    )
    version, resp = tls_checks.parse_curl_output(out)
    assert version == "2" and resp.status == 200 and resp.body == b"Hello, World!"
    assert resp.first("server") == "x"
    version, _ = tls_checks.parse_curl_output(out[:-1] + b"1.1")
    assert version == "1.1"
    with pytest.raises(parity.ProtocolError):
        tls_checks.parse_curl_output(b"garbage\n2")


# ------------------------------------------------------------------ targets and report


def _cell(server, mode, cpu_values):
    runs = [
        {"cpu_us_per_req": v, "rps": 1000.0, "server_cpus_other_share": 0.1} for v in cpu_values
    ]
    peer = type("P", (), {"name": server})()
    return tls_lanes.cell_record(peer, mode, "ok", "", runs)


def _results(cells):
    return {
        "profile": "protocols",
        "servers": [
            {"name": n, "label": n, "protocols": ["https", "h2"]}
            for n in sorted({c["server"] for c in cells})
        ],  # fmt: skip
        "cells": cells,
        "settings": {"modes": tls_lanes.MODES, "idle_connections": 10},
    }


def test_a_target_is_met_only_by_the_interval_upper_bound():
    res = _results(
        [
            _cell("peregrine-tls", "https", [10, 10.2, 9.9, 10.1, 10.0]),
            _cell("nginx-tls", "https", [12, 12.1, 11.9, 12.2, 12.0]),
            _cell("peregrine-tls", "h2", [5.0, 5.1, 4.9, 5.0, 5.2]),
            _cell("axum-tls", "h2", [4.0, 4.1, 3.9, 4.0, 4.1]),
            _cell("actix-tls", "h2", [6.0, 6.1, 5.9, 6.0, 6.1]),
        ]
    )
    by_lane = {t["lane"]: t for t in tls_lanes.targets(res)}
    assert by_lane["https"]["met"] is True and by_lane["https"]["ci"][1] <= 1
    # The best Rust peer is the one with the lowest median CPU per request (axum here).
    assert by_lane["h2"]["against"] == "axum-tls"
    assert by_lane["h2"]["met"] is False
    text = tls_report.render(res)
    assert "**met**" in text and "**not met**" in text


def test_overlapping_intervals_do_not_meet_a_target():
    res = _results(
        [
            _cell("peregrine-tls", "https", [10, 13, 9, 12, 11]),
            _cell("nginx-tls", "https", [11, 12, 10, 13, 10.5]),
        ]
    )
    t = next(t for t in tls_lanes.targets(res) if t["lane"] == "https")
    assert t["ci"][0] < 1 < t["ci"][1] and t["met"] is False


def test_missing_cells_give_no_verdict_and_the_report_still_renders(tmp_path):
    res = _results([_cell("nginx-tls", "https", [12, 12.1])])
    assert all(t["met"] is None for t in tls_lanes.targets(res))
    path, charts = tls_report.write(res, tmp_path)
    assert "n/a" in path.read_text()
    assert all(p.exists() for p in charts)


def test_ratios_pair_runs_measured_in_the_same_rounds():
    # The machine's load swings ±40% between rounds, both servers alike; Peregrine costs 0.95×
    # nginx in every round. Paired by round the target is met; without rounds it is not.
    load = [1.0, 1.4, 0.6, 1.2, 0.8, 1.3, 0.7]
    mine = _cell("peregrine-tls", "https", [9.5 * x for x in load])
    theirs = _cell("nginx-tls", "https", [10.0 * x for x in load])
    for cell in (mine, theirs):
        for k, run in enumerate(cell["runs"]):
            run["round"] = k + 1
    res = _results([mine, theirs])
    t = next(t for t in tls_lanes.targets(res) if t["lane"] == "https")
    assert t["method"] == "paired" and t["ratio"] == pytest.approx(0.95)
    assert t["ci"] == pytest.approx([0.95, 0.95]) and t["met"] is True
    text = tls_report.render(res)
    assert "Methods used here: paired." in text and "0.95 [0.95, 0.95]" in text
    for cell in (mine, theirs):
        for run in cell["runs"]:
            del run["round"]
    t = next(t for t in tls_lanes.targets(res) if t["lane"] == "https")
    assert t["method"] == "independent" and t["met"] is False
    assert "Methods used here: independent." in tls_report.render(res)


def _with_other_share(share):
    return {"cells": [{"runs": [{"server_cpus_other_share": share}] * 3}]}


def test_report_says_shared_or_quiet_from_the_measured_other_work():
    shared = tls_report._quietness(_with_other_share(0.40))
    assert shared.startswith("**The machine was shared**") and "40.0%" in shared
    quiet = tls_report._quietness(_with_other_share(0.002))
    assert quiet.startswith("**The machine was quiet**") and "0.2%" in quiet
    unknown = tls_report._quietness({"cells": [{"runs": [{}]}]})
    assert unknown.startswith("**Other work on the machine was not measured")


def test_rounds_say_the_time_left(tmp_path, capsys):
    """Every long phase counts down: the protocols rounds say elapsed and left, like the runner."""
    opts = tls_lanes.Options(out_dir=tmp_path, split=config.cpu_split(), runs=3)
    res = {"cells": []}
    tls_lanes._measure(opts, [], {}, {}, res, None, None, seed=1)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("[round 1/3, 0:00 elapsed, time left not known yet] 0 cell(s)")
    assert lines[2].startswith("[round 3/3, 0:00 elapsed, ~0:00 left]"), lines
