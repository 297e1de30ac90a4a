"""Loading the hand-written case corpus (``probe/corpus/*.toml``).

Each file holds one category of ``docs/http1-rules.md``; its name starts with the category
letter (``A-request-line.toml``). A file has a ``category`` and ``title`` at top level and an
array of ``[[case]]`` tables:

``id``            unique, e.g. ``"A-017"``
``description``   one line, what the case sends and why it matters
``raw``           the bytes to send, in the escape syntax of :mod:`probelib.escapes`
                  (use TOML literal strings ``'...'`` so TOML leaves backslashes alone)
``parts``         instead of ``raw``: a list of strings sent as separate writes, ``gap`` seconds
                  apart (default 0.05)
``expect``        ``"accept"``: ``responses`` (default 1) final responses whose status matches
                  ``status`` (a class like ``"2xx"`` or a list of codes; default ``"2xx"``);
                  ``"reject"``: after ``responses`` (default 0) accepted responses, exactly one
                  response with a status in ``statuses`` (default ``[400]``), then the server
                  closes; nothing else is answered;
                  ``"close"``: after ``responses`` (default 0) accepted responses the server
                  closes, answering at most one error (>= 400) response, never anything else.
``level``         ``"MUST"`` or ``"SHOULD"`` (the RFC's word, or SHOULD for this project's
                  stricter choices where the RFC leaves a choice)
``ref``           RFC section
``checks``        optional list of extra checks on responses: ``date`` (every final response has
                  Date), ``close_header`` (last response says ``Connection: close``),
                  ``keep_alive_header`` (first response says ``Connection: keep-alive``),
                  ``no_interim`` (no 1xx response), ``no_content_length`` (first final response
                  has no Content-Length), ``closed`` (server closes after the responses),
                  ``interim_100`` (a ``100 Continue`` came before the final response)
``head``          list of indices of final responses that answer HEAD requests (no body)
``half_close``    shut down our sending side after the request (default false)
``body_contains`` text the last accepted response body must contain
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field

from .escapes import decode

CATEGORY_TITLES = {
    "A": "Request line",
    "B": "Header fields",
    "C": "Host",
    "D": "Content-Length",
    "E": "Transfer-Encoding and chunked",
    "F": "Line endings",
    "G": "Connection semantics",
    "H": "Robustness",
}

KNOWN_CHECKS = {
    "date",
    "close_header",
    "keep_alive_header",
    "no_interim",
    "no_content_length",
    "closed",
    "interim_100",
}
_KNOWN_FIELDS = {
    "id",
    "description",
    "raw",
    "parts",
    "gap",
    "expect",
    "level",
    "ref",
    "status",
    "statuses",
    "responses",
    "checks",
    "head",
    "half_close",
    "body_contains",
}


class CorpusError(ValueError):
    """A malformed corpus file or case."""


@dataclass
class Case:
    id: str
    category: str
    description: str
    writes: list[bytes]
    expect: str
    level: str
    ref: str
    status: object = "2xx"
    statuses: list[int] = field(default_factory=lambda: [400])
    responses: int = 0
    checks: list[str] = field(default_factory=list)
    head: frozenset[int] = frozenset()
    half_close: bool = False
    gap: float = 0.05
    body_contains: str | None = None

    @property
    def raw(self) -> bytes:
        return b"".join(self.writes)

    def expected_text(self) -> str:
        """Human-readable expectation, for reports."""
        pre = f"{self.responses} x {self.status}, then " if self.responses and self.expect != "accept" else ""
        if self.expect == "accept":
            s = f"{self.responses} x {self.status}" if self.responses != 1 else f"{self.status}"
        elif self.expect == "reject":
            s = f"{pre}{'/'.join(map(str, self.statuses))} then close"
        else:
            s = f"{pre}close (at most one error response)"
        if self.checks:
            s += " [" + ", ".join(self.checks) + "]"
        return s


def _case_from(table: dict, category: str, source: str) -> Case:
    unknown = set(table) - _KNOWN_FIELDS
    if unknown:
        raise CorpusError(f"{source}: case {table.get('id')!r}: unknown fields {sorted(unknown)}")
    for req in ("id", "description", "expect", "level", "ref"):
        if req not in table:
            raise CorpusError(f"{source}: case {table.get('id')!r}: missing {req!r}")
    cid = table["id"]
    if ("raw" in table) == ("parts" in table):
        raise CorpusError(f"{source}: {cid}: exactly one of raw/parts")
    try:
        writes = [decode(table["raw"])] if "raw" in table else [decode(p) for p in table["parts"]]
    except ValueError as e:
        raise CorpusError(f"{source}: {cid}: {e}") from None
    expect = table["expect"]
    if expect not in ("accept", "reject", "close"):
        raise CorpusError(f"{source}: {cid}: expect must be accept/reject/close")
    level = table["level"]
    if level not in ("MUST", "SHOULD"):
        raise CorpusError(f"{source}: {cid}: level must be MUST or SHOULD")
    checks = list(table.get("checks", []))
    bad = set(checks) - KNOWN_CHECKS
    if bad:
        raise CorpusError(f"{source}: {cid}: unknown checks {sorted(bad)}")
    status = table.get("status", "2xx")
    if isinstance(status, str) and not (len(status) == 3 and status[0] in "12345" and status[1:] == "xx"):
        raise CorpusError(f"{source}: {cid}: status must be like '2xx' or a list of codes")
    return Case(
        id=cid,
        category=category,
        description=table["description"],
        writes=writes,
        expect=expect,
        level=level,
        ref=table["ref"],
        status=status,
        statuses=list(table.get("statuses", [400])),
        responses=int(table.get("responses", 1 if expect == "accept" else 0)),
        checks=checks,
        head=frozenset(table.get("head", [])),
        half_close=bool(table.get("half_close", False)),
        gap=float(table.get("gap", 0.05)),
        body_contains=table.get("body_contains"),
    )


def corpus_dir() -> str:
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "corpus")


def load(directory: str | None = None, categories: set[str] | None = None) -> list[Case]:
    """Load every ``*.toml`` case file, optionally only the given category letters."""
    directory = directory or corpus_dir()
    cases: list[Case] = []
    seen: set[str] = set()
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".toml"):
            continue
        path = os.path.join(directory, name)
        with open(path, "rb") as f:
            try:
                doc = tomllib.load(f)
            except tomllib.TOMLDecodeError as e:
                raise CorpusError(f"{name}: {e}") from None
        cat = doc.get("category")
        if cat not in CATEGORY_TITLES or not name.startswith(cat + "-"):
            raise CorpusError(f"{name}: category must be one of {sorted(CATEGORY_TITLES)} and match the file name")
        if categories and cat not in categories:
            continue
        for table in doc.get("case", []):
            case = _case_from(table, cat, name)
            if case.id in seen:
                raise CorpusError(f"{name}: duplicate id {case.id}")
            seen.add(case.id)
            cases.append(case)
    return cases
