"""The operator service behind `/v1` snapshot, agents, messages and actions (SPEC §6).

Reads go through the store's `OperatorViews` port (`pager/store/operator_ports.py`): each one
consistent read that never delays a commit (SQLite: the read side's own read-only connection,
one request at a time in a worker thread, each inside one read transaction). This service
turns a page's last key into the cursor it hands out. Actions go to the directory actor, which
alone ends sessions and commits identity changes.

`attached` in the views is the store's session state. Each identity actor owns its session's
lease in memory and writes a lapse when its lease timer fires, so a lease that has just lapsed
can still show as attached for that instant; `lease_expires_at` is the lease as last persisted
(renewals are persisted every half lease, so the live lease may run up to `lease_ttl / 2`
later).
"""

from __future__ import annotations

from typing import Any

import attrs

from actors._runtime import ActorRef, Call
from actors.directory import (
    ArchiveIdentity,
    DirectoryMessage,
    PurgeIdentity,
    UnarchiveIdentity,
)
from pager import wire
from pager.domain.errors import ErrorCode, PagerError
from pager.domain.hosts import HostBoard
from pager.domain.records import MessageState
from pager.domain.retention import Applied
from pager.domain.views import (
    AgentPage,
    AgentView,
    Archived,
    MessagePage,
    Purged,
    Snapshot,
    Unarchived,
    decode_cursor,
    encode_cursor,
)
from pager.health import HealthBoard
from pager.store.operator_ports import OperatorViews

#: The `reason` operator actions record in their events.
OPERATOR_REASON = "operator"


def _not_found(agent_id: str) -> PagerError:
    return PagerError(
        ErrorCode.NOT_FOUND,
        f"no agent {agent_id!r} (it never existed, or was purged or reaped);"
        " GET /v1/agents lists the agents there are",
        agent_id=agent_id,
    )


class OperatorService:
    def __init__(
        self,
        directory: ActorRef[DirectoryMessage],
        views: OperatorViews,
        health: dict[str, Any],
        board: HealthBoard | None = None,
        *,
        hosts: HostBoard | None = None,
        store: dict[str, Any] | None = None,
    ) -> None:
        self.directory = directory
        self.views = views
        self.broker = {"ok": True, **health}
        if store is not None:  # here, not in /health: that answers without a credential
            self.broker["store"] = store
        self.board = HealthBoard() if board is None else board
        self.hosts = HostBoard("") if hosts is None else hosts

    def _placed(self, agent: AgentView) -> AgentView:
        """`agent` with its host named and whether that host's broker runs (SPEC §13)."""
        host = agent.host or self.hosts.this
        return attrs.evolve(agent, host=host, host_alive=self.hosts.alive(agent.host))

    # -- read views ------------------------------------------------------------------------

    async def snapshot(self, *, agents: bool = True) -> Snapshot:
        """The whole state; without `agents`, only the totals and the event seq."""
        # The broker part is `/health`'s, degradations included (read at each snapshot).
        broker = {**self.broker, **self.board.snapshot()}
        if self.hosts.views():  # a shared store: every broker on it, this one included
            broker["hosts"] = [wire.unstructure(view) for view in self.hosts.views()]
        found = await self.views.snapshot(broker, agents=agents)
        workspaces = tuple(
            attrs.evolve(ws, agents=tuple(self._placed(agent) for agent in ws.agents))
            for ws in found.workspaces
        )
        return attrs.evolve(found, workspaces=workspaces)

    async def agents(
        self,
        *,
        workspace: str | None = None,
        archived: bool | None = None,
        limit: int,
        cursor: str | None = None,
    ) -> AgentPage:
        after = None if cursor is None else decode_cursor("agents", cursor, str)
        found = await self.views.agents(
            workspace=workspace, archived=archived, limit=limit, after=after
        )
        last = found.last
        rows = tuple(self._placed(agent) for agent in found.rows)
        return AgentPage(rows, None if last is None else encode_cursor("agents", last))

    async def agent(self, agent_id: str) -> AgentView:
        found = await self.views.agent(agent_id)
        if found is None:
            raise _not_found(agent_id)
        return self._placed(found)

    async def messages(
        self,
        agent_id: str,
        *,
        state: MessageState | None = None,
        direction: str = "both",
        limit: int,
        cursor: str | None = None,
    ) -> MessagePage:
        before = None if cursor is None else decode_cursor("messages", cursor, int)
        found = await self.views.messages(
            agent_id, state=state, direction=direction, limit=limit, before=before
        )
        if found is None:
            raise _not_found(agent_id)
        last = found.last
        return MessagePage(found.rows, None if last is None else encode_cursor("messages", last))

    # -- actions ---------------------------------------------------------------------------

    async def archive(self, agent_id: str) -> Archived:
        done = await self._act(ArchiveIdentity(agent_id, OPERATOR_REASON))
        return Archived(await self.agent(agent_id), done.ended_sessions)

    async def unarchive(self, agent_id: str) -> Unarchived:
        await self._act(UnarchiveIdentity(agent_id, OPERATOR_REASON))
        return Unarchived(await self.agent(agent_id))

    async def purge(self, agent_id: str) -> Purged:
        done = await self._act(PurgeIdentity(agent_id, OPERATOR_REASON))
        return Purged(
            done.agent_id, done.alias, done.address, done.ended_sessions, done.dead_lettered
        )

    async def _act(self, message: Call[Applied]) -> Applied:
        return await self.directory.call(message)
