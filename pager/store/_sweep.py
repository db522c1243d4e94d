"""Retention (SPEC §9): which identities a window has passed, archiving, reaping, and the
pruning of idempotency keys and operator events. Sync functions on a connection.

Callers run them inside one checkpoint transaction each; none of them commits. A sweep is
planned on a read snapshot (`plan_sweep`, given the identities attached in that snapshot) and
applied in small steps (`apply_due`), each step checked again in its own transaction: an
attached identity is never archived or reaped by a window.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from pager.domain.clock import iso
from pager.domain.retention import Action, Applied, Due, Plan, Pruned
from pager.domain.windows import Windows
from pager.store._conn import Conn
from pager.store._events import record_event
from pager.store._identities import describe_identity
from pager.store._messages import dead_letter_inbox
from pager.store._refusals import prune_refusals
from pager.store._reservations import end_with_identity, expire_due, prune_ended
from pager.store._sql import sql

# The retention rules of SPEC §9, written once: each identity's steps (what, why, when), the
# first and the one that may follow it (a named identity is archived, then reaped), computed
# in SQL so that a sweep builds Python objects only for identities with something due. Standard
# SQL (CASE, COALESCE, EXISTS; flags as 0/1, never booleans): the same text serves any backend.
_STEPS = """
WITH r AS (
  SELECT i.id, i.durable, i.archived_at, i.first_archived_at, i.exchanged,
         i.detached_at IS NOT NULL AS detached,
         CASE WHEN EXISTS (SELECT 1 FROM conversations c WHERE c.identity_id = i.id)
           THEN 1 ELSE 0 END AS resumable,
         COALESCE(i.detached_at, i.created_at + {lease_ttl}) AS since
  FROM identities i
), d AS (
  SELECT r.id,
    CASE WHEN durable = 1 AND archived_at IS NULL THEN 'archive' ELSE 'reap' END AS first_action,
    CASE
      WHEN durable = 0 AND resumable = 0 THEN
        CASE WHEN detached THEN 'lease lapsed' ELSE 'registration lapsed' END
      WHEN durable = 0 AND exchanged = 1 THEN 'resumable_retention'
      WHEN durable = 0 THEN 'unused'
      WHEN archived_at IS NULL THEN 'named_archive'
      ELSE 'archive_retention'
    END AS first_reason,
    CASE
      WHEN durable = 0 AND resumable = 0 THEN since
      WHEN durable = 0 AND exchanged = 1 THEN since + {resumable_retention}
      WHEN durable = 0 THEN since + {unused}
      WHEN archived_at IS NULL THEN since + {named_archive}
      ELSE COALESCE(first_archived_at, archived_at) + {archive_retention}
    END AS first_due,
    -- a named identity not archived yet is reaped after the archive retention, counted from
    -- its first archive ever (or the one this step makes)
    CASE WHEN durable = 1 AND archived_at IS NULL THEN
      COALESCE(first_archived_at, since + {named_archive}) + {archive_retention}
    END AS then_due
  FROM r
)
"""
_STEP_COLUMNS = "id, first_action, first_reason, first_due, then_due"


def _steps_of(row: Any) -> list[Due]:
    """An identity's steps from its `_STEPS` row, in order."""
    agent_id, action, reason, first_due, then_due = row
    steps = [Due(str(agent_id), Action(action), str(reason), float(first_due))]
    if then_due is not None:
        steps.append(Due(str(agent_id), Action.REAP, "archive_retention", float(then_due)))
    return steps


def _window_params(now: float, windows: Windows) -> dict[str, float]:
    return {
        "now": now,
        "lease_ttl": windows.lease_ttl,
        "resumable_retention": windows.resumable_retention,
        "unused": windows.unused,
        "named_archive": windows.named_archive,
        "archive_retention": windows.archive_retention,
    }


def _due_steps(conn: Conn, now: float, windows: Windows, most: int) -> list[list[Due]]:
    """The steps of at most `most` identities whose first window passed by `now`, the longest
    due first (a sweep builds objects for the ones it will apply, not for every identity due)."""
    rows = conn.execute(
        sql(
            _STEPS + f"SELECT {_STEP_COLUMNS} FROM d WHERE first_due <= {{now}}"
            " ORDER BY first_due LIMIT {most}"
        ),
        {**_window_params(now, windows), "most": most},
    )
    return [_steps_of(row) for row in rows]


def _next_first_due(
    conn: Conn, now: float, windows: Windows, attached: Collection[str]
) -> float | None:
    """The earliest first window still ahead, among identities not attached."""
    found = None
    for agent_id, first_due in conn.execute(
        sql(_STEPS + "SELECT id, first_due FROM d WHERE first_due > {now} ORDER BY first_due"),
        _window_params(now, windows),
    ):
        if agent_id not in attached:
            found = float(first_due)
            break
    return found


def plan_sweep(
    conn: Conn,
    now: float,
    windows: Windows,
    attached: Collection[str],
    *,
    limit: int = 500,
) -> Plan:
    """Every window passed by `now` for identities not in `attached`, in order per identity.

    A window that passed while the broker was down is applied at once, and a named identity
    whose archive and archive retention both passed is archived and reaped in one sweep.
    """
    due: list[Due] = []
    upcoming: list[float] = []
    identities = 0
    more = False
    # Attached identities are skipped, so read that many more; one more tells `more`.
    for steps in _due_steps(conn, now, windows, limit + len(attached) + 1):
        if steps[0].agent_id in attached:
            continue
        passed = [step for step in steps if step.due_at <= now]
        pending = [step.due_at for step in steps if step.due_at > now]
        if passed:
            if identities >= limit:
                more = True
                continue
            identities += 1
            # An archive is superseded by a reap in the same sweep (the reap is what lasts),
            # but the archive still happens first so its event is recorded.
            due.extend(passed)
        if pending:
            upcoming.append(min(pending))
    later = _next_first_due(conn, now, windows, attached)
    if later is not None:
        upcoming.append(later)
    return Plan(due, min(upcoming) if upcoming else None, more)


def _applied(
    described: dict[str, object], action: Action, reason: str, *, dead: int, ended: int
) -> Applied:
    return Applied(
        str(described["agent_id"]),
        action,
        reason,
        dead,
        ended_sessions=ended,
        alias=str(described["alias"]),
        address=str(described["address"]),
    )


def _attached_count(conn: Conn, agent_id: str) -> int:
    (count,) = conn.execute(
        sql("SELECT COUNT(*) FROM sessions WHERE identity_id = {} AND state = 'attached'"),
        (agent_id,),
    ).fetchone()
    return int(count)


def archive_identity(
    conn: Conn, agent_id: str, *, now: float, at: float, reason: str
) -> Applied | None:
    """Archive: hide it, keep its mail waiting, end its sessions (`ended`, "archived").

    `at` is when the archive counts from (the first archive starts the archive retention);
    None when the identity does not exist or is already archived. `ended_sessions` counts the
    sessions that were attached.
    """
    described = describe_identity(conn, agent_id)
    if described is None:
        return None
    cursor = conn.execute(
        sql(
            "UPDATE identities SET archived_at = {}, first_archived_at ="
            " COALESCE(first_archived_at, {})"
            " WHERE id = {} AND archived_at IS NULL"
        ),
        (at, at, agent_id),
    )
    if cursor.rowcount == 0:
        return None
    ended = _attached_count(conn, agent_id)
    # Attached sessions end; lapsed ones too, so their token answers `ended (archived)`.
    conn.execute(
        sql(
            "UPDATE sessions SET state = 'ended', end_reason = 'archived', ended_at = {}"
            " WHERE identity_id = {} AND state IN ('attached', 'expired')"
        ),
        (now, agent_id),
    )
    conn.execute(
        sql("UPDATE identities SET detached_at = COALESCE(detached_at, {}) WHERE id = {}"),
        (now, agent_id),
    )
    end_with_identity(conn, agent_id, "archived", now)  # an archived identity holds nothing
    record_event(
        conn,
        now,
        "agent.archived",
        {**described, "reason": reason, "dead_lettered": 0, "ended_sessions": ended},
    )
    return _applied(described, Action.ARCHIVE, reason, dead=0, ended=ended)


def unarchive_identity(conn: Conn, agent_id: str, *, now: float, reason: str) -> Applied | None:
    """Show an archived identity again; None when it does not exist or is not archived.

    Its detach clock restarts (`detached_at = now`), so the next sweep does not archive it
    again at once; `first_archived_at` stays, as when attaching un-archives it.
    """
    cursor = conn.execute(
        sql(
            "UPDATE identities SET archived_at = NULL, detached_at = {}"
            " WHERE id = {} AND archived_at IS NOT NULL"
        ),
        (now, agent_id),
    )
    if cursor.rowcount == 0:
        return None
    described = describe_identity(conn, agent_id)
    assert described is not None
    record_event(conn, now, "agent.unarchived", {**described, "reason": reason})
    return _applied(described, Action.UNARCHIVE, reason, dead=0, ended=0)


def reap_identity(
    conn: Conn,
    agent_id: str,
    *,
    now: float,
    reason: str,
    dead_reason: str = "reaped",
    event: str = "agent.reaped",
    action: Action = Action.REAP,
) -> Applied | None:
    """Reap: dead-letter its unsettled mail (`dead_reason`), expire its open claims, delete it.

    Its sessions, alias reservations and conversation keys go with it (ON DELETE CASCADE);
    messages it exchanged stay (they have no foreign key), so survivors keep their history.
    """
    described = describe_identity(conn, agent_id)
    if described is None:
        return None
    ended = _attached_count(conn, agent_id)
    dead = dead_letter_inbox(conn, agent_id, now, dead_reason)  # one message.dead each
    end_with_identity(conn, agent_id, dead_reason, now)  # `reaped` or `purged`
    conn.execute(sql("DELETE FROM identities WHERE id = {}"), (agent_id,))
    record_event(
        conn,
        now,
        event,
        {**described, "reason": reason, "dead_lettered": dead, "ended_sessions": ended},
    )
    return _applied(described, action, reason, dead=dead, ended=ended)


def purge_identity(conn: Conn, agent_id: str, *, now: float, reason: str) -> Applied | None:
    """Purge (operator): a reap whose dead letters say `purged` and whose sessions' tokens
    keep answering `ended` (purged) instead of becoming unknown."""
    conn.execute(
        sql(
            "INSERT INTO purged_sessions (token_hash, session_id, agent_id, purged_at)"
            " SELECT token_hash, id, identity_id, {} FROM sessions WHERE identity_id = {}"
            " ON CONFLICT (token_hash) DO UPDATE SET session_id = excluded.session_id,"
            " agent_id = excluded.agent_id, purged_at = excluded.purged_at"
        ),
        (now, agent_id),
    )
    return reap_identity(
        conn,
        agent_id,
        now=now,
        reason=reason,
        dead_reason="purged",
        event="agent.purged",
        action=Action.PURGE,
    )


def purged_session(conn: Conn, token_hash: str) -> str | None:
    """The session id a token had, if its identity was purged (within event retention)."""
    row = conn.execute(
        sql("SELECT session_id FROM purged_sessions WHERE token_hash = {}"), (token_hash,)
    ).fetchone()
    return None if row is None else str(row[0])


def _steps_now(conn: Conn, agent_id: str, windows: Windows) -> list[Due]:
    """The identity's steps as its row is now; none when it is gone."""
    row = conn.execute(
        sql(_STEPS + f"SELECT {_STEP_COLUMNS} FROM d WHERE id = {{id}}"),
        {**_window_params(0.0, windows), "id": agent_id},
    ).fetchone()
    return [] if row is None else _steps_of(row)


def apply_due(conn: Conn, due: Sequence[Due], now: float, windows: Windows) -> list[Applied]:
    """Apply steps of a plan made earlier on a read snapshot, each only if it still stands in
    this transaction: the identity exists, is not attached, and its window still passed (it
    may have attached, been renamed or been reaped since the plan was read)."""
    applied = []
    standing: dict[str, set[tuple[Action, str]]] = {}
    for step in due:
        if step.agent_id not in standing:
            steps = (
                []
                if _attached_count(conn, step.agent_id)
                else _steps_now(conn, step.agent_id, windows)
            )
            standing[step.agent_id] = {(d.action, d.reason) for d in steps if d.due_at <= now}
        if (step.action, step.reason) not in standing[step.agent_id]:
            continue
        if step.action is Action.ARCHIVE:
            done = archive_identity(
                conn, step.agent_id, now=now, at=step.due_at, reason=step.reason
            )
        elif step.action is Action.REAP:
            done = reap_identity(conn, step.agent_id, now=now, reason=step.reason)
        else:
            raise ValueError(f"a sweep plans archives and reaps only, not {step.action}")
        if done is not None:
            applied.append(done)
    return applied


def prune(conn: Conn, now: float, windows: Windows) -> Pruned:
    """Forget idempotency keys past `idempotency`, and operator events, counted refusals,
    purged sessions' tokens (such a token then answers as unknown) and ended wake runs past
    `event_retention`."""
    keys = conn.execute(
        sql("DELETE FROM idempotency WHERE created_at <= {}"), (now - windows.idempotency,)
    ).rowcount
    # `at` is ISO 8601 UTC with a fixed width, so text order is time order. Events are
    # appended in time order: the log is cut from its oldest event up to the first one to keep,
    # a walk of what is deleted in seq order (an index on `at` would cost every event a page).
    # Should the clock have gone back, an older event after a newer one is kept a little
    # longer, never dropped early.
    cutoff = iso(now - windows.event_retention)
    events = conn.execute(
        sql(
            "DELETE FROM events WHERE seq < COALESCE("
            "(SELECT seq FROM events WHERE at > {} ORDER BY seq LIMIT 1),"
            " (SELECT MAX(seq) + 1 FROM events))"
        ),
        (cutoff,),
    ).rowcount
    refusals = prune_refusals(conn, now - windows.event_retention)
    tombstones = conn.execute(
        sql("DELETE FROM purged_sessions WHERE purged_at <= {}"), (now - windows.event_retention,)
    ).rowcount
    # Reservations whose TTL passed blocked nothing since; their end is recorded now, and
    # ended ones are kept as long as their events.
    expire_due(conn, now)
    prune_ended(conn, now - windows.event_retention)
    # Wake runs are kept as long as their events (the hourly bound needs one hour of them).
    conn.execute(
        sql("DELETE FROM wake_runs WHERE ended_at <= {}"),
        (now - max(windows.event_retention, 3600.0),),
    )
    return Pruned(keys, events, tombstones, refusals)
