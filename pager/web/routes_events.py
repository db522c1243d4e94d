"""`GET /v1/events`: the operator event stream (SPEC §6), as server-sent events.

Frames: `id: <seq>`, `event: <type>`, `data: {seq, at, type, data}` for each event; control
frames carry no `id` except `ready` (see docs/events.md). Resuming: `Last-Event-ID: N` (or
`?last_event_id=N` for clients that cannot set headers) replays every retained event after N,
then continues live, with no gap and no duplicate at the boundary: the stream subscribes
first, replays up to the feed's position at that moment, and drops live events at or below
the last one replayed.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any, TypeVar

import trio
from quart import Blueprint, Response, request

from pager.domain.errors import ErrorCode, PagerError
from pager.domain.event_feed import EventFeed, EventSubscription
from pager.sse import HEARTBEAT, frame
from pager.web.routes_v1 import require_secret

#: A Last-Event-ID longer than this is refused unread (2**63 - 1 has 19 digits).
MAX_ID_DIGITS = 19
MAX_ID = 2**63 - 1
S = TypeVar("S", bound=EventSubscription)


def parse_last_event_id(header: str | None, query: str | None) -> int | None:
    """The seq to resume after: the header if sent, else the query parameter, else None."""
    if header is not None:
        text, name = header, "Last-Event-ID"
    elif query is not None:
        text, name = query, "last_event_id"
    else:
        return None
    value = text.strip(" \t")
    if not (0 < len(value) <= MAX_ID_DIGITS and value.isascii() and value.isdigit()):
        shown = value if len(value) <= 40 else value[:40] + "…"
        raise PagerError(
            ErrorCode.VALIDATION_FAILED,
            f"{name} must be the seq of the last event you received (a whole number, 0 to"
            f" replay every retained event), not {shown!r}; omit it for live events only",
            field=name,
        )
    seq = int(value)
    if seq > MAX_ID:
        raise PagerError(ErrorCode.VALIDATION_FAILED, f"{name} {seq} is out of range", field=name)
    return seq


def events_blueprint(feed: EventFeed[Any], secret: str, *, heartbeat: float) -> Blueprint:
    bp = Blueprint("v1_events", __name__, url_prefix="/v1")

    @bp.get("/events")
    async def events() -> Response:
        require_secret(secret, request.headers)
        after = parse_last_event_id(
            request.headers.get("Last-Event-ID"), request.args.get("last_event_id")
        )
        latest = await feed.latest()
        if after is not None and after > latest and not feed.closed:
            raise PagerError(
                ErrorCode.VALIDATION_FAILED,
                f"there is no event {after}: the newest is {latest}, so this log is not the"
                " one you read before (the broker's database was reset). Reconnect without"
                " Last-Event-ID and re-read GET /v1/snapshot",
                field="Last-Event-ID",
                latest=latest,
            )
        response = Response(
            subscribed_stream(feed, after, heartbeat),
            mimetype="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )
        response.timeout = None  # Quart's RESPONSE_TIMEOUT would cut the stream
        return response

    return bp


async def subscribed_stream(
    feed: EventFeed[S], after: int | None, heartbeat: float
) -> AsyncGenerator[bytes, None]:
    """`stream` on a subscription taken when the body is first read, so a client that hangs
    up before its response starts (the body is then never iterated, nor closed) leaves no
    subscription behind."""
    sub = await feed.subscribe()
    async with aclosing(stream(feed, sub, after, heartbeat)) as chunks:
        async for chunk in chunks:
            yield chunk


async def stream(
    feed: EventFeed[S], sub: S, after: int | None, heartbeat: float
) -> AsyncGenerator[bytes, None]:
    """Replay (when resuming), `ready`, then live events until the feed lets go."""
    last = sub.start  # the newest seq this client has been sent (or skipped as live-only)
    try:
        if sub.closed is not None:  # the broker began stopping before this stream did
            yield _farewell(sub, last if after is None else after)
            return
        if after is not None:
            last = after
            async with feed.reader() as reader:
                oldest = await reader.oldest()
                if after > 0 and (after < sub.start if oldest is None else oldest > after + 1):
                    yield _reset(after, oldest)
                while last < sub.start and sub.closed != "closing":
                    frames = await reader.page(last, sub.start)
                    if not frames:
                        break
                    last = frames[-1][0]
                    yield b"".join(frame for _, frame in frames)
            if sub.closed == "closing":
                yield _farewell(sub, last)
                return
            last = sub.start
        yield frame("ready", {"seq": sub.start}, id=sub.start)
        while True:
            batch: list[tuple[int, bytes]] | None = None
            with trio.move_on_after(heartbeat):
                batch = await sub.next_batch()
            if batch is None:
                yield HEARTBEAT
                continue
            if not batch:  # closed and drained
                yield _farewell(sub, last)
                return
            fresh = [frame for seq, frame in batch if seq > last]
            last = max(last, batch[-1][0])
            if fresh:
                yield b"".join(fresh)
    finally:
        feed.unsubscribe(sub)


def _reset(after: int, oldest: int | None) -> bytes:
    return frame(
        "reset",
        {
            "reason": "pruned",
            "last_event_id": after,
            "oldest": oldest,
            "message": "events after the one you resumed from were pruned (older than"
            " event_retention); re-read GET /v1/snapshot, then read on from here",
        },
    )


def _farewell(sub: EventSubscription, last: int) -> bytes:
    if sub.closed == "overflow":
        return frame(
            "overflow",
            {
                "reason": "overflow",
                "last_event_id": last,
                "buffer": sub.limit,
                "message": f"this client fell more than {sub.limit} events behind and was cut"
                f" off; reconnect with Last-Event-ID: {last} to read on",
            },
        )
    return frame(
        "closing",
        {
            "reason": "broker shutting down",
            "last_event_id": last,
            "message": f"the broker is stopping; reconnect later with Last-Event-ID: {last}",
        },
    )
