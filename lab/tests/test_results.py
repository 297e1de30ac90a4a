"""What a run records about the code it measured (results.git_info)."""

from __future__ import annotations

import subprocess

from peregrine_lab import results


def _git(repo, *args):
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def test_uncommitted_results_do_not_make_the_code_dirty_but_a_code_change_does(tmp_path):
    for d in ("lab/results/quick", "crates"):
        (tmp_path / d).mkdir(parents=True)
    (tmp_path / "lab/results/quick/results.json").write_text("{}\n")
    (tmp_path / "crates/lib.rs").write_text("fn a() {}\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "-c", "user.email=lab@example.org", "-c", "user.name=lab", "add", "-A")
    _git(tmp_path, "-c", "user.email=lab@example.org", "-c", "user.name=lab", "commit", "-qm", "a")
    clean = results.git_info(tmp_path)
    assert clean["dirty"] is False and len(clean["commit"]) == 40
    # Another profile's results, written while this run starts: the code is still as committed.
    (tmp_path / "lab/results/quick/results.json").write_text('{"new": 1}\n')
    assert results.git_info(tmp_path)["dirty"] is False
    (tmp_path / "crates/lib.rs").write_text("fn b() {}\n")
    dirty = results.git_info(tmp_path)
    assert dirty["dirty"] is True and dirty["describe"] == clean["describe"] + "-dirty"
