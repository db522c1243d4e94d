"""A write's statements sent to PostgreSQL in as few round trips as its reads allow.

`BatchConn` is the store's `Conn` (pager/store/_conn.py) for one write transaction: each
`execute` is queued and answered with a cursor whose rows come later; the first time the
write reads a result (a row, a row count), every statement queued so far goes to the server
as one message (the simple query protocol, parameters bound on this side by psycopg's
`ClientCursor`): one round trip, whatever their number. `BEGIN` is queued first and `COMMIT`
last, so a write that reads nothing before its end (or whose reads all come together) costs one
or two round trips however many statements it runs. A statement the server refuses stops the
message there (the transaction is then aborted; the writer rolls it back).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import psycopg

from pager.store._conn import Parameters
from pager.store._sql import Sql
from pager.store.pg._dialect import POSTGRESQL, PSYCOPG


class _Result:
    """One statement's answer, as psycopg gave it: its rows (if it returns any) and count."""

    def __init__(self, rows: list[Any] | None, rowcount: int) -> None:
        self.rows = rows
        self.rowcount = rowcount


class LazyCursor:
    """A queued statement's cursor: reading it sends what is queued (pager/store/_conn.py
    `Cursor`)."""

    def __init__(self, conn: BatchConn) -> None:
        self._conn = conn
        self._results: list[_Result] = []
        self._expected = 0
        self._next = 0  # the row fetchone hands out next

    def _answered(self) -> list[_Result]:
        if len(self._results) < self._expected:
            self._conn.flush()
        return self._results

    @property
    def rowcount(self) -> int:
        return sum(result.rowcount for result in self._answered())

    def _rows(self) -> list[Any]:
        return [row for result in self._answered() for row in (result.rows or [])]

    def fetchone(self) -> Any:
        rows = self._rows()
        if self._next >= len(rows):
            return None
        self._next += 1
        return rows[self._next - 1]

    def fetchall(self) -> list[Any]:
        rows = self._rows()[self._next :]
        self._next += len(rows)
        return rows

    def __iter__(self) -> Iterator[Any]:
        return iter(self.fetchall())


class BatchConn:
    """The store's `Conn` over one autocommit psycopg connection, statements queued until a
    result is read (see the module's docstring)."""

    dialect = POSTGRESQL

    def __init__(self, raw: psycopg.Connection[Any]) -> None:
        self.raw = raw
        self._cursor = psycopg.ClientCursor(raw)
        self._queued: list[tuple[bytes, LazyCursor]] = []
        #: Set once the COMMIT is queued: from then on a lost connection leaves the outcome
        #: unknown; before it, nothing of the transaction was done.
        self.committing = False

    def execute(self, statement: Sql, parameters: Parameters = (), /) -> LazyCursor:
        cursor = LazyCursor(self)
        self._queue(statement, parameters, cursor)
        return cursor

    def executemany(self, statement: Sql, parameters: Iterable[Sequence[Any]], /) -> LazyCursor:
        cursor = LazyCursor(self)
        for values in parameters:
            self._queue(statement, values, cursor)
        return cursor

    def _queue(self, statement: Sql, parameters: Parameters, cursor: LazyCursor) -> None:
        values = parameters if isinstance(parameters, Mapping) else tuple(parameters)
        bound = self._cursor.mogrify(statement.spelled(PSYCOPG), values)
        self._queued.append((bound.encode(), cursor))
        cursor._expected += 1

    def flush(self) -> None:
        """Send every queued statement in one message and hand each cursor its answer."""
        queued, self._queued = self._queued, []
        if not queued:
            return
        self._cursor.execute(b"; ".join(statement for statement, _ in queued))
        for n, (_, cursor) in enumerate(queued):
            if n and not self._cursor.nextset():
                raise RuntimeError("PostgreSQL answered fewer statements than were sent")
            rows = self._cursor.fetchall() if self._cursor.description is not None else None
            cursor._results.append(_Result(rows, self._cursor.rowcount))

    def close(self) -> None:
        self.raw.close()
