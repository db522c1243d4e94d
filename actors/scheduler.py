"""The one scheduler of identities that fall due while no actor runs for them.

An identity actor passivates when idle whatever mail waits (ARCHITECTURE.md, Ownership): its
next due time (an ack wait ends, a retry comes, a message expires) is in the store, indexed.
This task sleeps until the earliest one and activates the identities then due; the actor's
start applies what lapsed and, while it runs, it keeps its own timers. An identity that
passivates tells the scheduler its due time, so a sleep never overruns it.
"""

from __future__ import annotations

import logging
import math

import trio

from actors.identities import Identities
from pager.domain.clock import WallClock, trio_deadline
from pager.domain.errors import PagerError
from pager.store._errors import StoreFault
from pager.store.ports import Inbox

log = logging.getLogger("pager.scheduler")

#: Due identities read from the store at a time.
PAGE = 256
#: An identity that failed to start is tried again after this long, not in a tight loop.
RETRY_AFTER = 1.0


class DueScheduler:
    def __init__(self, inbox: Inbox, identities: Identities, clock: WallClock) -> None:
        self._inbox = inbox
        self._identities = identities
        self._clock = clock
        self._noted: float | None = None  # wall clock: an earlier due than the store query saw
        self._wake = trio.Event()

    def note(self, due: float | None) -> None:
        """An identity stopped with this next due time: wake by then."""
        if due is None:
            return
        if self._noted is None or due < self._noted:
            self._noted = due
            self._wake.set()

    async def run(
        self, *, task_status: trio.TaskStatus[DueScheduler] = trio.TASK_STATUS_IGNORED
    ) -> None:
        task_status.started(self)
        while True:
            self._wake = trio.Event()  # before the reads: a note from now on wakes the sleep
            self._noted = None
            try:
                failed = await self._activate_due()
                now = self._clock.now()
                later = await self._inbox.earliest_due_after(now)
            except StoreFault as exc:  # anything else is a bug: crash to the supervisor
                log.warning("the scheduler could not read the store: %s", exc)
                failed, now, later = True, self._clock.now(), None
            if failed:
                later = min(later or math.inf, now + RETRY_AFTER)
            deadline = math.inf if later is None else trio_deadline(self._clock, later)
            with trio.move_on_at(deadline):
                await self._wake.wait()

    async def _activate_due(self) -> bool:
        """Start every identity due by now that has no running actor; True if one failed."""
        now = self._clock.now()
        after: tuple[float, str] | None = None
        failed = False
        while True:
            page = await self._inbox.due(now, after=after, limit=PAGE)
            for _, agent_id in page:
                if self._identities.get(agent_id) is not None:
                    continue  # running: its own timer handles it
                try:
                    await self._identities.activate(agent_id)
                except (PagerError, StoreFault) as exc:
                    log.warning("identity %s fell due but did not start: %s", agent_id, exc)
                    failed = True
            if len(page) < PAGE:
                return failed
            after = page[-1]
