"""Every operation of the store's ports is a coroutine function, on the ports and on each
backend's implementation: a caller on the event loop awaits it, and the backend decides where it
runs (SQLite's quick reads on the loop; every PostgreSQL statement in a worker thread), so a slow
database link never holds the broker's loop. No database here: the shapes are inspected."""

from __future__ import annotations

import inspect

import pytest

from actors.store_writer import Checkpoint
from pager.domain import exports
from pager.store import backend as store_backend
from pager.store import operator_ports, ports, service_ports
from pager.store.off_loop import ThreadedEventLog, ThreadedExportReader
from pager.store.pg._export import PgExports
from pager.store.pg._writer import PgWriter
from pager.store.pg.backend import PgLeadership, PgReadSide, PgWakeups
from pager.store.read_views import ReadViews
from pager.store.sql_directory import SqlDirectory
from pager.store.sql_operator import SqlOperatorViews
from pager.store.sql_ports import SqlInbox, SqlRetention, SqlSessions
from pager.store.sql_service import SqlAccounts, SqlListings, SqlLookups
from pager.store.sqlite_export import SqliteExports
from pager.store.wake_book import StoreWakeBook

#: Every port Protocol (what actors, services and edges call of the store).
PORTS: tuple[type, ...] = (
    ports.Inbox,
    ports.Sessions,
    ports.Retention,
    ports.Leadership,
    ports.Directory,
    ports.EventLog,
    ports.Wakeups,
    ports.WakeBook,
    service_ports.Lookups,
    service_ports.Listings,
    service_ports.Accounts,
    operator_ports.OperatorViews,
    exports.ExportReader,
    exports.Exports,
    store_backend.StoreAccess,
    store_backend.ReadSide,
)

#: Each implementation, and the port it implements, on either backend.
IMPLEMENTATIONS: tuple[tuple[type, type], ...] = (
    (SqlInbox, ports.Inbox),
    (SqlSessions, ports.Sessions),
    (SqlRetention, ports.Retention),
    (ports.AlwaysLead, ports.Leadership),
    (PgLeadership, ports.Leadership),
    (SqlDirectory, ports.Directory),
    (ThreadedEventLog, ports.EventLog),
    (ports.NoWakeups, ports.Wakeups),
    (PgWakeups, ports.Wakeups),
    (StoreWakeBook, ports.WakeBook),
    (SqlLookups, service_ports.Lookups),
    (SqlListings, service_ports.Listings),
    (SqlAccounts, service_ports.Accounts),
    (SqlOperatorViews, operator_ports.OperatorViews),
    (ThreadedExportReader, exports.ExportReader),
    (SqliteExports, exports.Exports),
    (PgExports, exports.Exports),
    (Checkpoint, store_backend.StoreAccess),
    (PgWriter, store_backend.StoreAccess),
    (ReadViews, store_backend.ReadSide),
    (PgReadSide, store_backend.ReadSide),
)


def operations(port: type) -> list[str]:
    """The port's public methods, as it declares them."""
    return [
        name
        for name, value in vars(port).items()
        if not name.startswith("_") and inspect.isfunction(value)
    ]


@pytest.mark.parametrize("port", PORTS, ids=lambda port: port.__name__)
def test_every_port_operation_is_a_coroutine_function(port: type) -> None:
    found = operations(port)
    assert found, f"{port.__name__} declares no operation"
    blocking = [name for name in found if not inspect.iscoroutinefunction(getattr(port, name))]
    assert blocking == [], f"{port.__name__}: not async: {blocking}"


@pytest.mark.parametrize(
    ("implementation", "port"), IMPLEMENTATIONS, ids=lambda value: value.__name__
)
def test_every_implementation_of_a_port_is_async_too(implementation: type, port: type) -> None:
    blocking = [
        name
        for name in operations(port)
        if not inspect.iscoroutinefunction(getattr(implementation, name))
    ]
    assert blocking == [], f"{implementation.__name__} ({port.__name__}): not async: {blocking}"
