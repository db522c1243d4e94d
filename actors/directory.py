"""The directory: registrations, sessions and their leases, aliases, moves, and the identity
actors it activates on demand (SPEC §7).

Every mutation of identities and sessions goes through this one actor, so the identity rules
are decided one registration at a time; the store commits each decision before it is answered.
Reads that need no decision (resolving an address, roster, history) go straight to the store.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from typing import Any

import attrs
import trio

from actors._runtime import Actor, ActorError, ActorRef, Reply, run_actor
from actors.checkpoint import Checkpoint
from actors.identity import Attach, Detach, IdentityActor, IdentityDeps, IdentityMessage
from actors.timers import TimerService
from pager.config import Windows
from pager.domain import ids
from pager.domain.api import Caller
from pager.domain.clock import WallClock, trio_deadline
from pager.domain.errors import ErrorCode, PagerError
from pager.domain.names import alias_key, format_address, generate_handle, validate_alias
from pager.domain.records import Delivery, Identity, Session, SessionState
from pager.domain.workspace import Workspace
from pager.store import messaging as ms

log = logging.getLogger("pager.directory")


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


@attrs.frozen
class Authenticate:
    token: str


@attrs.frozen
class DetachSession:
    session_id: str


@attrs.frozen
class IdentityRefFor:
    agent_id: str


@attrs.frozen
class Rename:
    caller: Caller
    alias: str
    force: bool


@attrs.frozen
class Move:
    caller: Caller
    workspace: Workspace


@attrs.frozen
class StreamOpened:
    session_id: str


@attrs.frozen
class StreamClosed:
    session_id: str


@attrs.frozen
class LeaseCheck:
    """Timer: end attachments whose lease lapsed."""


@attrs.frozen
class Passivated:
    agent_id: str


@attrs.frozen
class AttachedIds:
    """Which identities have an attached session now (for views)."""


@attrs.frozen
class ActiveIds:
    """Which identities have a running actor now (diagnostics)."""


DirectoryMessage = (
    RegisterCommand
    | Authenticate
    | DetachSession
    | IdentityRefFor
    | Rename
    | Move
    | StreamOpened
    | StreamClosed
    | LeaseCheck
    | Passivated
    | AttachedIds
    | ActiveIds
)


@attrs.define
class _Live:
    """An attached session as the directory tracks it (its lease lives here, in memory)."""

    session: Session
    lease_deadline: float  # wall clock
    persisted_lease: float
    streams: int = 0
    ended: trio.Event = attrs.field(factory=trio.Event)  # event streams wait on it


@attrs.define
class DirectoryDeps:
    checkpoint: Checkpoint
    timers: TimerService
    clock: WallClock
    windows: Windows
    identity_deps: IdentityDeps


class DirectoryActor(Actor[DirectoryMessage]):
    mailbox_size = 1024

    def __init__(self, nursery: trio.Nursery, deps: DirectoryDeps) -> None:
        self._nursery = nursery
        self.deps = deps
        self.by_token: dict[str, _Live] = {}
        self.by_identity: dict[str, _Live] = {}
        self.by_session: dict[str, _Live] = {}
        self.actors: dict[str, ActorRef[IdentityMessage]] = {}

    # -- start -----------------------------------------------------------------------------

    async def on_start(self) -> None:
        """Load attachments and wake every inbox with timers to run.

        Sessions get a fresh lease: nobody could renew while the broker was down.
        """

        def load(conn: sqlite3.Connection) -> tuple[list[Session], list[str], dict[str, str]]:
            sessions = ms.attached_sessions(conn)
            kinds = {}
            for session in sessions:
                identity = ms.get_identity(conn, session.identity_id)
                if identity is not None:
                    kinds[identity.id] = identity.implementation
            return sessions, ms.recipients_with_unsettled(conn), kinds

        sessions, recipients, kinds = await self.deps.checkpoint.read(load)
        lease = self.deps.clock.now() + self.deps.windows.lease_ttl
        for session in sessions:
            self._track(_Live(session, lease, session.lease_expires_at))
        for agent_id in {*recipients, *self.by_identity}:
            ref = await self._activate(agent_id)
            live = self.by_identity.get(agent_id)
            if live is not None:
                session = live.session
                kind = kinds.get(agent_id, "")
                await ref.call(Attach(session.id, session.delivery, kind, session.conversation_key))
        self._arm_lease_timer()

    # -- dispatch --------------------------------------------------------------------------

    async def handle(self, message: DirectoryMessage, reply: Reply[Any] | None) -> None:
        try:
            result = await self._dispatch(message)
        except PagerError as exc:
            if reply is not None:
                reply.fail(exc)
        else:
            if reply is not None and not reply.done:
                reply.send(result)
        self._arm_lease_timer()

    async def _dispatch(self, message: DirectoryMessage) -> object:
        match message:
            case RegisterCommand():
                return await self._register(message)
            case Authenticate(token=token):
                return await self._authenticate(token)
            case DetachSession(session_id=session_id):
                live = self.by_session.get(session_id)
                if live is not None:
                    await self._end(live, SessionState.DETACHED, "detached")
                return None
            case IdentityRefFor(agent_id=agent_id):
                return await self._activate(agent_id)
            case Rename():
                return await self._rename(message)
            case Move():
                return await self._move(message)
            case StreamOpened(session_id=session_id):
                live = self.by_session.get(session_id)
                if live is None:
                    ended = trio.Event()
                    ended.set()
                    return ended
                live.streams += 1
                return live.ended
            case StreamClosed(session_id=session_id):
                if (live := self.by_session.get(session_id)) is not None:
                    live.streams -= 1
                    grace = self.deps.clock.now() + self.deps.windows.stream_grace
                    live.lease_deadline = max(live.lease_deadline, grace)
                return None
            case LeaseCheck():
                await self._expire_leases()
                return None
            case AttachedIds():
                return frozenset(self.by_identity)
            case ActiveIds():
                return frozenset(agent for agent, ref in self.actors.items() if ref.alive)
            case Passivated(agent_id=agent_id):
                ref = self.actors.get(agent_id)
                if ref is not None and not ref.alive:
                    del self.actors[agent_id]
                return None
            case _:
                self.unhandled(message)

    # -- identity actors -------------------------------------------------------------------

    async def _activate(self, agent_id: str) -> ActorRef[IdentityMessage]:
        ref = self.actors.get(agent_id)
        if ref is not None and ref.alive:
            return ref
        deps = attrs.evolve(self.deps.identity_deps, on_passivate=self._passivated)
        started: ActorRef[IdentityMessage] = await self._nursery.start(
            _run_identity, IdentityActor(agent_id, deps)
        )
        self.actors[agent_id] = started
        return started

    def _passivated(self, agent_id: str) -> None:
        with contextlib.suppress(ActorError):  # the directory is stopping too
            self.ref.try_cast(Passivated(agent_id))

    async def _tell(self, agent_id: str, message: IdentityMessage) -> None:
        ref = await self._activate(agent_id)
        try:
            await ref.call(message)
        except ActorError as exc:
            log.warning("identity %s did not take %r: %s", agent_id, message, exc)

    # -- sessions --------------------------------------------------------------------------

    def _track(self, live: _Live) -> None:
        self.by_token[live.session.token_hash] = live
        self.by_identity[live.session.identity_id] = live
        self.by_session[live.session.id] = live

    def _untrack(self, live: _Live) -> None:
        live.ended.set()
        self.by_token.pop(live.session.token_hash, None)
        self.by_session.pop(live.session.id, None)
        if self.by_identity.get(live.session.identity_id) is live:
            del self.by_identity[live.session.identity_id]

    async def _authenticate(self, token: str) -> Caller:
        if not ids.looks_like(ids.Kind.SESSION_TOKEN, token):
            raise _unknown_token()
        token_hash = ids.hash_token(token)
        live = self.by_token.get(token_hash)
        now = self.deps.clock.now()
        if live is not None and live.streams == 0 and now >= live.lease_deadline:
            await self._end(live, SessionState.EXPIRED, "lease lapsed")
            live = None
        if live is None:
            session = await self.deps.checkpoint.read(lambda c: ms.session_by_token(c, token_hash))
            raise _not_attached(session)
        ttl = self.deps.windows.lease_ttl
        live.lease_deadline = now + ttl
        if live.lease_deadline - live.persisted_lease > ttl / 2:
            # Persist now and then, not on every request: after a crash the broker grants a
            # fresh lease anyway.
            session_id, lease = live.session.id, live.lease_deadline
            await self.deps.checkpoint.write(lambda c: ms.set_lease(c, session_id, lease))
            live.persisted_lease = lease
        return Caller(live.session.id, live.session.identity_id, live.session.epoch)

    async def _end(self, live: _Live, state: SessionState, reason: str) -> None:
        now = self.deps.clock.now()
        session = live.session

        def op(conn: sqlite3.Connection) -> None:
            ms.end_session(conn, session.id, state, reason, now)
            ms.touch_identity(conn, session.identity_id, now, attached=False)

        await self.deps.checkpoint.write(op)
        self._untrack(live)
        await self._tell(session.identity_id, Detach(session.id))

    async def _expire_leases(self) -> None:
        now = self.deps.clock.now()
        lapsed = [
            live
            for live in self.by_session.values()
            if live.streams == 0 and now >= live.lease_deadline
        ]
        for live in lapsed:
            log.info("session %s of %s: lease lapsed", live.session.id, live.session.identity_id)
            await self._end(live, SessionState.EXPIRED, "lease lapsed")

    def _arm_lease_timer(self) -> None:
        deadlines = [live.lease_deadline for live in self.by_session.values() if live.streams == 0]
        key = ("directory", "leases")
        if deadlines:
            deadline = trio_deadline(self.deps.clock, min(deadlines))
            self.deps.timers.schedule(key, deadline, self.ref, LeaseCheck())
        else:
            self.deps.timers.cancel(key)

    # -- registration ----------------------------------------------------------------------

    async def _register(self, command: RegisterCommand) -> Registered:
        if command.session_name is not None:
            validate_alias(command.session_name)
        now = self.deps.clock.now()
        attached = {agent_id: live.session for agent_id, live in self.by_identity.items()}
        token = ids.new_token(ids.Kind.SESSION_TOKEN)
        resume = ids.new_token(ids.Kind.RESUME_TOKEN)
        plan = _RegisterPlan(command, attached, now, self.deps.windows.lease_ttl, token, resume)
        outcome = await self.deps.checkpoint.write(plan.apply)
        for ended in outcome.ended:
            live = self.by_session.get(ended.id)
            if live is not None:
                self._untrack(live)
                await self._tell(ended.identity_id, Detach(ended.id))
        for session, implementation in outcome.started:
            lease = session.lease_expires_at
            self._track(_Live(session, lease, lease))
            attach = Attach(session.id, session.delivery, implementation, session.conversation_key)
            await self._tell(session.identity_id, attach)
        return outcome.registered

    # -- renames and moves -----------------------------------------------------------------

    async def _rename(self, command: Rename) -> dict[str, str]:
        alias = validate_alias(command.alias)
        agent_id = command.caller.agent_id
        attached = set(self.by_identity)

        def op(conn: sqlite3.Connection) -> dict[str, str]:
            me = _identity(conn, agent_id)
            _claim_alias(conn, me.workspace_key, alias, me.id, attached, force=command.force)
            ms.set_alias(conn, me.id, me.workspace_key, alias, alias_key(alias), durable=True)
            slug = ms.workspace_slug(conn, me.workspace_key)
            return {"agent_id": me.id, "alias": alias, "address": format_address(alias, slug)}

        return await self.deps.checkpoint.write(op)

    async def _move(self, command: Move) -> dict[str, str]:
        agent_id, workspace = command.caller.agent_id, command.workspace
        attached = set(self.by_identity)
        now = self.deps.clock.now()

        def op(conn: sqlite3.Connection) -> dict[str, str]:
            me = _identity(conn, agent_id)
            ms.ensure_workspace(conn, workspace.key, workspace.slug, workspace.path, now)
            if me.workspace_key != workspace.key:
                _claim_alias(conn, workspace.key, me.alias, me.id, attached, force=False)
                ms.set_alias(
                    conn, me.id, workspace.key, me.alias, alias_key(me.alias), durable=me.durable
                )
            return {
                "agent_id": me.id,
                "alias": me.alias,
                "workspace": workspace.path,
                "address": format_address(me.alias, workspace.slug),
            }

        return await self.deps.checkpoint.write(op)


async def _run_identity(
    actor: IdentityActor, *, task_status: trio.TaskStatus[ActorRef[IdentityMessage]]
) -> None:
    """An identity that crashes is logged and dropped; the next use reactivates it from the
    store, so one bad inbox never takes the directory down."""
    try:
        await run_actor(actor, name=f"identity:{actor.identity_id}", task_status=task_status)
    except Exception:
        log.exception("identity actor %s crashed; it restarts on next use", actor.identity_id)


# -- the rules of SPEC §7, as one transaction ----------------------------------------------


def _unknown_token() -> PagerError:
    return PagerError(
        ErrorCode.UNAUTHENTICATED,
        "unknown session token; register with POST /v1/register to get one",
    )


def _not_attached(session: Session | None) -> PagerError:
    if session is None:
        return _unknown_token()
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


def _identity(conn: sqlite3.Connection, agent_id: str) -> Identity:
    identity = ms.get_identity(conn, agent_id)
    if identity is None:
        raise PagerError(ErrorCode.ENDED, "this identity no longer exists; register again")
    return identity


def _holder_details(conn: sqlite3.Connection, identity: Identity) -> dict[str, Any]:
    slug = ms.workspace_slug(conn, identity.workspace_key)
    return {
        "holder": {
            "agent_id": identity.id,
            "alias": identity.alias,
            "address": format_address(identity.alias, slug),
            "implementation": identity.implementation,
        }
    }


def _claim_alias(
    conn: sqlite3.Connection,
    workspace_key: str,
    alias: str,
    agent_id: str,
    attached: set[str],
    *,
    force: bool,
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
                **_holder_details(conn, holder),
            )
        # Forced: the holder keeps its identity and inbox under a fresh handle.
        handle = generate_handle(lambda h: ms.alias_reserved_by(conn, workspace_key, h) is not None)
        ms.set_alias(conn, holder.id, workspace_key, handle, handle, durable=holder.durable)
    reserved = ms.alias_reserved_by(conn, workspace_key, key)
    if reserved is not None and reserved != agent_id:
        if not force:
            owner = ms.get_identity(conn, reserved)
            details = _holder_details(conn, owner) if owner is not None else {}
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
class _Outcome:
    registered: Registered
    ended: list[Session]
    started: list[tuple[Session, str]]  # with the identity's implementation


@attrs.frozen
class _RegisterPlan:
    """Decides create / rejoin / refuse for one registration, inside the commit."""

    command: RegisterCommand
    attached: dict[str, Session]
    now: float
    lease_ttl: float
    token: str
    resume_token: str

    def apply(self, conn: sqlite3.Connection) -> _Outcome:
        command, ws = self.command, self.command.workspace
        ms.ensure_workspace(conn, ws.key, ws.slug, ws.path, self.now)
        ended: list[Session] = []
        started: list[tuple[Session, str]] = []
        target: Identity | None = None
        reason = "replaced by a newer attachment"
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
                        **_holder_details(conn, target),
                    )
                reason = "taken over by a forced registration"
                handed = self._hand_over(conn, self.attached[target.id])
                started.append((handed, command.implementation))
        if target is None:
            target = self._create(conn)
        previous = self.attached.get(target.id)
        if previous is not None:
            ms.end_session(conn, previous.id, SessionState.ENDED, reason, self.now)
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
        return _Outcome(registered, ended, started)

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
                **(_holder_details(conn, owner) if owner is not None else {}),
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
