"""Launch on mail (docs/wake.md): the person's settings per identity and the record of each
wake run. Sync functions on a connection, run inside one transaction each; none commits.

A run's row is written in the transaction that attaches its session (the registration), so
the hourly bound and "never while a session is attached" are decided with the attachment
itself; its end is written with the outcome, the exit status and the messages its session
acknowledged, with the `wake.ended` event.
"""

from __future__ import annotations

import json
from typing import Any

from pager.domain.names import format_address
from pager.domain.records import SessionState
from pager.domain.wake import (
    RunOutcome,
    WakeCandidate,
    WakeEntry,
    WakeRun,
    WakeSettings,
    WakeTarget,
)
from pager.domain.workspace import Workspace
from pager.store._conn import Conn
from pager.store._events import record_event
from pager.store._identities import (
    describe_identity,
    end_session,
    get_identity,
    touch_identity,
    workspace_slug,
)
from pager.store._messages import offerable_count
from pager.store._sql import column_count, qualified, sql

#: Why a run's session ends when the run does.
RUN_OVER = "the wake run ended"

_SETTINGS = "identity_id, command, max_runs_per_hour, timeout_s, updated_at"
_RUNS = (
    "id, identity_id, session_id, host, started_at, ended_at, outcome, exit_code, pid, log,"
    " acknowledged"
)


def settings_columns(table: str) -> str:
    """The columns `settings_of` reads, of the wake_settings row named `table` in a
    statement."""
    return qualified(_SETTINGS, table)


#: How many columns `settings_columns` holds.
SETTINGS_WIDTH = column_count(_SETTINGS)


def settings_of(row: Any) -> WakeSettings | None:
    """Settings from a row that starts with `settings_columns` (None: all NULL, launch on
    mail off)."""
    return None if row[0] is None else _settings(row)


def _settings(row: Any) -> WakeSettings:
    command = None if row[1] is None else tuple(str(part) for part in json.loads(row[1]))
    return WakeSettings(
        agent_id=str(row[0]),
        command=command,
        max_runs_per_hour=int(row[2]),
        timeout=float(row[3]),
        updated_at=float(row[4]),
    )


def _run(row: Any) -> WakeRun:
    return WakeRun(
        id=str(row[0]),
        agent_id=str(row[1]),
        session_id=str(row[2]),
        host=str(row[3]),
        started_at=float(row[4]),
        ended_at=None if row[5] is None else float(row[5]),
        outcome=None if row[6] is None else RunOutcome(row[6]),
        exit_code=None if row[7] is None else int(row[7]),
        pid=None if row[8] is None else int(row[8]),
        log=None if row[9] is None else str(row[9]),
        acknowledged=int(row[10]),
    )


def wake_settings(conn: Conn, agent_id: str) -> WakeSettings | None:
    """The identity's settings; None when launch on mail is off for it."""
    row = conn.execute(
        sql(f"SELECT {_SETTINGS} FROM wake_settings WHERE identity_id = {{}}"), (agent_id,)
    ).fetchone()
    return None if row is None else _settings(row)


def all_wake_settings(conn: Conn) -> list[WakeSettings]:
    rows = conn.execute(sql(f"SELECT {_SETTINGS} FROM wake_settings ORDER BY identity_id"))
    return [_settings(row) for row in rows]


def put_wake_settings(conn: Conn, settings: WakeSettings, now: float) -> None:
    """Turn launch on mail on (or change its settings), with a `wake.enabled` event."""
    command = None if settings.command is None else json.dumps(list(settings.command))
    conn.execute(
        sql(
            "INSERT INTO wake_settings (identity_id, command, max_runs_per_hour, timeout_s,"
            " updated_at) VALUES ({}, {}, {}, {}, {}) ON CONFLICT (identity_id) DO UPDATE SET"
            " command = excluded.command, max_runs_per_hour = excluded.max_runs_per_hour,"
            " timeout_s = excluded.timeout_s, updated_at = excluded.updated_at"
        ),
        (settings.agent_id, command, settings.max_runs_per_hour, settings.timeout, now),
    )
    _agent_event(
        conn,
        now,
        "wake.enabled",
        settings.agent_id,
        command=None if settings.command is None else list(settings.command),
        max_runs_per_hour=settings.max_runs_per_hour,
        timeout_s=settings.timeout,
    )


def delete_wake_settings(conn: Conn, agent_id: str, now: float) -> bool:
    """Turn launch on mail off; False when it was not on."""
    cursor = conn.execute(sql("DELETE FROM wake_settings WHERE identity_id = {}"), (agent_id,))
    if cursor.rowcount == 0:
        return False
    _agent_event(conn, now, "wake.disabled", agent_id)
    return True


def conversation_to_resume(conn: Conn, agent_id: str, implementation: str) -> str | None:
    """The conversation a wake run resumes: the latest one a session of the identity named
    that is still bound to it (a takeover may have carried it to another identity)."""
    row = conn.execute(
        sql(
            "SELECT s.conversation_key FROM sessions s JOIN conversations c"
            " ON c.key = s.conversation_key AND c.implementation = {} AND c.identity_id ="
            " s.identity_id"
            " WHERE s.identity_id = {} AND s.conversation_key IS NOT NULL"
            " ORDER BY s.epoch DESC LIMIT 1"
        ),
        (implementation, agent_id),
    ).fetchone()
    return None if row is None else str(row[0])


def wake_candidate(conn: Conn, agent_id: str) -> WakeCandidate | None:
    identity = get_identity(conn, agent_id)
    if identity is None:
        return None
    slug = workspace_slug(conn, identity.workspace_key)
    return WakeCandidate(
        identity,
        format_address(identity.alias, slug),
        conversation_to_resume(conn, agent_id, identity.implementation),
    )


def wake_target(conn: Conn, agent_id: str, *, now: float) -> WakeTarget | None:
    """The identity as a wake run needs it; None when launch on mail is off for it or it is
    gone."""
    settings = wake_settings(conn, agent_id)
    candidate = None if settings is None else wake_candidate(conn, agent_id)
    if settings is None or candidate is None:
        return None
    key = candidate.identity.workspace_key
    row = conn.execute(
        sql("SELECT slug, path, host FROM workspaces WHERE key = {}"), (key,)
    ).fetchone()
    return WakeTarget(
        identity=candidate.identity,
        address=candidate.address,
        conversation_key=candidate.conversation_key,
        settings=settings,
        workspace=Workspace(key, str(row[0]), str(row[1]), str(row[2])),
        available=offerable_count(conn, agent_id, now),
    )


def wake_entries(conn: Conn, runs_each: int) -> list[WakeEntry]:
    """Every identity with launch on mail on, with its latest `runs_each` runs."""
    entries = []
    for settings in all_wake_settings(conn):
        candidate = wake_candidate(conn, settings.agent_id)
        if candidate is not None:
            runs = tuple(recent_runs(conn, settings.agent_id, runs_each))
            entries.append(WakeEntry(settings, candidate, runs))
    return entries


def run_starts_since(conn: Conn, agent_id: str, since: float) -> list[float]:
    rows = conn.execute(
        sql("SELECT started_at FROM wake_runs WHERE identity_id = {} AND started_at > {}"),
        (agent_id, since),
    )
    return [float(row[0]) for row in rows]


def insert_wake_run(conn: Conn, run: WakeRun) -> None:
    conn.execute(
        sql(
            "INSERT INTO wake_runs (id, identity_id, session_id, host, started_at, acknowledged)"
            " VALUES ({}, {}, {}, {}, {}, 0)"
        ),
        (run.id, run.agent_id, run.session_id, run.host, run.started_at),
    )


def open_run_of_session(conn: Conn, session_id: str) -> WakeRun | None:
    """The wake run whose session this is, while it has not ended."""
    row = conn.execute(
        sql(f"SELECT {_RUNS} FROM wake_runs WHERE session_id = {{}} AND ended_at IS NULL"),
        (session_id,),
    ).fetchone()
    return None if row is None else _run(row)


def mark_run_started(conn: Conn, run_id: str, *, pid: int, log: str, now: float) -> None:
    """The harness process started: its pid and log, with a `wake.started` event."""
    row = conn.execute(
        sql(
            "UPDATE wake_runs SET pid = {}, log = {} WHERE id = {} RETURNING identity_id,"
            " session_id"
        ),
        (pid, log, run_id),
    ).fetchone()
    if row is not None:
        _agent_event(
            conn, now, "wake.started", str(row[0]), run_id=run_id, session_id=str(row[1]),
            pid=pid, log=log,
        )  # fmt: skip


def end_wake_run(
    conn: Conn,
    run_id: str,
    *,
    outcome: RunOutcome,
    exit_code: int | None,
    detail: str,
    now: float,
) -> WakeRun | None:
    """Record the run's end and the messages its session acknowledged, with a `wake.ended`
    event; None when it had ended already."""
    row = conn.execute(
        sql(f"SELECT {_RUNS} FROM wake_runs WHERE id = {{}} AND ended_at IS NULL"), (run_id,)
    ).fetchone()
    if row is None:
        return None
    run = _run(row)
    # Its session ends with it, if nothing ended it first (the broker stopping, say).
    end_session(conn, run.session_id, SessionState.DETACHED, RUN_OVER, now)
    touch_identity(conn, run.agent_id, now, attached=False)
    # What the identity acknowledged while the run held it (its hooks ack with no session).
    acked = [
        str(found[0])
        for found in conn.execute(
            sql(
                "SELECT id FROM messages WHERE recipient_id = {} AND state = 'acknowledged'"
                " AND settled_at >= {} AND settled_at <= {} ORDER BY seq"
            ),
            (run.agent_id, run.started_at, now),
        )
    ]
    conn.execute(
        sql(
            "UPDATE wake_runs SET ended_at = {}, outcome = {}, exit_code = {}, acknowledged = {}"
            " WHERE id = {}"
        ),
        (now, outcome.value, exit_code, len(acked), run_id),
    )
    _agent_event(
        conn,
        now,
        "wake.ended",
        run.agent_id,
        run_id=run_id,
        session_id=run.session_id,
        outcome=outcome.value,
        exit_code=exit_code,
        duration_s=round(max(0.0, now - run.started_at), 3),
        acknowledged=acked,
        detail=detail,
    )
    ended = conn.execute(
        sql(f"SELECT {_RUNS} FROM wake_runs WHERE id = {{}}"), (run_id,)
    ).fetchone()
    return _run(ended)


def record_deferred(conn: Conn, agent_id: str, now: float, *, retry_after: float, why: str) -> None:
    """A run the hourly bound put off (`wake.deferred`): mail waits until `retry_after`."""
    _agent_event(conn, now, "wake.deferred", agent_id, retry_after_s=retry_after, reason=why)


def unfinished_runs(conn: Conn, host: str) -> list[WakeRun]:
    """Runs this host started that never recorded an end (its broker was killed)."""
    rows = conn.execute(
        sql(f"SELECT {_RUNS} FROM wake_runs WHERE host = {{}} AND ended_at IS NULL"), (host,)
    )
    return [_run(row) for row in rows]


def recent_runs(conn: Conn, agent_id: str, limit: int) -> list[WakeRun]:
    rows = conn.execute(
        sql(
            f"SELECT {_RUNS} FROM wake_runs WHERE identity_id = {{}} ORDER BY started_at DESC"
            f" LIMIT {{}}"
        ),
        (agent_id, limit),
    )
    return [_run(row) for row in rows]


def _agent_event(conn: Conn, now: float, kind: str, agent_id: str, **data: object) -> None:
    fields = describe_identity(conn, agent_id) or {"agent_id": agent_id}
    record_event(conn, now, kind, {**fields, **data})
