"""Pure verdict logic: does an :class:`~probelib.client.Observation` satisfy a case?

Kept free of I/O so the tests can feed it synthetic observations.
"""

from __future__ import annotations

from .client import Observation
from .corpus import Case


def status_matches(status: int, spec: object) -> bool:
    """``spec`` is a class like ``"2xx"`` or a list of codes."""
    if isinstance(spec, str):
        return str(status)[0] == spec[0]
    return status in spec  # type: ignore[operator]


def _checks(case: Case, obs: Observation) -> list[str]:
    """Failures of the optional per-case checks."""
    errs: list[str] = []
    finals = obs.finals
    for r in finals:
        if r.header("content-length") is not None and r.header("transfer-encoding") is not None:
            errs.append(f"{r.status} response has both Content-Length and Transfer-Encoding")
    for check in case.checks:
        if check == "date":
            if any(r.header("date") is None for r in finals):
                errs.append("response without Date")
        elif check == "close_header":
            if not finals or not finals[-1].has_token("connection", "close"):
                errs.append("last response lacks Connection: close")
        elif check == "keep_alive_header":
            if not finals or not finals[0].has_token("connection", "keep-alive"):
                errs.append("response lacks Connection: keep-alive")
        elif check == "no_interim":
            if obs.interims:
                errs.append(f"unexpected interim response {obs.interims[0].status}")
        elif check == "interim_100":
            if not any(r.status == 100 for r in obs.interims):
                errs.append("no 100 Continue before the final response")
        elif check == "no_content_length":
            if finals and finals[0].header("content-length") is not None:
                errs.append(f"{finals[0].status} response carries Content-Length")
        elif check == "closed" and not obs.closed:
            errs.append("connection not closed after the response")
    idx = max(case.responses - 1, 0)
    if case.body_contains is not None and len(finals) > idx and case.body_contains.encode() not in finals[idx].body:
        errs.append(f"body lacks {case.body_contains!r}")
    return errs


def evaluate(case: Case, obs: Observation) -> tuple[bool, str]:
    """Return ``(passed, observed)``; ``observed`` explains a failure in a few words."""
    observed = obs.summary()
    if obs.error:
        return False, observed
    if obs.garbage:
        return False, observed
    finals = obs.finals
    n = case.responses
    accept_spec = case.status if case.expect == "accept" else "2xx"
    for i, r in enumerate(finals[:n]):
        if not status_matches(r.status, accept_spec):
            return False, observed + f" (response {i + 1} should be {accept_spec})"
    if case.expect == "accept":
        if len(finals) < n:
            return False, observed + f" (expected {n} response(s))"
        if "closed" in case.checks and len(finals) > n:
            return False, observed + " (extra response)"
    elif case.expect == "reject":
        if len(finals) <= n:
            return False, observed + f" (expected {'/'.join(map(str, case.statuses))})"
        if finals[n].status not in case.statuses:
            return False, observed + f" (expected {'/'.join(map(str, case.statuses))})"
        if len(finals) > n + 1:
            return False, observed + " (answered after the error)"
        if not obs.closed:
            return False, observed
    else:  # close
        if len(finals) < n:
            return False, observed + f" (expected {n} response(s) first)"
        if len(finals) > n + 1 or (len(finals) == n + 1 and finals[n].status < 400):
            return False, observed + " (answered what should not be processed)"
        if not obs.closed:
            return False, observed
    errs = _checks(case, obs)
    if errs:
        return False, observed + " (" + "; ".join(errs) + ")"
    return True, observed
