"""The soak harness: its budget arithmetic on made-up series, its /proc readings (descriptors,
memory, TCP states) and leak detection on a real leaking process, its WebSocket and multipart
encoding, the report, and a short real soak (the CI variant, about 2 minutes) of the scenarios
app (TLS, HTTP/2, PostgreSQL) with every budget asserted."""

from __future__ import annotations

import json
import os
import random
import shutil
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from peregrine_lab import (
    database,
    schema,
    soak,
    soak_load,
    soak_oha,
    soak_proto,
    soak_report,
    soak_stats,
)

# Seconds of the CI soak (PEREGRINE_SOAK_CI_SECONDS overrides it, e.g. for a quick local run).
CI_SECONDS = float(os.environ.get("PEREGRINE_SOAK_CI_SECONDS", "120"))


def _samples(values, step=2.0, **extra):
    return [
        {"t": i * step, "rss_kib": v, "fds": 40, "p99_ms": 2.0, "errors": {}, **extra}
        for i, v in enumerate(values)
    ]


def test_a_flat_noisy_series_meets_the_budgets():
    rng = random.Random(7)
    rss = [50_000 + rng.randint(-800, 800) for _ in range(60)]
    budgets = soak_stats.check_budgets(_samples(rss), warmup=20, server_exit=None)
    assert budgets["ok"], budgets["failures"]
    assert abs(budgets["rss"]["level_change"]) < 0.05


def test_a_slow_leak_is_an_upward_trend_even_within_five_percent():
    # +3% over the window: inside the level budget, caught by the slope test.
    rng = random.Random(3)
    rss = [50_000 * (1 + 0.03 * i / 59) + rng.randint(-100, 100) for i in range(60)]
    budgets = soak_stats.check_budgets(_samples(rss), warmup=0, server_exit=None)
    assert not budgets["ok"]
    assert budgets["rss"]["level_change"] < 0.05
    assert any("upward trend" in f for f in budgets["failures"]), budgets["failures"]


def test_one_allocator_step_is_resolution_and_more_is_a_trend():
    # The CI run's shape: 16,988 KiB, then about 100 KiB more by steps, flat in between.
    step = [16_988 + (104 if i > 40 else 0) + (4 if i % 7 == 0 else 0) for i in range(50)]
    assert soak_stats.check_budgets(_samples(step), warmup=0, server_exit=None)["ok"]
    climb = [16_988 + 8 * i for i in range(50)]  # +392 KiB over the window
    budgets = soak_stats.check_budgets(_samples(climb), warmup=0, server_exit=None)
    assert budgets["failures"] and budgets["failures"][0].startswith("rss_kib: upward trend")


def test_a_step_past_five_percent_misses_the_level_budget():
    rss = [50_000] * 30 + [53_500] * 30
    budgets = soak_stats.check_budgets(_samples(rss), warmup=0, server_exit=None)
    assert any("level moved +7.0%" in f for f in budgets["failures"]), budgets["failures"]


def test_warm_up_growth_is_ignored_and_a_decrease_is_no_trend():
    rss = [20_000 + 1_000 * i for i in range(10)] + [30_000 - 10 * i for i in range(50)]
    budgets = soak_stats.check_budgets(_samples(rss), warmup=20, server_exit=None)
    assert budgets["ok"], budgets["failures"]


def test_one_more_descriptor_is_resolution_and_a_climb_is_a_leak():
    # The CI run that motivated the rule: 35 descriptors, then 36 for good (a connection open
    # at each later sample instant): a significant slope, but one descriptor.
    step = [
        {"t": i * 2.0, "rss_kib": 50_000, "fds": 35 if i < 22 else 36, "p99_ms": 2.0}
        for i in range(60)
    ]
    assert soak_stats.check_budgets(step, warmup=0, server_exit=None)["ok"]
    climb = [
        {"t": i * 2.0, "rss_kib": 50_000, "fds": 35 + i // 15, "p99_ms": 2.0} for i in range(60)
    ]
    budgets = soak_stats.check_budgets(climb, warmup=0, server_exit=None)
    assert any(f.startswith("fds: upward trend") for f in budgets["failures"]), budgets


def _soak_like(minutes: float, heap_leak_kib_per_s: float, rss_creep_kib_per_min: float):
    """Samples every 10 s shaped like the 30-minute soak: RSS 9,216 KiB creeping (glibc keeping
    freed memory) plus what leaks, a live heap of ~1,040 KiB that moves ±150 KiB with the
    requests in flight at each sample, plus what leaks."""
    rng = random.Random(11)
    out = []
    for i in range(int(minutes * 6) + 1):
        t = i * 10.0
        leaked = heap_leak_kib_per_s * t
        rss = 9_216 + rss_creep_kib_per_min * t / 60 + leaked + rng.randint(-8, 8)
        heap = 1_040 + leaked + rng.randint(-150, 150)
        out.append({"t": t, "rss_kib": round(rss), "heap_kib": round(heap), "fds": 59})
        out[-1].update(p99_ms=160.0, errors={})
    return out


def test_allocator_creep_with_a_flat_live_heap_meets_the_budgets():
    """The 30-minute soak's RSS (+13 KiB/min) with the live heap flat, as heaptrack showed it
    in shorter runs: the allocator keeping freed pages, not a leak; the RSS level budget still
    applies."""
    samples = _soak_like(30, heap_leak_kib_per_s=0.0, rss_creep_kib_per_min=13.3)
    budgets = soak_stats.check_budgets(samples, warmup=120, server_exit=None)
    assert budgets["ok"], budgets["failures"]
    assert budgets["rss"]["slope_lower95_per_min"] > 10  # still measured and reported
    without_heap = [{k: v for k, v in s.items() if k != "heap_kib"} for s in samples]
    old = soak_stats.check_budgets(without_heap, warmup=120, server_exit=None)
    assert old["failures"][0].startswith("rss_kib: upward trend"), old["failures"]
    assert old["heap"] is None
    grown = _soak_like(30, heap_leak_kib_per_s=0.0, rss_creep_kib_per_min=40.0)
    budgets = soak_stats.check_budgets(grown, warmup=120, server_exit=None)
    assert any(f.startswith("rss_kib: level moved") for f in budgets["failures"]), budgets


@pytest.mark.parametrize(
    ("what", "leak_kib_per_s"),
    [
        # 1 KiB per request at the 30-minute run's ~231 requests a second.
        ("1 KiB per request", 231.0),
        # 1 KiB per upload at the CI plan's rate: one every 2 s.
        ("1 KiB per CI upload", 0.5),
        # 1 KiB per slow upload of the 30-minute run: 654 in 1,800 s.
        ("1 KiB per slow upload", 654 / 1800),
    ],
)
def test_a_small_leak_fails_the_live_heap_budget(what, leak_kib_per_s):
    """A leak of 1 KiB per request (or per upload, the rarest operation) trips the live heap's
    trend budget in the 30-minute run, even when the allocator hides it in RSS's creep; 1 KiB
    per request trips it within 2 minutes too."""
    samples = _soak_like(30, leak_kib_per_s, rss_creep_kib_per_min=13.3)
    budgets = soak_stats.check_budgets(samples, warmup=120, server_exit=None)
    assert any(f.startswith("heap_kib: upward trend") for f in budgets["failures"]), (
        what,
        budgets["heap"],
    )
    if leak_kib_per_s >= 1:
        short = _soak_like(2, leak_kib_per_s, rss_creep_kib_per_min=13.3)
        budgets = soak_stats.check_budgets(short, warmup=18, server_exit=None)
        assert not budgets["heap"]["ok"], (what, budgets["heap"])


def test_a_p99_that_moves_past_twenty_percent_misses_its_budget():
    rng = random.Random(5)
    noisy = _samples([50_000] * 60)
    for s in noisy:
        s["p99_ms"] = 2.0 * (1 + rng.uniform(-0.1, 0.1))
    assert soak_stats.check_budgets(noisy, warmup=0, server_exit=None)["ok"]
    worse = _samples([50_000] * 60)
    for i, s in enumerate(worse):
        s["p99_ms"] = 2.0 if i < 30 else 2.6
    budgets = soak_stats.check_budgets(worse, warmup=0, server_exit=None)
    assert budgets["failures"] == [
        "p99_ms: level moved +30.0% (first third 2, last third 2.6), budget ±20%"
    ]


def _with_twin(soaked_p99, twin_p99, n=120, step=10.0):
    """A run of `n` samples, each with the twin's p99 beside the soaked server's: both are
    functions of the sample's index."""
    return [
        {
            "t": i * step,
            "rss_kib": 50_000,
            "fds": 100,
            "errors": {},
            "p99_ms": soaked_p99(i),
            "reference": {"p99_ms": twin_p99(i)},
        }
        for i in range(n)
    ]


def test_the_p99_budget_is_against_the_fresh_twin_when_the_run_has_one():
    """A machine that speeds up by 30% over the run moves the soaked p99 and the twin's alike:
    the ratio holds and the budget is met (the soaked p99 alone moved past 20%, a figure now);
    a server whose own p99 degrades by 30% while the twin's stays misses it."""
    rng = random.Random(11)

    def speed(i):
        return 1.0 if i < 60 else 0.7

    faster = _with_twin(
        lambda i: 8.0 * speed(i) * (1 + rng.uniform(-0.1, 0.1)),
        lambda i: 4.0 * speed(i) * (1 + rng.uniform(-0.1, 0.1)),
    )
    budgets = soak_stats.check_budgets(faster, warmup=120, server_exit=None)
    assert budgets["ok"], budgets["failures"]
    p99 = budgets["p99"]
    assert p99["name"] == "p99_ms relative to a fresh twin" and p99["samples"] == 108
    assert abs(p99["level_change"]) < 0.2 and p99["first_third_median"] == pytest.approx(2, 0.1)
    assert p99["absolute"]["level_change"] < -0.2 and not p99["absolute"]["ok"]
    assert p99["soaked_ms"]["first_third"] == pytest.approx(8, 0.1)
    assert p99["twin_ms"]["last_third"] == pytest.approx(2.8, 0.1)
    worse = _with_twin(lambda i: 8.0 if i < 60 else 10.4, lambda i: 4.0)
    budgets = soak_stats.check_budgets(worse, warmup=120, server_exit=None)
    assert budgets["failures"] == [
        "p99_ms relative to a fresh twin: level moved +30.0% (first third 2, last third 2.6), "
        "budget ±20%"
    ]
    report = soak_report.markdown(
        {
            "duration_seconds": 1200,
            "command": "x",
            "started": "now",
            "interval_seconds": 10,
            "budgets": budgets,
            "server_log_panics": 0,
            "plan": {"steady_rate": 1000},
            "totals": {},
            "server": {"binary": "b", "cargo_profile": "release", "features": "f", "workers": 1},
            "twin": {"share": 0.25, "warmup_seconds": 1.0, "log_panics": 0},
        }
    )
    assert "| steady p99 / fresh twin's p99 | stable within 20% | 2 → 2.6 (+30.0%) |" in report
    assert "soaked 8 → 10.4, twin 4 → 4" in report and "25% of the steady load" in report


def test_stalls_that_hit_both_servers_cancel_in_the_ratio():
    """The reason the twin runs beside the soaked server: a VM's stalls raise both p99s in the
    same interval. Stalls that cluster late in the run move the soaked p99's own level by far
    more than 20%; the per-interval ratio stays flat."""
    rng = random.Random(3)
    stall = [1.0 if i < 60 or rng.random() < 0.4 else rng.uniform(2, 6) for i in range(120)]
    run = _with_twin(
        lambda i: 8.0 * stall[i] * (1 + rng.uniform(-0.05, 0.05)),
        lambda i: 5.0 * stall[i] * (1 + rng.uniform(-0.05, 0.05)),
    )
    p99 = soak_stats.check_budgets(run, warmup=0, server_exit=None)["p99"]
    assert p99["ok"] and abs(p99["level_change"]) < 0.1, p99
    assert p99["absolute"]["level_change"] > 0.5, p99["absolute"]
    short = _with_twin(lambda i: 8.0, lambda i: 4.0, n=5)
    p99 = soak_stats.check_budgets(short, warmup=0, server_exit=None)["p99"]
    assert p99["failures"] == ["p99_ms relative to a fresh twin: 5 samples after warm-up, need 6"]


def test_the_twin_takes_its_share_of_the_rate_and_of_the_connections():
    assert soak.split(40_000.0, 64, twin=True) == ((30_000.0, 48), (10_000.0, 16))
    assert soak.split(40_000.0, 64, twin=False) == ((40_000.0, 64), (0.0, 0))
    assert soak.split(1000.0, 2, twin=True)[1][1] == 1


def test_errors_a_dead_server_and_too_few_samples_fail():
    samples = _samples([50_000] * 20)
    samples[5]["errors"] = {"reset": 2}
    samples[9]["errors"] = {"reset": 1, "timeout": 1}
    budgets = soak_stats.check_budgets(samples, warmup=0, server_exit=None)
    assert budgets["errors"] == {"reset": 3, "timeout": 1}
    assert not budgets["ok"]
    dead = soak_stats.check_budgets(_samples([50_000] * 20), warmup=0, server_exit=101)
    assert any("status 101" in f for f in dead["failures"])
    short = soak_stats.check_budgets(_samples([50_000] * 4), warmup=0, server_exit=None)
    assert not short["ok"]


def test_slope_and_percentiles():
    b, se = soak_stats.slope([0, 1, 2, 3, 4], [1, 3, 5, 7, 9])
    assert b == pytest.approx(2.0) and se == pytest.approx(0.0)
    assert soak_stats.percentile([5, 1, 3, 2, 4], 50) == 3
    assert soak_stats.percentile(list(range(1, 101)), 99) == 99
    assert soak_stats.percentile([], 50) is None
    assert soak_stats.t95(1) > soak_stats.t95(10) > soak_stats.t95(1000)


LEAKER = """
import sys, time
held = []
print("ready", flush=True)
for _ in range(400):
    held.append(open(sys.argv[1]))
    held.append(bytearray(64 * 1024))
    time.sleep(0.01)
time.sleep(60)
"""


def test_a_real_process_leaking_descriptors_and_memory_is_caught(tmp_path):
    """The sampler reads a real process from /proc; a leak of descriptors and memory trips
    both budgets, as a leaking server would."""
    proc = subprocess.Popen(
        [sys.executable, "-c", LEAKER, __file__], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout.readline().strip() == "ready"
        samples = []
        start = time.monotonic()
        for _ in range(12):
            samples.append(
                {
                    "t": time.monotonic() - start,
                    "rss_kib": soak_stats.read_rss_kib(proc.pid),
                    "fds": soak_stats.read_fds(proc.pid),
                    "p99_ms": 1.0,
                    "cpu_pct": 0,
                    "errors": {},
                }
            )
            time.sleep(0.25)
        assert soak_stats.read_cpu_seconds(proc.pid) is not None
    finally:
        proc.kill()
        proc.wait()
    budgets = soak_stats.check_budgets(samples, warmup=0, server_exit=None)
    assert not budgets["rss"]["ok"] and not budgets["fds"]["ok"], budgets
    assert samples[-1]["fds"] > samples[0]["fds"] + 100
    assert soak_stats.read_rss_kib(proc.pid) is None  # gone


def test_tcp_states_count_the_sockets_of_one_port():
    """A listener, one accepted connection and one closed by the server only (FIN_WAIT2 on its
    side, CLOSE_WAIT on the client's, another port): counted by state for the server's port."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        a, b = (
            socket.create_connection(("127.0.0.1", port)),
            socket.create_connection(("127.0.0.1", port)),
        )
        sa, _ = listener.accept()
        sb, _ = listener.accept()
        sb.shutdown(socket.SHUT_RDWR)
        time.sleep(0.1)
        try:
            states = soak_stats.read_tcp_states(port)
            assert states == {"listen": 1, "established": 1, "fin_wait2": 1}, states
        finally:
            for s in (a, b, sa, sb):
                s.close()
    assert soak_stats.read_tcp_states(port, Path("/nonexistent")) == {}


def test_multipart_bodies_are_well_formed():
    body, ctype = soak_load.multipart([b"abc", b"\r\n--x"], boundary="B")
    assert ctype == "multipart/form-data; boundary=B"
    assert body.startswith(b'--B\r\nContent-Disposition: form-data; name="f0"; filename="f0.bin"')
    assert body.endswith(b"\r\n\r\n\r\n--x\r\n--B--\r\n")
    assert body.count(b"--B\r\n") == 2


def test_requests_carry_the_length_of_their_body_or_the_given_one():
    assert soak_proto.request("GET", "/a") == b"GET /a HTTP/1.1\r\nHost: soak\r\n\r\n"
    post = soak_proto.request("POST", "/p", b"xyz", {"X-A": "1"}, close=True)
    assert post == (
        b"POST /p HTTP/1.1\r\nHost: soak\r\nX-A: 1\r\nContent-Length: 3\r\n"
        b"Connection: close\r\n\r\nxyz"
    )
    assert b"Content-Length: 900\r\n" in soak_proto.request("POST", "/u", length=900)


def test_the_report_states_the_verdict_and_each_budget(tmp_path, head_commit):
    samples = _samples([50_000] * 30)
    for s in samples:
        s.update(tcp_states={"established": 3, "time_wait": 5}, cpu_pct=2.0)
        s.update(cpu_us_per_request=90.0, p50_ms=0.5, p999_ms=4.0)
    samples[20]["errors"] = {"reset": 1}
    budgets = soak_stats.check_budgets(samples, warmup=10, server_exit=None)
    res = {
        "duration_seconds": 60.0,
        "command": "./scripts/lab soak --duration 60",
        "started": "2026-01-01T00:00:00+00:00",
        "interval_seconds": 2.0,
        "budgets": budgets,
        "server_log_panics": 0,
        "totals": {"steady": 100, "h2_stream": 40},
        "server": {"binary": "b", "cargo_profile": "debug", "features": "f", "workers": 2},
        "plan": {},
        "notes": ["the machine was busy"],
    }
    text = soak_report.markdown(res)
    assert "**Verdict: BUDGETS MISSED.**" in text
    assert "> Made at an unrecorded commit" in text
    res["git_commit"] = head_commit
    behind = f"> Made at commit `{head_commit[:12]}`, 0 commits behind HEAD"
    assert behind in soak_report.markdown(res)
    assert "| unexpected client errors | 0 | – | – | **missed**: {'reset': 1} |" in text
    assert "| RSS (KiB) | flat within 5%, no upward trend | 50000 → 50000 (+0.0%)" in text
    assert "| h2_stream | 40 |" in text and "* the machine was busy" in text
    assert "no calibration" in text
    res["plan"] = {"steady_rate": 70.0}
    res["calibration"] = {
        "seconds": 10.0,
        "steady_connections": 8,
        "capacity_rps": 100.0,
        "server_cpu_pct": 190.0,
        "load_fraction": 0.7,
        "steady_rate": 70.0,
        "errors": {},
    }
    text = soak_report.markdown(res)
    assert "**70.0 requests/s, 70% of the capacity** measured first: 100.0" in text
    assert "the server, near its workers' full CPU, was the limit" in text
    res["calibration"]["server_cpu_pct"] = 40.0
    assert "the load generators were the limit" in soak_report.markdown(res)
    res["calibration"]["cpu_pct"] = {"server": 40.0, "oha": 90.0, "machine": 199.0}
    res["machine"] = {"before": {"cpus": 2, "loadavg_1min": 9}, "after": {"loadavg_1min": 9}}
    res["cpu_pct_steady"] = {"server": 28.0, "oha": 50.0, "python_clients": 12.0, "machine": 150}
    res["server_busy_share"] = 0.7
    text = soak_report.markdown(res)
    assert "the machine's CPUs were the limit" in text
    assert "the server 28.0%, oha 50.0%, the Python clients 12.0%, the whole machine 150%" in text
    assert "what it used at capacity: 70%" in text
    soak_report.chart(samples, budgets, tmp_path / "c.svg", "t")
    svg = (tmp_path / "c.svg").read_text()
    assert "BUDGETS MISSED" in svg and "time_wait" in svg


def test_websocket_frames_are_masked_and_sized():
    frame = soak_load.ws_frame(0x1, b"hello", mask=b"\x01\x02\x03\x04")
    assert frame[:2] == bytes([0x81, 0x80 | 5])
    assert frame[2:6] == b"\x01\x02\x03\x04"
    assert bytes(b ^ b"\x01\x02\x03\x04"[i % 4] for i, b in enumerate(frame[6:])) == b"hello"
    big = soak_load.ws_frame(0x2, b"x" * 300)
    assert big[1] == 0x80 | 126 and struct.unpack("!H", big[2:4])[0] == 300


def test_error_kinds():
    assert soak_proto.error_kind(ConnectionResetError()) == "reset"
    assert soak_proto.error_kind(ConnectionRefusedError()) == "refused"
    assert soak_proto.error_kind(TimeoutError()) == "timeout"
    assert soak_proto.error_kind(soak_proto.ProtocolError("ws_mismatch")) == "ws_mismatch"
    assert soak_proto.error_kind(soak_proto.NotProcessed("goaway")) == "not_processed_goaway"


def test_sampling_and_warm_up_follow_the_duration():
    assert soak.interval_for(1800) == 10 and soak.interval_for(120) == 2
    assert soak.warmup_for(1800) == 120 and soak.warmup_for(120) == 18
    assert soak.warmup_for(30) == 15


def written_samples(folder: Path) -> list[dict]:
    return json.loads((folder / "results.json").read_text())["samples"]


@pytest.mark.skipif(shutil.which("cargo") is None, reason="needs cargo to build the app")
@pytest.mark.skipif(not database.available(), reason="needs PostgreSQL (scripts/setup)")
def test_ci_soak_of_the_scenarios_app_meets_every_budget(tmp_path: Path):
    """The CI variant: the scenarios app (debug build, the one `cargo test` compiles) over TLS
    with PostgreSQL under the CI plan for CI_SECONDS, the steady load oha's; RSS and
    descriptors flat, no client error (oha's counted), every kind of client exercised;
    results.json, report.md and the chart written."""
    lines = []
    opts = soak.Options(
        out_dir=tmp_path,
        duration=CI_SECONDS,
        cargo_profile="debug",
        plan=soak_load.CI_PLAN,
        progress=lines.append,
    )
    res = soak.run(opts)
    budgets = res["budgets"]
    # Every budget but the p99's: a shared CI machine's scheduling moves a 2-second sample's
    # p99 by far more than 20% (127 ms to 15 ms between the first and last thirds of a
    # 60-second run at load average 9 on 2 CPUs); the 30-minute run on a quiet machine checks
    # it.
    missed = [f for f in budgets["failures"] if not f.startswith("p99_ms")]
    assert not missed, (missed, "\n".join(lines[-10:]))
    assert budgets["rss"]["ok"] and budgets["fds"]["ok"] and not budgets["errors"]
    # The app reports its live heap (glibc), and that budget is checked too.
    assert budgets["heap"]["ok"] and budgets["heap"]["first_third_median"] > 100, budgets["heap"]
    # A fresh twin took its share of the steady load in every interval (started, warmed up,
    # measured, stopped): the p99 budget's reference, its latencies apart from the soaked
    # server's.
    p99 = budgets["p99"]
    assert p99["samples"] >= 40 and p99["absolute"]["first_third_median"] > 0, p99
    assert res["twin"] == {"share": soak.TWIN_SHARE, "warmup_seconds": 1.0, "log_panics": 0}
    assert res["totals"]["reference"] > 0, res["totals"]
    kinds = ("steady", "churn", "slow_read", "vanish_close", "vanish_reset", "ws_echo")
    kinds += ("h2_stream", "range", "upload", "slow_upload", "db")
    for kind in kinds:
        assert res["totals"].get(kind, 0) > 0, (kind, res["totals"])
    assert res["totals"].get("sse_chunk", 0) >= CI_SECONDS * soak_load.CI_PLAN.sse_sessions / 2
    # The steady load was oha's, open loop, its rate from 70% of what oha closed loop measured
    # through the open-loop trials (each scales the rate to put the busiest CPUs 70% busy),
    # with the CPU of each party recorded in both phases.
    cal = res["calibration"]
    assert cal["loadgen"] == "oha" and cal["command"].startswith("oha "), cal
    assert cal["capacity_rps"] > 0 and cal["errors"] == {}, cal
    assert res["plan"]["steady_rate"] == cal["steady_rate"], (res["plan"], cal)
    trials = cal["trials"]
    assert 1 <= len(trials) <= soak.TRIALS, cal
    assert trials[0]["rate"] == pytest.approx(0.7 * cal["capacity_rps"], abs=0.2), cal
    for before, after in zip(trials, trials[1:], strict=False):
        assert max(before["busy"].values()) > 0.7 + soak.TRIAL_TOLERANCE, cal
        busiest = max(before["busy"].values())
        assert after["rate"] == pytest.approx(before["rate"] * 0.7 / busiest, abs=0.2), cal
    last = trials[-1]
    busiest = max(last["busy"].values())
    expected = last["rate"] * (1 if busiest <= 0.7 + soak.TRIAL_TOLERANCE else 0.7 / busiest)
    assert cal["steady_rate"] == pytest.approx(expected, abs=0.2), cal
    assert cal["cpu_pct"]["server"] > 0 and cal["cpu_pct"]["oha"] > 0, cal
    assert res["cpu_pct_steady"]["oha"] > 0 and res["server_busy_share"] > 0, res
    # Achieved: at most the rate (open loop), and near it when the server keeps up; the debug
    # build on a busy machine fell behind (78% of the rate at load average 8-10 on 2 CPUs,
    # its p99 300-400 ms), so the floor is half.
    achieved = res["steady_rps_achieved"]
    assert 0.5 * cal["steady_rate"] < achieved < 1.1 * cal["steady_rate"], (achieved, cal)
    for s in written_samples(tmp_path)[:-1]:
        assert s["p99_ms"] is not None and s["steady"]["rps"] > 0, s
        assert s["reference"]["p99_ms"] is not None and s["reference"]["rps"] > 0, s
    written = json.loads((tmp_path / "results.json").read_text())
    assert written["budgets"] == budgets and len(written["samples"]) >= CI_SECONDS / 2 - 3
    assert schema.problems(written) == []
    assert (tmp_path / "soak.svg").read_text().lstrip().startswith("<?xml")
    assert (
        "| open descriptors | flat within 5%, no upward trend |"
        in (tmp_path / "report.md").read_text()
    )
    assert all(s["tcp_states"].get("listen") == 2 for s in written["samples"][:-1])


OHA_JSON = {
    "summary": {"total": 2.01, "successRate": 0.99},
    "latencyPercentiles": {"p50": 0.0002, "p99": 0.004, "p99.9": 0.03},
    "statusCodeDistribution": {"200": 15000, "503": 3},
    "errorDistribution": {
        "Connection reset by peer (os error 104)": 2,
        "connection closed before message completed": 1,
        "timeout": 4,
    },
    "details": {"DNSDialup": {"average": 0.0015, "fastest": 0.001, "slowest": 0.003}},
}


def test_an_oha_segment_gives_the_intervals_latencies_and_every_error_by_kind():
    seg = soak_oha.parse(json.dumps(OHA_JSON), wall_seconds=2.1, cpu_seconds=0.4)
    assert (seg.requests, seg.ok, seg.seconds) == (15003, 15000, 2.01)
    assert (seg.p50, seg.p99, seg.p999) == (0.0002, 0.004, 0.03)
    assert seg.errors == {
        "oha_ECONNRESET": 2,
        "oha_connection_closed_before_message_completed": 1,
        "oha_timeout": 4,
        "oha_status_503": 3,
    }
    assert (seg.dialup_avg, seg.dialup_max, seg.cpu_seconds) == (0.0015, 0.003, 0.4)
    with pytest.raises(soak_oha.OhaError):
        soak_oha.parse("Error: connection refused")
    # Only 200s with the plaintext body: no error; a body of another length is one.
    clean = dict(OHA_JSON, statusCodeDistribution={"200": 100}, errorDistribution={})
    clean["summary"] = dict(OHA_JSON["summary"], totalData=1300)
    assert soak_oha.parse(json.dumps(clean)).errors == {}
    clean["summary"]["totalData"] = 1299
    assert soak_oha.parse(json.dumps(clean)).errors == {"oha_wrong_body_bytes": 1}


def test_a_sample_takes_the_steady_latencies_and_errors_from_oha():
    """The sample's p50/p99/p99.9 are oha's, oha's errors join the Python clients' (so the
    budgets count them), and its 200s are the steady operations."""
    seg = soak_oha.parse(json.dumps(OHA_JSON), wall_seconds=2.1, cpu_seconds=0.4)
    tally = soak_load.Tally()
    tally.ops.update(churn=20, sse_chunk=8)
    tally.errors["reset"] += 1
    state = soak._server_state(os.getpid(), 1, None)
    assert state["rss_kib"] > 0 and state["fds"] > 0 and state["tcp_states"] == {}
    cpu = {"server": 50.0, "oha": 20.0, "python_clients": 10.0, "machine": 90.0}
    sample = soak._sample(state, tally, seg, 2.0, dict(cpu, server_seconds=0.2))
    assert sample["rss_kib"] == state["rss_kib"]
    assert (sample["p50_ms"], sample["p99_ms"], sample["p999_ms"]) == (0.2, 4.0, 30.0)
    assert sample["ops"] == {"churn": 20, "sse_chunk": 8, "steady": 15000}
    assert sample["requests"] == 15020
    assert sample["errors"]["reset"] == 1 and sample["errors"]["oha_status_503"] == 3
    assert (sample["cpu_pct"], sample["cpu_pct_oha"], sample["cpu_pct_machine"]) == (50, 20, 90)
    assert sample["steady"]["boundary_ms"] == 90.0
    budgets = soak_stats.check_budgets([dict(sample, rss_kib=1)], 0, None)
    assert budgets["errors"]["oha_ECONNRESET"] == 2


def test_a_sample_holds_the_twins_segment_apart():
    """The twin's segment beside the soaked server's: its latencies and rate are the sample's
    `reference`, its answers `reference` operations (not the soaked server's requests), its
    errors counted with the others."""
    seg = soak_oha.parse(json.dumps(OHA_JSON), wall_seconds=2.1, cpu_seconds=0.4)
    twin = soak_oha.parse(json.dumps(OHA_JSON), wall_seconds=2.1, cpu_seconds=0.1)
    twin.p99 = 0.002
    tally = soak_load.Tally()
    tally.ops.update(churn=20, sse_chunk=8)
    state = soak._server_state(os.getpid(), 1, None)
    cpu = {"server": 50.0, "oha": 20.0, "python_clients": 10.0, "machine": 90.0}
    sample = soak._sample(state, tally, seg, 2.0, dict(cpu, server_seconds=0.2), twin)
    assert sample["reference"] == {"p50_ms": 0.2, "p99_ms": 2.0, "p999_ms": 30.0, "rps": 7464.2}
    assert (sample["p50_ms"], sample["p99_ms"], sample["p999_ms"]) == (0.2, 4.0, 30.0)
    assert sample["ops"] == {"churn": 20, "sse_chunk": 8, "steady": 15000, "reference": 15000}
    assert sample["requests"] == 15020 and sample["cpu_us_per_request"] == 13.3
    assert sample["errors"]["oha_status_503"] == 6


def test_each_oha_run_counts_its_own_cpu_only(tmp_path):
    """Two load generators at once (the soaked server's and the twin's) and a child reaped
    meanwhile (a twin server stopped): each run's CPU is its own process's, not the children's
    total. A stand-in for oha burns a given CPU time and prints oha's JSON."""
    import asyncio

    fake = tmp_path / "fake_oha.py"
    fake.write_text(
        "import sys, time\n"
        "end = time.process_time() + float(sys.argv[1])\n"
        "while time.process_time() < end:\n"
        "    pass\n"
        f"print({json.dumps(json.dumps(OHA_JSON))})\n"
    )
    burn = [
        sys.executable,
        "-c",
        "import time\nt = time.process_time() + 0.6\nwhile time.process_time() < t: pass",
    ]

    async def main():
        other = subprocess.Popen(burn)
        runs = asyncio.gather(
            soak_oha.run([sys.executable, str(fake), "0.8", "-z", "5s"]),
            soak_oha.run([sys.executable, str(fake), "0.0", "-z", "5s"]),
        )
        await asyncio.to_thread(other.wait)
        return await runs

    busy, idle = asyncio.run(main())
    assert busy.requests == 15003 and idle.requests == 15003
    # The children's total (the old measure) read 1.52 s: this run, the burner and the other.
    assert 0.75 < busy.cpu_seconds < 0.95, busy.cpu_seconds
    assert idle.cpu_seconds < 0.15, idle.cpu_seconds


def test_oha_runs_closed_loop_to_calibrate_and_open_loop_corrected_for_the_soak():
    closed = soak_oha.command("https://127.0.0.1:1/plaintext", 10, 64)
    assert closed[:6] == ["oha", "--no-tui", "--output-format", "json", "-z", "10s"]
    assert "-q" not in closed and "--insecure" in closed and "-w" in closed
    assert closed[closed.index("-c") + 1] == "64" and closed[-1].endswith("/plaintext")
    steady = soak_oha.command("http://127.0.0.1:1/plaintext", 9.5, 16, 7000.0)
    assert steady[steady.index("-q") + 1] == "7000" and "--latency-correction" in steady
    assert "--insecure" not in steady and "9.5s" in steady


def test_the_machine_cpu_is_read_from_proc_stat(tmp_path):
    (tmp_path / "stat").write_text("cpu  100 5 50 1000 20 3 2 0 0 0\ncpu0 1 2 3 4\n")
    busy, idle = soak_stats.read_machine_cpu(tmp_path)
    assert (busy, idle) == (160 / soak_stats.CLK_TCK, 1020 / soak_stats.CLK_TCK)
    assert soak_stats.read_machine_cpu(tmp_path / "missing") is None
    assert soak_stats.read_machine_cpu() is not None


class _Counting(soak_load.Clients):
    """Clients that count one op a millisecond and note the thread and policy they ran under."""

    def __init__(self, fail: bool = False):
        super().__init__(soak_proto.Target("127.0.0.1", 9))
        self.fail = fail
        self.policy = None
        self.thread = None

    async def run(self) -> None:
        import threading

        self.thread = threading.get_native_id()
        self.policy = os.sched_getscheduler(0)
        if self.fail:
            raise RuntimeError("a client loop crashed")
        async for _ in self._ticks(1000.0):
            self.tally.ops["tick"] += 1


def test_the_python_clients_run_on_their_own_thread_below_oha(tmp_path):
    import asyncio
    import threading

    from peregrine_lab.soak_thread import ClientsThread

    async def ticks_until(th, n: int) -> int:
        # SCHED_IDLE runs only on CPU time nothing else wants: on a busy machine (a build
        # beside the tests) the thread may wait seconds for its first slice.
        counted, deadline = 0, time.monotonic() + 60
        while counted < n and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
            counted += th.swap().ops["tick"]
        return counted

    async def main():
        clients = _Counting()
        th = ClientsThread(clients).start()
        first = await ticks_until(th, 50)
        second = await ticks_until(th, 20)
        th.stop()
        assert await th.join(5)
        return clients, th, first, second

    clients, th, first, second = asyncio.run(main())
    assert clients.thread != threading.get_native_id()
    assert th.priority == "SCHED_IDLE" and clients.policy == os.SCHED_IDLE
    # The thread that forks oha keeps the normal policy.
    assert os.sched_getscheduler(0) == os.SCHED_OTHER
    # The ticks go on across swaps, each counted by the swap after it.
    assert first >= 50 and second >= 20


def test_a_crash_in_the_clients_thread_reaches_the_soak():
    import asyncio

    from peregrine_lab.soak_thread import ClientsThread

    async def main():
        th = ClientsThread(_Counting(fail=True)).start()
        await th.join(5)

    with pytest.raises(RuntimeError, match="crashed"):
        asyncio.run(main())


def test_a_binary_without_multipart_is_refused_before_the_soak():
    import asyncio
    import threading

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import contract_server

    srv = contract_server.serve("127.0.0.1:0")  # POST /upload: 404, as without `multipart`
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        target = soak_proto.Target("127.0.0.1", srv.server_address[1])
        with pytest.raises(soak.SoakError, match="without the `multipart` feature"):
            asyncio.run(soak.preflight(target))
    finally:
        srv.shutdown()
