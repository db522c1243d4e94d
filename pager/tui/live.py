"""The pacing of live updates, without I/O or timers: the app asks these what to do when.

- `RefreshGate`: every operator event marks the view stale; the snapshot is re-read at most
  once per `min_interval` (5 per second by default), never twice at once, and once more after
  a read if events arrived while it was in flight.
- `Backoff`: the delays between reconnection attempts, doubling up to a ceiling.
"""

from __future__ import annotations

from dataclasses import dataclass

MIN_REFRESH_INTERVAL = 0.2


@dataclass
class RefreshGate:
    min_interval: float = MIN_REFRESH_INTERVAL
    _last_start: float | None = None
    _scheduled: bool = False
    _running: bool = False
    _stale: bool = False

    def changed(self, now: float) -> float | None:
        """Something changed: the delay after which to start a refresh, or None when one is
        already scheduled or running (it will be followed by another if need be)."""
        self._stale = True
        if self._scheduled or self._running:
            return None
        self._scheduled = True
        if self._last_start is None:
            return 0.0
        return max(0.0, self._last_start + self.min_interval - now)

    def begin(self, now: float) -> None:
        """The scheduled refresh starts: what it reads covers every change noted so far."""
        self._scheduled, self._running, self._stale = False, True, False
        self._last_start = now

    def end(self, now: float) -> float | None:
        """The refresh finished: the delay for the next one if changes came in meanwhile."""
        self._running = False
        if not self._stale:
            return None
        self._stale = False
        return self.changed(now)

    @property
    def busy(self) -> bool:
        return self._scheduled or self._running


@dataclass
class Backoff:
    first: float = 0.2
    ceiling: float = 5.0
    attempts: int = 0

    def next_delay(self) -> float:
        delay: float = min(self.ceiling, self.first * 2.0**self.attempts)
        self.attempts += 1
        return delay

    def reset(self) -> None:
        self.attempts = 0
