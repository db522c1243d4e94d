"""The identity rules of SPEC §7 for one registration, decided inside one transaction:
create, rejoin (by name, conversation key or resume token), refuse, or take over.

A forced takeover has one implementation, `take_over`, for both edges that offer `force`
(a registration and `update_agent_alias`). The SQLite directory port (sqlite_ports.py) runs
these in the writer's transaction; nothing here awaits.
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

from pager.domain import ids
from pager.domain.errors import ErrorCode, PagerError
from pager.domain.names import alias_key, format_address, generate_handle
from pager.domain.records import Identity, Session, SessionState
from pager.domain.registration import (
    Outcome,
    Registered,
    Registration,
    Takeover,
    WakeStart,
)
from pager.domain.wake import HOUR, WakeRun, hourly_retry_after
from pager.domain.workspace import Workspace
from pager.store import _wake as wk
from pager.store import messaging as ms
from pager.store._conn import Conn


def identity_of(conn: Conn, agent_id: str) -> Identity:
    identity = ms.get_identity(conn, agent_id)
    if identity is None:
        raise PagerError(ErrorCode.ENDED, "this identity no longer exists; register again")
    return identity


def holder_details(conn: Conn, identity: Identity) -> dict[str, Any]:
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
    conn: Conn,
    workspace_key: str,
    alias: str,
    agent_id: str,
    *,
    force: bool,
) -> None:
    """Make `alias` free for `agent_id` in the workspace, or raise alias_conflict.

    An alias another identity holds now is never freed here, even with `force`: a forced
    rename takes that identity over (`take_over_by_alias`) instead of renaming it. `force`
    only frees an alias that is merely reserved by an identity that held it before."""
    key = alias_key(alias)
    holder = ms.identity_by_alias(conn, workspace_key, key)
    if holder is not None and holder.id != agent_id:
        attached = ms.attached_session(conn, holder.id) is not None
        state = "attached" if attached else "not attached"
        raise PagerError(
            ErrorCode.ALIAS_CONFLICT,
            f"the alias {alias!r} belongs to {holder.id} ({state}); choose another alias,"
            " or pass force to take it",
            **holder_details(conn, holder),
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


def _is_wake_run(conn: Conn, session: Session) -> bool:
    return wk.open_run_of_session(conn, session.id) is not None


#: The end reason of a wake run's session when someone attaches to its identity.
WAKE_YIELDED = "a session attached to this agent: the wake run ends"

#: The end reason of a holder's session. Its token never answers with it: it runs on (below).
TAKEN_OVER = "taken over by another session (force)"


def take_over(
    conn: Conn,
    identity: Identity,
    holder: Session | None,
    session: Session,
    *,
    via: Literal["register", "update_agent_alias"],
    now: float,
    lease_ttl: float,
    previous: Session | None = None,
) -> Takeover:
    """SPEC §7's one rule for `force`, whichever edge asked: `session` (the caller's) is bound
    to `identity`, which keeps its id, inbox, history and alias; the holder's attached
    session ends and its token runs on as a fresh unnamed agent. `previous` is the caller's
    own session on the identity it leaves (the alias tool): that identity stays as it was,
    detached, and the caller's token, resume token and conversation move with it.
    Records `agent.taken_over` with both sessions."""
    handed: Session | None = None
    if holder is not None:
        ms.end_session(conn, holder.id, SessionState.ENDED, TAKEN_OVER, now, cause="taken_over")
        if not _is_wake_run(conn, holder):  # a wake run just ends
            handed = _hand_to_fresh_identity(conn, identity, holder, now, lease_ttl)
    if previous is not None:
        reason = f"took over {identity.alias} ({identity.id})"
        ms.end_session(conn, previous.id, SessionState.DETACHED, reason, now, cause="took_over")
        ms.touch_identity(conn, previous.identity_id, now, attached=False)
        ms.retire_credentials(conn, previous.id)  # `session` carries them from now on
        if previous.conversation_key is not None:
            # The caller's hooks and its next resume must find the identity it now holds.
            ms.move_conversation(conn, previous.conversation_key, previous.identity_id, identity.id)
    taken = attach_session(conn, identity, session, now)
    ms.record_agent_event(
        conn,
        now,
        "agent.taken_over",
        identity.id,
        via=via,
        session_id=session.id,
        epoch=session.epoch,
        ended_session_id=None if holder is None else holder.id,
        holder_agent_id=None if handed is None else handed.identity_id,
        previous_agent_id=None if previous is None else previous.identity_id,
        previous_session_id=None if previous is None else previous.id,
    )
    return Takeover(taken, session, holder, handed, identity.implementation)


def take_over_by_alias(
    conn: Conn,
    identity: Identity,
    holder: Session | None,
    mine: Session,
    alias: str,
    *,
    lease_expires_at: float,
    now: float,
    lease_ttl: float,
) -> Takeover:
    """`update_agent_alias(alias, force=true)`: the caller's session `mine` takes over
    `identity` (which holds the alias) as a new attachment of it, with the caller's token,
    and gives it the alias as spelled (a rename makes it durable, SPEC §7)."""
    latest = ms.latest_session(conn, identity.id)
    session = attrs.evolve(
        mine,
        id=ids.new_session_id(),
        identity_id=identity.id,
        epoch=(latest.epoch + 1) if latest is not None else 1,
        state=SessionState.ATTACHED,
        created_at=now,
        lease_expires_at=lease_expires_at,
        end_reason=None,
    )
    done = take_over(
        conn,
        identity,
        holder,
        session,
        via="update_agent_alias",
        now=now,
        lease_ttl=lease_ttl,
        previous=mine,
    )
    ws = identity.workspace_key
    ms.set_alias(conn, identity.id, ws, alias, alias_key(alias), durable=True, now=now)
    renamed = ms.get_identity(conn, identity.id)
    assert renamed is not None
    return attrs.evolve(done, identity=renamed)


def attach_session(conn: Conn, identity: Identity, session: Session, now: float) -> Identity:
    """Insert an attached session of `identity`; attaching again un-archives it (SPEC §9)."""
    ms.insert_session(conn, session)
    if identity.archived_at is not None:
        ms.record_agent_event(conn, now, "agent.unarchived", identity.id, reason="attached")
    ms.touch_identity(conn, identity.id, now, attached=True)
    attached = ms.get_identity(conn, identity.id)
    assert attached is not None
    return attached


def _hand_to_fresh_identity(
    conn: Conn, identity: Identity, holder: Session, now: float, lease_ttl: float
) -> Session:
    """The holder's token (and resume token, and conversation) now run as a fresh unnamed
    agent in the same workspace, so its next call, resume or hook never reaches the
    identity it lost (SPEC §7)."""
    ws = identity.workspace_key
    handle = generate_handle(lambda h: ms.alias_reserved_by(conn, ws, h) is not None)
    fresh = Identity(
        id=ids.new_agent_id(),
        workspace_key=ws,
        alias=handle,
        durable=False,
        implementation=identity.implementation,
        created_at=now,
        last_seen=now,
    )
    ms.insert_identity(conn, fresh, handle)
    ms.retire_credentials(conn, holder.id)
    if holder.conversation_key is not None:
        ms.move_conversation(conn, holder.conversation_key, identity.id, fresh.id)
    session = attrs.evolve(
        holder,
        id=ids.new_session_id(),
        identity_id=fresh.id,
        epoch=1,
        state=SessionState.ATTACHED,
        created_at=now,
        lease_expires_at=now + lease_ttl,
        end_reason=None,
    )
    ms.insert_session(conn, session)
    return session


@attrs.frozen
class RegisterPlan:
    """Decides create / rejoin / refuse for one registration, inside the commit."""

    command: Registration
    now: float
    lease_ttl: float
    token: str
    resume_token: str

    def apply(self, conn: Conn) -> Outcome:
        command, ws = self.command, self.command.workspace
        if command.wake is not None:
            return self._wake_run(conn, command.wake)
        ms.ensure_workspace(conn, ws, self.now)
        target: Identity | None = None
        forced = False
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
            attached = None if target is None else ms.attached_session(conn, target.id)
            # A wake run's session is no holder: it yields (below), as to a resume.
            if target is not None and attached is not None and not _is_wake_run(conn, attached):
                if not command.force:
                    raise PagerError(
                        ErrorCode.ALIAS_CONFLICT,
                        f"{command.session_name!r} is attached to another session; choose"
                        " another name, or force a takeover",
                        **holder_details(conn, target),
                    )
                forced = True
        if target is None:
            target = self._create(conn)
        session = self._new_session(conn, target)
        ended: list[Session] = []
        started: list[tuple[Session, str]] = []
        previous = ms.attached_session(conn, target.id)
        if forced:
            done = take_over(
                conn,
                target,
                previous,
                session,
                via="register",
                now=self.now,
                lease_ttl=self.lease_ttl,
            )
            identity = done.identity
            if done.ended is not None:
                ended.append(done.ended)
            if done.handed is not None:
                started.append((done.handed, done.handed_implementation))
        else:
            if previous is not None:
                # A wake run's session yields to anyone attaching (docs/wake.md).
                run = wk.open_run_of_session(conn, previous.id)
                ms.end_session(
                    conn,
                    previous.id,
                    SessionState.ENDED,
                    "replaced by a newer attachment" if run is None else WAKE_YIELDED,
                    self.now,
                    cause="replaced" if run is None else "wake_yielded",
                )
                ended.append(previous)
            identity = attach_session(conn, target, session, self.now)
        if command.conversation_key is not None:
            ms.bind_conversation(conn, command.implementation, command.conversation_key, target.id)
        started.append((session, identity.implementation))
        return Outcome(self._registered(conn, identity, session), ended, started)

    def _registered(self, conn: Conn, identity: Identity, session: Session) -> Registered:
        slug = ms.workspace_slug(conn, identity.workspace_key)
        return Registered(identity, slug, session, self.token, self.resume_token)

    def _new_session(self, conn: Conn, target: Identity) -> Session:
        """The registration's session of `target`: the identity's next epoch, attached."""
        command = self.command
        latest = ms.latest_session(conn, target.id)
        return Session(
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
            host=command.workspace.host,
        )

    def _wake_run(self, conn: Conn, wake: WakeStart) -> Outcome:
        """Attach a wake run's session to its identity, or refuse: `not_found` (gone),
        `conflict` (archived, or a session is attached: the ordinary wake applies then),
        `rate_limited` with `retry_after_s` (the hourly bound)."""
        target = ms.get_identity(conn, wake.agent_id)
        if target is None:
            raise PagerError(ErrorCode.NOT_FOUND, f"no agent {wake.agent_id}")
        if target.archived_at is not None:
            raise PagerError(ErrorCode.CONFLICT, f"{wake.agent_id} is archived")
        if ms.attached_session(conn, target.id) is not None:
            raise PagerError(ErrorCode.CONFLICT, f"{wake.agent_id} has a session attached")
        starts = wk.run_starts_since(conn, target.id, self.now - HOUR)
        retry = hourly_retry_after(starts, wake.max_runs_per_hour, self.now)
        if retry is not None:
            raise PagerError(
                ErrorCode.RATE_LIMITED,
                f"{wake.agent_id} had {len(starts)} wake runs in the last hour"
                f" (at most {wake.max_runs_per_hour})",
                retry_after_s=round(retry, 3),
            )
        session = self._new_session(conn, target)
        identity = attach_session(conn, target, session, self.now)
        wk.insert_wake_run(
            conn, WakeRun(wake.run_id, target.id, session.id, session.host, self.now)
        )
        registered = self._registered(conn, identity, session)
        return Outcome(registered, [], [(session, identity.implementation)])

    def _by_name(self, conn: Conn, name: str) -> Identity | None:
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

    def _create(self, conn: Conn) -> Identity:
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


#: The implementation of the person's identity (SPEC §4.2): no harness, never a session.
PERSON = "human"


def person_identity(conn: Conn, workspace: Workspace, alias: str, now: float) -> Identity:
    """The person's durable identity in `workspace` (SPEC §4.2), created on first use with
    `alias` (later `pager alias` may rename it: it stays the person's); its use counts as
    activity (last seen) and shows it again if it was archived."""
    ms.ensure_workspace(conn, workspace, now)
    key = alias_key(alias)
    holder = ms.identity_of_implementation(conn, workspace.key, PERSON)
    if holder is None:
        holder = ms.identity_by_alias(conn, workspace.key, key)
    if holder is not None and holder.implementation != PERSON:
        raise PagerError(
            ErrorCode.ALIAS_CONFLICT,
            f"the name {alias!r} in this workspace belongs to an agent ({holder.id},"
            f" {holder.implementation}), so you cannot use it; choose your name with"
            ' `[cli] name = "…"` in config.toml',
            **holder_details(conn, holder),
        )
    if holder is None:
        reserved = ms.alias_reserved_by(conn, workspace.key, key)
        if reserved is not None:
            raise PagerError(
                ErrorCode.ALIAS_CONFLICT,
                f"the name {alias!r} in this workspace is reserved for {reserved}, which held it"
                ' before; choose your name with `[cli] name = "…"` in config.toml',
            )
        holder = Identity(
            id=ids.new_agent_id(),
            workspace_key=workspace.key,
            alias=alias,
            durable=True,
            implementation=PERSON,
            created_at=now,
            last_seen=now,
            detached_at=now,  # never attached: its retention clock starts now
        )
        ms.insert_identity(conn, holder, key)
        return holder
    if holder.archived_at is not None:
        ms.unarchive_identity(conn, holder.id, now=now, reason="used by the person")
    ms.touch_identity(conn, holder.id, now)
    found = ms.get_identity(conn, holder.id)
    assert found is not None
    return found
