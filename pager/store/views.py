"""The read views of the store (the operator's, and the roster), as one namespace:
`from pager.store import views`."""

from pager.domain.roster import RosterEntry, RosterKey
from pager.store._views import (
    agent_messages,
    correspondents,
    get_agent,
    identity_exists,
    inbox_counts,
    list_agents,
    live_sessions,
    roster,
    snapshot,
    totals,
    totals_snapshot,
)

__all__ = [
    "RosterEntry",
    "RosterKey",
    "agent_messages",
    "correspondents",
    "get_agent",
    "identity_exists",
    "inbox_counts",
    "list_agents",
    "live_sessions",
    "roster",
    "snapshot",
    "totals",
    "totals_snapshot",
]
