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
from actors.registration import (
    RegisterCommand,
    Registered,
    RegisterPlan,
    Takeover,
    claim_alias,
    holder_details,
    identity_of,
    not_attached,
    take_over_by_alias,
    takeovers_off,
    unknown_token,
)
from actors.timers import TimerService
from pager.config import Windows
from pager.domain import ids
from pager.domain.api import Caller
from pager.domain.clock import WallClock, trio_deadline
from pager.domain.errors import ErrorCode, PagerError
from pager.domain.names import alias_key, format_address, validate_alias
from pager.domain.records import Session, SessionState
from pager.domain.workspace import Workspace
from pager.store import messaging as ms

log = logging.getLogger("pager.directory")

#: A stopped identity whose deadline has already passed is woken this long after it stopped,
#: not at once: one that crashes on its deadline then retries at this pace instead of spinning.
WAKE_FLOOR = 1.0


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
    #: `pager claim` (SPEC §4.1): take the identity holding `alias` over, as `force` does, but
    #: without `force` only when its holder is not attached.
    claim: bool = False


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
    """An identity actor stopped (idle, or crashed)."""

    agent_id: str


@attrs.frozen
class Due:
    """Timer: the next deadline the store holds for a stopped identity has come."""

    agent_id: str


@attrs.frozen
class AttachedIds:
    """Which identities have an attached session now (for views)."""


@attrs.frozen
class ActiveIds:
    """Which identities have a running actor now (diagnostics)."""


@attrs.frozen
class SweepIdentities:
    """The sweeper's turn: archive and reap every detached identity a window has passed.

    Decided here, in one transaction, because only the directory knows which identities are
    attached (those are never touched by a window). Answers `SweepOutcome`."""

    limit: int = 500


@attrs.frozen
class SweepOutcome:
    applied: list[ms.Applied]
    next_due: float | None  # wall clock: the next window that ends, if any
    more: bool  # the batch limit was reached; sweep again at once


@attrs.frozen
class ArchiveIdentity:
    """Archive now (operator action): its sessions end (`ended`, "archived"), mail waits."""

    agent_id: str
    reason: str


@attrs.frozen
class ReapIdentity:
    """Reap now: sessions end, unsettled mail is dead-lettered (`reaped`), it is gone."""

    agent_id: str
    reason: str


@attrs.frozen
class UnarchiveIdentity:
    """Show an archived identity again (operator action); its mail kept waiting."""

    agent_id: str
    reason: str


@attrs.frozen
class PurgeIdentity:
    """Purge now (operator action): a reap whose dead letters say `purged`, and whose session
    tokens answer `ended` (purged) from then on."""

    agent_id: str
    reason: str


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
    | Due
    | AttachedIds
    | ActiveIds
    | SweepIdentities
    | ArchiveIdentity
    | ReapIdentity
    | UnarchiveIdentity
    | PurgeIdentity
)


@attrs.define
class _Live:
    """An attached session as the directory tracks it (its lease lives here, in memory)."""

    session: Session
    lease_deadline: float  # wall clock
    persisted_lease: float
    streams: int = 0
    ended: trio.Event = attrs.field(factory=trio.Event)  # event streams wait on it
    # Sessions this one carried on from (a takeover by alias): streams opened under those ids
    # still count towards this lease.
    former: list[str] = attrs.field(factory=list)


@attrs.define
class DirectoryDeps:
    checkpoint: Checkpoint
    timers: TimerService
    clock: WallClock
    windows: Windows
    identity_deps: IdentityDeps
    allow_force: bool = True  # `allow_force` in config.toml: false refuses every `force`


class DirectoryActor(Actor[DirectoryMessage]):
    mailbox_size = 1024

    def __init__(self, nursery: trio.Nursery, deps: DirectoryDeps) -> None:
        self._nursery = nursery
        self.deps = deps
        self.by_token: dict[str, _Live] = {}
        self.by_identity: dict[str, _Live] = {}
        self.by_session: dict[str, _Live] = {}
        self.former: dict[str, _Live] = {}  # a moved session's old id → its live entry
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
        if not isinstance(message, Authenticate):
            # Authenticating (every request) only moves a lease later or ends a lapsed one, so
            # the earliest deadline can only move later: the armed timer may fire early, find
            # nothing lapsed and re-arm, but never late. Re-arming scans every attached session.
            self._arm_lease_timer()

    async def _dispatch(self, message: DirectoryMessage) -> object:
        match message:
            case RegisterCommand():
                return await self._register(message)
            case Authenticate(token=token):
                return await self._authenticate(token)
            case DetachSession(session_id=session_id):
                live = self._live(session_id)
                if live is not None:
                    await self._end(live, SessionState.DETACHED, "detached")
                return None
            case IdentityRefFor(agent_id=agent_id):
                return await self._activate_existing(agent_id)
            case Rename():
                return await self._rename(message)
            case Move():
                return await self._move(message)
            case StreamOpened(session_id=session_id):
                live = self._live(session_id)
                if live is None:
                    ended = trio.Event()
                    ended.set()
                    return ended
                live.streams += 1
                return live.ended
            case StreamClosed(session_id=session_id):
                if (live := self._live(session_id)) is not None:
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
                    self._schedule_due(agent_id)
                return None
            case Due(agent_id=agent_id):
                ref = self.actors.get(agent_id)
                if (ref is None or not ref.alive) and self.deps.checkpoint.lookup(
                    lambda c: ms.get_identity(c, agent_id) is not None
                ):
                    # Its start applies what lapsed and arms its own timers from then on.
                    await self._activate(agent_id)
                return None
            case SweepIdentities(limit=limit):
                return await self._sweep(limit)
            case ArchiveIdentity(agent_id=agent_id, reason=reason):
                return await self._retire(agent_id, ms.Action.ARCHIVE, reason)
            case ReapIdentity(agent_id=agent_id, reason=reason):
                return await self._retire(agent_id, ms.Action.REAP, reason)
            case UnarchiveIdentity(agent_id=agent_id, reason=reason):
                return await self._retire(agent_id, ms.Action.UNARCHIVE, reason)
            case PurgeIdentity(agent_id=agent_id, reason=reason):
                return await self._retire(agent_id, ms.Action.PURGE, reason)
            case _:
                self.unhandled(message)

    # -- retention (SPEC §9) ---------------------------------------------------------------

    async def _sweep(self, limit: int) -> SweepOutcome:
        now = self.deps.clock.now()
        windows = self.deps.windows
        attached = frozenset(self.by_identity)

        def op(conn: sqlite3.Connection) -> tuple[list[ms.Applied], float | None, bool]:
            plan = ms.plan_sweep(conn, now, windows, attached, limit=limit)
            return ms.apply_plan(conn, plan, now), plan.next_due, plan.more

        applied, next_due, more = await self.deps.checkpoint.write(op, heavy=True)
        for done in applied:
            log.info("identity %s: %s (%s)", done.agent_id, done.action.value, done.reason)
            if done.action is ms.Action.REAP:
                self._forget(done.agent_id)
        return SweepOutcome(applied, next_due, more)

    async def _retire(self, agent_id: str, action: ms.Action, reason: str) -> ms.Applied:
        """Archive, unarchive, reap or purge one identity now, attached or not; its live
        session ends first. `not_found` for an unknown identity, `conflict` for archiving an
        archived one or unarchiving one that is not."""
        now = self.deps.clock.now()

        def op(conn: sqlite3.Connection) -> ms.Applied:
            identity = ms.get_identity(conn, agent_id)
            if identity is None:
                raise PagerError(
                    ErrorCode.NOT_FOUND,
                    f"no identity {agent_id!r} to {action.value}",
                    agent_id=agent_id,
                )
            if action is ms.Action.ARCHIVE:
                done = ms.archive_identity(conn, agent_id, now=now, at=now, reason=reason)
            elif action is ms.Action.UNARCHIVE:
                done = ms.unarchive_identity(conn, agent_id, now=now, reason=reason)
            elif action is ms.Action.PURGE:
                done = ms.purge_identity(conn, agent_id, now=now, reason=reason)
            else:
                done = ms.reap_identity(conn, agent_id, now=now, reason=reason)
            if done is None:
                state = "already archived" if action is ms.Action.ARCHIVE else "not archived"
                raise PagerError(
                    ErrorCode.CONFLICT,
                    f"{identity.alias} ({agent_id}) is {state}; nothing to {action.value}",
                    agent_id=agent_id,
                    archived=identity.archived_at is not None,
                )
            return done

        done = await self.deps.checkpoint.write(op, heavy=True)
        live = self.by_identity.get(agent_id)
        if live is not None and action is not ms.Action.UNARCHIVE:
            # The commit already ended it in the store.
            self._untrack(live)
            ref = self.actors.get(agent_id)
            if ref is not None and ref.alive:  # answers its session's long polls
                with contextlib.suppress(ActorError):
                    await ref.call(Detach(live.session.id))
        if action in (ms.Action.REAP, ms.Action.PURGE):
            self._forget(agent_id)
        return done

    def _forget(self, agent_id: str) -> None:
        """A reaped identity's actor stops; callers holding its ref retry and find it gone."""
        ref = self.actors.pop(agent_id, None)
        if ref is not None:
            ref.stop()

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
        self.deps.timers.cancel(_due_key(agent_id))  # a running actor keeps its own timers
        return started

    def _schedule_due(self, agent_id: str) -> None:
        """A stopped identity owns no timer, so its next deadline (an ack wait, a retry, an
        expiry), read from the store, re-activates it here."""
        now, expiry = self.deps.clock.now(), self.deps.windows.message_expiry
        due = self.deps.checkpoint.lookup(lambda c: ms.next_deadline(c, agent_id, now, expiry))
        if due is None:
            self.deps.timers.cancel(_due_key(agent_id))
        else:
            deadline = max(trio_deadline(self.deps.clock, due), trio.current_time() + WAKE_FLOOR)
            self.deps.timers.schedule(_due_key(agent_id), deadline, self.ref, Due(agent_id))

    async def _activate_existing(self, agent_id: str) -> ActorRef[IdentityMessage]:
        """`_activate` for callers from outside: a reaped identity is not brought back."""
        ref = self.actors.get(agent_id)
        if ref is not None and ref.alive:
            return ref
        exists = self.deps.checkpoint.lookup(lambda c: ms.get_identity(c, agent_id))
        if exists is None:
            raise PagerError(ErrorCode.NOT_FOUND, f"no identity {agent_id!r}; it was purged")
        return await self._activate(agent_id)

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
        for session_id in live.former:
            self.former.pop(session_id, None)
        if self.by_identity.get(live.session.identity_id) is live:
            del self.by_identity[live.session.identity_id]

    def _live(self, session_id: str) -> _Live | None:
        return self.by_session.get(session_id) or self.former.get(session_id)

    def _carry_on(self, live: _Live, session: Session) -> None:
        """The caller's attachment continues as `session` (same token, other identity): its
        open event stream is not told `ended` and keeps holding the lease."""
        old = live.session
        self.by_session.pop(old.id, None)
        if self.by_identity.get(old.identity_id) is live:
            del self.by_identity[old.identity_id]
        live.former.append(old.id)
        self.former[old.id] = live
        live.session = session
        live.persisted_lease = session.lease_expires_at
        self._track(live)

    async def _authenticate(self, token: str) -> Caller:
        if not ids.looks_like(ids.Kind.SESSION_TOKEN, token):
            raise unknown_token()
        token_hash = ids.hash_token(token)
        live = self.by_token.get(token_hash)
        now = self.deps.clock.now()
        if live is not None and live.streams == 0 and now >= live.lease_deadline:
            await self._end(live, SessionState.EXPIRED, "lease lapsed")
            live = None
        if live is None:
            session, purged = self.deps.checkpoint.lookup(
                lambda c: (ms.session_by_token(c, token_hash), ms.purged_session(c, token_hash))
            )
            if session is None and purged is not None:
                raise PagerError(
                    ErrorCode.ENDED,
                    "this session has ended (its identity was purged by the operator);"
                    " do not retry",
                    session_id=purged,
                    reason="purged",
                )
            raise not_attached(session)
        ttl = self.deps.windows.lease_ttl
        # A renewal never shortens a lease (a stream's grace may reach past now + ttl).
        live.lease_deadline = max(live.lease_deadline, now + ttl)
        if live.lease_deadline - live.persisted_lease > ttl / 2:
            # Persist now and then, not on every request: after a crash the broker grants a
            # fresh lease anyway. The identity's `last_seen` goes with it, so any
            # authenticated request shows within lease_ttl / 2 (not only attaches).
            session_id, lease = live.session.id, live.lease_deadline
            identity_id = live.session.identity_id

            def renew(conn: sqlite3.Connection) -> None:
                ms.set_lease(conn, session_id, lease)
                ms.touch_identity(conn, identity_id, now)

            await self.deps.checkpoint.write(renew)
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
        if command.force and not self.deps.allow_force:
            raise takeovers_off("registration")
        if command.session_name is not None:
            validate_alias(command.session_name)
        now = self.deps.clock.now()
        attached = {agent_id: live.session for agent_id, live in self.by_identity.items()}
        token = ids.new_token(ids.Kind.SESSION_TOKEN)
        resume = ids.new_token(ids.Kind.RESUME_TOKEN)
        plan = RegisterPlan(command, attached, now, self.deps.windows.lease_ttl, token, resume)
        outcome = await self.deps.checkpoint.write(plan.apply)
        await self._sessions_changed(outcome.ended, outcome.started)
        return outcome.registered

    async def _sessions_changed(
        self, ended: list[Session], started: list[tuple[Session, str]]
    ) -> None:
        """Follow committed session changes: ended ones stop (their streams are told), new
        ones are tracked, and their identity actors learn of both."""
        for session in ended:
            live = self.by_session.get(session.id)
            if live is not None:
                self._untrack(live)
                await self._tell(session.identity_id, Detach(session.id))
        for session, implementation in started:
            lease = session.lease_expires_at
            self._track(_Live(session, lease, lease))
            await self._tell(session.identity_id, _attach(session, implementation))

    # -- renames and moves -----------------------------------------------------------------

    async def _rename(self, command: Rename) -> dict[str, Any]:
        if command.force and not self.deps.allow_force:
            raise takeovers_off("update_agent_alias")
        alias = validate_alias(command.alias)
        agent_id = command.caller.agent_id
        session_id = command.caller.session_id
        mine = None if session_id is None else self.by_session.get(session_id)
        takes_over = command.force or command.claim
        if takes_over and session_id is None:
            raise PagerError(
                ErrorCode.CONFLICT,
                "taking an identity over hands it to a session, and this caller has none (the"
                " person at the terminal, or a harness seen only through its hook); rename"
                " without force, or run the command inside a `pager <harness>` session",
            )
        attached = {agent: live.session for agent, live in self.by_identity.items()}
        now, lease_ttl = self.deps.clock.now(), self.deps.windows.lease_ttl

        def op(conn: sqlite3.Connection) -> tuple[dict[str, Any], Takeover | None]:
            me = identity_of(conn, agent_id)
            holder = ms.identity_by_alias(conn, me.workspace_key, alias_key(alias))
            if command.claim and holder is None:
                raise PagerError(
                    ErrorCode.UNKNOWN_RECIPIENT,
                    f"no identity is named {alias!r} in this workspace; `pager who` lists them",
                )
            if command.claim and not command.force and holder is not None and holder.id in attached:
                raise PagerError(
                    ErrorCode.ALIAS_CONFLICT,
                    f"{alias!r} is attached to a session; claim it with --force to end that"
                    " session and take it over",
                    **holder_details(conn, holder),
                )
            if takes_over and holder is not None and holder.id != me.id:
                if mine is None:  # it ended while this request waited
                    raise PagerError(
                        ErrorCode.ENDED, "this session ended before the takeover; nothing changed"
                    )
                done = take_over_by_alias(
                    conn,
                    holder,
                    attached.get(holder.id),
                    mine.session,
                    alias,
                    lease_expires_at=mine.lease_deadline,
                    now=now,
                    lease_ttl=lease_ttl,
                )
                taken = done.identity
                slug = ms.workspace_slug(conn, taken.workspace_key)
                result: dict[str, Any] = {
                    "agent_id": taken.id,
                    "alias": taken.alias,
                    "address": format_address(taken.alias, slug),
                    "taken_over": {
                        "previous_agent_id": me.id,
                        "ended_session_id": None if done.ended is None else done.ended.id,
                    },
                    "session": {"id": done.session.id, "epoch": done.session.epoch},
                }
                return result, done
            claim_alias(conn, me.workspace_key, alias, me.id, set(attached), force=command.force)
            ms.set_alias(
                conn, me.id, me.workspace_key, alias, alias_key(alias), durable=True, now=now
            )
            slug = ms.workspace_slug(conn, me.workspace_key)
            return {"agent_id": me.id, "alias": alias, "address": format_address(alias, slug)}, None

        result, done = await self.deps.checkpoint.write(op)
        if done is not None and mine is not None:
            left = mine.session
            await self._sessions_changed(
                [] if done.ended is None else [done.ended],
                [] if done.handed is None else [(done.handed, done.handed_implementation)],
            )
            self._carry_on(mine, done.session)
            await self._tell(left.identity_id, Detach(left.id))
            await self._tell(done.identity.id, _attach(done.session, done.identity.implementation))
        return result

    async def _move(self, command: Move) -> dict[str, str]:
        agent_id, workspace = command.caller.agent_id, command.workspace
        attached = set(self.by_identity)
        now = self.deps.clock.now()

        def op(conn: sqlite3.Connection) -> dict[str, str]:
            me = identity_of(conn, agent_id)
            ms.ensure_workspace(conn, workspace.key, workspace.slug, workspace.path, now)
            if me.workspace_key != workspace.key:
                claim_alias(conn, workspace.key, me.alias, me.id, attached, force=False)
                ms.set_alias(
                    conn,
                    me.id,
                    workspace.key,
                    me.alias,
                    alias_key(me.alias),
                    durable=me.durable,
                    now=now,
                )
            return {
                "agent_id": me.id,
                "alias": me.alias,
                "workspace": workspace.path,
                "address": format_address(me.alias, workspace.slug),
            }

        return await self.deps.checkpoint.write(op)


def _attach(session: Session, implementation: str) -> Attach:
    return Attach(session.id, session.delivery, implementation, session.conversation_key)


async def _run_identity(
    actor: IdentityActor, *, task_status: trio.TaskStatus[ActorRef[IdentityMessage]]
) -> None:
    """An identity that crashes is logged and dropped; the next use reactivates it from the
    store, so one bad inbox never takes the directory down."""
    try:
        await run_actor(actor, name=f"identity:{actor.identity_id}", task_status=task_status)
    except Exception:
        log.exception("identity actor %s crashed; it restarts on next use", actor.identity_id)
        # Told like a passivation, so the directory drops the dead ref and wakes the identity
        # at its next deadline: a claim it held still lapses on time.
        actor.deps.on_passivate(actor.identity_id)


def _due_key(agent_id: str) -> tuple[str, str, str]:
    return ("directory", "due", agent_id)
