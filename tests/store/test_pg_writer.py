"""The PostgreSQL store's first writer (pager/store/pg/_writer.py) on the tests' cluster: a
write commits whole or not at all, and a read sees one snapshot for all its statements."""

from __future__ import annotations

from pathlib import Path

import pytest

from pager.health import HealthBoard
from pager.store import StoreBusy
from pager.store._conn import Conn
from pager.store._sql import sql
from pager.store.pg._database import connect, upgrade
from pager.store.pg._writer import PgWriter
from tests.store.test_pg_schema import pg_store


def _meta(conn: Conn) -> dict[str, str]:
    return {str(k): str(v) for k, v in conn.execute(sql("SELECT key, value FROM meta")).fetchall()}


async def test_a_write_commits_whole_or_not_at_all(pg_dsn: str, tmp_path: Path) -> None:
    store = pg_store(pg_dsn, tmp_path)
    with connect(store) as conn:
        upgrade(conn, where="test")
    writer = PgWriter(store)
    try:
        await writer.write(lambda c: c.execute(sql("INSERT INTO meta VALUES ('a', '1')")))

        def half(c: Conn) -> None:
            c.execute(sql("INSERT INTO meta VALUES ('b', '2')"))
            raise RuntimeError("the second half failed")

        with pytest.raises(RuntimeError):
            await writer.write(half)
        meta = await writer.lookup(_meta)
        assert meta.get("a") == "1"
        assert "b" not in meta
    finally:
        writer.close()


async def test_a_read_sees_one_snapshot(pg_dsn: str, tmp_path: Path) -> None:
    """A commit by another broker between a read's two statements is not seen by the
    second one (the retention plan reads several tables and must see one instant)."""
    store = pg_store(pg_dsn, tmp_path)
    with connect(store) as conn:
        upgrade(conn, where="test")
    writer = PgWriter(store)
    other = connect(store)
    try:

        def twice(c: Conn) -> tuple[int, int]:
            first = int(c.execute(sql("SELECT COUNT(*) FROM meta")).fetchone()[0])
            other.execute("INSERT INTO meta VALUES ('elsewhere', 'x')")  # autocommit
            second = int(c.execute(sql("SELECT COUNT(*) FROM meta")).fetchone()[0])
            return first, second

        first, second = await writer.read(twice)
        assert first == second
        assert "elsewhere" in await writer.lookup(_meta)  # a later read sees it
    finally:
        other.close()
        writer.close()


async def test_a_lock_held_past_its_timeout_is_store_busy_and_marks_health(
    pg_dsn: str, tmp_path: Path
) -> None:
    """Another connection holding the row a write needs, past the write's lock timeout: the
    writer raises `StoreBusy` where it ran the statement (its connection kept), the store is
    marked degraded, and the next write clears it."""
    store = pg_store(pg_dsn, tmp_path)
    with connect(store) as conn:
        upgrade(conn, where="test")
        conn.execute("INSERT INTO meta VALUES ('held', '0')")
    board = HealthBoard()
    writer = PgWriter(store, inline=True, board=board)

    def update(c: Conn) -> None:
        c.execute(sql("SET LOCAL lock_timeout = '100ms'"))
        c.execute(sql("UPDATE meta SET value = '1' WHERE key = 'held'"))

    try:
        with connect(store) as holder, holder.transaction():
            holder.execute("SELECT value FROM meta WHERE key = 'held' FOR UPDATE")
            with pytest.raises(StoreBusy, match="lock"):
                await writer.write(update)
            assert board.snapshot()["status"] == "degraded"
        await writer.write(update)
        assert board.snapshot() == {"status": "ok"}
        assert (await writer.lookup(_meta))["held"] == "1"
    finally:
        writer.close()


async def test_lookups_keep_one_plan_per_prepared_statement_and_writes_plan_each_time(
    pg_dsn: str, tmp_path: Path
) -> None:
    """A send's read joins about a dozen tables: planning it for each send cost the server
    several times running it, so lookup connections keep the generic plan of a statement
    psycopg prepared. Writes (sent as one batch of literal statements) are planned as usual."""
    store = pg_store(pg_dsn, tmp_path)
    with connect(store) as conn:
        upgrade(conn, where="test")
    writer = PgWriter(store)
    show = sql("SELECT current_setting('plan_cache_mode')")
    try:
        looked_up = await writer.lookup(lambda c: str(c.execute(show).fetchone()[0]))
        written = await writer.write(lambda c: str(c.execute(show).fetchone()[0]))
        assert (looked_up, written) == ("force_generic_plan", "auto")
    finally:
        writer.close()
