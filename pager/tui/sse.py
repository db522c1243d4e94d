"""A small Server-Sent Events reader for `GET /v1/events`, on an asyncio stream.

Textual runs on asyncio, so the stream is read there (cancelling the reading task closes the
connection); no thread is parked in a blocking read. HTTP/1.1 with either a chunked or a
close-delimited body. `SseParser` is the line protocol alone, without any I/O.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass
from typing import TypeVar
from urllib.parse import urlsplit

from pager.tui.errors import ApiError, Unreachable

T = TypeVar("T")
CONNECT_TIMEOUT = 3.0
#: A stream silent this long is taken for dead (the broker sends heartbeat comments far more
#: often); a stopped broker closes the connection, which is noticed at once.
IDLE_TIMEOUT = 60.0


@dataclass(frozen=True)
class SseEvent:
    id: str | None
    event: str
    data: str

    def json(self) -> object:
        try:
            return json.loads(self.data) if self.data else None
        except ValueError:
            return None


class SseParser:
    """Feed it lines (without their end of line); it returns an event at each blank line."""

    def __init__(self) -> None:
        self._id: str | None = None
        self._event = ""
        self._data: list[str] = []

    def feed(self, line: str) -> SseEvent | None:
        if not line:
            if not self._data and not self._event:
                return None
            event = SseEvent(self._id, self._event or "message", "\n".join(self._data))
            self._id, self._event, self._data = None, "", []
            return event
        if line.startswith(":"):  # a comment: heartbeats
            return None
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._id = value
        return None  # `retry` and unknown fields are ignored


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
        status, headers = await _read_head(reader, idle_timeout)
        if status != 200:
            raise await _refusal(reader, status, headers)
        parser = SseParser()
        body = _chunked_lines if headers.get("transfer-encoding") == "chunked" else _plain_lines
        async for line in body(reader, idle_timeout):
            event = parser.feed(line)
            if event is not None:
                yield event
    except (OSError, TimeoutError, asyncio.IncompleteReadError, ValueError) as exc:
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


async def _read_head(reader: asyncio.StreamReader, idle: float) -> tuple[int, dict[str, str]]:
    status_line = await _within(idle, reader.readline())
    if not status_line:
        raise Unreachable("the connection closed without an answer")
    try:
        status = int(status_line.split(b" ", 2)[1])
    except (IndexError, ValueError):
        raise Unreachable(f"not an HTTP answer: {status_line[:60]!r}") from None
    headers: dict[str, str] = {}
    while True:
        line = await _within(idle, reader.readline())
        if line in (b"\r\n", b"\n", b""):
            return status, headers
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip().lower()


async def _refusal(
    reader: asyncio.StreamReader, status: int, headers: dict[str, str]
) -> ApiError | Unreachable:
    size = int(headers.get("content-length", "0") or 0)
    raw = await _within(CONNECT_TIMEOUT, reader.readexactly(size)) if size else b""
    try:
        error = json.loads(raw).get("error") or {}
    except (ValueError, AttributeError):
        error = {}
    code = str(error.get("code") or "http_error")
    message = str(error.get("message") or f"GET /v1/events answered {status}")
    if status >= 500:
        return Unreachable(message)
    return ApiError(status, code, message)


async def _plain_lines(reader: asyncio.StreamReader, idle: float) -> AsyncIterator[str]:
    while True:
        line = await _within(idle, reader.readline())
        if not line:
            return
        yield line.decode("utf-8", errors="replace").rstrip("\r\n")


async def _chunked_lines(reader: asyncio.StreamReader, idle: float) -> AsyncIterator[str]:
    pending = b""
    while True:
        size_line = await _within(idle, reader.readline())
        if not size_line:
            return
        size = int(size_line.split(b";")[0].strip() or b"0", 16)
        if size == 0:
            return
        chunk = await _within(idle, reader.readexactly(size + 2))
        pending += chunk[:-2]  # the chunk's own CRLF
        *complete, pending = pending.split(b"\n")
        for line in complete:
            yield line.decode("utf-8", errors="replace").rstrip("\r")
