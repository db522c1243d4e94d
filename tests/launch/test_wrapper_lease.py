"""The wrapper's lease holder (`hold_lease`) against a stand-in broker on 127.0.0.1."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from functools import partial

import pytest
import trio
import trio.testing

from pager.launch.wrapper import hold_lease

Handler = Callable[[trio.SocketStream], Awaitable[None]]


async def _serve(nursery: trio.Nursery, handler: Handler) -> str:
    listeners = await nursery.start(partial(trio.serve_tcp, handler, 0, host="127.0.0.1"))
    port = listeners[0].socket.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def at(*urls: str | None) -> Callable[[], Awaitable[str | None]]:
    """A locator answering `urls` in turn, then the last one for ever."""
    answers = list(urls)

    async def locate() -> str | None:
        return answers.pop(0) if len(answers) > 1 else answers[0]

    return locate


async def test_hold_lease_stops_when_the_broker_refuses_the_session(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A 401 (`expired`) ends the lease holder at once with a notice naming the reason,
    instead of reconnecting forever."""
    requests: list[bytes] = []

    async def refuse(stream: trio.SocketStream) -> None:
        requests.append(await stream.receive_some(65536))
        body = json.dumps(
            {"error": {"code": "expired", "message": "this session's lease lapsed"}}
        ).encode()
        head = f"HTTP/1.1 401 Unauthorized\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        await stream.send_all(head + body)
        await stream.aclose()

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            url = await _serve(nursery, refuse)
            await hold_lease("tok_test", at(url))
            nursery.cancel_scope.cancel()
    assert len(requests) == 1
    assert requests[0].startswith(b"GET /v1/sessions/current/events HTTP/1.1\r\n")
    assert b"Authorization: Bearer tok_test\r\n" in requests[0]
    err = capsys.readouterr().err
    assert "no longer holds this session (expired: this session's lease lapsed)" in err


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
        await stream.send_all(b'event: ended\ndata: {"message": "archived by the operator"}\n\n')
        await trio.sleep_forever()

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            url = await _serve(nursery, end)
            await hold_lease("tok_test", at(url))
            nursery.cancel_scope.cancel()
    assert "this session was ended: archived by the operator" in capsys.readouterr().err


async def test_hold_lease_sends_no_token_while_no_broker_is_verified(
    capsys: pytest.CaptureFixture[str], autojump_clock: trio.testing.MockClock
) -> None:
    """While the locator verifies no broker (the old one died; something else may hold its
    port) nothing is sent; once a broker proves itself elsewhere the stream goes there, and
    the user is told that the harness still has the old address."""
    requests: list[bytes] = []

    async def refuse(stream: trio.SocketStream) -> None:
        requests.append(await stream.receive_some(65536))
        await stream.send_all(b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 2\r\n\r\n{}")
        await stream.aclose()

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            url = await _serve(nursery, refuse)
            first = "http://127.0.0.1:9"  # the discard port: nothing listens
            await hold_lease("tok_test", at(first, None, None, url))
            nursery.cancel_scope.cancel()
    assert len(requests) == 1
    err = capsys.readouterr().err
    assert f"now listens at {url} (it was {first})" in err
