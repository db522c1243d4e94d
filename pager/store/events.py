"""The operator event log as one namespace: `from pager.store import events as ev`.

Writers record events inside their own transactions (`pager.store.messaging` re-exports the
recording functions too); the event feed and the stream's replay read them back by seq.
"""

from pathlib import Path

from pager.store._conn import Conn
from pager.store._database import open_read_only
from pager.store._events import (
    Event,
    event_rows_after,
    events_after,
    latest_event_seq,
    oldest_event_seq,
    record_event,
    record_events,
)
from pager.store._transactions import faults_typed
from pager.store.off_loop import ThreadedEventLog


class EventLogReader:
    """The event log read through a connection of its own (the feed's, or one replay's); one
    user at a time, its calls blocking (`ThreadedEventLog` runs them off the loop). A
    SQLite failure of the moment is raised as its `StoreFault`."""

    def __init__(self, conn: Conn) -> None:
        self._conn = conn

    def latest_seq(self) -> int:
        with faults_typed(read_only=True):
            return latest_event_seq(self._conn)

    def oldest_seq(self) -> int | None:
        with faults_typed(read_only=True):
            return oldest_event_seq(self._conn)

    def rows_after(self, seq: int, limit: int) -> list[tuple[int, str, str, str]]:
        with faults_typed(read_only=True):
            return event_rows_after(self._conn, seq, limit)

    def close(self) -> None:
        self._conn.close()


def open_event_log(database: Path, *, inline: bool = False) -> ThreadedEventLog:
    """The event log's `EventLog` port on a read-only connection of its own (blocking: it opens
    the database)."""
    return ThreadedEventLog(EventLogReader(open_read_only(database)), inline=inline)


__all__ = [
    "Event",
    "EventLogReader",
    "event_rows_after",
    "events_after",
    "latest_event_seq",
    "oldest_event_seq",
    "open_event_log",
    "open_read_only",
    "record_event",
    "record_events",
]
