"""Archive, unarchive and purge in the store (pager/store/_sweep.py) on a real SQLite database:
what each changes, the operator event it records, and what it leaves alone."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from pager.domain import ids
from pager.domain.records import Identity, Session, SessionState
from pager.domain.retention import Action
from pager.domain.windows import Windows
from pager.domain.workspace import Workspace
from pager.store import close_database, open_database
from pager.store import messaging as ms

NOW = 1_800_000_000.0


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    connection = open_database(tmp_path / "pager.db")
    ms.ensure_workspace(connection, Workspace("/src/api", "api-0a1b2c", "/src/api"), NOW)
    yield connection
    close_database(connection)


def _identity(conn: sqlite3.Connection, alias: str) -> str:
    agent_id = ids.new_agent_id()
    ms.insert_identity(
        conn, Identity(agent_id, "/src/api", alias, True, "shell", NOW - 60, NOW - 60), alias
    )
    return agent_id


def _attach(conn: sqlite3.Connection, agent_id: str) -> str:
    token = ids.new_token(ids.Kind.SESSION_TOKEN)
    ms.insert_session(
        conn,
        Session(
            id=ids.new_session_id(),
            identity_id=agent_id,
            epoch=1,
            token_hash=ids.hash_token(token),
            resume_hash=ids.hash_token(ids.new_token(ids.Kind.RESUME_TOKEN)),
            state=SessionState.ATTACHED,
            created_at=NOW - 5,
            lease_expires_at=NOW + 85,
        ),
    )
    return token


def _send(conn: sqlite3.Connection, sender: str, recipient: str) -> str:
    return ms.insert_message(
        conn,
        message_id=ids.new_message_id(),
        sender_id=sender,
        recipient_id=recipient,
        body="hi",
        thread=None,
        reply_to=None,
        now=NOW,
    ).id


def _events(conn: sqlite3.Connection, kind: str) -> list[dict[str, object]]:
    rows = conn.execute("SELECT data FROM events WHERE type = ? ORDER BY seq", (kind,))
    return [json.loads(str(row[0])) for row in rows]


def test_archive_identity_ends_attached_sessions_and_names_slug(conn: sqlite3.Connection) -> None:
    """Archive counts the sessions it ended; its event names the workspace by slug, with the
    address; a second archive changes nothing."""
    agent = _identity(conn, "api")
    _attach(conn, agent)

    done = ms.archive_identity(conn, agent, now=NOW, at=NOW, reason="operator")

    assert done is not None
    assert (done.ended_sessions, done.alias, done.address) == (1, "api", "api@api-0a1b2c")
    [event] = _events(conn, "agent.archived")
    assert event == {
        "agent_id": agent,
        "alias": "api",
        "address": "api@api-0a1b2c",
        "workspace": "api-0a1b2c",
        "reason": "operator",
        "dead_lettered": 0,
        "ended_sessions": 1,
    }
    assert ms.archive_identity(conn, agent, now=NOW + 1, at=NOW + 1, reason="operator") is None
    assert len(_events(conn, "agent.archived")) == 1


def test_unarchive_identity_restarts_the_detach_clock(conn: sqlite3.Connection) -> None:
    """Unarchive shows it again, counts its detach from now (so the next sweep does not
    archive it at once), keeps the first archive time, and records `agent.unarchived`."""
    agent = _identity(conn, "api")
    assert ms.unarchive_identity(conn, agent, now=NOW, reason="operator") is None
    ms.archive_identity(conn, agent, now=NOW, at=NOW, reason="named_archive")

    done = ms.unarchive_identity(conn, agent, now=NOW + 2000, reason="operator")

    assert done is not None
    assert done.action is Action.UNARCHIVE
    row = conn.execute(
        "SELECT archived_at, detached_at, first_archived_at FROM identities WHERE id = ?",
        (agent,),
    ).fetchone()
    assert row == (None, NOW + 2000, NOW)
    [event] = _events(conn, "agent.unarchived")
    assert event["reason"] == "operator"
    assert event["workspace"] == "api-0a1b2c"
    windows = Windows(named_archive=1000.0)  # passed since the archive, not since unarchiving
    plan = ms.plan_sweep(conn, NOW + 2100, windows, attached=())
    assert plan.due == []
    assert plan.next_due == NOW + 3000


def test_purge_identity_dead_letters_and_keeps_its_tokens(conn: sqlite3.Connection) -> None:
    """Purge dead-letters waiting mail with `purged`, deletes the identity, keeps what it
    sent in the survivor's history, and remembers its session tokens as purged."""
    agent, survivor = _identity(conn, "gone"), _identity(conn, "stays")
    token = _attach(conn, agent)
    waiting = _send(conn, survivor, agent)
    history = _send(conn, agent, survivor)

    done = ms.purge_identity(conn, agent, now=NOW, reason="operator")

    assert done is not None
    assert (done.action, done.dead_lettered, done.ended_sessions) == (Action.PURGE, 1, 1)
    assert ms.get_identity(conn, agent) is None
    dead = ms.get_message(conn, waiting)
    assert dead is not None
    assert (dead.state.value, dead.dead_reason) == ("dead", "purged")
    kept = ms.get_message(conn, history)
    assert kept is not None
    assert kept.state.value == "queued"
    assert ms.purged_session(conn, ids.hash_token(token)) is not None
    assert ms.session_by_token(conn, ids.hash_token(token)) is None
    [event] = _events(conn, "agent.purged")
    assert (event["dead_lettered"], event["address"]) == (1, "gone@api-0a1b2c")
    assert _events(conn, "agent.reaped") == []
    assert ms.purge_identity(conn, agent, now=NOW, reason="operator") is None


def test_prune_forgets_purged_tokens_after_event_retention(conn: sqlite3.Connection) -> None:
    """A purged session's token is remembered for the event retention, then forgotten."""
    agent = _identity(conn, "gone")
    token = _attach(conn, agent)
    ms.purge_identity(conn, agent, now=NOW, reason="operator")
    windows = Windows(event_retention=100.0)

    assert ms.prune(conn, NOW + 99, windows).purged_sessions == 0
    assert ms.prune(conn, NOW + 100, windows).purged_sessions == 1
    assert ms.purged_session(conn, ids.hash_token(token)) is None


def test_sweep_step_leaves_an_identity_that_attached_since_the_plan(
    conn: sqlite3.Connection,
) -> None:
    """A plan read on a snapshot is applied only where it still stands: an identity that
    attached after the plan, or was archived meanwhile, is left as it is; the rest apply."""
    windows = Windows(named_archive=1000.0)
    back, archived, idle = (
        _identity(conn, "back"),
        _identity(conn, "archived"),
        _identity(conn, "idle"),
    )
    plan = ms.plan_sweep(conn, NOW + 2000, windows, attached=())
    assert {step.agent_id for step in plan.due} == {back, archived, idle}
    _attach(conn, back)
    ms.archive_identity(conn, archived, now=NOW + 1500, at=NOW + 1500, reason="operator")

    done = ms.apply_due(conn, plan.due, NOW + 2000, windows)

    assert [(d.agent_id, d.action) for d in done] == [(idle, Action.ARCHIVE)]
