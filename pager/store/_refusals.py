"""Refused sends, counted (SPEC §12): one row per (sender, reason, minute) however many there
were, and one `send.refused` operator event for the first of each, so that an agent or a token
that keeps being refused costs the store a row a minute, not a row a refusal.

The sender is an identity or a mailbox token (its `mbx_…` id). Rows are kept as long as events
(`event_retention`); the snapshot's `refused_sends` is their sum.
"""

from __future__ import annotations

from pager.domain.clock import iso
from pager.store._conn import Conn
from pager.store._events import record_event_when
from pager.store._sql import sql

MINUTE = 60


def count_refusal(
    conn: Conn, now: float, sender_id: str, reason: str, data: dict[str, object]
) -> None:
    """Count one refusal of `sender_id` for `reason`; the first of its minute also records a
    `send.refused` event with `data` (who, whom, why) and the minute it stands for. Nothing
    is read back before the commit: the event's insert finds the minute's count itself (one
    round trip where each read costs one, PostgreSQL)."""
    minute = int(now // MINUTE)
    conn.execute(
        sql(
            "INSERT INTO refusals (sender_id, reason, minute, count) VALUES ({}, {}, {}, 1)"
            " ON CONFLICT (sender_id, reason, minute) DO UPDATE SET count = refusals.count + 1"
        ),
        (sender_id, reason, minute),
    )
    record_event_when(
        conn,
        now,
        "send.refused",
        {**data, "minute": iso(minute * MINUTE)},
        "(SELECT count FROM refusals WHERE sender_id = {} AND reason = {} AND minute = {}) = 1",
        (sender_id, reason, minute),
    )


def refused_sends(conn: Conn) -> int:
    """Every refusal still retained."""
    (total,) = conn.execute(sql("SELECT COALESCE(SUM(count), 0) FROM refusals")).fetchone()
    return int(total)


def prune_refusals(conn: Conn, cutoff: float) -> int:
    """Forget the counts of minutes that ended at or before `cutoff`."""
    return int(
        conn.execute(
            sql("DELETE FROM refusals WHERE minute < {}"), (int(cutoff // MINUTE),)
        ).rowcount
    )
