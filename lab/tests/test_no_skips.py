"""The no_skips plugin scripts/test loads: a real pytest run over a scratch test file, once with
the plugin and once without, so the difference is the plugin's alone."""

import os
import subprocess
import sys
from pathlib import Path

LAB = Path(__file__).resolve().parents[1]


def _pytest(tmp_path: Path, source: str, plugin: bool = True) -> subprocess.CompletedProcess:
    (tmp_path / "test_scratch.py").write_text(source)
    cmd = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider"]
    if plugin:
        cmd += ["-p", "peregrine_lab.no_skips"]
    env = {**os.environ, "PYTHONPATH": str(LAB)}
    return subprocess.run(
        [*cmd, str(tmp_path)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )


SKIPPING = """
import pytest

def test_runs():
    assert True

@pytest.mark.skipif(True, reason="tool not installed")
def test_needs_a_tool():
    assert True

def test_skips_itself():
    pytest.skip("peer not built")
"""


def test_a_skip_fails_the_run_and_is_still_listed_with_its_reason(tmp_path):
    without = _pytest(tmp_path, SKIPPING, plugin=False)
    assert without.returncode == 0, without.stdout  # pytest alone: skips pass silently
    done = _pytest(tmp_path, SKIPPING)
    assert done.returncode == 1, done.stdout
    assert "1 passed, 2 skipped" in done.stdout
    assert "tool not installed" in done.stdout and "peer not built" in done.stdout
    assert "no_skips: 2 test(s) skipped" in done.stdout


def test_a_module_skipped_at_import_fails_the_run(tmp_path):
    source = 'import pytest\npytest.skip("no such module", allow_module_level=True)\n'
    assert _pytest(tmp_path, source, plugin=False).returncode in (0, 5)
    done = _pytest(tmp_path, source)
    assert done.returncode == 1, done.stdout
    assert "no_skips: 1 test(s) skipped" in done.stdout


def test_passes_and_expected_failures_leave_the_run_green(tmp_path):
    source = """
import pytest

def test_runs():
    assert True

@pytest.mark.xfail(reason="known", strict=True)
def test_known_failure():
    assert False
"""
    done = _pytest(tmp_path, source)
    assert done.returncode == 0, done.stdout
    assert "1 passed, 1 xfailed" in done.stdout and "no_skips" not in done.stdout


def test_a_failure_stays_a_failure(tmp_path):
    done = _pytest(tmp_path, "def test_fails():\n    assert False\n")
    assert done.returncode == 1 and "1 failed" in done.stdout
