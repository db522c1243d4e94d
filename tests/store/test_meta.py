"""The meta key/value table on a real SQLite database."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from pager.store import close_database, get_meta, open_database, set_meta


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    connection = open_database(tmp_path / "pager.db")
    yield connection
    close_database(connection)


def test_get_meta_missing_key_is_none(conn: sqlite3.Connection) -> None:
    """An unknown key reads as None."""
    assert get_meta(conn, "absent") is None


def test_set_meta_round_trips_and_replaces(conn: sqlite3.Connection) -> None:
    """A stored value reads back, and a second set replaces it."""
    set_meta(conn, "port", "7411")
    assert get_meta(conn, "port") == "7411"
    set_meta(conn, "port", "")
    assert get_meta(conn, "port") == ""
    assert conn.execute("SELECT count(*) FROM meta").fetchone() == (1,)
    assert not conn.in_transaction


def test_set_meta_survives_reopen(tmp_path: Path) -> None:
    """A committed value is there after the database is closed and reopened."""
    path = tmp_path / "pager.db"
    conn = open_database(path)
    set_meta(conn, "instance", "abc")
    close_database(conn)
    conn = open_database(path)
    try:
        assert get_meta(conn, "instance") == "abc"
    finally:
        close_database(conn)
