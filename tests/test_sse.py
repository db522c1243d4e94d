"""`pager.sse`: the one event-stream parser (line ends, fields, ids, comments, a BOM, frames
split anywhere) and the one frame builder, checked against each other."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pager.sse import HEARTBEAT, SseEvent, SseParser, frame, text_frame

#: Two frames and a heartbeat, with `{eol}` for every line end.
STREAM = (
    ": heartbeat{eol}{eol}"
    'id: 7{eol}event: message.queued{eol}data: {{"a":{eol}data: 1}}{eol}{eol}'
    "data:plain é ✓{eol}{eol}"
)
EXPECTED = [
    SseEvent("7", "message.queued", '{"a":\n1}'),
    SseEvent(None, "message", "plain é ✓"),
]
LINE_ENDS = {"LF": "\n", "CRLF": "\r\n", "CR": "\r"}


def parse(*pieces: bytes) -> list[SseEvent]:
    parser = SseParser()
    return [event for piece in pieces for event in parser.feed(piece)]


@pytest.mark.parametrize("eol", LINE_ENDS.values(), ids=LINE_ENDS.keys())
def test_parser_reads_every_line_end_form(eol: str) -> None:
    """LF, CRLF and CR each end lines (and a blank line each event)."""
    assert parse(STREAM.format(eol=eol).encode()) == EXPECTED


def test_parser_reads_line_ends_mixed_in_one_stream() -> None:
    """The forms may change from line to line; CR CR is two line ends, not one."""
    raw = (
        b'id: 7\r\nevent: message.queued\rdata: {"a":\ndata: 1}\r\r'
        b": x\r\ndata:plain \xc3\xa9 \xe2\x9c\x93\n\r\n"
    )
    assert parse(raw) == EXPECTED


@pytest.mark.parametrize("eol", LINE_ENDS.values(), ids=LINE_ENDS.keys())
def test_parser_gives_the_same_events_for_a_stream_split_at_every_byte(eol: str) -> None:
    """A frame split between two feeds at any byte (inside a CRLF, inside a multi-byte
    character, inside the BOM), or fed a byte at a time, parses the same."""
    raw = b"\xef\xbb\xbf" + STREAM.format(eol=eol).encode()
    for cut in range(len(raw) + 1):
        assert parse(raw[:cut], raw[cut:]) == EXPECTED, cut
    assert parse(*(raw[i : i + 1] for i in range(len(raw)))) == EXPECTED


def test_parser_dispatches_an_event_as_soon_as_its_blank_line_arrives() -> None:
    """A trailing CR ends a line at once (the LF that may follow is skipped, not awaited)."""
    parser = SseParser()
    assert parser.feed(b"data: x\r") == []
    assert parser.feed(b"\r") == [SseEvent(None, "message", "x")]
    assert parser.feed(b"\ndata: y\r\n\r\n") == [SseEvent(None, "message", "y")]


def test_parser_joins_data_lines_with_newlines() -> None:
    """Each `data` line adds a line; one space after the colon is dropped, no more; a bare
    `data` (no colon) adds an empty line."""
    raw = b"data: one\ndata:  two\ndata\ndata:three\ndata: \n\n"
    assert [e.data for e in parse(raw)] == ["one\n two\n\nthree\n"]


def test_parser_keeps_ids_per_frame_and_the_last_one_for_resuming() -> None:
    """`SseEvent.id` is its frame's own; `last_id` keeps the last set (an id-only frame
    counts, one with a NUL does not, an empty one clears it)."""
    parser = SseParser()
    assert parser.last_id == ""
    events = parser.feed(b"id: 1\ndata: a\n\ndata: b\n\nid: 2\n\n")
    assert [(e.id, e.data) for e in events] == [("1", "a"), (None, "b")]
    assert parser.last_id == "2"
    assert parser.feed(b"id: 3\x00\ndata: c\n\n") == [SseEvent(None, "message", "c")]
    assert parser.last_id == "2"
    assert parser.feed(b"id\ndata: d\n\n") == [SseEvent("", "message", "d")]
    assert parser.last_id == ""


def test_parser_reads_retry_only_as_ascii_digits() -> None:
    """`retry` sets the reconnection time (ms) when it is all ASCII digits, else is ignored."""
    parser = SseParser()
    events = parser.feed("retry: 250\ndata: a\n\nretry: 1s\ndata: b\n\nretry: ²\n\n".encode())
    assert [e.retry for e in events] == [250, None]
    assert parser.retry == 250
    assert parser.feed(b"retry: 900\n\n") == []  # no data: no event, but the time counts
    assert parser.retry == 900


def test_parser_ignores_comments_unknown_fields_and_frames_without_data() -> None:
    """Comments (heartbeats), unknown fields and a frame with no `data` dispatch nothing;
    an event without `event` is a "message"."""
    raw = b": hi\n\n:\n\nevent: ready\n\nfoo: bar\nData: x\n\nevent: x\ndata: y\n\ndata: z\n\n"
    assert parse(raw) == [SseEvent(None, "x", "y"), SseEvent(None, "message", "z")]


def test_parser_skips_a_byte_order_mark_only_at_the_start() -> None:
    """A BOM at the very start is not part of the first line; one later is text."""
    assert parse(b"\xef\xbb\xbfdata: a\n\n") == [SseEvent(None, "message", "a")]
    assert parse("data: \ufeffa\n\n".encode()) == [SseEvent(None, "message", "\ufeffa")]
    # A second BOM makes the first line's field name "\ufeffdata": an unknown field.
    assert parse("\ufeff\ufeffdata: a\n\ndata: b\n\n".encode()) == [SseEvent(None, "message", "b")]
    parser = SseParser()
    assert parser.feed_line("\ufeffdata: a") is None
    assert parser.feed_line("") == SseEvent(None, "message", "a")


def test_parser_holds_back_an_unfinished_frame() -> None:
    """A frame without its blank line is never dispatched (the stream may have dropped)."""
    parser = SseParser()
    assert parser.feed(b"data: a\n") == []
    assert parser.feed(b"data: b") == []


def test_parser_replaces_invalid_utf8() -> None:
    """Bytes that are not UTF-8 become U+FFFD rather than failing the stream."""
    assert parse(b"data: \xff\n\n") == [SseEvent(None, "message", "\ufffd")]


def test_parser_lines_and_text_parse_like_bytes() -> None:
    """`feed_line` (a line without its end) and `feed_text` read as `feed` does."""
    text = STREAM.format(eol="\r\n")
    by_text = SseParser().feed_text(text)
    line_parser = SseParser()
    lines = text.replace("\r\n", "\n").split("\n")
    by_line = [e for line in lines if (e := line_parser.feed_line(line)) is not None]
    assert by_text == by_line == EXPECTED


def test_event_json_and_immutability() -> None:
    """`json()` is the data as JSON or None; events compare and hash by value, and are
    immutable."""
    event = SseEvent("1", "ready", '{"seq": 1}')
    assert event.json() == {"seq": 1}
    assert SseEvent(None, "message", "not json").json() is None
    assert SseEvent(None, "message", "").json() is None
    assert {event, SseEvent("1", "ready", '{"seq": 1}')} == {event}
    assert event != SseEvent("1", "ready", '{"seq": 1}', 5)
    with pytest.raises(AttributeError):
        event.data = "x"
    assert "ready" in repr(event)


def test_frame_bytes_are_the_broker_wire_format() -> None:
    """What the broker's streams have always sent: `id` first, then `event`, one `data`."""
    assert frame("ready", {"seq": 3}, id=3) == b'id: 3\nevent: ready\ndata: {"seq": 3}\n\n'
    assert frame("closing", {"reason": "x"}) == b'event: closing\ndata: {"reason": "x"}\n\n'
    assert parse(HEARTBEAT) == []


@pytest.mark.parametrize(
    "data",
    [
        {"seq": 1, "at": "2026-01-01T00:00:00Z"},
        {"message": "two\nlines", "reason": "ünïcödé ✓", "nested": [1, None, True]},
        "a string",
        [],
        None,
    ],
)
@pytest.mark.parametrize("id", [None, 0, 42, "ses_1"])
def test_frame_round_trips_through_the_parser(data: object, id: int | str | None) -> None:
    """Event type, JSON data and id come back as they were sent."""
    (event,) = parse(frame("agent.renamed", data, id=id))
    assert (event.event, json.loads(event.data)) == ("agent.renamed", data)
    assert event.id == (None if id is None else str(id))


def test_text_frame_splits_every_line_into_a_data_line() -> None:
    """Text with line ends (any form) becomes several `data` lines, read back joined with
    LF; an empty text is one empty `data` line, still an event."""
    raw = text_frame("x", "a\n\nb\r\nc\rd\n")
    assert raw == b"event: x\ndata: a\ndata: \ndata: b\ndata: c\ndata: d\ndata: \n\n"
    assert parse(raw) == [SseEvent(None, "x", "a\n\nb\nc\nd\n")]
    assert parse(text_frame("x", "")) == [SseEvent(None, "x", "")]


@given(text=st.text(), event=st.text().filter(lambda t: "\n" not in t and "\r" not in t))
def test_text_frame_round_trips_any_text(text: str, event: str) -> None:
    """Any text reads back as sent, line ends as LF (the format keeps no other)."""
    (parsed,) = parse(text_frame(event, text, id=5))
    expected = text.replace("\r\n", "\n").replace("\r", "\n")
    assert (parsed.event, parsed.data, parsed.id) == (event or "message", expected, "5")


@pytest.mark.parametrize(
    ("event", "id"), [("a\nb", None), ("a\rb", None), ("x", "1\n2"), ("x", "1\r"), ("x", "\0")]
)
def test_frame_refuses_an_event_type_or_id_that_would_break_the_frame(
    event: str, id: str | None
) -> None:
    """A line end in the event type or id (or a NUL in the id) would forge fields: refused."""
    with pytest.raises(ValueError, match="SSE"):
        frame(event, {}, id=id)


def test_sse_module_imports_without_trio_or_typing() -> None:
    """Stdlib only and cheap: importing it pulls in neither trio nor typing nor dataclasses."""
    code = (
        "import sys; import pager.sse; "
        "print(sorted({'trio', 'typing', 'dataclasses', 'attrs'} & set(sys.modules)))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == "[]"
