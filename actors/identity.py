"""One identity: its inbox, open claims, session binding and lease timer, ack-wait and
redelivery timers, long polls and pushes (ARCHITECTURE.md, Ownership).

This module holds the actor's state and its own work (the inbox and claims, long polls, the
binding, the timers); its protocol is `actors/identity_protocol.py`, its pushes and wakes
through its provider `actors/identity_delivery.py`, launch on mail `actors/identity_launch.py`.

Virtual: activated on demand (`actors/identities.py`), it passivates when idle with no session
attached, whatever mail waits: its next due time is kept in the store, where the scheduler
finds it. The store is the truth: every change is committed before it is announced, and the
actor rebuilds its binding and timers from the store when it starts (or starts again); one
started by a send begins from what that send read of it with its address (`StartFacts`).

Errors by kind: a `StoreFault` (a full disk, a busy or lost store) answers the caller that met
it, and the actor goes on unchanged (its state changes only after a commit); its background
work (the timers' lapses, pushes, lease ends) is tried again after a backoff. Only a broken
invariant of its own state crashes it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import attrs
import trio

from actors._runtime import ActorRef, Reply
from actors.identity_delivery import PUSH_BATCH, WAKE_EVERY, ProviderMessage, Pushes
from actors.identity_launch import LaunchOnMail
from actors.identity_protocol import (
    Ack,
    EndSession,
    Enqueue,
    Fetch,
    IdentityMessage,
    Idle,
    LeaseCheck,
    Poke,
    Pushed,
    Rebind,
    Release,
    Renew,
    Retire,
    Sent,
    StartChain,
    StreamClosed,
    StreamOpened,
    StreamsCarried,
    Tick,
    Unrenderable,
)
from actors.sessions import Attachment, SessionIndex
from actors.timers import TimerService
from actors.wake_run import RunEnded
from pager.domain.clock import WallClock, trio_deadline
from pager.domain.delivery import ClaimPolicy, DeadReason, Via, Wake
from pager.domain.errors import ErrorCode, PagerError
from pager.domain.lease import Lease
from pager.domain.limits import SendLimits
from pager.domain.read_ahead import StartFacts
from pager.domain.records import Session, SessionState
from pager.domain.wake import WakeSettings
from pager.domain.windows import Windows
from pager.store._errors import StoreFault
from pager.store.ports import (
    Changed,
    ClaimFor,
    ClaimView,
    Inbox,
    NoWakeups,
    Sessions,
    WakeBook,
    Wakeups,
)

log = logging.getLogger("pager.identity")
T = TypeVar("T")

#: An identity with nothing pending stops after this long without messages.
IDLE_AFTER = 300.0
#: After a store fault the timers' work is tried again this long later, doubling up to
#: RETRY_MAX while the store keeps failing (sends, being requests, are answered at once).
RETRY_FIRST = 0.5
RETRY_MAX = 5.0


@attrs.define
class IdentityDeps:
    """What every identity actor shares."""

    inbox: Inbox
    sessions: Sessions
    timers: TimerService
    clock: WallClock
    windows: Windows
    #: The windows every claim follows (`Windows.claim_policy`), built once for all actors.
    policy: ClaimPolicy
    providers: Callable[[str], Awaitable[ActorRef[ProviderMessage] | None]]  # by implementation
    index: SessionIndex
    #: Told when the actor stops idle: (identity, its ref, its next due time for the scheduler).
    on_passivate: Callable[[str, ActorRef[IdentityMessage], float | None], None]
    #: Cast to another identity's actor (started if need be): streams carried on to it.
    tell: Callable[[str, IdentityMessage], None]
    send_limits: SendLimits = attrs.Factory(SendLimits)
    #: This broker's host as sessions record it ('' when it has the store alone): a session
    #: attached through another host is that broker's to bind, lease, poll and push.
    host: str = ""
    wakeups: Wakeups = attrs.Factory(NoWakeups)
    #: Launch on mail (docs/wake.md); None: this broker launches nothing.
    wake: WakeBook | None = None


@attrs.define
class _Poll:
    reply: Reply[Any]
    session_id: str | None  # None: a hook waiting on the identity's behalf
    limit: int
    deadline: float  # trio time


def _poll_via(poll: _Poll) -> Via:
    return Via.FETCH if poll.session_id is not None else Via.HOOK


class IdentityActor(Pushes, LaunchOnMail):
    mailbox_size = 256
    survives = (StoreFault,)

    def __init__(self, identity_id: str, deps: IdentityDeps) -> None:
        self.identity_id = identity_id
        self.deps = deps
        self.policy = deps.policy
        # The attached session: its snapshot (published in the index for authentication,
        # replaced whole) and its lease (this actor's alone).
        self.binding: Attachment | None = None
        self.lease: Lease | None = None
        self.last_wake = -WAKE_EVERY  # trio time of the last wake helper request
        self.woken_turn_came = False  # the session claimed since the last wake
        self.wake_due: float | None = None  # trio time: a wake owed to mail after that turn
        self.push_deadline: float | None = None  # trio time: an unanswered push counts as refused
        self.polls: list[_Poll] = []
        self.push_id = 0
        self.push_in_flight = False
        self.push_tokens: tuple[str, ...] = ()  # the claims of the push in flight
        # Senders waiting for the push of their message: answered `delivered` or `queued`.
        self.next_deadline: float | None = None  # wall clock; also the store's next_due
        self.last_activity = 0.0  # trio time of the last message handled
        # Launch on mail (docs/wake.md): the person's settings, a run asked for and not over,
        # the trio time before which no other may start, and runs in a row that left mail.
        self.wake_settings: WakeSettings | None = None
        self.launch_pending = False
        self.launch_not_before: float | None = None
        self.fruitless_runs = 0
        # Store faults in a row, and the trio time before which the timers do not try again.
        self.faults = 0
        self.retry_at: float | None = None
        # What this incarnation starts from instead of loading the store: read a moment ago
        # with the message it is started for (`Identities.activate`); None: load.
        self.start_facts: StartFacts | None = None

    @property
    def session_id(self) -> str | None:
        return None if self.binding is None else self.binding.session.id

    # -- lifecycle -------------------------------------------------------------------------

    async def on_start(self) -> None:
        # Activation counts as activity: the idle window starts now, not at trio time 0.
        self.last_activity = trio.current_time()
        start, self.start_facts = self.start_facts, None
        if start is None:
            self.next_deadline = await self.deps.inbox.next_due(self.identity_id)
            await self._load_wake()
            await self._rebind()
        else:
            self.next_deadline = start.next_due
            self._take_wake(start.wake)
            self._bind(start.session, start.implementation)
        try:
            await self._tick(catch_up=self._lapse_possible())
        except StoreFault as exc:  # loaded: its catch-up waits for the store, not its start
            self._retry_later(exc)
        # `handle` arms timers after each message, but an identity activated with no message
        # to follow (at start, detached, a claim open) would otherwise never run its deadline.
        self._arm_timers()

    async def on_stop(self) -> None:
        # An attachment stays in the index: a crashed actor's next incarnation carries it on
        # (its streams not told it ended) with a fresh lease.
        for purpose in ("inbox", "idle", "lease"):
            self.deps.timers.cancel((self.identity_id, purpose))

    async def handle(self, message: IdentityMessage, reply: Reply[Any] | None) -> None:
        if isinstance(message, Renew) and self._renewed(message):
            return  # the hot path: the lease moved, its timer re-arms itself when it fires
        if not isinstance(message, Idle | Tick | LeaseCheck):
            self.last_activity = trio.current_time()
        match message:
            case Enqueue():
                await self._enqueue(message, reply)
            case Fetch():
                await self._fetch(message, reply)
            case Ack(tokens=tokens):
                now = self.deps.clock.now()
                result = self._due(
                    await self.deps.inbox.ack(self.identity_id, tokens, now=now, policy=self.policy)
                )
                _answer(reply, result)
            case Release(tokens=tokens):
                now = self.deps.clock.now()
                released = self._due(
                    await self.deps.inbox.release(
                        self.identity_id, tokens, now=now, policy=self.policy
                    )
                )
                _answer(reply, released)
                await self._serve_polls()
                await self._push()
            case Unrenderable(tokens=tokens):
                _answer(reply, await self._dead_letter(tokens))
            case StartChain():
                await self._start_chain(reply)
            case Rebind():
                await self._rebind()
                _answer(reply, None)
                await self._push()
            case EndSession(session_id=session_id, state=state, reason=reason):
                if self.binding is not None and self.binding.session.id == session_id:
                    await self._end_session(self.binding, state, reason)
                _answer(reply, None)
            case Retire():
                for poll in list(self.polls):
                    _answer(poll.reply, [])
                self.polls.clear()
                _answer(reply, None)
                self.ref.stop()  # its timers go in on_stop; the store does the rest
                return
            case LeaseCheck():
                await self._end_if_lapsed()
            case Renew(session_id=session_id, until=until):
                await self._renew(session_id, until)
            case StreamOpened(session_id=session_id, stream=stream):
                if self.lease is not None and self._holds(session_id):
                    self.lease.stream_opened(stream)
            case StreamClosed(session_id=session_id, stream=stream):
                if self.lease is not None and self._holds(session_id):
                    grace = self.deps.windows.stream_grace
                    self.lease.stream_closed(stream, self.deps.clock.now(), grace)
            case StreamsCarried(session_id=session_id, streams=streams):
                if self.lease is not None and self._holds(session_id):
                    self.lease.streams |= streams
            case Tick():
                await self._tick()
            case Poke():
                await self._load_wake()
                await self._rebind()
                await self._tick()
            case Pushed():
                await self._pushed(message)
            case RunEnded():
                await self._run_ended(message)
            case Idle():
                if self._idle() and trio.current_time() - self.last_activity >= IDLE_AFTER:
                    self.ref.stop()
                    self.deps.on_passivate(self.identity_id, self.ref, self.next_deadline)
                    return
            case _:
                self.unhandled(message)
        self.faults, self.retry_at = 0, None
        self._arm_timers()

    def on_fault(self, message: IdentityMessage, error: Exception) -> None:
        self._retry_later(error, type(message).__name__)
        self._arm_timers()

    def _retry_later(self, error: Exception, what: str = "start") -> None:
        """The store failed under `what`: its caller has the fault; the timers try the work
        again after a backoff (one log line per run of faults)."""
        delay = min(RETRY_FIRST * 2**self.faults, RETRY_MAX)
        self.faults += 1
        self.retry_at = trio.current_time() + delay
        if self.faults == 1:
            log.warning("identity %s: %s met a store fault: %s", self.identity_id, what, error)

    # -- the store (each change committed before it is announced) -------------------------

    def _due(self, changed: Changed[T]) -> T:
        """Take a change's result; its next due time arms the inbox timer."""
        self.next_deadline = changed.next_due
        return changed.value

    async def _claim(self, limit: int, session_id: str | None, via: Via) -> list[ClaimView]:
        changed = await self.deps.inbox.claim(
            self.identity_id,
            session_id=session_id,
            limit=limit,
            via=via,
            now=self.deps.clock.now(),
            policy=self.policy,
        )
        if via is not Via.DELIVERY:
            self.woken_turn_came = True  # a turn of the session came to take its mail
        return self._due(changed)

    async def _dead_letter(self, tokens: tuple[str, ...]) -> list[str]:
        changed = await self.deps.inbox.dead_letter(
            self.identity_id,
            tokens,
            reason=DeadReason.UNRENDERABLE.value,
            now=self.deps.clock.now(),
            policy=self.policy,
        )
        return self._due(changed)

    # -- handlers --------------------------------------------------------------------------

    async def _record_refusal(self, request: Enqueue, exc: PagerError, now: float) -> None:
        """A send the loop guard or a rate refused, counted for the operator (SPEC §8.1)."""
        data = {"sender_id": request.sender_id, "recipient_id": self.identity_id,
                "reason": exc.code.value, **exc.details}  # fmt: skip
        await self.deps.inbox.count_refusal(now, request.sender_id, exc.code.value, data)

    async def _enqueue(self, request: Enqueue, reply: Reply[Any] | None) -> None:
        now = self.deps.clock.now()
        # Whoever waits for mail (a long poll, else the session's delivery address) has its
        # claim made in the send's own transaction: one commit, not two.
        poll = self._first_poll()
        push = None if poll is not None else await self._push_target()
        claim_for = None
        if poll is not None:
            claim_for = ClaimFor(poll.session_id, poll.limit, _poll_via(poll))
        elif push is not None:
            claim_for = ClaimFor(push.session_id, PUSH_BATCH, Via.DELIVERY)
        # Mail nobody here waits for, to an identity not bound here: the other brokers are
        # told by the send's own transaction (at its commit), not by a write after it.
        elsewhere = claim_for is None and self._served_elsewhere()
        try:
            enqueued = self._due(
                await self.deps.inbox.enqueue(
                    self.identity_id,
                    request,  # an Enqueue is the send as the inbox takes it
                    now=now,
                    idempotent_since=now - self.deps.windows.idempotency,
                    limits=self.deps.send_limits,
                    policy=self.policy,
                    claim_for=claim_for,
                    tell_others=elsewhere,
                )
            )
        except PagerError as exc:
            if exc.code in (ErrorCode.HOP_LIMIT, ErrorCode.RATE_LIMITED):
                try:
                    await self._record_refusal(request, exc, now)
                except StoreFault as fault:  # the refusal stands; only its count is lost
                    log.warning("refusal for %s not counted: %s", self.identity_id, fault)
            if reply is not None:
                reply.fail(exc)
            return
        message = enqueued.message
        if enqueued.duplicate:
            _answer(reply, Sent(message, True, Wake.QUEUED))
            return
        # Committed: now hand the claims to whoever waits for them.
        claims = list(enqueued.claims)
        if poll is not None and claims:
            self.polls.remove(poll)
            if await self._hand_over(poll.reply, claims):
                _answer(reply, Sent(message, False, Wake.DELIVERED))
                await self._serve_polls()
                return
            # Its caller left while the claim committed: the mail waits for whoever is next.
        if push is not None and claims:
            # Answered at the commit, not after the recipient's inbox answers: a slow or dead
            # delivery address never holds the sender. The store says `delivered` from this
            # claim on; a refusal returns the message to the queue (docs/decisions.md).
            _answer(reply, Sent(message, False, Wake.DELIVERED))
            await self._start_push(push, claims)
            return
        if await self._serve_polls():
            _answer(reply, Sent(message, False, Wake.DELIVERED))
            return
        attached = self.session_id is not None or (
            elsewhere and await self._attached_elsewhere(request)
        )
        _answer(reply, Sent(message, False, Wake.QUEUED if attached else Wake.NO_SESSION))
        await self._push()
        await self._wake()
        if not attached:
            await self._launch()

    def _served_elsewhere(self) -> bool:
        """Whether another broker may serve this identity: the store is shared and no session
        is bound here (the broker its session is attached through holds its pushes and long
        polls, and one with no session may hold a person's waiting read)."""
        return self.deps.wakeups.shared and self.binding is None

    async def _attached_elsewhere(self, request: Enqueue) -> bool:
        """Whether a session of this identity is attached through another broker, as read
        for this send (the attachment may have moved a moment ago): with its address where
        the store reads ahead, else from the store now."""
        read = None if request.ahead is None else request.ahead.recipient
        if read is not None:
            session = read.session
        else:
            try:
                session, _ = await self.deps.sessions.attached(self.identity_id)
            except StoreFault as exc:  # the send is committed: only its answer's wording is lost
                log.warning("could not tell where %s is attached: %s", self.identity_id, exc)
                return False
        return session is not None and session.host != self.deps.host

    async def _start_chain(self, reply: Reply[Any] | None) -> None:
        now, limits = self.deps.clock.now(), self.deps.send_limits
        try:
            reset = await self.deps.inbox.start_chain(self.identity_id, now=now, limits=limits)
        except PagerError as exc:  # resets spent: the chain goes on
            if reply is not None:
                reply.fail(exc)
            return
        _answer(reply, reset)

    async def _fetch(self, request: Fetch, reply: Reply[Any] | None) -> None:
        claims = await self._claim(request.limit, request.session_id, request.via)
        if reply is not None and claims:
            await self._hand_over(reply, claims)
            return
        if request.wait_s <= 0 or reply is None:
            _answer(reply, claims)
            return
        deadline = trio.current_time() + request.wait_s
        self.polls.append(_Poll(reply, request.session_id, request.limit, deadline))

    def _first_poll(self) -> _Poll | None:
        """The oldest long poll whose caller still waits (those gone are dropped)."""
        while self.polls and self.polls[0].reply.caller_gone:
            self.polls.pop(0)
        return self.polls[0] if self.polls else None

    async def _serve_polls(self) -> bool:
        """Hand waiting mail to long polls, oldest first; True if any poll got something."""
        served = False
        while (poll := self._first_poll()) is not None:
            claims = await self._claim(poll.limit, poll.session_id, _poll_via(poll))
            if not claims:
                break
            self.polls.remove(poll)
            if await self._hand_over(poll.reply, claims):
                served = True
        return served

    async def _hand_over(self, reply: Reply[Any], claims: list[ClaimView]) -> bool:
        """Answer a waiting caller its claims. One that left while they were made (its request
        cancelled mid-commit) never sees them: they are handed back at once, so the mail waits
        again now rather than until the ack wait ends. False when handed back."""
        if not reply.caller_gone:
            _answer(reply, claims)
            return True
        tokens = [view.claim.token for view in claims]
        try:
            self._due(
                await self.deps.inbox.release(
                    self.identity_id, tokens, now=self.deps.clock.now(), policy=self.policy
                )
            )
        except StoreFault as fault:  # the claims then return at the end of their ack wait
            log.warning("claims of a caller gone not handed back: %s", fault)
        return False

    def _lapse_possible(self) -> bool:
        """Whether a claim or a message may have lapsed by now, by the next due time loaded:
        every write that changes an inbox's deadlines (a send, a claim, an ack, a release, a
        refusal, a dead letter, a lapse: `SqlInbox._change` and `SqlInbox.enqueue`; a reap
        deletes the row) records the next due time they make in its own transaction, so while
        that time is later than now (or there is none) no claim's ack wait and no message's
        life has run out."""
        due = self.next_deadline
        return due is not None and due <= self.deps.clock.now()

    async def _tick(self, *, catch_up: bool = True) -> None:
        """The timers' work; `catch_up`: lapse the claims and messages whose time ran out
        (False when none can have: `_lapse_possible`)."""
        current = trio.current_time()
        # Long polls that ran out are answered first: they need nothing of the store.
        for poll in [p for p in self.polls if p.deadline <= current or p.reply.caller_gone]:
            self.polls.remove(poll)
            _answer(poll.reply, [])
        lapsed = 0
        if catch_up:
            now = self.deps.clock.now()
            lapsed = self._due(
                await self.deps.inbox.lapse(self.identity_id, now=now, policy=self.policy)
            )
        if self.push_in_flight and self.push_deadline is not None and self.push_deadline <= current:
            log.warning("push %d for %s unanswered; requeued", self.push_id, self.identity_id)
            await self._pushed(Pushed(self.push_id, self.push_tokens))
        await self._serve_polls()
        await self._push()
        await self._wake_again(lapsed=lapsed > 0)
        await self._launch()

    def _idle(self) -> bool:
        """Nothing to keep the actor for: its due mail is the scheduler's business (a wake
        run asked for, or one to start later, keeps it)."""
        return not (
            self.binding
            or self.polls
            or self.push_in_flight
            or self.launch_pending
            or self.launch_not_before is not None
        )

    # -- the session binding ---------------------------------------------------------------

    async def _rebind(self) -> None:
        """Bind the session the store has attached to this identity, if any, and publish its
        snapshot for authentication; a binding it replaced ends (its streams and long polls
        are told), unless a takeover by alias carried it on to another identity, which then
        holds its streams."""
        session, implementation = await self.deps.sessions.attached(self.identity_id)
        self._bind(session, implementation)

    def _bind(self, session: Session | None, implementation: str) -> None:
        """`_rebind` with the attached session and implementation as the store holds them."""
        identity_id, index = self.identity_id, self.deps.index
        if session is not None and session.host != self.deps.host:
            session = None  # attached through another broker: bound, leased and served there
        current = self.binding or index.of_identity(identity_id)
        if current is not None and (session is None or current.session.id != session.id):
            self._unbind(current)
        if session is None:
            return
        found = index.by_session(session.id) or index.by_token(session.token_hash)
        if found is None:
            attachment = Attachment(session, implementation, trio.Event())
            index.publish(attachment)
        elif found.session != session or found.implementation != implementation:
            # Changed in the store (a conversation bound), or carried on from another identity
            # (a takeover by alias: the same token, its streams not told it ended).
            former = found.former
            if found.session.id != session.id:
                former = (*former, found.session.id)
            attachment = Attachment(session, implementation, found.ended, former, found.bell)
            index.publish(attachment, replacing=found)
        else:
            attachment = found  # a crashed incarnation's, carried on
        if self.lease is None or self.binding is None or self.binding.session.id != session.id:
            # Nobody could renew while it was unbound (a broker start, a restart): fresh.
            now, ttl = self.deps.clock.now(), self.deps.windows.lease_ttl
            self.lease = Lease.fresh(now, ttl, session.lease_expires_at)
        self.binding = attachment

    def _unbind(self, current: Attachment) -> None:
        """`current` is no longer this identity's session: it ended (its streams are told),
        or it was carried on to another identity (which is handed its streams)."""
        index = self.deps.index
        if index.current(current) and current.identity_id == self.identity_id:
            index.release(current)
        else:
            carried = index.by_token(current.session.token_hash)
            streams = frozenset(() if self.lease is None else self.lease.streams)
            if carried is not None and streams and carried.identity_id != self.identity_id:
                self.deps.tell(carried.identity_id, StreamsCarried(carried.session.id, streams))
        self.binding, self.lease = None, None
        self._end_polls(current.session.id)

    def _holds(self, session_id: str) -> bool:
        """Whether `session_id` is the bound session, or one it carried on from."""
        binding = self.binding
        return binding is not None and session_id in (binding.session.id, *binding.former)

    def _renewed(self, message: Renew) -> bool:
        """A renewal that needs nothing more than the lease moved (no store write, nothing
        lapsed): done here, without the handler's bookkeeping."""
        lease, now = self.lease, self.deps.clock.now()
        if lease is None or not self._holds(message.session_id) or lease.lapsed(now):
            return False
        if lease.deadline >= message.until:
            return True
        ttl = self.deps.windows.lease_ttl
        if message.until - lease.persisted > ttl / 2:
            return False  # the store records it: the handler's work
        lease.renew(message.until, ttl)
        return True

    async def _renew(self, session_id: str, until: float) -> None:
        """A renewal that records the lease, or that came after it lapsed (the session ends:
        the request that carried it finds its session gone)."""
        lease = self.lease
        if lease is None or not self._holds(session_id):
            return
        if lease.lapsed(self.deps.clock.now()):
            await self._end_if_lapsed()
            return
        recorded = lease.persisted
        persist = lease.renew(until, self.deps.windows.lease_ttl)
        if persist is not None:
            assert self.binding is not None
            try:
                await self._persist_lease(self.binding.session.id, persist)
            except StoreFault:
                lease.persisted = recorded  # the next renewal tries again
                raise

    async def _end_if_lapsed(self) -> None:
        binding, lease = self.binding, self.lease
        if binding is not None and lease is not None and lease.lapsed(self.deps.clock.now()):
            log.info("session %s of %s: lease lapsed", binding.session.id, self.identity_id)
            await self._end_session(binding, SessionState.EXPIRED, "lease lapsed")

    async def _end_session(self, binding: Attachment, state: SessionState, reason: str) -> None:
        session = binding.session
        await self.deps.sessions.end(session, state, reason, now=self.deps.clock.now())
        self.deps.index.release(binding)
        if self.binding is binding:
            self.binding, self.lease = None, None
        self._end_polls(session.id)
        await self._launch()  # mail left waiting, nobody attached: a run may take it

    async def _persist_lease(self, session_id: str, lease: float) -> None:
        now = self.deps.clock.now()
        await self.deps.sessions.renew(session_id, self.identity_id, lease, now=now)

    def _end_polls(self, session_id: str) -> None:
        """Long polls of a session that ended get what they have: nothing."""
        for poll in [p for p in self.polls if p.session_id == session_id]:
            self.polls.remove(poll)
            _answer(poll.reply, [])

    # -- timers ----------------------------------------------------------------------------

    def _arm_timers(self) -> None:
        timers, key = self.deps.timers, (self.identity_id, "inbox")
        deadlines = []  # of work in the store
        if self.push_deadline is not None:
            deadlines.append(self.push_deadline)
        if self.launch_not_before is not None:
            deadlines.append(self.launch_not_before)
        if self.wake_due is not None:
            deadlines.append(self.wake_due)
        if self.next_deadline is not None:
            deadlines.append(trio_deadline(self.deps.clock, self.next_deadline))
        retry_at = self.retry_at
        if retry_at is not None:  # after a store fault: the work that failed, not before then
            deadlines = [max(deadline, retry_at) for deadline in deadlines] + [retry_at]
        deadlines += [p.deadline for p in self.polls]
        if deadlines:
            timers.schedule(key, min(deadlines), self.ref, Tick())
        else:
            timers.cancel(key)
        lease_key, lease = (self.identity_id, "lease"), self.lease
        if lease is not None and not lease.streams:
            # Renewals only move the lease later: a timer that fires early re-arms itself.
            deadline = trio_deadline(self.deps.clock, lease.deadline)
            if retry_at is not None:
                deadline = max(deadline, retry_at)
            timers.schedule(lease_key, deadline, self.ref, LeaseCheck())
        else:
            timers.cancel(lease_key)  # an open stream holds it; its close re-arms this
        idle_key = (self.identity_id, "idle")
        if not self._idle():
            timers.cancel(idle_key)
        elif timers.pending(idle_key) is None:
            timers.schedule(idle_key, self.last_activity + IDLE_AFTER, self.ref, Idle())


def _answer(reply: Reply[Any] | None, value: object) -> None:
    if reply is not None and not reply.done:
        reply.send(value)
