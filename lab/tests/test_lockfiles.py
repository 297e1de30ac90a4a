"""Every Rust project of the lab builds with `--locked`: its Cargo.lock must still match what
its Cargo.toml and the crates it takes by path ask for. A lock left behind by a change to the
crates stops that project's profile at its first build ('cannot update the lock file'), which
only a run of that profile would otherwise find."""

from __future__ import annotations

import subprocess

import pytest

from peregrine_lab import config

PROJECTS = sorted(
    p.parent.relative_to(config.REPO_DIR)
    for p in (config.REPO_DIR / "lab").rglob("Cargo.lock")
    if "target" not in p.parts and not any(part.startswith(".") for part in p.parts)
)


def test_the_lab_has_its_rust_projects():
    names = {str(p) for p in PROJECTS}
    assert {"lab/peers/rust", "lab/peers/seeds/rust", "lab/peers/rust-tfb"} <= names


@pytest.mark.parametrize("project", PROJECTS, ids=str)
def test_cargo_lock_is_current(project):
    manifest = config.REPO_DIR / project / "Cargo.toml"
    p = subprocess.run(
        ["cargo", "metadata", "--locked", "--format-version", "1", "--manifest-path", manifest],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, f"{project}: Cargo.lock is stale: {p.stderr.strip()[-400:]}"
