"""The run's seed: one number, given with --seed or drawn at the start and recorded in
results.json (settings.seed; settings.order_seed too, the name the round order has read it by).
The rounds' order (runner, scaling lane, open loop) is drawn from it; any other random choice of
a run (varied requests) takes its own stream with `rng`, so a run can be replayed."""

from __future__ import annotations

import random
import secrets


def run_seed(given: int | None = None) -> int:
    """`given` (--seed) or a fresh 32-bit seed."""
    return given if given is not None else secrets.randbits(32)


def rng(seed: int, stream: str) -> random.Random:
    """An independent generator for one use of the seed (e.g. "requests"), so adding a new random
    choice to a run does not shift the draws of the others.

    >>> rng(7, "requests").random() == rng(7, "requests").random() != rng(7, "order").random()
    True
    """
    return random.Random(f"{seed}:{stream}")
