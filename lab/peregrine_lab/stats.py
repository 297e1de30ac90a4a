"""Statistics over repeated runs of one cell: median and coefficient of variation."""

from __future__ import annotations

import math
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
