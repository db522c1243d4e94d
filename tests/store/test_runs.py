"""Broker run bookkeeping on a real SQLite database."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from pager.store import (
    CURRENT_SCHEMA_VERSION,
    BrokerRun,
    StoreUnwritable,
    close_database,
    last_unclean_run,
    list_broker_runs,
    open_database,
    read_schema_version,
    record_broker_start,
    record_broker_stop,
)


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    connection = open_database(tmp_path / "pager.db")
    yield connection
    close_database(connection)


def _start(conn: sqlite3.Connection, instance_id: str, pid: int = 1) -> None:
    record_broker_start(
        conn,
        instance_id=instance_id,
        pid=pid,
        version="0.1.0",
        started_at=f"2025-03-01T00:00:0{pid}Z",
    )


def test_record_broker_start_round_trips(conn: sqlite3.Connection) -> None:
    """Recorded starts come back in order with every column and no stop yet."""
    record_broker_start(
        conn, instance_id="i-1", pid=41, version="0.1.0", started_at="2025-03-01T10:00:00Z"
    )
    record_broker_start(
        conn, instance_id="i-2", pid=42, version="0.2.0", started_at="2025-03-02T10:00:00Z"
    )
    assert list_broker_runs(conn) == [
        BrokerRun(1, "i-1", 41, "0.1.0", "2025-03-01T10:00:00Z", None, None),
        BrokerRun(2, "i-2", 42, "0.2.0", "2025-03-02T10:00:00Z", None, None),
    ]
    assert not conn.in_transaction


def test_record_broker_start_rejects_duplicate_instance(conn: sqlite3.Connection) -> None:
    """Reusing an instance id raises and leaves no transaction open."""
    _start(conn, "i-1")
    with pytest.raises(sqlite3.IntegrityError):
        _start(conn, "i-1", pid=2)
    assert not conn.in_transaction
    assert [run.pid for run in list_broker_runs(conn)] == [1]


def test_record_broker_stop_keeps_the_first_stop(conn: sqlite3.Connection) -> None:
    """A clean stop is recorded once; repeating it changes nothing."""
    _start(conn, "i-1")
    record_broker_stop(conn, instance_id="i-1", stopped_at="2025-03-01T11:00:00Z", reason="exit")
    record_broker_stop(conn, instance_id="i-1", stopped_at="2025-03-01T12:00:00Z", reason="again")
    (run,) = list_broker_runs(conn)
    assert (run.stopped_at, run.stop_reason) == ("2025-03-01T11:00:00Z", "exit")


def test_record_broker_stop_unknown_instance_raises(conn: sqlite3.Connection) -> None:
    """Stopping a run that was never started is a LookupError."""
    with pytest.raises(LookupError, match="i-404"):
        record_broker_stop(conn, instance_id="i-404", stopped_at="t", reason="exit")
    assert not conn.in_transaction


def test_last_unclean_run_finds_latest_unstopped_past_run(conn: sqlite3.Connection) -> None:
    """The newest past run without a clean stop is reported; the current run never is."""
    for n, instance_id in enumerate(["a", "b", "c", "current"], start=1):
        _start(conn, instance_id, pid=n)
    record_broker_stop(conn, instance_id="a", stopped_at="t1", reason="exit")
    record_broker_stop(conn, instance_id="c", stopped_at="t3", reason="exit")

    unclean = last_unclean_run(conn, current_instance_id="current")

    assert unclean is not None
    assert (unclean.instance_id, unclean.pid) == ("b", 2)
    # Asked before the next broker recorded its own start, "current" is a past run too.
    later = last_unclean_run(conn, current_instance_id="not-yet-recorded")
    assert later is not None
    assert later.instance_id == "current"


def test_last_unclean_run_ignores_runs_after_current(conn: sqlite3.Connection) -> None:
    """Only runs started before the current one count."""
    _start(conn, "current", pid=1)
    _start(conn, "newer", pid=2)
    assert last_unclean_run(conn, current_instance_id="current") is None


def test_last_unclean_run_none_when_all_clean(conn: sqlite3.Connection) -> None:
    """No unclean past run gives None."""
    assert last_unclean_run(conn, current_instance_id="current") is None
    _start(conn, "a", pid=1)
    record_broker_stop(conn, instance_id="a", stopped_at="t1", reason="exit")
    _start(conn, "current", pid=2)
    assert last_unclean_run(conn, current_instance_id="current") is None


def test_read_schema_version_reports_current(conn: sqlite3.Connection) -> None:
    """A freshly opened database is at the current schema version."""
    assert read_schema_version(conn) == CURRENT_SCHEMA_VERSION


def test_record_broker_start_on_readonly_database_raises_unwritable(tmp_path: Path) -> None:
    """A write SQLite refuses as read-only becomes StoreUnwritable naming the file."""
    path = tmp_path / "pager.db"
    close_database(open_database(path))
    readonly = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, isolation_level=None)
    try:
        with pytest.raises(StoreUnwritable) as info:
            _start(readonly, "i-1")
        assert str(path) in str(info.value)
        assert not readonly.in_transaction
    finally:
        readonly.close()
