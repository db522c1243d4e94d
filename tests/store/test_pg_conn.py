"""The PostgreSQL connection adapter's translation of the store's SQL (pager/store/pg/_conn.py):
SQLite's placeholders as psycopg's, literal percents kept literal, casts left alone; what the
engines spell differently is each one's dialect (pager/store/_dialect.py), never a rewrite."""

from __future__ import annotations

import sqlite3

from pager.store._dialect import SQLITE, dialect_of
from pager.store.pg._batch import BatchConn
from pager.store.pg._conn import PgConn, to_psycopg
from pager.store.pg._dialect import POSTGRESQL


def test_positional_and_named_placeholders_become_psycopgs() -> None:
    assert to_psycopg("SELECT a FROM t WHERE b = ? AND c > ?") == (
        b"SELECT a FROM t WHERE b = %s AND c > %s"
    )
    assert to_psycopg("SELECT * FROM d WHERE due <= :now LIMIT :most") == (
        b"SELECT * FROM d WHERE due <= %(now)s LIMIT %(most)s"
    )


def test_a_literal_percent_stays_literal_and_a_cast_is_not_a_name() -> None:
    assert to_psycopg("SELECT 1 WHERE name LIKE 'a%' AND x = ?") == (
        b"SELECT 1 WHERE name LIKE 'a%%' AND x = %s"
    )
    assert to_psycopg("SELECT now()::text, :at") == b"SELECT now()::text, %(at)s"


def test_each_engine_speaks_its_own_dialect() -> None:
    conn = sqlite3.connect(":memory:")
    try:
        assert dialect_of(conn) is SQLITE
    finally:
        conn.close()
    assert (PgConn.dialect, BatchConn.dialect) == (POSTGRESQL, POSTGRESQL)
    # A statement is sent as the shared module wrote it: nothing is swapped by its text.
    assert to_psycopg("SELECT seq FROM sqlite_sequence WHERE name = 'events'") == (
        b"SELECT seq FROM sqlite_sequence WHERE name = 'events'"
    )
