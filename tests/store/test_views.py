"""The operator's read views (pager/store/_views.py) on a real SQLite database."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from pager.domain import ids
from pager.domain.clock import iso
from pager.domain.records import Identity, MessageState, Session, SessionState
from pager.domain.views import InboxCounts
from pager.domain.workspace import Workspace
from pager.store import close_database, open_database, views
from pager.store import messaging as ms

NOW = 1_800_000_000.0


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    connection = open_database(tmp_path / "pager.db")
    yield connection
    close_database(connection)


def _workspace(conn: sqlite3.Connection, name: str) -> str:
    key = f"/src/{name}"
    ms.ensure_workspace(conn, Workspace(key, f"{name}-0a1b2c", key), NOW)
    return key


def _identity(
    conn: sqlite3.Connection, workspace: str, alias: str, *, archived: bool = False
) -> str:
    agent_id = ids.new_agent_id()
    ms.insert_identity(
        conn,
        Identity(agent_id, workspace, alias, True, "shell", NOW - 60, NOW - 30),
        alias,
    )
    if archived:
        conn.execute(
            "UPDATE identities SET archived_at = ?, first_archived_at = ? WHERE id = ?",
            (NOW - 10, NOW - 10, agent_id),
        )
    return agent_id


def _attach(conn: sqlite3.Connection, agent_id: str, epoch: int = 1) -> str:
    session_id = ids.new_session_id()
    ms.insert_session(
        conn,
        Session(
            id=session_id,
            identity_id=agent_id,
            epoch=epoch,
            token_hash=ids.hash_token(ids.new_token(ids.Kind.SESSION_TOKEN)),
            resume_hash=ids.hash_token(ids.new_token(ids.Kind.RESUME_TOKEN)),
            state=SessionState.ATTACHED,
            created_at=NOW - 5,
            lease_expires_at=NOW + 85,
        ),
    )
    return session_id


def _send(
    conn: sqlite3.Connection,
    sender: str,
    recipient: str,
    state: MessageState = MessageState.QUEUED,
    body: str = "hello",
) -> str:
    message = ms.insert_message(
        conn,
        message_id=ids.new_message_id(),
        sender_id=sender,
        recipient_id=recipient,
        body=body,
        thread=None,
        reply_to=None,
        now=NOW,
    )
    if state is not MessageState.QUEUED:
        settled = NOW + 1 if state in (MessageState.ACKNOWLEDGED, MessageState.DEAD) else None
        conn.execute(
            "UPDATE messages SET state = ?, settled_at = ?, dead_reason = ? WHERE id = ?",
            (
                state.value,
                settled,
                "expired" if state is MessageState.DEAD else None,
                message.id,
            ),
        )
    return message.id


def test_views_snapshot_groups_agents_by_workspace_with_counts(conn: sqlite3.Connection) -> None:
    """Two workspaces, agents by alias (archived ones too), live sessions, inbox counts per
    state (claimed = claimed + delivered), totals that add up, and the latest event seq."""
    api, web = _workspace(conn, "api"), _workspace(conn, "web")
    bob = _identity(conn, api, "bob")
    alice = _identity(conn, api, "alice")
    old = _identity(conn, api, "old", archived=True)
    carol = _identity(conn, web, "carol")
    session = _attach(conn, alice)
    for state, times in (
        (MessageState.QUEUED, 3),
        (MessageState.CLAIMED, 2),
        (MessageState.DELIVERED, 1),
        (MessageState.ACKNOWLEDGED, 4),
        (MessageState.DEAD, 2),
    ):
        for _ in range(times):
            _send(conn, carol, alice, state)
    _send(conn, alice, carol)
    _send(conn, alice, old, MessageState.DEAD)
    ms.record_event(conn, NOW, "test.marker", {})
    ms.record_event(conn, NOW, "test.marker", {})
    seq = ms.latest_event_seq(conn)

    snap = views.snapshot(conn, {"ok": True, "pid": 1})

    assert snap.broker == {"ok": True, "pid": 1}
    assert snap.seq == seq
    assert [(w.slug, w.path) for w in snap.workspaces] == [
        ("api-0a1b2c", "/src/api"),
        ("web-0a1b2c", "/src/web"),
    ]
    first, second = snap.workspaces
    assert [a.alias for a in first.agents] == ["alice", "bob", "old"]
    by_alias = {a.alias: a for w in snap.workspaces for a in w.agents}
    assert by_alias["alice"].inbox == InboxCounts(queued=3, claimed=3, dead=2)
    assert by_alias["carol"].inbox == InboxCounts(queued=1, claimed=0, dead=0)
    assert by_alias["old"].inbox == InboxCounts(dead=1)
    assert by_alias["bob"].inbox == InboxCounts()
    assert by_alias["alice"].attached
    assert not by_alias["bob"].attached
    assert [s.session_id for s in by_alias["alice"].sessions] == [session]
    assert by_alias["alice"].sessions[0].lease_expires_at == iso(NOW + 85)
    assert by_alias["old"].archived
    assert by_alias["old"].archived_at == iso(NOW - 10)
    assert by_alias["bob"].archived_at is None
    assert by_alias["bob"].agent_id == bob
    assert by_alias["carol"].address == "carol@web-0a1b2c"
    assert second.agents[0].agent_id == carol
    assert by_alias["alice"].workspace == "api-0a1b2c"
    assert by_alias["alice"].last_seen == iso(NOW - 30)
    assert by_alias["alice"].created_at == iso(NOW - 60)
    totals = snap.totals
    assert (totals.workspaces, totals.agents, totals.attached, totals.archived) == (2, 4, 1, 1)
    assert (totals.queued, totals.claimed, totals.dead) == (4, 3, 3)
    assert views.totals(conn) == totals
    cheap = views.totals_snapshot(conn, {"ok": True})
    assert (cheap.workspaces, cheap.totals, cheap.seq) == ((), totals, seq)


def test_views_snapshot_leaves_out_workspaces_without_agents(conn: sqlite3.Connection) -> None:
    """A workspace whose identities are all gone is not shown; dead letters of a reaped
    identity count for nobody."""
    gone = _identity(conn, _workspace(conn, "gone"), "ghost")
    keep = _identity(conn, _workspace(conn, "keep"), "kept")
    _send(conn, keep, gone)
    ms.reap_identity(conn, gone, now=NOW, reason="test")

    snap = views.snapshot(conn, {})

    assert [w.slug for w in snap.workspaces] == ["keep-0a1b2c"]
    assert snap.totals.dead == 0
    assert snap.totals.agents == 1
    assert views.totals(conn) == snap.totals


def test_views_list_agents_pages_in_id_order_with_filters(conn: sqlite3.Connection) -> None:
    """Pages follow agent ids without gaps or repeats; workspace and archived filter."""
    api, web = _workspace(conn, "api"), _workspace(conn, "web")
    made = [_identity(conn, api, f"a{n}", archived=n % 3 == 0) for n in range(7)]
    made += [_identity(conn, web, f"w{n}") for n in range(3)]
    seen: list[str] = []
    after = None
    while True:
        page, after = views.list_agents(conn, workspace=None, archived=None, limit=3, after=after)
        seen += [agent.agent_id for agent in page]
        assert len(page) <= 3
        if after is None:
            break
    assert seen == sorted(made)
    in_api, _ = views.list_agents(conn, workspace="api-0a1b2c", archived=None, limit=50, after=None)
    assert {a.agent_id for a in in_api} == set(made[:7])
    archived, _ = views.list_agents(conn, workspace=None, archived=True, limit=50, after=None)
    assert {a.alias for a in archived} == {"a0", "a3", "a6"}
    visible, more = views.list_agents(
        conn, workspace="api-0a1b2c", archived=False, limit=50, after=None
    )
    assert {a.alias for a in visible} == {"a1", "a2", "a4", "a5"}
    assert more is None
    nowhere, _ = views.list_agents(conn, workspace="nope", archived=None, limit=50, after=None)
    assert nowhere == []


def test_views_agent_messages_newest_first_with_cursor_filters(conn: sqlite3.Connection) -> None:
    """Both directions merged newest first; paging by seq covers every message once; the
    state and direction filters narrow it; reading changes no row."""
    ws = _workspace(conn, "api")
    me, other = _identity(conn, ws, "me"), _identity(conn, ws, "other")
    sent = []
    for n in range(9):
        if n % 2:
            sent.append(_send(conn, me, other, body=f"out {n}"))
        else:
            sent.append(_send(conn, other, me, MessageState.DEAD, body=f"in {n}"))
    rows_before = conn.execute("SELECT * FROM messages ORDER BY seq").fetchall()

    seen: list[str] = []
    before = None
    while True:
        page, before = views.agent_messages(
            conn, me, state=None, direction="both", limit=4, before=before
        )
        seen += [m.message_id for m in page]
        if before is None:
            break
    assert seen == list(reversed(sent))

    inbound, more = views.agent_messages(
        conn, me, state=None, direction="in", limit=50, before=None
    )
    assert more is None
    assert [m.body for m in inbound] == ["in 8", "in 6", "in 4", "in 2", "in 0"]
    assert {(m.direction, m.state, m.dead_reason) for m in inbound} == {("in", "dead", "expired")}
    assert inbound[0].sender.address == "other@api-0a1b2c"
    assert inbound[0].recipient.alias == "me"
    outbound, _ = views.agent_messages(conn, me, state=None, direction="out", limit=50, before=None)
    assert [m.direction for m in outbound] == ["out"] * 4
    queued, _ = views.agent_messages(
        conn, me, state=MessageState.QUEUED, direction="both", limit=50, before=None
    )
    assert [m.body for m in queued] == ["out 7", "out 5", "out 3", "out 1"]
    assert queued[0].settled_at is None
    assert queued[0].sent_at == iso(NOW)
    dead_in, _ = views.agent_messages(
        conn, other, state=MessageState.DEAD, direction="out", limit=2, before=None
    )
    assert [m.body for m in dead_in] == ["in 8", "in 6"]
    assert conn.execute("SELECT * FROM messages ORDER BY seq").fetchall() == rows_before


def test_views_purged_correspondent_keeps_id_without_alias(conn: sqlite3.Connection) -> None:
    """History with a purged identity stays; it is shown by id, alias and address null."""
    ws = _workspace(conn, "api")
    me, gone = _identity(conn, ws, "me"), _identity(conn, ws, "gone")
    _send(conn, gone, me, MessageState.ACKNOWLEDGED)
    ms.purge_identity(conn, gone, now=NOW, reason="operator")

    [message], _ = views.agent_messages(
        conn, me, state=None, direction="both", limit=10, before=None
    )

    assert (message.sender.agent_id, message.sender.alias, message.sender.address) == (
        gone,
        None,
        None,
    )
    assert message.recipient.address == "me@api-0a1b2c"


def test_views_get_agent_and_missing(conn: sqlite3.Connection) -> None:
    """One agent by id; None for an id that does not exist."""
    agent_id = _identity(conn, _workspace(conn, "api"), "solo")
    found = views.get_agent(conn, agent_id)
    assert found is not None
    assert found.alias == "solo"
    assert not found.attached
    assert views.get_agent(conn, "agt_0000000000000000") is None
    assert views.identity_exists(conn, agent_id)


@pytest.mark.parametrize("by_id", [False, True])
def test_views_counts_are_a_covering_partial_index_scan(
    conn: sqlite3.Connection, by_id: bool
) -> None:
    """The snapshot's (and a page's) inbox counts read only `messages_inbox`, never the
    table, so acknowledged history does not slow them down."""
    sql = (
        "SELECT recipient_id, state, COUNT(*) FROM messages"
        " WHERE state IN ('queued', 'claimed', 'delivered', 'dead')"
        + (" AND recipient_id IN ('a', 'b')" if by_id else "")
        + " GROUP BY recipient_id, state"
    )
    plan = " ".join(str(row[3]) for row in conn.execute("EXPLAIN QUERY PLAN " + sql))
    assert "COVERING INDEX messages_inbox" in plan, plan


def test_views_one_state_of_an_inbox_is_an_index_walk(conn: sqlite3.Connection) -> None:
    """Listing one unsettled or dead state of an inbox walks `messages_inbox` in seq order."""
    sql = (
        "SELECT * FROM messages WHERE recipient_id = ?"
        " AND state IN ('queued', 'claimed', 'delivered', 'dead') AND state = 'dead'"
        " AND seq < ? ORDER BY seq DESC LIMIT 5"
    )
    plan = " ".join(str(r[3]) for r in conn.execute("EXPLAIN QUERY PLAN " + sql, ("a", 9)))
    assert "USING INDEX messages_inbox" in plan, plan
    assert "TEMP B-TREE" not in plan, plan
