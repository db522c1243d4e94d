"""What the engines spell differently, as operations each backend defines (`Dialect`).

The store's SQL modules (pager/store/_identities.py, _messages.py, …) are shared by both
engines; where SQLite and PostgreSQL differ they ask the connection's dialect
(`dialect_of(conn)`) instead of writing one engine's spelling: an `sqlite3.Connection` speaks
SQLite's (this module's `SQLITE`), the PostgreSQL backend's connections carry theirs
(pager/store/pg/_dialect.py).
"""

from __future__ import annotations

from pager.store._conn import Conn
from pager.store._sql import QMARK, Spelling, sql


class Dialect:
    """SQLite's spelling. A store of one writer: every transaction already runs alone, so
    the locks are nothing; the clock compared against is the broker's own."""

    #: How its driver marks a statement's parameters (pager/store/_sql.py).
    spelling: Spelling = QMARK

    def lock_inbox(self, conn: Conn, identity_id: str) -> None:
        """Taken first by every transaction that changes an identity's inbox, held to its
        commit: at most one changes it at a time (first deliveries keep send order)."""

    def lock_send(self, conn: Conn, recipient_id: str, sender_id: str) -> None:
        """Taken first by a send: its recipient's inbox lock, then its sender's, so that two
        sends of one sender decide on its rates one after the other."""

    def lock_reservations(self, conn: Conn, scope: str) -> None:
        """Taken first by every transaction that changes a workspace's reservations, held to
        its commit: two agents racing for one path never both win."""

    def latest_event_seq(self, conn: Conn) -> int:
        """The highest event seq ever handed out (0 before the first), deleted ones too."""
        row = conn.execute(sql("SELECT seq FROM sqlite_sequence WHERE name = 'events'")).fetchone()
        return int(row[0]) if row is not None else 0

    def not_after_now(self, column: str) -> str:
        """The condition that a deadline `column` has come by the parameter bound as now (a
        template's `{}`, pager/store/_sql.py)."""
        return f"{column} <= {{}}"

    #: Said after a select of rows the transaction then changes (claims, lapses).
    take_free_rows = ""


SQLITE = Dialect()


def dialect_of(conn: Conn) -> Dialect:
    """The dialect `conn` speaks: its own `dialect`, else SQLite's."""
    dialect: Dialect = getattr(conn, "dialect", SQLITE)
    return dialect
