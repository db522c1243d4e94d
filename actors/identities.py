"""The running identity actors: activated on demand under a dynamic supervisor (transient
children: one that crashes comes back, rebuilt from the store, bound to its session), found by
id without a mailbox hop, and the lookups every request makes before it reaches one.

Authentication is here, not in the directory: a token is looked up in the session index (an
immutable snapshot its identity actor replaces whole) without a mailbox hop; the renewal of the
lease, and the opening and closing of streams, are casts to that actor, which owns the lease and
alone decides whether the session is still current.
"""

from __future__ import annotations

import contextlib
import logging
import weakref
from collections.abc import AsyncIterator, Callable, Hashable, Iterable
from typing import Any, TypeVar

import trio

from actors._runtime import ActorError, ActorRef, ActorStopped, Call, run_actor
from actors.identity import IdentityActor
from actors.identity_protocol import (
    IdentityMessage,
    Poke,
    Renew,
    Retire,
    StreamClosed,
    StreamOpened,
)
from actors.sessions import Attachment, MailBell, SessionIndex
from pager.domain import ids
from pager.domain.api import Caller
from pager.domain.clock import WallClock
from pager.domain.errors import ErrorCode, PagerError
from pager.domain.read_ahead import StartFacts
from pager.domain.records import SessionState
from pager.domain.session_errors import not_attached, unknown_token
from pager.domain.windows import Windows
from pager.store._errors import StoreFault
from pager.store.ports import Sessions
from supervisors import ChildSpec, ChildStartFailed, DynamicSupervisor, Restart

log = logging.getLogger("pager.identities")
R = TypeVar("R")

#: Restart intensity of the identity actors together: more crashes than this within the
#: period fail the messaging subtree (its supervisor then restarts it from the store).
MAX_RESTARTS = 20
PERIOD = 10.0
#: A session's requests renew its lease at most this often (seconds): a busy session costs
#: its identity actor one renewal a second, not one message per request.
RENEW_EVERY = 1.0


class Identities:
    """What the service, the directory and the scheduler hold to reach identity actors."""

    def __init__(
        self,
        supervisor: DynamicSupervisor,
        make: Callable[[str], IdentityActor],
        *,
        index: SessionIndex,
        sessions: Sessions,
        clock: WallClock,
        windows: Windows,
        nursery: trio.Nursery,
        host: str = "",
    ) -> None:
        self._supervisor = supervisor
        self._host = host  # this broker's, as sessions record it (see IdentityDeps.host)
        self._make = make
        self.index = index
        self._sessions = sessions
        self._clock = clock
        self._windows = windows
        self._nursery = nursery  # background activations (`tell`)
        self._refs: dict[str, ActorRef[IdentityMessage]] = {}
        self._starting: dict[str, trio.Event] = {}
        self._retiring: dict[str, trio.Event] = {}  # set when the store has acted
        # When each attachment's renewal was last cast (trio time); the entry goes with the
        # attachment, replaced or released by its actor.
        self._renewed: weakref.WeakKeyDictionary[Attachment, float] = weakref.WeakKeyDictionary()

    # -- finding and starting --------------------------------------------------------------

    def get(self, agent_id: str) -> ActorRef[IdentityMessage] | None:
        """The identity's running actor, if it runs."""
        ref = self._refs.get(agent_id)
        return ref if ref is not None and ref.alive else None

    def active_ids(self) -> frozenset[str]:
        return frozenset(agent for agent, ref in self._refs.items() if ref.alive)

    async def activate(
        self, agent_id: str, *, start: StartFacts | None = None
    ) -> ActorRef[IdentityMessage]:
        """The identity's actor, started if it is not running; `not_found` if the identity
        does not exist (purged, or never was); the `StoreFault` that failed its load (nothing
        is left of the attempt: the next call starts it again). `start`: what the store
        holds of the identity, read a moment ago with the message the actor is started for
        (a send's read; empty for an identity the send's write makes): the actor starts from
        it, without looking for the identity or loading it again."""
        while True:
            retiring = self._retiring.get(agent_id)
            if retiring is not None:
                await retiring.wait()  # reaped or purged meanwhile, or not: look again
                continue
            ref = self.get(agent_id)
            if ref is not None:
                return ref
            starting = self._starting.get(agent_id)
            if starting is None:
                break
            await starting.wait()  # started by another caller meanwhile; look again
        # Marked starting before the store is asked (an await): a second caller meanwhile
        # waits for this start instead of starting the actor again.
        self._starting[agent_id] = starting = trio.Event()
        try:
            if start is None and not await self._sessions.exists(agent_id):
                raise PagerError(ErrorCode.NOT_FOUND, f"no identity {agent_id!r}; it was purged")
            spec = ChildSpec(agent_id, self._child(agent_id, start), restart=Restart.TRANSIENT)
            if self._supervisor.running(agent_id):  # its last incarnation is still ending
                await self._supervisor.terminate_child(agent_id)
            started = await self._supervisor.start_child(spec)
        except ChildStartFailed as exc:
            if isinstance(exc.error, StoreFault):
                raise exc.error from None
            raise PagerError(
                ErrorCode.INTERNAL, f"identity {agent_id} could not start: {exc.error!r}"
            ) from exc
        finally:
            del self._starting[agent_id]
            starting.set()
        assert isinstance(started, ActorRef)
        return started

    def _child(self, agent_id: str, start: StartFacts | None) -> Callable[..., Any]:
        first = [start]  # only the first incarnation starts from them: a restart loads the store

        async def run(*, task_status: trio.TaskStatus[ActorRef[IdentityMessage]]) -> None:
            actor = self._make(agent_id)
            actor.start_facts, first[0] = first[0], None
            # Every incarnation (a restart too) registers its ref when it is ready.
            await run_actor(
                actor,
                name=f"identity:{agent_id}",
                task_status=_Registering(self._refs, agent_id, task_status),
            )

        return run

    def passivated(self, agent_id: str, ref: ActorRef[IdentityMessage]) -> None:
        if self._refs.get(agent_id) is ref:
            del self._refs[agent_id]

    async def stop(self, agent_id: str) -> None:
        """Stop the identity's actor (not restarted; the next request starts it again)."""
        self._refs.pop(agent_id, None)
        await self._supervisor.terminate_child(agent_id)

    @contextlib.asynccontextmanager
    async def retiring(self, agent_ids: Iterable[str]) -> AsyncIterator[None]:
        """Reap or purge these identities in the block, their actors stopped first (each
        answers its long polls and stops: `Retire`) and none started again until the block
        is over; requests meanwhile wait, then find the identity gone (or, if the store did
        not act, started again). A retired identity's attachment is released after the block
        (its streams told the session ended); one the store kept is carried on by its next
        actor, as after a crash."""
        retired = []
        try:
            for agent_id in dict.fromkeys(agent_ids):
                while (other := self._retiring.get(agent_id)) is not None:
                    await other.wait()
                self._retiring[agent_id] = trio.Event()
                retired.append(agent_id)
                while (starting := self._starting.get(agent_id)) is not None:
                    await starting.wait()
                ref = self.get(agent_id)
                if ref is not None:
                    with contextlib.suppress(ActorError):
                        await ref.call(Retire())
                await self.stop(agent_id)
            yield
        finally:
            for agent_id in retired:
                await self._released_if_gone(agent_id)
                self._retiring.pop(agent_id).set()

    async def _released_if_gone(self, agent_id: str) -> None:
        attachment = self.index.of_identity(agent_id)
        if attachment is None:
            return
        try:
            gone = not await self._sessions.exists(agent_id)
        except StoreFault:  # it stays; its next actor rebinds from the store
            return
        if gone and self.index.of_identity(agent_id) is attachment:  # not rebound meanwhile
            self.index.release(attachment)

    async def call(
        self,
        agent_id: str,
        message: Call[R],
        *,
        timeout: float = 30.0,  # noqa: ASYNC109
        start: StartFacts | None = None,
    ) -> R:
        """Call the identity's actor, starting it if need be; one retry if it passivated
        between the lookup and the call. A store fault answers its `StoreFault` (the edge says
        `unavailable`) and the actor goes on; a crash (a broken invariant) answers
        `ActorCrashed` (`internal`) while its supervisor starts the actor again. `start`:
        what the actor starts from if it is not running (see `activate`)."""
        for attempt in range(2):
            ref = await self.activate(agent_id, start=start)
            try:
                return await ref.call(message, timeout=timeout)
            except ActorStopped:
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def tell(self, agent_id: str, message: IdentityMessage) -> None:
        """Cast to the identity's actor, starting it in the background if it is not running."""
        ref = self.get(agent_id)
        if ref is not None:
            with contextlib.suppress(ActorError):
                ref.try_cast(message)
                return
        try:
            self._nursery.start_soon(self._tell_later, agent_id, message)
        except RuntimeError:  # the nursery closed: the broker is stopping, and so is the actor
            log.debug("identity %s not told %r: the broker is stopping", agent_id, message)

    def poke(self, agent_id: str | None) -> None:
        """Another broker sharing the store changed `agent_id` (None: any identity may have
        changed while its notifications were lost): a running actor looks again. One that
        is not running has nothing of its own to serve; it reads the store when it starts."""
        for target in self.active_ids() if agent_id is None else (agent_id,):
            ref = self.get(target)
            if ref is not None:
                with contextlib.suppress(ActorError):
                    ref.try_cast(Poke())

    async def _tell_later(self, agent_id: str, message: IdentityMessage) -> None:
        try:
            ref = await self.activate(agent_id)
            ref.try_cast(message)
        except (PagerError, ActorError, StoreFault) as exc:
            log.warning("identity %s did not take %r: %s", agent_id, message, exc)

    # -- the lookups of every request ------------------------------------------------------

    async def authenticate(self, token: str) -> Caller:
        """The caller a session token stands for: a lookup, no mailbox hop; the renewal of
        its lease is cast to its identity actor."""
        if not ids.looks_like(ids.Kind.SESSION_TOKEN, token):
            raise unknown_token()
        token_hash = ids.hash_token(token)
        attachment = self.index.by_token(token_hash)
        if attachment is None:
            return await self._from_store(token_hash)
        session = attachment.session
        current = trio.current_time()
        if current - self._renewed.get(attachment, -RENEW_EVERY) < RENEW_EVERY:
            return Caller(session.id, session.identity_id, session.epoch)
        self._renewed[attachment] = current
        renew = Renew(session.id, self._clock.now() + self._windows.lease_ttl)
        ref = self.get(session.identity_id)
        if ref is None:
            self.tell(session.identity_id, renew)  # starting again (after a crash)
        else:
            # A full mailbox drops it: the next request renews, well within the lease.
            with contextlib.suppress(ActorError):
                ref.try_cast(renew)
        return Caller(session.id, session.identity_id, session.epoch)

    async def _from_store(self, token_hash: str) -> Caller:
        """A token the index does not hold: the store decides. An attached session there is
        one registered a moment ago, or one whose identity actor is starting again."""
        session, purged = await self._sessions.by_token(token_hash)
        if session is None and purged is not None:
            raise PagerError(
                ErrorCode.ENDED,
                "this session has ended (its identity was purged by the operator); do not retry",
                session_id=purged,
                reason="purged",
            )
        if session is None or session.state is not SessionState.ATTACHED:
            raise not_attached(session)
        if session.host != self._host:
            # Tokens stay per host (SPEC §13): this session belongs to another machine's broker.
            raise PagerError(
                ErrorCode.UNAUTHENTICATED,
                f"this session is attached through the broker of host {session.host!r}, not"
                f" this one ({self._host!r}); use the Pager of the machine it runs on",
            )
        if self.get(session.identity_id) is None:
            self._nursery.start_soon(self._activate_quietly, session.identity_id)
        return Caller(session.id, session.identity_id, session.epoch)

    async def _activate_quietly(self, agent_id: str) -> None:
        try:
            await self.activate(agent_id)
        except (PagerError, StoreFault) as exc:
            log.warning("identity %s did not start: %s", agent_id, exc)

    def stream_opened(self, session_id: str, stream: Hashable) -> trio.Event:
        """`stream` holds the session's lease while open (said again now and then: see
        `StreamOpened`); the event is set when the session ends."""
        attachment = self.index.by_session(session_id)
        if attachment is None:
            ended = trio.Event()
            ended.set()
            return ended
        self.tell(attachment.identity_id, StreamOpened(session_id, stream))
        return attachment.ended

    def mail_bell(self, session_id: str) -> MailBell:
        """The bell rung when mail waits for the session and nobody waits for it (a fresh,
        silent one when the session is not attached here)."""
        attachment = self.index.by_session(session_id)
        return MailBell() if attachment is None else attachment.bell

    def stream_closed(self, session_id: str, stream: Hashable) -> None:
        attachment = self.index.by_session(session_id)
        if attachment is not None:
            self.tell(attachment.identity_id, StreamClosed(session_id, stream))

    @contextlib.asynccontextmanager
    async def holding_lease(self, session_id: str) -> AsyncIterator[trio.Event]:
        """Hold the session's lease while in the block (said again every third of a lease,
        so an identity actor started again meanwhile learns of it); yields the event set when
        the session ends."""
        stream = object()
        ended = self.stream_opened(session_id, stream)
        try:
            async with trio.open_nursery() as nursery:

                async def again() -> None:
                    while True:
                        await trio.sleep(max(self._windows.lease_ttl / 3, 1.0))
                        self.stream_opened(session_id, stream)

                nursery.start_soon(again)
                try:
                    yield ended
                finally:
                    nursery.cancel_scope.cancel()
        finally:
            self.stream_closed(session_id, stream)


class _Registering(trio.TaskStatus[ActorRef[IdentityMessage]]):
    def __init__(
        self,
        refs: dict[str, ActorRef[IdentityMessage]],
        agent_id: str,
        outer: trio.TaskStatus[ActorRef[IdentityMessage]],
    ) -> None:
        self._refs = refs
        self._agent_id = agent_id
        self._outer = outer

    def started(self, value: ActorRef[IdentityMessage] | None = None) -> None:
        assert value is not None
        self._refs[self._agent_id] = value
        self._outer.started(value)
