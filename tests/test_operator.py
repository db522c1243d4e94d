"""The operator's read-only connection (pager/operator.py `ReadViews`) on real SQLite: it
cannot write, and it reads while the writer holds its write lock, without waiting for it."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import trio

from pager.store import close_database, open_database
from pager.store.read_views import ReadViews


@pytest.fixture
def writer(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    connection = open_database(tmp_path / "pager.db")
    connection.execute("INSERT INTO meta (key, value) VALUES ('colour', 'blue')")
    yield connection
    close_database(connection)


@pytest.fixture
async def reads(tmp_path: Path, writer: sqlite3.Connection) -> AsyncIterator[ReadViews]:
    views = ReadViews(tmp_path / "pager.db")
    yield views
    await views.aclose()


def _colour(conn: sqlite3.Connection) -> str:
    row = conn.execute("SELECT value FROM meta WHERE key = 'colour'").fetchone()
    return str(row[0])


async def test_read_views_refuse_to_write(reads: ReadViews, writer: sqlite3.Connection) -> None:
    """A write through the read connection fails and changes nothing."""
    with pytest.raises(sqlite3.OperationalError):
        await reads.read(lambda c: c.execute("UPDATE meta SET value = 'red'"))
    assert _colour(writer) == "blue"
    assert await reads.read(_colour) == "blue"  # the connection is still usable


async def test_read_views_read_beside_an_open_write(
    reads: ReadViews, writer: sqlite3.Connection
) -> None:
    """While the writer holds an uncommitted write, a read answers at once with the last
    committed state; after the commit the next read sees the change."""
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("UPDATE meta SET value = 'red' WHERE key = 'colour'")
    try:
        with trio.fail_after(5):  # far below the 5 s busy timeout a blocked read would wait
            assert await reads.read(_colour) == "blue"
    finally:
        writer.execute("COMMIT")
    assert await reads.read(_colour) == "red"


async def test_read_views_one_transaction_per_read(
    reads: ReadViews, writer: sqlite3.Connection
) -> None:
    """Everything one read does sees one instant: a commit landing in the middle of it is not
    seen until the next read."""

    def twice(conn: sqlite3.Connection) -> tuple[str, str]:
        first = _colour(conn)
        writer.execute("UPDATE meta SET value = 'green' WHERE key = 'colour'")  # autocommit
        return first, _colour(conn)

    assert await reads.read(twice) == ("blue", "blue")
    assert await reads.read(_colour) == "green"
