"""The operator event log as one namespace: `from pager.store import events as ev`.

Writers record events inside their own transactions (`pager.store.messaging` re-exports the
recording functions too); the event feed and the stream's replay read them back by seq.
"""

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

__all__ = [
    "Event",
    "event_rows_after",
    "events_after",
    "latest_event_seq",
    "oldest_event_seq",
    "open_read_only",
    "record_event",
    "record_events",
]
