"""The store's wholesale changes on a real SQLite database: every session revoked at a
squatted start (pager/store/_sessions_admin.py) and the database cleared for `pager reset`
(pager/store/_reset.py)."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from pager.domain.records import SessionState
from pager.store import (
    RESET_COUNTED,
    clear_database,
    close_database,
    immediate_transaction,
    open_database,
)
from pager.store import messaging as ms
from tests.store.test_views import NOW, _attach, _identity, _send, _workspace

REASON = "revoked: a test"


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    connection = open_database(tmp_path / "pager.db")
    yield connection
    close_database(connection)


def test_revoke_sessions_ends_every_attached_one_as_expired(conn: sqlite3.Connection) -> None:
    """Each attached session ends `expired` with the reason its token answers; its identity
    is detached; `agent.detached` says `revoked`. Sessions already ended stay as they were."""
    ws = _workspace(conn, "api")
    alice, bob, idle = (_identity(conn, ws, alias) for alias in ("alice", "bob", "idle"))
    first, second = _attach(conn, alice), _attach(conn, bob)
    ended = _attach(conn, idle)
    ms.end_session(conn, ended, SessionState.DETACHED, "bye", NOW)
    seq = ms.latest_event_seq(conn)

    with immediate_transaction(conn):  # one transaction, as the writer runs it
        assert ms.revoke_sessions(conn, NOW + 1, REASON) == 2

    assert ms.attached_sessions(conn) == []
    for agent_id, session_id in ((alice, first), (bob, second)):
        session = ms.latest_session(conn, agent_id)
        assert session is not None
        assert (session.id, session.state, session.end_reason) == (
            session_id,
            SessionState.EXPIRED,
            REASON,
        )
        identity = ms.get_identity(conn, agent_id)
        assert identity is not None
        assert identity.detached_at == NOW + 1
    untouched = ms.latest_session(conn, idle)
    assert untouched is not None
    assert (untouched.state, untouched.end_reason) == (SessionState.DETACHED, "bye")
    events = ms.events_after(conn, seq, 10)
    assert [(e.type, e.data["session_id"], e.data["reason"]) for e in events] == [
        ("agent.detached", first, "revoked"),
        ("agent.detached", second, "revoked"),
    ]
    assert ms.revoke_sessions(conn, NOW + 2, REASON) == 0  # none left


def test_clear_database_counts_backs_up_and_removes(
    tmp_path: Path, conn: sqlite3.Connection
) -> None:
    """The counts of what it held, in `RESET_COUNTED` order; a 0600 backup under the label
    that still holds it all; the database and its WAL files gone."""
    database = tmp_path / "pager.db"
    ws = _workspace(conn, "api")
    alice, bob = _identity(conn, ws, "alice"), _identity(conn, ws, "bob")
    _attach(conn, alice)
    for _ in range(3):
        _send(conn, bob, alice)
    close_database(conn)  # no broker holds it

    deleted, backup = clear_database(database, "reset-20300101T000000Z")

    assert list(deleted) == list(RESET_COUNTED) == ["identities", "sessions", "messages"]
    assert deleted == {"identities": 2, "sessions": 1, "messages": 3}
    assert backup == tmp_path / "pager.db.bak-reset-20300101T000000Z"
    assert os.stat(backup).st_mode & 0o777 == 0o600
    for suffix in ("", "-wal", "-shm"):
        assert not Path(f"{database}{suffix}").exists()
    copy = open_database(backup)  # a Pager database holding what was there
    try:
        assert ms.get_identity(copy, alice) is not None
        assert ms.attached_identity_ids(copy) == {alice}
    finally:
        close_database(copy)


def test_clear_database_without_a_database(tmp_path: Path) -> None:
    assert clear_database(tmp_path / "none.db", "reset-x") == (
        dict.fromkeys(RESET_COUNTED, 0),
        None,
    )
    assert list(tmp_path.iterdir()) == []
