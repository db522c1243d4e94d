"""Edit reservations in the store (docs/reservations.md): sync functions on a connection, in
the SQL both engines speak. The rule (overlap, conflicts, states) is pager/domain/reservations.py's;
this module reads the rows it needs and writes what it decided.

Every change of a scope's reservations holds that scope's lock to its commit (the dialect's
`lock_reservations`: on PostgreSQL an advisory lock, so two brokers never both take an
overlapping claim; on SQLite, whose one writer already serialises every transaction, nothing).
A reservation whose TTL passed blocks nothing from that instant: every read filters by time; the
sweep only records its end (`expire_due`, with the `reservation.expired` event) and later prunes it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from pager.domain import reservations as rules
from pager.domain.addressing import PERSON
from pager.domain.clock import iso
from pager.domain.errors import ErrorCode, PagerError
from pager.domain.hints import Hint
from pager.domain.reservations import Holding, Pattern, State, Times
from pager.store._conn import Conn
from pager.store._dialect import dialect_of
from pager.store._events import record_event
from pager.store._sql import sql

#: Rows a listing answers at most.
LIST_MAX = 2000


@attrs.frozen
class Reservation:
    """One reservation as the store reads it, with its holder's address now (its id when the
    identity is gone) and its holder's last live moment (None: the person, never stale)."""

    id: str
    identity_id: str
    holder: str
    scope: str
    workspace: str  # the slug of the workspace it was taken in
    pattern: str
    exclusive: bool
    reason: str
    created_at: float
    expires_at: float
    ended_at: float | None
    end_reason: str | None
    live_until: float | None

    def state(self, now: float, grace: float) -> State:
        times = Times(self.expires_at, self.ended_at, self.live_until)
        return rules.state_of(times, now, grace)

    def holding(self) -> Holding:
        return Holding(self.identity_id, rules.parsed(self.pattern), self.exclusive)


@attrs.frozen
class Conflict:
    """A reservation that stops a request, and the wanted pattern or path it stops."""

    wanted: str
    held: Reservation


# A reservation with its holder's address and last live moment, in one statement: the newest of
# its sessions' leases (attached) or ends, else the identity's last activity.
_SELECT = f"""
SELECT r.id, r.identity_id, COALESCE(i.alias || '@' || w.slug, r.identity_id), r.scope,
  COALESCE(rw.slug, ''), r.pattern, r.exclusive, r.reason, r.created_at, r.expires_at,
  r.ended_at, r.end_reason,
  CASE WHEN i.implementation = '{PERSON}' THEN NULL ELSE COALESCE(
    (SELECT MAX(CASE WHEN s.state = 'attached' THEN s.lease_expires_at
                     ELSE COALESCE(s.ended_at, s.lease_expires_at) END)
     FROM sessions s WHERE s.identity_id = r.identity_id),
    i.last_seen) END
FROM reservations r
LEFT JOIN identities i ON i.id = r.identity_id
LEFT JOIN workspaces w ON w.key = i.workspace_key
LEFT JOIN workspaces rw ON rw.key = r.workspace_key
"""
#: The scope of an identity's workspace (its key without its host).
_SCOPE_OF = (
    "SELECT CASE WHEN w.host <> '' AND substr(w.key, 1, length(w.host) + 1) = w.host || ':'"
    " THEN substr(w.key, length(w.host) + 2) ELSE w.key END"
    " FROM identities i JOIN workspaces w ON w.key = i.workspace_key WHERE i.id = {}"
)


def _row(row: Any) -> Reservation:
    return Reservation(
        id=str(row[0]),
        identity_id=str(row[1]),
        holder=str(row[2]),
        scope=str(row[3]),
        workspace=str(row[4]),
        pattern=str(row[5]),
        exclusive=bool(row[6]),
        reason=str(row[7]),
        created_at=float(row[8]),
        expires_at=float(row[9]),
        ended_at=None if row[10] is None else float(row[10]),
        end_reason=None if row[11] is None else str(row[11]),
        live_until=None if row[12] is None else float(row[12]),
    )


@attrs.frozen
class Holder:
    """The identity a request acts as: its workspace and the scope of its reservations."""

    identity_id: str
    workspace_key: str
    scope: str


def holder_of(conn: Conn, identity_id: str) -> Holder:
    row = conn.execute(
        sql("SELECT i.workspace_key, (" + _SCOPE_OF + ") FROM identities i WHERE i.id = {}"),
        (identity_id, identity_id),
    ).fetchone()
    if row is None:
        raise PagerError(ErrorCode.ENDED, "your identity no longer exists; register again")
    return Holder(identity_id, str(row[0]), str(row[1]))


def _marks(values: Sequence[object]) -> str:
    return ", ".join("{}" for _ in values)


def candidates(
    conn: Conn, holder: Holder, patterns: Sequence[Pattern], now: float
) -> list[Reservation]:
    """Others' reservations in force in the holder's scope that may overlap `patterns`
    (stale ones among them): those whose prefix leads to a pattern's prefix, or follows from
    it (pager/domain/reservations.py `Pattern.prefix`)."""
    params: list[object] = [holder.scope, now, holder.identity_id]
    narrow = ""
    if all(p.prefix for p in patterns):  # a pattern that starts with a glob may meet any
        leading = sorted({a for p in patterns for a in rules.ancestors(p.prefix)})
        beneath = sorted({p.prefix + "/" for p in patterns})
        clauses = [
            f"r.prefix IN ({_marks(leading)})",
            *["substr(r.prefix, 1, {}) = {}"] * len(beneath),
        ]
        narrow = f" AND ({' OR '.join(clauses)})"
        params += leading
        for prefix in beneath:
            params += [len(prefix), prefix]
    rows = conn.execute(
        sql(
            _SELECT + " WHERE r.scope = {} AND r.ended_at IS NULL AND r.expires_at > {}"
            f" AND r.identity_id <> {{}}{narrow} ORDER BY r.created_at, r.id"
        ),
        params,
    )
    return [_row(row) for row in rows]


def held_by(conn: Conn, identity_id: str, now: float) -> list[Reservation]:
    """The identity's reservations in force."""
    rows = conn.execute(
        sql(
            _SELECT + " WHERE r.identity_id = {} AND r.ended_at IS NULL AND r.expires_at > {}"
            " ORDER BY r.created_at, r.id"
        ),
        (identity_id, now),
    )
    return [_row(row) for row in rows]


def exclusive_of_others(
    conn: Conn, identity_id: str, paths: Sequence[str], now: float
) -> list[Reservation]:
    """What an edit of `paths` by `identity_id` is checked against, in one statement on the
    scope's index: the exclusive reservations in force of others in its scope whose prefix is
    one of the paths' ancestors (stale ones among them: the caller leaves them out)."""
    leading = sorted({a for path in paths for a in rules.ancestors(path)})
    rows = conn.execute(
        sql(
            _SELECT + " WHERE r.scope = (" + _SCOPE_OF + ") AND r.ended_at IS NULL"
            f" AND r.prefix IN ({_marks(leading)}) AND r.expires_at > {{}} AND r.exclusive = 1"
            " AND r.identity_id <> {} ORDER BY r.created_at, r.id"
        ),
        (identity_id, *leading, now, identity_id),
    )
    return [_row(row) for row in rows]


def conflicts(
    wanted: Sequence[Holding], held: Sequence[Reservation], now: float, grace: float
) -> list[Conflict]:
    """Each wanted pattern's conflicts with the held reservations that block (not stale)."""
    blocking = [r for r in held if r.state(now, grace) is State.ACTIVE]
    found = []
    for want in wanted:
        for other in blocking:
            if rules.conflicts_with(want, other.holding()):
                found.append(Conflict(want.pattern.text, other))
    return found


def reserve(
    conn: Conn,
    holder: Holder,
    patterns: Sequence[Pattern],
    *,
    exclusive: bool,
    reason: str,
    ttl: float,
    now: float,
    grace: float,
    new_ids: Sequence[str],
) -> list[Reservation]:
    """Take every pattern or none: PagerError `conflict` naming each holder when one is
    held against it. A pattern the holder holds already is renewed (its mode, reason and
    TTL as asked now) and keeps its id."""
    dialect_of(conn).lock_reservations(conn, holder.scope)
    wanted = [Holding(holder.identity_id, pattern, exclusive) for pattern in patterns]
    found = conflicts(wanted, candidates(conn, holder, patterns, now), now, grace)
    if found:
        raise conflict_error(found, now)
    mine = {r.pattern: r for r in held_by(conn, holder.identity_id, now)}
    new = [p for p in patterns if p.text not in mine]
    if len(mine) + len(new) > rules.MAX_HELD:
        raise PagerError(
            ErrorCode.VALIDATION_FAILED,
            f"you would hold {len(mine) + len(new)} reservations, over {rules.MAX_HELD}; release"
            " some, or reserve a directory or a glob instead of each file; nothing was reserved",
            limit=rules.MAX_HELD,
        )
    expires_at = now + ttl
    ids = iter(new_ids)
    taken: list[str] = []
    for pattern in patterns:
        known = mine.get(pattern.text)
        if known is not None:
            conn.execute(
                sql(
                    "UPDATE reservations SET exclusive = {}, reason = {}, expires_at = {} WHERE"
                    " id = {}"
                ),
                (int(exclusive), reason, expires_at, known.id),
            )
            taken.append(known.id)
            continue
        reservation_id = next(ids)
        conn.execute(
            sql(
                "INSERT INTO reservations (id, identity_id, workspace_key, scope, pattern,"
                " prefix,"
                " exclusive, reason, created_at, expires_at) VALUES ({}, {}, {}, {}, {}, {}, {},"
                " {}, {}, {})"
            ),
            (
                reservation_id,
                holder.identity_id,
                holder.workspace_key,
                holder.scope,
                pattern.text,
                pattern.prefix,
                int(exclusive),
                reason,
                now,
                expires_at,
            ),
        )
        taken.append(reservation_id)
    made = by_ids(conn, taken)
    for reservation in made:
        _event(conn, now, "reservation.taken", reservation)
    return made


def by_ids(conn: Conn, ids: Sequence[str]) -> list[Reservation]:
    """The reservations with these ids, in that order (unknown ones left out)."""
    if not ids:
        return []
    marks = ", ".join("{}" for _ in ids)
    rows = {
        r.id: r for r in map(_row, conn.execute(sql(_SELECT + f" WHERE r.id IN ({marks})"), ids))
    }
    return [rows[i] for i in ids if i in rows]


def release(
    conn: Conn, holder: Holder, patterns: Sequence[Pattern] | None, now: float
) -> tuple[list[Reservation], list[str]]:
    """End the holder's reservations of these patterns (None: all of them); (those ended,
    the patterns it held none of)."""
    dialect_of(conn).lock_reservations(conn, holder.scope)
    mine = held_by(conn, holder.identity_id, now)
    if patterns is None:
        chosen, missing = mine, []
    else:
        texts = {p.text for p in patterns}
        chosen = [r for r in mine if r.pattern in texts]
        held = {r.pattern for r in chosen}
        missing = [p.text for p in patterns if p.text not in held]
    ended = _end(conn, chosen, now, "released", "reservation.released")
    return ended, missing


def break_one(conn: Conn, reservation_id: str, now: float) -> Reservation:
    """End one reservation, whoever holds it (the operator's); PagerError `not_found` for an
    unknown id or one that ended already."""
    found = by_ids(conn, [reservation_id])
    if not found or found[0].ended_at is not None or found[0].expires_at <= now:
        raise PagerError(
            ErrorCode.NOT_FOUND,
            f"no reservation {reservation_id[:64]!r} is in force (unknown, or it ended);"
            " `pager reservations --all` lists them",
        )
    dialect_of(conn).lock_reservations(conn, found[0].scope)
    return _end(conn, found, now, "broken", "reservation.broken")[0]


def end_with_identity(conn: Conn, identity_id: str, why: str, now: float) -> None:
    """End an identity's reservations as it is archived, reaped or purged (`why`), in the
    transaction that does it."""
    rows = conn.execute(
        sql(_SELECT + " WHERE r.identity_id = {} AND r.ended_at IS NULL"), (identity_id,)
    ).fetchall()
    if rows:
        _end(conn, [_row(row) for row in rows], now, why, "reservation.released")


def expire_due(conn: Conn, now: float, *, limit: int = 500) -> int:
    """Record the end of reservations whose TTL passed (at their expiry), each with its
    `reservation.expired` event; how many."""
    rows = conn.execute(
        sql(
            _SELECT
            + " WHERE r.ended_at IS NULL AND r.expires_at <= {} ORDER BY r.expires_at LIMIT {}"
        ),
        (now, limit),
    ).fetchall()
    for reservation in map(_row, rows):
        conn.execute(
            sql(
                "UPDATE reservations SET ended_at = {}, end_reason = 'expired' WHERE id = {}"
                " AND ended_at IS NULL"
            ),
            (reservation.expires_at, reservation.id),
        )
        _event(conn, now, "reservation.expired", reservation)
    return len(rows)


def prune_ended(conn: Conn, before: float) -> int:
    """Forget reservations that ended before `before` (kept as long as the events)."""
    return conn.execute(sql("DELETE FROM reservations WHERE ended_at <= {}"), (before,)).rowcount


def listed(conn: Conn, scope: str | None, now: float) -> tuple[list[Reservation], bool]:
    """Reservations in force (stale ones among them) of one scope, or of every scope (None),
    by scope, pattern; and whether more than LIST_MAX were left out."""
    where = "r.ended_at IS NULL AND r.expires_at > {}"
    params: tuple[object, ...] = (now,)
    if scope is not None:
        where += " AND r.scope = {}"
        params += (scope,)
    rows = conn.execute(
        sql(_SELECT + f" WHERE {where} ORDER BY r.scope, r.pattern, r.id LIMIT {{}}"),
        (*params, LIST_MAX + 1),
    ).fetchall()
    return [_row(row) for row in rows[:LIST_MAX]], len(rows) > LIST_MAX


def _end(
    conn: Conn, chosen: Sequence[Reservation], now: float, why: str, event: str
) -> list[Reservation]:
    ended = []
    for reservation in chosen:
        conn.execute(
            sql(
                "UPDATE reservations SET ended_at = {}, end_reason = {} WHERE id = {}"
                " AND ended_at IS NULL"
            ),
            (now, why, reservation.id),
        )
        done = attrs.evolve(reservation, ended_at=now, end_reason=why)
        _event(conn, now, event, done)
        ended.append(done)
    return ended


def _event(conn: Conn, now: float, kind: str, reservation: Reservation) -> None:
    record_event(
        conn,
        now,
        kind,
        {
            "id": reservation.id,
            "agent_id": reservation.identity_id,
            "address": reservation.holder,
            "workspace": reservation.workspace,
            "pattern": reservation.pattern,
            "exclusive": reservation.exclusive,
            "reason": reservation.reason,
            "expires_at": iso(reservation.expires_at),
            **({"why": reservation.end_reason} if reservation.end_reason else {}),
        },
    )


def conflict_error(found: Sequence[Conflict], now: float) -> PagerError:
    """`conflict`: each wanted pattern and who holds what against it, since and until when;
    nothing was taken."""
    first = found[0]
    held = first.held
    mode = "exclusively" if held.exclusive else "shared"
    why = f" ({held.reason})" if held.reason else ""
    more = f" and {len(found) - 1} more conflict(s)" if len(found) > 1 else ""
    return PagerError(
        ErrorCode.CONFLICT,
        f"{first.wanted} is held {mode} by {held.holder} as {held.pattern}{why} since"
        f" {iso(held.created_at)} until {iso(held.expires_at)}{more}; nothing was reserved",
        hint=Hint.RESERVATION_HELD,
        conflicts=[conflict_json(c) for c in found],
    )


def conflict_json(found: Conflict) -> dict[str, object]:
    held = found.held
    return {
        "wanted": found.wanted,
        "id": held.id,
        "pattern": held.pattern,
        "holder": held.holder,
        "agent_id": held.identity_id,
        "exclusive": held.exclusive,
        "reason": held.reason,
        "since": iso(held.created_at),
        "until": iso(held.expires_at),
    }
