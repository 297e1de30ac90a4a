"""Parity checking against a correct server and against servers that break the contract in one
specific way each: every such break must be detected, with a message that names it."""

import socket
import threading
import time

import pytest

from peregrine_lab import parity
from peregrine_lab.peers import load_contract

CONTRACT = load_contract()
REQ = CONTRACT.required_headers


def check(srv, name):
    return parity.check(srv.host, srv.port, CONTRACT.by_name(name), REQ, timeout=5)


def test_correct_server_passes_every_scenario(contract_srv):
    for scen in CONTRACT.scenarios:
        res = check(contract_srv, scen.name)
        assert res.ok, (scen.name, res.problems)
        assert res.status == scen.expect["status"]


@pytest.mark.parametrize(
    "fault, scenario, needle",
    [
        ("status", "plaintext", "status 201, expected 200"),
        ("body", "plaintext", "body 'Hello World', expected 'Hello, World!'"),
        ("content_type", "json", "Content-Type 'text/plain', expected application/json"),
        ("json", "param", "JSON body"),
        ("missing_date", "plaintext", "missing header date"),
        ("missing_server", "json", "missing header server"),
        ("close", "plaintext", "keep-alive"),
        ("cl_204", "empty", "header content-length present"),
        ("middleware", "middleware", "missing header x-mw-3"),
        ("large", "large_json", "JSON body"),
        ("chunked_no_cl", "json", "missing header content-length"),
        ("error_status", "error", "status 200, expected 500"),
    ],
)
def test_each_contract_break_is_detected(make_server, fault, scenario, needle):
    srv = make_server(fault)
    res = check(srv, scenario)
    assert not res.ok
    assert any(needle in p for p in res.problems), res.problems


def test_faults_do_not_leak_into_other_scenarios(make_server):
    # The "json" fault only changes /users/{id}: /json still passes on the same server, so a
    # mismatch is pinned to the cell it belongs to rather than to the whole server.
    srv = make_server("json")
    assert check(srv, "json").ok
    assert not check(srv, "param").ok


def test_chunked_body_is_decoded_before_comparison(make_server):
    srv = make_server("chunked_no_cl")
    res = check(srv, "plaintext")
    # The body itself is right once de-chunked; only the missing Content-Length is reported.
    assert res.problems == ["missing header content-length"]


def _one_shot_server(payload: bytes):
    """A raw server answering every connection with `payload` (read one request first)."""
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(8)
    stop = threading.Event()

    def loop():
        ls.settimeout(0.2)
        while not stop.is_set():
            try:
                c, _ = ls.accept()
            except OSError:
                continue
            with c:
                c.recv(65536)
                c.sendall(payload)

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    return ls, stop


@pytest.mark.parametrize(
    "payload, needle",
    [
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 13\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"Hello, World!",
            "both Transfer-Encoding and Content-Length",
        ),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 20\r\n\r\nHello, World!", "body bytes"),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 13\r\nContent-Length: 14\r\n\r\nHello, World!",
            "several Content-Length",
        ),
        (b"garbage\r\n\r\n", "bad status line"),
        (b"", "no valid response"),
    ],
)
def test_malformed_responses_are_reported(payload, needle):
    ls, stop = _one_shot_server(payload)
    try:
        res = parity.check(
            "127.0.0.1", ls.getsockname()[1], CONTRACT.by_name("plaintext"), REQ, timeout=2
        )
    finally:
        stop.set()
        ls.close()
    assert not res.ok
    assert any(needle in p for p in res.problems), res.problems


def test_request_bytes_carry_the_contract_body():
    post = CONTRACT.by_name("post_json")
    raw = parity.build_request(post, "127.0.0.1", 8080)
    head, body = raw.split(b"\r\n\r\n", 1)
    assert head.startswith(b"POST /users HTTP/1.1\r\n")
    assert b"Content-Type: application/json" in head
    assert f"Content-Length: {len(post.body)}".encode() in head
    assert body == post.body


@pytest.mark.parametrize("scenario", ["param", "query", "deep", "post_json"])
def test_a_constant_answer_is_caught_by_varied_requests(make_server, scenario):
    # The contract's own request gets the contract's answer, so only the varied rounds differ.
    srv = make_server("constant")
    res = check(srv, scenario)
    assert not res.ok
    assert all(p.startswith("varied request") for p in res.problems), res.problems
    assert res.variants == 2


def test_variants_differ_per_round_and_from_the_contract():
    for name in ("param", "query", "deep", "post_json"):
        scen = CONTRACT.by_name(name)
        vs = parity.variants(scen, 3, seed=1)
        keys = {(v.path, v.body) for v in vs} | {(scen.path, scen.body)}
        assert len(keys) == 4, name
        assert parity.variants(scen, 3, seed=1) == vs  # reproducible
    assert parity.variants(CONTRACT.by_name("plaintext"), 3) == []


def test_wire_bytes_are_the_whole_response(contract_srv):
    scen = CONTRACT.by_name("plaintext")
    res = check(contract_srv, "plaintext")
    raw = parity.exchange(contract_srv.host, contract_srv.port, scen, count=1)[0]
    # The same bytes read off a raw socket (the Date is fixed-length, so a second answer is
    # as long as the first).
    with socket.create_connection((contract_srv.host, contract_srv.port)) as s:
        s.sendall(parity.build_request(scen, contract_srv.host, contract_srv.port))
        s.settimeout(5)
        data = b""
        while not data.endswith(b"Hello, World!"):
            data += s.recv(4096)
    assert res.wire_bytes == raw.wire_bytes == len(data)


def test_bytes_per_response_check():
    assert parity.bytes_per_response_problem(150, 150 * 1000, 1000) is None
    assert parity.bytes_per_response_problem(150, 152 * 1000, 1000) is None  # within slack
    msg = parity.bytes_per_response_problem(150, 120 * 1000, 1000)
    assert msg and "120.0 bytes per response" in msg
    assert parity.bytes_per_response_problem(None, 1, 1) is None


def _dated(value):
    return parity.Response("HTTP/1.1", 200, "OK", [("Date", value)], b"")


def test_date_must_parse_and_move_on():
    import email.utils as eu

    now = time.time()
    a, b = eu.formatdate(now, usegmt=True), eu.formatdate(now + 1.2, usegmt=True)
    assert parity.check_dates(_dated(a), _dated(b), 1.2) == []
    assert any("did not change" in p for p in parity.check_dates(_dated(a), _dated(a), 1.2))
    assert any(
        "does not parse" in p for p in parity.check_dates(_dated("yesterday"), _dated(b), 1.2)
    )
    old = eu.formatdate(now - 3600, usegmt=True)
    assert any("away from" in p for p in parity.check_dates(_dated(old), _dated(b), 1.2))


def test_a_date_rendered_once_is_caught(make_server):
    srv = make_server("frozen_date")
    scen = CONTRACT.by_name("plaintext")
    first = parity.exchange(srv.host, srv.port, scen, count=1)[0]
    time.sleep(1.1)
    second = parity.exchange(srv.host, srv.port, scen, count=1)[0]
    assert any("did not change" in p for p in parity.check_dates(first, second, 1.1))
