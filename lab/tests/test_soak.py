"""The soak harness: its budget arithmetic on made-up series, its /proc readings and leak
detection on a real leaking process, its WebSocket framing, and a short real soak (the CI
variant, about 2 minutes) of the scenarios app with every budget asserted."""

from __future__ import annotations

import json
import os
import random
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from peregrine_lab import soak, soak_load, soak_stats

# Seconds of the CI soak (PEREGRINE_SOAK_CI_SECONDS overrides it, e.g. for a quick local run).
CI_SECONDS = float(os.environ.get("PEREGRINE_SOAK_CI_SECONDS", "120"))


def _samples(values, step=2.0, **extra):
    return [
        {"t": i * step, "rss_kib": v, "fds": 40, "errors": {}, **extra}
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
    step = [{"t": i * 2.0, "rss_kib": 50_000, "fds": 35 if i < 22 else 36} for i in range(60)]
    assert soak_stats.check_budgets(step, warmup=0, server_exit=None)["ok"]
    climb = [{"t": i * 2.0, "rss_kib": 50_000, "fds": 35 + i // 15} for i in range(60)]
    budgets = soak_stats.check_budgets(climb, warmup=0, server_exit=None)
    assert any(f.startswith("fds: upward trend") for f in budgets["failures"]), budgets


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


def test_websocket_frames_are_masked_and_sized():
    frame = soak_load.ws_frame(0x1, b"hello", mask=b"\x01\x02\x03\x04")
    assert frame[:2] == bytes([0x81, 0x80 | 5])
    assert frame[2:6] == b"\x01\x02\x03\x04"
    assert bytes(b ^ b"\x01\x02\x03\x04"[i % 4] for i, b in enumerate(frame[6:])) == b"hello"
    big = soak_load.ws_frame(0x2, b"x" * 300)
    assert big[1] == 0x80 | 126 and struct.unpack("!H", big[2:4])[0] == 300


def test_error_kinds():
    assert soak_load.error_kind(ConnectionResetError()) == "reset"
    assert soak_load.error_kind(ConnectionRefusedError()) == "refused"
    assert soak_load.error_kind(TimeoutError()) == "timeout"
    assert soak_load.error_kind(soak_load.ProtocolError("ws_mismatch")) == "ws_mismatch"


def test_sampling_and_warm_up_follow_the_duration():
    assert soak.interval_for(1800) == 10 and soak.interval_for(120) == 2
    assert soak.warmup_for(1800) == 120 and soak.warmup_for(120) == 18
    assert soak.warmup_for(30) == 15


@pytest.mark.skipif(shutil.which("cargo") is None, reason="needs cargo to build the app")
def test_ci_soak_of_the_scenarios_app_meets_every_budget(tmp_path: Path):
    """The CI variant: the scenarios app (debug build, the one `cargo test` compiles) under
    the CI plan for CI_SECONDS; RSS and descriptors flat, no client error, every kind of
    client exercised; results.json and the chart written."""
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
    assert budgets["ok"], (budgets["failures"], "\n".join(lines[-10:]))
    for kind in ("steady", "churn", "slow_read", "vanish_close", "vanish_reset", "ws_echo"):
        assert res["totals"].get(kind, 0) > 0, (kind, res["totals"])
    assert res["totals"].get("sse_chunk", 0) >= CI_SECONDS * soak_load.CI_PLAN.sse_sessions / 2
    written = json.loads((tmp_path / "results.json").read_text())
    assert written["budgets"]["ok"] and len(written["samples"]) >= CI_SECONDS / 2 - 2
    assert (tmp_path / "soak.svg").read_text().lstrip().startswith("<?xml")
