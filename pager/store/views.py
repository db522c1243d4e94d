"""The operator's read views of the store, as one namespace: `from pager.store import views`."""

from pager.store._views import (
    agent_messages,
    correspondents,
    get_agent,
    identity_exists,
    inbox_counts,
    list_agents,
    live_sessions,
    snapshot,
    totals,
    totals_snapshot,
)

__all__ = [
    "agent_messages",
    "correspondents",
    "get_agent",
    "identity_exists",
    "inbox_counts",
    "list_agents",
    "live_sessions",
    "snapshot",
    "totals",
    "totals_snapshot",
]
