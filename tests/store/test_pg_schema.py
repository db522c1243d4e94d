"""The PostgreSQL store's schema and its upgrades (pager/store/pg), on the tests' own cluster:
a fresh database upgraded once whoever tries, the same tables and columns as the SQLite store,
a newer database refused untouched, a failed migration rolled back whole, and a wrong password
refused without the password in any message."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from pager.config import StoreConfig
from pager.store import close_database, open_database
from pager.store.pg._database import (
    PgMigrationFailed,
    PgStoreTooNew,
    PgUnreachable,
    connect,
    schema_version,
    upgrade,
)
from pager.store.pg._schema import PG_MIGRATIONS, PG_SCHEMA_VERSION, PgMigration

#: What the PostgreSQL store has that the SQLite one (one machine) has no need of.
MULTI_HOST_ONLY: dict[str, set[str]] = {
    "workspaces": {"host"},
    "sessions": {"host"},
    "broker_runs": {"host"},
}


def pg_store(dsn: str, tmp_path: Path, *, password: str | None = None) -> StoreConfig:
    """The StoreConfig of a test database: its URL without the password, which goes in a
    password file (mode 600), as config.toml would name it."""
    parts = urlsplit(dsn)
    secret = password if password is not None else (parts.password or "")
    netloc = f"{parts.username}@{parts.hostname}:{parts.port}"
    url = urlunsplit(("postgresql", netloc, parts.path, parts.query, ""))
    file = tmp_path / "store-password"
    file.write_text(secret + "\n")
    file.chmod(0o600)
    return StoreConfig(kind="postgresql", url=url, password_file=file)


def _tables(conn: psycopg.Connection[Any]) -> dict[str, set[str]]:
    rows = conn.execute(
        "SELECT table_name, column_name FROM information_schema.columns"
        " WHERE table_schema = 'public'"
    ).fetchall()
    found: dict[str, set[str]] = {}
    for table, column in rows:
        found.setdefault(str(table), set()).add(str(column))
    return found


def _sqlite_tables(tmp_path: Path) -> dict[str, set[str]]:
    conn = open_database(tmp_path / "pager.db")
    try:
        names = [
            row[0]
            for row in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        ]
        return {
            name: {row[1] for row in conn.execute(f"PRAGMA table_info({name})")} for name in names
        }
    finally:
        close_database(conn)


def test_a_fresh_database_is_upgraded_to_the_sqlite_stores_tables_and_the_hosts(
    pg_dsn: str, tmp_path: Path
) -> None:
    store = pg_store(pg_dsn, tmp_path)
    with connect(store) as conn:
        assert schema_version(conn) == 0
        assert upgrade(conn, where=store.display()) == PG_SCHEMA_VERSION
        assert schema_version(conn) == PG_SCHEMA_VERSION
        pg = _tables(conn)
    sqlite = _sqlite_tables(tmp_path)
    # The same tables and columns, so the store's statements run on either engine; plus what
    # brokers on several machines need.
    assert set(pg) == set(sqlite) | {"hosts"}
    for table, columns in sqlite.items():
        assert pg[table] == columns | MULTI_HOST_ONLY.get(table, set()), table


def test_upgrading_again_changes_nothing(pg_dsn: str, tmp_path: Path) -> None:
    store = pg_store(pg_dsn, tmp_path)
    with connect(store) as conn:
        upgrade(conn, where="test")
        conn.execute("INSERT INTO meta (key, value) VALUES ('port', '4242')")
        assert upgrade(conn, where="test") == PG_SCHEMA_VERSION
        assert conn.execute("SELECT value FROM meta WHERE key = 'port'").fetchone() == ("4242",)


def test_brokers_starting_together_upgrade_it_once(pg_dsn: str, tmp_path: Path) -> None:
    """Four brokers open an empty database at once: one upgrades, the others wait for its
    lock and find the schema current (a second CREATE TABLE would fail them)."""
    store = pg_store(pg_dsn, tmp_path)
    start = threading.Barrier(4)
    outcomes: list[object] = []

    def open_it() -> None:
        with connect(store) as conn:
            start.wait()
            try:
                outcomes.append(upgrade(conn, where="test"))
            except Exception as exc:  # reported below, with the others
                outcomes.append(exc)

    threads = [threading.Thread(target=open_it) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert outcomes == [PG_SCHEMA_VERSION] * 4


def test_a_database_of_a_newer_pager_is_refused_untouched(pg_dsn: str, tmp_path: Path) -> None:
    store = pg_store(pg_dsn, tmp_path)
    with connect(store) as conn:
        upgrade(conn, where="test")
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
        before = _tables(conn)
        with pytest.raises(PgStoreTooNew) as refused:
            upgrade(conn, where="the store")
        assert (refused.value.found, refused.value.supported) == (99, PG_SCHEMA_VERSION)
        assert "upgrade Pager" in str(refused.value)
        assert schema_version(conn) == 99
        assert _tables(conn) == before


def test_a_failing_migration_is_rolled_back_whole(pg_dsn: str, tmp_path: Path) -> None:
    store = pg_store(pg_dsn, tmp_path)
    broken = (
        *PG_MIGRATIONS,
        PgMigration(
            PG_SCHEMA_VERSION + 1,
            "a step that fails halfway",
            ("CREATE TABLE halfway (x integer)", "ALTER TABLE no_such_table ADD COLUMN y text"),
        ),
    )
    with connect(store) as conn:
        with pytest.raises(PgMigrationFailed) as failed:
            upgrade(conn, where="the store", migrations=broken)
        assert failed.value.version == PG_SCHEMA_VERSION + 1
        assert "no_such_table" in str(failed.value)
        assert schema_version(conn) == 0  # the earlier migrations of that upgrade too
        assert _tables(conn) == {}


def test_a_wrong_password_is_unreachable_and_never_shown(pg_dsn: str, tmp_path: Path) -> None:
    store = pg_store(pg_dsn, tmp_path, password="not-the-password-4b1d")
    with pytest.raises(PgUnreachable) as refused:
        connect(store)
    assert "password authentication failed" in str(refused.value)
    assert "not-the-password-4b1d" not in str(refused.value)
    assert "not-the-password-4b1d" not in repr(store)


def test_version_3_counts_the_refusals_the_events_recorded(pg_dsn: str, tmp_path: Path) -> None:
    """As SQLite's schema 11: each retained `send.refused` event becomes a count of its
    sender, reason and minute, so the snapshot's `refused_sends` survives the upgrade."""
    store = pg_store(pg_dsn, tmp_path)
    with connect(store) as conn:
        upgrade(conn, where="test", migrations=PG_MIGRATIONS[:2])
        for at, sender in [("2026-01-02T03:04:05.000+00:00", "agt_a")] * 2 + [
            ("2026-01-02T03:05:00.000+00:00", "agt_a")
        ]:
            data = json.dumps({"sender_id": sender, "reason": "hop_limit"})
            conn.execute(
                "INSERT INTO events (at, type, data) VALUES (%s, 'send.refused', %s)", (at, data)
            )
        upgrade(conn, where="test")
        rows = conn.execute(
            "SELECT sender_id, reason, minute, count FROM refusals ORDER BY minute"
        ).fetchall()
    minute = 1767323045 // 60  # 2026-01-02T03:04:05Z
    assert rows == [("agt_a", "hop_limit", minute, 2), ("agt_a", "hop_limit", minute + 1, 1)]
