"""Launch on mail, the identity's side (docs/wake.md): when the person turned it on, mail
waits and no session is attached anywhere, the identity asks its implementation's provider
for a wake run (`LaunchRun`) and hears `RunEnded` when the run is over or did not start; the
next waits for the redelivery schedule or the hourly bound. The run itself (its booking, its
session, its process) is `actors/wake_run.py`'s.

`LaunchOnMail` is mixed into `IdentityActor` (`actors/identity.py`), which holds the state it
declares.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import attrs
import trio

from actors._runtime import Actor, ActorError, ActorRef
from actors.identity_protocol import IdentityMessage
from actors.wake_run import RunEnded
from pager.domain.delivery import ClaimPolicy

if TYPE_CHECKING:
    from actors.identity import IdentityDeps
    from actors.sessions import Attachment
    from pager.domain.wake import WakeSettings

log = logging.getLogger("pager.identity")


@attrs.frozen
class LaunchRun:
    """Asks a provider to start a wake run for the identity (docs/wake.md); the identity
    hears `RunEnded` when it is over or did not start."""

    identity: ActorRef[IdentityMessage]
    agent_id: str


class LaunchOnMail(Actor[IdentityMessage]):
    """Wake runs asked for by one identity (the state is `IdentityActor`'s)."""

    identity_id: str
    deps: IdentityDeps
    policy: ClaimPolicy
    binding: Attachment | None
    wake_settings: WakeSettings | None
    launch_pending: bool
    launch_not_before: float | None
    fruitless_runs: int

    async def _load_wake(self) -> None:
        wake = self.deps.wake
        self._take_wake(None if wake is None else await wake.settings(self.identity_id))

    def _take_wake(self, settings: WakeSettings | None) -> None:
        """The person's settings as the store holds them (None: launch on mail is off)."""
        self.wake_settings = None if self.deps.wake is None else settings
        if self.wake_settings is None:
            self.launch_not_before = None

    async def _launch(self) -> None:
        """Ask the provider for a wake run when the person turned launch on mail on, mail may
        be offered now, no session is attached anywhere, the identity's workspace is this
        broker's, and no run is going or must be waited for. The store decides the rest with
        the run's registration (the hourly bound, a session attached meanwhile)."""
        wake = self.deps.wake
        if wake is None or self.wake_settings is None or self.launch_pending:
            return
        if self.binding is not None:
            return  # attached: the ordinary wake applies
        if self.launch_not_before is not None:
            if trio.current_time() < self.launch_not_before:
                return
            self.launch_not_before = None
        now = self.deps.clock.now()
        session, implementation = await self.deps.sessions.attached(self.identity_id)
        target = await wake.target(self.identity_id, now=now)
        if session is not None or target is None or target.available == 0:
            return
        if target.workspace.host != self.deps.host:
            return  # its own broker launches it
        provider = await self.deps.providers(implementation)
        if provider is None:
            return
        self.launch_pending = True
        try:
            provider.try_cast(LaunchRun(self.ref, self.identity_id))
        except ActorError as exc:
            log.warning("provider unavailable for a wake run of %s: %s", self.identity_id, exc)
            self.launch_pending = False

    async def _run_ended(self, ended: RunEnded) -> None:
        """A run is over (or did not start): the next waits for the redelivery schedule (runs
        in a row that acknowledged nothing count as attempts) or the hourly bound."""
        self.launch_pending = False
        now = trio.current_time()
        if ended.outcome is None:
            if ended.retry_after is not None:
                self.launch_not_before = now + ended.retry_after
            return
        self.fruitless_runs = 0 if ended.acknowledged else self.fruitless_runs + 1
        delay = self.policy.redelivery.delay(max(1, self.fruitless_runs))
        self.launch_not_before = now + delay
