import math

import pytest

from peregrine_lab import stats


def test_median_odd_even_and_missing():
    assert stats.median([3, 1, 2]) == 2
    assert stats.median([4, 1, 3, 2]) == 2.5
    assert stats.median([None, 5.0, float("nan"), 7.0]) == 6.0
    assert stats.median([]) is None
    assert stats.median([None]) is None


def test_cv_is_sample_stdev_over_mean():
    vals = [100.0, 110.0, 90.0]
    # sample stdev of (100, 110, 90) is 10, mean 100
    assert stats.cv(vals) == pytest.approx(0.10)
    assert stats.cv([5.0, 5.0, 5.0]) == 0.0


def test_cv_needs_two_values_and_nonzero_mean():
    assert stats.cv([42.0]) is None
    assert stats.cv([]) is None
    assert stats.cv([0.0, 0.0]) is None


def test_ratio():
    assert stats.ratio(150.0, 100.0) == 1.5
    assert stats.ratio(None, 100.0) is None
    assert stats.ratio(1.0, 0.0) is None
    assert stats.ratio(1.0, None) is None


def test_summarize_skips_missing_values_per_key():
    runs = [{"rps": 100.0, "cpu": 2.0}, {"rps": 120.0, "cpu": None}, {"rps": 110.0}]
    med, spread = stats.summarize(runs, ["rps", "cpu", "absent"])
    assert med == {"rps": 110.0, "cpu": 2.0, "absent": None}
    assert spread["rps"] == pytest.approx(10.0 / 110.0)
    assert spread["cpu"] is None and spread["absent"] is None
    assert not math.isnan(spread["rps"])


def _geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def test_independent_ratio_brackets_the_ratio_of_geometric_means():
    a = [2.0, 2.1, 1.9, 2.05, 1.95, 2.0, 2.02, 1.98, 2.01, 1.99]
    b = [1.0, 1.01, 0.99, 1.02, 0.98, 1.0, 1.0, 1.01, 0.99, 1.0]
    r, (lo, hi) = stats.independent_log_ratio(a, b)
    assert r == pytest.approx(_geomean(a) / _geomean(b))
    assert lo <= r <= hi
    assert 1.9 < lo and hi < 2.1
    # Deterministic: a report regenerated from the same results shows the same interval.
    assert stats.independent_log_ratio(a, b) == (r, (lo, hi))


def test_independent_interval_widens_with_noise_and_needs_two_runs():
    quiet = [1.0, 1.01, 0.99, 1.0, 1.0, 1.01, 0.99, 1.0, 1.0, 1.0]
    noisy = [0.6, 1.4, 0.8, 1.2, 1.0, 0.7, 1.3, 0.9, 1.1, 1.0]
    _, q = stats.independent_log_ratio(quiet, quiet)
    _, n = stats.independent_log_ratio(noisy, quiet)
    assert (n[1] - n[0]) > 5 * (q[1] - q[0])
    assert stats.independent_log_ratio([1.0], quiet) == (pytest.approx(1 / _geomean(quiet)), None)
    assert stats.independent_log_ratio(quiet, [None, 2.0])[1] is None
    # A figure <= 0 has no log: left out; a side with none left has no ratio.
    assert stats.independent_log_ratio([0.0, -1.0], quiet) is None
    # Identical runs: a zero-width interval at the ratio, not a division by zero.
    assert stats.independent_log_ratio([2.0, 2.0], [1.0, 1.0]) == (2.0, (2.0, 2.0))
    lo, hi = stats.median_ci(noisy)
    assert lo <= stats.median(noisy) <= hi


def test_t_quantile_matches_the_table_and_rounds_df_down():
    # Two-sided 95% critical values of Student's t (any statistics table).
    for df, q in [(1, 12.706), (2, 4.303), (3, 3.182), (6, 2.447), (9, 2.262), (39, 2.023)]:
        assert stats.t_quantile(0.95, df) == pytest.approx(q, abs=1e-3)
    assert stats.t_quantile(0.90, 4) == pytest.approx(2.132, abs=1e-3)
    # A Welch df between two table rows takes the wider value (rounded down, never up).
    assert stats.t_quantile(0.95, 1.999) >= stats.t_quantile(0.95, 2)
    assert stats.t_quantile(0.95, 1.0) > stats.t_quantile(0.95, 1.5) > stats.t_quantile(0.95, 2)
    assert stats.t_quantile(0.95, 10_000) == pytest.approx(1.960, abs=1e-3)


def test_target_met_only_when_the_upper_bound_meets_it():
    assert stats.target_met((1.01, 1.04), 1.05) is True
    assert stats.target_met((1.01, 1.06), 1.05) is False  # the median may be under, not enough
    assert stats.target_met(None, 1.05) is None


def _rounds(values, start=1):
    return [{"round": start + i, "cpu": v} for i, v in enumerate(values)]


def _drifting_pair(n=15, true_ratio=1.05, seed=3):
    """Two servers measured in the same rounds on a machine whose load drifts from round to
    round by up to ±30% (shared by both), plus ±1% noise of their own."""
    import random

    rng = random.Random(seed)
    a, b = [], []
    for _ in range(n):
        load = rng.uniform(0.7, 1.3)
        b.append(10.0 * load * rng.gauss(1.0, 0.01))
        a.append(10.0 * true_ratio * load * rng.gauss(1.0, 0.01))
    return a, b


def test_paired_ratio_cancels_a_shared_drift_the_independent_interval_does_not():
    a, b = _drifting_pair()
    paired = stats.ratio_estimate(_rounds(a), _rounds(b), "cpu")
    assert paired.method == stats.PAIRED and paired.rounds == 15
    per_round = [x / y for x, y in zip(a, b, strict=True)]
    assert paired.ratio == pytest.approx(_geomean(per_round))
    assert (paired.ratio, paired.ci) == stats.paired_log_ratio(zip(a, b, strict=True))
    lo, hi = paired.ci
    assert lo <= 1.05 <= hi and hi - lo < 0.03  # the drift is gone: ±1% noise is left
    # The same runs without round numbers: geometric means, Welch on the logs.
    plain = stats.ratio_estimate([{"cpu": v} for v in a], [{"cpu": v} for v in b], "cpu")
    assert plain.method == stats.INDEPENDENT and plain.rounds == 0
    assert plain.ratio == pytest.approx(_geomean(a) / _geomean(b))
    assert (plain.ratio, plain.ci) == stats.independent_log_ratio(a, b)
    assert (plain.ci[1] - plain.ci[0]) > 5 * (hi - lo)


def test_paired_ratio_falls_back_to_independent_without_enough_shared_rounds():
    a, b = _drifting_pair(n=6)
    # Only one round in common (rounds 1-3 against rounds 3-5): independent.
    few = stats.ratio_estimate(_rounds(a[:3]), _rounds(b[:3], start=3), "cpu")
    assert few.method == stats.INDEPENDENT
    assert few.ratio == pytest.approx(_geomean(a[:3]) / _geomean(b[:3]))
    # One side's runs carry no round: independent.
    mixed = stats.ratio_estimate(_rounds(a), [{"cpu": v} for v in b], "cpu")
    assert mixed.method == stats.INDEPENDENT
    # Two runs in one round cannot be paired: independent.
    dup = _rounds(a) + [{"round": 1, "cpu": a[0]}]
    assert stats.ratio_estimate(dup, _rounds(b), "cpu").method == stats.INDEPENDENT
    # Exactly the minimum of shared rounds pairs; missing values leave their round out.
    two = stats.ratio_estimate(_rounds(a[:2]), _rounds(b[:2]), "cpu")
    assert two.method == stats.PAIRED and two.rounds == stats.MIN_PAIRED_ROUNDS == 2
    assert two.ci is not None
    holes = _rounds(a[:3])
    holes[1]["cpu"] = None
    short = stats.ratio_estimate(holes, _rounds(b[:3]), "cpu")
    assert short.method == stats.PAIRED and short.rounds == 2
    assert stats.ratio_method(holes[:2], _rounds(b[:3]), "cpu") == stats.INDEPENDENT
    # No values at all, or a zero reference: no ratio.
    assert stats.ratio_estimate([], _rounds(b), "cpu") is None
    assert stats.ratio_estimate([{"cpu": 1.0}], [{"cpu": 0.0}], "cpu") is None
    # One run a side: a ratio without an interval.
    one = stats.ratio_estimate([{"cpu": 2.0}], [{"cpu": 1.0}], "cpu")
    assert one.ratio == 2.0 and one.ci is None


def test_paired_ratio_is_deterministic_and_matches_rounds_by_number():
    a, b = _drifting_pair(n=10, seed=11)
    first = stats.ratio_estimate(_rounds(a), _rounds(b), "cpu")
    assert stats.ratio_estimate(_rounds(a), _rounds(b), "cpu") == first
    # Round order in the list does not matter: rounds are matched by number.
    again = stats.ratio_estimate(list(reversed(_rounds(a))), _rounds(b), "cpu")
    assert again == first


def test_no_input_breaks_a_ratio():
    inf, nan = float("inf"), float("nan")
    weird = [None, nan, inf, -inf, 0.0, -3.0, 1e-300, 1e300]
    for a in (weird, weird[:4], [2.0, inf, 2.2], []):
        for b in (weird, [1.0, 1.1], [inf, 1.0, 1.2]):
            stats.independent_log_ratio(a, b)
            stats.paired_log_ratio(list(zip(a, b, strict=False)))
            stats.median_ci(a)
            stats.ratio_estimate(_rounds(a), _rounds(b), "cpu")
            stats.ratio_estimate([{"cpu": v} for v in a], [{"cpu": v} for v in b], "cpu")
    # Infinite figures are left out like missing ones, not averaged in.
    r, ci = stats.independent_log_ratio([2.0, inf, 2.0], [1.0, 1.0])
    assert r == pytest.approx(2.0) and ci == (pytest.approx(2.0), pytest.approx(2.0))
