"""Parity for the database scenarios (lab/contract/db.json): their answers are random, so they are
checked for validity, not bytes, with TechEmpower's rules.

- `world` (/db): one JSON object {"id", "randomNumber"}, both integers in 1..10000, and the row
  exists in the database with that number.
- `worlds` (/queries?q=N): a JSON array of N such objects, N clamped to 1..500 (a missing, empty
  or non-numeric q counts as 1; the contract's `variants` send those).
- `updates` (/updates?q=N): as `worlds`, and after the answer the database holds the returned
  numbers for the returned ids, and at least one of them differs from what it held before.
- `fortunes`: Content-Type text/html; charset=utf-8, TechEmpower's HTML table holding every
  Fortune row plus the one added at request time (id 0), sorted by message, each message
  HTML-escaped (no raw `<`, `>` or `"`, every `&` an entity) and equal to the stored one once
  unescaped.

The generic checks of parity.py (status, Content-Type prefix, required headers, framing,
keep-alive) apply as for every scenario.
"""

from __future__ import annotations

import html
import json
import re

from . import parity
from .database import ADDITIONAL_FORTUNE, FORTUNES, WORLD_ROWS, Database
from .peers import Scenario

MAX_QUERIES = 500
_ENTITY = re.compile(r"&(?:[A-Za-z][A-Za-z0-9]*|#[0-9]+|#[xX][0-9A-Fa-f]+);")
_ROW = re.compile(r"<tr>\s*<td>(.*?)</td>\s*<td>(.*?)</td>\s*</tr>", re.S)
_HEAD_ROW = re.compile(r"<tr>\s*<th>id</th>\s*<th>message</th>\s*</tr>", re.S)


def _world_problems(obj, worlds: dict[int, int] | None, where: str) -> list[str]:
    if not isinstance(obj, dict) or set(obj) != {"id", "randomNumber"}:
        return [f"{where}: expected an object with keys id and randomNumber, got {obj!r:.80}"]
    i, n = obj["id"], obj["randomNumber"]
    out = []
    for key, v in (("id", i), ("randomNumber", n)):
        if not isinstance(v, int) or isinstance(v, bool):
            out.append(f"{where}: {key} {v!r} is not an integer")
        elif not 1 <= v <= WORLD_ROWS:
            out.append(f"{where}: {key} {v} out of range 1..{WORLD_ROWS}")
    if not out and worlds is not None and worlds.get(i) != n:
        out.append(f"{where}: row {i} holds randomNumber {worlds.get(i)} in the database, not {n}")
    return out


def _json(body: bytes):
    try:
        return json.loads(body), None
    except ValueError:
        return None, f"body is not JSON: {body[:120]!r}"


def check_world(body: bytes, worlds: dict[int, int] | None) -> list[str]:
    obj, err = _json(body)
    return [err] if err else _world_problems(obj, worlds, "row")


def check_worlds(body: bytes, rows: int, worlds: dict[int, int] | None) -> list[str]:
    arr, err = _json(body)
    if err:
        return [err]
    if not isinstance(arr, list):
        return [f"expected a JSON array, got {type(arr).__name__}"]
    out = []
    if len(arr) != rows:
        out.append(f"{len(arr)} rows, expected {rows}")
    for k, obj in enumerate(arr):
        out += _world_problems(obj, worlds, f"row {k + 1}")
        if len(out) > 5:
            break
    return out


def check_updates(
    body: bytes, rows: int, before: dict[int, int], after: dict[int, int], require_change: bool
) -> list[str]:
    out = check_worlds(body, rows, None)
    if out:
        return out
    arr = json.loads(body)
    # The same id may be drawn twice in one request: the database then holds one of its values.
    returned: dict[int, set[int]] = {}
    for obj in arr:
        returned.setdefault(obj["id"], set()).add(obj["randomNumber"])
    for i, nums in returned.items():
        if after.get(i) not in nums:
            out.append(
                f"row {i}: the answer says randomNumber {sorted(nums)} but the database holds "
                f"{after.get(i)} (update not written)"
            )
            if len(out) > 5:
                break
    if not out and require_change and all(before.get(i) == after.get(i) for i in returned):
        out.append(f"none of the {len(returned)} returned rows changed in the database")
    return out


def content_type_problems(ct: str | None) -> list[str]:
    norm = (ct or "").replace(" ", "").lower()
    if norm != "text/html;charset=utf-8":
        return [f"Content-Type {ct!r}, expected 'text/html; charset=utf-8'"]
    return []


def check_fortunes(body: bytes, ct: str | None) -> list[str]:
    out = content_type_problems(ct)
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return out + ["body is not UTF-8"]
    low = text.lower()
    if not low.lstrip().startswith("<!doctype html>"):
        out.append("body does not start with <!DOCTYPE html>")
    if "<title>fortunes</title>" not in low or "<table>" not in low or "</table>" not in low:
        out.append("not TechEmpower's page: <title>Fortunes</title> and <table> expected")
    if not _HEAD_ROW.search(text):
        out.append("no <tr><th>id</th><th>message</th></tr> header row")
    rows = _ROW.findall(text)
    expected = sorted(FORTUNES + [(0, ADDITIONAL_FORTUNE)], key=lambda r: r[1])
    got = []
    for raw_id, raw_msg in rows:
        bad = [c for c in '<>"' if c in raw_msg]
        if bad or "&" in _ENTITY.sub("", raw_msg):
            out.append(f"message not HTML-escaped: {raw_msg[:80]!r}")
        try:
            got.append((int(raw_id.strip()), html.unescape(raw_msg)))
        except ValueError:
            out.append(f"id {raw_id[:20]!r} is not an integer")
    if sorted(got) != sorted(expected):
        missing = sorted(set(expected) - set(got))
        extra = sorted(set(got) - set(expected))
        out.append(
            f"rows differ from the Fortune table plus the added one: "
            f"missing {missing[:3]!r}, unexpected {extra[:3]!r}"
        )
    elif [m for _, m in got] != [m for _, m in expected]:
        out.append("rows not sorted by message: " + ", ".join(str(i) for i, _ in got))
    return out


def _body_problems(scenario: Scenario, resp: parity.Response, rows: int, db, before) -> list[str]:
    kind = scenario.expect["check"]
    if kind == "fortunes":
        return check_fortunes(resp.body, resp.first("content-type"))
    worlds = db.worlds() if db is not None else None
    if kind == "world":
        return check_world(resp.body, worlds)
    if kind == "worlds":
        return check_worlds(resp.body, rows, worlds)
    if kind == "updates":
        if db is None:
            return check_worlds(resp.body, rows, None)
        return check_updates(resp.body, rows, before, worlds, require_change=rows >= 10)
    return [f"unknown check {kind!r} in the contract"]


def _one(host, port, scenario, path, rows, required, db, count, timeout) -> list[str]:
    """Send the request at `path` `count` times on one connection; generic + validity checks."""
    variant = Scenario(**{**scenario.__dict__, "path": path})
    out: list[str] = []
    for k in range(count):
        before = db.worlds() if db is not None and scenario.expect["check"] == "updates" else None
        try:
            (resp,) = parity.exchange(host, port, variant, count=1, timeout=timeout)
        except (parity.ProtocolError, OSError) as e:
            return out + [f"GET {path}: no valid response: {e}"]
        tag = f"GET {path}" + (f" (#{k + 1})" if count > 1 else "")
        problems = parity.check_response(variant, resp, required)
        if not problems:
            problems = _body_problems(scenario, resp, rows, db, before)
        out += [f"{tag}: {p}" for p in problems]
        if any("close" in v.lower() for v in resp.values("connection")):
            out.append(
                f"{tag}: answered with Connection: close: the load generator needs keep-alive"
            )
    return out


def check(
    host: str,
    port: int,
    scenario: Scenario,
    required_headers: list[str],
    db: Database | None,
    timeout: float = 10.0,
) -> parity.ParityResult:
    """The contract's request (twice on one keep-alive connection, as parity.check does) and each
    variant, checked for validity against the database `db` (None: ranges and shapes only)."""
    problems = []
    rows = int(scenario.expect.get("rows", 1))
    # Twice on one connection: the load generator needs keep-alive.
    try:
        pair = parity.exchange(host, port, scenario, count=2, timeout=timeout)
    except (parity.ProtocolError, OSError) as e:
        pair = []
        problems.append(f"two requests on one keep-alive connection failed: {e}")
    problems += _one(host, port, scenario, scenario.path, rows, required_headers, db, 1, timeout)
    for v in scenario.expect.get("variants", []):
        problems += _one(
            host, port, scenario, v["path"], int(v["rows"]), required_headers, db, 1, timeout
        )
    first = pair[0] if pair else None
    return parity.ParityResult(
        scenario.name,
        not problems,
        problems,
        first.status if first else None,
        first.headers if first else [],
        len(first.body) if first else None,
    )
