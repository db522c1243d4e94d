"""The store the broker runs on, as its composition root (pager/broker/tree.py) sees it.

`open_backend` picks the backend from the configuration once: the embedded SQLite file (the
default) or a PostgreSQL database shared by several brokers (SPEC §13; its module, and psycopg,
are imported only then). Everything else reaches the store through the ports these hand out,
and never learns which one it is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import trio

from pager.config import Config
from pager.domain.clock import WallClock
from pager.domain.exports import Exports
from pager.domain.hosts import HostBoard
from pager.health import HealthBoard
from pager.launch.paths import StatePaths
from pager.store._conn import AfterCommit, Conn
from pager.store.ports import EventLog, Leadership, Wakeups
from pager.store.sqlite_writer import BrokerRunInfo

if TYPE_CHECKING:
    from pager.store.sqlite_backend import ServeWriter

T = TypeVar("T")


class StoreAccess(Protocol):
    """What the broker's children hold of the running store: short lookups now, reads, and
    writes committed before they return (the SQLite checkpoint, or the PostgreSQL writer)."""

    #: Whether a send's decision facts are read ahead of its write (pager/store/ports.py
    #: `ReadAhead`).
    reads_ahead: bool

    async def lookup(self, fn: Callable[[Conn], T]) -> T: ...

    async def read(self, fn: Callable[[Conn], T]) -> T: ...

    async def write(self, fn: Callable[[Conn], T], *, heavy: bool = False) -> T: ...

    async def write_late(
        self, fn: Callable[[Conn], AfterCommit[T]], *, heavy: bool = False
    ) -> T: ...


class ReadSide(Protocol):
    """A read connection of one user's own (views, listings, the retention plan)."""

    async def read(self, fn: Callable[[Conn], T]) -> T: ...

    async def aclose(self) -> None: ...


class Backend(Protocol):
    #: "sqlite" or "postgresql", as `pager status` and /health name it.
    kind: str
    #: The `meta` key of the port this broker keeps across restarts (one per host).
    port_key: str
    #: The clock every persisted time and deadline is read from (the database's, when shared).
    clock: WallClock
    #: The store's hosts as this broker last saw them (one, always alive, when not shared).
    hosts: HostBoard
    #: This broker's host as the store records it on sessions ('' when not shared).
    store_host: str
    wakeups: Wakeups
    #: How a write tells the other brokers of mail inside its transaction (None: no others).
    wake_in_write: Callable[[Conn, str], None] | None
    leadership: Leadership

    async def run(
        self,
        *,
        on_commit: Callable[[], None],
        board: HealthBoard,
        task_status: trio.TaskStatus[StoreAccess] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """The store child of the tree: opens the store and records this broker run, hands
        out its `StoreAccess`, and serves until cancelled; then records the stop."""
        ...

    def read_side(self) -> ReadSide: ...

    def event_log(self, *, inline: bool = False) -> EventLog:
        """A new reader of the event log (the feed's, or one replay's); blocking, opened off
        the loop. `inline`: its calls run on the loop (tests on trio's mock clock)."""
        ...

    def exports(self) -> Exports: ...

    def status(self) -> dict[str, Any]:
        """What /health and `pager status` say of the store (never a password)."""
        ...


def open_backend(
    config: Config,
    paths: StatePaths,
    run: BrokerRunInfo,
    utc_now: Callable[[], str],
    clock: WallClock,
    *,
    serve_sqlite: ServeWriter,
) -> Backend:
    """The configured store; `serve_sqlite` runs the SQLite writer (the composition root's)."""
    if config.store.kind == "postgresql":
        from pager.store.pg.backend import PgBackend  # psycopg only when it is used

        return PgBackend(config.store, config.host_name, run, utc_now, config.windows)
    from pager.store.sqlite_backend import SqliteBackend

    return SqliteBackend(
        paths.database, run, utc_now, clock, HostBoard(config.host_name), serve_sqlite
    )
