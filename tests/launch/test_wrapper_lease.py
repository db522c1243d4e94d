"""The lease holder (`hold_lease`) with the wrapper's notices against a stand-in broker on
127.0.0.1."""

from __future__ import annotations

import json
import socket
import struct

import pytest
import trio
import trio.testing

from pager.session_client import hold_lease
from tests.launch.session_fakes import FakeSession, serve

EXPIRED = json.dumps({"error": {"code": "expired", "message": "this session's lease lapsed"}})
ENDED = json.dumps({"error": {"code": "ended", "message": "taken over by carol"}})


def refusal(body: str) -> bytes:
    data = body.encode()
    return f"HTTP/1.1 401 Unauthorized\r\nContent-Length: {len(data)}\r\n\r\n".encode() + data


async def test_hold_lease_rejoins_when_its_token_is_refused_and_holds_the_new_one() -> None:
    """A 401 `expired` makes the session rejoin; the stream reconnects at once with the new
    token (here: and is then ended, which stops the holder)."""
    requests: list[bytes] = []

    async def broker(stream: trio.SocketStream) -> None:
        request = await stream.receive_some(65536)
        requests.append(request)
        if b"Bearer tok_old" in request:
            await stream.send_all(refusal(EXPIRED))
            await stream.aclose()
            return
        await stream.send_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n"
            b'event: ended\ndata: {"message": "archived by the operator"}\n\n'
        )
        await trio.sleep_forever()

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            session = FakeSession(await serve(nursery, broker), tokens=("tok_old", "tok_new"))
            await hold_lease(session)
            nursery.cancel_scope.cancel()
    assert session.rejoins == ["tok_old"]
    assert [b"Bearer tok_new" in r for r in requests] == [False, True]
    assert session.ended == "ended"


async def test_hold_lease_stops_when_the_session_cannot_rejoin(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A refused token that no rejoin can replace ends the holder with a notice naming the
    reason, instead of reconnecting forever."""
    requests: list[bytes] = []

    async def refuse(stream: trio.SocketStream) -> None:
        requests.append(await stream.receive_some(65536))
        await stream.send_all(refusal(EXPIRED))
        await stream.aclose()

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            session = FakeSession(await serve(nursery, refuse))
            await hold_lease(session)
            nursery.cancel_scope.cancel()
    assert len(requests) == 1
    assert requests[0].startswith(b"GET /v1/sessions/current/events HTTP/1.1\r\n")
    assert b"Authorization: Bearer tok_test\r\n" in requests[0]
    assert session.rejoins == ["tok_test"]
    err = capsys.readouterr().err
    assert "no longer holds this session (expired: this session's lease lapsed)" in err


async def test_hold_lease_does_not_rejoin_an_ended_session(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`ended` (a takeover, an archive) is final: no rejoin, the holder stops."""

    async def refuse(stream: trio.SocketStream) -> None:
        await stream.receive_some(65536)
        await stream.send_all(refusal(ENDED))
        await stream.aclose()

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            session = FakeSession(await serve(nursery, refuse), tokens=("tok_old", "tok_new"))
            await hold_lease(session)
            nursery.cancel_scope.cancel()
    assert session.rejoins == []
    assert "ended: taken over by carol" in capsys.readouterr().err


async def test_hold_lease_stops_when_the_session_is_ended(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """An `ended` event on the stream ends the lease holder with the broker's message."""

    async def end(stream: trio.SocketStream) -> None:
        await stream.receive_some(65536)
        await stream.send_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n"
            b'event: ready\ndata: {"session_id": "ses_1", "epoch": 1}\n\n'
        )
        await stream.send_all(
            b'event: ended\ndata: {"code": "ended", "message": "this session has ended (archived'
            b' by the operator); do not retry", "reason": "archived by the operator"}\n\n'
        )
        await trio.sleep_forever()

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await hold_lease(FakeSession(await serve(nursery, end)))
            nursery.cancel_scope.cancel()
    assert "the broker ended this session: archived by the operator" in capsys.readouterr().err


async def test_hold_lease_sends_no_token_while_no_broker_is_verified(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """While the session verifies no broker (the old one died; something else may hold its
    port) nothing is sent; once a broker proves itself elsewhere the stream goes there."""
    requests: list[bytes] = []

    async def refuse(stream: trio.SocketStream) -> None:
        requests.append(await stream.receive_some(65536))
        await stream.send_all(b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 2\r\n\r\n{}")
        await stream.aclose()

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            url = await serve(nursery, refuse)
            session = FakeSession("http://127.0.0.1:9", None, None, url)  # 9: nothing listens
            await hold_lease(session)
            nursery.cancel_scope.cancel()
    assert len(requests) == 1
    assert session.starts == 0  # the lease holder never starts a broker itself


async def test_hold_lease_leaves_the_end_to_the_calls_when_it_does_not_decide_it(
    autojump_clock: trio.testing.MockClock, capsys: pytest.CaptureFixture[str]
) -> None:
    """As `pager mcp` holds it: an `expired` stream whose rejoin fails does not end the
    session (the holder waits until a tool call registers again, then holds the new token's
    stream at once), nor does an `ended` event (a takeover leaves the token to a fresh agent:
    the holder reconnects); a refusal `ended` does."""
    requests: list[bytes] = []

    async def broker(stream: trio.SocketStream) -> None:
        request = await stream.receive_some(65536)
        requests.append(request)
        if b"Bearer tok_old" in request or len(requests) > 2:
            await stream.send_all(refusal(EXPIRED if b"Bearer tok_old" in request else ENDED))
            await stream.aclose()
            return
        await stream.send_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n"
            b'event: ended\ndata: {"reason": "taken over"}\n\n'
        )
        await trio.sleep_forever()

    async def register_again(session: FakeSession) -> None:
        await trio.testing.wait_all_tasks_blocked()  # the holder waits (no I/O is ready)
        assert (session.rejoins, session.ended) == (["tok_old"], None)
        session.token = "tok_new"  # what a tool call's registration does
        changed, session.changed = session.changed, trio.Event()
        changed.set()

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            session = FakeSession(await serve(nursery, broker), tokens=("tok_old",))
            nursery.start_soon(register_again, session)
            await hold_lease(session, decides_the_end=False)
            nursery.cancel_scope.cancel()
    assert [r.split(b"Bearer ")[1][:7] for r in requests] == [b"tok_old", b"tok_new", b"tok_new"]
    assert session.ended == "refused"
    err = capsys.readouterr().err
    assert "the broker ended this session: taken over" in err
    assert "no longer holds this session (ended: taken over by carol)" in err


def chunked(*pieces: bytes) -> list[bytes]:
    """Each piece as one chunk of a chunked body."""
    return [f"{len(piece):x}\r\n".encode() + piece + b"\r\n" for piece in pieces]


async def test_hold_lease_reads_a_chunked_crlf_stream_split_anywhere(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The stream as a real server may frame it (chunked, CRLF line ends, a heartbeat, the
    `ended` frame cut mid-word across chunks and sends) ends the holder with its reason."""
    body = (
        b'event: ready\r\ndata: {"session_id": "ses_1"}\r\n\r\n: heartbeat\r\n\r\n'
        b'event: ended\r\ndata: {"code": "ended", "reason": "archived by the operator"}\r\n\r\n'
    )
    cut = body.index(b"ended") + 2

    async def end(stream: trio.SocketStream) -> None:
        await stream.receive_some(65536)
        sends = [
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n",
            b"transfer-encoding: chunked\r\n\r\n",
            *chunked(body[:cut], body[cut:-3]),
            *chunked(body[-3:]),
        ]
        for data in b"".join(sends[:3]), *sends[3:]:
            await stream.send_all(data)
            await trio.sleep(0.01)  # paces the sends, so most arrive as reads of their own
        await trio.sleep_forever()

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            session = FakeSession(await serve(nursery, end))
            await hold_lease(session)
            nursery.cancel_scope.cancel()
    assert session.ended == "ended"
    assert "the broker ended this session: archived by the operator" in capsys.readouterr().err


async def test_hold_lease_reads_a_refusal_whose_head_comes_in_pieces(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A 401 whose status line is split across sends is still a refusal (no rejoin possible
    here: the holder stops, naming the reason)."""

    async def refuse(stream: trio.SocketStream) -> None:
        await stream.receive_some(65536)
        answer = refusal(ENDED)
        for piece in answer[:7], answer[7:30], answer[30:]:
            await stream.send_all(piece)
            await trio.sleep(0.01)  # paces the sends (every split is in tests/test_client.py)
        await trio.sleep_forever()  # keep-alive: the body's length says where it ends

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            session = FakeSession(await serve(nursery, refuse))
            await hold_lease(session)
            nursery.cancel_scope.cancel()
    assert session.ended == "refused"
    assert "ended: taken over by carol" in capsys.readouterr().err


async def test_hold_lease_reconnects_after_a_connection_reset(
    autojump_clock: trio.testing.MockClock, capsys: pytest.CaptureFixture[str]
) -> None:
    """A stream reset mid-way (the broker died with bytes unread) is a dropped stream: the
    holder reconnects, it does not crash the launch."""
    connections: list[int] = []

    async def reset_then_end(stream: trio.SocketStream) -> None:
        await stream.receive_some(65536)
        connections.append(1)
        await stream.send_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n")
        if len(connections) == 1:
            linger = struct.pack("ii", 1, 0)  # close with RST
            stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
            await stream.aclose()
            return
        await stream.send_all(b'event: ended\ndata: {"reason": "archived"}\n\n')
        await trio.sleep_forever()

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            session = FakeSession(await serve(nursery, reset_then_end))
            await hold_lease(session)
            nursery.cancel_scope.cancel()
    assert len(connections) == 2
    assert "the broker ended this session: archived" in capsys.readouterr().err
