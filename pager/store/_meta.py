"""The `meta` table: small string settings of the database (key -> value)."""

from __future__ import annotations

import sqlite3

from pager.store._conn import Conn
from pager.store._sql import sql
from pager.store._transactions import immediate_transaction, store_errors


def get_meta(conn: sqlite3.Connection, key: str) -> str | None:
    """The value stored under `key`, or None if there is none."""
    with store_errors(conn):
        row = conn.execute(sql("SELECT value FROM meta WHERE key = {}"), (key,)).fetchone()
    return None if row is None else str(row[0])


def set_meta(conn: sqlite3.Connection, key: str, value: str) -> None:
    """Store `value` under `key`, replacing any earlier value."""
    with store_errors(conn), immediate_transaction(conn):
        conn.execute(
            sql(
                "INSERT INTO meta (key, value) VALUES ({}, {})"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value"
            ),
            (key, value),
        )


def meta_value(conn: Conn, key: str) -> str | None:
    """`get_meta` inside the caller's transaction, on either engine."""
    row = conn.execute(sql("SELECT value FROM meta WHERE key = {}"), (key,)).fetchone()
    return None if row is None else str(row[0])


def put_meta(conn: Conn, key: str, value: str) -> None:
    """`set_meta` inside the caller's transaction (a store write), on either engine."""
    conn.execute(
        sql(
            "INSERT INTO meta (key, value) VALUES ({}, {})"
            " ON CONFLICT (key) DO UPDATE SET value = excluded.value"
        ),
        (key, value),
    )
