"""The TUI's reader of `GET /v1/events`, on an asyncio stream.

Textual runs on asyncio, so the stream is read there (cancelling the reading task closes the
connection); no thread is parked in a blocking read. The HTTP framing (the answer's head, a
chunked or close-delimited body) is `pager.client`'s and the event-stream format
`pager.sse`'s, shared with the other clients; this module is the asyncio I/O alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable
from typing import TypeVar
from urllib.parse import urlsplit

from pager.client import BodyReader, ResponseHead, parse_head
from pager.sse import SseEvent, SseParser
from pager.tui.errors import ApiError, Unreachable

__all__ = ["SseEvent", "address", "stream_events"]

T = TypeVar("T")
CONNECT_TIMEOUT = 3.0
#: A stream silent this long is taken for dead (the broker sends heartbeat comments far more
#: often); a stopped broker closes the connection, which is noticed at once.
IDLE_TIMEOUT = 60.0
#: An error answer's body is read up to this size.
REFUSAL_LIMIT = 64 * 1024


def address(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname or parts.port is None:
        raise Unreachable(f"{url!r} is not a broker address (http://HOST:PORT)")
    return parts.hostname, parts.port


async def stream_events(
    url: str,
    path: str,
    *,
    token: str,
    last_event_id: int | None,
    connect_timeout: float = CONNECT_TIMEOUT,
    idle_timeout: float = IDLE_TIMEOUT,
) -> AsyncIterator[SseEvent]:
    """Events until the server ends the stream (then it returns); `Unreachable` when the
    connection fails or drops mid-stream, `ApiError` when the server refuses the request."""
    host, port = address(url)
    try:
        reader, writer = await _within(connect_timeout, asyncio.open_connection(host, port))
    except (OSError, TimeoutError) as exc:
        raise Unreachable(f"{url}: {exc or 'connection timed out'}") from exc
    try:
        lines = [
            f"GET {path} HTTP/1.1",
            f"Host: {host}:{port}",
            f"Authorization: Bearer {token}",
            "Accept: text/event-stream",
            "Cache-Control: no-cache",
        ]
        if last_event_id is not None:
            lines.append(f"Last-Event-ID: {last_event_id}")
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
        await writer.drain()
        head = await _read_head(reader, idle_timeout)
        body = BodyReader(head)
        if head.status != 200:
            raise await _refusal(reader, head, body)
        parser = SseParser()
        while not body.done and (data := await _within(idle_timeout, reader.read(65536))):
            for event in parser.feed(body.feed(data)):
                yield event
    except (
        OSError,
        TimeoutError,
        asyncio.IncompleteReadError,
        asyncio.LimitOverrunError,
        ValueError,
    ) as exc:
        raise Unreachable(f"{url}: the event stream dropped ({exc or type(exc).__name__})") from exc
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


async def _within(seconds: float, awaitable: Awaitable[T]) -> T:
    """`asyncio.wait_for`, without its flaw in Python 3.11: a cancellation arriving just as the
    awaited read completes is lost (fixed in 3.12), and a cancelled stream then reads on
    forever, so quitting the app, or the end of a test, waits on it without end."""
    async with asyncio.timeout(seconds):
        return await awaitable


async def _read_head(reader: asyncio.StreamReader, idle: float) -> ResponseHead:
    try:
        head = await _within(idle, reader.readuntil(b"\r\n\r\n"))
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            raise Unreachable("the connection closed without an answer") from None
        raise
    try:
        return parse_head(head)
    except ValueError as exc:
        raise Unreachable(str(exc)) from None


async def _refusal(
    reader: asyncio.StreamReader, head: ResponseHead, body: BodyReader
) -> ApiError | Unreachable:
    raw = b""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(CONNECT_TIMEOUT):
            while not body.done and len(raw) < REFUSAL_LIMIT and (data := await reader.read(65536)):
                raw += body.feed(data)
    try:
        error = json.loads(raw).get("error") or {}
    except (ValueError, AttributeError):
        error = {}
    code = str(error.get("code") or "http_error")
    message = str(error.get("message") or f"GET /v1/events answered {head.status}")
    if head.status >= 500:
        return Unreachable(message)
    return ApiError(head.status, code, message)
