"""The operator event feed (SPEC §6): events read back from the log, fanned out in seq order.

Writers record events in the same transaction as the change they describe; the checkpoint
tells a `CommitSignal` after each committed batch (a counter and a parking lot: no DB work on
its path). One feed task then reads the new rows through its own read-only connection (WAL:
it never blocks the writer) and offers them, rendered once as SSE frames, to every subscriber.

Each subscriber has a bounded buffer. Offering never waits: a subscriber whose buffer cannot
take a batch is cut off (`overflow`) and dropped, so a slow client never slows the feed, the
other clients, or the broker. Because events come from the log by seq, a client that
reconnects with the last seq it saw misses nothing and sees nothing twice.

With no subscriber the feed reads nothing; the next subscriber first brings its position up
to the newest seq, so a live-only client starts at "now".
"""

from __future__ import annotations

import json
import logging
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Protocol

import trio

from actors._runtime import off_loop
from pager.sse import text_frame
from pager.store._errors import StoreFault
from pager.store.ports import EventLog

log = logging.getLogger("pager.events")


class OpenEventLog(Protocol):
    """Opens a reader of the event log (blocking); `inline`: its calls run on the loop."""

    def __call__(self, *, inline: bool = ...) -> EventLog: ...


#: Events a subscriber may have waiting before it is cut off (`[limits] event_buffer`).
DEFAULT_BUFFER = 1024
#: Rows read from the log in one query (the feed and a replay alike).
PAGE = 512
#: After handing out a batch, the feed waits this long per subscriber before it reads again.
#: Each batch costs every stream one write (a syscall and a wakeup of its client, ~50-100 µs),
#: so pacing by the number of streams bounds what fan-out costs the broker however many are
#: open: a burst of events reaches 50 streams in batches at most 50 ms apart instead of one
#: write per commit each, while an event after a quiet spell still goes out at once.
PACE = 0.001
#: Seconds before the feed reads again after the store failed a read.
RETRY_AFTER = 1.0

#: One rendered event: its seq and its SSE frame.
Frame = tuple[int, bytes]


def render(seq: int, at: str, kind: str, data: str) -> bytes:
    """The SSE frame of one event; `data` is the stored JSON text, embedded as is."""
    payload = (
        f'{{"seq": {seq}, "at": {json.dumps(at)}, "type": {json.dumps(kind)}, "data": {data}}}'
    )
    return text_frame(kind, payload, id=seq)


def _frames(rows: list[tuple[int, str, str, str]]) -> list[Frame]:
    return [(row[0], render(*row)) for row in rows]


class CommitSignal:
    """What the checkpoint tells after each committed write batch: a count that moves."""

    def __init__(self) -> None:
        self.count = 0
        self._lot = trio.lowlevel.ParkingLot()

    def notify(self) -> None:
        self.count += 1
        self._lot.unpark_all()

    async def wait_beyond(self, seen: int) -> None:
        """Return once a commit after `seen` (a `count` read earlier) was told."""
        while self.count == seen:
            await self._lot.park()


class Subscription:
    """One client's place in the feed: live events after `start`, through a bounded buffer."""

    def __init__(self, start: int, limit: int) -> None:
        self.start = start
        self.limit = limit
        self.closed: str | None = None  # why the feed let go of it: "overflow" or "closing"
        self._items: deque[Frame] = deque()
        self._lot = trio.lowlevel.ParkingLot()

    def offer(self, frames: list[Frame]) -> bool:
        """Take the frames, or close with `overflow` when they do not fit; never waits."""
        if self.closed is not None:
            return False
        if len(self._items) + len(frames) > self.limit:
            self.close("overflow")
            return False
        self._items.extend(frames)
        self._lot.unpark_all()
        return True

    def close(self, reason: str) -> None:
        if self.closed is None:
            self.closed = reason
        self._lot.unpark_all()

    async def next_batch(self) -> list[Frame]:
        """Everything buffered (waits while empty); [] once closed and drained."""
        while not self._items and self.closed is None:
            await self._lot.park()
        items = list(self._items)
        self._items.clear()
        return items


class EventFeed:
    """Reads committed events in seq order and fans them out to subscribers.

    `connect` opens the event log for reading (the feed's own, and one per replay). With
    `inline`, its reads run on the event loop (tests on trio's mock clock only).
    """

    def __init__(
        self,
        connect: OpenEventLog,
        commits: CommitSignal,
        *,
        buffer: int = DEFAULT_BUFFER,
        inline: bool = False,
        page: int = PAGE,
        pace: float = PACE,
    ) -> None:
        self._connect = connect
        self._commits = commits
        self.buffer = buffer
        self._inline = inline
        self._page = page
        self._pace = pace
        self._conn: EventLog | None = None
        self._lock = trio.Lock()  # one user of the connection at a time
        self._subs: set[Subscription] = set()
        self._wanted = trio.lowlevel.ParkingLot()  # the loop waits here while nobody listens
        self._fresh_at: int | None = None  # the commit count the position was last read at
        self._closed = False
        #: Every event with a seq up to this one was offered to every current subscriber.
        self.position = 0

    @property
    def subscribers(self) -> int:
        return len(self._subs)

    async def _open(self) -> EventLog:
        """A new reader of the log (opening it blocks: off the loop)."""
        inline = self._inline
        return await off_loop(lambda: self._connect(inline=inline), inline=inline)

    # -- running ---------------------------------------------------------------------------

    async def run(
        self,
        *,
        shutdown: Callable[[], Awaitable[object]] | None = None,
        task_status: trio.TaskStatus[EventFeed] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve until cancelled; `shutdown` returning closes every stream (`closing`)."""
        self._conn = await self._open()
        try:
            await self._sync()
            async with trio.open_nursery() as nursery:
                if shutdown is not None:
                    nursery.start_soon(self._close_on, shutdown)
                task_status.started(self)
                await self._loop()
        finally:
            self.close_all("closing")
            conn, self._conn = self._conn, None
            if conn is not None:
                await conn.close()

    async def _close_on(self, shutdown: Callable[[], Awaitable[object]]) -> None:
        await shutdown()
        self.close_all("closing")

    def close_all(self, reason: str) -> None:
        """End every stream now (and every later one at once): the broker is stopping."""
        self._closed = True
        for sub in self._subs:
            sub.close(reason)
        self._subs.clear()

    async def _loop(self) -> None:
        while True:
            if not self._subs:
                await self._wanted.park()
                continue
            seen = self._commits.count
            try:
                handed = await self._sync()
            except StoreFault as exc:  # anything else is a bug: crash to the supervisor
                # The store's trouble (busy, a failing disk): the streams wait, the broker
                # goes on, and the read is tried again.
                log.warning("the event feed could not read the store: %s", exc)
                await trio.sleep(RETRY_AFTER)
                continue
            if handed and self._pace > 0:
                await trio.sleep(self._pace * len(self._subs))
            await self._commits.wait_beyond(seen)

    async def _sync(self) -> int:
        """Bring `position` up to the log: offer new events to the subscribers, or, with
        none, just note the newest seq. The number of events handed out."""
        handed = 0
        async with self._lock:
            conn = self._conn
            assert conn is not None, "the feed is used before it started"
            count = self._commits.count
            if count == self._fresh_at:
                return 0
            if not self._subs:
                latest = await conn.latest_seq()
                self.position = max(self.position, latest)
            else:
                while True:
                    page = self._page
                    rows = await conn.rows_after(self.position, page)
                    if rows:
                        self._fan_out(_frames(rows))
                        handed += len(rows)
                    if len(rows) < page:
                        break
            self._fresh_at = count
        return handed

    def _fan_out(self, frames: list[Frame]) -> None:
        self.position = frames[-1][0]
        cut = [sub for sub in self._subs if not sub.offer(frames)]
        for sub in cut:
            self._subs.discard(sub)
            log.warning(
                "an event stream fell %d events behind and was cut off (%s)", sub.limit, sub.closed
            )

    # -- subscribers -----------------------------------------------------------------------

    async def subscribe(self, buffer: int | None = None) -> Subscription:
        """A subscription to every event committed from now on (after its `start`)."""
        if self._closed:
            sub = Subscription(self.position, buffer or self.buffer)
            sub.close("closing")
            return sub
        await self._sync()
        sub = Subscription(self.position, buffer or self.buffer)
        if self._closed:  # the broker began stopping while we read
            sub.close("closing")
            return sub
        self._subs.add(sub)
        self._wanted.unpark_all()
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        self._subs.discard(sub)

    @property
    def closed(self) -> bool:
        """True once the broker began stopping: every stream gets `closing`."""
        return self._closed

    async def latest(self) -> int:
        """The newest seq committed so far (what a subscription made now would start at)."""
        await self._sync()
        return self.position

    @asynccontextmanager
    async def reader(self) -> AsyncIterator[Reader]:
        """A replay's own read-only connection (a long replay never holds up the feed)."""
        conn = await self._open()
        try:
            yield Reader(conn, page=self._page)
        finally:
            await conn.close()


class Reader:
    """Reads retained events for one replay."""

    def __init__(self, conn: EventLog, *, page: int) -> None:
        self._conn = conn
        self._page = page

    async def oldest(self) -> int | None:
        """The lowest retained seq; None when nothing is retained."""
        return await self._conn.oldest_seq()

    async def page(self, after: int, upto: int) -> list[Frame]:
        """Retained events after `after` and up to `upto`, oldest first, one page at most."""
        rows = await self._conn.rows_after(after, self._page)
        return _frames([row for row in rows if row[0] <= upto])
