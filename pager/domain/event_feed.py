"""The operator event feed as the web edge reads it (`GET /v1/events`): what a stream
subscribes to, replays from and waits on. The broker's feed (`actors/events.py`) is one; the
composition root hands it to the edge, which never learns what runs it.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Protocol, TypeVar

#: One event as sent: its seq and its server-sent-events frame.
Frame = tuple[int, bytes]


class EventSubscription(Protocol):
    """One client's place in the feed: live events after `start`, through a buffer of `limit`
    events; `closed` says why the feed let go of it ("overflow" or "closing"), None while not."""

    @property
    def start(self) -> int: ...

    @property
    def limit(self) -> int: ...

    @property
    def closed(self) -> str | None: ...

    async def next_batch(self) -> list[Frame]:
        """Everything buffered (waits while empty); [] once closed and drained."""
        ...


class EventReplay(Protocol):
    """Retained events read for one replay, on a connection of its own."""

    async def oldest(self) -> int | None:
        """The lowest retained seq; None when nothing is retained."""
        ...

    async def page(self, after: int, upto: int) -> list[Frame]:
        """Retained events after `after` and up to `upto`, oldest first, one page at most."""
        ...


S = TypeVar("S", bound=EventSubscription)


class EventFeed(Protocol[S]):
    """The committed events in seq order, fanned out to subscriptions of type `S`."""

    @property
    def closed(self) -> bool:
        """True once the broker began stopping: every stream gets `closing`."""
        ...

    async def latest(self) -> int:
        """The newest seq committed so far (what a subscription made now would start at)."""
        ...

    async def subscribe(self, buffer: int | None = None) -> S:
        """A subscription to every event committed from now on (after its `start`)."""
        ...

    def unsubscribe(self, sub: S) -> None: ...

    def reader(self) -> AbstractAsyncContextManager[EventReplay]:
        """A replay's own reader (a long replay never holds up the feed)."""
        ...
