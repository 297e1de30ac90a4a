"""Every run count a profile measures with is one whose intervals' coverage is checked
(test_stats_coverage.RUN_COUNTS); a lane of one run (the open-loop rates) gives no interval, and
the report then decides no target (test_report)."""

from __future__ import annotations

from test_stats_coverage import RUN_COUNTS

from peregrine_lab import config, tls_lanes


def _counts():
    for prof in [*config.PROFILES.values(), tls_lanes.PROFILE]:
        yield prof.name, "profile", prof.runs
        for lane in getattr(prof, "lanes", ()) or ():
            yield prof.name, lane.name, lane.runs or prof.runs
        scaling = getattr(prof, "scaling", None)
        if scaling is not None:
            yield prof.name, "scaling", scaling.runs


def test_profiles_measure_only_run_counts_whose_coverage_is_checked():
    odd = [(p, what, n) for p, what, n in _counts() if n not in RUN_COUNTS and n != 1]
    assert odd == []
    # One run only where no ratio is taken: the open-loop sweep (one pass per rate).
    ones = [(p, what) for p, what, n in _counts() if n == 1]
    assert all(
        ln.mode == "open" for p, what in ones for ln in config.PROFILES[p].lanes if ln.name == what
    )
    assert all(what != "profile" for _p, what in ones)
