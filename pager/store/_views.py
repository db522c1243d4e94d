"""The read views (SPEC §6, §8): snapshot, agents, one agent, an agent's messages, the roster.

Sync, read-only functions on a connection. The operator (and the messaging service, for the
roster) runs them on a read-only connection of its own inside one read transaction per
request, so a snapshot is consistent (counts, sessions and the event seq from one instant) and
never waits for, or holds up, the writer.

Counts are one aggregate over the partial index `messages_inbox` (queued, claimed, delivered
and dead mail): a covering index scan that never touches the table, however much acknowledged
history there is. Nothing here writes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from pager.domain.clock import iso
from pager.domain.names import format_address
from pager.domain.records import MessageState
from pager.domain.roster import RosterEntry, RosterKey
from pager.domain.views import (
    AgentView,
    Correspondent,
    InboxCounts,
    MessageView,
    SessionView,
    Snapshot,
    Totals,
    WorkspaceView,
)
from pager.store._conn import Conn
from pager.store._delivery_sql import INBOX_INDEXED
from pager.store._events import latest_event_seq
from pager.store._identities import script_names
from pager.store._refusals import refused_sends
from pager.store._sql import sql

_AGENT_COLUMNS = (
    "i.id, i.alias, w.slug, i.implementation, i.durable, i.archived_at, i.last_seen,"
    " i.created_at, w.path, w.host"
)
_AGENT_FROM = "FROM identities i JOIN workspaces w ON w.key = i.workspace_key"
_MESSAGE_COLUMNS = (
    "seq, id, sender_id, recipient_id, body, thread, reply_to, sent_at, state, attempts,"
    " dead_reason, settled_at, origin, hop"
)
#: IN lists are cut into chunks this long (SQLite limits bound parameters per statement).
_CHUNK = 500
#: Larger than any seq: "before the end".
_END = 2**63 - 1

# A partial index serves a query only when SQLite can see that the query's condition implies
# the index's, which it cannot for bound parameters: states are spelled out literally.
_COUNTED = INBOX_INDEXED
_STATE_TERMS = {
    MessageState.QUEUED: f"{_COUNTED} AND state = 'queued'",
    MessageState.CLAIMED: f"{_COUNTED} AND state = 'claimed'",
    MessageState.DELIVERED: f"{_COUNTED} AND state = 'delivered'",
    MessageState.ACKNOWLEDGED: "state = 'acknowledged'",
    MessageState.DEAD: f"{_COUNTED} AND state = 'dead'",
}


def _chunks(ids: Sequence[str]) -> Iterable[Sequence[str]]:
    for start in range(0, len(ids), _CHUNK):
        yield ids[start : start + _CHUNK]


def _marks(ids: Sequence[str]) -> str:
    return ", ".join("{}" for _ in ids)


def inbox_counts(conn: Conn, ids: Sequence[str] | None) -> dict[str, InboxCounts]:
    """Queued / claimed (claimed + delivered) / dead per identity (`None`: every recipient),
    from one covering scan of `messages_inbox` (per-id searches of it for a list of ids)."""
    counted = f"SELECT recipient_id, state, COUNT(*) FROM messages WHERE {_COUNTED}"
    if ids is None:
        rows: list[Any] = conn.execute(sql(counted + " GROUP BY recipient_id, state")).fetchall()
    else:
        rows = []
        for chunk in _chunks(ids):
            rows += conn.execute(
                sql(
                    counted + f" AND recipient_id IN ({_marks(chunk)}) GROUP BY recipient_id, state"
                ),
                chunk,
            ).fetchall()
    counts: dict[str, dict[str, int]] = {}
    for recipient, state, count in rows:
        counts.setdefault(str(recipient), {})[str(state)] = int(count)
    return {
        agent_id: InboxCounts(
            queued=found.get("queued", 0),
            claimed=found.get("claimed", 0) + found.get("delivered", 0),
            dead=found.get("dead", 0),
        )
        for agent_id, found in counts.items()
    }


def live_sessions(conn: Conn, ids: Sequence[str] | None) -> dict[str, list[SessionView]]:
    """The attached sessions (the store's `state = 'attached'`) per identity, oldest first."""
    attached = (
        "SELECT identity_id, id, epoch, created_at, lease_expires_at FROM sessions"
        " WHERE state = 'attached'"
    )
    if ids is None:
        rows: list[Any] = conn.execute(sql(attached)).fetchall()
    else:
        rows = []
        for chunk in _chunks(ids):
            rows += conn.execute(
                sql(attached + f" AND identity_id IN ({_marks(chunk)})"), chunk
            ).fetchall()
    found: dict[str, list[SessionView]] = {}
    for identity_id, session_id, epoch, created_at, lease in sorted(rows, key=lambda r: r[2]):
        found.setdefault(str(identity_id), []).append(
            SessionView(str(session_id), int(epoch), _iso(created_at), _iso(lease))
        )
    return found


def wake_marks(conn: Conn) -> tuple[set[str], set[str]]:
    """The identities with launch on mail on, and those with a run going (docs/wake.md): a
    few rows, those the person turned on."""
    on = {str(row[0]) for row in conn.execute(sql("SELECT identity_id FROM wake_settings"))}
    going = {
        str(row[0])
        for row in conn.execute(sql("SELECT identity_id FROM wake_runs WHERE ended_at IS NULL"))
    }
    return on, going


def _iso(seconds: float) -> str:
    text = iso(float(seconds))
    assert text is not None
    return text


def _agents(
    conn: Conn, rows: Sequence[Any], *, everyone: bool = False
) -> list[tuple[AgentView, str]]:
    """AgentViews of identity rows (`_AGENT_COLUMNS`), each with its workspace path.

    `everyone`: the rows are every identity, so counts and sessions are read for all at once
    (whole-index aggregates) instead of per id."""
    ids = None if everyone else [str(row[0]) for row in rows]
    counts = inbox_counts(conn, ids)
    sessions = live_sessions(conn, ids)
    wake_on, waking = wake_marks(conn)
    empty = InboxCounts()
    views = []
    for (
        agent_id,
        alias,
        slug,
        implementation,
        durable,
        archived_at,
        last_seen,
        created,
        path,
        host,
    ) in rows:
        live = sessions.get(agent_id, [])
        views.append(
            (
                AgentView(
                    agent_id=agent_id,
                    alias=alias,
                    address=format_address(alias, slug),
                    workspace=slug,
                    implementation=implementation,
                    durable=bool(durable),
                    archived=archived_at is not None,
                    attached=bool(live),
                    sessions=tuple(live),
                    inbox=counts.get(agent_id, empty),
                    last_seen=_iso(last_seen),
                    created_at=_iso(created),
                    archived_at=iso(archived_at),
                    host=str(host),
                    wake=agent_id in wake_on,
                    waking=agent_id in waking,
                ),
                str(path),
            )
        )
    return views


def snapshot(conn: Conn, broker: dict[str, Any]) -> Snapshot:
    """Every workspace that has agents (archived ones included) with its agents by alias,
    the totals over them, and the latest event seq: run it inside one read transaction."""
    rows = conn.execute(
        sql(f"SELECT {_AGENT_COLUMNS} {_AGENT_FROM} ORDER BY w.slug, i.alias_key, i.id")
    ).fetchall()
    seq = latest_event_seq(conn)
    grouped: dict[str, tuple[str, list[AgentView]]] = {}
    for view, path in _agents(conn, rows, everyone=True):
        grouped.setdefault(view.workspace, (path, []))[1].append(view)
    workspaces = tuple(
        WorkspaceView(slug, path, tuple(agents)) for slug, (path, agents) in grouped.items()
    )
    every = [agent for workspace in workspaces for agent in workspace.agents]
    totals = Totals(
        workspaces=len(workspaces),
        agents=len(every),
        attached=sum(agent.attached for agent in every),
        archived=sum(agent.archived for agent in every),
        queued=sum(agent.inbox.queued for agent in every),
        claimed=sum(agent.inbox.claimed for agent in every),
        dead=sum(agent.inbox.dead for agent in every),
        refused_sends=refused_sends(conn),
    )
    return Snapshot(broker=broker, workspaces=workspaces, totals=totals, seq=seq)


def totals(conn: Conn) -> Totals:
    """The snapshot's totals without building any agent: aggregates only (what `pager status`
    asks for on every run, whatever the size of the store)."""
    workspaces, agents, archived = conn.execute(
        sql("SELECT COUNT(DISTINCT workspace_key), COUNT(*), COUNT(archived_at) FROM identities")
    ).fetchone()
    (attached,) = conn.execute(
        sql("SELECT COUNT(DISTINCT identity_id) FROM sessions WHERE state = 'attached'")
    ).fetchone()
    # Mail of identities that are gone (purged, reaped) is not counted, as in the snapshot.
    by_state = dict(
        conn.execute(
            sql(
                f"SELECT state, COUNT(*) FROM messages WHERE {_COUNTED}"
                " AND recipient_id IN (SELECT id FROM identities) GROUP BY state"
            )
        ).fetchall()
    )
    return Totals(
        workspaces=int(workspaces),
        agents=int(agents),
        attached=int(attached),
        archived=int(archived),
        queued=int(by_state.get("queued", 0)),
        claimed=int(by_state.get("claimed", 0)) + int(by_state.get("delivered", 0)),
        dead=int(by_state.get("dead", 0)),
        refused_sends=refused_sends(conn),
    )


def totals_snapshot(conn: Conn, broker: dict[str, Any]) -> Snapshot:
    """A snapshot with its totals and seq but no workspaces (`?agents=false`)."""
    return Snapshot(broker=broker, workspaces=(), totals=totals(conn), seq=latest_event_seq(conn))


def list_agents(
    conn: Conn,
    *,
    workspace: str | None,
    archived: bool | None,
    limit: int,
    after: str | None,
) -> tuple[list[AgentView], str | None]:
    """One page of agents in agent-id order (stable: renames and moves never reorder it),
    and the last id shown when there are more."""
    clauses = ["i.id > {}"]
    params: list[object] = [after or ""]
    if workspace is not None:
        clauses.append("w.slug = {}")
        params.append(workspace)
    if archived is not None:
        clauses.append("i.archived_at IS NOT NULL" if archived else "i.archived_at IS NULL")
    rows = conn.execute(
        sql(
            f"SELECT {_AGENT_COLUMNS} {_AGENT_FROM} WHERE {' AND '.join(clauses)}"
            " ORDER BY i.id LIMIT {}"
        ),
        [*params, limit + 1],
    ).fetchall()
    more = len(rows) > limit
    views = [view for view, _ in _agents(conn, rows[:limit])]
    return views, (views[-1].agent_id if more else None)


def get_agent(conn: Conn, agent_id: str) -> AgentView | None:
    rows = conn.execute(
        sql(f"SELECT {_AGENT_COLUMNS} {_AGENT_FROM} WHERE i.id = {{}}"), (agent_id,)
    )
    found = _agents(conn, rows.fetchall())
    return found[0][0] if found else None


_ROSTER_SELECT = (
    "SELECT i.id, i.alias, i.alias_key, w.slug, i.implementation, i.last_seen, w.host,"
    " (SELECT COALESCE(s.host, '') FROM sessions s"
    "  WHERE s.identity_id = i.id AND s.state = 'attached' LIMIT 1)"
    f" {_AGENT_FROM} WHERE i.archived_at IS NULL"
)


def roster(
    conn: Conn,
    *,
    workspace_key: str | None,
    limit: int,
    after: RosterKey | None,
) -> tuple[list[RosterEntry], RosterKey | None]:
    """One page of the identities that are not archived (of one workspace, or of every one)
    by workspace slug then alias, and the key of the last one shown when there are more.

    The key is unique (aliases are unique per workspace, slugs per store), so a page starts
    exactly after the last one shown whatever was added or removed meanwhile. Two index walks
    that stop at the limit (the rest of the key's workspace from its alias on, then the
    workspaces after it), then the waiting counts of the whole page in one batched count."""
    slug, alias = after or ("", "")
    scope = "" if workspace_key is None else " AND i.workspace_key = {}"
    params: tuple[str, ...] = () if workspace_key is None else (workspace_key,)
    rows: list[Any] = []
    if after is not None:  # the rest of the last one's workspace
        rows += conn.execute(
            sql(
                f"{_ROSTER_SELECT}{scope} AND w.slug = {{}} AND i.alias_key > {{}}"
                " ORDER BY i.alias_key LIMIT {}"
            ),
            (*params, slug, alias, limit + 1),
        ).fetchall()
    if len(rows) <= limit:
        rows += conn.execute(
            sql(
                f"{_ROSTER_SELECT}{scope} AND w.slug > {{}} ORDER BY w.slug, i.alias_key LIMIT {{}}"
            ),
            (*params, slug, limit + 1 - len(rows)),
        ).fetchall()
    more = len(rows) > limit
    rows = rows[:limit]
    counts = inbox_counts(conn, [str(row[0]) for row in rows])
    empty = InboxCounts()
    entries = []
    for agent_id, name, _key, workspace, implementation, last_seen, host, attached in rows:
        waiting = counts.get(agent_id, empty)
        entries.append(
            RosterEntry(
                agent_id=agent_id,
                alias=name,
                address=format_address(name, workspace),
                implementation=implementation,
                last_seen=_iso(last_seen),
                waiting=waiting.queued + waiting.claimed,
                host=str(host),
                attached_host=None if attached is None else str(attached),
            )
        )
    last = (str(rows[-1][3]), str(rows[-1][2])) if more else None
    return entries, last


def correspondents(conn: Conn, ids: Iterable[str]) -> dict[str, Correspondent]:
    """Each id as a correspondent; ids of identities that no longer exist get no alias/address,
    a page's mailbox token its name as a script (`nightly (script)`) for its address."""
    wanted = sorted(set(ids))
    found = {agent_id: Correspondent(agent_id, None, None) for agent_id in wanted}
    for chunk in _chunks(wanted):
        for agent_id, alias, slug in conn.execute(
            sql(f"SELECT i.id, i.alias, w.slug {_AGENT_FROM} WHERE i.id IN ({_marks(chunk)})"),
            chunk,
        ):
            found[agent_id] = Correspondent(agent_id, alias, format_address(alias, slug))
    for token_id, name in script_names(conn, wanted).items():  # a page's sender
        found[token_id] = Correspondent(token_id, None, name)
    return found


def agent_messages(
    conn: Conn,
    agent_id: str,
    *,
    state: MessageState | None,
    direction: str,
    limit: int,
    before: int | None,
) -> tuple[list[MessageView], int | None]:
    """One page of the agent's messages, newest first (`direction`: in, out or both), and
    the last seq shown when there are more. Each side is an index walk in seq order that
    stops at the limit; both sides are merged."""
    condition = "" if state is None else f" AND {_STATE_TERMS[state]}"
    sides = {"in": ["recipient_id"], "out": ["sender_id"], "both": ["recipient_id", "sender_id"]}
    rows: dict[int, Any] = {}
    for column in sides[direction]:
        for row in conn.execute(
            sql(
                f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE {column} = {{}}{condition}"
                " AND seq < {} ORDER BY seq DESC LIMIT {}"
            ),
            (agent_id, _END if before is None else before, limit + 1),
        ):
            rows[int(row[0])] = row
    page = [rows[seq] for seq in sorted(rows, reverse=True)[: limit + 1]]
    more = len(page) > limit
    page = page[:limit]
    people = correspondents(conn, [row[2] for row in page] + [row[3] for row in page])
    views = [
        MessageView(
            message_id=str(message_id),
            direction="out" if sender == agent_id else "in",
            sender=people[sender],
            recipient=people[recipient],
            body=str(body),
            thread=thread,
            reply_to=reply_to,
            sent_at=_iso(sent_at),
            state=str(message_state),
            attempts=int(attempts),
            dead_reason=dead_reason,
            settled_at=iso(settled_at),
            origin=str(origin),
            hop=int(hop),
        )
        for (
            _seq,
            message_id,
            sender,
            recipient,
            body,
            thread,
            reply_to,
            sent_at,
            message_state,
            attempts,
            dead_reason,
            settled_at,
            origin,
            hop,
        ) in page
    ]
    return views, (int(page[-1][0]) if more else None)


def identity_exists(conn: Conn, agent_id: str) -> bool:
    row = conn.execute(sql("SELECT 1 FROM identities WHERE id = {}"), (agent_id,)).fetchone()
    return row is not None
