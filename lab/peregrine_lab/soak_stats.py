"""The soak's figures: what is read from /proc about the server (RSS, open descriptors, CPU,
its TCP connections by state), the latency percentiles of an interval, and the budgets checked
after warm-up.

Budgets (docs/operations.md, "Failures"), over the samples after warm-up:
* level: RSS and open descriptors end where they started, within 5% (the median of the last
  third of the samples against the median of the first third: robust to the connections that
  come and go at the instant of one sample);
* trend: no upward trend: the least-squares slope over time, projected over the window, is not
  at once above 1% of the mean, significantly above zero (its one-sided 95% lower bound > 0)
  and above the series' resolution: 2 descriptors (one connection open at the instant of the
  later samples is a step of one descriptor, 3% of a server holding 35) or 256 KiB of RSS (one
  allocator step, `RSS_RESOLUTION`): resolution, not a leak;
* live heap: when the app reports it (`heap_kib`: glibc's bytes in allocated chunks, the
  scenarios app's `GET /debug/heap`), the same level and trend budgets on it at a finer
  resolution (`HEAP_RESOLUTION`), and RSS keeps its level budget but not its trend: glibc keeps
  freed memory resident (per-thread arenas, fragmentation), so RSS creeps while the live heap
  is flat (docs/operations.md, "Soak"); a leak is live memory and trips the heap's budgets;
* latency: the steady load's p99 stable: the median p99 of the last third within 20% of the
  first third's (a level budget only: latency on a shared machine is noisy, a trend test on it
  would measure the neighbours). When the run had a twin (a freshly started copy of the server
  taking `soak.TWIN_SHARE` of the steady load in the same interval), the budget is on each
  interval's soaked p99 over the twin's: a VM that gets faster or slower, or stalls, moves
  both, a server that degrades moves only its own (`check_relative_p99`);
* errors: no unexpected client error of any kind, and the server still running at the end.
"""

from __future__ import annotations

import math
import os
import statistics
from pathlib import Path

PROC = Path("/proc")
CLK_TCK = os.sysconf("SC_CLK_TCK")

LEVEL_LIMIT = 0.05  # the "flat within 5%" budget
P99_LIMIT = 0.20  # the "p99 stable within 20%" budget
TREND_LIMIT = 0.01  # projected growth over the window that counts as a trend
FDS_RESOLUTION = 2.0  # descriptors of projected growth below which there is no trend
# KiB of projected RSS growth below which there is no trend: glibc extends a heap by at least
# its 128 KiB top pad, and each worker thread has its own arena, so a short run that fills one
# more step shows a significant slope of about that size (the CI run: +108 KiB in 90 s, flat
# after); a leak keeps growing past it in a run of any useful length.
RSS_RESOLUTION = 256.0
# KiB of projected live-heap growth below which there is no trend: the requests in flight at
# the instant of a sample (64 KiB uploads, file reads) move it by up to about 150 KiB, which
# the slope's 95% bound absorbs; what is left is a small step, such as one more pooled buffer.
# A leak of 1 KiB a request passes it in under a second at the soak's rates.
HEAP_RESOLUTION = 64.0
# One-sided 95% t quantiles by degrees of freedom (above 30: the normal's 1.645 is close).
_T95 = {1: 6.314, 2: 2.920, 3: 2.353, 4: 2.132, 5: 2.015, 6: 1.943, 7: 1.895, 8: 1.860}
_T95.update({9: 1.833, 10: 1.812, 12: 1.782, 15: 1.753, 20: 1.725, 25: 1.708, 30: 1.697})


def t95(df: int) -> float:
    """The one-sided 95% quantile of Student's t with `df` degrees of freedom (a table value,
    the nearest at or below `df`; conservative between table rows)."""
    if df < 1:
        return math.inf
    if df > 30:
        return 1.645 if df > 120 else 1.66
    return _T95[max(k for k in _T95 if k <= df)]


def read_rss_kib(pid: int) -> int | None:
    """Resident set size of the process (VmRSS), KiB; None when it is gone."""
    try:
        for line in (PROC / str(pid) / "status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def read_fds(pid: int) -> int | None:
    """How many descriptors the process has open."""
    try:
        return len(os.listdir(PROC / str(pid) / "fd"))
    except OSError:
        return None


def read_cpu_seconds(pid: int) -> float | None:
    """User + system CPU time the process has used, seconds."""
    try:
        raw = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def read_machine_cpu(proc: Path = PROC) -> tuple[float, float] | None:
    """Seconds of CPU the whole machine has been busy (every CPU, every process: the server,
    the load generators and whatever else runs) and seconds it has been idle, since boot,
    from /proc/stat; None when unreadable."""
    try:
        fields = (proc / "stat").read_text().splitlines()[0].split()
    except (OSError, IndexError):
        return None
    if fields[0] != "cpu":
        return None
    ticks = [int(v) for v in fields[1:]]
    # user nice system idle iowait irq softirq steal (guest time is already in user).
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
    busy = sum(ticks[:8]) - idle
    return busy / CLK_TCK, idle / CLK_TCK


# /proc/net/tcp's state numbers (include/net/tcp_states.h).
TCP_STATES = {
    1: "established",
    2: "syn_sent",
    3: "syn_recv",
    4: "fin_wait1",
    5: "fin_wait2",
    6: "time_wait",
    7: "close",
    8: "close_wait",
    9: "last_ack",
    10: "listen",
    11: "closing",
}


def read_tcp_states(port: int, proc_net: Path = PROC / "net") -> dict[str, int]:
    """The TCP sockets whose local port is `port` (the server's side of its connections, and
    its listeners), counted by state, from /proc/net/tcp and tcp6."""
    counts: dict[str, int] = {}
    for name in ("tcp", "tcp6"):
        try:
            lines = (proc_net / name).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 4 or int(fields[1].rsplit(":", 1)[1], 16) != port:
                continue
            state = TCP_STATES.get(int(fields[3], 16), fields[3])
            counts[state] = counts.get(state, 0) + 1
    return counts


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (0-100), nearest rank; None without values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def slope(ts: list[float], vs: list[float]) -> tuple[float, float]:
    """Least-squares slope of vs over ts, and its standard error (0 with under 3 points)."""
    n = len(ts)
    if n < 3:
        return 0.0, 0.0
    mt, mv = statistics.fmean(ts), statistics.fmean(vs)
    sxx = sum((t - mt) ** 2 for t in ts)
    if sxx == 0:
        return 0.0, 0.0
    b = sum((t - mt) * (v - mv) for t, v in zip(ts, vs, strict=True)) / sxx
    a = mv - b * mt
    residual = sum((v - (a + b * t)) ** 2 for t, v in zip(ts, vs, strict=True))
    return b, math.sqrt(residual / (n - 2) / sxx)


def check_series(
    name: str,
    ts: list[float],
    vs: list[float],
    resolution: float = 0.0,
    level_limit: float = LEVEL_LIMIT,
    trend: bool = True,
) -> dict:
    """The level budget (the last third's median within `level_limit` of the first third's)
    and, with `trend`, the trend budget for one series (after warm-up); a projected growth of
    at most `resolution` (in the series' unit) is no trend."""
    out: dict = {"name": name, "samples": len(vs)}
    if len(vs) < 6:
        out.update(ok=False, failures=[f"{name}: {len(vs)} samples after warm-up, need 6"])
        return out
    third = len(vs) // 3
    first, last = statistics.median(vs[:third]), statistics.median(vs[-third:])
    level = (last - first) / first if first else 0.0
    b, se = slope(ts, vs)
    mean = statistics.fmean(vs)
    span = ts[-1] - ts[0]
    projected = b * span / mean if mean else 0.0
    lower = b - t95(len(vs) - 2) * se
    failures = []
    if abs(level) > level_limit:
        failures.append(
            f"{name}: level moved {level:+.1%} (first third {first:g}, last third {last:g}), "
            f"budget ±{level_limit:.0%}"
        )
    if trend and projected > TREND_LIMIT and lower > 0 and b * span > resolution:
        failures.append(
            f"{name}: upward trend {b * 60:+.3g}/min, {projected:+.1%} over {span:.0f} s "
            f"(95% lower bound of the slope {lower * 60:+.3g}/min > 0)"
        )
    out.update(
        ok=not failures,
        failures=failures,
        first_third_median=first,
        last_third_median=last,
        level_change=round(level, 5),
        slope_per_min=b * 60,
        slope_lower95_per_min=lower * 60,
        projected_change=round(projected, 5),
        min=min(vs),
        max=max(vs),
    )
    return out


def check_budgets(samples: list[dict], warmup: float, server_exit: int | None) -> dict:
    """Every budget over `samples` (dicts with t, rss_kib, fds, p99_ms, errors); `server_exit`
    is the server's status if it exited before the end (None while it ran)."""
    after = [s for s in samples if s["t"] >= warmup and s.get("rss_kib") is not None]
    ts = [s["t"] for s in after]
    # The live heap, where the app reports it; it then judges the trend RSS no longer does.
    heap_samples = [s for s in after if s.get("heap_kib") is not None]
    heap = None
    if heap_samples:
        heap_ts = [s["t"] for s in heap_samples]
        heap_vs = [float(s["heap_kib"]) for s in heap_samples]
        heap = check_series("heap_kib", heap_ts, heap_vs, HEAP_RESOLUTION)
    rss_vs = [float(s["rss_kib"]) for s in after]
    rss = check_series("rss_kib", ts, rss_vs, RSS_RESOLUTION, trend=heap is None)
    fds = check_series("fds", ts, [float(s["fds"]) for s in after], FDS_RESOLUTION)
    timed = [s for s in after if s.get("p99_ms") is not None]
    p99 = check_series(
        "p99_ms",
        [s["t"] for s in timed],
        [float(s["p99_ms"]) for s in timed],
        level_limit=P99_LIMIT,
        trend=False,
    )
    if any("reference" in s for s in samples):
        # The twin controls for the machine: the soaked p99's own level becomes a figure.
        p99 = dict(check_relative_p99(samples, warmup), absolute=p99)
    errors: dict[str, int] = {}
    for s in samples:
        for kind, n in s.get("errors", {}).items():
            errors[kind] = errors.get(kind, 0) + n
    failures = rss["failures"] + (heap["failures"] if heap else []) + fds["failures"]
    failures += p99["failures"]
    if errors:
        failures.append(f"unexpected client errors: {errors}")
    if server_exit is not None:
        failures.append(f"the server exited during the soak (status {server_exit})")
    return {
        "ok": not failures,
        "failures": failures,
        "warmup_seconds": warmup,
        "rss": rss,
        "heap": heap,
        "fds": fds,
        "p99": p99,
        "errors": errors,
    }


def check_relative_p99(samples: list[dict], warmup: float) -> dict:
    """The p99 budget against the twin: each interval's soaked p99 over the twin's p99 in the
    same interval (its `reference`), and `check_series`'s level budget on that ratio (the last
    third's median within `P99_LIMIT` of the first third's); each p99's own thirds beside it."""
    name = "p99_ms relative to a fresh twin"
    pairs = [
        s
        for s in samples
        if s["t"] >= warmup and s.get("p99_ms") and (s.get("reference") or {}).get("p99_ms")
    ]
    ratios = [float(s["p99_ms"]) / float(s["reference"]["p99_ms"]) for s in pairs]
    out = check_series(name, [s["t"] for s in pairs], ratios, level_limit=P99_LIMIT, trend=False)
    third = len(pairs) // 3
    if third:
        for who, pick in (
            ("soaked", lambda s: s["p99_ms"]),
            ("twin", lambda s: s["reference"]["p99_ms"]),
        ):
            values = [float(pick(s)) for s in pairs]
            out[f"{who}_ms"] = {
                "first_third": statistics.median(values[:third]),
                "last_third": statistics.median(values[-third:]),
            }
    return out
