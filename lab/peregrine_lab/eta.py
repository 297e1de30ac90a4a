"""Time left in a phase of countable steps whose lengths are not known beforehand (the builds):
the mean of the steps done so far times the steps left."""

from __future__ import annotations

import time


def clock(seconds: float) -> str:
    """m:ss (h:mm:ss from an hour)."""
    s = max(0, int(seconds))
    return (
        f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"
    )


class Countdown:
    """`left(done)` says the elapsed time and the time left after `done` of `total` steps."""

    def __init__(self, total: int, now=time.monotonic):
        self.total = total
        self.now = now
        self.start = now()

    def left(self, done: int) -> str:
        elapsed = self.now() - self.start
        if done <= 0:
            return f"{clock(elapsed)} elapsed, time left not known yet"
        rest = elapsed / done * (self.total - done)
        return f"{clock(elapsed)} elapsed, ~{clock(rest)} left"
