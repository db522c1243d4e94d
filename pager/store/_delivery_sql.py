"""The delivery state machine's guards as SQL: each guarded update's condition on `state`,
taken from the domain's transitions (pager/domain/delivery.py)."""

from __future__ import annotations

from pager.domain.delivery import TRANSITIONS, UNSETTLED, Step
from pager.domain.records import MessageState


def guard(step: Step) -> str:
    """The SQL condition on `state` a backend guards `step`'s update with: the states as
    literals (SQLite uses a partial index only when it can prove the query's condition
    implies the index's, which it cannot for bound values), in a fixed order."""
    return states_sql(TRANSITIONS[step].sources)


def states_sql(states: frozenset[MessageState]) -> str:
    """`state IN ('…', …)` for these states, in the order `MessageState` lists them
    (`state = '…'` for one)."""
    listed = [f"'{state.value}'" for state in MessageState if state in states]
    return f"state = {listed[0]}" if len(listed) == 1 else f"state IN ({', '.join(listed)})"


#: The condition of the partial index `messages_inbox` (recipient_id, state), the seq ending
#: each entry: a query repeats it, verbatim, to walk one state of one inbox in send order or
#: count an inbox without touching the table (SQLite uses a partial index only for a query
#: whose condition it can prove implies the index's).
INBOX_INDEXED = states_sql(UNSETTLED | {MessageState.DEAD})
#: The condition of the partial index `messages_delayed` (recipient_id, available_at): queued
#: mail whose retry comes later than its send (new mail is available at once and not in it).
DELAYED_INDEXED = "state = 'queued' AND available_at > sent_at"
