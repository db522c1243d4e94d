"""The SQLite backend's read side: a read-only connection for views and plans that scan or page
(the operator's views, the roster, the retention plan), apart from the writer's connection, so
a long read never delays a commit nor waits for one (WAL)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TypeVar

import trio

from pager.store._database import open_read_only
from pager.store._transactions import faults_typed

T = TypeVar("T")


class ReadViews:
    """A read-only connection, opened on first use, one user at a time.

    `inline` runs reads on the event loop: only for tests on trio's mock clock, where a
    worker thread would let the clock jump while the read runs (as the writer's)."""

    def __init__(self, database: Path, *, inline: bool = False) -> None:
        self._database = database
        self._conn: sqlite3.Connection | None = None
        self._lock = trio.Lock()
        self._inline = inline

    async def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """`fn(conn)` in a worker thread, inside one read transaction (a consistent view)."""
        async with self._lock:
            run = partial(self._run, fn)
            if self._inline:
                return run()
            return await trio.to_thread.run_sync(run)

    def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        with faults_typed(read_only=True):  # a failing disk is a `StoreFault`, as for the writer
            if self._conn is None:
                self._conn = open_read_only(self._database)
            conn = self._conn
            conn.execute("BEGIN")
            try:
                return fn(conn)
            finally:
                conn.execute("COMMIT")  # a read transaction: the snapshot ends

    async def aclose(self) -> None:
        async with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None:
                conn.close()
