"""The store's statements on PostgreSQL: a connection adapter that takes the statements both
engines speak (pager/store/_conn.py) and runs each in psycopg's spelling (pg/_dialect.py)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import psycopg

from pager.store._conn import Parameters
from pager.store._sql import Sql
from pager.store.pg._dialect import POSTGRESQL, PSYCOPG

#: Rows a streaming cursor fetches at a time.
STREAM_BATCH = 1000


class PgCursor:
    """A psycopg cursor seen as the store's `Cursor` (rowcount, fetchone, fetchall, rows)."""

    def __init__(self, cursor: psycopg.Cursor[Any] | psycopg.ServerCursor[Any]) -> None:
        self._cursor = cursor

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount

    def fetchone(self) -> Any:
        return self._cursor.fetchone() if self._cursor.description is not None else None

    def fetchall(self) -> list[Any]:
        return self._cursor.fetchall() if self._cursor.description is not None else []

    def __iter__(self) -> Iterator[Any]:
        # A server-side cursor streams its rows in batches; a client one has them all already.
        return iter(self._cursor) if self._cursor.description is not None else iter(())


class PgConn:
    """A psycopg connection seen as the store's `Conn`: inside the caller's transaction.

    `streaming`: each statement runs in a server-side cursor whose rows come a batch at a
    time as they are read (an export of any size in constant memory; inside a transaction)."""

    dialect = POSTGRESQL

    def __init__(self, conn: psycopg.Connection[Any], *, streaming: bool = False) -> None:
        self.raw = conn
        self._streaming = streaming
        self._cursors = itertools.count()

    def execute(self, statement: Sql, parameters: Parameters = (), /) -> PgCursor:
        text = statement.spelled(PSYCOPG)
        values = parameters if isinstance(parameters, Mapping) else tuple(parameters)
        if not self._streaming:
            return PgCursor(self.raw.execute(text, values))
        cursor = self.raw.cursor(name=f"pager_stream_{next(self._cursors)}")
        cursor.itersize = STREAM_BATCH
        cursor.execute(text, values)
        return PgCursor(cursor)

    def executemany(self, statement: Sql, parameters: Iterable[Sequence[Any]], /) -> PgCursor:
        cursor = self.raw.cursor()
        cursor.executemany(statement.spelled(PSYCOPG), [tuple(p) for p in parameters])
        return PgCursor(cursor)

    def close(self) -> None:
        self.raw.close()
