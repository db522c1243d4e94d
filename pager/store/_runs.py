"""Broker runs: one row per broker start, closed by a clean stop.

A run whose `stopped_at` is still NULL after a newer run started ended without a clean shutdown
(crash, kill -9, power loss), which diagnostics report. Timestamps are ISO 8601 strings from the
caller's injected clock; this module never reads the wall clock.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import attrs

from pager.store._transactions import immediate_transaction, store_errors

_COLUMNS = "id, instance_id, pid, version, started_at, stopped_at, stop_reason"


@attrs.frozen
class BrokerRun:
    """One recorded broker run."""

    id: int
    instance_id: str
    pid: int
    version: str
    started_at: str
    stopped_at: str | None
    stop_reason: str | None


def _run(row: Any) -> BrokerRun:
    id_, instance_id, pid, version, started_at, stopped_at, stop_reason = row
    return BrokerRun(
        id=id_,
        instance_id=instance_id,
        pid=pid,
        version=version,
        started_at=started_at,
        stopped_at=stopped_at,
        stop_reason=stop_reason,
    )


def record_broker_start(
    conn: sqlite3.Connection, *, instance_id: str, pid: int, version: str, started_at: str
) -> None:
    """Record that the broker `instance_id` started.

    Raises sqlite3.IntegrityError if that instance id was already recorded (ids are unique per
    start; reusing one is a caller bug).
    """
    with store_errors(conn), immediate_transaction(conn):
        conn.execute(
            "INSERT INTO broker_runs (instance_id, pid, version, started_at) VALUES (?, ?, ?, ?)",
            (instance_id, pid, version, started_at),
        )


def record_broker_stop(
    conn: sqlite3.Connection, *, instance_id: str, stopped_at: str, reason: str
) -> None:
    """Record the clean stop of the broker `instance_id`.

    Idempotent: a second stop of the same run keeps the first time and reason. Raises
    LookupError if no run with that instance id was recorded.
    """
    with store_errors(conn), immediate_transaction(conn):
        updated = conn.execute(
            "UPDATE broker_runs SET stopped_at = ?, stop_reason = ?"
            " WHERE instance_id = ? AND stopped_at IS NULL",
            (stopped_at, reason, instance_id),
        ).rowcount
        if updated == 0:
            known = conn.execute(
                "SELECT 1 FROM broker_runs WHERE instance_id = ?", (instance_id,)
            ).fetchone()
            if known is None:
                raise LookupError(f"no broker run with instance id {instance_id!r} was recorded")


def list_broker_runs(conn: sqlite3.Connection) -> list[BrokerRun]:
    """Every recorded run, oldest first."""
    with store_errors(conn):
        rows = conn.execute(f"SELECT {_COLUMNS} FROM broker_runs ORDER BY id").fetchall()
    return [_run(row) for row in rows]


def last_unclean_run(conn: sqlite3.Connection, *, current_instance_id: str) -> BrokerRun | None:
    """The latest run started before the current one that never recorded a clean stop.

    `current_instance_id` is the running broker's own run: it is excluded (it has not stopped
    yet), and if it is already recorded only runs started before it count. If it is not recorded
    yet, every recorded run is a past one.
    """
    with store_errors(conn):
        row = conn.execute(
            f"SELECT {_COLUMNS} FROM broker_runs"
            " WHERE stopped_at IS NULL AND instance_id <> :current"
            " AND id < coalesce("
            "   (SELECT id FROM broker_runs WHERE instance_id = :current),"
            "   9223372036854775807)"
            " ORDER BY id DESC LIMIT 1",
            {"current": current_instance_id},
        ).fetchone()
    return None if row is None else _run(row)
