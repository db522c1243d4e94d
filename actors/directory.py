"""The directory: registrations, aliases, renames, moves, takeovers and the operator's archive,
unarchive, reap and purge (SPEC §7, §9): it places identities; each identity actor owns its own
session binding and lease (and the sweeper applies the retention windows).

Its decisions are taken inside the store's transactions (which identity a registration
reaches, whether an alias is free, who is attached), so no handler awaits a commit or another
actor: each starts its work in a task of its own and that task answers when the work is done.
The store commits each decision before it is answered; the identity actors concerned are then
told to bind (or end) sessions from the store.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import trio

from actors._runtime import Actor, ActorError, Call, Reply
from actors.identities import Identities
from actors.identity_protocol import Rebind
from actors.wake_run import WakeRuns
from pager.domain import ids
from pager.domain.api import Caller
from pager.domain.clock import WallClock
from pager.domain.errors import ErrorCode, PagerError
from pager.domain.hints import Hint
from pager.domain.names import validate_alias
from pager.domain.records import Session
from pager.domain.registration import Registered, Registration
from pager.domain.results import AliasResult
from pager.domain.retention import Action, Applied
from pager.domain.session_errors import takeovers_off
from pager.domain.windows import Windows
from pager.domain.workspace import Workspace
from pager.store._errors import StoreFault
from pager.store.ports import Directory, NoWakeups, Wakeups

log = logging.getLogger("pager.directory")


@attrs.frozen
class RegisterCommand(Registration, Call[Registered]):
    """Register a session (SPEC §7): create, rejoin, refuse or take over; answers
    `Registered`."""


@attrs.frozen
class Rename(Call[AliasResult]):
    caller: Caller
    alias: str
    force: bool
    #: `pager claim` (SPEC §4.1): take the identity holding `alias` over, as `force` does, but
    #: without `force` only when its holder is not attached.
    claim: bool = False


@attrs.frozen
class Move(Call[AliasResult]):
    caller: Caller
    workspace: Workspace


@attrs.frozen
class ArchiveIdentity(Call[Applied]):
    """Archive now (operator action): its sessions end (`ended`, "archived"), mail waits."""

    agent_id: str
    reason: str


@attrs.frozen
class ReapIdentity(Call[Applied]):
    """Reap now: sessions end, unsettled mail is dead-lettered (`reaped`), it is gone."""

    agent_id: str
    reason: str


@attrs.frozen
class UnarchiveIdentity(Call[Applied]):
    """Show an archived identity again (operator action); its mail kept waiting."""

    agent_id: str
    reason: str


@attrs.frozen
class PurgeIdentity(Call[Applied]):
    """Purge now (operator action): a reap whose dead letters say `purged`, and whose session
    tokens answer `ended` (purged) from then on."""

    agent_id: str
    reason: str


DirectoryMessage = (
    RegisterCommand
    | Rename
    | Move
    | ArchiveIdentity
    | ReapIdentity
    | UnarchiveIdentity
    | PurgeIdentity
)


@attrs.define
class DirectoryDeps:
    directory: Directory
    identities: Identities
    clock: WallClock
    windows: Windows
    allow_force: bool = True  # `allow_force` in config.toml: false refuses every `force`
    #: Tells the other brokers sharing the store of each session change (SPEC §13).
    wakeups: Wakeups = attrs.Factory(NoWakeups)
    #: The broker's wake runs (docs/wake.md): one a registration ended is waited for.
    wake_runs: WakeRuns | None = None


class DirectoryActor(Actor[DirectoryMessage]):
    mailbox_size = 1024

    def __init__(self, nursery: trio.Nursery, deps: DirectoryDeps) -> None:
        self._nursery = nursery  # the tasks that do each request's work
        self.deps = deps

    # -- dispatch --------------------------------------------------------------------------

    async def handle(self, message: DirectoryMessage, reply: Reply[Any] | None) -> None:
        work = self._work(message)
        self._nursery.start_soon(_answering, work, reply)

    def _work(self, message: DirectoryMessage) -> Callable[[], Awaitable[object]]:
        match message:
            case RegisterCommand():
                return lambda: self._register(message)
            case Rename():
                return lambda: self._rename(message)
            case Move():
                return lambda: self._move(message)
            case ArchiveIdentity(agent_id=agent_id, reason=reason):
                return lambda: self._retire(agent_id, Action.ARCHIVE, reason)
            case ReapIdentity(agent_id=agent_id, reason=reason):
                return lambda: self._retire(agent_id, Action.REAP, reason)
            case UnarchiveIdentity(agent_id=agent_id, reason=reason):
                return lambda: self._retire(agent_id, Action.UNARCHIVE, reason)
            case PurgeIdentity(agent_id=agent_id, reason=reason):
                return lambda: self._retire(agent_id, Action.PURGE, reason)
            case _:
                self.unhandled(message)

    # -- retention (SPEC §9) ---------------------------------------------------------------

    async def _retire(self, agent_id: str, action: Action, reason: str) -> Applied:
        """Archive, unarchive, reap or purge one identity now, attached or not; its live
        session ends first. `not_found` for an unknown identity, `conflict` for archiving an
        archived one or unarchiving one that is not."""
        now, identities = self.deps.clock.now(), self.deps.identities
        if action in (Action.REAP, Action.PURGE):
            # Its inbox is dead-lettered with its actor stopped first (long polls answered):
            # no actor works on an inbox the store is emptying.
            async with identities.retiring([agent_id]):
                done = await self.deps.directory.retire(agent_id, action, reason, now=now)
            await self._tell_others(agent_id)
            return done
        done = await self.deps.directory.retire(agent_id, action, reason, now=now)
        await self._tell_others(agent_id)
        if action is Action.ARCHIVE and identities.index.of_identity(agent_id):
            # The commit ended its session: its actor tells the streams and long polls.
            await self._rebind(agent_id)
        return done

    # -- sessions --------------------------------------------------------------------------

    async def _rebind(self, *agent_ids: str) -> None:
        """Have each identity's actor bind what the store now says (started if need be)."""
        for agent_id in dict.fromkeys(agent_ids):
            try:
                await self.deps.identities.call(agent_id, Rebind())
            except (PagerError, ActorError, StoreFault) as exc:
                # It rebinds from the store when it starts again; the commit stands.
                log.warning("identity %s did not rebind: %r", agent_id, exc)

    async def _register(self, command: RegisterCommand) -> Registered:
        if command.force and not self.deps.allow_force:
            raise takeovers_off("registration")
        if command.session_name is not None:
            validate_alias(command.session_name)
        now = self.deps.clock.now()
        token = ids.new_token(ids.Kind.SESSION_TOKEN)
        resume = ids.new_token(ids.Kind.RESUME_TOKEN)
        outcome = await self.deps.directory.register(
            command,
            now=now,
            lease_ttl=self.deps.windows.lease_ttl,
            token=token,
            resume_token=resume,
        )
        await self._sessions_changed(outcome.ended, [s for s, _ in outcome.started])
        if self.deps.wake_runs is not None:
            # A wake run yields to the session attaching: its harness is gone before the
            # caller's starts on the same conversation (bounded by the run's kill grace).
            for ended in outcome.ended:
                await self.deps.wake_runs.wait_over(ended.id)
        return outcome.registered

    async def _sessions_changed(self, ended: list[Session], started: list[Session]) -> None:
        """Committed session changes reach the identity actors concerned, here and on the
        other brokers sharing the store."""
        changed = [s.identity_id for s in ended] + [s.identity_id for s in started]
        await self._tell_others(*changed)
        await self._rebind(*changed)

    async def _tell_others(self, *agent_ids: str) -> None:
        """With a shared store: each identity's broker elsewhere rebinds and serves it."""
        wakeups = self.deps.wakeups
        if not wakeups.shared:
            return
        for agent_id in dict.fromkeys(agent_ids):
            try:
                await wakeups.notify(agent_id)
            except StoreFault as exc:  # a hint: the other broker's timers catch up
                log.warning("could not tell other brokers of %s: %r", agent_id, exc)

    # -- renames and moves -----------------------------------------------------------------

    async def _rename(self, command: Rename) -> AliasResult:
        if command.force and not self.deps.allow_force:
            raise takeovers_off("rename")
        alias = validate_alias(command.alias)
        session_id = command.caller.session_id
        index = self.deps.identities.index
        mine = None if session_id is None else index.by_session(session_id)
        takes_over = command.force or command.claim
        if takes_over and session_id is None:
            raise PagerError(
                ErrorCode.CONFLICT,
                "taking an identity over hands it to a session, and this caller has none (the"
                " person at the terminal, or a harness seen only through its hook)",
                hint=Hint.NEEDS_SESSION,
            )
        now, lease_ttl = self.deps.clock.now(), self.deps.windows.lease_ttl

        try:
            result, done = await self.deps.directory.rename(
                command.caller,
                alias,
                force=command.force,
                claim=command.claim,
                mine=None if mine is None else mine.session,
                lease=0.0 if mine is None else now + lease_ttl,  # the caller's request renewed it
                now=now,
                lease_ttl=lease_ttl,
            )
        except PagerError as err:
            if session_id is None and err.hint is Hint.ALIAS_FORCE:  # force is not for it
                raise PagerError(
                    err.code, err.message, hint=Hint.ALIAS_TAKEN, **err.details
                ) from None
            raise
        if done is not None and mine is not None:
            # The caller's token runs on as `done.session` of the identity taken over: that
            # identity's actor, rebinding first, carries its attachment on (its open stream
            # not told `ended`), then the caller's former identity hands it its streams.
            handed = [] if done.handed is None else [done.handed.identity_id]
            await self._rebind(done.identity.id, mine.session.identity_id, *handed)
        return result

    async def _move(self, command: Move) -> AliasResult:
        workspace, now = command.workspace, self.deps.clock.now()

        return await self.deps.directory.move(command.caller, workspace, now=now)


async def _answering(work: Callable[[], Awaitable[object]], reply: Reply[Any] | None) -> None:
    """Run one request's work and answer it: a domain error or a store fault goes to the
    caller (`unavailable` at the edge for the fault: nothing was committed); anything else too
    (as `internal` at the edge), logged, without taking the directory down."""
    try:
        result = await work()
    except PagerError as exc:
        if reply is not None:
            reply.fail(exc)
    except StoreFault as exc:
        log.warning("directory request not done: %s", exc)
        if reply is not None:
            reply.fail(exc)
    except Exception as exc:
        log.exception("directory request failed")
        if reply is not None:
            reply.fail(exc)
    else:
        if reply is not None and not reply.done:
            reply.send(result)
