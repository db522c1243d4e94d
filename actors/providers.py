"""Providers, one per implementation in use, under the broker's `providers` supervisor.

Each implementation's provider runs in a small supervisor of its own: a provider that crashes
is restarted; one that keeps crashing exceeds that supervisor's intensity, and the
implementation is disabled (logged, and recorded as an operator event) while every other
implementation's provider and the rest of the broker keep working.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from actors._runtime import ActorRef
from actors.identity_delivery import ProviderMessage
from supervisors import ChildSpec, Restart, Strategy, Supervisor, SupervisorGaveUp

log = logging.getLogger("pager.providers")

#: A provider start function: runs the provider actor, `task_status.started(ref)` when ready.
ProviderStart = Callable[..., Awaitable[None]]

#: Restarts of one implementation's provider before it is disabled.
PROVIDER_MAX_RESTARTS = 3
PROVIDER_PERIOD = 60.0


class ProviderHub:
    """Starts an implementation's provider on first use and hands out its current ref."""

    def __init__(
        self,
        supervisor: Supervisor,
        factory: Callable[[str], ProviderStart],
        *,
        on_disabled: Callable[[str, str], Awaitable[None]] | None = None,
        max_restarts: int = PROVIDER_MAX_RESTARTS,
        period: float = PROVIDER_PERIOD,
    ) -> None:
        self.supervisor = supervisor
        self.factory = factory
        self.on_disabled = on_disabled
        self.max_restarts = max_restarts
        self.period = period
        self.disabled: dict[str, str] = {}  # implementation -> why
        self._lock = trio.Lock()

    async def get(self, implementation: str) -> ActorRef[ProviderMessage] | None:
        """The running provider of `implementation`, or None while it is disabled."""
        if implementation in self.disabled:
            return None
        child_id = f"provider:{implementation}"
        async with self._lock:
            try:
                inner = self.supervisor.started_value(child_id)
            except KeyError:
                inner = await self.supervisor.start_child(
                    ChildSpec(child_id, self._guarded(implementation), restart=Restart.TEMPORARY)
                )
        if implementation in self.disabled or not isinstance(inner, Supervisor):
            return None
        try:
            ref: Any = inner.started_value("actor")
        except KeyError:
            return None
        return ref if isinstance(ref, ActorRef) and ref.alive else None

    def _guarded(self, implementation: str) -> ProviderStart:
        async def run(*, task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
            inner = Supervisor(
                f"provider:{implementation}",
                [ChildSpec("actor", self.factory(implementation))],
                strategy=Strategy.ONE_FOR_ONE,
                max_restarts=self.max_restarts,
                period=self.period,
            )
            try:
                await inner.run(task_status=task_status)
            except SupervisorGaveUp as exc:
                reason = f"kept crashing: {exc.last_error!r}"
                self.disabled[implementation] = reason
                log.error("provider for %s disabled: %s", implementation, reason)
                if self.on_disabled is not None:
                    with trio.CancelScope(shield=True):
                        await self.on_disabled(implementation, reason)

        return run


def disabled_event(implementation: str, reason: str) -> tuple[str, dict[str, object]]:
    """The operator event recorded when a provider is disabled: (type, data)."""
    return "provider.disabled", {"implementation": implementation, "reason": reason}
