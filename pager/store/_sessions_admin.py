"""Sessions ended wholesale, outside any identity's own course: a sync function on a
connection, run in one checkpoint transaction (it does not commit)."""

from __future__ import annotations

from pager.domain.records import SessionState
from pager.store._conn import Conn
from pager.store._identities import attached_sessions, end_session, touch_identity


def revoke_sessions(conn: Conn, now: float, reason: str) -> int:
    """End every attached session as `expired` (its holder may rejoin), `reason` being what
    its token answers from then on and `revoked` the cause its event records; its identity is
    detached. How many there were."""
    sessions = attached_sessions(conn)
    for session in sessions:
        end_session(conn, session.id, SessionState.EXPIRED, reason, now, cause="revoked")
        touch_identity(conn, session.identity_id, now, attached=False)
    return len(sessions)
