"""The operator's read views behind a port (ARCHITECTURE.md, "The store behind ports":
`store.views`): typed and backend-neutral, what `pager/operator.py` reads for `/v1` snapshot,
agents, one agent and an agent's messages.

Each call is one consistent read (counts, sessions and the event seq from one instant) that
never waits for, nor holds up, a write. Pages come back with the key of their last row when
there are more; the operator service turns that key into the cursor it hands out, so cursors
stay the same whatever backend read the page. The SQLite backend is
`pager/store/sql_operator.py`.
"""

from __future__ import annotations

from typing import Any, Generic, Protocol, TypeVar

import attrs

from pager.domain.records import MessageState
from pager.domain.views import AgentView, MessageView, Snapshot

T = TypeVar("T")
K = TypeVar("K")


@attrs.frozen
class Slice(Generic[T, K]):
    """One page of a view: its rows in the view's order, and the key of the last row when
    there are more (None: nothing follows)."""

    rows: tuple[T, ...]
    last: K | None


class OperatorViews(Protocol):
    async def snapshot(self, broker: dict[str, Any], *, agents: bool) -> Snapshot:
        """The whole state, `broker` as its broker part; without `agents`, only the totals
        and the event seq (no workspaces)."""
        ...

    async def agents(
        self, *, workspace: str | None, archived: bool | None, limit: int, after: str | None
    ) -> Slice[AgentView, str]:
        """Up to `limit` agents in agent-id order after the agent id `after` (renames and
        moves never reorder it), of one workspace slug and archived or not when given; the
        key is an agent id."""
        ...

    async def agent(self, agent_id: str) -> AgentView | None:
        """One agent; None when there is none (never was, or purged or reaped)."""
        ...

    async def messages(
        self,
        agent_id: str,
        *,
        state: MessageState | None,
        direction: str,
        limit: int,
        before: int | None,
    ) -> Slice[MessageView, int] | None:
        """Up to `limit` of the agent's messages, newest first, sent before the one keyed
        `before` (`direction`: in, out or both; `state`: only those in it); the key is a
        message's place in send order. None when there is no such agent (read in the same
        instant as the page)."""
        ...
