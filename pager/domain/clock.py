"""Wall-clock time for persisted timestamps, injectable so tests can follow trio's mock clock."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Protocol

import trio


class WallClock(Protocol):
    def now(self) -> float:
        """Unix seconds."""
        ...


class SystemClock:
    def now(self) -> float:
        return time.time()


class TrioWallClock:
    """Wall time that advances with trio's clock: under `MockClock` a test's windows pass in
    virtual time, and persisted timestamps agree with the actors' timers."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self._offset = start - trio.current_time()

    def now(self) -> float:
        return self._offset + trio.current_time()


def iso(seconds: float | None) -> str | None:
    """Unix seconds as an ISO 8601 UTC timestamp with milliseconds (None stays None)."""
    if seconds is None:
        return None
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds")


#: Deadlines closer than this are rounded up to it, so that a timer which fires a hair early
#: (float rounding between the two clocks) finds its deadline passed next time, not in a loop.
MIN_STEP = 0.001


def trio_deadline(clock: WallClock, wall_deadline: float) -> float:
    """The trio deadline of a wall-clock deadline (past deadlines are due now)."""
    remaining = wall_deadline - clock.now()
    if remaining <= 0:
        return trio.current_time()
    return trio.current_time() + max(remaining, MIN_STEP)
