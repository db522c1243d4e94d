"""The SQLite backend's ports, assembled: what the broker tree hands the messaging subtree."""

from __future__ import annotations

from pager.store.ports import MessagingPorts
from pager.store.read_views import ReadViews
from pager.store.sqlite_directory import SqliteDirectory
from pager.store.sqlite_ports import SqliteInbox, SqliteRetention, SqliteSessions, Writer


def messaging_ports(writer: Writer, sweep_reads: ReadViews) -> MessagingPorts:
    """The ports over one writer; `sweep_reads` is the retention plan's own read connection."""
    return MessagingPorts(
        inbox=SqliteInbox(writer),
        sessions=SqliteSessions(writer),
        directory=SqliteDirectory(writer),
        retention=SqliteRetention(writer, sweep_reads),
    )
