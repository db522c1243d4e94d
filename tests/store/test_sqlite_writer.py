"""The checkpoint: write batches whose statements run on the event loop (the commit in a worker
thread; heavy writes wholly there), and quick reads on the loop through a read-only connection
that sees the last committed state. Real SQLite."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path

import pytest
import trio
import trio.testing

from actors._runtime import start_actor
from actors.store_writer import Checkpoint, CheckpointActor
from pager.store import (
    StoreBusy,
    _database,
    close_database,
    get_meta,
    list_broker_runs,
    open_database,
    set_meta,
)
from pager.store.sqlite_writer import BrokerRunInfo, QuickReads, SqliteWriter


@asynccontextmanager
async def running_checkpoint(database: Path) -> AsyncIterator[Checkpoint]:
    async with trio.open_nursery() as nursery:
        ref = await start_actor(
            nursery, CheckpointActor(SqliteWriter(database, None, lambda: "now")), name="store"
        )
        quick = QuickReads(database)
        try:
            yield Checkpoint(ref, quick)
        finally:
            quick.close()
            ref.stop()


async def test_lookup_sees_each_committed_write_at_once(tmp_path: Path) -> None:
    async with running_checkpoint(tmp_path / "pager.db") as checkpoint:
        assert await checkpoint.lookup(lambda conn: get_meta(conn, "greeting")) is None
        for greeting in ("hi", "hello", "hey"):
            await checkpoint.write(partial(set_meta, key="greeting", value=greeting))
            assert await checkpoint.lookup(lambda conn: get_meta(conn, "greeting")) == greeting


async def test_lookup_cannot_write_and_survives_a_failed_read(tmp_path: Path) -> None:
    async with running_checkpoint(tmp_path / "pager.db") as checkpoint:
        await checkpoint.write(lambda conn: set_meta(conn, "greeting", "hi"))
        quick = QuickReads(tmp_path / "pager.db")
        try:
            with pytest.raises(sqlite3.OperationalError, match=r"readonly|query_only"):
                quick.run(lambda conn: conn.execute("DELETE FROM meta"))
            with pytest.raises(ZeroDivisionError):
                quick.run(lambda conn: 1 / 0)
            # Each failure ended its read transaction: the next lookup works and sees the store.
            assert quick.run(lambda conn: get_meta(conn, "greeting")) == "hi"
        finally:
            quick.close()


async def test_write_statements_run_on_the_loop_unless_heavy(tmp_path: Path) -> None:
    """A light write's statements run on the event loop (only its commit is in a worker
    thread); a heavy one's run in the thread. Both are committed."""
    loop_thread = threading.get_ident()
    ran_on_loop: dict[str, bool] = {}

    def greet(conn: sqlite3.Connection, greeting: str) -> None:
        ran_on_loop[greeting] = threading.get_ident() == loop_thread
        set_meta(conn, greeting, "yes")

    async with running_checkpoint(tmp_path / "pager.db") as checkpoint:
        await checkpoint.write(partial(greet, greeting="light"))
        await checkpoint.write(partial(greet, greeting="heavy"), heavy=True)
        assert await checkpoint.lookup(partial(get_meta, key="light")) == "yes"
        assert await checkpoint.lookup(partial(get_meta, key="heavy")) == "yes"
    assert ran_on_loop == {"light": True, "heavy": False}


async def test_waiting_for_another_process_s_write_lock_never_holds_the_loop(
    tmp_path: Path,
) -> None:
    """Another connection (a backup, a person's `sqlite3` shell) holds the write lock: a write
    waits for it off the event loop, so the loop runs on (here: the task that lets the lock
    go) and the write commits once it is free. Waiting on the loop would block every request,
    `/health` included, for the busy timeout, and then fail the write."""
    database = tmp_path / "pager.db"
    async with running_checkpoint(database) as checkpoint:
        await checkpoint.write(partial(set_meta, key="greeting", value="hi"))
        other = sqlite3.connect(database, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(checkpoint.write, partial(set_meta, key="greeting", value="yo"))
                await trio.testing.wait_all_tasks_blocked()  # the write waits for the lock
                other.execute("ROLLBACK")  # runs only while the loop is free
        finally:
            other.close()
        assert await checkpoint.lookup(partial(get_meta, key="greeting")) == "yo"


async def test_a_batch_cancelled_before_its_commit_is_rolled_back(tmp_path: Path) -> None:
    """Cancelled between its statements (on the loop) and its commit (in the thread), a batch
    is rolled back at once: the stop the actor then records is committed, the batch is not."""
    database = tmp_path / "pager.db"
    run = BrokerRunInfo(instance_id="run-1", pid=1, version="test", started_at="then")
    async with trio.open_nursery() as nursery:
        ref = await start_actor(
            nursery, CheckpointActor(SqliteWriter(database, run, lambda: "now")), name="store"
        )
        quick = QuickReads(database)
        try:

            def greet_then_cancel(conn: sqlite3.Connection) -> None:
                set_meta(conn, "greeting", "never committed")
                nursery.cancel_scope.cancel()  # lands when the actor awaits the commit

            await Checkpoint(ref, quick).write(greet_then_cancel)
        finally:
            quick.close()
    conn = open_database(database)
    try:
        assert get_meta(conn, "greeting") is None
        [recorded] = list_broker_runs(conn)
        assert recorded.stopped_at == "now"
    finally:
        close_database(conn)


async def test_checkpoint_reports_the_error_of_a_write_that_lost_the_whole_batch(
    tmp_path: Path,
) -> None:
    """When SQLite rolls the whole transaction back itself (it does on a full disk or an I/O
    error), every write of the batch fails with that error, not with the savepoint it took
    with it, and the next write commits."""

    def fills_the_disk(conn: sqlite3.Connection) -> None:
        set_meta(conn, "lost", "yes")
        conn.execute("ROLLBACK")  # what SQLite does by itself on SQLITE_FULL mid-transaction
        raise sqlite3.OperationalError("database or disk is full")

    async with running_checkpoint(tmp_path / "pager.db") as checkpoint:
        with pytest.raises(sqlite3.OperationalError, match="database or disk is full"):
            await checkpoint.write(fills_the_disk)
        assert await checkpoint.lookup(partial(get_meta, key="lost")) is None
        await checkpoint.write(partial(set_meta, key="after", value="yes"))
        assert await checkpoint.lookup(partial(get_meta, key="after")) == "yes"


async def test_a_lock_held_past_the_busy_timeout_is_not_waited_for_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process holds the write lock past the busy timeout. The write that met it first
    is refused `busy` after that timeout; so, a moment later, are the write queued meanwhile
    and one made after the refusal (an identity's next request, queued behind its last):
    neither waits the busy timeout again, so no caller is held for several of them before
    its answer. Once the lock is free, writes commit again."""
    busy_timeout_s = 2.0
    monkeypatch.setattr(_database, "_BUSY_TIMEOUT_MS", round(busy_timeout_s * 1000))
    database = tmp_path / "pager.db"
    answered: dict[str, float] = {}

    async def write(key: str) -> None:
        with pytest.raises(StoreBusy, match="database is locked"):
            await checkpoint.write(partial(set_meta, key=key, value="never"))
        answered[key] = trio.current_time()

    async with running_checkpoint(database) as checkpoint:
        await checkpoint.write(partial(set_meta, key="greeting", value="hi"))
        other = sqlite3.connect(database, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        try:
            with trio.fail_after(5 * busy_timeout_s):  # a hang guard
                locked_at = trio.current_time()
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(write, "first")
                    await trio.testing.wait_all_tasks_blocked()  # it waits for the lock
                    nursery.start_soon(write, "queued")
                await write("after")
        finally:
            other.execute("ROLLBACK")
            other.close()
        assert answered["first"] - locked_at >= busy_timeout_s
        # Before, each waited the whole busy timeout more: 2 and 4 s after the first.
        assert answered["queued"] - answered["first"] < busy_timeout_s / 2
        assert answered["after"] - answered["queued"] < busy_timeout_s / 2
        await checkpoint.write(partial(set_meta, key="greeting", value="again"))
        assert await checkpoint.lookup(partial(get_meta, key="greeting")) == "again"
        for key in answered:
            assert await checkpoint.lookup(partial(get_meta, key=key)) is None
