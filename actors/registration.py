"""The identity rules of SPEC §7 for one registration, decided inside one transaction:
create, rejoin (by name, conversation key or resume token), refuse, or take over.

The directory actor runs `RegisterPlan.apply` through the checkpoint; nothing here awaits.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import attrs

from pager.domain import ids
from pager.domain.errors import ErrorCode, PagerError
from pager.domain.names import alias_key, format_address, generate_handle
from pager.domain.records import Delivery, Identity, Session, SessionState
from pager.domain.workspace import Workspace
from pager.store import messaging as ms


@attrs.frozen
class RegisterCommand:
    workspace: Workspace
    implementation: str
    session_name: str | None
    conversation_key: str | None
    delivery: Delivery | None
    force: bool
    resume_token: str | None = None


@attrs.frozen
class Registered:
    identity: Identity
    slug: str
    session: Session
    token: str
    resume_token: str


def unknown_token() -> PagerError:
    return PagerError(
        ErrorCode.UNAUTHENTICATED,
        "unknown session token; register with POST /v1/register to get one",
    )


def not_attached(session: Session | None) -> PagerError:
    if session is None:
        return unknown_token()
    if session.state is SessionState.EXPIRED:
        return PagerError(
            ErrorCode.EXPIRED,
            "this session's lease lapsed; register again (with your conversation key to rejoin)",
            session_id=session.id,
        )
    return PagerError(
        ErrorCode.ENDED,
        f"this session has ended ({session.end_reason or session.state.value}); do not retry",
        session_id=session.id,
        reason=session.end_reason or session.state.value,
    )


def identity_of(conn: sqlite3.Connection, agent_id: str) -> Identity:
    identity = ms.get_identity(conn, agent_id)
    if identity is None:
        raise PagerError(ErrorCode.ENDED, "this identity no longer exists; register again")
    return identity


def holder_details(conn: sqlite3.Connection, identity: Identity) -> dict[str, Any]:
    slug = ms.workspace_slug(conn, identity.workspace_key)
    return {
        "holder": {
            "agent_id": identity.id,
            "alias": identity.alias,
            "address": format_address(identity.alias, slug),
            "implementation": identity.implementation,
        }
    }


def claim_alias(
    conn: sqlite3.Connection,
    workspace_key: str,
    alias: str,
    agent_id: str,
    attached: set[str],
    *,
    force: bool,
    now: float,
) -> None:
    """Make `alias` free for `agent_id` in the workspace, or raise alias_conflict."""
    key = alias_key(alias)
    holder = ms.identity_by_alias(conn, workspace_key, key)
    if holder is not None and holder.id != agent_id:
        if not force:
            state = "attached" if holder.id in attached else "not attached"
            raise PagerError(
                ErrorCode.ALIAS_CONFLICT,
                f"the alias {alias!r} belongs to {holder.id} ({state}); choose another alias,"
                " or pass force to take it",
                **holder_details(conn, holder),
            )
        # Forced: the holder keeps its identity and inbox under a fresh handle.
        handle = generate_handle(lambda h: ms.alias_reserved_by(conn, workspace_key, h) is not None)
        ms.set_alias(
            conn,
            holder.id,
            workspace_key,
            handle,
            handle,
            durable=holder.durable,
            now=now,
            reason="alias_taken",
        )
    reserved = ms.alias_reserved_by(conn, workspace_key, key)
    if reserved is not None and reserved != agent_id:
        if not force:
            owner = ms.get_identity(conn, reserved)
            details = holder_details(conn, owner) if owner is not None else {}
            raise PagerError(
                ErrorCode.ALIAS_CONFLICT,
                f"the alias {alias!r} is reserved: {reserved} held it before; choose another",
                **details,
            )
        conn.execute(
            "UPDATE alias_reservations SET identity_id = ? WHERE workspace_key = ?"
            " AND alias_key = ?",
            (agent_id, workspace_key, key),
        )


@attrs.frozen
class Outcome:
    registered: Registered
    ended: list[Session]
    started: list[tuple[Session, str]]  # with the identity's implementation


@attrs.frozen
class RegisterPlan:
    """Decides create / rejoin / refuse for one registration, inside the commit."""

    command: RegisterCommand
    attached: dict[str, Session]
    now: float
    lease_ttl: float
    token: str
    resume_token: str

    def apply(self, conn: sqlite3.Connection) -> Outcome:
        command, ws = self.command, self.command.workspace
        ms.ensure_workspace(conn, ws.key, ws.slug, ws.path, self.now)
        ended: list[Session] = []
        started: list[tuple[Session, str]] = []
        target: Identity | None = None
        reason, cause = "replaced by a newer attachment", "replaced"
        if command.resume_token is not None:
            resumed = ms.session_by_resume(conn, ids.hash_token(command.resume_token))
            target = None if resumed is None else ms.get_identity(conn, resumed.identity_id)
            if target is None:
                raise PagerError(
                    ErrorCode.UNAUTHENTICATED,
                    "unknown resume token (or its identity was purged); register without it",
                )
        if target is None and command.conversation_key is not None:
            known = ms.identity_of_conversation(
                conn, command.implementation, command.conversation_key
            )
            target = None if known is None else ms.get_identity(conn, known)
        if target is None and command.session_name is not None:
            target = self._by_name(conn, command.session_name)
            if target is not None and target.id in self.attached:
                if not command.force:
                    raise PagerError(
                        ErrorCode.ALIAS_CONFLICT,
                        f"{command.session_name!r} is attached to another session; choose"
                        " another name, or force a takeover",
                        **holder_details(conn, target),
                    )
                reason, cause = "taken over by a forced registration", "taken_over"
                handed = self._hand_over(conn, self.attached[target.id])
                started.append((handed, command.implementation))
        if target is None:
            target = self._create(conn)
        previous = self.attached.get(target.id)
        if previous is not None:
            ms.end_session(conn, previous.id, SessionState.ENDED, reason, self.now, cause=cause)
            ended.append(previous)
        if command.conversation_key is not None:
            ms.bind_conversation(conn, command.implementation, command.conversation_key, target.id)
        latest = ms.latest_session(conn, target.id)
        session = Session(
            id=ids.new_session_id(),
            identity_id=target.id,
            epoch=(latest.epoch + 1) if latest is not None else 1,
            token_hash=ids.hash_token(self.token),
            resume_hash=ids.hash_token(self.resume_token),
            state=SessionState.ATTACHED,
            created_at=self.now,
            lease_expires_at=self.now + self.lease_ttl,
            conversation_key=command.conversation_key,
            delivery=command.delivery,
        )
        ms.insert_session(conn, session)
        if target.archived_at is not None:  # attaching again un-archives it (SPEC §9)
            ms.record_agent_event(conn, self.now, "agent.unarchived", target.id, reason="attached")
        ms.touch_identity(conn, target.id, self.now, attached=True)
        identity = ms.get_identity(conn, target.id)
        assert identity is not None
        started.append((session, identity.implementation))
        registered = Registered(
            identity,
            ms.workspace_slug(conn, identity.workspace_key),
            session,
            self.token,
            self.resume_token,
        )
        return Outcome(registered, ended, started)

    def _by_name(self, conn: sqlite3.Connection, name: str) -> Identity | None:
        ws = self.command.workspace
        key = alias_key(name)
        holder = ms.identity_by_alias(conn, ws.key, key)
        if holder is not None:
            return holder
        reserved = ms.alias_reserved_by(conn, ws.key, key)
        if reserved is not None:
            owner = ms.get_identity(conn, reserved)
            raise PagerError(
                ErrorCode.ALIAS_CONFLICT,
                f"{name!r} is reserved for {reserved}, which held it before; choose another name",
                **(holder_details(conn, owner) if owner is not None else {}),
            )
        return None

    def _create(self, conn: sqlite3.Connection) -> Identity:
        ws, name = self.command.workspace, self.command.session_name
        alias = name or generate_handle(lambda h: ms.alias_reserved_by(conn, ws.key, h) is not None)
        identity = Identity(
            id=ids.new_agent_id(),
            workspace_key=ws.key,
            alias=alias,
            durable=name is not None,
            implementation=self.command.implementation,
            created_at=self.now,
            last_seen=self.now,
        )
        ms.insert_identity(conn, identity, alias_key(alias))
        return identity

    def _hand_over(self, conn: sqlite3.Connection, holder: Session) -> Session:
        """Forced takeover: the holder's token now runs as a fresh unnamed agent (SPEC §7)."""
        ws = self.command.workspace
        handle = generate_handle(lambda h: ms.alias_reserved_by(conn, ws.key, h) is not None)
        fresh = Identity(
            id=ids.new_agent_id(),
            workspace_key=ws.key,
            alias=handle,
            durable=False,
            implementation=self.command.implementation,
            created_at=self.now,
            last_seen=self.now,
        )
        ms.insert_identity(conn, fresh, handle)
        conn.execute(
            "UPDATE sessions SET token_hash = 'replaced:' || token_hash WHERE id = ?",
            (holder.id,),
        )
        session = attrs.evolve(
            holder,
            id=ids.new_session_id(),
            identity_id=fresh.id,
            epoch=1,
            resume_hash=ids.hash_token(ids.new_token(ids.Kind.RESUME_TOKEN)),
            created_at=self.now,
            lease_expires_at=self.now + self.lease_ttl,
            conversation_key=None,
        )
        ms.insert_session(conn, session)
        return session
