"""The HTTP/3 lane's impairment relay (`h3client relay`, lab/peers/h3) against a UDP echo server:
loss at the asked rate and the same drops for the same seed, reordering by holding back, a fixed
delay, refusal of bad settings; the loss phase's report section and chart (h3_impair.py)."""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
from dataclasses import asdict

import pytest

from peregrine_lab import h3_impair, h3_lane, h3_report
from peregrine_lab.h3_impair import Relay, Setting

N = 1000
CPUS = f"0-{os.cpu_count() - 1}"
"""The relay's taskset list in these tests: every CPU."""


@pytest.fixture
def echo():
    """A UDP echo server on 127.0.0.1: every datagram back to its sender."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
    s.bind(("127.0.0.1", 0))
    s.settimeout(0.2)
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                data, addr = s.recvfrom(2048)
            except TimeoutError:
                continue
            s.sendto(data, addr)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield s.getsockname()[1]
    stop.set()
    t.join()
    s.close()


def _through(port: int, setting: Setting, seed: int, n: int = N) -> tuple[list[int], dict]:
    """Sends datagrams 0..n-1 through a relay to the echo server, 50 at a time with a pause to
    collect the answers (so no socket buffer overflows however busy the machine is, and every
    loss is the relay's); the sequence numbers that came back, in arrival order, and the
    relay's counts."""
    relay = Relay(h3_lane.H3CLIENT, port, setting, seed, CPUS)
    c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    got = []

    def collect(timeout: float) -> None:
        c.settimeout(timeout)
        while True:
            try:
                got.append(int.from_bytes(c.recv(2048)[:4], "big"))
            except TimeoutError:
                return

    try:
        for i in range(n):
            c.sendto(i.to_bytes(4, "big") + b"x" * 60, ("127.0.0.1", relay.port))
            if i % 50 == 49:
                collect(0.03)
        collect(1.0)
    finally:
        c.close()
        counts = relay.stop()
    return got, counts


def test_the_relay_forwards_everything_in_order_without_impairment(echo):
    got, counts = _through(echo, Setting("0%"), 1)
    assert got == list(range(N))
    assert counts == {"flows": 1, "forwarded": 2 * N, "dropped": 0, "held": 0}


def test_loss_drops_about_the_asked_share_and_the_same_datagrams_for_the_same_seed(echo):
    lossy = Setting("10%", loss=10)
    got, counts = _through(echo, lossy, 7)
    # Each way drops 10%: about 19% of round trips lost; 1000 draws each way keep the counts
    # within these bounds except with odds far below one in a million.
    assert 100 <= counts["dropped"] <= 300
    assert len(got) == N - counts["dropped"]  # what either way dropped, and nothing else
    again, _ = _through(echo, lossy, 7)
    other, _ = _through(echo, lossy, 8)
    assert again == got and other != got
    assert got == sorted(got)  # loss alone never reorders


def test_reordering_holds_datagrams_back_and_loses_none(echo):
    got, counts = _through(echo, Setting("reorder", reorder=20, hold_ms=50), 3)
    assert sorted(got) == list(range(N)) and got != list(range(N))
    assert counts["held"] > 0 and counts["dropped"] == 0


def test_a_fixed_delay_delays_each_direction(echo):
    relay = Relay(h3_lane.H3CLIENT, echo, Setting("delay", delay_ms=40), 1, CPUS)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as c:
        c.settimeout(5)
        t0 = time.monotonic()
        c.sendto(b"ping", ("127.0.0.1", relay.port))
        assert c.recv(64) == b"ping"
        assert time.monotonic() - t0 >= 0.080
    assert relay.stop()["forwarded"] == 2


@pytest.mark.parametrize(
    "flags, message",
    [
        (["-loss", "150"], "-loss must be a percentage (0..100), got 150"),
        (["-reorder", "5"], "-reorder needs -hold-ms"),
        (["-delay-ms", "-1"], "must not be negative"),
    ],
)
def test_the_relay_refuses_bad_settings_with_a_clear_answer(flags, message):
    p = subprocess.run(
        [str(h3_lane.H3CLIENT), "relay", "127.0.0.1:9", *flags],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=10,
    )
    assert p.returncode != 0 and message in p.stderr


def test_a_relay_that_cannot_start_says_why():
    bad = Setting("bad", loss=-1)
    with pytest.raises(h3_impair.RelayError, match="did not start: .*percentage"):
        Relay(h3_lane.H3CLIENT, 9, bad, 1, CPUS)


# ------------------------------------------------------------------ report


def _imp_cell(server: str, setting: str, p50: float, p99: float, problems=()) -> dict:
    runs = [{"round": 1, "p50_us": p50, "p99_us": p99, "problems": list(problems)}]
    return {
        "server": server,
        "setting": setting,
        "runs": runs,
        "ok_runs": 0 if problems else 1,
        "p50_us": None if problems else p50,
        "p99_us": None if problems else p99,
        "cpu_us_per_req": None if problems else 20.0,
    }


def _loss_results() -> dict:
    settings = [asdict(s) for s in h3_impair.SETTINGS]
    cells = [
        _imp_cell(srv, s.name, 500 * (i + 1), 2000 * (i + 1))
        for srv in ("peregrine-h3", "quic-go")
        for i, s in enumerate(h3_impair.SETTINGS)
    ]
    cells[-1] = _imp_cell("quic-go", "reorder", 0, 0, ["3 other error(s)"])
    cells[0]["runs"][0]["client_cpus_busy_share"] = 0.5
    return {
        "servers": [
            {"name": "peregrine-h3", "label": "Peregrine", "status": "ok"},
            {"name": "quic-go", "label": "quic-go srv", "status": "ok"},
        ],
        "cells": [],
        "settings": {"modes": h3_lane.MODES, "connections": 50},
        "netem": {"available": False, "reason": "tc: Specified qdisc kind is unknown"},
        "impairment": {
            "method": "userspace",
            "mode": "h3-loss",
            "rate": 2000,
            "settings": settings,
            "runs": 1,
            "duration": 2.0,
            "cells": cells,
        },
    }


def test_the_loss_section_says_it_is_a_relay_and_shows_each_setting():
    res = _loss_results()
    text = "\n".join(h3_impair.render(res, {"quic-go": "quic-go srv"}))
    assert "userspace relay, not tc netem" in text
    assert "tc netem is not available here (tc: Specified qdisc kind is unknown)" in text
    assert "excludes it" in text and "added latency" in text
    assert "h3client rate, 2000 requests/s over 50 connections" in text
    assert "CPUs were 50% busy (median of the runs, relay included)" in text
    assert "`direct`: no relay; `0%`: 0% dropped" in text and "`3%`: 3% dropped" in text
    rows = [ln for ln in text.splitlines() if ln.startswith("| quic-go srv")]
    assert rows == [
        "| quic-go srv | 500 / 2,000 | 1,000 / 4,000 | 1,500 / 6,000 | 2,000 / 8,000 | "
        "n/a / n/a (1 run(s) with problems) | 20.00 |"
    ]
    assert text.count("| peregrine-h3 | 500 / 2,000 | 1,000 / 4,000 |") == 1
    # A run without the phase says so.
    del res["impairment"]
    assert "Not measured in this run (tc netem: tc: Specified qdisc kind" in "\n".join(
        h3_impair.render(res, {})
    )


def test_the_loss_chart_is_written(tmp_path):
    res = _loss_results()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = h3_impair.chart(res, tmp_path, plt)
    svg = path.read_text()
    assert path.name == "latency_under_loss.svg"
    assert "Peregrine p99" in svg and "quic-go srv p50" in svg and "reorder" in svg
    assert h3_impair.chart({"impairment": None}, tmp_path, plt) is None
    assert "latency_under_loss.svg" in h3_report.render(res)
