"""`GET /v1/events` on a real broker: resume with Last-Event-ID, a stalled client cut off while
another keeps receiving, streams ended by `pager exit`, refused requests."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import httpx2
import pytest
import trio

from tests.e2e.conftest import (
    BOTH,
    FAST_WINDOWS,
    NO_SEND_LIMITS,
    Broker,
    mcp_session,
    start_broker,
    structured,
)
from tests.launch.conftest import PagerHome

#: The stalled-client test's buffer: a handful of events, so it is cut off soon.
SMALL_BUFFER = 8


@attrs.define
class Frame:
    """One server-sent frame as sent: an event or control frame, or a comment line (`comment`).
    This test reads the raw framing (heartbeat comments included), which the clients' parser
    (pager/sse.py) drops by design."""

    id: str | None
    event: str | None
    data: str
    comment: str | None = None

    def json(self) -> dict[str, Any]:
        value: dict[str, Any] = json.loads(self.data)
        return value


@attrs.define
class FrameParser:
    """The lines of a server-sent event stream in, its frames out."""

    fields: dict[str, str] = attrs.field(factory=dict)

    def feed(self, line: str) -> Frame | None:
        """The frame `line` completes (a comment line is one of its own), if any."""
        if line.startswith(":"):
            return Frame(None, None, "", comment=line)
        if line:
            name, _, value = line.partition(": ")
            self.fields[name] = value
            return None
        fields, self.fields = self.fields, {}
        if not fields:
            return None
        return Frame(fields.get("id"), fields.get("event"), fields.get("data", ""))


@pytest.fixture
def small_buffer_broker(tmp_path: Path, store_env: dict[str, str]) -> Iterator[Broker]:
    """A broker whose event streams hold 8 events and beat every 200 ms."""
    home = PagerHome(tmp_path / "home")
    yield start_broker(
        home,
        tmp_path / "repo",
        **FAST_WINDOWS,
        **NO_SEND_LIMITS,
        PAGER_LIMIT_EVENT_BUFFER=str(SMALL_BUFFER),
        PAGER_WINDOW_EVENT_HEARTBEAT="200ms",
        **store_env,
    )
    home.kill_all()


@attrs.define
class Reader:
    """One SSE client (httpx2) collecting frames; `wait_for` blocks until a condition holds."""

    frames: list[Frame] = attrs.field(factory=list)
    ended: bool = False
    _changed: trio.Event = attrs.field(factory=trio.Event)

    def add(self, frame: Frame) -> None:
        self.frames.append(frame)
        self._changed.set()
        self._changed = trio.Event()

    async def wait_for(self, predicate: Any) -> None:
        while not predicate(self):
            await self._changed.wait()

    def events(self) -> list[Frame]:
        """Event frames (those with a dotted type), in order."""
        return [f for f in self.frames if f.event is not None and "." in f.event]

    def seqs(self) -> list[int]:
        return [int(f.id or 0) for f in self.events()]

    def kinds(self) -> list[str | None]:
        return [f.event for f in self.frames]


async def read_frames(lines: AsyncIterator[str], reader: Reader) -> None:
    parser = FrameParser()
    async for line in lines:
        frame = parser.feed(line)
        if frame is not None:
            reader.add(frame)
    reader.ended = True
    reader.add(Frame(None, None, "", comment="<end>"))


@asynccontextmanager
async def event_stream(
    broker: Broker, *, last_event_id: int | None = None
) -> AsyncIterator[Reader]:
    """An open `/v1/events` stream read in the background until the block ends."""
    headers = {"Authorization": f"Bearer {broker.secret}"}
    if last_event_id is not None:
        headers["Last-Event-ID"] = str(last_event_id)
    reader = Reader()
    async with (
        httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=None)) as http,
        http.stream("GET", f"{broker.url}/v1/events", headers=headers) as response,
        trio.open_nursery() as nursery,
    ):
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        nursery.start_soon(read_frames, response.aiter_lines(), reader)
        await reader.wait_for(lambda r: "ready" in r.kinds())
        yield reader
        nursery.cancel_scope.cancel()


async def logged_seqs(broker: Broker, after: int) -> list[int]:
    """The seqs of the logged events after `after`: the whole log, replayed from its start on
    a stream of its own, which must end at the snapshot's latest seq."""
    seqs = [int(event["seq"]) for event in await broker.events()]
    assert (seqs[-1] if seqs else 0) == (await broker.snapshot())["seq"]
    return [seq for seq in seqs if seq > after]


@pytest.mark.stores(*BOTH)  # the seq order across commits: SPEC §13
async def test_events_resume_with_last_event_id_misses_nothing(broker: Broker) -> None:
    """A client reads some events, disconnects; events happen; it reconnects with the last
    seq it saw and gets every missed event exactly once and in order, then live ones."""
    with trio.fail_after(60):
        async with event_stream(broker) as first:
            alice = await broker.register("alice")
            bob = await broker.register("bob")
            await first.wait_for(lambda r: len(r.events()) >= 4)
        seen = first.seqs()[-1]
        assert first.seqs() == (await logged_seqs(broker, 0))[: len(first.seqs())]

        # Missed while disconnected: a send, a fetch, an ack and a detach.
        async with (
            mcp_session(broker.url, alice["token"]) as a,
            mcp_session(broker.url, bob["token"]) as b,
        ):
            structured(await a.call_tool("send", {"to": "bob", "body": "while you were away"}))
            [claim] = structured(await b.call_tool("fetch", {}))["claims"]
            structured(await b.call_tool("ack", {"tokens": [claim["token"]]}))
        status, _ = await broker.post("/v1/sessions/current/detach", {}, token=bob["token"])
        assert status == 200
        missed = await logged_seqs(broker, seen)

        async with event_stream(broker, last_event_id=seen) as again:
            assert again.seqs() == missed  # replayed before `ready`, each once, in order
            ready = next(f for f in again.frames if f.event == "ready")
            assert ready.id == str(missed[-1])
            await broker.register("carol")  # live from here
            await again.wait_for(lambda r: len(r.events()) >= len(missed) + 2)
        assert again.seqs() == await logged_seqs(broker, seen)

    kinds = [f.event for f in again.events()]
    assert kinds[: len(missed)] == [
        "message.queued",
        "message.claimed",
        "message.acknowledged",
        "agent.detached",
    ]
    detached = again.events()[3].json()
    assert detached["type"] == "agent.detached"
    assert detached["data"]["agent_id"] == bob["agent_id"]
    assert detached["data"]["reason"] == "detached"
    assert kinds[len(missed) :] == ["agent.created", "agent.attached"]


@pytest.mark.stores(*BOTH)
async def test_events_from_zero_replays_every_event(broker: Broker) -> None:
    """`Last-Event-ID: 0` (here as `?last_event_id=0`) replays the whole retained log."""
    await broker.register("alice")
    headers = {"Authorization": f"Bearer {broker.secret}"}
    reader = Reader()
    with trio.fail_after(30):
        async with (
            httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=None)) as http,
            http.stream(
                "GET", f"{broker.url}/v1/events?last_event_id=0", headers=headers
            ) as response,
            trio.open_nursery() as nursery,
        ):
            nursery.start_soon(read_frames, response.aiter_lines(), reader)
            await reader.wait_for(lambda r: "ready" in r.kinds())
            nursery.cancel_scope.cancel()
    assert reader.seqs() == await logged_seqs(broker, 0) == [1, 2]
    assert [f.event for f in reader.events()] == ["agent.created", "agent.attached"]


def _stalled_client(broker: Broker) -> socket.socket:
    """A raw client with a tiny receive buffer that sends the request and then never reads."""
    host, port = broker.url.removeprefix("http://").split(":")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((host, int(port)))
    sock.sendall(
        f"GET /v1/events HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Authorization: Bearer {broker.secret}\r\n\r\n".encode()
    )
    return sock


def _read_all(sock: socket.socket) -> bytes:
    """The response body (chunked, decoded) up to its last chunk, read at last."""
    sock.settimeout(30)
    data = b""
    while not data.endswith(b"\r\n0\r\n\r\n"):
        chunk = sock.recv(65536)
        assert chunk, "the connection closed before the response ended"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    assert b" 200 " in head.split(b"\r\n")[0]
    decoded = b""
    while body:
        size_line, _, rest = body.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            break
        decoded += rest[:size]
        body = rest[size + 2 :]
    return decoded


async def test_events_stalled_client_is_cut_off_while_another_keeps_receiving(
    small_buffer_broker: Broker,
) -> None:
    """A client that never reads is cut off once it is 8 events behind (it finds an
    `overflow` notice when it reads at last); a reading client gets every event meanwhile."""
    broker = small_buffer_broker
    sender = await broker.register("sender")
    await broker.register("inbox")
    with trio.fail_after(120):
        stalled = _stalled_client(broker)
        try:
            async with event_stream(broker) as fast:
                start = int(next(f for f in fast.frames if f.event == "ready").id or 0)
                async with mcp_session(broker.url, sender["token"]) as client:

                    async def send(n: int) -> None:
                        for i in range(n):
                            await client.call_tool("send", {"to": "inbox", "body": f"m{i}"})

                    # Far more than the OS socket buffers and the 8-event buffer hold.
                    async with trio.open_nursery() as nursery:
                        for _ in range(4):
                            nursery.start_soon(send, 100)
                total = await logged_seqs(broker, start)
                assert len(total) >= 400
                await fast.wait_for(lambda r: len(r.events()) >= len(total))
                assert fast.seqs() == total
                assert "overflow" not in fast.kinds()
            received = await trio.to_thread.run_sync(_read_all, stalled)
        finally:
            stalled.close()
    frames = [block for block in received.decode().split("\n\n") if block]
    last = frames[-1]
    assert last.startswith("event: overflow"), last
    notice = json.loads(last.partition("data: ")[2])
    assert notice["buffer"] == SMALL_BUFFER
    events = [b for b in frames if b.startswith("id: ") and "\nevent: message." in b]
    got = [int(block.split("\n")[0].removeprefix("id: ")) for block in events]
    # What it did get is the log's first events after it connected, without a gap.
    assert got == total[: len(got)]
    assert notice["last_event_id"] == got[-1]
    assert len(got) < len(total)


async def test_events_idle_stream_gets_heartbeats(small_buffer_broker: Broker) -> None:
    """An idle stream gets a comment line at the configured heartbeat (200 ms here)."""
    with trio.fail_after(30):
        async with event_stream(small_buffer_broker) as reader:
            await reader.wait_for(lambda r: sum(f.comment == ": heartbeat" for f in r.frames) >= 2)


async def test_events_streams_end_promptly_on_exit(broker: Broker) -> None:
    """`pager exit` ends every open stream with `closing` and a complete response (not cut at
    Hypercorn's graceful bound), and the broker stops."""
    with trio.fail_after(60):
        async with (
            event_stream(broker) as one,
            event_stream(broker) as two,
            event_stream(broker, last_event_id=0) as three,
        ):
            readers = (one, two, three)
            exited: list[Any] = []

            async def stop() -> None:
                exited.append(await trio.to_thread.run_sync(broker.home.run, "exit"))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(stop)
                for reader in readers:
                    await reader.wait_for(lambda r: r.ended)
    assert exited[0].returncode == 0, exited[0].stderr
    for reader in readers:
        # `closing`, then the response's own end (`ended` is set only when the chunked body
        # completed): a stream Hypercorn had to cut at its graceful bound would end without
        # the final chunk, and reading it would fail.
        assert reader.ended
        closing, end = reader.frames[-2:]
        assert closing.event == "closing"
        assert closing.json()["reason"] == "broker shutting down"
        assert end.comment == "<end>"
    assert broker.home.broker_pids() == []


@pytest.mark.parametrize(
    ("headers", "query", "status", "field"),
    [
        ({"Last-Event-ID": "abc"}, "", 400, "Last-Event-ID"),
        ({"Last-Event-ID": "-1"}, "", 400, "Last-Event-ID"),
        ({"Last-Event-ID": "1" * 200}, "", 400, "Last-Event-ID"),
        ({}, "?last_event_id=x", 400, "last_event_id"),
        ({"Last-Event-ID": "999999"}, "", 400, "Last-Event-ID"),  # no such event: a reset log
    ],
)
async def test_events_bad_last_event_id_is_400(
    broker: Broker, headers: dict[str, str], query: str, status: int, field: str
) -> None:
    """A malformed or unknown Last-Event-ID is validation_failed naming it."""
    async with httpx2.AsyncClient(timeout=10) as http:
        response = await http.get(
            f"{broker.url}/v1/events{query}",
            headers={"Authorization": f"Bearer {broker.secret}", **headers},
        )
    assert response.status_code == status
    error = response.json()["error"]
    assert error["code"] == "validation_failed"
    assert error["field"] == field


@pytest.mark.parametrize("token", [None, "wrong", "pst_not-the-secret"])
async def test_events_without_the_secret_is_401(broker: Broker, token: str | None) -> None:
    """No credential, or not the local secret (a session token is not enough): 401."""
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(timeout=10) as http:
        response = await http.get(f"{broker.url}/v1/events", headers=headers)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthenticated"
