"""The operator event feed and the stream it serves: fan-out in seq order, bounded buffers that
cut a slow subscriber off without slowing anyone, the replay/live boundary, reset, closing and
heartbeats. Real SQLite (queries inline) on trio's mock clock."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from actors.events import CommitSignal, EventFeed, Subscription, render
from pager.domain.errors import PagerError
from pager.store import close_database, immediate_transaction, open_database
from pager.store import events as ev
from pager.web.routes_events import parse_last_event_id, stream, subscribed_stream

NOW = 1_800_000_000.0


class Log:
    """The writer's side: commits events and tells the signal, as the checkpoint does."""

    def __init__(self, conn: sqlite3.Connection, commits: CommitSignal) -> None:
        self.conn = conn
        self.commits = commits
        self.count = 0

    def commit(self, n: int = 1) -> None:
        with immediate_transaction(self.conn):
            for _ in range(n):
                self.count += 1
                ev.record_event(self.conn, NOW, "message.queued", {"n": self.count})
        self.commits.notify()


@pytest.fixture
def database(tmp_path: Path) -> Iterator[tuple[Path, sqlite3.Connection]]:
    path = tmp_path / "pager.db"
    conn = open_database(path)
    try:
        yield path, conn
    finally:
        close_database(conn)


@asynccontextmanager
async def running_feed(
    database: tuple[Path, sqlite3.Connection], *, buffer: int = 1024, page: int = 512
) -> AsyncIterator[tuple[EventFeed, Log]]:
    path, conn = database
    commits = CommitSignal()
    feed = EventFeed(
        partial(ev.open_event_log, path), commits, buffer=buffer, inline=True, page=page
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(feed.run)
        yield feed, Log(conn, commits)
        nursery.cancel_scope.cancel()


def seqs(frames: list[tuple[int, bytes]]) -> list[int]:
    return [seq for seq, _ in frames]


def parse(chunks: list[bytes]) -> list[tuple[str | None, str | None, str]]:
    """SSE frames as (id, event, data); a comment line is (None, None, comment)."""
    found: list[tuple[str | None, str | None, str]] = []
    for block in b"".join(chunks).decode().split("\n\n"):
        if not block:
            continue
        fields: dict[str, str] = {}
        for line in block.split("\n"):
            if line.startswith(":"):
                found.append((None, None, line))
            else:
                name, _, value = line.partition(": ")
                fields[name] = value
        if fields:
            found.append((fields.get("id"), fields.get("event"), fields.get("data", "")))
    return found


def event_ids(chunks: list[bytes]) -> list[int]:
    """The seqs of the event frames (not ready/reset/overflow/closing) in order."""
    return [
        int(frame_id)
        for frame_id, event, _ in parse(chunks)
        if frame_id is not None and event is not None and "." in event
    ]


async def settle() -> None:
    """Let the feed read and hand out what was committed (virtual time: the mock clock)."""
    await trio.sleep(1)


# -- the feed ----------------------------------------------------------------------------------


async def test_feed_fans_out_in_seq_order(
    database: tuple[Path, sqlite3.Connection], autojump_clock: trio.testing.MockClock
) -> None:
    """Every subscriber gets every event committed after it subscribed, once, in seq order,
    across commits of one and of many events."""
    async with running_feed(database) as (feed, log):
        first, second = await feed.subscribe(), await feed.subscribe()
        log.commit()
        log.commit(5)
        await settle()
        log.commit(3)
        await settle()
        expected = list(range(1, 10))
        for sub in (first, second):
            got: list[int] = []
            while len(got) < len(expected):
                got += seqs(await sub.next_batch())
            assert got == expected


async def test_feed_frame_is_the_event_as_json(
    database: tuple[Path, sqlite3.Connection], autojump_clock: trio.testing.MockClock
) -> None:
    """A frame carries id, event type and data {seq, at, type, data}, the data as stored."""
    async with running_feed(database) as (feed, log):
        sub = await feed.subscribe()
        log.commit()
        await settle()
        [(_seq, frame)] = await sub.next_batch()
    [(frame_id, event, data)] = parse([frame])
    assert (frame_id, event) == ("1", "message.queued")
    assert json.loads(data) == {
        "seq": 1,
        "at": "2027-01-15T08:00:00.000+00:00",
        "type": "message.queued",
        "data": {"n": 1},
    }
    assert frame == render(1, "2027-01-15T08:00:00.000+00:00", "message.queued", '{"n": 1}')


async def test_feed_slow_subscriber_is_cut_off_while_fast_one_keeps_up(
    database: tuple[Path, sqlite3.Connection], autojump_clock: trio.testing.MockClock
) -> None:
    """A subscriber that never reads is cut off (`overflow`) once its buffer is full, without
    holding up the feed: a reading subscriber gets every event, and the feed reaches the end."""
    async with running_feed(database, buffer=5) as (feed, log):
        slow, fast = await feed.subscribe(), await feed.subscribe()
        received: list[int] = []
        for _ in range(20):
            log.commit()
            await settle()
            received += seqs(await fast.next_batch())
        assert received == list(range(1, 21))
        assert slow.closed == "overflow"
        assert fast.closed is None
        assert feed.subscribers == 1
        assert feed.position == 20
        # What the slow one had buffered before the cut is still its to read, in order.
        assert seqs(await slow.next_batch()) == [1, 2, 3, 4, 5]
        assert await slow.next_batch() == []


async def test_feed_without_subscribers_reads_nothing(
    database: tuple[Path, sqlite3.Connection],
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With nobody listening, commits cost the feed no query; the next subscriber starts at
    the newest seq (live only), and gets what follows."""
    async with running_feed(database) as (feed, log):
        queries: list[str] = []
        for name in ("latest_seq", "oldest_seq", "rows_after"):
            read = getattr(ev.EventLogReader, name)

            def counted(self: ev.EventLogReader, *args: Any, _read: Any = read, _name: str = name
                        ) -> Any:  # fmt: skip
                queries.append(_name)
                return _read(self, *args)

            monkeypatch.setattr(ev.EventLogReader, name, counted)
        for _ in range(10):
            log.commit()
            await settle()
        assert queries == []
        sub = await feed.subscribe()
        assert sub.start == 10
        log.commit()
        await settle()
        assert seqs(await sub.next_batch()) == [11]


async def test_feed_subscription_after_unsubscribe_of_all_starts_at_now(
    database: tuple[Path, sqlite3.Connection], autojump_clock: trio.testing.MockClock
) -> None:
    """After the last subscriber leaves, events pass unread; a new one still starts at now."""
    async with running_feed(database) as (feed, log):
        first = await feed.subscribe()
        log.commit()
        await settle()
        feed.unsubscribe(first)
        log.commit(3)
        await settle()
        second = await feed.subscribe()
        assert second.start == 4
        log.commit()
        await settle()
        assert seqs(await second.next_batch()) == [5]


async def test_feed_close_all_ends_every_subscription(
    database: tuple[Path, sqlite3.Connection], autojump_clock: trio.testing.MockClock
) -> None:
    """At shutdown every subscription is closed (`closing`), and later ones start closed."""
    async with running_feed(database) as (feed, _log):
        sub = await feed.subscribe()
        feed.close_all("closing")
        assert await sub.next_batch() == []
        assert sub.closed == "closing"
        late = await feed.subscribe()
        assert late.closed == "closing"


async def test_feed_shutdown_trigger_closes_streams(
    database: tuple[Path, sqlite3.Connection], autojump_clock: trio.testing.MockClock
) -> None:
    """The feed's shutdown trigger closes its subscriptions as soon as it fires."""
    path, _conn = database
    commits = CommitSignal()
    feed = EventFeed(partial(ev.open_event_log, path), commits, inline=True)
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        await nursery.start(partial(feed.run, shutdown=stop.wait))
        sub = await feed.subscribe()
        stop.set()
        with trio.fail_after(1):
            assert await sub.next_batch() == []
        assert sub.closed == "closing"
        nursery.cancel_scope.cancel()


async def test_feed_paces_batches_by_subscriber_count(
    database: tuple[Path, sqlite3.Connection], autojump_clock: trio.testing.MockClock
) -> None:
    """An event after a quiet spell goes out at once; events committed while the feed waits
    out its pace (per subscriber) go out together, in one batch."""
    async with running_feed(database) as (feed, log):
        subs = [await feed.subscribe() for _ in range(10)]
        log.commit()
        start = trio.current_time()
        assert seqs(await subs[0].next_batch()) == [1]
        assert trio.current_time() == start  # at once
        for _ in range(3):
            log.commit()
            await trio.testing.wait_all_tasks_blocked()  # the feed may run, time stands still
        assert seqs(await subs[0].next_batch()) == [2, 3, 4]
        assert trio.current_time() - start == pytest.approx(10 * 0.001)


# -- the stream --------------------------------------------------------------------------------


async def collect(chunks: AsyncIterator[bytes], until: int, *, on_chunk: Any = None) -> list[bytes]:
    """Read chunks until an event frame with seq `until` (or a final frame) arrived."""
    got: list[bytes] = []
    async for chunk in chunks:
        got.append(chunk)
        if on_chunk is not None:
            await on_chunk(len(got))
        ids = event_ids(got)
        kinds = [event for _, event, _ in parse(got)]
        if (ids and ids[-1] >= until) or {"overflow", "closing"} & set(kinds):
            break
    return got


async def open_stream(
    feed: EventFeed, after: int | None, heartbeat: float = 15.0
) -> tuple[Subscription, AsyncIterator[bytes]]:
    sub = await feed.subscribe()
    return sub, stream(feed, sub, after, heartbeat)


async def test_subscribed_stream_holds_its_subscription_until_closed(
    database: tuple[Path, sqlite3.Connection], autojump_clock: trio.testing.MockClock
) -> None:
    """The route's body subscribes when it is first read and lets go when it is closed, as
    when its client hangs up."""
    async with running_feed(database) as (feed, log):
        log.commit(2)
        await settle()
        body = subscribed_stream(feed, 1, 15.0)
        first = await body.__anext__()
        assert feed.subscribers == 1
        assert event_ids([first]) == [2]
        await body.aclose()
        assert feed.subscribers == 0


async def test_stream_replays_then_continues_live_without_gap_or_duplicate(
    database: tuple[Path, sqlite3.Connection], autojump_clock: trio.testing.MockClock
) -> None:
    """Resuming after event 3 of 10 replays 4..10 (in pages), then `ready`, then live events,
    even when events are committed while the replay is in progress: each exactly once."""
    async with running_feed(database, page=2) as (feed, log):
        log.commit(10)
        _sub, chunks = await open_stream(feed, after=3)

        async def commit_during_replay(n: int) -> None:
            if n <= 3:  # while the first pages are being sent
                log.commit(2)
                await settle()

        got = await collect(chunks, until=16, on_chunk=commit_during_replay)
        await chunks.aclose()  # type: ignore[attr-defined]
    assert event_ids(got) == list(range(4, 17))
    frames = parse(got)
    ready = [i for i, (_, event, _) in enumerate(frames) if event == "ready"]
    assert len(ready) == 1
    assert frames[ready[0]][0] == "10"  # the ready frame's id: replayed up to 10
    assert [f[0] for f in frames[: ready[0]]] == [str(n) for n in range(4, 11)]


async def test_stream_from_zero_replays_every_retained_event(
    database: tuple[Path, sqlite3.Connection], autojump_clock: trio.testing.MockClock
) -> None:
    """`Last-Event-ID: 0` replays from the oldest retained event, without a reset."""
    async with running_feed(database) as (feed, log):
        log.commit(5)
        _sub, chunks = await open_stream(feed, after=0)
        got = await collect(chunks, until=5)
        await chunks.aclose()  # type: ignore[attr-defined]
    assert event_ids(got) == [1, 2, 3, 4, 5]
    assert "reset" not in [event for _, event, _ in parse(got)]


async def test_stream_live_only_starts_with_ready(
    database: tuple[Path, sqlite3.Connection], autojump_clock: trio.testing.MockClock
) -> None:
    """Without Last-Event-ID the stream says `ready` with the newest seq, then only events
    committed after it."""
    async with running_feed(database) as (feed, log):
        log.commit(3)
        _sub, chunks = await open_stream(feed, after=None)
        first = await chunks.__anext__()
        assert parse([first]) == [("3", "ready", '{"seq": 3}')]
        log.commit()
        got = await collect(chunks, until=4)
        await chunks.aclose()  # type: ignore[attr-defined]
    assert event_ids(got) == [4]


async def test_stream_after_pruned_events_sends_reset_first(
    database: tuple[Path, sqlite3.Connection], autojump_clock: trio.testing.MockClock
) -> None:
    """Resuming from an event older than the oldest retained one sends `reset` first, then
    every retained event."""
    async with running_feed(database) as (feed, log):
        log.commit(8)
        with immediate_transaction(log.conn):
            log.conn.execute("DELETE FROM events WHERE seq <= 5")
        _sub, chunks = await open_stream(feed, after=2)
        got = await collect(chunks, until=8)
        await chunks.aclose()  # type: ignore[attr-defined]
    frames = parse(got)
    assert frames[0][1] == "reset"
    reset = json.loads(frames[0][2])
    assert (reset["reason"], reset["last_event_id"], reset["oldest"]) == ("pruned", 2, 6)
    assert event_ids(got) == [6, 7, 8]


async def test_stream_after_last_retained_needs_no_reset(
    database: tuple[Path, sqlite3.Connection], autojump_clock: trio.testing.MockClock
) -> None:
    """Resuming from the event just before the oldest retained one is no gap: no reset."""
    async with running_feed(database) as (feed, log):
        log.commit(8)
        with immediate_transaction(log.conn):
            log.conn.execute("DELETE FROM events WHERE seq <= 5")
        _sub, chunks = await open_stream(feed, after=5)
        got = await collect(chunks, until=8)
        await chunks.aclose()  # type: ignore[attr-defined]
    assert "reset" not in [event for _, event, _ in parse(got)]
    assert event_ids(got) == [6, 7, 8]


async def test_stream_tells_overflow_with_last_seq(
    database: tuple[Path, sqlite3.Connection], autojump_clock: trio.testing.MockClock
) -> None:
    """A stream whose buffer overflowed sends what it had, then `overflow` naming the last
    seq it sent and how to resume, then ends."""
    async with running_feed(database, buffer=3) as (feed, log):
        _sub, chunks = await open_stream(feed, after=None)
        assert parse([await chunks.__anext__()])[0][1] == "ready"
        for _ in range(5):  # nobody reads the stream meanwhile
            log.commit()
            await settle()
        got = [chunk async for chunk in chunks]
    frames = parse(got)
    assert event_ids(got) == [1, 2, 3]
    assert frames[-1][1] == "overflow"
    notice = json.loads(frames[-1][2])
    assert (notice["last_event_id"], notice["buffer"]) == (3, 3)
    assert "Last-Event-ID: 3" in notice["message"]


async def test_stream_ends_with_closing_at_shutdown(
    database: tuple[Path, sqlite3.Connection], autojump_clock: trio.testing.MockClock
) -> None:
    """When the feed closes (broker shutdown) the stream sends `closing` and ends at once."""
    async with running_feed(database) as (feed, log):
        _sub, chunks = await open_stream(feed, after=None)
        await chunks.__anext__()
        log.commit()
        await settle()
        feed.close_all("closing")
        with trio.fail_after(1):
            got = [chunk async for chunk in chunks]
    frames = parse(got)
    assert [event for _, event, _ in frames] == ["message.queued", "closing"]
    assert json.loads(frames[-1][2])["last_event_id"] == 1


async def test_stream_opened_during_shutdown_only_says_closing(
    database: tuple[Path, sqlite3.Connection], autojump_clock: trio.testing.MockClock
) -> None:
    """A stream opened after the broker began stopping sends `closing` (naming the id it was
    asked to resume from) and nothing else: no `ready` that would claim events it never sent."""
    async with running_feed(database) as (feed, log):
        log.commit(5)
        feed.close_all("closing")
        _sub, chunks = await open_stream(feed, after=2)
        got = [chunk async for chunk in chunks]
    [(frame_id, event, data)] = parse(got)
    assert (frame_id, event) == (None, "closing")
    assert json.loads(data)["last_event_id"] == 2


async def test_stream_sends_heartbeat_when_idle(
    database: tuple[Path, sqlite3.Connection], autojump_clock: trio.testing.MockClock
) -> None:
    """An idle stream sends a comment line every heartbeat interval."""
    async with running_feed(database) as (feed, _log):
        _sub, chunks = await open_stream(feed, after=None, heartbeat=15.0)
        await chunks.__anext__()
        start = trio.current_time()
        assert await chunks.__anext__() == b": heartbeat\n\n"
        assert trio.current_time() - start == pytest.approx(15.0)
        await chunks.aclose()  # type: ignore[attr-defined]
        assert feed.subscribers == 0


# -- Last-Event-ID -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "query", "expected"),
    [
        (None, None, None),
        ("0", None, 0),
        (" 42 ", None, 42),
        (None, "7", 7),
        ("5", "9", 5),  # the header wins
        ("9223372036854775807", None, 2**63 - 1),
    ],
)
def test_parse_last_event_id_accepts(
    header: str | None, query: str | None, expected: int | None
) -> None:
    """Whole numbers from the header, else the query parameter; none means live only."""
    assert parse_last_event_id(header, query) == expected


@pytest.mark.parametrize(
    ("header", "query", "field"),
    [
        ("", None, "Last-Event-ID"),
        ("-1", None, "Last-Event-ID"),
        ("abc", None, "Last-Event-ID"),
        ("1.5", None, "Last-Event-ID"),
        ("+3", None, "Last-Event-ID"),
        ("١٢", None, "Last-Event-ID"),  # digits, but not ASCII
        ("9" * 20, None, "Last-Event-ID"),
        ("9223372036854775808", None, "Last-Event-ID"),
        (None, "x", "last_event_id"),
    ],
)
def test_parse_last_event_id_refuses(header: str | None, query: str | None, field: str) -> None:
    """Anything but a non-negative whole number in range is validation_failed naming it."""
    with pytest.raises(PagerError) as caught:
        parse_last_event_id(header, query)
    assert caught.value.code.value == "validation_failed"
    assert caught.value.details["field"] == field


async def test_feed_rides_out_a_busy_store_and_reads_on(
    database: tuple[Path, sqlite3.Connection],
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A read the store refuses (busy past its timeout) is tried again after a pause: the feed
    does not crash, and the subscriber gets every event, in order."""
    rows_after = ev.event_rows_after
    refusals = [2]

    def busy_twice(conn: Any, seq: int, limit: int) -> Any:
        if refusals[0]:
            refusals[0] -= 1
            busy = sqlite3.OperationalError("database is locked")
            busy.sqlite_errorcode = sqlite3.SQLITE_BUSY
            raise busy  # the reader raises it as `StoreBusy`
        return rows_after(conn, seq, limit)

    monkeypatch.setattr(ev, "event_rows_after", busy_twice)
    async with running_feed(database) as (feed, log):
        sub = await feed.subscribe()
        log.commit(3)
        got: list[int] = []
        with trio.fail_after(60):
            while len(got) < 3:
                got += seqs(await sub.next_batch())
        assert got == [1, 2, 3]
        assert refusals == [0]
