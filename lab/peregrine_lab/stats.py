"""Statistics over repeated runs of one cell: median, coefficient of variation, and confidence
intervals of a cell's median and of ratios between two cells (paired by round when the runs were
measured in interleaved rounds, independent otherwise).

Ratio intervals are Student t intervals on the logarithms of the runs: the lab's figures are
positive and their noise multiplicative, so a log turns a ratio into a difference of means. The
percentile bootstrap used before covered the true ratio in only ~51% (paired) / 68%
(independent) of simulated experiments at 2 runs and 89% / 96% at 7; these keep >= 93% at every
run count the profiles use (tests/test_stats_coverage.py checks it by simulation; the method is
in docs/measuring.md)."""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass

PAIRED = "paired"
"""Ratio = geometric mean of the per-round ratios over the shared rounds, interval = paired t
interval on the log ratios (n - 1 degrees of freedom)."""
INDEPENDENT = "independent"
"""Ratio = geometric mean / geometric mean, interval = Welch t interval on the difference of the
mean logs (the fallback when the runs cannot be paired by round)."""
MIN_PAIRED_ROUNDS = 2
"""Fewest shared rounds for the paired method (one difference of two rounds' log ratios is the
least a t interval can use); with fewer the independent method is used."""


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


def _loggable(v: float) -> bool:
    """A figure a ratio can use: positive and finite (<= 0 has no log, inf would poison a mean)."""
    return v > 0 and math.isfinite(v)


def _logs(values: Iterable[float | None]) -> list[float]:
    """Natural logs of the figures `_loggable` keeps."""
    return [math.log(v) for v in _clean(values) if _loggable(v)]


def _exp(x: float) -> float:
    """exp that saturates to inf instead of raising (an interval's bound of extreme figures)."""
    return math.inf if x > 709.0 else math.exp(x)


def _mean_var(xs: list[float]) -> tuple[float, float]:
    """Mean and sample variance (n - 1) of two or more floats; plain float arithmetic, since
    `statistics.variance` computes in exact fractions and is ~20x slower."""
    mean = math.fsum(xs) / len(xs)
    return mean, math.fsum((x - mean) ** 2 for x in xs) / (len(xs) - 1)


def _beta_cf(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularised incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        for num in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def _beta_inc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta function I_x(a, b), 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    # The continued fraction converges fast only on one side of the mean; use symmetry past it.
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_cf(a, b, x) / a
    return 1.0 - front * _beta_cf(b, a, 1.0 - x) / b


def _t_tail(t: float, df: float) -> float:
    """P(T > t) for Student's t with `df` (real, > 0) degrees of freedom, t >= 0."""
    return 0.5 * _beta_inc(df / 2.0, 0.5, df / (df + t * t))


def t_quantile(level: float, df: float) -> float:
    """The two-sided critical value of Student's t: P(|T| <= q) = `level` with `df` degrees of
    freedom. A fractional df (Welch's) is first rounded down to 0.01 below 10, 0.1 below 100 and
    1 above, which can only widen an interval, so that results are cached.

    >>> round(t_quantile(0.95, 1), 3), round(t_quantile(0.95, 9), 3)
    (12.706, 2.262)"""
    step = 0.01 if df < 10 else 0.1 if df < 100 else 1.0
    return _t_quantile(level, max(step, math.floor(df / step + 1e-9) * step))


@functools.lru_cache(maxsize=4096)
def _t_quantile(level: float, df: float) -> float:
    """`t_quantile` for an exact df, by bisection on the exact tail."""
    tail = (1.0 - level) / 2.0
    lo, hi = 0.0, 1.0
    while _t_tail(hi, df) > tail:
        hi *= 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if _t_tail(mid, df) > tail:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * hi:
            break
    return (lo + hi) / 2.0


def paired_log_ratio(
    pairs: Iterable[tuple[float, float]], level: float = 0.95
) -> tuple[float, tuple[float, float] | None] | None:
    """Geometric mean of the ratios a / b of the pairs, with the paired t interval of `level` on
    their logs: exp(mean ± t(n-1) · sd / √n). None without a pair whose sides are both positive;
    the interval is None with a single pair."""
    d = []
    for a, b in pairs:
        ca, cb = _clean([a]), _clean([b])
        if ca and cb and _loggable(ca[0]) and _loggable(cb[0]):
            d.append(math.log(ca[0]) - math.log(cb[0]))
    if not d:
        return None
    if len(d) < 2:
        return _exp(d[0]), None
    mean, var = _mean_var(d)
    half = t_quantile(level, len(d) - 1) * math.sqrt(var / len(d))
    return _exp(mean), (_exp(mean - half), _exp(mean + half))


def independent_log_ratio(
    values: Iterable[float | None], reference: Iterable[float | None], level: float = 0.95
) -> tuple[float, tuple[float, float] | None] | None:
    """Geometric mean of `values` over that of `reference`, with the Welch t interval of `level`
    on the difference of their mean logs (Welch-Satterthwaite degrees of freedom: the two sides
    may be noisier than each other). None when a side has no positive value; the interval is
    None when a side has fewer than two."""
    a, b = _logs(values), _logs(reference)
    if not a or not b:
        return None
    if len(a) < 2 or len(b) < 2:
        return _exp(math.fsum(a) / len(a) - math.fsum(b) / len(b)), None
    (ma, va), (mb, vb) = _mean_var(a), _mean_var(b)
    diff = ma - mb
    va, vb = va / len(a), vb / len(b)
    se = math.sqrt(va + vb)
    if se == 0.0:
        return _exp(diff), (_exp(diff), _exp(diff))
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    half = t_quantile(level, df) * se
    return _exp(diff), (_exp(diff - half), _exp(diff + half))


def median_ci(values: Iterable[float | None], level: float = 0.95) -> tuple[float, float] | None:
    """Distribution-free interval of a cell's median: the order statistics x(k) and x(n+1-k) with
    the largest k whose binomial coverage 1 - 2·P(Bin(n, ½) < k) is still >= `level`. It holds
    whatever the noise's shape; None when even [min, max] covers less (n < 6 for 95%).

    >>> median_ci([5, 1, 4, 2, 3, 6])
    (1.0, 6.0)"""
    a = sorted(_clean(values))
    n = len(a)
    best = None
    below = 0.0  # P(Bin(n, 1/2) <= k - 1)
    for k in range(1, n // 2 + 1):
        below += math.comb(n, k - 1) / 2.0**n
        if 1.0 - 2.0 * below < level:
            break
        best = k
    if best is None:
        return None
    return a[best - 1], a[n - best]


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
    or a side has two runs in one round. Rounds where either value is missing, not positive or
    not finite (a ratio of logs needs both) are left out."""
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
        if va and vb and _loggable(va[0]) and _loggable(vb[0]):
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
    level: float = 0.95,
) -> RatioEstimate | None:
    """The ratio of `key` between the runs of two cells, with its `level` confidence interval.

    Paired when both sides' runs carry round numbers and share at least `min_rounds` rounds:
    round k of both cells ran back to back under the same machine load, so the per-round ratio
    cancels the drift both shared; the ratio is the geometric mean of the per-round ratios and
    the interval the paired t interval on their logs (`paired_log_ratio`). Otherwise
    independent: geometric mean / geometric mean with the Welch t interval on the logs
    (`independent_log_ratio`). None when there is no ratio (a side without a positive value);
    `ci` is None when there are too few runs for an interval. Deterministic.

    >>> est = ratio_estimate([{"round": 1, "cpu": 2.0}, {"round": 2, "cpu": 4.4}],
    ...                      [{"round": 1, "cpu": 1.0}, {"round": 2, "cpu": 2.0}], "cpu")
    >>> est.method, round(est.ratio, 3), est.ci is not None
    ('paired', 2.098, True)"""
    runs, reference = list(runs), list(reference)
    pairs = paired_rounds(runs, reference, key)
    if pairs is not None and len(pairs) >= min_rounds:
        # Paired: round k of both cells shared the machine's load at that time.
        r, ci = paired_log_ratio(pairs, level)
        return RatioEstimate(r, ci, PAIRED, len(pairs))
    found = independent_log_ratio(
        [x.get(key) for x in runs], [x.get(key) for x in reference], level
    )
    if found is None:
        return None
    return RatioEstimate(found[0], found[1], INDEPENDENT)


def target_met(ci: tuple[float, float] | None, limit: float) -> bool | None:
    """A "lower is better" target is met only when the interval's upper bound is within the
    limit; None when there is no interval to decide with."""
    if ci is None:
        return None
    return ci[1] <= limit
