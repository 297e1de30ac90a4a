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
