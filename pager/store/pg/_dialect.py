"""PostgreSQL's spelling of what the engines spell differently (pager/store/_dialect.py)."""

from __future__ import annotations

from pager.store._conn import Conn
from pager.store._dialect import Dialect
from pager.store._sql import Spelling, sql

#: The database's own clock, in the unix seconds every stored time is kept in.
DATABASE_NOW = "extract(epoch FROM clock_timestamp())"


class PyformatSpelling(Spelling):
    """psycopg's: `%s` and `%(name)s`, so a `%` of the statement's own text is written `%%`."""

    def parameter(self, name: str | None) -> str:
        return "%s" if name is None else f"%({name})s"

    def literal(self, text: str) -> str:
        return text.replace("%", "%%")


PSYCOPG = PyformatSpelling()


class PgDialect(Dialect):
    """A store several brokers write at once: the locks are advisory locks held to the
    commit (the two-key form, in key spaces apart from the schema's and the events' locks:
    1 for inboxes, 2 for senders, 3 for workspaces' reservations), whichever broker runs the
    transaction."""

    spelling: Spelling = PSYCOPG

    def lock_inbox(self, conn: Conn, identity_id: str) -> None:
        conn.execute(sql("SELECT pg_advisory_xact_lock(1, hashtext({}))"), (identity_id,))

    def lock_send(self, conn: Conn, recipient_id: str, sender_id: str) -> None:
        # The inbox first, then the sender (a select list is evaluated left to right), as
        # every other change of an inbox takes the inbox first: no two sends wait on each
        # other in a cycle.
        conn.execute(
            sql(
                "SELECT pg_advisory_xact_lock(1, hashtext({})), pg_advisory_xact_lock(2,"
                " hashtext({}))"
            ),
            (recipient_id, sender_id),
        )

    def lock_reservations(self, conn: Conn, scope: str) -> None:
        conn.execute(sql("SELECT pg_advisory_xact_lock(3, hashtext({}))"), (scope,))

    def latest_event_seq(self, conn: Conn) -> int:
        row = conn.execute(
            sql("SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM events_seq_seq")
        ).fetchone()
        return int(row[0]) if row is not None else 0

    def not_after_now(self, column: str) -> str:
        """Deadlines compared on the database's clock: a broker's now (its machine's clock
        plus the offset it last measured, pg/backend.py `DatabaseClock`) is taken only up to
        the database's own time. So a broker whose clock runs ahead (a step since its last
        measurement, a machine that skews) takes no other broker's work early: a claim's ack
        wait (another broker's reader may still be answering it) and a message's retry time
        (redelivery due). One running behind acts late, never early. (A message's expiry,
        days long, and the scheduler's next due times stay on the broker's clock: a skew of
        seconds changes nothing there another broker relies on.)"""
        return f"{column} <= LEAST({{}}, {DATABASE_NOW})"

    #: The rows a claim or a lapse selects are locked for it, and rows another transaction
    #: holds are skipped: a claim never waits on a row another broker's transaction is
    #: changing (an ack, a sweep's dead-lettering); it takes the free ones and leaves that
    #: one to its holder. (Changes of one inbox still take turns on its inbox lock: that order
    #: is what keeps first deliveries in send order.)
    take_free_rows = " FOR UPDATE SKIP LOCKED"


POSTGRESQL = PgDialect()
