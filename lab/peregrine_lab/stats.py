"""Statistics over repeated runs of one cell: median, coefficient of variation, and bootstrap
confidence intervals of medians and of ratios of medians."""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Iterable


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
