"""The "before" Peregrine: the engine's hello example built from a git ref, so a
profile measures the engine before and after a change in the same interleaved rounds.

The ref's tree is exported with `git archive` into a scratch folder under the lab's build dir
(`lab/.build/before/src-COMMIT`, git ignored) and its release `hello` example built there into
ONE target directory shared by every ref (`CARGO_TARGET_DIR=lab/.build/before/target`: one extra
release target, whatever the ref; crates.io dependencies are reused between refs). The binary is
kept as `lab/.build/before/hello-COMMIT` and the scratch sources deleted after the build, success
or failure; a commit already built is reused. `rm -rf lab/.build` gives the disk back.

The peer is made here, not in peers.toml, because its build and binary depend on the ref given on
the command line (`--before-ref`); it is measured only where a profile or `--servers` names it.
Its build step is this module's command line, so the runner builds it like any other peer (log in
`logs/build-peregrine-hello-before.log`):

    python3 -m peregrine_lab.before COMMIT [--repo DIR] [--build-dir DIR]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tarfile
from dataclasses import asdict, dataclass
from pathlib import Path

from . import config
from .build import build_env
from .peers import Peer

NAME = "peregrine-hello-before"
DEFAULT_REF = "5b5bd28f27b6dfcfd12e1ae69a651c716ad69683"
"""The last commit on main dated 2026-11-22 (`git log --first-parent --until=2026-11-23 -1
main`): the engine as it stood before the work on its four lanes."""
BUILD_DIR = config.LAB_DIR / ".build" / "before"
REPO_DIR = config.REPO_DIR
"""The repository refs are resolved in (module attributes, read at each call, so tests can point
them at a scratch repository and build dir)."""
CARGO_ARGS = ("build", "--release", "-p", "peregrine-server", "--example", "hello")
BUILT = Path("release") / "examples" / "hello"
"""Where cargo leaves the example, under the target directory."""


class BeforeError(Exception):
    """The ref does not name a commit, or its hello example cannot be exported or built."""


@dataclass(frozen=True)
class Revision:
    """A ref as given and the commit it names (with its committer date and subject)."""

    ref: str
    commit: str
    date: str
    subject: str

    @property
    def short(self) -> str:
        return self.commit[:12]

    def to_json(self) -> dict:
        return asdict(self)


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(
            ["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise BeforeError(f"git {' '.join(args)} failed: {e}") from e


def resolve(ref: str, repo: Path | None = None) -> Revision:
    """The commit `ref` names in `repo` (a branch, tag, sha, `main~3`...), or BeforeError."""
    repo = Path(repo or REPO_DIR)
    p = _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if p.returncode != 0 or not p.stdout.strip():
        raise BeforeError(f"--before-ref {ref!r} names no commit in {repo}")
    commit = p.stdout.strip()
    p = _git(repo, "log", "-1", "--format=%cI%n%s", commit)
    date, _, subject = p.stdout.rstrip("\n").partition("\n")
    return Revision(ref=ref, commit=commit, date=date, subject=subject)


def binary_path(commit: str, build_dir: Path | None = None) -> Path:
    return Path(build_dir or BUILD_DIR) / f"hello-{commit[:12]}"


def build(
    commit: str,
    *,
    repo: Path | None = None,
    build_dir: Path | None = None,
    log=sys.stdout,
) -> Path:
    """Build the hello example of `commit` (reused when already built); returns the binary."""
    repo, build_dir = Path(repo or REPO_DIR), Path(build_dir or BUILD_DIR)
    out = binary_path(commit, build_dir)
    if out.exists():
        print(f"{out} already built for {commit}: reused", file=log, flush=True)
        return out
    src = build_dir / f"src-{commit[:12]}"
    target = build_dir / "target"
    shutil.rmtree(src, ignore_errors=True)
    src.mkdir(parents=True)
    try:
        print(f"git archive {commit} -> {src}", file=log, flush=True)
        _export(repo, commit, src)
        env = build_env()
        env["CARGO_TARGET_DIR"] = str(target)
        cmd = ["cargo", *CARGO_ARGS]
        print(f"$ CARGO_TARGET_DIR={target} {' '.join(cmd)}  (in {src})", file=log, flush=True)
        try:
            p = subprocess.run(
                cmd, cwd=src, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=1800
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            raise BeforeError(f"{' '.join(cmd)} failed: {e}") from e
        if p.returncode != 0:
            raise BeforeError(f"{' '.join(cmd)} exited with {p.returncode} for {commit}")
        built = target / BUILT
        if not built.is_file():
            raise BeforeError(f"cargo reported success but left no {built}")
        # Copy, then rename: an interrupted copy never looks like a finished build.
        tmp = out.with_name(out.name + ".tmp")
        shutil.copy2(built, tmp)
        tmp.replace(out)
    finally:
        shutil.rmtree(src, ignore_errors=True)
    print(f"built {out}; scratch sources {src} deleted", file=log, flush=True)
    return out


def _export(repo: Path, commit: str, dest: Path) -> None:
    """The commit's tree into `dest` (`git archive`: no worktree to register or prune)."""
    try:
        proc = subprocess.Popen(
            ["git", "-C", str(repo), "archive", "--format=tar", commit],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
    except OSError as e:
        raise BeforeError(f"git archive failed: {e}") from e
    try:
        with tarfile.open(fileobj=proc.stdout, mode="r|") as tar:
            tar.extractall(dest, filter="data")
    except tarfile.TarError as e:
        proc.kill()
        raise BeforeError(f"git archive {commit}: unreadable archive: {e}") from e
    finally:
        proc.stdout.close()
        err = proc.stderr.read().decode(errors="replace").strip()
        rc = proc.wait()
        proc.stderr.close()
    if rc != 0:
        raise BeforeError(f"git archive {commit} exited with {rc}: {err}")


def peer(rev: Revision, repo: Path | None = None, build_dir: Path | None = None) -> Peer:
    """The peer measured as `peregrine-hello-before`: built by `build` through this module's
    command line, run from its kept binary with the same environment as peregrine-hello."""
    repo, build_dir = Path(repo or REPO_DIR), Path(build_dir or BUILD_DIR)
    binary = binary_path(rev.commit, build_dir)
    return Peer(
        name=NAME,
        label=f"Peregrine engine (hello) before: {rev.commit[:7]} of {rev.date[:10]}",
        language="Rust",
        kind="server",
        # The build step runs `python3 -m peregrine_lab.before` from here.
        dir=config.LAB_DIR,
        requires=["cargo", "git"],
        build=[
            [
                sys.executable,
                "-m",
                "peregrine_lab.before",
                rev.commit,
                "--repo",
                str(repo),
                "--build-dir",
                str(build_dir),
            ]
        ],
        run=[str(binary)],
        env={},
        version=[
            "git",
            "-C",
            str(repo),
            "log",
            "-1",
            "--format=peregrine-server %h (%cs)",
            rev.commit,
        ],
        scenarios=["plaintext"],
        extra={"ref": rev.ref, "commit": rev.commit, "binary": str(binary)},
    )


def with_before(peers: list[Peer], wanted: list[str] | None, ref: str):
    """The registry with the before peer added right after peregrine-hello when `wanted` names
    it (and the registry does not define one): (peers, Revision or None)."""
    if not wanted or NAME not in wanted or any(p.name == NAME for p in peers):
        return peers, None
    rev = resolve(ref)
    out = list(peers)
    at = next((i + 1 for i, p in enumerate(out) if p.name == "peregrine-hello"), len(out))
    out.insert(at, peer(rev))
    return out, rev


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python3 -m peregrine_lab.before",
        description="Build the hello example of a git ref into the lab's build dir.",
    )
    p.add_argument("ref", help="commit, branch or tag")
    p.add_argument("--repo", type=Path, default=None, help=f"default {REPO_DIR}")
    p.add_argument("--build-dir", type=Path, default=None, help=f"default {BUILD_DIR}")
    args = p.parse_args(argv)
    try:
        rev = resolve(args.ref, args.repo)
        out = build(rev.commit, repo=args.repo, build_dir=args.build_dir)
    except BeforeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
