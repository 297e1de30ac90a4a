"""Servers named on the command line (`--server 'NAME=COMMAND;port=N;scenarios=a,b;ready=/p'`),
measured beside the registered peers by the same runner: each becomes a `Peer` with nothing to
build whose run command is `launch.py COMMAND`.

The port: the runner gives every server `ADDR=127.0.0.1:PORT` (as it does every peer); the
launcher also sets `PORT` and replaces `{port}` (and `{addr}`) in COMMAND, so a server that takes
its port as an argument works too. A server that listens on one port whatever it is told says so
with `port=N`: the lab then starts it on N every time (checks.fixed_port). The fields after
COMMAND are the trailing `;key=value` parts whose key is one of `FIELDS`; any other `;` stays in
the command (a shell command may hold one)."""

from __future__ import annotations

import re
import sys
from dataclasses import replace
from pathlib import Path

from .peers import Peer, RegistryError
from .procs import READY_ENV

FIELDS = ("port", "scenarios", "ready", "label")
"""The `;key=value` fields a --server may end with."""

_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,39}$")
_FIELD = re.compile(r";\s*([a-z]+)=([^;]*)$")

LAUNCHER = Path(__file__).with_name("launch.py")
"""Run by path (stdlib only), so it works whatever the server's PYTHONPATH."""


def parse(spec: str, known: set[str] | frozenset[str] = frozenset()) -> Peer:
    """The `Peer` of one --server value; a RegistryError that says what is wrong otherwise.
    `known` are the registry's names, which a --server may not take.

    >>> p = parse("mine=./srv --port {port};scenarios=plaintext,json;ready=/health")
    >>> p.name, p.scenarios, p.env, p.run[-1]
    ('mine', ['plaintext', 'json'], {'PEREGRINE_LAB_READY': '/health'}, './srv --port {port}')
    >>> parse("theirs=./srv;port=8080").extra
    {'command': './srv', 'port': 8080}
    """
    name, sep, rest = spec.partition("=")
    name = name.strip()
    if not sep or not rest.strip():
        raise RegistryError(
            f"--server {spec!r}: expected NAME=COMMAND[;port=N][;scenarios=a,b][;ready=/p]"
        )
    if not _NAME.match(name):
        raise RegistryError(
            f"--server {spec!r}: the name {name!r} must be lower-case letters, digits, '-', "
            "'_' or '.' (at most 40), starting with a letter or digit"
        )
    if name in known:
        raise RegistryError(f"--server {name!r}: a registered peer has that name; choose another")
    fields: dict[str, str] = {}
    command = rest
    while m := _FIELD.search(command):
        key, value = m.group(1), m.group(2).strip()
        if key not in FIELDS:
            break  # a `;` of the shell command, not a field
        if key in fields:
            raise RegistryError(f"--server {name!r}: {key}= given twice")
        fields[key] = value
        command = command[: m.start()]
    command = command.strip()
    if not command:
        raise RegistryError(f"--server {name!r}: no command to start the server")
    scenarios = [s.strip() for s in fields.get("scenarios", "").split(",") if s.strip()]
    ready = fields.get("ready", "")
    if ready and not ready.startswith("/"):
        raise RegistryError(f"--server {name!r}: ready={ready!r} must be a path starting with /")
    extra: dict = {"command": command}
    if "port" in fields:
        extra["port"] = _port(name, fields["port"])
    return Peer(
        name=name,
        label=fields.get("label") or f"{name} (--server)",
        language="?",
        kind="server",
        dir=Path.cwd(),
        requires=["sh"],
        build=[],
        run=[sys.executable, str(LAUNCHER), command],
        env={READY_ENV: ready} if ready else {},
        version=[],
        scenarios=scenarios,
        extra=extra,
    )


def _port(name: str, text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise RegistryError(f"--server {name!r}: port={text!r} must be a port number, 1 to 65535")
    return int(text)


def parse_all(specs: list[str] | None, known: set[str], contract_names: list[str]) -> list[Peer]:
    """Every --server, in order; a server without `scenarios=` gets every scenario of the run's
    contract (the db profile's: contract/db.json), and one naming a scenario the contract lacks
    is an error."""
    out: list[Peer] = []
    for spec in specs or []:
        peer = parse(spec, known | {p.name for p in out})
        # The cells run every server at once, so two cannot share a fixed port.
        port = peer.extra.get("port")
        same = [p.name for p in out if port is not None and p.extra.get("port") == port]
        if same:
            raise RegistryError(
                f"--server {peer.name!r}: port={port} is {same[0]}'s too; the servers of a run "
                "listen at the same time"
            )
        unknown = [s for s in peer.scenarios if s not in contract_names]
        if unknown:
            raise RegistryError(
                f"--server {peer.name!r}: unknown scenario(s) {', '.join(unknown)}; the contract "
                f"has: {', '.join(contract_names)}"
            )
        scenarios = peer.scenarios or list(contract_names)
        # The db profile keeps the peers that list `db_scenarios` (database.db_peers).
        extra = {**peer.extra, "db_scenarios": scenarios}
        out.append(replace(peer, scenarios=scenarios, extra=extra))
    return out


def join(registry: list[Peer], wanted: list[str] | None, outside: list[Peer]):
    """The registry with the named servers added, and the servers to measure: a profile's (or
    --servers') selection plus every named server, unless --servers names some of them."""
    if not outside:
        return registry, wanted
    names = [p.name for p in outside]
    if wanted is not None and not set(names) & set(wanted):
        wanted = list(wanted) + names
    return registry + list(outside), wanted
