"""The sweeper: applies the retention windows of SPEC §9 on a timer.

Identities are archived and reaped by the directory (`SweepIdentities`), which alone knows who
is attached and alone may end sessions; the sweeper asks for that, then prunes idempotency keys
and operator events itself. It sweeps right after it starts, so the first sweep after an
upgrade or a restart applies every window that passed while the broker was down, then when the
next known window ends, or after `period` at the latest (detaches since the last sweep start
new windows it has not seen yet).
"""

from __future__ import annotations

import logging
import sqlite3
from typing import Any

import attrs
import trio

from actors._runtime import Actor, ActorError, ActorRef, Reply
from actors.checkpoint import Checkpoint
from actors.directory import DirectoryMessage, SweepIdentities, SweepOutcome
from actors.timers import TimerService
from pager.config import Windows
from pager.domain.clock import WallClock, trio_deadline
from pager.domain.errors import PagerError
from pager.store import messaging as ms

log = logging.getLogger("pager.sweeper")

#: Sweeps run at least this often, and never more often than `MIN_PERIOD` apart on a timer.
MAX_PERIOD = 60.0
MIN_PERIOD = 0.01
#: Identities archived or reaped in one transaction; more are taken by the next sweep at once.
BATCH = 500
#: The directory's answer to a sweep (one store transaction) is awaited this long.
SWEEP_TIMEOUT = 120.0


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
    applied: list[ms.Applied]
    pruned: ms.Pruned


SweeperMessage = SweepNow


@attrs.define
class SweeperDeps:
    directory: ActorRef[DirectoryMessage]
    checkpoint: Checkpoint
    timers: TimerService
    clock: WallClock
    windows: Windows


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
        windows = self.deps.windows
        applied: list[ms.Applied] = []
        next_due: float | None = None
        more = False
        try:
            outcome: SweepOutcome = await self.deps.directory.call(
                SweepIdentities(BATCH), timeout=SWEEP_TIMEOUT
            )
            applied, next_due, more = outcome.applied, outcome.next_due, outcome.more

            def housekeeping(conn: sqlite3.Connection) -> ms.Pruned:
                return ms.prune(conn, now, windows)

            pruned = await self.deps.checkpoint.write(housekeeping, heavy=True)
        except (ActorError, PagerError) as exc:
            # The directory or the store is restarting or wedged: try again on the next turn.
            log.warning("sweep failed: %s", exc)
            if reply is not None:
                reply.fail(exc)
            self._arm(None, more=False)
            return
        self.sweeps += 1
        if applied or pruned.idempotency or pruned.events:
            log.info(
                "sweep: %d archived, %d reaped, %d idempotency keys and %d events pruned",
                sum(1 for a in applied if a.action is ms.Action.ARCHIVE),
                sum(1 for a in applied if a.action is ms.Action.REAP),
                pruned.idempotency,
                pruned.events,
            )
        if reply is not None:
            reply.send(SweepReport(applied, pruned))
        self._arm(next_due, more=more)

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
