"""The identity's side of delivery: pushes of its claims to the attached session's delivery
address, and the wake helper for a session without one (docs/protocol.md). The provider of
the session's implementation does the writing (`actors/provider.py`) and casts `Pushed` back;
one push is in flight at a time, so first deliveries keep send order.

`Pushes` is mixed into `IdentityActor` (`actors/identity.py`), which holds the state it
declares; `ProviderMessage` is everything a provider takes.
"""

from __future__ import annotations

import abc
import contextlib
import logging
from typing import TYPE_CHECKING, TypeVar

import attrs
import trio

from actors._runtime import Actor, ActorError, ActorRef
from actors.identity_launch import LaunchRun
from actors.identity_protocol import IdentityMessage, Pushed
from pager.domain.delivery import ClaimPolicy, Via
from pager.domain.records import Delivery
from pager.store.ports import Changed, ClaimView

if TYPE_CHECKING:
    from actors.identity import IdentityDeps
    from actors.sessions import Attachment

log = logging.getLogger("pager.identity")
T = TypeVar("T")

#: Claims written to a delivery address in one notification.
PUSH_BATCH = 20
#: A push not answered by its provider within this long is treated as refused.
PUSH_TIMEOUT = 10.0
#: Wake helpers run at most this often per identity (a burst of mail is one wake).
WAKE_EVERY = 2.0


@attrs.frozen
class Deliver:
    """Asks a provider to write claims to a delivery address, then cast `Pushed` back."""

    identity: ActorRef[IdentityMessage]
    push_id: int
    session_id: str
    delivery: Delivery
    claims: tuple[ClaimView, ...]


@attrs.frozen
class WakeSession:
    """Asks a provider to run its implementation's wake helper for an attached session."""

    values: dict[str, str]  # placeholders: agent_id, session_id, conversation_key


ProviderMessage = Deliver | WakeSession | LaunchRun


@attrs.frozen
class _PushTarget:
    provider: ActorRef[ProviderMessage]
    session_id: str
    delivery: Delivery


class Pushes(Actor[IdentityMessage]):
    """Pushes and wakes of one identity (the state is `IdentityActor`'s)."""

    identity_id: str
    deps: IdentityDeps
    policy: ClaimPolicy
    binding: Attachment | None
    last_wake: float
    woken_turn_came: bool
    wake_due: float | None
    push_deadline: float | None
    push_id: int
    push_in_flight: bool
    push_tokens: tuple[str, ...]

    @abc.abstractmethod
    def _due(self, changed: Changed[T]) -> T: ...

    @abc.abstractmethod
    async def _claim(self, limit: int, session_id: str | None, via: Via) -> list[ClaimView]: ...

    @abc.abstractmethod
    async def _dead_letter(self, tokens: tuple[str, ...]) -> list[str]: ...

    async def _push(self) -> None:
        """Write waiting claims to the attached session's delivery address (one push at a time,
        so first deliveries keep send order)."""
        target = await self._push_target()
        if target is None:
            return
        claims = await self._claim(PUSH_BATCH, target.session_id, Via.DELIVERY)
        if not claims:
            return
        await self._start_push(target, claims)

    async def _push_target(self) -> _PushTarget | None:
        """Where a push would go now: none while one is in flight, without a delivery address,
        or when the implementation's provider is disabled or not running (mail then waits
        for a fetch)."""
        binding = self.binding
        if self.push_in_flight or binding is None or binding.session.delivery is None:
            return None
        provider = await self.deps.providers(binding.implementation)
        if provider is None:
            return None
        return _PushTarget(provider, binding.session.id, binding.session.delivery)

    async def _start_push(self, target: _PushTarget, claims: list[ClaimView]) -> None:
        self.push_id += 1
        self.push_in_flight = True
        self.push_tokens = tuple(c.claim.token for c in claims)
        # A provider that dies with the push in hand never answers: give up on it in time.
        self.push_deadline = trio.current_time() + PUSH_TIMEOUT
        deliver = Deliver(self.ref, self.push_id, target.session_id, target.delivery, tuple(claims))
        try:
            target.provider.try_cast(deliver)
        except ActorError as exc:
            log.warning("provider unavailable for %s: %s", self.identity_id, exc)
            await self._pushed(Pushed(self.push_id, self.push_tokens))

    async def _wake(self) -> None:
        """A session without a delivery address may still be told that mail waits: its event
        streams say `mail` (a launch that can nudge its harness listens), and its
        implementation's wake helper runs (if it has one); at most once every WAKE_EVERY.
        Neither claims anything: the mail waits for the turn the nudge starts.

        Mail within WAKE_EVERY of the last wake is that wake's, as long as the turn it
        started has not come yet (a burst is one turn). Once that turn came (the session
        claimed), it cannot show mail that arrives after it: that mail is woken for when
        WAKE_EVERY has passed, if it still waits then (`_wake_if_waiting`)."""
        binding = self.binding
        if binding is None or binding.session.delivery is not None:
            return
        now = trio.current_time()
        if now - self.last_wake < WAKE_EVERY:
            if self.woken_turn_came:
                self.wake_due = self.last_wake + WAKE_EVERY
            return
        self.last_wake, self.woken_turn_came, self.wake_due = now, False, None
        binding.bell.ring()
        provider = await self.deps.providers(binding.implementation)
        if provider is None:
            return
        key = binding.session.conversation_key
        if key is None and self.deps.wake is not None:
            # A harness that picks its own ids names the conversation at its first hook, after
            # the binding was made: the store knows it (the knock needs it, e.g. Codex's queue).
            candidate = await self.deps.wake.candidate(self.identity_id)
            key = None if candidate is None else candidate.conversation_key
        values = {
            "agent_id": self.identity_id,
            "session_id": binding.session.id,
            "conversation_key": key or "",
        }
        with contextlib.suppress(ActorError):
            provider.try_cast(WakeSession(values))

    async def _wake_again(self, *, lapsed: bool) -> None:
        """Wake for mail that waits again: claims that `lapsed` unacknowledged returned their
        mail to the queue (as if it came now), and mail owed a wake (see `_wake`) once its
        time came; only while mail still waits for a claim (the session may have taken it)."""
        due = self.wake_due is not None and self.wake_due <= trio.current_time()
        if due:
            self.wake_due = None
        if not (lapsed or due) or self.binding is None or self.binding.session.delivery:
            return
        if await self.deps.inbox.offerable(self.identity_id, now=self.deps.clock.now()):
            await self._wake()

    async def _pushed(self, outcome: Pushed) -> None:
        if outcome.push_id != self.push_id or not self.push_in_flight:
            return
        self.push_in_flight = False
        self.push_deadline = None
        if outcome.unrenderable:
            await self._dead_letter(outcome.unrenderable)
        if outcome.refused:
            refused = await self.deps.inbox.refuse(
                self.identity_id,
                outcome.refused,
                now=self.deps.clock.now(),
                policy=self.policy,
            )
            self._due(refused)
        self.push_tokens = ()
        await self._push()
