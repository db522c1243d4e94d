"""The PostgreSQL connection adapter's translation of the store's SQL (pager/store/pg/_conn.py):
SQLite's placeholders as psycopg's, literal percents kept literal, casts left alone."""

from __future__ import annotations

from pager.store.pg._conn import SPELLED_OTHERWISE, to_psycopg


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


def test_statements_sqlite_spells_its_own_way_are_spelled_for_postgresql() -> None:
    for sqlite, postgresql in SPELLED_OTHERWISE.items():
        assert to_psycopg(sqlite) == postgresql.replace("?", "%s").encode()
        assert b"sqlite" not in to_psycopg(sqlite)
