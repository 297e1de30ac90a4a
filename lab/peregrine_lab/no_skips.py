"""A pytest plugin that fails a run in which any test was skipped: `scripts/test` loads it
(`-p peregrine_lab.no_skips`), because it installs and builds everything the tests need first,
so a skip there means a test that CI does not run, which is as good as no test.

The skips are still reported as skips (`-rs` lists each with its reason); the run's exit status
becomes 1 and the summary says why. Expected failures (`xfail`) are not skips and stay allowed.

    PYTHONPATH=lab python3 -m pytest -p peregrine_lab.no_skips -rs lab/tests
"""

from __future__ import annotations

import pytest

_skipped: list[str] = []


def _count(report) -> None:
    # An xfailed test is reported as skipped with `wasxfail` set: it ran, so it is not a skip.
    if report.skipped and not hasattr(report, "wasxfail"):
        _skipped.append(report.nodeid)


def pytest_sessionstart(session) -> None:
    _skipped.clear()


def pytest_runtest_logreport(report) -> None:
    _count(report)


def pytest_collectreport(report) -> None:
    # A whole module skipped at import (`pytest.skip(..., allow_module_level=True)`).
    _count(report)


def pytest_sessionfinish(session, exitstatus) -> None:
    # Only a run that would pass changes: a failure or an error keeps its own status.
    if _skipped and exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter) -> None:
    if _skipped:
        terminalreporter.write_line(
            f"no_skips: {len(_skipped)} test(s) skipped, and a skip fails this run: install or "
            "build what they need in scripts/setup or scripts/test (`-rs` lists the reasons), or "
            "remove the test",
            red=True,
        )
