"""Starts the COMMAND of a --server (outside.py) as the server's own process: run by path with
the command as its argument, it replaces `{port}` and `{addr}` with the ADDR the runner gave
(and sets PORT), then execs the command, so the lab's process group, CPU pinning, stop signals
and per-process figures (CPU time, RSS) reach the user's server itself. A simple command
(words, quotes, leading NAME=value settings) is exec'd directly; one that needs a shell (pipes,
`&&`, `$VAR`, globs) runs under `sh -c`, which then stays in the server's process tree. Standard
library only: it runs before anything of the lab is importable."""

import os
import re
import shlex
import sys

_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_SHELL_ONLY = set("$`*?~")


def argv_and_env(command: str, env: dict) -> tuple[list[str], dict]:
    """What to exec for `command`: its words when no shell is needed, else `sh -c command`."""
    try:
        lex = shlex.shlex(command, posix=True, punctuation_chars=True)
        lex.whitespace_split = True
        words = list(lex)
    except ValueError:
        words = []
    needs_shell = not words or any(c in command for c in _SHELL_ONLY)
    needs_shell = needs_shell or any(w and set(w) <= set("();<>|&") for w in words)
    if needs_shell:
        return ["sh", "-c", command], env
    env = dict(env)
    while words and _ASSIGN.match(words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    return (words, env) if words else (["sh", "-c", command], env)


def main() -> None:
    addr = os.environ["ADDR"]
    port = addr.rsplit(":", 1)[1]
    command = sys.argv[1].replace("{port}", port).replace("{addr}", addr)
    argv, env = argv_and_env(command, {**os.environ, "PORT": port})
    try:
        os.execvpe(argv[0], argv, env)
    except OSError as e:
        sys.exit(f"cannot run {argv[0]!r} (from --server command {sys.argv[1]!r}): {e}")


if __name__ == "__main__":
    main()
