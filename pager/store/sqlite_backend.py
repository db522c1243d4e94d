"""The SQLite backend, assembled: the store child of the broker tree (the messaging subtree's
ports over its writer are pager/store/sql_messaging.py's, as over PostgreSQL's).

The writer is a plain object (sqlite_writer.py); what runs it (its mailbox, so its group
commit) is handed in by the composition root (`ServeWriter`): the store imports no actor."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import trio

from pager.domain.clock import WallClock
from pager.domain.exports import Exports
from pager.domain.hosts import HostBoard
from pager.health import HealthBoard
from pager.store._conn import Conn
from pager.store.events import open_event_log
from pager.store.ports import (
    AlwaysLead,
    EventLog,
    Leadership,
    NoWakeups,
    Wakeups,
)
from pager.store.read_views import ReadViews
from pager.store.sqlite_export import SqliteExports
from pager.store.sqlite_writer import BrokerRunInfo, QuickReads, SqliteWriter

if TYPE_CHECKING:
    from pager.store.backend import StoreAccess


class ServeWriter(Protocol):
    """Runs `writer` until cancelled (opened on start, closed on the way out), handing out the
    access the broker's children share: the broker's runner, actors/store_writer.py."""

    async def __call__(
        self,
        writer: SqliteWriter,
        quick: QuickReads,
        *,
        task_status: trio.TaskStatus[StoreAccess],
    ) -> None: ...


class SqliteBackend:
    """The embedded default: one database file in the state directory, one broker."""

    kind = "sqlite"
    port_key = "port"

    def __init__(
        self,
        database: Path,
        run: BrokerRunInfo | None,
        utc_now: Callable[[], str],
        clock: WallClock,
        hosts: HostBoard,
        serve_writer: ServeWriter,
    ) -> None:
        self._database = database
        self._serve_writer = serve_writer
        self._run = run
        self._utc_now = utc_now
        self.clock = clock
        self.hosts = hosts
        self.store_host = ""
        self.wakeups: Wakeups = NoWakeups()
        self.wake_in_write: Callable[[Conn, str], None] | None = None
        self.leadership: Leadership = AlwaysLead()

    async def run(
        self,
        *,
        on_commit: Callable[[], None],
        board: HealthBoard,
        task_status: trio.TaskStatus[StoreAccess] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        writer = SqliteWriter(
            self._database, self._run, self._utc_now, on_commit=on_commit, board=board
        )
        quick = QuickReads(self._database)
        try:
            await self._serve_writer(writer, quick, task_status=task_status)
        finally:
            quick.close()

    def read_side(self) -> ReadViews:
        return ReadViews(self._database)

    def event_log(self, *, inline: bool = False) -> EventLog:
        return open_event_log(self._database, inline=inline)

    def exports(self) -> Exports:
        return SqliteExports(self._database)

    def status(self) -> dict[str, Any]:
        return {"kind": self.kind, "where": str(self._database)}
