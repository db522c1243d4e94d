"""Counts the SQL statements a piece of code runs on SQLite connections (their trace
callbacks): what a test asserts a request costs in round trips to the store."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator


@contextlib.contextmanager
def statements_on(*conns: sqlite3.Connection | None) -> Iterator[list[str]]:
    """Every statement run on `conns` (those open) while in the block, in order."""
    seen: list[str] = []
    live = [conn for conn in conns if conn is not None]
    for conn in live:
        conn.set_trace_callback(seen.append)
    try:
        yield seen
    finally:
        for conn in live:
            conn.set_trace_callback(None)
