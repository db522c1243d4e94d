"""What several brokers writing one PostgreSQL store at once rely on (SPEC §13): one transaction
at a time changes an identity's inbox, and events become visible in seq order, so a reader
going on "after seq N" never skips one. Two real connections, one held open mid-transaction."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import trio

from pager.store import messaging as ms
from pager.store.events import EventLogReader
from pager.store.pg._conn import PgConn
from pager.store.pg._database import connect, upgrade
from pager.store.pg.backend import PgLeadership
from tests.store.test_pg_schema import pg_store

NOW = 1_800_000_000.0
#: Seconds a blocked statement is given to show it is blocked (it must not finish meanwhile).
BLOCKED_FOR = 0.5


@pytest.fixture
def two_connections(pg_dsn: str, tmp_path: Path) -> Iterator[tuple[Any, Any]]:
    store = pg_store(pg_dsn, tmp_path)
    with connect(store) as conn:
        upgrade(conn, where="test")
    first, second = connect(store), connect(store)
    try:
        yield first, second
    finally:
        first.close()
        second.close()


def _in_thread(run: Any) -> tuple[threading.Thread, threading.Event]:
    """`run()` in a thread; the event is set once it returned."""
    done = threading.Event()

    def body() -> None:
        run()
        done.set()

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    return thread, done


def test_one_transaction_at_a_time_changes_an_inbox(
    two_connections: tuple[psycopg.Connection[Any], psycopg.Connection[Any]],
) -> None:
    first, second = two_connections
    with first.transaction():
        ms.lock_inbox(PgConn(first), "agt_alice")

        def other_inbox() -> None:
            with second.transaction():
                ms.lock_inbox(PgConn(second), "agt_bob")

        thread, done = _in_thread(other_inbox)
        assert done.wait(10), "another identity's inbox must not wait"
        thread.join()

        def same_inbox() -> None:
            with second.transaction():
                ms.lock_inbox(PgConn(second), "agt_alice")

        thread, done = _in_thread(same_inbox)
        assert not done.wait(BLOCKED_FOR), "the same inbox must wait for the first's commit"
    assert done.wait(10), "the commit lets it go"
    thread.join()


def test_events_become_visible_in_seq_order(
    two_connections: tuple[psycopg.Connection[Any], psycopg.Connection[Any]],
    pg_dsn: str,
    tmp_path: Path,
) -> None:
    """The first transaction draws its seq and stays open; the second cannot draw a later
    seq and commit before it, so a reader never sees seq 2 while seq 1 is still to come."""
    first, second = two_connections
    reader = EventLogReader(PgConn(connect(pg_store(pg_dsn, tmp_path))))
    try:
        with first.transaction():
            ms.record_event(PgConn(first), NOW, "test.first", {})

            def later() -> None:
                with second.transaction():
                    ms.record_event(PgConn(second), NOW, "test.second", {})

            thread, done = _in_thread(later)
            assert not done.wait(BLOCKED_FOR), "a later event must wait for the earlier commit"
            assert reader.rows_after(0, 10) == []
        assert done.wait(10)
        thread.join()
        kinds = [row[2] for row in reader.rows_after(0, 10)]
        seqs = [row[0] for row in reader.rows_after(0, 10)]
        assert kinds == ["test.first", "test.second"]
        assert seqs == sorted(seqs)
    finally:
        reader.close()


async def test_one_broker_at_a_time_sweeps_and_another_takes_over(
    pg_dsn: str, tmp_path: Path
) -> None:
    """SPEC §13: retention on one broker at a time. The lock goes with its holder's
    connection: when that ends (a stop, a crash), the next broker to ask leads."""
    store = pg_store(pg_dsn, tmp_path)
    first, second = PgLeadership(store), PgLeadership(store)
    try:
        assert await first.lead()
        assert not await second.lead()
        assert await first.lead()  # asking again while leading keeps it
        first.close()  # as its process ending would close its connection
        # The server lets the lock go once its backend sees the connection end, a moment
        # later under load: the next broker to ask after that leads (as at its next sweep).
        with trio.fail_after(10):
            while True:
                if await second.lead():
                    break
                await trio.sleep(0.05)
        assert not await first.lead()
    finally:
        first.close()
        second.close()


def test_a_store_child_started_again_in_one_run_takes_its_host_back(
    pg_dsn: str, tmp_path: Path
) -> None:
    """The broker tree restarts its store child after a failure: the run is recorded once and
    the host row is its own again (a second insert of the run used to fail and, three
    restarts later, stop the broker)."""
    from pager.store.pg.backend import _claim_host, _Host
    from pager.store.sqlite_writer import BrokerRunInfo

    store = pg_store(pg_dsn, tmp_path)
    host = _Host("alpha", BrokerRunInfo("run-1", 42, "0.1.0", "2026-12-03T00:00:00+00:00"))
    with connect(store) as conn:
        upgrade(conn, where="test")
        for now in (NOW, NOW + 5):
            with conn.transaction():
                _claim_host(PgConn(conn), host, now)
        runs = conn.execute("SELECT count(*) FROM broker_runs").fetchone()
        beat = conn.execute("SELECT heartbeat_at FROM hosts WHERE name = 'alpha'").fetchone()
    assert runs == (1,)
    assert beat == (NOW + 5,)
