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


#: Tasks still running after the scenario get this long to finish once cancelled.
CLEANUP_BOUND = 15.0


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    """Run `scenario` on a fresh asyncio loop, bounded, and its leftovers with a bound too.

    `asyncio.run` waits without limit for the tasks left behind to finish cancelling; once,
    under a loaded machine, the suite hung there. Here a task that outlives its cancellation
    fails the test, naming the task, instead of hanging it.
    """
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(asyncio.wait_for(scenario(), SCENARIO_BOUND))
    finally:
        stuck = _cancel_leftovers(loop)
        loop.close()
    assert not stuck, f"tasks ignored their cancellation for {CLEANUP_BOUND}s: {stuck}"


def _cancel_leftovers(loop: asyncio.AbstractEventLoop) -> list[str]:
    pending = asyncio.all_tasks(loop)
    for task in pending:
        task.cancel()
    if pending:
        _, still = loop.run_until_complete(asyncio.wait(pending, timeout=CLEANUP_BOUND))
        if still:
            return sorted(repr(task) for task in still)
    loop.run_until_complete(asyncio.wait_for(loop.shutdown_asyncgens(), CLEANUP_BOUND))
    loop.run_until_complete(asyncio.wait_for(loop.shutdown_default_executor(), CLEANUP_BOUND))
    return []


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


def screen_lines(app: PagerApp) -> list[str]:
    """What the terminal shows, line by line (read from the app's own screenshot)."""
    import html
    import re

    lines: dict[float, list[str]] = {}
    svg = app.export_screenshot()
    for found in re.finditer(r'<text[^>]*\by="([0-9.]+)"[^>]*>(.*?)</text>', svg):
        lines.setdefault(float(found.group(1)), []).append(html.unescape(found.group(2)))
    return ["".join(parts).replace("\xa0", " ") for _, parts in sorted(lines.items())]
