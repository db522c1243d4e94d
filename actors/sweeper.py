"""The sweeper: applies the retention windows of SPEC §9 on a timer.

Each sweep is planned on a read snapshot (no write waits for its scan of every identity) and
applied in steps of `APPLY_STEP` identities, each step checked again in its own transaction (an
identity that attached since the plan is left alone); the actors of identities to reap stop
first (`Identities.retiring`), so no actor works on an inbox the store is emptying.
Then idempotency keys and operator events are pruned. It sweeps right after it starts, so the
first sweep after an upgrade or a restart applies every window that passed while the broker
was down, then when the next known window ends, or after `period` at the latest (detaches
since the last sweep start new windows it has not seen yet).
"""

from __future__ import annotations

import logging
from typing import Any

import attrs
import trio

from actors._runtime import Actor, Reply
from actors.identities import Identities
from actors.timers import TimerService
from pager.domain.clock import WallClock, trio_deadline
from pager.domain.hosts import HostBoard
from pager.domain.retention import Action, Applied, Due, Pruned
from pager.domain.windows import Windows
from pager.store import StoreFault
from pager.store.ports import AlwaysLead, Leadership, Retention

log = logging.getLogger("pager.sweeper")

#: Sweeps run at least this often, and never more often than `MIN_PERIOD` apart on a timer.
MAX_PERIOD = 60.0
MIN_PERIOD = 0.01
#: Identities one sweep plans for; more are taken by the next sweep at once.
BATCH = 500
#: Identities archived or reaped in one transaction: a sweep of thousands never holds the
#: writer for long, and sends and registrations go on between its steps.
APPLY_STEP = 2
#: After each step the sweeper waits this many times the step's duration.
SWEEP_YIELDS = 3


def sweep_period(windows: Windows) -> float:
    """The longest wait between sweeps: half a lease (ephemeral identities are reaped when it
    lapses) or the shortest retention window if that is shorter (an identity that detaches
    after a sweep is not known to the timer until the next one), at most a minute, never a
    busy loop."""
    shortest = min(
        windows.lease_ttl / 2,
        windows.unused,
        windows.resumable_retention,
        windows.named_archive,
        windows.archive_retention,
    )
    return max(min(shortest, MAX_PERIOD), MIN_PERIOD)


@attrs.frozen
class SweepNow:
    """Sweep now (the timer, or anyone wanting the windows applied); answers `SweepReport`."""


@attrs.frozen
class SweepReport:
    applied: list[Applied]
    pruned: Pruned


SweeperMessage = SweepNow


@attrs.define
class SweeperDeps:
    retention: Retention
    identities: Identities
    timers: TimerService
    clock: WallClock
    windows: Windows
    #: With a shared store, only the leader sweeps, and it ends gone hosts' lapsed sessions.
    leadership: Leadership = attrs.Factory(AlwaysLead)
    hosts: HostBoard | None = None


class SweeperActor(Actor[SweeperMessage]):
    mailbox_size = 16

    def __init__(self, deps: SweeperDeps) -> None:
        self.deps = deps
        self.period = sweep_period(deps.windows)
        self.sweeps = 0

    async def on_start(self) -> None:
        # The first sweep (windows that passed while the broker was down) runs as soon as the
        # actor does, not before: at 100,000 identities its scan would delay readiness ~0.5 s.
        self.deps.timers.schedule(("sweeper",), trio.current_time(), self.ref, SweepNow())

    async def on_stop(self) -> None:
        self.deps.timers.cancel(("sweeper",))

    async def handle(self, message: SweeperMessage, reply: Reply[Any] | None) -> None:
        match message:
            case SweepNow():
                await self._sweep(reply)
            case _:
                self.unhandled(message)

    async def _sweep(self, reply: Reply[Any] | None) -> None:
        now = self.deps.clock.now()
        windows, retention = self.deps.windows, self.deps.retention
        applied: list[Applied] = []
        try:
            if not await self.deps.leadership.lead():
                # Another broker sharing the store sweeps; ask again next period, to take
                # over if it died (its lock went with its connection).
                if reply is not None:
                    reply.send(SweepReport([], Pruned(0, 0)))
                self._arm(None, more=False)
                return
            hosts = self.deps.hosts
            gone = [] if hosts is None else [h.name for h in hosts.views() if not h.alive]
            if gone:
                for agent_id in await retention.expire_sessions_of(gone, now=now):
                    log.info("identity %s: its session ended (its host is gone)", agent_id)
            plan = await retention.plan(now=now, windows=windows, limit=BATCH)
            for step in _by_identity(plan.due, APPLY_STEP):
                began = trio.current_time()
                reaping = [due.agent_id for due in step if due.action is Action.REAP]
                # Their actors stop first: no actor works on an inbox the store is emptying.
                async with self.deps.identities.retiring(reaping):
                    done = await retention.apply(step, now=now, windows=windows)
                applied.extend(done)
                # Three times as long to everything else: a sweep of thousands takes at most a
                # quarter of the broker's time while it lasts (requests go first).
                await trio.sleep(SWEEP_YIELDS * (trio.current_time() - began))
            pruned = await retention.prune(now=now, windows=windows)
        except StoreFault as exc:
            # The store is full, busy, wedged or unreachable: the windows wait for the next
            # turn and the broker goes on. (Any other error is a bug, and crashes the sweeper.)
            log.warning("sweep failed: %s", exc)
            if reply is not None:
                reply.fail(exc)
            self._arm(None, more=False)
            return
        self.sweeps += 1
        for one in applied:
            log.info("identity %s: %s (%s)", one.agent_id, one.action.value, one.reason)
        if applied or pruned.idempotency or pruned.events or pruned.refusals:
            log.info(
                "sweep: %d archived, %d reaped, %d idempotency keys, %d events and %d refusal"
                " counts pruned",
                sum(1 for a in applied if a.action is Action.ARCHIVE),
                sum(1 for a in applied if a.action is Action.REAP),
                pruned.idempotency,
                pruned.events,
                pruned.refusals,
            )
        if reply is not None:
            reply.send(SweepReport(applied, pruned))
        self._arm(plan.next_due, more=plan.more)

    def _arm(self, next_due: float | None, *, more: bool) -> None:
        now = trio.current_time()
        deadline = now + self.period
        if more:
            deadline = now + MIN_PERIOD
        elif next_due is not None:
            deadline = min(
                deadline, max(trio_deadline(self.deps.clock, next_due), now + MIN_PERIOD)
            )
        self.deps.timers.schedule(("sweeper",), deadline, self.ref, SweepNow())


def _by_identity(due: list[Due], identities: int) -> list[list[Due]]:
    """The plan's steps in chunks of whole identities (an identity's steps stay together)."""
    chunks: list[list[Due]] = []
    seen: set[str] = set()
    for step in due:
        if step.agent_id not in seen and len(seen) == identities:
            seen = set()
        if not seen:
            chunks.append([])
        seen.add(step.agent_id)
        chunks[-1].append(step)
    return chunks
