"""`./scripts/lab build` (cli `build`): the registry's build commands run in each peer's folder as
a profile run does them, a step shared by peers once, and any server not built fails the
command, one whose toolchain is missing too (scripts/test relies on that)."""

from pathlib import Path

from peregrine_lab import cli

REGISTRY = """
[[peer]]
name = "one"
dir = "one"
requires = ["sh"]
build = [["sh", "-c", "echo built >> made"]]
run = ["./server"]
scenarios = ["plaintext"]

[[peer]]
name = "one-variant"
dir = "one"
requires = ["sh"]
build = [["sh", "-c", "echo built >> made"]]
run = ["./server"]
scenarios = ["plaintext"]

[[peer]]
name = "two"
dir = "two"
requires = ["sh"]
build = [["sh", "-c", "echo compiling; exit 3"]]
run = ["./server"]
scenarios = ["plaintext"]

[[peer]]
name = "notool"
dir = "one"
requires = ["no-such-toolchain-for-tests"]
build = [["no-such-toolchain-for-tests"]]
run = ["./server"]
scenarios = ["plaintext"]
"""


def _registry(tmp_path: Path) -> Path:
    for d in ("one", "two"):
        (tmp_path / d).mkdir()
    toml = tmp_path / "peers.toml"
    toml.write_text(REGISTRY)
    return toml


def test_build_runs_each_step_once_in_the_peer_folder(tmp_path, capsys):
    toml = _registry(tmp_path)
    logs = tmp_path / "logs"
    rc = cli.main(
        ["build", "--peers", str(toml), "--servers", "one,one-variant", "--out", str(logs)]
    )
    assert rc == 0
    assert (tmp_path / "one" / "made").read_text() == "built\n"  # shared step: once
    out = capsys.readouterr().out
    assert "[build 1/2] one: built" in out and "[build 2/2] one-variant: built" in out
    assert "s; 0:00 elapsed, ~0:00 left)" in out  # the builds' countdown (eta.py)
    assert "built 2 server(s)" in out
    assert "already run for another peer: ok" in (logs / "build-one-variant.log").read_text()


def test_a_failed_build_fails_the_command_and_names_the_server(tmp_path, capsys):
    toml = _registry(tmp_path)
    rc = cli.main(["build", "--peers", str(toml), "--servers", "two", "--out", str(tmp_path / "l")])
    assert rc == 1
    captured = capsys.readouterr()
    assert "exited with 3" in captured.out and "compiling" in captured.out
    assert "not built: two" in captured.err


def test_a_missing_toolchain_is_a_failure_not_a_skip(tmp_path, capsys):
    toml = _registry(tmp_path)
    rc = cli.main(["build", "--peers", str(toml), "--out", str(tmp_path / "l")])
    assert rc == 1
    captured = capsys.readouterr()
    assert "notool: NOT BUILT: skipped: needs no-such-toolchain-for-tests" in captured.out
    assert "not built: two, notool" in captured.err


def test_an_unknown_server_lists_the_known_ones(tmp_path, capsys):
    toml = _registry(tmp_path)
    assert cli.main(["build", "--peers", str(toml), "--servers", "three"]) == 1
    assert "unknown server(s) three" in capsys.readouterr().err
