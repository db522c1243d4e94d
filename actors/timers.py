"""One timer task for many actors: `schedule(key, deadline, ref, message)` casts `message` to
`ref` at `deadline` (trio time). A new schedule for the same key replaces the old one, so an
actor keeps at most one pending timer per purpose without owning a task for it."""

from __future__ import annotations

import heapq
import itertools
import logging
from collections.abc import Hashable
from typing import Any

import trio

from actors._runtime import ActorError, ActorRef

log = logging.getLogger("pager.timers")


class TimerService:
    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Hashable]] = []
        self._entries: dict[Hashable, tuple[float, int, ActorRef[Any], object]] = {}
        self._counter = itertools.count()
        self._changed = trio.Event()

    def schedule(self, key: Hashable, deadline: float, ref: ActorRef[Any], message: object) -> None:
        """Cast `message` to `ref` at `deadline`, replacing any timer under `key`."""
        current = self._entries.get(key)
        if current is not None and current[0] == deadline and current[2] is ref:
            return
        serial = next(self._counter)
        self._entries[key] = (deadline, serial, ref, message)
        heapq.heappush(self._heap, (deadline, serial, key))
        if len(self._heap) > 2 * len(self._entries) + 64:
            # Replaced entries are skipped lazily; rebuild before they pile up under load.
            self._heap = [(d, n, k) for k, (d, n, _, _) in self._entries.items()]
            heapq.heapify(self._heap)
        if self._heap[0][1] == serial:
            self._changed.set()  # an earlier deadline than the one being slept on

    def cancel(self, key: Hashable) -> None:
        self._entries.pop(key, None)  # its heap entry is skipped when it surfaces

    def pending(self, key: Hashable) -> float | None:
        entry = self._entries.get(key)
        return None if entry is None else entry[0]

    async def run(
        self, *, task_status: trio.TaskStatus[TimerService] = trio.TASK_STATUS_IGNORED
    ) -> None:
        task_status.started(self)
        while True:
            self._changed = trio.Event()
            deadline = self._next_deadline()
            with trio.move_on_at(deadline):
                await self._changed.wait()
            self._fire_due()

    def _next_deadline(self) -> float:
        while self._heap:
            deadline, serial, key = self._heap[0]
            entry = self._entries.get(key)
            if entry is not None and entry[1] == serial:
                return deadline
            heapq.heappop(self._heap)  # replaced or cancelled
        return float("inf")

    def _fire_due(self) -> None:
        now = trio.current_time()
        while self._heap and self._heap[0][0] <= now:
            _, serial, key = heapq.heappop(self._heap)
            entry = self._entries.get(key)
            if entry is None or entry[1] != serial:
                continue
            del self._entries[key]
            ref, message = entry[2], entry[3]
            try:
                ref.try_cast(message)
            except ActorError as exc:
                # A stopped actor needs no timer; a full mailbox will be re-armed by the actor's
                # next message, since every handler re-computes its deadline.
                log.debug("timer %r for %s not delivered: %s", key, ref.name, exc)
