"""Server-sent events (`text/event-stream`, the WHATWG HTML "server-sent events" format) without
any I/O: the one parser of every client that reads an event stream (the wrapper's lease holder,
`pager mcp`, the TUI) and the one frame builder of the broker's streams.

Stdlib only and cheap to import (no trio, no typing, no dataclasses), so that a command that
runs on every prompt could read a stream with it too. The HTTP around a stream (the answer's
head, a chunked body) is `pager.client`'s.
"""

from __future__ import annotations

import codecs
import json


class SseEvent:
    """One dispatched event.

    `event` is the frame's `event` field ("message" when it names none); `data` its `data`
    lines joined with "\\n"; `id` the frame's own `id` field (None when it has none: the
    broker's control frames carry none; `SseParser.last_id` keeps the last one seen, which
    is what a reconnecting client sends as `Last-Event-ID`); `retry` the frame's own `retry`
    field in milliseconds, if any."""

    __slots__ = ("data", "event", "id", "retry")

    id: str | None
    event: str
    data: str
    retry: int | None

    def __init__(self, id: str | None, event: str, data: str, retry: int | None = None) -> None:
        object.__setattr__(self, "id", id)
        object.__setattr__(self, "event", event)
        object.__setattr__(self, "data", data)
        object.__setattr__(self, "retry", retry)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"SseEvent is immutable: cannot set {name!r}")

    def _fields(self) -> tuple[str | None, str, str, int | None]:
        return (self.id, self.event, self.data, self.retry)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SseEvent):
            return NotImplemented
        return self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return (
            f"SseEvent(id={self.id!r}, event={self.event!r}, data={self.data!r},"
            f" retry={self.retry!r})"
        )

    def json(self) -> object:
        """`data` as JSON, or None when it is empty or not JSON."""
        try:
            return json.loads(self.data) if self.data else None
        except ValueError:
            return None


class SseParser:
    """An incremental event-stream parser: `feed` it the body's bytes as they arrive (or
    `feed_text` decoded text, or `feed_line` one line without its end: one of the three per
    parser), get the events that became complete.

    Per the format: lines end with CRLF, LF or CR (a CRLF split between two feeds is one line
    end); a UTF-8 byte order mark at the very start is skipped; a line starting with `:` is a
    comment (heartbeats); `field: value` loses one space after the colon, and a line without a
    colon is a field with an empty value; `data` lines accumulate, `event`, `id` (unless it
    holds a NUL) and `retry` (ASCII digits only) set theirs, other fields are ignored; a blank
    line dispatches the event, if it has any `data` line (a frame without one dispatches
    nothing; its `id` and `retry` still count). An unfinished last frame is never dispatched.
    """

    __slots__ = (
        "_data",
        "_decoder",
        "_event",
        "_id",
        "_pending",
        "_retry",
        "_skip_lf",
        "_started",
        "last_id",
        "retry",
    )

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._pending = ""  # the unfinished last line
        self._started = False  # a byte order mark counts only at the very start
        self._skip_lf = False  # the text so far ended in CR: a LF next belongs to it
        self._event = ""
        self._data: list[str] = []
        self._id: str | None = None
        self._retry: int | None = None
        #: The last `id` the stream set ("" before any): the `Last-Event-ID` to resume from.
        self.last_id = ""
        #: The reconnection time the stream asked for last (`retry`, ms), if it did.
        self.retry: int | None = None

    def feed(self, data: bytes) -> list[SseEvent]:
        """The events completed by `data`, the next bytes of the stream (split anywhere)."""
        return self.feed_text(self._decoder.decode(data))

    def feed_text(self, text: str) -> list[SseEvent]:
        """The events completed by `text`, the next characters of the stream."""
        if not text:
            return []
        if not self._started:
            self._started = True
            text = text.removeprefix("\ufeff")
        if self._skip_lf:
            self._skip_lf = False
            if text[:1] == "\n":
                text = text[1:]
        buffer = self._pending + text
        if "\r" in buffer:
            trailing_cr = buffer.endswith("\r")
            if trailing_cr:  # a line end now, whatever follows
                buffer = buffer[:-1]
            buffer = buffer.replace("\r\n", "\n").replace("\r", "\n")
            if trailing_cr:
                buffer += "\n"
                self._skip_lf = True
        *lines, self._pending = buffer.split("\n")
        events = []
        for line in lines:
            event = self._line(line)
            if event is not None:
                events.append(event)
        return events

    def feed_line(self, line: str) -> SseEvent | None:
        """The event a line (without its line end) completes, if it does."""
        if not self._started:
            self._started = True
            line = line.removeprefix("\ufeff")
        return self._line(line)

    def _line(self, line: str) -> SseEvent | None:
        if not line:
            return self._dispatch()
        if line[0] == ":":  # a comment: heartbeats
            return None
        name, colon, value = line.partition(":")
        if colon and value[:1] == " ":
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._id = self.last_id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            self._retry = self.retry = int(value)
        return None

    def _dispatch(self) -> SseEvent | None:
        event = None
        if self._data:
            event = SseEvent(self._id, self._event or "message", "\n".join(self._data), self._retry)
        self._event, self._data, self._id, self._retry = "", [], None, None
        return event


#: A comment frame that keeps an idle stream visibly alive.
HEARTBEAT = b": heartbeat\n\n"


def frame(event: str, data: object, *, id: int | str | None = None) -> bytes:
    """One event as an SSE frame: `data` as JSON, an optional `id`."""
    return text_frame(event, json.dumps(data, allow_nan=False), id=id)


def text_frame(event: str, text: str, *, id: int | str | None = None) -> bytes:
    """One event whose data is `text` as is (JSON already serialised, say): one `data` line per
    line of it, so any text survives (a reader gets its line ends back as "\\n")."""
    if _breaks_a_line(event):
        raise ValueError(f"an SSE event type cannot hold a line end: {event!r}")
    head = ""
    if id is not None:
        id = str(id)
        if _breaks_a_line(id) or "\0" in id:
            raise ValueError(f"an SSE id cannot hold a line end or NUL: {id!r}")
        head = f"id: {id}\n"
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    data = text.replace("\n", "\ndata: ")
    return f"{head}event: {event}\ndata: {data}\n\n".encode()


def _breaks_a_line(text: str) -> bool:
    return "\n" in text or "\r" in text
