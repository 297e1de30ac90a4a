"""The two inputs the runner codes against: the scenario contract (lab/contract/scenarios.json)
and the peers registry (lab/peers/peers.toml)."""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from . import config


class RegistryError(Exception):
    """The contract or the peers registry is malformed or a name is unknown."""


@dataclass(frozen=True)
class Scenario:
    name: str
    title: str
    main: bool
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    expect: dict
    contract_dir: Path

    def summary(self) -> dict:
        return {
            "name": self.name,
            "title": self.title,
            "main": self.main,
            "method": self.method,
            "path": self.path,
            "status": self.expect.get("status"),
        }


@dataclass(frozen=True)
class Contract:
    scenarios: list[Scenario]
    required_headers: list[str]

    def by_name(self, name: str) -> Scenario:
        for s in self.scenarios:
            if s.name == name:
                return s
        raise RegistryError(
            f"unknown scenario {name!r}; the contract has: {', '.join(self.names())}"
        )

    def names(self) -> list[str]:
        return [s.name for s in self.scenarios]

    def select(self, wanted) -> list[Scenario]:
        """`wanted` is None (all), config.MAIN_SCENARIOS, or a list of names (contract order
        kept)."""
        if wanted is None:
            return list(self.scenarios)
        if wanted == config.MAIN_SCENARIOS:
            return [s for s in self.scenarios if s.main]
        names = list(wanted)
        for n in names:
            self.by_name(n)
        return [s for s in self.scenarios if s.name in names]


def load_contract(path: Path = config.SCENARIOS_JSON) -> Contract:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise RegistryError(f"cannot read the scenario contract {path}: {e}") from e
    scenarios = []
    for raw in data.get("scenarios", []):
        req = raw.get("request", {})
        body = req.get("body", "")
        scenarios.append(
            Scenario(
                name=raw["name"],
                title=raw.get("title", raw["name"]),
                main=bool(raw.get("main", False)),
                method=req.get("method", "GET"),
                path=req.get("path", "/"),
                headers=dict(req.get("headers", {})),
                body=body.encode() if isinstance(body, str) else bytes(body),
                expect=dict(raw.get("expect", {})),
                contract_dir=Path(path).parent,
            )
        )
    if not scenarios:
        raise RegistryError(f"the scenario contract {path} lists no scenarios")
    return Contract(
        scenarios=scenarios, required_headers=[h.lower() for h in data.get("required_headers", [])]
    )


@dataclass(frozen=True)
class Peer:
    """One server of peers.toml. `dir` is resolved against lab/peers."""

    name: str
    label: str
    language: str
    kind: str
    dir: Path
    requires: list[str]
    build: list[list[str]]
    run: list[str]
    env: dict[str, str]
    version: list[str]
    scenarios: list[str]
    extra: dict = field(default_factory=dict)
    not_ranked: str = ""
    """Why this row does not represent its server (e.g. an old distribution build): reports then
    show its figures but never rank it (no bold "best", marked ‡). Empty: ranked."""

    @property
    def is_floor(self) -> bool:
        return self.kind == "floor"

    def summary(self) -> dict:
        return {
            "name": self.name,
            "label": self.label,
            "language": self.language,
            "kind": self.kind,
            "scenarios": list(self.scenarios),
            "ranked": not self.not_ranked,
            "not_ranked": self.not_ranked,
        }


def load_peers(path: Path = config.PEERS_TOML) -> list[Peer]:
    try:
        data = tomllib.loads(Path(path).read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise RegistryError(f"cannot read the peers registry {path}: {e}") from e
    peers = []
    seen = set()
    base = Path(path).parent
    for raw in data.get("peer", []):
        try:
            name = raw["name"]
            run = list(raw["run"])
        except KeyError as e:
            raise RegistryError(f"{path}: a [[peer]] lacks {e}") from e
        if name in seen:
            raise RegistryError(f"{path}: peer {name!r} defined twice")
        seen.add(name)
        known = {
            "name",
            "label",
            "language",
            "kind",
            "dir",
            "requires",
            "build",
            "run",
            "env",
            "version",
            "scenarios",
            "not_ranked",
        }
        peers.append(
            Peer(
                name=name,
                label=raw.get("label", name),
                language=raw.get("language", "?"),
                kind=raw.get("kind", "server"),
                dir=(base / raw.get("dir", name)).resolve(),
                requires=list(raw.get("requires", [])),
                build=[list(cmd) for cmd in raw.get("build", [])],
                run=run,
                env={k: str(v) for k, v in raw.get("env", {}).items()},
                version=list(raw.get("version", [])),
                scenarios=list(raw.get("scenarios", [])),
                extra={k: v for k, v in raw.items() if k not in known},
                not_ranked=str(raw.get("not_ranked", "")).strip(),
            )
        )
    if not peers:
        raise RegistryError(f"{path} lists no [[peer]]")
    return peers


def select_peers(peers: list[Peer], wanted) -> list[Peer]:
    """Keep registry order; unknown names are an error that lists the known ones."""
    if not wanted:
        return list(peers)
    names = {p.name for p in peers}
    unknown = [w for w in wanted if w not in names]
    if unknown:
        raise RegistryError(
            f"unknown server(s) {', '.join(unknown)}; peers.toml has: {', '.join(sorted(names))}"
        )
    return [p for p in peers if p.name in wanted]
