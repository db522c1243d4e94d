"""The pacing of snapshot re-reads and of reconnection attempts (no timers: times are given)."""

from __future__ import annotations

import itertools

import pytest

from pager.tui.live import Backoff, RefreshGate


def test_refresh_gate_first_change_refreshes_at_once() -> None:
    """Nothing read yet: no reason to wait."""
    assert RefreshGate().changed(now=10.0) == 0.0


def test_refresh_gate_coalesces_changes_while_scheduled_or_running() -> None:
    """Changes during a scheduled or running refresh schedule nothing more until it ends."""
    gate = RefreshGate(min_interval=0.2)
    assert gate.changed(10.0) == 0.0
    assert gate.changed(10.0) is None
    gate.begin(10.0)
    assert gate.changed(10.05) is None
    assert gate.changed(10.06) is None
    assert gate.end(10.1) == pytest.approx(0.1)  # one more, 0.2 s after the previous one started
    gate.begin(10.2)
    assert gate.end(10.25) is None  # nothing new came in
    assert not gate.busy


def test_refresh_gate_keeps_at_most_one_refresh_per_interval() -> None:
    """A steady stream of changes gives starts at least `min_interval` apart."""
    gate = RefreshGate(min_interval=0.2)
    starts: list[float] = []
    pending: float | None = None
    now = 0.0
    while now < 2.0:  # a change every 10 ms; a refresh takes 30 ms
        delay = gate.changed(now)
        if delay is not None:
            pending = now + delay
        if pending is not None and now >= pending:
            gate.begin(now)
            starts.append(now)
            pending = None
            finished = now + 0.03
            delay = gate.end(finished)
            pending = None if delay is None else finished + delay
        now = round(now + 0.01, 2)
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert len(starts) <= 11
    assert min(gaps) >= 0.2 - 1e-9


def test_backoff_doubles_to_the_ceiling_and_resets() -> None:
    """0.2, 0.4, 0.8 … capped; reset starts over."""
    backoff = Backoff(first=0.2, ceiling=1.0)
    assert [backoff.next_delay() for _ in range(5)] == [0.2, 0.4, 0.8, 1.0, 1.0]
    backoff.reset()
    assert backoff.next_delay() == 0.2
