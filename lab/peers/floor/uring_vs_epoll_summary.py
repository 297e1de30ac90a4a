"""Summary of uring-vs-epoll.sh's raw.csv: per cell, each floor's median CPU µs per request and
median p99, and the ratio uring/epoll (paired by round): median, min-max and a bootstrap 95%
interval of the median (10,000 resamples of the rounds, fixed seed so the table is reproducible).

usage: python3 uring_vs_epoll_summary.py raw.csv
"""

import csv
import random
import statistics
import sys
from collections import defaultdict

CELLS = {"c1": "c=1", "c50": "c=50", "c1000": "c=1000", "c50p16": "c=50, 16 pipelined"}
RESAMPLES = 10_000


def bootstrap_median(values, rng):
    """The 2.5th and 97.5th percentiles of the median over resamples of `values`."""
    medians = sorted(
        statistics.median(rng.choices(values, k=len(values))) for _ in range(RESAMPLES)
    )
    return medians[int(0.025 * RESAMPLES)], medians[int(0.975 * RESAMPLES) - 1]


def main(path):
    rows = defaultdict(dict)  # (cell, round) -> floor -> row
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            rows[(row["cell"], int(row["round"]))][row["floor"]] = row
    rng = random.Random(16)
    print(
        "| lane | epoll CPU µs/req | uring CPU µs/req | epoll p99 µs | uring p99 µs "
        "| ratio uring/epoll (median) | min–max | bootstrap 95% of median | rounds |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for cell, label in CELLS.items():
        pairs = [
            v for (c, _), v in sorted(rows.items()) if c == cell and {"uring", "epoll"} <= v.keys()
        ]
        if not pairs:
            continue
        per = {
            f: [int(p[f]["cpu_ns"]) / int(p[f]["requests"]) / 1000 for p in pairs]
            for f in ("epoll", "uring")
        }
        p99 = {f: [float(p[f]["p99_us"]) for p in pairs] for f in ("epoll", "uring")}
        ratios = [u / e for u, e in zip(per["uring"], per["epoll"], strict=True)]
        lo, hi = bootstrap_median(ratios, rng)
        med = {f: statistics.median(per[f]) for f in per}
        print(
            f"| {label} | {med['epoll']:.3f} | {med['uring']:.3f} "
            f"| {statistics.median(p99['epoll']):.0f} | {statistics.median(p99['uring']):.0f} "
            f"| {statistics.median(ratios):.3f} | {min(ratios):.3f}–{max(ratios):.3f} "
            f"| {lo:.3f}–{hi:.3f} | {len(ratios)} |"
        )
    errors = sum(int(r["socket_errors"]) for v in rows.values() for r in v.values())
    print(f"\nwrk socket errors over all measurements: {errors}")


if __name__ == "__main__":
    main(sys.argv[1])
