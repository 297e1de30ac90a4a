"""The order of a measuring round: a randomized complete block design. The items a ratio compares
(the servers of one cell, the worker counts of one server) form a block and run back to back, in
a random order within the block; the blocks run in a random order. A per-round ratio then pairs
two runs seconds apart, so the machine's drift between them stays out of it (a round of 16 items
of 3 s shuffled together put up to a minute between them)."""

from __future__ import annotations

import random
from collections.abc import Callable, Hashable, Iterable
from typing import TypeVar

T = TypeVar("T")

SCHEME = "blocked"
"""What results.json's settings["order"] says for rounds run by `blocked_round`."""


def blocked_round(
    items: Iterable[T], block_of: Callable[[T], Hashable], rng: random.Random
) -> list[list[T]]:
    """The items of one round as blocks to run in this order, each block's items in this order.

    Items with the same `block_of` key form a block; the blocks are shuffled, then each block's
    items (a fresh shuffle per block), all from `rng`, so a seeded `rng` reproduces the order."""
    blocks: dict[Hashable, list[T]] = {}
    for item in items:
        blocks.setdefault(block_of(item), []).append(item)
    order = list(blocks.values())
    rng.shuffle(order)
    for block in order:
        rng.shuffle(block)
    return order
