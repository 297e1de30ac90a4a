"""The JSON Schemas of the lab's documents (lab/schema/): `results-vN.json` for the results.json
of a run whose `schema` field is N, and `resilience-v1.json` for the resource attacks' table
(its own results.json in lab/results/resilience, and a run's `resilience` field)."""

from __future__ import annotations

import json
from pathlib import Path

from . import config

SCHEMA_DIR = config.LAB_DIR / "schema"
RESILIENCE = "resilience-v1.json"


def _validator(name: str):
    import jsonschema
    from referencing import Registry, Resource

    docs = {p.name: json.loads(p.read_text()) for p in SCHEMA_DIR.glob("*.json")}
    if name not in docs:
        raise ValueError(f"no schema {name} in {SCHEMA_DIR}")
    registry = Registry().with_resources((n, Resource.from_contents(d)) for n, d in docs.items())
    cls = jsonschema.validators.validator_for(docs[name])
    cls.check_schema(docs[name])
    return cls(docs[name], registry=registry, format_checker=cls.FORMAT_CHECKER)


def schema_name(doc: dict) -> str:
    """The schema a lab document follows: its `schema` version's, or the resilience table's
    (the one document without that field); seeds, soak and restart runs have layouts of their
    own."""
    if doc.get("profile") in ("seeds", "soak", "restart"):
        return f"{doc['profile']}-v{doc['schema']}.json"
    if "schema" in doc:
        return f"results-v{doc['schema']}.json"
    return RESILIENCE


def problems(doc: dict, name: str | None = None) -> list[str]:
    """What makes `doc` break its schema (`schema_name`, or `name`), one line each: the JSON path
    and the rule; empty when it validates."""
    v = _validator(name or schema_name(doc))
    return [
        f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
        for e in sorted(v.iter_errors(doc), key=lambda e: list(map(str, e.absolute_path)))
    ]


def check_file(path: Path) -> list[str]:
    """`problems` of a results.json file."""
    return problems(json.loads(Path(path).read_text()))
