"""The run's seed: one number, given with --seed or drawn at the start, recorded in results.json
(settings.seed, and settings.order_seed for the round order it drives), from which every random
choice of a run is derived, so a run's order and requests can be replayed."""

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
