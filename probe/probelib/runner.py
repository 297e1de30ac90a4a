"""Running corpus cases in parallel, each on its own connection with its own deadline."""

from __future__ import annotations

import asyncio

from .client import exchange
from .corpus import Case
from .escapes import show
from .verdict import evaluate


async def run_case(case: Case, host: str, port: int, timeout: float) -> dict:
    # Accept cases may stop as soon as their responses are in; everything that needs to see a
    # close (or the absence of a further response) reads until close or the deadline.
    need_close = case.expect != "accept" or "closed" in case.checks
    obs = await exchange(
        host,
        port,
        case.writes,
        timeout=timeout + (case.gap * len(case.writes) if len(case.writes) > 1 else 0.0),
        want_responses=None if need_close else case.responses,
        half_close=case.half_close,
        head_indices=case.head,
        write_gap=case.gap if len(case.writes) > 1 else 0.0,
    )
    passed, observed = evaluate(case, obs)
    return {
        "id": case.id,
        "category": case.category,
        "level": case.level,
        "passed": passed,
        "expected": case.expected_text(),
        "observed": observed,
        "description": case.description,
        "ref": case.ref,
        "request": show(case.raw, 200),
    }


async def run_cases(cases: list[Case], host: str, port: int, timeout: float, concurrency: int) -> list[dict]:
    sem = asyncio.Semaphore(concurrency)

    async def one(c: Case) -> dict:
        async with sem:
            return await run_case(c, host, port, timeout)

    return list(await asyncio.gather(*(one(c) for c in cases)))
