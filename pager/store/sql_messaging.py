"""The ports the messaging subtree is handed, over either engine's writer: the classes of
sql_ports.py, sql_directory.py and wake_book.py run the statements both engines speak."""

from __future__ import annotations

from collections.abc import Callable

from pager.domain.hosts import HostBoard
from pager.store._conn import Conn
from pager.store.ports import AlwaysLead, Leadership, MessagingPorts, NoWakeups, Wakeups
from pager.store.sql_directory import SqlDirectory
from pager.store.sql_ports import Reads, SqlInbox, SqlRetention, SqlSessions, Writer
from pager.store.wake_book import StoreWakeBook


def messaging_ports(
    writer: Writer,
    sweep_reads: Reads,
    *,
    host: str = "",
    wakeups: Wakeups | None = None,
    leadership: Leadership | None = None,
    hosts: HostBoard | None = None,
    wake_in_write: Callable[[Conn, str], None] | None = None,
) -> MessagingPorts:
    """The ports over one writer; `sweep_reads` is the retention plan's own read connection.
    The rest is for a store several brokers share (pager/store/pg): this broker's host, the
    wakes across hosts (and how a write tells of mail inside its transaction), the sweeping
    leader's lock and the hosts' liveness."""
    return MessagingPorts(
        inbox=SqlInbox(writer, wake_in_write),
        sessions=SqlSessions(writer, host),
        directory=SqlDirectory(writer),
        retention=SqlRetention(writer, sweep_reads),
        host=host,
        wakeups=NoWakeups() if wakeups is None else wakeups,
        leadership=AlwaysLead() if leadership is None else leadership,
        hosts=hosts,
        wake=StoreWakeBook(writer),
    )
