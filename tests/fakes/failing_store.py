"""FAKE fault: the SQLite writer's connection, whose next N commits fail as on a full disk.

Everything else runs on the real connection, so what is tested is the real writer: it meets
SQLite's own error (`database or disk is full`, SQLITE_FULL) at its COMMIT, the transaction
rolled back as SQLite rolls it back, and raises it as the fault it is."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from typing import Any

from pager.store.sqlite_writer import SqliteWriter


def disk_full() -> sqlite3.OperationalError:
    """The error SQLite raises when the disk is full, with its result code."""
    error = sqlite3.OperationalError("database or disk is full")
    error.sqlite_errorcode = sqlite3.SQLITE_FULL
    error.sqlite_errorname = "SQLITE_FULL"
    return error


class FailingCommits:
    """The writer's connection; `fail(n)`: the next `n` COMMITs fail (counted in `failed`)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self.remaining = 0
        self.failed = 0

    def fail(self, commits: int) -> None:
        self.remaining = commits

    @property
    def in_transaction(self) -> bool:
        return self._conn.in_transaction

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        if sql == "COMMIT" and self.remaining > 0:
            self.remaining -= 1
            self.failed += 1
            self._conn.execute("ROLLBACK")
            raise disk_full()
        return self._conn.execute(sql, parameters)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


@contextlib.contextmanager
def failing_commits(writer: SqliteWriter) -> Iterator[FailingCommits]:
    """Put the fault under a running writer for the block's length."""
    real = writer.conn
    failing = FailingCommits(real)
    writer._conn = failing  # type: ignore[assignment]  # a stand-in with what the writer uses
    try:
        yield failing
    finally:
        writer._conn = real
