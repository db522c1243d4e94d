"""The operator event log (SPEC §6 operator stream): durable, monotonic `seq` from 1.

Events are written by the same transaction as the state change they describe, so a replay
never shows a change that was rolled back, and never misses one that committed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

import attrs

from pager.domain.clock import iso
from pager.store._conn import Conn
from pager.store._dialect import dialect_of
from pager.store._sql import sql


@attrs.frozen
class Event:
    seq: int
    at: str
    type: str
    data: dict[str, object]

    def to_json(self) -> dict[str, object]:
        return {"seq": self.seq, "at": self.at, "type": self.type, "data": self.data}


def record_event(conn: Conn, now: float, kind: str, data: dict[str, object]) -> None:
    """Append one event; it becomes visible to readers when the caller's transaction commits."""
    conn.execute(
        sql("INSERT INTO events (at, type, data) VALUES ({}, {}, {})"),
        (iso(now), kind, json.dumps(data, sort_keys=True)),
    )


def record_event_when(
    conn: Conn,
    now: float,
    kind: str,
    data: dict[str, object],
    condition: str,
    parameters: Sequence[object],
) -> None:
    """`record_event`, only if `condition` (a template's SQL, its positional `parameters`
    bound) holds when the statement runs: a write that reads nothing back before its commit
    decides in the statement itself."""
    conn.execute(
        sql(f"INSERT INTO events (at, type, data) SELECT {{}}, {{}}, {{}} WHERE {condition}"),
        (iso(now), kind, json.dumps(data, sort_keys=True), *parameters),
    )


def record_events(conn: Conn, now: float, events: Iterable[tuple[str, dict[str, object]]]) -> None:
    """Append several events at once (a bulk change records one event per item)."""
    at = iso(now)
    conn.executemany(
        sql("INSERT INTO events (at, type, data) VALUES ({}, {}, {})"),
        [(at, kind, json.dumps(data, sort_keys=True)) for kind, data in events],
    )


def events_after(conn: Conn, seq: int, limit: int) -> list[Event]:
    """Retained events with a seq greater than `seq`, oldest first, at most `limit`."""
    rows = conn.execute(
        sql("SELECT seq, at, type, data FROM events WHERE seq > {} ORDER BY seq LIMIT {}"),
        (seq, limit),
    ).fetchall()
    return [Event(int(r[0]), str(r[1]), str(r[2]), json.loads(r[3])) for r in rows]


def latest_event_seq(conn: Conn) -> int:
    """The highest seq ever assigned (0 when none): AUTOINCREMENT remembers deleted ones
    (PostgreSQL's adapter asks its identity sequence instead)."""
    return dialect_of(conn).latest_event_seq(conn)


def event_rows_after(conn: Conn, seq: int, limit: int) -> list[tuple[int, str, str, str]]:
    """`events_after` as stored, `data` still JSON text: (seq, at, type, data), oldest first.

    The stream renders frames straight from this without decoding and re-encoding the data.
    """
    return [
        (int(r[0]), str(r[1]), str(r[2]), str(r[3]))
        for r in conn.execute(
            sql("SELECT seq, at, type, data FROM events WHERE seq > {} ORDER BY seq LIMIT {}"),
            (seq, limit),
        )
    ]


def oldest_event_seq(conn: Conn) -> int | None:
    """The lowest retained seq (None when the log is empty: nothing recorded, or all pruned)."""
    row = conn.execute(sql("SELECT MIN(seq) FROM events")).fetchone()
    return None if row is None or row[0] is None else int(row[0])
