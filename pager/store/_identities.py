"""Workspaces, identities, aliases, conversations and sessions: sync functions on a connection.

Callers run them inside one checkpoint transaction each; none of them commits. The changes an
operator sees (an identity created, renamed or moved; a session attached or ended) record their
`agent.*` event here, in the same transaction, so no caller can forget one.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from pager.domain.names import format_address
from pager.domain.records import Delivery, Identity, Session, SessionState
from pager.domain.workspace import Workspace
from pager.store._conn import Conn
from pager.store._dialect import dialect_of
from pager.store._events import record_event
from pager.store._sql import column_count, qualified, sql

_IDENTITY_COLUMNS = (
    "id, workspace_key, alias, durable, implementation, created_at, last_seen, detached_at,"
    " archived_at, exchanged"
)
_SESSION_COLUMNS = (
    "id, identity_id, epoch, token_hash, resume_hash, state, created_at, lease_expires_at,"
    " conversation_key, delivery, end_reason, host"
)


def _identity(row: Any) -> Identity:
    return Identity(
        id=str(row[0]),
        workspace_key=str(row[1]),
        alias=str(row[2]),
        durable=bool(row[3]),
        implementation=str(row[4]),
        created_at=float(row[5]),
        last_seen=float(row[6]),
        detached_at=None if row[7] is None else float(row[7]),
        archived_at=None if row[8] is None else float(row[8]),
        exchanged=bool(row[9]),
    )


def _session(row: Any) -> Session:
    delivery = None
    if row[9] is not None:
        data = json.loads(str(row[9]))
        delivery = Delivery(kind=data["kind"], target=data["target"])
    return Session(
        id=str(row[0]),
        identity_id=str(row[1]),
        epoch=int(row[2]),
        token_hash=str(row[3]),
        resume_hash=str(row[4]),
        state=SessionState(row[5]),
        created_at=float(row[6]),
        lease_expires_at=float(row[7]),
        conversation_key=None if row[8] is None else str(row[8]),
        delivery=delivery,
        end_reason=None if row[10] is None else str(row[10]),
        host=str(row[11] or ""),
    )


# -- workspaces ------------------------------------------------------------------------------


def ensure_workspace(conn: Conn, workspace: Workspace, now: float) -> None:
    conn.execute(
        sql(
            "INSERT INTO workspaces (key, slug, path, created_at, host) VALUES ({}, {}, {}, {}, {})"
            " ON CONFLICT (key) DO NOTHING"
        ),
        (workspace.key, workspace.slug, workspace.path, now, workspace.host),
    )


def workspace_of_slug(conn: Conn, slug: str) -> tuple[str, str] | None:
    """(key, path) of the workspace with this slug."""
    row = conn.execute(sql("SELECT key, path FROM workspaces WHERE slug = {}"), (slug,)).fetchone()
    return None if row is None else (str(row[0]), str(row[1]))


def workspace_slug(conn: Conn, key: str) -> str:
    row = conn.execute(sql("SELECT slug FROM workspaces WHERE key = {}"), (key,)).fetchone()
    if row is None:
        raise LookupError(f"no workspace {key!r}")
    return str(row[0])


def workspace_of_key(conn: Conn, key: str) -> Workspace:
    """The workspace recorded under `key` (LookupError when there is none)."""
    row = conn.execute(
        sql("SELECT key, slug, path, host FROM workspaces WHERE key = {}"), (key,)
    ).fetchone()
    if row is None:
        raise LookupError(f"no workspace {key!r}")
    return Workspace(key=str(row[0]), slug=str(row[1]), path=str(row[2]), host=str(row[3] or ""))


def workspace_path(conn: Conn, key: str) -> str:
    row = conn.execute(sql("SELECT path FROM workspaces WHERE key = {}"), (key,)).fetchone()
    if row is None:
        raise LookupError(f"no workspace {key!r}")
    return str(row[0])


# -- identities ------------------------------------------------------------------------------


def get_identity(conn: Conn, identity_id: str) -> Identity | None:
    row = conn.execute(
        sql(f"SELECT {_IDENTITY_COLUMNS} FROM identities WHERE id = {{}}"), (identity_id,)
    ).fetchone()
    return None if row is None else _identity(row)


def identity_by_alias(conn: Conn, workspace_key: str, alias_key: str) -> Identity | None:
    row = conn.execute(
        sql(
            f"SELECT {_IDENTITY_COLUMNS} FROM identities WHERE workspace_key = {{}} AND"
            f" alias_key = {{}}"
        ),
        (workspace_key, alias_key),
    ).fetchone()
    return None if row is None else _identity(row)


def addressed_identity(
    conn: Conn,
    *,
    agent_id: str | None,
    alias_key: str | None,
    beside: str | None = None,
    slug: str | None = None,
) -> tuple[Identity, str] | None:
    """The identity an address names and its workspace's slug, in one statement: by its id,
    or by its alias in the workspace `slug` names or (`beside`) the workspace of that
    identity. None when no identity answers to it now."""
    where, parameters = addressed_where(
        agent_id=agent_id, alias_key=alias_key, beside=beside, slug=slug
    )
    row = conn.execute(
        sql(
            f"SELECT {ADDRESSED_COLUMNS}, w.slug FROM identities i"
            f" JOIN workspaces w ON w.key = i.workspace_key WHERE {where}"
        ),
        parameters,
    ).fetchone()
    return None if row is None else (_identity(row), str(row[-1]))


def identity_columns(table: str) -> str:
    """The columns `identity_of` reads, of the identities row named `table` in a statement."""
    return qualified(_IDENTITY_COLUMNS, table)


#: How many columns `identity_columns` holds.
IDENTITY_WIDTH = column_count(_IDENTITY_COLUMNS)
#: The identities row's columns as `identity_of` reads them, from the row named `i`.
ADDRESSED_COLUMNS = identity_columns("i")


def session_columns(table: str) -> str:
    """The columns `session_of` reads, of the sessions row named `table` in a statement."""
    return qualified(_SESSION_COLUMNS, table)


#: How many columns `session_columns` holds.
SESSION_WIDTH = column_count(_SESSION_COLUMNS)


def session_of(row: Any) -> Session | None:
    """A session from a row that starts with `session_columns` (None: all NULL, none)."""
    return None if row[0] is None else _session(row)


def addressed_where(
    *, agent_id: str | None, alias_key: str | None, beside: str | None, slug: str | None
) -> tuple[str, dict[str, str | None]]:
    """The condition on `i` (identities) and `w` (its workspace) that picks the identity an
    address names (see `addressed_identity`), with its named parameters."""
    if agent_id is not None:
        return "i.id = {agent_id}", {"agent_id": agent_id}
    if slug is not None:
        return "w.slug = {slug} AND i.alias_key = {alias_key}", {
            "slug": slug,
            "alias_key": alias_key,
        }
    return (
        "i.alias_key = {alias_key} AND i.workspace_key ="
        " (SELECT workspace_key FROM identities WHERE id = {beside})",
        {"alias_key": alias_key, "beside": beside},
    )


def identity_of(row: Any) -> Identity:
    """An identity from a row that starts with `ADDRESSED_COLUMNS`."""
    return _identity(row)


def alias_reserved_by(conn: Conn, workspace_key: str, alias_key: str) -> str | None:
    """The identity holding (now or in the past) this alias in this workspace."""
    row = conn.execute(
        sql(
            "SELECT identity_id FROM alias_reservations WHERE workspace_key = {} AND alias_key = {}"
        ),
        (workspace_key, alias_key),
    ).fetchone()
    return None if row is None else str(row[0])


def insert_identity(
    conn: Conn,
    identity: Identity,
    alias_key: str,
    *,
    slug: str | None = None,
    if_absent: bool = False,
) -> None:
    """The identity, its alias reserved, and its `agent.created` event. `slug`: its
    workspace's, when the caller knows it: the event is written without reading the identity
    back (a batched write reads nothing before its commit). `if_absent`: nothing is inserted
    where another write made an identity with that id or alias first (the caller checks which
    one stands)."""
    conn.execute(
        sql(
            "INSERT INTO identities (id, workspace_key, alias, alias_key, durable, implementation,"
            " created_at, last_seen, detached_at) VALUES ({}, {}, {}, {}, {}, {}, {}, {}, {})"
            + (" ON CONFLICT DO NOTHING" if if_absent else "")
        ),
        (
            identity.id,
            identity.workspace_key,
            identity.alias,
            alias_key,
            int(identity.durable),
            identity.implementation,
            identity.created_at,
            identity.last_seen,
            identity.detached_at,  # the person's: never attached, its retention clock runs
        ),
    )
    reserve_alias(conn, identity.workspace_key, alias_key, identity.id)
    created = {"durable": identity.durable, "implementation": identity.implementation}
    if slug is None:
        record_agent_event(conn, identity.created_at, "agent.created", identity.id, **created)
    else:
        described = identity_fields(identity.id, identity.alias, slug)
        record_event(conn, identity.created_at, "agent.created", {**described, **created})


def reserve_alias(conn: Conn, workspace_key: str, alias_key: str, identity_id: str) -> None:
    conn.execute(
        sql(
            "INSERT INTO alias_reservations (workspace_key, alias_key, identity_id) VALUES ({},"
            " {}, {})"
            " ON CONFLICT DO NOTHING"
        ),
        (workspace_key, alias_key, identity_id),
    )


def set_alias(
    conn: Conn,
    identity_id: str,
    workspace_key: str,
    alias: str,
    alias_key: str,
    *,
    durable: bool,
    now: float,
) -> None:
    """Give the identity this alias in this workspace: `agent.moved` when the workspace
    changes, `agent.renamed` when only the alias (or durability) does, nothing otherwise."""
    before = describe_identity(conn, identity_id)
    old = conn.execute(
        sql("SELECT workspace_key, alias, durable FROM identities WHERE id = {}"), (identity_id,)
    ).fetchone()
    conn.execute(
        sql(
            "UPDATE identities SET workspace_key = {}, alias = {}, alias_key = {}, durable = {}"
            " WHERE id = {}"
        ),
        (workspace_key, alias, alias_key, int(durable), identity_id),
    )
    reserve_alias(conn, workspace_key, alias_key, identity_id)
    if old is None or before is None:
        return
    if str(old[0]) != workspace_key:
        record_agent_event(
            conn,
            now,
            "agent.moved",
            identity_id,
            old_workspace=before["workspace"],
            old_address=before["address"],
        )
    elif str(old[1]) != alias or bool(old[2]) != durable:
        record_agent_event(
            conn,
            now,
            "agent.renamed",
            identity_id,
            old_alias=before["alias"],
            old_address=before["address"],
            durable=durable,
        )


def touch_identity(
    conn: Conn, identity_id: str, now: float, *, attached: bool | None = None
) -> None:
    """Record activity; `attached=True` clears detached/archived marks, False sets detached_at."""
    if attached is None:
        conn.execute(sql("UPDATE identities SET last_seen = {} WHERE id = {}"), (now, identity_id))
    elif attached:
        conn.execute(
            sql(
                "UPDATE identities SET last_seen = {}, detached_at = NULL, archived_at = NULL"
                " WHERE id = {}"
            ),
            (now, identity_id),
        )
    else:
        conn.execute(
            sql("UPDATE identities SET last_seen = {}, detached_at = {} WHERE id = {}"),
            (now, now, identity_id),
        )


def mark_exchanged(conn: Conn, identity_ids: Iterable[str]) -> None:
    """The identities have sent or received mail (one statement for all of them)."""
    wanted = sorted(set(identity_ids))
    marks = ", ".join("{}" for _ in wanted)
    conn.execute(
        sql(f"UPDATE identities SET exchanged = 1 WHERE id IN ({marks}) AND exchanged = 0"), wanted
    )


def identity_of_implementation(
    conn: Conn, workspace_key: str, implementation: str
) -> Identity | None:
    """The oldest identity of `implementation` in the workspace, archived ones included (the
    person's: there is one per workspace, SPEC §4.2)."""
    row = conn.execute(
        sql(
            f"SELECT {_IDENTITY_COLUMNS} FROM identities WHERE workspace_key = {{}}"
            " AND implementation = {} ORDER BY created_at, id LIMIT 1"
        ),
        (workspace_key, implementation),
    ).fetchone()
    return None if row is None else _identity(row)


# -- conversations ---------------------------------------------------------------------------


def identity_of_conversation(conn: Conn, implementation: str, key: str) -> str | None:
    row = conn.execute(
        sql("SELECT identity_id FROM conversations WHERE implementation = {} AND key = {}"),
        (implementation, key),
    ).fetchone()
    return None if row is None else str(row[0])


def bind_conversation(conn: Conn, implementation: str, key: str, identity_id: str) -> None:
    conn.execute(
        sql(
            "INSERT INTO conversations (implementation, key, identity_id) VALUES ({}, {}, {})"
            " ON CONFLICT (implementation, key) DO UPDATE SET identity_id = excluded.identity_id"
        ),
        (implementation, key, identity_id),
    )


def name_conversation(conn: Conn, session_id: str, key: str) -> None:
    """The session's conversation, learnt after it registered (a harness that picks its own
    ids tells its first hook), unless it named one."""
    conn.execute(
        sql("UPDATE sessions SET conversation_key = {} WHERE id = {} AND conversation_key IS NULL"),
        (key, session_id),
    )


# -- sessions --------------------------------------------------------------------------------


def insert_session(conn: Conn, session: Session) -> None:
    delivery = (
        None
        if session.delivery is None
        else json.dumps({"kind": session.delivery.kind, "target": session.delivery.target})
    )
    conn.execute(
        sql(
            f"INSERT INTO sessions ({_SESSION_COLUMNS}) VALUES ({{}}, {{}}, {{}}, {{}}, {{}},"
            f" {{}}, {{}}, {{}}, {{}}, {{}}, {{}}, {{}})"
        ),
        (
            session.id,
            session.identity_id,
            session.epoch,
            session.token_hash,
            session.resume_hash,
            session.state.value,
            session.created_at,
            session.lease_expires_at,
            session.conversation_key,
            delivery,
            session.end_reason,
            session.host,
        ),
    )
    record_agent_event(
        conn,
        session.created_at,
        "agent.attached",
        session.identity_id,
        session_id=session.id,
        epoch=session.epoch,
    )


def session_by_token(conn: Conn, token_hash: str) -> Session | None:
    row = conn.execute(
        sql(f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE token_hash = {{}}"), (token_hash,)
    ).fetchone()
    return None if row is None else _session(row)


def session_by_resume(conn: Conn, resume_hash: str) -> Session | None:
    row = conn.execute(
        sql(f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE resume_hash = {{}}"), (resume_hash,)
    ).fetchone()
    return None if row is None else _session(row)


def latest_session(conn: Conn, identity_id: str) -> Session | None:
    row = conn.execute(
        sql(
            f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE identity_id = {{}}"
            " ORDER BY epoch DESC LIMIT 1"
        ),
        (identity_id,),
    ).fetchone()
    return None if row is None else _session(row)


def attached_sessions(conn: Conn) -> list[Session]:
    rows = conn.execute(sql(f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE state = 'attached'"))
    return [_session(row) for row in rows]


def attached_session(conn: Conn, identity_id: str) -> Session | None:
    """The identity's attached session, if it has one (never more than one)."""
    row = conn.execute(
        sql(f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE {attached_to('{}')}"), (identity_id,)
    ).fetchone()
    return None if row is None else _session(row)


def attached_to(identity: str) -> str:
    """Where and in which order the session attached to `identity` (a column, or a parameter's
    mark) is found: the newest epoch's, never more than one."""
    return f"identity_id = {identity} AND state = 'attached' ORDER BY epoch DESC LIMIT 1"


def attached_identity_ids(conn: Conn, host: str | None = None) -> frozenset[str]:
    """Every identity with an attached session (the partial index holds only those); with
    `host`, only those attached through that host's broker ('' on a store of one broker)."""
    rows = conn.execute(sql("SELECT identity_id, host FROM sessions WHERE state = 'attached'"))
    return frozenset(str(row[0]) for row in rows if host is None or (row[1] or "") == host)


def lock_inbox(conn: Conn, identity_id: str) -> None:
    """Taken first by every transaction that changes an identity's inbox (see `Dialect`)."""
    dialect_of(conn).lock_inbox(conn, identity_id)


def set_next_due(conn: Conn, identity_id: str, due: float | None) -> None:
    """When the identity next needs its actor on its own (see `due_identities`)."""
    conn.execute(sql("UPDATE identities SET next_due = {} WHERE id = {}"), (due, identity_id))


def next_due_of(conn: Conn, identity_id: str) -> float | None:
    row = conn.execute(
        sql("SELECT next_due FROM identities WHERE id = {}"), (identity_id,)
    ).fetchone()
    return None if row is None or row[0] is None else float(row[0])


def due_identities(
    conn: Conn, now: float, after: tuple[float, str] | None, limit: int
) -> list[tuple[float, str]]:
    """(next_due, id) of identities due by `now`, in due order, after the cursor `after`."""
    if after is None:
        rows = conn.execute(
            sql(
                "SELECT next_due, id FROM identities WHERE next_due <= {} ORDER BY next_due, id"
                " LIMIT {}"
            ),
            (now, limit),
        )
    else:
        rows = conn.execute(
            sql(
                "SELECT next_due, id FROM identities WHERE next_due <= {} AND (next_due, id) >"
                " ({}, {})"
                " ORDER BY next_due, id LIMIT {}"
            ),
            (now, after[0], after[1], limit),
        )
    return [(float(due), str(agent_id)) for due, agent_id in rows]


def earliest_due_after(conn: Conn, now: float) -> float | None:
    """The first next-due time later than `now`, of any identity."""
    (due,) = conn.execute(
        sql("SELECT MIN(next_due) FROM identities WHERE next_due > {}"), (now,)
    ).fetchone()
    return None if due is None else float(due)


def expire_sessions_of_hosts(conn: Conn, hosts: Sequence[str], now: float) -> list[str]:
    """End the attached sessions of brokers that are gone (SPEC §13) once their leases
    lapsed: their broker cannot end them. The ids of the identities detached."""
    ended: list[str] = []
    for host in hosts:
        rows = conn.execute(
            sql(
                "SELECT id, identity_id FROM sessions WHERE state = 'attached' AND host = {}"
                " AND lease_expires_at < {}"
            ),
            (host, now),
        ).fetchall()
        for session_id, identity_id in rows:
            reason = f"lease lapsed (the broker of host {host} is not running)"
            end_session(conn, str(session_id), SessionState.EXPIRED, reason, now)
            touch_identity(conn, str(identity_id), now, attached=False)
            ended.append(str(identity_id))
    return ended


def end_session(
    conn: Conn,
    session_id: str,
    state: SessionState,
    reason: str,
    now: float,
    *,
    cause: str | None = None,
) -> None:
    """End an attached session (`reason` is what its token answers from then on).

    Records `agent.detached` with the new state and `cause` (a short code: `replaced`,
    `taken_over`…; the state's name when not given: `detached`, `expired`). A session that was
    not attached any more changes nothing and records nothing.
    """
    cursor = conn.execute(
        sql(
            "UPDATE sessions SET state = {}, end_reason = {}, ended_at = {} WHERE id = {}"
            " AND state = 'attached' RETURNING identity_id"
        ),
        (state.value, reason, now, session_id),
    )
    row = cursor.fetchone()
    if row is None:
        return
    record_agent_event(
        conn,
        now,
        "agent.detached",
        str(row[0]),
        session_id=session_id,
        state=state.value,
        reason=cause or state.value,
    )


def retire_credentials(conn: Conn, session_id: str) -> None:
    """Free an ended session's token and resume token (both unique) for the session that
    carries them on after a forced takeover; the ended row keeps its history.

    The retired values name the session, so they stay unique however often one token moves:
    a session that takes over again and again retires the same hashes each time."""
    conn.execute(
        sql(
            "UPDATE sessions SET token_hash = 'retired:' || id || ':' || token_hash,"
            " resume_hash = 'retired:' || id || ':' || resume_hash WHERE id = {}"
        ),
        (session_id,),
    )


def move_conversation(conn: Conn, key: str, from_id: str, to_id: str) -> None:
    """Bind a conversation (of whatever implementation) from one identity to another, so its
    hooks and its next resume follow the session that moved."""
    conn.execute(
        sql("UPDATE conversations SET identity_id = {} WHERE key = {} AND identity_id = {}"),
        (to_id, key, from_id),
    )


def set_lease(conn: Conn, session_id: str, expires_at: float) -> None:
    conn.execute(
        sql("UPDATE sessions SET lease_expires_at = {} WHERE id = {} AND state = 'attached'"),
        (expires_at, session_id),
    )


def addresses(conn: Conn, identity_ids: Iterable[str]) -> dict[str, str]:
    """`alias@slug` of each identity that still exists (purged ones are left out), and
    `<label> (script)` of each mailbox token among them."""
    wanted = sorted(set(identity_ids))
    if not wanted:
        return {}
    marks = ", ".join("{}" for _ in wanted)
    rows = conn.execute(
        sql(
            "SELECT i.id, i.alias, w.slug FROM identities i JOIN workspaces w"
            f" ON w.key = i.workspace_key WHERE i.id IN ({marks})"
        ),
        wanted,
    )
    found = {str(row[0]): format_address(str(row[1]), str(row[2])) for row in rows}
    found.update(script_names(conn, wanted))
    return found


def script_names(conn: Conn, sender_ids: Iterable[str]) -> dict[str, str]:
    """`<label> (script)` of each mailbox token among `sender_ids`: a page's sender is its
    mailbox token, and a person knows it by the label it was made with."""
    pagers = sorted({sender for sender in sender_ids if sender.startswith("mbx_")})
    if not pagers:
        return {}
    marks = ", ".join("{}" for _ in pagers)
    rows = conn.execute(sql(f"SELECT id, label FROM mailbox_tokens WHERE id IN ({marks})"), pagers)
    return {str(row[0]): f"{row[1]} (script)" for row in rows}


# -- operator events -------------------------------------------------------------------------


def describe_identity(conn: Conn, identity_id: str) -> dict[str, object] | None:
    """The identity as operator events name it: id, alias, address and workspace slug."""
    row = conn.execute(
        sql(
            "SELECT i.alias, w.slug FROM identities i JOIN workspaces w ON w.key = i.workspace_key"
            " WHERE i.id = {}"
        ),
        (identity_id,),
    ).fetchone()
    return None if row is None else identity_fields(identity_id, str(row[0]), str(row[1]))


def identity_fields(identity_id: str, alias: str, slug: str) -> dict[str, object]:
    """An identity as operator events name it: id, alias, address and workspace slug."""
    return {
        "agent_id": identity_id,
        "alias": alias,
        "address": format_address(alias, slug),
        "workspace": slug,
    }


def record_agent_event(conn: Conn, now: float, kind: str, identity_id: str, **data: object) -> None:
    """An `agent.*` operator event: the identity as `describe_identity` names it, and `data`
    (nothing when the identity does not exist)."""
    fields = describe_identity(conn, identity_id)
    if fields is not None:
        record_event(conn, now, kind, {**fields, **data})
