"""The operator's views (`pager/store/operator_ports.py`) over either engine's read side.

Every call is one `read` of the read side (SQLite's `ReadViews`, PostgreSQL's `PgReadSide`): its
own read-only connection (on SQLite, WAL lets it read while the writer writes, and a long read
never delays a commit), one request at a time in a
worker thread, inside one read transaction, running the views of `pager/store/_views.py`.
"""

from __future__ import annotations

from typing import Any

from pager.domain.records import MessageState
from pager.domain.views import AgentView, MessageView, Snapshot
from pager.store import views
from pager.store._conn import Conn
from pager.store.operator_ports import Slice
from pager.store.sql_ports import Reads


class SqlOperatorViews:
    def __init__(self, reads: Reads) -> None:
        self._reads = reads

    async def snapshot(self, broker: dict[str, Any], *, agents: bool) -> Snapshot:
        build = views.snapshot if agents else views.totals_snapshot
        return await self._reads.read(lambda conn: build(conn, broker))

    async def agents(
        self, *, workspace: str | None, archived: bool | None, limit: int, after: str | None
    ) -> Slice[AgentView, str]:
        def read(conn: Conn) -> Slice[AgentView, str]:
            found, last = views.list_agents(
                conn, workspace=workspace, archived=archived, limit=limit, after=after
            )
            return Slice(tuple(found), last)

        return await self._reads.read(read)

    async def agent(self, agent_id: str) -> AgentView | None:
        return await self._reads.read(lambda conn: views.get_agent(conn, agent_id))

    async def messages(
        self,
        agent_id: str,
        *,
        state: MessageState | None,
        direction: str,
        limit: int,
        before: int | None,
    ) -> Slice[MessageView, int] | None:
        def read(conn: Conn) -> Slice[MessageView, int] | None:
            if not views.identity_exists(conn, agent_id):
                return None
            found, last = views.agent_messages(
                conn, agent_id, state=state, direction=direction, limit=limit, before=before
            )
            return Slice(tuple(found), last)

        return await self._reads.read(read)
