"""The store's statements on PostgreSQL: a connection adapter that takes the SQL both engines
speak, with SQLite's `?` placeholders, and runs it through psycopg (pager/store/_conn.py)."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import lru_cache
from typing import Any

import psycopg

from pager.store._conn import Parameters
from pager.store._guard import LOCK_SEND
from pager.store._identities import LOCK_INBOX
from pager.store._messages import CLAIMABLE, LAPSED_CLAIMS

#: The database's own clock, in the unix seconds every stored time is kept in.
DATABASE_NOW = "extract(epoch FROM clock_timestamp())"
#: Deadlines compared on the database's clock: a broker's `now` (its machine's clock plus
#: the offset it last measured, pg/backend.py `DatabaseClock`) is taken only up to the
#: database's own time. So a broker whose clock runs ahead (a step since its last
#: measurement, a machine that skews) cannot take another broker's work early: a claim's
#: ack wait (another broker's reader may still be answering it) and a message's retry time
#: (redelivery due). One running behind acts late, never early. (A message's expiry, days
#: long, and the scheduler's next due times stay on the broker's clock: a skew of seconds
#: changes nothing there another broker relies on.) Both statements also skip rows another
#: transaction holds (`FOR UPDATE SKIP LOCKED`) and lock the rows they return: a claim or a
#: lapse never waits on a row another broker's transaction is changing (an ack, a sweep's
#: dead-lettering), it takes the rows that are free and leaves that one to its holder.
#: (Changes of one inbox still take turns on its inbox lock, pager/store/_identities.py
#: `LOCK_INBOX`: that order is what keeps first deliveries in send order.)
_DATABASE_DEADLINES = {
    CLAIMABLE: CLAIMABLE.replace("available_at <= ?", f"available_at <= LEAST(?, {DATABASE_NOW})")
    + " FOR UPDATE SKIP LOCKED",
    LAPSED_CLAIMS: LAPSED_CLAIMS.replace(
        "expires_at <= ?", f"expires_at <= LEAST(?, {DATABASE_NOW})"
    )
    + " FOR UPDATE SKIP LOCKED",
}
#: The few statements SQLite spells its own way, as PostgreSQL spells them.
SPELLED_OTHERWISE = {
    # The highest event seq ever handed out (0 before the first): SQLite's AUTOINCREMENT
    # table, PostgreSQL's identity sequence.
    "SELECT seq FROM sqlite_sequence WHERE name = 'events'": (
        "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM events_seq_seq"
    ),
    # One transaction at a time changes an identity's inbox, whichever broker runs it (the
    # two-key form: its key space is apart from the schema's and the events' locks).
    LOCK_INBOX: "SELECT pg_advisory_xact_lock(1, hashtext(?))",
    # A send: its recipient's inbox, then its sender's sends (key space 2), in that order
    # (PostgreSQL evaluates a select list left to right).
    LOCK_SEND: (
        "SELECT pg_advisory_xact_lock(1, hashtext(?)), pg_advisory_xact_lock(2, hashtext(?))"
    ),
    **_DATABASE_DEADLINES,
}
#: Rows a streaming cursor fetches at a time.
STREAM_BATCH = 1000
_NAMED = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")


@lru_cache(maxsize=1024)
def to_psycopg(sql: str) -> bytes:
    """SQLite's placeholders as psycopg's: `?` as `%s`, `:name` as `%(name)s`, and a literal
    `%` doubled (`LIKE 'a%'`). The store's statements hold neither inside string literals."""
    sql = SPELLED_OTHERWISE.get(sql, sql).replace("%", "%%").replace("?", "%s")
    return _NAMED.sub(r"%(\1)s", sql).encode()


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

    def __init__(self, conn: psycopg.Connection[Any], *, streaming: bool = False) -> None:
        self.raw = conn
        self._streaming = streaming
        self._cursors = itertools.count()

    def execute(self, sql: str, parameters: Parameters = (), /) -> PgCursor:
        values = parameters if isinstance(parameters, Mapping) else tuple(parameters)
        if not self._streaming:
            return PgCursor(self.raw.execute(to_psycopg(sql), values))
        cursor = self.raw.cursor(name=f"pager_stream_{next(self._cursors)}")
        cursor.itersize = STREAM_BATCH
        cursor.execute(to_psycopg(sql), values)
        return PgCursor(cursor)

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> PgCursor:
        cursor = self.raw.cursor()
        cursor.executemany(to_psycopg(sql), [tuple(p) for p in parameters])
        return PgCursor(cursor)

    def close(self) -> None:
        self.raw.close()
