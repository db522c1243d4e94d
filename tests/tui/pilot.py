"""Helpers for driving the TUI with Textual's pilot from sync tests (pytest runs trio; Textual
runs on asyncio, so each test starts its own asyncio loop)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from textual.coordinate import Coordinate
from textual.pilot import Pilot

from pager.tui.app import PagerApp
from pager.tui.live import Backoff

#: A hang guard for one scenario, not a timing assertion.
SCENARIO_BOUND = 120.0
SIZE = (160, 48)
POLL = 0.05


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    async def bounded() -> None:
        await asyncio.wait_for(scenario(), SCENARIO_BOUND)

    asyncio.run(bounded())


async def until(
    pilot: Pilot[Any], predicate: Callable[[], object], what: str, bound: float = 30.0
) -> None:
    """Poll app state every 50 ms until `predicate()` holds; fail after `bound` seconds."""
    deadline = time.monotonic() + bound
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {bound}s waiting for {what}")
        await pilot.pause(POLL)


def fast_backoff() -> Backoff:
    """Reconnection attempts every 50-200 ms, so a restart is noticed quickly in tests."""
    return Backoff(first=0.05, ceiling=0.2)


def shown_aliases(app: PagerApp) -> list[str]:
    """The alias column as displayed, headings included (stripped)."""
    table = app.table
    return [str(table.get_row_at(i)[1]).strip() for i in range(table.row_count)]


def row_keys(app: PagerApp) -> list[str]:
    table = app.table
    return [
        table.coordinate_to_cell_key(Coordinate(i, 0)).row_key.value or ""
        for i in range(table.row_count)
    ]


async def move_to(pilot: Pilot[Any], app: PagerApp, key: str) -> None:
    """Put the table cursor on the row `key` (as the arrow keys would)."""
    app.table.move_cursor(row=row_keys(app).index(key))
    await pilot.pause()
