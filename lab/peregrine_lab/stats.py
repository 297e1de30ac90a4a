"""Statistics over repeated runs of one cell: median, coefficient of variation, and bootstrap
confidence intervals of medians and of ratios between two cells (paired by round when the runs
were measured in interleaved rounds, independent otherwise)."""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Iterable
from dataclasses import dataclass

PAIRED = "paired"
"""Ratio = median of the per-round ratios over the shared rounds, interval = percentile bootstrap
of that median."""
INDEPENDENT = "independent"
"""Ratio = median / median, interval = percentile bootstrap resampling both sides' runs
independently (the fallback when the runs cannot be paired by round)."""
MIN_PAIRED_ROUNDS = 3
"""Fewest shared rounds for the paired method; with fewer the independent method is used."""


def _clean(values: Iterable[float | None]) -> list[float]:
    return [float(v) for v in values if v is not None and not math.isnan(float(v))]


def median(values: Iterable[float | None]) -> float | None:
    """Median of the values that are present; None when there are none."""
    vals = _clean(values)
    return statistics.median(vals) if vals else None


def cv(values: Iterable[float | None]) -> float | None:
    """Coefficient of variation: sample standard deviation / mean, as a fraction (0.05 = 5%).

    None with fewer than two values (no spread can be estimated) or a zero mean."""
    vals = _clean(values)
    if len(vals) < 2:
        return None
    mean = statistics.fmean(vals)
    if mean == 0:
        return None
    return statistics.stdev(vals) / abs(mean)


def ratio(value: float | None, reference: float | None) -> float | None:
    """value / reference, or None when either is missing or the reference is zero."""
    if value is None or reference is None or reference == 0:
        return None
    return value / reference


def summarize(runs: list[dict], keys: Iterable[str]) -> tuple[dict, dict]:
    """Median and CV of each key over the runs (missing values skipped)."""
    med, spread = {}, {}
    for k in keys:
        vals = [r.get(k) for r in runs]
        med[k] = median(vals)
        spread[k] = cv(vals)
    return med, spread


def bootstrap_ratio_ci(
    values: Iterable[float | None],
    reference: Iterable[float | None],
    *,
    resamples: int = 2000,
    level: float = 0.95,
    seed: int = 1,
) -> tuple[float, float] | None:
    """Percentile bootstrap confidence interval of median(values) / median(reference).

    Each resample draws the runs of both sides with replacement, independently (the runs of two
    servers are separate measurements, interleaved in time); the interval is the central `level`
    share of the resampled ratios. Seeded, so a report regenerated from the same results shows
    the same interval. None when either side has fewer than two runs or a zero median occurs."""
    a, b = _clean(values), _clean(reference)
    if len(a) < 2 or len(b) < 2:
        return None
    rng = random.Random(seed)
    ratios = []
    for _ in range(resamples):
        ra = statistics.median(rng.choices(a, k=len(a)))
        rb = statistics.median(rng.choices(b, k=len(b)))
        if rb == 0:
            return None
        ratios.append(ra / rb)
    ratios.sort()
    tail = (1.0 - level) / 2.0
    lo = ratios[int(math.floor(tail * (resamples - 1)))]
    hi = ratios[int(math.ceil((1.0 - tail) * (resamples - 1)))]
    return lo, hi


@dataclass(frozen=True)
class RatioEstimate:
    """A ratio between two cells with its interval and how both were computed (`PAIRED` or
    `INDEPENDENT`); `rounds` is the number of rounds paired (0 for the independent method)."""

    ratio: float
    ci: tuple[float, float] | None
    method: str
    rounds: int = 0


def paired_rounds(
    runs: Iterable[dict], reference: Iterable[dict], key: str
) -> list[tuple[float, float]] | None:
    """(value, reference value) of `key` for each round both sides measured, in round order.

    None when a run of either side carries no "round" (the runs were not measured in rounds),
    or a side has two runs in one round. Rounds where either value is missing, or the reference
    is zero, are left out."""
    sides = []
    for side in (runs, reference):
        by_round: dict[int, float | None] = {}
        for run in side:
            k = run.get("round")
            if k is None or k in by_round:
                return None
            by_round[k] = run.get(key)
        sides.append(by_round)
    a, b = sides
    pairs = []
    for k in sorted(set(a) & set(b)):
        va, vb = _clean([a[k]]), _clean([b[k]])
        if va and vb and vb[0] != 0:
            pairs.append((va[0], vb[0]))
    return pairs


def ratio_method(
    runs: Iterable[dict], reference: Iterable[dict], key: str, min_rounds: int = MIN_PAIRED_ROUNDS
) -> str:
    """`PAIRED` when `ratio_estimate` would pair the runs by round, else `INDEPENDENT`."""
    pairs = paired_rounds(runs, reference, key)
    return PAIRED if pairs is not None and len(pairs) >= min_rounds else INDEPENDENT


def ratio_estimate(
    runs: Iterable[dict],
    reference: Iterable[dict],
    key: str,
    *,
    min_rounds: int = MIN_PAIRED_ROUNDS,
    resamples: int = 2000,
    level: float = 0.95,
    seed: int = 1,
) -> RatioEstimate | None:
    """The ratio of `key` between the runs of two cells, with its bootstrap `level` interval.

    Paired when both sides' runs carry round numbers and share at least `min_rounds` rounds:
    round k of both cells ran back to back under the same machine load, so the per-round ratio
    cancels the drift both shared; the ratio is the median of the per-round ratios and the
    interval the percentile bootstrap of that median. Otherwise independent: median / median
    with `bootstrap_ratio_ci`. None when there is no ratio (a side without values, or a zero
    reference median); `ci` is None when there are too few runs for an interval. Seeded."""
    runs, reference = list(runs), list(reference)
    pairs = paired_rounds(runs, reference, key)
    if pairs is not None and len(pairs) >= min_rounds:
        # Paired: round k of both cells shared the machine's load at that time.
        per_round = [a / b for a, b in pairs]
        ci = bootstrap_median_ci(per_round, resamples=resamples, level=level, seed=seed)
        return RatioEstimate(statistics.median(per_round), ci, PAIRED, len(pairs))
    a = [r.get(key) for r in runs]
    b = [r.get(key) for r in reference]
    r = ratio(median(a), median(b))
    if r is None:
        return None
    ci = bootstrap_ratio_ci(a, b, resamples=resamples, level=level, seed=seed)
    return RatioEstimate(r, ci, INDEPENDENT)


def bootstrap_median_ci(
    values: Iterable[float | None], *, resamples: int = 2000, level: float = 0.95, seed: int = 1
) -> tuple[float, float] | None:
    """Percentile bootstrap confidence interval of the median of `values` (None with < 2)."""
    a = _clean(values)
    if len(a) < 2:
        return None
    rng = random.Random(seed)
    meds = sorted(statistics.median(rng.choices(a, k=len(a))) for _ in range(resamples))
    tail = (1.0 - level) / 2.0
    return (
        meds[int(math.floor(tail * (resamples - 1)))],
        meds[int(math.ceil((1.0 - tail) * (resamples - 1)))],
    )


def target_met(ci: tuple[float, float] | None, limit: float) -> bool | None:
    """A "lower is better" target is met only when the interval's upper bound is within the
    limit; None when there is no interval to decide with."""
    if ci is None:
        return None
    return ci[1] <= limit
